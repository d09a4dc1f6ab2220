//! The pure rules of the pod controller (no IO, unit-tested): when a pod
//! changed for the provider, whether its containers still run, the
//! `ProviderFailed` status, the "missing in the provider" status.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use stratus_pod::{PodError, PodErrorKind};

/// The pod's `namespace/name` key.
pub(crate) fn key_of(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Whether the fields a provider acts on after creation differ (Go's
/// `podsEqual`): containers, init and ephemeral containers, the active
/// deadline, tolerations, labels and annotations. Env variables compare
/// order-independently (their order carries no meaning once resolved).
///
/// ```
/// # use k8s_openapi::api::core::v1::Pod;
/// # fn pod(labels: serde_json::Value) -> Pod { serde_json::from_value(serde_json::json!({"metadata": {"name": "p", "labels": labels}, "spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}})).unwrap() }
/// use stratus_kubelet::pods::pods_equal;
/// assert!(pods_equal(&pod(serde_json::json!({"a": "1"})), &pod(serde_json::json!({"a": "1"}))));
/// assert!(!pods_equal(&pod(serde_json::json!({"a": "1"})), &pod(serde_json::json!({"a": "2"}))));
/// ```
pub fn pods_equal(a: &Pod, b: &Pod) -> bool {
    normalized(a) == normalized(b)
}

/// A hash of what [`pods_equal`] compares: the controller keeps this per
/// pod instead of a copy of the pod.
pub(crate) fn fingerprint(pod: &Pod) -> u64 {
    hash_json(&normalized(pod))
}

/// A hash of a status (to skip writing one that did not change).
pub(crate) fn status_fingerprint(status: &PodStatus) -> u64 {
    hash_json(&serde_json::to_value(status).unwrap_or_default())
}

fn hash_json(value: &serde_json::Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.to_string().hash(&mut hasher);
    hasher.finish()
}

/// The fields [`pods_equal`] compares, env sorted.
fn normalized(pod: &Pod) -> serde_json::Value {
    let spec = pod.spec.clone().unwrap_or_default();
    let sort_env = |mut containers: Vec<k8s_openapi::api::core::v1::Container>| {
        for c in &mut containers {
            if let Some(env) = c.env.as_mut() {
                env.sort_by(|x, y| x.name.cmp(&y.name));
            }
        }
        containers
    };
    serde_json::json!({
        "containers": sort_env(spec.containers),
        "initContainers": spec.init_containers.map(sort_env),
        "ephemeralContainers": spec.ephemeral_containers,
        "activeDeadlineSeconds": spec.active_deadline_seconds,
        "tolerations": spec.tolerations,
        "labels": pod.metadata.labels,
        "annotations": pod.metadata.annotations,
    })
}

/// The strategic-merge patch of `pods/status` the pod controller sends for
/// `status`: the whole status, with `reason` and `message` set to null when
/// absent, because absent means cleared (a `ProviderFailed` reason must not
/// outlive the failure) and a strategic merge only removes what is null.
///
/// ```
/// use k8s_openapi::api::core::v1::PodStatus;
/// use stratus_kubelet::pods::status_patch;
///
/// let status = PodStatus { phase: Some("Running".into()), ..Default::default() };
/// let patch = status_patch(&status).unwrap();
/// assert_eq!(patch["status"]["phase"], "Running");
/// assert!(patch["status"]["reason"].is_null());
/// assert!(patch["status"].as_object().unwrap().contains_key("message"));
/// ```
pub fn status_patch(status: &PodStatus) -> Result<serde_json::Value, serde_json::Error> {
    let mut value = serde_json::to_value(status)?;
    if let Some(fields) = value.as_object_mut() {
        for field in ["reason", "message"] {
            fields.entry(field).or_insert(serde_json::Value::Null);
        }
    }
    Ok(serde_json::json!({ "status": value }))
}

/// Whether some container may still run: a container status that is
/// running, or no terminal phase and statuses not all terminated or
/// waiting. A pod with no container statuses does not run (Go's
/// `running`).
pub fn running(status: Option<&PodStatus>) -> bool {
    let Some(status) = status else { return false };
    if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
        return false;
    }
    status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .any(|c| {
            c.state
                .as_ref()
                .is_some_and(|s| s.terminated.is_none() && s.waiting.is_none())
        })
}

/// Whether the phase is final.
pub(crate) fn terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The status after the provider refused a create or update (`reason:
/// ProviderFailed`), its `failures`-th failure in a row. A pod that never
/// restarts (`restartPolicy: Never`) is `Failed`, as Go does on any error,
/// once the error is permanent (`InvalidInput`, `NotImplemented`) or it
/// failed more than `retries` times
/// ([`PodControllerConfig::never_restart_retries`], 0 as Go); otherwise the
/// phase stays `Pending` and the controller retries.
///
/// [`PodControllerConfig::never_restart_retries`]: super::PodControllerConfig::never_restart_retries
pub(crate) fn provider_failed(
    pod: &Pod,
    error: &PodError,
    failures: u32,
    retries: u32,
) -> PodStatus {
    let permanent = matches!(
        error.kind(),
        PodErrorKind::InvalidInput | PodErrorKind::NotImplemented
    );
    let never = pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("Never");
    PodStatus {
        phase: Some(
            if never && (permanent || failures > retries) {
                "Failed"
            } else {
                "Pending"
            }
            .into(),
        ),
        reason: Some("ProviderFailed".into()),
        message: Some(error.to_string()),
        ..Default::default()
    }
}

/// The status of a pod the provider no longer knows (Go's polling
/// wrapper): `Failed`, reason `NotFound`, every container terminated with
/// exit code -137.
pub(crate) fn missing_in_provider(pod: &Pod) -> PodStatus {
    ended(
        pod,
        ("Failed", "NotFound"),
        Some("The pod status was not found and may have been deleted from the provider"),
        (
            -137,
            "NotFound",
            "Container was not found and was likely deleted",
        ),
    )
}

/// The status of a pod a provider without notifications has deleted (Go's
/// polling wrapper reports it for the provider): `Succeeded`, reason
/// `Terminated`, every container terminated (exit code 0, which may not be
/// the real one, as the message says).
pub(crate) fn deleted_by_provider(pod: &Pod) -> PodStatus {
    ended(
        pod,
        ("Succeeded", "Terminated"),
        None,
        (
            0,
            "Terminated",
            "Container was terminated. The exit code may not reflect the real exit code",
        ),
    )
}

/// `pod`'s status with the phase and reason given (and the message, if
/// given) and every container terminated with `(exit code, reason,
/// message)`.
fn ended(
    pod: &Pod,
    (phase, reason): (&str, &str),
    message: Option<&str>,
    (exit_code, container_reason, container_message): (i32, &str, &str),
) -> PodStatus {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let previous = pod.status.clone().unwrap_or_default();
    let terminated = |c: &ContainerStatus| ContainerStatus {
        state: Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code,
                reason: Some(container_reason.into()),
                message: Some(container_message.into()),
                finished_at: Some(now.clone()),
                started_at: c
                    .state
                    .as_ref()
                    .and_then(|s| s.running.as_ref())
                    .and_then(|r| r.started_at.clone()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ready: false,
        ..c.clone()
    };
    PodStatus {
        phase: Some(phase.into()),
        reason: Some(reason.into()),
        message: message.map(Into::into).or(previous.message.clone()),
        container_statuses: previous
            .container_statuses
            .as_ref()
            .map(|cs| cs.iter().map(terminated).collect()),
        ..previous
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn env_order_and_status_do_not_make_pods_differ() {
        let a = pod(
            serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
        ]}, "status": {"phase": "Running"}}),
        );
        let b = pod(
            serde_json::json!({"metadata": {"name": "p", "resourceVersion": "9"}, "spec": {"containers": [
                {"name": "c", "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]}
            ]}}),
        );
        assert!(pods_equal(&a, &b));
        let c = pod(
            serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": [
                {"name": "c", "image": "v2"}
            ]}}),
        );
        assert!(!pods_equal(&a, &c));
    }

    #[test]
    fn running_follows_container_states() {
        let status = |v: serde_json::Value| serde_json::from_value::<PodStatus>(v).unwrap();
        assert!(!running(None));
        assert!(
            !running(Some(&status(serde_json::json!({"phase": "Running"})))),
            "no statuses"
        );
        assert!(running(Some(&status(
            serde_json::json!({"phase": "Running", "containerStatuses": [
                {"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}}
            ]})
        ))));
        assert!(!running(Some(&status(
            serde_json::json!({"phase": "Running", "containerStatuses": [
                {"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}
            ]})
        ))));
    }

    #[test]
    fn never_restarting_pods_fail_as_go_unless_retries_are_allowed() {
        let never = pod(
            serde_json::json!({"metadata": {"name": "p"}, "spec": {"restartPolicy": "Never", "containers": []}}),
        );
        let always =
            pod(serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": []}}));
        let transient = PodError::unavailable(None, "503 from the backend");
        let invalid = PodError::invalid_input("no such image size");
        let phase = |pod: &Pod, error: &PodError, failures: u32, retries: u32| {
            provider_failed(pod, error, failures, retries).phase
        };
        // Go: any error fails a Never pod at once.
        assert_eq!(phase(&never, &transient, 1, 0).as_deref(), Some("Failed"));
        assert_eq!(phase(&never, &invalid, 1, 0).as_deref(), Some("Failed"));
        // Two retries allowed: the third transient failure fails it; a
        // permanent one at once.
        assert_eq!(phase(&never, &transient, 2, 2).as_deref(), Some("Pending"));
        assert_eq!(phase(&never, &transient, 3, 2).as_deref(), Some("Failed"));
        assert_eq!(phase(&never, &invalid, 1, 2).as_deref(), Some("Failed"));
        // Other pods stay Pending and are retried.
        assert_eq!(phase(&always, &invalid, 9, 0).as_deref(), Some("Pending"));
        assert_eq!(
            provider_failed(&always, &invalid, 1, 0).reason.as_deref(),
            Some("ProviderFailed")
        );
    }

    #[test]
    fn a_missing_pod_fails_with_exit_code_137() {
        let p = pod(
            serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": []},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}}
            ]}}),
        );
        let s = missing_in_provider(&p);
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        assert_eq!(s.reason.as_deref(), Some("NotFound"));
        let t = s.container_statuses.unwrap()[0]
            .state
            .clone()
            .unwrap()
            .terminated
            .unwrap();
        assert_eq!(t.exit_code, -137);
    }
}
