//! The certificates, kubeconfigs and command lines of a new cluster.

use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::path::Path;

use crate::BoxError;
use crate::pki::{Authority, Usage, signing_key};

use super::layout::{KUBELET_CLIENT_USER, SERVICE_CIDR, binary};
use super::state::{Component, State};

/// A free loopback port for a component that must be told its port.
///
/// Not one the kernel hands out for port 0: those come from the ephemeral
/// range, which the components' own outgoing connections (kube-apiserver to
/// etcd, the controllers to kube-apiserver) draw from too, so a port picked
/// that way could be taken by a connection before the component that was
/// to listen on it starts (kube-scheduler once failed so). A port below
/// the range is only ever taken by a listener. Each port is handed out
/// once per process.
pub(crate) fn free_port() -> Result<u16, BoxError> {
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

pub(crate) fn path_arg(flag: &str, path: &Path) -> String {
    format!("--{flag}={}", path.display())
}

/// A kubeconfig at `path` for the cluster at `server` (trusting `ca`) and
/// one user, whose credentials are the `user:` lines given
/// (`client-certificate`/`client-key`, or `token`).
pub(crate) fn write_kubeconfig(
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
pub(crate) fn certificate(issued: &crate::pki::Issued) -> [(&'static str, String); 2] {
    [
        ("client-certificate", issued.cert.display().to_string()),
        ("client-key", issued.key.display().to_string()),
    ]
}

/// The flags with which kube-controller-manager and kube-scheduler reach
/// kube-apiserver, and review their own callers through it.
pub(crate) fn client_flags(kubeconfig: &Path) -> [String; 3] {
    [
        path_arg("kubeconfig", kubeconfig),
        path_arg("authentication-kubeconfig", kubeconfig),
        path_arg("authorization-kubeconfig", kubeconfig),
    ]
}

/// Every Metadata-level event once complete: who did what, and the answer's
/// status code (the e2e runs count 403s per user).
pub(crate) const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [\"RequestReceived\"]
rules:
- level: Metadata
";

/// Make the certificates and the components' command lines, with
/// kube-controller-manager's controllers `disabled` off.
pub(crate) fn prepare(
    dir: &Path,
    node_address: Option<&str>,
    disabled: &[&str],
) -> Result<State, BoxError> {
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
