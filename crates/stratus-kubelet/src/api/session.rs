//! One upgraded WebSocket connection speaking a channel protocol: a reader
//! task routing the client's channels to inputs, a writer task sending the
//! provider's output, the client's disconnect as a signal, and the time of
//! the last activity for the idle timeout.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures_util::{SinkExt, StreamExt};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use stratus_pod::{ByteSink, ByteStream, OutputStream, ResizeStream, TermSize};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::channel::{ChannelProtocol, Frame, channels};

/// The WebSocket of an upgraded request.
pub(crate) type Socket = WebSocketStream<TokioIo<Upgraded>>;

/// The largest message the server sends (bigger writes are split).
const MAX_CHUNK: usize = 32 * 1024;

/// What the writer task sends.
enum Outgoing {
    Message(Message),
    Close,
}

/// Where the client's channels go.
#[derive(Default)]
pub(crate) struct Inputs {
    /// Data channels and the input each feeds.
    pub(crate) data: HashMap<u8, mpsc::Sender<io::Result<Vec<u8>>>>,
    /// Terminal resizes, if the session has a TTY.
    pub(crate) resize: Option<mpsc::Sender<TermSize>>,
}

impl Inputs {
    /// Route `channel` to a new input stream.
    pub(crate) fn input(&mut self, channel: u8) -> ByteStream {
        let (tx, rx) = mpsc::channel(16);
        self.data.insert(channel, tx);
        Box::pin(receiver_stream(rx))
    }

    /// Route the resize channel to a new stream.
    pub(crate) fn resizes(&mut self) -> ResizeStream {
        let (tx, rx) = mpsc::channel(4);
        self.resize = Some(tx);
        Box::pin(receiver_stream(rx))
    }
}

/// The items of `rx` as a stream, until every sender is gone.
fn receiver_stream<T>(rx: mpsc::Receiver<T>) -> impl futures_util::Stream<Item = T> {
    futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    })
}

#[derive(Clone)]
struct Activity(Arc<Mutex<Instant>>);

impl Activity {
    fn touch(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    fn last(&self) -> Instant {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running session.
pub(crate) struct Session {
    protocol: ChannelProtocol,
    out: mpsc::Sender<Outgoing>,
    gone: watch::Receiver<bool>,
    activity: Activity,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl Session {
    /// Start reading and writing `socket`.
    pub(crate) fn start(socket: Socket, protocol: ChannelProtocol, inputs: Inputs) -> Self {
        let (mut sink, mut stream) = socket.split();
        let activity = Activity(Arc::new(Mutex::new(Instant::now())));
        let (out, mut rx) = mpsc::channel::<Outgoing>(16);
        let writer = tokio::spawn(async move {
            while let Some(next) = rx.recv().await {
                match next {
                    Outgoing::Message(m) => {
                        if sink.send(m).await.is_err() {
                            return;
                        }
                    }
                    Outgoing::Close => break,
                }
            }
            let close = CloseFrame {
                code: CloseCode::Normal,
                reason: "".into(),
            };
            let _ = sink.send(Message::Close(Some(close))).await;
            let _ = sink.close().await;
        });
        let (gone_tx, gone) = watch::channel(false);
        let reader_activity = activity.clone();
        let reader = tokio::spawn(async move {
            let mut inputs = inputs;
            while let Some(message) = stream.next().await {
                reader_activity.touch();
                let (text, payload) = match message {
                    Ok(Message::Binary(b)) => (false, b.to_vec()),
                    Ok(Message::Text(t)) => (true, t.as_bytes().to_vec()),
                    Ok(Message::Close(_)) | Err(_) => break,
                    Ok(_) => continue,
                };
                match protocol.decode(text, &payload) {
                    Ok(Frame::Data(channels::RESIZE, data)) if inputs.resize.is_some() => {
                        if let (Ok(size), Some(tx)) = (parse_resize(&data), &inputs.resize) {
                            let _ = tx.send(size).await;
                        }
                    }
                    Ok(Frame::Data(channel, data)) => {
                        if let Some(tx) = inputs.data.get(&channel)
                            && tx.send(Ok(data)).await.is_err()
                        {
                            inputs.data.remove(&channel);
                        }
                    }
                    Ok(Frame::Close(channel)) => {
                        inputs.data.remove(&channel);
                    }
                    Ok(Frame::Empty) => {}
                    Err(e) => {
                        tracing::debug!(error = %e, "closing a stream that broke the channel protocol");
                        break;
                    }
                }
            }
            drop(inputs);
            let _ = gone_tx.send(true);
        });
        Self {
            protocol,
            out,
            gone,
            activity,
            reader,
            writer,
        }
    }

    /// The protocol in use.
    pub(crate) fn protocol(&self) -> ChannelProtocol {
        self.protocol
    }

    /// An output stream writing on `channel`.
    pub(crate) fn sink(&self, channel: u8) -> OutputStream {
        Box::new(ChannelSink {
            channel,
            protocol: self.protocol,
            out: self.out.clone(),
            activity: self.activity.clone(),
        })
    }

    /// Send `data` on `channel` (a message even when `data` is empty).
    pub(crate) async fn send(&self, channel: u8, data: &[u8]) {
        let (text, payload) = self.protocol.encode(channel, data);
        let _ = self
            .out
            .send(Outgoing::Message(message(text, payload)))
            .await;
    }

    /// Resolves when the client has gone (closed, broke the protocol or
    /// lost the connection).
    pub(crate) async fn client_gone(&self) {
        let mut gone = self.gone.clone();
        let _ = gone.wait_for(|g| *g).await;
    }

    /// Resolves once nothing was read or written for `timeout`.
    pub(crate) async fn idle(&self, timeout: Duration) {
        loop {
            let deadline = self.activity.last() + timeout;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline.into()).await;
        }
    }

    /// Send the close frame after everything queued, and stop reading.
    pub(crate) async fn finish(self) {
        let _ = self.out.send(Outgoing::Close).await;
        let mut writer = self.writer;
        if tokio::time::timeout(Duration::from_secs(5), &mut writer)
            .await
            .is_err()
        {
            writer.abort();
        }
        self.reader.abort();
    }
}

fn message(text: bool, payload: Vec<u8>) -> Message {
    if text {
        // Base64 protocols only produce ASCII.
        Message::Text(String::from_utf8_lossy(&payload).into_owned().into())
    } else {
        Message::Binary(payload.into())
    }
}

/// Parse a resize message, `{"Width": 80, "Height": 24}`.
pub(crate) fn parse_resize(data: &[u8]) -> Result<TermSize, serde_json::Error> {
    serde_json::from_slice::<ResizeMessage>(data).map(TermSize::from)
}

/// A terminal resize as clients send it: `{"Width":80,"Height":24}`.
#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct ResizeMessage {
    width: u16,
    height: u16,
}

impl From<ResizeMessage> for TermSize {
    fn from(size: ResizeMessage) -> Self {
        TermSize {
            width: size.width,
            height: size.height,
        }
    }
}

struct ChannelSink {
    channel: u8,
    protocol: ChannelProtocol,
    out: mpsc::Sender<Outgoing>,
    activity: Activity,
}

#[async_trait]
impl ByteSink for ChannelSink {
    async fn write(&mut self, data: &[u8]) -> io::Result<()> {
        for chunk in data.chunks(MAX_CHUNK) {
            let (text, payload) = self.protocol.encode(self.channel, chunk);
            self.out
                .send(Outgoing::Message(message(text, payload)))
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))?;
            self.activity.touch();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resize_messages() {
        assert_eq!(
            parse_resize(br#"{"Width":120,"Height":40}"#).unwrap(),
            TermSize {
                width: 120,
                height: 40
            }
        );
        assert!(parse_resize(b"{\"Width\":-1}").is_err());
        assert!(parse_resize(b"garbage").is_err());
    }
}
