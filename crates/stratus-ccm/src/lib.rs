//! The generic cloud controllers of a Stratus cloud controller manager.
//!
//! - [`node`]: the cloud-node controller (node initialization).
//! - [`lifecycle`]: the cloud-node-lifecycle controller (shutdown taint,
//!   deletion of nodes whose instance is gone, with a safeguard).
//! - [`service`]: the service load-balancer controller.
//! - [`route`]: the node-route controller.
//! - [`ipam`]: the node-ipam controller (`RangeAllocator` semantics).
//! - [`app`]: the manager command (Go's `cloud-controller-manager`): its
//!   flags with Go's names and defaults, validation, `--controllers`
//!   selection, leader election, the admin server, and the controllers
//!   started from the provider's capabilities.
//! - [`metrics`]: the controllers' Prometheus metrics (Go's names where Go
//!   has them).
//!
//! - [`informers`]: the shared Node and Service informers every controller
//!   takes as a constructor input.
//!
//! Every controller has one shape, `stratus_runtime::controller::Controller`
//! (shared informers feeding a work queue, workers running a reconcile per
//! key), takes the shared informers it reads when it is built, and takes
//! `with_metrics` and `with_health` (the [`Instrumented`] trait) before
//! `run`.
//!
//! ```no_run
//! use std::sync::Arc;
//! use stratus_ccm::informers::SharedInformers;
//! use stratus_ccm::node::{NodeController, NodeControllerConfig};
//! use stratus_cloud::CloudProvider;
//!
//! # async fn run(client: kube::Client, cloud: Arc<dyn CloudProvider>) {
//! let informers = SharedInformers::new(client.clone());
//! let (_stop, stopped) = tokio::sync::watch::channel(false);
//! NodeController::new(client, informers.nodes(), cloud, NodeControllerConfig::default())
//!     .run(stopped)
//!     .await;
//! # }
//! ```

pub mod app;
mod context;
pub mod informers;
mod instrumented;
pub mod ipam;
pub mod lifecycle;
pub mod metrics;
pub mod names;
pub mod node;
pub mod route;
pub mod service;

pub use instrumented::Instrumented;
