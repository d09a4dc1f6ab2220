//! The node-route controller (Go's `node-route-controller`), in Go's two
//! modes:
//!
//! - periodic (Go's default): one reconcile every `reconcile_period`
//!   (`--route-reconciliation-period`, 10 s), whatever changed;
//! - watch-based (`watch_based`, Go's feature gate
//!   `CloudControllerManagerWatchBasedRoutesReconciliation`, KEP-5237): a
//!   reconcile when a Node is added or deleted or its pod CIDRs or
//!   addresses change (not on a heartbeat), and at each informer resync;
//!   at most one per `reconcile_period`. Beyond Go, a reconcile with a
//!   failed cloud operation is followed by another one a period later (Go
//!   waits for the next change).
//!
//! A reconcile:
//!
//! - every pod CIDR of every node gets a route to the node (name hint = the
//!   Node's UID); a route whose node addresses changed (when the provider
//!   routes by address) is replaced;
//! - only routes inside the cluster CIDRs are managed (their first or last
//!   address inside one): such routes to unknown nodes or CIDRs, and
//!   blackhole routes, are deleted;
//! - at most `max_concurrent_operations` (200) cloud operations at once;
//! - each node with pod CIDRs gets the `NetworkUnavailable` condition:
//!   `False` / `RouteCreated` when all its routes exist, `True` /
//!   `NoRouteCreated` otherwise; the condition is written only when its
//!   status or reason changes;
//! - a failed create records `FailedToCreateRoute` on the Node and is
//!   retried at the next reconcile.

mod schedule;

use std::collections::{BTreeSet, HashMap};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use stratus_runtime::controller::Controller;
use stratus_runtime::informer::SharedInformer;
use stratus_runtime::workqueue::{Action, WorkQueue, default_controller_rate_limiter};

use schedule::{Next, Schedule};

use crate::context::{Context, Part};
use crate::metrics::CcmMetrics;
use crate::names::events;
use futures_util::StreamExt;
use futures_util::stream;
use k8s_openapi::api::core::v1::{Node, NodeAddress};
use kube::api::Patch;
use kube_runtime::reflector::Store;
use serde_json::json;
use stratus_cloud::helpers::{Cidr, node_addresses_equal, parse_ip_sloppy};
use stratus_cloud::names::{conditions, controllers};
use stratus_cloud::{CloudProvider, Route, Routes};
use stratus_runtime::events::EventType;
use stratus_runtime::health::ControllerHealth;
use tokio::sync::watch;

/// The one key of the controller's queue: a pass over every route.
const PASS: &str = "routes";

fn lock(schedule: &Mutex<Schedule>) -> MutexGuard<'_, Schedule> {
    schedule.lock().unwrap_or_else(|e| e.into_inner())
}

/// Settings of the route controller.
#[derive(Debug, Clone)]
pub struct RouteControllerConfig {
    /// The cluster CIDRs (`--cluster-cidr`, one per IP family).
    pub cluster_cidrs: Vec<Cidr>,
    /// The periodic reconcile (`--route-reconciliation-period`, 10 s).
    pub reconcile_period: Duration,
    /// The cluster name passed to the provider.
    pub cluster_name: String,
    /// Cloud operations in flight at once (Go: 200).
    pub max_concurrent_operations: usize,
    /// Reconcile on Node changes, at most once per `reconcile_period`,
    /// instead of every period (Go's
    /// `CloudControllerManagerWatchBasedRoutesReconciliation`; off).
    pub watch_based: bool,
    /// In the watch-based mode, how long after a reconcile another runs
    /// anyway (Go's informer resync; the manager draws it from
    /// `--min-resync-period`). `None`: never.
    pub resync_period: Option<Duration>,
}

impl RouteControllerConfig {
    /// Settings for these cluster CIDRs, with Go's defaults otherwise.
    pub fn new(cluster_cidrs: Vec<Cidr>) -> Self {
        Self {
            cluster_cidrs,
            reconcile_period: Duration::from_secs(10),
            cluster_name: "kubernetes".into(),
            max_concurrent_operations: 200,
            watch_based: false,
            resync_period: None,
        }
    }
}

/// The node-route controller.
pub struct RouteController {
    ctx: Context,
    config: RouteControllerConfig,
}

impl std::fmt::Debug for RouteController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteController")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A Node's pod CIDRs: `spec.podCIDRs`, or the single `spec.podCIDR` of
/// older writers.
pub(crate) fn pod_cidrs(node: &Node) -> Vec<String> {
    let spec = node.spec.as_ref();
    let mut cidrs = spec.and_then(|s| s.pod_cidrs.clone()).unwrap_or_default();
    if cidrs.is_empty()
        && let Some(c) = spec.and_then(|s| s.pod_cidr.clone())
    {
        cidrs.push(c);
    }
    cidrs
}

fn addresses(node: &Node) -> Vec<NodeAddress> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default()
}

/// The watch-based mode's filter (Go's KEP-5237 handlers): a Node event
/// calls for a reconcile when the Node is new or gone, or its pod CIDRs or
/// addresses changed; not for a heartbeat or a label.
struct RouteInputs {
    /// The informer's cache: a Node missing from it was deleted.
    cache: Store<Node>,
    /// A hash of what routes depend on, per Node.
    seen: HashMap<String, u64>,
}

impl RouteInputs {
    fn new(cache: Store<Node>) -> Self {
        Self {
            cache,
            seen: HashMap::new(),
        }
    }

    /// Whether this event about `node` calls for a reconcile.
    fn changed(&mut self, node: &Node) -> bool {
        use std::hash::{Hash, Hasher};
        let name = node.metadata.name.clone().unwrap_or_default();
        if self
            .cache
            .get(&kube_runtime::reflector::ObjectRef::from_obj(node))
            .is_none()
        {
            return self.seen.remove(&name).is_some();
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        node.metadata.uid.hash(&mut hasher);
        pod_cidrs(node).hash(&mut hasher);
        for a in addresses(node) {
            (a.type_, a.address).hash(&mut hasher);
        }
        let print = hasher.finish();
        self.seen.insert(name, print) != Some(print)
    }
}

impl RouteController {
    /// A controller reading `nodes` for `cloud`, which must offer routes.
    pub fn new(
        client: kube::Client,
        nodes: &SharedInformer<Node>,
        cloud: Arc<dyn CloudProvider>,
        config: RouteControllerConfig,
    ) -> Self {
        let component = controllers::NODE_ROUTE.event_component;
        Self {
            ctx: Context::new(client, nodes, cloud, component),
            config,
        }
    }

    /// True if the controller is responsible for a route: its first or last
    /// address lies inside a cluster CIDR.
    fn responsible(&self, route: &Route) -> bool {
        let Ok(cidr) = route.destination_cidr.parse::<Cidr>() else {
            return false;
        };
        self.config
            .cluster_cidrs
            .iter()
            .any(|c| c.contains(cidr.first()) || c.contains(cidr.last()))
    }

    /// Run until `stop` becomes true: reconcile every period, or on the
    /// Node changes that matter at most once per period (watch-based).
    pub async fn run(self, stop: watch::Receiver<bool>) {
        if self.ctx.cloud.routes().is_none() {
            tracing::warn!(
                "the cloud provider offers no routes; the route controller does not start"
            );
            return;
        }
        if self.config.cluster_cidrs.is_empty() {
            tracing::warn!("no cluster CIDR configured; the route controller does not start");
            return;
        }
        let period = self.config.reconcile_period;
        let watch_based = self.config.watch_based;
        // Passes are due every period only in the periodic mode.
        let health = if watch_based {
            self.ctx.health.clone()
        } else {
            self.ctx.health.clone().expect_pass_every(period)
        };
        let schedule = Arc::new(Mutex::new(Schedule::new(
            period,
            watch_based,
            self.config.resync_period,
        )));
        let mut inputs = RouteInputs::new(self.ctx.nodes.store().clone());
        let seen = schedule.clone();
        let controller = Controller::new(WorkQueue::new(default_controller_rate_limiter()))
            .health(health.clone())
            .watches(&self.ctx.nodes, move |node: &Node| {
                (watch_based && inputs.changed(node)).then(|| {
                    lock(&seen).changed();
                    PASS
                })
            });
        controller.queue().add(PASS);
        let store = self.ctx.nodes.store().clone();
        let this = Arc::new(self);
        let reconcile = move |_: &'static str| {
            let (this, store, schedule, health) = (
                this.clone(),
                store.clone(),
                schedule.clone(),
                health.clone(),
            );
            async move {
                let next = lock(&schedule).next(Instant::now());
                if next == Next::Pass {
                    let started = Instant::now();
                    let ok = this.reconcile(&store).await;
                    let reconciles = this.ctx.metrics.reconciles(controllers::NODE_ROUTE);
                    if ok {
                        reconciles.observe_success(started.elapsed());
                    } else {
                        reconciles.observe_error(started.elapsed());
                    }
                    health.pass_completed();
                    lock(&schedule).passed(started, ok);
                }
                let next = lock(&schedule).next(Instant::now());
                let action = match next {
                    Next::Pass => Action::RequeueAfter(Duration::ZERO),
                    Next::Wait(delay) => Action::RequeueAfter(delay),
                    Next::Idle => Action::Done,
                };
                Ok::<_, Infallible>(action)
            }
        };
        controller.run(reconcile, stop).await;
    }

    /// One reconcile; false if some cloud operation failed.
    pub(crate) async fn reconcile(&self, store: &Store<Node>) -> bool {
        let Some(routes) = self.ctx.cloud.routes() else {
            return false;
        };
        self.ctx.metrics.route_sync.inc();
        let cluster = self.config.cluster_name.as_str();
        let existing = match self
            .ctx
            .metrics
            .cloud("list_routes", routes.list_routes(cluster))
            .await
        {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "could not list routes");
                return false;
            }
        };
        let nodes: Vec<Node> = store.state().iter().map(|n| (**n).clone()).collect();
        let by_cidr: HashMap<&str, &Route> = existing
            .iter()
            .map(|r| (r.destination_cidr.as_str(), r))
            .collect();
        // (node name, cidr) pairs that must exist, and those to (re)create.
        let mut wanted: BTreeSet<(String, String)> = BTreeSet::new();
        let mut to_create: Vec<(Node, String)> = Vec::new();
        let mut stale: BTreeSet<String> = BTreeSet::new();
        for node in &nodes {
            let name = node.metadata.name.clone().unwrap_or_default();
            for cidr in pod_cidrs(node) {
                wanted.insert((name.clone(), cidr.clone()));
                match by_cidr.get(cidr.as_str()) {
                    Some(r) if r.target_node == name && !r.blackhole => {
                        if r.enable_node_addresses
                            && !node_addresses_equal(&r.target_node_addresses, &addresses(node))
                        {
                            stale.insert(cidr.clone());
                            to_create.push((node.clone(), cidr));
                        }
                    }
                    _ => to_create.push((node.clone(), cidr)),
                }
            }
        }
        let to_delete: Vec<&Route> = existing
            .iter()
            .filter(|r| self.responsible(r))
            .filter(|r| {
                r.blackhole
                    || stale.contains(&r.destination_cidr)
                    || !wanted.contains(&(r.target_node.clone(), r.destination_cidr.clone()))
            })
            .collect();
        let limit = self.config.max_concurrent_operations.max(1);
        let delete_failures = std::sync::atomic::AtomicUsize::new(0);
        stream::iter(to_delete)
            .for_each_concurrent(limit, |route| {
                let delete_failures = &delete_failures;
                async move {
                    let deleted = self
                        .ctx.metrics
                        .cloud("delete_route", routes.delete_route(cluster, route))
                        .await;
                    if let Err(e) = deleted {
                        delete_failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        tracing::warn!(cidr = %route.destination_cidr, error = %e, "could not delete a route");
                    }
                }
            })
            .await;
        let failed: Vec<String> = stream::iter(to_create)
            .map(|(node, cidr)| self.create(routes, cluster, node, cidr))
            .buffer_unordered(limit)
            .filter_map(|r| async move { r })
            .collect()
            .await;
        for node in nodes.iter().filter(|n| !pod_cidrs(n).is_empty()) {
            let name = node.metadata.name.clone().unwrap_or_default();
            self.set_condition(node, !failed.contains(&name)).await;
        }
        failed.is_empty() && delete_failures.into_inner() == 0
    }

    /// Create one route; the node's name if it failed.
    async fn create(
        &self,
        routes: &dyn Routes,
        cluster: &str,
        node: Node,
        cidr: String,
    ) -> Option<String> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let route = Route {
            target_node: name.clone(),
            target_node_addresses: addresses(&node),
            destination_cidr: cidr.clone(),
            ..Default::default()
        };
        if cidr.parse::<Cidr>().is_err()
            || cidr.split('/').next().and_then(parse_ip_sloppy).is_none()
        {
            tracing::warn!(node = %name, cidr = %cidr, "the node's pod CIDR is invalid");
            return Some(name);
        }
        let started = Instant::now();
        let hint = node.metadata.uid.clone().unwrap_or_default();
        let created = self
            .ctx
            .metrics
            .cloud("create_route", routes.create_route(cluster, &hint, &route))
            .await;
        match created {
            Ok(()) => None,
            Err(e) => {
                let reference = crate::node::reference(&node);
                self.ctx
                    .recorder
                    .record(
                        &reference,
                        EventType::Warning,
                        events::FAILED_TO_CREATE_ROUTE,
                        &format!(
                            "Could not create route {hint} {cidr} for node {name} after {:?}: {e}",
                            started.elapsed()
                        ),
                    )
                    .await;
                Some(name)
            }
        }
    }

    /// Write `NetworkUnavailable` when its status or reason changes.
    async fn set_condition(&self, node: &Node, routes_created: bool) {
        let (status, reason, message) = if routes_created {
            (
                "False",
                conditions::ROUTE_CREATED,
                conditions::ROUTE_CREATED_MESSAGE,
            )
        } else {
            (
                "True",
                conditions::NO_ROUTE_CREATED,
                conditions::NO_ROUTE_CREATED_MESSAGE,
            )
        };
        let current = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c.type_ == conditions::NETWORK_UNAVAILABLE)
            });
        if current.is_some_and(|c| c.status == status && c.reason.as_deref() == Some(reason)) {
            return;
        }
        let now = k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let patch = json!({"status": {"conditions": [{
            "type": conditions::NETWORK_UNAVAILABLE,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": now,
            "lastHeartbeatTime": now,
        }]}});
        let name = node.metadata.name.clone().unwrap_or_default();
        let condition = "set the NetworkUnavailable condition";
        self.ctx
            .patch_or_warn(&name, Part::Status, Patch::Strategic(patch), condition)
            .await;
    }
}

impl crate::Instrumented for RouteController {
    fn instruments(&mut self) -> (&mut CcmMetrics, &mut ControllerHealth) {
        self.ctx.instruments()
    }
}
