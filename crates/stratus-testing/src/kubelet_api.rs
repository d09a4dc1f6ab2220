//! A virtual node whose kubelet API the harness can reach: the node's
//! InternalIP is 127.0.0.1, its kubelet API listens on a free loopback port
//! (written into the Node's daemon endpoint), trusts the harness's kubelet
//! client CA and reviews every request with the harness (TokenReview,
//! SubjectAccessReview, the kubelet's caches). `kubectl logs`, `exec`,
//! `attach` and `get --raw /api/v1/nodes/<node>/proxy/...` then work
//! through the harness like through kube-apiserver.
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

use std::sync::Arc;

use stratus_kubelet::VirtualNode;
use stratus_kubelet::api::{ApiAuth, KubeletApi, KubeletServer};
use stratus_kubelet::node::NodeConfig;
use stratus_kubelet::virtual_node::VirtualNodeBuilder;
use stratus_pod::PodLifecycleHandler;
use stratus_runtime::auth::{DelegatedAuth, DelegatedAuthConfig};

use crate::ApiServer;

/// Build a virtual node for `provider` on `server` with its kubelet API
/// bound on 127.0.0.1 (see the module docs). Run it with
/// [`VirtualNode::run`].
pub async fn virtual_node_with_api(
    server: &ApiServer,
    config: NodeConfig,
    provider: Arc<dyn PodLifecycleHandler>,
) -> Result<VirtualNode, Box<dyn std::error::Error + Send + Sync>> {
    Ok(virtual_node_builder_with_api(server, config, provider)
        .await?
        .build()?)
}

/// The same, as a builder with the provider and the kubelet API set, to
/// add a node provider, shared resources or metrics before
/// [`VirtualNodeBuilder::build`].
pub async fn virtual_node_builder_with_api(
    server: &ApiServer,
    mut config: NodeConfig,
    provider: Arc<dyn PodLifecycleHandler>,
) -> Result<VirtualNodeBuilder, Box<dyn std::error::Error + Send + Sync>> {
    let client = server.client();
    let auth = DelegatedAuth::new(client.clone(), DelegatedAuthConfig::kubelet());
    let api = KubeletApi::new(
        config.name.clone(),
        provider.clone(),
        client.clone(),
        ApiAuth::delegated(auth),
    );
    let kubelet = KubeletServer::builder(api)
        .bind(([127, 0, 0, 1], 0).into())
        .client_ca(server.kubelet_client_ca_pem())
        .start()
        .await?;
    config.internal_ip = Some("127.0.0.1".into());
    Ok(VirtualNode::builder(client, config)
        .provider(provider)
        .kubelet_server(kubelet))
}
