//! The provider: the pods it runs, their statuses, and the kubelet-API
//! capabilities.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateWaiting, ContainerStatus, Pod, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use stratus_pod::{
    ByteStream, ContainerLogOptions, ContainerLogs, ContainerRef, PodAddresses, PodError,
    PodLifecycleHandler, PodNotifier, PodResources, PodStatusCallback, ResourceChange,
    ResourceChanges, Result,
};
use tokio::sync::watch;

use crate::plan::{Launch, plan};
use crate::status::{Run, as_init, conditions, phase, run_of, while_sidecars_run};
use crate::supervisor::supervise;
use crate::{PodNetwork, ProcessConfig};

/// The grace period when neither the deletion nor the spec gives one.
const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// Runs pods as local processes (see the crate docs).
#[derive(Clone)]
pub struct ProcessProvider {
    inner: Arc<Inner>,
    /// Where ConfigMaps and Secrets of volumes are read.
    resources: Option<Arc<dyn PodResources>>,
    /// The node's name, for the stats summary.
    node_name: String,
}

impl std::fmt::Debug for ProcessProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessProvider")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// One pod.
struct Entry {
    pod: Pod,
    /// Its IP.
    ip: String,
    dir: PathBuf,
    start: Time,
    /// Init containers first, then the app containers.
    statuses: Vec<ContainerStatus>,
    init_count: usize,
    /// How each container starts (the same order as `statuses`), for exec.
    launches: Vec<Launch>,
    /// Each container's running process group, for stats.
    groups: Vec<Option<i32>>,
    /// Each running container's stdin (with `stdin: true`), for attach.
    stdins: Vec<Option<tokio::sync::mpsc::Sender<Vec<u8>>>>,
    stop: watch::Sender<Option<Duration>>,
    /// Becomes true when the supervisor returned: no process of the pod
    /// runs any more.
    ended: watch::Receiver<bool>,
}

/// The provider's state, shared with the supervisors.
pub(crate) struct Inner {
    config: ProcessConfig,
    /// Where CPU limits are enforced, if this process may.
    cgroups: Option<crate::cgroups::Cgroups>,
    /// CPU rates between stats summaries.
    rates: Mutex<crate::stats::Rates>,
    pods: Mutex<HashMap<String, Entry>>,
    callback: Mutex<Option<PodStatusCallback>>,
}

pub(crate) fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

fn key_of(pod: &Pod) -> String {
    key(
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default(),
    )
}

impl ProcessProvider {
    /// A provider running pods under `config.root_dir`.
    ///
    /// ```
    /// use stratus_provider_process::{ProcessConfig, ProcessProvider};
    /// use stratus_pod::PodLifecycleHandler;
    ///
    /// let provider = ProcessProvider::new(ProcessConfig::new(std::env::temp_dir().join("stratus-pods")));
    /// assert!(provider.notifier().is_some() && provider.container_logs().is_some());
    /// ```
    pub fn new(config: ProcessConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                cgroups: crate::cgroups::Cgroups::detect(),
                rates: Mutex::new(crate::stats::Rates::default()),
                pods: Mutex::new(HashMap::new()),
                callback: Mutex::new(None),
            }),
            resources: None,
            node_name: String::new(),
        }
    }
}

impl ProcessProvider {
    /// Read the ConfigMaps and Secrets of `configMap`, `secret` and
    /// `projected` volumes through `resources` (give it the node's, see
    /// `VirtualNodeBuilder::resources`); without it such volumes are
    /// refused.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stratus_pod::InMemoryResources;
    /// use stratus_provider_process::{ProcessConfig, ProcessProvider};
    ///
    /// let provider = ProcessProvider::new(ProcessConfig::new("/tmp/pods"))
    ///     .with_resources(Arc::new(InMemoryResources::new()));
    /// # let _ = provider;
    /// ```
    pub fn with_resources(mut self, resources: Arc<dyn PodResources>) -> Self {
        self.resources = Some(resources);
        self
    }

    /// The node name the stats summary reports.
    pub fn with_node_name(mut self, name: impl Into<String>) -> Self {
        self.node_name = name.into();
        self
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inner {
    pub(crate) fn config(&self) -> &ProcessConfig {
        &self.config
    }

    /// How container `container` of pod `key` starts, if it runs now.
    pub(crate) fn running_launch(&self, key: &str, container: &str) -> Option<Launch> {
        let pods = lock(&self.pods);
        let entry = pods.get(key)?;
        let index = entry.statuses.iter().position(|s| s.name == container)?;
        let running = entry.statuses[index]
            .state
            .as_ref()
            .is_some_and(|s| s.running.is_some());
        running.then(|| entry.launches[index].clone())
    }

    /// Whether pod `key` is here.
    /// The IP of the running pod `key`.
    pub(crate) fn pod_ip(&self, key: &str) -> Option<String> {
        lock(&self.pods).get(key).map(|e| e.ip.clone())
    }

    /// The IP of the pod `key`: the node's, or its own from the pod CIDR
    /// (given now if it has none yet).
    fn address(&self, key: &str) -> Result<String, crate::network::NoAddress> {
        match &self.config.pod_network {
            PodNetwork::NodeAddress => Ok(self.config.pod_ip.clone()),
            PodNetwork::PodCidr(pool) => pool.assign(key).map(|ip| ip.to_string()),
        }
    }

    /// The pod `key` is gone: its own address, if it had one, is free.
    fn release(&self, key: &str) {
        if let PodNetwork::PodCidr(pool) = &self.config.pod_network {
            pool.release(key);
        }
    }

    pub(crate) fn pod_dir(&self, key: &str) -> Option<PathBuf> {
        lock(&self.pods).get(key).map(|e| e.dir.clone())
    }

    /// Whether container `index` started (running, its startup probe
    /// passed); true when the pod is gone, so nobody waits for it.
    pub(crate) fn started(&self, key: &str, index: usize) -> bool {
        lock(&self.pods).get(key).is_none_or(|e| {
            e.statuses
                .get(index)
                .is_none_or(|s| s.started == Some(true))
        })
    }

    pub(crate) fn restart_count(&self, key: &str, index: usize) -> i32 {
        lock(&self.pods)
            .get(key)
            .and_then(|e| e.statuses.get(index))
            .map_or(0, |s| s.restart_count)
    }

    /// Set a container's state (and, with `last`, its last state and one
    /// more restart), then report the pod.
    pub(crate) fn set_state(
        &self,
        key: &str,
        index: usize,
        state: ContainerState,
        last: Option<ContainerState>,
    ) {
        let pod = {
            let mut pods = lock(&self.pods);
            let Some(entry) = pods.get_mut(key) else {
                return;
            };
            let Some(status) = entry.statuses.get_mut(index) else {
                return;
            };
            let running = state.running.is_some();
            status.started = Some(running && entry.launches[index].startup.is_none());
            // With a readiness probe, ready only once it passes.
            status.ready = running && entry.launches[index].readiness.is_none();
            status.state = Some(state);
            if let Some(last) = last {
                status.last_state = Some(last);
                status.restart_count += 1;
            }
            with_status(entry, &self.config)
        };
        self.notify(pod);
    }

    /// Set what a probe found: `started` (the startup probe passed) or
    /// `ready` (the readiness probe passes), while the container runs.
    pub(crate) fn set_probed(
        &self,
        key: &str,
        index: usize,
        started: Option<bool>,
        ready: Option<bool>,
    ) {
        let pod = {
            let mut pods = lock(&self.pods);
            let Some(entry) = pods.get_mut(key) else {
                return;
            };
            let Some(status) = entry.statuses.get_mut(index) else {
                return;
            };
            let running = status.state.as_ref().is_some_and(|s| s.running.is_some());
            let before = (status.started, status.ready);
            if let Some(started) = started {
                status.started = Some(running && started);
            }
            if let Some(ready) = ready {
                status.ready = running && ready;
            }
            if before == (status.started, status.ready) {
                return;
            }
            with_status(entry, &self.config)
        };
        self.notify(pod);
    }

    /// Record the process group container `index` runs in (`None` once it
    /// ended).
    pub(crate) fn set_group(&self, key: &str, index: usize, group: Option<i32>) {
        if let Some(slot) = lock(&self.pods)
            .get_mut(key)
            .and_then(|e| e.groups.get_mut(index))
        {
            *slot = group;
        }
    }

    /// Record where container `index`'s stdin is written (`None` once it
    /// ended).
    pub(crate) fn set_stdin(
        &self,
        key: &str,
        index: usize,
        stdin: Option<tokio::sync::mpsc::Sender<Vec<u8>>>,
    ) {
        if let Some(slot) = lock(&self.pods)
            .get_mut(key)
            .and_then(|e| e.stdins.get_mut(index))
        {
            *slot = stdin;
        }
    }

    /// For attach: the running container's log, its instance, and its
    /// stdin if it has one.
    #[allow(clippy::type_complexity)]
    pub(crate) fn attach_point(
        &self,
        key: &str,
        container: &str,
    ) -> Option<(PathBuf, i32, Option<tokio::sync::mpsc::Sender<Vec<u8>>>)> {
        let pods = lock(&self.pods);
        let entry = pods.get(key)?;
        let index = entry.statuses.iter().position(|s| s.name == container)?;
        let status = &entry.statuses[index];
        status.state.as_ref()?.running.as_ref()?;
        let path = crate::logs::log_path(&entry.dir, container, status.restart_count);
        Some((path, status.restart_count, entry.stdins[index].clone()))
    }

    /// The pod's grace period (`terminationGracePeriodSeconds`, 30 s).
    pub(crate) fn grace(&self, key: &str) -> Duration {
        lock(&self.pods)
            .get(key)
            .and_then(|e| e.pod.spec.as_ref()?.termination_grace_period_seconds)
            .map_or(DEFAULT_GRACE, |s| {
                Duration::from_secs(s.max(0).unsigned_abs())
            })
    }

    /// A container deleted while backing off: its last termination becomes
    /// its state again.
    pub(crate) fn restore_terminated(&self, key: &str, index: usize) {
        let pod = {
            let mut pods = lock(&self.pods);
            let Some(entry) = pods.get_mut(key) else {
                return;
            };
            if let Some(status) = entry.statuses.get_mut(index)
                && let Some(last) = status.last_state.clone()
            {
                status.state = Some(last);
            }
            with_status(entry, &self.config)
        };
        self.notify(pod);
    }

    fn notify(&self, pod: Pod) {
        let callback = lock(&self.callback).clone();
        if let Some(callback) = callback {
            callback.notify(pod);
        }
    }

    /// Whether instance `instance` of the container may still write output.
    fn instance_running(&self, key: &str, container: &str, instance: i32) -> bool {
        lock(&self.pods).get(key).is_some_and(|e| {
            e.statuses.iter().any(|s| {
                s.name == container
                    && s.restart_count == instance
                    && s.state.as_ref().is_some_and(|st| st.terminated.is_none())
            })
        })
    }
}

/// Wait until `ip` is this machine's (a socket can be bound to it: the
/// route of its node's pod CIDR is in), checking every 100 ms; `false` if
/// the pod is stopped first.
async fn routed_here(ip: &str, stopped: &mut watch::Receiver<Option<Duration>>) -> bool {
    let mut told = false;
    loop {
        if std::net::TcpListener::bind((ip, 0)).is_ok() {
            return true;
        }
        if !told {
            tracing::info!(%ip, "the pod's address is not routed to this machine yet; its containers wait");
            told = true;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = stopped.wait_for(Option::is_some) => return false,
        }
    }
}

/// The pod with its status as the kubelet would compute it.
fn with_status(entry: &Entry, config: &ProcessConfig) -> Pod {
    let runs: Vec<Run> = entry
        .statuses
        .iter()
        .zip(&entry.launches)
        .enumerate()
        .map(|(i, (s, l))| {
            let run = run_of(s);
            if i < entry.init_count {
                as_init(run, l.sidecar)
            } else {
                run
            }
        })
        .collect();
    let (init, app) = runs.split_at(entry.init_count);
    let policy = entry
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.clone())
        .unwrap_or_else(|| "Always".into());
    let sidecar_running = entry
        .statuses
        .iter()
        .zip(&entry.launches)
        .take(entry.init_count)
        .any(|(s, l)| l.sidecar && run_of(s) == Run::Running);
    let phase = while_sidecars_run(phase(&policy, init, app), sidecar_running);
    let mut pod = entry.pod.clone();
    pod.status = Some(PodStatus {
        phase: Some(phase.into()),
        conditions: Some(conditions(
            phase,
            init,
            // The app containers and the sidecars, as the kubelet counts
            // ContainersReady.
            &entry
                .statuses
                .iter()
                .zip(&entry.launches)
                .enumerate()
                .filter(|(i, (_, l))| *i >= entry.init_count || l.sidecar)
                .map(|(_, (s, _))| s.ready)
                .collect::<Vec<_>>(),
            &entry.start,
        )),
        host_ip: Some(config.pod_ip.clone()),
        pod_ip: Some(entry.ip.clone()),
        pod_ips: Some(vec![PodIP {
            ip: entry.ip.clone(),
        }]),
        start_time: Some(entry.start.clone()),
        init_container_statuses: (entry.init_count > 0)
            .then(|| entry.statuses[..entry.init_count].to_vec()),
        container_statuses: Some(entry.statuses[entry.init_count..].to_vec()),
        ..Default::default()
    });
    pod
}

fn waiting(name: &str, image: &str, reason: &str) -> ContainerStatus {
    ContainerStatus {
        name: name.into(),
        image: image.into(),
        image_id: String::new(),
        state: Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.into()),
                message: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[async_trait]
impl PodLifecycleHandler for ProcessProvider {
    /// A pod's address is known before it starts (`status.podIP` in its
    /// environment): the node's ([`ProcessConfig::pod_ip`]), or its own
    /// from the pod CIDR, given now (none while the node has no pod CIDR:
    /// the pod waits, Pending).
    fn addresses_before_create(&self, pod: &Pod) -> Option<PodAddresses> {
        Some(PodAddresses {
            pod_ip: self.inner.address(&key_of(pod)).ok()?,
            host_ip: self.inner.config.pod_ip.clone(),
        })
    }

    async fn create_pod(&self, pod: &Pod) -> Result<()> {
        let key = key_of(pod);
        let ip = self
            .inner
            .address(&key)
            .map_err(|e| PodError::unavailable(None, format!("pod {key}: {e}")))?;
        let plan = plan(&self.inner.config, self.inner.cgroups.as_ref(), pod, &ip)?;
        let resources = self.resources.as_deref();
        for (volume, dir) in &plan.volumes {
            crate::volumes::write(volume, dir, pod, resources).await?;
        }
        let policy = pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.clone())
            .unwrap_or_else(|| "Always".into());
        let mut statuses: Vec<ContainerStatus> = plan
            .init
            .iter()
            .map(|l| waiting(&l.name, &l.image, "PodInitializing"))
            .collect();
        statuses.extend(
            plan.app
                .iter()
                .map(|l| waiting(&l.name, &l.image, "ContainerCreating")),
        );
        let (stop, stopped) = watch::channel(None);
        let (end, ended) = watch::channel(false);
        let reported = {
            let mut pods = lock(&self.inner.pods);
            if pods.contains_key(&key) {
                return Err(PodError::already_exists(format!("pod {key} already runs")));
            }
            let entry = Entry {
                pod: pod.clone(),
                ip: ip.clone(),
                dir: plan.dir.clone(),
                start: Time(k8s_openapi::jiff::Timestamp::now()),
                statuses,
                init_count: plan.init.len(),
                launches: plan.init.iter().chain(&plan.app).cloned().collect(),
                groups: vec![None; plan.init.len() + plan.app.len()],
                stdins: vec![None; plan.init.len() + plan.app.len()],
                stop,
                ended,
            };
            let reported = with_status(&entry, &self.inner.config);
            pods.insert(key.clone(), entry);
            reported
        };
        self.inner.notify(reported);
        // An address of its own waits to be routed to this machine (the
        // kubelet's sandbox waits for the network); the containers stay
        // `ContainerCreating` meanwhile.
        let routed = match &self.inner.config.pod_network {
            PodNetwork::PodCidr(_) => Some((ip, stopped.clone())),
            PodNetwork::NodeAddress => None,
        };
        let supervisor = supervise(
            self.inner.clone(),
            key,
            policy,
            plan.init,
            plan.app,
            stopped,
        );
        tokio::spawn(async move {
            let go = match routed {
                Some((ip, mut stopped)) => routed_here(&ip, &mut stopped).await,
                None => true,
            };
            if go {
                supervisor.await;
            }
            let _ = end.send(true);
        });
        Ok(())
    }

    async fn update_pod(&self, pod: &Pod) -> Result<()> {
        // Labels and annotations change; a process cannot change image.
        let mut pods = lock(&self.inner.pods);
        let entry = pods
            .get_mut(&key_of(pod))
            .ok_or_else(|| PodError::not_found(format!("pod {} is not running", key_of(pod))))?;
        entry.pod.metadata.labels = pod.metadata.labels.clone();
        entry.pod.metadata.annotations = pod.metadata.annotations.clone();
        Ok(())
    }

    async fn delete_pod(&self, pod: &Pod) -> Result<()> {
        let key = key_of(pod);
        let grace = pod
            .metadata
            .deletion_grace_period_seconds
            .or_else(|| pod.spec.as_ref()?.termination_grace_period_seconds)
            .map_or(DEFAULT_GRACE, |s| {
                Duration::from_secs(s.max(0).unsigned_abs())
            });
        let (mut ended, uid) = {
            let pods = lock(&self.inner.pods);
            let Some(entry) = pods.get(&key) else {
                // Never started (its create failed): an address given
                // for it is free.
                self.inner.release(&key);
                return Ok(());
            };
            // An earlier pod of this name is gone already; the one running
            // now is another (force-deleted and re-created).
            if pod.metadata.uid.is_some() && pod.metadata.uid != entry.pod.metadata.uid {
                return Ok(());
            }
            entry.stop.send_replace(Some(grace));
            (entry.ended.clone(), entry.pod.metadata.uid.clone())
        };
        let inner = self.inner.clone();
        tokio::spawn(async move {
            // The supervisor returns once every container's process ended;
            // then report the pod terminated and forget it — that pod, not
            // one created under its name meanwhile.
            let _ = ended.wait_for(|ended| *ended).await;
            let removed = {
                let mut pods = lock(&inner.pods);
                let same = pods.get(&key).is_some_and(|e| e.pod.metadata.uid == uid);
                if same { pods.remove(&key) } else { None }
            };
            if removed.is_some() {
                inner.release(&key);
            }
            if let Some(mut entry) = removed {
                for status in &mut entry.statuses {
                    let ended = status
                        .state
                        .as_ref()
                        .is_some_and(|s| s.terminated.is_some());
                    if !ended {
                        status.state = Some(ContainerState {
                            terminated: Some(
                                k8s_openapi::api::core::v1::ContainerStateTerminated {
                                    exit_code: 137,
                                    reason: Some("ContainerStatusUnknown".into()),
                                    message: Some(
                                        "the pod was deleted before the container ran".into(),
                                    ),
                                    ..Default::default()
                                },
                            ),
                            ..Default::default()
                        });
                    }
                }
                let last = with_status(&entry, &inner.config);
                if let (Some(cgroups), Some(uid)) =
                    (&inner.cgroups, entry.pod.metadata.uid.as_deref())
                {
                    cgroups.remove_pod(uid);
                }
                if let Err(e) = tokio::fs::remove_dir_all(&entry.dir).await
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    tracing::warn!(pod = key, dir = %entry.dir.display(), error = %e, "the pod's directory could not be removed");
                }
                inner.notify(last);
            }
        });
        Ok(())
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>> {
        let pods = lock(&self.inner.pods);
        Ok(pods
            .get(&key(namespace, name))
            .map(|e| with_status(e, &self.inner.config)))
    }

    async fn get_pod_status(&self, namespace: &str, name: &str) -> Result<Option<PodStatus>> {
        Ok(self.get_pod(namespace, name).await?.and_then(|p| p.status))
    }

    async fn get_pods(&self) -> Result<Vec<Pod>> {
        let pods = lock(&self.inner.pods);
        Ok(pods
            .values()
            .map(|e| with_status(e, &self.inner.config))
            .collect())
    }

    fn notifier(&self) -> Option<&dyn PodNotifier> {
        Some(self)
    }

    fn container_logs(&self) -> Option<&dyn ContainerLogs> {
        Some(self)
    }

    fn exec(&self) -> Option<&dyn stratus_pod::ContainerExec> {
        Some(self)
    }

    fn port_forward(&self) -> Option<&dyn stratus_pod::PortForward> {
        Some(self)
    }

    fn attach(&self) -> Option<&dyn stratus_pod::ContainerAttach> {
        Some(self)
    }

    fn resource_changes(&self) -> Option<&dyn ResourceChanges> {
        Some(self)
    }

    fn stats_summary(&self) -> Option<&dyn stratus_pod::StatsSummary> {
        Some(self)
    }

    fn resource_metrics(&self) -> Option<&dyn stratus_pod::ResourceMetrics> {
        Some(self)
    }
}

#[async_trait]
impl stratus_pod::StatsSummary for ProcessProvider {
    async fn stats_summary(&self) -> Result<stratus_pod::Summary> {
        let samples: Vec<crate::stats::PodSample> = {
            let pods = lock(&self.inner.pods);
            pods.values()
                .map(|e| crate::stats::PodSample {
                    reference: stratus_pod::PodReference {
                        name: e.pod.metadata.name.clone().unwrap_or_default(),
                        namespace: e.pod.metadata.namespace.clone().unwrap_or_default(),
                        uid: e.pod.metadata.uid.clone().unwrap_or_default(),
                    },
                    started: Some(e.start.clone()),
                    containers: e
                        .statuses
                        .iter()
                        .zip(&e.groups)
                        .filter_map(|(s, g)| {
                            Some(crate::stats::Running {
                                name: s.name.clone(),
                                started: s.state.as_ref()?.running.as_ref()?.started_at.clone(),
                                group: (*g)?,
                            })
                        })
                        .collect(),
                })
                .collect()
        };
        let node = self.node_name.clone();
        let inner = self.inner.clone();
        // /proc is read synchronously: off the async workers.
        tokio::task::spawn_blocking(move || {
            let mut rates = lock(&inner.rates);
            crate::stats::summary(&node, samples, &mut rates)
        })
        .await
        .map_err(|e| PodError::unavailable(None, format!("the stats scan failed: {e}")))
    }
}

#[async_trait]
impl stratus_pod::ResourceMetrics for ProcessProvider {
    async fn resource_metrics(&self) -> Result<String> {
        let summary = stratus_pod::StatsSummary::stats_summary(self).await?;
        Ok(stratus_pod::render_resource_metrics(&summary))
    }
}

#[async_trait]
impl stratus_pod::ContainerAttach for ProcessProvider {
    /// The running process's output from now on (from its captured
    /// stdout and stderr) and, with `stdin: true` in the container's spec,
    /// the client's input to its stdin; until it ends or the client leaves.
    async fn attach(&self, container: &ContainerRef, mut io: stratus_pod::AttachIo) -> Result<()> {
        let key = key(&container.namespace, &container.pod);
        let (path, instance, stdin) = self
            .inner
            .attach_point(&key, &container.container)
            .ok_or_else(|| {
                PodError::not_found(format!(
                    "container {:?} of pod {key} is not running",
                    container.container
                ))
            })?;
        if io.tty {
            return Err(PodError::invalid_input(
                "the process provider's containers have no terminal to attach to; attach without -t",
            ));
        }
        let tail = crate::logs::Tail::from_now(path).await;
        let feeding = match (io.stdin.take(), stdin) {
            (Some(mut input), Some(stdin)) => Some(tokio::spawn(async move {
                use futures_util::StreamExt;
                while let Some(Ok(chunk)) = input.next().await {
                    if stdin.send(chunk).await.is_err() {
                        break;
                    }
                }
            })),
            (Some(_), None) => {
                return Err(PodError::invalid_input(format!(
                    "container {:?} does not read stdin (set stdin: true in its spec)",
                    container.container
                )));
            }
            _ => None,
        };
        let inner = self.inner.clone();
        let name = container.container.clone();
        let still_running: crate::logs::StillRunning =
            Arc::new(move || inner.instance_running(&key, &name, instance));
        crate::logs::attach_output(tail, still_running, io.stdout.take(), io.stderr.take()).await;
        if let Some(feeding) = feeding {
            feeding.abort();
        }
        Ok(())
    }
}

#[async_trait]
impl ResourceChanges for ProcessProvider {
    /// Rewrite the volumes that show the changed ConfigMap or Secret in
    /// the pods that use it (a deleted one keeps its last files, as the
    /// kubelet does).
    async fn resource_changed(&self, change: &ResourceChange) -> Result<()> {
        if change.deleted {
            return Ok(());
        }
        let Some(resources) = self.resources.clone() else {
            return Ok(());
        };
        // A cache of its own must not hand back the old contents.
        resources.forget(change.kind, &change.namespace, &change.name);
        for name in &change.pods {
            let found = {
                let pods = lock(&self.inner.pods);
                pods.get(&key(&change.namespace, name))
                    .map(|e| (e.pod.clone(), e.dir.clone()))
            };
            let Some((pod, dir)) = found else {
                continue;
            };
            for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
                if crate::volumes::uses(volume, change.kind, &change.name) {
                    let path = crate::plan::volume_dir(&dir, &volume.name);
                    crate::volumes::write(volume, &path, &pod, Some(resources.as_ref())).await?;
                }
            }
        }
        Ok(())
    }
}

impl ProcessProvider {
    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }
}

impl PodNotifier for ProcessProvider {
    fn notify_pods(&self, callback: PodStatusCallback) {
        *lock(&self.inner.callback) = Some(callback);
    }
}

#[async_trait]
impl ContainerLogs for ProcessProvider {
    async fn container_logs(
        &self,
        container: &ContainerRef,
        options: &ContainerLogOptions,
    ) -> Result<ByteStream> {
        options.validate()?;
        let key = key(&container.namespace, &container.pod);
        let (dir, instance) = {
            let pods = lock(&self.inner.pods);
            let entry = pods
                .get(&key)
                .ok_or_else(|| PodError::not_found(format!("pod {key} is not running")))?;
            let status = entry
                .statuses
                .iter()
                .find(|s| s.name == container.container)
                .ok_or_else(|| {
                    PodError::not_found(format!(
                        "container {:?} is not in pod {key}",
                        container.container
                    ))
                })?;
            let instance = if options.previous {
                if status.restart_count == 0 {
                    return Err(PodError::invalid_input(format!(
                        "previous terminated container {:?} in pod {key:?} not found",
                        container.container
                    )));
                }
                status.restart_count - 1
            } else {
                status.restart_count
            };
            (entry.dir.clone(), instance)
        };
        let path = crate::logs::log_path(&dir, &container.container, instance);
        let inner = self.inner.clone();
        let name = container.container.clone();
        let still_running: crate::logs::StillRunning =
            Arc::new(move || inner.instance_running(&key, &name, instance));
        crate::logs::read(path, options, still_running)
            .await
            .map_err(|e| PodError::unavailable(None, format!("cannot read the log: {e}")))
    }
}
