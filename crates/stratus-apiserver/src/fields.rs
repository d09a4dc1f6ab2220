//! The fields each resource supports in field selectors, read from objects.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::resources::ResourceDef;

fn at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |v, k| v.get(*k))
}

fn text(obj: &Value, path: &[&str]) -> String {
    match at(obj, path) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// The value at `path` as a field selector compares it (strings as they
/// are, booleans and numbers printed, anything else empty).
pub(crate) fn text_at(obj: &Value, path: &[String]) -> String {
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    text(obj, &path)
}

/// The selectable fields of `def` (beyond `metadata.name` and
/// `metadata.namespace`), with their JSON paths and the value of an absent
/// boolean field.
pub(crate) fn selectable(def: &ResourceDef) -> &'static [(&'static str, &'static [&'static str])] {
    match (def.group, def.plural) {
        ("", "pods") => &[
            ("spec.nodeName", &["spec", "nodeName"]),
            ("spec.restartPolicy", &["spec", "restartPolicy"]),
            ("spec.schedulerName", &["spec", "schedulerName"]),
            ("spec.serviceAccountName", &["spec", "serviceAccountName"]),
            ("spec.hostNetwork", &["spec", "hostNetwork"]),
            ("status.phase", &["status", "phase"]),
            ("status.podIP", &["status", "podIP"]),
            ("status.nominatedNodeName", &["status", "nominatedNodeName"]),
        ],
        ("", "nodes") => &[("spec.unschedulable", &["spec", "unschedulable"])],
        ("", "events") => &[
            ("involvedObject.kind", &["involvedObject", "kind"]),
            ("involvedObject.namespace", &["involvedObject", "namespace"]),
            ("involvedObject.name", &["involvedObject", "name"]),
            ("involvedObject.uid", &["involvedObject", "uid"]),
            (
                "involvedObject.apiVersion",
                &["involvedObject", "apiVersion"],
            ),
            (
                "involvedObject.resourceVersion",
                &["involvedObject", "resourceVersion"],
            ),
            ("involvedObject.fieldPath", &["involvedObject", "fieldPath"]),
            ("reason", &["reason"]),
            ("reportingComponent", &["reportingComponent"]),
            ("source", &["source", "component"]),
            ("type", &["type"]),
        ],
        ("events.k8s.io", "events") => &[
            ("regarding.kind", &["regarding", "kind"]),
            ("regarding.namespace", &["regarding", "namespace"]),
            ("regarding.name", &["regarding", "name"]),
            ("regarding.uid", &["regarding", "uid"]),
            ("regarding.apiVersion", &["regarding", "apiVersion"]),
            (
                "regarding.resourceVersion",
                &["regarding", "resourceVersion"],
            ),
            ("regarding.fieldPath", &["regarding", "fieldPath"]),
            ("reason", &["reason"]),
            ("reportingController", &["reportingController"]),
            ("type", &["type"]),
        ],
        ("", "secrets") => &[("type", &["type"])],
        ("", "services") => &[
            ("spec.clusterIP", &["spec", "clusterIP"]),
            ("spec.type", &["spec", "type"]),
        ],
        ("", "namespaces") => &[("status.phase", &["status", "phase"])],
        ("certificates.k8s.io", "certificatesigningrequests") => {
            &[("spec.signerName", &["spec", "signerName"])]
        }
        _ => &[],
    }
}

/// True if `field` can be used in a field selector on `def`.
pub(crate) fn supported(def: &ResourceDef, field: &str) -> bool {
    field == "metadata.name"
        || (def.namespaced && field == "metadata.namespace")
        || selectable(def).iter().any(|(f, _)| *f == field)
}

/// The selectable field values of `obj`.
pub(crate) fn values(def: &ResourceDef, obj: &Value) -> BTreeMap<&'static str, String> {
    let mut out = BTreeMap::new();
    out.insert("metadata.name", text(obj, &["metadata", "name"]));
    if def.namespaced {
        out.insert("metadata.namespace", text(obj, &["metadata", "namespace"]));
    }
    for (field, path) in selectable(def) {
        let mut v = text(obj, path);
        if v.is_empty() && matches!(*field, "spec.unschedulable" | "spec.hostNetwork") {
            v = "false".to_owned();
        }
        out.insert(field, v);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{builtin, idx};
    use serde_json::json;

    #[test]
    fn pod_and_node_fields() {
        let defs = builtin();
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let v = values(&defs[idx::PODS], &pod);
        assert_eq!(v["spec.nodeName"], "n1");
        assert_eq!(v["status.phase"], "Running");
        assert_eq!(v["spec.schedulerName"], "");
        assert_eq!(v["spec.hostNetwork"], "false");
        let node = json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}});
        assert_eq!(
            values(&defs[idx::NODES], &node)["spec.unschedulable"],
            "true"
        );
        assert!(supported(&defs[idx::PODS], "status.podIP"));
        assert!(!supported(&defs[idx::PODS], "spec.containers"));
        assert!(!supported(&defs[idx::NODES], "metadata.namespace"));
    }
}
