//! Two virtual nodes in one process, sharing a client, a resource cache and
//! a metrics registry: both register, run their own pods, report metrics
//! and health, and stop cleanly.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use prometheus_client::registry::Registry;
use stratus_kubelet::metrics::KubeletMetrics;
use stratus_kubelet::node::NodeConfig;
use stratus_kubelet::resources::ApiResources;
use stratus_kubelet::{VirtualNode, VirtualNodeError};
use stratus_runtime::health::HealthChecks;
use stratus_runtime::metrics::encode_text;
use stratus_testing::{ApiServer, MockPodProvider, eventually};
use tokio::sync::watch;

fn pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx"}]},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_virtual_nodes_share_a_process() {
    let api = ApiServer::start().await.unwrap();
    let client = api.client();
    let mut registry = Registry::default();
    let metrics = KubeletMetrics::register(&mut registry);
    let checks = HealthChecks::new();
    let resources = Arc::new(ApiResources::new(client.clone(), Duration::from_secs(30)));
    let (stop, stopped) = watch::channel(false);
    let mut providers = Vec::new();
    let mut tasks = Vec::new();
    let mut readiness = Vec::new();
    for name in ["vk-a", "vk-b"] {
        let provider = MockPodProvider::new();
        let node = VirtualNode::builder(client.clone(), NodeConfig::new(name, "mock"))
            .provider(Arc::new(provider.clone()))
            .resources(resources.clone())
            .metrics(metrics.clone())
            .health_checks(checks.clone())
            .build()
            .unwrap();
        readiness.push(node.ready());
        tasks.push(tokio::spawn(node.run(stopped.clone())));
        providers.push(provider);
    }
    for ready in &mut readiness {
        tokio::time::timeout(Duration::from_secs(10), ready.wait_for(|r| *r))
            .await
            .expect("ready in time")
            .unwrap();
    }
    let nodes: Api<Node> = Api::all(client.clone());
    assert!(nodes.get_opt("vk-a").await.unwrap().is_some());
    assert!(nodes.get_opt("vk-b").await.unwrap().is_some());
    assert!(checks.report().healthy(), "{:?}", checks.report());
    assert_eq!(
        checks.names(),
        ["node/vk-a", "node/vk-b", "pods/vk-a", "pods/vk-b"]
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("on-a", "vk-a"))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("on-b", "vk-b"))
        .await
        .unwrap();
    eventually(
        "each node runs its own pod",
        Duration::from_secs(10),
        || async {
            providers[0].pods().keys().collect::<Vec<_>>() == ["default/on-a"]
                && providers[1].pods().keys().collect::<Vec<_>>() == ["default/on-b"]
        },
    )
    .await;
    eventually("running in the API", Duration::from_secs(10), || async {
        pods.list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
    })
    .await;
    eventually("metrics of both nodes", Duration::from_secs(10), || async {
        let text = encode_text(&registry).unwrap();
        text.contains(
            "stratus_kubelet_provider_requests_total{method=\"create_pod\",result=\"ok\"} 2",
        ) && text.contains("workqueue_adds_total{name=\"pod-sync/vk-a\"}")
            && text.contains("workqueue_adds_total{name=\"pod-sync/vk-b\"}")
            && text.contains("stratus_kubelet_status_write_duration_seconds_count{node=\"vk-a\"}")
            && text.contains("stratus_kubelet_notification_to_write_seconds_count{node=\"vk-b\"}")
            && text.contains("stratus_kubelet_pods{node=\"vk-a\",phase=\"Running\"} 1")
            && text.contains("stratus_kubelet_events_dropped_total{node=\"vk-b\"} 0")
    })
    .await;

    stop.send(true).unwrap();
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("stopped in time")
            .unwrap()
            .unwrap();
    }
}

#[tokio::test]
async fn a_node_without_provider_or_with_a_bad_name_is_refused() {
    let api = ApiServer::start().await.unwrap();
    let err = VirtualNode::builder(api.client(), NodeConfig::new("vk-0", "mock"))
        .build()
        .unwrap_err();
    assert!(
        matches!(err, VirtualNodeError::NoProvider(ref n) if n == "vk-0"),
        "{err}"
    );
    let err = VirtualNode::builder(api.client(), NodeConfig::new("Bad_Name", "mock"))
        .provider(Arc::new(MockPodProvider::new()))
        .build()
        .unwrap_err();
    assert!(matches!(err, VirtualNodeError::InvalidName(_)), "{err}");
}

/// Go's node becomes Ready only after its pod controller is: while the
/// pod controller's first list of pods is held up, the Node is registered
/// with `Ready` `False` (`KubeletNotReady`), then reports `Ready` `True`
/// once the pods are listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_is_ready_only_after_the_pod_controller_synced() {
    use stratus_testing::{Fault, FaultAction, Verb};
    let api = ApiServer::start().await.unwrap();
    let client = api.client();
    api.inject(
        Fault::new(
            Some(Verb::List),
            Some("pods"),
            FaultAction::Latency(Duration::from_secs(2)),
        )
        .times(1),
    );
    let provider = MockPodProvider::new();
    let mut config = NodeConfig::new("vk-gated", "mock");
    config.status_interval = Duration::from_millis(200);
    let node = VirtualNode::builder(client.clone(), config)
        .provider(Arc::new(provider))
        .build()
        .unwrap();
    let (_stop, stopped) = watch::channel(false);
    tokio::spawn(node.run(stopped));
    let nodes: Api<Node> = Api::all(client.clone());
    let ready = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
    };
    eventually("registered, not Ready", Duration::from_secs(5), || async {
        nodes
            .get_opt("vk-gated")
            .await
            .unwrap()
            .and_then(|n| ready(&n))
            == Some(("False".into(), "KubeletNotReady".into()))
    })
    .await;
    eventually(
        "Ready once the pods are listed",
        Duration::from_secs(10),
        || async {
            ready(&nodes.get("vk-gated").await.unwrap())
                == Some(("True".into(), "KubeletReady".into()))
        },
    )
    .await;
}
