//! The generic and shared flags (Go's `GenericControllerManagerConfigurationOptions`,
//! `KubeCloudSharedOptions`, debugging and leader migration).

use std::time::Duration;

use clap::{ArgAction, Args};
use stratus_runtime::duration::parse_go_duration;

/// Go's debugging flags (`Generic.Debugging`): accepted, not served.
#[derive(Debug, Clone, Args)]
pub struct DebuggingOptions {
    /// Profiling through /debug/pprof (Go's default: on). Not served by
    /// this manager; asking for it logs a warning.
    #[arg(long = "profiling", action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", help_heading = "debugging")]
    pub profiling: Option<bool>,
    /// Lock contention profiling (with --profiling). Not served; asking
    /// for it logs a warning.
    #[arg(long = "contention-profiling", action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", help_heading = "debugging")]
    pub contention_profiling: Option<bool>,
}

/// Go's leader-migration flags (`Generic.LeaderMigration`): accepted with a warning.
#[derive(Debug, Clone, Args)]
pub struct LeaderMigrationOptions {
    /// Leader migration from kube-controller-manager (not supported: the
    /// manager uses its own Lease; accepted with a warning).
    #[arg(long = "enable-leader-migration", action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true", help_heading = "leader-migration")]
    pub enable_leader_migration: bool,
    /// The leader migration configuration file (see
    /// --enable-leader-migration).
    #[arg(
        long = "leader-migration-config",
        default_value = "",
        help_heading = "leader-migration"
    )]
    pub leader_migration_config: String,
}

/// Go's generic controller-manager flags (`GenericControllerManagerConfigurationOptions`):
/// the controllers to run, the API client's budget, leader election and feature gates.
#[derive(Debug, Clone, Args)]
pub struct GenericOptions {
    /// Controllers to run: `*` for all enabled by default, `name` to add one,
    /// `-name` to leave one out (aliases accepted).
    #[arg(
        long = "controllers",
        value_delimiter = ',',
        default_value = "*",
        help_heading = "generic"
    )]
    pub controllers: Vec<String>,
    /// Pause between starting two controllers.
    #[arg(long = "controller-start-interval", value_parser = parse_go_duration, default_value = "0", help_heading = "generic")]
    pub controller_start_interval: Duration,
    /// The resync period of the controllers' informers is random between
    /// this and twice it, drawn once per start (0: no resync).
    #[arg(long = "min-resync-period", value_parser = parse_go_duration, default_value = "12h", help_heading = "generic")]
    pub min_resync_period: Duration,
    /// The content type of API requests (Go's default is protobuf);
    /// kube-rs clients send JSON, so it is accepted with a warning.
    #[arg(long = "kube-api-content-type", help_heading = "generic")]
    pub kube_api_content_type: Option<String>,
    /// Feature gates, `Name=true|false` pairs; unknown names are errors
    /// (known: see `app::FEATURE_GATES`).
    #[arg(
        long = "feature-gates",
        value_delimiter = ',',
        help_heading = "generic"
    )]
    pub feature_gates: Vec<String>,
    /// Elect a leader before running the controllers.
    #[arg(long = "leader-elect", action = ArgAction::Set, num_args = 0..=1, default_value_t = true, default_missing_value = "true", help_heading = "generic")]
    pub leader_elect: bool,
    /// How long a lease is valid without renewal.
    #[arg(long = "leader-elect-lease-duration", value_parser = parse_go_duration, default_value = "15s", help_heading = "generic")]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader keeps trying to renew before it steps down.
    #[arg(long = "leader-elect-renew-deadline", value_parser = parse_go_duration, default_value = "10s", help_heading = "generic")]
    pub leader_elect_renew_deadline: Duration,
    /// Time between attempts.
    #[arg(long = "leader-elect-retry-period", value_parser = parse_go_duration, default_value = "2s", help_heading = "generic")]
    pub leader_elect_retry_period: Duration,
    /// The lock type; only `leases`.
    #[arg(
        long = "leader-elect-resource-lock",
        default_value = "leases",
        help_heading = "generic"
    )]
    pub leader_elect_resource_lock: String,
    /// The Lease name.
    #[arg(
        long = "leader-elect-resource-name",
        default_value = "cloud-controller-manager",
        help_heading = "generic"
    )]
    pub leader_elect_resource_name: String,
    /// The Lease namespace.
    #[arg(
        long = "leader-elect-resource-namespace",
        default_value = "kube-system",
        help_heading = "generic"
    )]
    pub leader_elect_resource_namespace: String,
    /// After losing the Lease, stop the controllers and campaign again
    /// instead of exiting (Stratus; Go exits).
    #[arg(long = "leader-elect-recampaign", action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true", help_heading = "generic")]
    pub leader_elect_recampaign: bool,
    /// Requests per second to the API server.
    #[arg(
        long = "kube-api-qps",
        default_value_t = 20.0,
        help_heading = "generic"
    )]
    pub kube_api_qps: f32,
    /// Requests allowed in a burst above the QPS.
    #[arg(
        long = "kube-api-burst",
        default_value_t = 30,
        help_heading = "generic"
    )]
    pub kube_api_burst: u32,
}

/// The flags the cloud controllers share (Go's `KubeCloudSharedOptions`): the provider,
/// the cluster's name and CIDRs, routes, and the shared periods.
#[derive(Debug, Clone, Args)]
pub struct KubeCloudSharedOptions {
    /// The provider to use (its registered name).
    #[arg(long = "cloud-provider", default_value = "", help_heading = "generic")]
    pub cloud_provider: String,
    /// The provider's configuration file.
    #[arg(long = "cloud-config", default_value = "", help_heading = "generic")]
    pub cloud_config: String,
    /// Run even if the provider has no cluster ID (deprecated in Go, kept
    /// for compatibility).
    #[arg(long = "allow-untagged-cloud", action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true", help_heading = "generic")]
    pub allow_untagged_cloud: bool,
    /// The cluster name passed to the provider.
    #[arg(
        long = "cluster-name",
        default_value = "kubernetes",
        help_heading = "generic"
    )]
    pub cluster_name: String,
    /// CIDR range(s) of the pods, comma separated (one per IP family).
    #[arg(long = "cluster-cidr", default_value = "", help_heading = "generic")]
    pub cluster_cidr: String,
    /// Program the cloud's routes for the pod CIDRs.
    #[arg(long = "configure-cloud-routes", action = ArgAction::Set, num_args = 0..=1, default_value_t = true, default_missing_value = "true", help_heading = "generic")]
    pub configure_cloud_routes: bool,
    /// Allocate pod CIDRs to nodes (node-ipam).
    #[arg(long = "allocate-node-cidrs", action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true", help_heading = "generic")]
    pub allocate_node_cidrs: bool,
    /// The CIDR allocator: RangeAllocator.
    #[arg(
        long = "cidr-allocator-type",
        default_value = "RangeAllocator",
        help_heading = "generic"
    )]
    pub cidr_allocator_type: String,
    /// Each controller's API client authenticates as its own ServiceAccount
    /// in kube-system (tokens from TokenRequest, refreshed before they
    /// expire).
    #[arg(long = "use-service-account-credentials", action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true", help_heading = "generic")]
    pub use_service_account_credentials: bool,
    /// Deprecated in Go, where it has no effect; accepted with a warning.
    #[arg(long = "node-sync-period", value_parser = parse_go_duration, help_heading = "generic")]
    pub node_sync_period: Option<Duration>,
    /// The in-tree volume plugin of the kube-controller-manager era; no
    /// meaning for an external manager, accepted with a warning.
    #[arg(long = "external-cloud-volume-plugin", help_heading = "generic")]
    pub external_cloud_volume_plugin: Option<String>,
    /// How often the lifecycle controller checks nodes.
    #[arg(long = "node-monitor-period", value_parser = parse_go_duration, default_value = "5s", help_heading = "generic")]
    pub node_monitor_period: Duration,
    /// How often routes are reconciled; with the feature gate
    /// CloudControllerManagerWatchBasedRoutesReconciliation, the shortest
    /// time between two reconciles, which Node changes trigger.
    #[arg(long = "route-reconciliation-period", value_parser = parse_go_duration, default_value = "10s", help_heading = "generic")]
    pub route_reconciliation_period: Duration,
}
