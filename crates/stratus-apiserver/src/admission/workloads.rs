//! Defaulting and validation of the workload kinds (`apps/v1`,
//! `batch/v1`), as their kube-apiserver strategies do it: the defaults
//! kubectl and controllers rely on (replicas, strategies, history limits,
//! a Job's generated selector and labels, pod template defaults), and the
//! checks that matter (a selector matching the template's labels,
//! non-negative replicas, a Job's restart policy, a CronJob's schedule).
//! No workload controllers run: these objects are stored, not acted on.

use serde_json::{Map, Value, json};

use crate::admission::defaults::default_containers;
use crate::error::Cause;
use crate::meta::{at, default_at, set_at, str_at};
use crate::resources::ResourceDef;

/// Where a kind keeps its pod template.
fn template_path(def: &ResourceDef) -> Option<&'static [&'static str]> {
    match (def.group, def.kind) {
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") | ("batch", "Job") => {
            Some(&["spec", "template"])
        }
        ("batch", "CronJob") => Some(&["spec", "jobTemplate", "spec", "template"]),
        _ => None,
    }
}

/// The pod-spec defaults every template gets (SetDefaults_PodSpec and its
/// containers').
fn default_template(obj: &mut Value, path: &[&str]) {
    let mut spec_path = path.to_vec();
    spec_path.push("spec");
    let Some(spec) = at(obj, &spec_path).cloned() else {
        return;
    };
    let mut pod = json!({"spec": spec});
    default_at(&mut pod, &["spec", "restartPolicy"], json!("Always"));
    default_at(
        &mut pod,
        &["spec", "terminationGracePeriodSeconds"],
        json!(30),
    );
    default_at(&mut pod, &["spec", "dnsPolicy"], json!("ClusterFirst"));
    default_at(
        &mut pod,
        &["spec", "schedulerName"],
        json!("default-scheduler"),
    );
    default_at(&mut pod, &["spec", "securityContext"], json!({}));
    default_containers(&mut pod, "containers");
    default_containers(&mut pod, "initContainers");
    if let Some(spec) = pod.get_mut("spec").map(Value::take) {
        set_at(obj, &spec_path, spec);
    }
}

fn rolling(max_unavailable: Value, max_surge: Value) -> Value {
    json!({"type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": max_unavailable, "maxSurge": max_surge}})
}

/// Default a workload object (on every write, as decoding does).
pub(crate) fn default(def: &ResourceDef, obj: &mut Value) {
    let Some(template) = template_path(def) else {
        return;
    };
    match (def.group, def.kind) {
        ("apps", "Deployment") => {
            default_at(obj, &["spec", "replicas"], json!(1));
            default_at(
                obj,
                &["spec", "strategy"],
                rolling(json!("25%"), json!("25%")),
            );
            default_at(obj, &["spec", "revisionHistoryLimit"], json!(10));
            default_at(obj, &["spec", "progressDeadlineSeconds"], json!(600));
        }
        ("apps", "ReplicaSet") => default_at(obj, &["spec", "replicas"], json!(1)),
        ("apps", "StatefulSet") => {
            default_at(obj, &["spec", "replicas"], json!(1));
            default_at(obj, &["spec", "podManagementPolicy"], json!("OrderedReady"));
            default_at(
                obj,
                &["spec", "updateStrategy"],
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
            default_at(obj, &["spec", "revisionHistoryLimit"], json!(10));
            default_at(
                obj,
                &["spec", "persistentVolumeClaimRetentionPolicy"],
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
        }
        ("apps", "DaemonSet") => {
            default_at(
                obj,
                &["spec", "updateStrategy"],
                rolling(json!(1), json!(0)),
            );
            default_at(obj, &["spec", "revisionHistoryLimit"], json!(10));
        }
        ("batch", "Job") => default_job(obj),
        ("batch", "CronJob") => {
            default_at(obj, &["spec", "concurrencyPolicy"], json!("Allow"));
            default_at(obj, &["spec", "suspend"], json!(false));
            default_at(obj, &["spec", "successfulJobsHistoryLimit"], json!(3));
            default_at(obj, &["spec", "failedJobsHistoryLimit"], json!(1));
        }
        _ => {}
    }
    default_template(obj, template);
}

/// A Job's defaults, and (without `manualSelector`) the selector and
/// template labels the API server generates from its uid.
fn default_job(obj: &mut Value) {
    if at(obj, &["spec", "completions"]).is_none() && at(obj, &["spec", "parallelism"]).is_none() {
        set_at(obj, &["spec", "completions"], json!(1));
    }
    default_at(obj, &["spec", "parallelism"], json!(1));
    default_at(obj, &["spec", "backoffLimit"], json!(6));
    default_at(obj, &["spec", "completionMode"], json!("NonIndexed"));
    default_at(obj, &["spec", "suspend"], json!(false));
    default_at(
        obj,
        &["spec", "podReplacementPolicy"],
        json!("TerminatingOrFailed"),
    );
    if at(obj, &["spec", "manualSelector"]).and_then(Value::as_bool) == Some(true)
        || at(obj, &["spec", "selector"]).is_some()
    {
        return;
    }
    let uid = str_at(obj, &["metadata", "uid"])
        .unwrap_or_default()
        .to_owned();
    let name = str_at(obj, &["metadata", "name"])
        .unwrap_or_default()
        .to_owned();
    if uid.is_empty() {
        return;
    }
    set_at(
        obj,
        &["spec", "selector"],
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
    );
    for (k, v) in [
        ("batch.kubernetes.io/controller-uid", &uid),
        ("batch.kubernetes.io/job-name", &name),
        ("controller-uid", &uid),
        ("job-name", &name),
    ] {
        default_at(
            obj,
            &["spec", "template", "metadata", "labels", k],
            json!(v),
        );
    }
}

/// Whether a label selector (matchLabels / matchExpressions) selects
/// `labels`.
fn selects(selector: &Value, labels: Option<&Map<String, Value>>) -> bool {
    crate::selectors::object_selector_matches(selector, labels)
}

/// The checks of a workload object.
pub(crate) fn validate(def: &ResourceDef, obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(template) = template_path(def) else {
        return causes;
    };
    let spec_prefix = template[..template.len() - 1].join(".");
    let tpl = template.join(".");
    let mut containers = template.to_vec();
    containers.extend(["spec", "containers"]);
    if at(obj, &containers)
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        causes.push(Cause::required(format!("{tpl}.spec.containers"), ""));
    }
    if let Some(replicas) = at(obj, &["spec", "replicas"]).and_then(Value::as_i64)
        && replicas < 0
    {
        causes.push(Cause::invalid_number(
            "spec.replicas",
            replicas,
            "must be greater than or equal to 0",
        ));
    }
    if def.kind != "CronJob" {
        let mut labels_path = template.to_vec();
        labels_path.extend(["metadata", "labels"]);
        let labels = at(obj, &labels_path).and_then(Value::as_object);
        let selector_path = format!("{spec_prefix}.selector");
        match at(obj, &["spec", "selector"]) {
            None => causes.push(Cause::required(selector_path, "")),
            Some(sel) if selector_is_empty(sel) => causes.push(Cause::invalid(
                selector_path,
                "{}",
                "empty selector is invalid for deployment",
            )),
            Some(sel) if !selects(sel, labels) => {
                let shown: Vec<String> = labels
                    .map(|l| {
                        l.iter()
                            .map(|(k, v)| format!("{k:?}:{:?}", v.as_str().unwrap_or_default()))
                            .collect()
                    })
                    .unwrap_or_default();
                causes.push(Cause {
                    reason: "FieldValueInvalid",
                    field: format!("{tpl}.metadata.labels"),
                    message: format!(
                        "Invalid value: map[string]string{{{}}}: `selector` does not match template `labels`",
                        shown.join(", ")
                    ),
                });
            }
            Some(_) => {}
        }
    }
    if def.group == "batch" {
        let mut restart = template.to_vec();
        restart.extend(["spec", "restartPolicy"]);
        let policy = str_at(obj, &restart).unwrap_or_default();
        if !matches!(policy, "OnFailure" | "Never") {
            causes.push(Cause {
                reason: "FieldValueNotSupported",
                field: format!("{tpl}.spec.restartPolicy"),
                message: format!(
                    "Unsupported value: {policy:?}: supported values: \"OnFailure\", \"Never\""
                ),
            });
        }
    }
    if def.kind == "CronJob"
        && str_at(obj, &["spec", "schedule"]).is_none_or(|s| s.trim().is_empty())
    {
        causes.push(Cause::required("spec.schedule", ""));
    }
    causes
}

fn selector_is_empty(sel: &Value) -> bool {
    sel.get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty)
        && sel
            .get("matchExpressions")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtin;

    fn def(kind: &str) -> ResourceDef {
        builtin().into_iter().find(|d| d.kind == kind).unwrap()
    }

    #[test]
    fn deployment_defaults_and_checks() {
        let d = def("Deployment");
        let mut obj = json!({"metadata": {"name": "web"}, "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}});
        default(&d, &mut obj);
        assert_eq!(obj["spec"]["replicas"], 1);
        assert_eq!(obj["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        assert_eq!(obj["spec"]["template"]["spec"]["restartPolicy"], "Always");
        assert_eq!(
            obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
        assert!(validate(&d, &obj).is_empty());
        obj["spec"]["template"]["metadata"]["labels"]["app"] = json!("other");
        let causes = validate(&d, &obj);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.template.metadata.labels");
        assert!(
            causes[0]
                .message
                .contains("`selector` does not match template `labels`")
        );
    }

    #[test]
    fn job_selector_generated_and_restart_policy_checked() {
        let d = def("Job");
        let mut obj = json!({"metadata": {"name": "once", "uid": "u-1"}, "spec": {
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}]}}}});
        default(&d, &mut obj);
        assert_eq!(obj["spec"]["completions"], 1);
        assert_eq!(obj["spec"]["backoffLimit"], 6);
        assert_eq!(
            obj["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
            "u-1"
        );
        assert_eq!(
            obj["spec"]["template"]["metadata"]["labels"]["job-name"],
            "once"
        );
        assert!(validate(&d, &obj).is_empty());
        obj["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
        assert_eq!(validate(&d, &obj)[0].reason, "FieldValueNotSupported");
        let cj = def("CronJob");
        let causes = validate(
            &cj,
            &json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "i"}]}}}}}}),
        );
        assert_eq!(causes[0].field, "spec.schedule");
    }
}
