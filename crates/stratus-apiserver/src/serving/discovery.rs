//! Discovery documents: `/version`, `/api`, `/apis` and the resource lists.

use serde_json::{Value, json};

use crate::resources::{ResourceDef, groups};

pub(crate) fn api_versions(addr: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}],
    })
}

/// Kubernetes' version priority (`v2` > `v1` > `v1beta2` > `v1beta1` >
/// `v1alpha1` > anything else, alphabetically): lower sorts first.
fn version_priority(version: &str) -> (u8, std::cmp::Reverse<u32>, std::cmp::Reverse<u32>, String) {
    let parsed = version.strip_prefix('v').and_then(|rest| {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major: u32 = rest[..digits].parse().ok()?;
        match &rest[digits..] {
            "" => Some((0, major, 0)),
            tail => {
                let (level, minor) = tail
                    .strip_prefix("beta")
                    .map(|m| (1, m))
                    .or_else(|| tail.strip_prefix("alpha").map(|m| (2, m)))?;
                Some((level, major, minor.parse().ok()?))
            }
        }
    });
    match parsed {
        Some((level, major, minor)) => (
            level,
            std::cmp::Reverse(major),
            std::cmp::Reverse(minor),
            String::new(),
        ),
        None => (
            3,
            std::cmp::Reverse(0),
            std::cmp::Reverse(0),
            version.to_owned(),
        ),
    }
}

/// The groups served, in discovery order, each with its versions by
/// priority (the first is the preferred one).
pub(crate) fn group_versions(defs: &[ResourceDef]) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for (g, v) in groups(defs) {
        match out.iter_mut().find(|(group, _)| *group == g) {
            Some((_, versions)) => versions.push(v),
            None => out.push((g, vec![v])),
        }
    }
    for (_, versions) in &mut out {
        versions.sort_by_key(|v| version_priority(v));
    }
    out
}

fn group_doc(group: &str, versions: &[&str]) -> Value {
    let gvs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": gvs, "preferredVersion": gvs.first().cloned().unwrap_or_default()})
}

pub(crate) fn group_list(defs: &[ResourceDef]) -> Value {
    let groups: Vec<Value> = group_versions(defs)
        .into_iter()
        .map(|(g, v)| group_doc(g, &v))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub(crate) fn group(defs: &[ResourceDef], name: &str) -> Option<Value> {
    group_versions(defs)
        .into_iter()
        .find(|(g, _)| *g == name)
        .map(|(g, v)| {
            let mut doc = group_doc(g, &v);
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            doc
        })
}

/// A subresource's kind (with its group and version when they differ from
/// the resource's) and verbs.
fn subresource_meta(
    def: &ResourceDef,
    sub: &str,
) -> (
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
) {
    match sub {
        "status" => (def.kind, "", "", &["get", "patch", "update"]),
        "approval" | "ephemeralcontainers" => (def.kind, "", "", &["get", "patch", "update"]),
        "finalize" => (def.kind, "", "", &["update"]),
        "binding" => ("Binding", "", "", &["create"]),
        "eviction" => ("Eviction", "policy", "v1", &["create"]),
        "scale" => ("Scale", "autoscaling", "v1", &["get", "patch", "update"]),
        "log" => ("Pod", "", "", &["get"]),
        "exec" => ("PodExecOptions", "", "", &["create", "get"]),
        "attach" => ("PodAttachOptions", "", "", &["create", "get"]),
        "portforward" => ("PodPortForwardOptions", "", "", &["create", "get"]),
        "proxy" => (
            "NodeProxyOptions",
            "",
            "",
            &["create", "delete", "get", "patch", "update"],
        ),
        _ => (def.kind, "", "", &["get"]),
    }
}

fn subresource(def: &ResourceDef, sub: &str) -> Value {
    let (kind, group, version, verbs) = subresource_meta(def, sub);
    let mut doc = json!({
        "name": format!("{}/{sub}", def.plural),
        "singularName": "",
        "namespaced": def.namespaced,
        "kind": kind,
        "verbs": verbs,
    });
    if !group.is_empty() {
        doc["group"] = json!(group);
        doc["version"] = json!(version);
    }
    doc
}

pub(crate) fn resource_list(defs: &[ResourceDef], group: &str, version: &str) -> Option<Value> {
    let in_group: Vec<&ResourceDef> = defs
        .iter()
        .filter(|d| d.group == group && d.version == version)
        .collect();
    if in_group.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for d in in_group {
        let mut doc = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": d.verbs(),
        });
        if !d.short_names.is_empty() {
            doc["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            doc["categories"] = json!(d.categories);
        }
        resources.push(doc);
        for sub in d.subresources {
            resources.push(subresource(d, sub));
        }
    }
    let gv = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

/// The root document: every path served.
pub(crate) fn root(defs: &[ResourceDef]) -> Value {
    let mut paths = vec!["/api".to_owned(), "/api/v1".to_owned(), "/apis".to_owned()];
    for (g, v) in groups(defs) {
        paths.push(format!("/apis/{g}"));
        paths.push(format!("/apis/{g}/{v}"));
    }
    paths.extend(["/healthz", "/livez", "/readyz", "/version"].map(str::to_owned));
    json!({"paths": paths})
}

/// The media type of aggregated discovery a client accepts, if any:
/// `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList` (or
/// `v2beta1`, which kubectl 1.27–1.29 ask for), in the client's order.
pub(crate) fn aggregated_version(accept: &str) -> Option<&'static str> {
    accept.split(',').find_map(|range| {
        let mut parts = range.split(';').map(str::trim);
        if parts.next() != Some("application/json") {
            return None;
        }
        let (mut group, mut version, mut as_kind) = (None, None, None);
        for p in parts {
            match p.split_once('=') {
                Some(("g", g)) => group = Some(g),
                Some(("v", v)) => version = Some(v),
                Some(("as", a)) => as_kind = Some(a),
                _ => {}
            }
        }
        if group != Some("apidiscovery.k8s.io") || as_kind != Some("APIGroupDiscoveryList") {
            return None;
        }
        match version {
            Some("v2") => Some("v2"),
            Some("v2beta1") => Some("v2beta1"),
            _ => None,
        }
    })
}

fn resource_discovery(d: &ResourceDef) -> Value {
    let mut doc = json!({
        "resource": d.plural,
        "responseKind": {"group": d.group, "version": d.version, "kind": d.kind},
        "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": d.singular,
        "verbs": d.verbs(),
    });
    if !d.short_names.is_empty() {
        doc["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        doc["categories"] = json!(d.categories);
    }
    if !d.subresources.is_empty() {
        let subs: Vec<Value> = d
            .subresources
            .iter()
            .map(|sub| {
                let (kind, group, version, verbs) = subresource_meta(d, sub);
                let (group, version) = if group.is_empty() {
                    (d.group, d.version)
                } else {
                    (group, version)
                };
                json!({
                    "subresource": sub,
                    "responseKind": {"group": group, "version": version, "kind": kind},
                    "verbs": verbs,
                })
            })
            .collect();
        doc["subresources"] = json!(subs);
    }
    doc
}

/// Aggregated discovery (`APIGroupDiscoveryList`, `apidiscovery.k8s.io`
/// `version`): every resource of the core group (`core`) or of the named
/// groups in one document, as kubectl asks for first.
pub(crate) fn aggregated(defs: &[ResourceDef], core: bool, version: &str) -> Value {
    let gvs: Vec<(&str, Vec<&str>)> = if core {
        vec![("", vec!["v1"])]
    } else {
        group_versions(defs)
    };
    let items: Vec<Value> = gvs
        .into_iter()
        .map(|(g, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = defs
                        .iter()
                        .filter(|d| d.group == g && d.version == *v)
                        .map(resource_discovery)
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({
                "metadata": {"name": g, "creationTimestamp": null},
                "versions": versions,
            })
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregated_discovery_is_negotiated_in_the_clients_order() {
        assert_eq!(
            aggregated_version(
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
            ),
            Some("v2")
        );
        assert_eq!(
            aggregated_version(
                "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList, application/json; g=apidiscovery.k8s.io; v=v2beta1; as=APIGroupDiscoveryList"
            ),
            Some("v2beta1")
        );
        assert_eq!(aggregated_version("application/json, */*"), None);
    }
}

#[cfg(test)]
mod version_tests {
    use super::version_priority;

    #[test]
    fn versions_sort_as_kubernetes_sorts_them() {
        let mut v = vec![
            "v1alpha1",
            "v1beta1",
            "foo",
            "v2",
            "v1",
            "v1beta2",
            "v11alpha2",
            "bar",
        ];
        v.sort_by_key(|x| version_priority(x));
        assert_eq!(
            v,
            [
                "v2",
                "v1",
                "v1beta2",
                "v1beta1",
                "v11alpha2",
                "v1alpha1",
                "bar",
                "foo"
            ]
        );
    }
}
