//! The manager's shared informers: one watch and one cache of Nodes and
//! of Services, however many controllers read them (client-go's shared
//! informer factory).
//!
//! Every controller takes the informers it reads as constructor inputs,
//! as `k8s.io/cloud-provider`'s controllers take theirs, and never builds
//! one of its own.
//!
//! ```no_run
//! use std::sync::Arc;
//! use stratus_ccm::informers::SharedInformers;
//! use stratus_ccm::lifecycle::{LifecycleConfig, LifecycleController};
//! use stratus_ccm::node::{NodeController, NodeControllerConfig};
//!
//! # async fn run(client: kube::Client, cloud: Arc<dyn stratus_cloud::CloudProvider>, stop: tokio::sync::watch::Receiver<bool>) {
//! let informers = SharedInformers::new(client.clone());
//! let node = NodeController::new(client.clone(), informers.nodes(), cloud.clone(), NodeControllerConfig::default());
//! let lifecycle = LifecycleController::new(client, informers.nodes(), cloud, LifecycleConfig::default());
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
