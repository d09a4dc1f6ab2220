//! The flags of Go virtual-kubelet's command (`cmd/virtual-kubelet/root`)
//! with their environment variables and defaults, plus the kubelet API's
//! TLS and authorization flags.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use stratus_runtime::duration::parse_go_duration;

/// The virtual kubelet's flags.
#[derive(Debug, Clone, Args)]
pub struct KubeletOptions {
    /// The kubeconfig; in-cluster configuration if empty.
    #[arg(long, env = "KUBECONFIG", default_value = "")]
    pub kubeconfig: String,
    /// The Node name; several, comma-separated, run that many nodes in this
    /// process (one provider each, from the same configuration; node `i`'s
    /// kubelet API on `--kubelet-port` + `i`).
    #[arg(long, env = "DEFAULT_NODE_NAME", default_value = "virtual-kubelet")]
    pub nodename: String,
    /// The registered provider to run (see `register_pod_provider`).
    #[arg(long, default_value = "")]
    pub provider: String,
    /// The provider's configuration file, handed to its factory.
    #[arg(long = "provider-config")]
    pub provider_config: Option<PathBuf>,
    /// The operating system the node reports: Linux or Windows.
    #[arg(long = "os", default_value = "Linux", value_parser = ["Linux", "Windows", "linux", "windows"])]
    pub operating_system: String,
    /// The vendor binary's version (`Command::with_version`; not a flag):
    /// the Node reports `v1.37.0-vk-<it>` as its kubelet version.
    #[arg(skip)]
    pub binary_version: Option<String>,
    /// Pods synced with the provider at once.
    #[arg(long, default_value_t = 10)]
    pub pod_sync_workers: usize,
    /// Transient provider errors a `restartPolicy: Never` pod's create or
    /// update may meet before the pod is marked Failed (Stratus; 0, the
    /// default, is Go's rule: the first error fails it). Permanent errors
    /// fail it at once.
    #[arg(long, default_value_t = 0)]
    pub never_restart_retries: u32,
    /// Keep the provider's pods without an API pod when they are most of
    /// its pods (and more than 10), as an incomplete view of the API looks
    /// (Stratus; off, as Go: every such pod is deleted).
    #[arg(long)]
    pub dangling_pod_safeguard: bool,
    /// The pod informer's resync in Go, which re-drives no provider there
    /// (status sync skips identical objects); accepted for compatibility.
    #[arg(long, value_parser = parse_go_duration, default_value = "1m")]
    pub full_resync_period: Duration,
    /// How long to wait for the node to become ready before giving up (0:
    /// wait for ever).
    #[arg(long, value_parser = parse_go_duration, default_value = "0")]
    pub startup_timeout: Duration,
    /// Do not taint the node (see `--taint-key`).
    #[arg(long)]
    pub disable_taint: bool,
    /// Deprecated, as in Go: the key of the node's taint; the environment
    /// variable `VKUBELET_TAINT_KEY` (or `--taint-key`) wins over it.
    #[arg(long = "taint", value_name = "KEY")]
    pub deprecated_taint_key: Option<String>,
    /// The key of the node's taint (default `virtual-kubelet.io/provider`).
    #[arg(long, env = "VKUBELET_TAINT_KEY")]
    pub taint_key: Option<String>,
    /// The value of the node's taint (default: the provider's name).
    #[arg(long, env = "VKUBELET_TAINT_VALUE")]
    pub taint_value: Option<String>,
    /// The effect of the node's taint.
    #[arg(
        long,
        env = "VKUBELET_TAINT_EFFECT",
        default_value = "NoSchedule",
        value_parser = ["NoSchedule", "NoExecute", "PreferNoSchedule"]
    )]
    pub taint_effect: String,
    /// The cluster's DNS domain (accepted as Go's command does; pods of a
    /// virtual node get their DNS from the provider).
    #[arg(long, default_value = "cluster.local")]
    pub cluster_domain: String,
    /// The node's InternalIP: where the API server reaches the kubelet API.
    #[arg(long, env = "VKUBELET_POD_IP", default_value = "127.0.0.1")]
    pub node_ip: IpAddr,
    /// The address the kubelet API listens on.
    #[arg(long, default_value = "0.0.0.0")]
    pub listen_address: IpAddr,
    /// The kubelet API port (0 picks a free one).
    #[arg(long, env = "KUBELET_PORT", default_value_t = 10250)]
    pub kubelet_port: u16,
    /// The serving certificate (PEM), reloaded when it changes.
    #[arg(
        long,
        env = "APISERVER_CERT_LOCATION",
        requires = "tls_private_key_file"
    )]
    pub tls_cert_file: Option<PathBuf>,
    /// The serving certificate's key (PEM).
    #[arg(long, env = "APISERVER_KEY_LOCATION", requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Get the serving certificate from the cluster (a
    /// kubernetes.io/kubelet-serving CSR) and renew it before it expires.
    #[arg(long, conflicts_with = "tls_cert_file")]
    pub rotate_server_certificates: bool,
    /// Accept client certificates signed by this CA (PEM). Without it, the
    /// `client-ca-file` the API server publishes in
    /// `kube-system/extension-apiserver-authentication` (the CA of the
    /// certificate it presents for `kubectl logs`, `exec`, `port-forward`).
    #[arg(long, env = "APISERVER_CA_CERT_LOCATION")]
    pub client_ca_file: Option<PathBuf>,
    /// `Webhook` (SubjectAccessReview) or `AlwaysAllow` (every
    /// authenticated caller allowed). Either way callers are authenticated
    /// (client certificate or TokenReview); see `--anonymous-auth`.
    #[arg(long, default_value = "Webhook", value_parser = ["Webhook", "AlwaysAllow"])]
    pub authorization_mode: String,
    /// Serve requests without credentials as `system:anonymous` (then
    /// authorized like any caller: with `AlwaysAllow`, anyone who reaches
    /// the port may exec into pods; a warning is logged). Off by default,
    /// unlike the kubelet's.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub anonymous_auth: bool,
    /// Close exec, attach and port-forward streams idle this long.
    #[arg(long, value_parser = parse_go_duration, default_value = "30s")]
    pub stream_idle_timeout: Duration,
    /// Give SPDY clients this long to open their streams.
    #[arg(long, value_parser = parse_go_duration, default_value = "30s")]
    pub stream_creation_timeout: Duration,
    /// How often the provider's `ping` runs (Go's `WithNodePingInterval`,
    /// Liqo's flag). While the latest ping failed, the node's status and
    /// Lease are not renewed, and the control plane marks the node
    /// unreachable.
    #[arg(long, value_parser = parse_nonzero_duration, default_value = "10s")]
    pub node_ping_interval: Duration,
    /// How long a ping may take before it counts as failed (Go's
    /// `WithNodePingTimeout`, unbounded unless set; Liqo's flag). A slow
    /// ping never delays the status or the Lease; it only decides them
    /// once it ends.
    #[arg(long, value_parser = parse_nonzero_duration, default_value = "5s")]
    pub node_ping_timeout: Duration,
    /// Where to serve the node's own `/metrics`, `/healthz` and `/readyz`
    /// (Go's flag, which Go parses and never uses); `host:port` or `:port`
    /// (every address), empty to serve none. Loopback by default (Go's
    /// default is `:10255`), served over plain HTTP without authentication;
    /// any other address is served over HTTPS (`--tls-cert-file`, else
    /// self-signed) behind the kubelet API's authentication and
    /// authorization (`--client-ca-file`, TokenReview, SubjectAccessReview
    /// on `get` of the path unless `AlwaysAllow`, `--anonymous-auth`), the
    /// probes left open: pass `--metrics-addr=:10255` for Prometheus to
    /// scrape the pod with a token allowed `get` on `/metrics`.
    ///
    /// ```
    /// use clap::Parser;
    /// #[derive(Parser)]
    /// struct Cli {
    ///     #[command(flatten)]
    ///     o: stratus_kubelet::app::KubeletOptions,
    /// }
    /// let cli = Cli::parse_from(["vk"]);
    /// assert_eq!(cli.o.metrics_addr.0, Some("127.0.0.1:10255".parse().unwrap()));
    /// ```
    #[arg(long, value_parser = parse_listen_addr, default_value = "127.0.0.1:10255")]
    pub metrics_addr: ListenAddr,
}

/// A Go duration that is not zero (an interval or a timeout of nothing
/// would spin or always fail).
fn parse_nonzero_duration(text: &str) -> Result<Duration, String> {
    match parse_go_duration(text) {
        Ok(d) if d.is_zero() => Err("must be more than zero".to_owned()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

/// An address to listen on, or none (`--metrics-addr ""`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenAddr(pub Option<SocketAddr>);

/// Parse Go's listen address: `host:port`, `:port` (every address), or
/// empty for none.
///
/// ```
/// use stratus_kubelet::app::parse_listen_addr;
///
/// assert_eq!(parse_listen_addr(":10255").unwrap().0, Some("0.0.0.0:10255".parse().unwrap()));
/// assert_eq!(parse_listen_addr("127.0.0.1:0").unwrap().0, Some("127.0.0.1:0".parse().unwrap()));
/// assert_eq!(parse_listen_addr("").unwrap().0, None);
/// assert!(parse_listen_addr("10255").is_err());
/// ```
pub fn parse_listen_addr(text: &str) -> Result<ListenAddr, String> {
    if text.is_empty() {
        return Ok(ListenAddr(None));
    }
    let full = match text.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => text.to_owned(),
    };
    full.parse::<SocketAddr>()
        .map(|a| ListenAddr(Some(a)))
        .map_err(|_| {
            format!(
                "{text:?} is not host:port, :port or empty (for example :10255 or 127.0.0.1:10255)"
            )
        })
}

impl KubeletOptions {
    /// The node's taint, as Go's command makes it (`getTaint`): the key of
    /// `VKUBELET_TAINT_KEY` / `--taint-key`, else the deprecated `--taint`,
    /// else `virtual-kubelet.io/provider`; the value of
    /// `VKUBELET_TAINT_VALUE` / `--taint-value`, else the provider's name;
    /// the effect of `VKUBELET_TAINT_EFFECT` / `--taint-effect`. `None`
    /// with `--disable-taint`.
    ///
    /// ```
    /// use clap::Parser;
    /// #[derive(Parser)]
    /// struct Cli {
    ///     #[command(flatten)]
    ///     o: stratus_kubelet::app::KubeletOptions,
    /// }
    /// let cli = Cli::parse_from(["vk", "--provider=acme", "--taint=old", "--taint-effect=NoExecute"]);
    /// let taint = cli.o.taint().unwrap();
    /// assert_eq!((taint.key.as_str(), taint.value.as_deref(), taint.effect.as_str()),
    ///            ("old", Some("acme"), "NoExecute"));
    /// assert!(Cli::parse_from(["vk", "--disable-taint"]).o.taint().is_none());
    /// ```
    pub fn taint(&self) -> Option<k8s_openapi::api::core::v1::Taint> {
        if self.disable_taint {
            return None;
        }
        let mut taint = crate::node::provider_taint(&self.provider);
        if let Some(key) = self
            .taint_key
            .as_ref()
            .or(self.deprecated_taint_key.as_ref())
        {
            taint.key.clone_from(key);
        }
        if let Some(value) = &self.taint_value {
            taint.value = Some(value.clone());
        }
        taint.effect.clone_from(&self.taint_effect);
        Some(taint)
    }

    /// The node names of `--nodename` (comma-separated): each a non-empty
    /// lowercase DNS subdomain, none twice.
    ///
    /// ```
    /// use clap::Parser;
    /// #[derive(Parser)]
    /// struct Cli {
    ///     #[command(flatten)]
    ///     o: stratus_kubelet::app::KubeletOptions,
    /// }
    /// let cli = Cli::parse_from(["vk", "--nodename=vk-0,vk-1"]);
    /// assert_eq!(cli.o.node_names().unwrap(), ["vk-0", "vk-1"]);
    /// let cli = Cli::parse_from(["vk", "--nodename=vk-0,,Vk_1"]);
    /// assert!(cli.o.node_names().is_err());
    /// ```
    pub fn node_names(&self) -> Result<Vec<String>, String> {
        let mut names: Vec<String> = Vec::new();
        for name in self.nodename.split(',').map(str::trim) {
            if !crate::virtual_node::valid_dns_subdomain(name) {
                return Err(format!(
                    "--nodename {:?}: {name:?} is not a node name (a lowercase DNS subdomain)",
                    self.nodename
                ));
            }
            if names.iter().any(|n| n == name) {
                return Err(format!(
                    "--nodename {:?}: {name:?} is given twice",
                    self.nodename
                ));
            }
            names.push(name.to_owned());
        }
        Ok(names)
    }
}
