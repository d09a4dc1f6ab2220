//! The manager's shared informers: one watch and one cache of Nodes and
//! of Services, however many controllers read them (client-go's shared
//! informer factory).
//!
//! Each controller built alone watches for itself; handed the manager's
//! [`SharedInformers`] (the manager does this for every controller it
//! starts), it subscribes to the common watch instead.
//!
//! ```no_run
//! use std::sync::Arc;
//! use stratus_ccm::informers::{ReadsNodes, SharedInformers};
//! use stratus_ccm::lifecycle::{LifecycleConfig, LifecycleController};
//! use stratus_ccm::node::{NodeController, NodeControllerConfig};
//!
//! # async fn run(client: kube::Client, cloud: Arc<dyn stratus_cloud::CloudProvider>, stop: tokio::sync::watch::Receiver<bool>) {
//! let informers = SharedInformers::new(client.clone());
//! let node = NodeController::new(client.clone(), cloud.clone(), NodeControllerConfig::default())
//!     .with_node_informer(informers.nodes().clone());
//! let lifecycle = LifecycleController::new(client, cloud, LifecycleConfig::default())
//!     .with_node_informer(informers.nodes().clone());
//! // One Node list and one Node watch between them.
//! tokio::join!(node.run(stop.clone()), lifecycle.run(stop));
//! # }
//! ```

use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::Api;
use stratus_runtime::informer::SharedInformer;

/// One shared informer per kind the built-in controllers read. Cheap to
/// clone; each watch starts with its first subscriber and stops when the
/// last clone and subscription are dropped.
#[derive(Clone)]
pub struct SharedInformers {
    nodes: SharedInformer<Node>,
    services: SharedInformer<Service>,
}

impl std::fmt::Debug for SharedInformers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedInformers").finish_non_exhaustive()
    }
}

impl SharedInformers {
    /// Informers watching through `client` (nothing is watched until a
    /// controller subscribes).
    pub fn new(client: kube::Client) -> Self {
        Self {
            nodes: SharedInformer::new(Api::all(client.clone())),
            services: SharedInformer::new(Api::all(client)),
        }
    }

    /// Every Node.
    pub fn nodes(&self) -> &SharedInformer<Node> {
        &self.nodes
    }

    /// Every Service.
    pub fn services(&self) -> &SharedInformer<Service> {
        &self.services
    }
}

/// A controller that reads Nodes: by default through a watch of its own,
/// or through a shared one.
pub trait ReadsNodes: Sized {
    /// The informer the controller subscribes to when it runs.
    fn node_informer(&mut self) -> &mut SharedInformer<Node>;

    /// Read Nodes through `nodes` (shared with other controllers) instead
    /// of a watch of its own.
    fn with_node_informer(mut self, nodes: SharedInformer<Node>) -> Self {
        *self.node_informer() = nodes;
        self
    }
}
