//! RBAC escalation prevention: a Role or ClusterRole may only grant what
//! its writer holds, a binding only bind a role whose permissions its
//! writer holds, unless the writer has `escalate` / `bind` on it.

use serde_json::Value;

use crate::auth::rbac::{
    Attributes, RBAC_GROUP, authorize, cluster_role_rules, policy_of, strings,
};
use crate::controls::ReviewUser;
use crate::error::ApiError;
use crate::meta;
use crate::state::Inner;

/// Escalation prevention on writes of RBAC objects, as kube-apiserver's:
/// a Role or ClusterRole may only grant what its writer holds (or the
/// writer has `escalate` on it); a binding may only bind a role whose
/// permissions its writer holds (or the writer has `bind` on that role).
pub(crate) fn check_escalation(
    inner: &Inner,
    user: &ReviewUser,
    def: &crate::resources::ResourceDef,
    namespace: &str,
    obj: &Value,
) -> Result<(), ApiError> {
    if def.group != RBAC_GROUP || user.groups.iter().any(|g| g == "system:masters") {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let may = |verb: &str, resource: &str, ns: &str, name: &str| {
        authorize(
            inner,
            user,
            &Attributes {
                verb: verb.into(),
                api_group: RBAC_GROUP.into(),
                resource: resource.into(),
                namespace: ns.into(),
                name: name.into(),
                ..Attributes::default()
            },
        )
        .0
    };
    let (rules, scope_ns) = match def.kind {
        "Role" | "ClusterRole" => {
            if may("escalate", def.plural, namespace, name) {
                return Ok(());
            }
            (obj.get("rules").cloned().unwrap_or(Value::Null), namespace)
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            let kind = obj
                .pointer("/roleRef/kind")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let role = obj
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let (plural, role_ns) = match kind {
                "Role" => ("roles", namespace),
                _ => ("clusterroles", ""),
            };
            if may("bind", plural, role_ns, role) {
                return Ok(());
            }
            let policy = policy_of(inner, namespace);
            let rules = match kind {
                "Role" => policy
                    .roles
                    .iter()
                    .find(|r| meta::name(r) == role)
                    .and_then(|r| r.get("rules").cloned()),
                _ => policy
                    .cluster_roles
                    .iter()
                    .find(|r| meta::name(r) == role)
                    .map(|r| {
                        Value::Array(
                            cluster_role_rules(r, &policy.cluster_roles)
                                .into_iter()
                                .cloned()
                                .collect(),
                        )
                    }),
            };
            (rules.unwrap_or(Value::Null), namespace)
        }
        _ => return Ok(()),
    };
    let missing: Vec<String> = rules
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|rule| !rule_held(inner, user, rule, scope_ns))
        .map(describe_rule)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let groups: Vec<String> = user.groups.iter().map(|g| format!("{g:?}")).collect();
    Err(ApiError::new(
        403,
        "Forbidden",
        format!(
            "{}.{RBAC_GROUP} {name:?} is forbidden: user {:?} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}",
            def.plural,
            user.username,
            groups.join(" "),
            missing.join("\n")
        ),
    ))
}

/// Every request a rule grants is one `user` may make in `namespace`.
fn rule_held(inner: &Inner, user: &ReviewUser, rule: &Value, namespace: &str) -> bool {
    let verbs = strings(rule.get("verbs"));
    let urls = strings(rule.get("nonResourceURLs"));
    if !urls.is_empty() {
        return urls.iter().all(|url| {
            verbs.iter().all(|verb| {
                authorize(
                    inner,
                    user,
                    &Attributes {
                        verb: (*verb).into(),
                        path: Some((*url).into()),
                        ..Attributes::default()
                    },
                )
                .0
            })
        });
    }
    let groups = strings(rule.get("apiGroups"));
    let resources = strings(rule.get("resources"));
    let names = strings(rule.get("resourceNames"));
    let names: Vec<&str> = if names.is_empty() { vec![""] } else { names };
    groups.iter().all(|group| {
        resources.iter().all(|resource| {
            let (resource, sub) = resource.split_once('/').unwrap_or((resource, ""));
            verbs.iter().all(|verb| {
                names.iter().all(|name| {
                    authorize(
                        inner,
                        user,
                        &Attributes {
                            verb: (*verb).into(),
                            api_group: (*group).into(),
                            resource: resource.into(),
                            subresource: sub.into(),
                            namespace: namespace.into(),
                            name: (*name).into(),
                            path: None,
                        },
                    )
                    .0
                })
            })
        })
    })
}

/// A rule as kube-apiserver prints it in escalation errors.
fn describe_rule(rule: &Value) -> String {
    let list = |key: &str| {
        strings(rule.get(key))
            .iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut parts = Vec::new();
    if rule.get("nonResourceURLs").is_some() {
        parts.push(format!("NonResourceURLs:[{}]", list("nonResourceURLs")));
    } else {
        parts.push(format!("APIGroups:[{}]", list("apiGroups")));
        parts.push(format!("Resources:[{}]", list("resources")));
        if rule.get("resourceNames").is_some() {
            parts.push(format!("ResourceNames:[{}]", list("resourceNames")));
        }
    }
    parts.push(format!("Verbs:[{}]", list("verbs")));
    format!("{{{}}}", parts.join(", "))
}
