//! `Routes`: pod CIDRs sent to nodes, tagged with the cluster.

use std::collections::BTreeMap;

use async_trait::async_trait;
use hyper::Method;
use stratus_cloud::{CloudError, Result, Route, Routes};
use stratus_local_cloud::api;

use crate::LocalProvider;
use crate::load_balancer::CLUSTER_TAG;

/// The cloud name of a route: `<cluster>-<name hint>`, with anything but
/// letters, digits, `-`, `.` and `_` replaced by `-`.
fn route_name(cluster: &str, hint: &str) -> String {
    format!("{cluster}-{hint}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

#[async_trait]
impl Routes for LocalProvider {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>> {
        let all: Vec<api::Route> = self.client.list_all("/v1/routes").await?;
        Ok(all
            .into_iter()
            .filter(|r| r.tags.get(CLUSTER_TAG).map(String::as_str) == Some(cluster_name))
            .map(|r| Route {
                name: r.name,
                target_node: r.target_node,
                destination_cidr: r.destination_cidr,
                ..Route::default()
            })
            .collect())
    }

    async fn create_route(&self, cluster_name: &str, name_hint: &str, route: &Route) -> Result<()> {
        if route.target_node.is_empty() {
            return Err(CloudError::invalid_input("the route has no target node"));
        }
        let name = route_name(cluster_name, name_hint);
        let body = api::Route {
            name: name.clone(),
            destination_cidr: route.destination_cidr.clone(),
            target_node: route.target_node.clone(),
            tags: BTreeMap::from([(CLUSTER_TAG.to_owned(), cluster_name.to_owned())]),
        };
        self.client
            .call::<api::Route>(Method::PUT, &format!("/v1/routes/{name}"), Some(&body))
            .await?;
        Ok(())
    }

    async fn delete_route(&self, _cluster_name: &str, route: &Route) -> Result<()> {
        self.client
            .delete(&format!("/v1/routes/{}", route.name))
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_names_are_path_safe() {
        assert_eq!(
            route_name("kubernetes", "5f0c-7d1e"),
            "kubernetes-5f0c-7d1e"
        );
        assert_eq!(route_name("a b", "x/y"), "a-b-x-y");
    }
}
