//! `cargo xtask bench kubelet`: one virtual node with MockPodProvider
//! (answering at once) and 10,000 pods bound to it at once.
//!
//! - Admission: pods/s from the binds to the last pod Running in the API;
//!   the latency of each pod from its bind to the write of `Running`
//!   (p50 / p99). Floor: the same 10,000 status writes by a plain client
//!   (16 concurrent tasks) in the same run.
//! - Deletion: the 10,000 pods deleted (graceful), until the last is gone
//!   from the API. Floor: 10,000 force deletions by a plain client.
//! - Memory: the heap of the node's runtime (controllers, caches, and the
//!   mock provider's own copies, which run on it) per pod.
//!
//! The node runs on a runtime of its own, with its own client, so its heap
//! is measured apart from the API server's (see [`crate::heap_meter`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use serde_json::json;
use stratus_kubelet::VirtualNode;
use stratus_kubelet::node::NodeConfig;
use stratus_kubelet::pods::PodControllerConfig;
use stratus_testing::{ApiServer, MockPodProvider};
use tokio::sync::watch;

use crate::bench::BoxError;
use crate::bench_ccm::{ControllerRuntime, peak_rss, percentile, spawn_controller, wait_until};

const PODS: usize = 10_000;
const NODE: &str = "vk-bench";

fn pod(name: &str, node: Option<&str>) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": uuid(name), "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "nodeName": node,
            "enableServiceLinks": false,
            "terminationGracePeriodSeconds": 30,
            "restartPolicy": "Always",
            "containers": [{"name": "app", "image": "nginx:1.27", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
        },
        "status": {"phase": "Pending"},
    })
}

fn uuid(name: &str) -> String {
    format!("00000000-0000-4000-8000-{:012x}", fxhash(name))
}

fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3) & 0xffff_ffff_ffff
    })
}

/// Run `request(api, i)` for every pod index, 16 tasks at once; seconds.
async fn sixteen_ways<F, Fut>(api: &Api<Pod>, request: F) -> Result<f64, BoxError>
where
    F: Fn(Api<Pod>, usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<(), kube::Error>> + Send,
{
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..16 {
        let (api, request) = (api.clone(), request.clone());
        tasks.push(tokio::spawn(async move {
            for i in (t..PODS).step_by(16) {
                request(api.clone(), i).await?;
            }
            Ok::<_, kube::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// The floor of admission: one Running status write per pod by a plain
/// client, 16 at once.
async fn floor_status_writes(server: &ApiServer) -> Result<f64, BoxError> {
    for i in 0..PODS {
        server.seed(pod(&format!("floor-{i}"), None))?;
    }
    let api: Api<Pod> = Api::namespaced(server.client(), "default");
    sixteen_ways(&api, |api, i| async move {
        let status = json!({"status": {"phase": "Running", "podIP": "10.244.0.1",
            "conditions": [{"type": "Ready", "status": "True"}]}});
        api.patch_status(
            &format!("floor-{i}"),
            &PatchParams::default(),
            &Patch::Strategic(status),
        )
        .await
        .map(|_| ())
    })
    .await
}

/// The floor of deletion: one force deletion per pod by a plain client.
async fn floor_deletions(server: &ApiServer) -> Result<f64, BoxError> {
    let api: Api<Pod> = Api::namespaced(server.client(), "default");
    sixteen_ways(&api, |api, i| async move {
        api.delete(
            &format!("floor-{i}"),
            &DeleteParams::default().grace_period(0),
        )
        .await
        .map(|_| ())
    })
    .await
}

pub(crate) async fn run() -> Result<(), BoxError> {
    let server = ApiServer::builder().history(2_000_000).start().await?;
    let client = server.client();
    let mut metrics: Vec<(&'static str, f64)> = Vec::new();

    let floor_admit = floor_status_writes(&server).await?;
    let floor_delete = floor_deletions(&server).await?;

    // The virtual node, on its own runtime.
    let node_runtime = ControllerRuntime::new()?;
    let handle = node_runtime.handle()?;
    let (stop, stopped) = watch::channel(false);
    let (ready_tx, mut ready) = watch::channel(false);
    crate::heap_meter::reset_peak();
    let heap_before = crate::heap_meter::live();
    let node_task = spawn_controller(&handle, server.config()?, move |client| async move {
        let mut config = NodeConfig::new(NODE, "mock");
        config.capacity.insert("pods".into(), PODS.to_string());
        let pods = PodControllerConfig {
            sync_workers: 16,
            status_workers: 16,
            ..Default::default()
        };
        let node = match VirtualNode::builder(client, config)
            .provider(Arc::new(MockPodProvider::new()))
            .pods(pods)
            .build()
        {
            Ok(n) => n,
            Err(e) => {
                eprintln!("cannot build the virtual node: {e}");
                return;
            }
        };
        let mut node_ready = node.ready();
        tokio::spawn(async move {
            let _ = node_ready.wait_for(|r| *r).await.map(|_| ());
            ready_tx.send_replace(true);
        });
        if let Err(e) = node.run(stopped).await {
            eprintln!("the virtual node stopped: {e}");
        }
    });
    tokio::time::timeout(Duration::from_secs(30), ready.wait_for(|r| *r)).await??;

    // Watch for Running, then bind every pod at once.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let running_at: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let gone = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let watcher = {
        let running_at = running_at.clone();
        let gone = gone.clone();
        let pods = pods.clone();
        let rv = pods
            .list(&ListParams::default().limit(1))
            .await?
            .metadata
            .resource_version
            .unwrap_or_default();
        tokio::spawn(async move {
            let params = WatchParams::default()
                .fields(&format!("spec.nodeName={NODE}"))
                .timeout(290);
            let Ok(stream) = pods.watch(&params, &rv).await else {
                return;
            };
            futures_util::pin_mut!(stream);
            while let Some(Ok(event)) = stream.next().await {
                if let WatchEvent::Deleted(_) = event {
                    gone.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                } else if let WatchEvent::Modified(p) = event
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    && let Some(name) = p.metadata.name
                {
                    running_at
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .entry(name)
                        .or_insert_with(Instant::now);
                }
            }
        })
    };
    let mut bound_at = HashMap::with_capacity(PODS);
    let started = Instant::now();
    for i in 0..PODS {
        let name = format!("pod-{i}");
        server.seed(pod(&name, Some(NODE)))?;
        bound_at.insert(name, Instant::now());
    }
    let bound = started.elapsed().as_secs_f64();
    wait_until("every pod Running", Duration::from_secs(600), || async {
        Ok(running_at.lock().unwrap_or_else(|e| e.into_inner()).len() >= PODS)
    })
    .await?;
    let admit = started.elapsed().as_secs_f64();
    let heap_running = crate::heap_meter::live() - heap_before;
    let mut latencies: Vec<f64> = {
        let running = running_at.lock().unwrap_or_else(|e| e.into_inner());
        bound_at
            .iter()
            .filter_map(|(name, at)| {
                running
                    .get(name)
                    .map(|r| r.duration_since(*at).as_secs_f64())
            })
            .collect()
    };
    latencies.sort_by(f64::total_cmp);

    metrics.push(("pods", PODS as f64));
    metrics.push(("bind_seconds", bound));
    metrics.push(("admit_seconds", admit));
    metrics.push(("admit_pods_per_second", PODS as f64 / admit));
    metrics.push(("admit_floor_seconds", floor_admit));
    metrics.push(("admit_ratio_measured_over_floor", admit / floor_admit));
    metrics.push(("bind_to_running_p50_seconds", percentile(&latencies, 0.5)));
    metrics.push(("bind_to_running_p99_seconds", percentile(&latencies, 0.99)));
    metrics.push(("node_runtime_heap_bytes", heap_running as f64));
    metrics.push((
        "node_runtime_heap_bytes_per_pod",
        heap_running as f64 / PODS as f64,
    ));

    // Deletion: graceful deletes of every pod; the provider reports them
    // terminated, the node removes them.
    let started = Instant::now();
    sixteen_ways(&pods, |api, i| async move {
        api.delete(&format!("pod-{i}"), &DeleteParams::default())
            .await
            .map(|_| ())
    })
    .await?;
    // Counted from the watch: polling a 10,000-pod list would compete with
    // the node for the two cores.
    wait_until("every pod gone", Duration::from_secs(600), || async {
        Ok(gone.load(std::sync::atomic::Ordering::Relaxed) >= PODS)
    })
    .await?;
    let delete = started.elapsed().as_secs_f64();
    metrics.push(("delete_seconds", delete));
    metrics.push(("delete_pods_per_second", PODS as f64 / delete));
    metrics.push(("delete_floor_seconds", floor_delete));
    metrics.push(("delete_ratio_measured_over_floor", delete / floor_delete));
    watcher.abort();
    metrics.push(("peak_rss_bytes_process", peak_rss() as f64));

    let _ = stop.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), node_task).await;
    drop(node_runtime);

    crate::bench::write_results(
        "kubelet",
        &metrics,
        "ratios are measured / floor: 1.0 = as fast as the floor",
    )?;
    server.shutdown().await;
    Ok(())
}
