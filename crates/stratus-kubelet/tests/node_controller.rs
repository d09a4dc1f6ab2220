//! The virtual node's Node and Lease against the harness API server:
//! registration, heartbeats that keep others' conditions, ping gating,
//! re-registration after a deletion, adoption, provider notifications.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use stratus_kubelet::node::{NODE_LEASE_NAMESPACE, NodeConfig, NodeController};
use stratus_pod::{NodeProvider, NodeStatusCallback, PodError};
use stratus_testing::{ApiServer, eventually};
use tokio::sync::watch;

/// A provider whose ping can be made to fail, and which keeps the status
/// callback to notify later.
#[derive(Default)]
struct Provider {
    healthy: AtomicBool,
    /// How long a ping takes.
    latency: std::sync::Mutex<Duration>,
    /// How many pings began.
    pings: std::sync::atomic::AtomicUsize,
    callback: std::sync::Mutex<Option<NodeStatusCallback>>,
}

#[async_trait::async_trait]
impl NodeProvider for Provider {
    async fn ping(&self) -> stratus_pod::Result<()> {
        self.pings.fetch_add(1, Ordering::SeqCst);
        let latency = *self.latency.lock().unwrap();
        tokio::time::sleep(latency).await;
        if self.healthy.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(PodError::unavailable(None, "the backend is unreachable"))
        }
    }

    fn notify_node_status(&self, callback: NodeStatusCallback) {
        *self.callback.lock().unwrap() = Some(callback);
    }

    fn configure_node(&self, node: &mut Node) {
        node.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("acme.example/region".into(), "eu-1".into());
    }
}

fn config(name: &str) -> NodeConfig {
    let mut c = NodeConfig::new(name, "acme");
    c.internal_ip = Some("127.0.0.1".into());
    c.status_interval = Duration::from_millis(200);
    c.renew_interval = Duration::from_millis(200);
    c.ping_interval = Duration::from_millis(100);
    c
}

fn start(api: &ApiServer, name: &str) -> (Arc<Provider>, watch::Sender<bool>) {
    let provider = Arc::new(Provider::default());
    provider.healthy.store(true, Ordering::SeqCst);
    let (stop, stopped) = watch::channel(false);
    let controller = NodeController::new(api.client(), provider.clone(), config(name));
    tokio::spawn(controller.run(stopped));
    (provider, stop)
}

async fn renew_time(leases: &Api<Lease>, name: &str) -> Option<String> {
    let lease = leases.get_opt(name).await.unwrap()?;
    Some(format!("{:?}", lease.spec?.renew_time?))
}

fn condition(node: &Node, kind: &str) -> Option<String> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.status.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registers_the_node_and_keeps_its_lease() {
    let api = ApiServer::start().await.unwrap();
    let (_provider, _stop) = start(&api, "vk-0");
    let nodes: Api<Node> = Api::all(api.client());
    let leases: Api<Lease> = Api::namespaced(api.client(), NODE_LEASE_NAMESPACE);
    eventually(
        "the node and its lease",
        Duration::from_secs(10),
        || async {
            nodes.get_opt("vk-0").await.unwrap().is_some()
                && leases.get_opt("vk-0").await.unwrap().is_some()
        },
    )
    .await;
    let node = nodes.get("vk-0").await.unwrap();
    let labels = node.metadata.labels.clone().unwrap();
    assert_eq!(labels["type"], "virtual-kubelet");
    assert_eq!(
        labels["acme.example/region"], "eu-1",
        "configure_node applied"
    );
    let taints = node.spec.clone().unwrap().taints.unwrap();
    assert_eq!(taints[0].key, "virtual-kubelet.io/provider");
    assert_eq!(taints[0].value.as_deref(), Some("acme"));
    let status = node.status.clone().unwrap();
    assert_eq!(condition(&node, "Ready").as_deref(), Some("True"));
    assert_eq!(status.capacity.unwrap()["pods"].0, "110");
    assert_eq!(
        status
            .daemon_endpoints
            .unwrap()
            .kubelet_endpoint
            .unwrap()
            .port,
        10250
    );
    assert_eq!(status.addresses.unwrap()[0].address, "127.0.0.1");

    let lease = leases.get("vk-0").await.unwrap();
    let spec = lease.spec.clone().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("vk-0"));
    assert_eq!(spec.lease_duration_seconds, Some(40));
    let owner = &lease.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Node", node.metadata.uid.as_deref().unwrap())
    );
    let first = renew_time(&leases, "vk-0").await;
    eventually("the lease is renewed", Duration::from_secs(5), || async {
        renew_time(&leases, "vk-0").await != first
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_keep_conditions_written_by_others() {
    let api = ApiServer::start().await.unwrap();
    let (_provider, _stop) = start(&api, "vk-1");
    let nodes: Api<Node> = Api::all(api.client());
    eventually("registered", Duration::from_secs(10), || async {
        nodes.get_opt("vk-1").await.unwrap().is_some()
    })
    .await;
    let other = serde_json::json!({"status": {"conditions": [
        {"type": "acme.example/Maintenance", "status": "False", "reason": "NoMaintenance"}
    ]}});
    nodes
        .patch_status("vk-1", &PatchParams::default(), &Patch::Strategic(other))
        .await
        .unwrap();
    let heartbeat = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| {
                c.iter()
                    .find(|c| c.type_ == "Ready")
                    .and_then(|c| c.last_heartbeat_time.clone())
            })
    };
    let before = heartbeat(&nodes.get("vk-1").await.unwrap());
    eventually(
        "a heartbeat after the other write",
        Duration::from_secs(5),
        || async { heartbeat(&nodes.get("vk-1").await.unwrap()) != before },
    )
    .await;
    let node = nodes.get("vk-1").await.unwrap();
    assert_eq!(
        condition(&node, "acme.example/Maintenance").as_deref(),
        Some("False")
    );
    assert_eq!(condition(&node, "Ready").as_deref(), Some("True"));
}

/// Go runs the ping in a controller of its own and the status loop reads
/// its latest result: a slow ping delays no renewal; one that outlasts
/// its timeout counts as failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_ping_delays_no_renewal_and_one_past_its_timeout_fails() {
    let api = ApiServer::start().await.unwrap();
    let provider = Arc::new(Provider::default());
    provider.healthy.store(true, Ordering::SeqCst);
    let mut c = config("vk-slow");
    c.ping_timeout = Duration::from_secs(2);
    let (stop, stopped) = watch::channel(false);
    let controller =
        tokio::spawn(NodeController::new(api.client(), provider.clone(), c).run(stopped));
    let leases: Api<Lease> = Api::namespaced(api.client(), NODE_LEASE_NAMESPACE);
    eventually("registered", Duration::from_secs(10), || async {
        renew_time(&leases, "vk-slow").await.is_some()
    })
    .await;

    // Each ping takes 1.5 s, within its timeout: the Lease is renewed every
    // 200 ms all the same.
    *provider.latency.lock().unwrap() = Duration::from_millis(1500);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut seen = std::collections::BTreeSet::new();
    let watched = std::time::Instant::now();
    while watched.elapsed() < Duration::from_millis(1200) {
        seen.extend(renew_time(&leases, "vk-slow").await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        seen.len() >= 3,
        "the Lease waited for the slow ping: {seen:?}"
    );

    // A ping that hangs past the 2 s timeout counts as failed: no renewal.
    *provider.latency.lock().unwrap() = Duration::from_secs(30);
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let held = renew_time(&leases, "vk-slow").await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        renew_time(&leases, "vk-slow").await,
        held,
        "renewed while the ping hung"
    );

    // Pinging again every 100 ms; a stopped controller pings no more.
    *provider.latency.lock().unwrap() = Duration::ZERO;
    eventually("pinging again", Duration::from_secs(5), || async {
        let before = provider.pings.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(300)).await;
        provider.pings.load(Ordering::SeqCst) > before
    })
    .await;
    stop.send(true).unwrap();
    controller.await.unwrap().unwrap();
    let after_stop = provider.pings.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        provider.pings.load(Ordering::SeqCst),
        after_stop,
        "pinged after the controller stopped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_ping_holds_the_lease_and_a_deleted_node_comes_back() {
    let api = ApiServer::start().await.unwrap();
    let (provider, _stop) = start(&api, "vk-2");
    let nodes: Api<Node> = Api::all(api.client());
    let leases: Api<Lease> = Api::namespaced(api.client(), NODE_LEASE_NAMESPACE);
    eventually("registered", Duration::from_secs(10), || async {
        leases.get_opt("vk-2").await.unwrap().is_some()
    })
    .await;

    provider.healthy.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held = renew_time(&leases, "vk-2").await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        renew_time(&leases, "vk-2").await,
        held,
        "no renewal while the ping fails"
    );
    provider.healthy.store(true, Ordering::SeqCst);
    eventually("renewed again", Duration::from_secs(5), || async {
        renew_time(&leases, "vk-2").await != held
    })
    .await;

    // Deleted by someone else: registered again, with a Lease owned by the
    // new Node.
    let old_uid = nodes.get("vk-2").await.unwrap().metadata.uid.unwrap();
    nodes
        .delete("vk-2", &DeleteParams::default())
        .await
        .unwrap();
    eventually("registered again", Duration::from_secs(10), || async {
        nodes
            .get_opt("vk-2")
            .await
            .unwrap()
            .and_then(|n| n.metadata.uid)
            .is_some_and(|uid| uid != old_uid)
    })
    .await;
    let new_uid = nodes.get("vk-2").await.unwrap().metadata.uid.unwrap();
    eventually(
        "the lease follows the new node",
        Duration::from_secs(5),
        || async {
            leases
                .get_opt("vk-2")
                .await
                .unwrap()
                .and_then(|l| l.metadata.owner_references)
                .is_some_and(|o| o[0].uid == new_uid)
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_node_is_adopted_and_provider_status_is_reported() {
    let api = ApiServer::start().await.unwrap();
    let nodes: Api<Node> = Api::all(api.client());
    let existing: Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "vk-3", "labels": {"team": "blue"}},
        "spec": {"unschedulable": true},
    }))
    .unwrap();
    nodes
        .create(&PostParams::default(), &existing)
        .await
        .unwrap();
    let (provider, _stop) = start(&api, "vk-3");
    eventually("adopted", Duration::from_secs(10), || async {
        let n = nodes.get("vk-3").await.unwrap();
        condition(&n, "Ready").as_deref() == Some("True")
    })
    .await;
    let node = nodes.get("vk-3").await.unwrap();
    let labels = node.metadata.labels.clone().unwrap();
    assert_eq!(labels["team"], "blue", "labels of others are kept");
    assert_eq!(labels["type"], "virtual-kubelet");
    assert_eq!(
        node.spec.clone().unwrap().unschedulable,
        Some(true),
        "the spec is left alone"
    );

    // The provider reports memory pressure and a new label.
    let mut reported = node.clone();
    reported.metadata.labels = Some([("acme.example/tier".to_string(), "gold".to_string())].into());
    let status = reported.status.as_mut().unwrap();
    for c in status.conditions.iter_mut().flatten() {
        if c.type_ == "MemoryPressure" {
            c.status = "True".into();
        }
    }
    let callback = provider.callback.lock().unwrap().clone().unwrap();
    callback.notify(reported);
    eventually(
        "the provider's status is written",
        Duration::from_secs(5),
        || async {
            let n = nodes.get("vk-3").await.unwrap();
            condition(&n, "MemoryPressure").as_deref() == Some("True")
                && n.metadata
                    .labels
                    .unwrap()
                    .get("acme.example/tier")
                    .map(String::as_str)
                    == Some("gold")
        },
    )
    .await;
}

/// Go's three-way node status patch: what the provider stops reporting (a
/// GPU in capacity and allocatable, a label, an annotation, a condition)
/// is removed from the Node, what others added (a condition, a label) is
/// kept, and the provider's `lastTransitionTime` is written as given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_provider_withdraws_is_removed_and_what_others_add_is_kept() {
    use k8s_openapi::api::core::v1::NodeCondition;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let api = ApiServer::start().await.unwrap();
    let nodes: Api<Node> = Api::all(api.client());
    let (provider, _stop) = start(&api, "vk-gpu");
    eventually("registered", Duration::from_secs(10), || async {
        nodes
            .get_opt("vk-gpu")
            .await
            .unwrap()
            .is_some_and(|n| condition(&n, "Ready").as_deref() == Some("True"))
    })
    .await;
    // Someone else adds a condition and a label.
    nodes
        .patch_status(
            "vk-gpu",
            &PatchParams::default(),
            &Patch::Strategic(serde_json::json!({"status": {"conditions": [
                {"type": "CniReady", "status": "True"}
            ]}})),
        )
        .await
        .unwrap();
    nodes
        .patch(
            "vk-gpu",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"team": "blue"}}})),
        )
        .await
        .unwrap();
    let node = nodes.get("vk-gpu").await.unwrap();
    let callback = provider.callback.lock().unwrap().clone().unwrap();
    let since = Time("2026-01-02T03:04:05Z".parse().unwrap());
    let report = |gpu: bool| {
        let mut reported = Node::default();
        let mut status = node.status.clone().unwrap();
        status.conditions = Some(
            status
                .conditions
                .unwrap()
                .into_iter()
                .filter(|c| c.type_ != "CniReady")
                .collect(),
        );
        if gpu {
            for list in [&mut status.capacity, &mut status.allocatable] {
                list.get_or_insert_with(Default::default)
                    .insert("nvidia.com/gpu".into(), Quantity("4".into()));
            }
            status.conditions.as_mut().unwrap().push(NodeCondition {
                type_: "GpuHealthy".into(),
                status: "True".into(),
                last_transition_time: Some(since.clone()),
                ..Default::default()
            });
            reported.metadata.labels = Some([("acme.example/gpu".into(), "a100".into())].into());
            reported.metadata.annotations =
                Some([("acme.example/driver".into(), "550".into())].into());
        }
        reported.status = Some(status);
        reported
    };
    let gpu = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .is_some_and(|c| c.contains_key("nvidia.com/gpu"))
    };
    callback.notify(report(true));
    eventually("the GPU advertised", Duration::from_secs(5), || async {
        let n = nodes.get("vk-gpu").await.unwrap();
        gpu(&n) && condition(&n, "GpuHealthy").as_deref() == Some("True")
    })
    .await;
    let n = nodes.get("vk-gpu").await.unwrap();
    let healthy = n
        .status
        .as_ref()
        .unwrap()
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "GpuHealthy")
        .cloned()
        .unwrap();
    assert_eq!(
        healthy.last_transition_time.as_ref(),
        Some(&since),
        "the provider's transition time"
    );
    assert_eq!(
        n.metadata.labels.as_ref().unwrap()["acme.example/gpu"],
        "a100"
    );

    callback.notify(report(false));
    eventually("the GPU withdrawn", Duration::from_secs(5), || async {
        let n = nodes.get("vk-gpu").await.unwrap();
        let status = n.status.clone().unwrap();
        !gpu(&n)
            && !status
                .allocatable
                .unwrap_or_default()
                .contains_key("nvidia.com/gpu")
            && condition(&n, "GpuHealthy").is_none()
            && !n
                .metadata
                .labels
                .clone()
                .unwrap_or_default()
                .contains_key("acme.example/gpu")
            && !n
                .metadata
                .annotations
                .clone()
                .unwrap_or_default()
                .contains_key("acme.example/driver")
    })
    .await;
    let n = nodes.get("vk-gpu").await.unwrap();
    assert_eq!(
        condition(&n, "CniReady").as_deref(),
        Some("True"),
        "another's condition"
    );
    let labels = n.metadata.labels.unwrap();
    assert_eq!(labels["team"], "blue", "another's label");
    assert_eq!(labels["type"], "virtual-kubelet", "the node's own labels");
    assert!(
        n.status.unwrap().capacity.unwrap().contains_key("pods"),
        "the resources still reported"
    );
}

/// CPU time of the calling thread, in clock ticks (utime + stime of
/// `/proc/thread-self/stat`; 100 per second on Linux).
fn thread_cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    // The fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    // utime and stime: fields 14 and 15 of stat(5), 12 and 13 after ")".
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// A provider with the default `notify_node_status` drops the callback; the
/// controller must then wait on its timers, not spin on the closed channel.
#[test]
fn a_provider_without_node_notifications_leaves_the_controller_idle() {
    let server = tokio::runtime::Runtime::new().unwrap();
    let api = server.block_on(ApiServer::start()).unwrap();
    let client = {
        let _entered = server.enter();
        api.client()
    };
    // The controller alone on this thread's runtime, so the thread's CPU
    // time is the controller's.
    let controller = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut c = config("vk-4");
    c.status_interval = Duration::from_secs(60);
    c.renew_interval = Duration::from_secs(60);
    c.ping_interval = Duration::from_secs(60);
    let node = NodeController::new(client, Arc::new(stratus_pod::NaiveNodeProvider), c);
    let mut ready = node.ready();
    let (stop, stopped) = watch::channel(false);
    let busy = controller.block_on(async move {
        let running = tokio::spawn(node.run(stopped));
        tokio::time::timeout(Duration::from_secs(10), ready.wait_for(|r| *r))
            .await
            .expect("the node registers")
            .unwrap();
        let before = thread_cpu_ticks();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let busy = thread_cpu_ticks() - before;
        stop.send_replace(true);
        running.await.unwrap().unwrap();
        busy
    });
    // Spinning costs about 200 ticks in these 2 s; waiting, next to none.
    assert!(
        busy < 40,
        "the node controller used {busy} ticks of CPU in 2 s while idle"
    );
    server.block_on(api.shutdown());
}

/// A provider that follows its Node (or not) and keeps the pod CIDRs it
/// was told of.
struct Following {
    follows: bool,
    seen: std::sync::Mutex<Vec<Option<String>>>,
}

impl NodeProvider for Following {
    fn follows_node(&self) -> bool {
        self.follows
    }

    fn node_changed(&self, node: &Node) {
        let cidr = node.spec.as_ref().and_then(|s| s.pod_cidr.clone());
        self.seen.lock().unwrap().push(cidr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_follows_its_node_learns_its_pod_cidr_at_once() {
    let api = ApiServer::start().await.unwrap();
    let nodes: Api<Node> = Api::all(api.client());
    let (stop, stopped) = watch::channel(false);
    let mut providers = Vec::new();
    for (name, follows) in [("follows", true), ("ignores", false)] {
        let provider = Arc::new(Following {
            follows,
            seen: Default::default(),
        });
        let mut c = config(name);
        // Heartbeats out of the picture: what the provider learns comes
        // from the watch.
        c.status_interval = Duration::from_secs(600);
        let controller = NodeController::new(api.client(), provider.clone(), c);
        tokio::spawn(controller.run(stopped.clone()));
        providers.push(provider);
    }
    let (follows, ignores) = (&providers[0], &providers[1]);
    eventually(
        "the registered node told",
        Duration::from_secs(10),
        || async { follows.seen.lock().unwrap().first() == Some(&None) },
    )
    .await;
    // The other node registers on its own time: patched once it is there.
    eventually(
        "the other node registered",
        Duration::from_secs(10),
        || async { nodes.get_opt("ignores").await.is_ok_and(|n| n.is_some()) },
    )
    .await;
    for name in ["follows", "ignores"] {
        let patch = serde_json::json!({"spec": {"podCIDR": "198.19.7.0/24", "podCIDRs": ["198.19.7.0/24"]}});
        nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    }
    eventually("the pod CIDR told", Duration::from_secs(10), || async {
        follows.seen.lock().unwrap().last() == Some(&Some("198.19.7.0/24".into()))
    })
    .await;
    assert!(
        ignores.seen.lock().unwrap().is_empty(),
        "a provider that does not follow its node is never told of it"
    );
    stop.send_replace(true);
}
