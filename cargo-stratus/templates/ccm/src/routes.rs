//! Routes sending each Node's pod CIDR to the Node (Go: `Routes`), used
//! when the manager runs with `--allocate-node-cidrs
//! --configure-cloud-routes`. A cloud whose pod network needs no routes
//! returns `None` from `CloudProvider::routes` and deletes this file.

use async_trait::async_trait;
use stratus::cloud::{CloudError, Result, Route, Routes};

use crate::{{Type}}Cloud;

#[async_trait]
impl Routes for {{Type}}Cloud {
    /// Every route this cluster owns in the cloud (`target_node`,
    /// `destination_cidr`; `blackhole` when its target is gone).
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>> {
        let _ = cluster_name;
        Err(CloudError::not_implemented())
    }

    /// Create `route`; `name_hint` (the target Node's UID) makes a stable
    /// cloud name.
    async fn create_route(&self, cluster_name: &str, name_hint: &str, route: &Route) -> Result<()> {
        let _ = (cluster_name, name_hint, route);
        Err(CloudError::not_implemented())
    }

    /// Delete `route`, one that `list_routes` returned.
    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<()> {
        let _ = (cluster_name, route);
        Err(CloudError::not_implemented())
    }
}
