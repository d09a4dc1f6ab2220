//! The provider's statuses reaching the API: notifications coalesced per
//! pod and written as `pods/status` patches, the polling fallback, and
//! pods the provider lost.

use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube_runtime::reflector::ObjectRef;
use stratus_runtime::workqueue::Action;
use tokio::sync::watch;

use super::{Shared, SyncError, rules, split};

impl Shared {
    /// Write the provider's latest status of `key`.
    pub(super) async fn write_status(&self, key: &str) -> Result<Action, SyncError> {
        let Some((provided, notified_at)) = self.states.take_notified(key) else {
            return Ok(Action::Done);
        };
        let (namespace, name) = split(key);
        let cached = self.cached(namespace, name);
        let same_pod = |pod: &Pod| {
            provided.metadata.uid.is_none() || provided.metadata.uid == pod.metadata.uid
        };
        let Some(pod) = cached.filter(same_pod) else {
            // The cache has no pod of that UID. If the report is about the
            // pod handed to the provider last, the cache lags behind the
            // API (the pod was created from a direct API read, or force-
            // deleted and re-created): keep the report for the pod's
            // arrival in the cache, which queues it again. Otherwise it is
            // about an earlier pod of the same name, or one already gone.
            if let Some(uid) = provided.metadata.uid.as_deref()
                && self.states.is_current(key, uid)
            {
                self.states
                    .notify_unless_newer(key, provided.clone(), notified_at);
                // The pod may have arrived between the look and the keep.
                if self.cached(namespace, name).is_some_and(|p| same_pod(&p)) {
                    self.status.add(key.to_owned());
                }
            }
            return Ok(Action::Done);
        };
        if rules::terminal(&pod) {
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

    /// The pod of `namespace`/`name` in the informer's cache.
    pub(super) fn cached(&self, namespace: &str, name: &str) -> Option<Pod> {
        self.pods
            .get(&ObjectRef::new(name).within(namespace))
            .map(|p| (*p).clone())
    }

    /// Patch `pods/status` (strategic merge: conditions and container
    /// statuses merge by key), unless it equals the last written status.
    pub(super) async fn patch_status(
        &self,
        pod: &Pod,
        status: &PodStatus,
    ) -> Result<(), SyncError> {
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
pub(super) async fn poll(
    shared: Arc<Shared>,
    listed: watch::Receiver<u64>,
    mut stop: watch::Receiver<bool>,
) {
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
                let kept = shared_ref.states.notify(
                    &key,
                    Pod {
                        status: Some(status),
                        ..provided_shell(&pod)
                    },
                    Instant::now(),
                );
                if kept {
                    shared_ref.status.add(key);
                }
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
