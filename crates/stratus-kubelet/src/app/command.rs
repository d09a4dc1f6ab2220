//! Running the virtual kubelet from its flags.

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser};
use stratus_runtime::auth::{DelegatedAuth, DelegatedAuthConfig};
pub use stratus_runtime::command::NoFlags;
use stratus_runtime::command::{Launcher, VendorFlags};
use stratus_runtime::tls::reloading_pem_files;
use tokio::sync::watch;

use prometheus_client::registry::Registry;
use stratus_runtime::admin::AdminServer;
use stratus_runtime::health::HealthChecks;

use super::options::{KubeletOptions, ListenAddr};
use super::registry::{
    AsyncFactory, ProviderInit, Providers, ProvidersFuture, RegistryError, factory,
};
use crate::api::serving_certificate::{CsrConfig, ServingCertificateRotation};
use crate::api::{ApiAuth, KubeletApi, KubeletServer};
use crate::metrics::KubeletMetrics;
use crate::node::NodeConfig;
use crate::pods::PodControllerConfig;
use crate::resources::ApiResources;
use crate::{VirtualNode, VirtualNodeError};

/// `virtual-kubelet [flags]`.
#[derive(Debug, Parser)]
#[command(
    name = "virtual-kubelet",
    version,
    about = "A virtual kubelet: a Kubernetes node whose pods a provider runs."
)]
struct Cli<F: Args> {
    #[command(flatten)]
    options: KubeletOptions,
    #[command(flatten)]
    flags: F,
}

/// Why the command stopped.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The arguments do not parse (also `--help` and `--version`).
    #[error(transparent)]
    Args(#[from] clap::Error),
    /// `--provider` names no registered provider (the error lists the
    /// registered names).
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The API client could not be built.
    #[error("cannot build the API client: {0}")]
    Client(String),
    /// The provider's factory failed.
    #[error("the provider {name:?} did not start: {message}")]
    Provider {
        /// `--provider`.
        name: String,
        /// The factory's error.
        message: String,
    },
    /// `--nodename` names no valid node, or one twice.
    #[error("{0}")]
    NodeNames(String),
    /// The kubelet API could not start.
    #[error("the kubelet API: {0}")]
    KubeletApi(String),
    /// The `--metrics-addr` server could not start.
    #[error("--metrics-addr: {0}")]
    Metrics(String),
    /// The node did not become ready within `--startup-timeout`.
    #[error("the node was not ready within --startup-timeout {0:?}")]
    StartupTimeout(std::time::Duration),
    /// The virtual node failed.
    #[error(transparent)]
    Node(#[from] VirtualNodeError),
}

/// The command: parse, build, run (Go: `cmd/virtual-kubelet`'s root
/// command). `F` is the vendor's own flags, parsed next to Go
/// virtual-kubelet's and handed to the provider's factory
/// ([`ProviderInit::flags`]).
///
/// ```no_run
/// use std::sync::Arc;
/// use stratus_kubelet::app::{Command, ProviderInit, register_pod_provider};
///
/// #[derive(Debug, clap::Args)]
/// struct MyFlags {
///     /// The backend's endpoint.
///     #[arg(long, default_value = "https://backend.example.com")]
///     backend_endpoint: String,
/// }
///
/// # use stratus_pod::mock::{MockPodLifecycle, MockPodProvider};
/// /// The vendor's provider for the backend at `endpoint`.
/// fn provider(endpoint: &str) -> Arc<dyn stratus_pod::PodLifecycleHandler> {
///     # let _ = endpoint;
///     Arc::new(MockPodProvider::new(MockPodLifecycle::new()))
/// }
/// fn main() -> std::process::ExitCode {
///     register_pod_provider("my-backend", |init: ProviderInit| {
///         let flags = init.flags::<MyFlags>().ok_or("the command was built without MyFlags")?;
///         Ok(provider(&flags.backend_endpoint))
///     })
///     .expect("registered once");
///     Command::with_flags::<MyFlags>().default_provider("my-backend").run_main()
/// }
/// ```
pub struct Command<F = NoFlags> {
    /// The version, the built-in provider and the default one.
    launcher: Launcher<Initializer<F>>,
}

/// Makes a built-in provider from the node's context and the typed flags.
type Initializer<F> = Arc<dyn Fn(ProviderInit, &F) -> ProvidersFuture + Send + Sync>;

impl<F> std::fmt::Debug for Command<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Command")
            .field("launcher", &self.launcher)
            .finish()
    }
}

/// The command with Go virtual-kubelet's flags and the vendor's `F`, no
/// built-in provider and no default one.
impl<F> Default for Command<F> {
    fn default() -> Self {
        Command {
            launcher: Launcher::new(),
        }
    }
}

impl Command<NoFlags> {
    /// The command with Go virtual-kubelet's flags.
    pub fn new() -> Self {
        Self::default()
    }

    /// The command with the vendor's flags `G` next to Go
    /// virtual-kubelet's (in `--help` too); a built-in provider
    /// ([`Command::provider`]) gets them typed, a registered provider's
    /// factory reads them with [`ProviderInit::flags`].
    pub fn with_flags<G>() -> Command<G> {
        Command::default()
    }
}

impl<F> Command<F>
where
    F: Args + Send + Sync + 'static,
{
    /// Run `name` when `--provider` is not given (a binary built for one
    /// provider).
    ///
    /// ```no_run
    /// stratus_kubelet::app::Command::new().default_provider("process").run_main();
    /// ```
    pub fn default_provider(mut self, name: impl Into<String>) -> Self {
        self.launcher = self.launcher.default_provider(name);
        self
    }

    /// The vendor binary's version (typically `env!("CARGO_PKG_VERSION")`):
    /// `--version` prints it instead of the SDK's, and each Node reports
    /// `v1.37.0-vk-<version>` as its kubelet version (Go's
    /// `<k8s>-vk-<build>`).
    ///
    /// ```
    /// use stratus_kubelet::app::{Command, CommandError};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let (_stop, stopped) = tokio::sync::watch::channel(false);
    /// let outcome = Command::new()
    ///     .with_version("2.3.4")
    ///     .run_with_args(["acme-virtual-kubelet", "--version"], stopped)
    ///     .await;
    /// let Err(CommandError::Args(printed)) = outcome else { panic!() };
    /// assert!(printed.to_string().ends_with(" 2.3.4\n"), "{printed}");
    /// # });
    /// ```
    pub fn with_version(mut self, version: &'static str) -> Self {
        self.launcher = self.launcher.with_version(version);
        self
    }

    /// A built-in provider called `name`, made by `initializer` from each
    /// node's context and the vendor's flags, typed (as the manager's
    /// `Command::provider`): `--provider=name` runs it, and so does no
    /// `--provider` at all unless [`default_provider`](Self::default_provider)
    /// named another; any other `--provider` is looked up in the registry.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use stratus_kubelet::app::{Command, Providers};
    ///
    /// #[derive(Debug, Clone, clap::Args)]
    /// struct Acme {
    ///     /// The backend's endpoint.
    ///     #[arg(long, default_value = "https://acme.invalid")]
    ///     acme_endpoint: String,
    /// }
    ///
    /// /// The vendor's client; this one never reaches its backend.
    /// async fn connect(endpoint: &str) -> Result<Arc<dyn stratus_pod::PodLifecycleHandler>, String> {
    ///     Err(format!("cannot reach {endpoint}"))
    /// }
    ///
    /// fn main() -> std::process::ExitCode {
    ///     Command::with_flags::<Acme>()
    ///         .provider("acme", |_init, flags: &Acme| {
    ///             let endpoint = flags.acme_endpoint.clone();
    ///             async move { Ok(Providers::pods(connect(&endpoint).await?)) }
    ///         })
    ///         .run_main()
    /// }
    /// ```
    pub fn provider<I, Fut>(mut self, name: impl Into<String>, initializer: I) -> Self
    where
        I: Fn(ProviderInit, &F) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Providers, String>> + Send + 'static,
    {
        let initializer: Initializer<F> =
            Arc::new(move |init, flags| Box::pin(initializer(init, flags)));
        self.launcher = self.launcher.provider(name, initializer);
        self
    }

    /// Parse `args`: the options (`--provider` filled in with the default
    /// when empty), the vendor's flags, and the built-in provider's
    /// factory over them if `--provider` names it.
    fn parse<I, T>(
        self,
        args: I,
    ) -> Result<(KubeletOptions, VendorFlags, Option<AsyncFactory>), clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let cli: Cli<F> = self.launcher.parse(args)?;
        let mut options = cli.options;
        options.binary_version = self.launcher.version().map(str::to_owned);
        let flags = Arc::new(cli.flags);
        let built_in = self
            .launcher
            .select(&mut options.provider)
            .map(|initializer| {
                let flags = flags.clone();
                Arc::new(move |init| initializer(init, &flags)) as AsyncFactory
            });
        Ok((options, VendorFlags::from_arc(flags), built_in))
    }

    /// Parse `args` (the first is the program name) and run until `stop`.
    pub async fn run_with_args<I, T>(
        self,
        args: I,
        stop: watch::Receiver<bool>,
    ) -> Result<(), CommandError>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let (options, flags, built_in) = self.parse(args)?;
        run(options, flags, built_in, stop).await
    }

    /// The whole `main`: parse the process arguments, log to standard
    /// error, run until SIGTERM or Ctrl-C, and exit 0, or 1 with the reason
    /// (2 for bad arguments, 0 after `--help` / `--version`).
    pub fn run_main(self) -> ExitCode {
        self.run_main_with_args(std::env::args_os())
    }

    /// [`Command::run_main`] with these arguments (the first is the program
    /// name) instead of the process's: for a binary that runs the virtual
    /// kubelet as one of several commands. Call it outside any async
    /// runtime (it starts its own).
    pub fn run_main_with_args<I, T>(self, args: I) -> ExitCode
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let (options, flags, built_in) = match self.parse(args) {
            Ok(parsed) => parsed,
            Err(e) => e.exit(),
        };
        let _ = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .try_init();
        stratus_runtime::run_until_terminated("stopping the virtual node", |stopped| {
            run(options, flags, built_in, stopped)
        })
    }
}

/// `Command::new().run_main()`.
pub fn run_main() -> ExitCode {
    Command::new().run_main()
}

/// `Command::new().run_with_args(args, stop)`.
pub async fn run_with_args<I, T>(args: I, stop: watch::Receiver<bool>) -> Result<(), CommandError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    Command::new().run_with_args(args, stop).await
}

async fn client(
    kubeconfig: &str,
    metrics: &stratus_runtime::metrics::RestClientMetrics,
) -> Result<kube::Client, CommandError> {
    let config = if kubeconfig.is_empty() {
        kube::Config::infer()
            .await
            .map_err(|e| CommandError::Client(e.to_string()))?
    } else {
        let file = kube::config::Kubeconfig::read_from(kubeconfig)
            .map_err(|e| CommandError::Client(format!("{kubeconfig}: {e}")))?;
        kube::Config::from_custom_kubeconfig(file, &Default::default())
            .await
            .map_err(|e| CommandError::Client(e.to_string()))?
    };
    // No client-side budget (Go virtual-kubelet sets none); every request
    // counted in `rest_client_*`.
    let mut options = stratus_runtime::client::ClientOptions::new("virtual-kubelet");
    options.qps = 0.0;
    options.metrics = Some(metrics.clone());
    stratus_runtime::client::build_client(config, &options)
        .map_err(|e| CommandError::Client(e.to_string()))
}

/// The kubelet's authentication and authorization under `o`: callers are
/// always authenticated; `AlwaysAllow` only skips the access reviews, and
/// anonymous callers are let in only with `--anonymous-auth`.
fn auth_config(o: &KubeletOptions) -> DelegatedAuthConfig {
    let mut config = DelegatedAuthConfig::kubelet();
    config.always_allow = o.authorization_mode == "AlwaysAllow";
    config.anonymous = o.anonymous_auth;
    config
}

/// The kubelet API server (its requests counted in `metrics`, when the
/// node has them), and the certificate rotation to run beside it.
async fn kubelet_server(
    o: &KubeletOptions,
    client: &kube::Client,
    client_ca: Option<&str>,
    provider: Arc<dyn stratus_pod::PodLifecycleHandler>,
    metrics: Option<KubeletMetrics>,
) -> Result<(KubeletServer, Option<ServingCertificateRotation>), String> {
    let config = auth_config(o);
    if config.anonymous && config.always_allow {
        tracing::warn!(
            address = %o.listen_address,
            port = o.kubelet_port,
            "--anonymous-auth=true with --authorization-mode=AlwaysAllow: anyone who reaches the kubelet API may read logs and exec into pods"
        );
    }
    let auth = ApiAuth::delegated(DelegatedAuth::new(client.clone(), config));
    let mut api = KubeletApi::new(&o.nodename, provider, client.clone(), auth)
        .with_stream_idle_timeout(o.stream_idle_timeout)
        .with_stream_creation_timeout(o.stream_creation_timeout);
    if let Some(metrics) = metrics {
        api = api.with_metrics(metrics);
    }
    let mut builder = KubeletServer::builder(api).bind((o.listen_address, o.kubelet_port).into());
    let mut rotation = None;
    if let (Some(cert), Some(key)) = (&o.tls_cert_file, &o.tls_private_key_file) {
        builder = builder.certificate(reloading_pem_files(cert, key).map_err(|e| e.to_string())?);
    } else if o.rotate_server_certificates {
        let mut csr = CsrConfig::new(&o.nodename);
        csr.ip_addresses.push(o.node_ip);
        csr.dns_names.push(o.nodename.clone());
        let (certificate, rotating) = ServingCertificateRotation::bootstrap(client.clone(), csr)
            .await
            .map_err(|e| e.to_string())?;
        builder = builder.certificate(certificate);
        rotation = Some(rotating);
    }
    if let Some(pem) = client_ca {
        builder = builder.client_ca(pem.to_owned());
    }
    let server = builder.start().await.map_err(|e| e.to_string())?;
    Ok((server, rotation))
}

/// The ConfigMap in `kube-system` where the API server publishes the CA of
/// the client certificates it accepts (`client-ca-file`).
const AUTHENTICATION_CONFIG_MAP: &str = "extension-apiserver-authentication";

/// The CA of the client certificates the kubelet API (and an exposed
/// metrics server) accepts: `--client-ca-file`, else the `client-ca-file`
/// the API server publishes in `kube-system/extension-apiserver-authentication`
/// (as Go's delegated authentication looks it up), which also signed the
/// certificate the API server presents for `kubectl logs`, `exec` and
/// `port-forward`. `None` when neither is there: client certificates are
/// then refused and callers need a token.
async fn client_ca(
    o: &KubeletOptions,
    client: &kube::Client,
) -> Result<Option<String>, CommandError> {
    if let Some(path) = &o.client_ca_file {
        return std::fs::read_to_string(path).map(Some).map_err(|e| {
            CommandError::KubeletApi(format!("--client-ca-file {}: {e}", path.display()))
        });
    }
    let maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), "kube-system");
    let published = match maps.get_opt(AUTHENTICATION_CONFIG_MAP).await {
        Ok(map) => map
            .and_then(|m| m.data)
            .and_then(|mut data| data.remove("client-ca-file"))
            .filter(|pem| !pem.trim().is_empty()),
        Err(e) => {
            tracing::warn!(error = %e, "no --client-ca-file and kube-system/{AUTHENTICATION_CONFIG_MAP} cannot be read: the kubelet API refuses client certificates (kubectl logs, exec and port-forward through the API server fail with 401)");
            return Ok(None);
        }
    };
    match &published {
        Some(_) => tracing::info!(
            "the kubelet API accepts client certificates of the client CA in kube-system/{AUTHENTICATION_CONFIG_MAP}"
        ),
        None => tracing::warn!(
            "no --client-ca-file and no client-ca-file in kube-system/{AUTHENTICATION_CONFIG_MAP}: the kubelet API refuses client certificates (kubectl logs, exec and port-forward through the API server fail with 401)"
        ),
    }
    Ok(published)
}

/// How the `--metrics-addr` server is guarded.
enum MetricsGuard {
    /// A loopback address: plain HTTP, no authentication (only this
    /// machine reaches it).
    Loopback,
    /// Any other address: HTTPS (`--tls-cert-file`, else self-signed) and
    /// the kubelet API's authentication and authorization (client
    /// certificates of the client CA (`--client-ca-file`, else the one the API
    /// server publishes), TokenReview, then
    /// SubjectAccessReview on `get` of the path unless `AlwaysAllow`;
    /// `--anonymous-auth`); `/healthz`, `/readyz` and `/livez` stay open
    /// for probes.
    Exposed(Box<DelegatedAuth>),
}

impl MetricsGuard {
    /// The guard for serving on `addr`.
    fn for_addr(addr: std::net::SocketAddr, o: &KubeletOptions, client: &kube::Client) -> Self {
        match addr.ip().is_loopback() {
            true => Self::Loopback,
            false => Self::exposed(o, client),
        }
    }

    /// The guard of an address beyond this machine, reviewing through
    /// `client`.
    fn exposed(o: &KubeletOptions, client: &kube::Client) -> Self {
        let mut config = auth_config(o);
        config.always_allow_paths = vec!["/healthz".into(), "/readyz".into(), "/livez".into()];
        Self::Exposed(Box::new(DelegatedAuth::new(client.clone(), config)))
    }
}

/// The server of `--metrics-addr`: the node's metric families and health
/// checks, served as `/metrics`, `/healthz` and `/readyz`, guarded as
/// `guard` says.
async fn metrics_server(
    addr: std::net::SocketAddr,
    guard: MetricsGuard,
    o: &KubeletOptions,
    client_ca: Option<&str>,
    rest_client: &stratus_runtime::metrics::RestClientMetrics,
) -> Result<(KubeletMetrics, HealthChecks, AdminServer), CommandError> {
    let mut registry = Registry::default();
    let metrics = KubeletMetrics::register(&mut registry);
    stratus_runtime::metrics::ProcessCollector::register(&mut registry);
    rest_client.register(&mut registry);
    let checks = HealthChecks::new();
    let mut builder = AdminServer::builder(addr)
        .health(checks.clone())
        .registry(Arc::new(registry));
    builder = match guard {
        MetricsGuard::Loopback => builder.plain_http(),
        MetricsGuard::Exposed(auth) => {
            builder = builder.auth(*auth);
            if let (Some(cert), Some(key)) = (&o.tls_cert_file, &o.tls_private_key_file) {
                builder = builder.certificate(
                    reloading_pem_files(cert, key)
                        .map_err(|e| CommandError::Metrics(e.to_string()))?,
                );
            }
            if let Some(pem) = client_ca {
                builder = builder.client_ca(pem.to_owned());
            }
            builder
        }
    };
    let server = builder
        .bind()
        .await
        .map_err(|e| CommandError::Metrics(e.to_string()))?;
    Ok((metrics, checks, server))
}

/// What every node of the process shares.
struct Shared {
    client: kube::Client,
    /// The kubelet API's client CA (see [`client_ca`]).
    client_ca: Option<String>,
    resources: Arc<ApiResources>,
    flags: VendorFlags,
    metrics: Option<(KubeletMetrics, HealthChecks)>,
}

/// Build and start the node `name` (the `index`-th of the process): its
/// provider from the factory, its kubelet API on `--kubelet-port` +
/// `index` (each a free port when it is 0), its `VirtualNode`.
async fn start_node(
    o: &KubeletOptions,
    make: &AsyncFactory,
    shared: &Shared,
    index: usize,
    name: &str,
    stop: watch::Receiver<bool>,
) -> Result<
    (
        watch::Receiver<bool>,
        tokio::task::JoinHandle<Result<(), VirtualNodeError>>,
    ),
    CommandError,
> {
    let port = match o.kubelet_port {
        0 => 0,
        base => u16::try_from(usize::from(base) + index).map_err(|_| {
            CommandError::KubeletApi(format!(
                "--kubelet-port {base} + {index} nodes is past 65535"
            ))
        })?,
    };
    let mut options = o.clone();
    options.nodename = name.to_owned();
    options.kubelet_port = port;
    let providers = make(ProviderInit {
        config_file: o.provider_config.clone(),
        node_name: name.to_owned(),
        operating_system: o.operating_system.clone(),
        internal_ip: o.node_ip.to_string(),
        daemon_port: port,
        client: shared.client.clone(),
        resources: shared.resources.clone(),
        flags: shared.flags.clone(),
    })
    .await
    .map_err(|message| CommandError::Provider {
        name: o.provider.clone(),
        message,
    })?;
    let provider = providers.pods;
    let (server, rotation) = kubelet_server(
        &options,
        &shared.client,
        shared.client_ca.as_deref(),
        provider.clone(),
        shared.metrics.as_ref().map(|(metrics, _)| metrics.clone()),
    )
    .await
    .map_err(CommandError::KubeletApi)?;
    let mut node = NodeConfig::new(name, &o.provider);
    if let Some(version) = &o.binary_version {
        node.kubelet_version = format!("{}-vk-{version}", crate::node::KUBERNETES_VERSION);
    }
    node.taint = o.taint();
    node.ping_interval = o.node_ping_interval;
    node.ping_timeout = o.node_ping_timeout;
    node.internal_ip = Some(o.node_ip.to_string());
    node.daemon_port = i32::from(server.local_addr().port());
    node.operating_system = o.operating_system.to_lowercase();
    let pods = PodControllerConfig {
        sync_workers: o.pod_sync_workers.max(1),
        never_restart_retries: o.never_restart_retries,
        dangling_safeguard: o.dangling_pod_safeguard,
        ..Default::default()
    };
    let mut builder = VirtualNode::builder(shared.client.clone(), node);
    if let Some(node_provider) = providers.node {
        builder = builder.node_provider(node_provider);
    }
    if let Some((metrics, checks)) = &shared.metrics {
        builder = builder
            .metrics(metrics.clone())
            .health_checks(checks.clone());
    }
    let virtual_node = builder
        .provider(provider)
        .resources(shared.resources.clone())
        .pods(pods)
        .kubelet_server(server)
        .build()?;
    if let Some(rotation) = rotation {
        tokio::spawn(rotation.run(stop.clone()));
    }
    let ready = virtual_node.ready();
    Ok((ready, tokio::spawn(virtual_node.run(stop))))
}

async fn run(
    o: KubeletOptions,
    flags: VendorFlags,
    built_in: Option<AsyncFactory>,
    stop: watch::Receiver<bool>,
) -> Result<(), CommandError> {
    let names = o.node_names().map_err(CommandError::NodeNames)?;
    if o.deprecated_taint_key.is_some() {
        tracing::warn!(
            "--taint is deprecated: set the taint's key with VKUBELET_TAINT_KEY or --taint-key"
        );
    }
    let make = match built_in {
        Some(make) => make,
        None => factory(&o.provider)?,
    };
    let rest_client = stratus_runtime::metrics::RestClientMetrics::new();
    let client = client(&o.kubeconfig, &rest_client).await?;
    let resources = Arc::new(ApiResources::new(
        client.clone(),
        std::time::Duration::from_secs(60),
    ));
    let client_ca = client_ca(&o, &client).await?;
    let metrics = match o.metrics_addr {
        ListenAddr(Some(addr)) => {
            let guard = MetricsGuard::for_addr(addr, &o, &client);
            let exposed = matches!(guard, MetricsGuard::Exposed(_));
            let (metrics, checks, server) =
                metrics_server(addr, guard, &o, client_ca.as_deref(), &rest_client).await?;
            tracing::info!(addr = %server.local_addr(), https_and_authentication = exposed, "serving /metrics, /healthz and /readyz");
            tokio::spawn(server.serve(stop.clone()));
            Some((metrics, checks))
        }
        ListenAddr(None) => None,
    };
    let shared = Shared {
        client,
        client_ca,
        resources,
        flags,
        metrics,
    };
    // The nodes stop together: on the caller's stop, or when one fails.
    let (stop_all, nodes_stopped) = watch::channel(false);
    let forward_stop = {
        let stop_all = stop_all.clone();
        let mut stop = stop.clone();
        tokio::spawn(async move {
            stratus_runtime::stopped(&mut stop).await;
            let _ = stop_all.send(true);
        })
    };
    let mut started = Vec::new();
    for (index, name) in names.iter().enumerate() {
        match start_node(&o, &make, &shared, index, name, nodes_stopped.clone()).await {
            Ok(node) => started.push(node),
            Err(e) => {
                let _ = stop_all.send(true);
                for (_, task) in started {
                    let _ = task.await;
                }
                forward_stop.abort();
                return Err(e);
            }
        }
    }
    if !o.startup_timeout.is_zero() {
        // Every node ready in time, or stopped while starting (not a
        // failure).
        let mut stopping = stop.clone();
        let all_ready = async {
            for (ready, _) in &mut started {
                if ready.wait_for(|r| *r).await.is_err() {
                    return false;
                }
            }
            true
        };
        let became_ready = tokio::select! {
            r = tokio::time::timeout(o.startup_timeout, all_ready) => matches!(r, Ok(true)),
            () = stratus_runtime::stopped(&mut stopping) => true,
        };
        if !became_ready {
            let _ = stop_all.send(true);
            for (_, task) in started {
                task.abort();
            }
            forward_stop.abort();
            return Err(CommandError::StartupTimeout(o.startup_timeout));
        }
    }
    // The first node to end (with an error, or all at the stop) stops the
    // others; the first error is the answer.
    let mut tasks: futures_util::stream::FuturesUnordered<_> =
        started.into_iter().map(|(_, task)| task).collect();
    let mut first_error = None;
    while let Some(ended) = futures_util::StreamExt::next(&mut tasks).await {
        let _ = stop_all.send(true);
        let error = match ended {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(CommandError::Node(e)),
            Err(e) => Some(CommandError::KubeletApi(format!(
                "the node task failed: {e}"
            ))),
        };
        if first_error.is_none() {
            first_error = error;
        }
    }
    forward_stop.abort();
    first_error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratus_testing::ApiServer;

    /// The options of `virtual-kubelet <args>`.
    fn options(args: &[&str]) -> KubeletOptions {
        Cli::<NoFlags>::try_parse_from(
            std::iter::once("virtual-kubelet").chain(args.iter().copied()),
        )
        .unwrap()
        .options
    }

    /// A client of the HTTPS server at `addr` sending `token`, if any.
    fn caller(addr: std::net::SocketAddr, token: Option<&str>) -> kube::Client {
        let mut config = kube::Config::new(format!("https://{addr}").parse().unwrap());
        config.accept_invalid_certs = true;
        config.default_retry = false;
        config.auth_info.token = token.map(|t| t.to_owned().into());
        kube::Client::try_from(config).unwrap()
    }

    #[test]
    fn ping_flags_are_go_durations_and_never_zero() {
        let o = options(&[]);
        assert_eq!(
            (o.node_ping_interval, o.node_ping_timeout),
            (
                std::time::Duration::from_secs(10),
                std::time::Duration::from_secs(5)
            )
        );
        let o = options(&["--node-ping-interval=30s", "--node-ping-timeout=1m30s"]);
        assert_eq!(
            (o.node_ping_interval, o.node_ping_timeout),
            (
                std::time::Duration::from_secs(30),
                std::time::Duration::from_secs(90)
            )
        );
        for zero in ["--node-ping-interval=0s", "--node-ping-timeout=0"] {
            let refused = Cli::<NoFlags>::try_parse_from(["virtual-kubelet", zero])
                .err()
                .map(|e| e.to_string());
            assert!(
                refused
                    .as_deref()
                    .is_some_and(|e| e.contains("must be more than zero")),
                "{zero}: {refused:?}"
            );
        }
    }

    #[test]
    fn only_a_loopback_address_is_served_without_authentication() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let client =
                kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap()))
                    .unwrap();
            let o = options(&[]);
            for (addr, exposed) in [
                ("127.0.0.1:10255", false),
                ("[::1]:10255", false),
                ("0.0.0.0:10255", true),
                ("[::]:10255", true),
                ("10.1.2.3:10255", true),
            ] {
                let guard = MetricsGuard::for_addr(addr.parse().unwrap(), &o, &client);
                assert_eq!(matches!(guard, MetricsGuard::Exposed(_)), exposed, "{addr}");
            }
        });
    }

    /// The guard of an exposed `--metrics-addr`, served on loopback here
    /// (tests bind 127.0.0.1 only): HTTPS, `/metrics` for callers the API
    /// server authenticates and authorizes, the probes open.
    async fn exposed_metrics(
        api: &ApiServer,
        args: &[&str],
    ) -> (std::net::SocketAddr, watch::Sender<bool>) {
        let o = options(args);
        let guard = MetricsGuard::exposed(&o, &api.client());
        let rest_client = stratus_runtime::metrics::RestClientMetrics::new();
        let client_ca = client_ca(&o, &api.client()).await.unwrap();
        let (_, _, server) = metrics_server(
            "127.0.0.1:0".parse().unwrap(),
            guard,
            &o,
            client_ca.as_deref(),
            &rest_client,
        )
        .await
        .unwrap();
        let addr = server.local_addr();
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(server.serve(stopped));
        (addr, stop)
    }

    #[tokio::test]
    async fn exposed_metrics_need_credentials_and_permission() {
        let api = ApiServer::builder().rbac().start().await.unwrap();
        api.seed(
            serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "nobody", "namespace": "default"}}),
        )
        .unwrap();
        let nobody = api
            .service_account_token("default", "nobody")
            .await
            .unwrap();
        let admin = api
            .kubeconfig()
            .lines()
            .find_map(|l| l.trim().strip_prefix("token: "))
            .unwrap()
            .trim_matches('"')
            .to_owned();

        let (addr, stop) = exposed_metrics(&api, &[]).await;
        let get = |token: Option<&str>, path: &'static str| {
            let client = caller(addr, token);
            async move { stratus_testing::http_status::get(&client, path).await.0 }
        };
        assert_eq!(get(None, "/metrics").await, 401);
        assert_eq!(get(Some("garbage"), "/metrics").await, 401);
        assert_eq!(get(Some(&nobody), "/metrics").await, 403);
        assert_eq!(get(Some(&admin), "/metrics").await, 200);
        assert_eq!(get(None, "/healthz").await, 200);
        assert_eq!(get(None, "/readyz").await, 200);
        let _ = stop.send(true);

        // AlwaysAllow skips the access review, never the authentication.
        let (addr, stop) = exposed_metrics(&api, &["--authorization-mode=AlwaysAllow"]).await;
        let get = |token: Option<&str>| {
            let client = caller(addr, token);
            async move {
                stratus_testing::http_status::get(&client, "/metrics")
                    .await
                    .0
            }
        };
        assert_eq!(get(None).await, 401);
        assert_eq!(get(Some("garbage")).await, 401);
        assert_eq!(get(Some(&nobody)).await, 200);
        let _ = stop.send(true);
    }
}
