//! The cloud controller manager: from validated flags to running
//! controllers, as Go's `app.Run`:
//!
//! 1. validate the flags (every problem reported, then a non-zero exit);
//! 2. build the API client (`--kubeconfig` / `--master`, `--kube-api-qps`,
//!    `--kube-api-burst`, user agent `cloud-controller-manager/<version>`);
//! 3. initialize the provider from the registry (`--cloud-provider`,
//!    `--cloud-config`);
//! 4. serve `/healthz`, `/livez`, `/readyz`, `/metrics` and `/configz` on
//!    `--bind-address`:`--secure-port` over TLS (0 turns it off), behind
//!    delegated authentication and authorization (client certificates,
//!    TokenReview, SubjectAccessReview; the health paths are open), and the
//!    admission webhooks `--webhooks` enables on
//!    `--webhook-bind-address`:`--webhook-secure-port` (every replica
//!    serves both, leader or not);
//! 5. with `--leader-elect`, wait for the Lease; its `leaderElection` check
//!    joins `/healthz`;
//! 6. run the provider's `initialize` hook, then start the enabled
//!    controllers in order, `--controller-start-interval` apart, each with a
//!    health check under its canonical name;
//! 7. run until stopped (then stop the controllers and release the Lease) or
//!    until leadership is lost (then stop and return
//!    [`ManagerError::LostLeadership`], as Go exits; with
//!    `--leader-elect-recampaign`, campaign again and restart the
//!    controllers once the Lease is won back).

mod configz;
mod connect;
mod running;

use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use k8s_openapi::api::core::v1::ConfigMap;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use stratus_cloud::{CloudProvider, InitContext, ShutdownSignal};
use stratus_runtime::admin::{AdminError, AdminServer, Configz};
use stratus_runtime::admission::{Webhook, WebhookMetrics, WebhookServer, WebhookServerError};
use stratus_runtime::auth::{DelegatedAuth, DelegatedAuthConfig, RequestHeader};
use stratus_runtime::client::{ClientError, ClientOptions, build_client};
use stratus_runtime::command::VendorFlags;
use stratus_runtime::health::{ControllerHealth, HealthChecks};
use stratus_runtime::{ElectionConfig, LeaderElector, LeaseLock};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::builtin::default_controllers;
use super::controllers::{KnownController, canonicalize, is_enabled};
use super::managed::{ControllerContext, ManagedController, StartError, Started};
use super::options::{ManagerOptions, OptionsError};
use crate::metrics::CcmMetrics;
use configz::{configz, record_status};
use connect::{delegated_auth, load_config};
pub use running::{RunningManager, TokioSpawner};

/// Why the manager stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// The flags are invalid; every problem is listed.
    #[error("invalid flags:\n{}", .0.iter().map(|e| format!("  - {e}")).collect::<Vec<_>>().join("\n"))]
    Options(Vec<OptionsError>),
    /// The API client could not be built.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The kubeconfig could not be loaded.
    #[error("cannot load the client configuration: {0}")]
    Kubeconfig(String),
    /// The provider could not be created or initialized.
    #[error("cloud provider {name:?}: {message}")]
    Provider {
        /// `--cloud-provider`.
        name: String,
        /// What went wrong.
        message: String,
    },
    /// The admin server could not start.
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// The client CA of the admin server is unreadable.
    #[error("client CA: {0}")]
    ClientCa(String),
    /// The webhook server could not start.
    #[error(transparent)]
    Webhooks(#[from] WebhookServerError),
    /// Two controllers share a name or alias.
    #[error("controller name {0:?} is registered twice")]
    DuplicateController(String),
    /// A controller failed to start (Go's manager exits then too).
    #[error("controller {name} could not start: {source}")]
    ControllerStart {
        /// Its canonical name.
        name: &'static str,
        /// Why.
        source: StartError,
    },
    /// Leader election failed to start.
    #[error("leader election: {0}")]
    Election(String),
    /// Leadership was lost; the controllers were stopped.
    #[error("leader election lost")]
    LostLeadership,
    /// The manager's task ended abnormally (a panic in the manager).
    #[error("the manager task failed: {0}")]
    Task(String),
}

/// Makes the provider from the validated flags (a vendor's cloud
/// initializer).
pub type ProviderFactory =
    Box<dyn FnOnce(&ManagerOptions) -> Result<Arc<dyn CloudProvider>, StartError> + Send>;

/// Builds and runs a cloud controller manager.
pub struct CloudControllerManager {
    options: ManagerOptions,
    client: Option<kube::Client>,
    provider: Option<Arc<dyn CloudProvider>>,
    provider_factory: Option<ProviderFactory>,
    admin_addr: Option<SocketAddr>,
    webhook_addr: Option<SocketAddr>,
    identity: Option<String>,
    controllers: Vec<ManagedController>,
    webhooks: Vec<Webhook>,
    registry: Option<Registry>,
    flags: Option<VendorFlags>,
}

impl std::fmt::Debug for CloudControllerManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudControllerManager")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl CloudControllerManager {
    /// A manager for `options`.
    pub fn new(options: ManagerOptions) -> Self {
        Self {
            options,
            client: None,
            provider: None,
            provider_factory: None,
            admin_addr: None,
            webhook_addr: None,
            identity: None,
            controllers: default_controllers(),
            webhooks: Vec::new(),
            registry: None,
            flags: None,
        }
    }

    /// Run `controller` too, after those already registered (the start
    /// order is the registration order).
    pub fn with_controller(mut self, controller: ManagedController) -> Self {
        self.controllers.push(controller);
        self
    }

    /// Run exactly these controllers instead of
    /// [`default_controllers`](super::default_controllers) (to drop a
    /// built-in one, as Go's sample drops `cloud-node-lifecycle`).
    pub fn with_controllers(mut self, controllers: Vec<ManagedController>) -> Self {
        self.controllers = controllers;
        self
    }

    /// Register an admission webhook; it is served when `--webhooks`
    /// enables it.
    pub fn with_webhook(mut self, webhook: Webhook) -> Self {
        self.webhooks.push(webhook);
        self
    }

    /// Export the manager's metrics in this registry, next to the vendor's
    /// own (a fresh registry by default).
    pub fn with_registry(mut self, registry: Registry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// The vendor's parsed flags, handed to controllers through
    /// [`ControllerContext::flags`].
    pub fn with_flags<F: std::any::Any + Send + Sync>(mut self, flags: Arc<F>) -> Self {
        self.flags = Some(VendorFlags::from_arc(flags));
        self
    }

    /// Make the provider with `factory` once the flags are validated,
    /// instead of from the registry's `--cloud-provider`.
    pub fn with_provider_factory(mut self, factory: ProviderFactory) -> Self {
        self.provider_factory = Some(factory);
        self
    }

    /// Serve the enabled webhooks on this address instead of
    /// `--webhook-bind-address`:`--webhook-secure-port` (port 0 picks a
    /// free one).
    pub fn with_webhook_addr(mut self, addr: SocketAddr) -> Self {
        self.webhook_addr = Some(addr);
        self
    }

    /// Use this client instead of building one from the flags.
    pub fn with_client(mut self, client: kube::Client) -> Self {
        self.client = Some(client);
        self
    }

    /// Use this provider instead of the registry's `--cloud-provider`.
    pub fn with_provider(mut self, provider: Arc<dyn CloudProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Serve the admin endpoints on this address instead of
    /// `--bind-address`:`--secure-port` (port 0 picks a free one).
    pub fn with_admin_addr(mut self, addr: SocketAddr) -> Self {
        self.admin_addr = Some(addr);
        self
    }

    /// The leader-election identity (default: host name, `_`, a random id,
    /// as Go).
    pub fn with_identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }

    /// Start the manager; it runs until `stop` becomes true.
    pub async fn start(self, stop: watch::Receiver<bool>) -> Result<RunningManager, ManagerError> {
        let known: Vec<KnownController> = self.controllers.iter().map(|c| c.known()).collect();
        for (i, k) in known.iter().enumerate() {
            let clash = known[..i].iter().find(|other| {
                [other.names.canonical, other.names.alias]
                    .iter()
                    .any(|n| *n == k.names.canonical || *n == k.names.alias)
            });
            if clash.is_some() {
                return Err(ManagerError::DuplicateController(
                    k.names.canonical.to_owned(),
                ));
            }
        }
        let mut problems = self.options.validate(&known);
        let registered: Vec<&str> = self.webhooks.iter().map(Webhook::name).collect();
        let enabled_webhooks = match self.options.enabled_webhooks(&registered) {
            Ok(names) => names.into_iter().map(str::to_owned).collect::<Vec<_>>(),
            Err(e) => {
                problems.push(e);
                Vec::new()
            }
        };
        if !problems.is_empty() {
            return Err(ManagerError::Options(problems));
        }
        let o = self.options.clone();
        // `validate` accepted them: they parse.
        let (admin_serving, webhook_serving, tls_warnings) =
            o.serving().map_err(|e| ManagerError::Options(vec![e]))?;
        let metrics_filter = o
            .metrics_filter()
            .map_err(|e| ManagerError::Options(vec![e]))?;
        for warning in o.ignored_flag_warnings().into_iter().chain(tls_warnings) {
            tracing::warn!("{warning}");
        }
        let mut client_options = ClientOptions::new("cloud-controller-manager");
        client_options.qps = o.generic.kube_api_qps;
        client_options.burst = o.generic.kube_api_burst;
        let rest_client = stratus_runtime::metrics::RestClientMetrics::new();
        client_options.metrics = Some(rest_client.clone());
        // Per-controller ServiceAccount clients are made from the same
        // cluster configuration.
        let config = match (&self.client, o.cloud.use_service_account_credentials) {
            (Some(_), false) => None,
            _ => Some(load_config(&o).await?),
        };
        let client = match self.client {
            Some(c) => c,
            None => {
                let config = match &config {
                    Some(c) => c.clone(),
                    None => load_config(&o).await?,
                };
                build_client(config, &client_options)?
            }
        };
        let credentials = match (o.cloud.use_service_account_credentials, config) {
            (true, Some(config)) => Some(Credentials {
                config,
                options: client_options.clone(),
            }),
            _ => None,
        };
        let provider_error = |message: String| ManagerError::Provider {
            name: o.cloud.cloud_provider.clone(),
            message,
        };
        let provider = match (self.provider, self.provider_factory) {
            (Some(p), _) => p,
            (None, Some(factory)) => factory(&o).map_err(|e| provider_error(e.to_string()))?,
            (None, None) => {
                let config = (!o.cloud.cloud_config.is_empty())
                    .then(|| std::path::Path::new(&o.cloud.cloud_config));
                super::init_cloud_provider(&o.cloud.cloud_provider, config)
                    .map_err(|e| provider_error(e.to_string()))?
                    .ok_or_else(|| {
                        provider_error(
                            "\"external\" names no provider; register yours and name it".into(),
                        )
                    })?
            }
        };

        // A provider with only the legacy Instances and Zones answers the
        // node controllers through them, as Go's do.
        let provider = stratus_cloud::legacy::with_legacy_instances(provider);
        if !provider.has_cluster_id() && !o.cloud.allow_untagged_cloud {
            return Err(provider_error("no ClusterID found. A ClusterID is required for the cloud provider to function properly. This check can be bypassed by setting the allow-untagged-cloud option".into()));
        }

        let mut registry = self.registry.unwrap_or_default();
        let metrics = CcmMetrics::register(&mut registry);
        stratus_runtime::metrics::ProcessCollector::register(&mut registry);
        // Counts the clients built here (not a client the vendor passed in).
        rest_client.register(&mut registry);
        let running: Family<Vec<(&'static str, String)>, Gauge> = Family::default();
        registry.register(
            "running_managed_controllers",
            "Indicates where instances of a controller are currently running",
            running.clone(),
        );
        let webhook_metrics = WebhookMetrics::register(&mut registry, "cloud_provider_webhook");
        // client-go's: 1 while this process holds the Lease, 0 otherwise.
        let leading: Family<Vec<(&'static str, String)>, Gauge> = Family::default();
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            leading.clone(),
        );
        if o.generic.leader_elect {
            leading
                .get_or_create(&vec![(
                    "name",
                    o.generic.leader_elect_resource_name.clone(),
                )])
                .set(0);
        }

        let webhook_addr = match enabled_webhooks.is_empty() {
            true => None,
            false => {
                let serving = &o.webhook_serving;
                let addr = self.webhook_addr.unwrap_or_else(|| {
                    SocketAddr::new(serving.webhook_bind_address, serving.webhook_secure_port)
                });
                let mut builder = WebhookServer::builder(addr)
                    .metrics(webhook_metrics)
                    .serving(webhook_serving);
                for webhook in self.webhooks {
                    if enabled_webhooks.iter().any(|n| n == webhook.name()) {
                        tracing::info!(
                            webhook = webhook.name(),
                            path = webhook.path(),
                            "serving the admission webhook"
                        );
                        builder = builder.webhook(webhook);
                    }
                }
                if let (Some(cert), Some(key)) = (
                    &serving.webhook_tls_cert_file,
                    &serving.webhook_tls_private_key_file,
                ) {
                    builder = builder.certificate(
                        stratus_runtime::tls::from_pem_files(cert, key)
                            .map_err(WebhookServerError::from)?,
                    );
                }
                let server = builder.bind().await?;
                let addr = server.local_addr();
                tokio::spawn(server.serve(stop.clone()));
                Some(addr)
            }
        };

        let checks = HealthChecks::new();
        let configz_doc = Configz::new(serde_json::json!({
            crate::names::manager::CONFIGZ_NAME: configz(&o),
        }));
        let serving = &o.secure_serving;
        let admin_addr = self.admin_addr.or_else(|| {
            (serving.secure_port != 0)
                .then(|| SocketAddr::new(serving.bind_address, serving.secure_port))
        });
        let admin = match admin_addr {
            Some(addr) => {
                let (auth, client_ca) = delegated_auth(&o, &client).await?;
                let mut builder = AdminServer::builder(addr)
                    .auth(auth)
                    .health(checks.clone())
                    .registry(Arc::new(registry))
                    .metrics_filter(metrics_filter)
                    .serving(admin_serving)
                    .shared_configz(configz_doc.clone());
                if let (Some(cert), Some(key)) =
                    (&serving.tls_cert_file, &serving.tls_private_key_file)
                {
                    builder = builder.certificate(
                        stratus_runtime::tls::from_pem_files(cert, key)
                            .map_err(AdminError::from)?,
                    );
                }
                if let Some(pem) = client_ca {
                    builder = builder.client_ca(pem);
                }
                Some(builder.bind().await?)
            }
            None => None,
        };
        let admin_addr = admin.as_ref().map(AdminServer::local_addr);
        if let Some(admin) = admin {
            tokio::spawn(admin.serve(stop.clone()));
        }
        // `validate` accepted the entries: they parse.
        let entries = canonicalize(&o.generic.controllers, &known).unwrap_or_default();
        let (controllers, disabled): (Vec<_>, Vec<_>) = self
            .controllers
            .into_iter()
            .partition(|c| is_enabled(&c.known(), &entries));
        for controller in disabled {
            let name = controller.names().canonical;
            tracing::info!(
                controller = name,
                "the controller is disabled by --controllers"
            );
            record_status(&configz_doc, name, Some("disabled by --controllers"));
            checks.not_started(name, "disabled by --controllers");
        }
        let manager = Manager {
            identity: self.identity.unwrap_or_else(default_identity),
            options: Arc::new(o),
            client,
            provider,
            metrics,
            running,
            leading,
            checks,
            configz: configz_doc,
            credentials,
            controllers,
            flags: self.flags,
        };
        let task = tokio::spawn(manager.run(stop));
        Ok(RunningManager {
            admin_addr,
            webhook_addr,
            task,
        })
    }

    /// Start and run until `stop` becomes true (or leadership is lost).
    pub async fn run(self, stop: watch::Receiver<bool>) -> Result<(), ManagerError> {
        self.start(stop).await?.wait().await
    }
}

/// Go's identity: the host name, `_`, a random UUID.
fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .unwrap_or_else(|| "localhost".into());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// What runs once the servers are up: elections and controller terms.
struct Manager {
    identity: String,
    options: Arc<ManagerOptions>,
    client: kube::Client,
    provider: Arc<dyn CloudProvider>,
    metrics: CcmMetrics,
    running: Family<Vec<(&'static str, String)>, Gauge>,
    /// `leader_election_master_status{name}`.
    leading: Family<Vec<(&'static str, String)>, Gauge>,
    checks: HealthChecks,
    configz: Configz,
    /// With `--use-service-account-credentials`: how controller clients
    /// are made.
    credentials: Option<Credentials>,
    /// The enabled controllers, in start order.
    controllers: Vec<ManagedController>,
    flags: Option<VendorFlags>,
}

/// What per-controller ServiceAccount clients are made from.
struct Credentials {
    config: kube::Config,
    options: ClientOptions,
}

impl Manager {
    /// The client of the controller `names`: the manager's, or with
    /// `--use-service-account-credentials` one authenticating as the
    /// ServiceAccount `kube-system/<client name>` (Go's dynamic client
    /// builder).
    async fn client_for(
        &self,
        names: stratus_cloud::names::ControllerNames,
    ) -> Result<kube::Client, ManagerError> {
        let Some(credentials) = &self.credentials else {
            return Ok(self.client.clone());
        };
        let mut options = credentials.options.clone();
        options.user_agent = format!("{}/{}", options.user_agent, names.client);
        Ok(stratus_runtime::client::service_account_client(
            &self.client,
            credentials.config.clone(),
            "kube-system",
            names.client,
            &options,
        )
        .await?)
    }
}

/// The controller tasks of a term; aborted if the term is dropped (the
/// manager task was aborted) instead of being stopped.
struct Tasks(Vec<(&'static str, JoinHandle<()>)>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for (_, task) in &self.0 {
            task.abort();
        }
    }
}

/// How a term of leadership ended.
enum TermEnd {
    Stopped,
    Lost,
}

impl Manager {
    /// Say whether this process holds the Lease (`leader_election_master_status`).
    fn leader_status(&self, leading: bool) {
        self.leading
            .get_or_create(&vec![(
                "name",
                self.options.generic.leader_elect_resource_name.clone(),
            )])
            .set(i64::from(leading));
    }

    async fn run(self, stop: watch::Receiver<bool>) -> Result<(), ManagerError> {
        let o = self.options.clone();
        let (shutdown_trigger, shutdown) = ShutdownSignal::new();
        let mut initialized = false;
        let g = &o.generic;
        let mut elector = g.leader_elect.then(|| {
            LeaderElector::new(
                self.client.clone(),
                LeaseLock::new(
                    &g.leader_elect_resource_namespace,
                    &g.leader_elect_resource_name,
                ),
                self.identity.clone(),
                ElectionConfig {
                    lease_duration: g.leader_elect_lease_duration,
                    renew_deadline: g.leader_elect_renew_deadline,
                    retry_period: g.leader_elect_retry_period,
                    release_on_cancel: true,
                },
            )
        });
        let outcome = loop {
            let mut leadership = None;
            if let Some(elector) = elector.as_mut() {
                match elector.acquire(stop.clone()).await {
                    Ok(Some(l)) => {
                        self.checks
                            .add("leaderElection", l.health_check(Duration::from_secs(20)));
                        self.leader_status(true);
                        leadership = Some(l);
                    }
                    Ok(None) => break Ok(()),
                    Err(e) => break Err(ManagerError::Election(e.to_string())),
                }
            }
            if !initialized {
                let init = InitContext::new(
                    o.cloud.cluster_name.clone(),
                    shutdown.clone(),
                    Arc::new(TokioSpawner),
                )
                .with_extension(self.client.clone());
                if let Err(e) = self.provider.initialize(&init).await {
                    if let Some(l) = leadership {
                        l.release().await;
                    }
                    break Err(ManagerError::Provider {
                        name: o.cloud.cloud_provider.clone(),
                        message: format!("initialize: {e}"),
                    });
                }
                initialized = true;
            }
            let lost = async {
                match leadership.as_mut() {
                    Some(l) => l.lost().await,
                    None => std::future::pending().await,
                }
            };
            let end = self.term(stop.clone(), lost).await;
            if let Some(l) = leadership {
                self.leader_status(false);
                l.release().await;
            }
            match end {
                Ok(TermEnd::Stopped) => break Ok(()),
                Ok(TermEnd::Lost) if o.generic.leader_elect_recampaign && !*stop.borrow() => {
                    tracing::warn!("leader election lost; campaigning again");
                    self.checks.remove("leaderElection");
                }
                Ok(TermEnd::Lost) => break Err(ManagerError::LostLeadership),
                Err(e) => break Err(e),
            }
        };
        shutdown_trigger.trigger();
        outcome
    }

    /// Start the enabled controllers and run them until `stop` or `lost`;
    /// then stop them.
    async fn term(
        &self,
        mut stop: watch::Receiver<bool>,
        lost: impl std::future::Future<Output = ()>,
    ) -> Result<TermEnd, ManagerError> {
        let o = &self.options;
        let (halt, halted) = watch::channel(false);
        let mut tasks = Tasks(Vec::new());
        let mut failed = None;
        // Go draws one resync period for its shared informers per start.
        let resync_period = stratus_runtime::wait::jitter(o.generic.min_resync_period, 1.0);
        // One watch per kind for every controller of this term (Go's shared
        // informer factory); it stops once the controllers have.
        let informers = crate::informers::SharedInformers::new(self.client.clone());
        for controller in &self.controllers {
            let name = controller.names().canonical;
            let health = ControllerHealth::new();
            let client = match self.client_for(controller.names()).await {
                Ok(c) => c,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            };
            let ctx = ControllerContext {
                client,
                provider: self.provider.clone(),
                options: o.clone(),
                metrics: self.metrics.clone(),
                health: health.clone(),
                resync_period,
                informers: informers.clone(),
                stop: halted.clone(),
                flags: self.flags.clone(),
            };
            let task = match controller.start(ctx) {
                Ok(Started::Running(task)) => task,
                Ok(Started::NotEnabled(reason)) => {
                    // Once, even when the manager campaigns again.
                    if self.checks.not_started_reason(name).as_deref() != Some(&reason) {
                        tracing::info!(controller = name, %reason, "the controller is not started");
                        self.checks.not_started(name, reason.clone());
                    }
                    record_status(&self.configz, name, Some(&reason));
                    continue;
                }
                Err(source) => {
                    failed = Some(ManagerError::ControllerStart { name, source });
                    break;
                }
            };
            self.checks.add(name, health.clone());
            record_status(&self.configz, name, None);
            let gauge = self.running_gauge(name);
            gauge.set(1);
            tracing::info!(controller = name, "starting");
            let halted = halted.clone();
            let watched = async move {
                // A controller that returns or panics on its own is reported
                // by its health check and no longer counted as running.
                let outcome = AssertUnwindSafe(task).catch_unwind().await;
                if !*halted.borrow() {
                    match outcome {
                        Ok(()) => {
                            tracing::error!(controller = name, "the controller stopped on its own")
                        }
                        Err(_) => tracing::error!(controller = name, "the controller panicked"),
                    }
                }
                health.stopped();
                gauge.set(0);
            };
            tasks.0.push((name, tokio::spawn(watched)));
            if !o.generic.controller_start_interval.is_zero() {
                // Jittered by up to 100 %, as Go's `wait.Jitter(interval, 1.0)`.
                let pause = stratus_runtime::wait::jitter(o.generic.controller_start_interval, 1.0);
                tokio::time::sleep(pause).await;
            }
        }
        let end = match failed {
            Some(e) => Err(e),
            None => tokio::select! {
                biased;
                _ = stratus_runtime::stopped(&mut stop) => Ok(TermEnd::Stopped),
                _ = lost => Ok(TermEnd::Lost),
            },
        };
        let _ = halt.send(true);
        for (name, task) in std::mem::take(&mut tasks.0) {
            match tokio::time::timeout(Duration::from_secs(10), task).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::error!(controller = name, error = %e, "the controller task failed")
                }
                Err(_) => tracing::warn!(
                    controller = name,
                    "the controller did not stop within 10 s; leaving it"
                ),
            }
            // A stopped controller is no longer checked or counted as
            // running (it matters when the manager campaigns again).
            self.checks.remove(name);
            self.running_gauge(name).set(0);
        }
        end
    }

    fn running_gauge(&self, name: &str) -> Gauge {
        self.running
            .get_or_create(&vec![
                ("name", name.to_owned()),
                ("manager", "cloud-controller-manager".to_owned()),
            ])
            .clone()
    }
}
