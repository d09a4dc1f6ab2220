//! `Table` responses, so `kubectl get` prints the usual columns.

pub(crate) mod cluster;
pub(crate) mod workloads;

use serde_json::{Value, json};

use crate::meta::partial;
use crate::meta::{at, str_at};
use crate::registry::CustomVersion;
use crate::resources::ResourceDef;

/// A human duration as kubectl shows ages (`45s`, `3m20s`, `5h`, `2d3h`).
pub(crate) fn human_duration(secs: i64) -> String {
    let secs = secs.max(0);
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86_400);
    if secs < 120 {
        format!("{secs}s")
    } else if m < 10 {
        match secs % 60 {
            0 => format!("{m}m"),
            s => format!("{m}m{s}s"),
        }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        match m % 60 {
            0 => format!("{h}h"),
            mm => format!("{h}h{mm}m"),
        }
    } else if h < 48 {
        format!("{h}h")
    } else if d < 8 {
        match h % 24 {
            0 => format!("{d}d"),
            hh => format!("{d}d{hh}h"),
        }
    } else if d < 365 * 2 {
        format!("{d}d")
    } else {
        format!("{}y", d / 365)
    }
}

fn age(obj: &Value, path: &[&str]) -> String {
    match str_at(obj, path).and_then(crate::meta::parse_time) {
        Some(t) => {
            let secs = k8s_openapi::jiff::Timestamp::now()
                .duration_since(t)
                .as_secs();
            human_duration(secs)
        }
        None => "<unknown>".to_owned(),
    }
}

fn s(v: Option<&str>) -> Value {
    json!(v.filter(|x| !x.is_empty()).unwrap_or("<none>"))
}

/// A Table column definition (`Name` gets the `name` format).
pub(crate) fn column(name: &str, ty: &str, priority: u8) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": ty, "format": format, "description": name, "priority": priority})
}

fn node_status(n: &Value) -> String {
    let ready = at(n, &["status", "conditions"])
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        })
        .and_then(|c| c.get("status").and_then(Value::as_str));
    let mut status = match ready {
        Some("True") => "Ready".to_owned(),
        Some("False") => "NotReady".to_owned(),
        _ => "Unknown".to_owned(),
    };
    if at(n, &["spec", "unschedulable"]).and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    status
}

fn node_roles(n: &Value) -> String {
    let roles: Vec<&str> = at(n, &["metadata", "labels"])
        .and_then(Value::as_object)
        .map(|l| {
            l.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .collect()
        })
        .unwrap_or_default();
    if roles.is_empty() {
        "<none>".to_owned()
    } else {
        roles.join(",")
    }
}

fn node_address(n: &Value, ty: &str) -> Value {
    let addr = at(n, &["status", "addresses"])
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .find(|x| x.get("type").and_then(Value::as_str) == Some(ty))
        })
        .and_then(|x| x.get("address").and_then(Value::as_str));
    s(addr)
}

fn pod_cells(p: &Value) -> Vec<Value> {
    let statuses: Vec<&Value> = at(p, &["status", "containerStatuses"])
        .and_then(Value::as_array)
        .map(|v| v.iter().collect())
        .unwrap_or_default();
    let total = at(p, &["spec", "containers"])
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let ready = statuses
        .iter()
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
        .sum();
    let waiting = statuses
        .iter()
        .find_map(|c| at(c, &["state", "waiting", "reason"]).and_then(Value::as_str));
    let status = if at(p, &["metadata", "deletionTimestamp"]).is_some_and(|v| !v.is_null()) {
        "Terminating".to_owned()
    } else if let Some(reason) = str_at(p, &["status", "reason"]) {
        reason.to_owned()
    } else if let Some(w) = waiting {
        w.to_owned()
    } else {
        str_at(p, &["status", "phase"])
            .unwrap_or("Pending")
            .to_owned()
    };
    vec![
        json!(crate::meta::name(p)),
        json!(format!("{ready}/{total}")),
        json!(status),
        json!(restarts),
        json!(age(p, &["metadata", "creationTimestamp"])),
        s(str_at(p, &["status", "podIP"])),
        s(str_at(p, &["spec", "nodeName"])),
        s(str_at(p, &["status", "nominatedNodeName"])),
        json!("<none>"),
    ]
}

/// A string map as kubectl prints it (`a=1,b=2`), empty for none.
pub(crate) fn key_values(obj: &Value, path: &[&str]) -> String {
    at(obj, path)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// The IPs (or hostnames) of a `status.loadBalancer.ingress`.
pub(crate) fn load_balancer_addresses(obj: &Value) -> Vec<&str> {
    at(obj, &["status", "loadBalancer", "ingress"])
        .and_then(Value::as_array)
        .map(|i| {
            i.iter()
                .filter_map(|x| {
                    x.get("ip")
                        .or_else(|| x.get("hostname"))
                        .and_then(Value::as_str)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn service_cells(svc: &Value) -> Vec<Value> {
    let ty = str_at(svc, &["spec", "type"]).unwrap_or("ClusterIP");
    let ingress = load_balancer_addresses(svc);
    let external = if !ingress.is_empty() {
        ingress.join(",")
    } else if ty == "LoadBalancer" {
        "<pending>".to_owned()
    } else {
        "<none>".to_owned()
    };
    let ports: Vec<String> = at(svc, &["spec", "ports"])
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
                    let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
                    match p.get("nodePort").and_then(Value::as_i64) {
                        Some(np) => format!("{port}:{np}/{proto}"),
                        None => format!("{port}/{proto}"),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let selector = key_values(svc, &["spec", "selector"]);
    vec![
        json!(crate::meta::name(svc)),
        json!(ty),
        s(str_at(svc, &["spec", "clusterIP"])),
        json!(external),
        json!(if ports.is_empty() {
            "<none>".to_owned()
        } else {
            ports.join(",")
        }),
        json!(age(svc, &["metadata", "creationTimestamp"])),
        json!(if selector.is_empty() {
            "<none>".to_owned()
        } else {
            selector
        }),
    ]
}

/// The columns and cells for one resource.
fn layout(def: &ResourceDef, obj: &Value) -> (Vec<Value>, Vec<Value>) {
    let name = json!(crate::meta::name(obj));
    let created = || json!(age(obj, &["metadata", "creationTimestamp"]));
    match (def.group, def.kind) {
        ("", "Node") => (
            vec![
                column("Name", "string", 0),
                column("Status", "string", 0),
                column("Roles", "string", 0),
                column("Age", "string", 0),
                column("Version", "string", 0),
                column("Internal-IP", "string", 1),
                column("External-IP", "string", 1),
                column("OS-Image", "string", 1),
                column("Kernel-Version", "string", 1),
                column("Container-Runtime", "string", 1),
            ],
            vec![
                name,
                json!(node_status(obj)),
                json!(node_roles(obj)),
                created(),
                s(str_at(obj, &["status", "nodeInfo", "kubeletVersion"])),
                node_address(obj, "InternalIP"),
                node_address(obj, "ExternalIP"),
                s(str_at(obj, &["status", "nodeInfo", "osImage"])),
                s(str_at(obj, &["status", "nodeInfo", "kernelVersion"])),
                s(str_at(
                    obj,
                    &["status", "nodeInfo", "containerRuntimeVersion"],
                )),
            ],
        ),
        ("", "Pod") => (
            vec![
                column("Name", "string", 0),
                column("Ready", "string", 0),
                column("Status", "string", 0),
                column("Restarts", "integer", 0),
                column("Age", "string", 0),
                column("IP", "string", 1),
                column("Node", "string", 1),
                column("Nominated Node", "string", 1),
                column("Readiness Gates", "string", 1),
            ],
            pod_cells(obj),
        ),
        ("", "Service") => (
            vec![
                column("Name", "string", 0),
                column("Type", "string", 0),
                column("Cluster-IP", "string", 0),
                column("External-IP", "string", 0),
                column("Port(s)", "string", 0),
                column("Age", "string", 0),
                column("Selector", "string", 1),
            ],
            service_cells(obj),
        ),
        ("", "Namespace") => (
            vec![
                column("Name", "string", 0),
                column("Status", "string", 0),
                column("Age", "string", 0),
            ],
            vec![name, s(str_at(obj, &["status", "phase"])), created()],
        ),
        ("coordination.k8s.io", "Lease") => (
            vec![
                column("Name", "string", 0),
                column("Holder", "string", 0),
                column("Age", "string", 0),
            ],
            vec![name, s(str_at(obj, &["spec", "holderIdentity"])), created()],
        ),
        ("", "Event") => {
            let object = format!(
                "{}/{}",
                str_at(obj, &["involvedObject", "kind"])
                    .unwrap_or_default()
                    .to_lowercase(),
                str_at(obj, &["involvedObject", "name"]).unwrap_or_default()
            );
            let last = if str_at(obj, &["lastTimestamp"]).is_some() {
                age(obj, &["lastTimestamp"])
            } else if str_at(obj, &["eventTime"]).is_some() {
                age(obj, &["eventTime"])
            } else {
                age(obj, &["metadata", "creationTimestamp"])
            };
            (
                vec![
                    column("Last Seen", "string", 0),
                    column("Type", "string", 0),
                    column("Reason", "string", 0),
                    column("Object", "string", 0),
                    column("Message", "string", 0),
                ],
                vec![
                    json!(last),
                    s(str_at(obj, &["type"])),
                    s(str_at(obj, &["reason"])),
                    json!(object),
                    s(str_at(obj, &["message"])),
                ],
            )
        }
        ("", "ConfigMap") => {
            let n = obj
                .get("data")
                .and_then(Value::as_object)
                .map_or(0, |m| m.len())
                + obj
                    .get("binaryData")
                    .and_then(Value::as_object)
                    .map_or(0, |m| m.len());
            (
                vec![
                    column("Name", "string", 0),
                    column("Data", "integer", 0),
                    column("Age", "string", 0),
                ],
                vec![name, json!(n), created()],
            )
        }
        ("", "Secret") => {
            let n = obj
                .get("data")
                .and_then(Value::as_object)
                .map_or(0, |m| m.len());
            (
                vec![
                    column("Name", "string", 0),
                    column("Type", "string", 0),
                    column("Data", "integer", 0),
                    column("Age", "string", 0),
                ],
                vec![name, s(str_at(obj, &["type"])), json!(n), created()],
            )
        }
        (group, kind) => {
            let age_at = |path: &[&str]| json!(age(obj, path));
            workloads::layout(group, kind, obj, name.clone(), &age_at)
                .or_else(|| cluster::layout(group, kind, obj, name.clone(), &age_at))
                .unwrap_or_else(|| {
                    (
                        vec![column("Name", "string", 0), column("Age", "string", 0)],
                        vec![name, created()],
                    )
                })
        }
    }
}

/// The columns and cells of a custom resource: its printer columns after
/// the name (name and age when it declares none).
fn custom_layout(custom: &CustomVersion, obj: &Value) -> (Vec<Value>, Vec<Value>) {
    let name = json!(crate::meta::name(obj));
    if custom.columns.is_empty() {
        return (
            vec![column("Name", "string", 0), column("Age", "date", 0)],
            vec![name, json!(age(obj, &["metadata", "creationTimestamp"]))],
        );
    }
    let mut columns = vec![column("Name", "string", 0)];
    let mut cells = vec![name];
    for c in &custom.columns {
        columns.push(json!({
            "name": c.name,
            "type": c.type_,
            "format": c.format,
            "description": c.description,
            "priority": c.priority,
        }));
        let path: Vec<&str> = c.path.iter().map(String::as_str).collect();
        let value = crate::meta::at(obj, &path).cloned().unwrap_or(Value::Null);
        cells.push(match (c.type_.as_str(), value) {
            ("date", Value::String(_)) => json!(age(obj, &path)),
            (_, Value::Array(_) | Value::Object(_)) => Value::Null,
            (_, v) => v,
        });
    }
    (columns, cells)
}

/// A `Table` of `objects` (`custom`: the resource is a custom resource).
pub(crate) fn table(
    def: &ResourceDef,
    custom: Option<&CustomVersion>,
    objects: &[&Value],
    resource_version: &str,
    continue_token: Option<&str>,
    include_object: Option<&str>,
) -> Value {
    let layout = |o: &Value| match custom {
        Some(c) => custom_layout(c, o),
        None => layout(def, o),
    };
    let columns = layout(&json!({})).0;
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let cells = layout(o).1;
            let mut row = json!({"cells": cells});
            match include_object.unwrap_or("Metadata") {
                "None" => {}
                "Object" => row["object"] = (*o).clone(),
                _ => row["object"] = partial(o),
            }
            row
        })
        .collect();
    let mut metadata = json!({"resourceVersion": resource_version});
    if let Some(c) = continue_token {
        metadata["continue"] = json!(c);
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(4 * 3600 + 60), "4h1m");
        assert_eq!(human_duration(20 * 3600), "20h");
        assert_eq!(human_duration(3 * 86_400 + 3600), "3d1h");
        assert_eq!(human_duration(30 * 86_400), "30d");
    }

    #[test]
    fn node_and_service_rows() {
        let node = json!({"metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}});
        let (_, cells) = layout(&crate::resources::builtin()[1], &node);
        assert_eq!(cells[1], "Ready,SchedulingDisabled");
        assert_eq!(cells[2], "worker");
        assert_eq!(cells[5], "10.0.0.1");
        let svc = json!({"metadata": {"name": "web"}, "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.5", "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}]}});
        let cells = service_cells(&svc);
        assert_eq!(cells[3], "<pending>");
        assert_eq!(cells[4], "80:30080/TCP");
    }
}
