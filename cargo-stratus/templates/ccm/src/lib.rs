//! The {{name}} cloud provider for Kubernetes cloud controller managers.
//!
//! [`{{Type}}Cloud`] implements the Stratus cloud-provider traits; the
//! manager's generic controllers call it:
//!
//! | trait | file | used by |
//! |---|---|---|
//! | `InstancesV2` | `src/instances.rs` | the node controllers: initialize Nodes (provider ID, addresses, labels), remove Nodes whose instance is gone, taint shut-down ones |
//! | `LoadBalancer` | `src/load_balancer.rs` | the service controller: `type: LoadBalancer` Services |
//! | `Routes` | `src/routes.rs` | the route controller: pod-network routes (`--configure-cloud-routes`) |
//!
//! Every method starts as `NotImplemented`; `tests/conformance.rs` lists
//! the ones left to write. A capability the cloud does not have is
//! removed by returning `None` from its accessor below.
//!
//! ```
//! use stratus::cloud::CloudProvider;
//! use {{crate_ident}}::{{Type}}Cloud;
//!
//! let cloud = {{Type}}Cloud::from_cloud_config(Some(b"region: eu-1")).unwrap();
//! assert_eq!(cloud.provider_name(), "{{name}}");
//! assert!(cloud.instances_v2().is_some());
//! ```

mod config;
mod instances;
mod load_balancer;
mod routes;

pub use config::{Config, ConfigError};

use async_trait::async_trait;
use stratus::cloud::{
    CloudError, CloudProvider, InitContext, InstancesV2, LoadBalancer, Result, Routes,
};

/// The {{name}} cloud.
#[derive(Debug, Clone)]
pub struct {{Type}}Cloud {
    config: Config,
}

impl {{Type}}Cloud {
    /// The provider's name: `--cloud-provider={{name}}`, and the scheme of
    /// the provider IDs it writes (`{{name}}://...`).
    pub const NAME: &'static str = "{{name}}";

    /// The provider from the bytes of `--cloud-config` (YAML; `None` when
    /// the flag is not given).
    pub fn from_cloud_config(bytes: Option<&[u8]>) -> Result<Self> {
        let config = Config::parse(bytes).map_err(|e| CloudError::invalid_input(e.to_string()))?;
        Ok(Self { config })
    }

    /// The configuration it was made with.
    pub fn config(&self) -> &Config {
        &self.config
    }
}

#[async_trait]
impl CloudProvider for {{Type}}Cloud {
    fn provider_name(&self) -> &str {
        Self::NAME
    }

    /// Called once before the controllers start: build the cloud API
    /// client here, and start background tasks with `ctx`.
    async fn initialize(&self, _ctx: &InitContext) -> Result<()> {
        Ok(())
    }

    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        Some(self)
    }

    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        Some(self)
    }

    fn routes(&self) -> Option<&dyn Routes> {
        Some(self)
    }
}
