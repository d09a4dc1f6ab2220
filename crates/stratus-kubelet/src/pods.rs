//! The pods bound to a virtual node, driven through the provider's
//! [`PodLifecycleHandler`], with Go virtual-kubelet's semantics and its
//! known gaps closed:
//!
//! - **Watch**: pods with `spec.nodeName=<node>`; every change queues the
//!   pod's key (no rate limit on first-time work: the queue's bucket only
//!   paces retries, where Go's applies to new pods too and admits them at
//!   10/s after a burst of 100).
//! - **Create / update**: a pod the provider does not have is created; one
//!   whose containers, tolerations, labels, annotations or deadline changed
//!   ([`pods_equal`], env order-independent) is updated. Events
//!   `ProviderCreateSuccess`, `ProviderCreateFailed`, `ProviderUpdateSuccess`,
//!   `ProviderUpdateFailed`.
//! - **Provider errors**: status `reason: ProviderFailed` with the message.
//!   A `restartPolicy: Never` pod is then `Failed`, as in Go (after
//!   [`PodControllerConfig::never_restart_retries`] transient errors, 0 by
//!   default); any other pod stays `Pending` and is retried with backoff
//!   for as long as it exists (never silently dropped).
//! - **Graceful deletion**: when `deletionTimestamp` appears, `delete_pod`
//!   (events `ProviderDeleteSuccess` / `ProviderDeleteFailed`); the pod is
//!   force-deleted (grace 0, UID precondition) as soon as no container
//!   runs, at the latest when the grace period ends; at once if nothing
//!   ran. A pod deleted from the API (also while the watch was away: found
//!   after the relist) is deleted in the provider.
//! - **Environment**: each container's env is resolved through
//!   `stratus_pod::env` (envFrom, ConfigMap / Secret keys with the optional
//!   rules and Go's event reasons, downward API, resource fields, service
//!   links) over namespaced, on-demand reads ([`ApiResources`]); a missing
//!   mandatory source keeps the pod Pending, retried, with a Warning event.
//! - **Status**: provider notifications are coalesced per pod (latest
//!   wins) and written as strategic-merge patches of `pods/status`
//!   (conditions of others kept; never a PUT of a stale object). A provider
//!   that marks a pod deleted gets the API pod deleted with its grace.
//!   Providers without notifications are polled at `poll_interval` with
//!   bounded concurrency; a pod missing from the provider after
//!   `missing_grace` is `Failed` / `NotFound` with exit code -137, and a
//!   pod such a provider deleted is reported `Succeeded` / `Terminated`
//!   at once (Go's polling wrapper), so its deletion completes.
//! - **Events** come from `<node>/pod-controller`, as Go's.
//! - **Dangling pods**: after each (re)list and every `dangling_sweep_period`,
//!   provider pods with no API pod are deleted, as Go does (counted in
//!   `stratus_kubelet_dangling_pods_deleted`). With
//!   [`PodControllerConfig::dangling_safeguard`] on, a sweep that would
//!   delete more than half of the provider's pods (and more than 10), the
//!   sign of an incomplete API view (the Kip incident), deletes nothing: a
//!   warning is logged and `stratus_kubelet_dangling_pods_held` shows how
//!   many were kept.

mod changes;
mod deletion;
mod rules;
mod state;
mod status;
mod sweep;
mod sync;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::api::Api;
use kube_runtime::reflector::Store;
use kube_runtime::watcher;
use stratus_pod::env::ResolveOptions;
use stratus_pod::{PodError, PodLifecycleHandler, PodResources, PodStatusCallback};
use stratus_runtime::controller::Controller;
use stratus_runtime::events::{EventRecorder, EventType};
use stratus_runtime::health::ControllerHealth;
use stratus_runtime::informer::SharedInformer;
use stratus_runtime::workqueue::{Retry, WorkQueue, default_controller_rate_limiter};
use tokio::sync::watch;

pub use rules::{pods_equal, running, status_patch};

use crate::metrics::KubeletMetrics;
use crate::resources::ApiResources;

/// Event reasons, as Go's virtual-kubelet writes them.
pub mod reasons {
    /// The provider created the pod.
    pub const PROVIDER_CREATE_SUCCESS: &str = "ProviderCreateSuccess";
    /// The provider refused to create the pod.
    pub const PROVIDER_CREATE_FAILED: &str = "ProviderCreateFailed";
    /// The provider updated the pod.
    pub const PROVIDER_UPDATE_SUCCESS: &str = "ProviderUpdateSuccess";
    /// The provider refused to update the pod.
    pub const PROVIDER_UPDATE_FAILED: &str = "ProviderUpdateFailed";
    /// The provider deleted the pod.
    pub const PROVIDER_DELETE_SUCCESS: &str = "ProviderDeleteSuccess";
    /// The provider failed to delete the pod.
    pub const PROVIDER_DELETE_FAILED: &str = "ProviderDeleteFailed";
    /// The status reason of a pod the provider refused.
    pub const PROVIDER_FAILED: &str = "ProviderFailed";
}

/// How the pod controller works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodControllerConfig {
    /// Pods synced with the provider at once (Go's CLI: 10).
    pub sync_workers: usize,
    /// Status writes at once.
    pub status_workers: usize,
    /// How often a provider without notifications is polled (Go: 5 s).
    pub poll_interval: Duration,
    /// Status polls at once.
    pub poll_concurrency: usize,
    /// How long a pod that never ran may be missing from the provider
    /// before it is failed (Go: 1 min).
    pub missing_grace: Duration,
    /// How often provider pods without an API pod are looked for.
    pub dangling_sweep_period: Duration,
    /// How long one provider call may take before it counts as failed
    /// (`Unavailable`, retried): a hung backend must not hold a worker.
    pub provider_timeout: Duration,
    /// Resolve each container's environment (envFrom, ConfigMap and Secret
    /// keys, downward API, service links) before the provider sees the pod,
    /// as Go does unless told to skip it.
    pub resolve_env: bool,
    /// How often the namespaces whose ConfigMaps and Secrets are watched
    /// for the provider's `resource_changes` hook are brought up to date
    /// with the node's pods (only when the provider has the hook).
    pub reference_rescan: Duration,
    /// Events (`ProviderCreateSuccess`, ...) queued for the background
    /// writer before new ones are dropped: room for a burst of this many
    /// pods bound at once (client-go's queue: 1,000). The event writer keeps
    /// two requests in flight, so in a burst events trail the status writes.
    /// Drops are counted in `stratus_kubelet_events_dropped_total` (updated
    /// every 5 s).
    pub event_queue_length: usize,
    /// Provider errors a `restartPolicy: Never` pod's create or update may
    /// meet before the pod is marked `Failed` (`ProviderFailed`). 0 (the
    /// default) is Go's rule: the first error fails it, so a Job's pod is
    /// not left Pending; more lets a transient error (a 503, a timeout) be
    /// retried that many times. Permanent errors (`InvalidInput`,
    /// `NotImplemented`) fail it at once either way; pods that restart are
    /// retried without bound.
    pub never_restart_retries: u32,
    /// Hold the dangling-pod sweep back when it would delete more than half
    /// of the provider's pods (and more than 10): a sign that the API view
    /// is incomplete rather than that the pods leaked. Off by default, as
    /// Go: every provider pod without an API pod is deleted (pods deleted
    /// while the node was down would otherwise keep running and billing).
    /// When it holds, a warning is logged and
    /// `stratus_kubelet_dangling_pods_held` counts the pods kept.
    pub dangling_safeguard: bool,
}

impl Default for PodControllerConfig {
    fn default() -> Self {
        Self {
            sync_workers: 10,
            status_workers: 10,
            poll_interval: Duration::from_secs(5),
            poll_concurrency: 16,
            missing_grace: Duration::from_secs(60),
            dangling_sweep_period: Duration::from_secs(60),
            resolve_env: true,
            provider_timeout: Duration::from_secs(30),
            reference_rescan: Duration::from_secs(5),
            event_queue_length: 10_000,
            never_restart_retries: 0,
            dangling_safeguard: false,
        }
    }
}

/// Why a sync must be retried.
#[derive(Debug, thiserror::Error)]
enum SyncError {
    #[error("provider: {0}")]
    Provider(#[from] PodError),
    #[error("API: {0}")]
    Api(#[from] kube::Error),
}

impl Retry for SyncError {
    fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Provider(e) => match e.kind() {
                stratus_pod::PodErrorKind::Unavailable { retry_after } => retry_after,
                _ => None,
            },
            Self::Api(_) => None,
        }
    }
}

/// Runs the pods of one virtual node in its provider.
pub struct PodController {
    client: kube::Client,
    /// The shared informer of the node's pods.
    pods: SharedInformer<Pod>,
    provider: Arc<dyn PodLifecycleHandler>,
    node_name: String,
    config: PodControllerConfig,
    health: ControllerHealth,
    resources: Arc<dyn PodResources>,
    env_options: ResolveOptions,
    metrics: KubeletMetrics,
    ready: watch::Sender<bool>,
}

impl std::fmt::Debug for PodController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodController")
            .field("node_name", &self.node_name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

struct Shared {
    client: kube::Client,
    provider: Arc<dyn PodLifecycleHandler>,
    config: PodControllerConfig,
    pods: Store<Pod>,
    sync: WorkQueue<String>,
    status: WorkQueue<String>,
    /// What this controller remembers of each pod: one entry per pod.
    states: state::PodStates,
    events: EventRecorder,
    resources: Arc<dyn PodResources>,
    env_options: ResolveOptions,
    node: String,
    metrics: KubeletMetrics,
}

fn reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.clone(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        ..Default::default()
    }
}

fn split(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("default", key))
}

impl PodController {
    /// The shared informer of the pods bound to `node_name` (a watch with
    /// `spec.nodeName=<node_name>`): the one a [`PodController`] of that
    /// node is built with.
    pub fn informer(client: kube::Client, node_name: &str) -> SharedInformer<Pod> {
        SharedInformer::with_config(
            Api::all(client),
            watcher::Config::default().fields(&format!("spec.nodeName={node_name}")),
        )
    }

    /// The controller of the pods bound to `node_name`, read through
    /// `pods` ([`PodController::informer`] of that node).
    pub fn new(
        client: kube::Client,
        pods: &SharedInformer<Pod>,
        provider: Arc<dyn PodLifecycleHandler>,
        node_name: impl Into<String>,
        config: PodControllerConfig,
    ) -> Self {
        Self {
            resources: Arc::new(ApiResources::new(client.clone(), Duration::from_secs(30))),
            client,
            pods: pods.clone(),
            provider,
            node_name: node_name.into(),
            config,
            health: ControllerHealth::new(),
            env_options: ResolveOptions::default(),
            metrics: KubeletMetrics::unregistered(),
            ready: watch::channel(false).0,
        }
    }

    /// Becomes true once the node's pods are listed and the provider's
    /// status is wired.
    pub fn ready(&self) -> watch::Receiver<bool> {
        self.ready.subscribe()
    }

    /// Record queue, provider-call, phase and status-write metrics in
    /// `metrics`.
    pub fn with_metrics(mut self, metrics: KubeletMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Read Secrets, ConfigMaps and Services for env resolution through
    /// `resources` (default: [`ApiResources`] with a 30 s TTL; share one
    /// with the provider).
    pub fn with_resources(mut self, resources: Arc<dyn PodResources>) -> Self {
        self.resources = resources;
        self
    }

    /// How environments are resolved (the node's allocatable resources for
    /// `resourceFieldRef` without limits, deferral of `status.podIP`, ...).
    pub fn with_env_options(mut self, options: ResolveOptions) -> Self {
        self.env_options = options;
        self
    }

    /// Report watch failures to `health`.
    pub fn with_health(mut self, health: ControllerHealth) -> Self {
        self.health = health;
        self
    }

    /// Run until `stop` becomes true: two controllers of one shape, the
    /// pods' sync (`sync_workers` at once) fed by the node's pod informer,
    /// and the status writes (`status_workers` at once) fed by the
    /// provider; beside them, the dangling-pod sweep and the gauges.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let queue_metrics = |what: &str| {
            self.metrics
                .workqueue
                .queue(&format!("{what}/{}", self.node_name))
        };
        let (listed_tx, mut listed) = watch::channel(0u64);
        let sync = Controller::new(WorkQueue::with_metrics(
            default_controller_rate_limiter(),
            queue_metrics("pod-sync"),
        ))
        .workers(self.config.sync_workers)
        .health(self.health.clone())
        .watches_listed(
            &self.pods,
            |pod: &Pod| Some(rules::key_of(pod)),
            move || listed_tx.send_modify(|n| *n += 1),
        );
        let status = Controller::new(WorkQueue::with_metrics(
            default_controller_rate_limiter(),
            queue_metrics("pod-status"),
        ))
        .workers(self.config.status_workers)
        .health(self.health.clone());
        let store = self.pods.store().clone();
        let shared = Arc::new(Shared {
            client: self.client.clone(),
            provider: self.provider.clone(),
            config: self.config.clone(),
            pods: store.clone(),
            sync: sync.queue().clone(),
            status: status.queue().clone(),
            states: state::PodStates::default(),
            // Go's source: `<node>/pod-controller`.
            events: EventRecorder::new(
                self.client.clone(),
                format!("{}/pod-controller", self.node_name),
            )
            .with_queue_length(self.config.event_queue_length),
            resources: self.resources.clone(),
            env_options: self.env_options.clone(),
            node: self.node_name.clone(),
            metrics: self.metrics.clone(),
        });

        // Status from the provider: pushed, or polled.
        let poller = match self.provider.notifier() {
            Some(notifier) => {
                let weak = Arc::downgrade(&shared);
                notifier.notify_pods(PodStatusCallback::new(move |pod| {
                    if let Some(shared) = weak.upgrade() {
                        let key = rules::key_of(&pod);
                        if shared.states.notify(&key, pod, Instant::now()) {
                            shared.status.add(key);
                        } else {
                            // An earlier pod of this name ended: a provider
                            // that refused the new pod while the earlier
                            // one ran takes it now, not after the
                            // refusal's backoff.
                            shared.sync.add(key);
                        }
                    }
                }));
                None
            }
            None => Some(tokio::spawn(status::poll(
                shared.clone(),
                listed.clone(),
                stop.clone(),
            ))),
        };

        // ConfigMap and Secret changes, for a provider that wants them.
        let references = tokio::spawn(changes::watch_references(
            self.client.clone(),
            self.provider.clone(),
            self.resources.clone(),
            store,
            self.config.reference_rescan,
            stop.clone(),
        ));
        let sync_pod = {
            let shared = shared.clone();
            move |key: String| {
                let shared = shared.clone();
                async move { shared.sync_pod(&key).await }
            }
        };
        let write_status = {
            let shared = shared.clone();
            move |key: String| {
                let shared = shared.clone();
                async move { shared.write_status(&key).await }
            }
        };

        let stopped = stop.clone();
        // Dangling pods: after each complete list, and periodically.
        let housekeeping = async {
            let mut sweep = tokio::time::interval(self.config.dangling_sweep_period);
            sweep.reset();
            let mut gauges = tokio::time::interval(Duration::from_secs(5));
            loop {
                tokio::select! {
                    _ = gauges.tick() => shared.refresh_gauges(),
                    _ = stratus_runtime::stopped(&mut stop) => break,
                    changed = listed.changed() => {
                        if changed.is_err() { break; }
                        // The informer has queued every pod of the list (and
                        // every pod the list no longer has) against the new
                        // store.
                        self.ready.send_replace(true);
                        shared.sweep_dangling().await;
                    }
                    _ = sweep.tick() => {
                        if *listed.borrow() > 0 {
                            shared.sweep_dangling().await;
                        }
                    }
                }
            }
        };
        tokio::join!(
            sync.run(sync_pod, stopped.clone()),
            status.run(write_status, stopped),
            housekeeping,
        );
        references.abort();
        if let Some(p) = poller {
            p.abort();
        }
        self.health.stopped();
    }
}

impl Shared {
    /// A provider call, timed and counted by method and outcome.
    async fn call<T>(
        &self,
        method: &str,
        call: impl std::future::Future<Output = Result<T, PodError>>,
    ) -> Result<T, PodError> {
        let limit = self.config.provider_timeout;
        let bounded = async move {
            match tokio::time::timeout(limit, call).await {
                Ok(outcome) => outcome,
                Err(_) => Err(PodError::unavailable(
                    None,
                    format!("the provider did not answer {method} within {limit:?}"),
                )),
            }
        };
        self.metrics
            .provider
            .time(method, bounded, crate::metrics::call_result)
            .await
    }

    /// Set the pods-by-phase gauges from the cache, and the dropped-events
    /// counter from the recorder.
    fn refresh_gauges(&self) {
        let mut counts: HashMap<&str, i64> =
            ["Pending", "Running", "Succeeded", "Failed", "Unknown"]
                .into_iter()
                .map(|p| (p, 0))
                .collect();
        for pod in self.pods.state() {
            let phase = pod
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .unwrap_or("Pending");
            if let Some(n) = counts.get_mut(phase) {
                *n += 1;
            }
        }
        for (phase, n) in counts {
            self.metrics.set_pods(&self.node, phase, n);
        }
        self.metrics
            .events_dropped(&self.node, self.events.dropped());
        self.metrics.set_pod_states(&self.node, self.states.len());
    }

    fn api(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }

    async fn record(&self, pod: &Pod, kind: EventType, reason: &str, message: &str) {
        self.events
            .record(&reference(pod), kind, reason, message)
            .await;
    }
}
