//! Shared controller machinery for Stratus.
//!
//! ```
//! use prometheus_client::registry::Registry;
//! use stratus_runtime::health::{ControllerHealth, HealthChecks};
//! use stratus_runtime::metrics::{RuntimeMetrics, encode_text};
//! use stratus_runtime::workqueue::{WorkQueue, default_controller_rate_limiter};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! // One registry and one set of health checks per process.
//! let mut registry = Registry::default();
//! let metrics = RuntimeMetrics::register(&mut registry);
//! let checks = HealthChecks::new();
//! let health = ControllerHealth::new();
//! checks.add("my-controller", health.clone());
//!
//! // A controller's queue, with client-go's semantics and metrics.
//! let queue = WorkQueue::with_metrics(default_controller_rate_limiter(), metrics.workqueue.queue("my-controller"));
//! queue.add("default/web".to_string());
//! let key = queue.get().await.unwrap();
//! queue.done(&key);
//!
//! assert_eq!(checks.report().render(false), "ok");
//! assert!(encode_text(&registry).unwrap().contains("workqueue_adds_total{name=\"my-controller\"} 1"));
//! # });
//! ```
//!
//! - [`admin`]: the admin server: `/healthz`, `/livez`, `/readyz`,
//!   `/metrics` and `/configz` over TLS.
//! - [`admission`]: admission webhooks (`AdmissionReview` v1 handlers on
//!   paths) with request metrics, as Go's managers host them.
//! - [`auth`]: delegated authentication (client certificates, TokenReview)
//!   and authorization (SubjectAccessReview) with caches, as Kubernetes
//!   components protect their HTTPS endpoints.
//! - [`client`]: a `kube::Client` with a QPS / burst budget and a user agent.
//! - [`controller`]: one controller shape: shared informers feeding a
//!   work queue, workers running a `reconcile` per key (or per batch),
//!   with health and reconcile metrics.
//! - [`command`]: what the manager and virtual-kubelet commands share
//!   (parsing with the vendor's flags flattened in, [`command::NoFlags`],
//!   [`command::VendorFlags`]).
//! - [`duration`]: Go's duration syntax for command-line flags.
//! - [`events`]: `core/v1` Event recording with Go's component names.
//! - [`health`]: named health checks, one per controller, rendered as
//!   `/healthz` answers.
//! - [`informer`]: a reflector store fed by a watch (client-go's
//!   informer), with change and relist callbacks and health reporting.
//! - [`leader_election`]: Lease-based leader election with client-go's
//!   semantics, interoperable with Go managers on the same Lease.
//! - [`metrics`]: prometheus-client families for work queues (client-go's
//!   `workqueue_*` names), reconciles and cloud calls.
//! - [`registry`]: factories by name, the one registry type of the
//!   manager and virtual-kubelet commands.
//! - [`serving`]: the HTTPS accept loop of the admin, webhook and kubelet
//!   servers (HTTP/1.1, HTTP/2, upgrades, verified client certificates).
//! - [`tls`]: serving certificates, self-signed in memory or from PEM
//!   files, and the certificate authority (`stratus-pki`'s).
//! - [`tls_policy`]: what a server's TLS accepts, from Go's flags, and the
//!   rustls server configuration built under it.
//! - [`wait`]: randomized waits (apimachinery's `wait.Jitter`) for
//!   resyncs, retries and start-up pauses.
//! - [`workqueue`]: a work queue with client-go's dedup, backoff and
//!   bounded-worker semantics (the overall bucket applies to retries only).

pub mod admin;
pub mod admission;
pub mod auth;
pub mod client;
pub mod command;
pub mod controller;
pub mod duration;
pub mod events;
pub mod health;
pub mod informer;
pub mod leader_election;
pub mod metrics;
pub mod registry;
pub mod serving;
pub mod tls;
pub mod tls_policy;
pub mod wait;
pub mod workqueue;

pub use leader_election::{
    ElectionConfig, ElectionError, LeaderElector, LeaderHealth, Leadership, LeaseLock,
};

/// Resolves once `stop` is true, or its sender is gone (a stop signal
/// nobody can set any more). The guard `wait_for` returns is dropped
/// inside, so callers' futures stay `Send`.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let (tx, mut rx) = tokio::sync::watch::channel(false);
/// tx.send(true).unwrap();
/// stratus_runtime::stopped(&mut rx).await;
/// # });
/// ```
pub async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT): the end of a manager's or a
/// node's `main`. Without signal support, Ctrl-C only.
///
/// ```no_run
/// # async fn run() {
/// stratus_runtime::terminated().await;
/// println!("stopping");
/// # }
/// ```
pub async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The body of a component's `main`: start a multi-threaded Tokio
/// runtime, run `component` with a stop signal that becomes true on
/// SIGTERM or Ctrl-C (logging `stopping`), and exit 0, or 1 with its error
/// on standard error.
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     stratus_runtime::run_until_terminated("stopping the controllers", |mut stop| async move {
///         stratus_runtime::stopped(&mut stop).await;
///         Ok::<(), std::io::Error>(())
///     })
/// }
/// ```
pub fn run_until_terminated<F, Fut, E>(
    stopping: &'static str,
    component: F,
) -> std::process::ExitCode
where
    F: FnOnce(tokio::sync::watch::Receiver<bool>) -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            terminated().await;
            tracing::info!("{stopping}");
            let _ = stop.send(true);
        });
        match component(stopped).await {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                std::process::ExitCode::FAILURE
            }
        }
    })
}
