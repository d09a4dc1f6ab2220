//! A virtual node whose kubelet API an API server can reach: the node's
//! InternalIP is the site's address (127.0.0.1 for the harness), its
//! kubelet API listens there on a free port (written into the Node's daemon
//! endpoint), trusts the CA of the client certificate the API server
//! presents to kubelets and reviews every request with the API server
//! (TokenReview, SubjectAccessReview, the kubelet's caches). `kubectl
//! logs`, `exec`, `attach` and `get --raw /api/v1/nodes/<node>/proxy/...`
//! then work through the harness, and through kube-apiserver given a
//! [`KubeletApiSite`] with a non-loopback address (kube-apiserver does not
//! proxy to loopback addresses).
//!
//! ```no_run
//! use std::sync::Arc;
//! use stratus_kubelet::node::NodeConfig;
//! use stratus_testing::{ApiServer, MockPodProvider, kubelet_api::virtual_node_with_api};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let server = ApiServer::start().await?;
//! let provider = MockPodProvider::new().with_node_name("vk-0");
//! let node = virtual_node_with_api(&server, NodeConfig::new("vk-0", "mock"), Arc::new(provider)).await?;
//! let (_stop, stopped) = tokio::sync::watch::channel(false);
//! tokio::spawn(node.run(stopped));
//! # Ok(()) }
//! ```

use std::net::IpAddr;
use std::sync::Arc;

use stratus_kubelet::VirtualNode;
use stratus_kubelet::api::{ApiAuth, KubeletApi, KubeletServer};
use stratus_kubelet::node::NodeConfig;
use stratus_kubelet::virtual_node::VirtualNodeBuilder;
use stratus_pod::PodLifecycleHandler;
use stratus_runtime::auth::{DelegatedAuth, DelegatedAuthConfig};

use crate::ApiServer;

/// Where virtual nodes' kubelet APIs are served from, for one API server.
#[derive(Clone)]
pub struct KubeletApiSite {
    /// A client of the API server (the nodes' own, and their reviewer).
    pub client: kube::Client,
    /// The CA (PEM) of the client certificate the API server presents to
    /// kubelets (kube-apiserver's `--kubelet-client-certificate`).
    pub kubelet_client_ca_pem: String,
    /// The address the nodes advertise as InternalIP and bind.
    pub address: IpAddr,
}

impl std::fmt::Debug for KubeletApiSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeletApiSite")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl KubeletApiSite {
    /// The harness API server's: 127.0.0.1 and its kubelet client CA.
    pub fn harness(server: &ApiServer) -> Self {
        Self {
            client: server.client(),
            kubelet_client_ca_pem: server.kubelet_client_ca_pem().to_owned(),
            address: [127, 0, 0, 1].into(),
        }
    }
}

/// Build a virtual node for `provider` on `server` with its kubelet API
/// bound on 127.0.0.1 (see the module docs). Run it with
/// [`VirtualNode::run`].
pub async fn virtual_node_with_api(
    server: &ApiServer,
    config: NodeConfig,
    provider: Arc<dyn PodLifecycleHandler>,
) -> Result<VirtualNode, Box<dyn std::error::Error + Send + Sync>> {
    Ok(
        virtual_node_builder_at(&KubeletApiSite::harness(server), config, provider)
            .await?
            .build()?,
    )
}

/// The same, as a builder with the provider and the kubelet API set, to
/// add a node provider, shared resources or metrics before
/// [`VirtualNodeBuilder::build`].
pub async fn virtual_node_builder_with_api(
    server: &ApiServer,
    config: NodeConfig,
    provider: Arc<dyn PodLifecycleHandler>,
) -> Result<VirtualNodeBuilder, Box<dyn std::error::Error + Send + Sync>> {
    virtual_node_builder_at(&KubeletApiSite::harness(server), config, provider).await
}

/// A virtual node's builder for any API server: its kubelet API bound on a
/// free port of `site.address`, which the Node advertises as its
/// InternalIP.
pub async fn virtual_node_builder_at(
    site: &KubeletApiSite,
    mut config: NodeConfig,
    provider: Arc<dyn PodLifecycleHandler>,
) -> Result<VirtualNodeBuilder, Box<dyn std::error::Error + Send + Sync>> {
    let client = site.client.clone();
    let auth = DelegatedAuth::new(client.clone(), DelegatedAuthConfig::kubelet());
    let api = KubeletApi::new(
        config.name.clone(),
        provider.clone(),
        client.clone(),
        ApiAuth::delegated(auth),
    );
    let kubelet = KubeletServer::builder(api)
        .bind((site.address, 0).into())
        .client_ca(site.kubelet_client_ca_pem.clone())
        .start()
        .await?;
    config.internal_ip = Some(site.address.to_string());
    Ok(VirtualNode::builder(client, config)
        .provider(provider)
        .kubelet_server(kubelet))
}
