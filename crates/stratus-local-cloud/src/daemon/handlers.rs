//! The daemon's HTTP API: the accept loop, each request routed to its
//! handler, validation, faults, and the state file written after each
//! change.

use std::collections::{BTreeSet, HashMap};
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde::{Deserialize, Serialize};
use stratus_accept::{Acceptor, ConnectionLimits, http_builder, serve_connection};
use tokio::sync::watch;

use crate::AddressRange;
use crate::api::{
    ApiError, ErrorCode, Faults, Instance, List, LoadBalancer, LoadBalancerSpec, MAX_PAGE, Route,
};

use super::state::{Cloud, FaultState, Lb, Saved, State, balancer};

pub(super) async fn serve(
    listener: tokio::net::TcpListener,
    cloud: Arc<Cloud>,
    mut stopped: watch::Receiver<bool>,
) {
    let limits = ConnectionLimits::default();
    let acceptor = Acceptor::new(listener, limits.clone());
    let builder = http_builder(&limits);
    loop {
        let connection = tokio::select! {
            c = acceptor.accept() => c,
            _ = stopped.wait_for(|s| *s) => break,
        };
        let (cloud, builder, limits) = (cloud.clone(), builder.clone(), limits.clone());
        tokio::spawn(async move {
            let _permit = connection.permit;
            let service = hyper::service::service_fn(move |req| {
                let cloud = cloud.clone();
                async move { Ok::<_, Infallible>(handle(&cloud, req).await) }
            });
            let io = hyper_util::rt::TokioIo::new(connection.stream);
            let _ = serve_connection(&builder, io, service, &limits).await;
        });
    }
    drop(acceptor);
    // Every load balancer stops listening (the state file keeps them for
    // the next start).
    let mut state = cloud.state.lock().await;
    for (_, lb) in std::mem::take(&mut state.load_balancers) {
        lb.plane.close().await;
    }
    if let Some(nat) = &cloud.nat {
        nat.stop().await;
    }
    // And the machine's networking forgets the routes.
    if cloud.config.pod_network.is_some() {
        for cidr in state.programmed() {
            if let Err(e) = crate::kernel::remove(cidr).await {
                tracing::error!(error = %e, "a route cannot be removed from the kernel");
            }
        }
    }
}

pub(super) type Reply = Response<Full<Bytes>>;

pub(super) fn json<T: Serialize>(status: StatusCode, value: &T) -> Reply {
    let body = serde_json::to_vec(value).unwrap_or_default();
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_default()
}

pub(super) fn no_content() -> Reply {
    Response::builder()
        .status(StatusCode::NO_CONTENT)
        .body(Full::new(Bytes::new()))
        .unwrap_or_default()
}

/// A failed call.
#[derive(Debug)]
pub(super) struct Failure(ApiError);

impl Failure {
    pub(super) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self(ApiError {
            code,
            message: message.into(),
            retry_after_ms: None,
        })
    }

    pub(super) fn reply(self) -> Reply {
        let status =
            StatusCode::from_u16(self.0.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut reply = json(status, &self.0);
        if let Some(ms) = self.0.retry_after_ms {
            let secs = ms.div_ceil(1000).max(1);
            if let Ok(value) = secs.to_string().parse() {
                reply.headers_mut().insert("retry-after", value);
            }
        }
        reply
    }
}

pub(super) async fn handle(cloud: &Cloud, req: Request<Incoming>) -> Reply {
    match route(cloud, req).await {
        Ok(reply) => reply,
        Err(failure) => failure.reply(),
    }
}

/// The largest request body the API reads.
pub(super) const MAX_BODY: usize = 4 * 1024 * 1024;

pub(super) async fn body<T: for<'de> Deserialize<'de>>(
    req: Request<Incoming>,
) -> Result<T, Failure> {
    let bytes = http_body_util::Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| {
            Failure::new(
                ErrorCode::Invalid,
                format!("reading the body (at most {MAX_BODY} bytes): {e}"),
            )
        })?
        .to_bytes();
    serde_json::from_slice(&bytes)
        .map_err(|e| Failure::new(ErrorCode::Invalid, format!("the body does not parse: {e}")))
}

/// The query's pairs (no percent-decoding: names here are plain).
pub(super) fn query(req: &Request<Incoming>) -> HashMap<String, String> {
    req.uri()
        .query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Apply the injected faults to an API call.
pub(super) async fn fault(cloud: &Cloud) -> Result<(), Failure> {
    let (latency, verdict) = {
        let mut f = cloud
            .faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let latency = Duration::from_millis(f.faults.latency_ms);
        let verdict = if f.faults.fail_next > 0 {
            f.faults.fail_next -= 1;
            Err(Failure::new(ErrorCode::Internal, "injected failure"))
        } else {
            f.take().map_err(|wait| {
                let mut failure = Failure::new(ErrorCode::Throttled, "too many calls");
                failure.0.retry_after_ms =
                    Some(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1));
                failure
            })
        };
        (latency, verdict)
    };
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    verdict
}

pub(super) fn valid_name(name: &str) -> Result<(), Failure> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if ok {
        Ok(())
    } else {
        Err(Failure::new(
            ErrorCode::Invalid,
            format!("{name:?} is not a name (letters, digits, '-', '.', '_'; 1 to 253)"),
        ))
    }
}

pub(super) async fn route(cloud: &Cloud, req: Request<Incoming>) -> Result<Reply, Failure> {
    let path = req.uri().path().to_owned();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let method = req.method().clone();
    match (&method, segments.as_slice()) {
        (&Method::GET, ["healthz"]) => return Ok(json(StatusCode::OK, &"ok")),
        (&Method::PUT, ["v1", "faults"]) => {
            let faults: Faults = body(req).await?;
            let mut f = cloud
                .faults
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *f = FaultState::new(faults.clone());
            return Ok(json(StatusCode::OK, &faults));
        }
        (&Method::GET, ["v1", "calls"]) => {
            let calls = cloud
                .calls
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            return Ok(json(StatusCode::OK, &calls));
        }
        _ => {}
    }
    let kind = match segments.as_slice() {
        ["v1", kind] => format!("{method} /v1/{kind}"),
        ["v1", kind, _] => format!("{method} /v1/{kind}/{{name}}"),
        _ => format!("{method} (unknown)"),
    };
    *cloud
        .calls
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(kind)
        .or_default() += 1;
    fault(cloud).await?;
    match (&method, segments.as_slice()) {
        (&Method::GET, ["v1", "instances"]) => {
            let q = query(&req);
            let state = cloud.state.lock().await;
            let matching = state
                .instances
                .iter()
                .filter(|(_, i)| q.get("name").is_none_or(|n| &i.node_name == n));
            Ok(json(StatusCode::OK, &page(matching, &q)?))
        }
        (&Method::GET, ["v1", "instances", id]) => {
            let state = cloud.state.lock().await;
            let found = state
                .instances
                .get(*id)
                .ok_or_else(|| not_found("instance", id))?;
            Ok(json(StatusCode::OK, found))
        }
        (&Method::PUT, ["v1", "instances", id]) => {
            valid_name(id)?;
            let id = (*id).to_owned();
            let mut instance: Instance = body(req).await?;
            instance.id = id.clone();
            for a in &instance.addresses {
                if a.kind != "Hostname" && a.address.parse::<IpAddr>().is_err() {
                    return Err(Failure::new(
                        ErrorCode::Invalid,
                        format!("address {:?} is not an IP address", a.address),
                    ));
                }
            }
            let mut state = cloud.state.lock().await;
            state.instances.insert(id, instance.clone());
            save(cloud, &state).await?;
            Ok(json(StatusCode::OK, &instance))
        }
        (&Method::DELETE, ["v1", "instances", id]) => {
            let mut state = cloud.state.lock().await;
            state
                .instances
                .remove(*id)
                .ok_or_else(|| not_found("instance", id))?;
            save(cloud, &state).await?;
            Ok(no_content())
        }
        (&Method::GET, ["v1", "load-balancers"]) => {
            let q = query(&req);
            let state = cloud.state.lock().await;
            let all = state.load_balancers.iter().map(|(k, lb)| (k, &lb.record));
            Ok(json(StatusCode::OK, &page(all, &q)?))
        }
        (&Method::GET, ["v1", "load-balancers", name]) => {
            let state = cloud.state.lock().await;
            let lb = state
                .load_balancers
                .get(*name)
                .ok_or_else(|| not_found("load balancer", name))?;
            Ok(json(StatusCode::OK, &lb.record))
        }
        (&Method::PUT, ["v1", "load-balancers", name]) => {
            valid_name(name)?;
            let name = (*name).to_owned();
            let spec: LoadBalancerSpec = body(req).await?;
            validate(&spec)?;
            let mut state = cloud.state.lock().await;
            let record = ensure(cloud, &mut state, name, spec).await?;
            save(cloud, &state).await?;
            Ok(json(StatusCode::OK, &record))
        }
        (&Method::DELETE, ["v1", "load-balancers", name]) => {
            let mut state = cloud.state.lock().await;
            let lb = state
                .load_balancers
                .remove(*name)
                .ok_or_else(|| not_found("load balancer", name))?;
            // Answered once nothing listens on its address any more.
            lb.plane.close().await;
            save(cloud, &state).await?;
            Ok(no_content())
        }
        (&Method::GET, ["v1", "routes"]) => {
            let q = query(&req);
            let state = cloud.state.lock().await;
            Ok(json(StatusCode::OK, &page(state.routes.iter(), &q)?))
        }
        (&Method::PUT, ["v1", "routes", name]) => {
            valid_name(name)?;
            let name = (*name).to_owned();
            let mut route: Route = body(req).await?;
            route.name = name.clone();
            valid_cidr(&route.destination_cidr)?;
            let mut state = cloud.state.lock().await;
            if let Some(pods) = cloud.config.pod_network {
                let cidr = routable(&route.destination_cidr, pods)?;
                crate::kernel::add(cidr)
                    .await
                    .map_err(|e| Failure::new(ErrorCode::Internal, e.to_string()))?;
                let old = state.routes.insert(name, route.clone());
                if let Err(failure) = unprogram(&state, old.as_ref()).await {
                    tracing::error!(error = %failure.0.message, "a replaced route's old CIDR stays in the kernel");
                }
            } else {
                state.routes.insert(name, route.clone());
            }
            save(cloud, &state).await?;
            Ok(json(StatusCode::OK, &route))
        }
        (&Method::DELETE, ["v1", "routes", name]) => {
            let mut state = cloud.state.lock().await;
            let old = state
                .routes
                .remove(*name)
                .ok_or_else(|| not_found("route", name))?;
            if cloud.config.pod_network.is_some()
                && let Err(failure) = unprogram(&state, Some(&old)).await
            {
                state.routes.insert(old.name.clone(), old);
                return Err(failure);
            }
            save(cloud, &state).await?;
            Ok(no_content())
        }
        _ => Err(Failure::new(
            ErrorCode::NotFound,
            format!("no such call: {method} {path}"),
        )),
    }
}

pub(super) fn not_found(what: &str, name: &str) -> Failure {
    Failure::new(ErrorCode::NotFound, format!("{what} {name:?} not found"))
}

/// The range of a route's CIDR, which must lie in the pod network to be
/// programmed.
pub(super) fn routable(cidr: &str, pods: AddressRange) -> Result<AddressRange, Failure> {
    let range: AddressRange = cidr
        .parse()
        .map_err(|e: crate::RangeError| Failure::new(ErrorCode::Invalid, e.to_string()))?;
    if pods.covers(&range) {
        Ok(range)
    } else {
        Err(Failure::new(
            ErrorCode::Invalid,
            format!("destinationCidr {cidr} is outside the pod network {pods} this cloud routes"),
        ))
    }
}

/// Remove the kernel route of `old` (a route just deleted or replaced)
/// unless a route still in `state` has the same CIDR.
pub(super) async fn unprogram(state: &State, old: Option<&Route>) -> Result<(), Failure> {
    let Some(Ok(cidr)) = old.map(|r| r.destination_cidr.parse::<AddressRange>()) else {
        return Ok(());
    };
    if state.programmed().contains(&cidr) {
        return Ok(());
    }
    crate::kernel::remove(cidr)
        .await
        .map_err(|e| Failure::new(ErrorCode::Internal, e.to_string()))
}

pub(super) fn valid_cidr(cidr: &str) -> Result<(), Failure> {
    let ok = cidr.split_once('/').is_some_and(|(ip, prefix)| {
        match (ip.parse::<IpAddr>(), prefix.parse::<u8>()) {
            (Ok(IpAddr::V4(_)), Ok(p)) => p <= 32,
            (Ok(IpAddr::V6(_)), Ok(p)) => p <= 128,
            _ => false,
        }
    });
    if ok {
        Ok(())
    } else {
        Err(Failure::new(
            ErrorCode::Invalid,
            format!("destinationCidr {cidr:?} is not a CIDR"),
        ))
    }
}

pub(super) fn validate(spec: &LoadBalancerSpec) -> Result<(), Failure> {
    let invalid = |why: String| Err(Failure::new(ErrorCode::Invalid, why));
    if spec.listeners.is_empty() {
        return invalid("a load balancer needs at least one listener".into());
    }
    if let Some(check) = &spec.health_check {
        if check.port == 0 {
            return invalid("healthCheck port 0".into());
        }
        if !check.path.starts_with('/') || check.path.chars().any(char::is_whitespace) {
            return invalid(format!(
                "healthCheck path {:?} must start with / and hold no space",
                check.path
            ));
        }
    }
    let mut seen = BTreeSet::new();
    for l in &spec.listeners {
        if l.port == 0 {
            return invalid("listener port 0".into());
        }
        if !seen.insert((l.protocol, l.port)) {
            return invalid(format!("listener {:?}/{} given twice", l.protocol, l.port));
        }
        for b in &l.backends {
            let Ok(ip) = b.address.parse::<Ipv4Addr>() else {
                return invalid(format!(
                    "backend {}:{} is not an IPv4 address and a port",
                    b.address, b.port
                ));
            };
            if b.port == 0 {
                return invalid(format!("backend {ip}: port 0"));
            }
        }
    }
    Ok(())
}

/// How many fresh addresses a new load balancer tries before giving up on
/// ports something else on the machine holds.
pub(super) const ADDRESS_ATTEMPTS: usize = 16;

pub(super) async fn ensure(
    cloud: &Cloud,
    state: &mut State,
    name: String,
    spec: LoadBalancerSpec,
) -> Result<LoadBalancer, Failure> {
    if let Some(lb) = state.load_balancers.get_mut(&name) {
        lb.plane.apply(&spec).await.map_err(|e| port_in_use(&e))?;
        lb.record.spec = spec;
        return Ok(lb.record.clone());
    }
    let taken: BTreeSet<Ipv4Addr> = state
        .load_balancers
        .values()
        .filter_map(|lb| lb.record.address.parse().ok())
        .collect();
    let mut skipped = BTreeSet::new();
    let mut last = None;
    for _ in 0..ADDRESS_ATTEMPTS {
        let Some(address) = cloud.config.address_range.first_free(&taken, &skipped) else {
            return Err(Failure::new(
                ErrorCode::AddressesExhausted,
                format!(
                    "every address of {} is taken ({} load balancers; {} more have a port held by something else)",
                    cloud.config.address_range,
                    taken.len(),
                    skipped.len()
                ),
            ));
        };
        let mut plane = balancer(IpAddr::V4(address), &cloud.config, cloud.nat.as_ref());
        match plane.apply(&spec).await {
            Ok(()) => {
                let record = LoadBalancer {
                    name: name.clone(),
                    address: address.to_string(),
                    spec,
                };
                state.load_balancers.insert(
                    name,
                    Lb {
                        record: record.clone(),
                        plane,
                    },
                );
                return Ok(record);
            }
            Err(e) => {
                tracing::warn!(%address, addr = %e.addr, error = %e.source,
                    "an address's port is taken; trying the next address");
                skipped.insert(address);
                last = Some(e);
            }
        }
    }
    Err(last.map_or_else(
        || Failure::new(ErrorCode::Internal, "no address was tried"),
        |e| port_in_use(&e),
    ))
}

pub(super) fn port_in_use(e: &crate::proxy::BindError) -> Failure {
    Failure::new(
        ErrorCode::PortInUse,
        format!("cannot listen on {:?} {}: {}", e.protocol, e.addr, e.source),
    )
}

/// One page of `items` (in key order) after `?continue=`, at most `?limit=`.
pub(super) fn page<'a, T: Clone + 'a>(
    items: impl Iterator<Item = (&'a String, &'a T)>,
    q: &HashMap<String, String>,
) -> Result<List<T>, Failure> {
    let limit = match q.get("limit") {
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|l| *l > 0)
            .ok_or_else(|| Failure::new(ErrorCode::Invalid, format!("limit {l:?}")))?,
        None => MAX_PAGE,
    }
    .min(MAX_PAGE);
    let after = q.get("continue");
    let mut rest = items.filter(|(k, _)| after.is_none_or(|a| k.as_str() > a.as_str()));
    let chosen: Vec<(&String, &T)> = rest.by_ref().take(limit).collect();
    let continue_token = match rest.next() {
        Some(_) => chosen.last().map(|(k, _)| (*k).clone()),
        None => None,
    };
    Ok(List {
        items: chosen.into_iter().map(|(_, v)| v.clone()).collect(),
        continue_token,
    })
}

/// Write the state file (atomically: a temporary file renamed over it).
pub(super) async fn save(cloud: &Cloud, state: &State) -> Result<(), Failure> {
    let Some(path) = &cloud.config.state_file else {
        return Ok(());
    };
    let saved = Saved {
        instances: state.instances.values().cloned().collect(),
        load_balancers: state
            .load_balancers
            .values()
            .map(|lb| lb.record.clone())
            .collect(),
        routes: state.routes.values().cloned().collect(),
    };
    let text = serde_json::to_vec_pretty(&saved).unwrap_or_default();
    let tmp = path.with_extension("tmp");
    let written = async {
        tokio::fs::write(&tmp, &text).await?;
        tokio::fs::rename(&tmp, path).await
    }
    .await;
    written.map_err(|e| {
        Failure::new(
            ErrorCode::Internal,
            format!("writing the state file {}: {e}", path.display()),
        )
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn pages_follow_the_continue_token() {
        let items: BTreeMap<String, u32> = (0..5).map(|i| (format!("r{i}"), i)).collect();
        let q = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect()
        };
        let first = page(items.iter(), &q(&[("limit", "2")])).unwrap();
        assert_eq!(first.items, [0, 1]);
        assert_eq!(first.continue_token.as_deref(), Some("r1"));
        let last = page(items.iter(), &q(&[("limit", "3"), ("continue", "r1")])).unwrap();
        assert_eq!(last.items, [2, 3, 4]);
        assert_eq!(last.continue_token, None);
        assert!(page(items.iter(), &q(&[("limit", "0")])).is_err());
    }

    #[test]
    fn bad_load_balancers_are_refused_with_the_reason() {
        let listener = |port, address: &str| crate::api::Listener {
            protocol: crate::api::Protocol::Tcp,
            port,
            backends: vec![crate::api::Backend {
                address: address.into(),
                port: 30080,
            }],
        };
        let spec = |listeners| LoadBalancerSpec {
            listeners,
            tags: BTreeMap::new(),
            health_check: None,
        };
        let checked = |port, path: &str| LoadBalancerSpec {
            health_check: Some(crate::api::HealthCheck {
                port,
                path: path.into(),
            }),
            ..spec(vec![listener(80, "127.0.0.1")])
        };
        for (bad, why) in [
            (spec(vec![]), "at least one"),
            (spec(vec![listener(0, "127.0.0.1")]), "port 0"),
            (spec(vec![listener(80, "x")]), "not an IPv4"),
            (
                spec(vec![listener(80, "127.0.0.1"), listener(80, "127.0.0.2")]),
                "twice",
            ),
            (checked(0, "/healthz"), "healthCheck port 0"),
            (checked(32000, "healthz"), "must start with /"),
            (checked(32000, "/a b"), "must start with /"),
        ] {
            let Err(Failure(e)) = validate(&bad) else {
                panic!("{bad:?} accepted");
            };
            assert_eq!(e.code, ErrorCode::Invalid);
            assert!(e.message.contains(why), "{}", e.message);
        }
        assert!(validate(&spec(vec![listener(80, "127.0.0.1")])).is_ok());
        assert!(valid_cidr("10.244.0.0/24").is_ok() && valid_cidr("10.244.0.0").is_err());
        assert!(valid_name("a-1.b_c").is_ok() && valid_name("a/b").is_err());
    }
}
