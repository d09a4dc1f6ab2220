//! Authentication and RBAC authorization, optional (off by default, on with
//! [`super::ApiServerBuilder::rbac`]): bearer tokens name the caller, and
//! Roles, ClusterRoles and their bindings decide what it may do, as
//! kube-apiserver's RBAC authorizer does (`system:masters` always may;
//! aggregated ClusterRoles; `resourceNames`; subresources; non-resource URLs).
//!
//! The rule evaluation is pure (JSON roles and bindings in, a decision out)
//! and unit tested without a server.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::controls::ReviewUser;
use crate::meta::{self, str_at};
use crate::state::Inner;

/// The token of the kubeconfig's administrator ([`super::ApiServer::kubeconfig`],
/// [`super::ApiServer::client`]).
pub(crate) const ADMIN_TOKEN: &str = "stratus-harness";

pub(crate) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The kubeconfig's administrator.
pub(crate) fn administrator() -> ReviewUser {
    ReviewUser {
        username: "kubernetes-admin".into(),
        uid: String::new(),
        groups: vec!["system:masters".into(), "system:authenticated".into()],
    }
}

/// A request without credentials.
pub(crate) fn anonymous() -> ReviewUser {
    ReviewUser {
        username: "system:anonymous".into(),
        uid: String::new(),
        groups: vec!["system:unauthenticated".into()],
    }
}

/// What a request asks to do, as the authorizer sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Attributes {
    pub(crate) verb: String,
    pub(crate) api_group: String,
    pub(crate) resource: String,
    pub(crate) subresource: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// Set for non-resource requests (`/apis`, `/healthz`, ...).
    pub(crate) path: Option<String>,
}

pub(crate) fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn has(list: &[&str], value: &str) -> bool {
    list.iter().any(|v| *v == "*" || *v == value)
}

/// Whether one PolicyRule allows the request.
pub(crate) fn rule_allows(rule: &Value, attrs: &Attributes) -> bool {
    if !has(&strings(rule.get("verbs")), &attrs.verb) {
        return false;
    }
    if let Some(path) = &attrs.path {
        return strings(rule.get("nonResourceURLs")).iter().any(|u| {
            *u == "*"
                || *u == path
                || u.strip_suffix('*')
                    .is_some_and(|prefix| path.starts_with(prefix))
        });
    }
    if !has(&strings(rule.get("apiGroups")), &attrs.api_group) {
        return false;
    }
    let resources = strings(rule.get("resources"));
    let resource_ok = if attrs.subresource.is_empty() {
        has(&resources, &attrs.resource)
    } else {
        let combined = format!("{}/{}", attrs.resource, attrs.subresource);
        let any = format!("*/{}", attrs.subresource);
        resources
            .iter()
            .any(|r| *r == "*" || *r == combined || *r == any)
    };
    if !resource_ok {
        return false;
    }
    let names = strings(rule.get("resourceNames"));
    names.is_empty() || names.contains(&attrs.name.as_str())
}

/// Whether a binding's subject is `user`; `binding_ns` is the namespace of a
/// RoleBinding (a ServiceAccount subject defaults to it).
fn subject_matches(subject: &Value, user: &ReviewUser, binding_ns: &str) -> bool {
    let name = str_at(subject, &["name"]).unwrap_or_default();
    match str_at(subject, &["kind"]).unwrap_or_default() {
        "User" => user.username == name,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let ns = str_at(subject, &["namespace"])
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_ns);
            user.username == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

/// The rules of a ClusterRole, with those its aggregation rule collects
/// from the other ClusterRoles (what kube's aggregation controller writes).
pub(crate) fn cluster_role_rules<'a>(role: &'a Value, all: &'a [Arc<Value>]) -> Vec<&'a Value> {
    let mut rules: Vec<&Value> = role
        .get("rules")
        .and_then(Value::as_array)
        .map(|r| r.iter().collect())
        .unwrap_or_default();
    let selectors = role
        .pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array);
    if let Some(selectors) = selectors {
        for other in all {
            if meta::name(other) == meta::name(role) {
                continue;
            }
            if selectors
                .iter()
                .any(|s| crate::selectors::object_selector_matches(s, meta::labels(other)))
                && let Some(r) = other.get("rules").and_then(Value::as_array)
            {
                rules.extend(r.iter());
            }
        }
    }
    rules
}

/// The RBAC objects a decision reads.
pub(crate) struct Policy {
    pub(crate) cluster_roles: Vec<Arc<Value>>,
    pub(crate) cluster_role_bindings: Vec<Arc<Value>>,
    /// Roles of the request's namespace.
    pub(crate) roles: Vec<Arc<Value>>,
    /// RoleBindings of the request's namespace.
    pub(crate) role_bindings: Vec<Arc<Value>>,
}

/// The decision: allowed, and kube-apiserver's reason.
pub(crate) fn decide(policy: &Policy, user: &ReviewUser, attrs: &Attributes) -> (bool, String) {
    if user.groups.iter().any(|g| g == "system:masters") {
        return (true, String::new());
    }
    let cluster_role = |name: &str| policy.cluster_roles.iter().find(|r| meta::name(r) == name);
    for binding in &policy.cluster_role_bindings {
        let subjects = binding.get("subjects").and_then(Value::as_array);
        if !subjects.is_some_and(|s| s.iter().any(|s| subject_matches(s, user, ""))) {
            continue;
        }
        let role_name = str_at(binding, &["roleRef", "name"]).unwrap_or_default();
        if let Some(role) = cluster_role(role_name)
            && cluster_role_rules(role, &policy.cluster_roles)
                .iter()
                .any(|rule| rule_allows(rule, attrs))
        {
            return (
                true,
                format!(
                    "RBAC: allowed by ClusterRoleBinding {:?} of ClusterRole {role_name:?} to {}",
                    meta::name(binding),
                    user.username
                ),
            );
        }
    }
    if attrs.path.is_none() && !attrs.namespace.is_empty() {
        let in_namespace =
            |o: &&Arc<Value>| meta::meta_str(o, "namespace").is_none_or(|ns| ns == attrs.namespace);
        for binding in policy.role_bindings.iter().filter(in_namespace) {
            let subjects = binding.get("subjects").and_then(Value::as_array);
            if !subjects
                .is_some_and(|s| s.iter().any(|s| subject_matches(s, user, &attrs.namespace)))
            {
                continue;
            }
            let role_name = str_at(binding, &["roleRef", "name"]).unwrap_or_default();
            let rules: Vec<&Value> = match str_at(binding, &["roleRef", "kind"]) {
                Some("ClusterRole") => cluster_role(role_name)
                    .map(|r| cluster_role_rules(r, &policy.cluster_roles))
                    .unwrap_or_default(),
                _ => policy
                    .roles
                    .iter()
                    .filter(in_namespace)
                    .find(|r| meta::name(r) == role_name)
                    .and_then(|r| r.get("rules").and_then(Value::as_array))
                    .map(|r| r.iter().collect())
                    .unwrap_or_default(),
            };
            if rules.iter().any(|rule| rule_allows(rule, attrs)) {
                return (
                    true,
                    format!(
                        "RBAC: allowed by RoleBinding \"{}/{}\" of {role_name:?} to {}",
                        attrs.namespace,
                        meta::name(binding),
                        user.username
                    ),
                );
            }
        }
    }
    (false, String::new())
}

/// kube-apiserver's message for a denied request.
pub(crate) fn forbidden_message(user: &ReviewUser, attrs: &Attributes) -> String {
    let who = &user.username;
    if let Some(path) = &attrs.path {
        return format!(
            "forbidden: User {who:?} cannot {} path {path:?}",
            attrs.verb
        );
    }
    let resource = if attrs.subresource.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}/{}", attrs.resource, attrs.subresource)
    };
    let qualified = if attrs.api_group.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}.{}", attrs.resource, attrs.api_group)
    };
    let object = if attrs.name.is_empty() {
        format!("{qualified} is forbidden")
    } else {
        format!("{qualified} {:?} is forbidden", attrs.name)
    };
    let scope = if attrs.namespace.is_empty() {
        "at the cluster scope".to_owned()
    } else {
        format!("in the namespace {:?}", attrs.namespace)
    };
    format!(
        "{object}: User {who:?} cannot {} resource {resource:?} in API group {:?} {scope}",
        attrs.verb, attrs.api_group
    )
}

/// The RBAC objects of the store that matter to a request in `namespace`.
pub(crate) fn policy_of(inner: &Inner, namespace: &str) -> Policy {
    // The stored objects are shared, not copied: this runs on every request.
    let list = |plural: &str, ns: Option<&str>| -> Vec<Arc<Value>> {
        inner
            .defs()
            .find(RBAC_GROUP, "v1", plural)
            .map(|i| {
                inner
                    .store()
                    .list(i, ns)
                    .0
                    .into_iter()
                    .map(|s| s.object)
                    .collect()
            })
            .unwrap_or_default()
    };
    let namespaced = !namespace.is_empty();
    Policy {
        cluster_roles: list("clusterroles", None),
        cluster_role_bindings: list("clusterrolebindings", None),
        roles: if namespaced {
            list("roles", Some(namespace))
        } else {
            Vec::new()
        },
        role_bindings: if namespaced {
            list("rolebindings", Some(namespace))
        } else {
            Vec::new()
        },
    }
}

/// Decide a request against the store's RBAC objects.
pub(crate) fn authorize(inner: &Inner, user: &ReviewUser, attrs: &Attributes) -> (bool, String) {
    if user.groups.iter().any(|g| g == "system:masters") {
        return (true, String::new());
    }
    decide(&policy_of(inner, &attrs.namespace), user, attrs)
}

/// A SelfSubjectRulesReview's status: the rules of every binding of `user`
/// (cluster-wide, and in `namespace`).
pub(crate) fn rules_review(inner: &Inner, user: &ReviewUser, namespace: &str) -> Value {
    if user.groups.iter().any(|g| g == "system:masters") {
        return json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        });
    }
    let policy = policy_of(inner, namespace);
    let mut rules: Vec<&Value> = Vec::new();
    for binding in &policy.cluster_role_bindings {
        let subjects = binding.get("subjects").and_then(Value::as_array);
        if subjects.is_some_and(|s| s.iter().any(|s| subject_matches(s, user, ""))) {
            let name = str_at(binding, &["roleRef", "name"]).unwrap_or_default();
            if let Some(role) = policy.cluster_roles.iter().find(|r| meta::name(r) == name) {
                rules.extend(cluster_role_rules(role, &policy.cluster_roles));
            }
        }
    }
    for binding in &policy.role_bindings {
        let subjects = binding.get("subjects").and_then(Value::as_array);
        if !subjects.is_some_and(|s| s.iter().any(|s| subject_matches(s, user, namespace))) {
            continue;
        }
        let name = str_at(binding, &["roleRef", "name"]).unwrap_or_default();
        match str_at(binding, &["roleRef", "kind"]) {
            Some("ClusterRole") => {
                if let Some(role) = policy.cluster_roles.iter().find(|r| meta::name(r) == name) {
                    rules.extend(cluster_role_rules(role, &policy.cluster_roles));
                }
            }
            _ => {
                if let Some(r) = policy
                    .roles
                    .iter()
                    .find(|r| meta::name(r) == name)
                    .and_then(|r| r.get("rules").and_then(Value::as_array))
                {
                    rules.extend(r.iter());
                }
            }
        }
    }
    let (non_resource, resource): (Vec<&Value>, Vec<&Value>) = rules
        .into_iter()
        .partition(|r| r.get("nonResourceURLs").is_some());
    json!({
        "resourceRules": resource,
        "nonResourceRules": non_resource,
        "incomplete": false,
    })
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
        "rules": rules,
    })
}

fn binding(name: &str, role: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": RBAC_GROUP, "kind": "Group", "name": g}))
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

/// The bootstrap ClusterRoles and bindings RBAC clusters start with:
/// `cluster-admin` for `system:masters`, discovery and public information
/// for everyone, self reviews for the authenticated, `system:auth-delegator`
/// (TokenReviews and SubjectAccessReviews, for delegated authentication),
/// the `extension-apiserver-authentication-reader` Role in `kube-system`,
/// and the aggregated `admin` / `edit` / `view` roles.
pub(crate) fn bootstrap() -> Vec<Value> {
    let discovery_urls = json!([
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/healthz",
        "/livez",
        "/openapi",
        "/openapi/*",
        "/readyz",
        "/version",
        "/version/"
    ]);
    let aggregate = |name: &str, to: &[&str]| {
        let selectors: Vec<Value> = to
            .iter()
            .map(|t| json!({"matchLabels": {format!("rbac.authorization.k8s.io/aggregate-to-{t}"): "true"}}))
            .collect();
        let mut role = cluster_role(name, json!([]));
        role["aggregationRule"] = json!({"clusterRoleSelectors": selectors});
        role
    };
    let labelled = |name: &str, to: &str, rules: Value| {
        let mut role = cluster_role(name, rules);
        role["metadata"]["labels"][format!("rbac.authorization.k8s.io/aggregate-to-{to}")] =
            json!("true");
        role
    };
    let read = json!(["get", "list", "watch"]);
    let write = json!(["create", "delete", "deletecollection", "patch", "update"]);
    let namespaced_core = json!([
        "pods",
        "pods/log",
        "pods/status",
        "services",
        "services/status",
        "endpoints",
        "configmaps",
        "persistentvolumeclaims",
        "serviceaccounts",
        "events",
        "limitranges",
        "resourcequotas",
        "replicationcontrollers"
    ]);
    let workloads = json!([
        "deployments",
        "deployments/scale",
        "deployments/status",
        "replicasets",
        "replicasets/scale",
        "statefulsets",
        "statefulsets/scale",
        "daemonsets",
        "controllerrevisions"
    ]);
    vec![
        cluster_role(
            "cluster-admin",
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]}
            ]),
        ),
        binding("cluster-admin", "cluster-admin", &["system:masters"]),
        cluster_role(
            "system:discovery",
            json!([{"nonResourceURLs": discovery_urls, "verbs": ["get"]}]),
        ),
        binding(
            "system:discovery",
            "system:discovery",
            &["system:authenticated"],
        ),
        cluster_role(
            "system:public-info-viewer",
            json!([{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
        ),
        binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
        cluster_role(
            "system:basic-user",
            json!([
                {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}
            ]),
        ),
        binding(
            "system:basic-user",
            "system:basic-user",
            &["system:authenticated"],
        ),
        cluster_role(
            "system:auth-delegator",
            json!([
                {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}
            ]),
        ),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {
                "name": "extension-apiserver-authentication-reader",
                "namespace": "kube-system",
                "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}
            },
            "rules": [{
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": ["extension-apiserver-authentication"],
                "verbs": ["get", "list", "watch"]
            }]
        }),
        aggregate("admin", &["admin"]),
        aggregate("edit", &["edit"]),
        aggregate("view", &["view"]),
        labelled(
            "system:aggregate-to-view",
            "view",
            json!([
                {"apiGroups": [""], "resources": namespaced_core, "verbs": read},
                {"apiGroups": ["apps"], "resources": workloads, "verbs": read},
                {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": read}
            ]),
        ),
        labelled(
            "system:aggregate-to-edit",
            "edit",
            json!([
                {"apiGroups": [""], "resources": ["pods", "services", "endpoints", "configmaps", "secrets", "persistentvolumeclaims", "serviceaccounts"], "verbs": write},
                {"apiGroups": ["apps"], "resources": workloads, "verbs": write},
                {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": write},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": read}
            ]),
        ),
        labelled(
            "system:aggregate-to-admin",
            "admin",
            json!([
                {"apiGroups": [RBAC_GROUP], "resources": ["roles", "rolebindings"], "verbs": ["*"]},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["localsubjectaccessreviews"], "verbs": ["create"]}
            ]),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, groups: &[&str]) -> ReviewUser {
        ReviewUser {
            username: name.into(),
            uid: String::new(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        }
    }

    fn attrs(
        verb: &str,
        group: &str,
        resource: &str,
        sub: &str,
        ns: &str,
        name: &str,
    ) -> Attributes {
        Attributes {
            verb: verb.into(),
            api_group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
            path: None,
        }
    }

    fn policy() -> Policy {
        let mut cluster_roles: Vec<Value> = bootstrap()
            .into_iter()
            .filter(|o| o["kind"] == "ClusterRole")
            .collect();
        cluster_roles.push(json!({
            "metadata": {"name": "node-reader"},
            "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
                {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
                {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"], "verbs": ["get"]}
            ]
        }));
        let mut cluster_role_bindings: Vec<Value> = bootstrap()
            .into_iter()
            .filter(|o| o["kind"] == "ClusterRoleBinding")
            .collect();
        cluster_role_bindings.push(json!({
            "metadata": {"name": "ccm"},
            "roleRef": {"kind": "ClusterRole", "name": "node-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "ccm", "namespace": "kube-system"}]
        }));
        let shared = |v: Vec<Value>| v.into_iter().map(Arc::new).collect();
        Policy {
            cluster_roles: shared(cluster_roles),
            cluster_role_bindings: shared(cluster_role_bindings),
            roles: shared(vec![json!({
                "metadata": {"name": "lease-writer", "namespace": "team"},
                "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]}]
            })]),
            role_bindings: shared(vec![
                json!({
                    "metadata": {"name": "leases", "namespace": "team"},
                    "roleRef": {"kind": "Role", "name": "lease-writer"},
                    "subjects": [{"kind": "ServiceAccount", "name": "ccm"}]
                }),
                json!({
                    "metadata": {"name": "viewers", "namespace": "team"},
                    "roleRef": {"kind": "ClusterRole", "name": "view"},
                    "subjects": [{"kind": "User", "name": "alice"}]
                }),
            ]),
        }
    }

    #[test]
    fn bindings_grant_exactly_their_rules() {
        let p = policy();
        let ccm = user(
            "system:serviceaccount:kube-system:ccm",
            &["system:authenticated"],
        );
        assert!(decide(&p, &ccm, &attrs("list", "", "nodes", "", "", "")).0);
        assert!(!decide(&p, &ccm, &attrs("delete", "", "nodes", "", "", "n1")).0);
        // A subresource needs its own rule.
        assert!(decide(&p, &ccm, &attrs("patch", "", "nodes", "status", "", "n1")).0);
        assert!(!decide(&p, &ccm, &attrs("patch", "", "nodes", "", "", "n1")).0);
        // resourceNames restrict to the named objects.
        assert!(
            decide(
                &p,
                &ccm,
                &attrs("get", "", "configmaps", "", "team", "settings")
            )
            .0
        );
        assert!(
            !decide(
                &p,
                &ccm,
                &attrs("get", "", "configmaps", "", "team", "other")
            )
            .0
        );
        // A RoleBinding's ServiceAccount subject defaults to its namespace.
        let team_ccm = user("system:serviceaccount:team:ccm", &["system:authenticated"]);
        assert!(
            decide(
                &p,
                &team_ccm,
                &attrs("update", "coordination.k8s.io", "leases", "", "team", "l")
            )
            .0
        );
        assert!(
            !decide(
                &p,
                &team_ccm,
                &attrs("update", "coordination.k8s.io", "leases", "", "other", "l")
            )
            .0
        );
        assert!(
            !decide(
                &p,
                &ccm,
                &attrs("update", "coordination.k8s.io", "leases", "", "team", "l")
            )
            .0
        );
    }

    #[test]
    fn masters_discovery_and_aggregation() {
        let p = policy();
        let admin = administrator();
        assert!(
            decide(
                &p,
                &admin,
                &attrs("delete", "apps", "deployments", "", "x", "y")
            )
            .0
        );
        let bob = user("bob", &["system:authenticated"]);
        let discovery = Attributes {
            verb: "get".into(),
            path: Some("/apis/apps/v1".into()),
            ..Default::default()
        };
        assert!(decide(&p, &bob, &discovery).0);
        assert!(!decide(&p, &anonymous(), &discovery).0);
        let health = Attributes {
            verb: "get".into(),
            path: Some("/healthz".into()),
            ..Default::default()
        };
        assert!(decide(&p, &anonymous(), &health).0);
        // `view` aggregates the rules labelled for it.
        let alice = user("alice", &["system:authenticated"]);
        assert!(decide(&p, &alice, &attrs("list", "", "pods", "", "team", "")).0);
        assert!(
            decide(
                &p,
                &alice,
                &attrs("get", "apps", "deployments", "", "team", "web")
            )
            .0
        );
        assert!(!decide(&p, &alice, &attrs("delete", "", "pods", "", "team", "p")).0);
        assert!(!decide(&p, &alice, &attrs("list", "", "pods", "", "elsewhere", "")).0);
    }

    #[test]
    fn messages_match_kube_apiserver() {
        let bob = user("bob", &[]);
        assert_eq!(
            forbidden_message(&bob, &attrs("list", "", "pods", "", "default", "")),
            r#"pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "default""#
        );
        assert_eq!(
            forbidden_message(&bob, &attrs("patch", "", "nodes", "status", "", "n1")),
            r#"nodes "n1" is forbidden: User "bob" cannot patch resource "nodes/status" in API group "" at the cluster scope"#
        );
        assert_eq!(
            forbidden_message(&bob, &attrs("create", "apps", "deployments", "", "x", "")),
            r#"deployments.apps is forbidden: User "bob" cannot create resource "deployments" in API group "apps" in the namespace "x""#
        );
    }
}
