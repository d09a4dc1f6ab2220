//! The provider: the pods it runs, their statuses, and the kubelet-API
//! capabilities.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ContainerState, ContainerStatus, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use stratus_pod::{
    ByteStream, ContainerLogOptions, ContainerLogs, ContainerRef, PodAddresses, PodError,
    PodLifecycleHandler, PodNotifier, PodResources, PodStatusCallback, ResourceChange,
    ResourceChanges, Result,
};
use tokio::sync::watch;

use crate::plan::plan;
use crate::state::{
    DEFAULT_GRACE, Entry, Inner, key, key_of, lock, routed_here, waiting, with_status,
};
use crate::supervisor::supervise;
use crate::{PodNetwork, ProcessConfig};

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
