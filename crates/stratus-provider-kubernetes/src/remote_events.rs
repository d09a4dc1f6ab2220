//! What the remote cluster's pod events do to the home pods: a remote pod
//! listed, changed or gone (the remote watch's reports), a pod adopted after
//! a restart, a remote pod of an earlier home pod deleted, a home pod
//! failed when someone else deleted its remote pod.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::dependencies::references;
use crate::naming::HomeIdentity;
use crate::provider::{Inner, REMOTE_POD_DELETED, Tracked, deleted_status, lock};
use crate::translate::{ended_status, was_evicted};

impl crate::remote_watch::RemotePods for Inner {
    fn remote(&self) -> &kube::Client {
        &self.remote
    }

    fn node_name(&self) -> &str {
        &self.node_name
    }

    fn node_label(&self) -> &str {
        &self.node_label
    }

    fn relisted(self: &Arc<Self>, listed: Vec<Pod>) {
        Inner::relisted(self, listed)
    }

    fn observed(self: &Arc<Self>, pod: Pod) {
        Inner::observed(self, pod)
    }

    fn removed(self: &Arc<Self>, pod: &Pod) {
        Inner::removed(self, pod)
    }
}

impl Inner {
    /// A remote pod of this node was listed or changed.
    pub(crate) fn observed(self: &Arc<Self>, remote: Pod) {
        let Some(identity) = HomeIdentity::of_remote(&remote, &self.node_label) else {
            return;
        };
        let key = identity.key();
        let mut stale = None;
        let notify = {
            let mut pods = lock(&self.pods);
            match pods.get_mut(&key) {
                Some(t) if t.identity.uid == identity.uid => {
                    // Deleted in the remote cluster by someone else: the
                    // home pod fails now, before the remote kubelet reports
                    // its containers' end as an ordinary completion.
                    let lost = remote.metadata.deletion_timestamp.is_some()
                        && !t.deleting
                        && t.ended.is_none();
                    if lost {
                        lose(t, &remote);
                    }
                    let ended = t.ended.is_some();
                    t.remote = Some(remote);
                    (!ended || lost).then(|| self.home_pod(t))
                }
                Some(_) => {
                    // A remote pod of an earlier home pod of the same name.
                    stale = Some(remote);
                    None
                }
                None => {
                    // Made before a restart: adopt it.
                    let t = adopt(remote, identity);
                    tracing::info!(pod = %key, remote = %t.remote_name, "adopted an offloaded pod");
                    let pod = self.home_pod(&t);
                    pods.insert(key, t);
                    Some(pod)
                }
            }
        };
        self.notify(notify.into_iter().collect());
        if let Some(stale) = stale {
            let inner = self.clone();
            tokio::spawn(async move { inner.delete_stale(stale).await });
        }
    }

    /// A remote pod of this node is gone.
    pub(crate) fn removed(self: &Arc<Self>, remote: &Pod) {
        let Some(identity) = HomeIdentity::of_remote(remote, &self.node_label) else {
            return;
        };
        let key = identity.key();
        let mut released = None;
        let notify = {
            let mut pods = lock(&self.pods);
            let Some(t) = pods.get_mut(&key) else {
                return;
            };
            let same = t.identity.uid == identity.uid
                && t.remote
                    .as_ref()
                    .is_none_or(|r| r.metadata.uid == remote.metadata.uid);
            if !same {
                return;
            }
            if t.ended.is_some() {
                t.remote = None;
                return;
            }
            let last = remote
                .status
                .as_ref()
                .or(t.remote.as_ref().and_then(|r| r.status.as_ref()));
            if t.deleting {
                let status = deleted_status(last, &t.home);
                let Some(t) = pods.remove(&key) else { return };
                let mut pod = t.home.clone();
                pod.status = Some(status);
                released = Some((t.remote_namespace.clone(), t.dependencies.clone()));
                pod
            } else {
                lose(t, remote);
                t.remote = None;
                self.home_pod(t)
            }
        };
        self.notify(vec![notify]);
        if let Some((namespace, deps)) = released {
            let inner = self.clone();
            tokio::spawn(async move { inner.release(&namespace, deps).await });
        }
    }

    /// The remote listing after a (re)list: pods the node knew but the
    /// listing lacks were removed while the watch was down.
    pub(crate) fn relisted(self: &Arc<Self>, listed: Vec<Pod>) {
        let present: HashSet<(String, String)> = listed
            .iter()
            .filter_map(|p| Some((p.metadata.namespace.clone()?, p.metadata.name.clone()?)))
            .collect();
        let missing: Vec<Pod> = lock(&self.pods)
            .values()
            .filter_map(|t| t.remote.clone())
            .filter(|r| {
                let id = (
                    r.metadata.namespace.clone().unwrap_or_default(),
                    r.metadata.name.clone().unwrap_or_default(),
                );
                !present.contains(&id)
            })
            .collect();
        for pod in listed {
            self.observed(pod);
        }
        for pod in missing {
            self.removed(&pod);
        }
        self.synced.send_replace(true);
    }
}

/// End `t` as Failed: its remote pod was evicted or deleted by someone
/// other than the node.
fn lose(t: &mut Tracked, remote: &Pod) {
    let (reason, what) = if was_evicted(remote) {
        ("Evicted", "was evicted")
    } else {
        (REMOTE_POD_DELETED, "was deleted in the remote cluster")
    };
    let message = format!(
        "the remote pod {}/{} {what}",
        t.remote_namespace, t.remote_name
    );
    tracing::warn!(pod = %t.identity.key(), reason, "the remote pod ended without the node");
    let last = remote
        .status
        .as_ref()
        .or(t.remote.as_ref().and_then(|r| r.status.as_ref()));
    let mut ended = ended_status(
        last,
        &t.home,
        "Failed",
        137,
        "ContainerStatusUnknown",
        &message,
    );
    ended.reason = Some(reason.to_owned());
    t.ended = Some(ended);
}

/// The tracking entry of a remote pod made before a restart.
fn adopt(remote: Pod, identity: HomeIdentity) -> Tracked {
    let mut home = Pod::default();
    home.metadata.namespace = Some(identity.namespace.clone());
    home.metadata.name = Some(identity.name.clone());
    home.metadata.uid = Some(identity.uid.clone());
    home.spec = remote.spec.clone();
    Tracked {
        remote_namespace: remote.metadata.namespace.clone().unwrap_or_default(),
        remote_name: remote.metadata.name.clone().unwrap_or_default(),
        dependencies: references(&remote).into_keys().collect(),
        identity,
        home,
        remote: Some(remote),
        ended: None,
        deleting: false,
    }
}
