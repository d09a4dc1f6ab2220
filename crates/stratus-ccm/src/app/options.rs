//! The manager's flags, with Go's names and defaults (see
//! `shared/reference/cloud-provider.md` §3.2), and their validation: one
//! clear error per problem.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args};
use stratus_cloud::helpers::Cidr;

use super::controllers::{KnownController, UnknownController, canonicalize};
use stratus_runtime::duration::parse_go_duration;
use stratus_runtime::metrics::MetricsFilter;
use stratus_runtime::serving::ServingOptions;
use stratus_runtime::tls_policy::TlsPolicy;

/// The flags of a cloud controller manager. A flag given twice takes its
/// last value, as with Go's flag parsing (list flags append).
#[derive(Debug, Clone, Args)]
#[command(args_override_self = true)]
pub struct ManagerOptions {
    // ---- debugging ----
    /// Profiling through /debug/pprof (Go's default: on). Not served by
    /// this manager; asking for it logs a warning.
    #[arg(long = "profiling", action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", help_heading = "debugging")]
    pub profiling: Option<bool>,
    /// Lock contention profiling (with --profiling). Not served; asking
    /// for it logs a warning.
    #[arg(long = "contention-profiling", action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", help_heading = "debugging")]
    pub contention_profiling: Option<bool>,
    // ---- leader-migration ----
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
    // ---- generic ----
    /// The provider to use (its registered name).
    #[arg(long = "cloud-provider", default_value = "", help_heading = "generic")]
    pub cloud_provider: String,
    /// The provider's configuration file.
    #[arg(long = "cloud-config", default_value = "", help_heading = "generic")]
    pub cloud_config: String,
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
    /// The resync period of the controllers' informers is random between
    /// this and twice it, drawn once per start (0: no resync).
    #[arg(long = "min-resync-period", value_parser = parse_go_duration, default_value = "12h", help_heading = "generic")]
    pub min_resync_period: Duration,
    /// Deprecated in Go, where it has no effect; accepted with a warning.
    #[arg(long = "node-sync-period", value_parser = parse_go_duration, help_heading = "generic")]
    pub node_sync_period: Option<Duration>,
    /// The content type of API requests (Go's default is protobuf);
    /// kube-rs clients send JSON, so it is accepted with a warning.
    #[arg(long = "kube-api-content-type", help_heading = "generic")]
    pub kube_api_content_type: Option<String>,
    /// The in-tree volume plugin of the kube-controller-manager era; no
    /// meaning for an external manager, accepted with a warning.
    #[arg(long = "external-cloud-volume-plugin", help_heading = "generic")]
    pub external_cloud_volume_plugin: Option<String>,
    /// Feature gates, `Name=true|false` pairs; unknown names are errors
    /// (known: see `app::FEATURE_GATES`).
    #[arg(
        long = "feature-gates",
        value_delimiter = ',',
        help_heading = "generic"
    )]
    pub feature_gates: Vec<String>,
    /// How often the lifecycle controller checks nodes.
    #[arg(long = "node-monitor-period", value_parser = parse_go_duration, default_value = "5s", help_heading = "generic")]
    pub node_monitor_period: Duration,

    /// How often routes are reconciled; with the feature gate
    /// CloudControllerManagerWatchBasedRoutesReconciliation, the shortest
    /// time between two reconciles, which Node changes trigger.
    #[arg(long = "route-reconciliation-period", value_parser = parse_go_duration, default_value = "10s", help_heading = "generic")]
    pub route_reconciliation_period: Duration,

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
    // ---- cloud-node-controller ----
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
    // ---- service-lb-controller ----
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
    // ---- webhook ----
    /// Admission webhooks to serve: `*` for all registered, `name` to add
    /// one, `-name` to leave one out. None by default.
    #[arg(long = "webhooks", value_delimiter = ',', help_heading = "webhook")]
    pub webhooks: Vec<String>,
    // ---- webhook serving ----
    /// The HTTPS port of the admission webhooks, bound only when a webhook
    /// is enabled; 0 turns them off.
    #[arg(
        long = "webhook-secure-port",
        default_value_t = 10260,
        help_heading = "webhook serving"
    )]
    pub webhook_secure_port: u16,
    /// The address the webhooks are served on.
    #[arg(
        long = "webhook-bind-address",
        default_value = "0.0.0.0",
        help_heading = "webhook serving"
    )]
    pub webhook_bind_address: IpAddr,
    /// Where a generated webhook certificate would be written (kept for
    /// compatibility; Stratus keeps it in memory).
    #[arg(
        long = "webhook-cert-dir",
        default_value = "",
        help_heading = "webhook serving"
    )]
    pub webhook_cert_dir: String,
    /// The webhooks' serving certificate (PEM); self-signed in memory if
    /// empty.
    #[arg(long = "webhook-tls-cert-file", help_heading = "webhook serving")]
    pub webhook_tls_cert_file: Option<PathBuf>,
    /// The webhooks' serving key (PEM).
    #[arg(
        long = "webhook-tls-private-key-file",
        help_heading = "webhook serving"
    )]
    pub webhook_tls_private_key_file: Option<PathBuf>,
    /// The webhooks' TLS 1.2 cipher suites (Go's names).
    #[arg(
        long = "webhook-tls-cipher-suites",
        value_delimiter = ',',
        help_heading = "webhook serving"
    )]
    pub webhook_tls_cipher_suites: Vec<String>,
    /// The webhooks' minimum TLS version (VersionTLS12, VersionTLS13).
    #[arg(
        long = "webhook-tls-min-version",
        default_value = "",
        help_heading = "webhook serving"
    )]
    pub webhook_tls_min_version: String,
    /// The webhooks' key exchange curves (Go's names or IDs).
    #[arg(
        long = "webhook-tls-curve-preferences",
        value_delimiter = ',',
        help_heading = "webhook serving"
    )]
    pub webhook_tls_curve_preferences: Vec<String>,
    /// The webhooks' SNI certificates: `cert,key` or `cert,key:name1,name2`
    /// (repeatable).
    #[arg(long = "webhook-tls-sni-cert-key", help_heading = "webhook serving")]
    pub webhook_tls_sni_cert_key: Vec<String>,
    /// Serve the webhooks over HTTP/1.1 only.
    #[arg(long = "webhook-disable-http2-serving", action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true", help_heading = "webhook serving")]
    pub webhook_disable_http2_serving: bool,
    // ---- secure serving ----
    /// The HTTPS port of /healthz, /metrics and /configz; 0 turns serving
    /// off.
    #[arg(
        long = "secure-port",
        default_value_t = 10258,
        help_heading = "secure serving"
    )]
    pub secure_port: u16,
    /// The address to serve on.
    #[arg(
        long = "bind-address",
        default_value = "0.0.0.0",
        help_heading = "secure serving"
    )]
    pub bind_address: IpAddr,
    /// Where a generated certificate would be written (kept for
    /// compatibility; Stratus keeps it in memory).
    #[arg(long = "cert-dir", default_value = "", help_heading = "secure serving")]
    pub cert_dir: String,
    /// The serving certificate (PEM); self-signed in memory if empty.
    #[arg(long = "tls-cert-file", help_heading = "secure serving")]
    pub tls_cert_file: Option<PathBuf>,
    /// The serving key (PEM).
    #[arg(long = "tls-private-key-file", help_heading = "secure serving")]
    pub tls_private_key_file: Option<PathBuf>,
    /// TLS 1.2 cipher suites (Go's names; TLS 1.3 suites are always on).
    #[arg(
        long = "tls-cipher-suites",
        value_delimiter = ',',
        help_heading = "secure serving"
    )]
    pub tls_cipher_suites: Vec<String>,
    /// The minimum TLS version: VersionTLS12 or VersionTLS13 (VersionTLS10
    /// and VersionTLS11 are accepted with a warning; rustls serves 1.2+).
    #[arg(
        long = "tls-min-version",
        default_value = "",
        help_heading = "secure serving"
    )]
    pub tls_min_version: String,
    /// Key exchange curves (Go's names or IDs).
    #[arg(
        long = "tls-curve-preferences",
        value_delimiter = ',',
        help_heading = "secure serving"
    )]
    pub tls_curve_preferences: Vec<String>,
    /// SNI certificates: `cert,key` or `cert,key:name1,*.name2` (repeatable;
    /// without names, the certificate's DNS names).
    #[arg(long = "tls-sni-cert-key", help_heading = "secure serving")]
    pub tls_sni_cert_key: Vec<String>,
    /// The most concurrent streams of one HTTP/2 connection; 0 keeps the
    /// default.
    #[arg(
        long = "http2-max-streams-per-connection",
        default_value_t = 0,
        help_heading = "secure serving"
    )]
    pub http2_max_streams_per_connection: u32,
    /// Bind with SO_REUSEPORT (several processes on one port).
    #[arg(long = "permit-port-sharing", action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true", help_heading = "secure serving")]
    pub permit_port_sharing: bool,
    /// Bind with SO_REUSEADDR (rebind while old connections linger).
    #[arg(long = "permit-address-sharing", action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true", help_heading = "secure serving")]
    pub permit_address_sharing: bool,
    // ---- authentication ----
    /// The kubeconfig for TokenReviews; the manager's client if empty.
    #[arg(
        long = "authentication-kubeconfig",
        default_value = "",
        help_heading = "authentication"
    )]
    pub authentication_kubeconfig: String,
    /// Do not read the client CA from the
    /// `kube-system/extension-apiserver-authentication` ConfigMap.
    #[arg(long = "authentication-skip-lookup", action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true", help_heading = "authentication")]
    pub authentication_skip_lookup: bool,
    /// A PEM bundle of CAs whose client certificates identify callers
    /// (subject CN = user, O = groups).
    #[arg(long = "client-ca-file", help_heading = "authentication")]
    pub client_ca_file: Option<PathBuf>,
    /// How long token review answers are reused.
    #[arg(long = "authentication-token-webhook-cache-ttl", value_parser = parse_go_duration, default_value = "10s", help_heading = "authentication")]
    pub authentication_token_webhook_cache_ttl: Duration,
    /// Go on (with a warning) when the
    /// `kube-system/extension-apiserver-authentication` lookup fails;
    /// otherwise the manager stops.
    #[arg(long = "authentication-tolerate-lookup-failure", action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true", help_heading = "authentication")]
    pub authentication_tolerate_lookup_failure: bool,
    /// The CA (PEM) of front proxies; their requests name the user in
    /// headers.
    #[arg(long = "requestheader-client-ca-file", help_heading = "authentication")]
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// Common names a front proxy's certificate may have (any when empty).
    #[arg(
        long = "requestheader-allowed-names",
        value_delimiter = ',',
        help_heading = "authentication"
    )]
    pub requestheader_allowed_names: Vec<String>,
    /// Headers naming the user.
    #[arg(
        long = "requestheader-username-headers",
        value_delimiter = ',',
        default_value = "x-remote-user",
        help_heading = "authentication"
    )]
    pub requestheader_username_headers: Vec<String>,
    /// Headers naming the user's UID.
    #[arg(
        long = "requestheader-uid-headers",
        value_delimiter = ',',
        default_value = "x-remote-uid",
        help_heading = "authentication"
    )]
    pub requestheader_uid_headers: Vec<String>,
    /// Headers naming the user's groups.
    #[arg(
        long = "requestheader-group-headers",
        value_delimiter = ',',
        default_value = "x-remote-group",
        help_heading = "authentication"
    )]
    pub requestheader_group_headers: Vec<String>,
    /// Prefixes of headers holding extra user attributes.
    #[arg(
        long = "requestheader-extra-headers-prefix",
        value_delimiter = ',',
        default_value = "x-remote-extra-",
        help_heading = "authentication"
    )]
    pub requestheader_extra_headers_prefix: Vec<String>,
    // ---- authorization ----
    /// The kubeconfig for SubjectAccessReviews; the manager's client if
    /// empty.
    #[arg(
        long = "authorization-kubeconfig",
        default_value = "",
        help_heading = "authorization"
    )]
    pub authorization_kubeconfig: String,
    /// Paths served without authorization (`*` at the end: a prefix; `/*`
    /// opens everything).
    #[arg(
        long = "authorization-always-allow-paths",
        value_delimiter = ',',
        default_value = "/healthz,/readyz,/livez",
        help_heading = "authorization"
    )]
    pub authorization_always_allow_paths: Vec<String>,
    /// How long allowing access reviews are reused.
    #[arg(long = "authorization-webhook-cache-authorized-ttl", value_parser = parse_go_duration, default_value = "10s", help_heading = "authorization")]
    pub authorization_webhook_cache_authorized_ttl: Duration,
    /// How long denying access reviews are reused.
    #[arg(long = "authorization-webhook-cache-unauthorized-ttl", value_parser = parse_go_duration, default_value = "10s", help_heading = "authorization")]
    pub authorization_webhook_cache_unauthorized_ttl: Duration,
    // ---- misc ----
    /// How often initialized nodes' addresses are refreshed.
    #[arg(long = "node-status-update-frequency", value_parser = parse_go_duration, default_value = "5m", help_heading = "misc")]
    pub node_status_update_frequency: Duration,

    /// The kubeconfig; in-cluster configuration if empty.
    #[arg(long = "kubeconfig", default_value = "", help_heading = "misc")]
    pub kubeconfig: String,
    /// The API server address, overriding the kubeconfig's.
    #[arg(long = "master", default_value = "", help_heading = "misc")]
    pub master: String,
    // ---- global ----
    /// Log verbosity (0: info, 4 and above: debug, 6 and above: trace).
    #[arg(short = 'v', long = "v", default_value_t = 0, help_heading = "global")]
    pub verbosity: u8,
    /// Log format: text or json.
    #[arg(
        long = "logging-format",
        default_value = "text",
        help_heading = "global"
    )]
    pub logging_format: String,
    /// Per-module verbosity, `pattern=N` pairs: a pattern matches a module
    /// (a `::` segment of the log target, `*` globs), e.g.
    /// `service=4,node*=6`.
    #[arg(long = "vmodule", value_delimiter = ',', help_heading = "global")]
    pub vmodule: Vec<String>,
    /// The longest time between log flushes (logs are written unbuffered,
    /// so every line is flushed at once).
    #[arg(long = "log-flush-frequency", value_parser = parse_go_duration, default_value = "5s", help_heading = "global")]
    pub log_flush_frequency: Duration,
    // ---- nodeipam controller ----
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
    // ---- metrics ----
    /// Metrics left out of /metrics.
    #[arg(
        long = "disabled-metrics",
        value_delimiter = ',',
        help_heading = "metrics"
    )]
    pub disabled_metrics: Vec<String>,
    /// Show metrics hidden since this version (`1.32`); this manager hides
    /// none, so only the format is checked.
    #[arg(
        long = "show-hidden-metrics-for-version",
        default_value = "",
        help_heading = "metrics"
    )]
    pub show_hidden_metrics_for_version: String,
    /// Allowed label values: `metric,label='v1,v2'`; other values read
    /// `unexpected` (repeatable).
    #[arg(long = "allow-metric-labels", help_heading = "metrics")]
    pub allow_metric_labels: Vec<String>,
}

/// One problem with the flags.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionsError {
    /// `--cloud-provider` is empty.
    #[error("--cloud-provider cannot be empty")]
    NoCloudProvider,
    /// `--controllers` names an unknown controller.
    #[error(transparent)]
    UnknownController(#[from] UnknownController),
    /// `--leader-elect-resource-lock` is not `leases`.
    #[error("--leader-elect-resource-lock must be \"leases\", got {0:?}")]
    ResourceLock(String),
    /// The election periods are out of order.
    #[error(
        "leader election needs lease duration ({lease:?}) > renew deadline ({renew:?}) > retry period ({retry:?}) > 0"
    )]
    ElectionPeriods {
        /// `--leader-elect-lease-duration`.
        lease: Duration,
        /// `--leader-elect-renew-deadline`.
        renew: Duration,
        /// `--leader-elect-retry-period`.
        retry: Duration,
    },
    /// A count that must be positive is zero.
    #[error("{0} must be greater than 0")]
    NotPositive(&'static str),
    /// A CIDR list does not parse or has the wrong shape.
    #[error("{flag}: {message}")]
    Cidr {
        /// The flag.
        flag: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A `--load-balancer-classes` entry is neither `none` nor a
    /// domain-prefixed class name.
    #[error(
        "--load-balancer-classes: {0:?} is not a class (domain-prefixed, like example.com/internal) or none"
    )]
    LoadBalancerClass(String),
    /// The node CIDR mask flags do not fit the cluster CIDRs (Go's rules
    /// and messages).
    #[error("{0}")]
    NodeCidrMaskSize(&'static str),
    /// `--cidr-allocator-type` is not supported.
    #[error("--cidr-allocator-type {0:?} is not supported (RangeAllocator)")]
    AllocatorType(String),
    /// Only one of the certificate and key files is given.
    #[error("--tls-cert-file and --tls-private-key-file must be given together")]
    HalfCertificate,
    /// Only one of the webhook certificate and key files is given.
    #[error("--webhook-tls-cert-file and --webhook-tls-private-key-file must be given together")]
    HalfWebhookCertificate,
    /// The webhook port is the admin port.
    #[error("--webhook-secure-port ({0}) must differ from --secure-port")]
    SamePorts(u16),
    /// `--webhooks` names a webhook nobody registered.
    #[error("--webhooks: {name:?} is not a registered webhook (registered: {registered})")]
    UnknownWebhook {
        /// The entry.
        name: String,
        /// The registered names, comma separated.
        registered: String,
    },
    /// An unknown log format.
    #[error("--logging-format must be text or json, got {0:?}")]
    LoggingFormat(String),
    /// `--feature-gates` names a gate nobody defines.
    #[error("--feature-gates: unrecognized feature gate: {0}")]
    UnknownFeatureGate(String),
    /// A `--feature-gates` entry is not `Name=true|false`.
    #[error("--feature-gates: invalid value of {0}: expected Name=true or Name=false")]
    FeatureGateValue(String),
    /// A TLS flag (`--tls-*`, `--webhook-tls-*`) is invalid.
    #[error("{flags}: {message}")]
    Tls {
        /// Which server's flags.
        flags: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A metrics flag is invalid.
    #[error("{0}")]
    Metrics(String),
    /// `--vmodule` has an entry that is not `pattern=N`.
    #[error("--vmodule: {0:?} is not pattern=N (N a number from 0 to 10)")]
    Vmodule(String),
}

/// The feature gates `--feature-gates` knows, with their defaults:
/// cloud-provider's and component-base's (logging, metrics), and the
/// `AllAlpha` / `AllBeta` switches.
pub const FEATURE_GATES: &[(&str, bool)] = &[
    ("AllAlpha", false),
    ("AllBeta", false),
    (
        "CloudControllerManagerWatchBasedRoutesReconciliation",
        false,
    ),
    ("CloudControllerManagerWebhook", false),
    ("ComponentSLIs", true),
    ("ContextualLogging", true),
    ("ControllerManagerReleaseLeaderElectionLockOnExit", false),
    ("LoggingAlphaOptions", false),
    ("LoggingBetaOptions", true),
];

/// One `--vmodule` entry: a module pattern and its verbosity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmoduleRule {
    /// The pattern (`*` globs), matched against each `::` segment of a log
    /// target.
    pub pattern: String,
    /// The verbosity (`-v` scale).
    pub level: u8,
}

/// A comma-separated CIDR list: at most two, one per family.
pub fn parse_cidr_list(flag: &'static str, value: &str) -> Result<Vec<Cidr>, OptionsError> {
    let cidrs: Vec<Cidr> = value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<Cidr>().map_err(|e| OptionsError::Cidr {
                flag,
                message: e.to_string(),
            })
        })
        .collect::<Result<_, _>>()?;
    match cidrs.as_slice() {
        [a, b] if a.is_ipv6() == b.is_ipv6() => Err(OptionsError::Cidr {
            flag,
            message: "two CIDRs must be one IPv4 and one IPv6".into(),
        }),
        [_, _, _, ..] => Err(OptionsError::Cidr {
            flag,
            message: format!("at most two CIDRs, got {}", cidrs.len()),
        }),
        _ => Ok(cidrs),
    }
}

impl ManagerOptions {
    /// Every feature gate with its value (defaults, then `--feature-gates`).
    ///
    /// ```
    /// use clap::Parser;
    /// # #[derive(Parser)] struct Cli { #[command(flatten)] options: stratus_ccm::app::ManagerOptions }
    /// let o = Cli::parse_from(["ccm", "--feature-gates=CloudControllerManagerWebhook=true"]).options;
    /// assert!(o.feature_gates().unwrap()["CloudControllerManagerWebhook"]);
    /// let o = Cli::parse_from(["ccm", "--feature-gates=NoSuchGate=true"]).options;
    /// assert!(o.feature_gates().is_err());
    /// ```
    pub fn feature_gates(&self) -> Result<std::collections::BTreeMap<String, bool>, OptionsError> {
        let mut gates: std::collections::BTreeMap<String, bool> = FEATURE_GATES
            .iter()
            .map(|(n, v)| (n.to_string(), *v))
            .collect();
        for entry in self
            .feature_gates
            .iter()
            .map(|e| e.trim())
            .filter(|e| !e.is_empty())
        {
            let (name, value) = entry
                .split_once('=')
                .ok_or_else(|| OptionsError::FeatureGateValue(entry.to_owned()))?;
            let (name, value) = (name.trim(), value.trim());
            if !gates.contains_key(name) {
                return Err(OptionsError::UnknownFeatureGate(name.to_owned()));
            }
            let value = match value.to_ascii_lowercase().as_str() {
                "true" | "t" | "1" => true,
                "false" | "f" | "0" => false,
                _ => return Err(OptionsError::FeatureGateValue(entry.to_owned())),
            };
            gates.insert(name.to_owned(), value);
        }
        Ok(gates)
    }

    /// The `--vmodule` rules.
    pub fn vmodule_rules(&self) -> Result<Vec<VmoduleRule>, OptionsError> {
        self.vmodule
            .iter()
            .map(|e| e.trim())
            .filter(|e| !e.is_empty())
            .map(|entry| {
                let bad = || OptionsError::Vmodule(entry.to_owned());
                let (pattern, level) = entry.split_once('=').ok_or_else(bad)?;
                let level: u8 = level.trim().parse().map_err(|_| bad())?;
                if pattern.trim().is_empty() || level > 10 {
                    return Err(bad());
                }
                Ok(VmoduleRule {
                    pattern: pattern.trim().to_owned(),
                    level,
                })
            })
            .collect()
    }

    /// How the admin server (`--tls-*`, `--http2-*`, `--permit-*`) and the
    /// webhook server (`--webhook-tls-*`) listen, and warnings for values
    /// accepted but not served.
    pub fn serving(&self) -> Result<(ServingOptions, ServingOptions, Vec<String>), OptionsError> {
        let tls = |flags: &'static str,
                   min: &str,
                   suites: &[String],
                   curves: &[String],
                   sni: &[String]| {
            TlsPolicy::from_go_flags(min, suites, curves, sni).map_err(|e| OptionsError::Tls {
                flags,
                message: e.to_string(),
            })
        };
        let (admin_tls, mut warnings) = tls(
            "--tls-*",
            &self.tls_min_version,
            &self.tls_cipher_suites,
            &self.tls_curve_preferences,
            &self.tls_sni_cert_key,
        )?;
        let (webhook_tls, webhook_warnings) = tls(
            "--webhook-tls-*",
            &self.webhook_tls_min_version,
            &self.webhook_tls_cipher_suites,
            &self.webhook_tls_curve_preferences,
            &self.webhook_tls_sni_cert_key,
        )?;
        warnings.extend(
            webhook_warnings
                .into_iter()
                .map(|w| format!("webhooks: {w}")),
        );
        let admin = ServingOptions {
            tls: admin_tls,
            http2_max_streams: (self.http2_max_streams_per_connection != 0)
                .then_some(self.http2_max_streams_per_connection),
            disable_http2: false,
            reuse_port: self.permit_port_sharing,
            reuse_address: self.permit_address_sharing,
            connections: Default::default(),
        };
        let webhook = ServingOptions {
            tls: webhook_tls,
            http2_max_streams: admin.http2_max_streams,
            disable_http2: self.webhook_disable_http2_serving,
            reuse_port: self.permit_port_sharing,
            reuse_address: self.permit_address_sharing,
            connections: Default::default(),
        };
        Ok((admin, webhook, warnings))
    }

    /// The `/metrics` filter of `--disabled-metrics` and
    /// `--allow-metric-labels`.
    pub fn metrics_filter(&self) -> Result<MetricsFilter, OptionsError> {
        MetricsFilter::new(&self.disabled_metrics, &self.allow_metric_labels)
            .map_err(|e| OptionsError::Metrics(e.to_string()))
    }

    /// One line for each flag accepted with no effect here, saying why.
    pub fn ignored_flag_warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.node_sync_period.is_some() {
            warnings.push("--node-sync-period is deprecated and has no effect (as in Go)".into());
        }
        if let Some(t) = &self.kube_api_content_type
            && t != "application/json"
        {
            warnings.push(format!(
                "--kube-api-content-type={t}: kube-rs clients send JSON; the flag is ignored"
            ));
        }
        if self
            .external_cloud_volume_plugin
            .as_deref()
            .is_some_and(|p| !p.is_empty())
        {
            warnings.push(
                "--external-cloud-volume-plugin names an in-tree volume plugin of kube-controller-manager; an external cloud controller manager has none, so it is ignored".into(),
            );
        }
        if self.profiling == Some(true) || self.contention_profiling == Some(true) {
            warnings.push(
                "--profiling / --contention-profiling: this manager serves no /debug/pprof endpoints; profile it with an external profiler (perf, heaptrack)".into(),
            );
        }
        if self.enable_leader_migration || !self.leader_migration_config.is_empty() {
            warnings.push(
                "--enable-leader-migration / --leader-migration-config: leader migration is not supported; the manager elects its leader on its own Lease".into(),
            );
        }
        if !self.show_hidden_metrics_for_version.is_empty() {
            warnings.push(
                "--show-hidden-metrics-for-version: this manager hides no metrics; nothing changes"
                    .into(),
            );
        }
        warnings
    }

    /// The classes `--load-balancer-classes` names, or `None` when empty
    /// (the provider decides).
    ///
    /// ```
    /// use clap::Parser;
    /// # #[derive(Parser)] struct Cli { #[command(flatten)] options: stratus_ccm::app::ManagerOptions }
    /// let o = Cli::parse_from(["ccm", "--load-balancer-classes=none,example.com/internal"]).options;
    /// let classes = o.load_balancer_classes().unwrap();
    /// assert!(classes.serves(None) && classes.serves(Some("example.com/internal")));
    /// assert!(Cli::parse_from(["ccm"]).options.load_balancer_classes().is_none());
    /// ```
    pub fn load_balancer_classes(&self) -> Option<stratus_cloud::LoadBalancerClasses> {
        let entries: Vec<&str> = self
            .load_balancer_classes
            .iter()
            .map(|c| c.trim())
            .filter(|c| !c.is_empty())
            .collect();
        if entries.is_empty() {
            return None;
        }
        let named = entries.iter().filter(|c| **c != "none").copied();
        Some(
            stratus_cloud::LoadBalancerClasses::named(named)
                .with_unclassed(entries.contains(&"none")),
        )
    }

    /// The node CIDR mask sizes (IPv4, IPv6) for `cluster_cidrs`, from
    /// `--node-cidr-mask-size` and the per-family flags, by the rules of
    /// Go's node-ipam controller: the single flag only for a single-stack
    /// cluster and never with the per-family ones; a family's flag only when
    /// the cluster has that family (or is dual-stack); 24 and 64 otherwise.
    ///
    /// ```
    /// # use clap::Parser;
    /// # #[derive(Parser)] struct Cli { #[command(flatten)] options: stratus_ccm::app::ManagerOptions }
    /// use stratus_ccm::app::parse_cidr_list;
    ///
    /// let cli = Cli::parse_from(["ccm", "--node-cidr-mask-size=26"]);
    /// let v4 = parse_cidr_list("--cluster-cidr", "10.0.0.0/16").unwrap();
    /// assert_eq!(cli.options.node_cidr_mask_sizes(&v4).unwrap(), (26, 26));
    /// let dual = parse_cidr_list("--cluster-cidr", "10.0.0.0/16,fd00::/48").unwrap();
    /// assert!(cli.options.node_cidr_mask_sizes(&dual).is_err());
    /// ```
    pub fn node_cidr_mask_sizes(&self, cluster_cidrs: &[Cidr]) -> Result<(u8, u8), OptionsError> {
        const IPV4: u8 = 24;
        const IPV6: u8 = 64;
        // Go treats 0 as "not set".
        let set = |v: Option<u8>| v.filter(|m| *m != 0);
        let (single, v4, v6) = (
            set(self.node_cidr_mask_size),
            set(self.node_cidr_mask_size_ipv4),
            set(self.node_cidr_mask_size_ipv6),
        );
        if cluster_cidrs.len() > 1 {
            if single.is_some() {
                return Err(OptionsError::NodeCidrMaskSize(
                    "usage of --node-cidr-mask-size is not allowed with dual-stack clusters",
                ));
            }
            return Ok((v4.unwrap_or(IPV4), v6.unwrap_or(IPV6)));
        }
        if let Some(mask) = single {
            if v4.is_some() || v6.is_some() {
                return Err(OptionsError::NodeCidrMaskSize(
                    "usage of --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 is not allowed if --node-cidr-mask-size is set. For dual-stack clusters please unset it and use IPFamily specific flags",
                ));
            }
            return Ok((mask, mask));
        }
        let single_stack_ipv6 = cluster_cidrs.first().is_some_and(Cidr::is_ipv6);
        if v4.is_some() && single_stack_ipv6 {
            return Err(OptionsError::NodeCidrMaskSize(
                "usage of --node-cidr-mask-size-ipv4 is not allowed for a single-stack IPv6 cluster",
            ));
        }
        if v6.is_some() && !single_stack_ipv6 {
            return Err(OptionsError::NodeCidrMaskSize(
                "usage of --node-cidr-mask-size-ipv6 is not allowed for a single-stack IPv4 cluster",
            ));
        }
        Ok((v4.unwrap_or(IPV4), v6.unwrap_or(IPV6)))
    }

    /// Every problem with the flags (empty when they are valid), given the
    /// controllers the manager knows.
    pub fn validate(&self, known: &[KnownController]) -> Vec<OptionsError> {
        let mut problems = Vec::new();
        if self.cloud_provider.trim().is_empty() {
            problems.push(OptionsError::NoCloudProvider);
        }
        if let Err(e) = canonicalize(&self.controllers, known) {
            problems.push(e.into());
        }
        if self.leader_elect {
            if self.leader_elect_resource_lock != "leases" {
                problems.push(OptionsError::ResourceLock(
                    self.leader_elect_resource_lock.clone(),
                ));
            }
            let (lease, renew, retry) = (
                self.leader_elect_lease_duration,
                self.leader_elect_renew_deadline,
                self.leader_elect_retry_period,
            );
            if !(lease > renew && renew > retry && !retry.is_zero()) {
                problems.push(OptionsError::ElectionPeriods {
                    lease,
                    renew,
                    retry,
                });
            }
        }
        if self.concurrent_node_syncs == 0 {
            problems.push(OptionsError::NotPositive("--concurrent-node-syncs"));
        }
        if self.concurrent_service_syncs == 0 {
            problems.push(OptionsError::NotPositive("--concurrent-service-syncs"));
        }
        if self.node_max_batch == 0 {
            problems.push(OptionsError::NotPositive("--node-max-batch"));
        }
        if let Some(bad) = self
            .load_balancer_classes
            .iter()
            .map(|c| c.trim())
            .find(|c| !c.is_empty() && *c != "none" && !c.contains('/'))
        {
            problems.push(OptionsError::LoadBalancerClass(bad.to_owned()));
        }
        if self.node_gone_confirmations == 0 {
            problems.push(OptionsError::NotPositive("--node-gone-confirmations"));
        }
        for (flag, value) in [
            ("--cluster-cidr", &self.cluster_cidr),
            ("--service-cluster-ip-range", &self.service_cluster_ip_range),
        ] {
            if let Err(e) = parse_cidr_list(flag, value) {
                problems.push(e);
            }
        }
        if self.allocate_node_cidrs {
            if self.cidr_allocator_type != "RangeAllocator" {
                problems.push(OptionsError::AllocatorType(
                    self.cidr_allocator_type.clone(),
                ));
            }
            if self.cluster_cidr.trim().is_empty() {
                problems.push(OptionsError::Cidr {
                    flag: "--cluster-cidr",
                    message: "required with --allocate-node-cidrs".into(),
                });
            } else if let Ok(cidrs) = parse_cidr_list("--cluster-cidr", &self.cluster_cidr)
                && let Err(e) = self.node_cidr_mask_sizes(&cidrs)
            {
                problems.push(e);
            }
        }
        if self.tls_cert_file.is_some() != self.tls_private_key_file.is_some() {
            problems.push(OptionsError::HalfCertificate);
        }
        if let Err(e) = self.feature_gates() {
            problems.push(e);
        }
        if let Err(e) = self.vmodule_rules() {
            problems.push(e);
        }
        if let Err(e) = self.serving() {
            problems.push(e);
        }
        if let Err(e) = self.metrics_filter() {
            problems.push(e);
        }
        let version = self.show_hidden_metrics_for_version.trim();
        if !version.is_empty() {
            let ok = version
                .split_once('.')
                .is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok());
            if !ok {
                problems.push(OptionsError::Metrics(format!(
                    "--show-hidden-metrics-for-version {version:?}: expected major.minor, like 1.32"
                )));
            }
        }
        if !matches!(self.logging_format.as_str(), "text" | "json") {
            problems.push(OptionsError::LoggingFormat(self.logging_format.clone()));
        }
        if self.webhook_tls_cert_file.is_some() != self.webhook_tls_private_key_file.is_some() {
            problems.push(OptionsError::HalfWebhookCertificate);
        }
        if self.webhook_secure_port != 0 && self.webhook_secure_port == self.secure_port {
            problems.push(OptionsError::SamePorts(self.webhook_secure_port));
        }
        problems
    }

    /// The webhooks `--webhooks` enables among the `registered` names, in
    /// registration order, or the first unknown name. With
    /// `--webhook-secure-port=0` none is.
    ///
    /// ```
    /// use clap::Parser;
    /// # #[derive(Parser)] struct Cli { #[command(flatten)] options: stratus_ccm::app::ManagerOptions }
    /// let o = Cli::parse_from(["ccm", "--webhooks=*,-b"]).options;
    /// assert_eq!(o.enabled_webhooks(&["a", "b", "c"]).unwrap(), ["a", "c"]);
    /// let o = Cli::parse_from(["ccm"]).options;
    /// assert!(o.enabled_webhooks(&["a"]).unwrap().is_empty(), "none by default");
    /// ```
    pub fn enabled_webhooks<'a>(
        &self,
        registered: &[&'a str],
    ) -> Result<Vec<&'a str>, OptionsError> {
        let entries: Vec<&str> = self
            .webhooks
            .iter()
            .map(|e| e.trim())
            .filter(|e| !e.is_empty())
            .collect();
        for entry in &entries {
            let name = entry.strip_prefix('-').unwrap_or(entry);
            if *entry != "*" && !registered.contains(&name) {
                return Err(OptionsError::UnknownWebhook {
                    name: (*entry).to_owned(),
                    registered: registered.join(", "),
                });
            }
        }
        if self.webhook_secure_port == 0 {
            return Ok(Vec::new());
        }
        Ok(registered
            .iter()
            .copied()
            .filter(|name| {
                let mut star = false;
                for entry in &entries {
                    if entry == name {
                        return true;
                    }
                    if entry.strip_prefix('-') == Some(name) {
                        return false;
                    }
                    star |= *entry == "*";
                }
                star
            })
            .collect())
    }
}
