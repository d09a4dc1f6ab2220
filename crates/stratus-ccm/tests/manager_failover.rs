//! Two managers on one Lease against the harness: a crashed leader is
//! replaced within the lease duration plus a retry period, a stopped one
//! within about one retry period; the new leader initializes nodes that
//! register later and cleans up Services deleted while no manager ran;
//! `--leader-elect-recampaign` wins the Lease back after a loss; `/healthz`
//! reports a controller that stopped on its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, DeleteParams, PostParams};
use stratus_ccm::app::{
    CloudControllerManager, ManagedController, ManagerOptions, RunningManager, Started,
};
use stratus_cloud::names::ControllerNames;
use stratus_testing::{FakeCloud, FakeInstance, NodeSpec, TestCluster, eventually};
use tokio::sync::watch;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    options: ManagerOptions,
}

const LEASE: Duration = Duration::from_secs(3);
const RETRY: Duration = Duration::from_millis(500);

fn options(extra: &[&str]) -> ManagerOptions {
    let mut args = vec![
        "ccm",
        "--cloud-provider=fake",
        "--secure-port=0",
        "--controllers=cloud-node,service",
        "--leader-elect-lease-duration=3s",
        "--leader-elect-renew-deadline=2s",
        "--leader-elect-retry-period=500ms",
    ];
    args.extend_from_slice(extra);
    Cli::try_parse_from(args).unwrap().options
}

async fn start(
    cluster: &TestCluster,
    cloud: &FakeCloud,
    identity: &str,
) -> (watch::Sender<bool>, RunningManager) {
    let (stop, stopped) = watch::channel(false);
    let manager = CloudControllerManager::new(options(&[]))
        .with_client(cluster.client())
        .with_provider(Arc::new(cloud.clone()))
        .with_identity(identity)
        .start(stopped)
        .await
        .unwrap();
    (stop, manager)
}

async fn holder(cluster: &TestCluster) -> String {
    let leases: Api<Lease> = Api::namespaced(cluster.client(), "kube-system");
    leases
        .get_opt("cloud-controller-manager")
        .await
        .unwrap()
        .and_then(|l| l.spec?.holder_identity)
        .unwrap_or_default()
}

/// Wait until `identity` holds the Lease; how long it took.
async fn wait_for_holder(cluster: &TestCluster, identity: &str, within: Duration) -> Duration {
    let started = Instant::now();
    eventually(&format!("{identity} holds the Lease"), within, || async {
        holder(cluster).await == identity
    })
    .await;
    started.elapsed()
}

async fn provider_id(cluster: &TestCluster, node: &str) -> Option<String> {
    let nodes: Api<Node> = Api::all(cluster.client());
    nodes.get(node).await.ok()?.spec?.provider_id
}

fn lb_service(name: &str) -> Service {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_from_a_crashed_or_stopped_leader() {
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    for name in ["early", "late"] {
        cloud.add_instance(FakeInstance::new(name).with_internal_ip("10.0.0.1"));
    }
    let _early = cluster
        .add_node(NodeSpec::new("early").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");

    let (_stop_a, a) = start(&cluster, &cloud, "ccm-a").await;
    wait_for_holder(&cluster, "ccm-a", Duration::from_secs(5)).await;
    let (stop_b, b) = start(&cluster, &cloud, "ccm-b").await;
    eventually(
        "the leader initializes the first node",
        Duration::from_secs(10),
        || async { provider_id(&cluster, "early").await.is_some() },
    )
    .await;
    services
        .create(&PostParams::default(), &lb_service("web"))
        .await
        .unwrap();
    eventually(
        "the leader provisions the load balancer",
        Duration::from_secs(10),
        || async { cloud.load_balancers().len() == 1 },
    )
    .await;
    assert_eq!(holder(&cluster).await, "ccm-a", "the standby waits");

    // The leader crashes: the Lease expires, then the standby takes over.
    // Meanwhile a Service is deleted (it stays, held by its finalizer) and a
    // node registers.
    a.abort();
    let crashed = Instant::now();
    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    let _late = cluster
        .add_node(NodeSpec::new("late").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    wait_for_holder(&cluster, "ccm-b", LEASE + RETRY + Duration::from_secs(5)).await;
    let takeover = crashed.elapsed();
    assert!(
        takeover >= LEASE - RETRY,
        "not before the Lease expired: {takeover:?}"
    );
    eventually(
        "the new leader initializes the late node",
        Duration::from_secs(10),
        || async { provider_id(&cluster, "late").await.as_deref() == Some("fake://late") },
    )
    .await;
    eventually(
        "the Service deleted with no leader is cleaned up",
        Duration::from_secs(10),
        || async {
            cloud.load_balancers().is_empty() && services.get_opt("web").await.unwrap().is_none()
        },
    )
    .await;

    // A graceful stop releases the Lease: the next standby takes over
    // within about one retry period, far sooner than the Lease expiry.
    let (_stop_c, c) = start(&cluster, &cloud, "ccm-c").await;
    tokio::time::sleep(RETRY).await;
    let stopping = Instant::now();
    stop_b.send(true).unwrap();
    b.wait().await.unwrap();
    wait_for_holder(&cluster, "ccm-c", LEASE).await;
    let handover = stopping.elapsed();
    assert!(handover < LEASE, "handover took {handover:?}");
    c.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recampaign_wins_the_lease_back_and_restarts_the_controllers() {
    let cluster = TestCluster::start().await.unwrap();
    let starts = Arc::new(AtomicUsize::new(0));
    let counted = starts.clone();
    let counter = ManagedController::new(ControllerNames::new("counter", "counter"), move |ctx| {
        counted.fetch_add(1, Ordering::SeqCst);
        let mut stop = ctx.stop.clone();
        Ok(Started::run(async move {
            let _ = stop.wait_for(|s| *s).await;
        }))
    });
    let (stop, stopped) = watch::channel(false);
    let manager = CloudControllerManager::new(options(&[
        "--controllers=counter",
        "--leader-elect-renew-deadline=1s",
        "--leader-elect-retry-period=200ms",
        "--leader-elect-recampaign",
    ]))
    .with_client(cluster.client())
    .with_provider(Arc::new(FakeCloud::new()))
    .with_controller(counter)
    .with_identity("ccm-r")
    .start(stopped)
    .await
    .unwrap();
    eventually("first term", Duration::from_secs(5), || async {
        starts.load(Ordering::SeqCst) == 1
    })
    .await;
    // The API server stops answering past the renew deadline: leadership is
    // lost; once it answers again the manager wins the Lease back.
    cluster.server().pause(Duration::from_secs(3));
    eventually("second term", Duration::from_secs(15), || async {
        starts.load(Ordering::SeqCst) == 2
    })
    .await;
    assert_eq!(holder(&cluster).await, "ccm-r");
    stop.send(true).unwrap();
    manager.wait().await.unwrap();
    assert_eq!(holder(&cluster).await, "", "released on stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_reports_a_controller_that_stopped_on_its_own() {
    let cluster = TestCluster::start().await.unwrap();
    let flaky = ManagedController::new(ControllerNames::new("flaky", "flaky"), |_ctx| {
        Ok(Started::run(async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            panic!("flaky crashed");
        }))
    });
    let (stop, stopped) = watch::channel(false);
    let manager = CloudControllerManager::new(options(&[
        "--controllers=*,flaky",
        "--leader-elect=false",
        "--cluster-cidr=10.244.0.0/16",
    ]))
    .with_client(cluster.client())
    .with_provider(Arc::new(FakeCloud::new()))
    .with_controller(flaky)
    .with_admin_addr("127.0.0.1:0".parse().unwrap())
    .start(stopped)
    .await
    .unwrap();
    let mut config = kube::Config::new(
        format!("https://{}", manager.admin_addr().unwrap())
            .parse()
            .unwrap(),
    );
    config.accept_invalid_certs = true;
    let admin = kube::Client::try_from(config).unwrap();
    let get = |path: &'static str| {
        let admin = admin.clone();
        async move { stratus_testing::http_status::get(&admin, path).await }
    };
    assert_eq!(get("/healthz/flaky").await.0, 200);
    eventually("flaky reported stopped", Duration::from_secs(5), || async {
        get("/healthz").await.0 == 500
    })
    .await;
    let (code, body) = get("/healthz?verbose").await;
    assert_eq!(code, 500);
    assert!(body.contains("[-]flaky failed"), "{body}");
    assert!(body.contains("[+]cloud-node-controller ok"), "{body}");
    let (code, body) = get("/healthz/flaky").await;
    assert_eq!(code, 500);
    assert!(body.contains("the controller has stopped"), "{body}");
    let (_, metrics) = get("/metrics").await;
    assert!(
        metrics.contains(
            "running_managed_controllers{name=\"flaky\",manager=\"cloud-controller-manager\"} 0"
        ),
        "{metrics}"
    );
    stop.send(true).unwrap();
    manager.wait().await.unwrap();
}
