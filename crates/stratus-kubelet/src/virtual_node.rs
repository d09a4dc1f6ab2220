//! [`VirtualNode`]: one virtual node (its Node, Lease and pods) from a
//! provider, built then run (Go's `nodeutil.NewNode`). Several virtual
//! nodes can run in one process, sharing one client (and its QPS budget),
//! one [`PodResources`] cache and one metrics registry.
//!
//! ```no_run
//! use std::sync::Arc;
//! use stratus_kubelet::node::NodeConfig;
//! use stratus_kubelet::virtual_node::VirtualNode;
//! use stratus_pod::PodLifecycleHandler;
//!
//! # async fn run(client: kube::Client, provider: Arc<dyn PodLifecycleHandler>) -> Result<(), Box<dyn std::error::Error>> {
//! let node = VirtualNode::builder(client, NodeConfig::new("vk-acme-0", "acme"))
//!     .provider(provider)
//!     .build()?;
//! let (_stop, stopped) = tokio::sync::watch::channel(false);
//! node.run(stopped).await?;
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;

use stratus_pod::{NaiveNodeProvider, NodeProvider, PodLifecycleHandler, PodResources};
use stratus_runtime::health::{ControllerHealth, HealthChecks};
use tokio::sync::watch;

use crate::api::KubeletServer;
use crate::metrics::KubeletMetrics;
use crate::node::{NodeConfig, NodeController, NodeError};
use crate::pods::{PodController, PodControllerConfig};
use crate::resources::ApiResources;

/// Why a virtual node could not be built or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum VirtualNodeError {
    /// No pod provider was given.
    #[error("virtual node {0}: no pod provider (call .provider(...))")]
    NoProvider(String),
    /// The node name is empty or not a valid DNS subdomain.
    #[error("virtual node name {0:?} is not a valid DNS subdomain")]
    InvalidName(String),
    /// The Node could not be registered.
    #[error(transparent)]
    Node(#[from] NodeError),
}

/// Builds a [`VirtualNode`].
pub struct VirtualNodeBuilder {
    client: kube::Client,
    node: NodeConfig,
    provider: Option<Arc<dyn PodLifecycleHandler>>,
    node_provider: Option<Arc<dyn NodeProvider>>,
    pods: PodControllerConfig,
    resources: Option<Arc<dyn PodResources>>,
    metrics: Option<KubeletMetrics>,
    checks: Option<HealthChecks>,
    server: Option<KubeletServer>,
}

impl std::fmt::Debug for VirtualNodeBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VirtualNodeBuilder")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl VirtualNodeBuilder {
    /// The pod provider (required).
    pub fn provider(mut self, provider: Arc<dyn PodLifecycleHandler>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// The node provider: ping, node status notifications, node
    /// configuration (default: [`NaiveNodeProvider`], always healthy).
    pub fn node_provider(mut self, provider: Arc<dyn NodeProvider>) -> Self {
        self.node_provider = Some(provider);
        self
    }

    /// How pods are run (workers, polling, sweeps, env resolution).
    pub fn pods(mut self, config: PodControllerConfig) -> Self {
        self.pods = config;
        self
    }

    /// Where Secrets, ConfigMaps and Services are read (default: a new
    /// [`ApiResources`]; give every node of a process the same one, and the
    /// provider too).
    pub fn resources(mut self, resources: Arc<dyn PodResources>) -> Self {
        self.resources = Some(resources);
        self
    }

    /// Record metrics in these families (shared by the nodes of a process).
    pub fn metrics(mut self, metrics: KubeletMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Add the checks `node/<name>` and `pods/<name>` to `checks`.
    pub fn health_checks(mut self, checks: HealthChecks) -> Self {
        self.checks = Some(checks);
        self
    }

    /// Serve the kubelet API with `server` while the node runs; the Node's
    /// daemon endpoint port becomes the server's bound port.
    pub fn kubelet_server(mut self, server: KubeletServer) -> Self {
        self.node.daemon_port = i32::from(server.local_addr().port());
        self.server = Some(server);
        self
    }

    /// Check the configuration and assemble the controllers.
    pub fn build(self) -> Result<VirtualNode, VirtualNodeError> {
        let name = self.node.name.clone();
        if !valid_dns_subdomain(&name) {
            return Err(VirtualNodeError::InvalidName(name));
        }
        let provider = self
            .provider
            .ok_or_else(|| VirtualNodeError::NoProvider(name.clone()))?;
        let node_provider = self
            .node_provider
            .unwrap_or_else(|| Arc::new(NaiveNodeProvider));
        let resources = self.resources.unwrap_or_else(|| {
            Arc::new(ApiResources::new(
                self.client.clone(),
                std::time::Duration::from_secs(30),
            ))
        });
        let pod_health = ControllerHealth::new();
        if let Some(checks) = &self.checks {
            checks.add(format!("pods/{name}"), pod_health.clone());
        }
        let informer = PodController::informer(self.client.clone(), &name);
        let mut pods = PodController::new(
            self.client.clone(),
            &informer,
            provider,
            name.clone(),
            self.pods,
        )
        .with_resources(resources)
        .with_health(pod_health);
        if let Some(metrics) = self.metrics {
            pods = pods.with_metrics(metrics);
        }
        let node = NodeController::new(self.client, node_provider, self.node);
        let (ready, _) = watch::channel(false);
        if let Some(checks) = &self.checks {
            let node_ready = node.ready();
            checks.add(format!("node/{name}"), move || {
                if *node_ready.borrow() {
                    Ok(())
                } else {
                    Err("the node is not registered yet".to_string())
                }
            });
        }
        Ok(VirtualNode {
            name,
            node,
            pods,
            ready,
            server: self.server,
        })
    }
}

/// A DNS subdomain (RFC 1123): what a Node name must be.
pub(crate) fn valid_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// One virtual node: its Node and Lease, and its pods.
pub struct VirtualNode {
    name: String,
    node: NodeController,
    pods: PodController,
    ready: watch::Sender<bool>,
    server: Option<KubeletServer>,
}

impl std::fmt::Debug for VirtualNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VirtualNode")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl VirtualNode {
    /// A builder for the node `node.name` with `client`.
    pub fn builder(client: kube::Client, node: NodeConfig) -> VirtualNodeBuilder {
        VirtualNodeBuilder {
            client,
            node,
            provider: None,
            node_provider: None,
            pods: PodControllerConfig::default(),
            resources: None,
            metrics: None,
            checks: None,
            server: None,
        }
    }

    /// The node name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Becomes true once the Node is registered and its pods are listed.
    pub fn ready(&self) -> watch::Receiver<bool> {
        self.ready.subscribe()
    }

    /// Run until `stop` becomes true, then stop both controllers (pods
    /// keep running in the provider; the Lease simply stops being renewed).
    pub async fn run(self, stop: watch::Receiver<bool>) -> Result<(), VirtualNodeError> {
        let mut node_ready = self.node.ready();
        let mut pods_ready = self.pods.ready();
        // The node reports Ready only once the pod controller has synced.
        let pods_synced = self.pods.ready();
        let ready = self.ready;
        let readiness = tokio::spawn(async move {
            let _ = node_ready.wait_for(|r| *r).await.map(|_| ());
            let _ = pods_ready.wait_for(|r| *r).await.map(|_| ());
            ready.send_replace(true);
        });
        let pods = tokio::spawn(self.pods.run(stop.clone()));
        let server = self.server.map(|s| tokio::spawn(s.run(stop.clone())));
        let node = self.node.ready_after(pods_synced).run(stop).await;
        if let Some(server) = server {
            server.abort();
        }
        if let Err(e) = pods.await {
            tracing::error!(node = %self.name, error = %e, "the pod controller task failed");
        }
        readiness.abort();
        node.map_err(VirtualNodeError::from)
    }
}
