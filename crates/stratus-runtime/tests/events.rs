//! Event recording through the harness: background writes and client-go's
//! de-duplication of identical events.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kube::api::{Api, ListParams};
use stratus_runtime::events::{EventRecorder, EventType};
use stratus_testing::ApiServer;

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
    let events: Api<Event> = Api::namespaced(server.client(), "default");
    stratus_testing::eventually("two events", Duration::from_secs(5), || async {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len()
            == 2
    })
    .await;
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
