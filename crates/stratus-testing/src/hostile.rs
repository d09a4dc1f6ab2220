//! Clients that hold a server's connections without finishing a request:
//! silent, a partial HTTP/1 header, a partial HTTP/2 preface, a partial TLS
//! ClientHello, a finished TLS handshake then a partial header, or one
//! request then idle on a kept-alive connection. A server must close each
//! after its timeouts and keep answering everyone else meanwhile:
//! [`besiege_tls`] checks that of a TLS server, [`limit_holds`] its
//! connection limit.
//!
//! ```no_run
//! use stratus_testing::hostile::{Hostile, hold};
//!
//! # async fn run(addr: std::net::SocketAddr) {
//! let mut held = hold(addr, Hostile::PartialHeader, 100).await;
//! // … the server keeps answering others, then closes them:
//! assert_eq!(held.still_open().await, 100);
//! # }
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// How a held connection misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hostile {
    /// Connects and sends nothing.
    Silent,
    /// Sends the start of an HTTP/1.1 request header, never its end.
    PartialHeader,
    /// Sends the start of the HTTP/2 connection preface.
    PartialPreface,
    /// Sends the first bytes of a TLS ClientHello.
    PartialClientHello,
    /// Completes a TLS handshake, then sends a partial header.
    HandshakeThenPartialHeader,
    /// Sends one whole HTTP/1.1 request (over TLS if `tls` is asked of
    /// [`hold_with`]), reads the answer, then stays idle on the kept-alive
    /// connection.
    IdleAfterRequest,
}

/// The first bytes of an HTTP/1.1 request header.
const PARTIAL_HEADER: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ";
/// The first bytes of the HTTP/2 preface.
const PARTIAL_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n";
/// A TLS record header announcing a 512-byte handshake message, and the
/// message's first bytes (a ClientHello of TLS 1.2).
const PARTIAL_CLIENT_HELLO: &[u8] = &[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03];

/// A held connection.
enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Stream {
    async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => write_all(s, bytes).await,
            Stream::Tls(s) => write_all(s.as_mut(), bytes).await,
        }
    }

    /// Whether the server closed it (end of stream or an error), waiting
    /// at most `wait`; bytes read meanwhile are dropped.
    async fn closed(&mut self, wait: Duration) -> bool {
        let mut buf = [0u8; 1024];
        let read = async {
            match self {
                Stream::Plain(s) => read_some(s, &mut buf).await,
                Stream::Tls(s) => read_some(s.as_mut(), &mut buf).await,
            }
        };
        match tokio::time::timeout(wait, read).await {
            Ok(Ok(0)) | Ok(Err(_)) => true,
            Ok(Ok(_)) | Err(_) => false,
        }
    }
}

async fn write_all<S: AsyncWrite + Unpin>(s: &mut S, bytes: &[u8]) -> std::io::Result<()> {
    s.write_all(bytes).await?;
    s.flush().await
}

async fn read_some<S: AsyncRead + Unpin>(s: &mut S, buf: &mut [u8]) -> std::io::Result<usize> {
    s.read(buf).await
}

/// Connections held open by hostile clients.
pub struct Held {
    /// Each connection; `None` once the server closed it.
    streams: Vec<Option<Stream>>,
    /// Connections that could not be made or set up.
    pub refused: usize,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held")
            .field("connections", &self.streams.len())
            .field("refused", &self.refused)
            .finish()
    }
}

impl Held {
    /// How many connections the server has not closed yet (each is
    /// looked at for up to 20 ms; the closed ones are dropped).
    pub async fn still_open(&mut self) -> usize {
        for slot in &mut self.streams {
            if let Some(stream) = slot
                && stream.closed(Duration::from_millis(20)).await
            {
                *slot = None;
            }
        }
        self.streams.iter().filter(|s| s.is_some()).count()
    }

    /// How many connections are held (open or closed by the server).
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// Whether none are held.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }
}

/// Open `n` connections to `addr` behaving as `kind` (TLS for the kinds
/// that name it).
pub async fn hold(addr: SocketAddr, kind: Hostile, n: usize) -> Held {
    hold_with(addr, kind, n, kind == Hostile::HandshakeThenPartialHeader).await
}

/// Open `n` connections to `addr` behaving as `kind`, through TLS (any
/// server certificate trusted) if `tls`.
pub async fn hold_with(addr: SocketAddr, kind: Hostile, n: usize, tls: bool) -> Held {
    let mut held = Held {
        streams: Vec::with_capacity(n),
        refused: 0,
    };
    let connector = match tls.then(connector).transpose() {
        Ok(connector) => connector,
        Err(_) => {
            held.refused = n;
            return held;
        }
    };
    for _ in 0..n {
        match open(addr, kind, connector.as_ref()).await {
            Ok(stream) => held.streams.push(Some(stream)),
            Err(_) => held.refused += 1,
        }
    }
    held
}

async fn open(
    addr: SocketAddr,
    kind: Hostile,
    connector: Option<&tokio_rustls::TlsConnector>,
) -> std::io::Result<Stream> {
    let tcp = TcpStream::connect(addr).await?;
    let mut stream = match connector {
        Some(connector) if kind != Hostile::PartialClientHello => {
            let name = rustls::pki_types::ServerName::try_from("localhost")
                .map_err(std::io::Error::other)?;
            Stream::Tls(Box::new(connector.connect(name, tcp).await?))
        }
        _ => Stream::Plain(tcp),
    };
    match kind {
        Hostile::Silent => {}
        Hostile::PartialHeader | Hostile::HandshakeThenPartialHeader => {
            stream.write(PARTIAL_HEADER).await?;
        }
        Hostile::PartialPreface => stream.write(PARTIAL_PREFACE).await?,
        Hostile::PartialClientHello => stream.write(PARTIAL_CLIENT_HELLO).await?,
        Hostile::IdleAfterRequest => {
            stream
                .write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                .await?;
            // The answer (its head at least) before going idle.
            let mut buf = [0u8; 512];
            let n = match &mut stream {
                Stream::Plain(s) => s.read(&mut buf).await?,
                Stream::Tls(s) => s.read(&mut buf).await?,
            };
            if !buf[..n].starts_with(b"HTTP/1.1 ") {
                return Err(std::io::Error::other("no HTTP/1.1 answer"));
            }
        }
    }
    Ok(stream)
}

/// A TLS connector offering HTTP/1.1 only and trusting any certificate.
fn connector() -> Result<tokio_rustls::TlsConnector, rustls::Error> {
    let config = stratus_apiserver::insecure::client_config(&[b"http/1.1"])?;
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// The kinds a TLS server meets, each with whether it speaks TLS: silent,
/// a partial ClientHello, a handshake then a partial header, idle after
/// one request.
const AGAINST_TLS: [(Hostile, bool); 4] = [
    (Hostile::Silent, false),
    (Hostile::PartialClientHello, false),
    (Hostile::HandshakeThenPartialHeader, true),
    (Hostile::IdleAfterRequest, true),
];

/// Whether a fresh client's request (`GET /healthz`) is answered.
async fn answered(addr: SocketAddr, tls: bool) -> bool {
    hold_with(addr, Hostile::IdleAfterRequest, 1, tls)
        .await
        .refused
        == 0
}

/// Besiege the TLS server at `addr`: hold `per_kind` connections of each
/// kind a TLS server meets (silent, a partial ClientHello, a handshake then
/// a partial header, idle after a request), checking after each group that
/// a fresh client is still answered; then wait up to `within` for the
/// server to close every one. The error says what went unanswered or
/// stayed open.
pub async fn besiege_tls(
    addr: SocketAddr,
    per_kind: usize,
    within: Duration,
) -> Result<(), String> {
    let mut held = Vec::new();
    for (kind, tls) in AGAINST_TLS {
        let group = hold_with(addr, kind, per_kind, tls).await;
        if group.refused > 0 {
            return Err(format!(
                "{} of {per_kind} {kind:?} connections refused",
                group.refused
            ));
        }
        if !answered(addr, true).await {
            return Err(format!(
                "a request went unanswered while {kind:?} connections were held"
            ));
        }
        held.push((kind, group));
    }
    let held = Arc::new(tokio::sync::Mutex::new(held));
    stratus_apiserver::poll("every held connection closed by the server", within)
        .every(Duration::from_millis(250))
        .until(|| {
            let held = held.clone();
            async move {
                let mut open = Vec::new();
                for (kind, group) in held.lock().await.iter_mut() {
                    let n = group.still_open().await;
                    if n > 0 {
                        open.push(format!("{n} {kind:?}"));
                    }
                }
                (!open.is_empty()).then(|| format!("still open: {}", open.join(", ")))
            }
        })
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Check the connection limit of the server at `addr`, `limit`: hold
/// `limit` silent connections, then a fresh client (over TLS if `tls`)
/// must be answered, and only once the server closed one of them.
pub async fn limit_holds(addr: SocketAddr, limit: usize, tls: bool) -> Result<(), String> {
    let mut silent = hold_with(addr, Hostile::Silent, limit, false).await;
    if silent.refused > 0 {
        return Err(format!("{} of {limit} connections refused", silent.refused));
    }
    if !answered(addr, tls).await {
        return Err("the client waiting for a place was never answered".into());
    }
    if silent.still_open().await == limit {
        return Err(format!(
            "a client was answered while {limit} connections held every place"
        ));
    }
    Ok(())
}
