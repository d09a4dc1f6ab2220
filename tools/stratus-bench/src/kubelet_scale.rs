//! `cargo xtask bench kubelet-scale [--nodes N] [--pods-per-node P] [--go-qps Q]`:
//! many virtual nodes in one Stratus process (100 nodes, 1,000 pods each:
//! 100,000 pods by default) beside the per-node figure of the Go
//! virtual-kubelet, in the same run.
//!
//! - Stratus: the virtual-kubelet command with N comma-separated node
//!   names (one process, one MockPodProvider per node, one pod informer
//!   per node), as `bench kubelet-go`'s child, on a fresh harness API
//!   server. Every pod (P per node, bound round-robin over the nodes) is
//!   created bound at once, through the API by 16 clients as a scheduler's
//!   binds come; the time until the last is Running, each pod's bind →
//!   Running latency (seen by one watch on every pod), the process's CPU
//!   seconds and resident memory, then a paged list confirming every pod
//!   Running; then the pod cache alone: one informer per node like the pod
//!   controller's, started on a measured runtime of this process over the
//!   same pods (see `bench kubelet`), its heap per pod.
//! - Go: `tools/go-peers/virtual-kubelet` runs one node per process, so its
//!   figures are one process's with P pods on a fresh server, the same
//!   workload, and the N-node figures are derived from it as if N such
//!   processes ran side by side without slowing each other (which flatters
//!   Go): the same time and latencies, N times the pods a second, N times
//!   the process's resident memory.
//!
//! `target/bench/kubelet-scale.json`: `<metric>_stratus`, `<metric>_go`
//! (derived as above) and `<metric>_ratio_stratus_over_go`, plus the pod
//! cache per pod and the count of pods Running.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use crate::ccm::percentile;
use crate::kubelet::{Observer, bind_all, pod_cache_heap};
use crate::kubelet_go::{
    GoQueues, NodeProcess, cpu_seconds, go_node_command, phase_limit, rss, stratus_node_command,
};
use crate::measure::write_side_by_side;
use stratus_cluster::BoxError;
use stratus_cluster::ControlPlane;

/// Virtual nodes in the Stratus process unless `--nodes` says otherwise.
const DEFAULT_NODES: usize = 100;
/// Pods per node unless `--pods-per-node` says otherwise.
const DEFAULT_PODS_PER_NODE: usize = 1_000;

/// One side's figures.
struct Figures {
    /// From the first bind to the last (the binds themselves).
    bind_s: f64,
    admission_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    cpu_s: f64,
    rss_per_pod: f64,
    rss_running: f64,
    running: usize,
}

/// Bind `per_node` pods to each of `nodes` at once ([`bind_all`]) and
/// measure until all are Running.
async fn admit(
    process: &NodeProcess,
    label: &str,
    nodes: &[String],
    per_node: usize,
) -> Result<Figures, BoxError> {
    let (client, pid) = (process.plane.client(), process.pid);
    process.ready(label, nodes).await?;
    let (cpu_before, rss_before) = (cpu_seconds(pid)?, rss(pid)?);
    let total = nodes.len() * per_node;
    let observer = Observer::start_all(client.clone()).await?;
    let started = Instant::now();
    let bound_at = bind_all(client.clone(), nodes, per_node).await?;
    let bind_s = started.elapsed().as_secs_f64();
    observer
        .running_within(total, phase_limit(per_node))
        .await?;
    let admission_s = started.elapsed().as_secs_f64();
    let cpu_s = cpu_seconds(pid)? - cpu_before;
    let latencies = observer.latencies(&bound_at);
    drop(observer);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_running = rss(pid)?;
    Ok(Figures {
        bind_s,
        admission_s,
        p50_ms: percentile(&latencies, 0.5) * 1000.0,
        p99_ms: percentile(&latencies, 0.99) * 1000.0,
        cpu_s,
        rss_per_pod: (rss_running - rss_before).max(0.0) / total as f64,
        rss_running,
        running: running_pods(client).await?,
    })
}

/// The pods whose phase is Running, by a list in pages of 5,000.
async fn running_pods(client: kube::Client) -> Result<usize, BoxError> {
    let api: Api<Pod> = Api::namespaced(client, "default");
    let mut running = 0;
    let mut params = ListParams::default().limit(5_000);
    loop {
        let page = api.list(&params).await?;
        running += page
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(running),
        }
    }
}

/// The suite's arguments.
struct Options {
    nodes: usize,
    per_node: usize,
    go_qps: f64,
}

fn options(args: &[String]) -> Result<Options, BoxError> {
    const USAGE: &str =
        "usage: cargo xtask bench kubelet-scale [--nodes N] [--pods-per-node P] [--go-qps Q]";
    let mut o = Options {
        nodes: DEFAULT_NODES,
        per_node: DEFAULT_PODS_PER_NODE,
        go_qps: -1.0,
    };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value; {USAGE}"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}");
        match flag.as_str() {
            "--nodes" => o.nodes = value.parse().map_err(|e| bad(&e))?,
            "--pods-per-node" => o.per_node = value.parse().map_err(|e| bad(&e))?,
            "--go-qps" => o.go_qps = value.parse().map_err(|e| bad(&e))?,
            _ => return Err(format!("unknown option {flag}; {USAGE}").into()),
        }
    }
    if o.nodes == 0 || o.per_node == 0 {
        return Err(format!("--nodes and --pods-per-node must be at least 1; {USAGE}").into());
    }
    Ok(o)
}

pub(crate) async fn run(args: &[String]) -> Result<(), BoxError> {
    let Options {
        nodes,
        per_node,
        go_qps,
    } = options(args)?;
    let go_binary = stratus_cluster::go_peers::virtual_kubelet()?;
    let exe = std::env::current_exe()?;
    let names: Vec<String> = (0..nodes).map(|i| format!("vk-{i}")).collect();
    let total = nodes * per_node;

    let process = NodeProcess::start(
        "Stratus",
        "vk-scale",
        ControlPlane::Embedded,
        |kubeconfig| stratus_node_command(&exe, kubeconfig, &names.join(",")),
    )
    .await?;
    let result = async {
        let figures = admit(&process, "Stratus", &names, per_node).await?;
        let cache = pod_cache_heap(
            process
                .plane
                .harness()
                .ok_or("the scale run is on the harness")?,
            &names,
            total,
        )
        .await?;
        Ok::<_, BoxError>((figures, cache))
    }
    .await;
    process.stop("Stratus", result.is_err()).await;
    let (stratus, (cache_heap, cache_chunks)) = result?;

    let go_node = vec!["vk-go".to_owned()];
    let process = NodeProcess::start("Go", "vk-go", ControlPlane::Embedded, |kubeconfig| {
        go_node_command(&go_binary, kubeconfig, "vk-go", go_qps, GoQueues::Shipped)
    })
    .await?;
    let result = admit(&process, "Go", &go_node, per_node).await;
    process.stop("Go", result.is_err()).await;
    let go = result?;

    let per_1000 = |cpu: f64, pods: usize| cpu / (pods as f64 / 1000.0);
    let rows: [(&str, f64, f64); 6] = [
        ("admission_s", stratus.admission_s, go.admission_s),
        ("bind_to_running_p50_ms", stratus.p50_ms, go.p50_ms),
        ("bind_to_running_p99_ms", stratus.p99_ms, go.p99_ms),
        (
            "cpu_s_per_1000_pods",
            per_1000(stratus.cpu_s, total),
            per_1000(go.cpu_s, per_node),
        ),
        ("rss_bytes_per_pod", stratus.rss_per_pod, go.rss_per_pod),
        (
            "rss_bytes_all_nodes",
            stratus.rss_running,
            go.rss_running * nodes as f64,
        ),
    ];
    write_side_by_side(
        "kubelet-scale",
        &[
            ("nodes", nodes as f64),
            ("pods", total as f64),
            ("pods_running_stratus", stratus.running as f64),
            ("pods_running_go_one_node", go.running as f64),
            ("bind_s_stratus", stratus.bind_s),
            ("pods_per_sec_stratus", total as f64 / stratus.admission_s),
            ("pods_per_sec_go", total as f64 / go.admission_s),
            (
                "pod_cache_heap_bytes_per_pod",
                cache_heap as f64 / total as f64,
            ),
            (
                "pod_cache_malloc_bytes_per_pod",
                cache_chunks as f64 / total as f64,
            ),
        ],
        &rows,
        &format!(
            "Stratus: {nodes} nodes in one process, {total} pods; Go: one node with {per_node} pods, \
             its figures taken for {nodes} such processes (same time, {nodes}x the pods a second \
             and the memory)"
        ),
    )?;
    if stratus.running != total {
        return Err(format!("{} of {total} pods Running on Stratus", stratus.running).into());
    }
    Ok(())
}
