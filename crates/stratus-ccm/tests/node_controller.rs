//! The cloud-node controller against the harness API server and FakeCloud.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, ListParams};
use stratus_ccm::Instrumented;
use stratus_ccm::informers::SharedInformers;
use stratus_ccm::node::{NodeController, NodeControllerConfig};
use stratus_cloud::CloudErrorKind;
use stratus_cloud::CloudProvider as _;
use stratus_testing::eventually;
use stratus_testing::{FakeCloud, FakeInstance, NodeSpec, TestCluster, Verb};
use tokio::sync::watch;

/// The controller under test, reading Nodes through an informer of its own.
fn controller(
    cluster: &TestCluster,
    cloud: std::sync::Arc<dyn stratus_cloud::CloudProvider>,
    config: NodeControllerConfig,
) -> NodeController {
    NodeController::new(
        cluster.client(),
        SharedInformers::new(cluster.client()).nodes(),
        cloud,
        config,
    )
}

/// How long a test waits for the controllers to converge.
const WAIT: Duration = Duration::from_secs(15);

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
    let controller = controller(
        cluster,
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
    eventually("every node initialized", WAIT, || all_initialized(&nodes)).await;
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
    eventually("Synced events", WAIT, || async {
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
    eventually("flaky initialized", WAIT, || async {
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
    eventually("the others initialized after retries", WAIT, || async {
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
    tokio::spawn(controller(&cluster, Arc::new(cloud.clone()), config).run(stopped));
    let nodes: Api<Node> = Api::all(cluster.client());
    eventually("initialized", WAIT, || all_initialized(&nodes)).await;
    cloud.update_instance("r5", |i| i.addresses[0].address = "10.9.9.9".into());
    cloud.clear_calls();
    eventually("the new address", WAIT, || async {
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
    eventually("every node initialized despite the faults", WAIT, || {
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

/// The value of a sample in the text exposition (0 if absent).
fn sample(text: &str, name_and_labels: &str) -> f64 {
    stratus_testing::metric_sample(text, name_and_labels).unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_are_refreshed_when_enabled_and_metrics_reported() {
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    let mut inst = FakeInstance::new("n1").with_internal_ip("10.0.0.1");
    inst.additional_labels
        .insert("example.com/pool".into(), "gpu".into());
    inst.additional_labels
        .insert("example.com/rack".into(), "r1".into());
    cloud.add_instance(inst);
    let mut spec = NodeSpec::new("n1").with_heartbeat(Duration::from_secs(3600));
    spec.labels
        .insert("example.com/team".into(), "payments".into());
    let _kubelet = cluster.add_node(spec).await.unwrap();

    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = stratus_ccm::metrics::CcmMetrics::register(&mut registry);
    let (_stop, stopped) = watch::channel(false);
    let config = NodeControllerConfig {
        status_update_frequency: Duration::from_millis(300),
        refresh_labels: true,
        ..Default::default()
    };
    tokio::spawn(
        controller(&cluster, Arc::new(cloud.clone()), config)
            .with_metrics(metrics)
            .run(stopped),
    );
    let nodes: Api<Node> = Api::all(cluster.client());
    eventually("initialized", WAIT, || all_initialized(&nodes)).await;
    let node = nodes.get("n1").await.unwrap();
    let annotations = node.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations[stratus_ccm::node::MANAGED_LABELS_ANNOTATION],
        "example.com/pool,example.com/rack"
    );

    // The instance is resized and moved to another pool; the rack label
    // disappears from the cloud; someone else owns the team label.
    cloud.update_instance("n1", |i| {
        i.instance_type = "fake.large".into();
        i.additional_labels
            .insert("example.com/pool".into(), "cpu".into());
        i.additional_labels.remove("example.com/rack");
        i.additional_labels
            .insert("example.com/team".into(), "cloud-says".into());
    });
    eventually("the labels refreshed", WAIT, || async {
        let labels = nodes
            .get("n1")
            .await
            .unwrap()
            .metadata
            .labels
            .unwrap_or_default();
        labels
            .get("node.kubernetes.io/instance-type")
            .map(String::as_str)
            == Some("fake.large")
            && labels
                .get("beta.kubernetes.io/instance-type")
                .map(String::as_str)
                == Some("fake.large")
            && labels.get("example.com/pool").map(String::as_str) == Some("cpu")
            && !labels.contains_key("example.com/rack")
    })
    .await;
    let node = nodes.get("n1").await.unwrap();
    let labels = node.metadata.labels.unwrap_or_default();
    assert_eq!(labels["example.com/team"], "payments", "never overwritten");
    assert_eq!(
        node.metadata.annotations.unwrap_or_default()[stratus_ccm::node::MANAGED_LABELS_ANNOTATION],
        "example.com/pool"
    );

    let text = stratus_runtime::metrics::encode_text(&registry).unwrap();
    assert_eq!(
        sample(
            &text,
            "node_controller_cloud_provider_taint_removal_delay_seconds_count"
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "node_controller_initial_node_sync_delay_seconds_count"
        ),
        1.0
    );
    assert!(sample(&text, "workqueue_adds_total{name=\"Nodes\"}") >= 1.0);
    assert!(
        sample(
            &text,
            "stratus_cloud_provider_requests_total{method=\"instance_metadata\",result=\"ok\"}"
        ) >= 2.0
    );
    assert_eq!(
        sample(
            &text,
            "stratus_reconcile_total{controller=\"cloud-node-controller\",result=\"success\"}"
        ),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_watch_makes_the_controller_unhealthy_until_it_recovers() {
    use stratus_runtime::health::{ControllerHealth, HealthCheck};
    use stratus_testing::{Fault, FaultAction};
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    // The Node list is refused, as without RBAC.
    cluster.server().inject(Fault::new(
        Some(Verb::List),
        Some("nodes"),
        FaultAction::Error(403),
    ));
    let health = ControllerHealth::new().watch_grace(Duration::from_millis(100));
    let (_stop, stopped) = watch::channel(false);
    tokio::spawn(
        controller(
            &cluster,
            Arc::new(cloud.clone()),
            NodeControllerConfig::default(),
        )
        .with_health(health.clone())
        .run(stopped),
    );
    eventually("unhealthy", WAIT, || async {
        health.check().is_err_and(|e| e.contains("403"))
    })
    .await;
    cluster.server().clear_faults();
    eventually("healthy again", WAIT, || async { health.check().is_ok() }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_input_gets_one_event_and_backed_off_retries() {
    use kube::api::{Patch, PatchParams};
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("bad-ip").with_internal_ip("10.0.0.1"));
    let _kubelet = cluster
        .add_node(NodeSpec::new("bad-ip").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(cluster.client());
    nodes
        .patch(
            "bad-ip",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": {"alpha.kubernetes.io/provided-node-ip": "not-an-ip"}}})),
        )
        .await
        .unwrap();
    let _stop = start(&cluster, &cloud);
    let events: Api<Event> = Api::namespaced(cluster.client(), "default");
    eventually("the InitializationFailed event", WAIT, || async {
        !events
            .list(&ListParams::default().fields("reason=InitializationFailed"))
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let failed = events
        .list(&ListParams::default().fields("reason=InitializationFailed"))
        .await
        .unwrap()
        .items;
    assert_eq!(failed.len(), 1, "one event, not one per retry");
    assert!(
        failed[0]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("not-an-ip")),
        "{:?}",
        failed[0].message
    );
    // Backoff from 5 ms doubling: about ten attempts in two seconds, not a
    // hot loop.
    let attempts = cloud.calls_to("instance_metadata");
    assert!((2..=14).contains(&attempts), "{attempts} attempts");
    assert!(
        tainted(&nodes.get("bad-ip").await.unwrap()),
        "the taint stays"
    );
}

/// A cloud that does not list an instance yet: `instance_metadata` answers
/// `Ok(None)` (the node is skipped, not retried) until `listed` is set.
struct NotListedYet {
    cloud: FakeCloud,
    listed: std::sync::atomic::AtomicBool,
    asked: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl stratus_cloud::InstancesV2 for NotListedYet {
    async fn instance_exists(&self, node: &Node) -> stratus_cloud::Result<bool> {
        self.cloud.instance_exists(node).await
    }
    async fn instance_shutdown(&self, node: &Node) -> stratus_cloud::Result<bool> {
        self.cloud.instance_shutdown(node).await
    }
    async fn instance_metadata(
        &self,
        node: &Node,
    ) -> stratus_cloud::Result<Option<stratus_cloud::InstanceMetadata>> {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if !self.listed.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(None);
        }
        self.cloud.instance_metadata(node).await
    }
}

impl stratus_cloud::CloudProvider for NotListedYet {
    fn provider_name(&self) -> &str {
        "fake"
    }
    fn instances_v2(&self) -> Option<&dyn stratus_cloud::InstancesV2> {
        Some(self)
    }
}

/// Starts a node controller for a cloud that lists `late` only once asked;
/// answers whether the node got initialized after it was listed.
async fn initialized_once_listed(resync_period: Option<Duration>) -> bool {
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("late").with_internal_ip("10.0.0.9"));
    let provider = Arc::new(NotListedYet {
        cloud: cloud.clone(),
        listed: false.into(),
        asked: 0.into(),
    });
    let _kubelet = cluster
        .add_node(NodeSpec::new("late").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    let (_stop, stopped) = watch::channel(false);
    let config = NodeControllerConfig {
        resync_period,
        ..Default::default()
    };
    tokio::spawn(controller(&cluster, provider.clone(), config).run(stopped));
    let nodes: Api<Node> = Api::all(cluster.client());
    // Skipped: the cloud does not know the instance yet.
    eventually("the node looked at", WAIT, || async {
        provider.asked.load(std::sync::atomic::Ordering::SeqCst) > 0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(tainted(&nodes.get("late").await.unwrap()));
    provider
        .listed
        .store(true, std::sync::atomic::Ordering::SeqCst);
    // Nothing about the Node changes from here on.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while tokio::time::Instant::now() < deadline {
        if !tainted(&nodes.get("late").await.unwrap()) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skipped_node_is_initialized_at_the_next_resync_only() {
    assert!(
        initialized_once_listed(Some(Duration::from_millis(300))).await,
        "with a resync, the skipped node is looked at again"
    );
    assert!(
        !initialized_once_listed(None).await,
        "without one, a skipped node waits for a change (as Go)"
    );
}

/// Go's `reconcileNodeLabels` on initialized Nodes: a beta topology or
/// instance-type label whose GA twin is missing or differs has the GA label
/// set to its value, on the Node's next change; a GA label without a beta
/// twin is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beta_labels_of_initialized_nodes_are_mirrored_to_their_ga_keys() {
    use kube::api::{Patch, PatchParams};
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    let mut spec = NodeSpec::new("old").with_heartbeat(Duration::from_secs(3600));
    spec.external_cloud_provider = false;
    for (k, v) in [
        ("failure-domain.beta.kubernetes.io/zone", "zone-b"),
        ("topology.kubernetes.io/zone", "zone-a"),
        ("failure-domain.beta.kubernetes.io/region", "region-1"),
    ] {
        spec.labels.insert(k.into(), v.into());
    }
    let _kubelet = cluster.add_node(spec).await.unwrap();
    let _stop = start(&cluster, &cloud);
    let nodes: Api<Node> = Api::all(cluster.client());
    let label = |n: &Node, k: &str| n.metadata.labels.as_ref().and_then(|l| l.get(k).cloned());
    eventually("the GA zone and region mirrored", WAIT, || async {
        let n = nodes.get("old").await.unwrap();
        label(&n, "topology.kubernetes.io/zone").as_deref() == Some("zone-b")
            && label(&n, "topology.kubernetes.io/region").as_deref() == Some("region-1")
    })
    .await;
    // A later change of a beta label is mirrored too.
    nodes
        .patch(
            "old",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {
                "beta.kubernetes.io/instance-type": "m5.large",
            }}})),
        )
        .await
        .unwrap();
    eventually("the GA instance type mirrored", WAIT, || async {
        let n = nodes.get("old").await.unwrap();
        label(&n, "node.kubernetes.io/instance-type").as_deref() == Some("m5.large")
    })
    .await;
    assert_eq!(
        cloud.calls().len(),
        0,
        "no cloud call for an initialized node"
    );
}

/// Go's `--concurrent-node-status-updates` (0: `--concurrent-node-syncs`):
/// a provider that does not batch is asked about that many nodes at once by
/// the periodic refresh; one at a time with the default of 1. A changed
/// order of the addresses (a new primary InternalIP) is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_refresh_asks_about_status_update_workers_nodes_at_once() {
    use k8s_openapi::api::core::v1::NodeAddress;
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    cloud.set_batching(false, 1);
    let mut kubelets = Vec::new();
    for i in 0..4 {
        let name = format!("p{i}");
        let mut instance = FakeInstance::new(&name).with_internal_ip(format!("10.2.0.{i}"));
        instance.addresses.push(NodeAddress {
            type_: "InternalIP".into(),
            address: format!("10.3.0.{i}"),
        });
        cloud.add_instance(instance);
        kubelets.push(
            cluster
                .add_node(NodeSpec::new(&name).with_heartbeat(Duration::from_secs(3600)))
                .await
                .unwrap(),
        );
    }
    let nodes: Api<Node> = Api::all(cluster.client());
    let run = |workers: usize| {
        let (stop, stopped) = watch::channel(false);
        let config = NodeControllerConfig {
            status_update_frequency: Duration::from_millis(200),
            status_update_workers: workers,
            ..Default::default()
        };
        tokio::spawn(controller(&cluster, Arc::new(cloud.clone()), config).run(stopped));
        stop
    };
    let stop = run(1);
    eventually("initialized", WAIT, || all_initialized(&nodes)).await;
    cloud.set_latency(Duration::from_millis(150));
    cloud.clear_calls();
    eventually("a whole pass", WAIT, || async {
        cloud.calls_to("instance_metadata") >= 4
    })
    .await;
    assert_eq!(
        cloud.peak_in_flight(),
        1,
        "Go's default: one node at a time"
    );
    drop(stop);

    let _stop = run(4);
    tokio::time::sleep(Duration::from_millis(300)).await;
    cloud.clear_calls();
    // The primary InternalIP changes: the same addresses in another order.
    cloud.update_instance("p2", |i| i.addresses.reverse());
    eventually("a pass with four nodes at once", WAIT, || async {
        cloud.peak_in_flight() == 4
    })
    .await;
    eventually("the new order written", WAIT, || async {
        let addresses = nodes
            .get("p2")
            .await
            .unwrap()
            .status
            .unwrap()
            .addresses
            .unwrap();
        addresses.first().map(|a| a.address.as_str()) == Some("10.3.0.2")
    })
    .await;
}

/// Go's V1 path for a provider with only the legacy `Instances`: an
/// `InstanceID` that is not implemented initializes the node by name,
/// without a provider ID; the periodic refresh calls only `NodeAddresses*`
/// (no instance type, no zone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_provider_initializes_by_name_and_refreshes_only_addresses() {
    use stratus_testing::fake_cloud::Capability;
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new().without(Capability::InstancesV2);
    let mut instance = FakeInstance::new("legacy").with_internal_ip("10.4.0.1");
    instance.zone = "zone-l".into();
    cloud.add_instance(instance);
    cloud.fail_next("instance_id", CloudErrorKind::NotImplemented, 1_000);
    let _kubelet = cluster
        .add_node(NodeSpec::new("legacy").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    let (_stop, stopped) = watch::channel(false);
    let config = NodeControllerConfig {
        status_update_frequency: Duration::from_millis(200),
        ..Default::default()
    };
    tokio::spawn(controller(&cluster, Arc::new(cloud.clone()), config).run(stopped));
    let nodes: Api<Node> = Api::all(cluster.client());
    eventually("initialized", WAIT, || all_initialized(&nodes)).await;
    let node = nodes.get("legacy").await.unwrap();
    assert_eq!(
        node.spec
            .as_ref()
            .unwrap()
            .provider_id
            .as_deref()
            .unwrap_or_default(),
        "",
        "no provider ID"
    );
    assert_eq!(
        node.metadata
            .labels
            .unwrap()
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("zone-l"),
        "the zone found by name"
    );
    cloud.clear_calls();
    eventually("refresh passes", WAIT, || async {
        cloud.calls_to("node_addresses") >= 2
    })
    .await;
    let methods: std::collections::BTreeSet<&str> =
        cloud.calls().iter().map(|c| c.method).collect();
    assert_eq!(
        methods,
        ["node_addresses"].into(),
        "a refresh asks only for the addresses"
    );
}

/// A cloud whose metadata renders provider IDs its own way (a vendor
/// mistake): `fake:///<name>` for a Node that carries `fake://<name>`.
struct OtherIds(FakeCloud);

#[async_trait::async_trait]
impl stratus_cloud::InstancesV2 for OtherIds {
    async fn instance_exists(&self, node: &Node) -> stratus_cloud::Result<bool> {
        self.0.instances_v2().unwrap().instance_exists(node).await
    }
    async fn instance_shutdown(&self, node: &Node) -> stratus_cloud::Result<bool> {
        self.0.instances_v2().unwrap().instance_shutdown(node).await
    }
    async fn instance_metadata(
        &self,
        node: &Node,
    ) -> stratus_cloud::Result<Option<stratus_cloud::InstanceMetadata>> {
        let meta = self
            .0
            .instances_v2()
            .unwrap()
            .instance_metadata(node)
            .await?;
        Ok(meta.map(|mut m| {
            m.provider_id = m.provider_id.replacen("fake://", "fake:///", 1);
            m
        }))
    }
}

impl stratus_cloud::CloudProvider for OtherIds {
    fn provider_name(&self) -> &str {
        "fake"
    }
    fn instances_v2(&self) -> Option<&dyn stratus_cloud::InstancesV2> {
        Some(self)
    }
}

/// Beyond Go, which keeps the Node's ID silently: metadata for another
/// provider ID than the Node carries is refused (the taint stays, an
/// `InitializationFailed` event names both IDs); addresses that are no IP
/// are not written (an `InvalidNodeAddress` event), the valid ones are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_provider_id_is_refused_and_invalid_addresses_dropped() {
    use k8s_openapi::api::core::v1::NodeAddress;
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    let mut odd = FakeInstance::new("odd").with_internal_ip("10.5.0.1");
    odd.addresses.insert(
        0,
        NodeAddress {
            type_: "InternalIP".into(),
            address: "10.0.0.999".into(),
        },
    );
    cloud.add_instance(odd);
    cloud.add_instance(FakeInstance::new("carried"));
    let mut carried = NodeSpec::new("carried").with_heartbeat(Duration::from_secs(3600));
    carried.provider_id = Some("fake://carried".into());
    let _a = cluster.add_node(carried).await.unwrap();
    let _b = cluster
        .add_node(NodeSpec::new("odd").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    let (_stop, stopped) = watch::channel(false);
    tokio::spawn(
        controller(
            &cluster,
            Arc::new(OtherIds(cloud.clone())),
            NodeControllerConfig::default(),
        )
        .run(stopped),
    );
    let nodes: Api<Node> = Api::all(cluster.client());
    let events: Api<Event> = Api::all(cluster.client());
    let event = |name: &'static str, reason: &'static str| {
        let events = events.clone();
        async move {
            events
                .list(
                    &ListParams::default()
                        .fields(&format!("involvedObject.name={name},reason={reason}")),
                )
                .await
                .unwrap()
                .items
                .into_iter()
                .next()
                .and_then(|e| e.message)
        }
    };
    eventually("the foreign ID refused with an event", WAIT, || async {
        event("carried", "InitializationFailed")
            .await
            .is_some_and(|m| m.contains("\"fake://carried\"") && m.contains("\"fake:///carried\""))
    })
    .await;
    let node = nodes.get("carried").await.unwrap();
    assert!(tainted(&node), "not initialized with another ID's metadata");
    assert_eq!(
        node.spec.unwrap().provider_id.as_deref(),
        Some("fake://carried")
    );

    // A Node without an ID takes the provider's; its invalid address is
    // dropped.
    eventually("odd initialized", WAIT, || async {
        !tainted(&nodes.get("odd").await.unwrap())
    })
    .await;
    let addresses: Vec<String> = nodes
        .get("odd")
        .await
        .unwrap()
        .status
        .unwrap()
        .addresses
        .unwrap()
        .into_iter()
        .map(|a| a.address)
        .collect();
    assert!(
        !addresses.contains(&"10.0.0.999".to_owned()),
        "{addresses:?}"
    );
    assert!(addresses.contains(&"10.5.0.1".to_owned()), "{addresses:?}");
    eventually("an InvalidNodeAddress event", WAIT, || async {
        event("odd", "InvalidNodeAddress")
            .await
            .is_some_and(|m| m.contains("10.0.0.999"))
    })
    .await;
}
