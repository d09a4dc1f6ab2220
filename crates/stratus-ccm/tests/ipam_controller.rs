//! The node-ipam controller against the harness.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use stratus_ccm::informers::SharedInformers;
use stratus_ccm::ipam::{IpamConfigError, NodeIpamConfig, NodeIpamController};
use stratus_testing::eventually;
use stratus_testing::{NodeSpec, TestCluster};
use tokio::sync::watch;

/// The controller under test, reading Nodes through an informer of its own.
fn controller(
    cluster: &TestCluster,
    config: NodeIpamConfig,
) -> Result<NodeIpamController, IpamConfigError> {
    NodeIpamController::new(
        cluster.client(),
        SharedInformers::new(cluster.client()).nodes(),
        config,
    )
}

/// How long a test waits for the controllers to converge.
const WAIT: Duration = Duration::from_secs(10);

async fn pod_cidrs(nodes: &Api<Node>, name: &str) -> Vec<String> {
    nodes
        .get(name)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.pod_cidrs)
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocates_releases_and_reports_exhaustion() {
    let cluster = TestCluster::start().await.unwrap();
    let hb = Duration::from_secs(3600);
    let nodes: Api<Node> = Api::all(cluster.client());
    // An existing node already holds the first /24.
    let _pre = cluster
        .add_node(NodeSpec::new("pre").with_heartbeat(hb))
        .await
        .unwrap();
    nodes
        .patch(
            "pre",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"podCIDR": "10.244.0.0/24", "podCIDRs": ["10.244.0.0/24"]}}),
            ),
        )
        .await
        .unwrap();
    // Four /24s, the last one excluded as the service range: two are left.
    let mut config = NodeIpamConfig::new(vec!["10.244.0.0/22".parse().unwrap()]);
    config.service_cidrs = vec!["10.244.3.0/24".parse().unwrap()];
    let (_stop, stopped) = watch::channel(false);
    tokio::spawn(controller(&cluster, config).unwrap().run(stopped));

    let _a = cluster
        .add_node(NodeSpec::new("a").with_heartbeat(hb))
        .await
        .unwrap();
    eventually("a's CIDR", WAIT, || async {
        !pod_cidrs(&nodes, "a").await.is_empty()
    })
    .await;
    let _b = cluster
        .add_node(NodeSpec::new("b").with_heartbeat(hb))
        .await
        .unwrap();
    eventually("b's CIDR", WAIT, || async {
        !pod_cidrs(&nodes, "b").await.is_empty()
    })
    .await;
    let mut given = vec![pod_cidrs(&nodes, "a").await, pod_cidrs(&nodes, "b").await];
    given.sort();
    assert_eq!(given, [vec!["10.244.1.0/24"], vec!["10.244.2.0/24"]]);
    let a = nodes.get("a").await.unwrap().spec.unwrap();
    assert_eq!(
        a.pod_cidr,
        a.pod_cidrs.and_then(|c| c.first().cloned()),
        "podCIDR is the first of podCIDRs"
    );

    // No CIDR left for c: CIDRNotAvailable, from cidrAllocator.
    let _c = cluster
        .add_node(NodeSpec::new("c").with_heartbeat(hb))
        .await
        .unwrap();
    let events: Api<Event> = Api::namespaced(cluster.client(), "default");
    eventually("CIDRNotAvailable", WAIT, || async {
        events
            .list(&ListParams::default().fields("reason=CIDRNotAvailable"))
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| {
                e.involved_object.name.as_deref() == Some("c")
                    && e.source.as_ref().and_then(|s| s.component.as_deref())
                        == Some("cidrAllocator")
                    && e.message.as_deref() == Some("Node c status is now: CIDRNotAvailable")
            })
    })
    .await;
    assert!(pod_cidrs(&nodes, "c").await.is_empty());

    // a is deleted: its CIDR goes to c on a retry.
    let a_cidr = pod_cidrs(&nodes, "a").await;
    nodes.delete("a", &DeleteParams::default()).await.unwrap();
    eventually("c gets a's CIDR", WAIT, || async {
        pod_cidrs(&nodes, "c").await == a_cidr
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dual_stack_nodes_get_one_cidr_per_family() {
    let cluster = TestCluster::start().await.unwrap();
    let nodes: Api<Node> = Api::all(cluster.client());
    let mut config = NodeIpamConfig::new(vec![
        "10.244.0.0/16".parse().unwrap(),
        "fd00:10:244::/56".parse().unwrap(),
    ]);
    config.node_cidr_mask_size_ipv4 = 25;
    let (_stop, stopped) = watch::channel(false);
    tokio::spawn(controller(&cluster, config).unwrap().run(stopped));
    let _n = cluster
        .add_node(NodeSpec::new("n").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    eventually("both CIDRs", WAIT, || async {
        pod_cidrs(&nodes, "n").await.len() == 2
    })
    .await;
    assert_eq!(
        pod_cidrs(&nodes, "n").await,
        ["10.244.0.0/25", "fd00:10:244::/64"]
    );
}

#[test]
fn invalid_settings_are_typed_errors() {
    let c = |s: &str| s.parse().unwrap();
    assert_eq!(
        NodeIpamConfig::new(vec![]).cidr_sets().unwrap_err(),
        IpamConfigError::NoClusterCidr
    );
    assert_eq!(
        NodeIpamConfig::new(vec![c("10.0.0.0/8"), c("fd00::/48"), c("10.1.0.0/16")])
            .cidr_sets()
            .unwrap_err(),
        IpamConfigError::TooManyClusterCidrs(3)
    );
    let mut config = NodeIpamConfig::new(vec![c("10.0.0.0/8")]);
    config.node_cidr_mask_size_ipv4 = 26;
    let err = config.cidr_sets().unwrap_err();
    assert!(matches!(err, IpamConfigError::Mask(_)));
    assert!(err.to_string().contains("at most 16 bits"), "{err}");
}
