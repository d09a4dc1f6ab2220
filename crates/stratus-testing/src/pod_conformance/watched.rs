//! The provider under test, wrapped to note which lifecycle methods answer
//! `NotImplemented`: the suite then says what is left to write instead of
//! waiting out each case.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use stratus_pod::{
    ContainerAttach, ContainerExec, ContainerLogs, PodLifecycleHandler, PodNotifier, PortForward,
    ResourceChanges, ResourceMetrics, Result, StatsSummary,
};

/// Delegates every call to the provider and records the names of the
/// methods that answered `NotImplemented`.
pub(super) struct Watched {
    inner: Arc<dyn PodLifecycleHandler>,
    unimplemented: Mutex<BTreeSet<&'static str>>,
}

impl Watched {
    pub(super) fn new(inner: Arc<dyn PodLifecycleHandler>) -> Self {
        Self {
            inner,
            unimplemented: Mutex::new(BTreeSet::new()),
        }
    }

    /// The methods seen answering `NotImplemented` so far, joined, or
    /// `None`.
    pub(super) fn unimplemented(&self) -> Option<String> {
        let seen = self
            .unimplemented
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (!seen.is_empty()).then(|| seen.iter().copied().collect::<Vec<_>>().join(", "))
    }

    fn note<T>(&self, method: &'static str, result: Result<T>) -> Result<T> {
        if let Err(e) = &result
            && e.is_not_implemented()
        {
            self.unimplemented
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(method);
        }
        result
    }
}

#[async_trait]
impl PodLifecycleHandler for Watched {
    async fn create_pod(&self, pod: &Pod) -> Result<()> {
        self.note("create_pod", self.inner.create_pod(pod).await)
    }

    async fn update_pod(&self, pod: &Pod) -> Result<()> {
        self.note("update_pod", self.inner.update_pod(pod).await)
    }

    async fn delete_pod(&self, pod: &Pod) -> Result<()> {
        self.note("delete_pod", self.inner.delete_pod(pod).await)
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>> {
        self.note("get_pod", self.inner.get_pod(namespace, name).await)
    }

    async fn get_pod_status(&self, namespace: &str, name: &str) -> Result<Option<PodStatus>> {
        self.note(
            "get_pod_status",
            self.inner.get_pod_status(namespace, name).await,
        )
    }

    async fn get_pods(&self) -> Result<Vec<Pod>> {
        self.note("get_pods", self.inner.get_pods().await)
    }

    fn notifier(&self) -> Option<&dyn PodNotifier> {
        self.inner.notifier()
    }

    fn container_logs(&self) -> Option<&dyn ContainerLogs> {
        self.inner.container_logs()
    }

    fn exec(&self) -> Option<&dyn ContainerExec> {
        self.inner.exec()
    }

    fn attach(&self) -> Option<&dyn ContainerAttach> {
        self.inner.attach()
    }

    fn port_forward(&self) -> Option<&dyn PortForward> {
        self.inner.port_forward()
    }

    fn stats_summary(&self) -> Option<&dyn StatsSummary> {
        self.inner.stats_summary()
    }

    fn resource_metrics(&self) -> Option<&dyn ResourceMetrics> {
        self.inner.resource_metrics()
    }

    fn resource_changes(&self) -> Option<&dyn ResourceChanges> {
        self.inner.resource_changes()
    }

    fn addresses_before_create(&self, pod: &Pod) -> Option<stratus_pod::PodAddresses> {
        self.inner.addresses_before_create(pod)
    }
}
