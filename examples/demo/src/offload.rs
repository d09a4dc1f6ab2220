//! The demo's offload node: a second in-process API server plays the
//! remote cluster (a scheduler and one node, `remote-0`, whose pods run on
//! `MockPodProvider`), and `vk-offload` in the demo cluster offloads its
//! pods there (`stratus-provider-kubernetes`, namespaces prefixed `home-`).
//! The summary reads the offloaded pods' log through the demo cluster's API
//! server, as `kubectl logs` does.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, PostParams};
use stratus_kubelet::VirtualNode;
use stratus_kubelet::node::NodeConfig;
use stratus_kubelet::resources::ApiResources;
use stratus_pod::{PodLifecycleHandler, PodResources};
use stratus_provider_kubernetes::naming::NODE_LABEL;
use stratus_provider_kubernetes::{
    KubernetesProvider, NamespaceMapping, OffloadConfig, PROVIDER_NAME, RemoteNode,
};
use stratus_testing::kubelet_api::{KubeletApiSite, virtual_node_builder_at};
use stratus_testing::{MockPodProvider, TestCluster};
use tokio::sync::watch;

/// The offload node's name.
pub(crate) const OFFLOAD_NODE: &str = "vk-offload";
/// The remote cluster's node.
const REMOTE_NODE: &str = "remote-0";
/// The remote namespace prefix.
const PREFIX: &str = "home-";
/// The line each offloaded container logs (the mock provider's log
/// annotation, carried to the remote pod).
const GREETING: &str = "hello from the remote cluster";

/// The remote cluster and the offload node.
pub(crate) struct OffloadDemo {
    /// The offload node's task.
    pub(crate) task: tokio::task::JoinHandle<Result<(), stratus_kubelet::VirtualNodeError>>,
    /// The remote cluster (kept alive for the demo's length).
    remote: TestCluster,
    /// The remote node's task.
    remote_node: tokio::task::JoinHandle<Result<(), stratus_kubelet::VirtualNodeError>>,
    /// The offloaded pods' names.
    pods: Vec<String>,
}

/// Offload node `name` at `home` (its kubelet API served) for the cluster
/// `remote` talks to, remote namespaces prefixed `prefix`, the remote
/// capacity as its node provider: built, not yet running.
pub async fn offload_node(
    home: &KubeletApiSite,
    name: &str,
    remote: kube::Client,
    prefix: &str,
) -> Result<VirtualNode, String> {
    let config = OffloadConfig {
        namespaces: NamespaceMapping::Prefix(prefix.into()),
        capacity_refresh_seconds: 5,
        ..OffloadConfig::default()
    };
    let resources: Arc<dyn PodResources> = Arc::new(ApiResources::new(
        home.client.clone(),
        Duration::from_secs(60),
    ));
    let provider = KubernetesProvider::builder(remote.clone(), name)
        .config(config.clone())
        .host_ip("127.0.0.1")
        .resources(resources.clone())
        .start();
    let capacity = RemoteNode::connect(remote, name, &config)
        .await
        .map_err(|e| format!("offload node {name}: the remote capacity: {e}"))?;
    let mut node_config = NodeConfig::new(name, PROVIDER_NAME);
    node_config.labels.insert(
        "node.kubernetes.io/exclude-from-external-load-balancers".into(),
        "true".into(),
    );
    virtual_node_builder_at(
        home,
        node_config,
        Arc::new(provider) as Arc<dyn PodLifecycleHandler>,
    )
    .await
    .map_err(|e| format!("offload node {name}: {e}"))?
    .resources(resources)
    .node_provider(Arc::new(capacity))
    .build()
    .map_err(|e| format!("offload node {name}: {e}"))
}

/// Start the remote cluster, `vk-offload` on `home`, and `count` pods in
/// `namespace` that the scheduler binds to it.
pub(crate) async fn start(
    home: &KubeletApiSite,
    namespace: &str,
    count: usize,
    stopped: watch::Receiver<bool>,
) -> Result<OffloadDemo, String> {
    let mut remote = TestCluster::start()
        .await
        .map_err(|e| format!("the remote cluster: {e}"))?;
    remote.start_scheduler();
    let mut remote_config = NodeConfig::new(REMOTE_NODE, "mock");
    remote_config.taint = None;
    let remote_pods = Arc::new(MockPodProvider::new().with_node_name(REMOTE_NODE))
        as Arc<dyn PodLifecycleHandler>;
    let remote_vk = stratus_testing::kubelet_api::virtual_node_with_api(
        remote.server(),
        remote_config,
        remote_pods,
    )
    .await
    .map_err(|e| format!("the remote node: {e}"))?;
    let remote_node = tokio::spawn(remote_vk.run(stopped.clone()));

    let vk = offload_node(home, OFFLOAD_NODE, remote.client(), PREFIX).await?;
    let task = tokio::spawn(vk.run(stopped));

    let maps: Api<ConfigMap> = Api::namespaced(home.client.clone(), namespace);
    let settings: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "offload-settings"},
        "data": {"GREETING": GREETING},
    }))
    .map_err(|e| e.to_string())?;
    maps.create(&PostParams::default(), &settings)
        .await
        .map_err(|e| format!("creating offload-settings: {e}"))?;
    let pods_api: Api<Pod> = Api::namespaced(home.client.clone(), namespace);
    let mut pods = Vec::with_capacity(count);
    for i in 0..count {
        let name = format!("burst-{i}");
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": name,
                "labels": {"app": "burst"},
                "annotations": {stratus_testing::mock_pod_provider::LOG_ANNOTATION: GREETING},
            },
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": OFFLOAD_NODE},
                "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists", "effect": "NoSchedule"}],
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": "app", "image": "nginx",
                    "envFrom": [{"configMapRef": {"name": "offload-settings"}}],
                    "volumeMounts": [{"name": "settings", "mountPath": "/etc/settings"}],
                }],
                "volumes": [{"name": "settings", "configMap": {"name": "offload-settings"}}],
            },
        }))
        .map_err(|e| e.to_string())?;
        pods_api
            .create(&PostParams::default(), &pod)
            .await
            .map_err(|e| format!("creating {name}: {e}"))?;
        pods.push(name);
    }
    Ok(OffloadDemo {
        task,
        remote,
        remote_node,
        pods,
    })
}

impl OffloadDemo {
    /// Wait until every pod runs at home and remotely, then read one's log
    /// through the home API server: the summary line, or why not.
    pub(crate) async fn check(&self, home: &Api<Pod>, wait: Duration) -> Result<String, String> {
        let deadline = tokio::time::Instant::now() + wait;
        let remote: Api<Pod> = Api::all(self.remote.client());
        let selector = ListParams::default().labels(&format!("{NODE_LABEL}={OFFLOAD_NODE}"));
        let (home_running, remote_running) = loop {
            let home_running = home
                .list(&ListParams::default().labels("app=burst"))
                .await
                .map_err(|e| format!("listing the offloaded pods: {e}"))?
                .items
                .iter()
                .filter(|p| running(p))
                .count();
            let remote_pods = remote
                .list(&selector)
                .await
                .map_err(|e| format!("listing the remote pods: {e}"))?
                .items;
            let remote_running = remote_pods.iter().filter(|p| running(p)).count();
            if home_running == self.pods.len() && remote_running == self.pods.len() {
                break (home_running, remote_running);
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!(
                    "{home_running}/{} offloaded pods Running at home, {remote_running} remotely, after {wait:?}",
                    self.pods.len()
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let Some(first) = self.pods.first() else {
            return Ok("no pods offloaded".into());
        };
        let remote_maps: Api<ConfigMap> = Api::all(self.remote.client());
        let copies = remote_maps
            .list(&selector)
            .await
            .map_err(|e| format!("listing the remote ConfigMaps: {e}"))?
            .items
            .len();
        let log = home
            .logs(first, &Default::default())
            .await
            .map_err(|e| format!("the log of {first} through the home API server: {e}"))?;
        if !log.contains(GREETING) {
            return Err(format!("the log of {first} lacks {GREETING:?}: {log:?}"));
        }
        Ok(format!(
            "{home_running}/{} Running at home, {remote_running} in the remote cluster's {PREFIX}<namespace>, \
             {copies} ConfigMap copied; log of {first}: {:?}",
            self.pods.len(),
            log.lines().last().unwrap_or_default()
        ))
    }

    /// Delete the offloaded pods and wait until they are gone at home and
    /// remotely.
    pub(crate) async fn delete_pods(&self, home: &Api<Pod>) {
        for name in &self.pods {
            let _ = home.delete(name, &Default::default()).await;
        }
        let remote: Api<Pod> = Api::all(self.remote.client());
        let selector = ListParams::default().labels(&format!("{NODE_LABEL}={OFFLOAD_NODE}"));
        for _ in 0..100 {
            let home_left = home
                .list(&ListParams::default().labels("app=burst"))
                .await
                .map(|l| l.items.len())
                .unwrap_or(usize::MAX);
            let remote_left = remote
                .list(&selector)
                .await
                .map(|l| l.items.len())
                .unwrap_or(usize::MAX);
            if home_left == 0 && remote_left == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eprintln!("warning: the offloaded pods were not all deleted within 10s");
    }

    /// Wait for the remote node after the demo's stop signal.
    pub(crate) async fn stop(self) -> Result<(), String> {
        let node = self.task.await;
        let _ = self.remote_node.await;
        match node {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("the offload node stopped with an error: {e}")),
            Err(e) => Err(format!("the offload node's task failed: {e}")),
        }
    }
}

fn running(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Running")
}
