//! The checks that matter of the policy, scheduling, networking, storage,
//! node and RBAC kinds, with kube-apiserver's field paths and messages:
//! what a client relies on being refused (a PodDisruptionBudget with both
//! bounds, an Ingress path without a type, a rule without verbs, ...).

use serde_json::Value;

use crate::error::Cause;
use crate::meta::{at, str_at};
use crate::resources::ResourceDef;

fn required(causes: &mut Vec<Cause>, obj: &Value, path: &[&str]) {
    let present = match at(obj, path) {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    };
    if !present {
        causes.push(Cause::required(path.join("."), ""));
    }
}

fn items<'a>(obj: &'a Value, path: &[&str]) -> &'a [Value] {
    at(obj, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn rbac_rules(obj: &Value, causes: &mut Vec<Cause>) {
    for (i, rule) in items(obj, &["rules"]).iter().enumerate() {
        let list = |k: &str| rule.get(k).and_then(Value::as_array).map_or(0, Vec::len);
        if list("verbs") == 0 {
            causes.push(Cause::required(format!("rules[{i}].verbs"), ""));
        }
        if list("nonResourceURLs") > 0 {
            if list("resources") > 0 || list("apiGroups") > 0 {
                causes.push(Cause::invalid(
                    format!("rules[{i}].nonResourceURLs"),
                    "",
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
        } else if list("resources") == 0 {
            causes.push(Cause::required(
                format!("rules[{i}].resources"),
                "resource rules must supply at least one resource",
            ));
        } else if rule.get("apiGroups").is_none() {
            causes.push(Cause::required(
                format!("rules[{i}].apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
    }
}

/// The causes of an object of `def` (none for kinds checked elsewhere).
pub(crate) fn validate(def: &ResourceDef, obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    match (def.group, def.kind) {
        ("policy", "PodDisruptionBudget")
            if at(obj, &["spec", "minAvailable"]).is_some()
                && at(obj, &["spec", "maxUnavailable"]).is_some() =>
        {
            causes.push(Cause::invalid(
                "spec",
                "",
                "minAvailable and maxUnavailable cannot be both set",
            ));
        }
        ("scheduling.k8s.io", "PriorityClass") => required(&mut causes, obj, &["value"]),
        ("storage.k8s.io", "StorageClass") => required(&mut causes, obj, &["provisioner"]),
        ("storage.k8s.io", "CSIDriver") => required(&mut causes, obj, &["spec"]),
        ("storage.k8s.io", "VolumeAttachment") => {
            required(&mut causes, obj, &["spec", "attacher"]);
            required(&mut causes, obj, &["spec", "nodeName"]);
        }
        ("node.k8s.io", "RuntimeClass") => required(&mut causes, obj, &["handler"]),
        ("networking.k8s.io", "IngressClass") => {
            required(&mut causes, obj, &["spec", "controller"]);
        }
        ("networking.k8s.io", "Ingress") => {
            for (i, rule) in items(obj, &["spec", "rules"]).iter().enumerate() {
                for (j, path) in items(rule, &["http", "paths"]).iter().enumerate() {
                    let at_path = format!("spec.rules[{i}].http.paths[{j}]");
                    match path.get("pathType").and_then(Value::as_str) {
                        None => causes.push(Cause::required(format!("{at_path}.pathType"), "pathType must be specified")),
                        Some("Exact" | "Prefix" | "ImplementationSpecific") => {}
                        Some(other) => causes.push(Cause {
                            reason: "FieldValueNotSupported",
                            field: format!("{at_path}.pathType"),
                            message: format!("Unsupported value: {other:?}: supported values: \"Exact\", \"ImplementationSpecific\", \"Prefix\""),
                        }),
                    }
                    if path.pointer("/backend/service").is_none()
                        && path.pointer("/backend/resource").is_none()
                    {
                        causes.push(Cause::invalid(
                            format!("{at_path}.backend"),
                            "",
                            "one backend must be specified",
                        ));
                    }
                }
            }
        }
        ("networking.k8s.io", "NetworkPolicy") => {
            for (i, ty) in items(obj, &["spec", "policyTypes"]).iter().enumerate() {
                if !matches!(ty.as_str(), Some("Ingress" | "Egress")) {
                    causes.push(Cause {
                        reason: "FieldValueNotSupported",
                        field: format!("spec.policyTypes[{i}]"),
                        message: format!(
                            "Unsupported value: {ty}: supported values: \"Ingress\", \"Egress\""
                        ),
                    });
                }
            }
        }
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => rbac_rules(obj, &mut causes),
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            required(&mut causes, obj, &["roleRef", "name"]);
            match str_at(obj, &["roleRef", "kind"]) {
                Some("ClusterRole") => {}
                Some("Role") if def.kind == "RoleBinding" => {}
                other => causes.push(Cause {
                    reason: "FieldValueNotSupported",
                    field: "roleRef.kind".into(),
                    message: format!(
                        "Unsupported value: {:?}: supported values: {}",
                        other.unwrap_or_default(),
                        if def.kind == "RoleBinding" {
                            "\"Role\", \"ClusterRole\""
                        } else {
                            "\"ClusterRole\""
                        }
                    ),
                }),
            }
            for (i, s) in items(obj, &["subjects"]).iter().enumerate() {
                if !matches!(
                    s.get("kind").and_then(Value::as_str),
                    Some("User" | "Group" | "ServiceAccount")
                ) {
                    causes.push(Cause {
                        reason: "FieldValueNotSupported",
                        field: format!("subjects[{i}].kind"),
                        message: format!(
                            "Unsupported value: {:?}: supported values: \"ServiceAccount\", \"User\", \"Group\"",
                            s.get("kind").and_then(Value::as_str).unwrap_or_default()
                        ),
                    });
                }
                if s.get("name")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    causes.push(Cause::required(format!("subjects[{i}].name"), ""));
                }
            }
        }
        _ => {}
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtin;
    use serde_json::json;

    fn def(kind: &str) -> ResourceDef {
        builtin().into_iter().find(|d| d.kind == kind).unwrap()
    }

    #[test]
    fn the_checks_that_matter() {
        let both = json!({"spec": {"minAvailable": 1, "maxUnavailable": 1}});
        assert_eq!(validate(&def("PodDisruptionBudget"), &both).len(), 1);
        assert_eq!(
            validate(&def("PriorityClass"), &json!({}))[0].field,
            "value"
        );
        let ing = json!({"spec": {"rules": [{"http": {"paths": [{"path": "/", "backend": {"service": {"name": "web"}}}]}}]}});
        assert_eq!(
            validate(&def("Ingress"), &ing)[0].field,
            "spec.rules[0].http.paths[0].pathType"
        );
        let role = json!({"rules": [{"apiGroups": [""], "resources": ["pods"]}, {"verbs": ["get"], "resources": ["pods"]}]});
        let causes = validate(&def("Role"), &role);
        assert_eq!(causes[0].field, "rules[0].verbs");
        assert_eq!(causes[1].field, "rules[1].apiGroups");
        let binding = json!({"roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "Robot", "name": "x"}]});
        let causes = validate(&def("ClusterRoleBinding"), &binding);
        assert_eq!(causes.len(), 2, "{causes:?}");
        assert!(validate(&def("RoleBinding"), &json!({"roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "User", "name": "u"}]})).is_empty());
    }
}
