//! The {{name}} pod provider for a Stratus virtual kubelet.
//!
//! [`{{Type}}Provider`] implements `PodLifecycleHandler`: the virtual node
//! calls it to run the pods the scheduler binds to the node, and reads
//! their status from it. Every lifecycle method starts as
//! `NotImplemented`; `tests/conformance.rs` (Go virtual-kubelet's e2e
//! cases on an in-memory API server) lists the ones left to write.
//!
//! The kubelet-API capabilities are optional: return them from the
//! accessors of `PodLifecycleHandler` once written (`container_logs`,
//! `exec`, `attach`, `port_forward`, `stats_summary`, `resource_metrics`),
//! and `notifier` to push status changes instead of being polled.
//!
//! ```
//! use {{crate_ident}}::Config;
//!
//! let config = Config::parse(Some(b"region: eu-1")).unwrap();
//! assert_eq!(config.region.as_deref(), Some("eu-1"));
//! ```

mod config;

pub use config::{Config, ConfigError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use stratus::kubelet::app::ProviderInit;
use stratus::pod::{PodError, PodLifecycleHandler, Result};

/// The {{name}} pods of one virtual node.
#[derive(Debug, Clone)]
pub struct {{Type}}Provider {
    node_name: String,
    config: Config,
}

impl {{Type}}Provider {
    /// The provider's name: `--provider={{name}}`, and the value of the
    /// node's taint `virtual-kubelet.io/provider={{name}}:NoSchedule`.
    pub const NAME: &'static str = "{{name}}";

    /// The provider for the node the command starts: reads
    /// `--provider-config` if given. Build the backend's client here.
    pub fn new(init: &ProviderInit) -> std::result::Result<Self, ConfigError> {
        let bytes = match &init.config_file {
            Some(path) => Some(std::fs::read(path).map_err(|e| {
                ConfigError::Malformed(format!("cannot read {}: {e}", path.display()))
            })?),
            None => None,
        };
        Ok(Self::with_config(&init.node_name, Config::parse(bytes.as_deref())?))
    }

    /// The provider for `node_name` with `config` (for tests).
    pub fn with_config(node_name: &str, config: Config) -> Self {
        Self {
            node_name: node_name.to_owned(),
            config,
        }
    }

    /// The node it serves.
    pub fn node_name(&self) -> &str {
        &self.node_name
    }

    /// The configuration it was made with.
    pub fn config(&self) -> &Config {
        &self.config
    }
}

fn left(method: &'static str) -> PodError {
    PodError::not_implemented(method)
}

#[async_trait]
impl PodLifecycleHandler for {{Type}}Provider {
    /// Start the pod on the backend: every container of `pod.spec`, with
    /// its environment already resolved by the node (Secrets, ConfigMaps,
    /// the downward API). Return once the backend accepted it; report
    /// progress through `get_pod_status` (or the notifier).
    async fn create_pod(&self, pod: &Pod) -> Result<()> {
        let _ = pod;
        Err(left("create_pod"))
    }

    /// Apply what may change on a running pod: labels, annotations,
    /// container images, `activeDeadlineSeconds`, tolerations.
    async fn update_pod(&self, pod: &Pod) -> Result<()> {
        let _ = pod;
        Err(left("update_pod"))
    }

    /// Stop the pod (within `metadata.deletionGracePeriodSeconds`) and
    /// forget it; `Ok(())` or a `NotFound` error if it is unknown. Called
    /// again if it fails, and maybe late: a pod of the same name with
    /// another UID (re-created after a force-delete) must be left running.
    async fn delete_pod(&self, pod: &Pod) -> Result<()> {
        let _ = pod;
        Err(left("delete_pod"))
    }

    /// The pod as the backend runs it (its spec and status), `None` if
    /// unknown.
    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>> {
        let _ = (namespace, name);
        Err(left("get_pod"))
    }

    /// The pod's status: phase, pod IP, conditions and container statuses,
    /// as the kubelet would write them; `None` if unknown.
    async fn get_pod_status(&self, namespace: &str, name: &str) -> Result<Option<PodStatus>> {
        let _ = (namespace, name);
        Err(left("get_pod_status"))
    }

    /// Every pod the backend runs for this node (the node deletes the ones
    /// the API server no longer has).
    async fn get_pods(&self) -> Result<Vec<Pod>> {
        Err(left("get_pods"))
    }
}
