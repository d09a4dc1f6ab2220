//! TokenReview and SubjectAccessReview answers, configurable from tests.

use serde_json::{Value, json};

use super::controls::AccessRequest;
use super::error::ApiError;
use super::meta::str_at;
use super::resources::ResourceDef;
use super::state::Inner;

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Answer a review: the request with `status` filled in, 201.
pub(crate) fn answer(
    inner: &Inner,
    def: &ResourceDef,
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
                    vec![super::error::Cause::required("spec.token", "")],
                ));
            }
            match inner.reviews.user_of(token) {
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
            let ra = spec.get("resourceAttributes");
            let nra = spec.get("nonResourceAttributes");
            let field = |v: Option<&Value>, k: &str| {
                v.and_then(|x| x.get(k))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let request = AccessRequest {
                user: field(Some(&spec), "user"),
                groups: strings(spec.get("groups")),
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
            };
            let policy = inner
                .reviews
                .policy
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let (allowed, reason) = policy(&request);
            json!({"allowed": allowed, "denied": !allowed, "reason": reason})
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
