//! [mockall](https://docs.rs/mockall) mocks of every trait (feature `mock`).
//!
//! The capability accessors of [`PodLifecycleHandler`] return borrowed trait
//! objects, which mockall cannot script; [`MockPodProvider`] assembles a
//! handler from the capability mocks instead.
//!
//! ```
//! use stratus_pod::mock::{MockPodLifecycle, MockPodProvider};
//! use stratus_pod::PodLifecycleHandler;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let mut lifecycle = MockPodLifecycle::new();
//! lifecycle.expect_get_pods().returning(|| Ok(vec![]));
//! let provider = MockPodProvider::new(lifecycle);
//! assert!(provider.get_pods().await.unwrap().is_empty());
//! assert!(provider.exec().is_none());
//! # });
//! ```

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodStatus, Secret, Service};

use crate::{
    AttachIo, ByteStream, ContainerAttach, ContainerExec, ContainerLogOptions, ContainerLogs,
    ContainerRef, ExitCode, NodeProvider, NodeStatusCallback, PodLifecycleHandler, PodNotifier,
    PodResources, PodStatusCallback, PortForward, PortForwardStream, ResourceChange,
    ResourceChanges, ResourceMetrics, Result, StatsSummary, Summary,
};

mockall::mock! {
    /// A mock of the six lifecycle methods of [`PodLifecycleHandler`].
    pub PodLifecycle {}

    #[async_trait]
    impl PodLifecycleHandler for PodLifecycle {
        async fn create_pod(&self, pod: &Pod) -> Result<()>;
        async fn update_pod(&self, pod: &Pod) -> Result<()>;
        async fn delete_pod(&self, pod: &Pod) -> Result<()>;
        async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>>;
        async fn get_pod_status(&self, namespace: &str, name: &str) -> Result<Option<PodStatus>>;
        async fn get_pods(&self) -> Result<Vec<Pod>>;
    }
}

mockall::mock! {
    /// A mock [`PodNotifier`].
    pub PodNotifier {}

    impl PodNotifier for PodNotifier {
        fn notify_pods(&self, callback: PodStatusCallback);
    }
}

mockall::mock! {
    /// A mock [`NodeProvider`].
    pub NodeProvider {}

    #[async_trait]
    impl NodeProvider for NodeProvider {
        async fn ping(&self) -> Result<()>;
        fn notify_node_status(&self, callback: NodeStatusCallback);
        fn configure_node(&self, node: &mut k8s_openapi::api::core::v1::Node);
        fn follows_node(&self) -> bool;
        fn node_changed(&self, node: &k8s_openapi::api::core::v1::Node);
    }
}

mockall::mock! {
    /// A mock [`ContainerLogs`].
    pub ContainerLogs {}

    #[async_trait]
    impl ContainerLogs for ContainerLogs {
        async fn container_logs(&self, container: &ContainerRef, options: &ContainerLogOptions) -> Result<ByteStream>;
    }
}

mockall::mock! {
    /// A mock [`ContainerExec`].
    pub ContainerExec {}

    #[async_trait]
    impl ContainerExec for ContainerExec {
        async fn exec(&self, container: &ContainerRef, command: &[String], io: AttachIo) -> Result<ExitCode>;
    }
}

mockall::mock! {
    /// A mock [`ContainerAttach`].
    pub ContainerAttach {}

    #[async_trait]
    impl ContainerAttach for ContainerAttach {
        async fn attach(&self, container: &ContainerRef, io: AttachIo) -> Result<()>;
    }
}

mockall::mock! {
    /// A mock [`PortForward`].
    pub PortForward {}

    #[async_trait]
    impl PortForward for PortForward {
        async fn port_forward(&self, namespace: &str, pod: &str, port: u16, stream: PortForwardStream) -> Result<()>;
    }
}

mockall::mock! {
    /// A mock [`StatsSummary`].
    pub StatsSummary {}

    #[async_trait]
    impl StatsSummary for StatsSummary {
        async fn stats_summary(&self) -> Result<Summary>;
    }
}

mockall::mock! {
    /// A mock [`ResourceMetrics`].
    pub ResourceMetrics {}

    #[async_trait]
    impl ResourceMetrics for ResourceMetrics {
        async fn resource_metrics(&self) -> Result<String>;
    }
}

mockall::mock! {
    /// A mock [`ResourceChanges`].
    pub ResourceChanges {}

    #[async_trait]
    impl ResourceChanges for ResourceChanges {
        async fn resource_changed(&self, change: &ResourceChange) -> Result<()>;
    }
}

mockall::mock! {
    /// A mock [`PodResources`].
    pub PodResources {}

    #[async_trait]
    impl PodResources for PodResources {
        async fn get_secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>>;
        async fn get_config_map(&self, namespace: &str, name: &str) -> Result<Option<ConfigMap>>;
        async fn list_services(&self, namespace: &str) -> Result<Vec<Service>>;
        fn forget(&self, kind: crate::ResourceKind, namespace: &str, name: &str);
    }
}

/// A [`PodLifecycleHandler`] assembled from mocks: the lifecycle calls go to
/// `lifecycle`, each capability to its mock when set.
pub struct MockPodProvider {
    /// The lifecycle calls.
    pub lifecycle: MockPodLifecycle,
    /// Status notifications.
    pub notifier: Option<MockPodNotifier>,
    /// Logs.
    pub logs: Option<MockContainerLogs>,
    /// Exec.
    pub exec: Option<MockContainerExec>,
    /// Attach.
    pub attach: Option<MockContainerAttach>,
    /// Port forwarding.
    pub port_forward: Option<MockPortForward>,
    /// Stats.
    pub stats: Option<MockStatsSummary>,
    /// Resource metrics.
    pub metrics: Option<MockResourceMetrics>,
    /// Changes of referenced ConfigMaps and Secrets.
    pub changes: Option<MockResourceChanges>,
}

impl MockPodProvider {
    /// A provider with only the lifecycle calls.
    pub fn new(lifecycle: MockPodLifecycle) -> Self {
        Self {
            lifecycle,
            notifier: None,
            logs: None,
            exec: None,
            attach: None,
            port_forward: None,
            stats: None,
            metrics: None,
            changes: None,
        }
    }
}

#[async_trait]
impl PodLifecycleHandler for MockPodProvider {
    async fn create_pod(&self, pod: &Pod) -> Result<()> {
        self.lifecycle.create_pod(pod).await
    }

    async fn update_pod(&self, pod: &Pod) -> Result<()> {
        self.lifecycle.update_pod(pod).await
    }

    async fn delete_pod(&self, pod: &Pod) -> Result<()> {
        self.lifecycle.delete_pod(pod).await
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>> {
        self.lifecycle.get_pod(namespace, name).await
    }

    async fn get_pod_status(&self, namespace: &str, name: &str) -> Result<Option<PodStatus>> {
        self.lifecycle.get_pod_status(namespace, name).await
    }

    async fn get_pods(&self) -> Result<Vec<Pod>> {
        self.lifecycle.get_pods().await
    }

    fn notifier(&self) -> Option<&dyn PodNotifier> {
        self.notifier.as_ref().map(|m| m as &dyn PodNotifier)
    }

    fn container_logs(&self) -> Option<&dyn ContainerLogs> {
        self.logs.as_ref().map(|m| m as &dyn ContainerLogs)
    }

    fn exec(&self) -> Option<&dyn ContainerExec> {
        self.exec.as_ref().map(|m| m as &dyn ContainerExec)
    }

    fn attach(&self) -> Option<&dyn ContainerAttach> {
        self.attach.as_ref().map(|m| m as &dyn ContainerAttach)
    }

    fn port_forward(&self) -> Option<&dyn PortForward> {
        self.port_forward.as_ref().map(|m| m as &dyn PortForward)
    }

    fn stats_summary(&self) -> Option<&dyn StatsSummary> {
        self.stats.as_ref().map(|m| m as &dyn StatsSummary)
    }

    fn resource_metrics(&self) -> Option<&dyn ResourceMetrics> {
        self.metrics.as_ref().map(|m| m as &dyn ResourceMetrics)
    }

    fn resource_changes(&self) -> Option<&dyn ResourceChanges> {
        self.changes.as_ref().map(|m| m as &dyn ResourceChanges)
    }
}
