//! A SPDY/3.1 session on an upgraded connection. As a server, the peer
//! opens streams (each with headers) and the session accepts them with an
//! empty `SYN_REPLY`; as a client, [`Session::open`] opens streams. Either
//! way it routes each stream's data to its input, answers pings, and writes
//! data frames. Flow control is not
//! enforced on either side (as Kubernetes' own SPDY library), but received
//! data is credited back with `WINDOW_UPDATE` so a strict peer never
//! stalls.

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::{Arc, Mutex};

use std::pin::Pin;

use futures_util::Stream as FuturesStream;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// The bytes a peer sends on one stream, ending at its `FIN` (the same
/// type as `stratus_pod::ByteStream`).
pub type ByteStream = Pin<Box<dyn FuturesStream<Item = io::Result<Vec<u8>>> + Send + 'static>>;

use super::frame::{Frame, MAX_PAYLOAD};
use super::headers::{Compressor, Decompressor, Headers};

/// `RST_STREAM` status: the stream was refused.
pub(crate) const REFUSED_STREAM: u32 = 3;
/// `RST_STREAM` status: the stream was cancelled.
pub(crate) const CANCEL: u32 = 5;

/// What the writer task sends.
enum Out {
    Reply(u32),
    Syn {
        stream: u32,
        headers: Headers,
        fin: bool,
    },
    Data {
        stream: u32,
        fin: bool,
        data: Vec<u8>,
    },
    Frame(Frame),
    Close,
}

struct Shared {
    /// When data last crossed the session, either way.
    last_data: std::time::Instant,
    /// Streams the peer reset or the session closed.
    reset: HashSet<u32>,
    closed: bool,
    /// Where each open stream's data goes.
    inputs: HashMap<u32, mpsc::UnboundedSender<Vec<u8>>>,
}

/// A handle for writing on streams.
#[derive(Clone)]
struct Writer {
    out: mpsc::UnboundedSender<Out>,
    shared: Arc<Mutex<Shared>>,
}

impl Writer {
    fn usable(&self, stream: u32) -> io::Result<()> {
        let shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if shared.closed || shared.reset.contains(&stream) {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the client closed the stream",
            ));
        }
        Ok(())
    }

    fn send(&self, out: Out) -> io::Result<()> {
        self.out
            .send(out)
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the session ended"))
    }

    /// Write `data` on `stream` (split into frames), `fin` after it.
    fn data(&self, stream: u32, data: &[u8], fin: bool) -> io::Result<()> {
        self.usable(stream)?;
        let mut chunks = data.chunks(MAX_PAYLOAD.min(64 * 1024)).peekable();
        if chunks.peek().is_none() {
            return self.send(Out::Data {
                stream,
                fin,
                data: Vec::new(),
            });
        }
        while let Some(chunk) = chunks.next() {
            self.send(Out::Data {
                stream,
                fin: fin && chunks.peek().is_none(),
                data: chunk.to_vec(),
            })?;
        }
        Ok(())
    }

    /// Abort `stream`.
    fn reset(&self, stream: u32, status: u32) {
        let _ = self.send(Out::Frame(Frame::RstStream { stream, status }));
    }
}

/// One stream of a session.
pub struct Stream {
    /// The stream id.
    pub id: u32,
    /// Its headers (`streamType`, `port`, `requestID`, ...).
    pub headers: Headers,
    input: mpsc::UnboundedReceiver<Vec<u8>>,
    writer: Writer,
}

impl Stream {
    /// The bytes the peer sends on this stream, ending at its `FIN`, and
    /// a writer for the other direction.
    pub fn input(self) -> (ByteStream, StreamWriter) {
        let writer = StreamWriter {
            id: self.id,
            writer: self.writer,
        };
        let input = Box::pin(futures_util::stream::unfold(
            self.input,
            |mut rx| async move { rx.recv().await.map(|data| (Ok(data), rx)) },
        ));
        (input, writer)
    }

    /// A writer for this stream.
    pub fn writer(&self) -> StreamWriter {
        StreamWriter {
            id: self.id,
            writer: self.writer.clone(),
        }
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("id", &self.id)
            .field("headers", &self.headers)
            .finish_non_exhaustive()
    }
}

/// Writes on one stream.
#[derive(Clone)]
pub struct StreamWriter {
    id: u32,
    writer: Writer,
}

impl StreamWriter {
    /// Write `data` (queued; an error means the stream or session is gone).
    pub fn write(&self, data: &[u8]) -> io::Result<()> {
        self.writer.data(self.id, data, false)
    }

    /// End this side of the stream (`FIN`).
    pub fn close(&self) {
        let _ = self.writer.data(self.id, &[], true);
    }

    /// Abort the stream.
    pub fn reset(&self) {
        self.writer.reset(self.id, CANCEL);
    }
}

impl std::fmt::Debug for StreamWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamWriter")
            .field("id", &self.id)
            .finish()
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

/// A running session.
pub struct Session {
    streams: mpsc::UnboundedReceiver<Stream>,
    writer: Writer,
    next_id: std::sync::atomic::AtomicU32,
    closed: watch::Receiver<bool>,
    reader: JoinHandle<()>,
    write_task: JoinHandle<()>,
}

impl Session {
    /// Start the session on `io` (an upgraded connection).
    pub fn start<T>(io: T) -> Self
    where
        T: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (mut read, mut write) = tokio::io::split(io);
        let shared = Arc::new(Mutex::new(Shared {
            last_data: std::time::Instant::now(),
            reset: HashSet::new(),
            closed: false,
            inputs: HashMap::new(),
        }));
        let writer_shared = shared.clone();
        let (out, mut out_rx) = mpsc::unbounded_channel::<Out>();
        let writer = Writer {
            out,
            shared: shared.clone(),
        };
        let write_task = tokio::spawn(async move {
            let mut compressor = Compressor::default();
            while let Some(next) = out_rx.recv().await {
                let frame = match next {
                    Out::Reply(stream) => Frame::SynReply {
                        stream,
                        flags: 0,
                        headers: compressor.compress(&[]),
                    },
                    Out::Syn {
                        stream,
                        headers,
                        fin,
                    } => Frame::SynStream {
                        stream,
                        associated: 0,
                        flags: if fin { super::frame::FLAG_FIN } else { 0 },
                        headers: compressor.compress(&headers),
                    },
                    Out::Data { stream, fin, data } => {
                        writer_shared
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .last_data = std::time::Instant::now();
                        Frame::Data { stream, fin, data }
                    }
                    Out::Frame(f) => f,
                    Out::Close => break,
                };
                if write.write_all(&frame.encode()).await.is_err() {
                    break;
                }
                if out_rx.is_empty() && write.flush().await.is_err() {
                    break;
                }
            }
            let _ = write.flush().await;
            let _ = write.shutdown().await;
        });
        let (streams_tx, streams) = mpsc::unbounded_channel();
        let (closed_tx, closed) = watch::channel(false);
        let reader_writer = writer.clone();
        let reader = tokio::spawn(async move {
            let mut decompressor = Decompressor::default();
            let lock = || shared.lock().unwrap_or_else(|e| e.into_inner());
            let mut buf = Vec::with_capacity(16 * 1024);
            let mut chunk = vec![0u8; 16 * 1024];
            'session: loop {
                loop {
                    let (frame, used) = match Frame::parse(&buf) {
                        Ok(Some(parsed)) => parsed,
                        Ok(None) => break,
                        Err(e) => {
                            tracing::debug!(error = %e, "ending a SPDY session that broke the protocol");
                            let _ = reader_writer.send(Out::Frame(Frame::GoAway {
                                last_stream: 0,
                                status: 1,
                            }));
                            break 'session;
                        }
                    };
                    buf.drain(..used);
                    match frame {
                        Frame::SynStream {
                            stream,
                            flags,
                            headers,
                            ..
                        } => {
                            let headers = match decompressor.decompress(&headers) {
                                Ok(h) => h,
                                Err(e) => {
                                    tracing::debug!(error = %e, "unreadable SPDY headers");
                                    break 'session;
                                }
                            };
                            if lock().inputs.contains_key(&stream) {
                                reader_writer.reset(stream, 1);
                                continue;
                            }
                            let (tx, rx) = mpsc::unbounded_channel();
                            if flags & super::frame::FLAG_FIN == 0 {
                                lock().inputs.insert(stream, tx);
                            }
                            let _ = reader_writer.send(Out::Reply(stream));
                            let accepted = Stream {
                                id: stream,
                                headers,
                                input: rx,
                                writer: reader_writer.clone(),
                            };
                            if streams_tx.send(accepted).is_err() {
                                reader_writer.reset(stream, REFUSED_STREAM);
                            }
                        }
                        Frame::SynReply { headers, .. } | Frame::Headers { headers, .. } => {
                            if decompressor.decompress(&headers).is_err() {
                                break 'session;
                            }
                        }
                        Frame::Data { stream, fin, data } => {
                            lock().last_data = std::time::Instant::now();
                            let len = data.len() as u32;
                            let tx = lock().inputs.get(&stream).cloned();
                            if let Some(tx) = tx
                                && !data.is_empty()
                                && tx.send(data).is_err()
                            {
                                lock().inputs.remove(&stream);
                            }
                            if len > 0 {
                                for id in [stream, 0] {
                                    let _ = reader_writer.send(Out::Frame(Frame::WindowUpdate {
                                        stream: id,
                                        delta: len,
                                    }));
                                }
                            }
                            if fin {
                                lock().inputs.remove(&stream);
                            }
                        }
                        Frame::RstStream { stream, .. } => {
                            let mut state = lock();
                            state.inputs.remove(&stream);
                            state.reset.insert(stream);
                        }
                        Frame::Ping(id) => {
                            let _ = reader_writer.send(Out::Frame(Frame::Ping(id)));
                        }
                        Frame::GoAway { .. } => break 'session,
                        Frame::Settings(_) | Frame::WindowUpdate { .. } | Frame::Unknown(_) => {}
                    }
                }
                match read.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
                if buf.len() > MAX_PAYLOAD + 8 + 64 * 1024 {
                    break;
                }
            }
            {
                let mut state = lock();
                state.closed = true;
                state.inputs.clear();
            }
            let _ = closed_tx.send(true);
        });
        Self {
            streams,
            writer,
            next_id: std::sync::atomic::AtomicU32::new(1),
            closed,
            reader,
            write_task,
        }
    }

    /// Open a stream with `headers` (client side: odd ids from 1); `fin`
    /// if this side will send nothing on it.
    pub fn open(&self, headers: Headers, fin: bool) -> Stream {
        let id = self
            .next_id
            .fetch_add(2, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = mpsc::unbounded_channel();
        self.writer
            .shared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .inputs
            .insert(id, tx);
        let _ = self.writer.send(Out::Syn {
            stream: id,
            headers: headers.clone(),
            fin,
        });
        Stream {
            id,
            headers,
            input: rx,
            writer: self.writer.clone(),
        }
    }

    /// The next stream the peer opens; `None` once the session ended.
    pub async fn accept(&mut self) -> Option<Stream> {
        self.streams.recv().await
    }

    /// Resolves when the peer has gone.
    pub async fn peer_gone(&self) {
        let mut closed = self.closed.clone();
        let _ = closed.wait_for(|c| *c).await;
    }

    /// Resolves once no data crossed the session for `timeout` (an owned
    /// future: it may be awaited next to [`Session::accept`]).
    pub fn idle(
        &self,
        timeout: std::time::Duration,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let shared = self.writer.shared.clone();
        async move {
            loop {
                let last = shared.lock().unwrap_or_else(|e| e.into_inner()).last_data;
                let deadline = last + timeout;
                if std::time::Instant::now() >= deadline {
                    return;
                }
                tokio::time::sleep_until(deadline.into()).await;
            }
        }
    }

    /// Send everything queued, then close the connection.
    pub async fn finish(self) {
        let _ = self.writer.send(Out::Close);
        let mut write_task = self.write_task;
        if tokio::time::timeout(std::time::Duration::from_secs(5), &mut write_task)
            .await
            .is_err()
        {
            write_task.abort();
        }
        self.reader.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    /// Read frames from `io` until `want` returns true for one.
    async fn read_until(
        io: &mut tokio::io::DuplexStream,
        buf: &mut Vec<u8>,
        mut want: impl FnMut(&Frame) -> bool,
    ) -> Frame {
        loop {
            while let Some((frame, used)) = Frame::parse(buf).unwrap() {
                buf.drain(..used);
                if want(&frame) {
                    return frame;
                }
            }
            let mut chunk = [0u8; 4096];
            let n = io.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the session closed early");
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    #[tokio::test]
    async fn streams_data_pings_and_replies() {
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let mut session = Session::start(server);
        let mut compressor = Compressor::default();
        let syn = Frame::SynStream {
            stream: 1,
            associated: 0,
            flags: 0,
            headers: compressor.compress(&[("streamType".into(), "stdin".into())]),
        };
        client.write_all(&syn.encode()).await.unwrap();
        let stream = session.accept().await.unwrap();
        assert_eq!(stream.id, 1);
        assert_eq!(
            super::super::headers::header(&stream.headers, "streamtype"),
            Some("stdin")
        );
        let (mut input, writer) = stream.input();
        let mut buf = Vec::new();
        let reply = read_until(&mut client, &mut buf, |f| {
            matches!(f, Frame::SynReply { .. })
        })
        .await;
        assert!(matches!(reply, Frame::SynReply { stream: 1, .. }));

        let data = Frame::Data {
            stream: 1,
            fin: true,
            data: b"hello".to_vec(),
        };
        client.write_all(&data.encode()).await.unwrap();
        client.write_all(&Frame::Ping(9).encode()).await.unwrap();
        assert_eq!(input.next().await.unwrap().unwrap(), b"hello");
        assert!(input.next().await.is_none(), "FIN ends the input");
        let credit = read_until(&mut client, &mut buf, |f| {
            matches!(f, Frame::WindowUpdate { stream: 1, .. })
        })
        .await;
        assert_eq!(
            credit,
            Frame::WindowUpdate {
                stream: 1,
                delta: 5
            }
        );
        let pong = read_until(&mut client, &mut buf, |f| matches!(f, Frame::Ping(_))).await;
        assert_eq!(pong, Frame::Ping(9));

        writer.write(b"out").unwrap();
        writer.close();
        let out = read_until(&mut client, &mut buf, |f| matches!(f, Frame::Data { .. })).await;
        assert_eq!(
            out,
            Frame::Data {
                stream: 1,
                fin: false,
                data: b"out".to_vec()
            }
        );
        let fin = read_until(&mut client, &mut buf, |f| matches!(f, Frame::Data { .. })).await;
        assert_eq!(
            fin,
            Frame::Data {
                stream: 1,
                fin: true,
                data: vec![]
            }
        );

        // A reset stream refuses writes.
        client
            .write_all(
                &Frame::RstStream {
                    stream: 1,
                    status: CANCEL,
                }
                .encode(),
            )
            .await
            .unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(5), async {
            while writer.write(b"more").is_ok() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("writes fail after a reset");
    }

    #[tokio::test]
    async fn a_client_session_talks_to_a_server_session() {
        let (a, b) = tokio::io::duplex(64 * 1024);
        let client = Session::start(a);
        let mut server = Session::start(b);
        let opened = client.open(vec![("streamtype".into(), "stdout".into())], false);
        let second = client.open(vec![("streamtype".into(), "stdin".into())], false);
        assert_eq!((opened.id, second.id), (1, 3));
        let accepted = server.accept().await.unwrap();
        assert_eq!(accepted.headers, opened.headers);
        let (_, to_client) = accepted.input();
        to_client.write(b"from the server").unwrap();
        to_client.close();
        let (mut from_server, to_server) = opened.input();
        assert_eq!(
            from_server.next().await.unwrap().unwrap(),
            b"from the server"
        );
        assert!(from_server.next().await.is_none());
        let (mut on_server, _) = server.accept().await.unwrap().input();
        let (_, stdin) = second.input();
        stdin.write(b"typed").unwrap();
        stdin.close();
        assert_eq!(on_server.next().await.unwrap().unwrap(), b"typed");
        assert!(on_server.next().await.is_none());
        drop(to_server);
        client.finish().await;
        tokio::time::timeout(std::time::Duration::from_secs(5), server.peer_gone())
            .await
            .expect("the server sees the client go");
    }

    #[tokio::test]
    async fn garbage_ends_the_session_without_a_panic() {
        let (mut client, server) = tokio::io::duplex(4096);
        let session = Session::start(server);
        // A control frame of SPDY version 2.
        client
            .write_all(&[0x80, 0x02, 0x00, 0x06, 0, 0, 0, 4, 0, 0, 0, 1])
            .await
            .unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(5), session.peer_gone())
            .await
            .expect("the session ends");
        let mut buf = Vec::new();
        let away = read_until(&mut client, &mut buf, |f| matches!(f, Frame::GoAway { .. })).await;
        assert!(matches!(away, Frame::GoAway { status: 1, .. }));
        session.finish().await;
    }
}
