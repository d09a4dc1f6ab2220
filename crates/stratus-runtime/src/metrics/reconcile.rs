//! `stratus_reconcile_*`: how often each controller reconciled, with what
//! outcome, and how long it took.

use super::Labels;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::time::Duration;

fn reconcile_histogram() -> Histogram {
    // 1 ms to ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// The reconcile families, labelled by `controller` (and `result`).
#[derive(Debug, Clone)]
pub struct ReconcileMetrics {
    total: Family<Labels, Counter>,
    duration: Family<Labels, Histogram, fn() -> Histogram>,
}

impl ReconcileMetrics {
    /// Register `stratus_reconcile_total{controller,result}` and
    /// `stratus_reconcile_duration_seconds{controller}` into `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let this = Self {
            total: Family::default(),
            duration: Family::new_with_constructor(reconcile_histogram),
        };
        registry.register(
            "stratus_reconcile",
            "Reconciles by controller and result (success or error)",
            this.total.clone(),
        );
        registry.register(
            "stratus_reconcile_duration_seconds",
            "How long one reconcile took, by controller",
            this.duration.clone(),
        );
        this
    }

    /// The handles for one controller.
    ///
    /// ```
    /// let mut registry = prometheus_client::registry::Registry::default();
    /// let metrics = stratus_runtime::metrics::ReconcileMetrics::register(&mut registry);
    /// metrics.controller("route").observe_error(std::time::Duration::from_millis(2));
    /// let text = stratus_runtime::metrics::encode_text(&registry).unwrap();
    /// assert!(text.contains("stratus_reconcile_total{controller=\"route\",result=\"error\"} 1"));
    /// ```
    pub fn controller(&self, name: &str) -> ControllerReconcileMetrics {
        let result =
            |r: &str| -> Labels { vec![("controller", name.to_owned()), ("result", r.to_owned())] };
        // One statement per lookup: a family's guard lives to the end of
        // its statement, and a second lookup in the same one would deadlock.
        let success = self.total.get_or_create(&result("success")).clone();
        let error = self.total.get_or_create(&result("error")).clone();
        let labels: super::Labels = vec![("controller", name.to_owned())];
        let duration = self.duration.get_or_create(&labels).clone();
        ControllerReconcileMetrics {
            success,
            error,
            duration,
        }
    }
}

/// The reconcile metrics of one controller.
#[derive(Debug, Clone)]
pub struct ControllerReconcileMetrics {
    success: Counter,
    error: Counter,
    duration: Histogram,
}

impl ControllerReconcileMetrics {
    /// A reconcile succeeded after `took`.
    pub fn observe_success(&self, took: Duration) {
        self.success.inc();
        self.duration.observe(took.as_secs_f64());
    }

    /// A reconcile failed after `took`.
    pub fn observe_error(&self, took: Duration) {
        self.error.inc();
        self.duration.observe(took.as_secs_f64());
    }

    /// Record the outcome of a reconcile that took `took`.
    pub fn observe<T, E>(&self, result: &Result<T, E>, took: Duration) {
        match result {
            Ok(_) => self.observe_success(took),
            Err(_) => self.observe_error(took),
        }
    }
}
