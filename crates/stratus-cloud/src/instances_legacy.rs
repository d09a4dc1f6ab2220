//! Instances, the legacy interface (Go: `Instances`).

use async_trait::async_trait;
use k8s_openapi::api::core::v1::NodeAddress;

use crate::Result;

/// Instances looked up by node name or provider ID (Go: `Instances`).
///
/// Prefer [`crate::InstancesV2`]: it takes the whole Node and needs one call
/// where this interface needs three to six.
#[async_trait]
pub trait Instances: Send + Sync {
    /// The addresses of the instance behind node `name`.
    async fn node_addresses(&self, name: &str) -> Result<Vec<NodeAddress>>;

    /// The addresses of the instance with this provider ID.
    async fn node_addresses_by_provider_id(&self, provider_id: &str) -> Result<Vec<NodeAddress>>;

    /// The instance ID of node `name`, without the provider prefix. Must fail
    /// with [`crate::CloudErrorKind::NotFound`] when the instance does not
    /// exist, and must not for stopped or sleeping instances. A provider
    /// that cannot name instances answers `NotImplemented`: its nodes are
    /// then initialized by name, without a provider ID (Go's V1 path).
    async fn instance_id(&self, name: &str) -> Result<String>;

    /// The instance type of node `name`.
    async fn instance_type(&self, name: &str) -> Result<String>;

    /// The instance type of the instance with this provider ID.
    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String>;

    /// Add an SSH key to every instance (legacy; no controller calls it).
    async fn add_ssh_key_to_all_instances(&self, user: &str, key_data: &[u8]) -> Result<()>;

    /// The node name of the host this process runs on (legacy, kubelet era).
    async fn current_node_name(&self, hostname: &str) -> Result<String>;

    /// Whether the instance exists. `Ok(false)` lets the lifecycle controller
    /// delete the Node. Must be true for stopped instances.
    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool>;

    /// Whether the instance is shut down. `NotImplemented` means "no".
    async fn instance_shutdown_by_provider_id(&self, provider_id: &str) -> Result<bool>;
}
