//! Leader election against the harness API server.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use stratus_runtime::{ElectionConfig, LeaderElector, LeaseLock};
use stratus_testing::ApiServer;
use tokio::sync::watch;

fn fast() -> ElectionConfig {
    ElectionConfig {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1000),
        retry_period: Duration::from_millis(200),
        release_on_cancel: true,
    }
}

fn elector(server: &ApiServer, id: &str, config: ElectionConfig) -> LeaderElector {
    LeaderElector::new(
        server.client(),
        LeaseLock::new("kube-system", "cloud-controller-manager"),
        id,
        config,
    )
}

async fn lease(server: &ApiServer) -> Lease {
    let api: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    api.get("cloud-controller-manager").await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_candidate_creates_the_lease() {
    let server = ApiServer::start().await.unwrap();
    let (_stop, stopped) = watch::channel(false);
    let mut a = elector(&server, "a", ElectionConfig::default());
    let leadership = a.acquire(stopped).await.unwrap().expect("leader");
    assert!(leadership.is_leader());
    let spec = lease(&server).await.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(spec.lease_transitions, Some(0));
    assert!(spec.acquire_time.is_some() && spec.renew_time.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_after_a_crash_waits_for_the_lease_duration() {
    let server = ApiServer::start().await.unwrap();
    let (_stop, stopped) = watch::channel(false);
    let mut a = elector(&server, "a", fast());
    let leader = a.acquire(stopped.clone()).await.unwrap().unwrap();
    let mut b = elector(&server, "b", fast());
    let b_task = tokio::spawn(async move { b.acquire(stopped).await.map(|l| l.is_some()) });
    // While a renews, b stays a candidate.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!b_task.is_finished());
    let crashed = Instant::now();
    leader.abandon();
    let acquired = tokio::time::timeout(Duration::from_secs(10), b_task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(acquired);
    let took = crashed.elapsed();
    let cfg = fast();
    assert!(
        took >= cfg.lease_duration - cfg.retry_period,
        "took over too early: {took:?}"
    );
    assert!(
        took <= cfg.lease_duration + Duration::from_secs(3),
        "took {took:?}"
    );
    let spec = lease(&server).await.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_release_hands_over_within_a_retry_period() {
    let server = ApiServer::start().await.unwrap();
    let (_stop, stopped) = watch::channel(false);
    let mut a = elector(&server, "a", fast());
    let leader = a.acquire(stopped.clone()).await.unwrap().unwrap();
    let mut b = elector(&server, "b", fast());
    let b_task = tokio::spawn(async move { b.acquire(stopped).await.map(|l| l.is_some()) });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let released = Instant::now();
    leader.release().await;
    assert!(
        tokio::time::timeout(Duration::from_secs(5), b_task)
            .await
            .unwrap()
            .unwrap()
            .unwrap()
    );
    let took = released.elapsed();
    assert!(
        took < fast().lease_duration,
        "a released lease is taken at once, took {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_one_of_many_candidates_wins() {
    let server = ApiServer::start().await.unwrap();
    let (stop, stopped) = watch::channel(false);
    let mut tasks = Vec::new();
    for i in 0..4 {
        let mut e = elector(&server, &format!("c{i}"), fast());
        let stopped = stopped.clone();
        tasks.push(tokio::spawn(
            async move { e.acquire(stopped).await.unwrap() },
        ));
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let _ = stop.send(true);
    let mut leaders = Vec::new();
    for t in tasks {
        if let Some(l) = t.await.unwrap() {
            leaders.push(l);
        }
    }
    assert_eq!(leaders.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_steps_down() {
    let server = ApiServer::start().await.unwrap();
    let (_stop, stopped) = watch::channel(false);
    let mut a = elector(&server, "a", fast());
    let mut leader = a.acquire(stopped).await.unwrap().unwrap();
    let health = leader.health_check(Duration::from_millis(500));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        stratus_runtime::health::HealthCheck::check(&health),
        Ok(()),
        "renewing"
    );
    server.pause(Duration::from_secs(5));
    tokio::time::timeout(Duration::from_secs(4), leader.lost())
        .await
        .expect("stepped down within the renew deadline");
    assert!(!leader.is_leader());
    let failed = stratus_runtime::health::HealthCheck::check(&health).unwrap_err();
    assert!(failed.contains("lost"), "{failed}");
}

#[tokio::test]
async fn invalid_configurations_are_refused() {
    let server = ApiServer::start().await.unwrap();
    let (_stop, stopped) = watch::channel(false);
    let bad = ElectionConfig {
        lease_duration: Duration::from_secs(5),
        renew_deadline: Duration::from_secs(10),
        ..Default::default()
    };
    assert!(
        elector(&server, "a", bad)
            .acquire(stopped.clone())
            .await
            .is_err()
    );
    assert!(
        elector(&server, "", ElectionConfig::default())
            .acquire(stopped)
            .await
            .is_err()
    );
}

/// A Lease as client-go's `LeaseLock` writes it: MicroTime with exactly six
/// fractional digits (Go's `RFC3339Micro`), whole-second duration.
fn go_lease(holder: &str, transitions: i32, renewed: k8s_openapi::jiff::Timestamp) -> Lease {
    let micro = |t: k8s_openapi::jiff::Timestamp| t.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "cloud-controller-manager", "namespace": "kube-system"},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 2,
            "acquireTime": micro(renewed),
            "renewTime": micro(renewed),
            "leaseTransitions": transitions,
        }
    }))
    .unwrap()
}

/// Whether a raw MicroTime string is in Go's `RFC3339Micro` layout, which
/// client-go's parser requires.
fn is_go_micro_time(value: &serde_json::Value) -> bool {
    let Some(s) = value.as_str() else {
        return false;
    };
    let b = s.as_bytes();
    b.len() == 27
        && b[4] == b'-'
        && b[10] == b'T'
        && b[19] == b'.'
        && b[20..26].iter().all(u8::is_ascii_digit)
        && b[26] == b'Z'
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interoperates_with_a_client_go_holder_on_the_wire() {
    let server = ApiServer::start().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    // A Go manager holds the Lease and renews it every 500 ms, as client-go
    // does: a full update fenced by the resourceVersion it read.
    leases
        .create(
            &Default::default(),
            &go_lease("go-ccm_1234", 3, k8s_openapi::jiff::Timestamp::now()),
        )
        .await
        .unwrap();
    let renewer = {
        let leases = leases.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let current = leases.get("cloud-controller-manager").await.unwrap();
                let mut next = go_lease("go-ccm_1234", 3, k8s_openapi::jiff::Timestamp::now());
                next.spec.as_mut().unwrap().acquire_time =
                    current.spec.as_ref().unwrap().acquire_time.clone();
                next.metadata.resource_version = current.metadata.resource_version;
                leases
                    .replace("cloud-controller-manager", &Default::default(), &next)
                    .await
                    .unwrap();
            }
        })
    };
    let (_stop, stopped) = watch::channel(false);
    let mut ours = elector(&server, "stratus-ccm_5678", fast());
    let task = tokio::spawn(async move { ours.acquire(stopped).await });
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!task.is_finished(), "a renewed Go lease is respected");

    // The Go manager dies: after a lease duration without renewals we take over.
    renewer.abort();
    let died = Instant::now();
    let leadership = task.await.unwrap().unwrap().expect("leader");
    assert!(died.elapsed() >= Duration::from_millis(1500));
    let spec = lease(&server).await.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("stratus-ccm_5678"));
    assert_eq!(
        spec.lease_transitions,
        Some(4),
        "a takeover counts a transition"
    );

    // What we wrote parses as client-go expects it.
    let raw: serde_json::Value = serde_json::from_str(
        &server
            .client()
            .request_text(
                http::Request::get(
                    "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cloud-controller-manager",
                )
                .body(Vec::new())
                .unwrap(),
            )
            .await
            .unwrap(),
    )
    .unwrap();
    let spec = &raw["spec"];
    assert!(is_go_micro_time(&spec["renewTime"]), "{spec}");
    assert!(is_go_micro_time(&spec["acquireTime"]), "{spec}");
    assert!(spec["leaseDurationSeconds"].is_i64());

    // Releasing leaves what client-go's own release leaves: an empty holder
    // and a 1 s duration, which a Go candidate acquires at once.
    leadership.release().await;
    let spec = lease(&server).await.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref().unwrap_or_default(), "");
    assert_eq!(spec.lease_duration_seconds, Some(1));
    assert_eq!(spec.lease_transitions, Some(4));
}

/// A candidate that found the Lease held wakes when it expires as observed
/// locally, not at its next jittered retry (up to 2.2 retry periods later,
/// as client-go does): with a 1.5 s retry, the takeover lands right after
/// the 2 s lease, never a retry period past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_wakes_when_the_observed_lease_expires() {
    let server = ApiServer::start().await.unwrap();
    let (_stop, stopped) = watch::channel(false);
    let slow_retry = ElectionConfig {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1900),
        retry_period: Duration::from_millis(1500),
        release_on_cancel: true,
    };
    let mut a = elector(&server, "a", slow_retry);
    // a never renews: the record b first sees is the one it waits out.
    a.acquire(stopped.clone()).await.unwrap().unwrap().abandon();
    let mut b = elector(&server, "b", slow_retry);
    let started = Instant::now();
    let acquired = tokio::time::timeout(Duration::from_secs(10), b.acquire(stopped))
        .await
        .unwrap()
        .unwrap();
    assert!(acquired.is_some());
    let took = started.elapsed();
    assert!(
        took >= slow_retry.lease_duration,
        "took over early: {took:?}"
    );
    // client-go's next attempt would come 1.5–3.3 s after the first, so a
    // takeover before 2.8 s in every run is this wake-up's doing.
    assert!(took < Duration::from_millis(2800), "took {took:?}");
}
