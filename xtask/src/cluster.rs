//! `cargo xtask cluster`: a real Kubernetes control plane on this machine —
//! etcd, kube-apiserver, kube-controller-manager and kube-scheduler, built
//! from the Go modules pinned in `tools/kubernetes/go.mod` and run on
//! loopback, the way kubeadm configures them (TLS everywhere but etcd's
//! loopback client port, `Node,RBAC` authorization with `NodeRestriction`,
//! service-account issuer and signing key, front-proxy certificates, a
//! kubelet client certificate, `--cloud-provider=external` so that the
//! cloud controllers are left to a cloud controller manager, an audit log).
//!
//! - `build`: build the four binaries into `target/kubernetes/bin` (the Go
//!   build and module caches make a second build incremental; nothing is
//!   rebuilt while the binaries are newer than `go.mod` and `go.sum`).
//! - `up [--kubeconfig FILE] [--node-address IP]`: build, make the
//!   certificates, start the components in the background, wait until all
//!   four are healthy, write the administrator's kubeconfig; returns and
//!   leaves them running. `--node-address` is added to the loopback device
//!   (and removed by `down`): kube-apiserver does not proxy to a node whose
//!   address is loopback, so nodes whose kubelet API the API server must
//!   reach (`kubectl logs`, `exec`, `nodes/proxy`) listen there.
//! - `down`: stop every component, remove the address and the state.
//! - `status`: each component's process and health.
//! - `stop|start|restart COMPONENT`: one component, for fault tests.
//!
//! Everything lives under `target/kubernetes/cluster/` (certificates,
//! etcd's data, logs, the audit log, `state.json`).

use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::cluster_pki::{Authority, Usage, signing_key};
use crate::error::BoxError;

/// The components, in start order.
pub(crate) const COMPONENTS: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// The address added to the loopback device for nodes' kubelet APIs: from
/// 198.18.0.0/15, the range set aside for tests of network equipment
/// (RFC 2544), so it names no host anywhere; it lives on this machine's
/// loopback device only while the cluster is up.
pub(crate) const DEFAULT_NODE_ADDRESS: &str = "198.18.83.1";

/// The Service IP range (kubeadm's default).
const SERVICE_CIDR: &str = "10.96.0.0/12";

/// The Go module that pins the control plane.
fn go_module() -> PathBuf {
    crate::generated::root().join("tools/kubernetes")
}

/// The Kubernetes version `go.mod` pins (`v1.37.2`).
fn pinned_version() -> Result<String, BoxError> {
    let path = go_module().join("go.mod");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .find_map(|l| {
            let l = l.trim();
            l.strip_prefix("require ")
                .unwrap_or(l)
                .strip_prefix("k8s.io/kubernetes ")
        })
        .map(|v| v.trim().to_owned())
        .ok_or_else(|| format!("{} requires no k8s.io/kubernetes version", path.display()).into())
}

/// Linker flags: no symbol tables, and the version stamped as Kubernetes'
/// release builds stamp it (a module build has no git tree to read it
/// from, so it would say `v0.0.0-master`).
fn ldflags() -> Result<String, BoxError> {
    let version = pinned_version()?;
    let mut parts = version.trim_start_matches('v').split('.');
    let (major, minor) = (parts.next().unwrap_or("1"), parts.next().unwrap_or("0"));
    let mut flags = "-s -w".to_owned();
    for package in [
        "k8s.io/component-base/version",
        "k8s.io/client-go/pkg/version",
    ] {
        flags.push_str(&format!(
            " -X {package}.gitVersion={version} -X {package}.gitMajor={major} \
             -X {package}.gitMinor={minor} -X {package}.gitTreeState=clean"
        ));
    }
    Ok(flags)
}

/// `<target>/kubernetes`.
fn home() -> PathBuf {
    let root = crate::generated::root();
    let root = root.canonicalize().unwrap_or(root);
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    target.join("kubernetes")
}

/// Where the binaries are built.
fn bin_dir() -> PathBuf {
    home().join("bin")
}

/// The running cluster's directory.
pub(crate) fn cluster_dir() -> PathBuf {
    home().join("cluster")
}

/// One running component: how it was started (so that it can be restarted
/// identically), its process and its health endpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Component {
    /// `etcd`, `kube-apiserver`, ...
    pub(crate) name: String,
    /// The binary.
    pub(crate) program: PathBuf,
    /// Its arguments.
    pub(crate) args: Vec<String>,
    /// Its process ID (0 while stopped).
    pub(crate) pid: u32,
    /// Its log file.
    pub(crate) log: PathBuf,
    /// The URL that answers `ok` when it is healthy.
    pub(crate) health: String,
}

/// What `up` leaves in `state.json` for the other commands and tasks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct State {
    /// kube-apiserver's URL.
    pub(crate) server: String,
    /// The administrator's kubeconfig (`system:masters`).
    pub(crate) kubeconfig: PathBuf,
    /// The cluster CA (it signs the serving and client certificates; the
    /// kubelet client certificate too, so it is the CA a kubelet API
    /// trusts).
    pub(crate) ca: PathBuf,
    /// The address added to the loopback device for kubelet APIs, if any.
    pub(crate) node_address: Option<String>,
    /// Whether `up` added it (then `down` removes it).
    pub(crate) node_address_added: bool,
    /// kube-apiserver's audit log (JSON lines).
    pub(crate) audit_log: PathBuf,
    /// The components.
    pub(crate) components: Vec<Component>,
    /// When kube-apiserver was stopped and when it was ready again (unix
    /// microseconds; no end while it is down), from `stop` / `restart`.
    /// While it starts, its authorizer's caches are not yet synced and it
    /// may answer 403 to anyone; the audit count tells those apart.
    #[serde(default)]
    pub(crate) apiserver_outages: Vec<(i64, Option<i64>)>,
}

/// Now, in unix microseconds.
fn now_micros() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_microsecond()
}

impl State {
    /// The state of the cluster `up` started, if one is.
    pub(crate) fn load() -> Option<Self> {
        let text = std::fs::read_to_string(cluster_dir().join("state.json")).ok()?;
        serde_json::from_str(&text).ok()
    }

    fn save(&self) -> Result<(), BoxError> {
        let path = cluster_dir().join("state.json");
        std::fs::write(&path, serde_json::to_vec_pretty(self)?)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(())
    }

    fn component(&mut self, name: &str) -> Result<&mut Component, BoxError> {
        self.components
            .iter_mut()
            .find(|c| c.name == name)
            .ok_or_else(|| {
                format!("no component {name:?} (one of {})", COMPONENTS.join(", ")).into()
            })
    }

    /// A client as the administrator.
    pub(crate) async fn client(&self) -> Result<kube::Client, BoxError> {
        client_from(&self.kubeconfig).await
    }

    /// Where virtual nodes serve kubelet APIs that kube-apiserver proxies
    /// to: the node address ([`DEFAULT_NODE_ADDRESS`] if `up` had none)
    /// and the cluster CA, which signs kube-apiserver's kubelet client
    /// certificate.
    pub(crate) async fn kubelet_api_site(
        &self,
    ) -> Result<stratus_testing::kubelet_api::KubeletApiSite, BoxError> {
        Ok(stratus_testing::kubelet_api::KubeletApiSite {
            client: self.client().await?,
            kubelet_client_ca_pem: std::fs::read_to_string(&self.ca)
                .map_err(|e| format!("{}: {e}", self.ca.display()))?,
            address: self
                .node_address
                .as_deref()
                .unwrap_or(DEFAULT_NODE_ADDRESS)
                .parse()?,
        })
    }
}

/// A client from a kubeconfig file.
pub(crate) async fn client_from(path: &Path) -> Result<kube::Client, BoxError> {
    Ok(kube::Client::try_from(config_from(path).await?)?)
}

/// A client configuration from a kubeconfig file.
pub(crate) async fn config_from(path: &Path) -> Result<kube::Config, BoxError> {
    let file = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(kube::Config::from_custom_kubeconfig(file, &Default::default()).await?)
}

fn newest_input() -> Option<SystemTime> {
    ["go.mod", "go.sum"]
        .iter()
        .filter_map(|f| std::fs::metadata(go_module().join(f)).ok()?.modified().ok())
        .max()
}

fn binary(name: &str) -> PathBuf {
    bin_dir().join(name)
}

/// Build the binaries unless they are newer than the module files; the
/// answer says which happened and how long it took.
pub(crate) fn build() -> Result<String, BoxError> {
    let inputs = newest_input().ok_or("tools/kubernetes/go.mod is missing")?;
    let fresh = COMPONENTS.iter().all(|c| {
        std::fs::metadata(binary(c))
            .and_then(|m| m.modified())
            .is_ok_and(|built| built >= inputs)
    });
    if fresh {
        return Ok("binaries up to date".into());
    }
    let started = Instant::now();
    std::fs::create_dir_all(bin_dir())?;
    let ldflags = ldflags()?;
    // The three Kubernetes commands in one build (the compiler runs their
    // shared packages once), etcd's server after it.
    let builds: [(&[&str], &str); 2] = [
        (
            &[
                "k8s.io/kubernetes/cmd/kube-apiserver",
                "k8s.io/kubernetes/cmd/kube-controller-manager",
                "k8s.io/kubernetes/cmd/kube-scheduler",
            ],
            "",
        ),
        (&["go.etcd.io/etcd/server/v3"], "etcd"),
    ];
    for (packages, output) in builds {
        let out = bin_dir().join(output);
        let mut out = out.into_os_string();
        if output.is_empty() {
            out.push("/");
        }
        eprintln!("cluster: go build {}", packages.join(" "));
        let status = Command::new("go")
            .current_dir(go_module())
            .env("GOFLAGS", "-mod=mod")
            .arg("build")
            .args(["-trimpath", &format!("-ldflags={ldflags}"), "-o"])
            .arg(&out)
            .args(packages)
            .status()
            .map_err(|e| format!("could not run go (is Go installed?): {e}"))?;
        if !status.success() {
            return Err(format!("go build {} failed", packages.join(" ")).into());
        }
    }
    Ok(format!("built in {:.0}s", started.elapsed().as_secs_f64()))
}

/// A free loopback port for a component that must be told its port.
///
/// Not one the kernel hands out for port 0: those come from the ephemeral
/// range, which the components' own outgoing connections (kube-apiserver to
/// etcd, the controllers to kube-apiserver) draw from too, so a port picked
/// that way could be taken by a connection before the component that was
/// to listen on it starts (kube-scheduler once failed so). A port below
/// the range is only ever taken by a listener. Each port is handed out
/// once per process.
fn free_port() -> Result<u16, BoxError> {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let (low, high) = (10_000u16, ephemeral_start.saturating_sub(1));
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    if high > low {
        let span = u64::from(high - low);
        let mut seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id()).rotate_left(32);
        for _ in 0..500 {
            // xorshift: spread over the range, differently per process.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let port = low + (seed % span) as u16;
            if !given.contains(&port) && TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
                given.push(port);
                return Ok(port);
            }
        }
    }
    let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port();
    given.push(port);
    Ok(port)
}

fn path_arg(flag: &str, path: &Path) -> String {
    format!("--{flag}={}", path.display())
}

/// A kubeconfig at `path` for the cluster at `server` (trusting `ca`) and
/// one user, whose credentials are the `user:` lines given
/// (`client-certificate`/`client-key`, or `token`).
fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca: &Path,
    user: &str,
    credentials: &[(&str, String)],
) -> Result<(), BoxError> {
    let credentials: String = credentials
        .iter()
        .map(|(key, value)| format!("    {key}: {value}\n"))
        .collect();
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: stratus-real\n  cluster:\n    server: {server}\n    certificate-authority: {}\nusers:\n- name: {user}\n  user:\n{credentials}contexts:\n- name: {user}@stratus-real\n  context:\n    cluster: stratus-real\n    user: {user}\ncurrent-context: {user}@stratus-real\n",
        ca.display(),
    );
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}

/// A client certificate's kubeconfig lines.
fn certificate(issued: &crate::cluster_pki::Issued) -> [(&'static str, String); 2] {
    [
        ("client-certificate", issued.cert.display().to_string()),
        ("client-key", issued.key.display().to_string()),
    ]
}

/// The flags with which kube-controller-manager and kube-scheduler reach
/// kube-apiserver, and review their own callers through it.
fn client_flags(kubeconfig: &Path) -> [String; 3] {
    [
        path_arg("kubeconfig", kubeconfig),
        path_arg("authentication-kubeconfig", kubeconfig),
        path_arg("authorization-kubeconfig", kubeconfig),
    ]
}

/// Every Metadata-level event once complete: who did what, and the answer's
/// status code (the e2e runs count 403s per user).
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [\"RequestReceived\"]
rules:
- level: Metadata
";

/// Make the certificates and the components' command lines, with
/// kube-controller-manager's controllers `disabled` off.
fn prepare(dir: &Path, node_address: Option<&str>, disabled: &[&str]) -> Result<State, BoxError> {
    let pki = dir.join("pki");
    let logs = dir.join("logs");
    for d in [&pki, &logs, &dir.join("etcd")] {
        std::fs::create_dir_all(d)?;
    }
    let ca = Authority::create(&pki, "ca", "kubernetes")?;
    let front_proxy_ca = Authority::create(&pki, "front-proxy-ca", "front-proxy-ca")?;
    let mut ips: Vec<IpAddr> = vec![
        Ipv4Addr::LOCALHOST.into(),
        // The `kubernetes` Service's address, the first of the range.
        Ipv4Addr::new(10, 96, 0, 1).into(),
    ];
    if let Some(ip) = node_address.and_then(|a| a.parse().ok()) {
        ips.push(ip);
    }
    let serving = ca.issue(
        &pki,
        "apiserver",
        "kube-apiserver",
        Usage::Serving {
            dns: &[
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            ips: &ips,
        },
    )?;
    let client = |name: &str, user: &str, groups: &[&str]| {
        ca.issue(&pki, name, user, Usage::Client { groups })
    };
    // Authorized on kubelets by the binding `up` creates (as kubeadm binds
    // it to `system:kubelet-api-admin`).
    let kubelet_client = client("apiserver-kubelet-client", KUBELET_CLIENT_USER, &[])?;
    let admin = client("admin", "kubernetes-admin", &["system:masters"])?;
    let kcm = client("controller-manager", "system:kube-controller-manager", &[])?;
    let scheduler = client("scheduler", "system:kube-scheduler", &[])?;
    let front_proxy_client = front_proxy_ca.issue(
        &pki,
        "front-proxy-client",
        "front-proxy-client",
        Usage::Client { groups: &[] },
    )?;
    let (sa_key, sa_pub) = signing_key(&pki, "sa")?;

    let etcd_port = free_port()?;
    let etcd_peer_port = free_port()?;
    let apiserver_port = free_port()?;
    let kcm_port = free_port()?;
    let scheduler_port = free_port()?;
    let server = format!("https://127.0.0.1:{apiserver_port}");
    let etcd_url = format!("http://127.0.0.1:{etcd_port}");
    let etcd_peer = format!("http://127.0.0.1:{etcd_peer_port}");

    let kubeconfig = dir.join("admin.kubeconfig");
    write_kubeconfig(
        &kubeconfig,
        &server,
        &ca.cert,
        "kubernetes-admin",
        &certificate(&admin),
    )?;
    let kcm_kubeconfig = dir.join("controller-manager.kubeconfig");
    write_kubeconfig(
        &kcm_kubeconfig,
        &server,
        &ca.cert,
        "system:kube-controller-manager",
        &certificate(&kcm),
    )?;
    let scheduler_kubeconfig = dir.join("scheduler.kubeconfig");
    write_kubeconfig(
        &scheduler_kubeconfig,
        &server,
        &ca.cert,
        "system:kube-scheduler",
        &certificate(&scheduler),
    )?;
    let audit_policy = dir.join("audit-policy.yaml");
    std::fs::write(&audit_policy, AUDIT_POLICY)?;
    let audit_log = logs.join("audit.log");

    let strings = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mut etcd = strings(&["--name=stratus", "--unsafe-no-fsync", "--log-level=warn"]);
    etcd.extend([
        path_arg("data-dir", &dir.join("etcd")),
        format!("--listen-client-urls={etcd_url}"),
        format!("--advertise-client-urls={etcd_url}"),
        format!("--listen-peer-urls={etcd_peer}"),
        format!("--initial-advertise-peer-urls={etcd_peer}"),
        format!("--initial-cluster=stratus={etcd_peer}"),
    ]);

    let mut apiserver = strings(&[
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        // The `kubernetes` Service's endpoints may not be loopback
        // addresses, and nothing in these runs reaches the API server
        // through that Service (as envtest).
        "--endpoint-reconciler-type=none",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        "--allow-privileged=true",
        "--enable-bootstrap-token-auth=true",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-username-headers=X-Remote-User",
        "--audit-log-maxsize=500",
        "--audit-log-maxbackup=1",
        "--profiling=false",
    ]);
    apiserver.extend([
        format!("--secure-port={apiserver_port}"),
        format!("--etcd-servers={etcd_url}"),
        format!("--service-cluster-ip-range={SERVICE_CIDR}"),
        path_arg("tls-cert-file", &serving.cert),
        path_arg("tls-private-key-file", &serving.key),
        path_arg("client-ca-file", &ca.cert),
        path_arg("service-account-key-file", &sa_pub),
        path_arg("service-account-signing-key-file", &sa_key),
        path_arg("kubelet-client-certificate", &kubelet_client.cert),
        path_arg("kubelet-client-key", &kubelet_client.key),
        path_arg("requestheader-client-ca-file", &front_proxy_ca.cert),
        path_arg("proxy-client-cert-file", &front_proxy_client.cert),
        path_arg("proxy-client-key-file", &front_proxy_client.key),
        path_arg("audit-policy-file", &audit_policy),
        path_arg("audit-log-path", &audit_log),
    ]);

    let mut kcm_args = strings(&[
        "--bind-address=127.0.0.1",
        "--leader-elect=false",
        "--use-service-account-credentials=true",
        // The cloud controllers (node, node lifecycle, service, route) are
        // the cloud controller manager's job; node IPAM too, when it runs
        // the node-ipam controller.
        "--cloud-provider=external",
        "--allocate-node-cidrs=false",
        "--profiling=false",
    ]);
    kcm_args.push(
        std::iter::once("--controllers=*,bootstrapsigner,tokencleaner".to_owned())
            .chain(disabled.iter().map(|c| format!("-{c}")))
            .collect::<Vec<_>>()
            .join(","),
    );
    kcm_args.extend([
        format!("--secure-port={kcm_port}"),
        path_arg("client-ca-file", &ca.cert),
        path_arg("requestheader-client-ca-file", &front_proxy_ca.cert),
        path_arg("root-ca-file", &ca.cert),
        path_arg("service-account-private-key-file", &sa_key),
        path_arg("cluster-signing-cert-file", &ca.cert),
        path_arg("cluster-signing-key-file", &ca.key_file),
        format!("--service-cluster-ip-range={SERVICE_CIDR}"),
    ]);
    kcm_args.extend(client_flags(&kcm_kubeconfig));

    let mut scheduler_args = strings(&[
        "--bind-address=127.0.0.1",
        "--leader-elect=false",
        "--profiling=false",
    ]);
    scheduler_args.push(format!("--secure-port={scheduler_port}"));
    scheduler_args.extend(client_flags(&scheduler_kubeconfig));

    let component = |name: &str, args: Vec<String>, health: String| Component {
        name: name.to_owned(),
        program: binary(name),
        args,
        pid: 0,
        log: logs.join(format!("{name}.log")),
        health,
    };
    Ok(State {
        server: server.clone(),
        kubeconfig,
        ca: ca.cert.clone(),
        node_address: node_address.map(str::to_owned),
        node_address_added: false,
        audit_log,
        apiserver_outages: Vec::new(),
        components: vec![
            component("etcd", etcd, format!("{etcd_url}/health")),
            component("kube-apiserver", apiserver, format!("{server}/readyz")),
            component(
                "kube-controller-manager",
                kcm_args,
                format!("https://127.0.0.1:{kcm_port}/healthz"),
            ),
            component(
                "kube-scheduler",
                scheduler_args,
                format!("https://127.0.0.1:{scheduler_port}/healthz"),
            ),
        ],
    })
}

/// The user the API server's kubelet client certificate names.
pub(crate) const KUBELET_CLIENT_USER: &str = "kube-apiserver-kubelet-client";

/// Start one component in the background (its own process group, so that
/// Ctrl-C in the terminal that ran `up` does not reach it).
fn spawn(component: &mut Component) -> Result<(), BoxError> {
    use std::os::unix::process::CommandExt;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&component.log)
        .map_err(|e| format!("{}: {e}", component.log.display()))?;
    let child = Command::new(&component.program)
        .args(&component.args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("could not start {}: {e}", component.program.display()))?;
    component.pid = child.id();
    Ok(())
}

/// True if a cluster of `cargo xtask cluster` is up (its state saved and
/// every component running).
pub(crate) fn is_up() -> bool {
    State::load().is_some_and(|s| s.components.iter().all(|c| alive(c.pid)))
}

fn alive(pid: u32) -> bool {
    pid != 0
        && std::fs::read_to_string(format!("/proc/{pid}/stat"))
            // A zombie (state Z) has exited.
            .is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
            })
}

fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

/// Stop a component: SIGTERM, then SIGKILL after 10 s.
fn terminate(component: &mut Component) {
    if !alive(component.pid) {
        component.pid = 0;
        return;
    }
    signal(component.pid, "TERM");
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(component.pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if alive(component.pid) {
        signal(component.pid, "KILL");
        while alive(component.pid) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    component.pid = 0;
}

/// An HTTP(S) client for a health endpoint (the components' own serving
/// certificates are self-signed, so they are not verified; the request
/// goes to 127.0.0.1 only).
fn health_client(url: &str) -> Result<kube::Client, BoxError> {
    let uri: http::Uri = url.parse()?;
    let base: http::Uri = format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("https"),
        uri.authority().ok_or("health URL without a host")?
    )
    .parse()?;
    let mut config = kube::Config::new(base);
    config.accept_invalid_certs = true;
    config.read_timeout = Some(Duration::from_secs(5));
    Ok(kube::Client::try_from(config)?)
}

/// Whether a component answers `ok` on its health endpoint (kube-apiserver
/// is asked as the administrator).
async fn healthy(state: &State, component: &Component) -> bool {
    let client = if component.name == "kube-apiserver" {
        state.client().await
    } else {
        health_client(&component.health)
    };
    let Ok(client) = client else {
        return false;
    };
    let path = component
        .health
        .parse::<http::Uri>()
        .ok()
        .map(|u| u.path().to_owned())
        .unwrap_or_default();
    let Ok(request) = http::Request::get(path).body(Vec::new()) else {
        return false;
    };
    match client.request_text(request).await {
        Ok(body) => body.trim() == "ok" || body.contains("\"health\":\"true\""),
        Err(_) => false,
    }
}

/// Wait until `component` is healthy; fail early if its process exits.
async fn wait_healthy(state: &State, name: &str, within: Duration) -> Result<Duration, BoxError> {
    let started = Instant::now();
    let component = state
        .components
        .iter()
        .find(|c| c.name == name)
        .ok_or("no such component")?;
    loop {
        if healthy(state, component).await {
            return Ok(started.elapsed());
        }
        if !alive(component.pid) {
            return Err(format!(
                "{name} exited; the end of {}:\n{}",
                component.log.display(),
                tail(&component.log, 20)
            )
            .into());
        }
        if started.elapsed() > within {
            return Err(format!(
                "{name} was not healthy within {}s; the end of {}:\n{}",
                within.as_secs(),
                component.log.display(),
                tail(&component.log, 20)
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Run `ip ARGS`: its error output when it fails.
pub(crate) fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Whether `address` is on the loopback device.
pub(crate) fn address_present(address: &str) -> bool {
    Command::new("ip")
        .args(["-o", "addr", "show", "dev", "lo"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(&format!(" {address}/")))
}

/// Objects every run needs: the API server's kubelet client may call
/// kubelets (kubeadm's `kubeadm:kubelet-api-admin` binding).
async fn bootstrap(client: &kube::Client) -> Result<(), BoxError> {
    use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
    use kube::api::{Api, Patch, PatchParams};
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "stratus:kubelet-api-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:kubelet-api-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": KUBELET_CLIENT_USER}]
    }))?;
    Api::<ClusterRoleBinding>::all(client.clone())
        .patch(
            "stratus:kubelet-api-admin",
            &PatchParams::apply("stratus-cluster").force(),
            &Patch::Apply(binding),
        )
        .await?;
    Ok(())
}

/// Wait until the controller manager made the `default` ServiceAccount of
/// `namespace` (pods cannot be created there before).
pub(crate) async fn wait_for_default_service_account(
    client: &kube::Client,
    namespace: &str,
    within: Duration,
) -> Result<(), BoxError> {
    use k8s_openapi::api::core::v1::ServiceAccount;
    let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(client.clone(), namespace);
    let what = format!("the controller manager's default ServiceAccount in {namespace}");
    stratus_apiserver::poll(what, within)
        .every(Duration::from_millis(100))
        .until(|| async { accounts.get_opt("default").await.map(|a| a.is_some()) })
        .await?;
    Ok(())
}

/// Wait until the ConfigMap `namespace/name` exists (the controller manager
/// publishes `kube-root-ca.crt` in every namespace; pods mount it).
pub(crate) async fn wait_for_config_map(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    within: Duration,
) -> Result<(), BoxError> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let maps: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), namespace);
    stratus_apiserver::poll(format!("ConfigMap {namespace}/{name}"), within)
        .every(Duration::from_millis(100))
        .until(|| async { maps.get_opt(name).await.map(|m| m.is_some()) })
        .await?;
    Ok(())
}

/// [`up_without`] for a benchmark side that needs a control plane of its
/// own: an error, not a shared one, if a cluster is up already.
pub(crate) async fn up_fresh(
    node_address: Option<&str>,
    disabled: &[&str],
) -> Result<State, BoxError> {
    if is_up() {
        return Err("a control plane of `cargo xtask cluster` is up; the benchmark needs a fresh one: run `cargo xtask cluster down` first".into());
    }
    up_without(node_address, disabled).await
}

/// [`down`] off the runtime's threads, for a benchmark that brought the
/// cluster up; a failure is reported, with the command that cleans up.
pub(crate) async fn down_after_benchmark() {
    match tokio::task::spawn_blocking(down).await {
        Ok(true) => {}
        Ok(false) => eprintln!("taking the control plane down: none was up"),
        Err(e) => eprintln!("taking the control plane down: {e}; run `cargo xtask cluster down`"),
    }
}

/// Bring the cluster up (see the module docs); the answer is its state.
pub(crate) async fn up(node_address: Option<&str>) -> Result<State, BoxError> {
    up_without(node_address, &[]).await
}

/// [`up`] with kube-controller-manager's controllers `disabled` (their
/// names, as its `--controllers` flag spells them) off. A cluster that is
/// already up is kept as it is.
pub(crate) async fn up_without(
    node_address: Option<&str>,
    disabled: &[&str],
) -> Result<State, BoxError> {
    if let Some(state) = State::load() {
        if state.components.iter().all(|c| alive(c.pid)) {
            eprintln!("cluster: already up ({})", state.server);
            return Ok(state);
        }
        eprintln!("cluster: a stopped cluster's state found; removing it");
        down_state(state);
    }
    let started = Instant::now();
    let built = tokio::task::spawn_blocking(build).await??;
    eprintln!("cluster: {built}");
    let dir = cluster_dir();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let mut state = prepare(&dir, node_address, disabled)?;
    if let Some(address) = node_address {
        if address_present(address) {
            eprintln!("cluster: {address} is already on the loopback device");
        } else {
            match ip(&["addr", "add", &format!("{address}/32"), "dev", "lo"]) {
                Ok(()) => state.node_address_added = true,
                Err(e) => {
                    state.node_address = None;
                    eprintln!(
                        "cluster: could not add the node address ({e}); kube-apiserver will not \
                         proxy to kubelet APIs on loopback"
                    );
                }
            }
        }
    }
    state.save()?;
    let boot = Instant::now();
    for name in COMPONENTS {
        spawn(state.component(name)?)?;
        state.save()?;
        let took = wait_healthy(&state, name, Duration::from_secs(90)).await?;
        eprintln!("cluster: {name} healthy after {:.1}s", took.as_secs_f64());
        if name == "kube-apiserver" {
            bootstrap(&state.client().await?).await?;
        }
    }
    wait_for_default_service_account(&state.client().await?, "default", Duration::from_secs(60))
        .await?;
    eprintln!(
        "cluster: up in {:.1}s (components started in {:.1}s): {}",
        started.elapsed().as_secs_f64(),
        boot.elapsed().as_secs_f64(),
        state.server
    );
    Ok(state)
}

fn down_state(mut state: State) {
    for component in state.components.iter_mut().rev() {
        terminate(component);
    }
    if state.node_address_added
        && let Some(address) = &state.node_address
        && let Err(e) = ip(&["addr", "del", &format!("{address}/32"), "dev", "lo"])
    {
        eprintln!("cluster: {e}");
    }
    let _ = std::fs::remove_dir_all(cluster_dir());
}

/// Stop the cluster and remove its state.
pub(crate) fn down() -> bool {
    match State::load() {
        Some(state) => {
            down_state(state);
            true
        }
        None => false,
    }
}

/// Stop one component (fault tests); `start` brings it back.
pub(crate) fn stop_component(name: &str) -> Result<(), BoxError> {
    let mut state = State::load().ok_or("no cluster is up")?;
    if name == "kube-apiserver" {
        state.apiserver_outages.push((now_micros(), None));
    }
    terminate(state.component(name)?);
    state.save()
}

/// Start a stopped component with its original command line and wait until
/// it is healthy.
pub(crate) async fn start_component(name: &str) -> Result<Duration, BoxError> {
    let mut state = State::load().ok_or("no cluster is up")?;
    let component = state.component(name)?;
    if !alive(component.pid) {
        spawn(component)?;
    }
    state.save()?;
    let took = wait_healthy(&state, name, Duration::from_secs(90)).await?;
    if name == "kube-apiserver"
        && let Some(outage) = state.apiserver_outages.last_mut()
        && outage.1.is_none()
    {
        outage.1 = Some(now_micros());
        state.save()?;
    }
    Ok(took)
}

/// Server-side apply every object of a multi-document YAML file (as
/// `kubectl apply --server-side -f FILE`), as `manager`.
pub(crate) async fn apply_manifest(
    client: &kube::Client,
    path: &Path,
    manager: &str,
) -> Result<usize, BoxError> {
    use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
    use kube::discovery::{Scope, pinned_kind};
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let objects: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut applied = 0;
    for object in objects.into_iter().filter(|o| !o.is_null()) {
        let object: DynamicObject = serde_json::from_value(object)?;
        let types = object
            .types
            .clone()
            .ok_or("an object without apiVersion/kind")?;
        let gvk = GroupVersionKind::try_from(&types)?;
        let (resource, capabilities) = pinned_kind(client, &gvk).await?;
        let name = object
            .metadata
            .name
            .clone()
            .ok_or("an object without a name")?;
        let api: Api<DynamicObject> = match (&capabilities.scope, &object.metadata.namespace) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
            (Scope::Namespaced, None) => Api::default_namespaced_with(client.clone(), &resource),
            (Scope::Cluster, _) => Api::all_with(client.clone(), &resource),
        };
        api.patch(
            &name,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(&object),
        )
        .await
        .map_err(|e| format!("{} {name}: {e}", types.kind))?;
        applied += 1;
    }
    Ok(applied)
}

/// A kubeconfig at `path` that authenticates as the ServiceAccount
/// `namespace/name` with a token from the TokenRequest API (valid a day),
/// as a pod of that ServiceAccount would.
pub(crate) async fn service_account_kubeconfig(
    state: &State,
    namespace: &str,
    name: &str,
    path: &Path,
) -> Result<(), BoxError> {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let accounts: kube::Api<ServiceAccount> =
        kube::Api::namespaced(state.client().await?, namespace);
    let request: TokenRequest = serde_json::from_value(serde_json::json!({
        "spec": {"expirationSeconds": 86400}
    }))?;
    let token = accounts
        .create_token_request(name, &Default::default(), &request)
        .await?
        .status
        .and_then(|s| s.token)
        .ok_or("the TokenRequest returned no token")?;
    write_kubeconfig(path, &state.server, &state.ca, name, &[("token", token)])
}

/// What the audit log says of the requests whose user agent starts with
/// `user_agent`: how many, and the forbidden ones (`verb resource: user`).
#[derive(Debug, Default)]
pub(crate) struct AuditCount {
    /// Requests made.
    pub(crate) requests: usize,
    /// The ones answered 403.
    pub(crate) forbidden: Vec<String>,
    /// 403s answered while kube-apiserver was starting again after a
    /// `stop` (before it was ready: RBAC's caches not synced), which say
    /// nothing of the caller's permissions.
    pub(crate) forbidden_while_starting: usize,
}

/// Count the audit log's requests by user agent (see [`AuditCount`]).
pub(crate) fn audit_count(state: &State, user_agent: &str) -> Result<AuditCount, BoxError> {
    let text = std::fs::read_to_string(&state.audit_log)
        .map_err(|e| format!("{}: {e}", state.audit_log.display()))?;
    let mut count = AuditCount::default();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if !event["userAgent"]
            .as_str()
            .is_some_and(|a| a.starts_with(user_agent))
        {
            continue;
        }
        count.requests += 1;
        if event["responseStatus"]["code"].as_u64() == Some(403) {
            let received = event["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
                .map(|t| t.as_microsecond());
            let starting = received.is_some_and(|at| {
                state
                    .apiserver_outages
                    .iter()
                    .any(|(down, up)| at >= *down && up.is_none_or(|up| at <= up))
            });
            if starting {
                count.forbidden_while_starting += 1;
                continue;
            }
            count.forbidden.push(format!(
                "{} {} {}: {} ({})",
                event["requestReceivedTimestamp"]
                    .as_str()
                    .unwrap_or_default(),
                event["verb"].as_str().unwrap_or_default(),
                event["requestURI"].as_str().unwrap_or_default(),
                event["user"]["username"].as_str().unwrap_or_default(),
                event["responseStatus"]["message"]
                    .as_str()
                    .or(event["annotations"]["authorization.k8s.io/reason"].as_str())
                    .unwrap_or_default()
            ));
        }
    }
    Ok(count)
}

/// The virtual-kubelet command (`stratus_kubelet::app`, as a vendor's
/// binary runs it) over a MockPodProvider, registered as `node` (several
/// comma-separated names: that many nodes, one provider each) with the API
/// server of `kubeconfig`, each kubelet API on a free port of `address`,
/// no taint (pods select it without a toleration, as on the harness) and
/// no `--client-ca-file` (it trusts the client CA the API server publishes
/// in `kube-system/extension-apiserver-authentication`), until SIGINT or
/// SIGTERM or its own end.
pub(crate) async fn mock_virtual_kubelet(
    kubeconfig: &Path,
    node: &str,
    address: &str,
) -> Result<(), BoxError> {
    let command = stratus_kubelet::app::Command::new().provider("mock", |init, _| {
        let provider = stratus_testing::MockPodProvider::new().with_node_name(&init.node_name);
        async move {
            Ok(stratus_kubelet::app::Providers::pods(std::sync::Arc::new(
                provider,
            )))
        }
    });
    let args = vec![
        "virtual-kubelet".to_owned(),
        "--provider=mock".into(),
        format!("--nodename={node}"),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--node-ip={address}"),
        format!("--listen-address={address}"),
        "--kubelet-port=0".into(),
        "--disable-taint".into(),
        "--metrics-addr=".into(),
    ];
    run_until_signal(command, args).await
}

/// Run the virtual-kubelet `command` with `args` (the first is the
/// program's name) until it ends or SIGINT or SIGTERM stops it.
pub(crate) async fn run_until_signal(
    command: stratus_kubelet::app::Command,
    args: Vec<String>,
) -> Result<(), BoxError> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut running = tokio::spawn(command.run_with_args(args, stopped));
    tokio::select! {
        () = crate::wait_for_signal() => {
            let _ = stop.send(true);
            let _ = running.await;
            Ok(())
        }
        ended = &mut running => Ok(ended??),
    }
}

/// `cluster virtual-node NAME`: [`mock_virtual_kubelet`] on the running
/// control plane with the administrator's kubeconfig, its kubelet API on
/// the node address, so that `kubectl logs`, `exec` and `port-forward`
/// through kube-apiserver prove the published client CA; its Node is
/// deleted when it ends.
async fn serve_virtual_node(name: &str) -> Result<(), crate::error::BoxError> {
    let state = State::load().ok_or("no control plane is up: run cargo xtask cluster up")?;
    let address = state
        .node_address
        .clone()
        .ok_or("the control plane was started without a node address")?;
    println!(
        "virtual node {name} (the virtual-kubelet command, MockPodProvider) serving until interrupted"
    );
    let result = mock_virtual_kubelet(&state.kubeconfig, name, &address).await;
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(state.client().await?);
    let _ = nodes.delete(name, &Default::default()).await;
    result
}

/// `cargo xtask cluster`.
#[derive(Debug, clap::Parser)]
#[command(name = "cargo xtask cluster")]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Build the binaries from tools/kubernetes/go.mod.
    Build,
    /// Start the control plane in the background and wait until healthy.
    Up {
        /// Also copy the administrator's kubeconfig here.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// The address added to the loopback device for nodes' kubelet
        /// APIs (`none` for no address).
        #[arg(long, default_value = DEFAULT_NODE_ADDRESS)]
        node_address: String,
    },
    /// Stop it and remove its state.
    Down,
    /// Each component's process and health.
    Status,
    /// Stop one component.
    Stop { component: String },
    /// Start a stopped component again.
    Start { component: String },
    /// Stop and start one component.
    Restart { component: String },
    /// Run a virtual node of this name on the running control plane: the
    /// virtual-kubelet command over a MockPodProvider, its kubelet API on
    /// the node address trusting the client CA kube-apiserver publishes,
    /// until interrupted (Ctrl-C or SIGTERM); the Node is deleted then.
    VirtualNode { name: String },
    /// Count the audit log's requests whose user agent starts with
    /// `--user-agent`; fails if any was forbidden (403).
    Audit {
        /// The user agent's prefix.
        #[arg(long, default_value = "cloud-controller-manager")]
        user_agent: String,
    },
}

fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("cluster: {e}");
    ExitCode::FAILURE
}

pub(crate) async fn run(args: Args) -> ExitCode {
    match args.command {
        Sub::Build => match tokio::task::spawn_blocking(build).await {
            Ok(Ok(what)) => {
                eprintln!("cluster: {what} ({})", bin_dir().display());
                ExitCode::SUCCESS
            }
            Ok(Err(e)) => fail(e),
            Err(e) => fail(e),
        },
        Sub::Up {
            kubeconfig,
            node_address,
        } => {
            let address = (node_address != "none").then_some(node_address.as_str());
            if let Some(a) = address
                && a.parse::<IpAddr>().is_err()
            {
                return fail(format!("--node-address {a:?} is not an IP address"));
            }
            match up(address).await {
                Ok(state) => {
                    let mut path = state.kubeconfig.clone();
                    if let Some(copy) = kubeconfig {
                        if let Err(e) = std::fs::copy(&state.kubeconfig, &copy) {
                            return fail(format!("{}: {e}", copy.display()));
                        }
                        path = copy;
                    }
                    println!("kubeconfig: {}", path.display());
                    println!(
                        "node address for kubelet APIs: {}",
                        state.node_address.as_deref().unwrap_or("none")
                    );
                    println!("audit log: {}", state.audit_log.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    let _ = down();
                    fail(e)
                }
            }
        }
        Sub::Down => {
            if down() {
                eprintln!("cluster: down");
            } else {
                eprintln!("cluster: none was up");
            }
            ExitCode::SUCCESS
        }
        Sub::Status => {
            let Some(state) = State::load() else {
                println!("cluster: down");
                return ExitCode::FAILURE;
            };
            let mut all = true;
            println!(
                "server: {}\nkubeconfig: {}",
                state.server,
                state.kubeconfig.display()
            );
            for c in &state.components {
                let ok = alive(c.pid) && healthy(&state, c).await;
                all &= ok;
                println!(
                    "{:<24} pid {:<8} {}",
                    c.name,
                    c.pid,
                    if ok { "healthy" } else { "NOT healthy" }
                );
            }
            if all {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Sub::Audit { user_agent } => {
            let Some(state) = State::load() else {
                return fail("no cluster is up");
            };
            match audit_count(&state, &user_agent) {
                Ok(count) => {
                    for f in &count.forbidden {
                        println!("forbidden: {f}");
                    }
                    println!(
                        "audit: {} requests by {user_agent}*, {} forbidden ({} more while kube-apiserver was starting, before its authorizer was ready)",
                        count.requests,
                        count.forbidden.len(),
                        count.forbidden_while_starting
                    );
                    if count.forbidden.is_empty() && count.requests > 0 {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    }
                }
                Err(e) => fail(e),
            }
        }
        Sub::Stop { component } => match stop_component(&component) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
        Sub::Start { component } => match start_component(&component).await {
            Ok(took) => {
                eprintln!(
                    "cluster: {component} healthy after {:.1}s",
                    took.as_secs_f64()
                );
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        Sub::VirtualNode { name } => match serve_virtual_node(&name).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
        Sub::Restart { component } => {
            if let Err(e) = stop_component(&component) {
                return fail(e);
            }
            match start_component(&component).await {
                Ok(took) => {
                    eprintln!(
                        "cluster: {component} healthy after {:.1}s",
                        took.as_secs_f64()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_requests_are_counted_apart_while_the_api_server_starts() {
        let dir = std::env::temp_dir().join(format!("stratus-audit-test-{}", std::process::id()));
        let mut state = prepare(&dir, None, &[]).unwrap();
        let event = |at: &str, code: u16, agent: &str| {
            serde_json::json!({"verb": "get", "requestURI": "/api/v1/nodes", "userAgent": agent,
                "requestReceivedTimestamp": at, "responseStatus": {"code": code},
                "user": {"username": "system:serviceaccount:kube-system:cloud-controller-manager"}})
            .to_string()
        };
        let log = [
            event(
                "2026-11-25T10:00:00.000000Z",
                200,
                "cloud-controller-manager/v1",
            ),
            event(
                "2026-11-25T10:00:05.000000Z",
                403,
                "cloud-controller-manager/v1",
            ),
            event(
                "2026-11-25T10:01:00.000000Z",
                403,
                "cloud-controller-manager/v1",
            ),
            event("2026-11-25T10:01:00.000000Z", 403, "kubectl/v1.33"),
        ]
        .join("\n");
        std::fs::write(&state.audit_log, log).unwrap();
        let at = |t: &str| {
            t.parse::<k8s_openapi::jiff::Timestamp>()
                .unwrap()
                .as_microsecond()
        };
        state.apiserver_outages =
            vec![(at("2026-11-25T10:00:04Z"), Some(at("2026-11-25T10:00:10Z")))];
        let count = audit_count(&state, "cloud-controller-manager").unwrap();
        assert_eq!(count.requests, 3);
        assert_eq!(count.forbidden_while_starting, 1);
        assert_eq!(count.forbidden.len(), 1, "{:?}", count.forbidden);
        assert!(count.forbidden[0].starts_with("2026-11-25T10:01:00"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_zombie_or_missing_process_is_not_alive() {
        assert!(!alive(0));
        assert!(alive(std::process::id()));
        assert!(!alive(u32::MAX));
    }

    #[test]
    fn the_components_command_lines_name_their_certificates_and_ports() {
        let dir = std::env::temp_dir().join(format!("stratus-cluster-test-{}", std::process::id()));
        let state = prepare(
            &dir,
            Some(DEFAULT_NODE_ADDRESS),
            &["node-lifecycle-controller"],
        )
        .unwrap();
        let apiserver = &state.components[1];
        assert_eq!(apiserver.name, "kube-apiserver");
        assert!(
            apiserver
                .args
                .contains(&"--authorization-mode=Node,RBAC".to_owned())
        );
        assert!(
            apiserver
                .args
                .iter()
                .any(|a| a.starts_with("--kubelet-client-certificate=") && a.ends_with(".crt"))
        );
        let kcm = &state.components[2];
        assert!(kcm.args.contains(&"--cloud-provider=external".to_owned()));
        assert!(kcm.args.contains(
            &"--controllers=*,bootstrapsigner,tokencleaner,-node-lifecycle-controller".to_owned()
        ));
        for c in &state.components {
            assert!(c.health.starts_with("http"), "{}", c.health);
        }
        let kubeconfig = std::fs::read_to_string(&state.kubeconfig).unwrap();
        assert!(kubeconfig.contains(&state.server));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
