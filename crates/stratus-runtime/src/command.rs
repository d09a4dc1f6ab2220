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

/// What the manager's and the virtual kubelet's `Command` builders share,
/// so both have the same verbs: the vendor binary's version
/// ([`with_version`](Self::with_version)), a built-in provider made from
/// the typed flags ([`provider`](Self::provider)), the provider run when no
/// flag names one ([`default_provider`](Self::default_provider)), and the
/// parse that applies them. `I` is the command's provider initializer.
///
/// ```
/// use stratus_runtime::command::Launcher;
///
/// #[derive(Debug, clap::Parser)]
/// #[command(name = "acme-node", version)]
/// struct Cli {
///     #[arg(long, default_value = "")]
///     provider: String,
/// }
///
/// let launcher = Launcher::new().with_version("2.3.4").provider("acme", "the initializer");
/// let mut cli: Cli = launcher.parse(["acme-node"]).unwrap();
/// // No --provider: the built-in one, which is also the default.
/// assert_eq!(launcher.select(&mut cli.provider), Some("the initializer"));
/// assert_eq!(cli.provider, "acme");
///
/// let err = Launcher::<()>::new().with_version("2.3.4").parse::<Cli, _, _>(["acme-node", "--version"]);
/// assert_eq!(err.err().unwrap().to_string(), "acme-node 2.3.4\n");
/// ```
pub struct Launcher<I> {
    version: Option<&'static str>,
    default_provider: Option<String>,
    built_in: Option<(String, I)>,
}

impl<I> Default for Launcher<I> {
    fn default() -> Self {
        Self {
            version: None,
            default_provider: None,
            built_in: None,
        }
    }
}

impl<I> std::fmt::Debug for Launcher<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launcher")
            .field("version", &self.version)
            .field("default_provider", &self.default_provider)
            .field("built_in", &self.built_in.as_ref().map(|(name, _)| name))
            .finish()
    }
}

impl<I> Launcher<I> {
    /// No version of its own, no built-in provider, no default.
    pub fn new() -> Self {
        Self::default()
    }

    /// `--version` prints `version` (the vendor binary's, typically
    /// `env!("CARGO_PKG_VERSION")`) instead of the SDK's.
    pub fn with_version(mut self, version: &'static str) -> Self {
        self.version = Some(version);
        self
    }

    /// The vendor binary's version, if set.
    pub fn version(&self) -> Option<&'static str> {
        self.version
    }

    /// Run `name` when the command's provider flag is empty.
    pub fn default_provider(mut self, name: impl Into<String>) -> Self {
        self.default_provider = Some(name.into());
        self
    }

    /// A built-in provider called `name`, made by `initializer`; it is also
    /// the default unless [`default_provider`](Self::default_provider)
    /// named another (before or after).
    pub fn provider(mut self, name: impl Into<String>, initializer: I) -> Self {
        let name = name.into();
        self.default_provider.get_or_insert_with(|| name.clone());
        self.built_in = Some((name, initializer));
        self
    }

    /// Parse `args` (the first is the program name) into `C`, with this
    /// version (see [`parse_args_as`]).
    pub fn parse<C, A, T>(&self, args: A) -> Result<C, clap::Error>
    where
        C: CommandFactory + FromArgMatches,
        A: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        parse_args_as(args, self.version)
    }

    /// Settle the provider flag: an empty `flag` becomes the default
    /// provider (if there is one). The answer is the built-in provider's
    /// initializer if the flag then names it; otherwise the command looks
    /// the flag up in its registry.
    pub fn select(self, flag: &mut String) -> Option<I> {
        if flag.trim().is_empty()
            && let Some(name) = self.default_provider
        {
            *flag = name;
        }
        self.built_in
            .filter(|(name, _)| name == flag)
            .map(|(_, initializer)| initializer)
    }
}
