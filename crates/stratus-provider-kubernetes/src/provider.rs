//! The provider: which remote pod stands for which home pod, and the pod
//! lifecycle on top of that.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Namespace, Pod, PodStatus};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use stratus_pod::{
    PodError, PodLifecycleHandler, PodNotifier, PodResources, PodStatusCallback, ResourceChange,
    ResourceChanges, Result,
};
use tokio::sync::watch;

use crate::config::OffloadConfig;
use crate::dependencies::{self, Dependency, references, remote_error};
use crate::naming::{HomeIdentity, NODE_LABEL, node_label_value};
use crate::translate::{ended_status, home_status, remote_namespace, to_remote};

/// The reason of a home pod whose remote pod was deleted by someone else.
pub const REMOTE_POD_DELETED: &str = "RemotePodDeleted";
/// The reason of a container ended because the provider deleted its pod.
pub const OFFLOADED_POD_DELETED: &str = "OffloadedPodDeleted";

/// Offloads pods to another Kubernetes cluster (see the crate docs).
///
/// Cheap to clone; the clones share one state and one remote watch, which
/// stops when the last clone is dropped.
#[derive(Clone)]
pub struct KubernetesProvider {
    pub(crate) inner: Arc<Inner>,
    _tasks: Arc<Tasks>,
}

impl std::fmt::Debug for KubernetesProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesProvider")
            .field("node", &self.inner.node_name)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// Background tasks, aborted with the last provider clone.
struct Tasks(Vec<tokio::task::AbortHandle>);

impl Drop for Tasks {
    fn drop(&mut self) {
        self.0.iter().for_each(|t| t.abort());
    }
}

/// One offloaded pod.
pub(crate) struct Tracked {
    pub(crate) identity: HomeIdentity,
    pub(crate) remote_namespace: String,
    pub(crate) remote_name: String,
    /// The home pod as last given (no status).
    pub(crate) home: Pod,
    /// The remote pod as last seen.
    pub(crate) remote: Option<Pod>,
    /// The final status, once the pod ended without the node deleting it.
    pub(crate) ended: Option<PodStatus>,
    /// The node asked the remote cluster to delete the pod.
    pub(crate) deleting: bool,
    /// The ConfigMaps and Secrets copied for it.
    pub(crate) dependencies: BTreeSet<Dependency>,
}

/// The state shared by the provider's clones and tasks.
pub(crate) struct Inner {
    pub(crate) remote: kube::Client,
    pub(crate) config: OffloadConfig,
    pub(crate) node_name: String,
    pub(crate) node_label: String,
    host_ip: Option<String>,
    resources: Option<Arc<dyn PodResources>>,
    pub(crate) pods: Mutex<HashMap<String, Tracked>>,
    callback: Mutex<Option<PodStatusCallback>>,
    /// True once the remote pods were listed (state rebuilt).
    pub(crate) synced: watch::Sender<bool>,
    /// Remote namespaces known to exist.
    namespaces: tokio::sync::Mutex<HashSet<String>>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Builds a [`KubernetesProvider`].
pub struct KubernetesProviderBuilder {
    remote: kube::Client,
    node_name: String,
    config: OffloadConfig,
    host_ip: Option<String>,
    resources: Option<Arc<dyn PodResources>>,
}

impl std::fmt::Debug for KubernetesProviderBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesProviderBuilder")
            .field("node_name", &self.node_name)
            .finish_non_exhaustive()
    }
}

impl KubernetesProviderBuilder {
    /// How pods are offloaded (default: [`OffloadConfig::default`]).
    pub fn config(mut self, config: OffloadConfig) -> Self {
        self.config = config;
        self
    }

    /// The virtual node's InternalIP, shown as each home pod's `hostIP`
    /// (default: the remote node's).
    pub fn host_ip(mut self, ip: impl Into<String>) -> Self {
        self.host_ip = Some(ip.into());
        self
    }

    /// Where the home ConfigMaps and Secrets pods use are read (give it the
    /// node's). Without it, a pod whose spec still names one is refused.
    pub fn resources(mut self, resources: Arc<dyn PodResources>) -> Self {
        self.resources = Some(resources);
        self
    }

    /// Start watching the remote cluster's pods and return the provider.
    /// Must be called inside a Tokio runtime. Calls that need the remote
    /// state wait until the first listing arrived.
    pub fn start(self) -> KubernetesProvider {
        let inner = Arc::new(Inner {
            node_label: node_label_value(&self.node_name),
            remote: self.remote,
            config: self.config,
            node_name: self.node_name,
            host_ip: self.host_ip,
            resources: self.resources,
            pods: Mutex::new(HashMap::new()),
            callback: Mutex::new(None),
            synced: watch::channel(false).0,
            namespaces: tokio::sync::Mutex::new(HashSet::new()),
        });
        let watch = tokio::spawn(crate::remote_watch::run(inner.clone()));
        KubernetesProvider {
            inner,
            _tasks: Arc::new(Tasks(vec![watch.abort_handle()])),
        }
    }
}

impl KubernetesProvider {
    /// A provider for virtual node `node_name` offloading to the cluster
    /// `remote` talks to.
    ///
    /// ```no_run
    /// use stratus_provider_kubernetes::{KubernetesProvider, OffloadConfig};
    ///
    /// # async fn run(remote: kube::Client) {
    /// let provider = KubernetesProvider::builder(remote, "vk-burst")
    ///     .config(OffloadConfig::from_yaml("namespaces: {mode: prefix, value: burst-}").unwrap())
    ///     .start();
    /// # let _ = provider;
    /// # }
    /// ```
    pub fn builder(
        remote: kube::Client,
        node_name: impl Into<String>,
    ) -> KubernetesProviderBuilder {
        KubernetesProviderBuilder {
            remote,
            node_name: node_name.into(),
            config: OffloadConfig::default(),
            host_ip: None,
            resources: None,
        }
    }

    /// The remote pod standing for home pod `namespace/name`, as
    /// `(namespace, name)`.
    pub fn remote_pod(&self, namespace: &str, name: &str) -> Option<(String, String)> {
        lock(&self.inner.pods)
            .get(&format!("{namespace}/{name}"))
            .map(|t| (t.remote_namespace.clone(), t.remote_name.clone()))
    }

    /// Whether the remote pods were listed since the provider started.
    pub fn synced(&self) -> bool {
        *self.inner.synced.borrow()
    }
}

impl Inner {
    /// Wait for the first listing of the remote pods.
    async fn wait_synced(&self) {
        let mut synced = self.synced.subscribe();
        let _ = synced.wait_for(|s| *s).await;
    }

    fn status_of(&self, t: &Tracked) -> PodStatus {
        if let Some(ended) = &t.ended {
            return ended.clone();
        }
        match &t.remote {
            Some(remote) => home_status(remote, self.host_ip.as_deref()),
            None => PodStatus {
                phase: Some("Pending".into()),
                ..Default::default()
            },
        }
    }

    pub(crate) fn home_pod(&self, t: &Tracked) -> Pod {
        let mut pod = t.home.clone();
        pod.status = Some(self.status_of(t));
        pod
    }

    pub(crate) fn notify(&self, pods: Vec<Pod>) {
        if pods.is_empty() {
            return;
        }
        if let Some(callback) = lock(&self.callback).clone() {
            pods.into_iter().for_each(|p| callback.notify(p));
        }
    }

    /// Delete a remote pod left by an earlier home pod of the same name.
    pub(crate) async fn delete_stale(&self, stale: Pod) {
        let (Some(namespace), Some(name)) = (
            stale.metadata.namespace.clone(),
            stale.metadata.name.clone(),
        ) else {
            return;
        };
        let api: Api<Pod> = Api::namespaced(self.remote.clone(), &namespace);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: stale.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(&name, &params).await {
            Ok(_) => {
                tracing::info!(remote = %format!("{namespace}/{name}"), "deleted the remote pod of an earlier home pod")
            }
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => {
                tracing::warn!(remote = %format!("{namespace}/{name}"), error = %e, "cannot delete a stale remote pod")
            }
        }
        let deps = references(&stale).into_keys().collect();
        self.release(&namespace, deps).await;
    }

    /// Delete the copies in `namespace` among `deps` that no tracked pod
    /// uses any more.
    pub(crate) async fn release(&self, namespace: &str, deps: BTreeSet<Dependency>) {
        let unused: Vec<Dependency> = {
            let pods = lock(&self.pods);
            let used = dependencies::in_use(
                pods.values()
                    .filter(|t| t.remote_namespace == namespace)
                    .map(|t| &t.dependencies),
            );
            deps.into_iter().filter(|d| !used.contains(d)).collect()
        };
        for dep in unused {
            if let Err(e) =
                dependencies::delete(&self.remote, namespace, &dep, &self.node_label).await
            {
                tracing::warn!(namespace, name = %dep.name, kind = %dep.kind, error = %e, "cannot delete an unused remote copy");
            }
        }
    }

    /// Create the remote namespace unless it is known to exist.
    async fn ensure_namespace(&self, name: &str) -> Result<()> {
        let mut known = self.namespaces.lock().await;
        if known.contains(name) {
            return Ok(());
        }
        let api: Api<Namespace> = Api::all(self.remote.clone());
        if api.get_opt(name).await.map_err(remote_error)?.is_none() {
            let namespace: Namespace = serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "labels": {NODE_LABEL: self.node_label}},
            }))
            .map_err(PodError::other)?;
            match api.create(&PostParams::default(), &namespace).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(remote_error(e)),
            }
        }
        known.insert(name.to_owned());
        Ok(())
    }

    /// Copy every dependency of `remote_pod` from home namespace `home_ns`.
    async fn copy_dependencies(
        &self,
        home_ns: &str,
        remote_ns: &str,
        remote_pod: &Pod,
    ) -> Result<BTreeSet<Dependency>> {
        let refs = references(remote_pod);
        if refs.is_empty() {
            return Ok(BTreeSet::new());
        }
        let Some(resources) = self.resources.as_deref() else {
            return Err(PodError::invalid_input(
                "the pod uses ConfigMaps or Secrets and the provider was given no PodResources to copy them from",
            ));
        };
        for (dep, optional) in &refs {
            dependencies::copy(
                &self.remote,
                resources,
                home_ns,
                remote_ns,
                dep,
                *optional,
                &self.node_label,
            )
            .await?;
        }
        Ok(refs.into_keys().collect())
    }

    /// The remote pod at `namespace/name`, if it is the one made for
    /// `identity`.
    async fn own_remote(
        &self,
        namespace: &str,
        name: &str,
        identity: &HomeIdentity,
    ) -> Result<Option<Pod>> {
        let api: Api<Pod> = Api::namespaced(self.remote.clone(), namespace);
        let pod = api.get_opt(name).await.map_err(remote_error)?;
        Ok(pod.filter(|p| HomeIdentity::of_remote(p, &self.node_label).as_ref() == Some(identity)))
    }
}

/// The final status of a pod the node deleted: what the remote kubelet
/// last reported, with containers still running ended by the deletion.
pub(crate) fn deleted_status(last: Option<&PodStatus>, home: &Pod) -> PodStatus {
    let mut status = ended_status(
        last,
        home,
        "Succeeded",
        0,
        OFFLOADED_POD_DELETED,
        "the offloaded pod was deleted",
    );
    let failed = status
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref())
        .any(|t| t.exit_code != 0);
    if failed {
        status.phase = Some("Failed".into());
    }
    status
}

fn grace_seconds(pod: &Pod) -> Option<u32> {
    pod.metadata
        .deletion_grace_period_seconds
        .or_else(|| pod.spec.as_ref()?.termination_grace_period_seconds)
        .map(|s| s.clamp(0, i64::from(u32::MAX)) as u32)
}

#[async_trait]
impl PodLifecycleHandler for KubernetesProvider {
    async fn create_pod(&self, pod: &Pod) -> Result<()> {
        let inner = &self.inner;
        let identity = HomeIdentity::of_home(pod)
            .ok_or_else(|| PodError::invalid_input("the pod has no namespace, name or uid"))?;
        inner.wait_synced().await;
        let key = identity.key();
        let earlier = {
            let mut pods = lock(&inner.pods);
            match pods.get(&key) {
                Some(t) if t.identity.uid == identity.uid => None,
                Some(_) => pods.remove(&key),
                None => None,
            }
        };
        if let Some(earlier) = earlier {
            if let Some(remote) = earlier.remote {
                inner.delete_stale(remote).await;
            }
        } else if lock(&inner.pods).contains_key(&key) {
            // Known already (adopted, or a repeated create).
            return self.update_pod(pod).await;
        }
        let remote_pod = to_remote(pod, &identity, &inner.config, &inner.node_label)?;
        let remote_ns = remote_namespace(&inner.config, &identity.namespace);
        let remote_name = remote_pod.metadata.name.clone().unwrap_or_default();
        inner.ensure_namespace(&remote_ns).await?;
        let deps = inner
            .copy_dependencies(&identity.namespace, &remote_ns, &remote_pod)
            .await?;
        let mut home = pod.clone();
        home.status = None;
        lock(&inner.pods).insert(
            key.clone(),
            Tracked {
                identity: identity.clone(),
                remote_namespace: remote_ns.clone(),
                remote_name: remote_name.clone(),
                home,
                remote: None,
                ended: None,
                deleting: false,
                dependencies: deps.clone(),
            },
        );
        let api: Api<Pod> = Api::namespaced(inner.remote.clone(), &remote_ns);
        let created = match api.create(&PostParams::default(), &remote_pod).await {
            Ok(created) => created,
            Err(kube::Error::Api(e)) if e.code == 409 => {
                match inner
                    .own_remote(&remote_ns, &remote_name, &identity)
                    .await?
                {
                    Some(existing) => existing,
                    None => {
                        lock(&inner.pods).remove(&key);
                        return Err(PodError::invalid_input(format!(
                            "the remote pod {remote_ns}/{remote_name} exists and was not made for this pod"
                        )));
                    }
                }
            }
            Err(e) => {
                lock(&inner.pods).remove(&key);
                inner.release(&remote_ns, deps).await;
                return Err(remote_error(e)
                    .context(format!("creating the remote pod {remote_ns}/{remote_name}")));
            }
        };
        tracing::debug!(pod = %key, remote = %format!("{remote_ns}/{remote_name}"), "offloaded");
        let notify = {
            let mut pods = lock(&inner.pods);
            pods.get_mut(&key).map(|t| {
                if t.remote.is_none() {
                    t.remote = Some(created);
                }
                inner.home_pod(t)
            })
        };
        inner.notify(notify.into_iter().collect());
        Ok(())
    }

    async fn update_pod(&self, pod: &Pod) -> Result<()> {
        let inner = &self.inner;
        let identity = HomeIdentity::of_home(pod)
            .ok_or_else(|| PodError::invalid_input("the pod has no namespace, name or uid"))?;
        let desired = to_remote(pod, &identity, &inner.config, &inner.node_label)?;
        let (namespace, name, current) = {
            let mut pods = lock(&inner.pods);
            let Some(t) = pods
                .get_mut(&identity.key())
                .filter(|t| t.identity.uid == identity.uid)
            else {
                return Err(PodError::not_found(format!(
                    "pod {} is not offloaded",
                    identity.key()
                )));
            };
            let mut home = pod.clone();
            home.status = None;
            t.home = home;
            if t.ended.is_some() || t.deleting {
                return Ok(());
            }
            (
                t.remote_namespace.clone(),
                t.remote_name.clone(),
                t.remote.clone(),
            )
        };
        let Some(current) = current else {
            return Ok(());
        };
        let Some(patch) = update_patch(&current, &desired) else {
            return Ok(());
        };
        let api: Api<Pod> = Api::namespaced(inner.remote.clone(), &namespace);
        api.patch(&name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .map_err(remote_error)?;
        Ok(())
    }

    async fn delete_pod(&self, pod: &Pod) -> Result<()> {
        let inner = &self.inner;
        inner.wait_synced().await;
        let key = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or_default()
        );
        // A pod without a UID (a dangling pod the node only knows by name)
        // is the tracked one of that name.
        let (identity, namespace, name, ended) = {
            let mut pods = lock(&inner.pods);
            let Some(t) = pods.get_mut(&key).filter(|t| {
                pod.metadata
                    .uid
                    .as_ref()
                    .is_none_or(|uid| *uid == t.identity.uid)
            }) else {
                return Err(PodError::not_found(format!("pod {key} is not offloaded")));
            };
            t.deleting = true;
            (
                t.identity.clone(),
                t.remote_namespace.clone(),
                t.remote_name.clone(),
                t.ended.is_some(),
            )
        };
        // Forget the tracked pod — this one, not a successor created under
        // its name while the remote deletion was under way.
        let finish = |inner: &Arc<Inner>| {
            let removed = {
                let mut pods = lock(&inner.pods);
                let same = pods
                    .get(&key)
                    .is_some_and(|t| t.identity.uid == identity.uid);
                if same { pods.remove(&key) } else { None }
            };
            if let Some(t) = removed {
                let status = t.ended.clone().unwrap_or_else(|| {
                    deleted_status(t.remote.as_ref().and_then(|r| r.status.as_ref()), &t.home)
                });
                let mut pod = t.home.clone();
                pod.status = Some(status);
                inner.notify(vec![pod]);
                Some((t.remote_namespace, t.dependencies))
            } else {
                None
            }
        };
        if ended {
            if let Some((ns, deps)) = finish(inner) {
                inner.release(&ns, deps).await;
            }
            return Ok(());
        }
        let Some(remote) = inner.own_remote(&namespace, &name, &identity).await? else {
            if let Some((ns, deps)) = finish(inner) {
                inner.release(&ns, deps).await;
            }
            return Ok(());
        };
        let params = DeleteParams {
            grace_period_seconds: grace_seconds(pod),
            preconditions: Some(Preconditions {
                uid: remote.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        let api: Api<Pod> = Api::namespaced(inner.remote.clone(), &namespace);
        match api.delete(&name, &params).await {
            // The watch reports the end, then the home pod ends.
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {
                if let Some((ns, deps)) = finish(inner) {
                    inner.release(&ns, deps).await;
                }
                Ok(())
            }
            Err(e) => Err(remote_error(e)),
        }
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>> {
        let pods = lock(&self.inner.pods);
        Ok(pods
            .get(&format!("{namespace}/{name}"))
            .map(|t| self.inner.home_pod(t)))
    }

    async fn get_pod_status(&self, namespace: &str, name: &str) -> Result<Option<PodStatus>> {
        let pods = lock(&self.inner.pods);
        Ok(pods
            .get(&format!("{namespace}/{name}"))
            .map(|t| self.inner.status_of(t)))
    }

    async fn get_pods(&self) -> Result<Vec<Pod>> {
        self.inner.wait_synced().await;
        let pods = lock(&self.inner.pods);
        Ok(pods.values().map(|t| self.inner.home_pod(t)).collect())
    }

    fn notifier(&self) -> Option<&dyn PodNotifier> {
        Some(self)
    }

    fn container_logs(&self) -> Option<&dyn stratus_pod::ContainerLogs> {
        Some(self)
    }

    fn exec(&self) -> Option<&dyn stratus_pod::ContainerExec> {
        Some(self)
    }

    fn attach(&self) -> Option<&dyn stratus_pod::ContainerAttach> {
        Some(self)
    }

    fn port_forward(&self) -> Option<&dyn stratus_pod::PortForward> {
        Some(self)
    }

    fn stats_summary(&self) -> Option<&dyn stratus_pod::StatsSummary> {
        Some(self)
    }

    fn resource_metrics(&self) -> Option<&dyn stratus_pod::ResourceMetrics> {
        Some(self)
    }

    fn resource_changes(&self) -> Option<&dyn ResourceChanges> {
        Some(self)
    }
}

impl PodNotifier for KubernetesProvider {
    fn notify_pods(&self, callback: PodStatusCallback) {
        *lock(&self.inner.callback) = Some(callback);
    }
}

#[async_trait]
impl ResourceChanges for KubernetesProvider {
    async fn resource_changed(&self, change: &ResourceChange) -> Result<()> {
        // A deleted home object leaves the remote copy while pods use it,
        // as a kubelet keeps the last contents of a mounted volume.
        if change.deleted {
            return Ok(());
        }
        let Some(resources) = self.inner.resources.as_deref() else {
            return Ok(());
        };
        let dep = Dependency {
            kind: change.kind,
            name: change.name.clone(),
        };
        let namespaces: BTreeSet<String> = lock(&self.inner.pods)
            .values()
            .filter(|t| t.identity.namespace == change.namespace && t.dependencies.contains(&dep))
            .map(|t| t.remote_namespace.clone())
            .collect();
        for remote_ns in namespaces {
            dependencies::copy(
                &self.inner.remote,
                resources,
                &change.namespace,
                &remote_ns,
                &dep,
                true,
                &self.inner.node_label,
            )
            .await?;
        }
        Ok(())
    }
}

/// The strategic merge patch that brings the remote pod's mutable fields
/// (labels, annotations, images, active deadline) to `desired`, or `None`
/// when they agree.
fn update_patch(current: &Pod, desired: &Pod) -> Option<serde_json::Value> {
    use serde_json::{Map, Value, json};
    let diff = |now: &Option<std::collections::BTreeMap<String, String>>,
                want: &Option<std::collections::BTreeMap<String, String>>| {
        let (now, want) = (
            now.clone().unwrap_or_default(),
            want.clone().unwrap_or_default(),
        );
        let mut out = Map::new();
        for k in now.keys().filter(|k| !want.contains_key(*k)) {
            out.insert(k.clone(), Value::Null);
        }
        for (k, v) in want.iter().filter(|(k, v)| now.get(*k) != Some(*v)) {
            out.insert(k.clone(), Value::String(v.clone()));
        }
        out
    };
    let mut metadata = Map::new();
    let labels = diff(&current.metadata.labels, &desired.metadata.labels);
    if !labels.is_empty() {
        metadata.insert("labels".into(), Value::Object(labels));
    }
    let annotations = diff(&current.metadata.annotations, &desired.metadata.annotations);
    if !annotations.is_empty() {
        metadata.insert("annotations".into(), Value::Object(annotations));
    }
    let mut spec = Map::new();
    if let (Some(now), Some(want)) = (current.spec.as_ref(), desired.spec.as_ref()) {
        let images: Vec<Value> = now
            .containers
            .iter()
            .zip(&want.containers)
            .filter(|(c, d)| c.name == d.name && c.image != d.image)
            .map(|(_, d)| json!({"name": d.name, "image": d.image}))
            .collect();
        if !images.is_empty() {
            spec.insert("containers".into(), Value::Array(images));
        }
        if now.active_deadline_seconds != want.active_deadline_seconds
            && let Some(deadline) = want.active_deadline_seconds
        {
            spec.insert("activeDeadlineSeconds".into(), json!(deadline));
        }
    }
    if metadata.is_empty() && spec.is_empty() {
        return None;
    }
    Some(json!({"metadata": metadata, "spec": spec}))
}
