//! The fields each resource supports in field selectors, read from objects.

use std::borrow::Cow;

use serde_json::Value;

use crate::resources::ResourceDef;

fn at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |v, k| v.get(*k))
}

fn text<'a>(obj: &'a Value, path: &[&str]) -> Cow<'a, str> {
    match at(obj, path) {
        Some(Value::String(s)) => Cow::Borrowed(s),
        Some(Value::Bool(b)) => Cow::Owned(b.to_string()),
        Some(Value::Number(n)) => Cow::Owned(n.to_string()),
        _ => Cow::Borrowed(""),
    }
}

/// The value at `path` as a field selector compares it (strings as they
/// are, booleans and numbers printed, anything else empty).
pub(crate) fn text_at<'a>(obj: &'a Value, path: &[String]) -> Cow<'a, str> {
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

/// The value of the selectable `field` of `obj` as a field selector
/// compares it, or `None` if `def` has no such field. Only that field is
/// read (a watch with a field selector asks this of every event).
pub(crate) fn value<'a>(def: &ResourceDef, obj: &'a Value, field: &str) -> Option<Cow<'a, str>> {
    let path: &[&str] = match field {
        "metadata.name" => &["metadata", "name"],
        "metadata.namespace" if def.namespaced => &["metadata", "namespace"],
        _ => selectable(def).iter().find(|(f, _)| *f == field)?.1,
    };
    let v = text(obj, path);
    if v.is_empty() && matches!(field, "spec.unschedulable" | "spec.hostNetwork") {
        return Some(Cow::Borrowed("false"));
    }
    Some(v)
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
        let v = |field| value(&defs[idx::PODS], &pod, field).map(Cow::into_owned);
        assert_eq!(v("spec.nodeName").as_deref(), Some("n1"));
        assert_eq!(v("status.phase").as_deref(), Some("Running"));
        assert_eq!(v("metadata.namespace").as_deref(), Some("ns"));
        assert_eq!(v("spec.schedulerName").as_deref(), Some(""));
        assert_eq!(v("spec.hostNetwork").as_deref(), Some("false"));
        assert_eq!(v("spec.containers"), None);
        let node = json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}});
        let n = |field| value(&defs[idx::NODES], &node, field).map(Cow::into_owned);
        assert_eq!(n("spec.unschedulable").as_deref(), Some("true"));
        assert_eq!(n("metadata.name").as_deref(), Some("n"));
        assert_eq!(n("metadata.namespace"), None);
        assert!(supported(&defs[idx::PODS], "status.podIP"));
        assert!(!supported(&defs[idx::PODS], "spec.containers"));
        assert!(!supported(&defs[idx::NODES], "metadata.namespace"));
    }
}
