//! Providers with the legacy [`Instances`] (and [`Zones`]) interfaces only:
//! [`with_legacy_instances`] answers [`InstancesV2`] from them, as Go's
//! node and node-lifecycle controllers fall back to `Instances` and `Zones`
//! when the cloud has no `InstancesV2`.
//!
//! The mapping, call by call (Go's `getInstanceMetadata`,
//! `ensureNodeExistsByProviderID` and `shutdownInstance`):
//!
//! | InstancesV2 | legacy calls |
//! |---|---|
//! | provider ID | `spec.providerID`, else `<provider-name>://` + `instance_id(node name)`; an `instance_id` answering `NotImplemented` means none: the node is initialized by name, without a provider ID, as in Go |
//! | `instance_metadata` | `instance_type_by_provider_id` (by name on error), `node_addresses_by_provider_id` (by name on error), `get_zone_by_provider_id` (by name on error) when Zones exist; only the by-name calls without a provider ID |
//! | `instance_addresses` (the periodic refresh) | `node_addresses_by_provider_id` (by name on error): one call per node, as Go's `getInstanceNodeAddresses` |
//! | `instance_exists` | `instance_id` not found → gone; else `instance_exists_by_provider_id` |
//! | `instance_shutdown` | `instance_shutdown_by_provider_id` |

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, NodeAddress};

use crate::{
    CloudError, CloudProvider, Clusters, InitContext, InstanceMetadata, Instances, InstancesV2,
    LoadBalancer, Result, Routes, Zones,
};

/// `provider` itself when it has [`InstancesV2`] or no [`Instances`];
/// otherwise a provider whose [`CloudProvider::instances_v2`] is answered
/// from its legacy [`Instances`] and [`Zones`] (every other capability is
/// the provider's own).
///
/// ```
/// use std::sync::Arc;
/// use stratus_cloud::{CloudProvider, legacy::with_legacy_instances};
///
/// struct Bare;
/// impl CloudProvider for Bare {
///     fn provider_name(&self) -> &str { "bare" }
/// }
/// // Neither interface: nothing to adapt.
/// let p = with_legacy_instances(Arc::new(Bare));
/// assert!(p.instances_v2().is_none());
/// ```
pub fn with_legacy_instances(provider: Arc<dyn CloudProvider>) -> Arc<dyn CloudProvider> {
    if provider.instances_v2().is_some() || provider.instances().is_none() {
        return provider;
    }
    Arc::new(LegacyAdapter { inner: provider })
}

/// A provider answering [`InstancesV2`] from its legacy interfaces.
struct LegacyAdapter {
    inner: Arc<dyn CloudProvider>,
}

impl LegacyAdapter {
    fn instances(&self) -> Result<&dyn Instances> {
        self.inner
            .instances()
            .ok_or_else(CloudError::not_implemented)
    }

    /// Go's `getNodeAddressesByProviderIDOrName`: by provider ID when there
    /// is one, by name when there is none or that call fails.
    async fn addresses(&self, node: &Node, provider_id: Option<&str>) -> Result<Vec<NodeAddress>> {
        let instances = self.instances()?;
        if let Some(id) = provider_id
            && let Ok(addresses) = instances.node_addresses_by_provider_id(id).await
        {
            return Ok(addresses);
        }
        instances.node_addresses(node_name(node)).await
    }

    /// Go's `GetInstanceProviderID` when the Node has no provider ID.
    async fn provider_id(&self, node: &Node) -> Result<String> {
        if let Some(id) = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .filter(|id| !id.is_empty())
        {
            return Ok(id.to_owned());
        }
        let id = self.instances()?.instance_id(node_name(node)).await?;
        Ok(format!("{}://{id}", self.inner.provider_name()))
    }
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

#[async_trait]
impl CloudProvider for LegacyAdapter {
    fn provider_name(&self) -> &str {
        self.inner.provider_name()
    }

    fn has_cluster_id(&self) -> bool {
        self.inner.has_cluster_id()
    }

    async fn initialize(&self, ctx: &InitContext) -> Result<()> {
        self.inner.initialize(ctx).await
    }

    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        self.inner.load_balancer()
    }

    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        Some(self)
    }

    fn instances(&self) -> Option<&dyn Instances> {
        self.inner.instances()
    }

    fn zones(&self) -> Option<&dyn Zones> {
        self.inner.zones()
    }

    fn routes(&self) -> Option<&dyn Routes> {
        self.inner.routes()
    }

    fn clusters(&self) -> Option<&dyn Clusters> {
        self.inner.clusters()
    }
}

#[async_trait]
impl InstancesV2 for LegacyAdapter {
    async fn instance_exists(&self, node: &Node) -> Result<bool> {
        let provider_id = match self.provider_id(node).await {
            Ok(id) => id,
            Err(e) if e.is_not_found() => return Ok(false),
            Err(e) => return Err(e),
        };
        self.instances()?
            .instance_exists_by_provider_id(&provider_id)
            .await
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool> {
        let provider_id = self.provider_id(node).await?;
        self.instances()?
            .instance_shutdown_by_provider_id(&provider_id)
            .await
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>> {
        let instances = self.instances()?;
        let name = node_name(node);
        // Go's V1 path: a provider that cannot name the instance
        // (`NotImplemented`) initializes the node by name, without an ID.
        let provider_id = match self.provider_id(node).await {
            Ok(id) => Some(id),
            Err(e) if e.is_not_implemented() => None,
            Err(e) => return Err(e),
        };
        let by_id = match &provider_id {
            Some(id) => instances.instance_type_by_provider_id(id).await.ok(),
            None => None,
        };
        let instance_type = match by_id {
            Some(t) => t,
            None => or_unimplemented(instances.instance_type(name).await)?,
        };
        let node_addresses = self.addresses(node, provider_id.as_deref()).await?;
        let mut metadata = InstanceMetadata {
            provider_id: provider_id.clone().unwrap_or_default(),
            instance_type,
            node_addresses,
            ..Default::default()
        };
        if let Some(zones) = self.inner.zones() {
            let by_id = match &provider_id {
                Some(id) => zones.get_zone_by_provider_id(id).await.ok(),
                None => None,
            };
            let zone = match by_id {
                Some(z) => z,
                None => or_unimplemented(zones.get_zone_by_node_name(name).await)?,
            };
            metadata.zone = zone.failure_domain;
            metadata.region = zone.region;
        }
        Ok(Some(metadata))
    }

    fn requires_provider_id(&self) -> bool {
        false
    }

    async fn instance_addresses(&self, node: &Node) -> Result<Option<Vec<NodeAddress>>> {
        let provider_id = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .filter(|id| !id.is_empty());
        Ok(Some(self.addresses(node, provider_id).await?))
    }
}

/// `NotImplemented` reads as "unknown" (the default value).
fn or_unimplemented<T: Default>(answer: Result<T>) -> Result<T> {
    match answer {
        Err(e) if e.is_not_implemented() => Ok(T::default()),
        other => other,
    }
}
