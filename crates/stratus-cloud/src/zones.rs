//! Zones, legacy (Go: `Zones`, deprecated in favour of the zone and region in
//! [`crate::InstanceMetadata`]).

use async_trait::async_trait;

use crate::Result;

/// A failure domain and region (Go: `Zone`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Zone {
    /// The zone (failure domain).
    pub failure_domain: String,
    /// The region.
    pub region: String,
}

/// Zone lookups (Go: `Zones`). Not called when the provider supports
/// [`crate::InstancesV2`].
#[async_trait]
pub trait Zones: Send + Sync {
    /// The zone of the host this process runs on (kubelet era).
    async fn get_zone(&self) -> Result<Zone>;

    /// The zone of the instance with this provider ID.
    async fn get_zone_by_provider_id(&self, provider_id: &str) -> Result<Zone>;

    /// The zone of the instance behind node `name`.
    async fn get_zone_by_node_name(&self, name: &str) -> Result<Zone>;
}
