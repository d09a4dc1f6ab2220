//! A pod being deleted: deleted in the provider, then force-deleted from
//! the API once nothing runs or its grace period is over.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Preconditions};
use stratus_runtime::events::EventType;
use stratus_runtime::workqueue::Action;

use super::{Shared, SyncError, reasons, rules, running, split};

impl Shared {
    /// A pod being deleted: delete it in the provider, then force-delete
    /// the API object once nothing runs or the grace period is over.
    pub(super) async fn delete(&self, key: &str, pod: &Pod) -> Result<Action, SyncError> {
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
                    .await;
                    // Go's polling wrapper: a provider that cannot notify
                    // is taken at its word, its pod reported ended, so the
                    // API object goes now rather than at the grace's end.
                    if self.provider.notifier().is_none() && !rules::terminal(pod) {
                        let ended = Pod {
                            metadata: pod.metadata.clone(),
                            status: Some(rules::deleted_by_provider(pod)),
                            ..Default::default()
                        };
                        if self.states.notify(key, ended, std::time::Instant::now()) {
                            self.status.add(key.to_owned());
                        }
                    }
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
}
