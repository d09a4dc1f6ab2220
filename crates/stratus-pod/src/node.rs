//! The node side of a provider: heartbeat gating and node status.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;

use crate::Result;

/// The callback a provider calls with an updated Node (status, labels,
/// annotations). Never blocks; the latest update wins.
#[derive(Clone)]
pub struct NodeStatusCallback(Arc<dyn Fn(Node) + Send + Sync>);

impl NodeStatusCallback {
    /// Wrap a function. It must not block.
    pub fn new(f: impl Fn(Node) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Report an updated node.
    pub fn notify(&self, node: Node) {
        (self.0)(node)
    }
}

impl fmt::Debug for NodeStatusCallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NodeStatusCallback")
    }
}

/// The node side of a provider (Go: `NodeProvider`, plus the CLI's
/// `ConfigureNode`).
#[async_trait]
pub trait NodeProvider: Send + Sync {
    /// A cheap health check of the backend, called every ping interval. While
    /// it fails, the node stops heartbeats and lease renewals, so the control
    /// plane marks it NotReady. Defaults to `Ok`.
    async fn ping(&self) -> Result<()> {
        Ok(())
    }

    /// Register a callback for node updates (capacity changes, conditions).
    /// Defaults to never calling it.
    fn notify_node_status(&self, callback: NodeStatusCallback) {
        let _ = callback;
    }

    /// Fill in the Node before it is registered: capacity, allocatable,
    /// addresses, node info, labels, taints. The node has sensible defaults
    /// already; change what the backend knows better. Defaults to no change.
    fn configure_node(&self, node: &mut Node) {
        let _ = node;
    }

    /// Whether the node should follow its own Node object, as the kubelet
    /// does: one watch (field selector `metadata.name`) whose every version
    /// of the Node goes to [`NodeProvider::node_changed`]. Defaults to
    /// `false` (no watch).
    fn follows_node(&self) -> bool {
        false
    }

    /// The Node as the API server has it, once it is registered and after
    /// each change by anyone (e.g. the `spec.podCIDR` the node-IPAM
    /// controller assigns, which the kubelet hands to its network plugin),
    /// when [`NodeProvider::follows_node`] is `true`. Must not block.
    /// Defaults to ignoring it.
    fn node_changed(&self, node: &Node) {
        let _ = node;
    }
}

/// A node provider that always pings fine and never reports updates (Go:
/// `NaiveNodeProvider`).
#[derive(Debug, Clone, Copy, Default)]
pub struct NaiveNodeProvider;

impl NodeProvider for NaiveNodeProvider {}
