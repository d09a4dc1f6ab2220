//! HTTP: each request routed (`route`), checked against the injected
//! faults, authenticated and authorized, logged, and dispatched to the REST
//! operations, its answer in the format the client negotiated.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::upgrade::OnUpgrade;
use serde_json::Value;
use tokio::sync::mpsc;

use super::keys::Keys;
use crate::auth::rbac;
use crate::body::Body;
use crate::controls::{FaultAction, RequestRecord, Verb};
use crate::error::ApiError;
use crate::kubelet_client;
use crate::openapi;
use crate::rest::read::{self, Representation};
use crate::rest::watch;
use crate::rest::webhooks;
use crate::rest::write;
use crate::serving::discovery;
use crate::serving::kubelet;
use crate::serving::route::{Route, route};
use crate::serving::wire_format::{self, Negotiated};
use crate::state::{Inner, Query, ResourceRequest};
use crate::storage::conversion;

fn full(bytes: Bytes) -> Body {
    Full::new(bytes).boxed_unsync()
}

fn bytes_response(code: u16, body: Body, content_type: &'static str) -> Response<Body> {
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

fn json_response(code: u16, bytes: Bytes) -> Response<Body> {
    bytes_response(code, full(bytes), "application/json")
}

/// An answer in the format the client negotiated, from the stored JSON.
fn negotiated_json(
    code: u16,
    json: Bytes,
    negotiated: Negotiated,
) -> Result<Response<Body>, ApiError> {
    let (bytes, content_type) = wire_format::answer_json(negotiated, json)?;
    Ok(bytes_response(code, full(bytes), content_type))
}

/// An answer in the format the client negotiated, from a value.
fn negotiated_value(
    code: u16,
    value: &Value,
    negotiated: Negotiated,
) -> Result<Response<Body>, ApiError> {
    let (bytes, content_type) = wire_format::answer_value(negotiated, value)?;
    Ok(bytes_response(code, full(bytes), content_type))
}

fn value_response(code: u16, value: &Value) -> Response<Body> {
    json_response(
        code,
        Bytes::from(serde_json::to_vec(value).unwrap_or_default()),
    )
}

fn error_response(err: &ApiError) -> Response<Body> {
    let mut resp = value_response(err.code, &err.to_status());
    if let Some(secs) = err.retry_after
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

fn verb_of(method: &Method, req: &ResourceRequest) -> Verb {
    match (method, req.name.is_some()) {
        (&Method::GET, true) => Verb::Get,
        (&Method::GET, false) if req.query.flag("watch") => Verb::Watch,
        (&Method::GET, false) => Verb::List,
        (&Method::POST, _) => Verb::Create,
        (&Method::PUT, _) => Verb::Update,
        (&Method::PATCH, _) => Verb::Patch,
        (&Method::DELETE, true) => Verb::Delete,
        (&Method::DELETE, false) => Verb::DeleteCollection,
        _ => Verb::Other,
    }
}

fn header_str(parts: &http::request::Parts, name: header::HeaderName) -> &str {
    parts
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

async fn read_body(inner: &Inner, body: Incoming) -> Result<Bytes, ApiError> {
    match Limited::new(body, inner.settings().max_body)
        .collect()
        .await
    {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(ApiError::new(
                413,
                "RequestEntityTooLarge",
                format!(
                    "Request entity too large: limit is {}",
                    inner.settings().max_body
                ),
            ))
        }
        Err(e) => Err(ApiError::bad_request(format!(
            "could not read the request body: {e}"
        ))),
    }
}

fn fault_error(action: &FaultAction) -> ApiError {
    match action {
        FaultAction::Throttle { retry_after_secs } => ApiError {
            retry_after: Some(*retry_after_secs),
            ..ApiError::new(
                429,
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later",
            )
        },
        FaultAction::Error(code) => {
            let reason = ApiError::reason_for(*code);
            ApiError::new(*code, reason, format!("injected fault: {code}"))
        }
        FaultAction::Latency(_) => ApiError::internal("a latency fault is not an error"),
    }
}

fn watch_response(inner: Arc<Inner>, plan: watch::WatchPlan, protobuf: bool) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    tokio::spawn(watch::run(inner, plan, tx));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    let content_type = if protobuf {
        crate::protobuf::WATCH_MEDIA_TYPE
    } else {
        "application/json"
    };
    bytes_response(200, StreamBody::new(stream).boxed_unsync(), content_type)
}

/// Whether a watch streams protobuf: the client prefers it and the kind has
/// a protobuf encoding (custom resources do not); 406 when the client takes
/// protobuf alone and the kind has none.
fn watch_in_protobuf(
    inner: &Inner,
    req: &ResourceRequest,
    negotiated: Negotiated,
) -> Result<bool, ApiError> {
    if !negotiated.protobuf {
        return Ok(false);
    }
    let def = &inner.defs().get(req.def);
    if crate::protobuf::supports(&def.api_version(), def.kind) {
        return Ok(true);
    }
    if negotiated.json {
        return Ok(false);
    }
    Err(ApiError::new(
        406,
        "NotAcceptable",
        format!(
            "{} has no protobuf encoding; accept application/json",
            def.kind
        ),
    ))
}

/// A request body as JSON (protobuf bodies are translated).
async fn json_body(
    inner: &Inner,
    parts: &http::request::Parts,
    body: Incoming,
) -> Result<Bytes, ApiError> {
    let bytes = read_body(inner, body).await?;
    wire_format::body_as_json(header_str(parts, header::CONTENT_TYPE), bytes)
}

/// The request's options, refused as kube-apiserver refuses them (422,
/// before anything is read or written): `dryRun` other than `All`,
/// `fieldValidation` outside its set, a `propagationPolicy` outside its
/// set, `sendInitialEvents` on a list, an apply patch without
/// `fieldManager`.
fn check_options(method: &Method, req: &ResourceRequest) -> Result<(), ApiError> {
    use crate::error::Cause;
    let options = match *method {
        Method::POST => "CreateOptions",
        Method::PUT => "UpdateOptions",
        Method::PATCH => "PatchOptions",
        Method::DELETE => "DeleteOptions",
        _ => "ListOptions",
    };
    let mut causes = Vec::new();
    if options != "ListOptions"
        && let Some(v) = req.query.get("dryRun").filter(|v| *v != "All")
    {
        causes.push(Cause::unsupported("dryRun", &format!("[{v:?}]"), &["All"]));
    }
    if matches!(options, "CreateOptions" | "UpdateOptions" | "PatchOptions")
        && let Some(v) = req.query.get("fieldValidation")
        && !matches!(v, "" | "Ignore" | "Strict" | "Warn")
    {
        causes.push(Cause::unsupported(
            "fieldValidation",
            &format!("{v:?}"),
            &["", "Ignore", "Strict", "Warn"],
        ));
    }
    if options == "DeleteOptions"
        && let Some(v) = req.query.get("propagationPolicy")
        && !matches!(v, "Foreground" | "Background" | "Orphan")
    {
        causes.push(Cause::unsupported(
            "propagationPolicy",
            &format!("{v:?}"),
            &["Foreground", "Background", "Orphan", "nil"],
        ));
    }
    if options == "ListOptions" && req.name.is_none() && !req.query.flag("watch") {
        if req.query.flag("sendInitialEvents") {
            causes.push(Cause::forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            ));
        }
        if req.query.get("resourceVersionMatch").is_some()
            && req.query.get("resourceVersion").is_none_or(str::is_empty)
        {
            causes.push(Cause::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_options(options, causes))
    }
}

async fn resource(
    inner: &Arc<Inner>,
    keys: &Keys,
    method: &Method,
    req: ResourceRequest,
    parts: &http::request::Parts,
    body: Incoming,
    on_upgrade: Option<OnUpgrade>,
) -> Result<Response<Body>, ApiError> {
    check_options(method, &req)?;
    let accept = header_str(parts, header::ACCEPT);
    let repr = Representation::from_accept(accept);
    let negotiated = Negotiated::from_accept(accept);
    // Nothing the client accepts is served: refused before anything is
    // read or written (the kubelet's streams negotiate for themselves).
    if !negotiated.acceptable
        && !matches!(
            req.sub.as_deref(),
            Some("log" | "exec" | "attach" | "portforward" | "proxy")
        )
    {
        let def = &inner.defs().get(req.def);
        return Err(Negotiated::refusal(crate::protobuf::supports(
            &def.api_version(),
            def.kind,
        )));
    }
    let sub = req.sub.clone();
    let answer = |r: Result<write::Answer, ApiError>| {
        let (code, v) = r?;
        negotiated_value(code, &v, negotiated)
    };
    match (method, req.name.is_some(), sub.as_deref()) {
        (&Method::GET, false, None) if req.query.flag("watch") => {
            let protobuf = watch_in_protobuf(inner, &req, negotiated)?;
            let plan = watch::plan(inner, &req, repr, protobuf)?;
            Ok(watch_response(inner.clone(), plan, protobuf))
        }
        (&Method::GET, false, None) => {
            read::await_revision(inner, &req).await?;
            negotiated_json(200, read::list(inner, &req, repr)?, negotiated)
        }
        (&Method::GET, true, None | Some("status" | "approval" | "ephemeralcontainers")) => {
            if req.query.flag("watch") {
                let protobuf = watch_in_protobuf(inner, &req, negotiated)?;
                let plan = watch::plan(inner, &req, repr, protobuf)?;
                return Ok(watch_response(inner.clone(), plan, protobuf));
            }
            read::await_revision(inner, &req).await?;
            negotiated_json(200, read::get(inner, &req, repr)?, negotiated)
        }
        (&Method::GET, true, Some("scale")) => answer(crate::rest::scale::get(inner, &req)),
        (&Method::PUT, true, Some("scale")) => {
            let body = req.incoming(json_body(inner, parts, body).await?);
            answer(crate::rest::scale::update(inner, &req, &body))
        }
        (&Method::PATCH, true, Some("scale")) => {
            let content_type = header_str(parts, header::CONTENT_TYPE).to_owned();
            let body = req.incoming(read_body(inner, body).await?);
            answer(crate::rest::scale::patch(inner, &req, &content_type, &body))
        }
        (&Method::GET, true, Some("log"))
        | (&Method::GET | &Method::POST, true, Some("exec" | "attach" | "portforward")) => {
            let target = kubelet_client::Target::Pod {
                namespace: req.namespace.clone().unwrap_or_default(),
                name: req.name.clone().unwrap_or_default(),
                sub: sub.clone().unwrap_or_default(),
            };
            kubelet::proxy(
                inner,
                &keys.kubelet,
                target,
                parts,
                Bytes::new(),
                on_upgrade,
            )
            .await
        }
        (_, true, Some("proxy")) => {
            let target = kubelet_client::Target::Node {
                name: req.name.clone().unwrap_or_default(),
                path: String::new(),
            };
            let body = req.incoming(read_body(inner, body).await?);
            kubelet::proxy(inner, &keys.kubelet, target, parts, body, on_upgrade).await
        }
        (&Method::POST, false, None) => {
            let body = req.incoming(json_body(inner, parts, body).await?);
            if admission_applies(inner, &req) {
                let (admitted, warnings) =
                    webhooks::admit(inner, &req, webhooks::Write::Create(&body)).await?;
                req.warnings.extend(warnings);
                return answer(admitted_write(inner, &req, admitted, || {
                    write::create(inner, &req, &body)
                }));
            }
            answer(write::create(inner, &req, &body))
        }
        (&Method::POST, true, Some("binding")) => {
            let body = req.incoming(json_body(inner, parts, body).await?);
            answer(write::bind(inner, &req, &body))
        }
        (&Method::POST, true, Some("token")) => {
            let body = req.incoming(json_body(inner, parts, body).await?);
            answer(crate::rest::token_request::issue(
                inner,
                &keys.token_signer,
                &req,
                &body,
            ))
        }
        (&Method::POST, true, Some("eviction")) => {
            let body = req.incoming(json_body(inner, parts, body).await?);
            answer(write::evict(inner, &req, &body))
        }
        (
            &Method::PUT,
            true,
            None | Some("status" | "approval" | "finalize" | "ephemeralcontainers"),
        ) => {
            let body = req.incoming(json_body(inner, parts, body).await?);
            if admission_applies(inner, &req) {
                let (admitted, warnings) =
                    webhooks::admit(inner, &req, webhooks::Write::Update(&body)).await?;
                req.warnings.extend(warnings);
                return answer(admitted_write(inner, &req, admitted, || {
                    write::update(inner, &req, &body)
                }));
            }
            answer(write::update(inner, &req, &body))
        }
        (&Method::PATCH, true, None | Some("status" | "approval" | "ephemeralcontainers")) => {
            let content_type = header_str(parts, header::CONTENT_TYPE).to_owned();
            let body = req.incoming(read_body(inner, body).await?);
            if admission_applies(inner, &req) {
                let write = webhooks::Write::Patch(&content_type, &body);
                let (admitted, warnings) = webhooks::admit(inner, &req, write).await?;
                req.warnings.extend(warnings);
                return answer(admitted_write(inner, &req, admitted, || {
                    write::patch(inner, &req, &content_type, &body)
                }));
            }
            answer(write::patch(inner, &req, &content_type, &body))
        }
        (&Method::DELETE, true, None) => {
            let body = req.incoming(json_body(inner, parts, body).await?);
            if admission_applies(inner, &req) {
                let (_, warnings) = webhooks::admit(inner, &req, webhooks::Write::Delete).await?;
                req.warnings.extend(warnings);
            }
            answer(write::delete(inner, &req, &body))
        }
        (&Method::DELETE, false, None) => {
            let body = req.incoming(json_body(inner, parts, body).await?);
            answer(write::delete_collection(inner, &req, &body))
        }
        // kube-apiserver's router answers with empty details.
        _ => Err(ApiError {
            details: Some(serde_json::json!({})),
            ..ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            )
        }),
    }
}

/// Whether a write goes through admission webhooks: some are configured
/// and the resource stores what it is sent (reviews do not).
fn admission_applies(inner: &Inner, req: &ResourceRequest) -> bool {
    !&inner.defs().get(req.def).review && webhooks::configured(inner)
}

/// Carry out an admitted write: as sent (`as_sent`), or as the mutating
/// webhooks left it.
fn admitted_write(
    inner: &Inner,
    req: &ResourceRequest,
    admitted: webhooks::Admitted,
    as_sent: impl FnOnce() -> Result<write::Answer, ApiError>,
) -> Result<write::Answer, ApiError> {
    match admitted {
        webhooks::Admitted::AsSent => as_sent(),
        webhooks::Admitted::Create(body) => write::create(inner, req, &body),
        webhooks::Admitted::Update(body) => write::update(inner, req, &body),
    }
}

/// The authorizer's verb of a resource request.
fn rbac_verb(method: &Method, req: &ResourceRequest) -> &'static str {
    match (method, req.name.is_some()) {
        (&Method::GET, _) if req.query.flag("watch") => "watch",
        (&Method::GET, true) => "get",
        (&Method::GET, false) => "list",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        _ => "unknown",
    }
}

/// With RBAC on: who the caller is (401 for an unknown or expired token),
/// and whether it may make the request (403 with kube-apiserver's message).
/// A resource request carries the caller on.
fn authenticate_and_authorize(
    inner: &Inner,
    token: Option<&str>,
    identity: Option<crate::controls::ReviewUser>,
    parts: &http::request::Parts,
    routed: Result<Route, ApiError>,
) -> Result<Route, ApiError> {
    let (method, path) = (&parts.method, parts.uri.path());
    let user = match (token, identity) {
        (Some(rbac::ADMIN_TOKEN), _) => rbac::administrator(),
        (Some(_), Some(mut user)) => {
            if !user.groups.iter().any(|g| g == "system:authenticated") {
                user.groups.push("system:authenticated".into());
            }
            user
        }
        (Some(_), None) => return Err(ApiError::new(401, "Unauthorized", "Unauthorized")),
        (None, Some(certified)) => certified,
        (None, None) => rbac::anonymous(),
    };
    let attrs = match &routed {
        Err(_) => None,
        Ok(routed) => Some(match routed {
            Route::Resource(r) => {
                let def = &inner.defs().get(r.def);
                rbac::Attributes {
                    verb: rbac_verb(method, r).to_owned(),
                    api_group: def.group.to_owned(),
                    resource: def.plural.to_owned(),
                    subresource: r.sub.clone().unwrap_or_default(),
                    namespace: r.namespace.clone().unwrap_or_default(),
                    name: r.name.clone().unwrap_or_default(),
                    path: None,
                }
            }
            Route::NodeProxy { name, .. } => rbac::Attributes {
                verb: match *method {
                    Method::GET => "get",
                    Method::POST => "create",
                    Method::PUT => "update",
                    Method::PATCH => "patch",
                    Method::DELETE => "delete",
                    _ => "unknown",
                }
                .to_owned(),
                resource: "nodes".into(),
                subresource: "proxy".into(),
                name: name.clone(),
                ..Default::default()
            },
            Route::Text(..)
            | Route::Document(_)
            | Route::GroupDiscovery { .. }
            | Route::OpenApiV2 => rbac::Attributes {
                verb: method.as_str().to_ascii_lowercase(),
                path: Some(path.to_owned()),
                ..Default::default()
            },
        }),
    };
    // Impersonation: the caller must be allowed to act as each identity
    // asked for (kube-apiserver 1.37's constrained impersonation first,
    // then the legacy `impersonate` verb); the request is then authorized
    // as that identity.
    let user = match crate::auth::impersonation::impersonated(&parts.headers)? {
        None => user,
        Some(as_user) => {
            crate::auth::impersonation::authorize(inner, &user, &as_user, attrs.as_ref())?;
            as_user
        }
    };
    let mut routed = routed?;
    let attrs = attrs.unwrap_or_default();
    let (allowed, _) = rbac::authorize(inner, &user, &attrs);
    if !allowed {
        let mut err = ApiError::new(403, "Forbidden", rbac::forbidden_message(&user, &attrs));
        if attrs.path.is_none() {
            err.details = Some(serde_json::json!({
                "name": attrs.name, "group": attrs.api_group, "kind": attrs.resource
            }));
        }
        return Err(err);
    }
    if let Route::Resource(r) = &mut routed {
        r.user = Some(user);
    }
    Ok(routed)
}

/// Serve one request.
/// One `Warning: 299 - "text"` header per warning, as kube-apiserver
/// sends them (client-go and kubectl print them).
fn add_warnings(resp: &mut Response<Body>, warnings: Vec<String>) {
    for text in warnings {
        if let Ok(v) = HeaderValue::from_str(&warning_value(&text)) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
}

/// `299 - "text"`, quoted with characters a header cannot carry (control
/// and non-ASCII ones) escaped as `\uXXXX`, so every warning is sent.
fn warning_value(text: &str) -> String {
    let mut quoted = String::from("299 - \"");
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            ' '..='~' => quoted.push(c),
            other => {
                let mut units = [0u16; 2];
                for unit in other.encode_utf16(&mut units) {
                    quoted.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    quoted.push('"');
    quoted
}

pub(crate) async fn handle(
    inner: Arc<Inner>,
    keys: Arc<Keys>,
    mut req: Request<Incoming>,
    host: Arc<str>,
    peer: Option<Arc<crate::controls::ReviewUser>>,
) -> Response<Body> {
    let started = Instant::now();
    let on_upgrade = req.extensions_mut().remove::<OnUpgrade>();
    let (parts, body) = req.into_parts();
    let query = Query::parse(parts.uri.query());
    let user_agent = header_str(&parts, header::USER_AGENT).to_owned();
    let token = header_str(&parts, header::AUTHORIZATION)
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim().to_owned());
    // A bearer token wins over a client certificate, as in kube-apiserver
    // (both are tried; the token authenticator runs first).
    let identity = match token.as_deref() {
        Some(t) if t != rbac::ADMIN_TOKEN => inner.reviews().user_of(t),
        Some(_) => None,
        None => peer.as_deref().cloned(),
    };
    let user = identity
        .as_ref()
        .map(|u| u.username.clone())
        .unwrap_or_default();
    let method = parts.method.clone();
    let mut routed = route(&inner, &keys, parts.uri.path(), &query, &user_agent, &host);

    let (verb, resource_name, namespace, name) = match &routed {
        Ok(Route::Resource(r)) => {
            let def = &inner.defs().get(r.def);
            let res = match &r.sub {
                Some(sub) => format!("{}/{sub}", def.plural),
                None => def.plural.to_owned(),
            };
            (
                verb_of(&method, r),
                res,
                r.namespace.clone(),
                r.name.clone(),
            )
        }
        Ok(Route::NodeProxy { name, .. }) => (
            Verb::Other,
            "nodes/proxy".to_owned(),
            None,
            Some(name.clone()),
        ),
        _ => (Verb::Other, String::new(), None, None),
    };
    if inner.settings().rbac {
        routed =
            authenticate_and_authorize(&inner, token.as_deref(), identity.clone(), &parts, routed);
    } else if let Ok(Route::Resource(r)) = &mut routed {
        r.user = match crate::auth::impersonation::impersonated(&parts.headers) {
            Ok(Some(as_user)) => Some(as_user),
            _ => identity.clone(),
        };
    }
    let faults = inner.faults().apply(verb, &resource_name);
    let response = if let Some(paused) = faults.paused_for {
        let secs = paused.as_secs().max(1);
        error_response(&ApiError {
            retry_after: Some(secs),
            ..ApiError::new(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request (paused by a test)",
            )
        })
    } else {
        if !faults.delay.is_zero() {
            tokio::time::sleep(faults.delay).await;
        }
        match (&faults.error, routed) {
            (Some(action), _) => error_response(&fault_error(action)),
            (None, Err(e)) => error_response(&e),
            (None, Ok(Route::Text(code, t))) => {
                let mut resp = Response::new(full(Bytes::from_static(t.as_bytes())));
                *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
                resp.headers_mut()
                    .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
                resp
            }
            (None, Ok(Route::Document(doc))) => value_response(200, &doc),
            (None, Ok(Route::GroupDiscovery { core, legacy })) => {
                match discovery::aggregated_version(header_str(&parts, header::ACCEPT)) {
                    Some(version) => {
                        let doc = discovery::aggregated(&inner.defs().served(), core, version);
                        let mut resp = value_response(200, &doc);
                        let content_type = format!(
                            "application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
                        );
                        if let Ok(v) = HeaderValue::from_str(&content_type) {
                            resp.headers_mut().insert(header::CONTENT_TYPE, v);
                        }
                        resp.headers_mut()
                            .insert(header::VARY, HeaderValue::from_static("Accept"));
                        resp
                    }
                    None => value_response(200, &legacy),
                }
            }
            (None, Ok(Route::OpenApiV2)) => {
                let (content_type, bytes) =
                    openapi::v2(inner.defs(), header_str(&parts, header::ACCEPT));
                bytes_response(200, full(bytes), content_type)
            }
            (None, Ok(Route::Resource(mut r))) => {
                let warnings = r.warnings.clone();
                let conversion =
                    conversion::of(inner.defs(), r.def).map(|(storage, conversion)| {
                        r.def = storage;
                        conversion
                    });
                r.conversion = conversion.clone().map(Arc::new);
                let watching = r.query.flag("watch");
                let mut resp =
                    match resource(&inner, &keys, &method, r, &parts, body, on_upgrade).await {
                        Ok(resp) => resp,
                        Err(e) => error_response(&e),
                    };
                if let Some(conversion) = &conversion {
                    resp = conversion.outgoing(resp, watching).await;
                }
                add_warnings(&mut resp, warnings.take());
                resp
            }
            (None, Ok(Route::NodeProxy { name, path })) => {
                let target = kubelet_client::Target::Node { name, path };
                let proxied = match read_body(&inner, body).await {
                    Ok(bytes) => {
                        kubelet::proxy(&inner, &keys.kubelet, target, &parts, bytes, on_upgrade)
                            .await
                    }
                    Err(e) => Err(e),
                };
                proxied.unwrap_or_else(|e| error_response(&e))
            }
        }
    };
    let answered_at = Instant::now();
    inner.log().push(RequestRecord {
        verb,
        resource: resource_name,
        namespace,
        name,
        user_agent,
        user,
        status: response.status().as_u16(),
        latency: answered_at.duration_since(started),
        answered_at,
    });
    response
}

#[cfg(test)]
mod warning_tests {
    use super::warning_value;

    #[test]
    fn warnings_are_quoted_and_escaped_into_a_valid_header() {
        assert_eq!(
            warning_value(r#"unknown field "a""#),
            r#"299 - "unknown field \"a\"""#
        );
        let v = warning_value("caf\u{e9}\n");
        assert_eq!(v, r#"299 - "caf\u00e9\u000a""#);
        assert!(http::HeaderValue::from_str(&v).is_ok());
    }
}
