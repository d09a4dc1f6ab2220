//! `cargo xtask bench process`: 500 pods of `sleep` started and deleted on
//! one process node (`stratus-provider-process`), against a floor of the
//! same 500 processes spawned, then killed, by a plain loop in the same run.
//!
//! Figures: the time to have every pod Running (the notifier reports it)
//! and every pod gone after deletion, p50 / p99 create → Running, and the
//! node process's own CPU time and resident memory per running pod; each
//! with the floor's and a `<what>_ratio_measured_over_floor`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use stratus_pod::{PodLifecycleHandler, PodNotifier, PodStatusCallback};
use stratus_provider_process::{ProcessConfig, ProcessProvider};

use crate::ccm::percentile;
use crate::measure::write_results;
use stratus_cluster::BoxError;

/// Resident memory of this process, in bytes.
fn rss_bytes() -> f64 {
    crate::measure::rss_bytes() as f64
}

const PODS: usize = 500;

/// CPU time of this process (all threads).
fn cpu_seconds() -> f64 {
    crate::measure::process_cpu_seconds("self").unwrap_or(0.0)
}

/// What one side measured.
struct Side {
    start_seconds: f64,
    stop_seconds: f64,
    latencies_ms: Vec<f64>,
    cpu_per_pod_ms: f64,
    rss_per_pod_bytes: f64,
}

/// The floor: spawn and kill the same processes in a loop.
async fn floor() -> Result<Side, BoxError> {
    let (cpu0, rss0) = (cpu_seconds(), rss_bytes());
    let started = Instant::now();
    let mut children = Vec::with_capacity(PODS);
    let mut latencies = Vec::with_capacity(PODS);
    for _ in 0..PODS {
        let t = Instant::now();
        let child = tokio::process::Command::new("sleep")
            .arg("600")
            .process_group(0)
            .kill_on_drop(true)
            .spawn()?;
        latencies.push(t.elapsed().as_secs_f64() * 1000.0);
        children.push(child);
    }
    let start_seconds = started.elapsed().as_secs_f64();
    let rss = rss_bytes() - rss0;
    let stopping = Instant::now();
    for child in &mut children {
        child.start_kill()?;
    }
    for child in &mut children {
        child.wait().await?;
    }
    let stop_seconds = stopping.elapsed().as_secs_f64();
    latencies.sort_by(f64::total_cmp);
    Ok(Side {
        start_seconds,
        stop_seconds,
        latencies_ms: latencies,
        cpu_per_pod_ms: (cpu_seconds() - cpu0) * 1000.0 / PODS as f64,
        rss_per_pod_bytes: rss.max(0.0) / PODS as f64,
    })
}

fn pod(i: usize) -> Result<Pod, BoxError> {
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("sleep-{i}"), "namespace": "bench", "uid": format!("uid-{i}")},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "sleep", "image": "busybox", "command": ["sleep", "600"]}],
        },
    }))?)
}

/// The provider: create every pod, wait until the notifier reports each
/// Running, delete them, wait until each is reported gone.
async fn provider() -> Result<Side, BoxError> {
    let root = std::env::temp_dir().join(format!("stratus-bench-process-{}", std::process::id()));
    let provider = ProcessProvider::new(ProcessConfig::new(&root));
    let running_at: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let gone: Arc<Mutex<usize>> = Arc::default();
    let (seen, ended) = (running_at.clone(), gone.clone());
    provider.notify_pods(PodStatusCallback::new(move |pod: Pod| {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        match phase.as_str() {
            "Running" => {
                seen.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .entry(name)
                    .or_insert_with(Instant::now);
            }
            "Failed" | "Succeeded" => {
                *ended
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) += 1;
            }
            _ => {}
        }
    }));
    let pods: Vec<Pod> = (0..PODS).map(pod).collect::<Result<_, _>>()?;
    let (cpu0, rss0) = (cpu_seconds(), rss_bytes());
    let started = Instant::now();
    let mut created_at = HashMap::with_capacity(PODS);
    for p in &pods {
        created_at.insert(p.metadata.name.clone().unwrap_or_default(), Instant::now());
        provider.create_pod(p).await?;
    }
    let count = || running_at.lock().map_or(0, |m| m.len());
    stratus_apiserver::poll("every pod Running", Duration::from_secs(120))
        .every(Duration::from_millis(2))
        .until(|| async {
            let n = count();
            (n < PODS).then(|| format!("{n} of {PODS} Running"))
        })
        .await?;
    let start_seconds = started.elapsed().as_secs_f64();
    let rss = rss_bytes() - rss0;
    let mut latencies: Vec<f64> = {
        let running = running_at.lock().map_err(|e| e.to_string())?;
        created_at
            .iter()
            .filter_map(|(name, t)| {
                Some(running.get(name)?.duration_since(*t).as_secs_f64() * 1000.0)
            })
            .collect()
    };
    latencies.sort_by(f64::total_cmp);
    let stopping = Instant::now();
    for p in &pods {
        provider.delete_pod(p).await?;
    }
    let ended = || gone.lock().map_or(0, |g| *g);
    stratus_apiserver::poll("every pod gone", Duration::from_secs(120))
        .every(Duration::from_millis(2))
        .until(|| async {
            let n = ended();
            let held = provider.get_pods().await?.len();
            Ok::<_, stratus_pod::PodError>(
                (n < PODS || held > 0)
                    .then(|| format!("{n} of {PODS} gone, {held} still held by the provider")),
            )
        })
        .await?;
    let stop_seconds = stopping.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let _ = std::fs::remove_dir_all(&root);
    Ok(Side {
        start_seconds,
        stop_seconds,
        latencies_ms: latencies,
        cpu_per_pod_ms: cpu * 1000.0 / PODS as f64,
        rss_per_pod_bytes: rss.max(0.0) / PODS as f64,
    })
}

/// Run the benchmark and write `target/bench/process.json`.
pub(crate) async fn run() -> Result<(), BoxError> {
    println!(
        "{PODS} pods of `sleep 600` on one process node, and the same processes from a plain loop\n"
    );
    let floor = floor().await?;
    let measured = provider().await?;
    let ratio = |m: f64, f: f64| if f > 0.0 { m / f } else { 0.0 };
    let metrics = [
        ("pods", PODS as f64),
        (
            "start_pods_per_second",
            PODS as f64 / measured.start_seconds,
        ),
        (
            "start_floor_pods_per_second",
            PODS as f64 / floor.start_seconds,
        ),
        (
            "start_all_ratio_measured_over_floor",
            ratio(measured.start_seconds, floor.start_seconds),
        ),
        (
            "create_to_running_p50_ms",
            percentile(&measured.latencies_ms, 0.5),
        ),
        (
            "create_to_running_p99_ms",
            percentile(&measured.latencies_ms, 0.99),
        ),
        ("floor_spawn_p99_ms", percentile(&floor.latencies_ms, 0.99)),
        (
            "create_to_running_p99_ratio_measured_over_floor",
            ratio(
                percentile(&measured.latencies_ms, 0.99),
                percentile(&floor.latencies_ms, 0.99),
            ),
        ),
        ("delete_all_seconds", measured.stop_seconds),
        ("floor_kill_all_seconds", floor.stop_seconds),
        (
            "delete_all_ratio_measured_over_floor",
            ratio(measured.stop_seconds, floor.stop_seconds),
        ),
        ("node_cpu_ms_per_pod", measured.cpu_per_pod_ms),
        ("floor_cpu_ms_per_pod", floor.cpu_per_pod_ms),
        (
            "cpu_per_pod_ratio_measured_over_floor",
            ratio(measured.cpu_per_pod_ms, floor.cpu_per_pod_ms),
        ),
        ("node_rss_bytes_per_running_pod", measured.rss_per_pod_bytes),
        ("floor_rss_bytes_per_process", floor.rss_per_pod_bytes),
        (
            "rss_per_pod_ratio_measured_over_floor",
            ratio(measured.rss_per_pod_bytes, floor.rss_per_pod_bytes),
        ),
    ];
    write_results(
        "process",
        &metrics,
        "ratios are the provider's figure over the plain loop's; above 1 = slower or bigger",
    )
}
