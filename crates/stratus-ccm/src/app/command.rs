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
//!     stratus_cloud::register_cloud_provider("my-cloud", |_config| {
//!         Ok(Arc::new(MyCloud) as Arc<dyn CloudProvider>)
//!     })
//!     .expect("registered once");
//!     stratus_ccm::app::run_main()
//! }
//! ```

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;
use tokio::sync::watch;

use super::{CloudControllerManager, ManagerError, ManagerOptions};

/// `cloud-controller-manager [flags]`.
#[derive(Debug, Parser)]
#[command(
    name = "cloud-controller-manager",
    version,
    about = "The Cloud controller manager: runs the cloud-specific control loops of a Kubernetes cluster."
)]
struct Cli {
    #[command(flatten)]
    options: ManagerOptions,
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

/// Parse `args` (the first is the program name) and run the manager until
/// `stop` becomes true. Logging is the caller's (see [`run_main`]).
pub async fn run_with_args<I, T>(args: I, stop: watch::Receiver<bool>) -> Result<(), CommandError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = Cli::try_parse_from(args)?;
    CloudControllerManager::new(cli.options).run(stop).await?;
    Ok(())
}

/// Set up logging from `-v` and `--logging-format` (text or json), on
/// standard error. `RUST_LOG`, when set, takes precedence over `-v`.
fn init_logging(options: &ManagerOptions) {
    let level = match options.verbosity {
        0..=3 => "info",
        4 | 5 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second initialization (tests, embedding) keeps the first.
    let _ = if options.logging_format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// Wait for SIGTERM or Ctrl-C.
async fn terminated() {
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

/// The whole `main` of a manager: parse the process arguments, set up
/// logging, run until SIGTERM or Ctrl-C (then stop the controllers and
/// release the Lease), and exit 0, or 1 with the reason on standard error
/// (2 for bad arguments, 0 after `--help` / `--version`).
pub fn run_main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    init_logging(&cli.options);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(async move {
            terminated().await;
            tracing::info!("stopping: releasing the lease and stopping the controllers");
            let _ = stop.send(true);
        });
        match CloudControllerManager::new(cli.options).run(stopped).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        }
    })
}
