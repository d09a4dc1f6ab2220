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
//! assert_eq!(command.options.secure_port, 10258);
//! ```

mod command;
mod controllers;
mod duration;
mod manager;
mod options;

pub use command::{CommandError, run_main, run_with_args};
pub use controllers::{KnownController, UnknownController, canonicalize, enabled, is_enabled};
pub use duration::{DurationError, parse_go_duration};
pub use manager::{CloudControllerManager, ManagerError, RunningManager};
pub use options::{ManagerOptions, OptionsError, parse_cidr_list};

use stratus_cloud::names::controllers as names;

/// The controllers of this crate, in start order: Go's four (enabled by
/// `*`), then node-ipam (also under `*`; it runs only with
/// `--allocate-node-cidrs`, as in Go).
pub fn known_controllers() -> Vec<KnownController> {
    names::DEFAULT
        .iter()
        .chain(std::iter::once(&names::NODE_IPAM))
        .map(|n| KnownController {
            names: *n,
            disabled_by_default: false,
        })
        .collect()
}
