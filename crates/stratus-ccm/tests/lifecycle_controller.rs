//! The cloud-node-lifecycle controller against the harness and FakeCloud.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, ListParams};
use stratus_ccm::informers::SharedInformers;
use stratus_ccm::lifecycle::{LifecycleConfig, LifecycleController};
use stratus_cloud::InstanceState;
use stratus_testing::eventually;
use stratus_testing::{FakeCloud, FakeInstance, Fault, FaultAction, NodeSpec, TestCluster, Verb};
use tokio::sync::watch;

/// The controller under test, reading Nodes through an informer of its own.
fn controller(
    cluster: &TestCluster,
    cloud: std::sync::Arc<dyn stratus_cloud::CloudProvider>,
    config: LifecycleConfig,
) -> LifecycleController {
    LifecycleController::new(
        cluster.client(),
        SharedInformers::new(cluster.client()).nodes(),
        cloud,
        config,
    )
}

/// How long a test waits for the controllers to converge.
const WAIT: Duration = Duration::from_secs(10);

fn shutdown_tainted(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter().any(|t| {
                t.key == "node.cloudprovider.kubernetes.io/shutdown" && t.effect == "NoSchedule"
            })
        })
}

/// Register `name` with an instance in `cloud`, then let its kubelet report
/// NotReady and stop, as a machine that went away would.
async fn dead_node(cluster: &TestCluster, cloud: &FakeCloud, name: &str) {
    cloud.add_instance(FakeInstance::new(name));
    let kubelet = cluster
        .add_node(NodeSpec::new(name).with_heartbeat(Duration::from_millis(100)))
        .await
        .unwrap();
    kubelet.set_ready(false);
    tokio::time::sleep(Duration::from_millis(300)).await;
    kubelet.stop();
}

/// Run the controller with `period` between passes until the sender drops.
fn start(cluster: &TestCluster, cloud: &FakeCloud, period: Duration) -> watch::Sender<bool> {
    let (stop, stopped) = watch::channel(false);
    let config = LifecycleConfig {
        monitor_period: period,
        ..Default::default()
    };
    tokio::spawn(controller(cluster, Arc::new(cloud.clone()), config).run(stopped));
    stop
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_taint_and_deletion_of_gone_instances() {
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    let hb = Duration::from_millis(100);
    let mut kubelets = Vec::new();
    for name in ["healthy", "stopped", "vanished", "stuck"] {
        cloud.add_instance(FakeInstance::new(name));
        kubelets.push(
            cluster
                .add_node(NodeSpec::new(name).with_heartbeat(hb))
                .await
                .unwrap(),
        );
    }
    let _stop = start(&cluster, &cloud, Duration::from_millis(200));
    let nodes: Api<Node> = Api::all(cluster.client());

    // Ready nodes cost no cloud calls.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(cloud.calls().len(), 0, "{:?}", cloud.calls());

    // stopped: NotReady and shut down → shutdown taint; Ready again → removed.
    cloud.set_instance_state("stopped", InstanceState::ShutDown);
    kubelets[1].set_ready(false);
    eventually("the shutdown taint", WAIT, || async {
        shutdown_tainted(&nodes.get("stopped").await.unwrap())
    })
    .await;
    kubelets[1].set_ready(true);
    eventually("the shutdown taint removed", WAIT, || async {
        !shutdown_tainted(&nodes.get("stopped").await.unwrap())
    })
    .await;

    // vanished: NotReady and gone → deleted with DeletingNode; its kubelet stops.
    cloud.remove_instance("vanished");
    let vanished = kubelets.remove(2);
    vanished.set_ready(false);
    tokio::time::sleep(hb * 3).await;
    vanished.stop();
    eventually("the vanished node deleted", WAIT, || async {
        nodes.get_opt("vanished").await.unwrap().is_none()
    })
    .await;
    let events: Api<Event> = Api::namespaced(cluster.client(), "default");
    let deleting = events
        .list(&ListParams::default().fields("reason=DeletingNode"))
        .await
        .unwrap();
    assert_eq!(deleting.items.len(), 1);
    assert_eq!(
        deleting.items[0].message.as_deref(),
        Some("Deleting node vanished because it does not exist in the cloud provider")
    );
    assert!(nodes.get_opt("healthy").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_transient_gone_answer_does_not_delete() {
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    dead_node(&cluster, &cloud, "flappy").await;
    // Gone for the first pass only, then back.
    let gone = cloud.remove_instance("flappy").unwrap();
    let _stop = start(&cluster, &cloud, Duration::from_millis(300));
    eventually("the first state check", WAIT, || async {
        cloud.calls_to("instance_state_batch") >= 1
    })
    .await;
    cloud.add_instance(gone);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(
        cloud.calls_to("instance_state_batch") >= 2,
        "later passes ran"
    );
    let nodes: Api<Node> = Api::all(cluster.client());
    assert!(
        nodes.get_opt("flappy").await.unwrap().is_some(),
        "a single gone answer must not delete the node"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delete_is_reported_and_retried() {
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    dead_node(&cluster, &cloud, "doomed").await;
    cloud.remove_instance("doomed");
    // The first DELETE of a node fails with 500; later ones go through.
    cluster
        .server()
        .inject(Fault::new(Some(Verb::Delete), Some("nodes"), FaultAction::Error(500)).times(1));
    let _stop = start(&cluster, &cloud, Duration::from_millis(200));
    let nodes: Api<Node> = Api::all(cluster.client());
    eventually("the node deleted on a later pass", WAIT, || async {
        nodes.get_opt("doomed").await.unwrap().is_none()
    })
    .await;
    let events: Api<Event> = Api::namespaced(cluster.client(), "default");
    // Events are written in the background: wait for both attempts' count.
    eventually("DeletingNode counted twice", WAIT, || async {
        let deleting = events
            .list(&ListParams::default().fields("reason=DeletingNode"))
            .await
            .unwrap();
        deleting.items.first().and_then(|e| e.count) == Some(2)
    })
    .await;
    let failed = events
        .list(&ListParams::default().fields("reason=DeletingNodeFailed"))
        .await
        .unwrap();
    assert_eq!(failed.items.len(), 1, "{:?}", failed.items);
    assert_eq!(failed.items[0].type_.as_deref(), Some("Warning"));
    let message = failed.items[0].message.as_deref().unwrap_or_default();
    assert!(
        message.starts_with("Error deleting node doomed: "),
        "{message}"
    );
    let deleting = events
        .list(&ListParams::default().fields("reason=DeletingNode"))
        .await
        .unwrap();
    assert_eq!(
        deleting.items.len(),
        1,
        "the second attempt's identical event is counted, as client-go does"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_api_latency_errors_dropped_watches_and_compaction() {
    let cluster = TestCluster::start().await.unwrap();
    let server = cluster.server();
    let cloud = FakeCloud::new();
    // A slow API that fails the first lists and watches.
    server.inject(Fault::new(
        None,
        None,
        FaultAction::Latency(Duration::from_millis(20)),
    ));
    server.inject(Fault::new(Some(Verb::List), Some("nodes"), FaultAction::Error(500)).times(2));
    server.inject(
        Fault::new(
            Some(Verb::Watch),
            Some("nodes"),
            FaultAction::Throttle {
                retry_after_secs: 1,
            },
        )
        .times(1),
    );
    let _stop = start(&cluster, &cloud, Duration::from_millis(200));
    let nodes: Api<Node> = Api::all(cluster.client());

    // Nodes that die while the watch is cut, then after a compaction.
    server.drop_watches();
    dead_node(&cluster, &cloud, "first").await;
    cloud.remove_instance("first");
    server.compact();
    dead_node(&cluster, &cloud, "second").await;
    cloud.set_instance_state("second", InstanceState::ShutDown);
    // A failing delete is retried on a later pass.
    server.inject(Fault::new(Some(Verb::Delete), Some("nodes"), FaultAction::Error(500)).times(1));

    eventually("the gone node deleted", WAIT, || async {
        nodes.get_opt("first").await.unwrap().is_none()
    })
    .await;
    eventually("the shut-down node tainted", WAIT, || async {
        shutdown_tainted(&nodes.get("second").await.unwrap())
    })
    .await;
    assert!(
        nodes.get_opt("second").await.unwrap().is_some(),
        "a shut-down instance is never deleted"
    );
    assert_eq!(
        server.answered(Some(Verb::List), "nodes", 500),
        2,
        "the faults were hit"
    );
    assert_eq!(server.answered(Some(Verb::Delete), "nodes", 500), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unparsable_provider_id_never_deletes_the_node() {
    use kube::api::{Patch, PatchParams};
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    let kubelet = cluster
        .add_node(NodeSpec::new("odd").with_heartbeat(Duration::from_millis(100)))
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(cluster.client());
    nodes
        .patch(
            "odd",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"providerID": "garbage:/not-an-id"}})),
        )
        .await
        .unwrap();
    kubelet.set_ready(false);
    tokio::time::sleep(Duration::from_millis(300)).await;
    kubelet.stop();
    let _stop = start(&cluster, &cloud, Duration::from_millis(100));
    eventually("several checks", WAIT, || async {
        cloud.calls_to("instance_state") + cloud.calls_to("instance_state_batch") >= 5
    })
    .await;
    assert!(
        nodes.get_opt("odd").await.unwrap().is_some(),
        "an InvalidInput answer is not \"gone\""
    );
}

/// Go's V2 path skips a node whose `InstanceExists` fails, whatever the
/// error; only an explicit "does not exist" answer deletes it. Here the
/// exists call of a legacy provider answers "not found" errors for a while
/// (an eventually consistent cloud API), which must never delete the Node;
/// once the cloud answers "does not exist" (`false`), it is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_not_found_error_from_the_exists_call_never_deletes_the_node() {
    use kube::api::{Patch, PatchParams};
    use stratus_cloud::CloudErrorKind;
    use stratus_testing::fake_cloud::Capability;
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new().without(Capability::InstancesV2);
    dead_node(&cluster, &cloud, "lagging").await;
    let nodes: Api<Node> = Api::all(cluster.client());
    nodes
        .patch(
            "lagging",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"providerID": "fake://lagging"}})),
        )
        .await
        .unwrap();
    cloud.fail_next(
        "instance_exists_by_provider_id",
        CloudErrorKind::NotFound,
        5,
    );
    let _stop = start(&cluster, &cloud, Duration::from_millis(100));
    eventually("five failed and two good exists calls", WAIT, || async {
        cloud.calls_to("instance_exists_by_provider_id") >= 7
    })
    .await;
    assert!(
        nodes.get_opt("lagging").await.unwrap().is_some(),
        "five \"not found\" errors in a row must not delete the node"
    );
    cloud.remove_instance("lagging");
    eventually(
        "the node deleted once the cloud says it does not exist",
        WAIT,
        || async { nodes.get_opt("lagging").await.unwrap().is_none() },
    )
    .await;
}

/// Go matches the shutdown taint by key and effect (`MatchTaint`): a taint
/// of the same key with another effect, set by someone else, is neither
/// removed from a Ready node nor replaced when the instance shuts down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shutdown_taint_is_matched_by_key_and_effect() {
    use kube::api::{Patch, PatchParams};
    const KEY: &str = "node.cloudprovider.kubernetes.io/shutdown";
    let effects = |n: &Node| -> Vec<String> {
        let mut list: Vec<String> = n
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t.key == KEY)
            .map(|t| t.effect)
            .collect();
        list.sort();
        list
    };
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("n1"));
    let kubelet = cluster
        .add_node(NodeSpec::new("n1").with_heartbeat(Duration::from_millis(100)))
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(cluster.client());
    nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"spec": {"taints": [{"key": KEY, "effect": "NoExecute"}]}}),
            ),
        )
        .await
        .unwrap();
    let _stop = start(&cluster, &cloud, Duration::from_millis(100));
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        effects(&nodes.get("n1").await.unwrap()),
        ["NoExecute"],
        "a Ready node keeps a same-key taint of another effect"
    );
    cloud.set_instance_state("n1", InstanceState::ShutDown);
    kubelet.set_ready(false);
    eventually("the shutdown taint added beside it", WAIT, || async {
        effects(&nodes.get("n1").await.unwrap()) == ["NoExecute", "NoSchedule"]
    })
    .await;
    kubelet.set_ready(true);
    eventually("only the controller's taint removed", WAIT, || async {
        effects(&nodes.get("n1").await.unwrap()) == ["NoExecute"]
    })
    .await;
}
