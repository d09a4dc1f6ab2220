//! `MockPodProvider`: a stateful, in-memory pod provider for tests of
//! virtual nodes. Pods start `Running` at once with fake IPs and notify on
//! every change; annotations script their containers, and failures can be
//! queued per call.
//!
//! Annotations on a pod:
//! - `mock.stratus.dev/exit-code: "<n>"`: the containers run, then exit
//!   with `n` after `mock.stratus.dev/run-for` (a Go duration; 0 by
//!   default): phase `Succeeded` for 0, `Failed` otherwise.
//! - `mock.stratus.dev/pending: "true"`: the containers stay waiting
//!   (`ContainerCreating`), phase `Pending`.
//! - `mock.stratus.dev/log: "<lines>"`: what every container writes to its
//!   log when it starts (after the line `started container <name>`).
//!
//! It also serves the kubelet API's capabilities (see [`capabilities`]):
//! container logs (with `follow`, `tailLines`, `timestamps`,
//! `sinceSeconds`/`sinceTime`, and [`MockPodProvider::append_log`]),
//! exec of a few built-in commands (`echo`, `cat`, `env`, `hostname`,
//! `exit N`, `sleep N`, `true`, `false`, `stderr TEXT`, `size`), attach
//! (an echo of the input), port-forward (every port echoes), the stats
//! summary and resource metrics; it records the ConfigMap and Secret
//! changes it is told about ([`MockPodProvider::resource_changes_told`]).
//!
//! ```
//! use stratus_pod::PodLifecycleHandler;
//! use stratus_testing::MockPodProvider;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let provider = MockPodProvider::new();
//! let pod = serde_json::from_value(serde_json::json!({
//!     "metadata": {"name": "web", "namespace": "default", "uid": "u-1"},
//!     "spec": {"containers": [{"name": "nginx", "image": "nginx"}]},
//! })).unwrap();
//! provider.create_pod(&pod).await.unwrap();
//! let status = provider.get_pod_status("default", "web").await.unwrap().unwrap();
//! assert_eq!(status.phase.as_deref(), Some("Running"));
//! assert!(status.pod_ip.unwrap().starts_with("10.244."));
//! # });
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use stratus_pod::{PodError, PodLifecycleHandler, PodNotifier, PodStatusCallback, Result};

/// Exit the containers with this code (see the module docs).
pub const EXIT_CODE_ANNOTATION: &str = "mock.stratus.dev/exit-code";
/// How long the containers run before they exit.
pub const RUN_FOR_ANNOTATION: &str = "mock.stratus.dev/run-for";
/// Keep the containers waiting.
pub const PENDING_ANNOTATION: &str = "mock.stratus.dev/pending";
/// Lines every container logs when it starts.
pub const LOG_ANNOTATION: &str = "mock.stratus.dev/log";

pub mod capabilities;

/// One call the mock received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodCall {
    /// `create_pod`, `update_pod`, `delete_pod`, ...
    pub method: &'static str,
    /// `namespace/name`.
    pub pod: String,
}

#[derive(Default)]
struct State {
    latency: Duration,
    /// Boxed: a `Pod` is about 2.5 KB inline, and a map's nodes hold
    /// their values inline with room to spare.
    pods: BTreeMap<String, Box<Pod>>,
    calls: crate::call_log::CallLog<PodCall>,
    failures: BTreeMap<&'static str, VecDeque<PodError>>,
    callback: Option<PodStatusCallback>,
    logs: BTreeMap<String, Vec<capabilities::LogLine>>,
    resizes: Vec<stratus_pod::TermSize>,
    changes: Vec<stratus_pod::ResourceChange>,
}

/// The in-memory provider. Cheap to clone; clones share the pods.
#[derive(Clone)]
pub struct MockPodProvider {
    state: Arc<Mutex<State>>,
    next_ip: Arc<AtomicU32>,
    notifications: bool,
    capabilities: bool,
    node_name: Arc<str>,
    started: Time,
    changed: Arc<tokio::sync::watch::Sender<u64>>,
    sessions: Arc<std::sync::atomic::AtomicUsize>,
}

impl std::fmt::Debug for MockPodProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockPodProvider")
            .field("pods", &self.lock().pods.len())
            .finish_non_exhaustive()
    }
}

impl Default for MockPodProvider {
    fn default() -> Self {
        Self::new()
    }
}

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

fn key_of(pod: &Pod) -> String {
    key(
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default(),
    )
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

impl MockPodProvider {
    /// An empty provider that notifies status changes.
    pub fn new() -> Self {
        Self {
            state: Arc::new(Mutex::new(State::default())),
            next_ip: Arc::new(AtomicU32::new(1)),
            notifications: true,
            capabilities: true,
            node_name: Arc::from(""),
            started: now(),
            sessions: Arc::default(),
            changed: Arc::new(tokio::sync::watch::channel(0).0),
        }
    }

    /// Report stats as node `name` (default: empty, which the kubelet API
    /// fills in with its own node).
    pub fn with_node_name(mut self, name: &str) -> Self {
        self.node_name = Arc::from(name);
        self
    }

    /// The same without [`PodNotifier`]: the node polls it.
    pub fn without_notifications(mut self) -> Self {
        self.notifications = false;
        self
    }

    /// The same without the kubelet-API capabilities (logs, exec, attach,
    /// port-forward, stats, metrics): a lifecycle-only provider, for which
    /// the kubelet API answers 501.
    pub fn without_capabilities(mut self) -> Self {
        self.capabilities = false;
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fail the next `times` calls of `method` (`create_pod`, `update_pod`,
    /// `delete_pod`, `get_pod`, `get_pods`, `get_pod_status`) with `error`.
    pub fn fail_next(&self, method: &'static str, error: PodError, times: usize) {
        let mut s = self.lock();
        let queue = s.failures.entry(method).or_default();
        for _ in 0..times {
            queue.push_back(PodError::new(error.kind(), error.message().to_owned()));
        }
    }

    /// Answer every call after `latency` (a slow or hung backend).
    pub fn set_latency(&self, latency: Duration) {
        self.lock().latency = latency;
    }

    /// The calls received so far, oldest first (the last 10,000: the log
    /// stays bounded however long the provider runs).
    pub fn calls(&self) -> Vec<PodCall> {
        self.lock().calls.recent()
    }

    /// How many calls of `method` were received (all of them).
    pub fn calls_to(&self, method: &str) -> usize {
        self.lock().calls.count(method)
    }

    /// The pods the provider runs, by `namespace/name`.
    pub fn pods(&self) -> BTreeMap<String, Pod> {
        self.lock()
            .pods
            .iter()
            .map(|(k, pod)| (k.clone(), Pod::clone(pod)))
            .collect()
    }

    /// Put a pod in the provider directly (one the node does not know: a
    /// dangling pod).
    pub fn insert(&self, pod: Pod) {
        self.lock().pods.insert(key_of(&pod), Box::new(pod));
    }

    /// Remove a pod behind the node's back (it vanished in the backend).
    pub fn remove(&self, namespace: &str, name: &str) -> Option<Pod> {
        let removed = self.lock().pods.remove(&key(namespace, name));
        self.changed.send_modify(|n| *n += 1);
        removed.map(|pod| *pod)
    }

    /// Change a pod's status and notify it (a container crashed, ...).
    pub fn set_status(&self, namespace: &str, name: &str, f: impl FnOnce(&mut PodStatus)) {
        let notified = {
            let mut s = self.lock();
            let Some(pod) = s.pods.get_mut(&key(namespace, name)) else {
                return;
            };
            f(pod.status.get_or_insert_with(Default::default));
            Pod::clone(pod)
        };
        self.notify(notified);
    }

    /// Mark a pod deleted by the backend itself (an eviction), with the
    /// given grace, and notify it.
    pub fn evict(&self, namespace: &str, name: &str) {
        let notified = {
            let mut s = self.lock();
            let Some(pod) = s.pods.get_mut(&key(namespace, name)) else {
                return;
            };
            pod.metadata.deletion_timestamp = Some(now());
            Pod::clone(pod)
        };
        self.notify(notified);
    }

    async fn begin(&self, method: &'static str, pod: String) -> Result<()> {
        let latency = {
            let mut s = self.lock();
            s.calls.push(method, PodCall { method, pod });
            if let Some(e) = s.failures.get_mut(method).and_then(VecDeque::pop_front) {
                return Err(e);
            }
            s.latency
        };
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        Ok(())
    }

    fn notify(&self, pod: Pod) {
        self.changed.send_modify(|n| *n += 1);
        if !self.notifications {
            return;
        }
        let callback = self.lock().callback.clone();
        if let Some(callback) = callback {
            callback.notify(pod);
        }
    }

    /// The status of a pod that just started, per its annotations.
    fn started(&self, pod: &Pod) -> PodStatus {
        let n = self.next_ip.fetch_add(1, Ordering::Relaxed);
        let ip = format!("10.244.{}.{}", (n >> 8) & 0xff, n & 0xff);
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        let pending = annotations.get(PENDING_ANNOTATION).map(String::as_str) == Some("true");
        let started = now();
        let containers = pod
            .spec
            .as_ref()
            .map(|s| s.containers.clone())
            .unwrap_or_default();
        let statuses = containers
            .iter()
            .map(|c| ContainerStatus {
                name: c.name.clone(),
                image: c.image.clone().unwrap_or_default(),
                image_id: String::new(),
                container_id: Some(format!("mock://{}/{}", key_of(pod), c.name)),
                ready: !pending,
                restart_count: 0,
                started: Some(!pending),
                state: Some(if pending {
                    ContainerState {
                        waiting: Some(ContainerStateWaiting {
                            reason: Some("ContainerCreating".into()),
                            message: None,
                        }),
                        ..Default::default()
                    }
                } else {
                    ContainerState {
                        running: Some(ContainerStateRunning {
                            started_at: Some(started.clone()),
                        }),
                        ..Default::default()
                    }
                }),
                ..Default::default()
            })
            .collect();
        let condition = |kind: &str| PodCondition {
            type_: kind.into(),
            status: if pending { "False" } else { "True" }.into(),
            last_transition_time: Some(started.clone()),
            ..Default::default()
        };
        PodStatus {
            phase: Some(if pending { "Pending" } else { "Running" }.into()),
            pod_ip: (!pending).then(|| ip.clone()),
            pod_ips: (!pending).then(|| vec![PodIP { ip: ip.clone() }]),
            host_ip: Some("127.0.0.1".into()),
            start_time: Some(started.clone()),
            container_statuses: Some(statuses),
            conditions: Some(vec![
                condition("PodScheduled"),
                condition("Initialized"),
                condition("ContainersReady"),
                condition("Ready"),
            ]),
            ..Default::default()
        }
    }

    /// Exit the pod's containers with `code` (after `run_for`).
    fn schedule_exit(&self, pod_key: String, code: i32, run_for: Duration) {
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(run_for).await;
            let (namespace, name) = pod_key.split_once('/').unwrap_or(("default", &pod_key));
            this.set_status(namespace, name, |status| {
                terminate(status, code, "Completed")
            });
        });
    }
}

/// Terminate every container with `code`: phase `Succeeded` for 0, else
/// `Failed`.
fn terminate(status: &mut PodStatus, code: i32, reason: &str) {
    let finished = now();
    status.phase = Some(if code == 0 { "Succeeded" } else { "Failed" }.into());
    for c in status.container_statuses.iter_mut().flatten() {
        let started_at = c
            .state
            .as_ref()
            .and_then(|s| s.running.as_ref())
            .and_then(|r| r.started_at.clone());
        c.ready = false;
        c.started = Some(false);
        c.state = Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: code,
                reason: Some(if code == 0 { reason } else { "Error" }.into()),
                started_at,
                finished_at: Some(finished.clone()),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    for condition in status.conditions.iter_mut().flatten() {
        if condition.type_ == "Ready" || condition.type_ == "ContainersReady" {
            condition.status = "False".into();
            condition.reason = Some("PodCompleted".into());
        }
    }
}

impl PodNotifier for MockPodProvider {
    fn notify_pods(&self, callback: PodStatusCallback) {
        self.lock().callback = Some(callback);
    }
}

#[async_trait]
impl PodLifecycleHandler for MockPodProvider {
    async fn create_pod(&self, pod: &Pod) -> Result<()> {
        let k = key_of(pod);
        self.begin("create_pod", k.clone()).await?;
        // A bad script is refused before anything runs.
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        let exit = match annotations.get(EXIT_CODE_ANNOTATION) {
            Some(code) => Some(code.parse::<i32>().map_err(|_| {
                PodError::invalid_input(format!("{EXIT_CODE_ANNOTATION}: {code:?} is not a number"))
            })?),
            None => None,
        };
        let mut stored = pod.clone();
        stored.status = Some(self.started(pod));
        {
            let mut s = self.lock();
            s.pods.insert(k.clone(), Box::new(stored.clone()));
            capabilities::start_logs(&mut s.logs, &stored);
        }
        self.notify(stored);
        if let Some(code) = exit {
            let run_for = annotations
                .get(RUN_FOR_ANNOTATION)
                .and_then(|d| parse_duration(d))
                .unwrap_or_default();
            self.schedule_exit(k, code, run_for);
        }
        Ok(())
    }

    async fn update_pod(&self, pod: &Pod) -> Result<()> {
        let k = key_of(pod);
        self.begin("update_pod", k.clone()).await?;
        let updated = {
            let mut s = self.lock();
            let Some(existing) = s.pods.get_mut(&k) else {
                return Err(PodError::not_found(format!(
                    "pod {k} is not in the provider"
                )));
            };
            let status = existing.status.take();
            **existing = Pod {
                status,
                ..pod.clone()
            };
            Pod::clone(existing)
        };
        self.notify(updated);
        Ok(())
    }

    async fn delete_pod(&self, pod: &Pod) -> Result<()> {
        let k = key_of(pod);
        self.begin("delete_pod", k.clone()).await?;
        let removed = {
            let mut s = self.lock();
            // Only the pod asked for: a successor created under its name
            // (force-deleted and re-created) stays.
            let same = s.pods.get(&k).is_some_and(|held| {
                pod.metadata.uid.is_none() || held.metadata.uid == pod.metadata.uid
            });
            if same {
                capabilities::forget_logs(&mut s.logs, &k);
                s.pods.remove(&k)
            } else {
                None
            }
        };
        let Some(mut removed) = removed else {
            return Err(PodError::not_found(format!(
                "pod {k} is not in the provider"
            )));
        };
        // The terminal status the node expects after a deletion.
        terminate(
            removed.status.get_or_insert_with(Default::default),
            0,
            "Terminated",
        );
        self.notify(*removed);
        Ok(())
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>> {
        self.begin("get_pod", key(namespace, name)).await?;
        Ok(self
            .lock()
            .pods
            .get(&key(namespace, name))
            .map(|pod| Pod::clone(pod)))
    }

    async fn get_pod_status(&self, namespace: &str, name: &str) -> Result<Option<PodStatus>> {
        self.begin("get_pod_status", key(namespace, name)).await?;
        Ok(self
            .lock()
            .pods
            .get(&key(namespace, name))
            .and_then(|p| p.status.clone()))
    }

    async fn get_pods(&self) -> Result<Vec<Pod>> {
        self.begin("get_pods", String::new()).await?;
        Ok(self
            .lock()
            .pods
            .values()
            .map(|pod| Pod::clone(pod))
            .collect())
    }

    fn notifier(&self) -> Option<&dyn PodNotifier> {
        self.notifications.then_some(self as &dyn PodNotifier)
    }

    fn container_logs(&self) -> Option<&dyn stratus_pod::ContainerLogs> {
        self.capabilities.then_some(self as _)
    }

    fn exec(&self) -> Option<&dyn stratus_pod::ContainerExec> {
        self.capabilities.then_some(self as _)
    }

    fn attach(&self) -> Option<&dyn stratus_pod::ContainerAttach> {
        self.capabilities.then_some(self as _)
    }

    fn port_forward(&self) -> Option<&dyn stratus_pod::PortForward> {
        self.capabilities.then_some(self as _)
    }

    fn stats_summary(&self) -> Option<&dyn stratus_pod::StatsSummary> {
        self.capabilities.then_some(self as _)
    }

    fn resource_metrics(&self) -> Option<&dyn stratus_pod::ResourceMetrics> {
        self.capabilities.then_some(self as _)
    }

    fn resource_changes(&self) -> Option<&dyn stratus_pod::ResourceChanges> {
        self.capabilities.then_some(self as _)
    }
}

/// `500ms`, `2s`, `1m`: a small subset of Go durations.
pub(crate) fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().ok()?;
    match unit {
        "ms" => Some(Duration::from_millis(n)),
        "s" => Some(Duration::from_secs(n)),
        "m" => Some(Duration::from_secs(n * 60)),
        _ => None,
    }
}
