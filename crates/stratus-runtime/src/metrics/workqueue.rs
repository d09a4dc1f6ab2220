//! `workqueue_*`: client-go's work-queue metrics, same names, labels and
//! buckets, so existing dashboards keep working.

use super::Labels;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

type FloatGauge = Gauge<f64, AtomicU64>;

fn latency_histogram() -> Histogram {
    // client-go: ExponentialBuckets(10e-9, 10, 10), 10 ns to 10 s.
    Histogram::new(exponential_buckets(1e-8, 10.0, 10))
}

/// The `workqueue_*` families, labelled by queue `name`.
#[derive(Debug, Clone)]
pub struct WorkQueueMetrics {
    depth: Family<Labels, Gauge>,
    adds: Family<Labels, Counter>,
    queue_duration: Family<Labels, Histogram, fn() -> Histogram>,
    work_duration: Family<Labels, Histogram, fn() -> Histogram>,
    retries: Family<Labels, Counter>,
    unfinished: Family<Labels, FloatGauge>,
    longest_running: Family<Labels, FloatGauge>,
}

impl WorkQueueMetrics {
    /// Register the families into `registry`.
    ///
    /// ```
    /// let mut registry = prometheus_client::registry::Registry::default();
    /// let metrics = stratus_runtime::metrics::WorkQueueMetrics::register(&mut registry);
    /// metrics.queue("Nodes").added();
    /// let text = stratus_runtime::metrics::encode_text(&registry).unwrap();
    /// assert!(text.contains("workqueue_adds_total{name=\"Nodes\"} 1"));
    /// ```
    pub fn register(registry: &mut Registry) -> Self {
        let this = Self {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(latency_histogram),
            work_duration: Family::new_with_constructor(latency_histogram),
            retries: Family::default(),
            unfinished: Family::default(),
            longest_running: Family::default(),
        };
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue",
            this.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            this.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            this.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            this.work_duration.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            this.retries.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration",
            this.unfinished.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            this.longest_running.clone(),
        );
        this
    }

    /// The handles for the queue called `name` (Go's names are `Nodes`,
    /// `node`, `service` and `Routes`).
    pub fn queue(&self, name: &str) -> QueueMetrics {
        let labels: Labels = vec![("name", name.to_owned())];
        QueueMetrics {
            depth: self.depth.get_or_create(&labels).clone(),
            adds: self.adds.get_or_create(&labels).clone(),
            queue_duration: self.queue_duration.get_or_create(&labels).clone(),
            work_duration: self.work_duration.get_or_create(&labels).clone(),
            retries: self.retries.get_or_create(&labels).clone(),
            unfinished: self.unfinished.get_or_create(&labels).clone(),
            longest_running: self.longest_running.get_or_create(&labels).clone(),
        }
    }
}

/// The metrics of one queue; [`crate::workqueue::WorkQueue`] feeds them.
#[derive(Debug, Clone)]
pub struct QueueMetrics {
    depth: Gauge,
    adds: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
    retries: Counter,
    unfinished: FloatGauge,
    longest_running: FloatGauge,
}

impl QueueMetrics {
    /// A key entered the queue.
    pub fn added(&self) {
        self.adds.inc();
        self.depth.inc();
    }

    /// A key left the queue for a worker after waiting `waited`.
    pub fn taken(&self, waited: std::time::Duration) {
        self.depth.dec();
        self.queue_duration.observe(waited.as_secs_f64());
    }

    /// Queued keys were dropped (shutdown) without being taken.
    pub fn discarded(&self, keys: usize) {
        self.depth.dec_by(i64::try_from(keys).unwrap_or(i64::MAX));
    }

    /// A worker finished a key after `worked`.
    pub fn done(&self, worked: std::time::Duration) {
        self.work_duration.observe(worked.as_secs_f64());
    }

    /// A key was scheduled for a retry.
    pub fn retried(&self) {
        self.retries.inc();
    }

    /// The in-progress work: the sum and the longest of the running times of
    /// keys being processed now, in seconds.
    pub fn in_progress(&self, total_seconds: f64, longest_seconds: f64) {
        self.unfinished.set(total_seconds);
        self.longest_running.set(longest_seconds);
    }
}
