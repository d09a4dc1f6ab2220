//! Event recording through the harness: background writes, client-go's
//! de-duplication of identical events, the queue's length and its drops.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kube::api::{Api, ListParams};
use stratus_runtime::events::{EventRecorder, EventType, WRITER_CONCURRENCY};
use stratus_testing::{ApiServer, Fault, FaultAction, Verb};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_events_are_counted_not_repeated() {
    let server = ApiServer::start().await.unwrap();
    let recorder = EventRecorder::new(server.client(), "service-controller");
    let svc = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Service".into()),
        name: Some("web".into()),
        namespace: Some("default".into()),
        ..Default::default()
    };
    let failed = "Error syncing load balancer: invalid source range";
    for _ in 0..3 {
        recorder
            .record(&svc, EventType::Warning, "SyncLoadBalancerFailed", failed)
            .await;
        // Let each write land, as retries would be spaced by backoff.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    recorder
        .record(
            &svc,
            EventType::Normal,
            "EnsuredLoadBalancer",
            "Ensured load balancer",
        )
        .await;
    events_written(&server, 2, Duration::from_secs(5)).await;
    let events: Api<Event> = Api::namespaced(server.client(), "default");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let list = events.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(list.len(), 2, "{list:?}");
    let warning = list
        .iter()
        .find(|e| e.reason.as_deref() == Some("SyncLoadBalancerFailed"))
        .unwrap();
    assert_eq!(warning.count, Some(3));
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert_eq!(warning.message.as_deref(), Some(failed));
    assert_eq!(
        warning.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("service-controller")
    );
    assert!(warning.last_timestamp >= warning.first_timestamp);
}

fn pod(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(name.into()),
        namespace: Some("default".into()),
        ..Default::default()
    }
}

/// A recorder with room for `queue_length` events, on a server where each
/// event write takes `latency`.
fn slow_recorder(server: &ApiServer, latency: Duration, queue_length: usize) -> EventRecorder {
    server.inject(Fault::new(
        Some(Verb::Create),
        Some("events"),
        FaultAction::Latency(latency),
    ));
    EventRecorder::new(server.client(), "virtual-kubelet").with_queue_length(queue_length)
}

/// One `Created` event for each of `count` pods, letting the writer run
/// between them.
async fn record_created(recorder: &EventRecorder, count: usize) {
    for i in 0..count {
        recorder
            .record(&pod(&format!("p{i}")), EventType::Normal, "Created", "ok")
            .await;
        tokio::task::yield_now().await;
    }
}

/// Wait until the API holds exactly `count` events.
async fn events_written(server: &ApiServer, count: usize, limit: Duration) {
    let events: Api<Event> = Api::namespaced(server.client(), "default");
    stratus_testing::eventually("the events written", limit, || async {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len()
            == count
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_drops_and_counts_events() {
    let server = ApiServer::start().await.unwrap();
    // Every event write takes a second: the writer holds WRITER_CONCURRENCY
    // events in flight, the queue holds two more, the rest are dropped.
    let recorder = slow_recorder(&server, Duration::from_secs(1), 2);
    record_created(&recorder, 10).await;
    let dropped = recorder.dropped();
    let kept = 10 - dropped as usize;
    assert!(
        (2..=2 + WRITER_CONCURRENCY).contains(&kept),
        "{dropped} of 10 dropped"
    );
    // What was kept is written, once the slow writes are through.
    events_written(&server, kept, Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_within_the_queue_length_loses_no_event() {
    let server = ApiServer::start().await.unwrap();
    let recorder = slow_recorder(&server, Duration::from_millis(20), 200);
    record_created(&recorder, 200).await;
    // All queued at once while the writes take 20 ms each: none dropped,
    // all written in the end.
    assert_eq!(recorder.dropped(), 0);
    events_written(&server, 200, Duration::from_secs(30)).await;
}
