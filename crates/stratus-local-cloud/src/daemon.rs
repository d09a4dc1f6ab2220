//! The daemon: the API server, the cloud's state and its state file.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde::{Deserialize, Serialize};
use stratus_accept::{Acceptor, ConnectionLimits, http_builder, serve_connection};
use tokio::sync::{Mutex, watch};

use crate::AddressRange;
use crate::api::{
    ApiError, ErrorCode, Faults, Instance, List, LoadBalancer, LoadBalancerSpec, MAX_PAGE, Route,
};
use crate::proxy::{Balancer, DataPlane};

/// How the daemon is set up.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where its API listens (`127.0.0.1:0` picks a port).
    pub listen: SocketAddr,
    /// The range load-balancer addresses come from.
    pub address_range: AddressRange,
    /// The addresses the cloud connects to: a backend elsewhere stays in
    /// its load balancer's record but gets no connection and no health
    /// check, so that the cloud sends traffic only where its operator
    /// allows. IPv4 only.
    pub allowed_backends: Vec<AddressRange>,
    /// The range pod CIDRs are routed in. When set, every route (whose
    /// CIDR must lie in it) is programmed into this machine's kernel as a
    /// local route on the loopback interface, so its addresses are this
    /// machine's own and pods may bind them; the route is removed when it
    /// is deleted or the daemon stops, and written again from the state
    /// file when it starts. Backends in it are allowed. Needs
    /// `CAP_NET_ADMIN` and iproute2's `ip`. `None` (the default): routes
    /// are only recorded.
    pub pod_network: Option<AddressRange>,
    /// Where the state is kept across restarts; `None` keeps it in memory.
    pub state_file: Option<PathBuf>,
    /// Faults injected from the start.
    pub faults: Faults,
    /// How often an unhealthy backend is checked again.
    pub health_interval: Duration,
    /// How long a connection to a backend may take.
    pub connect_timeout: Duration,
    /// How long open connections of a removed listener may go on.
    pub drain_timeout: Duration,
    /// How long a UDP client's session lives without a datagram.
    pub udp_idle: Duration,
    /// Who moves the load balancers' traffic: this process (the default)
    /// or the kernel.
    pub forwarding: Forwarding,
}

/// Who moves a load balancer's traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Forwarding {
    /// This process: it accepts each connection (each UDP client) and
    /// relays it to a backend (`splice(2)` for TCP on Linux), trying the
    /// next backend when one does not answer.
    #[default]
    Proxy,
    /// The kernel: an nftables DNAT rule per listener sends new
    /// connections to the healthy backends in turn (every backend is
    /// health-checked each interval); the proxy still holds the ports and
    /// serves what no rule covers. Needs `CAP_NET_ADMIN` and `nft`.
    Kernel,
}

impl Default for Config {
    /// `127.0.0.1:0`, addresses from `127.77.0.0/16`, backends in
    /// `127.0.0.0/8` (this machine's loopback) only, routes recorded but
    /// not programmed, no state file, no faults, health checks every
    /// second, 1 s to connect, 10 s of draining, UDP sessions idle out
    /// after 30 s, traffic relayed by this process.
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            address_range: "127.77.0.0/16"
                .parse()
                .unwrap_or_else(|_| unreachable!("a valid range")),
            allowed_backends: vec![
                "127.0.0.0/8"
                    .parse()
                    .unwrap_or_else(|_| unreachable!("a valid range")),
            ],
            pod_network: None,
            state_file: None,
            faults: Faults::default(),
            health_interval: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            drain_timeout: Duration::from_secs(10),
            udp_idle: Duration::from_secs(30),
            forwarding: Forwarding::Proxy,
        }
    }
}

/// Why the daemon did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The API's address cannot be listened on.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Kernel forwarding was asked for and its rules cannot be written.
    #[error("kernel forwarding: {0}")]
    Forwarding(#[from] crate::nat::NatError),
    /// The state file cannot be read or does not parse.
    #[error("state file {path}: {why}")]
    StateFile {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

/// What the state file holds.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Saved {
    instances: Vec<Instance>,
    load_balancers: Vec<LoadBalancer>,
    routes: Vec<Route>,
}

/// A load balancer: what it is and its data plane.
#[derive(Debug)]
struct Lb {
    record: LoadBalancer,
    plane: Balancer,
}

/// Everything the cloud has.
#[derive(Debug, Default)]
struct State {
    instances: BTreeMap<String, Instance>,
    load_balancers: BTreeMap<String, Lb>,
    routes: BTreeMap<String, Route>,
}

impl State {
    /// The CIDRs of the routes, each once: what the kernel has with a pod
    /// network.
    fn programmed(&self) -> Vec<AddressRange> {
        let mut cidrs: Vec<AddressRange> = self
            .routes
            .values()
            .filter_map(|r| r.destination_cidr.parse().ok())
            .collect();
        cidrs.sort_by_key(|c| c.to_string());
        cidrs.dedup();
        cidrs
    }
}

/// The fault state: the configuration and the token bucket.
#[derive(Debug)]
struct FaultState {
    faults: Faults,
    tokens: f64,
    refilled: Instant,
}

impl FaultState {
    fn new(faults: Faults) -> Self {
        Self {
            tokens: f64::from(burst(&faults)),
            faults,
            refilled: Instant::now(),
        }
    }

    /// Take a token; the wait until one is there if none is.
    fn take(&mut self) -> Result<(), Duration> {
        let rate = f64::from(self.faults.calls_per_second);
        if rate == 0.0 {
            return Ok(());
        }
        let now = Instant::now();
        let elapsed = now.duration_since(self.refilled).as_secs_f64();
        self.refilled = now;
        self.tokens = (self.tokens + elapsed * rate).min(f64::from(burst(&self.faults)));
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / rate))
        }
    }
}

fn burst(faults: &Faults) -> u32 {
    if faults.burst == 0 {
        faults.calls_per_second
    } else {
        faults.burst
    }
}

struct Cloud {
    config: Config,
    /// The kernel's rules, with kernel forwarding.
    nat: Option<crate::nat::Nat>,
    state: Mutex<State>,
    faults: std::sync::Mutex<FaultState>,
    /// API calls answered (faults included), by `METHOD /v1/kind[/{name}]`.
    calls: std::sync::Mutex<BTreeMap<String, u64>>,
}

/// A running local cloud.
///
/// ```
/// use stratus_local_cloud::{Config, LocalCloud};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let cloud = LocalCloud::start(Config::default()).await?;
/// println!("the cloud's API is at http://{}", cloud.addr());
/// cloud.stop().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct LocalCloud {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl LocalCloud {
    /// Load the state file (if any), bind every load balancer it has,
    /// program its routes (with a pod network), and serve the API.
    pub async fn start(mut config: Config) -> Result<Self, StartError> {
        if let Some(pods) = config.pod_network {
            config.allowed_backends.push(pods);
        }
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| StartError::Listen {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| StartError::Listen {
            addr: config.listen,
            source,
        })?;
        let nat = match config.forwarding {
            Forwarding::Kernel => Some(crate::nat::Nat::start().await?),
            Forwarding::Proxy => None,
        };
        let state = restore(&config, nat.as_ref()).await?;
        let cloud = Arc::new(Cloud {
            nat,
            faults: std::sync::Mutex::new(FaultState::new(config.faults.clone())),
            config,
            state: Mutex::new(state),
            calls: std::sync::Mutex::default(),
        });
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(serve(listener, cloud, stopped));
        tracing::info!(%addr, "local cloud serving");
        Ok(Self { addr, stop, task })
    }

    /// The API's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop serving, close every load balancer's listeners and remove the
    /// kernel's routes and forwarding rules (the state stays in the state
    /// file).
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// A load balancer's data plane on `address`, as `config` says.
fn balancer(address: IpAddr, config: &Config, nat: Option<&crate::nat::Nat>) -> Balancer {
    let plane = DataPlane {
        health_interval: config.health_interval,
        connect_timeout: config.connect_timeout,
        drain_timeout: config.drain_timeout,
        udp_idle: config.udp_idle,
    };
    Balancer::new(
        address,
        plane,
        Arc::from(config.allowed_backends.as_slice()),
        nat.cloned(),
    )
}

async fn restore(config: &Config, nat: Option<&crate::nat::Nat>) -> Result<State, StartError> {
    let mut state = State::default();
    let Some(path) = &config.state_file else {
        return Ok(state);
    };
    let text = match tokio::fs::read(path).await {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(state),
        Err(e) => {
            return Err(StartError::StateFile {
                path: path.clone(),
                why: e.to_string(),
            });
        }
    };
    let saved: Saved = serde_json::from_slice(&text).map_err(|e| StartError::StateFile {
        path: path.clone(),
        why: e.to_string(),
    })?;
    state.instances = saved
        .instances
        .into_iter()
        .map(|i| (i.id.clone(), i))
        .collect();
    state.routes = saved
        .routes
        .into_iter()
        .map(|r| (r.name.clone(), r))
        .collect();
    if config.pod_network.is_some() {
        for cidr in state.programmed() {
            if let Err(e) = crate::kernel::add(cidr).await {
                // Kept: the next PUT of the route writes it again.
                tracing::error!(error = %e, "a restored route cannot be programmed");
            }
        }
    }
    for record in saved.load_balancers {
        let address: IpAddr = record.address.parse().map_err(|_| StartError::StateFile {
            path: path.clone(),
            why: format!(
                "load balancer {}: bad address {:?}",
                record.name, record.address
            ),
        })?;
        let mut plane = balancer(address, config, nat);
        if let Err(e) = plane.apply(&record.spec).await {
            // Kept: the next PUT binds what is missing.
            tracing::error!(lb = %record.name, addr = %e.addr, error = %e.source,
                "a restored load balancer's port cannot be listened on");
        }
        state
            .load_balancers
            .insert(record.name.clone(), Lb { record, plane });
    }
    Ok(state)
}

async fn serve(
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

type Reply = Response<Full<Bytes>>;

fn json<T: Serialize>(status: StatusCode, value: &T) -> Reply {
    let body = serde_json::to_vec(value).unwrap_or_default();
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_default()
}

fn no_content() -> Reply {
    Response::builder()
        .status(StatusCode::NO_CONTENT)
        .body(Full::new(Bytes::new()))
        .unwrap_or_default()
}

/// A failed call.
#[derive(Debug)]
struct Failure(ApiError);

impl Failure {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self(ApiError {
            code,
            message: message.into(),
            retry_after_ms: None,
        })
    }

    fn reply(self) -> Reply {
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

async fn handle(cloud: &Cloud, req: Request<Incoming>) -> Reply {
    match route(cloud, req).await {
        Ok(reply) => reply,
        Err(failure) => failure.reply(),
    }
}

/// The largest request body the API reads.
const MAX_BODY: usize = 4 * 1024 * 1024;

async fn body<T: for<'de> Deserialize<'de>>(req: Request<Incoming>) -> Result<T, Failure> {
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
fn query(req: &Request<Incoming>) -> HashMap<String, String> {
    req.uri()
        .query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Apply the injected faults to an API call.
async fn fault(cloud: &Cloud) -> Result<(), Failure> {
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

fn valid_name(name: &str) -> Result<(), Failure> {
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

async fn route(cloud: &Cloud, req: Request<Incoming>) -> Result<Reply, Failure> {
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

fn not_found(what: &str, name: &str) -> Failure {
    Failure::new(ErrorCode::NotFound, format!("{what} {name:?} not found"))
}

/// The range of a route's CIDR, which must lie in the pod network to be
/// programmed.
fn routable(cidr: &str, pods: AddressRange) -> Result<AddressRange, Failure> {
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
async fn unprogram(state: &State, old: Option<&Route>) -> Result<(), Failure> {
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

fn valid_cidr(cidr: &str) -> Result<(), Failure> {
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

fn validate(spec: &LoadBalancerSpec) -> Result<(), Failure> {
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
const ADDRESS_ATTEMPTS: usize = 16;

async fn ensure(
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

fn port_in_use(e: &crate::proxy::BindError) -> Failure {
    Failure::new(
        ErrorCode::PortInUse,
        format!("cannot listen on {:?} {}: {}", e.protocol, e.addr, e.source),
    )
}

/// One page of `items` (in key order) after `?continue=`, at most `?limit=`.
fn page<'a, T: Clone + 'a>(
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
async fn save(cloud: &Cloud, state: &State) -> Result<(), Failure> {
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
    use super::*;

    #[test]
    fn the_bucket_refuses_beyond_its_burst_and_says_how_long_to_wait() {
        let mut f = FaultState::new(Faults {
            calls_per_second: 10,
            burst: 2,
            ..Faults::default()
        });
        assert!(f.take().is_ok());
        assert!(f.take().is_ok());
        let wait = f.take().unwrap_err();
        assert!(
            wait <= Duration::from_millis(100) && wait > Duration::ZERO,
            "{wait:?}"
        );
        let mut unlimited = FaultState::new(Faults::default());
        assert!((0..1000).all(|_| unlimited.take().is_ok()));
    }

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
