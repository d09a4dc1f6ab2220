//! `POST .../serviceaccounts/<name>/token` (TokenRequest): a signed JWT
//! for the ServiceAccount (see `service_account_jwt`), which authenticates as
//! `system:serviceaccount:<namespace>:<name>` in TokenReviews and in the
//! request log, until it expires.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::auth::service_account_jwt::{ISSUER, Signer, claims};
use crate::controls::ReviewUser;
use crate::error::{ApiError, Cause};
use crate::meta;
use crate::rest::write::Answer;
use crate::state::{Inner, ResourceRequest, parse_object};

/// kube-apiserver's default and minimum token lifetimes.
const DEFAULT_EXPIRATION: u64 = 3600;
const MIN_EXPIRATION: u64 = 600;

/// Issue a token for the ServiceAccount `req` names.
pub(crate) fn issue(
    inner: &Inner,
    signer: &Signer,
    req: &ResourceRequest,
    body: &[u8],
) -> Result<Answer, ApiError> {
    let def = &inner.defs().get(req.def);
    let namespace = req.ns_key().to_owned();
    let name = req.name.clone().unwrap_or_default();
    let account = inner
        .store()
        .get(req.def, &namespace, &name)
        .ok_or_else(|| ApiError::not_found(def, &name))?;
    let mut request: Value = if body.is_empty() {
        json!({})
    } else {
        parse_object(body, "TokenRequest")?
    };
    let seconds = match request.pointer("/spec/expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION,
        Some(v) => match v.as_u64() {
            Some(s) if s >= MIN_EXPIRATION => s,
            _ => {
                return Err(ApiError::invalid(
                    def,
                    &name,
                    // kube-apiserver's words (it checks 600 seconds).
                    vec![Cause::invalid_number(
                        "spec.expirationSeconds",
                        v.as_i64().unwrap_or_default(),
                        "may not specify a duration less than 10 minutes",
                    )],
                ));
            }
        },
    };
    let uid = meta::uid(&account.object).to_owned();
    if request.pointer("/spec/audiences").is_none() {
        request["spec"]["audiences"] = json!([ISSUER]);
    }
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let claims = claims(
        &namespace,
        &name,
        &uid,
        &request["spec"]["audiences"],
        request.pointer("/spec/boundObjectRef"),
        now,
        seconds as i64,
    );
    let token = signer
        .sign(&claims)
        .map_err(|e| ApiError::internal(format!("signing the token: {e}")))?;
    let user = ReviewUser {
        username: format!("system:serviceaccount:{namespace}:{name}"),
        uid,
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated".into(),
        ],
    };
    let expires = Instant::now() + Duration::from_secs(seconds);
    inner.reviews().issue(&token, user, Some(expires));
    request["apiVersion"] = json!("authentication.k8s.io/v1");
    request["kind"] = json!("TokenRequest");
    request["metadata"]["name"] = json!(name);
    request["metadata"]["namespace"] = json!(namespace);
    request["metadata"]["creationTimestamp"] = json!(meta::now());
    request["spec"]["expirationSeconds"] = json!(seconds);
    let expiration = meta::now_plus(seconds as i64);
    request["status"] = json!({"token": token, "expirationTimestamp": expiration});
    Ok((201, request))
}
