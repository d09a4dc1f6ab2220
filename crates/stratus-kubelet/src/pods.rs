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
//! - **Provider errors**: status `reason: ProviderFailed` with the message;
//!   the phase stays `Pending` and the pod is retried with backoff for as
//!   long as it exists (never silently dropped); only a permanent error on
//!   a `restartPolicy: Never` pod fails it.
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
//!   `missing_grace` is `Failed` / `NotFound` with exit code -137.
//! - **Dangling pods**: after each (re)list and every `dangling_sweep_period`,
//!   provider pods with no API pod are deleted — unless that would delete
//!   more than half of the provider's pods (and more than 10), the sign of
//!   an incomplete API view (the Kip incident): then nothing is deleted and
//!   a warning is logged.

mod changes;
mod rules;
mod state;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodStatus};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube_runtime::reflector::{ObjectRef, Store};
use kube_runtime::watcher;
use stratus_pod::env::{ResolveOptions, apply_resolved_env, resolve_pod_env};
use stratus_pod::{PodError, PodLifecycleHandler, PodResources, PodStatusCallback};
use stratus_runtime::events::{EventRecorder, EventType};
use stratus_runtime::health::ControllerHealth;
use stratus_runtime::informer::Informer;
use stratus_runtime::workqueue::{
    Action, Retry, WorkQueue, default_controller_rate_limiter, run_workers,
};
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
    /// The controller of the pods bound to `node_name`.
    pub fn new(
        client: kube::Client,
        provider: Arc<dyn PodLifecycleHandler>,
        node_name: impl Into<String>,
        config: PodControllerConfig,
    ) -> Self {
        Self {
            resources: Arc::new(ApiResources::new(client.clone(), Duration::from_secs(30))),
            client,
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

    /// Run until `stop` becomes true.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let queue_metrics = |what: &str| {
            self.metrics
                .workqueue
                .queue(&format!("{what}/{}", self.node_name))
        };
        let sync =
            WorkQueue::with_metrics(default_controller_rate_limiter(), queue_metrics("pod-sync"));
        let status = WorkQueue::with_metrics(
            default_controller_rate_limiter(),
            queue_metrics("pod-status"),
        );
        let (listed_tx, mut listed) = watch::channel(0u64);
        let informer = {
            let sync = sync.clone();
            Informer::start_with(
                Api::<Pod>::all(self.client.clone()),
                watcher::Config::default().fields(&format!("spec.nodeName={}", self.node_name)),
                &self.health,
                move |pod: &Pod| sync.add(rules::key_of(pod)),
                move || {
                    listed_tx.send_modify(|n| *n += 1);
                },
            )
        };
        let shared = Arc::new(Shared {
            client: self.client.clone(),
            provider: self.provider.clone(),
            config: self.config.clone(),
            pods: informer.store().clone(),
            sync: sync.clone(),
            status: status.clone(),
            states: state::PodStates::default(),
            events: EventRecorder::new(self.client.clone(), "virtual-kubelet")
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
                        shared.states.notify(&key, pod, Instant::now());
                        shared.status.add(key);
                    }
                }));
                None
            }
            None => Some(tokio::spawn(poll(
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
            informer.store().clone(),
            self.config.reference_rescan,
            stop.clone(),
        ));
        let sync_workers = {
            let shared = shared.clone();
            tokio::spawn(run_workers(
                sync.clone(),
                self.config.sync_workers,
                move |key| {
                    let shared = shared.clone();
                    async move { shared.sync_pod(&key).await }
                },
            ))
        };
        let status_workers = {
            let shared = shared.clone();
            tokio::spawn(run_workers(
                status.clone(),
                self.config.status_workers,
                move |key| {
                    let shared = shared.clone();
                    async move { shared.write_status(&key).await }
                },
            ))
        };

        // Dangling pods: after each complete list, and periodically.
        let mut sweep = tokio::time::interval(self.config.dangling_sweep_period);
        sweep.reset();
        let mut gauges = tokio::time::interval(Duration::from_secs(5));
        loop {
            tokio::select! {
                _ = gauges.tick() => shared.refresh_gauges(),
                _ = stratus_runtime::stopped(&mut stop) => break,
                changed = listed.changed() => {
                    if changed.is_err() { break; }
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
        references.abort();
        sync.shut_down();
        status.shut_down();
        if let Some(p) = poller {
            p.abort();
        }
        let _ = sync_workers.await;
        let _ = status_workers.await;
        drop(informer);
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

    /// Bring the provider in line with the API pod of `key`.
    async fn sync_pod(&self, key: &str) -> Result<Action, SyncError> {
        let (namespace, name) = split(key);
        let cached = self
            .pods
            .get(&ObjectRef::new(name).within(namespace))
            .map(|p| (*p).clone());
        // Not in the cache: the cache may lag behind the API (a watch gap, a
        // relist in progress), so the API decides whether the pod is gone.
        let pod = match cached {
            Some(pod) => Some(pod),
            None if self.states.was_removed(key) => None,
            None => self
                .api(namespace)
                .get_opt(name)
                .await?
                .filter(|live| pod_node(live) == Some(self.node.as_str())),
        };
        let Some(pod) = pod else {
            // Gone from the API: gone from the provider too, and from
            // this controller's memory.
            self.states.forget(key);
            let provider_pod = match self
                .call("get_pod", self.provider.get_pod(namespace, name))
                .await
            {
                Ok(p) => p,
                Err(e) if e.is_not_found() => None,
                Err(e) => return Err(e.into()),
            };
            if let Some(provider_pod) = provider_pod {
                match self
                    .call("delete_pod", self.provider.delete_pod(&provider_pod))
                    .await
                {
                    Ok(()) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(e.into()),
                }
            }
            return Ok(Action::Done);
        };
        if pod.metadata.deletion_timestamp.is_some() {
            return self.delete(key, &pod).await;
        }
        if rules::terminal(&pod) {
            return Ok(Action::Done);
        }
        let fingerprint = rules::fingerprint(&pod);
        if self.states.is_synced(key, &pod.metadata.uid, fingerprint) {
            return Ok(Action::Done);
        }
        let desired = self.with_env(&pod).await?;
        let existing = match self
            .call("get_pod", self.provider.get_pod(namespace, name))
            .await
        {
            Ok(p) => p,
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e.into()),
        };
        // The provider still runs an earlier pod of this name (deleted and
        // re-created while its deletion was in flight): remove it first.
        let existing = match existing {
            Some(stale)
                if stale.metadata.uid.is_some() && stale.metadata.uid != pod.metadata.uid =>
            {
                match self
                    .call("delete_pod", self.provider.delete_pod(&stale))
                    .await
                {
                    Ok(()) => None,
                    Err(e) if e.is_not_found() => None,
                    Err(e) => return Err(e.into()),
                }
            }
            other => other,
        };
        // A pod the provider already runs whose status this controller has
        // not written (it restarted, or the notification went to a stopped
        // one): take the provider's status now.
        if let Some(current) = &existing
            && current.status.is_some()
            && !self.states.status_written_for(key, &pod.metadata.uid)
        {
            self.states
                .notify_unless_newer(key, current.clone(), Instant::now());
            self.status.add(key.to_owned());
        }
        let (outcome, success, failure) = match &existing {
            None => (
                self.call("create_pod", self.provider.create_pod(&desired))
                    .await,
                reasons::PROVIDER_CREATE_SUCCESS,
                reasons::PROVIDER_CREATE_FAILED,
            ),
            Some(current) if !pods_equal(current, &desired) => (
                self.call("update_pod", self.provider.update_pod(&desired))
                    .await,
                reasons::PROVIDER_UPDATE_SUCCESS,
                reasons::PROVIDER_UPDATE_FAILED,
            ),
            Some(_) => {
                self.states
                    .set_synced(key, pod.metadata.uid.clone(), fingerprint);
                return Ok(Action::Done);
            }
        };
        match outcome {
            Ok(()) => {
                let verb = if existing.is_none() {
                    "Create"
                } else {
                    "Update"
                };
                self.record(
                    &pod,
                    EventType::Normal,
                    success,
                    &format!("{verb} pod in provider successfully"),
                )
                .await;
                self.states
                    .set_synced(key, pod.metadata.uid.clone(), fingerprint);
                Ok(Action::Done)
            }
            Err(e) => {
                self.record(&pod, EventType::Warning, failure, &e.to_string())
                    .await;
                let status = rules::provider_failed(&pod, &e);
                let failed_for_good = status.phase.as_deref() == Some("Failed");
                self.patch_status(&pod, &status).await?;
                if failed_for_good {
                    Ok(Action::Done)
                } else {
                    Err(e.into())
                }
            }
        }
    }

    /// The pod as the provider gets it: environments resolved (events
    /// recorded), unless resolution is off. A failure is retried; the pod
    /// stays Pending (Go's rule: no ProviderFailed status for it).
    async fn with_env(&self, pod: &Pod) -> Result<Pod, SyncError> {
        if !self.config.resolve_env {
            return Ok(pod.clone());
        }
        match resolve_pod_env(pod, self.resources.as_ref(), &self.env_options).await {
            Ok(resolved) => {
                for event in &resolved.events {
                    self.record(pod, EventType::Warning, event.reason, &event.message)
                        .await;
                }
                let mut desired = pod.clone();
                apply_resolved_env(&mut desired, &resolved);
                Ok(desired)
            }
            Err(failure) => {
                for event in &failure.events {
                    self.record(pod, EventType::Warning, event.reason, &event.message)
                        .await;
                }
                Err(SyncError::Provider(failure.into()))
            }
        }
    }

    /// A pod being deleted: delete it in the provider, then force-delete
    /// the API object once nothing runs or the grace period is over.
    async fn delete(&self, key: &str, pod: &Pod) -> Result<Action, SyncError> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if !self.states.provider_deleted(key, &uid) {
            match self.call("delete_pod", self.provider.delete_pod(pod)).await {
                Ok(()) => {
                    self.record(
                        pod,
                        EventType::Normal,
                        reasons::PROVIDER_DELETE_SUCCESS,
                        "Delete pod in provider successfully",
                    )
                    .await
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => {
                    self.record(
                        pod,
                        EventType::Warning,
                        reasons::PROVIDER_DELETE_FAILED,
                        &e.to_string(),
                    )
                    .await;
                    return Err(e.into());
                }
            }
            self.states.set_provider_deleted(key, &uid);
        }
        let deadline = pod
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(|t| t.0)
            .unwrap_or_else(k8s_openapi::jiff::Timestamp::now);
        let now = k8s_openapi::jiff::Timestamp::now();
        if running(pod.status.as_ref()) && now < deadline {
            let left = deadline.duration_since(now).unsigned_abs();
            return Ok(Action::RequeueAfter(left));
        }
        let (namespace, name) = split(key);
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match self.api(namespace).delete(name, &params).await {
            Ok(_) => self.states.set_removed(key),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {
                self.states.deletion_settled(key)
            }
            Err(e) => return Err(e.into()),
        }
        Ok(Action::Done)
    }

    /// Write the provider's latest status of `key`.
    async fn write_status(&self, key: &str) -> Result<Action, SyncError> {
        let Some((provided, notified_at)) = self.states.take_notified(key) else {
            return Ok(Action::Done);
        };
        let (namespace, name) = split(key);
        let Some(pod) = self
            .pods
            .get(&ObjectRef::new(name).within(namespace))
            .map(|p| (*p).clone())
        else {
            return Ok(Action::Done);
        };
        if rules::terminal(&pod) {
            return Ok(Action::Done);
        }
        // A notification about an earlier pod of the same name.
        if provided.metadata.uid.is_some() && provided.metadata.uid != pod.metadata.uid {
            return Ok(Action::Done);
        }
        // The provider deleted the pod on its own (an eviction in a remote
        // cluster): delete the API pod with the provider's grace.
        if let Some(deleted_at) = &provided.metadata.deletion_timestamp
            && pod.metadata.deletion_timestamp.is_none()
        {
            let grace = deleted_at
                .0
                .duration_since(k8s_openapi::jiff::Timestamp::now())
                .as_secs()
                .max(0);
            let params = DeleteParams {
                grace_period_seconds: Some(u32::try_from(grace).unwrap_or(0)),
                preconditions: pod.metadata.uid.clone().map(|uid| Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..Default::default()
            };
            return match self.api(namespace).delete(name, &params).await {
                Ok(_) => Ok(Action::Done),
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(Action::Done),
                Err(e) => Err(e.into()),
            };
        }
        let Some(status) = provided.status else {
            return Ok(Action::Done);
        };
        if let Err(e) = self.patch_status(&pod, &status).await {
            // Keep the newest notification for the retry unless a newer one
            // arrived meanwhile.
            self.states.notify_unless_newer(
                key,
                Pod {
                    status: Some(status),
                    ..provided_shell(&pod)
                },
                notified_at,
            );
            return Err(e);
        }
        self.metrics
            .notification_written(&self.node, notified_at.elapsed());
        Ok(Action::Done)
    }

    /// Patch `pods/status` (strategic merge: conditions and container
    /// statuses merge by key), unless it equals the last written status.
    async fn patch_status(&self, pod: &Pod, status: &PodStatus) -> Result<(), SyncError> {
        let key = rules::key_of(pod);
        let status_print = rules::status_fingerprint(status);
        if self
            .states
            .is_written(&key, &pod.metadata.uid, status_print)
        {
            return Ok(());
        }
        let (namespace, name) = split(&key);
        let patch = rules::status_patch(status).map_err(kube::Error::SerdeError)?;
        let mut request =
            kube::core::Request::new(<Pod as kube::Resource>::url_path(&(), Some(namespace)))
                .patch_subresource(
                    "status",
                    name,
                    &PatchParams::default(),
                    &Patch::Strategic(patch),
                )
                .map_err(kube::Error::BuildRequest)?;
        request.extensions_mut().insert("patch_status");
        let started = Instant::now();
        // The patched pod comes back through the watch; its copy in the
        // response is not parsed (a whole Pod, managedFields included).
        let written = self.client.request_text(request).await;
        self.metrics.status_written(&self.node, started.elapsed());
        match written {
            Ok(_) => {
                self.states
                    .set_written(&key, pod.metadata.uid.clone(), status_print);
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Delete provider pods that have no API pod, unless that looks like an
    /// incomplete view of the API.
    async fn sweep_dangling(&self) {
        let provider_pods = match self.call("get_pods", self.provider.get_pods()).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the provider's pods; the dangling-pod sweep waits for the next pass");
                return;
            }
        };
        let dangling: Vec<String> = provider_pods
            .iter()
            .map(rules::key_of)
            .filter(|key| {
                let (namespace, name) = split(key);
                self.pods
                    .get(&ObjectRef::new(name).within(namespace))
                    .is_none()
            })
            .collect();
        if dangling.is_empty() {
            return;
        }
        if dangling.len() > 10 && dangling.len() * 2 > provider_pods.len() {
            tracing::warn!(
                dangling = dangling.len(),
                provider_pods = provider_pods.len(),
                "most provider pods have no API pod; not deleting them (the API view may be incomplete)"
            );
            return;
        }
        for key in dangling {
            tracing::info!(pod = %key, "deleting a provider pod with no API pod");
            self.sync.add(key);
        }
    }
}

/// The node a pod is bound to.
fn pod_node(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

/// A pod with only `pod`'s identity (for a retried status).
fn provided_shell(pod: &Pod) -> Pod {
    Pod {
        metadata: pod.metadata.clone(),
        ..Default::default()
    }
}

/// The polling fallback: every `poll_interval`, each pod's status from
/// the provider, at most `poll_concurrency` at once.
async fn poll(shared: Arc<Shared>, listed: watch::Receiver<u64>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(shared.config.poll_interval);
    loop {
        tokio::select! {
            _ = stratus_runtime::stopped(&mut stop) => return,
            _ = tick.tick() => {}
        }
        if *listed.borrow() == 0 {
            continue;
        }
        let pods: Vec<Arc<Pod>> = shared
            .pods
            .state()
            .into_iter()
            .filter(|p| !rules::terminal(p) && p.metadata.deletion_timestamp.is_none())
            .collect();
        let shared_ref = &shared;
        futures_util::stream::iter(pods)
            .for_each_concurrent(shared.config.poll_concurrency.max(1), |pod| async move {
                let (namespace, name) = (
                    pod.metadata.namespace.clone().unwrap_or_default(),
                    pod.metadata.name.clone().unwrap_or_default(),
                );
                let status = match shared_ref
                    .call(
                        "get_pod_status",
                        shared_ref.provider.get_pod_status(&namespace, &name),
                    )
                    .await
                {
                    Ok(Some(s)) => s,
                    Ok(None) => missing_status(shared_ref, &pod),
                    Err(e) if e.is_not_found() => missing_status(shared_ref, &pod),
                    Err(e) => {
                        tracing::debug!(pod = %name, error = %e, "status poll failed");
                        return;
                    }
                };
                let Some(status) = Some(status).filter(|s| s.phase.is_some()) else {
                    return;
                };
                let key = rules::key_of(&pod);
                shared_ref.states.notify(
                    &key,
                    Pod {
                        status: Some(status),
                        ..provided_shell(&pod)
                    },
                    Instant::now(),
                );
                shared_ref.status.add(key);
            })
            .await;
    }
}

/// The status of a pod the provider does not have: unchanged (no phase)
/// while it may still be starting, `Failed` / `NotFound` after.
fn missing_status(shared: &Shared, pod: &Pod) -> PodStatus {
    let was_running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    let age = pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| {
            k8s_openapi::jiff::Timestamp::now()
                .duration_since(t.0)
                .as_secs()
        })
        .unwrap_or(0);
    let grace = i64::try_from(shared.config.missing_grace.as_secs()).unwrap_or(i64::MAX);
    if was_running || age >= grace {
        rules::missing_in_provider(pod)
    } else {
        PodStatus::default()
    }
}
