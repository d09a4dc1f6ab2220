//! The harness's Deployment and ReplicaSet controllers: what
//! kube-controller-manager's `deployment` and `replicaset` controllers
//! write, for the workloads of a [`crate::TestCluster`] (the harness runs no
//! kube-controller-manager), so that `kubectl create deployment`, `kubectl
//! expose deployment`, `kubectl scale` and `kubectl rollout restart` /
//! `rollout status` work on it.
//!
//! - **Deployments**: each revision of the pod template has its ReplicaSet,
//!   `<deployment>-<pod-template-hash>` (the hash of the template, encoded
//!   as Go's `SafeEncodeString`), labelled and selecting
//!   `pod-template-hash`, owned by the Deployment, annotated with its
//!   `deployment.kubernetes.io/revision`. `RollingUpdate` (the default) scales
//!   the new ReplicaSet up within `maxSurge` and the old ones down within
//!   `maxUnavailable` (25 % each by default; a surge rounds up, an
//!   unavailability down, and both zero means one unavailable), the
//!   unavailable old pods first, as Go's `reconcileOldReplicaSets`;
//!   `Recreate` scales the old ones to zero and starts the new one once their
//!   pods are gone. The status has `observedGeneration`, `replicas`,
//!   `updatedReplicas`, `readyReplicas`, `availableReplicas`,
//!   `unavailableReplicas` and the `Available` and `Progressing` conditions
//!   (`NewReplicaSetAvailable` once the rollout is complete).
//! - **ReplicaSets**: pods `<replicaset>-<5 characters>` from the template,
//!   owned by the ReplicaSet, created or deleted to match `replicas` (the
//!   unscheduled, not running, not Ready and newest first, as Go's
//!   `ActivePods` ranking); terminating pods do not count. The status has
//!   `replicas`, `readyReplicas`, `availableReplicas` and
//!   `observedGeneration`.
//!
//! Differences from kube-controller-manager: it polls every 100 ms instead
//! of watching; `minReadySeconds`, `progressDeadlineSeconds`, `paused`,
//! `revisionHistoryLimit` (old ReplicaSets are kept at zero replicas) and
//! rollbacks are not implemented; a pod is available as soon as it is Ready.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use k8s_openapi::api::apps::v1::ReplicaSet;
//! use kube::api::{Api, ListParams};
//! use stratus_testing::TestCluster;
//!
//! let mut cluster = TestCluster::start().await.unwrap();
//! cluster.start_deployments();
//! let sets: Api<ReplicaSet> = Api::namespaced(cluster.client(), "default");
//! assert!(sets.list(&ListParams::default()).await.unwrap().items.is_empty());
//! # });
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// How often the controllers look at the workloads.
const PERIOD: Duration = Duration::from_millis(100);

/// The label and selector key of a template's revision.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// The annotation with a ReplicaSet's (and its Deployment's) revision.
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";

/// The harness's Deployment and ReplicaSet controllers over `client`'s API
/// server, for ever (spawn it and abort it;
/// [`TestCluster::start_deployments`](crate::TestCluster::start_deployments)
/// does). Errors of one pass are retried at the next.
pub async fn run_deployments(client: kube::Client) {
    loop {
        tokio::time::sleep(PERIOD).await;
        if let Err(e) = pass(&client).await {
            tracing::debug!(error = %e, "deployment pass failed; retried");
        }
    }
}

/// One look at every Deployment, ReplicaSet and pod. The workloads are
/// read as JSON, so that the code is the same whichever Kubernetes version
/// `k8s-openapi` is built for (their Rust types differ between versions).
async fn pass(client: &kube::Client) -> Result<(), kube::Error> {
    let all = ListParams::default();
    let deployments: Vec<Value> = Api::<Deployment>::all(client.clone())
        .list(&all)
        .await?
        .items
        .iter()
        .filter_map(|d| serde_json::to_value(d).ok())
        .collect();
    let mut sets: Vec<Value> = Api::<ReplicaSet>::all(client.clone())
        .list(&all)
        .await?
        .items
        .iter()
        .filter_map(|s| serde_json::to_value(s).ok())
        .collect();
    if deployments.is_empty() && sets.is_empty() {
        // Nothing to do: the pods are not read.
        return Ok(());
    }
    let pods = Api::<Pod>::all(client.clone()).list(&all).await?.items;
    for deployment in &deployments {
        if deployment["metadata"]["deletionTimestamp"].is_null() {
            sync_deployment(client, deployment, &mut sets).await?;
        }
    }
    for set in &sets {
        if set["metadata"]["deletionTimestamp"].is_null() {
            sync_replica_set(client, set, &pods).await?;
        }
    }
    Ok(())
}

/// Whether `object` (JSON) lists `uid` as its controller.
fn controlled_by(object: &Value, uid: &str) -> bool {
    object["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|owners| {
            owners
                .iter()
                .any(|o| o["uid"] == uid && o["controller"] == true)
        })
}

/// Whether `pod` lists `uid` as its controller.
fn pod_controlled_by(pod: &Pod, uid: &str) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.uid == uid && o.controller == Some(true))
}

/// Go's `rand.SafeEncodeString` of the decimal FNV-1a hash of the
/// template's JSON: the `pod-template-hash` of a revision.
pub fn template_hash(template: &Value) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut hash: u32 = 0x811c_9dc5;
    for byte in template.to_string().bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash.to_string()
        .bytes()
        .map(|b| char::from(ALPHANUMS[usize::from(b) % ALPHANUMS.len()]))
        .collect()
}

/// `value` (a number, or a percentage) of `replicas`, a percentage rounded
/// up or down; `default_percent` when absent.
fn scaled(value: &Value, replicas: i32, default_percent: i32, round_up: bool) -> i32 {
    match value {
        Value::Number(n) => n.as_i64().and_then(|n| i32::try_from(n).ok()).unwrap_or(0),
        Value::String(s) => {
            let percent = s
                .trim_end_matches('%')
                .parse::<i32>()
                .unwrap_or(default_percent);
            percent_of(percent, replicas, round_up)
        }
        _ => percent_of(default_percent, replicas, round_up),
    }
}

fn percent_of(percent: i32, replicas: i32, round_up: bool) -> i32 {
    let product = i64::from(percent) * i64::from(replicas);
    let result = if round_up {
        (product + 99) / 100
    } else {
        product / 100
    };
    i32::try_from(result).unwrap_or(i32::MAX)
}

/// An integer field of a JSON object, `default` when absent.
fn int(value: &Value, default: i32) -> i32 {
    value
        .as_i64()
        .and_then(|n| i32::try_from(n).ok())
        .unwrap_or(default)
}

fn spec_replicas(set: &Value) -> i32 {
    int(&set["spec"]["replicas"], 1)
}

fn available(set: &Value) -> i32 {
    int(&set["status"]["availableReplicas"], 0)
}

fn revision(set: &Value) -> i64 {
    set["metadata"]["annotations"][REVISION_ANNOTATION]
        .as_str()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn name_of(object: &Value) -> Option<&str> {
    object["metadata"]["name"].as_str()
}

/// Bring a Deployment's ReplicaSets and status one step closer.
async fn sync_deployment(
    client: &kube::Client,
    deployment: &Value,
    sets: &mut Vec<Value>,
) -> Result<(), kube::Error> {
    let (Some(name), Some(ns), Some(uid)) = (
        name_of(deployment),
        deployment["metadata"]["namespace"].as_str(),
        deployment["metadata"]["uid"].as_str(),
    ) else {
        return Ok(());
    };
    let spec = &deployment["spec"];
    let desired = int(&spec["replicas"], 1);
    let template = spec["template"].clone();
    let hash = template_hash(&template);
    let new_name = format!("{name}-{hash}");
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), ns);
    let mut owned: Vec<Value> = sets
        .iter()
        .filter(|s| s["metadata"]["namespace"] == ns && controlled_by(s, uid))
        .cloned()
        .collect();
    let recreate = spec["strategy"]["type"] == "Recreate";
    let rolling = &spec["strategy"]["rollingUpdate"];
    let mut max_surge = scaled(&rolling["maxSurge"], desired, 25, true);
    let mut max_unavailable = scaled(&rolling["maxUnavailable"], desired, 25, false);
    if recreate {
        (max_surge, max_unavailable) = (0, desired);
    } else if max_surge == 0 && max_unavailable == 0 {
        max_unavailable = 1;
    }

    if !owned.iter().any(|s| name_of(s) == Some(new_name.as_str())) {
        let next_revision = owned.iter().map(revision).max().unwrap_or(0) + 1;
        let mut labels = template["metadata"]["labels"].clone();
        if !labels.is_object() {
            labels = json!({});
        }
        labels[POD_TEMPLATE_HASH] = json!(hash);
        let mut selector = spec["selector"].clone();
        selector["matchLabels"][POD_TEMPLATE_HASH] = json!(hash);
        let mut pod_template = template.clone();
        pod_template["metadata"]["labels"] = labels.clone();
        let total: i32 = owned.iter().map(spec_replicas).sum();
        let first = if recreate && total > 0 {
            0
        } else {
            desired.min((desired + max_surge - total).max(0))
        };
        let set: ReplicaSet = serde_json::from_value(json!({
            "metadata": {
                "name": new_name,
                "namespace": ns,
                "labels": labels,
                "annotations": {REVISION_ANNOTATION: next_revision.to_string()},
                "ownerReferences": [controller_reference("Deployment", name, uid)],
            },
            "spec": {"replicas": first, "selector": selector, "template": pod_template},
        }))
        .map_err(kube::Error::SerdeError)?;
        let created = match api.create(&PostParams::default(), &set).await {
            Ok(created) => serde_json::to_value(&created).map_err(kube::Error::SerdeError)?,
            Err(kube::Error::Api(e)) if e.code == 409 => return Ok(()),
            Err(e) => return Err(e),
        };
        sets.push(created.clone());
        owned.push(created);
    }

    // Scale: the new ReplicaSet up within the surge, the old ones down
    // within the unavailability.
    let Some(new) = owned
        .iter()
        .find(|s| name_of(s) == Some(new_name.as_str()))
        .cloned()
    else {
        return Ok(());
    };
    let mut old: Vec<&Value> = owned
        .iter()
        .filter(|s| name_of(s) != Some(new_name.as_str()))
        .collect();
    old.sort_by_key(|s| revision(s));
    let mut replicas: BTreeMap<String, i32> = owned
        .iter()
        .filter_map(|s| Some((name_of(s)?.to_owned(), spec_replicas(s))))
        .collect();
    let old_pods: i32 = old.iter().map(|s| spec_replicas(s)).sum();
    if recreate {
        for set in &old {
            replicas.insert(name_of(set).unwrap_or_default().to_owned(), 0);
        }
        let old_running: i32 = old.iter().map(|s| int(&s["status"]["replicas"], 0)).sum();
        if old_running == 0 {
            replicas.insert(new_name.clone(), desired);
        }
    } else {
        let total: i32 = replicas.values().sum();
        let new_now = spec_replicas(&new);
        let grown = if new_now < desired {
            (new_now + (desired + max_surge - total).max(0)).min(desired)
        } else {
            desired
        };
        replicas.insert(new_name.clone(), grown);
        // Go's maxScaledDown: what may go without dropping below the
        // minimum available, counting the new ReplicaSet's unavailable
        // pods against it.
        let min_available = desired - max_unavailable;
        let new_unavailable = (spec_replicas(&new) - available(&new)).max(0);
        let all: i32 = spec_replicas(&new) + old_pods;
        let mut may_remove = (all - min_available - new_unavailable).max(0);
        // The unavailable old pods go first, then the available ones.
        for unhealthy_first in [true, false] {
            for set in &old {
                let key = name_of(set).unwrap_or_default().to_owned();
                let current = replicas.get(&key).copied().unwrap_or(0);
                let removable = if unhealthy_first {
                    (current - available(set)).max(0)
                } else {
                    current
                };
                let n = removable.min(may_remove);
                if n > 0 {
                    replicas.insert(key, current - n);
                    may_remove -= n;
                }
            }
        }
    }
    for set in &owned {
        let Some(set_name) = name_of(set) else {
            continue;
        };
        let want = replicas.get(set_name).copied().unwrap_or(0);
        if want != spec_replicas(set) {
            api.patch(
                set_name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": want}})),
            )
            .await?;
        }
    }

    // The status, from the ReplicaSets' own.
    let count = |field: &str| -> i32 { owned.iter().map(|s| int(&s["status"][field], 0)).sum() };
    let total = count("replicas");
    let ready = count("readyReplicas");
    let available_all = count("availableReplicas");
    let updated = int(&new["status"]["replicas"], 0);
    let complete = updated == desired
        && total == desired
        && available(&new) == desired
        && spec_replicas(&new) == desired;
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let previous = &deployment["status"];
    let no_conditions = Vec::new();
    let conditions = previous["conditions"].as_array().unwrap_or(&no_conditions);
    let kept_time = |type_: &str, status: &str| {
        conditions
            .iter()
            .find(|c| c["type"] == type_ && c["status"] == status)
            .and_then(|c| c["lastTransitionTime"].as_str())
            .map_or_else(|| now.clone(), str::to_owned)
    };
    let is_available = available_all >= desired - max_unavailable;
    let (available_status, available_reason, available_message) = if is_available {
        (
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        (
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    let (progress_reason, progress_message) = if complete {
        (
            "NewReplicaSetAvailable",
            format!("ReplicaSet \"{new_name}\" has successfully progressed."),
        )
    } else {
        (
            "ReplicaSetUpdated",
            format!("ReplicaSet \"{new_name}\" is progressing."),
        )
    };
    let generation = deployment["metadata"]["generation"].as_i64().unwrap_or(0);
    let status = json!({
        "observedGeneration": generation,
        "replicas": total,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": available_all,
        "unavailableReplicas": (desired - available_all).max(0),
        "conditions": [
            {"type": "Available", "status": available_status, "reason": available_reason,
             "message": available_message, "lastUpdateTime": kept_time("Available", available_status),
             "lastTransitionTime": kept_time("Available", available_status)},
            {"type": "Progressing", "status": "True", "reason": progress_reason,
             "message": progress_message, "lastUpdateTime": now,
             "lastTransitionTime": kept_time("Progressing", "True")},
        ],
    });
    let unchanged = previous["observedGeneration"].as_i64() == Some(generation)
        && int(&previous["replicas"], -1) == total
        && int(&previous["updatedReplicas"], -1) == updated
        && int(&previous["readyReplicas"], -1) == ready
        && int(&previous["availableReplicas"], -1) == available_all
        && conditions
            .iter()
            .any(|c| c["type"] == "Progressing" && c["reason"] == progress_reason)
        && conditions
            .iter()
            .any(|c| c["type"] == "Available" && c["status"] == available_status);
    if !unchanged {
        Api::<Deployment>::namespaced(client.clone(), ns)
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await?;
    }
    Ok(())
}

/// Whether `pod` is Ready.
fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Go's `ActivePods` order, the pod to delete first first: unscheduled,
/// then not running, then not Ready, then the newest.
fn deletion_rank(pod: &Pod) -> (bool, bool, bool, std::cmp::Reverse<String>) {
    let scheduled = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .is_some();
    let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    let created = pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    (
        scheduled,
        running,
        pod_ready(pod),
        std::cmp::Reverse(created),
    )
}

/// Create or delete a ReplicaSet's pods to match its replicas; write its
/// status.
async fn sync_replica_set(
    client: &kube::Client,
    set: &Value,
    pods: &[Pod],
) -> Result<(), kube::Error> {
    let (Some(name), Some(ns), Some(uid)) = (
        name_of(set),
        set["metadata"]["namespace"].as_str(),
        set["metadata"]["uid"].as_str(),
    ) else {
        return Ok(());
    };
    let want = spec_replicas(set);
    let mut active: Vec<&Pod> = pods
        .iter()
        .filter(|p| {
            p.metadata.namespace.as_deref() == Some(ns)
                && pod_controlled_by(p, uid)
                && p.metadata.deletion_timestamp.is_none()
                && !matches!(
                    p.status.as_ref().and_then(|s| s.phase.as_deref()),
                    Some("Succeeded" | "Failed")
                )
        })
        .collect();
    let have = i32::try_from(active.len()).unwrap_or(i32::MAX);
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), ns);
    if have < want {
        let template = &set["spec"]["template"];
        for _ in have..want {
            let mut pod = json!({
                "metadata": if template["metadata"].is_object() { template["metadata"].clone() } else { json!({}) },
                "spec": template["spec"].clone(),
            });
            pod["metadata"]["generateName"] = json!(format!("{name}-"));
            pod["metadata"]["namespace"] = json!(ns);
            pod["metadata"]["ownerReferences"] =
                json!([controller_reference("ReplicaSet", name, uid)]);
            let pod: Pod = serde_json::from_value(pod).map_err(kube::Error::SerdeError)?;
            pods_api.create(&PostParams::default(), &pod).await?;
        }
    } else if have > want {
        active.sort_by_key(|p| deletion_rank(p));
        let excess = usize::try_from(have - want).unwrap_or(0);
        for pod in active.iter().take(excess) {
            if let Some(pod_name) = pod.metadata.name.as_deref() {
                match pods_api.delete(pod_name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    let ready = i32::try_from(active.iter().filter(|p| pod_ready(p)).count()).unwrap_or(0);
    let previous = &set["status"];
    let generation = set["metadata"]["generation"].as_i64().unwrap_or(0);
    let unchanged = int(&previous["replicas"], -1) == have
        && int(&previous["readyReplicas"], 0) == ready
        && int(&previous["availableReplicas"], 0) == ready
        && previous["observedGeneration"].as_i64() == Some(generation);
    if !unchanged {
        let status = json!({"status": {
            "replicas": have,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "fullyLabeledReplicas": have,
            "observedGeneration": generation,
        }});
        Api::<ReplicaSet>::namespaced(client.clone(), ns)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
            .await?;
    }
    Ok(())
}

/// The ownerReference a controller of kind `kind` (in `apps/v1`) puts on
/// what it creates: `controller` and `blockOwnerDeletion` set, as Go's
/// Deployment and ReplicaSet controllers set them.
fn controller_reference(kind: &str, name: &str, uid: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid,
        "controller": true, "blockOwnerDeletion": true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surges_round_up_and_unavailability_down() {
        assert_eq!(scaled(&Value::Null, 3, 25, true), 1);
        assert_eq!(scaled(&Value::Null, 3, 25, false), 0);
        assert_eq!(scaled(&json!("50%"), 3, 25, true), 2);
        assert_eq!(scaled(&json!(2), 3, 25, false), 2);
    }

    #[test]
    fn the_template_hash_is_stable_and_follows_the_template() {
        let a = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}});
        let b = json!({"metadata": {"labels": {"app": "web"}, "annotations": {"x": "1"}}, "spec": {"containers": []}});
        assert_eq!(template_hash(&a), template_hash(&a.clone()));
        assert_ne!(template_hash(&a), template_hash(&b));
        assert!(
            template_hash(&a)
                .bytes()
                .all(|c| b"bcdfghjklmnpqrstvwxz2456789".contains(&c))
        );
    }
}
