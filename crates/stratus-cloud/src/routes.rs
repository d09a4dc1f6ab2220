//! Routes for the pod network (Go: `Routes`).

use async_trait::async_trait;
use k8s_openapi::api::core::v1::NodeAddress;

use crate::Result;

/// A route sending a pod CIDR to a node (Go: `Route`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Route {
    /// The route's name in the cloud. Ignored by `create_route`, which gets a
    /// name hint instead.
    pub name: String,
    /// The node the route points to.
    pub target_node: String,
    /// Whether [`Route::target_node_addresses`] is meaningful. When true, a
    /// change of the node's addresses makes the controller replace the route.
    pub enable_node_addresses: bool,
    /// The node's addresses, when the cloud routes by address.
    pub target_node_addresses: Vec<NodeAddress>,
    /// The pod CIDR, e.g. `10.244.1.0/24`.
    pub destination_cidr: String,
    /// The route is a blackhole (its target is gone). The controller deletes
    /// blackhole routes inside the cluster CIDRs.
    pub blackhole: bool,
}

/// Route management (Go: `Routes`).
#[async_trait]
pub trait Routes: Send + Sync {
    /// Every route the provider manages for `cluster_name`.
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>>;

    /// Create `route`. `name_hint` is the target Node's UID; `route.name` is
    /// ignored.
    async fn create_route(&self, cluster_name: &str, name_hint: &str, route: &Route) -> Result<()>;

    /// Delete `route`, one returned by [`Routes::list_routes`].
    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<()>;
}
