//! The node-route controller against the harness and FakeCloud.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use stratus_ccm::Instrumented;
use stratus_ccm::informers::SharedInformers;
use stratus_ccm::route::{RouteController, RouteControllerConfig};
use stratus_cloud::{CloudErrorKind, CloudProvider, Route};
use stratus_testing::eventually;
use stratus_testing::{FakeCloud, NodeSpec, TestCluster};
use tokio::sync::watch;

/// The controller under test, reading Nodes through an informer of its own.
fn controller(
    cluster: &TestCluster,
    cloud: std::sync::Arc<dyn stratus_cloud::CloudProvider>,
    config: RouteControllerConfig,
) -> RouteController {
    RouteController::new(
        cluster.client(),
        SharedInformers::new(cluster.client()).nodes(),
        cloud,
        config,
    )
}

/// How long a test waits for the controllers to converge.
const WAIT: Duration = Duration::from_secs(10);

fn condition(node: &Node) -> Option<(String, String)> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "NetworkUnavailable")
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_follow_pod_cidrs() {
    let cluster = TestCluster::start().await.unwrap();
    let hb = Duration::from_secs(3600);
    let mut kubelets = Vec::new();
    for i in 0..3 {
        kubelets.push(
            cluster
                .add_node(NodeSpec::new(format!("n{i}")).with_heartbeat(hb))
                .await
                .unwrap(),
        );
    }
    let nodes: Api<Node> = Api::all(cluster.client());
    for i in 0..3 {
        nodes
            .patch(&format!("n{i}"), &PatchParams::default(), &Patch::Merge(json!({"spec": {"podCIDR": format!("10.244.{i}.0/24"), "podCIDRs": [format!("10.244.{i}.0/24")]}})))
            .await
            .unwrap();
    }
    let cloud = FakeCloud::new();
    let routes = cloud.routes().unwrap();
    // A blackhole inside the cluster CIDR, and a foreign route outside it.
    routes
        .create_route(
            "kubernetes",
            "blackhole",
            &Route {
                target_node: "gone".into(),
                destination_cidr: "10.244.9.0/24".into(),
                blackhole: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    routes
        .create_route(
            "kubernetes",
            "foreign",
            &Route {
                target_node: "vpn".into(),
                destination_cidr: "192.168.0.0/24".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    cloud.fail_next("create_route", CloudErrorKind::Other, 1);
    let (_stop, stopped) = watch::channel(false);
    let mut config = RouteControllerConfig::new(vec!["10.244.0.0/16".parse().unwrap()]);
    config.reconcile_period = Duration::from_millis(300);
    tokio::spawn(controller(&cluster, Arc::new(cloud.clone()), config).run(stopped));

    eventually("three node routes", WAIT, || async {
        let r = cloud.routes_list();
        (0..3).all(|i| {
            r.values().any(|r| {
                r.destination_cidr == format!("10.244.{i}.0/24") && r.target_node == format!("n{i}")
            })
        })
    })
    .await;
    let r = cloud.routes_list();
    assert!(
        !r.values().any(|r| r.blackhole),
        "blackholes in the cluster CIDR are deleted"
    );
    assert!(
        r.values().any(|r| r.destination_cidr == "192.168.0.0/24"),
        "routes outside the cluster CIDR are left alone"
    );
    let n0 = nodes.get("n0").await.unwrap();
    assert!(
        r.contains_key(n0.metadata.uid.as_deref().unwrap()),
        "the name hint is the Node UID"
    );
    eventually("RouteCreated on every node", WAIT, || async {
        let list = nodes.list(&ListParams::default()).await.unwrap();
        list.items
            .iter()
            .all(|n| condition(n) == Some(("False".into(), "RouteCreated".into())))
    })
    .await;
    let events: Api<Event> = Api::namespaced(cluster.client(), "default");
    let failed = events
        .list(&ListParams::default().fields("reason=FailedToCreateRoute"))
        .await
        .unwrap();
    assert_eq!(
        failed.items.len(),
        1,
        "the scripted failure was reported, then retried"
    );

    // A deleted node's route goes.
    let gone = kubelets.remove(2);
    gone.stop();
    nodes.delete("n2", &DeleteParams::default()).await.unwrap();
    eventually("n2's route deleted", WAIT, || async {
        !cloud.routes_list().values().any(|r| r.target_node == "n2")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_survive_api_faults_and_report_metrics() {
    use stratus_testing::{Fault, FaultAction, Verb};
    let cluster = TestCluster::start().await.unwrap();
    let server = cluster.server();
    let hb = Duration::from_secs(3600);
    let nodes: Api<Node> = Api::all(cluster.client());
    let set_cidr = |name: String, i: usize| {
        let nodes = nodes.clone();
        async move {
            let cidr = format!("10.244.{i}.0/24");
            nodes
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"podCIDR": cidr, "podCIDRs": [cidr]}})),
                )
                .await
                .unwrap();
        }
    };
    let mut kubelets = Vec::new();
    for i in 0..2 {
        let name = format!("n{i}");
        kubelets.push(
            cluster
                .add_node(NodeSpec::new(&name).with_heartbeat(hb))
                .await
                .unwrap(),
        );
        set_cidr(name, i).await;
    }
    let cloud = FakeCloud::new();
    server.inject(Fault::new(
        None,
        None,
        FaultAction::Latency(Duration::from_millis(20)),
    ));
    // The first condition writes fail; the API throttles the first watch.
    server.inject(
        Fault::new(
            Some(Verb::Patch),
            Some("nodes/status"),
            FaultAction::Error(500),
        )
        .times(2),
    );
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
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = stratus_ccm::metrics::CcmMetrics::register(&mut registry);
    let (_stop, stopped) = watch::channel(false);
    let mut config = RouteControllerConfig::new(vec!["10.244.0.0/16".parse().unwrap()]);
    config.reconcile_period = Duration::from_millis(500);
    tokio::spawn(
        controller(&cluster, Arc::new(cloud.clone()), config)
            .with_metrics(metrics)
            .run(stopped),
    );
    // A node added while the watches are cut, another after a compaction.
    server.drop_watches();
    kubelets.push(
        cluster
            .add_node(NodeSpec::new("n2").with_heartbeat(hb))
            .await
            .unwrap(),
    );
    set_cidr("n2".into(), 2).await;
    server.compact();
    kubelets.push(
        cluster
            .add_node(NodeSpec::new("n3").with_heartbeat(hb))
            .await
            .unwrap(),
    );
    set_cidr("n3".into(), 3).await;

    eventually("four node routes", WAIT, || async {
        let r = cloud.routes_list();
        (0..4).all(|i| {
            r.values()
                .any(|r| r.destination_cidr == format!("10.244.{i}.0/24"))
        })
    })
    .await;
    eventually(
        "RouteCreated on every node despite the failed writes",
        WAIT,
        || async {
            let list = nodes.list(&ListParams::default()).await.unwrap();
            list.items.len() == 4
                && list
                    .items
                    .iter()
                    .all(|n| condition(n) == Some(("False".into(), "RouteCreated".into())))
        },
    )
    .await;
    let failed_writes = server.answered(None, "nodes/status", 500);
    assert_eq!(failed_writes, 2, "the faults were hit");
    let text = stratus_runtime::metrics::encode_text(&registry).unwrap();
    let value = |sample: &str| stratus_testing::metric_sample(&text, sample).unwrap_or(0.0);
    assert!(value("route_controller_route_sync_total") >= 1.0, "{text}");
    assert!(
        value("stratus_cloud_provider_requests_total{method=\"create_route\",result=\"ok\"}")
            >= 4.0
    );
    assert!(
        value("stratus_cloud_provider_requests_total{method=\"list_routes\",result=\"ok\"}") >= 1.0
    );
}

/// Three nodes with pod CIDRs, their kubelets heartbeating every 100 ms.
async fn heartbeating_nodes(
    cluster: &TestCluster,
) -> (Vec<stratus_testing::SimulatedKubelet>, Api<Node>) {
    let mut kubelets = Vec::new();
    for i in 0..3 {
        kubelets.push(
            cluster
                .add_node(NodeSpec::new(format!("h{i}")).with_heartbeat(Duration::from_millis(100)))
                .await
                .unwrap(),
        );
    }
    let nodes: Api<Node> = Api::all(cluster.client());
    for i in 0..3 {
        nodes
            .patch(
                &format!("h{i}"),
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"podCIDRs": [format!("10.244.{i}.0/24")]}})),
            )
            .await
            .unwrap();
    }
    (kubelets, nodes)
}

fn start_routes(
    cluster: &TestCluster,
    cloud: &FakeCloud,
    period: Duration,
    watch_based: bool,
) -> watch::Sender<bool> {
    let (stop, stopped) = watch::channel(false);
    let mut config = RouteControllerConfig::new(vec!["10.244.0.0/16".parse().unwrap()]);
    config.reconcile_period = period;
    config.watch_based = watch_based;
    tokio::spawn(controller(cluster, Arc::new(cloud.clone()), config).run(stopped));
    stop
}

/// Go's periodic mode (the default): one reconcile, one `ListRoutes`, per
/// `--route-reconciliation-period`, however often the Nodes change (here
/// three kubelets heartbeating every 100 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_periodic_mode_lists_routes_once_per_period_as_go() {
    let cluster = TestCluster::start().await.unwrap();
    let (_kubelets, _nodes) = heartbeating_nodes(&cluster).await;
    let cloud = FakeCloud::new();
    let period = Duration::from_millis(400);
    let _stop = start_routes(&cluster, &cloud, period, false);
    eventually("three routes", WAIT, || async {
        cloud.routes_list().len() == 3
    })
    .await;
    cloud.clear_calls();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let lists = cloud.calls_to("list_routes");
    assert!(
        (3..=6).contains(&lists),
        "{lists} ListRoutes in 2 s with a 400 ms period"
    );
}

/// Go's watch-based mode (KEP-5237, the feature gate
/// `CloudControllerManagerWatchBasedRoutesReconciliation`): heartbeats
/// cause no reconcile at all; a pod CIDR change does, and a burst of them
/// at most one per period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_based_mode_reconciles_only_on_route_inputs_at_most_once_per_period() {
    let cluster = TestCluster::start().await.unwrap();
    let (_kubelets, nodes) = heartbeating_nodes(&cluster).await;
    let cloud = FakeCloud::new();
    let period = Duration::from_millis(500);
    let _stop = start_routes(&cluster, &cloud, period, true);
    eventually("three routes", WAIT, || async {
        cloud.routes_list().len() == 3
    })
    .await;
    tokio::time::sleep(period).await;
    cloud.clear_calls();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        cloud.calls_to("list_routes"),
        0,
        "heartbeats alone cause no reconcile"
    );
    // Ten pod CIDR changes within about a second.
    for round in 0..10 {
        let i = round % 3;
        nodes
            .patch(
                &format!("h{i}"),
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"spec": {"podCIDRs": [format!("10.244.{}.0/24", 10 + round)]}}),
                ),
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eventually("the last CIDRs routed", WAIT, || async {
        let routes = cloud.routes_list();
        ["10.244.17.0/24", "10.244.18.0/24", "10.244.19.0/24"]
            .iter()
            .all(|c| routes.values().any(|r| r.destination_cidr == *c))
    })
    .await;
    let lists = cloud.calls_to("list_routes");
    assert!(
        (1..=4).contains(&lists),
        "{lists} ListRoutes for ten changes in about 1 s with a 500 ms period"
    );
}
