//! Status notifications from provider to node.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

/// The callback a provider calls with a pod whose status changed.
///
/// Calling it never blocks: the node stores the latest pod per key and a
/// worker writes it, so a burst of notifications for one pod coalesces into
/// one status write. Pass the whole pod with its current status.
#[derive(Clone)]
pub struct PodStatusCallback(Arc<dyn Fn(Pod) + Send + Sync>);

impl PodStatusCallback {
    /// Wrap a function. It must not block.
    pub fn new(f: impl Fn(Pod) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Report `pod`'s current status.
    pub fn notify(&self, pod: Pod) {
        (self.0)(pod)
    }
}

impl fmt::Debug for PodStatusCallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PodStatusCallback")
    }
}

/// A provider that pushes pod status changes (Go: `PodNotifier`).
///
/// The node calls [`PodNotifier::notify_pods`] once, before it starts
/// watching pods. The provider keeps the callback and calls it from any
/// thread whenever a pod's status changes; neither side blocks the other.
pub trait PodNotifier: Send + Sync {
    /// Register the callback.
    fn notify_pods(&self, callback: PodStatusCallback);
}
