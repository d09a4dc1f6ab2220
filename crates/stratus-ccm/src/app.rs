//! The manager command's building blocks (Go's `app` and `options`
//! packages): the flags with Go's names and defaults and their validation,
//! Go durations, `--controllers` selection, and [`CloudControllerManager`],
//! which runs the enabled controllers from them (admin server, leader
//! election, provider initialization, start order, graceful stop).
//!
//! ```
//! use clap::Parser;
//! use stratus_ccm::app::{ManagerOptions, known_controllers};
//!
//! #[derive(Parser)]
//! struct Command {
//!     #[command(flatten)]
//!     options: ManagerOptions,
//! }
//!
//! let command = Command::parse_from(["my-ccm", "--cloud-provider=fake", "--controllers=*,-route"]);
//! assert!(command.options.validate(&known_controllers()).is_empty());
//! assert_eq!(command.options.secure_serving.secure_port, 10258);
//! ```

mod builtin;
mod command;
mod controllers;
pub mod deploy;
mod logging;
mod managed;
mod manager;
mod options;
mod registry;

pub use builtin::{default_controllers, rule};
pub use command::{Command, CommandError, NoFlags, run_main, run_with_args};
pub use controllers::{KnownController, UnknownController, canonicalize, enabled, is_enabled};
pub use logging::vmodule_level;
pub use managed::{ControllerContext, ControllerTask, ManagedController, StartError, Started};
pub use manager::{
    CloudControllerManager, ManagerError, ProviderFactory, RunningManager, TokioSpawner,
};
pub use options::{
    AuthenticationOptions, AuthorizationOptions, DebuggingOptions, FEATURE_GATES, GenericOptions,
    KubeCloudSharedOptions, LeaderMigrationOptions, LogsOptions, ManagerOptions, MetricsOptions,
    NodeControllerOptions, NodeIpamControllerOptions, OptionsError, SecureServingOptions,
    ServiceControllerOptions, VmoduleRule, WebhookOptions, WebhookServingOptions, parse_cidr_list,
};
pub use registry::{
    CloudFactory, EXTERNAL_PROVIDER, InitError, ProviderRegistry, RegistryError, global_registry,
    init_cloud_provider, is_cloud_provider, is_external, register_cloud_provider,
};
pub use stratus_runtime::admission::{HandlerError, Webhook};
pub use stratus_runtime::duration::{DurationError, parse_go_duration};

/// What `--controllers` knows of [`default_controllers`], in start order.
pub fn known_controllers() -> Vec<KnownController> {
    default_controllers().iter().map(|c| c.known()).collect()
}
