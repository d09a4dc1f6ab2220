//! What kube-apiserver does between a WebSocket client and a kubelet that
//! speaks SPDY:
//!
//! - exec and attach: the client's channel protocol (`v5.channel.k8s.io`,
//!   `v4`, the base64 variants, `channel.k8s.io`) becomes a SPDY session
//!   with one stream per channel (`streamType` error, stdin, stdout, stderr,
//!   resize) at the matching `X-Stream-Protocol-Version`; the v5 close
//!   signal ends the stdin stream;
//! - port-forward: kubectl's SPDY tunnelled in a WebSocket
//!   (`SPDY/3.1+portforward.k8s.io`) is unwrapped into a SPDY upgrade.

use crate::state::Query;
use bytes::Bytes;
use futures_util::future::join_all;
use futures_util::{SinkExt, StreamExt};
use http::{HeaderMap, HeaderValue, header};
use stratus_httpstream::spdy::Session;
use stratus_httpstream::wsstream::{ChannelProtocol, Frame, REMOTE_COMMAND_PROTOCOLS, channels};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};

use crate::error::ApiError;
use crate::kubelet_client::Target;

/// The WebSocket subprotocol of kubectl's tunnelled port-forward.
const TUNNELED_PORT_FORWARD: &str = "SPDY/3.1+portforward.k8s.io";

/// The streams an exec or attach asked for.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Streams {
    stdin: bool,
    stdout: bool,
    stderr: bool,
    tty: bool,
}

/// How a proxied request reaches the kubelet.
pub(crate) enum Translation {
    /// As it came (plain requests, SPDY upgrades).
    None,
    /// kubectl's tunnelled SPDY port-forward.
    TunneledPortForward { key: String },
    /// A WebSocket exec or attach, spoken to the kubelet as SPDY.
    RemoteCommand {
        key: String,
        protocol: ChannelProtocol,
        named: bool,
        streams: Streams,
    },
}

fn header_values<'a>(parts: &'a http::request::Parts, name: &str) -> Vec<&'a str> {
    parts
        .headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect()
}

fn flag(query: &Query, key: &str) -> bool {
    matches!(
        query.get(key),
        Some("1" | "true" | "True" | "TRUE" | "t" | "T")
    )
}

impl Translation {
    /// The translation `parts` needs for `target`.
    pub(crate) fn of(target: &Target, parts: &http::request::Parts) -> Result<Self, ApiError> {
        let websocket = header_values(parts, "upgrade")
            .iter()
            .any(|u| u.eq_ignore_ascii_case("websocket"));
        let Some(key) = websocket
            .then(|| {
                header_values(parts, "sec-websocket-key")
                    .first()
                    .map(|k| (*k).to_owned())
            })
            .flatten()
        else {
            return Ok(Self::None);
        };
        let offered = header_values(parts, "sec-websocket-protocol");
        let sub = match target {
            Target::Pod { sub, .. } => sub.as_str(),
            Target::Node { .. } => return Ok(Self::None),
        };
        match sub {
            "portforward"
                if offered
                    .iter()
                    .flat_map(|v| v.split(','))
                    .any(|p| p.trim() == TUNNELED_PORT_FORWARD) =>
            {
                Ok(Self::TunneledPortForward { key })
            }
            "exec" | "attach" => {
                let (protocol, named) =
                    ChannelProtocol::negotiate(&offered, REMOTE_COMMAND_PROTOCOLS).ok_or_else(
                        || {
                            ApiError::bad_request(format!(
                                "none of the requested protocols {offered:?} is supported"
                            ))
                        },
                    )?;
                let query = Query::parse(parts.uri.query());
                let tty = flag(&query, "tty");
                Ok(Self::RemoteCommand {
                    key,
                    protocol,
                    named,
                    streams: Streams {
                        stdin: flag(&query, "stdin"),
                        stdout: flag(&query, "stdout"),
                        stderr: flag(&query, "stderr") && !tty,
                        tty,
                    },
                })
            }
            _ => Ok(Self::None),
        }
    }

    /// The `X-Stream-Protocol-Version` to ask the kubelet for.
    pub(crate) fn spdy_version(&self) -> &'static str {
        match self {
            Self::None | Self::TunneledPortForward { .. } => "portforward.k8s.io",
            Self::RemoteCommand { protocol, .. } => match protocol {
                ChannelProtocol::V5 => "v5.channel.k8s.io",
                ChannelProtocol::V4 | ChannelProtocol::V4Base64 => "v4.channel.k8s.io",
                _ => "channel.k8s.io",
            },
        }
    }

    /// The WebSocket headers of the 101 answer to the client.
    pub(crate) fn answer(&self, headers: &mut HeaderMap) {
        let (key, protocol) = match self {
            Self::None => return,
            Self::TunneledPortForward { key } => (key, Some(TUNNELED_PORT_FORWARD)),
            Self::RemoteCommand {
                key,
                protocol,
                named,
                ..
            } => (key, named.then(|| protocol.name())),
        };
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        if let Ok(accept) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
            headers.insert("sec-websocket-accept", accept);
        }
        if let Some(protocol) = protocol {
            headers.insert("sec-websocket-protocol", HeaderValue::from_static(protocol));
        }
    }

    /// Carry the upgraded client connection over the upgraded kubelet one.
    pub(crate) async fn run<C, K>(self, client: C, kubelet: K)
    where
        C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
        K: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let server = |client| WebSocketStream::from_raw_socket(client, Role::Server, None);
        match self {
            Self::None => {}
            Self::TunneledPortForward { .. } => pump_tunnel(server(client).await, kubelet).await,
            Self::RemoteCommand {
                protocol, streams, ..
            } => remote_command(server(client).await, protocol, streams, kubelet).await,
        }
    }
}

fn normal_close() -> CloseFrame {
    CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    }
}

/// Copy binary WebSocket messages to the kubelet's SPDY stream and its
/// bytes back as binary messages, until either side ends.
async fn pump_tunnel<S, K>(socket: WebSocketStream<S>, kubelet: K)
where
    S: AsyncRead + AsyncWrite + Unpin,
    K: AsyncRead + AsyncWrite + Unpin,
{
    let (mut ws_out, mut ws_in) = socket.split();
    let (mut k_in, mut k_out) = tokio::io::split(kubelet);
    let upstream = async {
        while let Some(Ok(message)) = ws_in.next().await {
            match message {
                Message::Binary(data) if k_out.write_all(&data).await.is_err() => break,
                Message::Close(_) => break,
                _ => {}
            }
        }
        let _ = k_out.shutdown().await;
    };
    let downstream = async {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match k_in.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let message = Message::Binary(Bytes::copy_from_slice(&buf[..n]));
                    if ws_out.send(message).await.is_err() {
                        break;
                    }
                }
            }
        }
        // A normal closure: clients read the error channel to its end.
        let _ = ws_out.send(Message::Close(Some(normal_close()))).await;
        let _ = ws_out.close().await;
    };
    tokio::select! {
        _ = upstream => {}
        _ = downstream => {}
    }
}

/// An exec or attach: WebSocket channels on one side, SPDY streams on the
/// other.
async fn remote_command<S, K>(
    socket: WebSocketStream<S>,
    protocol: ChannelProtocol,
    streams: Streams,
    kubelet: K,
) where
    S: AsyncRead + AsyncWrite + Unpin,
    K: AsyncRead + AsyncWrite + Send + 'static,
{
    let session = Session::start(kubelet);
    let open = |kind: &str| session.open(vec![("streamType".into(), kind.into())], false);
    let error = open("error");
    let stdin = streams.stdin.then(|| open("stdin").writer());
    let stdout = streams.stdout.then(|| open("stdout"));
    let stderr = streams.stderr.then(|| open("stderr"));
    let resize = (streams.tty && protocol != ChannelProtocol::V1).then(|| open("resize").writer());

    let (mut ws_out, mut ws_in) = socket.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
    let pump = |channel: u8, stream: stratus_httpstream::spdy::Stream| {
        let tx = tx.clone();
        async move {
            let (mut input, _) = stream.input();
            while let Some(Ok(data)) = input.next().await {
                let (text, payload) = protocol.encode(channel, &data);
                let message = if text {
                    Message::Text(String::from_utf8_lossy(&payload).into_owned().into())
                } else {
                    Message::Binary(payload.into())
                };
                if tx.send(message).is_err() {
                    return;
                }
            }
        }
    };
    let data: Vec<_> = [(channels::STDOUT, stdout), (channels::STDERR, stderr)]
        .into_iter()
        .filter_map(|(channel, stream)| stream.map(|s| pump(channel, s)))
        .collect();
    let status = pump(channels::ERROR, error);
    // The status goes last: after everything the command wrote.
    let outputs = async move {
        join_all(data).await;
        status.await;
    };
    drop(tx);
    let writer = async {
        while let Some(message) = rx.recv().await {
            if ws_out.send(message).await.is_err() {
                return;
            }
        }
        // A normal closure: clients read the error channel to its end.
        let _ = ws_out.send(Message::Close(Some(normal_close()))).await;
        let _ = ws_out.close().await;
    };
    let reader = async {
        while let Some(Ok(message)) = ws_in.next().await {
            let (text, payload) = match message {
                Message::Binary(b) => (false, b.to_vec()),
                Message::Text(t) => (true, t.as_bytes().to_vec()),
                Message::Close(_) => break,
                _ => continue,
            };
            match protocol.decode(text, &payload) {
                Ok(Frame::Data(channels::STDIN, data)) => {
                    if let Some(stdin) = &stdin {
                        let _ = stdin.write(&data);
                    }
                }
                Ok(Frame::Data(channels::RESIZE, data)) => {
                    if let Some(resize) = &resize {
                        let _ = resize.write(&data);
                    }
                }
                Ok(Frame::Close(channels::STDIN)) => {
                    if let Some(stdin) = &stdin {
                        stdin.close();
                    }
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    };
    // Done when the kubelet has closed every output (the status is on the
    // error stream), or when the client goes away.
    let done = async {
        tokio::join!(outputs, writer);
    };
    tokio::select! {
        _ = done => {}
        _ = reader => {}
    }
    session.finish().await;
}
