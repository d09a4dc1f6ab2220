//! `valueFrom.fieldRef`: the pod fields the downward API exposes as
//! environment variables.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use k8s_openapi::api::core::v1::Pod;

/// The result of looking up a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FieldValue {
    /// The value.
    Known(String),
    /// A status field (`status.podIP`, ...) the pod does not carry yet.
    NotYetKnown,
}

/// Why a field path cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FieldError {
    #[error("unsupported pod version: {0}")]
    ApiVersion(String),
    #[error("unsupported fieldPath: {0}")]
    Unsupported(String),
    #[error("fieldPath {0:?} does not support subscript")]
    Subscript(String),
}

/// Split `metadata.labels['key']` into `("metadata.labels", "key")`.
fn split_subscript(path: &str) -> Option<(&str, &str)> {
    let body = path.strip_suffix("']")?;
    let open = body.find("['")?;
    Some((&body[..open], &body[open + 2..]))
}

/// Quote a string as Go's `%q` does for printable text: backslash escapes
/// for quotes, backslashes and control characters.
fn go_quote(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Format a map as the downward API does: `key="value"` lines, sorted by
/// key, without a trailing newline.
pub(crate) fn format_map(map: Option<&BTreeMap<String, String>>) -> String {
    let mut out = String::new();
    for (i, (k, v)) in map.into_iter().flatten().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(k);
        out.push('=');
        go_quote(v, &mut out);
    }
    out
}

fn join_ips(ips: Option<Vec<String>>) -> FieldValue {
    match ips {
        Some(ips) if !ips.is_empty() => FieldValue::Known(ips.join(",")),
        _ => FieldValue::NotYetKnown,
    }
}

/// Resolve a downward-API field path of `pod`.
pub(crate) fn resolve_field(
    pod: &Pod,
    api_version: Option<&str>,
    path: &str,
) -> Result<FieldValue, FieldError> {
    if let Some(v) = api_version
        && !v.is_empty()
        && v != "v1"
    {
        return Err(FieldError::ApiVersion(v.to_owned()));
    }
    let meta = &pod.metadata;
    if let Some((base, key)) = split_subscript(path) {
        let map = match base {
            "metadata.labels" => meta.labels.as_ref(),
            "metadata.annotations" => meta.annotations.as_ref(),
            _ => return Err(FieldError::Subscript(path.to_owned())),
        };
        return Ok(FieldValue::Known(
            map.and_then(|m| m.get(key)).cloned().unwrap_or_default(),
        ));
    }
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let known = |s: Option<&String>| FieldValue::Known(s.cloned().unwrap_or_default());
    Ok(match path {
        "metadata.name" => known(meta.name.as_ref()),
        "metadata.namespace" => known(meta.namespace.as_ref()),
        "metadata.uid" => known(meta.uid.as_ref()),
        "metadata.labels" => FieldValue::Known(format_map(meta.labels.as_ref())),
        "metadata.annotations" => FieldValue::Known(format_map(meta.annotations.as_ref())),
        "spec.nodeName" => known(spec.and_then(|s| s.node_name.as_ref())),
        "spec.serviceAccountName" => known(spec.and_then(|s| s.service_account_name.as_ref())),
        "status.podIP" => match status
            .and_then(|s| s.pod_ip.clone())
            .filter(|s| !s.is_empty())
        {
            Some(ip) => FieldValue::Known(ip),
            None => FieldValue::NotYetKnown,
        },
        "status.podIPs" => join_ips(status.and_then(|s| {
            s.pod_ips
                .as_ref()
                .map(|ips| ips.iter().map(|ip| ip.ip.clone()).collect())
                .or_else(|| s.pod_ip.clone().map(|ip| vec![ip]))
        })),
        "status.hostIP" => match status
            .and_then(|s| s.host_ip.clone())
            .filter(|s| !s.is_empty())
        {
            Some(ip) => FieldValue::Known(ip),
            None => FieldValue::NotYetKnown,
        },
        "status.hostIPs" => join_ips(status.and_then(|s| {
            s.host_ips
                .as_ref()
                .map(|ips| ips.iter().map(|ip| ip.ip.clone()).collect())
                .or_else(|| s.host_ip.clone().map(|ip| vec![ip]))
        })),
        _ => return Err(FieldError::Unsupported(path.to_owned())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodIP, PodSpec, PodStatus};

    fn pod() -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some("web".into());
        p.metadata.namespace = Some("shop".into());
        p.metadata.uid = Some("uid-1".into());
        p.metadata.labels = Some(BTreeMap::from([
            ("b".to_owned(), "two \"quoted\"".to_owned()),
            ("a".to_owned(), "one".to_owned()),
        ]));
        p.spec = Some(PodSpec {
            node_name: Some("vk-1".into()),
            service_account_name: Some("builder".into()),
            ..Default::default()
        });
        p
    }

    fn known(p: &Pod, path: &str) -> String {
        match resolve_field(p, Some("v1"), path).unwrap() {
            FieldValue::Known(v) => v,
            FieldValue::NotYetKnown => panic!("{path} unknown"),
        }
    }

    #[test]
    fn metadata_and_spec_fields() {
        let p = pod();
        assert_eq!(known(&p, "metadata.name"), "web");
        assert_eq!(known(&p, "metadata.namespace"), "shop");
        assert_eq!(known(&p, "metadata.uid"), "uid-1");
        assert_eq!(known(&p, "spec.nodeName"), "vk-1");
        assert_eq!(known(&p, "spec.serviceAccountName"), "builder");
        assert_eq!(
            known(&p, "metadata.labels"),
            "a=\"one\"\nb=\"two \\\"quoted\\\"\""
        );
        assert_eq!(known(&p, "metadata.annotations"), "");
        assert_eq!(known(&p, "metadata.labels['a']"), "one");
        assert_eq!(known(&p, "metadata.labels['missing']"), "");
        assert_eq!(known(&p, "metadata.annotations['x']"), "");
    }

    #[test]
    fn status_fields_when_known_and_not() {
        let mut p = pod();
        assert_eq!(
            resolve_field(&p, None, "status.podIP").unwrap(),
            FieldValue::NotYetKnown
        );
        assert_eq!(
            resolve_field(&p, None, "status.hostIPs").unwrap(),
            FieldValue::NotYetKnown
        );
        p.status = Some(PodStatus {
            pod_ip: Some("10.1.0.5".into()),
            pod_ips: Some(vec![
                PodIP {
                    ip: "10.1.0.5".into(),
                },
                PodIP {
                    ip: "fd00::5".into(),
                },
            ]),
            host_ip: Some("192.0.2.1".into()),
            ..Default::default()
        });
        assert_eq!(known(&p, "status.podIP"), "10.1.0.5");
        assert_eq!(known(&p, "status.podIPs"), "10.1.0.5,fd00::5");
        assert_eq!(known(&p, "status.hostIP"), "192.0.2.1");
        assert_eq!(known(&p, "status.hostIPs"), "192.0.2.1");
    }

    #[test]
    fn unsupported_paths_and_versions() {
        let p = pod();
        for path in [
            "status.phase",
            "spec.restartPolicy",
            "spec.schedulerName",
            "metadata.generateName",
            "",
        ] {
            assert!(
                matches!(
                    resolve_field(&p, None, path),
                    Err(FieldError::Unsupported(_))
                ),
                "{path}"
            );
        }
        assert!(matches!(
            resolve_field(&p, None, "metadata.name['x']"),
            Err(FieldError::Subscript(_))
        ));
        assert!(matches!(
            resolve_field(&p, Some("v2"), "metadata.name"),
            Err(FieldError::ApiVersion(_))
        ));
        assert!(resolve_field(&p, Some(""), "metadata.name").is_ok());
    }

    #[test]
    fn go_quoting_of_control_characters() {
        let mut out = String::new();
        go_quote("a\tb\u{1}\u{7f}\u{85}é", &mut out);
        assert_eq!(out, "\"a\\tb\\x01\\x7f\\u0085é\"");
    }
}
