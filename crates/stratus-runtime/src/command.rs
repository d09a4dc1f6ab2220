//! What the manager and virtual-kubelet commands share: parsing a
//! command's flags with the vendor's flattened in, "no vendor flags", and
//! the vendor's parsed flags carried to controllers and provider factories
//! ([`VendorFlags`]). Running until SIGTERM is
//! [`run_until_terminated`](crate::run_until_terminated).
//!
//! ```
//! use clap::{Args, Parser};
//! use stratus_runtime::command::{NoFlags, VendorFlags, parse_args};
//!
//! #[derive(Debug, Clone, Args)]
//! struct Acme {
//!     /// The region.
//!     #[arg(long, default_value = "eu-1")]
//!     acme_region: String,
//! }
//!
//! #[derive(Debug, Parser)]
//! struct Cli<F: Args> {
//!     #[arg(long, default_value_t = 10)]
//!     workers: u32,
//!     #[command(flatten)]
//!     flags: F,
//! }
//!
//! let cli: Cli<Acme> = parse_args(["cmd", "--acme-region=us-2"]).unwrap();
//! assert_eq!((cli.workers, cli.flags.acme_region.as_str()), (10, "us-2"));
//! assert!(parse_args::<Cli<NoFlags>, _, _>(["cmd", "--acme-region=us-2"]).is_err());
//!
//! let flags = VendorFlags::new(cli.flags);
//! assert_eq!(flags.get::<Acme>().map(|a| a.acme_region.as_str()), Some("us-2"));
//! assert!(flags.get::<NoFlags>().is_none());
//! ```

use std::any::Any;
use std::ffi::OsString;
use std::sync::Arc;

use clap::{CommandFactory, FromArgMatches};

/// No vendor flags.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct NoFlags {}

/// Parse `args` (the first is the program name) into `C`, a command whose
/// vendor flags are flattened in: through `C::command()`, which knows the
/// flattened group, so `--help` lists it and unknown flags are errors.
pub fn parse_args<C, I, T>(args: I) -> Result<C, clap::Error>
where
    C: CommandFactory + FromArgMatches,
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    parse_args_as(args, None)
}

/// [`parse_args`], with `--version` printing `version` instead of the
/// SDK's (a vendor binary's own version, typically its
/// `env!("CARGO_PKG_VERSION")`).
///
/// ```
/// # #[derive(clap::Parser)] #[command(name = "acme-ccm", version)] struct Cli {}
/// let err = stratus_runtime::command::parse_args_as::<Cli, _, _>(["acme-ccm", "--version"], Some("2.3.4"))
///     .err()
///     .unwrap();
/// assert_eq!(err.to_string(), "acme-ccm 2.3.4\n");
/// ```
pub fn parse_args_as<C, I, T>(args: I, version: Option<&'static str>) -> Result<C, clap::Error>
where
    C: CommandFactory + FromArgMatches,
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut command = C::command();
    if let Some(version) = version {
        command = command.version(version);
    }
    let matches = command.try_get_matches_from(args)?;
    C::from_arg_matches(&matches)
}

/// The vendor's parsed flags, handed to code the command cannot make
/// generic over their type (controllers kept in one list, provider
/// factories registered by name): read them back with
/// [`get`](Self::get). Where the type is known — a command's cloud or
/// provider initializer — the flags are passed typed instead.
#[derive(Clone)]
pub struct VendorFlags(Arc<dyn Any + Send + Sync>);

impl VendorFlags {
    /// Carry `flags`.
    pub fn new<F: Any + Send + Sync>(flags: F) -> Self {
        Self(Arc::new(flags))
    }

    /// Carry flags already shared.
    pub fn from_arc<F: Any + Send + Sync>(flags: Arc<F>) -> Self {
        Self(flags)
    }

    /// The flags, if they are of type `F`.
    pub fn get<F: Any>(&self) -> Option<&F> {
        self.0.downcast_ref()
    }
}

impl std::fmt::Debug for VendorFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VendorFlags").finish_non_exhaustive()
    }
}
