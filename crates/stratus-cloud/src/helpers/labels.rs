//! Filtering of the provider's additional node labels.

use std::collections::BTreeMap;

/// True if a label key is in the `kubernetes.io` or `k8s.io` namespaces
/// (Go's regex `(^|\.)(kubernetes|k8s)\.io/`), which providers may not set
/// through additional labels.
///
/// ```
/// use stratus_cloud::helpers::is_kubernetes_namespaced_label;
///
/// assert!(is_kubernetes_namespaced_label("node.kubernetes.io/role"));
/// assert!(is_kubernetes_namespaced_label("k8s.io/x"));
/// assert!(!is_kubernetes_namespaced_label("example.com/kubernetes"));
/// assert!(!is_kubernetes_namespaced_label("notkubernetes.io/x"));
/// ```
pub fn is_kubernetes_namespaced_label(key: &str) -> bool {
    ["kubernetes.io/", "k8s.io/"].iter().any(|ns| {
        key.match_indices(ns)
            .any(|(i, _)| i == 0 || key.as_bytes()[i - 1] == b'.')
    })
}

/// True if `value` is a valid label value (Kubernetes's
/// `IsValidLabelValue`): at most 63 characters, empty or alphanumeric at
/// both ends with `-`, `_` and `.` between. The API server refuses a Node
/// whose labels break it, so an instance type, zone or region that does
/// cannot be written.
///
/// ```
/// use stratus_cloud::helpers::is_label_value;
///
/// assert!(is_label_value("m5.large"));
/// assert!(is_label_value(""));
/// assert!(!is_label_value("m5 large"));
/// assert!(!is_label_value("-eu-1"));
/// assert!(!is_label_value(&"x".repeat(64)));
/// ```
pub fn is_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    let alnum = |b: &u8| b.is_ascii_alphanumeric();
    bytes.len() <= 63
        && (bytes.is_empty()
            || (bytes.first().is_some_and(alnum)
                && bytes.last().is_some_and(alnum)
                && bytes
                    .iter()
                    .all(|b| alnum(b) || matches!(b, b'-' | b'_' | b'.'))))
}

/// The outcome of [`filter_additional_labels`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdditionalLabels {
    /// Labels to set.
    pub apply: BTreeMap<String, String>,
    /// Keys refused because they are in a Kubernetes namespace.
    pub rejected: Vec<String>,
    /// Keys already on the node with another value; never overwritten.
    pub conflicts: Vec<String>,
}

/// Decide which of the provider's additional labels to set on a node (Go's
/// node controller): keys in the Kubernetes namespaces are refused; keys the
/// node already has are never overwritten (a different value is reported as a
/// conflict); keys with the same value need no write.
///
/// ```
/// use std::collections::BTreeMap;
/// use stratus_cloud::helpers::filter_additional_labels;
///
/// let additional = BTreeMap::from([
///     ("example.com/pool".to_string(), "gpu".to_string()),
///     ("kubernetes.io/hostname".to_string(), "x".to_string()),
///     ("example.com/rack".to_string(), "r2".to_string()),
/// ]);
/// let existing = BTreeMap::from([("example.com/rack".to_string(), "r1".to_string())]);
/// let out = filter_additional_labels(&additional, &existing);
/// assert_eq!(out.apply.keys().collect::<Vec<_>>(), ["example.com/pool"]);
/// assert_eq!(out.rejected, ["kubernetes.io/hostname"]);
/// assert_eq!(out.conflicts, ["example.com/rack"]);
/// ```
pub fn filter_additional_labels(
    additional: &BTreeMap<String, String>,
    existing: &BTreeMap<String, String>,
) -> AdditionalLabels {
    let mut out = AdditionalLabels::default();
    for (key, value) in additional {
        if is_kubernetes_namespaced_label(key) {
            out.rejected.push(key.clone());
            continue;
        }
        match existing.get(key) {
            Some(current) if current == value => {}
            Some(_) => out.conflicts.push(key.clone()),
            None => {
                out.apply.insert(key.clone(), value.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_regex_edge_cases() {
        for key in [
            "kubernetes.io/x",
            "k8s.io/x",
            "node.kubernetes.io/x",
            "a.b.k8s.io/x",
            "topology.kubernetes.io/zone",
        ] {
            assert!(is_kubernetes_namespaced_label(key), "{key}");
        }
        for key in [
            "example.com/x",
            "xkubernetes.io/x",
            "k8s-io/x",
            "kubernetes.io",
            "example.com/k8s.io",
            "kubernetes.iox/y",
            "",
        ] {
            assert!(!is_kubernetes_namespaced_label(key), "{key}");
        }
    }

    #[test]
    fn same_value_needs_no_write() {
        let additional = BTreeMap::from([("a/b".to_owned(), "1".to_owned())]);
        let out = filter_additional_labels(&additional, &additional.clone());
        assert_eq!(out, AdditionalLabels::default());
    }
}
