//! Controllers the manager runs (Go's `ControllerInitFuncConstructor`):
//! the built-in ones and a vendor's own, each with its names, whether `*`
//! includes it, and how it starts from a [`ControllerContext`].

use std::any::Any;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use k8s_openapi::api::rbac::v1::PolicyRule;
use stratus_cloud::CloudProvider;
use stratus_cloud::names::ControllerNames;
use stratus_runtime::command::VendorFlags;
use stratus_runtime::health::ControllerHealth;
use tokio::sync::watch;

use super::ManagerOptions;
use super::controllers::KnownController;
use crate::metrics::CcmMetrics;

/// A running controller: it returns once `stop` becomes true.
pub type ControllerTask = BoxFuture<'static, ()>;

/// Why a controller could not start; the manager stops with it (as Go's
/// manager exits when an `InitFunc` fails).
pub type StartError = Box<dyn std::error::Error + Send + Sync>;

/// What a controller's start function decided (Go's `InitFunc` returns
/// `(controller, enabled, err)`).
///
/// ```
/// use stratus_ccm::app::Started;
///
/// let skipped = Started::not_enabled("the cloud offers no load balancers");
/// assert_eq!(skipped.reason(), Some("the cloud offers no load balancers"));
/// assert!(Started::run(async {}).reason().is_none());
/// ```
pub enum Started {
    /// It runs: the task returns once the context's `stop` becomes true.
    Running(ControllerTask),
    /// It does not run here, and why (the provider lacks a capability, a
    /// flag leaves it off). The manager logs the reason once, registers no
    /// health check for it and shows it as not started in `/readyz` and
    /// `/configz`.
    NotEnabled(String),
}

impl Started {
    /// Run `task`.
    pub fn run(task: impl std::future::Future<Output = ()> + Send + 'static) -> Self {
        Self::Running(Box::pin(task))
    }

    /// Do not run, for `reason`.
    pub fn not_enabled(reason: impl Into<String>) -> Self {
        Self::NotEnabled(reason.into())
    }

    /// Why it does not run, if it does not.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::Running(_) => None,
            Self::NotEnabled(reason) => Some(reason),
        }
    }
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Running(_) => f.write_str("Running"),
            Self::NotEnabled(reason) => f.debug_tuple("NotEnabled").field(reason).finish(),
        }
    }
}

/// What a controller gets when the manager starts it, after leadership is
/// won and the provider is initialized.
#[derive(Clone)]
pub struct ControllerContext {
    /// The controller's API client: the manager's (QPS / burst budget
    /// shared by every controller), or with
    /// `--use-service-account-credentials` its own, authenticated as the
    /// ServiceAccount `kube-system/<names.client>`.
    pub client: kube::Client,
    /// The initialized provider.
    pub provider: Arc<dyn CloudProvider>,
    /// The parsed manager flags.
    pub options: Arc<ManagerOptions>,
    /// The manager's metric families (Go's names).
    pub metrics: CcmMetrics,
    /// The controller's `/healthz/<name>` check: report watch failures and
    /// completed passes to it.
    pub health: ControllerHealth,
    /// The resync period for the controller's informers (see
    /// [`Informer::resync_every`](stratus_runtime::informer::Informer::resync_every)):
    /// drawn once per start between `--min-resync-period` and twice it, as
    /// Go's `ResyncPeriod`, and the same for every controller.
    pub resync_period: std::time::Duration,
    /// The manager's shared Node and Service informers: subscribe to them
    /// rather than watching the kinds again (one list, one watch and one
    /// cache per kind for the whole manager).
    pub informers: crate::informers::SharedInformers,
    /// Becomes true when the controller must stop (shutdown or lost
    /// leadership).
    pub stop: watch::Receiver<bool>,
    pub(crate) flags: Option<VendorFlags>,
}

impl std::fmt::Debug for ControllerContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerContext")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl ControllerContext {
    /// The vendor's own flags, when the command was built with them (see
    /// [`Command::with_flags`](super::Command::with_flags)) and `F` is their
    /// type.
    pub fn flags<F: Any>(&self) -> Option<&F> {
        self.flags.as_ref()?.get()
    }
}

type Start = Arc<dyn Fn(ControllerContext) -> Result<Started, StartError> + Send + Sync>;

/// A controller the manager can run.
///
/// ```
/// use stratus_ccm::app::{ManagedController, Started};
/// use stratus_cloud::names::ControllerNames;
///
/// // AWS's `tagging` controller is of this kind: the vendor's own, run only
/// // when named in `--controllers`, and only on a cloud with instances.
/// let tagging = ManagedController::new(ControllerNames::new("tagging-controller", "tagging"), |ctx| {
///     if ctx.provider.instances_v2().is_none() {
///         return Ok(Started::not_enabled("the cloud provider offers no instances"));
///     }
///     let mut stop = ctx.stop.clone();
///     Ok(Started::run(async move {
///         // ... watch, reconcile, report to ctx.health ...
///         let _ = stop.wait_for(|stopped| *stopped).await;
///     }))
/// })
/// .disabled_by_default();
/// assert_eq!(tagging.names().alias, "tagging");
/// ```
#[derive(Clone)]
pub struct ManagedController {
    names: ControllerNames,
    disabled_by_default: bool,
    rules: Vec<PolicyRule>,
    start: Start,
}

impl std::fmt::Debug for ManagedController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagedController")
            .field("names", &self.names)
            .field("disabled_by_default", &self.disabled_by_default)
            .finish_non_exhaustive()
    }
}

impl ManagedController {
    /// The controller `names`, started by `start`: [`Started::Running`]
    /// runs it, [`Started::NotEnabled`] skips it with a reason (its flags or
    /// the provider leave it off; Go's `enabled=false`), `Err` stops the
    /// manager.
    pub fn new<F>(names: ControllerNames, start: F) -> Self
    where
        F: Fn(ControllerContext) -> Result<Started, StartError> + Send + Sync + 'static,
    {
        Self {
            names,
            disabled_by_default: false,
            rules: Vec::new(),
            start: Arc::new(start),
        }
    }

    /// The API access it needs, which the deploy manifests grant it (one
    /// ClusterRole per controller, written by the `deploy` module).
    pub fn rbac(mut self, rules: Vec<PolicyRule>) -> Self {
        self.rules = rules;
        self
    }

    /// The API access it declared.
    pub fn rules(&self) -> &[PolicyRule] {
        &self.rules
    }

    /// Leave it out of `*`: it runs only when `--controllers` names it
    /// (Go's `ControllersDisabledByDefault`).
    pub fn disabled_by_default(mut self) -> Self {
        self.disabled_by_default = true;
        self
    }

    /// Its names.
    pub fn names(&self) -> ControllerNames {
        self.names
    }

    /// What `--controllers` knows of it.
    pub fn known(&self) -> KnownController {
        KnownController {
            names: self.names,
            disabled_by_default: self.disabled_by_default,
        }
    }

    pub(crate) fn start(&self, ctx: ControllerContext) -> Result<Started, StartError> {
        (self.start)(ctx)
    }
}
