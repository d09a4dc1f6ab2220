//! Instances: what the node controllers ask about the machine behind each
//! Node (Go: `InstancesV2`).
//!
//! Every method gets the whole Node: look at `spec.providerID`
//! (`{{name}}://<instance id>`, see [`stratus::cloud::ProviderId`]) first
//! and fall back to the Node's name only when it is empty (a Node the
//! manager has not initialized yet).

use async_trait::async_trait;
use stratus::cloud::{CloudError, InstanceMetadata, InstancesV2, Result};
use k8s_openapi::api::core::v1::Node;

use crate::{{Type}}Cloud;

#[async_trait]
impl InstancesV2 for {{Type}}Cloud {
    /// Whether the Node's instance exists. Answer `Ok(false)` for a deleted
    /// instance (not an error): the node lifecycle controller then deletes
    /// the Node. A stopped instance still exists.
    async fn instance_exists(&self, node: &Node) -> Result<bool> {
        let _ = node;
        Err(CloudError::not_implemented())
    }

    /// Whether the Node's instance is shut down: the controller then taints
    /// the Node `node.cloudprovider.kubernetes.io/shutdown:NoSchedule`.
    async fn instance_shutdown(&self, node: &Node) -> Result<bool> {
        let _ = node;
        Err(CloudError::not_implemented())
    }

    /// What initializes the Node: `provider_id` (`{{name}}://<id>`),
    /// `instance_type`, `zone` and `region` (written as the well-known
    /// topology labels), `node_addresses`, and any `additional_labels`
    /// (outside the `kubernetes.io` namespaces). `Ok(None)` leaves the Node
    /// uninitialized until it changes.
    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>> {
        let _ = node;
        Err(CloudError::not_implemented())
    }
}
