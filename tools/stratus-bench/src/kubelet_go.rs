//! `cargo xtask bench kubelet-go [--pods N] [--go-qps Q] [--go-workers W]
//! [--first stratus|go] [--control-plane embedded|real]`: Stratus's
//! virtual kubelet and a Go one built on
//! github.com/virtual-kubelet/virtual-kubelet side by side, in the same run,
//! each as its own process against its own fresh API server (the same
//! server, objects and workload), one after the other: a harness API server
//! (`embedded`, the default), or a real control plane brought up for each
//! side by `cargo xtask cluster up` and taken down after it (`real`; no
//! cluster of `cargo xtask cluster` may be up before).
//!
//! - Stratus: the virtual-kubelet command (`stratus_kubelet::app`, as a
//!   vendor's binary runs it) over MockPodProvider, run as a child of this
//!   benchmark.
//! - Go: `tools/go-peers/virtual-kubelet`, virtual-kubelet's `nodeutil` over
//!   an in-memory provider answering at once as MockPodProvider does (and
//!   as virtual-kubelet's own mock does; that mock is internal to its
//!   command, which also needs a serving key pair and listens on every
//!   interface), with the same node capacity and 10 pod sync workers (Go's
//!   command default, and Stratus's). Its client-go has no client-side
//!   request limit by default (`--go-qps -1`), as Stratus's clients have
//!   none; `--go-qps 5` gives it client-go's default (5 per second, bursts
//!   of 10), which virtual-kubelet's command keeps.
//! - Go tuned: the same peer as a vendor tuning nodeutil for speed runs it
//!   (`--tuned`): its three pod queues without client-go's default
//!   controller rate limiter, whose overall bucket admits 10 pods a second
//!   after a burst of 100 (the shipped peer's figures are that limit, not
//!   its speed), only a per-item back-off from 5 ms; `--go-workers` pod
//!   sync workers (10 by default, as Stratus's).
//!
//! Stratus and tuned Go run first and second, in the order `--first` names
//! (`stratus` by default: run both orders to see what going first is
//! worth); Go as shipped, the slowest by far, runs last.
//!
//! Each side: N pods (10,000 by default) bound to its node at once (created
//! with their node set, 16 clients, as a scheduler binds them; a pod is
//! bound when its create is answered); the
//! time until the last is Running in the API and each pod's bind → Running
//! latency (p50 / p99), seen by one watch; then every pod deleted
//! (graceful, 16 clients) until the last is gone from the API; the
//! process's CPU seconds over those two phases (`/proc/<pid>/stat`) and its
//! resident memory per pod (`VmRSS` with the pods Running less `VmRSS`
//! before, over N); then N pods more bound at 500 a second, each pod's
//! bind → Running latency (p50 / p99). `target/bench/kubelet-go.json`
//! (`kubelet-go-real.json` on the real control plane) has each figure as
//! `<metric>_stratus`, `<metric>_go`, `<metric>_go_tuned`,
//! `<metric>_ratio_stratus_over_go` and
//! `<metric>_ratio_stratus_over_go_tuned` (below 1 = Stratus better);
//! the latency distributions and the pods Running over time in
//! `kubelet-go.series.json`, drawn as `target/bench/kubelet-go-*.svg`
//! (`plot.rs`).

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use stratus_testing::ApiServer;

use crate::ccm::{percentile, wait_until};
use crate::kubelet::bind_all;
use crate::kubelet::{Observer, pod};
use crate::measure::write_against_peers;
use stratus_cluster::BoxError;
use stratus_cluster::ControlPlane;

/// Pods bound a second in the paced phase.
const PACE: usize = 500;
/// The pods of each side unless `--pods` says otherwise.
const DEFAULT_PODS: usize = 10_000;
/// The benchmark's own child: the Stratus node or nodes (`bench
/// kubelet-go-stratus-node KUBECONFIG NODES`, NODES one name or several,
/// comma-separated, all in that one process).
pub(crate) const STRATUS_NODE_CHILD: &str = "kubelet-go-stratus-node";

/// How long a phase may take: Go virtual-kubelet's pod queues let 10 pods
/// a second through once a burst of 100 is spent (client-go's default
/// controller rate limiter), so its phases take about `pods / 10` seconds;
/// twice that, and at least 10 minutes.
pub(crate) fn phase_limit(pods: usize) -> Duration {
    Duration::from_secs((pods as u64 / 5).max(600))
}

/// One side's figures.
struct Figures {
    admission_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    paced_p50_ms: f64,
    paced_p99_ms: f64,
    deletion_s: f64,
    /// CPU seconds over admission and deletion, per 1,000 pods.
    cpu_s_per_1000_pods: f64,
    rss_per_pod: f64,
    rss_idle: f64,
    /// Each pod's bind → Running latency after the burst, in ms, sorted.
    burst_ms: Vec<f64>,
    /// The same in the paced phase.
    paced_ms: Vec<f64>,
    /// When each pod of the burst was Running, in seconds since the first
    /// bind, sorted.
    running_s: Vec<f64>,
}

/// A node process's resident memory now, in bytes.
pub(crate) fn rss(pid: u32) -> Result<f64, BoxError> {
    crate::measure::process_rss_bytes(&pid.to_string())
        .ok_or_else(|| format!("process {pid} is gone").into())
}

/// A node process's CPU time so far (user + system), in seconds.
pub(crate) fn cpu_seconds(pid: u32) -> Result<f64, BoxError> {
    crate::measure::process_cpu_seconds(&pid.to_string())
        .ok_or_else(|| format!("process {pid} is gone").into())
}

/// A fresh API server of one side's own.
pub(crate) enum Plane {
    /// The harness API server, in this process.
    Harness(ApiServer),
    /// A real control plane brought up for the side (`cargo xtask cluster
    /// up`), taken down after it.
    Real(kube::Client),
}

impl Plane {
    /// A fresh one of `kind`.
    pub(crate) async fn start(kind: ControlPlane) -> Result<Self, BoxError> {
        Self::start_without(kind, &[]).await
    }

    /// A fresh one of `kind`; a real one without kube-controller-manager's
    /// controllers `disabled` ([`stratus_cluster::lifecycle::up_without`]).
    pub(crate) async fn start_without(
        kind: ControlPlane,
        disabled: &[&str],
    ) -> Result<Self, BoxError> {
        match kind {
            ControlPlane::Embedded => {
                let server = crate::measure::harness_server().start().await?;
                Ok(Self::Harness(server))
            }
            ControlPlane::Real => {
                let state = stratus_cluster::up_fresh(None, disabled).await?;
                Ok(Self::Real(state.client().await?))
            }
        }
    }

    /// An administrator's client.
    pub(crate) fn client(&self) -> kube::Client {
        match self {
            Self::Harness(server) => server.client(),
            Self::Real(client) => client.clone(),
        }
    }

    /// The harness server, if the side runs on one.
    pub(crate) fn harness(&self) -> Option<&ApiServer> {
        match self {
            Self::Harness(server) => Some(server),
            Self::Real(_) => None,
        }
    }

    /// Write an administrator's kubeconfig for it to `path`.
    pub(crate) fn write_kubeconfig(&self, path: &Path) -> Result<(), BoxError> {
        match self {
            Self::Harness(server) => std::fs::write(path, server.kubeconfig())?,
            Self::Real(_) => {
                let state = stratus_cluster::State::load().ok_or("the control plane is gone")?;
                std::fs::copy(&state.kubeconfig, path)?;
            }
        }
        Ok(())
    }

    /// Shut it down (a real one: `cargo xtask cluster down`).
    pub(crate) async fn stop(self) {
        match self {
            Self::Harness(server) => server.shutdown().await,
            Self::Real(_) => stratus_cluster::down_after_benchmark().await,
        }
    }
}

/// A node process on a fresh API server of its own: started by
/// [`NodeProcess::start`], stopped (and its server shut down) by
/// [`NodeProcess::stop`].
pub(crate) struct NodeProcess {
    /// The process's API server.
    pub(crate) plane: Plane,
    /// The process's id.
    pub(crate) pid: u32,
    child: std::process::Child,
    dir: std::path::PathBuf,
    kubeconfig: std::path::PathBuf,
    log: std::path::PathBuf,
}

impl NodeProcess {
    /// A fresh API server of `kind`, and `command` (given its kubeconfig)
    /// started as the `label` node(s) against it; its output goes to a log
    /// file kept if the run fails.
    pub(crate) async fn start(
        label: &str,
        file: &str,
        kind: ControlPlane,
        command: impl FnOnce(&Path) -> Command,
    ) -> Result<Self, BoxError> {
        let plane = Plane::start(kind).await?;
        let dir =
            std::env::temp_dir().join(format!("stratus-bench-kubelet-go-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let kubeconfig = dir.join(format!("{file}.kubeconfig"));
        let log_path = dir.join(format!("{file}.log"));
        let spawned = plane.write_kubeconfig(&kubeconfig).and_then(|()| {
            let log = std::fs::File::create(&log_path)?;
            command(&kubeconfig)
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()
                .map_err(|e| format!("starting the {label} node: {e}").into())
        });
        let child = match spawned {
            Ok(child) => child,
            Err(e) => {
                plane.stop().await;
                return Err(e);
            }
        };
        Ok(Self {
            plane,
            pid: child.id(),
            child,
            dir,
            kubeconfig,
            log: log_path,
        })
    }

    /// Wait until every node of `nodes` is Ready, then 2 s more for the
    /// start-up work (the first lists, the Leases) to finish.
    pub(crate) async fn ready(&self, label: &str, nodes: &[String]) -> Result<(), BoxError> {
        let api: Api<Node> = Api::all(self.plane.client());
        wait_until(
            &format!("the {label} node(s) Ready"),
            Duration::from_secs(60 + nodes.len() as u64),
            || async {
                let mut ready = 0;
                for node in api.list(&Default::default()).await? {
                    let is_ready = node.status.and_then(|s| s.conditions).is_some_and(|c| {
                        c.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                    });
                    if is_ready && node.metadata.name.is_some_and(|n| nodes.contains(&n)) {
                        ready += 1;
                    }
                }
                Ok(ready == nodes.len())
            },
        )
        .await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        Ok(())
    }

    /// Stop the process and the server; keep the log (and say where) if
    /// `failed`.
    pub(crate) async fn stop(self, label: &str, failed: bool) {
        crate::measure::stop_child(self.child);
        self.plane.stop().await;
        if failed {
            eprintln!("the {label} node's log: {}", self.log.display());
        } else {
            // The other side's files may share the directory: it goes
            // with the last of them.
            let _ = std::fs::remove_file(&self.log);
            let _ = std::fs::remove_file(&self.kubeconfig);
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

/// Run one side: a fresh API server, `command` started as node `node`
/// against it, the workload, the figures.
async fn side(
    label: &str,
    node: &str,
    pods: usize,
    kind: ControlPlane,
    command: impl FnOnce(&Path) -> Command,
) -> Result<Figures, BoxError> {
    let process = NodeProcess::start(label, node, kind, command).await?;
    let result = workload(&process, label, node, pods).await;
    process.stop(label, result.is_err()).await;
    result
}

async fn workload(
    process: &NodeProcess,
    label: &str,
    node: &str,
    pods: usize,
) -> Result<Figures, BoxError> {
    let pid = process.pid;
    let client = process.plane.client();
    process.ready(label, &[node.to_owned()]).await?;
    let (cpu_before, rss_before) = (cpu_seconds(pid)?, rss(pid)?);

    let observer = Observer::start(client.clone(), node).await?;
    let started = Instant::now();
    let bound_at = bind_all(client.clone(), &[node.to_owned()], pods).await?;
    observer.running_within(pods, phase_limit(pods)).await?;
    let admission_s = started.elapsed().as_secs_f64();
    let latencies = observer.latencies(&bound_at);
    let running_s = observer.running_since(started, &bound_at);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_running = rss(pid)?;

    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let names: Arc<Vec<String>> = Arc::new(bound_at.keys().cloned().collect());
    let started = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (api, next, names) = (api.clone(), next.clone(), names.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(name) = names.get(i) else {
                    return Ok::<_, kube::Error>(());
                };
                api.delete(name, &DeleteParams::default()).await?;
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    observer.gone_within(pods, phase_limit(pods)).await?;
    let deletion_s = started.elapsed().as_secs_f64();
    let cpu_s = cpu_seconds(pid)? - cpu_before;

    // The same number of pods again, bound at PACE a second.
    let paced_at = bind_paced(&api, node, pods).await?;
    observer.running_within(2 * pods, phase_limit(pods)).await?;
    let paced = observer.latencies(&paced_at);
    Ok(Figures {
        admission_s,
        p50_ms: percentile(&latencies, 0.5) * 1000.0,
        p99_ms: percentile(&latencies, 0.99) * 1000.0,
        paced_p50_ms: percentile(&paced, 0.5) * 1000.0,
        paced_p99_ms: percentile(&paced, 0.99) * 1000.0,
        deletion_s,
        cpu_s_per_1000_pods: cpu_s / (pods as f64 / 1000.0),
        rss_per_pod: (rss_running - rss_before).max(0.0) / pods as f64,
        rss_idle: rss_before,
        burst_ms: latencies.iter().map(|s| s * 1000.0).collect(),
        paced_ms: paced.iter().map(|s| s * 1000.0).collect(),
        running_s,
    })
}

/// Create `pods` pods bound to `node` at [`PACE`] a second (a few every
/// 10 ms, each create on its own so that a slow answer does not hold back
/// the next): each pod's bind instant (when its create was answered).
async fn bind_paced(
    api: &Api<Pod>,
    node: &str,
    pods: usize,
) -> Result<HashMap<String, Instant>, BoxError> {
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let per_tick = (PACE / 100).max(1);
    let mut creates = tokio::task::JoinSet::new();
    for first in (0..pods).step_by(per_tick) {
        tick.tick().await;
        for i in first..(first + per_tick).min(pods) {
            let name = format!("paced-{i}");
            let object: Pod = serde_json::from_value(pod(&name, node))?;
            let api = api.clone();
            creates.spawn(async move {
                api.create(&PostParams::default(), &object).await?;
                Ok::<_, kube::Error>((name, Instant::now()))
            });
        }
    }
    let mut paced_at = HashMap::with_capacity(pods);
    while let Some(created) = creates.join_next().await {
        let (name, at) = created??;
        paced_at.insert(name, at);
    }
    Ok(paced_at)
}

const USAGE: &str = "usage: cargo xtask bench kubelet-go [--pods N] [--go-qps Q] [--go-workers W] [--first stratus|go] [--control-plane embedded|real]";

/// The suite's arguments.
struct Options {
    /// Pods per side.
    pods: usize,
    /// The Go node's client-side request limit (`--qps`; negative: none).
    go_qps: f64,
    /// The tuned Go node's pod sync workers.
    go_workers: usize,
    /// Tuned Go runs before Stratus.
    go_first: bool,
    /// The API server each side gets fresh.
    control_plane: ControlPlane,
}

/// The options of [`USAGE`] from the arguments after the suite's name.
fn options(args: &[String]) -> Result<Options, BoxError> {
    let mut o = Options {
        pods: DEFAULT_PODS,
        go_qps: -1.0,
        go_workers: 10,
        go_first: false,
        control_plane: ControlPlane::Embedded,
    };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--pods" => o.pods = value.parse().map_err(|e| format!("--pods {value}: {e}"))?,
            "--go-qps" => {
                o.go_qps = value
                    .parse()
                    .map_err(|e| format!("--go-qps {value}: {e}"))?
            }
            "--go-workers" => {
                o.go_workers = value
                    .parse()
                    .map_err(|e| format!("--go-workers {value}: {e}"))?
            }
            "--first" => {
                o.go_first = match value.as_str() {
                    "stratus" => false,
                    "go" => true,
                    _ => return Err(format!("--first {value}: `stratus` or `go`").into()),
                }
            }
            "--control-plane" => o.control_plane = control_plane(value)?,
            _ => return Err(format!("unknown option {flag}; {USAGE}").into()),
        }
    }
    if o.pods == 0 || o.go_workers == 0 {
        return Err("--pods and --go-workers must be at least 1".into());
    }
    Ok(o)
}

/// The value of a side-by-side suite's `--control-plane`, spelled as the
/// demo's `--control-plane` (its `clap::ValueEnum`).
pub(crate) fn control_plane(value: &str) -> Result<ControlPlane, BoxError> {
    <ControlPlane as clap::ValueEnum>::from_str(value, false)
        .map_err(|_| format!("--control-plane {value}: `embedded` or `real`").into())
}

pub(crate) async fn run(args: &[String]) -> Result<(), BoxError> {
    let Options {
        pods,
        go_qps,
        go_workers,
        go_first,
        control_plane,
    } = options(args)?;
    let go_binary = stratus_cluster::go_peers::virtual_kubelet()?;
    let exe = std::env::current_exe()?;
    let stratus = side("Stratus", "vk-stratus", pods, control_plane, |kubeconfig| {
        stratus_node_command(&exe, kubeconfig, "vk-stratus")
    });
    let tuned = side("tuned Go", "vk-go", pods, control_plane, |kubeconfig| {
        let queues = GoQueues::Tuned {
            workers: go_workers,
        };
        go_node_command(&go_binary, kubeconfig, "vk-go", go_qps, queues)
    });
    // Futures run when awaited: the order is the one `--first` names.
    let (stratus, tuned) = if go_first {
        let tuned = tuned.await?;
        (stratus.await?, tuned)
    } else {
        let stratus = stratus.await?;
        (stratus, tuned.await?)
    };
    let go = side("Go", "vk-go", pods, control_plane, |kubeconfig| {
        go_node_command(&go_binary, kubeconfig, "vk-go", go_qps, GoQueues::Shipped)
    })
    .await?;

    let row = |metric, figure: fn(&Figures) -> f64| {
        (metric, figure(&stratus), vec![figure(&go), figure(&tuned)])
    };
    let rows = [
        row("admission_s", |f| f.admission_s),
        row("bind_to_running_p50_ms", |f| f.p50_ms),
        row("bind_to_running_p99_ms", |f| f.p99_ms),
        row("bind_to_running_paced_p50_ms", |f| f.paced_p50_ms),
        row("bind_to_running_paced_p99_ms", |f| f.paced_p99_ms),
        row("deletion_s", |f| f.deletion_s),
        row("cpu_s_per_1000_pods", |f| f.cpu_s_per_1000_pods),
        row("rss_bytes_per_pod", |f| f.rss_per_pod),
        row("rss_bytes_idle", |f| f.rss_idle),
    ];
    let (suite, plane) = match control_plane {
        ControlPlane::Embedded => ("kubelet-go", "the harness API server"),
        ControlPlane::Real => ("kubelet-go-real", "the real control plane"),
    };
    let first = if go_first { "tuned Go" } else { "Stratus" };
    write_against_peers(
        suite,
        &[
            ("pods", pods as f64),
            ("pods_per_sec_stratus", pods as f64 / stratus.admission_s),
            ("pods_per_sec_go", pods as f64 / go.admission_s),
            ("pods_per_sec_go_tuned", pods as f64 / tuned.admission_s),
            ("go_tuned_workers", go_workers as f64),
            ("go_tuned_ran_first", f64::from(u8::from(go_first))),
        ],
        &["go", "go_tuned"],
        &rows,
        &format!("{pods} pods per side, on {plane}; {first} ran first, Go as shipped last"),
    )?;
    let mut series = crate::plot::Series::new();
    let sides = [("stratus", &stratus), ("go_tuned", &tuned), ("go", &go)];
    for (name, samples) in [
        (
            "bind_to_running_ms",
            (|f: &Figures| &f.burst_ms) as fn(&Figures) -> &Vec<f64>,
        ),
        ("paced_bind_to_running_ms", |f| &f.paced_ms),
        ("running_s", |f| &f.running_s),
    ] {
        let by_side = series.entry(name.to_owned()).or_default();
        for (side, figures) in sides {
            by_side.insert(side.to_owned(), crate::plot::quantiles(samples(figures)));
        }
    }
    crate::plot::write_series(suite, &series)?;
    if control_plane == ControlPlane::Embedded {
        let results = Path::new("target/bench");
        for (name, svg) in crate::plot::kubelet_go(&crate::plot::figures(results, suite)?, &series)?
        {
            let path = results.join(name);
            std::fs::write(&path, svg)?;
            println!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// The command of the benchmark's Stratus node(s) (`exe`, this benchmark's
/// binary, as [`STRATUS_NODE_CHILD`]) on the server of `kubeconfig`;
/// `nodes` is one name or several, comma-separated.
pub(crate) fn stratus_node_command(exe: &Path, kubeconfig: &Path, nodes: &str) -> Command {
    let mut c = Command::new(exe);
    c.arg(STRATUS_NODE_CHILD).arg(kubeconfig).arg(nodes);
    c
}

/// How the Go peer's pod queues are configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GoQueues {
    /// As nodeutil ships them: client-go's default controller rate limiter
    /// on each queue, 10 pod sync workers.
    Shipped,
    /// As a vendor tuning for speed sets them (the peer's `--tuned`): a
    /// per-item back-off only, and `workers` pod sync workers.
    Tuned {
        /// Pod sync workers.
        workers: usize,
    },
}

/// The command of the Go peer `binary` as node `node` on the server of
/// `kubeconfig`, with client-go's request limit `qps` (negative: none)
/// and its pod queues configured as `queues` says.
pub(crate) fn go_node_command(
    binary: &Path,
    kubeconfig: &Path,
    node: &str,
    qps: f64,
    queues: GoQueues,
) -> Command {
    let mut c = Command::new(binary);
    c.arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--nodename", node])
        .arg(format!("--qps={qps}"));
    if let GoQueues::Tuned { workers } = queues {
        c.arg("--tuned").arg(format!("--workers={workers}"));
    }
    c
}

/// The benchmark's Stratus node ([`stratus_cluster::mock_virtual_kubelet`])
/// on the API server of `kubeconfig` as `node` (one name or several,
/// comma-separated: that many nodes), each one's kubelet API on a free
/// loopback port, until SIGTERM.
pub(crate) async fn stratus_node(args: &[String]) -> Result<(), BoxError> {
    let [kubeconfig, node] = args else {
        return Err(format!("usage: stratus-bench {STRATUS_NODE_CHILD} KUBECONFIG NODES").into());
    };
    stratus_cluster::mock_virtual_kubelet(Path::new(kubeconfig), node, "127.0.0.1").await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|a| (*a).to_owned()).collect()
    }

    #[test]
    fn tuned_go_options_are_read_and_bad_ones_named() {
        let o = options(&args(&["--first", "go", "--go-workers", "50"])).unwrap();
        assert!(o.go_first);
        assert_eq!(o.go_workers, 50);
        let o = options(&[]).unwrap();
        assert!(!o.go_first, "Stratus runs first by default");
        assert_eq!(o.go_workers, 10);
        let err = options(&args(&["--first", "both"]))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("`stratus` or `go`"), "{err}");
        assert!(options(&args(&["--go-workers", "0"])).is_err());
    }

    #[test]
    fn only_the_tuned_peer_gets_the_tuning_flags() {
        let flags = |queues| {
            go_node_command(Path::new("vk"), Path::new("kc"), "vk-go", -1.0, queues)
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        let shipped = flags(GoQueues::Shipped);
        assert!(
            !shipped
                .iter()
                .any(|a| a.starts_with("--tuned") || a.starts_with("--workers"))
        );
        let tuned = flags(GoQueues::Tuned { workers: 50 });
        assert!(tuned.contains(&"--tuned".to_owned()), "{tuned:?}");
        assert!(tuned.contains(&"--workers=50".to_owned()), "{tuned:?}");
    }
}
