//! Bringing the provider in line with the API: create, update, and the
//! deletion of pods gone from the API.

use k8s_openapi::api::core::v1::{HostIP, Pod, PodIP};
use std::time::Instant;
use stratus_pod::env::{apply_resolved_env, resolve_pod_env};
use stratus_pod::{PodAddresses, PodError};
use stratus_runtime::events::EventType;
use stratus_runtime::workqueue::Action;

use super::{Shared, SyncError, pods_equal, reasons, rules, split};

impl Shared {
    /// The provider's pod of that name; one it does not know is `None`.
    async fn provider_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>, PodError> {
        match self
            .call("get_pod", self.provider.get_pod(namespace, name))
            .await
        {
            Ok(pod) => Ok(pod),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Delete the provider's pod; one already gone is not an error.
    async fn remove_from_provider(&self, pod: &Pod) -> Result<(), PodError> {
        match self.call("delete_pod", self.provider.delete_pod(pod)).await {
            Err(e) if e.is_not_found() => Ok(()),
            outcome => outcome,
        }
    }

    /// Bring the provider in line with the API pod of `key`.
    pub(super) async fn sync_pod(&self, key: &str) -> Result<Action, SyncError> {
        let (namespace, name) = split(key);
        let cached = self.cached(namespace, name);
        // A provider report kept until this pod reached the cache.
        if let Some(pod) = &cached
            && self.states.is_notified_for(key, &pod.metadata.uid)
        {
            self.status.add(key.to_owned());
        }
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
            if let Some(provider_pod) = self.provider_pod(namespace, name).await? {
                self.remove_from_provider(&provider_pod).await?;
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
        let existing = self.provider_pod(namespace, name).await?;
        // The provider still runs an earlier pod of this name (deleted and
        // re-created while its deletion was in flight): remove it first.
        let existing = match existing {
            Some(stale)
                if stale.metadata.uid.is_some() && stale.metadata.uid != pod.metadata.uid =>
            {
                self.remove_from_provider(&stale).await?;
                None
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
        // From here on the provider runs (or is about to run) this UID.
        self.states.set_handed(key, pod.metadata.uid.clone());
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
                let failures = self.states.count_failure(key, &pod.metadata.uid);
                let status =
                    rules::provider_failed(&pod, &e, failures, self.config.never_restart_retries);
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
    /// recorded), unless resolution is off. Status addresses the pod does
    /// not carry yet are the provider's
    /// [`addresses_before_create`](stratus_pod::PodLifecycleHandler::addresses_before_create)
    /// when it knows them. A failure is retried; the pod stays Pending
    /// (Go's rule: no ProviderFailed status for it).
    pub(super) async fn with_env(&self, pod: &Pod) -> Result<Pod, SyncError> {
        if !self.config.resolve_env {
            return Ok(pod.clone());
        }
        let addressed;
        let source = match self.provider.addresses_before_create(pod) {
            Some(addresses) => {
                addressed = with_addresses(pod, addresses);
                &addressed
            }
            _ => pod,
        };
        match resolve_pod_env(source, self.resources.as_ref(), &self.env_options).await {
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
}

/// `pod` with the `addresses` its status does not carry yet, for
/// resolving references to them.
fn with_addresses(pod: &Pod, addresses: PodAddresses) -> Pod {
    let mut pod = pod.clone();
    let status = pod.status.get_or_insert_with(Default::default);
    if status.pod_ip.as_ref().is_none_or(|ip| ip.is_empty()) {
        status.pod_ips = Some(vec![PodIP {
            ip: addresses.pod_ip.clone(),
        }]);
        status.pod_ip = Some(addresses.pod_ip);
    }
    if status.host_ip.as_ref().is_none_or(|ip| ip.is_empty()) {
        status.host_ips = Some(vec![HostIP {
            ip: addresses.host_ip.clone(),
        }]);
        status.host_ip = Some(addresses.host_ip);
    }
    pod
}

/// The node a pod is bound to.
fn pod_node(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
}
