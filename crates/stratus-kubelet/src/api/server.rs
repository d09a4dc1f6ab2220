//! The kubelet API handler and its HTTPS server.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::json;
use stratus_pod::{ByteStream, ContainerRef, PodError, PodLifecycleHandler};
use stratus_runtime::auth::{Decision, DelegatedAuth};
use stratus_runtime::serving::{self, Handler, Listener};
use stratus_runtime::tls::{ServingCertificate, TlsError};
use tokio::sync::watch;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::channel::{ChannelProtocol, PORT_FORWARD_PROTOCOLS, REMOTE_COMMAND_PROTOCOLS};
use super::params::{Query, forward_ports, log_options, stream_options};
use super::route::{Route, RouteError, kubelet_attributes};
use super::{port_forward, remote_command, spdy};

/// The response body of the kubelet API (streamed for logs).
pub type Body = UnsyncBoxBody<Bytes, io::Error>;

/// How the kubelet API decides who may call it.
#[derive(Debug, Clone)]
pub enum ApiAuth {
    /// Authenticate and authorize every request through the API server
    /// (use [`DelegatedAuthConfig::kubelet`](stratus_runtime::auth::DelegatedAuthConfig::kubelet)
    /// for the kubelet's defaults).
    Delegated(Box<DelegatedAuth>),
    /// Serve anyone. Only for tests and development: Go VK's `NoAuth`.
    AllowAll,
}

impl ApiAuth {
    /// [`ApiAuth::Delegated`] with `auth`.
    pub fn delegated(auth: DelegatedAuth) -> Self {
        Self::Delegated(Box::new(auth))
    }
}

#[derive(Clone)]
struct Inner {
    node: String,
    provider: Arc<dyn PodLifecycleHandler>,
    client: kube::Client,
    auth: ApiAuth,
    stream_idle_timeout: Duration,
    stream_creation_timeout: Duration,
    metrics: Option<crate::metrics::KubeletMetrics>,
}

/// The kubelet API of one virtual node: routes requests to its provider.
/// Cheap to clone.
#[derive(Clone)]
pub struct KubeletApi {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for KubeletApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeletApi")
            .field("node", &self.inner.node)
            .field("auth", &self.inner.auth)
            .finish_non_exhaustive()
    }
}

fn text(status: StatusCode, body: impl Into<String>) -> Response<Body> {
    serving::text(status, serving::PLAIN, body.into())
        .map(|b| b.map_err(|e| match e {}).boxed_unsync())
}

fn json_response(value: &serde_json::Value) -> Response<Body> {
    serving::text(StatusCode::OK, "application/json", value.to_string())
        .map(|b| b.map_err(|e| match e {}).boxed_unsync())
}

fn error_response(err: &PodError) -> Response<Body> {
    let status =
        StatusCode::from_u16(err.kind().http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    text(status, format!("{err}\n"))
}

/// The words of the 501 the kubelet API answers for a capability its
/// provider does not declare (its accessor, e.g.
/// `PodLifecycleHandler::container_logs`, returns `None`): `"<what> is
/// not supported by the provider of node <node>"`. A provider that declares
/// the capability and answers `NotImplemented` gets a 501 with its own
/// message instead, which the e2e runner and the conformance suite report
/// as a failure, not as a capability left out.
pub const NOT_DECLARED: &str = "is not supported by the provider of node";

/// The words a port-forward's error stream carries when the provider
/// declares port-forwarding (`PodLifecycleHandler::port_forward` is `Some`)
/// but answers `NotImplemented`: the request was upgraded before the
/// provider was called, so there is no 501 to tell it by.
pub const FORWARD_NOT_IMPLEMENTED: &str = "the provider answered NotImplemented";

/// The message a port-forward's error stream carries when forwarding
/// `port` to `namespace/pod` failed with `error` (Go kubelet's words, with
/// [`FORWARD_NOT_IMPLEMENTED`] in front of a `NotImplemented` error).
pub(crate) fn forward_error(port: u16, namespace: &str, pod: &str, error: &PodError) -> String {
    match error.is_not_implemented() {
        true => format!(
            "error forwarding port {port} to pod {namespace}/{pod}: {FORWARD_NOT_IMPLEMENTED}: {error}"
        ),
        false => format!("error forwarding port {port} to pod {namespace}/{pod}: {error}"),
    }
}

fn not_implemented(node: &str, what: &str) -> Response<Body> {
    text(
        StatusCode::NOT_IMPLEMENTED,
        format!("{what} {NOT_DECLARED} {node}\n"),
    )
}

/// Cut `stream` after `limit` bytes (`limitBytes`), whatever the provider
/// sends.
fn limited(stream: ByteStream, limit: Option<i64>) -> ByteStream {
    let Some(limit) = limit.and_then(|l| u64::try_from(l).ok()) else {
        return stream;
    };
    Box::pin(futures_util::stream::unfold(
        (stream, limit),
        |(mut stream, left)| async move {
            if left == 0 {
                return None;
            }
            match stream.next().await? {
                Ok(mut chunk) => {
                    let keep = usize::try_from(left).unwrap_or(usize::MAX).min(chunk.len());
                    chunk.truncate(keep);
                    Some((Ok(chunk), (stream, left - keep as u64)))
                }
                Err(e) => Some((Err(e), (stream, 0))),
            }
        },
    ))
}

fn header_values<'a>(req: &'a Request<Incoming>, name: &str) -> Vec<&'a str> {
    req.headers()
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect()
}

/// An empty 101 answer switching to `protocol`.
fn switching_to(protocol: &'static str) -> Response<Body> {
    let mut response = empty(StatusCode::SWITCHING_PROTOCOLS);
    let headers = response.headers_mut();
    headers.insert(header::UPGRADE, HeaderValue::from_static(protocol));
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    response
}

/// An empty answer.
fn empty(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::new())
            .map_err(|e| match e {})
            .boxed_unsync(),
    );
    *response.status_mut() = status;
    response
}

/// An upgrade's outcome: the negotiated protocol and the 101 answer, or
/// the status and message of the refusal.
type Switch<P> = Result<(P, Response<Body>), (StatusCode, String)>;

/// Check a WebSocket upgrade and pick its protocol: the 101 answer, or
/// the error answer.
fn websocket_handshake(
    req: &Request<Incoming>,
    supported: &[ChannelProtocol],
) -> Switch<ChannelProtocol> {
    let upgrade = header_values(req, "upgrade").join(",").to_ascii_lowercase();
    let key = req.headers().get("sec-websocket-key");
    let (true, Some(key)) = (upgrade.contains("websocket"), key) else {
        return Err((
            StatusCode::BAD_REQUEST,
            "Upgrade request required: exec, attach and port-forward need a WebSocket\n".into(),
        ));
    };
    let offered = header_values(req, "sec-websocket-protocol");
    let Some((protocol, named)) = ChannelProtocol::negotiate(&offered, supported) else {
        let names: Vec<_> = supported.iter().map(|p| p.name()).collect();
        return Err((
            StatusCode::BAD_REQUEST,
            format!(
                "none of the requested protocols {offered:?} is supported; supported: {}\n",
                names.join(", ")
            ),
        ));
    };
    let mut response = switching_to("websocket");
    let headers = response.headers_mut();
    if let Ok(accept) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        headers.insert("sec-websocket-accept", accept);
    }
    if named {
        headers.insert(
            "sec-websocket-protocol",
            HeaderValue::from_static(protocol.name()),
        );
    }
    Ok((protocol, response))
}

/// A SPDY/3.1 upgrade (`None` if the request asks for something else):
/// the negotiated `X-Stream-Protocol-Version` and the 101 answer, or the
/// error answer (403 when no version matches, as Go's handshake).
fn spdy_handshake(
    req: &Request<Incoming>,
    supported: &[&'static str],
) -> Option<Switch<Option<&'static str>>> {
    let upgrade = header_values(req, "upgrade").join(",").to_ascii_lowercase();
    if !upgrade.contains("spdy/3.1") {
        return None;
    }
    let offered = header_values(req, "x-stream-protocol-version");
    let Some(version) = spdy::negotiate(&offered, supported) else {
        return Some(Err((
            StatusCode::FORBIDDEN,
            format!(
                "unable to upgrade: unable to negotiate protocol: client supports {offered:?}, server accepts {supported:?}\n"
            ),
        )));
    };
    let mut response = switching_to("SPDY/3.1");
    if let Some(version) = version {
        response.headers_mut().insert(
            "x-stream-protocol-version",
            HeaderValue::from_static(version),
        );
    }
    Some(Ok((version, response)))
}

/// Run `serve` on the raw connection once it is upgraded.
fn after_raw_upgrade<F, Fut>(req: Request<Incoming>, serve: F)
where
    F: FnOnce(TokioIo<hyper::upgrade::Upgraded>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        match hyper::upgrade::on(req).await {
            Ok(upgraded) => serve(TokioIo::new(upgraded)).await,
            Err(e) => tracing::debug!(error = %e, "the upgrade failed"),
        }
    });
}

/// Run `serve` on the WebSocket once the connection is upgraded.
fn after_upgrade<F, Fut>(req: Request<Incoming>, serve: F)
where
    F: FnOnce(super::session::Socket) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    after_raw_upgrade(req, move |io| async move {
        serve(WebSocketStream::from_raw_socket(io, Role::Server, None).await).await;
    });
}

/// The provider call of an exec (`exec`) or attach session.
fn command_call(
    provider: Arc<dyn PodLifecycleHandler>,
    container: ContainerRef,
    command: Vec<String>,
    exec: bool,
) -> impl FnOnce(stratus_pod::AttachIo) -> BoxFuture<'static, remote_command::Outcome> {
    move |io| {
        Box::pin(async move {
            if exec {
                match provider.exec() {
                    Some(e) => e.exec(&container, &command, io).await.map(Some),
                    None => Err(PodError::not_implemented("exec")),
                }
            } else {
                match provider.attach() {
                    Some(a) => a.attach(&container, io).await.map(|()| None),
                    None => Err(PodError::not_implemented("attach")),
                }
            }
        })
    }
}

impl KubeletApi {
    /// The API of node `node`, served from `provider`; `client` lists the
    /// pods bound to the node for `/pods`.
    pub fn new(
        node: impl Into<String>,
        provider: Arc<dyn PodLifecycleHandler>,
        client: kube::Client,
        auth: ApiAuth,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                node: node.into(),
                provider,
                client,
                auth,
                stream_idle_timeout: Duration::from_secs(30),
                stream_creation_timeout: Duration::from_secs(30),
                metrics: None,
            }),
        }
    }

    /// Close exec, attach and port-forward streams after this long without
    /// traffic (default 30 s, Go's `--stream-idle-timeout`).
    pub fn with_stream_idle_timeout(self, timeout: Duration) -> Self {
        self.configure(|inner| inner.stream_idle_timeout = timeout)
    }

    /// Give SPDY clients this long to open a session's streams (default
    /// 30 s, Go's `--stream-creation-timeout`).
    pub fn with_stream_creation_timeout(self, timeout: Duration) -> Self {
        self.configure(|inner| inner.stream_creation_timeout = timeout)
    }

    /// Count every request in `metrics`
    /// (`stratus_kubelet_api_requests_total{node,subresource,code}`).
    pub fn with_metrics(self, metrics: crate::metrics::KubeletMetrics) -> Self {
        self.configure(|inner| inner.metrics = Some(metrics))
    }

    fn configure(self, change: impl FnOnce(&mut Inner)) -> Self {
        let mut inner = Arc::try_unwrap(self.inner).unwrap_or_else(|shared| (*shared).clone());
        change(&mut inner);
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The node this API serves.
    pub fn node(&self) -> &str {
        &self.inner.node
    }

    /// Answer one request (and count it, with [`KubeletApi::with_metrics`]).
    pub async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
        let subresource = super::route::subresource_of(req.uri().path());
        let response = self.answer(req).await;
        if let Some(metrics) = &self.inner.metrics {
            metrics.api_request(&self.inner.node, subresource, response.status().as_u16());
        }
        response
    }

    async fn answer(&self, req: Request<Incoming>) -> Response<Body> {
        let route = match Route::parse(req.method(), req.uri().path()) {
            Ok(r) => r,
            Err(RouteError::NotFound) => {
                return text(StatusCode::NOT_FOUND, "404 page not found\n");
            }
            Err(RouteError::MethodNotAllowed) => {
                return text(StatusCode::METHOD_NOT_ALLOWED, "405 method not allowed\n");
            }
        };
        if let ApiAuth::Delegated(auth) = &self.inner.auth {
            let attributes = kubelet_attributes(&self.inner.node, req.method(), req.uri().path());
            match auth.check(&req, Some(attributes)).await {
                Decision::Allowed(_) => {}
                Decision::Unauthorized(why) => {
                    return text(StatusCode::UNAUTHORIZED, format!("Unauthorized: {why}\n"));
                }
                Decision::Forbidden(why) => return text(StatusCode::FORBIDDEN, format!("{why}\n")),
                Decision::Error(why) => {
                    return text(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("Authorization error: {why}\n"),
                    );
                }
            }
        }
        let query = Query::parse(req.uri().query());
        let head = *req.method() == Method::HEAD;
        let response = match route {
            Route::Healthz => text(StatusCode::OK, "ok"),
            Route::ContainerLogs(container) => self.logs(&container, &query).await,
            Route::Exec(container) => self.remote_command(req, container, &query, true),
            Route::Attach(container) => self.remote_command(req, container, &query, false),
            Route::PortForward { namespace, pod } => self.port_forward(req, namespace, pod, &query),
            Route::StatsSummary => self.stats().await,
            Route::MetricsResource => self.metrics().await,
            Route::Pods => self.bound_pods().await,
            Route::RunningPods => match self.inner.provider.get_pods().await {
                Ok(pods) => json_response(&pod_list(&pods)),
                Err(e) => error_response(&e),
            },
        };
        if head {
            let (parts, _) = response.into_parts();
            return Response::from_parts(parts, empty(StatusCode::OK).into_body());
        }
        response
    }

    async fn logs(&self, container: &ContainerRef, query: &Query) -> Response<Body> {
        let options = match log_options(query) {
            Ok(o) => o,
            Err(e) => return text(StatusCode::BAD_REQUEST, format!("{e}\n")),
        };
        let Some(logs) = self.inner.provider.container_logs() else {
            return not_implemented(&self.inner.node, "container logs");
        };
        match logs.container_logs(container, &options).await {
            Ok(stream) => {
                let frames = limited(stream, options.limit_bytes)
                    .map(|chunk| chunk.map(|c| Frame::data(Bytes::from(c))));
                let mut response = Response::new(StreamBody::new(frames).boxed_unsync());
                response
                    .headers_mut()
                    .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
                response
            }
            Err(e) => error_response(&e),
        }
    }

    fn remote_command(
        &self,
        req: Request<Incoming>,
        container: ContainerRef,
        query: &Query,
        exec: bool,
    ) -> Response<Body> {
        let options = match stream_options(query, exec) {
            Ok(o) => o,
            Err(e) => return text(StatusCode::BAD_REQUEST, format!("{e}\n")),
        };
        let provider = self.inner.provider.clone();
        let capable = if exec {
            provider.exec().is_some()
        } else {
            provider.attach().is_some()
        };
        if !capable {
            let what = if exec { "exec" } else { "attach" };
            return not_implemented(&self.inner.node, what);
        }
        let call = command_call(provider, container, options.command.clone(), exec);
        if let Some(handshake) = spdy_handshake(&req, spdy::REMOTE_COMMAND_VERSIONS) {
            let (version, response) = match handshake {
                Ok(ok) => ok,
                Err((status, message)) => return text(status, message),
            };
            let timeouts = (
                self.inner.stream_creation_timeout,
                self.inner.stream_idle_timeout,
            );
            after_raw_upgrade(req, move |io| {
                spdy::serve::remote_command(io, version, options, timeouts, call)
            });
            return response;
        }
        let (protocol, response) = match websocket_handshake(&req, REMOTE_COMMAND_PROTOCOLS) {
            Ok(ok) => ok,
            Err((status, message)) => return text(status, message),
        };
        let idle = self.inner.stream_idle_timeout;
        after_upgrade(req, move |socket| {
            remote_command::serve(socket, protocol, options, idle, call)
        });
        response
    }

    fn port_forward(
        &self,
        req: Request<Incoming>,
        namespace: String,
        pod: String,
        query: &Query,
    ) -> Response<Body> {
        if self.inner.provider.port_forward().is_none() {
            return not_implemented(&self.inner.node, "port-forward");
        }
        let provider = self.inner.provider.clone();
        // Over SPDY the ports arrive as stream headers, not in the query.
        if let Some(handshake) = spdy_handshake(&req, &[spdy::PORT_FORWARD_VERSION]) {
            let response = match handshake {
                Ok((_, response)) => response,
                Err((status, message)) => return text(status, message),
            };
            let timeouts = (
                self.inner.stream_creation_timeout,
                self.inner.stream_idle_timeout,
            );
            after_raw_upgrade(req, move |io| {
                spdy::serve::port_forward(io, provider, namespace, pod, timeouts)
            });
            return response;
        }
        let ports = match forward_ports(query) {
            Ok(p) => p,
            Err(e) => return text(StatusCode::BAD_REQUEST, format!("{e}\n")),
        };
        let (protocol, response) = match websocket_handshake(&req, PORT_FORWARD_PROTOCOLS) {
            Ok(ok) => ok,
            Err((status, message)) => return text(status, message),
        };
        let idle = self.inner.stream_idle_timeout;
        after_upgrade(req, move |socket| {
            port_forward::serve(socket, protocol, provider, namespace, pod, ports, idle)
        });
        response
    }

    async fn stats(&self) -> Response<Body> {
        let Some(stats) = self.inner.provider.stats_summary() else {
            return not_implemented(&self.inner.node, "the stats summary");
        };
        match stats.stats_summary().await {
            Ok(mut summary) => {
                // The node is this one, whatever the provider left out.
                if summary.node.node_name.is_empty() {
                    summary.node.node_name = self.inner.node.clone();
                }
                match serde_json::to_value(&summary) {
                    Ok(v) => json_response(&v),
                    Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
                }
            }
            Err(e) => error_response(&e),
        }
    }

    async fn metrics(&self) -> Response<Body> {
        let Some(metrics) = self.inner.provider.resource_metrics() else {
            return not_implemented(&self.inner.node, "resource metrics");
        };
        match metrics.resource_metrics().await {
            Ok(body) => serving::text(StatusCode::OK, "text/plain; version=0.0.4", body)
                .map(|b| b.map_err(|e| match e {}).boxed_unsync()),
            Err(e) => error_response(&e),
        }
    }

    async fn bound_pods(&self) -> Response<Body> {
        let api: Api<Pod> = Api::all(self.inner.client.clone());
        let params = ListParams::default().fields(&format!("spec.nodeName={}", self.inner.node));
        match api.list(&params).await {
            Ok(list) => json_response(&pod_list(&list.items)),
            Err(e) => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("listing the pods of node {}: {e}\n", self.inner.node),
            ),
        }
    }
}

fn pod_list(pods: &[Pod]) -> serde_json::Value {
    json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": pods})
}

/// Why the kubelet server could not start.
#[derive(Debug, thiserror::Error)]
pub enum KubeletServerError {
    /// The serving certificate or client CA is unusable.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The address could not be bound.
    #[error("could not listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
}

/// Builds a [`KubeletServer`].
#[derive(Debug)]
pub struct KubeletServerBuilder {
    api: KubeletApi,
    addr: SocketAddr,
    certificate: Option<ServingCertificate>,
    client_ca: Option<String>,
    http2: bool,
}

impl KubeletServerBuilder {
    /// Listen on `addr` (default `0.0.0.0:10250`; port 0 picks one).
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.addr = addr;
        self
    }

    /// Serve with this certificate (default: a self-signed one for the
    /// node name).
    pub fn certificate(mut self, certificate: ServingCertificate) -> Self {
        self.certificate = Some(certificate);
        self
    }

    /// Ask clients for certificates and accept those signed by this CA
    /// (PEM); their subject is the user for authorization.
    pub fn client_ca(mut self, pem: impl Into<String>) -> Self {
        self.client_ca = Some(pem.into());
        self
    }

    /// Offer HTTP/2 through ALPN besides HTTP/1.1 (default: HTTP/1.1
    /// only, as the Go virtual-kubelet's `nodeutil` serves; the kubelet
    /// offers both). Exec, attach and port-forward are HTTP/1.1 upgrades
    /// either way; with HTTP/2, kube-apiserver carries log and proxy
    /// requests to the node over one multiplexed connection, which on a
    /// two-core machine cost it and the node about a fifth more CPU per
    /// byte of log than HTTP/1.1 (docs/benchmarks.md, "Kubelet API").
    pub fn http2(mut self, offer: bool) -> Self {
        self.http2 = offer;
        self
    }

    /// Bind the address and prepare TLS.
    pub async fn start(self) -> Result<KubeletServer, KubeletServerError> {
        let certificate = match self.certificate {
            Some(c) => c,
            None => {
                stratus_runtime::tls::self_signed(self.api.node(), &[self.api.node(), "localhost"])?
            }
        };
        let expiry = certificate.expiry();
        let options = serving::ServingOptions {
            disable_http2: !self.http2,
            ..Default::default()
        };
        let tls = serving::acceptor_with(
            false,
            Some(certificate),
            self.client_ca.as_deref(),
            self.api.node(),
            &options,
        )?;
        let listener = Listener::bind_with(self.addr, tls, &options)
            .await
            .map_err(|source| KubeletServerError::Bind {
                addr: self.addr,
                source,
            })?;
        Ok(KubeletServer {
            api: self.api,
            listener,
            expiry,
        })
    }
}

/// How often a served API with metrics sets its certificate's time to
/// live.
const TTL_EVERY: Duration = Duration::from_secs(10);

/// The kubelet API's HTTPS server, bound and ready to run.
#[derive(Debug)]
pub struct KubeletServer {
    api: KubeletApi,
    listener: Listener,
    expiry: stratus_runtime::tls::CertificateExpiry,
}

impl KubeletServer {
    /// A builder serving `api`.
    pub fn builder(api: KubeletApi) -> KubeletServerBuilder {
        KubeletServerBuilder {
            api,
            addr: SocketAddr::from(([0, 0, 0, 0], 10250)),
            certificate: None,
            client_ca: None,
            http2: false,
        }
    }

    /// The bound address (the port goes into the Node's
    /// `daemonEndpoints.kubeletEndpoint`).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr()
    }

    /// When the certificate it serves expires (after renewals, reloads and
    /// rotations too).
    pub fn certificate_expiry(&self) -> &stratus_runtime::tls::CertificateExpiry {
        &self.expiry
    }

    /// Serve until `stop` becomes true; with [`KubeletApi::with_metrics`],
    /// also keep `kubelet_certificate_manager_server_ttl_seconds` (the
    /// serving certificate's seconds left) up to date.
    pub async fn run(self, stop: watch::Receiver<bool>) {
        let api = self.api;
        if let Some(metrics) = api.inner.metrics.clone() {
            let (node, expiry, mut stop) = (api.node().to_owned(), self.expiry, stop.clone());
            tokio::spawn(async move {
                loop {
                    metrics.set_serving_certificate_ttl(&node, expiry.not_after());
                    tokio::select! {
                        () = tokio::time::sleep(TTL_EVERY) => {}
                        () = stratus_runtime::stopped(&mut stop) => return,
                    }
                }
            });
        }
        let handler: Handler<Body> = Arc::new(move |req| {
            let api = api.clone();
            Box::pin(async move { api.handle(req).await })
        });
        self.listener.serve(stop, handler).await;
    }
}
