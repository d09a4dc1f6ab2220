//! The accept loop every Stratus server shares, so that idle, half-open and
//! slow clients cannot take a server down: a connection limit per listener,
//! a bounded TLS handshake, a bounded wait for the first request, bounded
//! HTTP/1 header reads, and back-off instead of a spinning core when
//! accepting fails (out of file descriptors above all).
//!
//! ```
//! use std::time::Duration;
//! use stratus_accept::{Acceptor, ConnectionLimits, http_builder, serve_connection};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let limits = ConnectionLimits {
//!     first_request_timeout: Duration::from_millis(200),
//!     ..ConnectionLimits::default()
//! };
//! let acceptor = Acceptor::new(tokio::net::TcpListener::bind("127.0.0.1:0").await?, limits.clone());
//! let addr = acceptor.local_addr()?;
//! let builder = http_builder(&limits);
//! tokio::spawn(async move {
//!     loop {
//!         let connection = acceptor.accept().await;
//!         let (builder, limits) = (builder.clone(), limits.clone());
//!         tokio::spawn(async move {
//!             let service = hyper::service::service_fn(|_| async {
//!                 Ok::<_, std::convert::Infallible>(hyper::Response::new(String::from("ok")))
//!             });
//!             let io = hyper_util::rt::TokioIo::new(connection.stream);
//!             let _ = serve_connection(&builder, io, service, &limits).await;
//!         });
//!     }
//! });
//! // A client that never sends a request is closed after 200 ms.
//! let mut idle = tokio::net::TcpStream::connect(addr).await?;
//! let mut buf = [0u8; 1];
//! assert_eq!(idle.read(&mut buf).await?, 0);
//! // One that does is answered.
//! let mut client = tokio::net::TcpStream::connect(addr).await?;
//! client.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await?;
//! let mut answer = String::new();
//! client.read_to_string(&mut answer).await?;
//! assert!(answer.starts_with("HTTP/1.1 200 OK"));
//! # Ok(())
//! # }
//! ```
//!
//! The defaults follow kube-apiserver where it has one (32 s to read a
//! request's header); Go's `net/http` has no connection limit, bounds the
//! TLS handshake only by the header timeout, and backs off from 5 ms to 1 s
//! on accept errors, as [`Acceptor`] does.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The limits one listener puts on its connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections open at once; further clients wait in the listen
    /// backlog until one closes. Default: [`default_max_connections`].
    pub max_connections: usize,
    /// How long a TLS handshake may take. Default: 10 s.
    pub handshake_timeout: Duration,
    /// How long a connection may stay open before its first request's
    /// header arrived (nothing sent, a partial header, a partial HTTP/2
    /// preface). Default: 32 s, kube-apiserver's header timeout.
    pub first_request_timeout: Duration,
    /// How long an HTTP/1 request's header may take to arrive, for every
    /// request of a connection; also how long a kept-alive HTTP/1
    /// connection may wait idle for its next request. Default: 32 s.
    pub header_read_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: default_max_connections(),
            handshake_timeout: Duration::from_secs(10),
            first_request_timeout: Duration::from_secs(32),
            header_read_timeout: Duration::from_secs(32),
        }
    }
}

/// The default connection limit of a listener: 4,096, or less where the
/// process may open fewer files — half of the descriptors left after 64
/// for everything else (Linux; `/proc/self/limits`), so that a listener at
/// its limit leaves descriptors for the process's own clients, files and
/// a second listener.
pub fn default_max_connections() -> usize {
    const MOST: usize = 4096;
    let soft = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| open_files_limit(&limits));
    match soft {
        Some(soft) => (soft.saturating_sub(64) / 2).clamp(16, MOST),
        None => MOST,
    }
}

/// The soft "Max open files" of a `/proc/<pid>/limits` text (`None` when
/// absent or unlimited).
fn open_files_limit(limits: &str) -> Option<usize> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.trim_start_matches("Max open files")
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Accepts connections from a listener while fewer than
/// [`ConnectionLimits::max_connections`] are open.
#[derive(Debug)]
pub struct Acceptor {
    listener: TcpListener,
    /// One permit per connection that may open; never closed.
    permits: Arc<Semaphore>,
}

/// An accepted connection and its place under the listener's limit (given
/// back when the permit is dropped).
#[derive(Debug)]
pub struct Connection {
    /// The client's stream (`TCP_NODELAY` set: exec and attach send small
    /// writes).
    pub stream: TcpStream,
    /// The client's address.
    pub peer: SocketAddr,
    /// The connection's place under the limit: keep it while serving.
    pub permit: OwnedSemaphorePermit,
}

impl Acceptor {
    /// Accept from `listener` under `limits`.
    pub fn new(listener: TcpListener, limits: ConnectionLimits) -> Self {
        Self {
            listener,
            permits: Arc::new(Semaphore::new(limits.max_connections.max(1))),
        }
    }

    /// The listener's address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The next connection, once fewer than the limit are open. Accept
    /// errors never end the loop: each is logged and the next attempt waits
    /// 5 ms, doubling to 1 s while they last (Go's `net/http` rule), so a
    /// process out of file descriptors does not spin.
    pub async fn accept(&self) -> Connection {
        let mut delay = Duration::ZERO;
        loop {
            let Ok(permit) = self.permits.clone().acquire_owned().await else {
                // Never closed: were it, wait rather than spin.
                tracing::error!("the connection limit's semaphore was closed");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            };
            match self.listener.accept().await {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    return Connection {
                        stream,
                        peer,
                        permit,
                    };
                }
                Err(e) => {
                    drop(permit);
                    delay = next_delay(delay);
                    tracing::warn!(error = %e, retry_in = ?delay, "accepting a connection failed");
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }
}

/// The wait after an accept error following a wait of `previous`: 5 ms,
/// doubled each time, at most 1 s.
fn next_delay(previous: Duration) -> Duration {
    if previous.is_zero() {
        Duration::from_millis(5)
    } else {
        (previous * 2).min(Duration::from_secs(1))
    }
}

/// Run the TLS handshake of `stream` within `limits.handshake_timeout`.
pub async fn handshake(
    acceptor: &tokio_rustls::TlsAcceptor,
    stream: TcpStream,
    limits: &ConnectionLimits,
) -> std::io::Result<tokio_rustls::server::TlsStream<TcpStream>> {
    match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(stream)).await {
        Ok(done) => done,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "the TLS handshake took longer than {:?}",
                limits.handshake_timeout
            ),
        )),
    }
}

/// hyper's HTTP/1 and HTTP/2 server with a timer,
/// [`ConnectionLimits::header_read_timeout`] for HTTP/1, and HTTP/2 pings
/// every 30 s that close a connection whose peer has not answered within
/// 20 s (a peer gone without closing).
pub fn http_builder(limits: &ConnectionLimits) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(20));
    builder
}

/// Why a connection ended with an error.
pub type ServeError = Box<dyn std::error::Error + Send + Sync>;

/// Serve `io` with `service` (upgrades allowed), closing it if its first
/// request has not arrived within
/// [`ConnectionLimits::first_request_timeout`].
pub async fn serve_connection<I, S, B>(
    builder: &Builder<TokioExecutor>,
    io: I,
    service: S,
    limits: &ConnectionLimits,
) -> Result<(), ServeError>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + Send,
    S::Future: Send + 'static,
    S::Error: Into<ServeError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<ServeError>,
{
    let seen = Arc::new(AtomicBool::new(false));
    let service = Noticing {
        inner: service,
        seen: seen.clone(),
    };
    let connection = builder.serve_connection_with_upgrades(io, service);
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        served = connection.as_mut() => return served,
        () = tokio::time::sleep(limits.first_request_timeout) => {}
    }
    if !seen.load(Ordering::Acquire) {
        // Dropping the connection closes it.
        return Err(format!(
            "no request within {:?} of connecting",
            limits.first_request_timeout
        )
        .into());
    }
    connection.await
}

/// A service noting that a request arrived.
struct Noticing<S> {
    inner: S,
    seen: Arc<AtomicBool>,
}

impl<S, R> hyper::service::Service<R> for Noticing<S>
where
    S: hyper::service::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, request: R) -> Self::Future {
        self.seen.store(true, Ordering::Release);
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_errors_back_off_from_5_ms_to_1_s() {
        let mut delay = Duration::ZERO;
        let mut seen = Vec::new();
        for _ in 0..10 {
            delay = next_delay(delay);
            seen.push(delay.as_millis());
        }
        assert_eq!(seen, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
    }

    #[test]
    fn the_limit_leaves_descriptors_for_the_rest_of_the_process() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max cpu time              unlimited            unlimited            seconds   \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(open_files_limit(limits), Some(1024));
        assert_eq!(
            open_files_limit("Max open files  unlimited unlimited files"),
            None
        );
        assert_eq!(open_files_limit(""), None);
        assert!(default_max_connections() >= 16);
        assert!(default_max_connections() <= 4096);
    }
}
