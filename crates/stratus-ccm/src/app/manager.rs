//! The cloud controller manager: from validated flags to running
//! controllers, as Go's `app.Run`:
//!
//! 1. validate the flags (every problem reported, then a non-zero exit);
//! 2. build the API client (`--kubeconfig` / `--master`, `--kube-api-qps`,
//!    `--kube-api-burst`, user agent `cloud-controller-manager/<version>`);
//! 3. initialize the provider from the registry (`--cloud-provider`,
//!    `--cloud-config`);
//! 4. serve `/healthz`, `/livez`, `/readyz`, `/metrics` and `/configz` on
//!    `--bind-address`:`--secure-port` over TLS (0 turns it off);
//! 5. with `--leader-elect`, wait for the Lease; its `leaderElection` check
//!    joins `/healthz`;
//! 6. run the provider's `initialize` hook, then start the enabled
//!    controllers in order, `--controller-start-interval` apart, each with a
//!    health check under its canonical name;
//! 7. run until stopped (then stop the controllers and release the Lease) or
//!    until leadership is lost (then stop and return
//!    [`ManagerError::LostLeadership`], as Go exits).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use stratus_cloud::names::controllers as names;
use stratus_cloud::{BoxTask, CloudProvider, InitContext, ShutdownSignal, Spawn};
use stratus_runtime::admin::{AdminError, AdminServer};
use stratus_runtime::client::{ClientError, ClientOptions, build_client};
use stratus_runtime::health::{ControllerHealth, HealthChecks};
use stratus_runtime::{ElectionConfig, LeaderElector, LeaseLock};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::controllers::{canonicalize, enabled};
use super::known_controllers;
use super::options::{ManagerOptions, OptionsError, parse_cidr_list};
use crate::Instrumented;
use crate::ipam::{NodeIpamConfig, NodeIpamController};
use crate::lifecycle::{LifecycleConfig, LifecycleController};
use crate::metrics::CcmMetrics;
use crate::node::{NodeController, NodeControllerConfig};
use crate::route::{RouteController, RouteControllerConfig};
use crate::service::{ServiceController, ServiceControllerConfig};

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

/// Builds and runs a cloud controller manager.
pub struct CloudControllerManager {
    options: ManagerOptions,
    client: Option<kube::Client>,
    provider: Option<Arc<dyn CloudProvider>>,
    admin_addr: Option<SocketAddr>,
    identity: Option<String>,
}

impl std::fmt::Debug for CloudControllerManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudControllerManager")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// A started manager.
#[derive(Debug)]
pub struct RunningManager {
    admin_addr: Option<SocketAddr>,
    task: JoinHandle<Result<(), ManagerError>>,
}

impl RunningManager {
    /// Where the admin server listens, if it serves.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// Wait for the manager to stop.
    pub async fn wait(self) -> Result<(), ManagerError> {
        match self.task.await {
            Ok(result) => result,
            Err(e) => Err(ManagerError::Task(e.to_string())),
        }
    }
}

/// Runs provider tasks on the manager's runtime.
struct TokioSpawner;

impl Spawn for TokioSpawner {
    fn spawn(&self, name: &str, task: BoxTask) {
        tracing::debug!(task = name, "starting a provider task");
        tokio::spawn(task);
    }
}

impl CloudControllerManager {
    /// A manager for `options`.
    pub fn new(options: ManagerOptions) -> Self {
        Self {
            options,
            client: None,
            provider: None,
            admin_addr: None,
            identity: None,
        }
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
        let known = known_controllers();
        let problems = self.options.validate(&known);
        if !problems.is_empty() {
            return Err(ManagerError::Options(problems));
        }
        let o = self.options.clone();
        let client = match self.client {
            Some(c) => c,
            None => {
                let mut options = ClientOptions::new("cloud-controller-manager");
                options.qps = o.kube_api_qps;
                options.burst = o.kube_api_burst;
                build_client(load_config(&o).await?, &options)?
            }
        };
        let provider = match self.provider {
            Some(p) => p,
            None => {
                let config =
                    (!o.cloud_config.is_empty()).then(|| std::path::Path::new(&o.cloud_config));
                let err = |message: String| ManagerError::Provider {
                    name: o.cloud_provider.clone(),
                    message,
                };
                stratus_cloud::init_cloud_provider(&o.cloud_provider, config)
                    .map_err(|e| err(e.to_string()))?
                    .ok_or_else(|| {
                        err("\"external\" names no provider; register yours and name it".into())
                    })?
            }
        };

        if !provider.has_cluster_id() && !o.allow_untagged_cloud {
            return Err(ManagerError::Provider {
                name: o.cloud_provider.clone(),
                message: "no ClusterID found. A ClusterID is required for the cloud provider to function properly. This check can be bypassed by setting the allow-untagged-cloud option".into(),
            });
        }

        let mut registry = Registry::default();
        let metrics = CcmMetrics::register(&mut registry);
        let running: Family<Vec<(&'static str, String)>, Gauge> = Family::default();
        registry.register(
            "running_managed_controllers",
            "Indicates where instances of a controller are currently running",
            running.clone(),
        );
        let checks = HealthChecks::new();
        let admin_addr = self.admin_addr.or_else(|| {
            (o.secure_port != 0).then(|| SocketAddr::new(o.bind_address, o.secure_port))
        });
        let admin = match admin_addr {
            Some(addr) => {
                let mut builder = AdminServer::builder(addr)
                    .health(checks.clone())
                    .registry(Arc::new(registry))
                    .configz(serde_json::json!({
                        stratus_cloud::names::manager::CONFIGZ_NAME: configz(&o),
                    }));
                if let (Some(cert), Some(key)) = (&o.tls_cert_file, &o.tls_private_key_file) {
                    builder = builder.certificate(
                        stratus_runtime::tls::from_pem_files(cert, key)
                            .map_err(AdminError::from)?,
                    );
                }
                Some(builder.bind().await?)
            }
            None => None,
        };
        let admin_addr = admin.as_ref().map(AdminServer::local_addr);
        if let Some(admin) = admin {
            tokio::spawn(admin.serve(stop.clone()));
        }
        let identity = self.identity.unwrap_or_else(default_identity);
        let task = tokio::spawn(run(
            o, client, provider, metrics, running, checks, identity, stop,
        ));
        Ok(RunningManager { admin_addr, task })
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

async fn load_config(o: &ManagerOptions) -> Result<kube::Config, ManagerError> {
    let err = |e: &dyn std::fmt::Display| ManagerError::Kubeconfig(e.to_string());
    let mut config = if o.kubeconfig.is_empty() {
        kube::Config::infer().await.map_err(|e| err(&e))?
    } else {
        let kubeconfig = kube::config::Kubeconfig::read_from(&o.kubeconfig).map_err(|e| err(&e))?;
        kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .map_err(|e| err(&e))?
    };
    if !o.master.is_empty() {
        config.cluster_url = o.master.parse().map_err(|e| err(&e))?;
    }
    Ok(config)
}

/// The `/configz` document: the effective flags, by Go's names.
fn configz(o: &ManagerOptions) -> serde_json::Value {
    serde_json::json!({
        "Generic": {
            "Controllers": o.controllers,
            "ClientConnection": {"QPS": o.kube_api_qps, "Burst": o.kube_api_burst},
            "LeaderElection": {
                "LeaderElect": o.leader_elect,
                "LeaseDuration": format!("{:?}", o.leader_elect_lease_duration),
                "RenewDeadline": format!("{:?}", o.leader_elect_renew_deadline),
                "RetryPeriod": format!("{:?}", o.leader_elect_retry_period),
                "ResourceName": o.leader_elect_resource_name,
                "ResourceNamespace": o.leader_elect_resource_namespace,
            },
        },
        "KubeCloudShared": {
            "CloudProvider": {"Name": o.cloud_provider, "CloudConfigFile": o.cloud_config},
            "ClusterName": o.cluster_name,
            "ClusterCIDR": o.cluster_cidr,
            "AllocateNodeCIDRs": o.allocate_node_cidrs,
            "ConfigureCloudRoutes": o.configure_cloud_routes,
            "NodeMonitorPeriod": format!("{:?}", o.node_monitor_period),
            "RouteReconciliationPeriod": format!("{:?}", o.route_reconciliation_period),
        },
        "NodeController": {"ConcurrentNodeSyncs": o.concurrent_node_syncs},
        "ServiceController": {"ConcurrentServiceSyncs": o.concurrent_service_syncs},
        "NodeStatusUpdateFrequency": format!("{:?}", o.node_status_update_frequency),
    })
}

#[allow(clippy::too_many_arguments)]
async fn run(
    o: ManagerOptions,
    client: kube::Client,
    provider: Arc<dyn CloudProvider>,
    metrics: CcmMetrics,
    running: Family<Vec<(&'static str, String)>, Gauge>,
    checks: HealthChecks,
    identity: String,
    mut stop: watch::Receiver<bool>,
) -> Result<(), ManagerError> {
    let mut leadership = None;
    if o.leader_elect {
        let mut elector = LeaderElector::new(
            client.clone(),
            LeaseLock::new(
                &o.leader_elect_resource_namespace,
                &o.leader_elect_resource_name,
            ),
            identity,
            ElectionConfig {
                lease_duration: o.leader_elect_lease_duration,
                renew_deadline: o.leader_elect_renew_deadline,
                retry_period: o.leader_elect_retry_period,
                release_on_cancel: true,
            },
        );
        match elector
            .acquire(stop.clone())
            .await
            .map_err(|e| ManagerError::Election(e.to_string()))?
        {
            Some(l) => {
                checks.add("leaderElection", l.health_check(Duration::from_secs(20)));
                leadership = Some(l);
            }
            None => return Ok(()),
        }
    }

    let (shutdown_trigger, shutdown) = ShutdownSignal::new();
    let init = InitContext::new(o.cluster_name.clone(), shutdown, Arc::new(TokioSpawner))
        .with_extension(client.clone());
    if let Err(e) = provider.initialize(&init).await {
        return Err(ManagerError::Provider {
            name: o.cloud_provider.clone(),
            message: format!("initialize: {e}"),
        });
    }

    let (halt, halted) = watch::channel(false);
    let known = known_controllers();
    // `start` validated the flags: these parse.
    let entries = canonicalize(&o.controllers, &known).unwrap_or_default();
    let mut tasks = Vec::new();
    for name in enabled(&known, &entries) {
        let Some(controller) = build(name, &o, &client, &provider, &metrics) else {
            continue;
        };
        let health = ControllerHealth::new();
        checks.add(name, health.clone());
        running
            .get_or_create(&vec![
                ("name", name.to_owned()),
                ("manager", "cloud-controller-manager".to_owned()),
            ])
            .set(1);
        tracing::info!(controller = name, "starting");
        tasks.push((name, tokio::spawn(controller(health, halted.clone()))));
        if !o.controller_start_interval.is_zero() {
            tokio::time::sleep(o.controller_start_interval).await;
        }
    }

    let lost = async {
        match leadership.as_mut() {
            Some(l) => l.lost().await,
            None => std::future::pending().await,
        }
    };
    let stopped = async {
        while !*stop.borrow() {
            if stop.changed().await.is_err() {
                break;
            }
        }
    };
    let outcome = tokio::select! {
        biased;
        _ = stopped => Ok(()),
        _ = lost => Err(ManagerError::LostLeadership),
    };
    let _ = halt.send(true);
    shutdown_trigger.trigger();
    for (name, task) in tasks {
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
    }
    if let Some(l) = leadership {
        l.release().await;
    }
    outcome
}

type Start =
    Box<dyn FnOnce(ControllerHealth, watch::Receiver<bool>) -> BoxFuture<'static, ()> + Send>;

/// The controller `name`, configured from the flags, or `None` when its
/// flags or the provider leave it off (Go logs and skips it too).
fn build(
    name: &str,
    o: &ManagerOptions,
    client: &kube::Client,
    provider: &Arc<dyn CloudProvider>,
    metrics: &CcmMetrics,
) -> Option<Start> {
    let (client, provider, metrics) = (client.clone(), provider.clone(), metrics.clone());
    // Validated in `start`, like every flag read here.
    let cluster_cidrs = parse_cidr_list("--cluster-cidr", &o.cluster_cidr).unwrap_or_default();
    let start: Start = if name == names::CLOUD_NODE.canonical {
        let config = NodeControllerConfig {
            workers: o.concurrent_node_syncs,
            cluster_name: o.cluster_name.clone(),
            status_update_frequency: o.node_status_update_frequency,
            write_concurrency: match o.concurrent_node_status_updates {
                0 => NodeControllerConfig::default().write_concurrency,
                n => n,
            },
            refresh_labels: o.refresh_node_labels,
            ..Default::default()
        };
        Box::new(move |health, stop| {
            Box::pin(
                NodeController::new(client, provider, config)
                    .with_metrics(metrics)
                    .with_health(health)
                    .run(stop),
            )
        })
    } else if name == names::CLOUD_NODE_LIFECYCLE.canonical {
        let config = LifecycleConfig {
            monitor_period: o.node_monitor_period,
            gone_confirmations: o.node_gone_confirmations,
            min_node_age: o.node_min_age_before_deletion,
        };
        Box::new(move |health, stop| {
            Box::pin(
                LifecycleController::new(client, provider, config)
                    .with_metrics(metrics)
                    .with_health(health)
                    .run(stop),
            )
        })
    } else if name == names::SERVICE_LB.canonical {
        let config = ServiceControllerConfig {
            workers: o.concurrent_service_syncs,
            cluster_name: o.cluster_name.clone(),
            drift_check_period: (!o.load_balancer_drift_check_period.is_zero())
                .then_some(o.load_balancer_drift_check_period),
        };
        Box::new(move |health, stop| {
            Box::pin(
                ServiceController::new(client, provider, config)
                    .with_metrics(metrics)
                    .with_health(health)
                    .run(stop),
            )
        })
    } else if name == names::NODE_ROUTE.canonical {
        if !o.configure_cloud_routes || provider.routes().is_none() || cluster_cidrs.is_empty() {
            tracing::info!(
                "the route controller is not started (--configure-cloud-routes, a provider with routes and --cluster-cidr are needed)"
            );
            return None;
        }
        let mut config = RouteControllerConfig::new(cluster_cidrs);
        config.cluster_name = o.cluster_name.clone();
        config.reconcile_period = o.route_reconciliation_period;
        Box::new(move |health, stop| {
            Box::pin(
                RouteController::new(client, provider, config)
                    .with_metrics(metrics)
                    .with_health(health)
                    .run(stop),
            )
        })
    } else if name == names::NODE_IPAM.canonical {
        if !o.allocate_node_cidrs {
            return None;
        }
        let mut config = NodeIpamConfig::new(cluster_cidrs);
        config.service_cidrs =
            parse_cidr_list("--service-cluster-ip-range", &o.service_cluster_ip_range)
                .unwrap_or_default();
        config.node_cidr_mask_size_ipv4 = o.node_cidr_mask_size_ipv4;
        config.node_cidr_mask_size_ipv6 = o.node_cidr_mask_size_ipv6;
        let controller = match NodeIpamController::new(client, config) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "the node-ipam controller is not started");
                return None;
            }
        };
        Box::new(move |health, stop| {
            Box::pin(
                controller
                    .with_metrics(metrics)
                    .with_health(health)
                    .run(stop),
            )
        })
    } else {
        return None;
    };
    Some(start)
}
