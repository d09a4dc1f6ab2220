//! Admission webhooks, called as kube-apiserver calls them: every stored
//! `MutatingWebhookConfiguration` and `ValidatingWebhookConfiguration`
//! whose rules (operations, groups, versions, resources and subresources,
//! scope), `namespaceSelector` and `objectSelector` match a create, update,
//! patch or delete gets an `admission.k8s.io/v1` `AdmissionReview` over
//! HTTPS, trusting its `caBundle`, within its `timeoutSeconds`. Mutating
//! webhooks run one after the other and their JSON patches are applied
//! (those with `reinvocationPolicy: IfNeeded` run once more when a later
//! one changed the object); validating webhooks then see the final
//! object. A denial answers with the webhook's status (at least 400) and
//! "admission webhook "NAME" denied the request: ..."; a webhook that
//! cannot be called fails the request (500) under `failurePolicy: Fail`
//! and is skipped under `Ignore`. Dry-run requests only reach webhooks
//! whose `sideEffects` are `None` or `NoneOnDryRun`.
//!
//! Not done: `clientConfig.service` (no cluster network here: such a
//! webhook is a call failure), `matchConditions` (CEL), `matchPolicy`
//! (one version per kind is served, so it makes no difference).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::resources::ResourceDef;
use crate::selectors::object_selector_matches;
use crate::state::{Inner, ResourceRequest};

/// The two kinds of webhook configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// `MutatingWebhookConfiguration`.
    Mutating,
    /// `ValidatingWebhookConfiguration`.
    Validating,
}

impl Phase {
    fn plural(self) -> &'static str {
        match self {
            Self::Mutating => "mutatingwebhookconfigurations",
            Self::Validating => "validatingwebhookconfigurations",
        }
    }
}

/// What is being admitted.
pub(crate) struct Attributes<'a> {
    pub(crate) def: &'a ResourceDef,
    pub(crate) sub: Option<&'a str>,
    pub(crate) namespace: &'a str,
    pub(crate) name: &'a str,
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub(crate) operation: &'static str,
    pub(crate) object: Option<&'a Value>,
    pub(crate) old: Option<&'a Value>,
    pub(crate) req: &'a ResourceRequest,
}

/// One webhook of a configuration.
#[derive(Debug, Clone)]
struct Hook {
    name: String,
    url: Option<String>,
    ca_bundle: Option<String>,
    rules: Vec<Value>,
    ignore_failures: bool,
    timeout: Duration,
    namespace_selector: Value,
    object_selector: Value,
    side_effects: String,
    reinvoke: bool,
}

fn string_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn hook_of(webhook: &Value) -> Hook {
    let ca_bundle = string_at(webhook, "/clientConfig/caBundle").and_then(|b| {
        base64::engine::general_purpose::STANDARD
            .decode(b)
            .ok()
            .and_then(|pem| String::from_utf8(pem).ok())
    });
    Hook {
        name: string_at(webhook, "/name").unwrap_or_default().to_owned(),
        url: string_at(webhook, "/clientConfig/url").map(str::to_owned),
        ca_bundle,
        rules: webhook
            .get("rules")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        ignore_failures: string_at(webhook, "/failurePolicy") == Some("Ignore"),
        timeout: Duration::from_secs(
            webhook
                .get("timeoutSeconds")
                .and_then(Value::as_u64)
                .unwrap_or(10)
                .clamp(1, 30),
        ),
        namespace_selector: webhook
            .get("namespaceSelector")
            .cloned()
            .unwrap_or_else(|| json!({})),
        object_selector: webhook
            .get("objectSelector")
            .cloned()
            .unwrap_or_else(|| json!({})),
        side_effects: string_at(webhook, "/sideEffects")
            .unwrap_or("Unknown")
            .to_owned(),
        reinvoke: string_at(webhook, "/reinvocationPolicy") == Some("IfNeeded"),
    }
}

/// The webhooks of `phase`, configurations in name order, each's webhooks
/// in their order.
fn hooks(inner: &Inner, phase: Phase) -> Vec<Hook> {
    let Some(index) = inner
        .defs()
        .find("admissionregistration.k8s.io", "v1", phase.plural())
    else {
        return Vec::new();
    };
    let (configs, _) = inner.store().list(index, None);
    configs
        .iter()
        .flat_map(|c| {
            c.object
                .get("webhooks")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .map(|w| hook_of(&w))
        .collect()
}

/// Whether any webhook is configured at all (the common case is none, and
/// then writes pay nothing).
pub(crate) fn configured(inner: &Inner) -> bool {
    [Phase::Mutating, Phase::Validating].iter().any(|p| {
        inner
            .defs()
            .find("admissionregistration.k8s.io", "v1", p.plural())
            .is_some_and(|i| !inner.store().list(i, None).0.is_empty())
    })
}

fn listed(list: Option<&Value>, wanted: &str) -> bool {
    list.and_then(Value::as_array)
        .is_some_and(|l| l.iter().any(|v| v == "*" || v == wanted))
}

/// Whether `pattern` (`pods`, `pods/status`, `*`, `*/*`, `pods/*`,
/// `*/status`) names the resource and subresource.
fn resource_matches(pattern: &str, resource: &str, sub: Option<&str>) -> bool {
    let (p_res, p_sub) = pattern.split_once('/').unwrap_or((pattern, ""));
    let res_ok = p_res == "*" || p_res == resource;
    let sub_ok = match sub {
        None => p_sub.is_empty(),
        Some(s) => p_sub == "*" || p_sub == s,
    };
    res_ok && sub_ok
}

fn rule_matches(rule: &Value, a: &Attributes<'_>) -> bool {
    let scope_ok = match rule.get("scope").and_then(Value::as_str).unwrap_or("*") {
        "Cluster" => !a.def.namespaced,
        "Namespaced" => a.def.namespaced,
        _ => true,
    };
    scope_ok
        && listed(rule.get("operations"), a.operation)
        && listed(rule.get("apiGroups"), a.def.group)
        && listed(rule.get("apiVersions"), a.def.version)
        && rule
            .get("resources")
            .and_then(Value::as_array)
            .is_some_and(|l| {
                l.iter()
                    .filter_map(Value::as_str)
                    .any(|p| resource_matches(p, a.def.plural, a.sub))
            })
}

fn labels(obj: Option<&Value>) -> Option<&serde_json::Map<String, Value>> {
    obj.and_then(|o| o.pointer("/metadata/labels"))
        .and_then(Value::as_object)
}

fn selectors_match(inner: &Inner, hook: &Hook, a: &Attributes<'_>) -> bool {
    let object_ok = object_selector_matches(&hook.object_selector, labels(a.object))
        || (a.old.is_some() && object_selector_matches(&hook.object_selector, labels(a.old)));
    if !object_ok {
        return false;
    }
    if a.def.group.is_empty() && a.def.plural == "namespaces" {
        return object_selector_matches(&hook.namespace_selector, labels(a.object.or(a.old)));
    }
    if !a.def.namespaced {
        return true;
    }
    let ns = inner
        .defs()
        .core("namespaces")
        .and_then(|i| inner.store().get(i, "", a.namespace));
    object_selector_matches(
        &hook.namespace_selector,
        labels(ns.as_ref().map(|s| s.object.as_ref())),
    )
}

fn applies(inner: &Inner, hook: &Hook, a: &Attributes<'_>) -> bool {
    // Webhooks never see their own configurations (so a broken webhook
    // can always be removed).
    if a.def.group == "admissionregistration.k8s.io" {
        return false;
    }
    hook.rules.iter().any(|r| rule_matches(r, a)) && selectors_match(inner, hook, a)
}

fn review(a: &Attributes<'_>, object: Option<&Value>, uid: &str) -> Value {
    let user = a.req.user.as_ref();
    let username = user.map_or("kubernetes-admin", |u| u.username.as_str());
    let groups: Vec<&str> = match user {
        Some(u) => u.groups.iter().map(String::as_str).collect(),
        None => vec!["system:masters", "system:authenticated"],
    };
    let kind = json!({"group": a.def.group, "version": a.def.version, "kind": a.def.kind});
    let resource =
        json!({"group": a.def.group, "version": a.def.version, "resource": a.def.plural});
    let options = match a.operation {
        "CREATE" => "CreateOptions",
        "UPDATE" => "UpdateOptions",
        _ => "DeleteOptions",
    };
    let mut request = json!({
        "uid": uid,
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": a.name,
        "operation": a.operation,
        "userInfo": {"username": username, "groups": groups},
        "object": object,
        "oldObject": a.old,
        "dryRun": a.req.dry_run(),
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": options},
    });
    if let Some(sub) = a.sub {
        request["subResource"] = json!(sub);
        request["requestSubResource"] = json!(sub);
    }
    if a.def.namespaced {
        request["namespace"] = json!(a.namespace);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// POST `review` to the webhook: its `response`, or why the call failed.
async fn call(hook: &Hook, review: &Value) -> Result<Value, String> {
    let Some(url) = &hook.url else {
        return Err("service references cannot be reached from the in-memory API server (use clientConfig.url)".into());
    };
    let uri: http::Uri = url.parse().map_err(|e| format!("bad url {url:?}: {e}"))?;
    let failed = |e: &dyn std::fmt::Display| format!("failed to call webhook: Post {url:?}: {e}");
    if uri.scheme_str() != Some("https") {
        return Err(failed(&"the webhook URL must use https"));
    }
    let host = uri
        .host()
        .unwrap_or_default()
        .trim_matches(['[', ']'])
        .to_owned();
    let port = uri.port_u16().unwrap_or(443);
    let exchange = async {
        let mut roots = rustls::RootCertStore::empty();
        for cert in
            CertificateDer::pem_slice_iter(hook.ca_bundle.as_deref().unwrap_or("").as_bytes())
        {
            let cert = cert.map_err(|e| failed(&e))?;
            roots.add(cert).map_err(|e| failed(&e))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| failed(&e))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| failed(&e))?;
        let name = ServerName::try_from(host.clone()).map_err(|e| failed(&e))?;
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| failed(&e))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| failed(&e))?;
        tokio::spawn(connection);
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let body = Bytes::from(serde_json::to_vec(review).unwrap_or_default());
        let request = http::Request::post(path)
            .header(http::header::HOST, format!("{host}:{port}"))
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(body))
            .map_err(|e| failed(&e))?;
        let answer = sender.send_request(request).await.map_err(|e| failed(&e))?;
        let status = answer.status();
        let bytes = answer
            .into_body()
            .collect()
            .await
            .map_err(|e| failed(&e))?
            .to_bytes();
        if !status.is_success() {
            return Err(format!(
                "failed to call webhook: the server responded with status {}: {}",
                status.as_u16(),
                String::from_utf8_lossy(&bytes).trim()
            ));
        }
        let answer: Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("received invalid webhook response: {e}"))?;
        Ok(answer)
    };
    let answer = tokio::time::timeout(hook.timeout, exchange)
        .await
        .map_err(|_| failed(&"context deadline exceeded"))??;
    let response = answer
        .get("response")
        .cloned()
        .ok_or("received invalid webhook response: no response")?;
    let want = review.pointer("/request/uid").and_then(Value::as_str);
    let got = response.get("uid").and_then(Value::as_str);
    if want != got {
        return Err(format!(
            "expected response.uid={:?}, got {:?}",
            want.unwrap_or_default(),
            got.unwrap_or_default()
        ));
    }
    Ok(response)
}

/// The error of a denying response, as kube-apiserver words it.
fn denial(hook: &Hook, response: &Value) -> ApiError {
    let status = response.get("status").cloned().unwrap_or_else(|| json!({}));
    let code = status
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let denied = format!("admission webhook {:?} denied the request", hook.name);
    let message = match (
        status
            .get("message")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty()),
        status
            .get("reason")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty()),
    ) {
        (Some(m), _) => format!("{denied}: {m}"),
        (None, Some(r)) => format!("{denied}: {r}"),
        (None, None) => format!("{denied} without explanation"),
    };
    let reason = ApiError::reason_for(code);
    ApiError::new(code, reason, message)
}

fn call_failure(hook: &Hook, why: &str) -> ApiError {
    ApiError::new(
        500,
        "InternalError",
        format!(
            "Internal error occurred: failed calling webhook {:?}: {why}",
            hook.name
        ),
    )
}

fn warnings_of(response: &Value) -> Vec<String> {
    response
        .get("warnings")
        .and_then(Value::as_array)
        .map(|w| {
            w.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// One call, with the failure policy applied: the response to act on, or
/// `None` when an ignored failure skipped the webhook.
async fn consult(
    hook: &Hook,
    a: &Attributes<'_>,
    object: Option<&Value>,
) -> Result<Option<Value>, ApiError> {
    if a.req.dry_run() && !matches!(hook.side_effects.as_str(), "None" | "NoneOnDryRun") {
        return Err(ApiError::bad_request(format!(
            "admission webhook {:?} does not support dry run",
            hook.name
        )));
    }
    let uid = uuid::Uuid::new_v4().to_string();
    match call(hook, &review(a, object, &uid)).await {
        Ok(response) => Ok(Some(response)),
        Err(why) if hook.ignore_failures => {
            tracing::debug!(webhook = %hook.name, %why, "ignoring a failed admission webhook");
            Ok(None)
        }
        Err(why) => Err(call_failure(hook, &why)),
    }
}

/// Run the matching mutating webhooks over `object`: the object as they
/// left it, and their warnings.
pub(crate) async fn mutate(
    inner: &Inner,
    a: &Attributes<'_>,
    mut object: Value,
) -> Result<(Value, Vec<String>), ApiError> {
    let hooks: Vec<Hook> = hooks(inner, Phase::Mutating)
        .into_iter()
        .filter(|h| applies(inner, h, a))
        .collect();
    let mut warnings = Vec::new();
    // Which IfNeeded webhooks ran before the object last changed.
    let mut stale_reinvokers = false;
    let mut ran_reinvoker = false;
    for round in 0..2 {
        for hook in &hooks {
            if round == 1 && !hook.reinvoke {
                continue;
            }
            let Some(response) = consult(hook, a, Some(&object)).await? else {
                continue;
            };
            warnings.extend(warnings_of(&response));
            if response.get("allowed").and_then(Value::as_bool) != Some(true) {
                return Err(denial(hook, &response));
            }
            let changed = apply_patch(hook, &response, &mut object)?;
            if changed && ran_reinvoker {
                stale_reinvokers = true;
            }
            ran_reinvoker |= hook.reinvoke;
        }
        if round == 0 && !stale_reinvokers {
            break;
        }
    }
    Ok((object, warnings))
}

/// Apply a response's JSON patch; whether the object changed.
fn apply_patch(hook: &Hook, response: &Value, object: &mut Value) -> Result<bool, ApiError> {
    let Some(patch) = response.get("patch").and_then(Value::as_str) else {
        return Ok(false);
    };
    if response.get("patchType").and_then(Value::as_str) != Some("JSONPatch") {
        return Err(call_failure(
            hook,
            "unsupported patch type (only JSONPatch is)",
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .map_err(|e| call_failure(hook, &format!("the patch is not base64: {e}")))?;
    let ops: Value = serde_json::from_slice(&bytes)
        .map_err(|e| call_failure(hook, &format!("the patch is not JSON: {e}")))?;
    let before = object.clone();
    crate::storage::patch::json_patch(object, &ops)
        .map_err(|e| call_failure(hook, &format!("the patch does not apply: {e}")))?;
    Ok(*object != before)
}

/// Run the matching validating webhooks: their warnings, or the first
/// denial.
pub(crate) async fn validate(inner: &Inner, a: &Attributes<'_>) -> Result<Vec<String>, ApiError> {
    let hooks: Vec<Hook> = hooks(inner, Phase::Validating)
        .into_iter()
        .filter(|h| applies(inner, h, a))
        .collect();
    let answers =
        futures_util::future::join_all(hooks.iter().map(|h| consult(h, a, a.object))).await;
    let mut warnings = Vec::new();
    for (hook, answer) in hooks.iter().zip(answers) {
        let Some(response) = answer? else { continue };
        warnings.extend(warnings_of(&response));
        if response.get("allowed").and_then(Value::as_bool) != Some(true) {
            return Err(denial(hook, &response));
        }
    }
    Ok(warnings)
}

/// A write about to be admitted.
pub(crate) enum Write<'a> {
    /// POST with this body.
    Create(&'a [u8]),
    /// PUT with this body.
    Update(&'a [u8]),
    /// PATCH with this content type and body.
    Patch(&'a str, &'a [u8]),
    /// DELETE of one object.
    Delete,
}

/// How the write goes ahead once admitted.
pub(crate) enum Admitted {
    /// As the client sent it.
    AsSent,
    /// Create this body instead (a mutating webhook changed the object).
    Create(Vec<u8>),
    /// Update with this body instead, at the object's resourceVersion.
    Update(Vec<u8>),
}

/// Server-set metadata that a create body must not carry.
const SERVER_SET: [&str; 5] = [
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
];

fn dry(req: &ResourceRequest) -> ResourceRequest {
    let mut dry = req.clone();
    dry.query.0.insert("dryRun".into(), "All".into());
    dry.warnings = Default::default();
    dry
}

/// What the write would store (a dry run of it).
fn would_store(inner: &Inner, req: &ResourceRequest, write: &Write<'_>) -> Result<Value, ApiError> {
    let dry = dry(req);
    let (_, obj) = match write {
        Write::Create(body) => crate::rest::write::create(inner, &dry, body)?,
        Write::Update(body) => crate::rest::write::update(inner, &dry, body)?,
        Write::Patch(content_type, body) => {
            crate::rest::write::patch(inner, &dry, content_type, body)?
        }
        Write::Delete => return Ok(Value::Null),
    };
    Ok(obj)
}

/// Call the webhooks matching `write` (when any is configured): how the
/// write goes ahead, and the webhooks' warnings; or their refusal.
pub(crate) async fn admit(
    inner: &Inner,
    req: &ResourceRequest,
    write: Write<'_>,
) -> Result<(Admitted, Vec<String>), ApiError> {
    let def = &inner.defs().get(req.def);
    let name = req.name.clone().unwrap_or_default();
    let current = req
        .name
        .as_ref()
        .and_then(|n| inner.store().get(req.def, req.ns_key(), n))
        .map(|s| (*s.object).clone());
    let attrs = |operation, object, old| Attributes {
        def,
        sub: req.sub.as_deref(),
        namespace: req.ns_key(),
        name: &name,
        operation,
        object,
        old,
        req,
    };
    if let Write::Delete = write {
        let Some(current) = &current else {
            return Ok((Admitted::AsSent, Vec::new()));
        };
        let a = attrs("DELETE", None, Some(current));
        let (_, mut warnings) = mutate(inner, &a, Value::Null).await?;
        warnings.extend(validate(inner, &a).await?);
        return Ok((Admitted::AsSent, warnings));
    }
    let operation = if matches!(write, Write::Create(_)) {
        "CREATE"
    } else {
        "UPDATE"
    };
    let proposed = would_store(inner, req, &write)?;
    let created_name = crate::meta::name(&proposed).to_owned();
    let a = Attributes {
        name: if name.is_empty() {
            &created_name
        } else {
            &name
        },
        ..attrs(operation, Some(&proposed), current.as_ref())
    };
    let (mutated, mut warnings) = mutate(inner, &a, proposed.clone()).await?;
    // A generated name was chosen by the dry run: the create must keep the
    // name the webhooks saw.
    let generated = match &write {
        Write::Create(body) => serde_json::from_slice::<Value>(body)
            .ok()
            .is_some_and(|b| crate::meta::name(&b).is_empty()),
        _ => false,
    };
    let (admitted, final_object) = if mutated == proposed && !generated {
        (Admitted::AsSent, mutated)
    } else if let Write::Create(_) = write {
        let mut body = mutated;
        if let Some(m) = crate::meta::meta_mut(&mut body) {
            for field in SERVER_SET {
                m.remove(field);
            }
        }
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        let stored = would_store(inner, req, &Write::Create(&bytes))?;
        (Admitted::Create(bytes), stored)
    } else {
        let mut body = mutated;
        let rv = match &write {
            Write::Update(sent) => serde_json::from_slice::<Value>(sent)
                .ok()
                .and_then(|v| crate::meta::meta_str(&v, "resourceVersion").map(str::to_owned)),
            _ => None,
        }
        .or_else(|| {
            current
                .as_ref()
                .and_then(|c| crate::meta::meta_str(c, "resourceVersion").map(str::to_owned))
        });
        if let Some(m) = crate::meta::meta_mut(&mut body) {
            m.remove("managedFields");
            if let Some(rv) = rv {
                m.insert("resourceVersion".into(), json!(rv));
            }
        }
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        let stored = would_store(inner, req, &Write::Update(&bytes))?;
        (Admitted::Update(bytes), stored)
    };
    let a = Attributes {
        object: Some(&final_object),
        ..a
    };
    warnings.extend(validate(inner, &a).await?);
    Ok((admitted, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_patterns() {
        assert!(resource_matches("pods", "pods", None));
        assert!(!resource_matches("pods", "pods", Some("status")));
        assert!(resource_matches("pods/status", "pods", Some("status")));
        assert!(resource_matches("pods/*", "pods", Some("status")));
        assert!(!resource_matches("pods/*", "pods", None));
        assert!(resource_matches("*", "services", None));
        assert!(!resource_matches("*", "services", Some("status")));
        assert!(resource_matches("*/*", "services", Some("status")));
        assert!(resource_matches("*/status", "services", Some("status")));
        assert!(!resource_matches("services", "pods", None));
    }

    #[test]
    fn denials_read_as_kube_apiserver_writes_them() {
        let hook = hook_of(&json!({"name": "lb.example.com"}));
        let e = denial(
            &hook,
            &json!({"allowed": false, "status": {"message": "no class", "code": 403}}),
        );
        assert_eq!((e.code, e.reason), (403, "Forbidden"));
        assert_eq!(
            e.message,
            "admission webhook \"lb.example.com\" denied the request: no class"
        );
        let e = denial(&hook, &json!({"allowed": false}));
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "admission webhook \"lb.example.com\" denied the request without explanation"
        );
        let e = denial(
            &hook,
            &json!({"allowed": false, "status": {"code": 200, "reason": "nope"}}),
        );
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "admission webhook \"lb.example.com\" denied the request: nope"
            )
        );
    }

    #[test]
    fn webhook_defaults() {
        let hook = hook_of(&json!({"name": "w", "clientConfig": {"url": "https://x"}}));
        assert!(!hook.ignore_failures);
        assert_eq!(hook.timeout, Duration::from_secs(10));
        assert!(!hook.reinvoke);
        let hook = hook_of(
            &json!({"name": "w", "failurePolicy": "Ignore", "timeoutSeconds": 2,
            "reinvocationPolicy": "IfNeeded", "clientConfig": {"caBundle": "bm90IGEgY2VydA=="}}),
        );
        assert!(hook.ignore_failures && hook.reinvoke);
        assert_eq!(hook.timeout, Duration::from_secs(2));
        assert_eq!(hook.ca_bundle.as_deref(), Some("not a cert"));
    }
}
