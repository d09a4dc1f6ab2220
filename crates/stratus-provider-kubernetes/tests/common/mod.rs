//! Two harness clusters: a remote one with a scheduler and a node running
//! pods on `MockPodProvider` (its kubelet API reachable, for logs, exec and
//! port-forward), and a home one with the offload node.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use stratus_kubelet::node::NodeConfig;
use stratus_kubelet::resources::ApiResources;
use stratus_pod::{NodeProvider, PodLifecycleHandler, PodResources};
use stratus_provider_kubernetes::{KubernetesProvider, OffloadConfig, PROVIDER_NAME};
pub use stratus_testing::eventually;
use stratus_testing::kubelet_api::{virtual_node_builder_with_api, virtual_node_with_api};
use stratus_testing::{ApiServer, MockPodProvider, TestCluster};
use tokio::sync::watch;

pub const NODE: &str = "vk-offload";
pub const REMOTE_NODE: &str = "remote-0";

/// The remote cluster.
pub struct Remote {
    pub cluster: TestCluster,
    pub mock: Arc<MockPodProvider>,
    _stop: watch::Sender<bool>,
}

impl Remote {
    pub async fn start() -> Self {
        Self::on(ApiServer::start().await.unwrap()).await
    }

    /// A remote cluster that authorizes with RBAC, with the objects of
    /// `docs/deploy/offload-remote-rbac.yaml` applied.
    pub async fn with_rbac() -> Self {
        let remote = Self::on(ApiServer::builder().rbac().start().await.unwrap()).await;
        for object in stratus_provider_kubernetes::rbac::remote_rbac() {
            remote.cluster.server().seed(object).unwrap();
        }
        remote
    }

    /// A client with the offload node's documented identity
    /// (`stratus-offload/stratus-offload-node`'s token).
    pub async fn offload_node_client(&self) -> kube::Client {
        let token = self
            .cluster
            .server()
            .service_account_token("stratus-offload", "stratus-offload-node")
            .await
            .unwrap();
        self.cluster.server().client_with_token(&token).unwrap()
    }

    /// The requests the remote API server refused (401, 403).
    pub fn refused(&self) -> Vec<String> {
        self.cluster.server().refused_requests()
    }

    async fn on(server: ApiServer) -> Self {
        let mut cluster = TestCluster::from_server(server);
        cluster.start_scheduler();
        let mock = Arc::new(MockPodProvider::new().with_node_name(REMOTE_NODE));
        let mut config = NodeConfig::new(REMOTE_NODE, "mock");
        config.taint = None;
        let node = virtual_node_with_api(
            cluster.server(),
            config,
            mock.clone() as Arc<dyn PodLifecycleHandler>,
        )
        .await
        .unwrap();
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(node.run(stopped));
        // The remote node Ready, so its capacity counts from the start (a
        // busy machine registers it later than an offload node connects).
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(cluster.client());
        eventually(
            "the remote node Ready",
            Duration::from_secs(30),
            async || {
                nodes
                    .get_opt(REMOTE_NODE)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|n| n.status?.conditions)
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            },
        )
        .await;
        Self {
            cluster,
            mock,
            _stop: stop,
        }
    }

    pub fn client(&self) -> kube::Client {
        self.cluster.client()
    }

    pub fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client(), namespace)
    }

    /// Every remote pod the offload node made.
    pub async fn offloaded(&self) -> Vec<Pod> {
        self.offloaded_by(NODE).await
    }

    /// Every remote pod offload node `node` made.
    pub async fn offloaded_by(&self, node: &str) -> Vec<Pod> {
        let all: Api<Pod> = Api::all(self.client());
        all.list(&kube::api::ListParams::default().labels(&format!(
            "{}={node}",
            stratus_provider_kubernetes::naming::NODE_LABEL
        )))
        .await
        .unwrap()
        .items
    }
}

/// The home cluster's offload node.
pub struct Home {
    pub provider: KubernetesProvider,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Home {
    /// Start the offload node `vk-offload` on `api` for `remote` with the
    /// default configuration.
    pub async fn default_for(api: &ApiServer, remote: &Remote) -> Self {
        Self::start(api, remote.client(), OffloadConfig::default(), None, |_| {}).await
    }

    /// Start the offload node `vk-offload` on `api` for `remote`, with a
    /// node provider if given.
    pub async fn start(
        api: &ApiServer,
        remote: kube::Client,
        config: OffloadConfig,
        node: Option<Arc<dyn NodeProvider>>,
        tune: impl FnOnce(&mut NodeConfig),
    ) -> Self {
        Self::start_named(api, NODE, remote, config, node, tune).await
    }

    /// Start offload node `name` on `api` for `remote`.
    pub async fn start_named(
        api: &ApiServer,
        name: &str,
        remote: kube::Client,
        config: OffloadConfig,
        node: Option<Arc<dyn NodeProvider>>,
        tune: impl FnOnce(&mut NodeConfig),
    ) -> Self {
        let resources: Arc<dyn PodResources> =
            Arc::new(ApiResources::new(api.client(), Duration::from_secs(60)));
        let provider = KubernetesProvider::builder(remote, name)
            .config(config)
            .host_ip("127.0.0.1")
            .resources(resources.clone())
            .start();
        let mut node_config = NodeConfig::new(name, PROVIDER_NAME);
        tune(&mut node_config);
        let mut builder = virtual_node_builder_with_api(
            api,
            node_config,
            Arc::new(provider.clone()) as Arc<dyn PodLifecycleHandler>,
        )
        .await
        .unwrap()
        .resources(resources);
        if let Some(node) = node {
            builder = builder.node_provider(node);
        }
        let vk = builder.build().unwrap();
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let _ = vk.run(stopped).await;
        });
        Self {
            provider,
            stop,
            task,
        }
    }

    /// Stop the node and wait for it (the provider goes with it once
    /// dropped).
    pub async fn stop(self) {
        self.stop.send_replace(true);
        let _ = self.task.await;
    }
}

pub fn pod(name: &str, spec: serde_json::Value) -> Pod {
    let mut spec = spec;
    spec["nodeName"] = NODE.into();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }))
    .unwrap()
}

pub fn simple(name: &str) -> Pod {
    pod(
        name,
        serde_json::json!({
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": "nginx"}],
        }),
    )
}

pub async fn create(pods: &Api<Pod>, pod: Pod) {
    pods.create(&PostParams::default(), &pod).await.unwrap();
}

pub async fn phase(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.get_opt(name).await.ok()??.status?.phase
}

pub async fn running(pods: &Api<Pod>, name: &str) {
    eventually(
        &format!("{name} Running"),
        Duration::from_secs(30),
        async || phase(pods, name).await.as_deref() == Some("Running"),
    )
    .await;
}
