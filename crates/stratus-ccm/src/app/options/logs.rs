//! The log flags.

use std::time::Duration;

use clap::Args;
use stratus_runtime::duration::parse_go_duration;

/// The log flags (Go's `logs.Options`, in the `global` group).
#[derive(Debug, Clone, Args)]
pub struct LogsOptions {
    /// Log verbosity (0: info, 4 and above: debug, 6 and above: trace).
    #[arg(short = 'v', long = "v", default_value_t = 0, help_heading = "global")]
    pub verbosity: u8,
    /// Log format: text or json.
    #[arg(
        long = "logging-format",
        default_value = "text",
        help_heading = "global"
    )]
    pub logging_format: String,
    /// Per-module verbosity, `pattern=N` pairs: a pattern matches a module
    /// (a `::` segment of the log target, `*` globs), e.g.
    /// `service=4,node*=6`.
    #[arg(long = "vmodule", value_delimiter = ',', help_heading = "global")]
    pub vmodule: Vec<String>,
    /// The longest time between log flushes (logs are written unbuffered,
    /// so every line is flushed at once).
    #[arg(long = "log-flush-frequency", value_parser = parse_go_duration, default_value = "5s", help_heading = "global")]
    pub log_flush_frequency: Duration,
}
