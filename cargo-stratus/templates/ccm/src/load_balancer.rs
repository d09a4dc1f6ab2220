//! Load balancers for `type: LoadBalancer` Services (Go: `LoadBalancer`).
//!
//! `cluster_name` is `--cluster-name` (default `kubernetes`); the cloud
//! name of a Service's load balancer is `get_load_balancer_name` (by
//! default `a` + the Service's UID without dashes, at most 32 characters,
//! as Go names it). Treat `service` and `nodes` as read-only.

use async_trait::async_trait;
use stratus::cloud::{CloudError, LoadBalancer, Result};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

use crate::{{Type}}Cloud;

#[async_trait]
impl LoadBalancer for {{Type}}Cloud {
    /// The load balancer's status (its ingress IPs or hostnames) if it
    /// exists, `None` if not.
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>> {
        let _ = (cluster_name, service);
        Err(CloudError::not_implemented())
    }

    /// Create or update the load balancer for the Service's ports with
    /// `nodes` as backends (their `nodePort`s), and return its status; the
    /// controller writes it to `status.loadBalancer`. Must be idempotent.
    /// `CloudError::retry_after` asks to be called again after a delay
    /// (a load balancer still provisioning).
    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus> {
        let _ = (cluster_name, service, nodes);
        Err(CloudError::not_implemented())
    }

    /// Replace the backends of an existing load balancer with `nodes`.
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<()> {
        let _ = (cluster_name, service, nodes);
        Err(CloudError::not_implemented())
    }

    /// Delete the load balancer; `Ok(())` when there is none. The
    /// controller then removes the Service's finalizer.
    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<()> {
        let _ = (cluster_name, service);
        Err(CloudError::not_implemented())
    }
}
