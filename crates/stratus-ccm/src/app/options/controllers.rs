//! The flags of one controller each (Go's `NodeControllerOptions`,
//! `ServiceControllerOptions`, `NodeIPAMControllerOptions`).

use std::time::Duration;

use clap::{ArgAction, Args};
use stratus_runtime::duration::parse_go_duration;

/// The cloud-node and cloud-node-lifecycle controllers' flags (Go's `NodeControllerOptions`,
/// and Stratus's batching and deletion guards).
#[derive(Debug, Clone, Args)]
pub struct NodeControllerOptions {
    /// Batches of new nodes initialized at once (each batch is one cloud
    /// call for up to `--node-max-batch` nodes); 1 as in Go.
    #[arg(
        long = "concurrent-node-syncs",
        default_value_t = 1,
        help_heading = "cloud-node-controller"
    )]
    pub concurrent_node_syncs: usize,
    /// Concurrent address refreshes; 0 means `--concurrent-node-syncs`.
    #[arg(
        long = "concurrent-node-status-updates",
        default_value_t = 0,
        help_heading = "cloud-node-controller"
    )]
    pub concurrent_node_status_updates: usize,
    /// Also refresh instance type, zone, region and additional labels of
    /// initialized nodes (Stratus; off as in Go).
    #[arg(long = "refresh-node-labels", action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true", help_heading = "cloud-node-controller")]
    pub refresh_node_labels: bool,
    /// Passes that must find an instance gone before its Node is deleted
    /// (Stratus; Go: 1).
    #[arg(
        long = "node-gone-confirmations",
        default_value_t = 2,
        help_heading = "cloud-node-controller"
    )]
    pub node_gone_confirmations: u32,
    /// How long the node controller waits for more new nodes before one
    /// batched cloud call (Stratus).
    #[arg(long = "node-batch-window", value_parser = parse_go_duration, default_value = "10ms", help_heading = "cloud-node-controller")]
    pub node_batch_window: Duration,
    /// The most nodes in one batched cloud call (Stratus; the provider's own
    /// limit applies too).
    #[arg(
        long = "node-max-batch",
        default_value_t = 500,
        help_heading = "cloud-node-controller"
    )]
    pub node_max_batch: usize,
    /// Nodes younger than this are never deleted (Stratus; Go: 0).
    #[arg(long = "node-min-age-before-deletion", value_parser = parse_go_duration, default_value = "0", help_heading = "cloud-node-controller")]
    pub node_min_age_before_deletion: Duration,
}

/// The service controller's flags (Go's `ServiceControllerOptions`, and Stratus's drift
/// check and load-balancer classes).
#[derive(Debug, Clone, Args)]
pub struct ServiceControllerOptions {
    /// Services synced at once; 1 as in Go.
    #[arg(
        long = "concurrent-service-syncs",
        default_value_t = 1,
        help_heading = "service-lb-controller"
    )]
    pub concurrent_service_syncs: usize,
    /// Check every load balancer for drift this often; 0 turns it off
    /// (Stratus; Go has no drift check).
    #[arg(long = "load-balancer-drift-check-period", value_parser = parse_go_duration, default_value = "0", help_heading = "service-lb-controller")]
    pub load_balancer_drift_check_period: Duration,
    /// The `spec.loadBalancerClass` values served, comma separated, instead
    /// of the provider's choice; `none` stands for Services without a class
    /// (Stratus).
    #[arg(
        long = "load-balancer-classes",
        value_delimiter = ',',
        help_heading = "service-lb-controller"
    )]
    pub load_balancer_classes: Vec<String>,
}

/// The node-ipam controller's flags (Go's `NodeIPAMControllerOptions`).
#[derive(Debug, Clone, Args)]
pub struct NodeIpamControllerOptions {
    /// The service range(s), comma separated, never given to nodes.
    #[arg(
        long = "service-cluster-ip-range",
        default_value = "",
        help_heading = "nodeipam controller"
    )]
    pub service_cluster_ip_range: String,
    /// The node CIDR mask size of a single-stack cluster (not allowed with
    /// dual-stack, nor with the per-family flags).
    #[arg(long = "node-cidr-mask-size", help_heading = "nodeipam controller")]
    pub node_cidr_mask_size: Option<u8>,
    /// The IPv4 node CIDR mask size. Default is 24.
    #[arg(
        long = "node-cidr-mask-size-ipv4",
        help_heading = "nodeipam controller"
    )]
    pub node_cidr_mask_size_ipv4: Option<u8>,
    /// The IPv6 node CIDR mask size. Default is 64.
    #[arg(
        long = "node-cidr-mask-size-ipv6",
        help_heading = "nodeipam controller"
    )]
    pub node_cidr_mask_size_ipv6: Option<u8>,
}
