//! TokenReview, SubjectAccessReview and the self reviews (`kubectl auth
//! whoami`, `kubectl auth can-i`), answered from the harness's tokens and
//! access policy, which tests configure.

use serde_json::{Value, json};

use crate::controls::AccessRequest;
use crate::error::ApiError;
use crate::meta::{str_at, strings};
use crate::resources::ResourceDef;
use crate::state::{Inner, ResourceRequest};

/// The access request of a SubjectAccessReview-like spec, for `user` and
/// `groups`.
fn access_request(spec: &Value, user: String, groups: Vec<String>) -> AccessRequest {
    let ra = spec.get("resourceAttributes");
    let nra = spec.get("nonResourceAttributes");
    let field = |v: Option<&Value>, k: &str| {
        v.and_then(|x| x.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    AccessRequest {
        user,
        groups,
        verb: if ra.is_some() {
            field(ra, "verb")
        } else {
            field(nra, "verb")
        },
        resource: field(ra, "resource"),
        subresource: field(ra, "subresource"),
        namespace: field(ra, "namespace"),
        name: field(ra, "name"),
        path: field(nra, "path"),
    }
}

fn decide(inner: &Inner, request: &AccessRequest, spec: &Value) -> Value {
    if inner.settings().rbac {
        let user = crate::controls::ReviewUser {
            username: request.user.clone(),
            uid: String::new(),
            groups: request.groups.clone(),
        };
        let ra = spec.get("resourceAttributes");
        let field = |k: &str| {
            ra.and_then(|r| r.get(k))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let attrs = crate::auth::rbac::Attributes {
            verb: request.verb.clone(),
            api_group: field("group"),
            resource: request.resource.clone(),
            subresource: request.subresource.clone(),
            namespace: request.namespace.clone(),
            name: request.name.clone(),
            path: ra.is_none().then(|| request.path.clone()),
        };
        let (allowed, reason) = crate::auth::rbac::authorize(inner, &user, &attrs);
        let mut status = json!({"allowed": allowed});
        if !reason.is_empty() {
            status["reason"] = json!(reason);
        }
        return status;
    }
    let policy = inner
        .reviews()
        .policy
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let (allowed, reason) = policy(request);
    json!({"allowed": allowed, "denied": !allowed, "reason": reason})
}

/// Answer a review: the request with `status` filled in, 201.
pub(crate) fn answer(
    inner: &Inner,
    def: &ResourceDef,
    req: &ResourceRequest,
    mut review: Value,
) -> Result<(u16, Value), ApiError> {
    if let Some(k) = str_at(&review, &["kind"])
        && k != def.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind ({})",
            def.kind
        )));
    }
    review["apiVersion"] = json!(def.api_version());
    review["kind"] = json!(def.kind);
    let status = match def.kind {
        "TokenReview" => {
            let token = str_at(&review, &["spec", "token"]).unwrap_or_default();
            if token.is_empty() {
                return Err(ApiError::invalid(
                    def,
                    "",
                    vec![crate::error::Cause::required("spec.token", "")],
                ));
            }
            // The kubeconfig's own token is the administrator's, as the
            // request path authenticates it.
            let user = match token {
                crate::auth::rbac::ADMIN_TOKEN => Some(crate::auth::rbac::administrator()),
                other => inner.reviews().user_of(other),
            };
            match user {
                Some(user) => json!({
                    "authenticated": true,
                    "user": {"username": user.username, "uid": user.uid, "groups": user.groups},
                    "audiences": strings(review.pointer("/spec/audiences")),
                }),
                None => json!({"authenticated": false, "error": "invalid bearer token"}),
            }
        }
        "SubjectAccessReview" => {
            let spec = review.get("spec").cloned().unwrap_or(json!({}));
            let user = str_at(&spec, &["user"]).unwrap_or_default().to_owned();
            decide(
                inner,
                &access_request(&spec, user, strings(spec.get("groups"))),
                &spec,
            )
        }
        "LocalSubjectAccessReview" => {
            let ns = req.namespace.clone().unwrap_or_default();
            let spec_ns =
                str_at(&review, &["spec", "resourceAttributes", "namespace"]).unwrap_or_default();
            if !spec_ns.is_empty() && spec_ns != ns {
                return Err(ApiError::bad_request(format!(
                    "spec.resourceAttributes.namespace must match namespace: {spec_ns} != {ns}"
                )));
            }
            let mut spec = review.get("spec").cloned().unwrap_or(json!({}));
            if spec.get("resourceAttributes").is_some() {
                spec["resourceAttributes"]["namespace"] = json!(ns);
            }
            let user = str_at(&spec, &["user"]).unwrap_or_default().to_owned();
            decide(
                inner,
                &access_request(&spec, user, strings(spec.get("groups"))),
                &spec,
            )
        }
        "SelfSubjectAccessReview" => {
            let me = req
                .user
                .clone()
                .unwrap_or_else(crate::auth::rbac::administrator);
            let spec = review.get("spec").cloned().unwrap_or(json!({}));
            decide(inner, &access_request(&spec, me.username, me.groups), &spec)
        }
        "SelfSubjectRulesReview" => {
            if inner.settings().rbac {
                let me = req
                    .user
                    .clone()
                    .unwrap_or_else(crate::auth::rbac::administrator);
                let ns = str_at(&review, &["spec", "namespace"]).unwrap_or_default();
                crate::auth::rbac::rules_review(inner, &me, ns)
            } else if inner
                .reviews()
                .custom_policy
                .load(std::sync::atomic::Ordering::Relaxed)
            {
                json!({
                    "resourceRules": [],
                    "nonResourceRules": [],
                    "incomplete": true,
                    "evaluationError": "the harness's access policy is a function: its rules cannot be listed",
                })
            } else {
                json!({
                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                    "incomplete": false,
                })
            }
        }
        "SelfSubjectReview" => {
            let me = req
                .user
                .clone()
                .unwrap_or_else(crate::auth::rbac::administrator);
            json!({"userInfo": {"username": me.username, "uid": me.uid, "groups": me.groups}})
        }
        other => {
            return Err(ApiError::method_not_allowed(format!(
                "{other} is not a review"
            )));
        }
    };
    review["status"] = status;
    Ok((201, review))
}
