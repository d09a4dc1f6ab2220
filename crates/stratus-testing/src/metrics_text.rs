//! Reading the Prometheus / OpenMetrics text format in tests.

/// The value of the sample that starts with `name_and_labels` (a metric
/// name, with its labels exactly as encoded), or `None` if there is none.
///
/// ```
/// let text = "# TYPE workqueue_adds counter\nworkqueue_adds_total{name=\"service\"} 3\n# EOF\n";
/// assert_eq!(stratus_testing::metric_sample(text, "workqueue_adds_total{name=\"service\"}"), Some(3.0));
/// assert_eq!(stratus_testing::metric_sample(text, "workqueue_depth"), None);
/// ```
pub fn metric_sample(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(name_and_labels)?;
        // The sample's value follows a space; a longer name is another metric.
        rest.strip_prefix(' ')?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}
