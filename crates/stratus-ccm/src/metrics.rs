//! The metrics of the cloud controllers: Go's names where Go has the
//! behaviour (`node_controller_*`, `service_controller_*`,
//! `route_controller_*`), client-go's `workqueue_*`, and ours
//! (`stratus_reconcile_*`, `stratus_cloud_provider_*` for every cloud call).
//!
//! ```
//! use prometheus_client::registry::Registry;
//! use stratus_ccm::metrics::CcmMetrics;
//!
//! let mut registry = Registry::default();
//! let metrics = CcmMetrics::register(&mut registry);
//! // Give `metrics.clone()` to each controller with `with_metrics`, and
//! // serve `stratus_runtime::metrics::encode_text(&registry)`.
//! # let _ = metrics;
//! let text = stratus_runtime::metrics::encode_text(&registry).unwrap();
//! assert!(text.contains("# TYPE route_controller_route_sync counter"));
//! ```

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use stratus_cloud::{CloudError, CloudErrorKind};
use stratus_runtime::metrics::{CallResult, RuntimeMetrics};

/// Every metric of the cloud controllers. Cheap to clone; clones share the
/// values.
#[derive(Debug, Clone)]
pub struct CcmMetrics {
    /// Work queues, reconciles and cloud calls.
    pub runtime: RuntimeMetrics,
    /// `node_controller_cloud_provider_taint_removal_delay_seconds`.
    pub(crate) taint_removal_delay: Histogram,
    /// `node_controller_initial_node_sync_delay_seconds`.
    pub(crate) initial_node_sync_delay: Histogram,
    /// `service_controller_loadbalancer_sync_total`.
    pub(crate) loadbalancer_sync: Counter,
    /// `service_controller_nodesync_error_total`.
    pub(crate) nodesync_error: Counter,
    /// `service_controller_nodesync_latency_seconds`.
    pub(crate) nodesync_latency: Histogram,
    /// `service_controller_update_loadbalancer_host_latency_seconds`.
    pub(crate) update_host_latency: Histogram,
    /// `route_controller_route_sync_total`.
    pub(crate) route_sync: Counter,
}

impl CcmMetrics {
    /// The `stratus_reconcile_*` handles of the controller `names`.
    pub(crate) fn reconciles(
        &self,
        names: stratus_cloud::names::ControllerNames,
    ) -> stratus_runtime::metrics::ControllerReconcileMetrics {
        self.runtime.reconcile.controller(names.canonical)
    }

    /// Register every family into `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        // Go's buckets: node metrics ExponentialBuckets(1, 4, 6), service
        // metrics ExponentialBuckets(1, 2, 15).
        let node_buckets = || Histogram::new(exponential_buckets(1.0, 4.0, 6));
        let service_buckets = || Histogram::new(exponential_buckets(1.0, 2.0, 15));
        let this = Self {
            runtime: RuntimeMetrics::register(registry),
            taint_removal_delay: node_buckets(),
            initial_node_sync_delay: node_buckets(),
            loadbalancer_sync: Counter::default(),
            nodesync_error: Counter::default(),
            nodesync_latency: service_buckets(),
            update_host_latency: service_buckets(),
            route_sync: Counter::default(),
        };
        registry.register(
            "node_controller_cloud_provider_taint_removal_delay_seconds",
            "Number of seconds after node creation when NodeController removed the cloud-provider taint of a single node",
            this.taint_removal_delay.clone(),
        );
        registry.register(
            "node_controller_initial_node_sync_delay_seconds",
            "Number of seconds after node creation when NodeController finished the initial synchronization of a single node",
            this.initial_node_sync_delay.clone(),
        );
        registry.register(
            "service_controller_loadbalancer_sync",
            "A metric counting the amount of times any load balancer has been configured, as an effect of service/node changes on the cluster",
            this.loadbalancer_sync.clone(),
        );
        registry.register(
            "service_controller_nodesync_error",
            "A metric counting the amount of times any load balancer has been configured and errored, as an effect of node changes on the cluster",
            this.nodesync_error.clone(),
        );
        registry.register(
            "service_controller_nodesync_latency_seconds",
            "A metric measuring the latency for nodesync which updates loadbalancer hosts on cluster node updates",
            this.nodesync_latency.clone(),
        );
        registry.register(
            "service_controller_update_loadbalancer_host_latency_seconds",
            "A metric measuring the latency for updating each load balancer hosts",
            this.update_host_latency.clone(),
        );
        registry.register(
            "route_controller_route_sync",
            "A metric counting the amount of times routes have been synced with the cloud provider",
            this.route_sync.clone(),
        );
        this
    }

    /// Metrics registered nowhere (the controllers' default).
    pub fn unregistered() -> Self {
        Self::register(&mut Registry::default())
    }

    /// Time one cloud call of `method` and count it by outcome.
    pub(crate) async fn cloud<T>(
        &self,
        method: &str,
        call: impl Future<Output = Result<T, CloudError>>,
    ) -> Result<T, CloudError> {
        self.runtime
            .cloud
            .time(method, call, |r| match r {
                Ok(_) => "ok",
                Err(e) => kind_label(e.kind()),
            })
            .await
    }
}

impl Default for CcmMetrics {
    fn default() -> Self {
        Self::unregistered()
    }
}

/// The `result` label of a failed cloud call.
fn kind_label(kind: CloudErrorKind) -> CallResult {
    match kind {
        CloudErrorKind::NotFound => "not_found",
        CloudErrorKind::NotImplemented => "not_implemented",
        CloudErrorKind::ImplementedElsewhere => "implemented_elsewhere",
        CloudErrorKind::RetryAfter(_) => "retry_after",
        CloudErrorKind::Throttled { .. } => "throttled",
        CloudErrorKind::InvalidInput => "invalid_input",
        _ => "error",
    }
}

/// Seconds since `created`, for the delay histograms (zero if unknown).
pub(crate) fn seconds_since(
    created: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
) -> f64 {
    created
        .map(|t| k8s_openapi::jiff::Timestamp::now().duration_since(t.0))
        .and_then(|d| Duration::try_from(d).ok())
        .map_or(0.0, |d| d.as_secs_f64())
}
