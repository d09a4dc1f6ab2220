//! Validation: names, required fields and immutable fields.

use serde_json::Value;

use crate::error::Cause;
use crate::meta::{at, str_at};
use crate::resources::{NameRule, ResourceDef};

/// An RFC 1123 label of at most `max` characters (an RFC 1035 label, starting
/// with a letter, when `first_alpha`).
pub(crate) fn dns_label(s: &str, max: usize, first_alpha: bool) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.bytes().next().is_some_and(|b| {
            if first_alpha {
                b.is_ascii_lowercase()
            } else {
                b.is_ascii_alphanumeric()
            }
        })
        && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
}

/// An RFC 1123 subdomain (at most 253 characters of dot-separated labels).
pub(crate) fn dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(|p| dns_label(p, 63, false))
}

/// kube's `RegexError`: the message, examples and the pattern it checks.
pub(crate) fn regex_error(message: &str, pattern: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{message} (e.g. {}regex used for validation is '{pattern}')",
        examples.join(" or ")
    )
}

/// Why `s` is not an RFC 1123 subdomain, in kube-apiserver's words.
pub(crate) fn dns_subdomain_message() -> String {
    regex_error(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
        &["example.com"],
    )
}

/// Why `s` is not an RFC 1035 label, in kube-apiserver's words.
pub(crate) fn dns1035_label_message() -> String {
    regex_error(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
        "[a-z]([-a-z0-9]*[a-z0-9])?",
        &["my-name", "abc-123"],
    )
}

const LABEL_KEY_MESSAGE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_KEY_PATTERN: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, the shape of a label key's
/// name and of a non-empty label value.
fn label_shaped(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// Why `key` is not a label key (a qualified name), in kube's words
/// (`IsLabelKey`; annotation keys are checked lowercased).
pub(crate) fn label_key_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else if prefix.len() > 253 {
                errs.push("prefix part must be no more than 253 bytes".to_owned());
            } else if !dns_subdomain(prefix) {
                errs.push(format!("prefix part {}", dns_subdomain_message()));
            }
            name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_MESSAGE, LABEL_KEY_PATTERN, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 bytes".to_owned());
    }
    if !label_shaped(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_MESSAGE,
                LABEL_KEY_PATTERN,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Why `value` is not a label value, in kube's words (`IsLabelValue`).
pub(crate) fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 bytes".to_owned());
    }
    if !(value.is_empty() || label_shaped(value)) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?",
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Check an object name against the resource's rule; the message is the API
/// server's.
pub(crate) fn name_error(rule: NameRule, name: &str) -> Option<String> {
    match rule {
        NameRule::Subdomain if !dns_subdomain(name) => Some(dns_subdomain_message()),
        NameRule::Label if !dns_label(name, 63, false) => Some(regex_error(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            "[a-z0-9]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "123-abc"],
        )),
        NameRule::PathSegment
            if name.is_empty() || name == "." || name == ".." || name.contains(['/', '%']) =>
        {
            Some(format!(
                "may not be '.' or '..', and may not contain '/' or '%': {name:?}"
            ))
        }
        _ => None,
    }
}

/// The most bytes an object's annotations (keys and values) may take.
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

/// kube-apiserver's checks of `metadata.labels` and
/// `metadata.annotations`: keys are qualified names (annotation keys in
/// any case), label values short and plain, annotations at most 256 KiB.
fn validate_labels_and_annotations(obj: &Value, causes: &mut Vec<Cause>) {
    if let Some(labels) = at(obj, &["metadata", "labels"]).and_then(Value::as_object) {
        for (key, value) in labels {
            for why in label_key_errors(key) {
                causes.push(Cause::invalid("metadata.labels", key, &why));
            }
            let value = value.as_str().unwrap_or_default();
            for why in label_value_errors(value) {
                causes.push(Cause::invalid("metadata.labels", value, &why));
            }
        }
    }
    if let Some(annotations) = at(obj, &["metadata", "annotations"]).and_then(Value::as_object) {
        let mut total = 0;
        for (key, value) in annotations {
            for why in label_key_errors(&key.to_lowercase()) {
                causes.push(Cause::invalid("metadata.annotations", key, &why));
            }
            total += key.len() + value.as_str().map_or(0, str::len);
        }
        if total > ANNOTATIONS_MAX_BYTES {
            causes.push(Cause::too_long(
                "metadata.annotations",
                ANNOTATIONS_MAX_BYTES,
            ));
        }
    }
}

/// Why `key` is not a ConfigMap or Secret key (kube's
/// `IsConfigMapKey`), if it is not.
fn config_key_error(key: &str) -> Option<&'static str> {
    if key.len() > 253 {
        Some("must be no more than 253 characters")
    } else if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        Some(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
        )
    } else if key == "." {
        Some("must not be '.'")
    } else if key == ".." {
        Some("must not be '..'")
    } else {
        None
    }
}

/// Validate a new or updated object.
pub(crate) fn validate(def: &ResourceDef, obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = str_at(obj, &["metadata", "name"]).unwrap_or_default();
    if name.is_empty() {
        causes.push(Cause::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else if let Some(msg) = name_error(def.names, name) {
        causes.push(Cause::invalid("metadata.name", name, msg.as_str()));
    }
    validate_labels_and_annotations(obj, &mut causes);
    match (def.group, def.kind) {
        ("", "ConfigMap" | "Secret") => {
            for field in ["data", "binaryData", "stringData"] {
                for key in obj
                    .get(field)
                    .and_then(Value::as_object)
                    .into_iter()
                    .flat_map(|m| m.keys())
                {
                    if let Some(why) = config_key_error(key) {
                        causes.push(Cause::invalid(format!("{field}[{key}]"), key, why));
                    }
                }
            }
        }
        ("", "Pod") => {
            let containers = at(obj, &["spec", "containers"]).and_then(Value::as_array);
            match containers {
                None => causes.push(Cause::required("spec.containers", "")),
                Some(list) if list.is_empty() => {
                    causes.push(Cause::required("spec.containers", ""))
                }
                Some(list) => {
                    for (i, c) in list.iter().enumerate() {
                        if c.get("name")
                            .and_then(Value::as_str)
                            .is_none_or(str::is_empty)
                        {
                            causes.push(Cause::required(format!("spec.containers[{i}].name"), ""));
                        }
                        if c.get("image")
                            .and_then(Value::as_str)
                            .is_none_or(str::is_empty)
                        {
                            causes.push(Cause::required(format!("spec.containers[{i}].image"), ""));
                        }
                    }
                }
            }
        }
        ("", "Service") => {
            let ty = str_at(obj, &["spec", "type"]).unwrap_or("ClusterIP");
            let headless = str_at(obj, &["spec", "clusterIP"]) == Some("None");
            let ports = at(obj, &["spec", "ports"]).and_then(Value::as_array);
            if ty != "ExternalName" && !headless && ports.is_none_or(Vec::is_empty) {
                causes.push(Cause::required("spec.ports", ""));
            }
            if !matches!(
                ty,
                "ClusterIP" | "NodePort" | "LoadBalancer" | "ExternalName"
            ) {
                causes.push(Cause::unsupported(
                    "spec.type",
                    &format!("{ty:?}"),
                    &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
                ));
            }
            for (i, p) in ports.into_iter().flatten().enumerate() {
                // The target port defaults to the port (before validation
                // in kube-apiserver), and is checked the same way when it
                // is a number.
                let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
                let target = match p.get("targetPort") {
                    None | Some(Value::Null) => Some(port),
                    Some(t) => t.as_i64(),
                };
                for (field, value) in [("port", Some(port)), ("targetPort", target)] {
                    let Some(port) = value else {
                        continue;
                    };
                    if !(1..=65535).contains(&port) {
                        causes.push(Cause::invalid_number(
                            format!("spec.ports[{i}].{field}"),
                            port,
                            "must be between 1 and 65535, inclusive",
                        ));
                    }
                }
            }
        }
        ("coordination.k8s.io", "Lease") => {
            if let Some(d) = at(obj, &["spec", "leaseDurationSeconds"]).and_then(Value::as_i64)
                && d <= 0
            {
                causes.push(Cause::invalid_number(
                    "spec.leaseDurationSeconds",
                    d,
                    "must be greater than 0",
                ));
            }
        }
        _ => {}
    }
    causes
}

/// Fields that may not be set when an object is created.
pub(crate) fn on_create(def: &ResourceDef, obj: &Value) -> Vec<Cause> {
    match (def.group, def.kind) {
        ("", "Pod")
            if at(obj, &["spec", "ephemeralContainers"])
                .and_then(Value::as_array)
                .is_some_and(|l| !l.is_empty()) =>
        {
            vec![Cause::forbidden(
                "spec.ephemeralContainers",
                "cannot be set on create",
            )]
        }
        _ => Vec::new(),
    }
}

/// Fields that may not change on update (through the subresource `sub`, if
/// any).
pub(crate) fn immutable(
    def: &ResourceDef,
    sub: Option<&str>,
    old: &Value,
    new: &Value,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    match (def.group, def.kind) {
        ("", "Pod") if sub == Some("ephemeralcontainers") => {
            causes.extend(ephemeral_container_changes(old, new));
        }
        ("", "Node") => {
            let old_id = str_at(old, &["spec", "providerID"]).unwrap_or_default();
            let new_id = str_at(new, &["spec", "providerID"]).unwrap_or_default();
            if !old_id.is_empty() && old_id != new_id {
                causes.push(Cause::forbidden(
                    "spec.providerID",
                    "node updates may not change providerID except from \"\" to valid",
                ));
            }
        }
        ("", "Pod") => {
            let normalize = |pod: &Value| {
                let mut spec = pod.get("spec").cloned().unwrap_or(Value::Null);
                if let Some(m) = spec.as_object_mut() {
                    for field in [
                        "activeDeadlineSeconds",
                        "tolerations",
                        "terminationGracePeriodSeconds",
                        "schedulingGates",
                    ] {
                        m.remove(field);
                    }
                    for list in ["containers", "initContainers"] {
                        if let Some(Value::Array(cs)) = m.get_mut(list) {
                            for c in cs {
                                if let Some(cm) = c.as_object_mut() {
                                    cm.remove("image");
                                }
                            }
                        }
                    }
                }
                spec
            };
            if normalize(old) != normalize(new) {
                causes.push(Cause::forbidden(
                    "spec",
                    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
                ));
            }
            let old_tol = at(old, &["spec", "tolerations"])
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let new_tol = at(new, &["spec", "tolerations"])
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if old_tol.iter().any(|t| !new_tol.contains(t)) {
                causes.push(Cause::forbidden(
                    "spec.tolerations",
                    "existing toleration can not be modified except its tolerationSeconds",
                ));
            }
        }
        ("certificates.k8s.io", "CertificateSigningRequest")
            if old.get("spec") != new.get("spec") =>
        {
            causes.push(Cause::forbidden("spec", "field is immutable"));
        }
        _ => {}
    }
    causes
}

/// An ephemeral container, once added, may be neither removed nor changed
/// (kube-apiserver's `ValidatePodEphemeralContainersUpdate`).
fn ephemeral_container_changes(old: &Value, new: &Value) -> Vec<Cause> {
    let list = |pod: &Value| {
        at(pod, &["spec", "ephemeralContainers"])
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let new = list(new);
    list(old)
        .iter()
        .filter_map(|before| {
            let name = before
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let after = new
                .iter()
                .find(|c| c.get("name").and_then(Value::as_str) == Some(name));
            match after {
                None => Some(format!(
                    "existing ephemeral containers {name:?} may not be removed\n"
                )),
                Some(after) if after != before => Some(format!(
                    "existing ephemeral containers {name:?} may not be changed\n"
                )),
                Some(_) => None,
            }
        })
        .map(|message| Cause::forbidden("spec.ephemeralContainers", &message))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{builtin, idx};
    use serde_json::json;

    #[test]
    fn names() {
        assert!(name_error(NameRule::Subdomain, "a.b-c").is_none());
        assert!(name_error(NameRule::Subdomain, "A").is_some());
        assert!(name_error(NameRule::Label, "a.b").is_some());
        assert!(name_error(NameRule::Label, "1abc").is_none());
        assert!(!dns_label("1abc", 63, true));
        assert!(dns_label("abc-1", 63, true));
        assert!(name_error(NameRule::PathSegment, "system:controller:x").is_none());
        assert!(name_error(NameRule::PathSegment, "a/b").is_some());
        assert!(name_error(NameRule::PathSegment, "..").is_some());
    }

    #[test]
    fn required_fields() {
        let defs = builtin();
        let causes = validate(
            &defs[idx::PODS],
            &json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}),
        );
        assert_eq!(causes[0].field, "spec.containers[0].image");
        let causes = validate(
            &defs[idx::SERVICES],
            &json!({"metadata": {"name": "s"}, "spec": {}}),
        );
        assert_eq!(causes[0].field, "spec.ports");
        let causes = validate(&defs[idx::NODES], &json!({"metadata": {}}));
        assert_eq!(causes[0].field, "metadata.name");
    }

    #[test]
    fn immutables() {
        let defs = builtin();
        let old = json!({"spec": {"providerID": "aws:///a/i-1"}});
        assert!(
            !immutable(
                &defs[idx::NODES],
                None,
                &old,
                &json!({"spec": {"providerID": "aws:///a/i-2"}})
            )
            .is_empty()
        );
        assert!(immutable(&defs[idx::NODES], None, &json!({"spec": {}}), &old).is_empty());
        let pod = json!({"spec": {"containers": [{"name": "c", "image": "a"}], "nodeName": "n"}});
        let image = json!({"spec": {"containers": [{"name": "c", "image": "b"}], "nodeName": "n"}});
        assert!(immutable(&defs[idx::PODS], None, &pod, &image).is_empty());
        let moved = json!({"spec": {"containers": [{"name": "c", "image": "a"}], "nodeName": "m"}});
        assert!(!immutable(&defs[idx::PODS], None, &pod, &moved).is_empty());
        // Ephemeral containers: added through their subresource only, and
        // never removed or changed there.
        let debugged = json!({"spec": {"containers": [{"name": "c", "image": "a"}], "nodeName": "n",
            "ephemeralContainers": [{"name": "d", "image": "busybox"}]}});
        assert!(on_create(&defs[idx::PODS], &pod).is_empty());
        assert_eq!(
            on_create(&defs[idx::PODS], &debugged)[0].message,
            "Forbidden: cannot be set on create"
        );
        assert!(!immutable(&defs[idx::PODS], None, &pod, &debugged).is_empty());
        let sub = Some("ephemeralcontainers");
        assert!(immutable(&defs[idx::PODS], sub, &pod, &debugged).is_empty());
        let removed = immutable(&defs[idx::PODS], sub, &debugged, &pod);
        assert_eq!(removed[0].field, "spec.ephemeralContainers");
        assert!(removed[0].message.contains("\"d\" may not be removed"));
        let mut changed = debugged.clone();
        changed["spec"]["ephemeralContainers"][0]["image"] = json!("other");
        let changed = immutable(&defs[idx::PODS], sub, &debugged, &changed);
        assert!(changed[0].message.contains("\"d\" may not be changed"));
    }
}
