//! The provider's state: each pod it runs, its containers' statuses and
//! processes, shared between the provider and the supervisors.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateWaiting, ContainerStatus, Pod, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use stratus_pod::{PodStatusCallback, Result};
use tokio::sync::watch;

use crate::plan::Launch;
use crate::status::{Run, as_init, conditions, phase, run_of, while_sidecars_run};
use crate::{PodNetwork, ProcessConfig};

/// The grace period when neither the deletion nor the spec gives one.
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// One pod.
pub(crate) struct Entry {
    pub(crate) pod: Pod,
    /// Its IP.
    pub(crate) ip: String,
    pub(crate) dir: PathBuf,
    pub(crate) start: Time,
    /// Init containers first, then the app containers.
    pub(crate) statuses: Vec<ContainerStatus>,
    pub(crate) init_count: usize,
    /// How each container starts (the same order as `statuses`), for exec.
    pub(crate) launches: Vec<Launch>,
    /// Each container's running process group, for stats.
    pub(crate) groups: Vec<Option<i32>>,
    /// Each running container's stdin (with `stdin: true`), for attach.
    pub(crate) stdins: Vec<Option<tokio::sync::mpsc::Sender<Vec<u8>>>>,
    pub(crate) stop: watch::Sender<Option<Duration>>,
    /// Becomes true when the supervisor returned: no process of the pod
    /// runs any more.
    pub(crate) ended: watch::Receiver<bool>,
}

/// The provider's state, shared with the supervisors.
pub(crate) struct Inner {
    pub(crate) config: ProcessConfig,
    /// Where CPU limits are enforced, if this process may.
    pub(crate) cgroups: Option<crate::cgroups::Cgroups>,
    /// CPU rates between stats summaries.
    pub(crate) rates: Mutex<crate::stats::Rates>,
    pub(crate) pods: Mutex<HashMap<String, Entry>>,
    pub(crate) callback: Mutex<Option<PodStatusCallback>>,
}

pub(crate) fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

pub(crate) fn key_of(pod: &Pod) -> String {
    key(
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default(),
    )
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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
    pub(crate) fn address(&self, key: &str) -> Result<String, crate::network::NoAddress> {
        match &self.config.pod_network {
            PodNetwork::NodeAddress => Ok(self.config.pod_ip.clone()),
            PodNetwork::PodCidr(pool) => pool.assign(key).map(|ip| ip.to_string()),
        }
    }

    /// The pod `key` is gone: its own address, if it had one, is free.
    pub(crate) fn release(&self, key: &str) {
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

    pub(crate) fn notify(&self, pod: Pod) {
        let callback = lock(&self.callback).clone();
        if let Some(callback) = callback {
            callback.notify(pod);
        }
    }

    /// Whether instance `instance` of the container may still write output.
    pub(crate) fn instance_running(&self, key: &str, container: &str, instance: i32) -> bool {
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
pub(crate) async fn routed_here(ip: &str, stopped: &mut watch::Receiver<Option<Duration>>) -> bool {
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
pub(crate) fn with_status(entry: &Entry, config: &ProcessConfig) -> Pod {
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

pub(crate) fn waiting(name: &str, image: &str, reason: &str) -> ContainerStatus {
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
