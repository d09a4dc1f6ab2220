//! The pod-provider conformance suite: MockPodProvider passes it; a provider
//! that forgets pods it deleted fails it.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use stratus_pod::{PodLifecycleHandler, PodNotifier, Result};
use stratus_testing::MockPodProvider;
use stratus_testing::conformance::Outcome;
use stratus_testing::pod_conformance::{run_pod_conformance, run_pod_conformance_within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mock_provider_passes() {
    let report = run_pod_conformance(|| Arc::new(MockPodProvider::new()) as _).await;
    report.assert_passed();
    assert!(report.checks.len() >= 10, "{report}");
}

/// Ignores deletions: the pod stays in the "backend".
struct NeverDeletes(MockPodProvider);

#[async_trait]
impl PodLifecycleHandler for NeverDeletes {
    async fn create_pod(&self, pod: &Pod) -> Result<()> {
        self.0.create_pod(pod).await
    }
    async fn update_pod(&self, pod: &Pod) -> Result<()> {
        self.0.update_pod(pod).await
    }
    async fn delete_pod(&self, _pod: &Pod) -> Result<()> {
        Ok(())
    }
    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>> {
        self.0.get_pod(namespace, name).await
    }
    async fn get_pod_status(&self, namespace: &str, name: &str) -> Result<Option<PodStatus>> {
        self.0.get_pod_status(namespace, name).await
    }
    async fn get_pods(&self) -> Result<Vec<Pod>> {
        self.0.get_pods().await
    }
    fn notifier(&self) -> Option<&dyn PodNotifier> {
        self.0.notifier()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_never_deletes_fails() {
    let report = run_pod_conformance_within(
        || Arc::new(NeverDeletes(MockPodProvider::new())) as _,
        std::time::Duration::from_secs(2),
    )
    .await;
    let failed: Vec<&str> = report.failures().iter().map(|c| c.name).collect();
    assert!(
        failed.contains(&"a graceful delete removes the pod from the provider"),
        "{report}"
    );
    assert!(
        matches!(report.checks[0].outcome, Outcome::Passed),
        "{report}"
    );
}

/// A provider as `cargo xtask new-provider` writes it: every lifecycle
/// method answers `NotImplemented`.
struct Unwritten;

#[async_trait]
impl PodLifecycleHandler for Unwritten {
    async fn create_pod(&self, _: &Pod) -> Result<()> {
        Err(stratus_pod::PodError::not_implemented("create_pod"))
    }
    async fn update_pod(&self, _: &Pod) -> Result<()> {
        Err(stratus_pod::PodError::not_implemented("update_pod"))
    }
    async fn delete_pod(&self, _: &Pod) -> Result<()> {
        Err(stratus_pod::PodError::not_implemented("delete_pod"))
    }
    async fn get_pod(&self, _: &str, _: &str) -> Result<Option<Pod>> {
        Err(stratus_pod::PodError::not_implemented("get_pod"))
    }
    async fn get_pod_status(&self, _: &str, _: &str) -> Result<Option<PodStatus>> {
        Err(stratus_pod::PodError::not_implemented("get_pod_status"))
    }
    async fn get_pods(&self) -> Result<Vec<Pod>> {
        Err(stratus_pod::PodError::not_implemented("get_pods"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn methods_left_not_implemented_are_listed_not_failed() {
    let started = std::time::Instant::now();
    let report = run_pod_conformance(|| Arc::new(Unwritten) as _).await;
    report.assert_passed();
    let left: Vec<&str> = report.not_implemented().iter().map(|c| c.name).collect();
    assert!(
        left.contains(&"a pod runs with an IP and is listed by the provider"),
        "{report}"
    );
    assert!(
        left.contains(&"unknown pods are None or NotFound, not errors"),
        "{report}"
    );
    assert!(report.to_string().contains("left to write: "), "{report}");
    // The node itself works without the provider's pods.
    assert!(
        matches!(report.checks[0].outcome, Outcome::Passed),
        "{report}"
    );
    // Each case gives up a few seconds after a NotImplemented answer
    // instead of waiting out the 30 s default.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(120),
        "{:?}",
        started.elapsed()
    );
}
