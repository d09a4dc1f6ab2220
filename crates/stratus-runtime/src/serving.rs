//! The accept loop the admin, webhook and kubelet servers share: TLS (or
//! plain HTTP), HTTP/1.1 and HTTP/2 on one port, HTTP upgrades (WebSocket,
//! SPDY), one task per connection, until stopped; under
//! [`stratus_accept`]'s limits ([`ServingOptions::connections`]): a
//! connection limit, handshake, first-request and header-read timeouts, and
//! back-off when accepting fails. A verified client
//! certificate reaches each request as a [`ClientCertificate`] extension,
//! for [`crate::auth`].
//!
//! ```no_run
//! use std::sync::Arc;
//! use bytes::Bytes;
//! use http_body_util::Full;
//! use stratus_runtime::serving::{self, Handler, Listener};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let tls = serving::acceptor(false, None, None, "my-server")?; // self-signed
//! let listener = Listener::bind("127.0.0.1:0".parse()?, tls).await?;
//! let (_stop_tx, stop) = tokio::sync::watch::channel(false);
//! let handler: Handler<Full<Bytes>> = Arc::new(|_req| {
//!     Box::pin(async { http::Response::new(Full::new(Bytes::from_static(b"ok"))) })
//! });
//! listener.serve(stop, handler).await;
//! # Ok(()) }
//! ```

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use stratus_accept::Acceptor;
pub use stratus_accept::ConnectionLimits;
use tokio::sync::watch;

use crate::auth::ClientCertificate;
use crate::tls::{ServingCertificate, TlsError};

/// Answers one request with a body of type `B`.
pub type Handler<B = Full<Bytes>> =
    Arc<dyn Fn(Request<Incoming>) -> BoxFuture<'static, Response<B>> + Send + Sync>;

/// How a server listens and speaks, beyond its address and certificate
/// (Go's secure-serving flags).
#[derive(Debug, Clone, Default)]
pub struct ServingOptions {
    /// What TLS accepts (`--tls-min-version`, `--tls-cipher-suites`,
    /// `--tls-curve-preferences`, `--tls-sni-cert-key`).
    pub tls: crate::tls_policy::TlsPolicy,
    /// The most concurrent streams of one HTTP/2 connection
    /// (`--http2-max-streams-per-connection`; `None`: hyper's default).
    pub http2_max_streams: Option<u32>,
    /// Serve HTTP/1.1 only (`--webhook-disable-http2-serving`).
    pub disable_http2: bool,
    /// `SO_REUSEPORT`: other processes may bind the same port
    /// (`--permit-port-sharing`).
    pub reuse_port: bool,
    /// `SO_REUSEADDR` where the platform does not set it anyway
    /// (`--permit-address-sharing`; on Unix every listener has it, as Go's).
    pub reuse_address: bool,
    /// How many connections at once, and how long a client may take to
    /// finish its TLS handshake, to send its first request and each
    /// request's header.
    pub connections: ConnectionLimits,
}

/// The TLS acceptor of a server: none for plain HTTP, else `certificate`
/// (or a self-signed one for `common_name`), asking for client
/// certificates signed by `client_ca` when given.
pub fn acceptor(
    plain: bool,
    certificate: Option<ServingCertificate>,
    client_ca: Option<&str>,
    common_name: &str,
) -> Result<Option<tokio_rustls::TlsAcceptor>, TlsError> {
    acceptor_with(
        plain,
        certificate,
        client_ca,
        common_name,
        &ServingOptions::default(),
    )
}

/// [`acceptor`] under `options` (TLS policy, HTTP/2 offered or not).
pub fn acceptor_with(
    plain: bool,
    certificate: Option<ServingCertificate>,
    client_ca: Option<&str>,
    common_name: &str,
    options: &ServingOptions,
) -> Result<Option<tokio_rustls::TlsAcceptor>, TlsError> {
    if plain {
        return Ok(None);
    }
    let certificate = match certificate {
        Some(c) => c,
        None => crate::tls::self_signed(common_name, &["localhost"])?,
    };
    Ok(Some(tokio_rustls::TlsAcceptor::from(
        options
            .tls
            .server_config(&certificate, client_ca, !options.disable_http2)?,
    )))
}

/// A bound listener and, unless serving plain HTTP, its TLS acceptor.
pub struct Listener {
    acceptor: Acceptor,
    limits: ConnectionLimits,
    addr: SocketAddr,
    tls: Option<tokio_rustls::TlsAcceptor>,
    http2_max_streams: Option<u32>,
    http1_only: bool,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("addr", &self.addr)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Listener {
    /// Bind `addr` (port 0 picks a free one).
    pub async fn bind(
        addr: SocketAddr,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) -> std::io::Result<Self> {
        Self::bind_with(addr, tls, &ServingOptions::default()).await
    }

    /// Bind `addr` with the socket and HTTP settings of `options`.
    pub async fn bind_with(
        addr: SocketAddr,
        tls: Option<tokio_rustls::TlsAcceptor>,
        options: &ServingOptions,
    ) -> std::io::Result<Self> {
        let socket = match addr {
            SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
            SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
        };
        // As Go's listeners, which set SO_REUSEADDR on every Unix socket
        // (a server restarted while its old connections linger in
        // TIME_WAIT binds again at once), and elsewhere only when asked.
        socket.set_reuseaddr(cfg!(unix) || options.reuse_address)?;
        #[cfg(unix)]
        socket.set_reuseport(options.reuse_port)?;
        #[cfg(not(unix))]
        if options.reuse_port {
            tracing::warn!("--permit-port-sharing needs SO_REUSEPORT, which this platform lacks");
        }
        socket.bind(addr)?;
        let listener = socket.listen(1024)?;
        let addr = listener.local_addr()?;
        Ok(Self {
            acceptor: Acceptor::new(listener, options.connections.clone()),
            limits: options.connections.clone(),
            addr,
            tls,
            http2_max_streams: options.http2_max_streams,
            http1_only: options.disable_http2,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether connections are TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Accept connections and answer them with `handler` until `stop`
    /// becomes true (or its sender is dropped).
    pub async fn serve<B>(self, mut stop: watch::Receiver<bool>, handler: Handler<B>)
    where
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let mut builder = stratus_accept::http_builder(&self.limits);
        if let Some(n) = self.http2_max_streams {
            builder.http2().max_concurrent_streams(n);
        }
        if self.http1_only {
            builder = builder.http1_only();
        }
        loop {
            let connection = tokio::select! {
                c = self.acceptor.accept() => c,
                _ = stop.changed() => return,
            };
            let handler = handler.clone();
            let tls = self.tls.clone();
            let (builder, limits) = (builder.clone(), self.limits.clone());
            tokio::spawn(async move {
                let served = match tls {
                    Some(acceptor) => {
                        match stratus_accept::handshake(&acceptor, connection.stream, &limits).await
                        {
                            Ok(s) => {
                                // A client certificate here was verified
                                // against the client CA; requests carry it
                                // for `auth`.
                                let peer = s
                                    .get_ref()
                                    .1
                                    .peer_certificates()
                                    .and_then(|c| c.first())
                                    .map(|c| ClientCertificate(c.to_vec()));
                                let service = service(handler, peer);
                                stratus_accept::serve_connection(
                                    &builder,
                                    TokioIo::new(s),
                                    service,
                                    &limits,
                                )
                                .await
                            }
                            Err(e) => {
                                tracing::debug!(error = %e, "TLS handshake failed");
                                return;
                            }
                        }
                    }
                    None => {
                        stratus_accept::serve_connection(
                            &builder,
                            TokioIo::new(connection.stream),
                            service(handler, None),
                            &limits,
                        )
                        .await
                    }
                };
                if let Err(e) = served {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                drop(connection.permit);
            });
        }
    }
}

/// The hyper service of one connection: `handler`, with the connection's
/// client certificate in each request's extensions.
fn service<B: hyper::body::Body + Send + 'static>(
    handler: Handler<B>,
    peer: Option<ClientCertificate>,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<B>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<B>, Infallible>> + Send,
> + Clone {
    hyper::service::service_fn(move |mut req: Request<Incoming>| {
        if let Some(peer) = &peer {
            req.extensions_mut().insert(peer.clone());
        }
        let answer = handler(req);
        async move { Ok::<_, Infallible>(answer.await) }
    })
}

/// A response with `body`, its content type and `nosniff`.
pub fn text(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = header::HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    response
}

/// `text/plain; charset=utf-8`.
pub const PLAIN: &str = "text/plain; charset=utf-8";
