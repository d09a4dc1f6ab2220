//! `kubectl get` columns of the networking, storage, node, admission,
//! apiextensions, certificates, flow-control kinds and a few core ones, as
//! kube-apiserver's printers lay them out.

use serde_json::{Value, json};

use crate::meta::{at, str_at};
use crate::tables::workloads::selector;
use crate::tables::{column, load_balancer_addresses};

fn columns(names: &[&str]) -> Vec<Value> {
    names.iter().map(|n| column(n, "string", 0)).collect()
}

fn text(obj: &Value, path: &[&str], absent: &str) -> Value {
    json!(
        str_at(obj, path)
            .filter(|s| !s.is_empty())
            .unwrap_or(absent)
    )
}

fn list_len(obj: &Value, path: &[&str]) -> usize {
    at(obj, path).and_then(Value::as_array).map_or(0, Vec::len)
}

fn access_modes(obj: &Value, path: &[&str]) -> Value {
    let short: Vec<&str> = at(obj, path)
        .and_then(Value::as_array)
        .map(|m| {
            m.iter()
                .filter_map(Value::as_str)
                .map(|mode| match mode {
                    "ReadWriteOnce" => "RWO",
                    "ReadOnlyMany" => "ROX",
                    "ReadWriteMany" => "RWX",
                    "ReadWriteOncePod" => "RWOP",
                    other => other,
                })
                .collect()
        })
        .unwrap_or_default();
    json!(short.join(","))
}

fn ingress_hosts(obj: &Value) -> Value {
    let hosts: Vec<&str> = at(obj, &["spec", "rules"])
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|x| x.get("host").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    json!(if hosts.is_empty() {
        "*".to_owned()
    } else {
        hosts.join(",")
    })
}

fn ingress_address(obj: &Value) -> Value {
    json!(load_balancer_addresses(obj).join(","))
}

/// The columns and cells of `kind` in `group`, or `None` for a kind this
/// module does not lay out.
pub(crate) fn layout(
    group: &str,
    kind: &str,
    obj: &Value,
    name: Value,
    age: &dyn Fn(&[&str]) -> Value,
) -> Option<(Vec<Value>, Vec<Value>)> {
    let created = age(&["metadata", "creationTimestamp"]);
    Some(match (group, kind) {
        ("networking.k8s.io", "Ingress") => (
            columns(&["Name", "Class", "Hosts", "Address", "Ports", "Age"]),
            vec![
                name,
                text(obj, &["spec", "ingressClassName"], "<none>"),
                ingress_hosts(obj),
                ingress_address(obj),
                json!(if at(obj, &["spec", "tls"]).is_some() {
                    "80, 443"
                } else {
                    "80"
                }),
                created,
            ],
        ),
        ("networking.k8s.io", "IngressClass") => (
            columns(&["Name", "Controller", "Parameters", "Age"]),
            vec![
                name,
                text(obj, &["spec", "controller"], "<none>"),
                text(obj, &["spec", "parameters", "name"], "<none>"),
                created,
            ],
        ),
        ("networking.k8s.io", "NetworkPolicy") => (
            columns(&["Name", "Pod-Selector", "Age"]),
            vec![name, selector(obj, &["spec", "podSelector"]), created],
        ),
        ("storage.k8s.io", "StorageClass") => {
            let default = at(
                obj,
                &[
                    "metadata",
                    "annotations",
                    "storageclass.kubernetes.io/is-default-class",
                ],
            )
            .and_then(Value::as_str)
                == Some("true");
            let shown = match (name.as_str(), default) {
                (Some(n), true) => json!(format!("{n} (default)")),
                _ => name,
            };
            (
                columns(&[
                    "Name",
                    "Provisioner",
                    "ReclaimPolicy",
                    "VolumeBindingMode",
                    "AllowVolumeExpansion",
                    "Age",
                ]),
                vec![
                    shown,
                    text(obj, &["provisioner"], ""),
                    text(obj, &["reclaimPolicy"], "Delete"),
                    text(obj, &["volumeBindingMode"], "Immediate"),
                    json!(
                        obj.get("allowVolumeExpansion")
                            .and_then(Value::as_bool)
                            .unwrap_or(false)
                    ),
                    created,
                ],
            )
        }
        ("storage.k8s.io", "CSINode") => (
            columns(&["Name", "Drivers", "Age"]),
            vec![name, json!(list_len(obj, &["spec", "drivers"])), created],
        ),
        ("storage.k8s.io", "VolumeAttachment") => (
            columns(&["Name", "Attacher", "PV", "Node", "Attached", "Age"]),
            vec![
                name,
                text(obj, &["spec", "attacher"], ""),
                text(obj, &["spec", "source", "persistentVolumeName"], ""),
                text(obj, &["spec", "nodeName"], ""),
                json!(
                    at(obj, &["status", "attached"])
                        .and_then(Value::as_bool)
                        .unwrap_or(false)
                ),
                created,
            ],
        ),
        ("node.k8s.io", "RuntimeClass") => (
            columns(&["Name", "Handler", "Age"]),
            vec![name, text(obj, &["handler"], ""), created],
        ),
        ("", "PersistentVolume") => (
            columns(&[
                "Name",
                "Capacity",
                "Access Modes",
                "Reclaim Policy",
                "Status",
                "Claim",
                "StorageClass",
                "Age",
            ]),
            vec![
                name,
                text(obj, &["spec", "capacity", "storage"], ""),
                access_modes(obj, &["spec", "accessModes"]),
                text(obj, &["spec", "persistentVolumeReclaimPolicy"], "Retain"),
                text(obj, &["status", "phase"], "Pending"),
                match (
                    str_at(obj, &["spec", "claimRef", "namespace"]),
                    str_at(obj, &["spec", "claimRef", "name"]),
                ) {
                    (Some(ns), Some(n)) => json!(format!("{ns}/{n}")),
                    _ => json!(""),
                },
                text(obj, &["spec", "storageClassName"], ""),
                created,
            ],
        ),
        ("", "PersistentVolumeClaim") => (
            columns(&[
                "Name",
                "Status",
                "Volume",
                "Capacity",
                "Access Modes",
                "StorageClass",
                "Age",
            ]),
            vec![
                name,
                text(obj, &["status", "phase"], "Pending"),
                text(obj, &["spec", "volumeName"], ""),
                text(obj, &["status", "capacity", "storage"], ""),
                access_modes(obj, &["status", "accessModes"]),
                text(obj, &["spec", "storageClassName"], "<unset>"),
                created,
            ],
        ),
        ("", "ServiceAccount") => (
            columns(&["Name", "Secrets", "Age"]),
            vec![name, json!(list_len(obj, &["secrets"])), created],
        ),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => (
            vec![column("Name", "string", 0), column("Created At", "date", 0)],
            vec![name, text(obj, &["metadata", "creationTimestamp"], "")],
        ),
        ("admissionregistration.k8s.io", _) => (
            columns(&["Name", "Webhooks", "Age"]),
            vec![name, json!(list_len(obj, &["webhooks"])), created],
        ),
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            let conditions: Vec<&str> = at(obj, &["status", "conditions"])
                .and_then(Value::as_array)
                .map(|c| {
                    c.iter()
                        .filter_map(|x| x.get("type").and_then(Value::as_str))
                        .collect()
                })
                .unwrap_or_default();
            (
                columns(&["Name", "Age", "SignerName", "Requestor", "Condition"]),
                vec![
                    name,
                    created,
                    text(obj, &["spec", "signerName"], "<none>"),
                    text(obj, &["spec", "username"], ""),
                    json!(if conditions.is_empty() {
                        "Pending".to_owned()
                    } else {
                        conditions.join(",")
                    }),
                ],
            )
        }
        ("flowcontrol.apiserver.k8s.io", "FlowSchema") => (
            columns(&[
                "Name",
                "PriorityLevel",
                "MatchingPrecedence",
                "DistinguisherMethod",
                "Age",
            ]),
            vec![
                name,
                text(obj, &["spec", "priorityLevelConfiguration", "name"], ""),
                json!(
                    at(obj, &["spec", "matchingPrecedence"])
                        .and_then(Value::as_i64)
                        .unwrap_or(1000)
                ),
                text(obj, &["spec", "distinguisherMethod", "type"], "<none>"),
                created,
            ],
        ),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration") => (
            columns(&["Name", "Type", "NominalConcurrencyShares", "Age"]),
            vec![
                name,
                text(obj, &["spec", "type"], ""),
                match at(obj, &["spec", "limited", "nominalConcurrencyShares"]) {
                    Some(v) => v.clone(),
                    None => json!("<none>"),
                },
                created,
            ],
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_and_networking_columns() {
        let sc = json!({"metadata": {"annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "csi.example.com"});
        let (cols, cells) = layout(
            "storage.k8s.io",
            "StorageClass",
            &sc,
            json!("fast"),
            &|_| json!("1m"),
        )
        .unwrap();
        assert_eq!(cols.len(), cells.len());
        assert_eq!(cells[0], "fast (default)");
        assert_eq!(cells[1], "csi.example.com");
        let ing =
            json!({"spec": {"ingressClassName": "nginx", "rules": [{"host": "a.example.com"}]}});
        let (_, cells) = layout("networking.k8s.io", "Ingress", &ing, json!("web"), &|_| {
            json!("1m")
        })
        .unwrap();
        assert_eq!(
            (cells[1].clone(), cells[2].clone()),
            (json!("nginx"), json!("a.example.com"))
        );
        let pvc = json!({"spec": {"storageClassName": "fast"}, "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"]}});
        let (_, cells) = layout("", "PersistentVolumeClaim", &pvc, json!("data"), &|_| {
            json!("1m")
        })
        .unwrap();
        assert_eq!(
            (cells[1].clone(), cells[4].clone()),
            (json!("Bound"), json!("RWO"))
        );
        assert!(layout("", "ConfigMap", &json!({}), json!("x"), &|_| json!("")).is_none());
    }
}
