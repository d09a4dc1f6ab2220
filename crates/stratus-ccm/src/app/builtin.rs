//! The built-in controllers as [`ManagedController`]s (Go's
//! `DefaultInitFuncConstructors`), each configured from the manager flags.

use k8s_openapi::api::rbac::v1::PolicyRule;
use stratus_cloud::names::controllers as names;

use super::managed::{ControllerContext, ManagedController, StartError, Started};
use super::options::parse_cidr_list;
use crate::Instrumented;
use crate::ipam::{NodeIpamConfig, NodeIpamController};
use crate::lifecycle::{LifecycleConfig, LifecycleController};
use crate::node::{NodeController, NodeControllerConfig};
use crate::route::{RouteController, RouteControllerConfig};
use crate::service::{ServiceController, ServiceControllerConfig};

type Start = Result<Started, StartError>;

/// Why the route controller cannot start: Go's manager exits then too.
const EMPTY_CLUSTER_CIDR: &str = "--configure-cloud-routes is set and the cloud provider offers routes, but --cluster-cidr is empty (set it, or --configure-cloud-routes=false)";

/// Why the node controllers do not run.
const NO_INSTANCES: &str = "the cloud provider offers neither InstancesV2 nor Instances";

/// The controllers of this crate, in start order: Go's four (enabled by
/// `*`), then node-ipam (also under `*`; it runs only with
/// `--allocate-node-cidrs`, as in Go). A vendor may drop one (as Go's
/// sample deletes `cloud-node-lifecycle`) or add its own after them.
///
/// ```
/// let names: Vec<_> = stratus_ccm::app::default_controllers()
///     .iter()
///     .map(|c| c.names().canonical)
///     .collect();
/// assert_eq!(names, [
///     "cloud-node-controller",
///     "cloud-node-lifecycle-controller",
///     "service-lb-controller",
///     "node-route-controller",
///     "nodeipam",
/// ]);
/// ```
pub fn default_controllers() -> Vec<ManagedController> {
    // The API access of each, from what its code calls; modelled on the
    // bootstrap roles `system:controller:{node,service,route}-controller`,
    // without their Pod access (none of these touches Pods) and never
    // Secrets. Every controller records events.
    let events = rule("", &["events"], &["create", "patch"]);
    vec![
        ManagedController::new(names::CLOUD_NODE, cloud_node).rbac(vec![
            rule("", &["nodes"], &["get", "list", "watch", "patch"]),
            rule("", &["nodes/status"], &["patch"]),
            events.clone(),
        ]),
        ManagedController::new(names::CLOUD_NODE_LIFECYCLE, cloud_node_lifecycle).rbac(vec![
            rule("", &["nodes"], &["get", "list", "watch", "patch", "delete"]),
            events.clone(),
        ]),
        ManagedController::new(names::SERVICE_LB, service_lb).rbac(vec![
            rule("", &["services"], &["get", "list", "watch", "patch"]),
            rule("", &["services/status"], &["patch"]),
            rule("", &["nodes"], &["list", "watch"]),
            events.clone(),
        ]),
        ManagedController::new(names::NODE_ROUTE, node_route).rbac(vec![
            rule("", &["nodes"], &["list", "watch"]),
            rule("", &["nodes/status"], &["patch"]),
            events.clone(),
        ]),
        ManagedController::new(names::NODE_IPAM, node_ipam).rbac(vec![
            rule("", &["nodes"], &["get", "list", "watch", "patch"]),
            events,
        ]),
    ]
}

/// A policy rule: `verbs` on `resources` of the API group `group` (`""` is
/// the core group).
///
/// ```
/// let r = stratus_ccm::app::rule("coordination.k8s.io", &["leases"], &["get"]);
/// assert_eq!(r.api_groups.unwrap(), ["coordination.k8s.io"]);
/// ```
pub fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(owned(resources)),
        verbs: owned(verbs),
        ..Default::default()
    }
}

fn cloud_node(ctx: ControllerContext) -> Start {
    if ctx.provider.instances_v2().is_none() {
        return Ok(Started::not_enabled(NO_INSTANCES));
    }
    let o = &ctx.options;
    let config = NodeControllerConfig {
        workers: o.node_controller.concurrent_node_syncs,
        cluster_name: o.cloud.cluster_name.clone(),
        status_update_frequency: o.node_status_update_frequency,
        // Go: 0 means `--concurrent-node-syncs`.
        status_update_workers: match o.node_controller.concurrent_node_status_updates {
            0 => o.node_controller.concurrent_node_syncs,
            n => n,
        },
        refresh_labels: o.node_controller.refresh_node_labels,
        batch_window: o.node_controller.node_batch_window,
        max_batch: o.node_controller.node_max_batch,
        resync_period: Some(ctx.resync_period),
        ..NodeControllerConfig::default()
    };
    let controller = NodeController::new(ctx.client, ctx.informers.nodes(), ctx.provider, config)
        .with_metrics(ctx.metrics)
        .with_health(ctx.health);
    Ok(Started::run(controller.run(ctx.stop)))
}

fn cloud_node_lifecycle(ctx: ControllerContext) -> Start {
    if ctx.provider.instances_v2().is_none() {
        return Ok(Started::not_enabled(NO_INSTANCES));
    }
    let o = &ctx.options;
    let config = LifecycleConfig {
        monitor_period: o.cloud.node_monitor_period,
        gone_confirmations: o.node_controller.node_gone_confirmations,
        min_node_age: o.node_controller.node_min_age_before_deletion,
    };
    let controller =
        LifecycleController::new(ctx.client, ctx.informers.nodes(), ctx.provider, config)
            .with_metrics(ctx.metrics)
            .with_health(ctx.health);
    Ok(Started::run(controller.run(ctx.stop)))
}

fn service_lb(ctx: ControllerContext) -> Start {
    if ctx.provider.load_balancer().is_none() {
        return Ok(Started::not_enabled(
            "the cloud provider offers no load balancers",
        ));
    }
    let o = &ctx.options;
    let config = ServiceControllerConfig {
        workers: o.service_controller.concurrent_service_syncs,
        cluster_name: o.cloud.cluster_name.clone(),
        drift_check_period: (!o
            .service_controller
            .load_balancer_drift_check_period
            .is_zero())
        .then_some(o.service_controller.load_balancer_drift_check_period),
        classes: o.load_balancer_classes(),
        resync_period: Some(ctx.resync_period),
        ..ServiceControllerConfig::default()
    };
    let controller = ServiceController::new(
        ctx.client,
        ctx.informers.services(),
        ctx.informers.nodes(),
        ctx.provider,
        config,
    )
    .with_metrics(ctx.metrics)
    .with_health(ctx.health);
    Ok(Started::run(controller.run(ctx.stop)))
}

fn node_route(ctx: ControllerContext) -> Start {
    let o = &ctx.options;
    // Go's order of checks (`startRouteController`).
    if !o.cloud.configure_cloud_routes {
        return Ok(Started::not_enabled("--configure-cloud-routes is false"));
    }
    if ctx.provider.routes().is_none() {
        return Ok(Started::not_enabled(
            "--configure-cloud-routes is set, but the cloud provider offers no routes",
        ));
    }
    // As Go: routes to configure and no cluster CIDR to take them from is
    // an error that stops the manager, not a controller quietly left off.
    let cluster_cidrs = parse_cidr_list("--cluster-cidr", &o.cloud.cluster_cidr)?;
    if cluster_cidrs.is_empty() {
        return Err(EMPTY_CLUSTER_CIDR.into());
    }
    let mut config = RouteControllerConfig::new(cluster_cidrs);
    config.cluster_name = o.cloud.cluster_name.clone();
    config.reconcile_period = o.cloud.route_reconciliation_period;
    config.watch_based = o.feature_gates()?["CloudControllerManagerWatchBasedRoutesReconciliation"];
    config.resync_period = Some(ctx.resync_period);
    let controller = RouteController::new(ctx.client, ctx.informers.nodes(), ctx.provider, config)
        .with_metrics(ctx.metrics)
        .with_health(ctx.health);
    Ok(Started::run(controller.run(ctx.stop)))
}

fn node_ipam(ctx: ControllerContext) -> Start {
    let o = &ctx.options;
    if !o.cloud.allocate_node_cidrs {
        return Ok(Started::not_enabled("--allocate-node-cidrs is false"));
    }
    let cluster_cidrs = parse_cidr_list("--cluster-cidr", &o.cloud.cluster_cidr)?;
    let (ipv4_mask, ipv6_mask) = o.node_cidr_mask_sizes(&cluster_cidrs)?;
    let mut config = NodeIpamConfig::new(cluster_cidrs);
    config.service_cidrs = parse_cidr_list(
        "--service-cluster-ip-range",
        &o.node_ipam_controller.service_cluster_ip_range,
    )?;
    config.node_cidr_mask_size_ipv4 = ipv4_mask;
    config.node_cidr_mask_size_ipv6 = ipv6_mask;
    let controller = NodeIpamController::new(ctx.client, ctx.informers.nodes(), config)?
        .with_metrics(ctx.metrics)
        .with_health(ctx.health);
    Ok(Started::run(controller.run(ctx.stop)))
}
