//! `cargo xtask bench ccm-go [--nodes N] [--services S] [--kube-api-qps Q]
//! [--control-plane embedded|real]`: Stratus's cloud controller manager and
//! a Go one built on k8s.io/cloud-provider side by side, in the same run,
//! each as its own processes against its own fresh API server (the same
//! objects and workload), one after the other: a harness API server
//! (`embedded`, the default; the objects written into its store), or a real
//! control plane (`real`: `cargo xtask cluster up` for each side, without
//! kube-controller-manager's node lifecycle controller, taken down after
//! it; the objects created through the API; no cluster may be up before).
//!
//! - Stratus: the manager command (`stratus_ccm::app::Command`, as a
//!   vendor's binary runs it) over FakeCloud, run as a child of this
//!   benchmark.
//! - Go: `tools/go-peers/cloud-controller-manager`,
//!   `app.NewCloudControllerManagerCommand` (the shape of cloud-provider's
//!   sample main) over an in-memory cloud written to answer as FakeCloud
//!   does here.
//!
//! Both clouds take 20 ms a call and allow 100 calls a second (bursts of
//! 100); calls beyond it fail as throttled. FakeCloud offers its batch
//! call (500 instances at a time), which Stratus's node controller uses;
//! cloud-provider has no batch interface, so Go calls once per node. Both
//! managers get the same flags: 4 node and 4 Service workers, the same
//! client request limit (`--kube-api-qps`, 1,000 unless told), no leader
//! election, no serving port. Each child serves its cloud's call counts as
//! JSON on a loopback port it prints first (`cloud-state ADDR`).
//!
//! Each side runs three managers in turn on one server holding N nodes
//! (5,000 by default), each started fresh, so each phase's time includes
//! the manager's start (its first lists):
//! 1. the cloud-node controller, until every node is initialized (the
//!    uninitialized taint gone): time, cloud calls, node writes, resident
//!    memory at the end (at N nodes);
//! 2. the cloud-node controller with every instance's address changed and
//!    `--node-status-update-frequency=1s`, until every node has its new
//!    address (Go's first pass starts at once, Stratus's after one
//!    period): time, cloud calls;
//! 3. the service controller over S LoadBalancer Services (1,000), until
//!    every Service has its ingress (time, cloud calls, Service writes);
//!    then one node added, until every load balancer has it as a host
//!    (time, cloud calls).
//!
//! CPU seconds are the three processes' total (`/proc/<pid>/stat`). API
//! requests and writes are the manager's own (User-Agent
//! `cloud-controller-manager/...`, as both managers' clients name
//! themselves): from the harness's request log, or from kube-apiserver's
//! audit log on a real plane.
//! `target/bench/ccm-go.json` (`ccm-go-real.json` on the real control
//! plane) has each figure as `<metric>_stratus`,
//! `<metric>_go` and `<metric>_ratio_stratus_over_go` (below 1 = Stratus
//! better).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use stratus_testing::{FakeCloud, FakeInstance};

use crate::ccm::{CLOUD_LATENCY, CLOUD_QPS, node, tainted};
use crate::kubelet_go::{Plane, control_plane};
use crate::measure::write_side_by_side;
use stratus_cluster::BoxError;
use stratus_cluster::ControlPlane;

/// Nodes per side unless `--nodes` says otherwise.
const DEFAULT_NODES: usize = 5_000;
/// LoadBalancer Services per side unless `--services` says otherwise.
const DEFAULT_SERVICES: usize = 1_000;
/// The benchmark's own child: the Stratus manager (`bench
/// ccm-go-stratus-manager --nodes N --address-base A.B -- MANAGER-FLAGS`).
pub(crate) const STRATUS_MANAGER_CHILD: &str = "ccm-go-stratus-manager";
/// The cloud methods whose calls the children report.
const METHODS: [&str; 8] = [
    "instance_metadata",
    "instance_metadata_batch",
    "instance_exists",
    "instance_shutdown",
    "get_load_balancer",
    "ensure_load_balancer",
    "update_load_balancer",
    "ensure_load_balancer_deleted",
];
/// How often the benchmark looks at the API or the cloud.
const POLL: Duration = Duration::from_millis(200);

/// The InternalIP of instance `node-<i>` (any other name: index 0): the
/// same in both clouds.
fn address(base: &str, name: &str) -> String {
    let i: usize = name
        .strip_prefix("node-")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    format!("{base}.{}.{}", (i / 256) % 256, i % 256)
}

/// The suite's arguments.
struct Options {
    nodes: usize,
    services: usize,
    kube_api_qps: u32,
    /// The API server each side gets fresh.
    control_plane: ControlPlane,
}

/// `[--nodes N] [--services S] [--kube-api-qps Q] [--control-plane
/// embedded|real]`.
fn options(args: &[String]) -> Result<Options, BoxError> {
    let mut o = Options {
        nodes: DEFAULT_NODES,
        services: DEFAULT_SERVICES,
        kube_api_qps: 1_000,
        control_plane: ControlPlane::Embedded,
    };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = |v: &str| -> Result<usize, BoxError> {
            match v.parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!("{flag} {v}: a positive whole number is needed").into()),
            }
        };
        match flag.as_str() {
            "--nodes" => o.nodes = number(value)?,
            "--services" => o.services = number(value)?,
            "--kube-api-qps" => o.kube_api_qps = u32::try_from(number(value)?)?,
            "--control-plane" => o.control_plane = control_plane(value)?,
            _ => {
                return Err(format!(
                    "unknown option {flag}; usage: cargo xtask bench ccm-go [--nodes N] [--services S] [--kube-api-qps Q] [--control-plane embedded|real]"
                )
                .into());
            }
        }
    }
    Ok(o)
}

/// How a side's manager is started: the kubeconfig, the instances' address
/// base and the manager's flags in, the command out.
type Starter<'a> = &'a dyn Fn(&Path, &str, &[String]) -> Command;

/// A manager process and its cloud's state address.
struct Manager {
    /// `None` once stopped.
    child: Option<Child>,
    state: String,
    started: Instant,
}

impl Manager {
    /// Start one, its standard error to `log`, and read the cloud's state
    /// address from the first line it prints.
    fn start(
        starter: Starter<'_>,
        kubeconfig: &Path,
        base: &str,
        flags: &[String],
        log: &Path,
    ) -> Result<Self, BoxError> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        let started = Instant::now();
        let mut child = starter(kubeconfig, base, flags)
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()?;
        let stdout = child.stdout.take().ok_or("the manager's stdout")?;
        let mut lines = BufReader::new(stdout);
        let mut first = String::new();
        // A manager that cannot be read from is stopped too, not left behind.
        let read = lines.read_line(&mut first);
        let Some(state) = first
            .trim()
            .strip_prefix("cloud-state ")
            .filter(|_| read.is_ok())
        else {
            crate::measure::stop_child(child);
            return Err(match read {
                Err(e) => format!("reading the manager's first line: {e}"),
                Ok(_) => format!("the manager printed {first:?} instead of its cloud's address"),
            }
            .into());
        };
        let state = state.to_owned();
        // Keep the pipe drained.
        std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
        Ok(Self {
            child: Some(child),
            state,
            started,
        })
    }

    fn pid(&self) -> String {
        self.child.as_ref().map_or(0, Child::id).to_string()
    }

    /// Its CPU seconds so far.
    fn cpu(&self) -> Result<f64, BoxError> {
        crate::measure::process_cpu_seconds(&self.pid()).ok_or_else(|| "the manager is gone".into())
    }

    /// Its resident memory now.
    fn rss(&self) -> Result<f64, BoxError> {
        crate::measure::process_rss_bytes(&self.pid()).ok_or_else(|| "the manager is gone".into())
    }

    /// Its cloud's calls so far (all methods) and the load balancers that
    /// have `host`.
    async fn cloud(&self, host: &str) -> Result<(f64, usize), BoxError> {
        let (addr, host) = (self.state.clone(), host.to_owned());
        let body = tokio::task::spawn_blocking(move || -> Result<String, BoxError> {
            let mut stream = std::net::TcpStream::connect(&addr)?;
            stream.set_read_timeout(Some(Duration::from_secs(10)))?;
            let request = format!("GET /state?host={host} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
            stream.write_all(request.as_bytes())?;
            let mut answer = String::new();
            stream.read_to_string(&mut answer)?;
            let (_, body) = answer
                .split_once("\r\n\r\n")
                .ok_or("the cloud state answer has no body")?;
            Ok(body.to_owned())
        })
        .await??;
        let state: serde_json::Value = serde_json::from_str(&body)?;
        let calls = state["calls"]
            .as_object()
            .map(|c| c.values().filter_map(serde_json::Value::as_f64).sum())
            .unwrap_or(0.0);
        let with_host = state["with_host"].as_u64().unwrap_or(0) as usize;
        Ok((calls, with_host))
    }

    /// Stop it; its CPU seconds in all.
    fn stop(mut self) -> f64 {
        let cpu = self.cpu().unwrap_or(0.0);
        if let Some(child) = self.child.take() {
            crate::measure::stop_child(child);
        }
        cpu
    }
}

impl Drop for Manager {
    /// A manager left behind by an error is stopped too.
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            crate::measure::stop_child(child);
        }
    }
}

/// One side's figures.
#[derive(Default)]
struct Figures {
    init_s: f64,
    init_cloud_calls: f64,
    init_node_writes: f64,
    init_requests: f64,
    rss_at_nodes: f64,
    status_pass_s: f64,
    status_pass_cloud_calls: f64,
    lb_ensure_s: f64,
    lb_ensure_cloud_calls: f64,
    lb_ensure_service_writes: f64,
    lb_node_added_s: f64,
    lb_node_added_cloud_calls: f64,
    cpu_s: f64,
}

/// Wait, looking every [`POLL`], until `done`; `limit` at most.
async fn wait<F, Fut>(what: &str, limit: Duration, done: F) -> Result<(), BoxError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, BoxError>>,
{
    stratus_apiserver::poll(what, limit)
        .every(POLL)
        .until(done)
        .await?;
    Ok(())
}

/// One side on a fresh API server: a harness one, or a real control plane
/// without kube-controller-manager's node lifecycle controller (these
/// nodes have no kubelet to post heartbeats: it would mark every one
/// unreachable and taint it in the middle of the run, which it does not
/// do in a cluster whose kubelets run).
async fn side(
    label: &str,
    o: &Options,
    dir: &Path,
    starter: Starter<'_>,
) -> Result<Figures, BoxError> {
    let plane = Plane::start_without(o.control_plane, &["node-lifecycle-controller"]).await?;
    let result = phases(&plane, label, o, dir, starter).await;
    plane.stop().await;
    result
}

/// Put `objects` on the plane through `api`: written into the harness's
/// store as they are, or created through the API on a real plane (16 at
/// once; a Node keeps the status it is created with).
async fn plant<K>(
    plane: &Plane,
    api: &Api<K>,
    objects: Vec<serde_json::Value>,
) -> Result<(), BoxError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    if let Some(server) = plane.harness() {
        for object in objects {
            server.seed(object)?;
        }
        return Ok(());
    }
    futures_util::stream::iter(objects)
        .map(|object| async move {
            let object: K = serde_json::from_value(object)?;
            api.create(&PostParams::default(), &object).await?;
            Ok::<_, BoxError>(())
        })
        .buffer_unordered(16)
        .try_collect::<()>()
        .await
}

/// A request the API server answered.
struct Answered {
    /// `create`, `patch`, ... (as RBAC spells them).
    verb: String,
    /// The resource plural, with `/subresource` if any.
    resource: String,
    /// The status code.
    code: u16,
}

/// The manager's requests from a point on: the harness's request log
/// (cleared at the mark), or kube-apiserver's audit log (read from its
/// length at the mark). Both managers' clients name themselves
/// `cloud-controller-manager/...` in their User-Agent.
enum Ledger {
    /// The harness's request log, cleared at the mark.
    Harness,
    /// kube-apiserver's audit log, from `offset` (its length at the mark).
    Audit { path: PathBuf, offset: u64 },
}

/// The User-Agent prefix of both managers' requests.
const MANAGER_AGENT: &str = "cloud-controller-manager/";

impl Ledger {
    fn mark(plane: &Plane) -> Result<Self, BoxError> {
        if let Some(server) = plane.harness() {
            server.clear_requests();
            return Ok(Self::Harness);
        }
        let state = stratus_cluster::State::load().ok_or("the control plane is gone")?;
        let offset = std::fs::metadata(&state.audit_log).map_or(0, |m| m.len());
        Ok(Self::Audit {
            path: state.audit_log,
            offset,
        })
    }

    fn since(&self, plane: &Plane) -> Result<Vec<Answered>, BoxError> {
        match self {
            Self::Harness => {
                let server = plane.harness().ok_or("the harness is gone")?;
                Ok(server
                    .requests()
                    .into_iter()
                    .filter(|r| r.user_agent.starts_with(MANAGER_AGENT))
                    .map(|r| Answered {
                        verb: r.verb.as_str().to_owned(),
                        resource: r.resource,
                        code: r.status,
                    })
                    .collect())
            }
            Self::Audit { path, offset } => {
                use std::io::Seek;
                let failed = |e: std::io::Error| format!("{}: {e}", path.display());
                let mut file = std::fs::File::open(path).map_err(failed)?;
                // A log shorter than at the mark was rotated in between: its
                // count would be short, so there is none.
                if file.metadata().map_err(failed)?.len() < *offset {
                    return Err(format!("{} was rotated during the phase", path.display()).into());
                }
                file.seek(std::io::SeekFrom::Start(*offset))
                    .map_err(failed)?;
                let mut text = Vec::new();
                file.read_to_end(&mut text).map_err(failed)?;
                let text = String::from_utf8_lossy(&text);
                Ok(text
                    .lines()
                    .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
                    .filter(|e| {
                        e["stage"] == "ResponseComplete"
                            && e["userAgent"]
                                .as_str()
                                .is_some_and(|a| a.starts_with(MANAGER_AGENT))
                    })
                    .map(|e| {
                        let object = &e["objectRef"];
                        let mut resource =
                            object["resource"].as_str().unwrap_or_default().to_owned();
                        if let Some(sub) = object["subresource"].as_str() {
                            resource = format!("{resource}/{sub}");
                        }
                        Answered {
                            verb: e["verb"].as_str().unwrap_or_default().to_owned(),
                            resource,
                            code: e["responseStatus"]["code"].as_u64().unwrap_or(0) as u16,
                        }
                    })
                    .collect())
            }
        }
    }
}

/// How many of `answered` wrote (`update` or `patch`, answered 2xx) one of
/// `resources`.
fn writes(answered: &[Answered], resources: &[&str]) -> f64 {
    answered
        .iter()
        .filter(|r| {
            matches!(r.verb.as_str(), "patch" | "update")
                && resources.contains(&r.resource.as_str())
                && r.code < 300
        })
        .count() as f64
}

async fn phases(
    plane: &Plane,
    label: &str,
    o: &Options,
    dir: &Path,
    starter: Starter<'_>,
) -> Result<Figures, BoxError> {
    let kubeconfig = dir.join(format!("{label}.kubeconfig"));
    plane.write_kubeconfig(&kubeconfig)?;
    let log = dir.join(format!("{label}.log"));
    let client = plane.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let services: Api<Service> = Api::namespaced(client, "default");
    let seeded = (0..o.nodes)
        .map(|i| node(&format!("node-{i}"), "ccm", true))
        .collect();
    plant(plane, &nodes, seeded).await?;
    let common = [
        "--cloud-provider=fake".to_owned(),
        "--leader-elect=false".into(),
        "--secure-port=0".into(),
        "--webhook-secure-port=0".into(),
        "--authentication-skip-lookup".into(),
        "--configure-cloud-routes=false".into(),
        "--concurrent-node-syncs=4".into(),
        "--concurrent-service-syncs=4".into(),
        format!("--kube-api-qps={}", o.kube_api_qps),
        format!("--kube-api-burst={}", o.kube_api_qps),
    ];
    let flags = |extra: &[&str]| -> Vec<String> {
        common
            .iter()
            .cloned()
            .chain(extra.iter().map(|s| (*s).to_owned()))
            .collect()
    };
    let limit = Duration::from_secs(900);
    let ours = ListParams::default().labels("bench=ccm");
    let mut f = Figures::default();

    // 1. Every node initialized.
    let ledger = Ledger::mark(plane)?;
    let manager = Manager::start(
        starter,
        &kubeconfig,
        "10.0",
        &flags(&[
            "--controllers=cloud-node",
            "--node-status-update-frequency=1h",
        ]),
        &log,
    )?;
    let outcome = wait(
        &format!("every node initialized by the {label} manager"),
        limit,
        || async { Ok(nodes.list(&ours).await?.items.iter().all(|n| !tainted(n))) },
    )
    .await;
    f.init_s = manager.started.elapsed().as_secs_f64();
    outcome?;
    f.init_cloud_calls = manager.cloud("").await?.0;
    tokio::time::sleep(Duration::from_secs(1)).await;
    f.rss_at_nodes = manager.rss()?;
    f.cpu_s += manager.stop();
    let requests = ledger.since(plane)?;
    f.init_node_writes = writes(&requests, &["nodes", "nodes/status"]);
    f.init_requests = requests.len() as f64;

    // 2. One address-refresh pass.
    let manager = Manager::start(
        starter,
        &kubeconfig,
        "172.16",
        &flags(&[
            "--controllers=cloud-node",
            "--node-status-update-frequency=1s",
        ]),
        &log,
    )?;
    let outcome = wait(
        &format!("every address refreshed by the {label} manager"),
        limit,
        || async {
            Ok(nodes.list(&ours).await?.items.iter().all(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.addresses.as_ref())
                    .is_some_and(|a| a.iter().any(|a| a.address.starts_with("172.16.")))
            }))
        },
    )
    .await;
    f.status_pass_s = manager.started.elapsed().as_secs_f64();
    outcome?;
    f.status_pass_cloud_calls = manager.cloud("").await?.0;
    f.cpu_s += manager.stop();

    // 3. S LoadBalancer Services, then one node added.
    let seeded = (0..o.services)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": format!("lb-{i}"), "namespace": "default"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}})
        })
        .collect();
    plant(plane, &services, seeded).await?;
    let ledger = Ledger::mark(plane)?;
    let manager = Manager::start(
        starter,
        &kubeconfig,
        "172.16",
        &flags(&["--controllers=service"]),
        &log,
    )?;
    let outcome = wait(
        &format!("every Service given an ingress by the {label} manager"),
        limit,
        || async {
            let list = services.list(&ListParams::default()).await?;
            let ours = list.items.iter().filter(|s| {
                s.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("lb-"))
            });
            Ok(ours.into_iter().all(|s| {
                s.status
                    .as_ref()
                    .and_then(|st| st.load_balancer.as_ref())
                    .and_then(|l| l.ingress.as_ref())
                    .is_some_and(|i| !i.is_empty())
            }))
        },
    )
    .await;
    f.lb_ensure_s = manager.started.elapsed().as_secs_f64();
    outcome?;
    let ensure_calls = manager.cloud("").await?.0;
    f.lb_ensure_cloud_calls = ensure_calls;
    f.lb_ensure_service_writes = writes(&ledger.since(plane)?, &["services", "services/status"]);
    let added = Instant::now();
    plant(plane, &nodes, vec![node("node-new", "ccm", false)]).await?;
    let services_count = o.services;
    let outcome = wait(
        &format!("every load balancer given the new node by the {label} manager"),
        limit,
        || async { Ok(manager.cloud("node-new").await?.1 == services_count) },
    )
    .await;
    f.lb_node_added_s = added.elapsed().as_secs_f64();
    outcome?;
    f.lb_node_added_cloud_calls = manager.cloud("").await?.0 - ensure_calls;
    f.cpu_s += manager.stop();
    Ok(f)
}

pub(crate) async fn run(args: &[String]) -> Result<(), BoxError> {
    let o = options(args)?;
    let go_binary = stratus_cluster::go_peers::cloud_controller_manager()?;
    let exe = std::env::current_exe()?;
    let dir = std::env::temp_dir().join(format!("stratus-bench-ccm-go-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let cloud_flags = |base: &str| {
        vec![
            format!("--cloud-latency={}ms", CLOUD_LATENCY.as_millis()),
            format!("--cloud-qps={CLOUD_QPS}"),
            "--cloud-burst=100".to_owned(),
            format!("--address-base={base}"),
        ]
    };
    let nodes = o.nodes;
    let stratus_start = |kubeconfig: &Path, base: &str, flags: &[String]| {
        let mut c = Command::new(&exe);
        c.arg(STRATUS_MANAGER_CHILD)
            .arg(format!("--nodes={nodes}"))
            .arg(format!("--address-base={base}"))
            .arg("--")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(flags);
        c
    };
    let go_start = |kubeconfig: &Path, base: &str, flags: &[String]| {
        let mut c = Command::new(&go_binary);
        c.args(cloud_flags(base))
            .arg("--")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(flags);
        c
    };
    let logs = |label: &str| -> PathBuf { dir.join(format!("{label}.log")) };
    let stratus = side("stratus", &o, &dir, &stratus_start)
        .await
        .inspect_err(|_| eprintln!("the Stratus manager's log: {}", logs("stratus").display()))?;
    let go = side("go", &o, &dir, &go_start)
        .await
        .inspect_err(|_| eprintln!("the Go manager's log: {}", logs("go").display()))?;
    let _ = std::fs::remove_dir_all(&dir);

    let rows: [(&str, f64, f64); 13] = [
        ("node_init_s", stratus.init_s, go.init_s),
        (
            "node_init_cloud_calls",
            stratus.init_cloud_calls,
            go.init_cloud_calls,
        ),
        (
            "node_init_node_writes",
            stratus.init_node_writes,
            go.init_node_writes,
        ),
        (
            "node_init_api_requests",
            stratus.init_requests,
            go.init_requests,
        ),
        ("rss_bytes_at_nodes", stratus.rss_at_nodes, go.rss_at_nodes),
        ("status_pass_s", stratus.status_pass_s, go.status_pass_s),
        (
            "status_pass_cloud_calls",
            stratus.status_pass_cloud_calls,
            go.status_pass_cloud_calls,
        ),
        ("lb_ensure_s", stratus.lb_ensure_s, go.lb_ensure_s),
        (
            "lb_ensure_cloud_calls",
            stratus.lb_ensure_cloud_calls,
            go.lb_ensure_cloud_calls,
        ),
        (
            "lb_ensure_service_writes",
            stratus.lb_ensure_service_writes,
            go.lb_ensure_service_writes,
        ),
        (
            "lb_node_added_s",
            stratus.lb_node_added_s,
            go.lb_node_added_s,
        ),
        (
            "lb_node_added_cloud_calls",
            stratus.lb_node_added_cloud_calls,
            go.lb_node_added_cloud_calls,
        ),
        ("cpu_s", stratus.cpu_s, go.cpu_s),
    ];
    let (suite, plane) = match o.control_plane {
        ControlPlane::Embedded => ("ccm-go", "the harness API server"),
        ControlPlane::Real => ("ccm-go-real", "the real control plane"),
    };
    write_side_by_side(
        suite,
        &[("nodes", o.nodes as f64), ("services", o.services as f64)],
        &rows,
        &format!(
            "{} nodes, {} LoadBalancer Services per side, on {plane}",
            o.nodes, o.services
        ),
    )?;
    Ok(())
}

/// Serve GET /state?host=NAME for `cloud` on a loopback port (the call
/// counts of [`METHODS`] and how many load balancers have `host`), on a
/// thread of its own; the address.
fn serve_state(cloud: FakeCloud) -> Result<std::net::SocketAddr, BoxError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(&stream);
            let mut request = String::new();
            if reader.read_line(&mut request).is_err() {
                continue;
            }
            // The headers, up to the empty line, read so that closing
            // leaves nothing unread.
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let host = request
                .split_whitespace()
                .nth(1)
                .and_then(|path| path.split_once("host="))
                .map(|(_, h)| h.to_owned())
                .unwrap_or_default();
            let calls: serde_json::Map<String, serde_json::Value> = METHODS
                .iter()
                .map(|m| ((*m).to_owned(), json!(cloud.calls_to(m))))
                .collect();
            let body = json!({"calls": calls, "with_host": cloud.load_balancers_with_host(&host)})
                .to_string();
            let _ = write!(
                &stream,
                "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    });
    Ok(addr)
}

/// The benchmark's Stratus manager: FakeCloud with instances `node-0` …
/// `node-<N-1>` (and `node-new`), 20 ms a call, 100 calls a second, its
/// state served on a loopback port (printed first: `cloud-state ADDR`),
/// and the manager command with the flags after `--`, as a vendor's `main`
/// runs it (its logging, its runtime), until SIGTERM.
pub(crate) fn stratus_manager(args: &[String]) -> Result<std::process::ExitCode, BoxError> {
    let usage = || -> BoxError {
        format!(
            "usage: stratus-bench {STRATUS_MANAGER_CHILD} --nodes=N --address-base=A.B -- MANAGER-FLAGS"
        )
        .into()
    };
    let split = args.iter().position(|a| a == "--").ok_or_else(usage)?;
    let [nodes, base] = &args[..split] else {
        return Err(usage());
    };
    let nodes: usize = nodes
        .strip_prefix("--nodes=")
        .and_then(|n| n.parse().ok())
        .ok_or_else(usage)?;
    let base = base.strip_prefix("--address-base=").ok_or_else(usage)?;
    let cloud = FakeCloud::new();
    for name in (0..nodes)
        .map(|i| format!("node-{i}"))
        .chain(["node-new".to_owned()])
    {
        cloud.add_instance(FakeInstance::new(&name).with_internal_ip(address(base, &name)));
    }
    cloud.set_latency(CLOUD_LATENCY);
    cloud.set_rate_limit(CLOUD_QPS, 100);
    let addr = serve_state(cloud.clone())?;
    println!("cloud-state {addr}");
    std::io::stdout().flush()?;
    let provider: Arc<dyn stratus_cloud::CloudProvider> = Arc::new(cloud);
    let argv = std::iter::once("cloud-controller-manager".to_owned())
        .chain(args[split + 1..].iter().cloned());
    Ok(stratus_ccm::app::Command::new()
        .provider("fake", move |_, _| Ok(provider))
        .run_main_with_args(argv))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_clouds_give_a_node_the_same_address() {
        assert_eq!(address("10.0", "node-0"), "10.0.0.0");
        assert_eq!(address("172.16", "node-4999"), "172.16.19.135");
        assert_eq!(address("10.0", "node-new"), "10.0.0.0");
    }

    #[test]
    fn options_are_checked() {
        let o = options(&[]).unwrap();
        assert_eq!((o.nodes, o.services, o.kube_api_qps), (5_000, 1_000, 1_000));
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let o = options(&args(&["--nodes", "20", "--services", "3"])).unwrap();
        assert_eq!((o.nodes, o.services), (20, 3));
        assert!(options(&args(&["--nodes", "0"])).is_err());
        assert!(options(&args(&["--nodes"])).is_err());
        assert!(options(&args(&["--pods", "3"])).is_err());
        assert_eq!(o.control_plane, ControlPlane::Embedded);
        let o = options(&args(&["--control-plane", "real"])).unwrap();
        assert_eq!(o.control_plane, ControlPlane::Real);
        let refused = options(&args(&["--control-plane", "kind"])).err().unwrap();
        assert!(
            refused.to_string().contains("`embedded` or `real`"),
            "{refused}"
        );
    }
}
