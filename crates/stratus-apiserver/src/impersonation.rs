//! Impersonation (`Impersonate-User`, `Impersonate-Group`,
//! `Impersonate-Uid`; kubectl's `--as` and `--as-group`): who a request
//! asks to act as, and what the caller must be allowed to `impersonate`.

use super::controls::ReviewUser;
use super::error::ApiError;
use super::rbac::Attributes;

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

/// What the caller must be allowed to `impersonate` to act as `as_user`:
/// the user (or ServiceAccount), each group asked for, the uid.
pub(crate) fn impersonation_checks(as_user: &ReviewUser) -> Vec<Attributes> {
    let impersonate = |api_group: &str, resource: &str, namespace: &str, name: &str| Attributes {
        verb: "impersonate".into(),
        api_group: api_group.into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
        ..Attributes::default()
    };
    let mut checks = vec![match as_user
        .username
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
    {
        Some((ns, name)) => impersonate("", "serviceaccounts", ns, name),
        None => impersonate("", "users", "", &as_user.username),
    }];
    let implied = |g: &str| g == "system:authenticated" || g.starts_with("system:serviceaccounts");
    for group in as_user.groups.iter().filter(|g| !implied(g)) {
        checks.push(impersonate("", "groups", "", group));
    }
    if !as_user.uid.is_empty() {
        checks.push(impersonate(
            "authentication.k8s.io",
            "uids",
            "",
            &as_user.uid,
        ));
    }
    checks
}
