//! `cargo xtask soak [--minutes N | --seconds N]`: the demo's components as
//! separate processes — the sample cloud controller manager (FakeCloud),
//! the sample virtual kubelet (MockPodProvider) and a process node whose
//! pods are real processes — against the harness API server under steady
//! churn and API faults, their memory and file descriptors sampled as they
//! run.
//!
//! - Churn (seeded, four operations a second): pods created on and deleted
//!   from both virtual nodes (graceful periods of 0–2 s), pods replaced
//!   (force-deleted and created again under the same name at once, as a
//!   Job controller does), LoadBalancer
//!   Services created and deleted, Nodes deleted and registered again.
//! - Faults: 2 % of writes answered 500, 2 % of reads 429, 2 % of requests
//!   delayed 200 ms; every watch dropped every 30 s; the event history
//!   compacted every 45 s (watches resume into 410 Gone); and the API server
//!   "restarted" — every request answered 503 and every watch dropped — for
//!   30 s every 4 minutes (runs shorter than 8 minutes: once, at 40 %, for
//!   an eighth of the run, at most 30 s).
//! - Samples of each component's resident memory and open descriptors
//!   (`/proc/<pid>`), every 60 s (runs shorter than 24 minutes: 24 samples);
//!   the slope over the samples after the first third (warm-up) by least
//!   squares, per minute.
//! - At the end, faults off: every remaining pod must reach Running (none
//!   lost), every Service an ingress, every Node its provider ID; then all
//!   of them deleted: no pod stuck Terminating, no Service kept by its
//!   load-balancer finalizer (the cloud did not release it), no process left
//!   in the process node's pod directories, and no component exited on the
//!   way. Any of those fails the run.
//!
//! The figures go to `target/bench/soak.json`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use stratus_testing::ApiServer;
use stratus_testing::apiserver::{Fault, FaultAction, Verb};

use crate::error::BoxError;
use crate::fuzz::Rng;

mod checks;
use checks::{delete_all, left, log_lines_for, processes_under, requests_for, settle};

const VIRTUAL_NODE: &str = "soak-vk";
const PROCESS_NODE: &str = "soak-process";
const CLOUD_NODES: [&str; 3] = ["node-0", "node-1", "node-2"];
const LABEL: (&str, &str) = ("stratus.dev/soak", "true");
const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// One component process.
struct Component {
    name: &'static str,
    child: tokio::process::Child,
    /// `(minutes since the start, resident bytes, open descriptors)`.
    samples: Vec<(f64, f64, f64)>,
}

impl Component {
    fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    fn sample(&mut self, minutes: f64) {
        let Some(pid) = self.pid() else {
            return;
        };
        let rss = stratus_cluster::host::process_rss_bytes(&pid.to_string()).unwrap_or(0.0);
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
        self.samples.push((minutes, rss, fds as f64));
    }
}

/// The least-squares slope of `points` (x, y), per unit of x.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let (num, den) = points.iter().fold((0.0, 0.0), |(num, den), (x, y)| {
        (num + (x - mx) * (y - my), den + (x - mx) * (x - mx))
    });
    if den == 0.0 { 0.0 } else { num / den }
}

/// The settings of a run.
struct Settings {
    total: Duration,
}

fn settings(args: &[String]) -> Result<Settings, String> {
    let mut total = Duration::from_secs(120);
    for (flag, value) in stratus_cluster::host::number_flags(args)? {
        total = match flag {
            "--minutes" => Duration::from_secs(value * 60),
            "--seconds" => Duration::from_secs(value),
            other => return Err(format!("unknown option {other:?}")),
        };
    }
    if total < Duration::from_secs(30) {
        return Err("a soak runs at least 30 s".into());
    }
    Ok(Settings { total })
}

/// The kubelet-API flags both virtual nodes run with: loopback, free
/// ports, anyone allowed (the soak is about the node, not its API).
const LOCAL_KUBELET_FLAGS: [&str; 5] = [
    "--listen-address=127.0.0.1",
    "--kubelet-port=0",
    "--authorization-mode=AlwaysAllow",
    "--anonymous-auth=true",
    "--metrics-addr=127.0.0.1:0",
];

fn spawn(
    bin_dir: &Path,
    name: &'static str,
    binary: &str,
    args: &[String],
    logs: &Path,
) -> Result<Component, BoxError> {
    let log = std::fs::File::create(logs.join(format!("{name}.log")))?;
    let child = tokio::process::Command::new(bin_dir.join(binary))
        .args(args)
        .env("HOSTNAME", name)
        // Plain text logs, to read and to search (tracing's colours off).
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()?;
    Ok(Component {
        name,
        child,
        samples: Vec::new(),
    })
}

fn node(name: &str) -> Result<Node, serde_json::Error> {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {LABEL.0: LABEL.1}},
        "spec": {"taints": [{"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}]},
    }))
}

fn pod(name: &str, node: &str) -> Result<Pod, serde_json::Error> {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {LABEL.0: LABEL.1}},
        "spec": {
            "nodeName": node,
            "tolerations": [{"operator": "Exists"}],
            "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "3600"]}],
        },
    }))
}

fn service(name: &str) -> Result<Service, serde_json::Error> {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {LABEL.0: LABEL.1}},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    }))
}

/// The churn's view of the cluster: what it created and has not deleted.
#[derive(Default)]
struct Churn {
    vk_pods: Vec<String>,
    process_pods: Vec<String>,
    services: Vec<String>,
    next: u64,
    operations: u64,
    /// Pods force-deleted and re-created under the same name.
    replaced: u64,
    refused: u64,
}

impl Churn {
    async fn step(&mut self, rng: &mut Rng, client: &kube::Client) {
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let services: Api<Service> = Api::namespaced(client.clone(), "default");
        let nodes: Api<Node> = Api::all(client.clone());
        self.next += 1;
        self.operations += 1;
        let n = self.next;
        let grace = DeleteParams::default().grace_period(rng.below(3) as u32);
        let ok = match rng.below(10) {
            0..=4 => {
                let (list, node, prefix, cap) = if rng.below(4) == 0 {
                    (&mut self.process_pods, PROCESS_NODE, "soak-proc", 6)
                } else {
                    (&mut self.vk_pods, VIRTUAL_NODE, "soak-vk", 30)
                };
                if !list.is_empty() && rng.below(4) == 0 {
                    // Replaced as a Job controller or an operator does:
                    // force-deleted and created again under its name at
                    // once. The node must run the new pod, not lose it.
                    self.replaced += 1;
                    let name = list[rng.below(list.len())].clone();
                    let _ = pods
                        .delete(&name, &DeleteParams::default().grace_period(0))
                        .await;
                    let created = match pod(&name, node) {
                        Ok(p) => pods.create(&PostParams::default(), &p).await.is_ok(),
                        Err(_) => false,
                    };
                    // Not created and not there (the delete went through,
                    // the create was refused by a fault): forgotten.
                    if !created && matches!(pods.get_opt(&name).await, Ok(None)) {
                        list.retain(|n| *n != name);
                    }
                    created
                } else if list.len() < cap && rng.below(3) != 0 {
                    let name = format!("{prefix}-{n}");
                    match pod(&name, node) {
                        Ok(p) => {
                            let created = pods.create(&PostParams::default(), &p).await.is_ok();
                            if created {
                                list.push(name);
                            }
                            created
                        }
                        Err(_) => false,
                    }
                } else if !list.is_empty() {
                    let name = list.swap_remove(rng.below(list.len()));
                    let deleted = pods.delete(&name, &grace).await;
                    if deleted.is_err() {
                        list.push(name);
                    }
                    deleted.is_ok()
                } else {
                    true
                }
            }
            5..=7 => {
                if self.services.len() < 6 && rng.below(2) == 0 {
                    let name = format!("soak-svc-{n}");
                    match service(&name) {
                        Ok(s) => {
                            let created = services.create(&PostParams::default(), &s).await.is_ok();
                            if created {
                                self.services.push(name);
                            }
                            created
                        }
                        Err(_) => false,
                    }
                } else if !self.services.is_empty() {
                    let name = self.services.swap_remove(rng.below(self.services.len()));
                    let deleted = services.delete(&name, &DeleteParams::default()).await;
                    if deleted.is_err() {
                        self.services.push(name);
                    }
                    deleted.is_ok()
                } else {
                    true
                }
            }
            _ => {
                // A cloud Node leaves and registers again.
                let name = CLOUD_NODES[rng.below(CLOUD_NODES.len())];
                match nodes.get_opt(name).await {
                    Ok(Some(_)) => nodes.delete(name, &DeleteParams::default()).await.is_ok(),
                    Ok(None) => match node(name) {
                        Ok(n) => nodes.create(&PostParams::default(), &n).await.is_ok(),
                        Err(_) => false,
                    },
                    Err(_) => false,
                }
            }
        };
        if !ok {
            self.refused += 1;
        }
    }
}

/// Faults in force during the churn.
fn steady_faults(server: &ApiServer) {
    for verb in [Verb::Create, Verb::Update, Verb::Patch, Verb::Delete] {
        server.inject(Fault::new(Some(verb), None, FaultAction::Error(500)).with_rate(0.02));
    }
    for verb in [Verb::Get, Verb::List] {
        server.inject(
            Fault::new(
                Some(verb),
                None,
                FaultAction::Throttle {
                    retry_after_secs: 1,
                },
            )
            .with_rate(0.02),
        );
    }
    server.inject(
        Fault::new(None, None, FaultAction::Latency(Duration::from_millis(200))).with_rate(0.02),
    );
}

/// The run.
async fn soak(settings: Settings) -> Result<BTreeMap<String, f64>, BoxError> {
    let bin = stratus_cluster::host::build_binaries(
        false,
        &[
            "sample-cloud-controller-manager",
            "sample-virtual-kubelet",
            "stratus-provider-process",
        ],
    )?;
    // Beside the binaries' profile directory; absolute, as the process
    // node's rootDir must be.
    let dir = std::env::current_dir()?
        .join(bin.parent().unwrap_or(&bin))
        .join("soak");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("pods"))?;
    // The figures count every request of the run: a request log that
    // holds a 60-minute soak's (the default budget keeps some 70,000).
    let server = ApiServer::builder()
        .request_log_bytes(1 << 30)
        .start()
        .await?;
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig)?;
    let client = server.client();
    let kc = format!("--kubeconfig={}", kubeconfig.display());
    let process_config = dir.join("process.yaml");
    std::fs::write(
        &process_config,
        format!("rootDir: {}\nmaxPods: 20\n", dir.join("pods").display()),
    )?;
    let nodes: Api<Node> = Api::all(client.clone());
    for name in CLOUD_NODES {
        nodes.create(&PostParams::default(), &node(name)?).await?;
    }
    let mut components = vec![
        spawn(
            &bin,
            "cloud-controller-manager",
            "sample-cloud-controller-manager",
            &[
                "--cloud-provider=fake".into(),
                kc.clone(),
                "--secure-port=0".into(),
                "--controllers=cloud-node,cloud-node-lifecycle,service".into(),
                // The API server's restarts outlast the renew deadline:
                // step down and campaign again rather than exit.
                "--leader-elect-recampaign".into(),
            ],
            &dir,
        )?,
        spawn(
            &bin,
            "virtual-kubelet",
            "sample-virtual-kubelet",
            &[
                vec![
                    kc.clone(),
                    "--provider=mock".into(),
                    format!("--nodename={VIRTUAL_NODE}"),
                ],
                LOCAL_KUBELET_FLAGS.map(String::from).to_vec(),
            ]
            .concat(),
            &dir,
        )?,
        spawn(
            &bin,
            "process-node",
            "stratus-process-node",
            &[
                vec![
                    kc.clone(),
                    format!("--nodename={PROCESS_NODE}"),
                    format!("--provider-config={}", process_config.display()),
                ],
                LOCAL_KUBELET_FLAGS.map(String::from).to_vec(),
            ]
            .concat(),
            &dir,
        )?,
    ];

    let total = settings.total;
    let sample_every = if total >= Duration::from_secs(24 * 60) {
        Duration::from_secs(60)
    } else {
        total / 24
    };
    let (restart_every, restart_for) = if total >= Duration::from_secs(8 * 60) {
        (Duration::from_secs(240), Duration::from_secs(30))
    } else {
        (total.mul_f64(0.4), (total / 8).min(Duration::from_secs(30)))
    };
    let restarts_said = if total >= Duration::from_secs(8 * 60) {
        format!(
            "API server restarts of {:.0} s every {:.0} s",
            restart_for.as_secs_f64(),
            restart_every.as_secs_f64()
        )
    } else {
        format!(
            "one API server restart of {:.0} s at {:.0} s",
            restart_for.as_secs_f64(),
            restart_every.as_secs_f64()
        )
    };
    println!(
        "soak: {:.0} s of churn and faults; samples every {:.0} s; {restarts_said} (logs: {})",
        total.as_secs_f64(),
        sample_every.as_secs_f64(),
        dir.display()
    );
    steady_faults(&server);
    let started = Instant::now();
    let mut rng = Rng::new(0x50a6);
    let mut churn = Churn::default();
    let (mut next_sample, mut next_drop, mut next_compact, mut next_restart) = (
        Duration::ZERO,
        Duration::from_secs(30),
        Duration::from_secs(45),
        restart_every,
    );
    let (mut restarts, mut drops, mut compactions) = (0u64, 0u64, 0u64);
    let mut exited: Vec<String> = Vec::new();
    while started.elapsed() < total {
        let now = started.elapsed();
        if now >= next_sample {
            for c in &mut components {
                c.sample(now.as_secs_f64() / 60.0);
            }
            next_sample += sample_every;
        }
        if now >= next_drop {
            server.drop_watches();
            drops += 1;
            next_drop += Duration::from_secs(30);
        }
        if now >= next_compact {
            server.compact();
            compactions += 1;
            next_compact += Duration::from_secs(45);
        }
        if now >= next_restart {
            server.drop_watches();
            server.pause(restart_for);
            restarts += 1;
            next_restart += restart_every.max(restart_for + Duration::from_secs(60));
        }
        churn.step(&mut rng, &client).await;
        for c in &mut components {
            if let Ok(Some(status)) = c.child.try_wait()
                && !exited.iter().any(|e| e.starts_with(c.name))
            {
                exited.push(format!("{} ({status})", c.name));
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for c in &mut components {
        c.sample(started.elapsed().as_secs_f64() / 60.0);
    }
    server.clear_faults();
    let faulted = server
        .requests()
        .iter()
        .filter(|r| matches!(r.status, 429 | 500 | 503))
        .count();
    println!(
        "soak: churn done ({} operations, {} pods force-deleted and re-created, {} refused by faults); {faulted} requests answered 429/500/503, {restarts} restarts, {drops} watch drops, {compactions} compactions",
        churn.operations, churn.replaced, churn.refused
    );

    // Convergence, then everything deleted.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let labelled = ListParams::default().labels(&format!("{}={}", LABEL.0, LABEL.1));
    let wait = Duration::from_secs(90);
    let mut failures: Vec<String> = Vec::new();
    for name in CLOUD_NODES {
        if nodes.get_opt(name).await?.is_none() {
            nodes.create(&PostParams::default(), &node(name)?).await?;
        }
    }
    let lost = settle("every pod Running", wait, || async {
        let list = pods.list(&labelled).await?;
        let waiting: Vec<&Pod> = list
            .items
            .iter()
            .filter(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Running")
            })
            .collect();
        Ok(waiting.first().map(|p| {
            let status = p.status.clone().unwrap_or_default();
            format!(
                "{} pods not Running, e.g. {} (phase {:?}, reason {:?}, message {:?}, node {:?})",
                waiting.len(),
                p.metadata.name.as_deref().unwrap_or_default(),
                status.phase,
                status.reason,
                status.message,
                p.spec.as_ref().and_then(|s| s.node_name.clone()),
            )
        }))
    })
    .await;
    let provisioned = settle("every Service provisioned", wait, || async {
        let list = services.list(&labelled).await?;
        Ok(list
            .items
            .iter()
            .find(|s| {
                s.status
                    .as_ref()
                    .and_then(|s| s.load_balancer.as_ref()?.ingress.as_ref())
                    .is_none_or(Vec::is_empty)
            })
            .map(|s| {
                format!(
                    "a Service has no ingress, e.g. {}",
                    s.metadata.name.as_deref().unwrap_or_default()
                )
            }))
    })
    .await;
    let initialized = settle("every cloud Node initialized", wait, || async {
        let list = nodes.list(&labelled).await?;
        Ok(list
            .items
            .iter()
            .find(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.provider_id.as_ref())
                    .is_none()
            })
            .map(|n| {
                format!(
                    "a Node has no provider ID, e.g. {}",
                    n.metadata.name.as_deref().unwrap_or_default()
                )
            }))
    })
    .await;
    let live_pods = pods.list(&labelled).await?.items.len();
    let live_services = services.list(&labelled).await?.items.len();
    delete_all(&pods, &labelled).await?;
    delete_all(&services, &labelled).await?;
    let stuck = settle("no pod left (none stuck Terminating)", wait, || {
        left(&pods, &labelled, "pods")
    })
    .await;
    let leaked = settle("no Service left (load balancers released)", wait, || {
        left(&services, &labelled, "Services kept by their finalizer")
    })
    .await;
    let leftover = processes_under(&dir.join("pods"));
    for (what, result) in [
        ("lost pods", lost),
        ("unprovisioned Services", provisioned),
        ("uninitialized Nodes", initialized),
        ("stuck pods", stuck),
        ("leaked load balancers", leaked),
    ] {
        if let Err(e) = result {
            let history = requests_for(&server, &e);
            if !history.is_empty() {
                println!(
                    "soak: the requests on what {what} names:\n{}",
                    history.join("\n")
                );
            }
            let logged = log_lines_for(&dir, &e);
            if !logged.is_empty() {
                println!(
                    "soak: the components' last log lines on what {what} names:\n{}",
                    logged.join("\n")
                );
            }
            failures.push(format!("{what}: {e}"));
        }
    }
    if !leftover.is_empty() {
        failures.push(format!(
            "processes left in the process node's pods: {leftover:?}"
        ));
    }
    for c in &mut components {
        if let Ok(Some(status)) = c.child.try_wait()
            && !exited.iter().any(|e| e.starts_with(c.name))
        {
            exited.push(format!("{} ({status})", c.name));
        }
    }
    if !exited.is_empty() {
        failures.push(format!("components exited: {}", exited.join(", ")));
    }

    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    out.insert("minutes".into(), total.as_secs_f64() / 60.0);
    out.insert("churn_operations".into(), churn.operations as f64);
    out.insert("churn_pods_replaced".into(), churn.replaced as f64);
    out.insert(
        "churn_operations_refused_by_faults".into(),
        churn.refused as f64,
    );
    out.insert("requests_answered_429_500_503".into(), faulted as f64);
    out.insert("api_server_restarts".into(), restarts as f64);
    out.insert("watch_drops".into(), drops as f64);
    out.insert("compactions".into(), compactions as f64);
    out.insert("pods_at_end".into(), live_pods as f64);
    out.insert("services_at_end".into(), live_services as f64);
    out.insert("failures".into(), failures.len() as f64);
    println!(
        "\n{:<26} {:>14} {:>14} {:>16} {:>12}",
        "component", "RSS first", "RSS last", "RSS slope /min", "fds slope"
    );
    for c in &mut components {
        let warm = c.samples.len() / 3;
        let after: Vec<(f64, f64, f64)> = c.samples[warm..].to_vec();
        let rss: Vec<(f64, f64)> = after.iter().map(|(t, r, _)| (*t, *r)).collect();
        let fds: Vec<(f64, f64)> = after.iter().map(|(t, _, f)| (*t, *f)).collect();
        let (rss_slope, fd_slope) = (slope(&rss), slope(&fds));
        let first = c.samples.first().map_or(0.0, |s| s.1);
        let last = c.samples.last().map_or(0.0, |s| s.1);
        let key = c.name.replace('-', "_");
        out.insert(format!("{key}_rss_slope_bytes_per_minute"), rss_slope);
        out.insert(format!("{key}_fd_slope_per_minute"), fd_slope);
        out.insert(
            format!("{key}_rss_bytes_after_warmup"),
            rss.first().map_or(0.0, |s| s.1),
        );
        out.insert(format!("{key}_rss_bytes_last"), last);
        out.insert(
            format!("{key}_fds_last"),
            c.samples.last().map_or(0.0, |s| s.2),
        );
        println!(
            "{:<26} {:>11.1} MB {:>11.1} MB {:>13.0} B {:>12.2}",
            c.name,
            first / 1e6,
            last / 1e6,
            rss_slope,
            fd_slope
        );
        let _ = c.child.start_kill();
        let _ = c.child.wait().await;
    }
    std::fs::create_dir_all("target/bench")?;
    std::fs::write("target/bench/soak.json", serde_json::to_vec_pretty(&out)?)?;
    println!("\nwrote target/bench/soak.json");
    if failures.is_empty() {
        println!("soak: 1 passed, 0 failed");
        Ok(out)
    } else {
        for f in &failures {
            eprintln!("soak: {f}");
        }
        Err(format!("{} checks failed at the end of the soak", failures.len()).into())
    }
}

/// The task.
pub(crate) fn run(args: &[String]) -> ExitCode {
    let settings = match settings(args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("soak: {e}\nusage: cargo xtask soak [--minutes N | --seconds N]");
            return ExitCode::from(2);
        }
    };
    let Some(rt) = crate::runtime() else {
        return ExitCode::FAILURE;
    };
    match rt.block_on(soak(settings)) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("soak: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slopes_are_per_unit_of_x() {
        assert_eq!(slope(&[(0.0, 10.0), (1.0, 12.0), (2.0, 14.0)]), 2.0);
        assert_eq!(slope(&[(0.0, 5.0), (1.0, 5.0)]), 0.0);
        assert_eq!(slope(&[(3.0, 5.0)]), 0.0);
    }
}
