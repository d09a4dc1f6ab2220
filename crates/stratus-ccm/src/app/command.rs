//! The command line of a manager: what a vendor's `main` calls after
//! registering its provider.
//!
//! ```no_run
//! use std::sync::Arc;
//! use stratus_cloud::CloudProvider;
//!
//! /// A provider with no capabilities yet: the controllers that need one
//! /// log that it is missing and do not start.
//! struct MyCloud;
//!
//! impl CloudProvider for MyCloud {
//!     fn provider_name(&self) -> &str {
//!         "my-cloud"
//!     }
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     stratus_ccm::app::register_cloud_provider("my-cloud", |_config| {
//!         Ok(Arc::new(MyCloud) as Arc<dyn CloudProvider>)
//!     })
//!     .expect("registered once");
//!     stratus_ccm::app::run_main()
//! }
//! ```

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser};
use prometheus_client::registry::Registry;
use stratus_cloud::CloudProvider;
use stratus_runtime::admission::Webhook;
use stratus_runtime::command::Launcher;
pub use stratus_runtime::command::NoFlags;
use tokio::sync::watch;

use super::managed::{ManagedController, StartError};
use super::{CloudControllerManager, ManagerError, ManagerOptions, default_controllers};

/// `cloud-controller-manager [flags]`: the manager's flags and the
/// vendor's.
#[derive(Debug, Parser)]
#[command(
    name = "cloud-controller-manager",
    version,
    about = "The Cloud controller manager: runs the cloud-specific control loops of a Kubernetes cluster.",
    disable_help_flag = true,
    disable_version_flag = true
)]
struct Cli<F: Args> {
    #[command(flatten)]
    options: ManagerOptions,
    /// Print help.
    #[arg(short = 'h', long = "help", action = clap::ArgAction::Help, help_heading = "global")]
    help: Option<bool>,
    /// Print version information and quit.
    #[arg(short = 'V', long = "version", action = clap::ArgAction::Version, help_heading = "global")]
    version: Option<bool>,
    #[command(flatten)]
    flags: F,
}

/// Why the command failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The arguments do not parse (also `--help` and `--version`, whose
    /// text this carries).
    #[error("{0}")]
    Args(#[from] clap::Error),
    /// The manager failed.
    #[error(transparent)]
    Manager(#[from] ManagerError),
}

type CloudInitializer<F> =
    Box<dyn FnOnce(&ManagerOptions, &F) -> Result<Arc<dyn CloudProvider>, StartError> + Send>;

/// The manager command a vendor's `main` builds (Go's `CommandBuilder`):
/// the controllers (the built-in ones plus the vendor's), admission
/// webhooks, the vendor's own flags, and optionally a built-in provider
/// made from them (Go's `InitCloudFunc`). It has the virtual kubelet
/// command's verbs: [`provider`](Self::provider),
/// [`default_provider`](Self::default_provider),
/// [`with_version`](Self::with_version), `run_main` and `run_with_args`.
///
/// ```no_run
/// use std::sync::Arc;
/// use stratus_ccm::app::{Command, ManagedController, Started, Webhook};
/// use stratus_cloud::CloudProvider;
/// use stratus_cloud::names::ControllerNames;
///
/// /// The vendor's flags, in their own `--help` group.
/// #[derive(Debug, Clone, clap::Args)]
/// #[command(next_help_heading = "my-cloud")]
/// struct MyFlags {
///     /// The cloud API endpoint.
///     #[arg(long = "my-cloud-endpoint", default_value = "https://api.example.com")]
///     endpoint: String,
/// }
///
/// struct MyCloud {
///     endpoint: String,
/// }
///
/// impl CloudProvider for MyCloud {
///     fn provider_name(&self) -> &str {
///         "my-cloud"
///     }
/// }
///
/// fn main() -> std::process::ExitCode {
///     Command::with_flags::<MyFlags>()
///         .provider("my-cloud", |_options, flags: &MyFlags| {
///             Ok(Arc::new(MyCloud { endpoint: flags.endpoint.clone() }) as Arc<dyn CloudProvider>)
///         })
///         .controller(
///             ManagedController::new(ControllerNames::new("tagging-controller", "tagging"), |ctx| {
///                 let endpoint = ctx.flags::<MyFlags>().map(|f| f.endpoint.clone());
///                 let mut stop = ctx.stop.clone();
///                 Ok(Started::run(async move {
///                     tracing::info!(?endpoint, "tagging");
///                     let _ = stop.wait_for(|s| *s).await;
///                 }))
///             })
///             .disabled_by_default(),
///         )
///         .webhook(Webhook::new("allow-all", "/allow", |request| async move {
///             Ok(kube::core::admission::AdmissionResponse::from(&request))
///         }))
///         .run_main()
/// }
/// ```
pub struct Command<F = NoFlags> {
    controllers: Vec<ManagedController>,
    webhooks: Vec<Webhook>,
    registry: Option<Registry>,
    /// The version, the built-in provider and the default one.
    launcher: Launcher<CloudInitializer<F>>,
}

impl<F> std::fmt::Debug for Command<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Command")
            .field("controllers", &self.controllers)
            .field("webhooks", &self.webhooks)
            .field("launcher", &self.launcher)
            .finish_non_exhaustive()
    }
}

impl Default for Command<NoFlags> {
    fn default() -> Self {
        Self::new()
    }
}

impl Command<NoFlags> {
    /// The command with the built-in controllers, no webhooks and no vendor
    /// flags; the provider comes from the registry (`--cloud-provider`).
    pub fn new() -> Self {
        Self::with_flags()
    }

    /// The same, with the vendor's flags `G` next to the manager's; the
    /// cloud initializer and the controllers (through
    /// [`ControllerContext::flags`](super::ControllerContext::flags)) get
    /// them parsed.
    pub fn with_flags<G>() -> Command<G> {
        Command {
            controllers: default_controllers(),
            webhooks: Vec::new(),
            registry: None,
            launcher: Launcher::new(),
        }
    }
}

impl<F> Command<F>
where
    F: Args + Send + Sync + 'static,
{
    /// Run `controller` too, after those already registered.
    pub fn controller(mut self, controller: ManagedController) -> Self {
        self.controllers.push(controller);
        self
    }

    /// Drop the controller with this canonical name (a built-in one the
    /// vendor replaces or does not want).
    pub fn without_controller(mut self, canonical: &str) -> Self {
        self.controllers
            .retain(|c| c.names().canonical != canonical);
        self
    }

    /// Register an admission webhook (served when `--webhooks` enables it).
    pub fn webhook(mut self, webhook: Webhook) -> Self {
        self.webhooks.push(webhook);
        self
    }

    /// A built-in provider called `name`, made by `initializer` from the
    /// validated flags and the vendor's, typed (Go's `InitCloudFunc`):
    /// `--cloud-provider=name` runs it, and so does no `--cloud-provider`
    /// at all unless [`default_provider`](Self::default_provider) named
    /// another; any other `--cloud-provider` is looked up in the registry.
    pub fn provider<I>(mut self, name: impl Into<String>, initializer: I) -> Self
    where
        I: FnOnce(&ManagerOptions, &F) -> Result<Arc<dyn CloudProvider>, StartError>
            + Send
            + 'static,
    {
        self.launcher = self.launcher.provider(name, Box::new(initializer));
        self
    }

    /// Run the registered provider `name` when `--cloud-provider` is not
    /// given (a binary built for one cloud). Without a default (and without
    /// a built-in provider) `--cloud-provider` is required, as in Go.
    ///
    /// ```
    /// use stratus_ccm::app::{Command, CommandError, ManagerError};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let (_stop, stopped) = tokio::sync::watch::channel(false);
    /// let outcome = Command::new()
    ///     .default_provider("nowhere")
    ///     .run_with_args(["acme-cloud-controller-manager", "--kubeconfig=/nonexistent"], stopped)
    ///     .await;
    /// // The flags are valid: no --cloud-provider is needed.
    /// assert!(!matches!(outcome, Err(CommandError::Args(_))
    ///     | Err(CommandError::Manager(ManagerError::Options(_)))), "{outcome:?}");
    /// # });
    /// ```
    pub fn default_provider(mut self, name: impl Into<String>) -> Self {
        self.launcher = self.launcher.default_provider(name);
        self
    }

    /// Export the manager's metrics in this registry, next to the vendor's.
    pub fn registry(mut self, registry: Registry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// The version `--version` prints: the vendor binary's (typically
    /// `env!("CARGO_PKG_VERSION")`) instead of the SDK's.
    ///
    /// ```
    /// use stratus_ccm::app::{Command, CommandError};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let (_stop, stopped) = tokio::sync::watch::channel(false);
    /// let outcome = Command::new()
    ///     .with_version("2.3.4")
    ///     .run_with_args(["acme-cloud-controller-manager", "--version"], stopped)
    ///     .await;
    /// let Err(CommandError::Args(printed)) = outcome else { panic!() };
    /// assert!(printed.to_string().ends_with(" 2.3.4\n"), "{printed}");
    /// # });
    /// ```
    pub fn with_version(mut self, version: &'static str) -> Self {
        self.launcher = self.launcher.with_version(version);
        self
    }

    /// The manager of the parsed `cli`: `--cloud-provider` filled in with
    /// the default when empty, the built-in provider if it names it.
    fn manager(self, cli: Cli<F>) -> CloudControllerManager {
        let (mut options, flags) = (cli.options, Arc::new(cli.flags));
        let built_in = self.launcher.select(&mut options.cloud.cloud_provider);
        let mut manager = CloudControllerManager::new(options)
            .with_controllers(self.controllers)
            .with_flags(flags.clone());
        for webhook in self.webhooks {
            manager = manager.with_webhook(webhook);
        }
        if let Some(registry) = self.registry {
            manager = manager.with_registry(registry);
        }
        if let Some(initializer) = built_in {
            manager = manager
                .with_provider_factory(Box::new(move |options| initializer(options, &flags)));
        }
        manager
    }

    /// Parse `args` (the first is the program name) and run the manager
    /// until `stop` becomes true. Logging is the caller's (see
    /// [`Command::run_main`]).
    pub async fn run_with_args<I, T>(
        self,
        args: I,
        stop: watch::Receiver<bool>,
    ) -> Result<(), CommandError>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let cli: Cli<F> = self.launcher.parse(args)?;
        self.manager(cli).run(stop).await?;
        Ok(())
    }

    /// The whole `main` of a manager: parse the process arguments, set up
    /// logging, run until SIGTERM or Ctrl-C (then stop the controllers and
    /// release the Lease), and exit 0, or 1 with the reason on standard
    /// error (2 for bad arguments, 0 after `--help` / `--version`).
    pub fn run_main(self) -> ExitCode {
        self.run_main_with_args(std::env::args_os())
    }

    /// [`Command::run_main`] with these arguments (the first is the program
    /// name) instead of the process's: for a binary that runs the manager
    /// as one of several commands. Call it outside any async runtime (it
    /// starts its own).
    pub fn run_main_with_args<I, T>(self, args: I) -> ExitCode
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let cli: Cli<F> = match self.launcher.parse(args) {
            Ok(cli) => cli,
            Err(e) => e.exit(),
        };
        super::logging::init_logging(&cli.options);
        let manager = self.manager(cli);
        stratus_runtime::run_until_terminated(
            "stopping: releasing the lease and stopping the controllers",
            |stopped| manager.run(stopped),
        )
    }
}

/// Parse `args` (the first is the program name) and run the manager with
/// the built-in controllers until `stop` becomes true
/// (`Command::new().run_with_args(..)`).
pub async fn run_with_args<I, T>(args: I, stop: watch::Receiver<bool>) -> Result<(), CommandError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    Command::new().run_with_args(args, stop).await
}

/// The whole `main` of a manager with the built-in controllers and the
/// registry's provider (`Command::new().run_main()`).
pub fn run_main() -> ExitCode {
    Command::new().run_main()
}
