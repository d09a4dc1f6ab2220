//! The builder methods every controller of this crate shares: where it
//! reports its metrics and its health.

use stratus_runtime::health::ControllerHealth;

use crate::metrics::CcmMetrics;

/// A controller that reports to a [`CcmMetrics`] and a [`ControllerHealth`]
/// (by default, metrics registered nowhere and a health check nobody reads).
///
/// ```no_run
/// use std::sync::Arc;
/// use stratus_ccm::Instrumented;
/// use stratus_ccm::informers::SharedInformers;
/// use stratus_ccm::metrics::CcmMetrics;
/// use stratus_ccm::node::{NodeController, NodeControllerConfig};
/// use stratus_runtime::health::{ControllerHealth, HealthChecks};
///
/// # fn build(client: kube::Client, cloud: Arc<dyn stratus_cloud::CloudProvider>) {
/// let mut registry = prometheus_client::registry::Registry::default();
/// let metrics = CcmMetrics::register(&mut registry);
/// let checks = HealthChecks::new();
/// let health = ControllerHealth::new();
/// checks.add("cloud-node-controller", health.clone());
/// let informers = SharedInformers::new(client.clone());
/// let controller = NodeController::new(client, informers.nodes(), cloud, NodeControllerConfig::default())
///     .with_metrics(metrics)
///     .with_health(health);
/// # let _ = controller;
/// # }
/// ```
pub trait Instrumented: Sized {
    /// The controller's metrics and health, for the provided methods.
    fn instruments(&mut self) -> (&mut CcmMetrics, &mut ControllerHealth);

    /// Report to `metrics`: the controller's work queue (client-go's
    /// `workqueue_*`), Go's metrics of this controller, every cloud call and
    /// every reconcile.
    fn with_metrics(mut self, metrics: CcmMetrics) -> Self {
        *self.instruments().0 = metrics;
        self
    }

    /// Report to `health`: the controller's watches, whether it runs, and
    /// its periodic pass where it has one (address refresh, lifecycle
    /// monitor, route reconcile).
    fn with_health(mut self, health: ControllerHealth) -> Self {
        *self.instruments().1 = health;
        self
    }
}
