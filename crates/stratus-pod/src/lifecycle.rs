//! The pod lifecycle handler: the core of a virtual-kubelet provider.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, PodStatus};

use crate::{
    ContainerAttach, ContainerExec, ContainerLogs, PodNotifier, PortForward, ResourceChanges,
    ResourceMetrics, Result, StatsSummary,
};

/// Runs pods on the vendor's backend (Go: `PodLifecycleHandler`, plus the
/// optional capabilities of `nodeutil.Provider`).
///
/// Contract, as in Go:
///
/// - Pods passed in and returned are values; the provider must not keep
///   references into the controller's cache (Rust's ownership enforces it)
///   and must return fresh objects, not shared mutable state.
/// - `delete_pod` may be called more than once for the same pod, and must
///   succeed (or fail with `NotFound`) when the pod is already gone.
/// - After `delete_pod`, the provider should report a terminal status
///   (every container terminated) through its [`PodNotifier`]; the controller
///   then removes the pod from the API.
/// - "Absent" is `Ok(None)` from the getters; a `NotFound` error means the
///   same.
///
/// Optional capabilities are exposed through accessors that return `None` by
/// default; the kubelet API answers 501 for a capability that is absent.
#[async_trait]
pub trait PodLifecycleHandler: Send + Sync {
    /// Create the pod on the backend. The pod's environment has been
    /// resolved unless the node was configured to skip it.
    async fn create_pod(&self, pod: &Pod) -> Result<()>;

    /// Apply the mutable fields of an existing pod (containers' images,
    /// active deadline, tolerations, labels, annotations).
    async fn update_pod(&self, pod: &Pod) -> Result<()>;

    /// Stop and remove the pod. May be called repeatedly, also after a pod
    /// of the same name but another UID (created after a force-delete)
    /// took its place: that one must be left running.
    async fn delete_pod(&self, pod: &Pod) -> Result<()>;

    /// The pod as the backend knows it, or `None`.
    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>>;

    /// The pod's status as the backend knows it, or `None`.
    async fn get_pod_status(&self, namespace: &str, name: &str) -> Result<Option<PodStatus>>;

    /// Every pod the backend runs for this node.
    async fn get_pods(&self) -> Result<Vec<Pod>>;

    /// Push status notifications. Without them the node polls
    /// [`PodLifecycleHandler::get_pod_status`]; implementing this is strongly
    /// recommended for more than a few pods.
    fn notifier(&self) -> Option<&dyn PodNotifier> {
        None
    }

    /// Container logs (`kubectl logs`).
    fn container_logs(&self) -> Option<&dyn ContainerLogs> {
        None
    }

    /// Exec in a container (`kubectl exec`).
    fn exec(&self) -> Option<&dyn ContainerExec> {
        None
    }

    /// Attach to a container (`kubectl attach`).
    fn attach(&self) -> Option<&dyn ContainerAttach> {
        None
    }

    /// Port forwarding (`kubectl port-forward`).
    fn port_forward(&self) -> Option<&dyn PortForward> {
        None
    }

    /// The kubelet stats summary (`/stats/summary`, metrics-server).
    fn stats_summary(&self) -> Option<&dyn StatsSummary> {
        None
    }

    /// Resource metrics in Prometheus text (`/metrics/resource`).
    fn resource_metrics(&self) -> Option<&dyn ResourceMetrics> {
        None
    }

    /// Be told when a ConfigMap or Secret the node's pods reference
    /// changes (the node then watches those objects' metadata, namespace by
    /// namespace).
    fn resource_changes(&self) -> Option<&dyn ResourceChanges> {
        None
    }

    /// The addresses `pod` will have, when the backend knows them before
    /// [`create_pod`](Self::create_pod) (a backend whose pods share their
    /// node's address, as the process provider's do). The node resolves
    /// environment references to `status.podIP(s)` and `status.hostIP(s)`
    /// from them while the pod's status carries none. With `None` (the
    /// default) such a reference fails with
    /// [`EnvError::StatusNotKnown`](crate::env::EnvError::StatusNotKnown)
    /// and the pod stays Pending, unless the node defers it
    /// ([`ResolveOptions::defer_unknown_status`](crate::env::ResolveOptions::defer_unknown_status)).
    fn addresses_before_create(&self, _pod: &Pod) -> Option<PodAddresses> {
        None
    }
}

/// The addresses of a pod known before it is created (see
/// [`PodLifecycleHandler::addresses_before_create`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodAddresses {
    /// The pod's IP (`status.podIP`).
    pub pod_ip: String,
    /// Its node's IP (`status.hostIP`).
    pub host_ip: String,
}
