//! Stratus's reference cloud provider, `local`: the cloud-controller-manager
//! side of a cloud on one machine.
//!
//! It implements [`InstancesV2`] (with the batch capability), [`LoadBalancer`]
//! and [`Routes`] by calling the HTTP API of `stratus-local-cloud`, the way a
//! vendor's provider calls its cloud's: every call retried on throttling
//! (after the cloud's `Retry-After`) and on the cloud's own failures, with
//! back-off; answers turned into typed [`CloudError`]s the controllers act on;
//! lists read page by page; many nodes answered from one list instead of a
//! call each. **It is the model to copy**: a vendor replaces [`Client`] with their
//! cloud's SDK and keeps the shape.
//!
//! How Kubernetes objects map to the cloud:
//!
//! | Kubernetes | local cloud |
//! |---|---|
//! | a Node | the instance whose ID is the Node's `spec.providerID` (`local://<id>`), or, without one, whose node name is the Node's name |
//! | a `type: LoadBalancer` Service | a load balancer named [`default_load_balancer_name`](stratus_cloud::default_load_balancer_name), one listener per Service port (TCP or UDP) |
//! | the load balancer's backends | every node given, at its `InternalIP` (else `ExternalIP`; else the instance's address in the cloud) and the port's `nodePort` |
//! | the Service's `status.loadBalancer` | the address the cloud allocated |
//! | a route | a route named `<cluster>-<name hint>`, tagged with the cluster |
//!
//! Backends are the nodes' NodePorts, as Go's service controller hands them
//! over: something on each node must serve them (kube-proxy does on a real
//! node). The backends' health is the cloud's business: a node whose port
//! does not answer gets no connection until it does. For a Service with
//! `externalTrafficPolicy: Local` the load balancer asks kube-proxy's health
//! check instead (`GET /healthz` on the Service's `healthCheckNodePort`), so
//! only the nodes with a ready endpoint of the Service get connections.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use stratus_cloud::CloudProvider;
//! use stratus_local_cloud::{Config, LocalCloud};
//! use stratus_provider_local::LocalProvider;
//!
//! let cloud = LocalCloud::start(Config {
//!     address_range: "127.77.251.0/24".parse()?,
//!     ..Config::default()
//! })
//! .await?;
//! // What the manager does with `--cloud-provider=local --cloud-config=FILE`.
//! let config = format!("endpoint: http://{}\n", cloud.addr());
//! let provider = LocalProvider::from_config(Some(config.as_bytes()))?;
//! assert_eq!(provider.provider_name(), "local");
//! assert!(provider.load_balancer().is_some() && provider.routes().is_some());
//! cloud.stop().await;
//! # Ok(())
//! # }
//! ```

mod client;
mod endpoints;
mod instances;
mod load_balancer;
mod routes;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use stratus_cloud::{CloudError, CloudProvider, InitContext, InstancesV2, LoadBalancer, Routes};

pub use client::{CallError, Client, RetryPolicy};

/// The provider's name, the scheme of its provider IDs (`local://<id>`).
pub const PROVIDER_NAME: &str = "local";

/// The `--cloud-config` file (YAML).
///
/// ```yaml
/// endpoint: http://127.0.0.1:7080   # the local cloud's API
/// backends: nodePorts              # or endpoints (optional; see `Backends`)
/// attempts: 4                       # tries of one call (optional)
/// maxWaitMs: 2000                   # the longest wait between them (optional)
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalConfig {
    /// The local cloud's API, `http://host:port`.
    pub endpoint: String,
    /// Where load balancers send traffic; default `nodePorts`.
    #[serde(default)]
    pub backends: Backends,
    /// Tries of one call in all; default 4.
    #[serde(default)]
    pub attempts: Option<u32>,
    /// The longest wait between tries, in milliseconds; default 2000.
    #[serde(default)]
    pub max_wait_ms: Option<u64>,
}

/// Where a load balancer sends traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Backends {
    /// The nodes the service controller hands over, at the Service ports'
    /// `nodePort`s (Go's model: kube-proxy, or whatever serves NodePorts on
    /// the nodes, takes it from there).
    #[default]
    NodePorts,
    /// The Service's ready endpoints, straight to the pods (from its
    /// EndpointSlices, watched with the manager's client; a slice change
    /// reprograms the load balancer at once). For clusters where nothing
    /// serves NodePorts, such as process nodes.
    Endpoints,
}

/// The `local` cloud provider.
#[derive(Debug, Clone)]
pub struct LocalProvider {
    client: Client,
    backends: Backends,
    endpoints: Arc<endpoints::Endpoints>,
}

impl LocalProvider {
    /// A provider calling the cloud through `client`, with the nodes'
    /// NodePorts as backends.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            backends: Backends::NodePorts,
            endpoints: Arc::default(),
        }
    }

    /// Send traffic to `backends`.
    pub fn with_backends(mut self, backends: Backends) -> Self {
        self.backends = backends;
        self
    }

    /// A provider from the `--cloud-config` file's bytes ([`LocalConfig`]);
    /// without a file, the cloud is the one at `http://127.0.0.1:7080` (the
    /// daemon's default address).
    pub fn from_config(config: Option<&[u8]>) -> Result<Self, CloudError> {
        let config = match config {
            None => LocalConfig {
                endpoint: "http://127.0.0.1:7080".into(),
                backends: Backends::default(),
                attempts: None,
                max_wait_ms: None,
            },
            Some(bytes) => {
                let text = std::str::from_utf8(bytes).map_err(|_| {
                    CloudError::invalid_input("the local cloud's config is not UTF-8")
                })?;
                serde_saphyr::from_str(text).map_err(|e| {
                    CloudError::invalid_input(format!("the local cloud's config: {e}"))
                })?
            }
        };
        let defaults = RetryPolicy::default();
        let retry = RetryPolicy {
            attempts: config.attempts.unwrap_or(defaults.attempts).max(1),
            max_wait: config
                .max_wait_ms
                .map_or(defaults.max_wait, Duration::from_millis),
            ..defaults
        };
        Ok(Self::new(Client::new(&config.endpoint, retry)?).with_backends(config.backends))
    }

    /// The client it calls the cloud with.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// As the manager holds providers.
    pub fn into_dyn(self) -> Arc<dyn CloudProvider> {
        Arc::new(self)
    }
}

#[async_trait]
impl CloudProvider for LocalProvider {
    fn provider_name(&self) -> &str {
        PROVIDER_NAME
    }

    /// With `backends: endpoints`, start the EndpointSlice watch (it needs
    /// the manager's `kube::Client`, which the manager puts in the context).
    async fn initialize(&self, ctx: &InitContext) -> stratus_cloud::Result<()> {
        match self.backends {
            Backends::NodePorts => Ok(()),
            Backends::Endpoints => self.watch_endpoints(ctx),
        }
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

/// What the manager's ServiceAccount needs beyond Go's cloud controller
/// manager's (`docs/deploy/rbac.yaml`) for `backends: endpoints`: reading
/// EndpointSlices. The ClusterRole `stratus:local-provider` and its binding
/// to `namespace/service_account` (`docs/deploy/local-provider-rbac.yaml` is
/// this for `kube-system/cloud-controller-manager`). `backends: nodePorts`
/// needs nothing more.
pub fn rbac(namespace: &str, service_account: &str) -> Vec<serde_json::Value> {
    let labels = serde_json::json!({
        "app.kubernetes.io/name": "cloud-controller-manager",
        "app.kubernetes.io/part-of": "stratus",
    });
    vec![
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "stratus:local-provider", "labels": labels},
            "rules": [{
                "apiGroups": ["discovery.k8s.io"],
                "resources": ["endpointslices"],
                "verbs": ["get", "list", "watch"],
            }],
        }),
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "stratus:local-provider", "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "stratus:local-provider"},
            "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}],
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_file_is_read_and_bad_ones_are_named() {
        let p = LocalProvider::from_config(Some(
            b"endpoint: http://127.0.0.1:9\nbackends: endpoints\nattempts: 2\nmaxWaitMs: 50\n",
        ))
        .unwrap();
        assert_eq!(p.client().authority(), "127.0.0.1:9");
        assert_eq!(p.backends, Backends::Endpoints);
        let default = LocalProvider::from_config(None).unwrap();
        assert_eq!(default.client().authority(), "127.0.0.1:7080");
        for (bad, why) in [
            (&b"endpoint: ftp://x"[..], "endpoint"),
            (b"endpoint: http://x:1\nextra: 1", "extra"),
            (b"attempts: 2", "endpoint"),
            (b"endpoint: http://x:1\nbackends: pods", "pods"),
            (b"\xff", "UTF-8"),
        ] {
            let err = LocalProvider::from_config(Some(bad)).unwrap_err();
            assert!(err.is_invalid_input(), "{err}");
            assert!(err.to_string().contains(why), "{err}");
        }
    }
}
