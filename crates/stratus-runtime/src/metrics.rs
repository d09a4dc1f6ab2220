//! Prometheus metrics (prometheus-client) for controllers: the work-queue
//! metrics with client-go's names, reconcile outcomes and latencies, calls
//! to an external API such as a cloud provider, and the process collector
//! (`process_*`, client_golang's names) and the API client's requests
//! (`rest_client_*`, client-go's names).
//!
//! Each family set is registered once into a vendor's
//! [`Registry`] and handed to the
//! controllers by clone (the families share their storage).
//!
//! ```
//! use prometheus_client::registry::Registry;
//! use stratus_runtime::metrics::{RuntimeMetrics, encode_text};
//!
//! let mut registry = Registry::default();
//! let metrics = RuntimeMetrics::register(&mut registry);
//! metrics.reconcile.controller("service").observe_success(std::time::Duration::from_millis(3));
//! let text = encode_text(&registry).unwrap();
//! assert!(text.contains("stratus_reconcile_total{controller=\"service\",result=\"success\"} 1"));
//! ```

mod calls;
mod exposition_filter;
mod process;
mod reconcile;
mod rest_client;
mod workqueue;

pub use calls::{CallMetrics, CallResult};
pub use exposition_filter::{MetricsFilter, MetricsFilterError, UNEXPECTED};
pub use process::ProcessCollector;
pub use reconcile::{ControllerReconcileMetrics, ReconcileMetrics};
pub use rest_client::RestClientMetrics;
pub use workqueue::{QueueMetrics, WorkQueueMetrics};

use prometheus_client::registry::Registry;

/// The label set of most families here: one `name = value` pair or more.
pub type Labels = Vec<(&'static str, String)>;

/// Every family set of this module, registered together.
#[derive(Debug, Clone)]
pub struct RuntimeMetrics {
    /// `workqueue_*`, labelled by queue name.
    pub workqueue: WorkQueueMetrics,
    /// `stratus_reconcile_*`, labelled by controller.
    pub reconcile: ReconcileMetrics,
    /// `stratus_cloud_provider_*`, labelled by method and result.
    pub cloud: CallMetrics,
}

impl RuntimeMetrics {
    /// Register every family into `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        Self {
            workqueue: WorkQueueMetrics::register(registry),
            reconcile: ReconcileMetrics::register(registry),
            cloud: CallMetrics::register(registry, "stratus_cloud_provider", "cloud provider"),
        }
    }

    /// Families registered nowhere: what controllers use when the vendor
    /// gives them no registry.
    pub fn unregistered() -> Self {
        Self::register(&mut Registry::default())
    }
}

impl Default for RuntimeMetrics {
    fn default() -> Self {
        Self::unregistered()
    }
}

/// The registry in the Prometheus text exposition format (OpenMetrics
/// flavour, as prometheus-client writes it).
///
/// ```
/// let registry = prometheus_client::registry::Registry::default();
/// assert_eq!(stratus_runtime::metrics::encode_text(&registry).unwrap(), "# EOF\n");
/// ```
pub fn encode_text(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry)?;
    Ok(out)
}
