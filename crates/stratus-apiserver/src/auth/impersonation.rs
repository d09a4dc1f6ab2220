//! Impersonation (`Impersonate-User`, `Impersonate-Group`,
//! `Impersonate-Uid`; kubectl's `--as` and `--as-group`): who a request
//! asks to act as, and what the caller must be allowed to `impersonate`.

use crate::auth::rbac::{self, Attributes};
use crate::controls::ReviewUser;
use crate::error::ApiError;
use crate::state::Inner;

/// The identity a request asks to act as (`Impersonate-User`,
/// `Impersonate-Group`, `Impersonate-Uid`), as kube-apiserver builds it:
/// `system:authenticated` added (and a ServiceAccount's groups for a
/// ServiceAccount user). Groups or a uid without a user are refused.
pub(crate) fn impersonated(headers: &http::HeaderMap) -> Result<Option<ReviewUser>, ApiError> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect()
    };
    let users = values("impersonate-user");
    let groups = values("impersonate-group");
    let uid = values("impersonate-uid").into_iter().next();
    let Some(username) = users.into_iter().next() else {
        if groups.is_empty() && uid.is_none() {
            return Ok(None);
        }
        return Err(ApiError::new(
            403,
            "Forbidden",
            "requested impersonation of groups or a uid without impersonating a user",
        ));
    };
    let mut all = groups;
    if let Some(rest) = username.strip_prefix("system:serviceaccount:")
        && let Some((ns, _)) = rest.split_once(':')
        && all.is_empty()
    {
        all.push("system:serviceaccounts".into());
        all.push(format!("system:serviceaccounts:{ns}"));
    }
    if username != "system:anonymous" && !all.iter().any(|g| g == "system:authenticated") {
        all.push("system:authenticated".into());
    }
    Ok(Some(ReviewUser {
        username,
        uid: uid.unwrap_or_default(),
        groups: all,
    }))
}

/// Groups every identity has, never checked when impersonating.
fn implied(group: &str) -> bool {
    group == "system:authenticated" || group.starts_with("system:serviceaccounts")
}

/// The constrained impersonation mode (kube-apiserver 1.37) that applies
/// to acting as `as_user`: `arbitrary-node` for a node and
/// `serviceaccount` for a ServiceAccount when only the name is asked for,
/// `user-info` for anyone else; none for a node or ServiceAccount with
/// groups or a uid (only the legacy check applies).
fn constrained_mode(as_user: &ReviewUser) -> Option<&'static str> {
    let only_name = as_user.groups.iter().all(|g| implied(g)) && as_user.uid.is_empty();
    let name = &as_user.username;
    if name.starts_with("system:node:") {
        only_name.then_some("arbitrary-node")
    } else if name.starts_with("system:serviceaccount:") {
        only_name.then_some("serviceaccount")
    } else {
        Some("user-info")
    }
}

/// What the caller must be allowed to do (`verb`: `impersonate`, or
/// `impersonate:<mode>` in constrained impersonation, where users, groups,
/// nodes and ServiceAccounts are in the `authentication.k8s.io` group) to
/// act as `as_user`: the user (ServiceAccount, node), each group asked
/// for, the uid.
fn checks(as_user: &ReviewUser, verb: &str) -> Vec<Attributes> {
    let constrained = verb != "impersonate";
    let identity_group = if constrained {
        "authentication.k8s.io"
    } else {
        ""
    };
    let impersonate = |api_group: &str, resource: &str, namespace: &str, name: &str| Attributes {
        verb: verb.into(),
        api_group: api_group.into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
        ..Attributes::default()
    };
    let username = &as_user.username;
    let account = username
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'));
    let node = username
        .strip_prefix("system:node:")
        .filter(|_| constrained);
    let mut checks = vec![match (account, node) {
        (Some((ns, name)), _) => impersonate(identity_group, "serviceaccounts", ns, name),
        (None, Some(node)) => impersonate(identity_group, "nodes", "", node),
        (None, None) => impersonate(identity_group, "users", "", username),
    }];
    if !as_user.uid.is_empty() {
        checks.push(impersonate(
            "authentication.k8s.io",
            "uids",
            "",
            &as_user.uid,
        ));
    }
    for group in as_user.groups.iter().filter(|g| !implied(g)) {
        checks.push(impersonate(identity_group, "groups", "", group));
    }
    checks
}

/// The first of `checks` the caller may not do, as kube-apiserver's 403.
fn first_denied(inner: &Inner, caller: &ReviewUser, checks: &[Attributes]) -> Result<(), ApiError> {
    match checks.iter().find(|a| !rbac::authorize(inner, caller, a).0) {
        None => Ok(()),
        Some(denied) => Err(ApiError::new(
            403,
            "Forbidden",
            rbac::forbidden_message(caller, denied),
        )),
    }
}

/// Whether `caller` may make `request` as `as_user`, as kube-apiserver
/// 1.37 decides: constrained impersonation first (the caller may
/// `impersonate-on:<mode>:<verb>` the request and `impersonate:<mode>` the
/// identity), then legacy impersonation (`impersonate` the identity). A
/// refusal is the first error met, so the constrained mode's when it
/// applies. `request` is None when the request routes nowhere (only the
/// legacy check is made).
pub(crate) fn authorize(
    inner: &Inner,
    caller: &ReviewUser,
    as_user: &ReviewUser,
    request: Option<&Attributes>,
) -> Result<(), ApiError> {
    let mut first = None;
    if let (Some(mode), Some(request)) = (constrained_mode(as_user), request) {
        let on = Attributes {
            verb: format!("impersonate-on:{mode}:{}", request.verb),
            ..request.clone()
        };
        let constrained = first_denied(inner, caller, std::slice::from_ref(&on)).and_then(|()| {
            first_denied(
                inner,
                caller,
                &checks(as_user, &format!("impersonate:{mode}")),
            )
        });
        match constrained {
            Ok(()) => return Ok(()),
            Err(e) => first = Some(e),
        }
    }
    first_denied(inner, caller, &checks(as_user, "impersonate")).map_err(|e| first.unwrap_or(e))
}
