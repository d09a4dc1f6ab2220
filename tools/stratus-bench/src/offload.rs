//! `cargo xtask bench offload`: 2,000 pods offloaded by one offload node
//! (`stratus-provider-kubernetes`) from a home API server to a remote one,
//! where a scheduler binds them to a node running them on
//! `MockPodProvider` (answering at once).
//!
//! Both sides are seen the same way: a watch on the home pods of one node
//! records when each turns `Running`.
//!
//! - Admission: 2,000 home pods bound at once; pods/s from the first bind
//!   to the last home pod Running, and each pod's bind → home Running
//!   latency (p50 / p99). Floor: the same work by a plain client in the
//!   same run — for each pod bound (to a node nobody serves), the remote
//!   create (16 tasks), a watch on the remote pods, and the home status
//!   write of each remote pod seen Running (16 tasks). The remote cluster
//!   (scheduler, remote node) is the same for both, so the ratios show what
//!   the offload node adds to the unavoidable requests.
//! - Memory: the heap of the offload node's runtime (the node's pod cache,
//!   the provider's tracking of home and remote pods, the remote watch) per
//!   offloaded pod, against the floor of holding both sides' pods listed
//!   (what any offloader must know) on the same kind of runtime.
//! - Deletion: the 2,000 home pods deleted (graceful) until the last is
//!   gone at home and remotely (no floor: reported for the record).
//!
//! The node runs on a runtime of its own, with its own clients, so its heap
//! is measured apart from the API servers' (see [`crate::heap_meter`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::WatchParams;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent};
use serde_json::json;
use stratus_kubelet::VirtualNode;
use stratus_kubelet::node::NodeConfig;
use stratus_kubelet::pods::PodControllerConfig;
use stratus_provider_kubernetes::naming::NODE_LABEL;
use stratus_provider_kubernetes::{KubernetesProvider, PROVIDER_NAME};
use stratus_testing::{ApiServer, MockPodProvider, TestCluster};
use tokio::sync::{Semaphore, watch};

use crate::ccm::{ControllerRuntime, percentile, spawn_controller, wait_until};
use crate::kubelet::{Observer, pod, push_p50_p99};
use crate::measure::write_results;
use stratus_cluster::BoxError;

const PODS: usize = 2_000;
/// The offload node.
const NODE: &str = "vk-offload";
/// The node the floor's home pods are bound to: no controller serves it.
const FLOOR_NODE: &str = "vk-floor";
/// The remote cluster's node.
const REMOTE_NODE: &str = "remote-0";
/// The remote namespace of the floor's pods.
const FLOOR_NAMESPACE: &str = "floor";

/// Pod controller workers for both virtual nodes.
fn pod_workers() -> PodControllerConfig {
    PodControllerConfig {
        sync_workers: 16,
        status_workers: 16,
        ..Default::default()
    }
}

/// The remote cluster: a scheduler and `remote-0` (untainted) running
/// every pod bound to it on `MockPodProvider`.
struct Remote {
    cluster: TestCluster,
    _stop: watch::Sender<bool>,
}

impl Remote {
    async fn start() -> Result<Self, BoxError> {
        let mut cluster = TestCluster::start().await?;
        cluster.start_scheduler();
        let mut config = NodeConfig::new(REMOTE_NODE, "mock");
        config.taint = None;
        config
            .capacity
            .insert("pods".into(), (4 * PODS).to_string());
        let node = VirtualNode::builder(cluster.client(), config)
            .provider(Arc::new(MockPodProvider::new().with_node_name(REMOTE_NODE)))
            .pods(pod_workers())
            .build()?;
        let mut ready = node.ready();
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(node.run(stopped));
        tokio::time::timeout(Duration::from_secs(30), ready.wait_for(|r| *r)).await??;
        Ok(Self {
            cluster,
            _stop: stop,
        })
    }

    fn client(&self) -> kube::Client {
        self.cluster.client()
    }
}

/// Bind `{prefix}-0` .. to `node` at home, all at once: each name with the
/// instant of its bind.
fn bind(home: &ApiServer, prefix: &str, node: &str) -> Result<HashMap<String, Instant>, BoxError> {
    let mut bound_at = HashMap::with_capacity(PODS);
    for i in 0..PODS {
        let name = format!("{prefix}-{i}");
        home.seed(pod(&name, node))?;
        bound_at.insert(name, Instant::now());
    }
    Ok(bound_at)
}

/// The floor: a plain client doing the offloading's unavoidable requests.
/// Returns the wall time (first bind to the last home pod seen Running)
/// and each pod's bind → Running latency, sorted.
async fn floor(
    home: &ApiServer,
    remote: &Remote,
    observer: &Observer,
) -> Result<(f64, Vec<f64>), BoxError> {
    let namespaces: Api<Namespace> = Api::all(remote.client());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": FLOOR_NAMESPACE}}))?,
        )
        .await?;
    let remote_pods: Api<Pod> = Api::namespaced(remote.client(), FLOOR_NAMESPACE);
    let home_pods: Api<Pod> = Api::namespaced(home.client(), "default");

    // Remote Running → home status write, at most 16 at once.
    let rv = remote_pods
        .list(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let stream = remote_pods
        .watch(&WatchParams::default().timeout(290), &rv)
        .await?;
    let writers = Arc::new(Semaphore::new(16));
    let status_task = {
        let home_pods = home_pods.clone();
        tokio::spawn(async move {
            futures_util::pin_mut!(stream);
            let mut written = HashSet::with_capacity(PODS);
            while let Some(event) = stream.next().await {
                let Ok(WatchEvent::Modified(p)) = event else {
                    continue;
                };
                let Some(status) = p.status.filter(|s| s.phase.as_deref() == Some("Running"))
                else {
                    continue;
                };
                let Some(name) = p.metadata.name.filter(|n| written.insert(n.clone())) else {
                    continue;
                };
                let Ok(permit) = writers.clone().acquire_owned().await else {
                    return;
                };
                let home_pods = home_pods.clone();
                tokio::spawn(async move {
                    let patch = json!({"status": status});
                    if let Err(e) = home_pods
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
                        .await
                    {
                        eprintln!("the floor's status write of {name} failed: {e}");
                    }
                    drop(permit);
                });
                if written.len() == PODS {
                    return;
                }
            }
        })
    };

    // Each bound pod → its remote create, 16 tasks.
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Pod>();
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let mut creators = Vec::new();
    for _ in 0..16 {
        let (remote_pods, rx) = (remote_pods.clone(), rx.clone());
        creators.push(tokio::spawn(async move {
            loop {
                let next = rx.lock().await.recv().await;
                let Some(pod) = next else {
                    return Ok::<_, kube::Error>(());
                };
                remote_pods.create(&PostParams::default(), &pod).await?;
            }
        }));
    }
    let started = Instant::now();
    let mut bound_at = HashMap::with_capacity(PODS);
    for i in 0..PODS {
        let name = format!("floor-{i}");
        let bound = home.seed(pod(&name, FLOOR_NODE))?;
        bound_at.insert(name, Instant::now());
        let mut remote_pod = bound;
        remote_pod["metadata"] =
            json!({"name": remote_pod["metadata"]["name"], "labels": {"floor": "true"}});
        if let Some(spec) = remote_pod["spec"].as_object_mut() {
            spec.remove("nodeName");
        }
        remote_pod.as_object_mut().map(|o| o.remove("status"));
        let _ = tx.send(serde_json::from_value(remote_pod)?);
    }
    drop(tx);
    for c in creators {
        c.await??;
    }
    observer.running(PODS).await?;
    let wall = started.elapsed().as_secs_f64();
    status_task.abort();
    Ok((wall, observer.latencies(&bound_at)))
}

/// The heap of holding both sides' pods as listed: the floor of what an
/// offloader must keep in memory, measured on a tagged runtime.
async fn listed_heap(home: &ApiServer, remote: &Remote) -> Result<i64, BoxError> {
    let runtime = ControllerRuntime::new()?;
    let handle = runtime.handle()?;
    let remote_config = remote.cluster.server().config()?;
    let (done_tx, done) = tokio::sync::oneshot::channel();
    let (stop, mut stopped) = watch::channel(false);
    let before = crate::heap_meter::live();
    let task = spawn_controller(&handle, home.config()?, move |client| async move {
        let listed = async {
            let remote = kube::Client::try_from(remote_config)?;
            let home: Vec<Pod> = Api::<Pod>::all(client)
                .list(&ListParams::default().fields(&format!("spec.nodeName={NODE}")))
                .await?
                .items;
            let remote: Vec<Pod> = Api::<Pod>::all(remote)
                .list(&ListParams::default().labels(&format!("{NODE_LABEL}={NODE}")))
                .await?
                .items;
            Ok::<_, BoxError>((home, remote))
        }
        .await;
        let counts = listed
            .as_ref()
            .map(|(h, r)| (h.len(), r.len()))
            .map_err(|e| e.to_string());
        let _ = done_tx.send(counts);
        let _ = stopped.wait_for(|s| *s).await;
        drop(listed);
    });
    let counts = tokio::time::timeout(Duration::from_secs(120), done).await??;
    let heap = crate::heap_meter::live() - before;
    let _ = stop.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    match counts {
        Ok((h, r)) if h == PODS && r == PODS => Ok(heap),
        Ok((h, r)) => Err(format!("listed {h} home and {r} remote pods, not {PODS}").into()),
        Err(e) => Err(e.into()),
    }
}

/// Run the benchmark and write `target/bench/offload.json`.
pub(crate) async fn run() -> Result<(), BoxError> {
    println!(
        "{PODS} pods offloaded from one API server to another, and the same requests by a plain client\n"
    );
    let home = ApiServer::builder().history(1_000_000).start().await?;
    let remote = Remote::start().await?;
    let client = home.client();
    let mut metrics: Vec<(&'static str, f64)> = Vec::new();

    let floor_observer = Observer::start(client.clone(), FLOOR_NODE).await?;
    let (floor_admit, floor_latencies) = floor(&home, &remote, &floor_observer).await?;
    drop(floor_observer);

    // The offload node, on its own runtime, with its own clients.
    let node_runtime = ControllerRuntime::new()?;
    let handle = node_runtime.handle()?;
    let remote_config = remote.cluster.server().config()?;
    let (stop, stopped) = watch::channel(false);
    let (ready_tx, mut ready) = watch::channel(false);
    let node_task = spawn_controller(&handle, home.config()?, move |client| async move {
        let remote = match kube::Client::try_from(remote_config) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("cannot build the remote client: {e}");
                return;
            }
        };
        let provider = KubernetesProvider::builder(remote, NODE)
            .host_ip("127.0.0.1")
            .start();
        let mut config = NodeConfig::new(NODE, PROVIDER_NAME);
        config
            .capacity
            .insert("pods".into(), (2 * PODS).to_string());
        let node = match VirtualNode::builder(client, config)
            .provider(Arc::new(provider.clone()))
            .pods(pod_workers())
            .build()
        {
            Ok(n) => n,
            Err(e) => {
                eprintln!("cannot build the offload node: {e}");
                return;
            }
        };
        let mut node_ready = node.ready();
        tokio::spawn(async move {
            let _ = node_ready.wait_for(|r| *r).await;
            while !provider.synced() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            ready_tx.send_replace(true);
        });
        if let Err(e) = node.run(stopped).await {
            eprintln!("the offload node stopped: {e}");
        }
    });
    tokio::time::timeout(Duration::from_secs(30), ready.wait_for(|r| *r)).await??;
    let heap_before = crate::heap_meter::live();

    let observer = Observer::start(client.clone(), NODE).await?;
    let started = Instant::now();
    let bound_at = bind(&home, "pod", NODE)?;
    observer.running(PODS).await?;
    let admit = started.elapsed().as_secs_f64();
    let heap_running = crate::heap_meter::live() - heap_before;
    let latencies = observer.latencies(&bound_at);
    let floor_heap = listed_heap(&home, &remote).await?;

    metrics.push(("pods", PODS as f64));
    metrics.push(("pods_per_s", PODS as f64 / admit));
    metrics.push(("floor_pods_per_s", PODS as f64 / floor_admit));
    metrics.push(("admit_seconds", admit));
    metrics.push(("admit_floor_seconds", floor_admit));
    metrics.push(("admit_ratio_measured_over_floor", admit / floor_admit));
    push_p50_p99(
        &mut metrics,
        ["bind_to_running_p50_seconds", "bind_to_running_p99_seconds"],
        &latencies,
    );
    push_p50_p99(
        &mut metrics,
        [
            "floor_bind_to_running_p50_seconds",
            "floor_bind_to_running_p99_seconds",
        ],
        &floor_latencies,
    );
    let (p99, floor_p99) = (
        percentile(&latencies, 0.99),
        percentile(&floor_latencies, 0.99),
    );
    metrics.push((
        "bind_to_running_p99_ratio_measured_over_floor",
        if floor_p99 > 0.0 {
            p99 / floor_p99
        } else {
            0.0
        },
    ));
    let per_pod = heap_running as f64 / PODS as f64;
    let floor_per_pod = floor_heap as f64 / PODS as f64;
    metrics.push(("node_heap_bytes_per_offloaded_pod", per_pod));
    metrics.push(("floor_listed_heap_bytes_per_pod", floor_per_pod));
    metrics.push((
        "heap_per_pod_ratio_measured_over_floor",
        if floor_per_pod > 0.0 {
            per_pod / floor_per_pod
        } else {
            0.0
        },
    ));

    // Deletion: graceful home deletes; the node deletes each remote pod and
    // ends the home pod once it is gone.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let started = Instant::now();
    for i in 0..PODS {
        pods.delete(&format!("pod-{i}"), &DeleteParams::default())
            .await?;
    }
    observer.gone(PODS).await?;
    let remote_pods: Api<Pod> = Api::all(remote.client());
    let offloaded = ListParams::default().labels(&format!("{NODE_LABEL}={NODE}"));
    wait_until(
        "every remote pod gone",
        Duration::from_secs(120),
        || async {
            Ok(remote_pods
                .list_metadata(&offloaded)
                .await?
                .items
                .is_empty())
        },
    )
    .await?;
    metrics.push(("delete_all_seconds", started.elapsed().as_secs_f64()));

    let _ = stop.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(30), node_task).await;
    write_results(
        "offload",
        &metrics,
        "ratios are the offload node's figure over the plain client's; above 1 = slower or bigger",
    )
}
