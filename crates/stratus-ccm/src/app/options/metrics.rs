//! The metrics flags.

use clap::Args;

/// The `/metrics` flags (Go's `metrics.Options`).
#[derive(Debug, Clone, Args)]
pub struct MetricsOptions {
    /// Metrics left out of /metrics.
    #[arg(
        long = "disabled-metrics",
        value_delimiter = ',',
        help_heading = "metrics"
    )]
    pub disabled_metrics: Vec<String>,
    /// Show metrics hidden since this version (`1.32`); this manager hides
    /// none, so only the format is checked.
    #[arg(
        long = "show-hidden-metrics-for-version",
        default_value = "",
        help_heading = "metrics"
    )]
    pub show_hidden_metrics_for_version: String,
    /// Allowed label values: `metric,label='v1,v2'`; other values read
    /// `unexpected` (repeatable).
    #[arg(long = "allow-metric-labels", help_heading = "metrics")]
    pub allow_metric_labels: Vec<String>,
}
