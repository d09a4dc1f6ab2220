//! The cloud-node controller against the harness API server and FakeCloud.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, ListParams};
use stratus_ccm::node::{NodeController, NodeControllerConfig};
use stratus_cloud::CloudErrorKind;
use stratus_testing::{FakeCloud, FakeInstance, NodeSpec, TestCluster, Verb};
use tokio::sync::watch;

async fn eventually<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    stratus_testing::eventually(what, Duration::from_secs(15), check).await;
}

fn tainted(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter()
                .any(|t| t.key == "node.cloudprovider.kubernetes.io/uninitialized")
        })
}

/// Whether no node carries the uninitialized taint any more.
async fn all_initialized(nodes: &Api<Node>) -> bool {
    nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .all(|n| !tainted(n))
}

fn start(cluster: &TestCluster, cloud: &FakeCloud) -> watch::Sender<bool> {
    let (stop, stopped) = watch::channel(false);
    let controller = NodeController::new(
        cluster.client(),
        Arc::new(cloud.clone()),
        NodeControllerConfig::default(),
    );
    tokio::spawn(controller.run(stopped));
    stop
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initializes_nodes_with_two_writes_and_batched_cloud_calls() {
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    let mut kubelets = Vec::new();
    for i in 0..20 {
        let name = format!("node-{i}");
        let mut inst = FakeInstance::new(&name).with_internal_ip(format!("10.0.0.{}", i + 1));
        inst.additional_labels
            .insert("fake.example/pool".into(), "general".into());
        inst.additional_labels
            .insert("node.kubernetes.io/forbidden".into(), "x".into());
        cloud.add_instance(inst);
        kubelets.push(
            cluster
                .add_node(NodeSpec::new(&name).with_heartbeat(Duration::from_secs(3600)))
                .await
                .unwrap(),
        );
    }
    cluster.server().clear_requests();
    let _stop = start(&cluster, &cloud);
    let nodes: Api<Node> = Api::all(cluster.client());
    eventually("every node initialized", || all_initialized(&nodes)).await;
    let node = nodes.get("node-3").await.unwrap();
    assert_eq!(
        node.spec.as_ref().unwrap().provider_id.as_deref(),
        Some("fake://node-3")
    );
    let labels = node.metadata.labels.unwrap();
    for (k, v) in [
        ("node.kubernetes.io/instance-type", "fake.small"),
        ("beta.kubernetes.io/instance-type", "fake.small"),
        ("topology.kubernetes.io/zone", "fake-1a"),
        ("failure-domain.beta.kubernetes.io/zone", "fake-1a"),
        ("topology.kubernetes.io/region", "fake-1"),
        ("failure-domain.beta.kubernetes.io/region", "fake-1"),
        ("fake.example/pool", "general"),
    ] {
        assert_eq!(labels.get(k).map(String::as_str), Some(v), "{k}");
    }
    assert!(!labels.contains_key("node.kubernetes.io/forbidden"));
    let addresses = node.status.unwrap().addresses.unwrap();
    assert_eq!(addresses[0].address, "10.0.0.4");

    // Writes: one metadata+spec patch per node from the controller.
    let patches = cluster.server().requests();
    let main: usize = patches
        .iter()
        .filter(|r| r.verb == Verb::Patch && r.resource == "nodes")
        .count();
    assert_eq!(main, 20);
    let status = patches
        .iter()
        .filter(|r| {
            r.verb == Verb::Patch
                && r.resource == "nodes/status"
                && r.name.as_deref() == Some("node-3")
        })
        .count();
    assert!(
        status <= 2,
        "one controller status patch (and at most one kubelet heartbeat): {status}"
    );
    // Cloud calls: batched.
    let calls = cloud.calls();
    assert!(calls.len() < 20, "{} cloud calls for 20 nodes", calls.len());
    // The Synced event.
    let events: Api<Event> = Api::namespaced(cluster.client(), "default");
    eventually("Synced events", || async {
        let list = events
            .list(&ListParams::default().fields("reason=Synced"))
            .await
            .unwrap();
        list.items.len() == 20
            && list.items.iter().all(|e| {
                e.source.as_ref().and_then(|s| s.component.as_deref())
                    == Some("cloud-node-controller")
                    && e.message.as_deref() == Some("Node synced successfully")
            })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_keep_the_taint_until_the_cloud_answers() {
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    cloud.set_batching(false, 1);
    // A node whose provided node IP the cloud does not know.
    cloud.add_instance(FakeInstance::new("ip-mismatch").with_internal_ip("10.0.0.9"));
    let mut spec = NodeSpec::new("ip-mismatch")
        .with_internal_ip("10.0.0.8")
        .with_heartbeat(Duration::from_secs(3600));
    spec.provided_node_ip = true;
    let _k1 = cluster.add_node(spec).await.unwrap();
    // A node with no instance yet.
    let _k2 = cluster
        .add_node(NodeSpec::new("late").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    // A node whose first two lookups fail, then succeed.
    cloud.add_instance(FakeInstance::new("flaky"));
    let _k3 = cluster
        .add_node(NodeSpec::new("flaky").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    cloud.fail_next(
        "instance_metadata",
        CloudErrorKind::Throttled {
            retry_after: Some(Duration::from_millis(100)),
        },
        2,
    );
    let _stop = start(&cluster, &cloud);
    let nodes: Api<Node> = Api::all(cluster.client());
    eventually("flaky initialized", || async {
        !tainted(&nodes.get("flaky").await.unwrap())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(tainted(&nodes.get("ip-mismatch").await.unwrap()));
    assert!(tainted(&nodes.get("late").await.unwrap()));

    cloud.update_instance("ip-mismatch", |i| {
        i.addresses[0].address = "10.0.0.8".into();
    });
    cloud.add_instance(FakeInstance::new("late"));
    eventually("the others initialized after retries", || async {
        !tainted(&nodes.get("ip-mismatch").await.unwrap())
            && !tainted(&nodes.get("late").await.unwrap())
    })
    .await;
    let n = nodes.get("ip-mismatch").await.unwrap();
    let addrs = n.status.unwrap().addresses.unwrap();
    assert_eq!(addrs[0].address, "10.0.0.8");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn addresses_are_refreshed_in_batches() {
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    let mut kubelets = Vec::new();
    for i in 0..6 {
        let name = format!("r{i}");
        cloud.add_instance(FakeInstance::new(&name).with_internal_ip(format!("10.1.0.{i}")));
        kubelets.push(
            cluster
                .add_node(NodeSpec::new(&name).with_heartbeat(Duration::from_secs(3600)))
                .await
                .unwrap(),
        );
    }
    cloud.set_batching(true, 4);
    let (_stop, stopped) = watch::channel(false);
    let config = NodeControllerConfig {
        status_update_frequency: Duration::from_millis(300),
        ..Default::default()
    };
    tokio::spawn(
        NodeController::new(cluster.client(), Arc::new(cloud.clone()), config).run(stopped),
    );
    let nodes: Api<Node> = Api::all(cluster.client());
    eventually("initialized", || all_initialized(&nodes)).await;
    cloud.update_instance("r5", |i| i.addresses[0].address = "10.9.9.9".into());
    cloud.clear_calls();
    eventually("the new address", || async {
        nodes
            .get("r5")
            .await
            .unwrap()
            .status
            .unwrap()
            .addresses
            .unwrap()
            .iter()
            .any(|a| a.address == "10.9.9.9")
    })
    .await;
    // A pass over 6 nodes in batches of 4 is 2 calls, never 6.
    let calls = cloud.calls();
    assert!(
        calls.iter().all(|c| c.method == "instance_metadata_batch"),
        "{calls:?}"
    );
    assert!(calls.iter().any(|c| c.batch_size == 4), "{calls:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialization_survives_api_faults() {
    use stratus_testing::{Fault, FaultAction};
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    let mut kubelets = Vec::new();
    for i in 0..10 {
        let name = format!("f{i}");
        cloud.add_instance(FakeInstance::new(&name));
        kubelets.push(
            cluster
                .add_node(NodeSpec::new(&name).with_heartbeat(Duration::from_secs(3600)))
                .await
                .unwrap(),
        );
    }
    // Half of the node patches fail with 500, some with 409; watches drop.
    let server = cluster.server();
    server.inject(
        Fault::new(Some(Verb::Patch), Some("nodes"), FaultAction::Error(500))
            .with_rate(0.5)
            .times(20),
    );
    server.inject(
        Fault::new(Some(Verb::Patch), Some("nodes"), FaultAction::Error(409))
            .with_rate(0.3)
            .times(5),
    );
    let _stop = start(&cluster, &cloud);
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.drop_watches();
    server.compact();
    let nodes: Api<Node> = Api::all(cluster.client());
    eventually("every node initialized despite the faults", || {
        all_initialized(&nodes)
    })
    .await;
    let failed = server
        .requests()
        .iter()
        .filter(|r| r.verb == Verb::Patch && r.status >= 400)
        .count();
    assert!(failed > 0, "faults were injected");
}
