//! `cargo xtask bench ccm`: the cloud controllers at scale, on the harness
//! API server, with FakeCloud answering in 20 ms under a budget of 100
//! calls/s.
//!
//! - Node initialization: 5,000 nodes registered at once. Floor: the same
//!   two writes per node issued by a plain client (16 concurrent tasks) in
//!   the same run, plus the batched cloud calls at cloud latency.
//! - Address refresh: one pass over the 5,000 nodes after every instance's
//!   address changed.
//! - Load balancers: 1,000 LoadBalancer Services, then one node added.
//!   Floor: the cloud budget (one ensure, then one host update, per Service
//!   at 100 calls/s).
//!
//! - The whole manager: every controller that reads Nodes (cloud-node,
//!   lifecycle, service, route, node-ipam) over the 5,000 nodes, until each
//!   has a pod CIDR: the Node lists and watches it opened, its requests and
//!   its heap. Floor: one Node list and one watch.
//!
//! The controllers run on a runtime of their own, with their own client, so
//! their heap is measured apart from the API server's (see
//! [`crate::heap_meter`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use serde_json::json;
use stratus_ccm::informers::SharedInformers;
use stratus_ccm::node::{NodeController, NodeControllerConfig};
use stratus_ccm::service::{ServiceController, ServiceControllerConfig};
use stratus_testing::{ApiServer, FakeCloud, FakeInstance, Verb};
use tokio::sync::watch;

use stratus_cluster::BoxError;

const NODES: usize = 5_000;
const SERVICES: usize = 1_000;
/// The time every cloud call takes.
pub(crate) const CLOUD_LATENCY: Duration = Duration::from_millis(20);

/// Node batches and Services synced at once (`--concurrent-node-syncs`,
/// `--concurrent-service-syncs`; Go's default is 1): enough to reach the
/// cloud's call budget, which is what the floors assume.
const WORKERS: usize = 4;
/// The cloud's call budget per second (bursts of 100).
pub(crate) const CLOUD_QPS: f64 = 100.0;

/// A Node of the benchmark, labelled `bench=<label>`, Ready, with the
/// uninitialized taint if `tainted`.
pub(crate) fn node(name: &str, label: &str, tainted: bool) -> serde_json::Value {
    let taints = if tainted {
        json!([{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}])
    } else {
        json!([])
    };
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"bench": label}},
        "spec": {"taints": taints},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "addresses": [{"type": "Hostname", "address": name}]}
    })
}

/// Whether the Node still has the uninitialized taint.
pub(crate) fn tainted(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter()
                .any(|t| t.key == "node.cloudprovider.kubernetes.io/uninitialized")
        })
}

pub(crate) fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
        })
        .map_or(0, |kb| kb * 1024)
}

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The runtime the controllers run on: its threads are tagged for the heap
/// meter. Shut down in the background when dropped, so an early error
/// return inside the benchmark's own runtime does not panic.
pub(crate) struct ControllerRuntime(Option<tokio::runtime::Runtime>);

impl ControllerRuntime {
    pub(crate) fn new() -> Result<Self, BoxError> {
        Ok(Self(Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("controllers")
                .on_thread_start(crate::heap_meter::tag_thread)
                .enable_all()
                .build()?,
        )))
    }

    pub(crate) fn handle(&self) -> Result<tokio::runtime::Handle, BoxError> {
        Ok(self
            .0
            .as_ref()
            .ok_or("the controllers' runtime is gone")?
            .handle()
            .clone())
    }
}

impl Drop for ControllerRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// Run `controller(client)` on the controllers' runtime, with a client
/// built there for `config`.
pub(crate) fn spawn_controller<F, Fut>(
    runtime: &tokio::runtime::Handle,
    config: kube::Config,
    controller: F,
) -> tokio::task::JoinHandle<()>
where
    F: FnOnce(kube::Client) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    runtime.spawn(async move {
        match kube::Client::try_from(config) {
            Ok(client) => controller(client).await,
            Err(e) => eprintln!("cannot build the controller's client: {e}"),
        }
    })
}

/// Wait for `done` (an `Err` ends the wait with it); the benches' one way
/// to wait, on [`stratus_apiserver::poll`], its progress shown
/// ([`stratus_cluster::progress::Wait`]).
pub(crate) async fn wait_until<F, Fut>(what: &str, limit: Duration, done: F) -> Result<(), BoxError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, BoxError>>,
{
    let wait = stratus_cluster::progress::Wait::start("bench", format!("waiting for {what}"));
    let started = std::time::Instant::now();
    stratus_apiserver::poll(what, limit).until(done).await?;
    wait.done(&format!("after {:.1} s", started.elapsed().as_secs_f64()));
    Ok(())
}

/// The whole manager over the nodes already registered: Node lists and
/// watches opened, requests sent and heap used until every node has a pod
/// CIDR (the route and IPAM controllers are enabled, so every controller
/// that reads Nodes runs).
async fn manager_phase(
    server: &ApiServer,
    controllers: &tokio::runtime::Handle,
    cloud: &FakeCloud,
    metrics: &mut Vec<(&'static str, f64)>,
) -> Result<(), BoxError> {
    cloud.set_latency(Duration::ZERO);
    cloud.set_rate_limit(1e6, 1_000_000);
    server.clear_requests();
    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        options: stratus_ccm::app::ManagerOptions,
    }
    let options = <Flags as clap::Parser>::try_parse_from([
        "ccm",
        "--cloud-provider=fake",
        "--leader-elect=false",
        "--allocate-node-cidrs",
        "--cluster-cidr=10.0.0.0/8",
        "--configure-cloud-routes",
        // WORKERS, as the other runs.
        "--concurrent-node-syncs=4",
        "--concurrent-service-syncs=4",
    ])?
    .options;
    let (stop, stopped) = watch::channel(false);
    let heap_base = crate::heap_meter::reset_peak();
    let started = Instant::now();
    let provider: Arc<dyn stratus_cloud::CloudProvider> = Arc::new(cloud.clone());
    let config = server.config()?;
    let manager = controllers.spawn(async move {
        let client = kube::Client::try_from(config)?;
        let running = stratus_ccm::app::CloudControllerManager::new(options)
            .with_client(client)
            .with_provider(provider)
            .start(stopped)
            .await?;
        running.wait().await?;
        Ok::<(), BoxError>(())
    });
    let nodes: Api<Node> = Api::all(server.client());
    let listed = ListParams::default().labels("bench=ccm");
    // The bench's own Node lists, taken out of the counts below.
    let polls = std::sync::atomic::AtomicUsize::new(0);
    let outcome = wait_until(
        "every node given a pod CIDR by the manager",
        Duration::from_secs(300),
        || async {
            polls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let list = nodes.list(&listed).await?;
            Ok(list
                .items
                .iter()
                .all(|n| n.spec.as_ref().is_some_and(|s| s.pod_cidr.is_some())))
        },
    )
    .await;
    let polls = polls.into_inner() as f64;
    let seconds = started.elapsed().as_secs_f64();
    let heap = crate::heap_meter::peak() - heap_base;
    let _ = stop.send(true);
    let ended = manager.await;
    outcome?;
    ended??;
    let requests = server.requests();
    let by = |verb: Verb| {
        requests
            .iter()
            .filter(|r| r.resource == "nodes" && r.verb == verb)
            .count() as f64
    };
    let (lists, watches) = (by(Verb::List) - polls, by(Verb::Watch));
    let sent = requests.len() as f64 - polls;
    metrics.push(("manager_node_lists", lists));
    metrics.push(("manager_node_watches", watches));
    metrics.push(("manager_node_watches_ratio_measured_over_floor", watches));
    metrics.push(("manager_requests_until_cidrs", sent));
    metrics.push(("manager_cidrs_seconds", seconds));
    metrics.push(("manager_heap_peak_bytes", heap as f64));
    Ok(())
}

/// The plain-client floor for node initialization: 2 writes per node.
async fn floor_writes(server: &ApiServer) -> Result<f64, BoxError> {
    for i in 0..NODES {
        server.seed(node(&format!("floor-{i}"), "floor", true))?;
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..16 {
        let api: Api<Node> = Api::all(server.client());
        tasks.push(tokio::spawn(async move {
            for i in (t..NODES).step_by(16) {
                let name = format!("floor-{i}");
                let meta = json!({
                    "metadata": {"labels": {"node.kubernetes.io/instance-type": "fake.small", "topology.kubernetes.io/zone": "fake-1a"}},
                    "spec": {"providerID": format!("fake://{name}"), "taints": []}
                });
                api.patch(&name, &PatchParams::default(), &Patch::Merge(meta)).await?;
                let status = json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}});
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(status)).await?;
            }
            Ok::<_, kube::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(started.elapsed().as_secs_f64())
}

pub(crate) async fn run() -> Result<(), BoxError> {
    let server = crate::measure::harness_server().start().await?;
    let client = server.client();
    let controller_runtime = ControllerRuntime::new()?;
    let controllers = controller_runtime.handle()?;
    let mut metrics: Vec<(&'static str, f64)> = Vec::new();

    // Floor: the required writes by a plain client, plus the batched cloud
    // calls (5,000 / 500 = 10) at cloud latency.
    let floor_writes = floor_writes(&server).await?;
    let floor_cloud = (NODES as f64 / 500.0).ceil() * CLOUD_LATENCY.as_secs_f64();
    let floor_init = floor_writes + floor_cloud;
    let all_nodes: Api<Node> = Api::all(client.clone());
    all_nodes
        .delete_collection(
            &kube::api::DeleteParams::default(),
            &ListParams::default().labels("bench=floor"),
        )
        .await?;

    // 5,000 nodes registered at once.
    let cloud = FakeCloud::new();
    for i in 0..NODES {
        let name = format!("node-{i}");
        server.seed(node(&name, "ccm", true))?;
        cloud.add_instance(FakeInstance::new(&name).with_internal_ip(format!(
            "10.{}.{}.{}",
            i / 65_536,
            (i / 256) % 256,
            i % 256
        )));
    }
    cloud.set_latency(CLOUD_LATENCY);
    cloud.set_rate_limit(CLOUD_QPS, 100);
    let nodes: Api<Node> = Api::all(client.clone());
    let from = server.revision().to_string();
    let untainted: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let watcher = {
        let (nodes, untainted) = (nodes.clone(), untainted.clone());
        tokio::spawn(async move {
            let Ok(stream) = nodes
                .watch(
                    &WatchParams::default().labels("bench=ccm").timeout(600),
                    &from,
                )
                .await
            else {
                return;
            };
            futures_util::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                if let Ok(WatchEvent::Modified(n)) = event
                    && !tainted(&n)
                    && let Some(name) = n.metadata.name
                {
                    untainted
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .entry(name)
                        .or_insert_with(Instant::now);
                }
            }
        })
    };
    server.clear_requests();
    cloud.clear_calls();
    let (stop, stopped) = watch::channel(false);
    let config = NodeControllerConfig {
        status_update_frequency: Duration::from_secs(3600),
        workers: WORKERS,
        ..Default::default()
    };
    let heap_base = crate::heap_meter::reset_peak();
    let t0 = Instant::now();
    let provider = Arc::new(cloud.clone());
    let controller = spawn_controller(&controllers, server.config()?, move |client| {
        node_controller(client, provider, config).run(stopped)
    });
    let seen = untainted.clone();
    wait_until("every node initialized", Duration::from_secs(120), || {
        let seen = seen.clone();
        async move { Ok(seen.lock().unwrap_or_else(|e| e.into_inner()).len() == NODES) }
    })
    .await?;
    let init = t0.elapsed().as_secs_f64();
    let node_heap = crate::heap_meter::peak() - heap_base;
    watcher.abort();
    let _ = stop.send(true);
    let _ = controller.await;
    let mut latencies: Vec<f64> = untainted
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .map(|t| t.duration_since(t0).as_secs_f64())
        .collect();
    latencies.sort_by(f64::total_cmp);
    let requests = server.requests();
    let node_writes = requests
        .iter()
        .filter(|r| {
            r.verb == Verb::Patch
                && (r.resource == "nodes" || r.resource == "nodes/status")
                && r.status < 300
        })
        .count();
    let metadata_calls =
        cloud.calls_to("instance_metadata_batch") + cloud.calls_to("instance_metadata");
    metrics.push(("node_init_seconds", init));
    metrics.push(("node_init_floor_seconds", floor_init));
    metrics.push(("node_init_ratio_measured_over_floor", init / floor_init));
    metrics.push(("node_init_cloud_calls", metadata_calls as f64));
    metrics.push((
        "node_init_nodes_per_cloud_call",
        NODES as f64 / metadata_calls.max(1) as f64,
    ));
    metrics.push((
        "node_init_writes_per_node",
        node_writes as f64 / NODES as f64,
    ));
    metrics.push(("taint_removal_p50_seconds", percentile(&latencies, 0.5)));
    metrics.push(("taint_removal_p99_seconds", percentile(&latencies, 0.99)));

    // One address-refresh pass at 5,000 nodes.
    for i in 0..NODES {
        cloud.update_instance(&format!("node-{i}"), |inst| {
            inst.addresses[0].address = format!("172.16.{}.{}", i / 256, i % 256)
        });
    }
    cloud.clear_calls();
    let (stop, stopped) = watch::channel(false);
    let config = NodeControllerConfig {
        status_update_frequency: Duration::from_secs(1),
        workers: WORKERS,
        ..Default::default()
    };
    let t1 = Instant::now();
    let provider = Arc::new(cloud.clone());
    let controller = spawn_controller(&controllers, server.config()?, move |client| {
        node_controller(client, provider, config).run(stopped)
    });
    let check = nodes.clone();
    wait_until("every address refreshed", Duration::from_secs(120), || {
        let check = check.clone();
        async move {
            let list = check
                .list(&ListParams::default().labels("bench=ccm"))
                .await?;
            Ok(list.items.iter().all(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.addresses.as_ref())
                    .is_some_and(|a| a.iter().any(|a| a.address.starts_with("172.16.")))
            }))
        }
    })
    .await?;
    // The first pass starts one period (1 s) after the controller.
    let pass = (t1.elapsed().as_secs_f64() - 1.0).max(0.0);
    let _ = stop.send(true);
    let _ = controller.await;
    metrics.push(("status_pass_seconds", pass));
    metrics.push((
        "status_pass_cloud_calls",
        (cloud.calls_to("instance_metadata_batch") + cloud.calls_to("instance_metadata")) as f64,
    ));

    // 1,000 LoadBalancer Services, then one node added.
    for i in 0..SERVICES {
        server.seed(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": format!("lb-{i}"), "namespace": "default"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}))?;
    }
    cloud.clear_calls();
    server.clear_requests();
    let (stop, stopped) = watch::channel(false);
    let heap_base = crate::heap_meter::reset_peak();
    let t2 = Instant::now();
    let provider = Arc::new(cloud.clone());
    let controller = spawn_controller(&controllers, server.config()?, move |client| {
        let config = ServiceControllerConfig {
            workers: WORKERS,
            ..Default::default()
        };
        let informers = SharedInformers::new(client.clone());
        ServiceController::new(
            client,
            informers.services(),
            informers.nodes(),
            provider,
            config,
        )
        .run(stopped)
    });
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let check = services.clone();
    wait_until("every ingress written", Duration::from_secs(120), || {
        let check = check.clone();
        async move {
            let list = check.list(&ListParams::default()).await?;
            Ok(list
                .items
                .iter()
                .filter(|s| {
                    s.metadata
                        .name
                        .as_deref()
                        .is_some_and(|n| n.starts_with("lb-"))
                })
                .all(|s| {
                    s.status
                        .as_ref()
                        .and_then(|st| st.load_balancer.as_ref())
                        .and_then(|l| l.ingress.as_ref())
                        .is_some_and(|i| !i.is_empty())
                }))
        }
    })
    .await?;
    let lb_ensure = t2.elapsed().as_secs_f64();
    let ensure_calls = cloud.calls_to("ensure_load_balancer");
    let service_writes = server
        .requests()
        .iter()
        .filter(|r| r.verb == Verb::Patch && r.resource.starts_with("services") && r.status < 300)
        .count();
    cloud.clear_calls();
    let t3 = Instant::now();
    server.seed(node("node-new", "ccm", false))?;
    let lb_cloud = cloud.clone();
    wait_until(
        "every load balancer updated",
        Duration::from_secs(120),
        || {
            let lb_cloud = lb_cloud.clone();
            async move {
                Ok(lb_cloud
                    .load_balancers()
                    .values()
                    .all(|lb| lb.hosts.iter().any(|h| h == "node-new")))
            }
        },
    )
    .await?;
    let lb_update = t3.elapsed().as_secs_f64();
    let service_heap = crate::heap_meter::peak() - heap_base;
    let update_calls = cloud.calls_to("update_load_balancer");
    let _ = stop.send(true);
    let _ = controller.await;
    let lb_floor = SERVICES as f64 / CLOUD_QPS;
    metrics.push(("lb_ensure_seconds", lb_ensure));
    metrics.push(("lb_ensure_floor_seconds", lb_floor));
    metrics.push(("lb_ensure_ratio_measured_over_floor", lb_ensure / lb_floor));
    metrics.push(("lb_ensure_cloud_calls", ensure_calls as f64));
    metrics.push(("lb_ensure_api_writes", service_writes as f64));
    metrics.push(("lb_node_added_seconds", lb_update));
    metrics.push(("lb_node_added_floor_seconds", lb_floor));
    metrics.push((
        "lb_node_added_ratio_measured_over_floor",
        lb_update / lb_floor,
    ));
    metrics.push(("lb_node_added_update_calls", update_calls as f64));
    // FakeCloud's state is allocated on the controllers' threads too (the
    // controllers call it); its load balancers' host lists dominate it.
    let fake_lb_bytes: usize = cloud
        .load_balancers()
        .values()
        .map(|lb| {
            lb.hosts.len() * std::mem::size_of::<String>()
                + lb.hosts.iter().map(String::len).sum::<usize>()
        })
        .sum();
    metrics.push(("node_controller_heap_peak_bytes", node_heap as f64));
    metrics.push(("service_controller_heap_peak_bytes", service_heap as f64));
    metrics.push(("fake_cloud_lb_host_lists_bytes", fake_lb_bytes as f64));
    metrics.push((
        "service_controller_heap_without_fake_bytes",
        (service_heap as f64 - fake_lb_bytes as f64).max(0.0),
    ));
    manager_phase(&server, &controllers, &cloud, &mut metrics).await?;
    metrics.push(("peak_rss_bytes_process", peak_rss() as f64));

    crate::measure::write_results(
        "ccm",
        &metrics,
        "ratios are measured time over the floor's: 1.0 = as fast as the floor",
    )?;
    let path = std::path::Path::new("target/bench/ccm-phases.svg");
    let figures = crate::plot::figures(std::path::Path::new("target/bench"), "ccm")?;
    std::fs::write(path, crate::plot::ccm(&figures)?)?;
    println!("wrote {}", path.display());
    drop(controller_runtime);
    server.shutdown().await;
    Ok(())
}

/// The cloud-node controller, reading Nodes through an informer of its own.
fn node_controller(
    client: kube::Client,
    provider: Arc<stratus_testing::FakeCloud>,
    config: NodeControllerConfig,
) -> NodeController {
    NodeController::new(
        client.clone(),
        SharedInformers::new(client).nodes(),
        provider,
        config,
    )
}
