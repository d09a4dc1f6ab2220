//! `kubectl get` columns of the workload, policy, scheduling and RBAC kinds,
//! as kube-apiserver's printers lay them out (priority 1 columns show with
//! `-o wide`).

use serde_json::{Value, json};

use crate::meta::{at, str_at};
use crate::tables::{column, key_values};

fn int(obj: &Value, path: &[&str]) -> i64 {
    at(obj, path).and_then(Value::as_i64).unwrap_or(0)
}

fn none_if_empty(s: String) -> Value {
    json!(if s.is_empty() { "<none>".to_owned() } else { s })
}

/// The containers and images of the pod template at `template`.
fn containers_and_images(obj: &Value, template: &[&str]) -> (Value, Value) {
    let mut path = template.to_vec();
    path.extend(["spec", "containers"]);
    let containers: Vec<&Value> = at(obj, &path)
        .and_then(Value::as_array)
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    let field = |key: &str| {
        containers
            .iter()
            .filter_map(|c| c.get(key).and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(",")
    };
    (none_if_empty(field("name")), none_if_empty(field("image")))
}

/// A label selector as kubectl prints it (`app=web,tier in (a,b)`).
pub(crate) fn selector(obj: &Value, path: &[&str]) -> Value {
    let Some(sel) = at(obj, path) else {
        return json!("<none>");
    };
    let labels = key_values(sel, &["matchLabels"]);
    let mut parts: Vec<String> = if labels.is_empty() {
        Vec::new()
    } else {
        vec![labels]
    };
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|v| v.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        parts.push(match e.get("operator").and_then(Value::as_str) {
            Some("In") => format!("{key} in ({})", values.join(",")),
            Some("NotIn") => format!("{key} notin ({})", values.join(",")),
            Some("Exists") => key.to_owned(),
            Some("DoesNotExist") => format!("!{key}"),
            _ => continue,
        });
    }
    none_if_empty(parts.join(","))
}

fn job_status(job: &Value) -> &'static str {
    let conditions = at(job, &["status", "conditions"])
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let holds = |ty: &str| {
        conditions.iter().any(|c| {
            c.get("type").and_then(Value::as_str) == Some(ty)
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
    };
    if holds("Complete") {
        "Complete"
    } else if holds("Failed") {
        "Failed"
    } else if at(job, &["metadata", "deletionTimestamp"]).is_some() {
        "Terminating"
    } else if holds("Suspended") {
        "Suspended"
    } else {
        "Running"
    }
}

fn subjects(binding: &Value, kind: &str) -> Value {
    let names: Vec<String> = binding
        .get("subjects")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|s| s.get("kind").and_then(Value::as_str) == Some(kind))
        .map(|s| {
            let name = s.get("name").and_then(Value::as_str).unwrap_or_default();
            match s.get("namespace").and_then(Value::as_str) {
                Some(ns) if kind == "ServiceAccount" => format!("{ns}/{name}"),
                _ => name.to_owned(),
            }
        })
        .collect();
    json!(names.join(", "))
}

/// Columns shown by default, named and typed.
fn shown(specs: &[(&str, &str)]) -> Vec<Value> {
    specs.iter().map(|(n, t)| column(n, t, 0)).collect()
}

type Layout = (Vec<Value>, Vec<Value>);

/// `layout` with kubectl's `-o wide` template columns appended:
/// Containers, Images, and Selector when `selector` names one.
fn with_template(
    (mut columns, mut cells): Layout,
    obj: &Value,
    template: &[&str],
    selector_path: Option<&[&str]>,
) -> Layout {
    let (containers, images) = containers_and_images(obj, template);
    columns.push(column("Containers", "string", 1));
    columns.push(column("Images", "string", 1));
    cells.push(containers);
    cells.push(images);
    if let Some(path) = selector_path {
        columns.push(column("Selector", "string", 1));
        cells.push(selector(obj, path));
    }
    (columns, cells)
}

/// `ready/desired` from the status and spec replica counts.
fn ready_of(obj: &Value) -> Value {
    json!(format!(
        "{}/{}",
        int(obj, &["status", "readyReplicas"]),
        int(obj, &["spec", "replicas"])
    ))
}

/// The columns and cells of `kind` in `group` (after the caller's name and
/// age closures), or `None` for a kind with only Name and Age.
pub(crate) fn layout(
    group: &str,
    kind: &str,
    obj: &Value,
    name: Value,
    age: &dyn Fn(&[&str]) -> Value,
) -> Option<Layout> {
    let created = age(&["metadata", "creationTimestamp"]);
    let template: &[&str] = &["spec", "template"];
    let selector_path: &[&str] = &["spec", "selector"];
    let status = |field: &str| json!(int(obj, &["status", field]));
    Some(match (group, kind) {
        ("apps", "Deployment") => with_template(
            (
                shown(&[
                    ("Name", "string"),
                    ("Ready", "string"),
                    ("Up-to-date", "integer"),
                    ("Available", "integer"),
                    ("Age", "string"),
                ]),
                vec![
                    name,
                    ready_of(obj),
                    status("updatedReplicas"),
                    status("availableReplicas"),
                    created,
                ],
            ),
            obj,
            template,
            Some(selector_path),
        ),
        ("apps", "ReplicaSet") => with_template(
            (
                shown(&[
                    ("Name", "string"),
                    ("Desired", "integer"),
                    ("Current", "integer"),
                    ("Ready", "integer"),
                    ("Age", "string"),
                ]),
                vec![
                    name,
                    json!(int(obj, &["spec", "replicas"])),
                    status("replicas"),
                    status("readyReplicas"),
                    created,
                ],
            ),
            obj,
            template,
            Some(selector_path),
        ),
        ("apps", "StatefulSet") => with_template(
            (
                shown(&[("Name", "string"), ("Ready", "string"), ("Age", "string")]),
                vec![name, ready_of(obj), created],
            ),
            obj,
            template,
            None,
        ),
        ("apps", "DaemonSet") => {
            let node_selector = key_values(obj, &["spec", "template", "spec", "nodeSelector"]);
            with_template(
                (
                    shown(&[
                        ("Name", "string"),
                        ("Desired", "integer"),
                        ("Current", "integer"),
                        ("Ready", "integer"),
                        ("Up-to-date", "integer"),
                        ("Available", "integer"),
                        ("Node Selector", "string"),
                        ("Age", "string"),
                    ]),
                    vec![
                        name,
                        status("desiredNumberScheduled"),
                        status("currentNumberScheduled"),
                        status("numberReady"),
                        status("updatedNumberScheduled"),
                        status("numberAvailable"),
                        none_if_empty(node_selector),
                        created,
                    ],
                ),
                obj,
                template,
                Some(selector_path),
            )
        }
        ("batch", "Job") => {
            let succeeded = int(obj, &["status", "succeeded"]);
            let completions = match at(obj, &["spec", "completions"]).and_then(Value::as_i64) {
                Some(c) => format!("{succeeded}/{c}"),
                None => format!(
                    "{succeeded}/1 of {}",
                    int(obj, &["spec", "parallelism"]).max(1)
                ),
            };
            let duration = if str_at(obj, &["status", "startTime"]).is_some() {
                age(&["status", "startTime"])
            } else {
                json!("")
            };
            with_template(
                (
                    shown(&[
                        ("Name", "string"),
                        ("Status", "string"),
                        ("Completions", "string"),
                        ("Duration", "string"),
                        ("Age", "string"),
                    ]),
                    vec![
                        name,
                        json!(job_status(obj)),
                        json!(completions),
                        duration,
                        created,
                    ],
                ),
                obj,
                template,
                Some(selector_path),
            )
        }
        ("batch", "CronJob") => {
            let active = at(obj, &["status", "active"])
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let last = if str_at(obj, &["status", "lastScheduleTime"]).is_some() {
                age(&["status", "lastScheduleTime"])
            } else {
                json!("<none>")
            };
            with_template(
                (
                    shown(&[
                        ("Name", "string"),
                        ("Schedule", "string"),
                        ("Timezone", "string"),
                        ("Suspend", "boolean"),
                        ("Active", "integer"),
                        ("Last Schedule", "string"),
                        ("Age", "string"),
                    ]),
                    vec![
                        name,
                        json!(str_at(obj, &["spec", "schedule"]).unwrap_or_default()),
                        json!(str_at(obj, &["spec", "timeZone"]).unwrap_or("<none>")),
                        json!(
                            at(obj, &["spec", "suspend"])
                                .and_then(Value::as_bool)
                                .unwrap_or(false)
                        ),
                        json!(active),
                        last,
                        created,
                    ],
                ),
                obj,
                &["spec", "jobTemplate", "spec", "template"],
                Some(&["spec", "jobTemplate", "spec", "selector"]),
            )
        }
        ("policy", "PodDisruptionBudget") => {
            let or_na = |path: &[&str]| match at(obj, path) {
                Some(Value::Number(n)) => json!(n.to_string()),
                Some(Value::String(s)) => json!(s),
                _ => json!("N/A"),
            };
            (
                shown(&[
                    ("Name", "string"),
                    ("Min Available", "string"),
                    ("Max Unavailable", "string"),
                    ("Allowed Disruptions", "integer"),
                    ("Age", "string"),
                ]),
                vec![
                    name,
                    or_na(&["spec", "minAvailable"]),
                    or_na(&["spec", "maxUnavailable"]),
                    status("disruptionsAllowed"),
                    created,
                ],
            )
        }
        ("scheduling.k8s.io", "PriorityClass") => (
            shown(&[
                ("Name", "string"),
                ("Value", "integer"),
                ("Global-Default", "boolean"),
                ("Age", "string"),
                ("Preemption-Policy", "string"),
            ]),
            vec![
                name,
                json!(int(obj, &["value"])),
                json!(
                    obj.get("globalDefault")
                        .and_then(Value::as_bool)
                        .unwrap_or(false)
                ),
                created,
                json!(str_at(obj, &["preemptionPolicy"]).unwrap_or("PreemptLowerPriority")),
            ],
        ),
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => (
            shown(&[("Name", "string"), ("Created At", "date")]),
            vec![
                name,
                json!(str_at(obj, &["metadata", "creationTimestamp"]).unwrap_or_default()),
            ],
        ),
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            let mut columns = shown(&[("Name", "string"), ("Role", "string"), ("Age", "string")]);
            for wide in ["Users", "Groups", "ServiceAccounts"] {
                columns.push(column(wide, "string", 1));
            }
            (
                columns,
                vec![
                    name,
                    json!(format!(
                        "{}/{}",
                        str_at(obj, &["roleRef", "kind"]).unwrap_or_default(),
                        str_at(obj, &["roleRef", "name"]).unwrap_or_default()
                    )),
                    created,
                    subjects(obj, "User"),
                    subjects(obj, "Group"),
                    subjects(obj, "ServiceAccount"),
                ],
            )
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(group: &str, kind: &str, obj: &Value) -> Vec<Value> {
        layout(group, kind, obj, json!("x"), &|_| json!("1m"))
            .unwrap()
            .1
    }

    #[test]
    fn deployment_and_job_columns() {
        let d = json!({"spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
        assert_eq!(
            cells("apps", "Deployment", &d),
            [
                json!("x"),
                json!("2/3"),
                json!(3),
                json!(2),
                json!("1m"),
                json!("c"),
                json!("nginx"),
                json!("app=web")
            ]
        );
        let job = json!({"spec": {"completions": 2}, "status": {"succeeded": 2,
            "conditions": [{"type": "Complete", "status": "True"}]}});
        let c = cells("batch", "Job", &job);
        assert_eq!(
            (c[1].clone(), c[2].clone()),
            (json!("Complete"), json!("2/2"))
        );
        let binding = json!({"roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "team"}]});
        let c = cells("rbac.authorization.k8s.io", "RoleBinding", &binding);
        assert_eq!(
            (c[1].clone(), c[5].clone()),
            (json!("ClusterRole/view"), json!("team/robot"))
        );
        assert!(layout("", "ConfigMap", &json!({}), json!("x"), &|_| json!("")).is_none());
    }
}
