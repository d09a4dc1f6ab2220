//! The manager's own names, as Go's cloud controller manager spells them:
//! its defaults and the event reasons its controllers record. (The names a
//! provider meets — labels, taints, annotations, finalizers, controller
//! names — are `stratus_cloud::names`.)
//!
//! ```
//! use stratus_ccm::names::{events, manager};
//! assert_eq!(manager::SECURE_PORT, 10258);
//! assert_eq!(events::SYNCED, "Synced");
//! ```

/// Event reasons, by controller.
pub mod events {
    /// Event types.
    pub const TYPE_NORMAL: &str = "Normal";
    /// Event types.
    pub const TYPE_WARNING: &str = "Warning";

    /// cloud-node-controller: a node was initialized (Normal).
    pub const SYNCED: &str = "Synced";
    /// The message of [`SYNCED`].
    pub const SYNCED_MESSAGE: &str = "Node synced successfully";

    /// cloud-node-lifecycle-controller: deleting a node whose instance is
    /// gone (Normal).
    pub const DELETING_NODE: &str = "DeletingNode";
    /// cloud-node-lifecycle-controller: the delete failed (Warning).
    pub const DELETING_NODE_FAILED: &str = "DeletingNodeFailed";

    /// service-lb-controller (Normal).
    pub const ENSURING_LOAD_BALANCER: &str = "EnsuringLoadBalancer";
    /// service-lb-controller (Normal).
    pub const ENSURED_LOAD_BALANCER: &str = "EnsuredLoadBalancer";
    /// service-lb-controller (Normal).
    pub const DELETING_LOAD_BALANCER: &str = "DeletingLoadBalancer";
    /// service-lb-controller (Normal).
    pub const DELETED_LOAD_BALANCER: &str = "DeletedLoadBalancer";
    /// service-lb-controller (Normal).
    pub const UPDATED_LOAD_BALANCER: &str = "UpdatedLoadBalancer";
    /// service-lb-controller (Warning).
    pub const SYNC_LOAD_BALANCER_FAILED: &str = "SyncLoadBalancerFailed";
    /// service-lb-controller (Warning): deleting the load balancer of a
    /// Service deleted without the finalizer failed.
    pub const DELETE_LOAD_BALANCER_FAILED: &str = "DeleteLoadBalancerFailed";
    /// service-lb-controller (Warning).
    pub const UPDATE_LOAD_BALANCER_FAILED: &str = "UpdateLoadBalancerFailed";
    /// service-lb-controller (Warning): no backend nodes.
    pub const UNAVAILABLE_LOAD_BALANCER: &str = "UnAvailableLoadBalancer";
    /// The message of [`UNAVAILABLE_LOAD_BALANCER`] on ensure.
    pub const UNAVAILABLE_LOAD_BALANCER_MESSAGE: &str =
        "There are no available nodes for LoadBalancer";

    /// node-route-controller (Warning).
    pub const FAILED_TO_CREATE_ROUTE: &str = "FailedToCreateRoute";

    /// node-ipam (Warning): no CIDR left in the range.
    pub const CIDR_NOT_AVAILABLE: &str = "CIDRNotAvailable";
    /// node-ipam (Warning): the node could not be patched with its CIDR.
    pub const CIDR_ASSIGNMENT_FAILED: &str = "CIDRAssignmentFailed";
}

/// The manager itself.
pub mod manager {
    /// The leader-election lease name.
    pub const LEASE_NAME: &str = "cloud-controller-manager";
    /// The leader-election lease namespace.
    pub const LEASE_NAMESPACE: &str = "kube-system";
    /// The default `--secure-port`.
    pub const SECURE_PORT: u16 = 10258;
    /// The default `--webhook-secure-port`.
    pub const WEBHOOK_SECURE_PORT: u16 = 10260;
    /// The default `--cluster-name`.
    pub const DEFAULT_CLUSTER_NAME: &str = "kubernetes";
    /// The `/configz` section name.
    pub const CONFIGZ_NAME: &str = "cloudcontrollermanager.config.k8s.io";
}
