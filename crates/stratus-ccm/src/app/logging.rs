//! The manager's logging flags: `-v`, `--vmodule`, `--logging-format`.

use tracing::Level;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use super::options::{ManagerOptions, VmoduleRule};

/// The most verbose level a `-v` verbosity shows (0–3: info, 4–5: debug,
/// 6 and above: trace).
fn level_of(verbosity: u8) -> Level {
    match verbosity {
        0..=3 => Level::INFO,
        4 | 5 => Level::DEBUG,
        _ => Level::TRACE,
    }
}

/// Whether `pattern` (`*` matches any run of characters) matches `text`.
fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, rest)) => {
            let Some(tail) = text.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len())
                .filter(|i| tail.is_char_boundary(*i))
                .any(|i| glob(rest, &tail[i..]))
        }
    }
}

/// The verbosity `--vmodule` gives the log target `target` (first rule
/// whose pattern matches one of its `::` segments), else `base`.
///
/// ```
/// use stratus_ccm::app::{VmoduleRule, vmodule_level};
///
/// let rules = [VmoduleRule { pattern: "serv*".into(), level: 6 }];
/// assert_eq!(vmodule_level(&rules, "stratus_ccm::service", 0), 6);
/// assert_eq!(vmodule_level(&rules, "stratus_ccm::node", 0), 0);
/// ```
pub fn vmodule_level(rules: &[VmoduleRule], target: &str, base: u8) -> u8 {
    rules
        .iter()
        .find(|r| target.split("::").any(|segment| glob(&r.pattern, segment)))
        .map_or(base, |r| r.level)
}

/// Set up logging from `-v`, `--vmodule` and `--logging-format` (text or
/// json), on standard error, unbuffered (every line is flushed at once,
/// within any `--log-flush-frequency`). `RUST_LOG`, when set, takes
/// precedence over `-v` and `--vmodule`.
pub(crate) fn init_logging(options: &ManagerOptions) {
    let json = options.logs.logging_format == "json";
    let layer = |json: bool| -> Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync> {
        let base = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
        if json {
            base.json().boxed()
        } else {
            base.boxed()
        }
    };
    // A second initialization (tests, embedding) keeps the first.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        let _ = tracing_subscriber::registry()
            .with(layer(json).with_filter(filter))
            .try_init();
        return;
    }
    let rules = options.vmodule_rules().unwrap_or_default();
    let verbosity = options.logs.verbosity;
    let filter = tracing_subscriber::filter::filter_fn(move |meta| {
        *meta.level() <= level_of(vmodule_level(&rules, meta.target(), verbosity))
    });
    let _ = tracing_subscriber::registry()
        .with(layer(json).with_filter(filter))
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("node*", "node_controller"));
        assert!(glob("*lifecycle*", "cloud_node_lifecycle"));
        assert!(!glob("node", "nodes"));
        assert!(glob("*", ""));
    }
}
