//! Names, labels and annotations that tie a remote object to its home pod
//! and to the virtual node that made it.
//!
//! A remote pod's name is derived from the home pod's namespace, name and
//! UID only, so a restarted provider computes the same name and finds the
//! pod instead of creating a second one. Its labels say which node made it
//! (the watch selects on that) and which home pod it stands for (by UID);
//! its annotations carry the home namespace and name, which may be too long
//! for label values.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Label on every remote object the provider made: the virtual node's name
/// (or, when that is not a valid label value, a hash of it).
pub const NODE_LABEL: &str = "offload.stratus.dev/node";
/// Label on a remote pod: the home pod's UID.
pub const HOME_UID_LABEL: &str = "offload.stratus.dev/home-uid";
/// Annotation on a remote pod: the home pod's namespace.
pub const HOME_NAMESPACE_ANNOTATION: &str = "offload.stratus.dev/home-namespace";
/// Annotation on a remote pod: the home pod's name.
pub const HOME_NAME_ANNOTATION: &str = "offload.stratus.dev/home-name";

/// The longest remote pod name: a DNS label, so that the remote kubelet
/// uses it as the hostname unchanged.
const MAX_NAME: usize = 63;
/// Hex digits of the UID-derived suffix.
const SUFFIX: usize = 10;

/// FNV-1a, 64 bits: stable across Rust versions and platforms (unlike
/// `DefaultHasher`), which names that must survive restarts need.
fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The remote pod name of home pod `namespace/name` with `uid`:
/// `<namespace>-<name>` (shortened to fit) and a suffix derived from all
/// three.
///
/// ```
/// use stratus_provider_kubernetes::naming::remote_pod_name;
///
/// let name = remote_pod_name("default", "web", "6f1c2a9e-0000-4000-8000-000000000001");
/// assert!(name.starts_with("default-web-"));
/// assert_eq!(name, remote_pod_name("default", "web", "6f1c2a9e-0000-4000-8000-000000000001"));
/// assert_ne!(name, remote_pod_name("default", "web", "6f1c2a9e-0000-4000-8000-000000000002"));
/// let long = remote_pod_name("default", &"a".repeat(240), "u");
/// assert!(long.len() <= 63);
/// ```
pub fn remote_pod_name(namespace: &str, name: &str, uid: &str) -> String {
    let identity = format!("{namespace}\0{name}\0{uid}");
    let suffix = format!("{:016x}", fnv1a(identity.as_bytes()));
    let mut base: String = format!("{namespace}-{name}")
        .chars()
        .take(MAX_NAME - SUFFIX - 1)
        .collect();
    while base.ends_with(['-', '.']) {
        base.pop();
    }
    // A dot would make the name a subdomain, not a hostname.
    let base = base.replace('.', "-");
    format!("{base}-{}", &suffix[..SUFFIX])
}

/// The value of [`NODE_LABEL`] for node `node`.
///
/// ```
/// use stratus_provider_kubernetes::naming::node_label_value;
///
/// assert_eq!(node_label_value("vk-offload"), "vk-offload");
/// let long = node_label_value(&format!("{}.example.com", "n".repeat(70)));
/// assert!(long.len() <= 63 && long.starts_with("node-"));
/// ```
pub fn node_label_value(node: &str) -> String {
    let valid = !node.is_empty()
        && node.len() <= 63
        && node
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && node.as_bytes()[0].is_ascii_alphanumeric()
        && node.as_bytes()[node.len() - 1].is_ascii_alphanumeric();
    if valid {
        node.to_owned()
    } else {
        format!("node-{:016x}", fnv1a(node.as_bytes()))
    }
}

/// The remote namespace when the mapping makes it too long: shortened, with
/// a hash of the whole so that two long names do not meet.
pub(crate) fn fit_namespace(name: String) -> String {
    if name.len() <= 63 {
        return name;
    }
    let hash = format!("{:016x}", fnv1a(name.as_bytes()));
    let mut base: String = name.chars().take(63 - SUFFIX - 1).collect();
    while base.ends_with('-') {
        base.pop();
    }
    format!("{base}-{}", &hash[..SUFFIX])
}

/// The home pod a remote pod stands for, read from its labels and
/// annotations.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HomeIdentity {
    /// The home namespace.
    pub namespace: String,
    /// The home name.
    pub name: String,
    /// The home UID.
    pub uid: String,
}

impl HomeIdentity {
    /// The identity of home pod `pod`, if it has a namespace, name and UID.
    pub fn of_home(pod: &Pod) -> Option<Self> {
        Some(Self {
            namespace: pod.metadata.namespace.clone()?,
            name: pod.metadata.name.clone()?,
            uid: pod.metadata.uid.clone()?,
        })
    }

    /// The identity recorded on remote pod `pod`, if it was made by node
    /// `node_label` (a [`node_label_value`]).
    pub fn of_remote(pod: &Pod, node_label: &str) -> Option<Self> {
        let labels = pod.metadata.labels.as_ref()?;
        if labels.get(NODE_LABEL).map(String::as_str) != Some(node_label) {
            return None;
        }
        let annotations = pod.metadata.annotations.as_ref()?;
        Some(Self {
            namespace: annotations.get(HOME_NAMESPACE_ANNOTATION)?.clone(),
            name: annotations.get(HOME_NAME_ANNOTATION)?.clone(),
            uid: labels.get(HOME_UID_LABEL)?.clone(),
        })
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Write this identity and the node's label into remote metadata.
    pub(crate) fn stamp(&self, meta: &mut ObjectMeta, node_label: &str) {
        let labels = meta.labels.get_or_insert_with(BTreeMap::new);
        labels.insert(NODE_LABEL.into(), node_label.into());
        labels.insert(HOME_UID_LABEL.into(), self.uid.clone());
        let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
        annotations.insert(HOME_NAMESPACE_ANNOTATION.into(), self.namespace.clone());
        annotations.insert(HOME_NAME_ANNOTATION.into(), self.name.clone());
    }
}

/// Whether remote object metadata `meta` carries node `node_label`'s mark.
pub(crate) fn made_by(meta: &ObjectMeta, node_label: &str) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(NODE_LABEL))
        .is_some_and(|v| v == node_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_hostnames() {
        for (ns, name) in [
            ("default", "web"),
            ("a", "x.y.z"),
            (&"n".repeat(63)[..], &"p".repeat(253)[..]),
            ("ns", "ends-with-dot."),
        ] {
            let remote = remote_pod_name(ns, name, "uid");
            assert!(remote.len() <= 63, "{remote}");
            assert!(
                remote
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{remote}"
            );
            assert!(!remote.contains("--") || name.contains("--"), "{remote}");
        }
    }

    #[test]
    fn the_same_pod_in_two_namespaces_gets_two_names() {
        assert_ne!(
            remote_pod_name("a-b", "c", "u"),
            remote_pod_name("a", "b-c", "u")
        );
    }

    #[test]
    fn long_namespaces_are_shortened_without_collisions() {
        let a = fit_namespace(format!("home-{}", "a".repeat(62)));
        let b = fit_namespace(format!("home-{}b", "a".repeat(61)));
        assert!(a.len() <= 63 && b.len() <= 63);
        assert_ne!(a, b);
        assert_eq!(fit_namespace("home-web".into()), "home-web");
    }
}
