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
    server.pause(Duration::from_secs(5));
    tokio::time::timeout(Duration::from_secs(4), leader.lost())
        .await
        .expect("stepped down within the renew deadline");
    assert!(!leader.is_leader());
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
