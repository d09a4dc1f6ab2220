//! The manager's flags, with Go's names and defaults (see
//! `shared/reference/cloud-provider.md` §3.2), and their validation: one
//! clear error per problem.

use std::time::Duration;

use clap::Args;
use stratus_cloud::helpers::Cidr;

use super::controllers::{KnownController, UnknownController, canonicalize};

mod auth;
mod controllers;
mod generic;
mod logs;
mod metrics;
mod serving;

pub use auth::{AuthenticationOptions, AuthorizationOptions};
pub use controllers::{NodeControllerOptions, NodeIpamControllerOptions, ServiceControllerOptions};
pub use generic::{
    DebuggingOptions, GenericOptions, KubeCloudSharedOptions, LeaderMigrationOptions,
};
pub use logs::LogsOptions;
pub use metrics::MetricsOptions;
pub use serving::{SecureServingOptions, WebhookOptions, WebhookServingOptions};
use stratus_runtime::duration::parse_go_duration;
use stratus_runtime::metrics::MetricsFilter;
use stratus_runtime::serving::ServingOptions;
use stratus_runtime::tls_policy::TlsPolicy;

/// The flags of a cloud controller manager, split by concern as Go's
/// `CloudControllerManagerOptions` splits them (each group a flattened
/// struct; `--help` shows Go's groups). A flag given twice takes its last
/// value, as with Go's flag parsing (list flags append).
#[derive(Debug, Clone, Args)]
#[command(args_override_self = true)]
pub struct ManagerOptions {
    /// Go's debugging flags (`Generic.Debugging`): accepted, not served.
    #[command(flatten)]
    pub debugging: DebuggingOptions,
    /// Go's leader-migration flags (`Generic.LeaderMigration`): accepted with a warning.
    #[command(flatten)]
    pub leader_migration: LeaderMigrationOptions,
    /// Go's generic controller-manager flags (`GenericControllerManagerConfigurationOptions`):
    #[command(flatten)]
    pub generic: GenericOptions,
    /// The flags the cloud controllers share (Go's `KubeCloudSharedOptions`): the provider,
    #[command(flatten)]
    pub cloud: KubeCloudSharedOptions,
    /// The cloud-node and cloud-node-lifecycle controllers' flags (Go's `NodeControllerOptions`,
    #[command(flatten)]
    pub node_controller: NodeControllerOptions,
    /// The service controller's flags (Go's `ServiceControllerOptions`, and Stratus's drift
    #[command(flatten)]
    pub service_controller: ServiceControllerOptions,
    /// Which admission webhooks are served (Go's `WebhookOptions`).
    #[command(flatten)]
    pub webhook: WebhookOptions,
    /// Where and how the webhooks are served (Go's `WebhookServingOptions`).
    #[command(flatten)]
    pub webhook_serving: WebhookServingOptions,
    /// The secure port of `/healthz`, `/metrics` and `/configz` (Go's `SecureServingOptions`).
    #[command(flatten)]
    pub secure_serving: SecureServingOptions,
    /// Who may call the secure port (Go's `DelegatingAuthenticationOptions`).
    #[command(flatten)]
    pub authentication: AuthenticationOptions,
    /// What callers of the secure port may do (Go's `DelegatingAuthorizationOptions`).
    #[command(flatten)]
    pub authorization: AuthorizationOptions,
    /// How often initialized nodes' addresses are refreshed.
    #[arg(long = "node-status-update-frequency", value_parser = parse_go_duration, default_value = "5m", help_heading = "misc")]
    pub node_status_update_frequency: Duration,
    /// The kubeconfig; in-cluster configuration if empty.
    #[arg(long = "kubeconfig", default_value = "", help_heading = "misc")]
    pub kubeconfig: String,
    /// The API server address, overriding the kubeconfig's.
    #[arg(long = "master", default_value = "", help_heading = "misc")]
    pub master: String,
    /// The log flags (Go's `logs.Options`, in the `global` group).
    #[command(flatten)]
    pub logs: LogsOptions,
    /// The node-ipam controller's flags (Go's `NodeIPAMControllerOptions`).
    #[command(flatten)]
    pub node_ipam_controller: NodeIpamControllerOptions,
    /// The `/metrics` flags (Go's `metrics.Options`).
    #[command(flatten)]
    pub metrics: MetricsOptions,
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
            .generic
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
        self.logs
            .vmodule
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
            &self.secure_serving.tls_min_version,
            &self.secure_serving.tls_cipher_suites,
            &self.secure_serving.tls_curve_preferences,
            &self.secure_serving.tls_sni_cert_key,
        )?;
        let (webhook_tls, webhook_warnings) = tls(
            "--webhook-tls-*",
            &self.webhook_serving.webhook_tls_min_version,
            &self.webhook_serving.webhook_tls_cipher_suites,
            &self.webhook_serving.webhook_tls_curve_preferences,
            &self.webhook_serving.webhook_tls_sni_cert_key,
        )?;
        warnings.extend(
            webhook_warnings
                .into_iter()
                .map(|w| format!("webhooks: {w}")),
        );
        let admin = ServingOptions {
            tls: admin_tls,
            http2_max_streams: (self.secure_serving.http2_max_streams_per_connection != 0)
                .then_some(self.secure_serving.http2_max_streams_per_connection),
            disable_http2: false,
            reuse_port: self.secure_serving.permit_port_sharing,
            reuse_address: self.secure_serving.permit_address_sharing,
            connections: Default::default(),
        };
        let webhook = ServingOptions {
            tls: webhook_tls,
            http2_max_streams: admin.http2_max_streams,
            disable_http2: self.webhook_serving.webhook_disable_http2_serving,
            reuse_port: self.secure_serving.permit_port_sharing,
            reuse_address: self.secure_serving.permit_address_sharing,
            connections: Default::default(),
        };
        Ok((admin, webhook, warnings))
    }

    /// The `/metrics` filter of `--disabled-metrics` and
    /// `--allow-metric-labels`.
    pub fn metrics_filter(&self) -> Result<MetricsFilter, OptionsError> {
        MetricsFilter::new(
            &self.metrics.disabled_metrics,
            &self.metrics.allow_metric_labels,
        )
        .map_err(|e| OptionsError::Metrics(e.to_string()))
    }

    /// One line for each flag accepted with no effect here, saying why.
    pub fn ignored_flag_warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.cloud.node_sync_period.is_some() {
            warnings.push("--node-sync-period is deprecated and has no effect (as in Go)".into());
        }
        if let Some(t) = &self.generic.kube_api_content_type
            && t != "application/json"
        {
            warnings.push(format!(
                "--kube-api-content-type={t}: kube-rs clients send JSON; the flag is ignored"
            ));
        }
        if self
            .cloud
            .external_cloud_volume_plugin
            .as_deref()
            .is_some_and(|p| !p.is_empty())
        {
            warnings.push(
                "--external-cloud-volume-plugin names an in-tree volume plugin of kube-controller-manager; an external cloud controller manager has none, so it is ignored".into(),
            );
        }
        if self.debugging.profiling == Some(true)
            || self.debugging.contention_profiling == Some(true)
        {
            warnings.push(
                "--profiling / --contention-profiling: this manager serves no /debug/pprof endpoints; profile it with an external profiler (perf, heaptrack)".into(),
            );
        }
        if self.leader_migration.enable_leader_migration
            || !self.leader_migration.leader_migration_config.is_empty()
        {
            warnings.push(
                "--enable-leader-migration / --leader-migration-config: leader migration is not supported; the manager elects its leader on its own Lease".into(),
            );
        }
        if !self.metrics.show_hidden_metrics_for_version.is_empty() {
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
            .service_controller
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
            set(self.node_ipam_controller.node_cidr_mask_size),
            set(self.node_ipam_controller.node_cidr_mask_size_ipv4),
            set(self.node_ipam_controller.node_cidr_mask_size_ipv6),
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
        if self.cloud.cloud_provider.trim().is_empty() {
            problems.push(OptionsError::NoCloudProvider);
        }
        if let Err(e) = canonicalize(&self.generic.controllers, known) {
            problems.push(e.into());
        }
        if self.generic.leader_elect {
            if self.generic.leader_elect_resource_lock != "leases" {
                problems.push(OptionsError::ResourceLock(
                    self.generic.leader_elect_resource_lock.clone(),
                ));
            }
            let (lease, renew, retry) = (
                self.generic.leader_elect_lease_duration,
                self.generic.leader_elect_renew_deadline,
                self.generic.leader_elect_retry_period,
            );
            if !(lease > renew && renew > retry && !retry.is_zero()) {
                problems.push(OptionsError::ElectionPeriods {
                    lease,
                    renew,
                    retry,
                });
            }
        }
        if self.node_controller.concurrent_node_syncs == 0 {
            problems.push(OptionsError::NotPositive("--concurrent-node-syncs"));
        }
        if self.service_controller.concurrent_service_syncs == 0 {
            problems.push(OptionsError::NotPositive("--concurrent-service-syncs"));
        }
        if self.node_controller.node_max_batch == 0 {
            problems.push(OptionsError::NotPositive("--node-max-batch"));
        }
        if let Some(bad) = self
            .service_controller
            .load_balancer_classes
            .iter()
            .map(|c| c.trim())
            .find(|c| !c.is_empty() && *c != "none" && !c.contains('/'))
        {
            problems.push(OptionsError::LoadBalancerClass(bad.to_owned()));
        }
        if self.node_controller.node_gone_confirmations == 0 {
            problems.push(OptionsError::NotPositive("--node-gone-confirmations"));
        }
        for (flag, value) in [
            ("--cluster-cidr", &self.cloud.cluster_cidr),
            (
                "--service-cluster-ip-range",
                &self.node_ipam_controller.service_cluster_ip_range,
            ),
        ] {
            if let Err(e) = parse_cidr_list(flag, value) {
                problems.push(e);
            }
        }
        if self.cloud.allocate_node_cidrs {
            if self.cloud.cidr_allocator_type != "RangeAllocator" {
                problems.push(OptionsError::AllocatorType(
                    self.cloud.cidr_allocator_type.clone(),
                ));
            }
            if self.cloud.cluster_cidr.trim().is_empty() {
                problems.push(OptionsError::Cidr {
                    flag: "--cluster-cidr",
                    message: "required with --allocate-node-cidrs".into(),
                });
            } else if let Ok(cidrs) = parse_cidr_list("--cluster-cidr", &self.cloud.cluster_cidr)
                && let Err(e) = self.node_cidr_mask_sizes(&cidrs)
            {
                problems.push(e);
            }
        }
        if self.secure_serving.tls_cert_file.is_some()
            != self.secure_serving.tls_private_key_file.is_some()
        {
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
        let version = self.metrics.show_hidden_metrics_for_version.trim();
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
        if !matches!(self.logs.logging_format.as_str(), "text" | "json") {
            problems.push(OptionsError::LoggingFormat(
                self.logs.logging_format.clone(),
            ));
        }
        if self.webhook_serving.webhook_tls_cert_file.is_some()
            != self.webhook_serving.webhook_tls_private_key_file.is_some()
        {
            problems.push(OptionsError::HalfWebhookCertificate);
        }
        if self.webhook_serving.webhook_secure_port != 0
            && self.webhook_serving.webhook_secure_port == self.secure_serving.secure_port
        {
            problems.push(OptionsError::SamePorts(
                self.webhook_serving.webhook_secure_port,
            ));
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
            .webhook
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
        if self.webhook_serving.webhook_secure_port == 0 {
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
