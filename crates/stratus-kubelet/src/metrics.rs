//! The virtual node's metrics (Go's virtual-kubelet has none): work-queue
//! depth and latency (client-go's `workqueue_*`, queues
//! `pod-sync/<node>` and `pod-status/<node>`), provider calls by method
//! and result with their latency, pods by phase, status-write latency,
//! the time from a provider notification to its status write, events
//! dropped because the event queue was full, kubelet-API requests by
//! subresource and status code, and the serving certificate's time to live
//! (the kubelet's `kubelet_certificate_manager_server_ttl_seconds`).
//!
//! ```
//! use prometheus_client::registry::Registry;
//! use stratus_kubelet::metrics::KubeletMetrics;
//!
//! let mut registry = Registry::default();
//! let metrics = KubeletMetrics::register(&mut registry);
//! metrics.set_pods("vk-0", "Running", 3);
//! let text = stratus_runtime::metrics::encode_text(&registry).unwrap();
//! assert!(text.contains("stratus_kubelet_pods{node=\"vk-0\",phase=\"Running\"} 3"));
//! ```

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use stratus_pod::{PodError, PodErrorKind};
use stratus_runtime::metrics::{CallMetrics, CallResult, Labels, WorkQueueMetrics};

fn latency_histogram() -> Histogram {
    // 1 ms to ~32 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// The families of every virtual node of a process (label `node`).
#[derive(Debug, Clone)]
pub struct KubeletMetrics {
    /// `workqueue_*` of the pod queues.
    pub workqueue: WorkQueueMetrics,
    /// `stratus_kubelet_provider_requests_total{method,result}` and
    /// `stratus_kubelet_provider_request_duration_seconds{method}`.
    pub provider: CallMetrics,
    pods: Family<Labels, Gauge>,
    status_write: Family<Labels, Histogram, fn() -> Histogram>,
    notification_to_write: Family<Labels, Histogram, fn() -> Histogram>,
    events_dropped: Family<Labels, Counter>,
    pod_states: Family<Labels, Gauge>,
    dangling_deleted: Family<Labels, Counter>,
    dangling_held: Family<Labels, Gauge>,
    api_requests: Family<Labels, Counter>,
    serving_certificate_ttl: Family<Labels, Gauge<f64, AtomicU64>>,
}

impl KubeletMetrics {
    /// Register every family into `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let this = Self {
            workqueue: WorkQueueMetrics::register(registry),
            provider: CallMetrics::register(registry, "stratus_kubelet_provider", "pod provider"),
            pods: Family::default(),
            status_write: Family::new_with_constructor(latency_histogram),
            notification_to_write: Family::new_with_constructor(latency_histogram),
            events_dropped: Family::default(),
            pod_states: Family::default(),
            dangling_deleted: Family::default(),
            dangling_held: Family::default(),
            api_requests: Family::default(),
            serving_certificate_ttl: Family::default(),
        };
        registry.register(
            "stratus_kubelet_pods",
            "Pods bound to the virtual node by phase",
            this.pods.clone(),
        );
        registry.register(
            "stratus_kubelet_status_write_duration_seconds",
            "Latency of pod status writes to the API server",
            this.status_write.clone(),
        );
        registry.register(
            "stratus_kubelet_notification_to_write_seconds",
            "Time from a provider status notification to its write in the API",
            this.notification_to_write.clone(),
        );
        registry.register(
            "stratus_kubelet_pod_states",
            "Pods the pod controller keeps state for (one entry per pod; more than the node's pods is a leak)",
            this.pod_states.clone(),
        );
        registry.register(
            "stratus_kubelet_dangling_pods_deleted",
            "Provider pods with no API pod that the dangling-pod sweep deleted",
            this.dangling_deleted.clone(),
        );
        registry.register(
            "stratus_kubelet_dangling_pods_held",
            "Provider pods with no API pod that the dangling-pod safeguard kept at the last sweep",
            this.dangling_held.clone(),
        );
        registry.register(
            "stratus_kubelet_api_requests",
            "Requests to the kubelet API by node, subresource (the kubelet's authorization names: log, exec, stats, ...) and HTTP status code",
            this.api_requests.clone(),
        );
        registry.register(
            "kubelet_certificate_manager_server_ttl_seconds",
            "Gauge of the shortest TTL (time-to-live) of the Kubelet's serving certificate. The value is in seconds until certificate expiry (negative if already expired). If serving certificate is invalid or unused, the value will be +INF.",
            this.serving_certificate_ttl.clone(),
        );
        registry.register(
            "stratus_kubelet_events_dropped",
            "Events not written because the event queue was full",
            this.events_dropped.clone(),
        );
        this
    }

    /// Families registered nowhere (the default).
    pub fn unregistered() -> Self {
        Self::register(&mut Registry::default())
    }

    /// Set the number of `node`'s pods in `phase`.
    pub fn set_pods(&self, node: &str, phase: &str, count: i64) {
        self.pods
            .get_or_create(&vec![
                ("node", node.to_owned()),
                ("phase", phase.to_owned()),
            ])
            .set(count);
    }

    /// Set how many pods `node`'s pod controller keeps state for.
    pub(crate) fn set_pod_states(&self, node: &str, count: usize) {
        self.pod_states
            .get_or_create(&vec![("node", node.to_owned())])
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Count one sweep of `node`'s dangling provider pods: `deleted` queued
    /// for deletion, `held` kept by the safeguard.
    pub(crate) fn dangling_swept(&self, node: &str, deleted: usize, held: usize) {
        let labels = vec![("node", node.to_owned())];
        self.dangling_deleted
            .get_or_create(&labels)
            .inc_by(u64::try_from(deleted).unwrap_or(u64::MAX));
        self.dangling_held
            .get_or_create(&labels)
            .set(i64::try_from(held).unwrap_or(i64::MAX));
    }

    /// Raise `node`'s dropped-events counter to `total` (the recorder's
    /// count), if it is below.
    pub(crate) fn events_dropped(&self, node: &str, total: u64) {
        let counter = self
            .events_dropped
            .get_or_create(&vec![("node", node.to_owned())]);
        let reported = counter.get();
        if total > reported {
            counter.inc_by(total - reported);
        }
    }

    /// Count one kubelet-API request to `node`'s `subresource` answered
    /// with `code`.
    pub(crate) fn api_request(&self, node: &str, subresource: &str, code: u16) {
        self.api_requests
            .get_or_create(&vec![
                ("node", node.to_owned()),
                ("subresource", subresource.to_owned()),
                ("code", code.to_string()),
            ])
            .inc();
    }

    /// Set `node`'s serving certificate's time to live from its
    /// `not_after` (+Inf when unknown, as Go's kubelet reports it).
    pub(crate) fn set_serving_certificate_ttl(
        &self,
        node: &str,
        not_after: Option<std::time::SystemTime>,
    ) {
        let ttl = not_after.map_or(f64::INFINITY, |at| {
            match at.duration_since(std::time::SystemTime::now()) {
                Ok(left) => left.as_secs_f64(),
                Err(past) => -past.duration().as_secs_f64(),
            }
        });
        self.serving_certificate_ttl
            .get_or_create(&vec![("node", node.to_owned())])
            .set(ttl);
    }

    pub(crate) fn status_written(&self, node: &str, took: Duration) {
        self.status_write
            .get_or_create(&vec![("node", node.to_owned())])
            .observe(took.as_secs_f64());
    }

    pub(crate) fn notification_written(&self, node: &str, since: Duration) {
        self.notification_to_write
            .get_or_create(&vec![("node", node.to_owned())])
            .observe(since.as_secs_f64());
    }
}

impl Default for KubeletMetrics {
    fn default() -> Self {
        Self::unregistered()
    }
}

/// The `result` label of a provider call.
pub(crate) fn call_result<T>(outcome: &Result<T, PodError>) -> CallResult {
    match outcome {
        Ok(_) => "ok",
        Err(e) => match e.kind() {
            PodErrorKind::NotFound => "not_found",
            PodErrorKind::InvalidInput => "invalid_input",
            PodErrorKind::NotImplemented => "not_implemented",
            PodErrorKind::AlreadyExists => "already_exists",
            PodErrorKind::Unavailable { .. } => "unavailable",
            _ => "error",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_events_follow_the_recorders_total_once() {
        let mut registry = Registry::default();
        let metrics = KubeletMetrics::register(&mut registry);
        metrics.events_dropped("vk-0", 3);
        metrics.events_dropped("vk-0", 3);
        metrics.events_dropped("vk-0", 5);
        metrics.events_dropped("vk-1", 0);
        let text = stratus_runtime::metrics::encode_text(&registry).unwrap();
        assert!(
            text.contains("stratus_kubelet_events_dropped_total{node=\"vk-0\"} 5"),
            "{text}"
        );
        assert!(
            text.contains("stratus_kubelet_events_dropped_total{node=\"vk-1\"} 0"),
            "{text}"
        );
    }
}
