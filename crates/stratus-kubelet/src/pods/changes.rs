//! Tells the provider when a ConfigMap or Secret its pods reference
//! changes. Only the namespaces of the node's pods that reference something
//! are watched, one metadata-only watch per kind and namespace (no Secret
//! data is read or cached, no cluster-wide watch); each change is matched
//! against the node's pods from the pod controller's cache, the resource
//! cache forgets the object, and the provider's
//! [`ResourceChanges`](stratus_pod::ResourceChanges) hook gets the change
//! with the pods that use it. A watch gap is closed by the relist: objects
//! whose resourceVersion moved, and objects that disappeared, are told then.
//! A namespace's watch starts at the first rescan after its first
//! referencing pod; its first listing is told whole, so a change made
//! between the pod's start and the watch's start is not lost.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, PartialObjectMeta};
use kube_runtime::WatchStreamExt;
use kube_runtime::reflector::Store;
use kube_runtime::watcher::{self, Event};
use stratus_pod::{PodLifecycleHandler, PodResources, ResourceChange, ResourceKind};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::references::referenced;

/// A change seen by a namespace's watch: kind, namespace, name, deleted.
type Seen = (ResourceKind, String, String, bool);

/// Watch `kind` in `namespace` (metadata only) and report changes after
/// the first complete list.
fn watch_kind<K>(
    client: kube::Client,
    namespace: String,
    kind: ResourceKind,
    tx: mpsc::UnboundedSender<Seen>,
) -> JoinHandle<()>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    tokio::spawn(async move {
        // Metadata only: no Secret data reaches this process.
        let api: Api<PartialObjectMeta<K>> = Api::namespaced(client, &namespace);
        let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
        futures_util::pin_mut!(stream);
        // name → resourceVersion, as last seen.
        let mut known: HashMap<String, String> = HashMap::new();
        let mut listing: Option<HashSet<String>> = None;
        let mut listed_once = false;
        let tell = |name: &str, deleted: bool| {
            let _ = tx.send((kind, namespace.clone(), name.to_owned(), deleted));
        };
        while let Some(event) = stream.next().await {
            let event = match event {
                Ok(event) => event,
                Err(e) => {
                    // Retried with backoff; a gap is closed by the relist.
                    tracing::warn!(%namespace, ?kind, error = %e, "watch of referenced objects failed; retrying");
                    continue;
                }
            };
            match event {
                Event::Init => listing = Some(HashSet::new()),
                Event::InitApply(meta) | Event::Apply(meta) => {
                    let name = meta.metadata.name.clone().unwrap_or_default();
                    let rv = meta.metadata.resource_version.clone().unwrap_or_default();
                    if let Some(seen) = listing.as_mut() {
                        seen.insert(name.clone());
                    }
                    let changed = known.get(&name) != Some(&rv);
                    if changed && listed_once {
                        tell(&name, false);
                    }
                    known.insert(name, rv);
                }
                Event::Delete(meta) => {
                    let name = meta.metadata.name.clone().unwrap_or_default();
                    known.remove(&name);
                    tell(&name, true);
                }
                Event::InitDone => {
                    if !listed_once {
                        // The watch starts after the namespace's first
                        // referencing pod (at the next rescan): an object
                        // changed in between is in this listing only. Tell
                        // them all once; the hook is told of objects the
                        // node's pods use, and a provider that finds the
                        // contents unchanged does nothing.
                        known.keys().for_each(|name| tell(name, false));
                    }
                    if let Some(seen) = listing.take() {
                        let gone: Vec<String> = known
                            .keys()
                            .filter(|n| !seen.contains(*n))
                            .cloned()
                            .collect();
                        for name in gone {
                            known.remove(&name);
                            if listed_once {
                                tell(&name, true);
                            }
                        }
                    }
                    listed_once = true;
                }
            }
        }
    })
}

/// The namespaces of `pods` whose pods reference a ConfigMap or Secret.
fn namespaces(pods: &[Arc<Pod>]) -> BTreeSet<String> {
    let mut wanted = BTreeSet::new();
    for pod in pods {
        // A namespace already wanted needs no look at its other pods.
        if let Some(namespace) = &pod.metadata.namespace
            && !wanted.contains(namespace)
            && !referenced(pod).is_empty()
        {
            wanted.insert(namespace.clone());
        }
    }
    wanted
}

/// The names of the pods in `namespace` that reference `kind`/`name`.
fn users(pods: &[Arc<Pod>], namespace: &str, kind: ResourceKind, name: &str) -> Vec<String> {
    let mut names: Vec<String> = pods
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
        .filter(|p| referenced(p).contains(&(kind, name.to_owned())))
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    names.sort();
    names
}

/// Run until `stop`: keep one watch per kind in each namespace with
/// referencing pods (checked every `rescan`), and tell the provider.
pub(crate) async fn watch_references(
    client: kube::Client,
    provider: Arc<dyn PodLifecycleHandler>,
    resources: Arc<dyn PodResources>,
    pods: Store<Pod>,
    rescan: Duration,
    mut stop: watch::Receiver<bool>,
) {
    if provider.resource_changes().is_none() {
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<Seen>();
    let mut watches: HashMap<String, [JoinHandle<()>; 2]> = HashMap::new();
    let mut tick = tokio::time::interval(rescan);
    loop {
        tokio::select! {
            _ = stratus_runtime::stopped(&mut stop) => break,
            _ = tick.tick() => {
                let wanted = namespaces(&pods.state());
                watches.retain(|ns, tasks| {
                    let keep = wanted.contains(ns);
                    if !keep {
                        tasks.iter().for_each(JoinHandle::abort);
                    }
                    keep
                });
                for ns in wanted {
                    watches.entry(ns.clone()).or_insert_with(|| [
                        watch_kind::<ConfigMap>(client.clone(), ns.clone(), ResourceKind::ConfigMap, tx.clone()),
                        watch_kind::<Secret>(client.clone(), ns, ResourceKind::Secret, tx.clone()),
                    ]);
                }
            }
            Some((kind, namespace, name, deleted)) = rx.recv() => {
                resources.forget(kind, &namespace, &name);
                let users = users(&pods.state(), &namespace, kind, &name);
                if users.is_empty() {
                    continue;
                }
                let change = ResourceChange { kind, namespace, name, deleted, pods: users };
                if let Some(hook) = provider.resource_changes()
                    && let Err(e) = hook.resource_changed(&change).await
                {
                    tracing::warn!(kind = %change.kind, namespace = %change.namespace, name = %change.name, error = %e, "the provider failed to take a resource change");
                }
            }
        }
    }
    for tasks in watches.into_values() {
        tasks.iter().for_each(JoinHandle::abort);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(ns: &str, name: &str, cm: Option<&str>) -> Arc<Pod> {
        let env_from: Vec<_> = cm
            .iter()
            .map(|c| json!({"configMapRef": {"name": c}}))
            .collect();
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": ns},
                "spec": {"containers": [{"name": "a", "envFrom": env_from}]},
            }))
            .unwrap(),
        )
    }

    #[test]
    fn only_namespaces_with_references_are_watched() {
        let pods = [
            pod("a", "p1", Some("cm")),
            pod("b", "p2", None),
            pod("c", "p3", Some("x")),
        ];
        assert_eq!(
            namespaces(&pods).into_iter().collect::<Vec<_>>(),
            ["a", "c"]
        );
    }

    #[test]
    fn users_are_the_referencing_pods_of_the_namespace() {
        let pods = [
            pod("a", "p2", Some("cm")),
            pod("a", "p1", Some("cm")),
            pod("a", "p3", Some("other")),
            pod("b", "p4", Some("cm")),
        ];
        assert_eq!(
            users(&pods, "a", ResourceKind::ConfigMap, "cm"),
            ["p1", "p2"]
        );
        assert!(users(&pods, "a", ResourceKind::Secret, "cm").is_empty());
    }
}
