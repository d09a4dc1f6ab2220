//! A home pod as the remote cluster gets it, and a remote status as the home
//! pod shows it.
//!
//! What changes on the way out (see `docs/providers/kubernetes.md`):
//! - name and namespace: [`remote_pod_name`] in the mapped namespace, the
//!   home identity recorded in labels and annotations;
//! - `nodeName`, `schedulerName`, `priority` and `priorityClassName`,
//!   ephemeral containers: dropped (the remote scheduler places the pod; the
//!   remote cluster may have no such class);
//! - the toleration of the virtual node's taint: dropped;
//! - the home ServiceAccount token volume (`kube-api-access-*`, a projected
//!   volume with a `serviceAccountToken` source) and its mounts: dropped; the
//!   ServiceAccount name is cleared and `automountServiceAccountToken` set
//!   from [`OffloadConfig::automount_remote_token`];
//! - `hostNetwork`: dropped (the home node's network is not the remote one);
//! - node selectors and node affinity: per [`PlacementPolicy`];
//! - PersistentVolumeClaims: renamed through
//!   [`OffloadConfig::persistent_volume_claims`], refused when not listed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateTerminated, ContainerStatus, NodeSelectorRequirement,
    NodeSelectorTerm, Pod, PodCondition, PodSpec, PodStatus, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use stratus_pod::{PodError, Result};

use crate::config::{OffloadConfig, PlacementPolicy};
use crate::naming::{HomeIdentity, fit_namespace, remote_pod_name};

/// The key of the taint every virtual node carries.
const PROVIDER_TAINT_KEY: &str = "virtual-kubelet.io/provider";
/// Annotations not worth carrying (large, and about the home object).
const DROPPED_ANNOTATIONS: &[&str] = &["kubectl.kubernetes.io/last-applied-configuration"];

/// The remote namespace of home namespace `home`.
pub(crate) fn remote_namespace(config: &OffloadConfig, home: &str) -> String {
    fit_namespace(config.namespaces.remote(home))
}

/// The remote pod for home pod `pod`.
pub(crate) fn to_remote(
    pod: &Pod,
    identity: &HomeIdentity,
    config: &OffloadConfig,
    node_label: &str,
) -> Result<Pod> {
    let mut meta = ObjectMeta {
        name: Some(remote_pod_name(
            &identity.namespace,
            &identity.name,
            &identity.uid,
        )),
        namespace: Some(remote_namespace(config, &identity.namespace)),
        labels: pod.metadata.labels.clone(),
        annotations: pod.metadata.annotations.clone().map(|mut a| {
            a.retain(|k, _| !DROPPED_ANNOTATIONS.contains(&k.as_str()));
            a
        }),
        ..Default::default()
    };
    identity.stamp(&mut meta, node_label);
    let home_spec = pod
        .spec
        .as_ref()
        .ok_or_else(|| PodError::invalid_input("the pod has no spec"))?;
    Ok(Pod {
        metadata: meta,
        spec: Some(remote_spec(home_spec, config)?),
        status: None,
    })
}

fn remote_spec(home: &PodSpec, config: &OffloadConfig) -> Result<PodSpec> {
    let mut spec = home.clone();
    spec.node_name = None;
    spec.scheduler_name = None;
    spec.priority = None;
    spec.priority_class_name = None;
    spec.preemption_policy = None;
    spec.ephemeral_containers = None;
    spec.host_network = None;
    spec.tolerations = spec.tolerations.map(|mut t| {
        t.retain(|t| t.key.as_deref() != Some(PROVIDER_TAINT_KEY));
        t
    });
    drop_token_volume(&mut spec);
    spec.service_account_name = None;
    spec.service_account = None;
    spec.automount_service_account_token = Some(config.automount_remote_token);
    for volume in spec.volumes.iter_mut().flatten() {
        map_claim(volume, config)?;
    }
    place(&mut spec, config);
    Ok(spec)
}

/// Remove the projected ServiceAccount token volumes and their mounts.
fn drop_token_volume(spec: &mut PodSpec) {
    let Some(volumes) = spec.volumes.as_mut() else {
        return;
    };
    let mut dropped = Vec::new();
    volumes.retain(|v| {
        let token = v.projected.as_ref().is_some_and(|p| {
            p.sources
                .iter()
                .flatten()
                .any(|s| s.service_account_token.is_some())
        });
        if token {
            dropped.push(v.name.clone());
        }
        !token
    });
    if dropped.is_empty() {
        return;
    }
    let unmount = |c: &mut Container| {
        if let Some(mounts) = c.volume_mounts.as_mut() {
            mounts.retain(|m| !dropped.contains(&m.name));
        }
    };
    spec.containers.iter_mut().for_each(unmount);
    spec.init_containers.iter_mut().flatten().for_each(unmount);
}

fn map_claim(volume: &mut Volume, config: &OffloadConfig) -> Result<()> {
    let Some(claim) = volume.persistent_volume_claim.as_mut() else {
        return Ok(());
    };
    match config.persistent_volume_claims.get(&claim.claim_name) {
        Some(remote) => {
            claim.claim_name = remote.clone();
            Ok(())
        }
        None => Err(PodError::invalid_input(format!(
            "volume {:?}: PersistentVolumeClaim {:?} has no remote claim \
             (add it to persistentVolumeClaims in the provider configuration)",
            volume.name, claim.claim_name
        ))),
    }
}

/// Apply the placement policy to node selectors and node affinity.
fn place(spec: &mut PodSpec, config: &OffloadConfig) {
    match config.placement {
        PlacementPolicy::Keep => {}
        PlacementPolicy::Drop => {
            spec.node_selector = None;
            if let Some(affinity) = spec.affinity.as_mut() {
                affinity.node_affinity = None;
            }
        }
        PlacementPolicy::Translate => {
            let table = &config.label_translation;
            spec.node_selector = spec.node_selector.take().map(|selector| {
                selector
                    .into_iter()
                    .filter_map(|(k, v)| Some((table.get(&k)?.clone(), v)))
                    .collect()
            });
            if let Some(node) = spec
                .affinity
                .as_mut()
                .and_then(|a| a.node_affinity.as_mut())
            {
                if let Some(required) = node
                    .required_during_scheduling_ignored_during_execution
                    .as_mut()
                {
                    required
                        .node_selector_terms
                        .iter_mut()
                        .for_each(|t| translate_term(t, table));
                }
                for preferred in node
                    .preferred_during_scheduling_ignored_during_execution
                    .iter_mut()
                    .flatten()
                {
                    translate_term(&mut preferred.preference, table);
                }
            }
        }
    }
}

/// Rename each expression's key; an expression whose key has no
/// translation is dropped. Field expressions (`metadata.name`) are about the
/// home node and are dropped.
fn translate_term(term: &mut NodeSelectorTerm, table: &BTreeMap<String, String>) {
    let rename = |exprs: &mut Option<Vec<NodeSelectorRequirement>>| {
        if let Some(list) = exprs.take() {
            let kept: Vec<_> = list
                .into_iter()
                .filter_map(|mut e| {
                    e.key = table.get(&e.key)?.clone();
                    Some(e)
                })
                .collect();
            *exprs = (!kept.is_empty()).then_some(kept);
        }
    };
    rename(&mut term.match_expressions);
    term.match_fields = None;
}

/// The home pod's status from the remote pod's: everything the remote
/// kubelet reported, with the host IP the virtual node's.
pub(crate) fn home_status(remote: &Pod, host_ip: Option<&str>) -> PodStatus {
    let mut status = remote.status.clone().unwrap_or_default();
    status.nominated_node_name = None;
    if let Some(ip) = host_ip {
        status.host_ip = Some(ip.to_owned());
        status.host_ips = Some(vec![k8s_openapi::api::core::v1::HostIP {
            ip: ip.to_owned(),
        }]);
    }
    if status.phase.is_none() {
        status.phase = Some("Pending".into());
    }
    status
}

/// A status in which every container that had not ended is terminated
/// with `code` and `reason`, the pod in `phase` with `reason` and
/// `message`, and not ready.
pub(crate) fn ended_status(
    last: Option<&PodStatus>,
    pod: &Pod,
    phase: &str,
    code: i32,
    reason: &str,
    message: &str,
) -> PodStatus {
    let now = Time(jiff::Timestamp::now());
    let mut status = last.cloned().unwrap_or_default();
    let end = |statuses: &mut Option<Vec<ContainerStatus>>, containers: &[Container]| {
        let list = statuses.get_or_insert_with(Vec::new);
        for c in containers {
            if !list.iter().any(|s| s.name == c.name) {
                list.push(ContainerStatus {
                    name: c.name.clone(),
                    image: c.image.clone().unwrap_or_default(),
                    ..Default::default()
                });
            }
        }
        for s in list.iter_mut() {
            s.ready = false;
            s.started = Some(false);
            let ended = s.state.as_ref().is_some_and(|st| st.terminated.is_some());
            if !ended {
                let started_at = s
                    .state
                    .as_ref()
                    .and_then(|st| st.running.as_ref())
                    .and_then(|r| r.started_at.clone());
                s.state = Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: code,
                        reason: Some(reason.to_owned()),
                        message: Some(message.to_owned()),
                        started_at,
                        finished_at: Some(now.clone()),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
            }
        }
    };
    let spec = pod.spec.clone().unwrap_or_default();
    end(&mut status.container_statuses, &spec.containers);
    if status.init_container_statuses.is_some() {
        end(
            &mut status.init_container_statuses,
            spec.init_containers.as_deref().unwrap_or_default(),
        );
    }
    status.phase = Some(phase.to_owned());
    status.reason = Some(reason.to_owned());
    status.message = Some(message.to_owned());
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    for type_ in ["Ready", "ContainersReady"] {
        conditions.retain(|c| c.type_ != type_);
        conditions.push(PodCondition {
            type_: type_.into(),
            status: "False".into(),
            reason: Some("PodCompleted".into()),
            last_transition_time: Some(now.clone()),
            ..Default::default()
        });
    }
    status
}

/// Whether the remote pod was evicted (by the Eviction API, by the
/// kubelet under pressure, or preempted).
pub(crate) fn was_evicted(remote: &Pod) -> bool {
    let Some(status) = remote.status.as_ref() else {
        return false;
    };
    status.reason.as_deref() == Some("Evicted")
        || status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "DisruptionTarget" && c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NamespaceMapping;

    fn home() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "shop", "uid": "u-1",
                "labels": {"app": "web"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "a"}},
            "spec": {
                "nodeName": "vk-offload",
                "serviceAccountName": "builder",
                "priorityClassName": "high", "priority": 1000,
                "hostNetwork": true,
                "nodeSelector": {"topology.kubernetes.io/zone": "home-a", "disk": "ssd"},
                "tolerations": [
                    {"key": "virtual-kubelet.io/provider", "operator": "Exists"},
                    {"key": "gpu", "operator": "Exists"}],
                "volumes": [
                    {"name": "kube-api-access-x", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
                "containers": [{"name": "app", "image": "nginx",
                    "volumeMounts": [{"name": "kube-api-access-x", "mountPath": "/var/run/secrets"},
                                     {"name": "data", "mountPath": "/data"}]}]
            }
        }))
        .unwrap()
    }

    fn identity() -> HomeIdentity {
        HomeIdentity::of_home(&home()).unwrap()
    }

    #[test]
    fn home_only_fields_are_dropped_and_the_identity_recorded() {
        let mut config = OffloadConfig {
            namespaces: NamespaceMapping::Prefix("home-".into()),
            ..Default::default()
        };
        config
            .persistent_volume_claims
            .insert("data".into(), "remote-data".into());
        let remote = to_remote(&home(), &identity(), &config, "vk-offload").unwrap();
        assert_eq!(remote.metadata.namespace.as_deref(), Some("home-shop"));
        let back = HomeIdentity::of_remote(&remote, "vk-offload").unwrap();
        assert_eq!(back, identity());
        assert!(HomeIdentity::of_remote(&remote, "another-node").is_none());
        let annotations = remote.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations.get("team").map(String::as_str), Some("a"));
        assert!(!annotations.contains_key("kubectl.kubernetes.io/last-applied-configuration"));
        let spec = remote.spec.unwrap();
        assert_eq!(spec.node_name, None);
        assert_eq!(spec.priority_class_name, None);
        assert_eq!(spec.priority, None);
        assert_eq!(spec.host_network, None);
        assert_eq!(spec.service_account_name, None);
        assert_eq!(spec.automount_service_account_token, Some(false));
        assert_eq!(spec.node_selector, None);
        let tolerations = spec.tolerations.unwrap();
        assert_eq!(tolerations.len(), 1);
        assert_eq!(tolerations[0].key.as_deref(), Some("gpu"));
        let volumes = spec.volumes.unwrap();
        assert_eq!(volumes.len(), 1);
        assert_eq!(
            volumes[0]
                .persistent_volume_claim
                .as_ref()
                .unwrap()
                .claim_name,
            "remote-data"
        );
        let mounts = spec.containers[0].volume_mounts.as_ref().unwrap();
        assert_eq!(mounts.len(), 1);
        assert_eq!(mounts[0].name, "data");
    }

    #[test]
    fn an_unmapped_claim_is_refused() {
        let err = to_remote(&home(), &identity(), &OffloadConfig::default(), "n").unwrap_err();
        assert_eq!(err.kind(), stratus_pod::PodErrorKind::InvalidInput);
        assert!(err.to_string().contains("\"data\""), "{err}");
    }

    #[test]
    fn selectors_are_translated_or_kept() {
        let mut config = OffloadConfig {
            placement: PlacementPolicy::Translate,
            ..Default::default()
        };
        config
            .persistent_volume_claims
            .insert("data".into(), "data".into());
        config.label_translation.insert(
            "topology.kubernetes.io/zone".into(),
            "remote.example.com/zone".into(),
        );
        let spec = to_remote(&home(), &identity(), &config, "n")
            .unwrap()
            .spec
            .unwrap();
        assert_eq!(
            spec.node_selector.unwrap(),
            BTreeMap::from([("remote.example.com/zone".to_string(), "home-a".to_string())])
        );
        config.placement = PlacementPolicy::Keep;
        let spec = to_remote(&home(), &identity(), &config, "n")
            .unwrap()
            .spec
            .unwrap();
        assert_eq!(spec.node_selector.unwrap().len(), 2);
    }

    #[test]
    fn an_ended_status_terminates_what_ran() {
        let pod = home();
        let running: PodStatus = serde_json::from_value(serde_json::json!({
            "phase": "Running",
            "containerStatuses": [{"name": "app", "image": "nginx", "imageID": "", "ready": true,
                "restartCount": 0, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]
        }))
        .unwrap();
        let ended = ended_status(
            Some(&running),
            &pod,
            "Failed",
            137,
            "Evicted",
            "the remote pod was evicted",
        );
        assert_eq!(ended.phase.as_deref(), Some("Failed"));
        let app = &ended.container_statuses.unwrap()[0];
        let terminated = app.state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!(terminated.exit_code, 137);
        assert!(terminated.started_at.is_some());
        assert!(!app.ready);
    }
}
