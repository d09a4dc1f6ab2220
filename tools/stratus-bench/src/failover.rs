//! `cargo xtask bench failover [--rounds N] [--replicas N] [--go-rounds N]`:
//! replicas of the sample cloud controller manager, each a separate
//! process with its own connection to the harness API server through a TCP
//! proxy of this task, and the leader taken away in three ways:
//!
//! - `crash`: `kill -9` of the leader;
//! - `graceful`: SIGTERM (the leader releases the Lease on its way out);
//! - `partition`: the leader's proxy stops forwarding (its connections
//!   hang, new ones get nothing) until a new leader has taken over, then
//!   drops them.
//!
//! Right after the leader goes, a Node is registered (with the
//! uninitialized taint) and a LoadBalancer Service created: the figures
//! are the Lease takeover (the first successful Lease write by another
//! replica, from the request log), and the time until that Node is
//! initialized and that Service has its ingress. Each replica uses a token
//! of its own, so the request log says who wrote what: a successful write
//! by the old leader after the new one acquired the Lease is a deposed
//! leader's write, and a gap Node written by two replicas is a double
//! initialization; both must be 0.
//!
//! The scenarios run with short leases (4 s lease, 2 s renew deadline,
//! 500 ms retry) and three replicas, `crash` also with two replicas, and
//! `crash` with Go's defaults (15 s / 10 s / 2 s). The floor of a takeover
//! is client-go's bound for it, from the same run's settings: lease
//! duration + retry period after a crash or partition, the retry period
//! after a graceful release.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use stratus_testing::ApiServer;
use stratus_testing::apiserver::{RequestRecord, ReviewUser, Verb};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::ccm::percentile;
use crate::measure::write_results;
use stratus_cluster::BoxError;

/// How a leader is taken away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    Crash,
    Graceful,
    Partition,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Self::Crash => "crash",
            Self::Graceful => "graceful",
            Self::Partition => "partition",
        }
    }
}

/// Leader-election settings of a replica set.
#[derive(Debug, Clone, Copy)]
struct Leases {
    lease: Duration,
    renew: Duration,
    retry: Duration,
}

const SHORT: Leases = Leases {
    lease: Duration::from_secs(4),
    renew: Duration::from_secs(2),
    retry: Duration::from_millis(500),
};
const GO_DEFAULTS: Leases = Leases {
    lease: Duration::from_secs(15),
    renew: Duration::from_secs(10),
    retry: Duration::from_secs(2),
};

/// A TCP proxy between one replica and the API server that can be cut.
struct Proxy {
    addr: SocketAddr,
    cut: watch::Sender<bool>,
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Result<Self, BoxError> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (cut, cut_rx) = watch::channel(false);
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let mut cut = cut_rx.clone();
                tokio::spawn(async move {
                    let partitioned = *cut.borrow();
                    if partitioned {
                        // Partitioned: the connection gets nothing, and is
                        // dropped when the partition heals.
                        let _ = cut.wait_for(|c| !*c).await;
                        return;
                    }
                    let Ok(mut server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let frozen = tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => false,
                        cut_now = async { cut.wait_for(|c| *c).await.is_ok() } => cut_now,
                    };
                    if frozen {
                        // Frozen until healed, then dropped: nothing sent
                        // meanwhile arrives.
                        let _ = cut.wait_for(|c| !*c).await.is_ok();
                    }
                });
            }
        });
        Ok(Self { addr, cut })
    }

    fn set_cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }
}

/// One manager process.
struct Replica {
    user: String,
    child: tokio::process::Child,
    proxy: Proxy,
}

/// The replicas and what they run against.
struct Fleet {
    server: ApiServer,
    binary: PathBuf,
    upstream: SocketAddr,
    leases: Leases,
    replicas: Vec<Replica>,
    spawned: usize,
    logs: PathBuf,
}

fn go_duration(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

impl Fleet {
    /// Start one more replica.
    async fn spawn(&mut self) -> Result<(), BoxError> {
        self.spawned += 1;
        let user = format!("replica-{}", self.spawned);
        let token = format!("failover-token-{}", self.spawned);
        self.server.add_token(
            &token,
            ReviewUser {
                username: user.clone(),
                uid: user.clone(),
                groups: vec!["system:authenticated".into()],
            },
        );
        let proxy = Proxy::start(self.upstream).await?;
        // The same server (and scheme) by way of the proxy.
        let kubeconfig = self
            .server
            .kubeconfig_with_token(&token)
            .replace(&self.upstream.to_string(), &proxy.addr.to_string());
        let path = self.logs.join(format!("{user}.kubeconfig"));
        std::fs::write(&path, kubeconfig)?;
        let log = std::fs::File::create(self.logs.join(format!("{user}.log")))?;
        let child = tokio::process::Command::new(&self.binary)
            .args([
                "--cloud-provider=fake".to_owned(),
                format!("--kubeconfig={}", path.display()),
                "--secure-port=0".to_owned(),
                "--controllers=cloud-node,cloud-node-lifecycle,service".to_owned(),
                format!(
                    "--leader-elect-lease-duration={}",
                    go_duration(self.leases.lease)
                ),
                format!(
                    "--leader-elect-renew-deadline={}",
                    go_duration(self.leases.renew)
                ),
                format!(
                    "--leader-elect-retry-period={}",
                    go_duration(self.leases.retry)
                ),
            ])
            .env("HOSTNAME", &user)
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()?;
        self.replicas.push(Replica { user, child, proxy });
        Ok(())
    }

    /// Drop the replicas that ended and start new ones up to `n`.
    async fn keep(&mut self, n: usize) -> Result<(), BoxError> {
        self.replicas
            .retain_mut(|r| matches!(r.child.try_wait(), Ok(None)));
        while self.replicas.len() < n {
            self.spawn().await?;
        }
        Ok(())
    }

    async fn stop_all(&mut self) {
        for r in &mut self.replicas {
            let _ = r.child.start_kill();
            let _ = r.child.wait().await;
        }
        self.replicas.clear();
    }

    /// The Lease's holder, if any.
    async fn holder(&self) -> Option<String> {
        let leases: Api<Lease> = Api::namespaced(self.server.client(), "kube-system");
        leases
            .get_opt("cloud-controller-manager")
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity)
            .filter(|h| !h.is_empty())
    }

    /// Wait for a live replica to hold the Lease; its index.
    async fn leader(&mut self, wait: Duration) -> Result<usize, BoxError> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(holder) = self.holder().await
                && let Some(i) = self
                    .replicas
                    .iter_mut()
                    .position(|r| holder.starts_with(&format!("{}_", r.user)))
                && matches!(self.replicas[i].child.try_wait(), Ok(None))
            {
                return Ok(i);
            }
            if Instant::now() > deadline {
                return Err(format!("no live replica took the Lease within {wait:?}").into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// What one round measured.
struct Round {
    takeover: f64,
    node_initialized: f64,
    service_provisioned: f64,
    deposed_writes: usize,
    double_initialized: bool,
}

fn mutating(verb: Verb) -> bool {
    matches!(
        verb,
        Verb::Create | Verb::Update | Verb::Patch | Verb::Delete | Verb::DeleteCollection
    )
}

fn lease_write(r: &RequestRecord) -> bool {
    r.resource == "leases"
        && r.name.as_deref() == Some("cloud-controller-manager")
        && mutating(r.verb)
        && r.status < 300
}

/// Wait for `check` (looking every 20 ms, the measurements' resolution);
/// `Ok` with when it held.
async fn until<F, Fut>(what: &str, wait: Duration, check: F) -> Result<Instant, BoxError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    stratus_apiserver::poll(what, wait)
        .every(Duration::from_millis(20))
        .until(check)
        .await?;
    Ok(Instant::now())
}

/// One round: take the leader away, register a Node and a Service in the
/// gap, measure, clean up.
async fn round(
    fleet: &mut Fleet,
    replicas: usize,
    scenario: Scenario,
    index: usize,
) -> Result<Round, BoxError> {
    fleet.keep(replicas).await?;
    let leader = fleet.leader(Duration::from_secs(60)).await?;
    // Let the leader settle (informers synced, controllers running).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let old_user = fleet.replicas[leader].user.clone();
    let t0 = Instant::now();
    match scenario {
        Scenario::Crash => fleet.replicas[leader].child.start_kill()?,
        Scenario::Graceful => {
            let pid = fleet.replicas[leader]
                .child
                .id()
                .ok_or("the leader already ended")?;
            std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()?;
        }
        Scenario::Partition => fleet.replicas[leader].proxy.set_cut(true),
    }

    let client = fleet.server.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let node_name = format!("node-{}", index % 3);
    let service_name = format!("gap-{}-{index}", scenario.name());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": node_name},
        "spec": {"taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}]},
    }))?;
    nodes.create(&PostParams::default(), &node).await?;
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": service_name},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    }))?;
    services.create(&PostParams::default(), &service).await?;

    let wait = Duration::from_secs(60);
    until("a new leader", wait, || async {
        fleet
            .holder()
            .await
            .is_some_and(|h| !h.starts_with(&format!("{old_user}_")))
    })
    .await?;
    let initialized = until(&format!("{node_name} initialized"), wait, || async {
        nodes
            .get_opt(&node_name)
            .await
            .ok()
            .flatten()
            .is_some_and(|n| {
                let spec = n.spec.unwrap_or_default();
                spec.provider_id.is_some()
                    && !spec
                        .taints
                        .unwrap_or_default()
                        .iter()
                        .any(|t| t.key == "node.cloudprovider.kubernetes.io/uninitialized")
            })
    })
    .await?;
    let provisioned = until(&format!("{service_name} provisioned"), wait, || async {
        services
            .get_opt(&service_name)
            .await
            .ok()
            .flatten()
            .and_then(|s| s.status?.load_balancer?.ingress)
            .is_some_and(|i| !i.is_empty())
    })
    .await?;
    if scenario == Scenario::Partition {
        // Heal once the new leader works; the old one's hung requests are
        // dropped, and anything it writes from here on is counted.
        fleet.replicas[leader].proxy.set_cut(false);
    }
    // Give a deposed leader the time to write, were it going to.
    tokio::time::sleep(SHORT.lease).await;
    if scenario == Scenario::Graceful {
        let old = &mut fleet.replicas[leader].child;
        let _ = tokio::time::timeout(Duration::from_secs(20), old.wait()).await;
    }

    // The request log's account of the gap.
    let records: Vec<RequestRecord> = fleet
        .server
        .requests()
        .into_iter()
        .filter(|r| r.answered_at >= t0)
        .collect();
    let acquired = records
        .iter()
        .filter(|r| lease_write(r) && !r.user.is_empty() && r.user != old_user)
        .map(|r| r.answered_at)
        .min()
        .ok_or("no other replica wrote the Lease")?;
    let deposed_writes = records
        .iter()
        .filter(|r| {
            r.user == old_user && mutating(r.verb) && r.status < 300 && r.answered_at > acquired
        })
        .count();
    let writers: BTreeSet<&str> = records
        .iter()
        .filter(|r| {
            r.resource == "nodes"
                && r.name.as_deref() == Some(node_name.as_str())
                && mutating(r.verb)
                && r.status < 300
                && !r.user.is_empty()
        })
        .map(|r| r.user.as_str())
        .collect();

    // Clean up: the Service released by the new leader, the Node deleted.
    services
        .delete(&service_name, &DeleteParams::default())
        .await?;
    until(&format!("{service_name} released"), wait, || async {
        services
            .get_opt(&service_name)
            .await
            .ok()
            .flatten()
            .is_none()
    })
    .await?;
    nodes.delete(&node_name, &DeleteParams::default()).await?;
    until(&format!("{node_name} deleted"), wait, || async {
        nodes.get_opt(&node_name).await.ok().flatten().is_none()
    })
    .await?;

    Ok(Round {
        takeover: acquired.duration_since(t0).as_secs_f64(),
        node_initialized: initialized.duration_since(t0).as_secs_f64(),
        service_provisioned: provisioned.duration_since(t0).as_secs_f64(),
        deposed_writes,
        double_initialized: writers.len() > 1,
    })
}

/// The settings of `cargo xtask bench failover`.
struct Settings {
    rounds: usize,
    replicas: usize,
    go_rounds: usize,
}

fn settings(args: &[String]) -> Result<Settings, BoxError> {
    let mut s = Settings {
        rounds: 10,
        replicas: 3,
        go_rounds: 3,
    };
    for (flag, value) in crate::measure::number_flags(args)? {
        let value = usize::try_from(value)?;
        match flag {
            "--rounds" => s.rounds = value.max(1),
            "--replicas" => s.replicas = value.max(2),
            "--go-rounds" => s.go_rounds = value,
            other => return Err(format!("unknown option {other:?}").into()),
        }
    }
    Ok(s)
}

/// The bench.
pub(crate) async fn run(args: &[String]) -> Result<(), BoxError> {
    let settings = settings(args)?;
    let binary = crate::measure::build_binaries(true, &["sample-cloud-controller-manager"])?
        .join("sample-cloud-controller-manager");
    let server = ApiServer::start().await?;
    let upstream: SocketAddr = server
        .url()
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .parse()?;
    let logs = PathBuf::from("target/bench/failover-logs");
    std::fs::create_dir_all(&logs)?;
    let mut fleet = Fleet {
        server,
        binary,
        upstream,
        leases: SHORT,
        replicas: Vec::new(),
        spawned: 0,
        logs,
    };

    let mut figures: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut deposed = 0;
    let mut doubled = 0;
    let mut plan: Vec<(String, usize, Scenario, Leases, usize)> = vec![
        (
            "crash".into(),
            settings.replicas,
            Scenario::Crash,
            SHORT,
            settings.rounds,
        ),
        (
            "graceful".into(),
            settings.replicas,
            Scenario::Graceful,
            SHORT,
            settings.rounds,
        ),
        (
            "partition".into(),
            settings.replicas,
            Scenario::Partition,
            SHORT,
            settings.rounds,
        ),
        (
            "two_replica_crash".into(),
            2,
            Scenario::Crash,
            SHORT,
            settings.rounds,
        ),
    ];
    if settings.go_rounds > 0 {
        plan.push((
            "go_defaults_crash".into(),
            settings.replicas,
            Scenario::Crash,
            GO_DEFAULTS,
            settings.go_rounds,
        ));
    }
    let mut index = 0;
    for (name, replicas, scenario, leases, rounds) in plan {
        if leases.lease != fleet.leases.lease || fleet.replicas.len() != replicas {
            fleet.stop_all().await;
            fleet.leases = leases;
        }
        for r in 0..rounds {
            let result = round(&mut fleet, replicas, scenario, index).await;
            index += 1;
            let result = match result {
                Ok(res) => res,
                Err(e) => {
                    fleet.stop_all().await;
                    return Err(format!(
                        "{name} round {r}: {e} (logs: target/bench/failover-logs)"
                    )
                    .into());
                }
            };
            println!(
                "{name:<18} round {r:>2}: takeover {:.2} s, Node initialized {:.2} s, Service provisioned {:.2} s, deposed writes {}",
                result.takeover,
                result.node_initialized,
                result.service_provisioned,
                result.deposed_writes
            );
            deposed += result.deposed_writes;
            doubled += usize::from(result.double_initialized);
            for (what, value) in [
                ("takeover", result.takeover),
                ("node_initialized", result.node_initialized),
                ("service_provisioned", result.service_provisioned),
            ] {
                figures
                    .entry(format!("{name}_{what}_seconds"))
                    .or_default()
                    .push(value);
            }
        }
    }
    fleet.stop_all().await;

    let mut metrics: Vec<(String, f64)> = Vec::new();
    for (key, mut values) in figures {
        values.sort_by(f64::total_cmp);
        metrics.push((format!("{key}_min"), values[0]));
        metrics.push((format!("{key}_median"), percentile(&values, 0.5)));
        metrics.push((format!("{key}_max"), values[values.len() - 1]));
    }
    let median = |key: &str| {
        metrics
            .iter()
            .find(|(k, _)| k == &format!("{key}_median"))
            .map_or(0.0, |(_, v)| *v)
    };
    let crash_bound = (SHORT.lease + SHORT.retry).as_secs_f64();
    let go_bound = (GO_DEFAULTS.lease + GO_DEFAULTS.retry).as_secs_f64();
    let ratios = [
        (
            "crash_takeover_ratio_measured_over_floor",
            median("crash_takeover_seconds") / crash_bound,
        ),
        (
            "graceful_takeover_ratio_measured_over_floor",
            median("graceful_takeover_seconds") / SHORT.retry.as_secs_f64(),
        ),
        (
            "partition_takeover_ratio_measured_over_floor",
            median("partition_takeover_seconds") / crash_bound,
        ),
        (
            "two_replica_crash_takeover_ratio_measured_over_floor",
            median("two_replica_crash_takeover_seconds") / crash_bound,
        ),
        (
            "go_defaults_crash_takeover_ratio_measured_over_floor",
            median("go_defaults_crash_takeover_seconds") / go_bound,
        ),
    ];
    for (key, value) in ratios {
        if value > 0.0 {
            metrics.push((key.to_owned(), value));
        }
    }
    metrics.push(("deposed_leader_writes".into(), deposed as f64));
    metrics.push(("double_initialized_nodes".into(), doubled as f64));
    metrics.push((
        "short_lease_duration_seconds".into(),
        SHORT.lease.as_secs_f64(),
    ));
    metrics.push((
        "short_retry_period_seconds".into(),
        SHORT.retry.as_secs_f64(),
    ));
    metrics.push(("replicas".into(), settings.replicas as f64));
    metrics.push(("rounds".into(), settings.rounds as f64));
    let borrowed: Vec<(&str, f64)> = metrics.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    write_results(
        "failover",
        &borrowed,
        "each takeover ratio is the median over client-go's bound for it: lease + retry after a crash or partition, the retry period after a graceful release",
    )?;
    if deposed > 0 || doubled > 0 {
        return Err(format!(
            "{deposed} writes by deposed leaders, {doubled} Nodes initialized twice"
        )
        .into());
    }
    Ok(())
}
