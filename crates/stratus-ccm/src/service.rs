//! The service load-balancer controller (Go's `service-lb-controller`).
//!
//! - Ownership: `type: LoadBalancer` Services whose `loadBalancerClass` the
//!   provider serves (by default, only Services without a class, as Go).
//! - Ensure path: `EnsuringLoadBalancer` event, the
//!   `service.kubernetes.io/load-balancer-cleanup` finalizer added *before*
//!   the first ensure, `UnAvailableLoadBalancer` when no node is a backend,
//!   `EnsureLoadBalancer`, `EnsuredLoadBalancer`, and the status written
//!   through the status subresource only when the ingress changed.
//! - Delete path (Service deleted or no longer a LoadBalancer, finalizer
//!   present): `DeletingLoadBalancer`, `EnsureLoadBalancerDeleted`, the
//!   finalizer removed, `DeletedLoadBalancer`, the status cleared. A failure
//!   is a `SyncLoadBalancerFailed` event, with Go's texts ("failed to delete
//!   load balancer: ...").
//! - A Service deleted without the finalizer (stripped by hand), or deleted
//!   and re-created under a new UID: its load balancer is deleted from the
//!   last version seen, with `DeletingLoadBalancer`,
//!   `DeleteLoadBalancerFailed` (retried) and `DeletedLoadBalancer`, as Go's
//!   `processServiceDeletion`.
//! - Node changes (gathered for 100 ms) update only the load balancers whose
//!   backend set
//!   (`node name + providerID` of the nodes passing Go's predicates)
//!   changed, `workers` at a time (as Go), with `UpdatedLoadBalancer`. An
//!   update the cloud throttled (`Throttled` / `RetryAfter` with a delay up
//!   to [`HOST_UPDATE_RETRY_WAIT`]) is tried again after that delay, in
//!   place, up to [`HOST_UPDATE_RETRIES`] times (Go treats it as any
//!   failure, below, which spends three calls against a spent budget). A
//!   failed update is checked with `GetLoadBalancer` as in Go: if the load
//!   balancer no longer exists, it is left alone (not re-created);
//!   otherwise `UpdateLoadBalancerFailed` and a full ensure is queued.
//! - `ImplementedElsewhere` stops quietly; `RetryAfter` / `Throttled` are
//!   retried after exactly their delay, other errors with Go's per-Service
//!   backoff (5 s doubling to 300 s: `min_retry_delay`, `max_retry_delay`),
//!   each with a `SyncLoadBalancerFailed` event.
//! - Services sync concurrently (`workers`, default 1 as in Go), one at a
//!   time each.
//! - No re-ensure storm after a restart: a Service the controller has no
//!   record of ensuring, which already has its finalizer and ingress, is
//!   first checked with `load_balancer_up_to_date`; if the provider says it
//!   is as desired, nothing is written (Go re-ensures every one).
//! - Optional drift check (`drift_check_period`): periodically forget what
//!   was ensured, so every load balancer goes through that check, and the
//!   ones changed or deleted in the cloud are ensured again.

mod changes;
mod hosts;

use changes::{RelevantChanges, fingerprint, has_ingress, key_of};

use std::collections::{BTreeSet, HashMap};
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use stratus_runtime::controller::Controller;
use stratus_runtime::informer::SharedInformer;

use crate::metrics::CcmMetrics;
use crate::names::events;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, ObjectReference, Service};
use kube::api::{Api, Patch, PatchParams};
use kube_runtime::reflector::{ObjectRef, Store};
use serde_json::json;
use stratus_cloud::helpers::{
    has_load_balancer_finalizer, is_load_balancer_backend, load_balancer_status_equal,
    needs_cleanup, wants_load_balancer,
};
use stratus_cloud::names::{controllers, finalizers};
use stratus_cloud::{CloudError, CloudProvider, LoadBalancer, LoadBalancerClasses};
use stratus_runtime::events::{EventRecorder, EventType};
use stratus_runtime::health::ControllerHealth;
use stratus_runtime::workqueue::{
    Action, ItemExponentialBackoff, Retry, WorkQueue, default_controller_rate_limiter,
};
use tokio::sync::watch;

/// The one key of the queue of load-balancer host updates.
const NODES: &str = "nodes";

/// The one key of the drift check's queue.
const DRIFT: &str = "drift";

/// How many times a host update the cloud throttled is tried again in place
/// (after the delay the cloud asked for) before it falls back to a full
/// ensure through the queue.
pub const HOST_UPDATE_RETRIES: u32 = 20;

/// The longest delay a throttled host update waits for in place; a cloud
/// asking for more gets a full ensure after its delay, through the queue.
pub const HOST_UPDATE_RETRY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long node changes are gathered before load-balancer hosts are
/// updated.
pub const NODE_SYNC_DEBOUNCE: std::time::Duration = std::time::Duration::from_millis(100);

/// Settings of the service controller.
#[derive(Debug, Clone)]
pub struct ServiceControllerConfig {
    /// Services synced at once (`--concurrent-service-syncs`; 1 as in Go).
    pub workers: usize,
    /// The cluster name passed to the provider.
    pub cluster_name: String,
    /// How often every load balancer is checked for drift (changed or
    /// deleted in the cloud behind the controller's back) and re-ensured if
    /// it drifted. Off (`None`) by default, as Go has no such check. When
    /// the provider answers
    /// [`LoadBalancer::load_balancer_up_to_date`], only drifted load
    /// balancers are re-ensured; otherwise every one is.
    pub drift_check_period: Option<std::time::Duration>,
    /// The `spec.loadBalancerClass` values served, instead of the
    /// provider's [`LoadBalancer::classes`] (`--load-balancer-classes`; for
    /// example to split classes between two managers of one cloud).
    pub classes: Option<LoadBalancerClasses>,
    /// How often every cached Service is handed to the controller again
    /// (client-go's informer resync; the manager draws it between
    /// `--min-resync-period` and twice it, as Go). As in Go's `UpdateFunc`,
    /// only a Service still needing cleanup is queued by it (and retried);
    /// an unchanged one is not. `None`: no resync.
    pub resync_period: Option<std::time::Duration>,
    /// The first retry delay of a Service whose sync failed (Go's
    /// `minRetryDelay`, 5 s); it doubles with each failure in a row up to
    /// [`max_retry_delay`](Self::max_retry_delay), per Service, with no
    /// overall bucket. A cloud error that names its own delay
    /// (`RetryAfter`, `Throttled`) waits that instead.
    pub min_retry_delay: std::time::Duration,
    /// The longest retry delay (Go's `maxRetryDelay`, 300 s).
    pub max_retry_delay: std::time::Duration,
}

impl Default for ServiceControllerConfig {
    fn default() -> Self {
        Self {
            workers: 1,
            cluster_name: "kubernetes".into(),
            drift_check_period: None,
            classes: None,
            resync_period: None,
            min_retry_delay: std::time::Duration::from_secs(5),
            max_retry_delay: std::time::Duration::from_secs(300),
        }
    }
}

/// A backend: node name and provider ID (Go compares both).
type Backends = BTreeSet<(String, String)>;

/// The backend nodes and their backend set, as of a node generation.
struct BackendCache {
    generation: u64,
    nodes: Arc<Vec<Node>>,
    backends: Arc<Backends>,
}

fn backends(nodes: &[Node]) -> Backends {
    nodes
        .iter()
        .map(|n| {
            (
                n.metadata.name.clone().unwrap_or_default(),
                n.spec
                    .as_ref()
                    .and_then(|s| s.provider_id.clone())
                    .unwrap_or_default(),
            )
        })
        .collect()
}

/// What the controller knows of one Service's load balancer (Go keeps the
/// same in its service cache and `lastSyncedNodes`).
#[derive(Default)]
struct LoadBalancerState {
    /// The last version of the Service seen wanting a load balancer. If the
    /// Service is deleted without the controller's finalizer (stripped by
    /// hand), or deleted and re-created under a new UID, its load balancer
    /// is deleted from this version, as Go's `processServiceDeletion` does.
    service: Option<Arc<Service>>,
    /// The backends the load balancer was last given.
    backends: Option<Arc<Backends>>,
    /// The [`fingerprint`] of the Service at its last successful ensure: a
    /// Service that has not changed since (a status write, a resync) is not
    /// ensured again.
    ensured: Option<u64>,
}

fn reference(svc: &Service) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Service".into()),
        name: svc.metadata.name.clone(),
        namespace: svc.metadata.namespace.clone(),
        uid: svc.metadata.uid.clone(),
        ..Default::default()
    }
}

/// Why a sync failed; the texts are Go's.
#[derive(Debug, thiserror::Error)]
enum SyncError {
    #[error(transparent)]
    Cloud(#[from] CloudError),
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error("failed to add load balancer cleanup finalizer: {0}")]
    AddFinalizer(kube::Error),
    #[error("failed to remove load balancer cleanup finalizer: {0}")]
    RemoveFinalizer(kube::Error),
}

impl Retry for SyncError {
    /// The delay the cloud asked for before the next try, if it did.
    fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            Self::Cloud(c) => c.retry_delay(),
            _ => None,
        }
    }
}

struct Shared {
    client: kube::Client,
    cloud: Arc<dyn CloudProvider>,
    config: ServiceControllerConfig,
    recorder: EventRecorder,
    services: Store<Service>,
    nodes: Store<Node>,
    /// What is known of each Service's load balancer, by `namespace/name`.
    /// Backend sets are shared: every load balancer given the same nodes
    /// points at one set (1,000 load balancers × 5,000 nodes would
    /// otherwise hold five million entries).
    states: Mutex<HashMap<String, LoadBalancerState>>,
    metrics: CcmMetrics,
    /// Bumped on every node event.
    node_generation: Arc<AtomicU64>,
    /// The backend nodes of `node_generation`.
    backend_cache: Mutex<BackendCache>,
}

/// The service load-balancer controller.
pub struct ServiceController {
    client: kube::Client,
    /// The shared Node informer it reads.
    nodes: SharedInformer<Node>,
    /// The shared Service informer it reads.
    services: SharedInformer<Service>,
    cloud: Arc<dyn CloudProvider>,
    config: ServiceControllerConfig,
    metrics: CcmMetrics,
    health: ControllerHealth,
}

impl std::fmt::Debug for ServiceController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceController")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ServiceController {
    /// A controller reading `services` and `nodes` for `cloud`, which
    /// must offer load balancers.
    pub fn new(
        client: kube::Client,
        services: &SharedInformer<Service>,
        nodes: &SharedInformer<Node>,
        cloud: Arc<dyn CloudProvider>,
        config: ServiceControllerConfig,
    ) -> Self {
        Self {
            client,
            nodes: nodes.clone(),
            services: services.clone(),
            cloud,
            config,
            metrics: CcmMetrics::default(),
            health: ControllerHealth::new(),
        }
    }

    /// Run until `stop` becomes true: three controllers, one shape: the
    /// Services (`workers` at once), the load-balancer hosts after Node
    /// changes (gathered for [`NODE_SYNC_DEBOUNCE`]), and the drift check
    /// when it is on.
    pub async fn run(self, stop: watch::Receiver<bool>) {
        if self.cloud.load_balancer().is_none() {
            tracing::warn!(
                "the cloud provider offers no load balancers; the service controller does not start"
            );
            return;
        }
        let node_generation = Arc::new(AtomicU64::new(0));
        let node_sync = Controller::new(WorkQueue::new(default_controller_rate_limiter()))
            .health(self.health.clone());
        let (node_queue, generation) = (node_sync.queue().clone(), node_generation.clone());
        let mut relevant = RelevantChanges::new(self.services.store().clone());
        // Go's service queue: per-Service exponential backoff (5 s to 300
        // s), not the generic controller limiter (5 ms to 1000 s).
        let services = Controller::new(WorkQueue::with_metrics(
            ItemExponentialBackoff::new(self.config.min_retry_delay, self.config.max_retry_delay),
            self.metrics.runtime.workqueue.queue("service"),
        ))
        .workers(self.config.workers)
        .health(self.health.clone())
        .reconcile_metrics(self.metrics.reconciles(controllers::SERVICE_LB))
        .watches_resynced(
            &self.services,
            self.config.resync_period.unwrap_or_default(),
            move |svc: &Service| relevant.changed(svc).then(|| key_of(svc)),
        )
        .watches(&self.nodes, move |_: &Node| {
            generation.fetch_add(1, Ordering::SeqCst);
            // Coalesce a burst of node changes (a rollout, a batch of
            // initializations) into one host update per load balancer.
            node_queue.add_after(NODES, NODE_SYNC_DEBOUNCE);
            None
        });
        let drift = self.config.drift_check_period.map(|period| {
            let drift = Controller::new(WorkQueue::new(default_controller_rate_limiter()))
                .health(self.health.clone());
            drift.queue().add_after(DRIFT, period);
            (drift, period)
        });
        let queue = services.queue().clone();
        let shared = Arc::new(Shared {
            recorder: EventRecorder::new(
                self.client.clone(),
                controllers::SERVICE_LB.event_component,
            ),
            client: self.client.clone(),
            cloud: self.cloud.clone(),
            config: self.config.clone(),
            services: self.services.store().clone(),
            nodes: self.nodes.store().clone(),
            states: Mutex::new(HashMap::new()),
            metrics: self.metrics.clone(),
            node_generation,
            backend_cache: Mutex::new(BackendCache {
                generation: u64::MAX,
                nodes: Arc::default(),
                backends: Arc::default(),
            }),
        });
        let sync_service = {
            let shared = shared.clone();
            move |key: String| {
                let shared = shared.clone();
                async move { shared.sync_service(&key).await.map(|()| Action::Done) }
            }
        };
        let sync_nodes = {
            let (shared, queue) = (shared.clone(), queue.clone());
            move |_: &'static str| {
                let (shared, queue) = (shared.clone(), queue.clone());
                async move {
                    let started = std::time::Instant::now();
                    shared.sync_nodes(&queue).await;
                    shared
                        .metrics
                        .nodesync_latency
                        .observe(started.elapsed().as_secs_f64());
                    Ok::<_, Infallible>(Action::Done)
                }
            }
        };
        let drift_stop = stop.clone();
        let drift_check = async move {
            if let Some((drift, period)) = drift {
                let check = move |_: &'static str| {
                    shared.forget_ensured(&queue);
                    async move { Ok::<_, Infallible>(Action::RequeueAfter(period)) }
                };
                drift.run(check, drift_stop).await;
            }
        };
        tokio::join!(
            services.run(sync_service, stop.clone()),
            node_sync.run(sync_nodes, stop),
            drift_check,
        );
    }
}

impl Shared {
    /// What is known of each Service's load balancer.
    fn states(&self) -> std::sync::MutexGuard<'_, HashMap<String, LoadBalancerState>> {
        self.states.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Change what is known of `key`'s load balancer.
    fn update_state(&self, key: &str, f: impl FnOnce(&mut LoadBalancerState)) {
        f(self.states().entry(key.to_owned()).or_default());
    }

    /// Forget `key`'s load balancer (it was deleted, or there never was
    /// one).
    fn forget(&self, key: &str) {
        self.states().remove(key);
    }

    fn lb(&self) -> Option<&dyn LoadBalancer> {
        self.cloud.load_balancer()
    }

    async fn event(&self, svc: &Service, kind: EventType, reason: &str, message: &str) {
        self.recorder
            .record(&reference(svc), kind, reason, message)
            .await;
    }

    async fn sync_service(&self, key: &str) -> Result<(), SyncError> {
        let Some(lb) = self.lb() else { return Ok(()) };
        let (ns, name) = key.split_once('/').unwrap_or(("default", key));
        let current = self.services.get(&ObjectRef::new(name).within(ns));
        // The last version seen wanting a load balancer, if the Service is
        // gone from the cache or came back under another UID: its load
        // balancer is deleted first (Go's `processServiceDeletion` and
        // the UID check of `processServiceCreateOrUpdate`).
        let last = self.states().get(key).and_then(|s| s.service.clone());
        if let Some(last) = last
            && current
                .as_ref()
                .is_none_or(|svc| svc.metadata.uid != last.metadata.uid)
        {
            self.delete_without_finalizer(lb, &last, key).await?;
        }
        let Some(svc) = current else {
            self.forget(key);
            return Ok(());
        };
        let classes = self.config.classes.clone().unwrap_or_else(|| lb.classes());
        let cleanup = needs_cleanup(&svc)
            || (!wants_load_balancer(&svc, &classes) && has_load_balancer_finalizer(&svc));
        if !cleanup && !wants_load_balancer(&svc, &classes) {
            return Ok(());
        }
        let result = if cleanup {
            self.delete(lb, &svc, key).await
        } else {
            self.ensure_if_needed(lb, &svc, key).await
        };
        if let Err(e) = &result {
            self.event(
                &svc,
                EventType::Warning,
                events::SYNC_LOAD_BALANCER_FAILED,
                &format!("Error syncing load balancer: {e}"),
            )
            .await;
        }
        result
    }

    /// Ensure `svc`'s load balancer unless it was ensured since it last
    /// changed, or the provider says it is up to date.
    async fn ensure_if_needed(
        &self,
        lb: &dyn LoadBalancer,
        svc: &Arc<Service>,
        key: &str,
    ) -> Result<(), SyncError> {
        let print = fingerprint(svc);
        let recorded = {
            let mut states = self.states();
            let state = states.entry(key.to_owned()).or_default();
            state.service = Some(svc.clone());
            state.ensured
        };
        if recorded == Some(print) && has_load_balancer_finalizer(svc) {
            return Ok(());
        }
        // Never ensured by this process (a restart) or forgotten by the drift
        // check: ask the provider before ensuring again.
        if recorded.is_none()
            && has_load_balancer_finalizer(svc)
            && has_ingress(svc)
            && self.up_to_date(lb, svc).await
        {
            self.update_state(key, |s| s.ensured = Some(print));
            return Ok(());
        }
        let result = self.ensure(lb, svc, key).await;
        let ensured = result.is_ok().then_some(print);
        self.update_state(key, |s| s.ensured = ensured);
        result
    }

    /// Delete the load balancer of a Service that is gone without the
    /// controller's finalizer, from `last`, its last version seen: Go's
    /// `processLoadBalancerDelete`, with its events (`DeletingLoadBalancer`,
    /// `DeleteLoadBalancerFailed`, `DeletedLoadBalancer`). A failure is
    /// retried with the Service's backoff.
    async fn delete_without_finalizer(
        &self,
        lb: &dyn LoadBalancer,
        last: &Service,
        key: &str,
    ) -> Result<(), SyncError> {
        tracing::info!(service = %key, "the Service was deleted without its load balancer cleanup; deleting the load balancer");
        match self.delete_in_cloud(lb, last).await {
            Ok(()) => {}
            Err(e) => {
                self.event(
                    last,
                    EventType::Warning,
                    events::DELETE_LOAD_BALANCER_FAILED,
                    &format!("Error deleting load balancer: {e}"),
                )
                .await;
                return Err(e.into());
            }
        }
        self.forget(key);
        self.event(
            last,
            EventType::Normal,
            events::DELETED_LOAD_BALANCER,
            "Deleted load balancer",
        )
        .await;
        Ok(())
    }

    /// True if the provider says `svc`'s load balancer is already as
    /// desired with the current backends; those backends are then recorded
    /// as the ones it was given. Any other answer (false, not implemented,
    /// an error) means "ensure it".
    async fn up_to_date(&self, lb: &dyn LoadBalancer, svc: &Service) -> bool {
        let (nodes, set) = self.backend_nodes();
        let answer = self
            .metrics
            .cloud(
                "load_balancer_up_to_date",
                lb.load_balancer_up_to_date(&self.config.cluster_name, svc, &nodes),
            )
            .await;
        match answer {
            Ok(true) => {
                self.update_state(&key_of(svc), |s| s.backends = Some(set));
                true
            }
            Ok(false) => {
                tracing::info!(service = %key_of(svc), "the load balancer is not as desired; ensuring it");
                false
            }
            Err(e) if e.is_not_implemented() => false,
            Err(e) => {
                tracing::debug!(service = %key_of(svc), error = %e, "could not check the load balancer; ensuring it");
                false
            }
        }
    }

    /// The drift check: forget every ensured fingerprint and queue every
    /// Service, so each goes through [`Shared::up_to_date`] again.
    fn forget_ensured(&self, queue: &WorkQueue<String>) {
        let keys: Vec<String> = self
            .states()
            .iter_mut()
            .filter_map(|(key, state)| state.ensured.take().map(|_| key.clone()))
            .collect();
        for key in keys {
            queue.add(key);
        }
    }

    /// The Services API of `svc`'s namespace.
    fn api_for(&self, svc: &Service) -> Api<Service> {
        Api::namespaced(
            self.client.clone(),
            svc.metadata.namespace.as_deref().unwrap_or("default"),
        )
    }

    async fn ensure(
        &self,
        lb: &dyn LoadBalancer,
        svc: &Service,
        key: &str,
    ) -> Result<(), SyncError> {
        let cluster = &self.config.cluster_name;
        let api = self.api_for(svc);
        let name = svc.metadata.name.clone().unwrap_or_default();
        self.event(
            svc,
            EventType::Normal,
            events::ENSURING_LOAD_BALANCER,
            "Ensuring load balancer",
        )
        .await;
        if !has_load_balancer_finalizer(svc) {
            let mut list = svc.metadata.finalizers.clone().unwrap_or_default();
            list.push(finalizers::LOAD_BALANCER_CLEANUP.to_owned());
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": list, "resourceVersion": svc.metadata.resource_version}})),
            )
            .await
            .map_err(SyncError::AddFinalizer)?;
        }
        let (nodes, set) = self.backend_nodes();
        if nodes.is_empty() {
            self.event(
                svc,
                EventType::Warning,
                events::UNAVAILABLE_LOAD_BALANCER,
                events::UNAVAILABLE_LOAD_BALANCER_MESSAGE,
            )
            .await;
        }
        self.update_state(key, |s| s.backends = Some(set));
        let ensured = self
            .metrics
            .cloud(
                "ensure_load_balancer",
                lb.ensure_load_balancer(cluster, svc, &nodes),
            )
            .await;
        let status = match ensured {
            Ok(status) => status,
            Err(e) if e.is_implemented_elsewhere() => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        self.event(
            svc,
            EventType::Normal,
            events::ENSURED_LOAD_BALANCER,
            "Ensured load balancer",
        )
        .await;
        let current = svc
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.clone())
            .unwrap_or_default();
        if !load_balancer_status_equal(&current, &status) {
            self.write_status(&api, &name, &status).await?;
        }
        Ok(())
    }

    async fn write_status(
        &self,
        api: &Api<Service>,
        name: &str,
        status: &LoadBalancerStatus,
    ) -> Result<(), SyncError> {
        // A merge patch replaces the ingress list; `null` removes it.
        let patch = json!({"status": {"loadBalancer": {"ingress": status.ingress}}});
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => Ok(()),
            // The Service went away after its finalizer was removed.
            Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// `DeletingLoadBalancer`, then `EnsureLoadBalancerDeleted` for `svc`;
    /// `ImplementedElsewhere` counts as done.
    async fn delete_in_cloud(
        &self,
        lb: &dyn LoadBalancer,
        svc: &Service,
    ) -> Result<(), CloudError> {
        self.event(
            svc,
            EventType::Normal,
            events::DELETING_LOAD_BALANCER,
            "Deleting load balancer",
        )
        .await;
        let deleted = self
            .metrics
            .cloud(
                "ensure_load_balancer_deleted",
                lb.ensure_load_balancer_deleted(&self.config.cluster_name, svc),
            )
            .await;
        match deleted {
            Err(e) if e.is_implemented_elsewhere() => Ok(()),
            other => other,
        }
    }

    /// Go's delete path, for a Service being deleted (or no longer
    /// wanting a load balancer) that has the finalizer: the load balancer
    /// deleted if it exists, the finalizer removed, the status cleared.
    async fn delete(
        &self,
        lb: &dyn LoadBalancer,
        svc: &Service,
        key: &str,
    ) -> Result<(), SyncError> {
        let cluster = &self.config.cluster_name;
        let api = self.api_for(svc);
        let name = svc.metadata.name.clone().unwrap_or_default();
        let existing = self
            .metrics
            .cloud("get_load_balancer", lb.get_load_balancer(cluster, svc))
            .await
            .map_err(|e| e.context("failed to check if load balancer exists before cleanup"))?;
        if existing.is_some() {
            self.delete_in_cloud(lb, svc)
                .await
                .map_err(|e| e.context("failed to delete load balancer"))?;
        }
        self.forget(key);
        if has_load_balancer_finalizer(svc) {
            let list: Vec<String> = svc
                .metadata
                .finalizers
                .clone()
                .unwrap_or_default()
                .into_iter()
                .filter(|f| f != finalizers::LOAD_BALANCER_CLEANUP)
                .collect();
            match api
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"finalizers": list, "resourceVersion": svc.metadata.resource_version}})),
                )
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => return Err(SyncError::RemoveFinalizer(e)),
            }
        }
        self.event(
            svc,
            EventType::Normal,
            events::DELETED_LOAD_BALANCER,
            "Deleted load balancer",
        )
        .await;
        if has_ingress(svc) && svc.metadata.deletion_timestamp.is_none() {
            self.write_status(&api, &name, &LoadBalancerStatus::default())
                .await?;
        }
        Ok(())
    }
}

impl crate::Instrumented for ServiceController {
    fn instruments(&mut self) -> (&mut CcmMetrics, &mut ControllerHealth) {
        (&mut self.metrics, &mut self.health)
    }
}
