//! Runtime-free byte streams for logs, exec, attach and port-forward.
//!
//! Input reaches a provider as a [`ByteStream`] (a `futures_core::Stream` of
//! chunks); output leaves through a [`ByteSink`]. Neither ties the provider to
//! an async runtime; the kubelet API adapts them to its transports.

use std::io;
use std::pin::Pin;

use async_trait::async_trait;
use futures_core::Stream;

/// A stream of byte chunks. The stream ends at end of input; an `Err` item
/// reports a broken transport.
pub type ByteStream = Pin<Box<dyn Stream<Item = io::Result<Vec<u8>>> + Send + 'static>>;

/// A destination for bytes (stdout, stderr, a port-forward connection).
#[async_trait]
pub trait ByteSink: Send {
    /// Write all of `data`. An error means the client went away; stop
    /// producing output.
    async fn write(&mut self, data: &[u8]) -> io::Result<()>;

    /// Signal end of output. Defaults to doing nothing.
    async fn close(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A boxed [`ByteSink`].
pub type OutputStream = Box<dyn ByteSink>;

/// A terminal size, in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TermSize {
    /// Columns.
    pub width: u16,
    /// Rows.
    pub height: u16,
}

/// A stream of terminal resizes.
pub type ResizeStream = Pin<Box<dyn Stream<Item = TermSize> + Send + 'static>>;

/// The streams of an exec or attach session (Go: `AttachIO`). A stream the
/// client did not ask for is `None`; with a TTY there is no separate stderr.
#[derive(Default)]
pub struct AttachIo {
    /// The client's input.
    pub stdin: Option<ByteStream>,
    /// Output to the client.
    pub stdout: Option<OutputStream>,
    /// Error output to the client (none with a TTY).
    pub stderr: Option<OutputStream>,
    /// Whether the client asked for a terminal.
    pub tty: bool,
    /// Terminal resizes (only with a TTY).
    pub resize: Option<ResizeStream>,
}

impl std::fmt::Debug for AttachIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttachIo")
            .field("stdin", &self.stdin.is_some())
            .field("stdout", &self.stdout.is_some())
            .field("stderr", &self.stderr.is_some())
            .field("tty", &self.tty)
            .field("resize", &self.resize.is_some())
            .finish()
    }
}

/// A [`ByteSink`] that collects everything written, for tests and buffering.
///
/// ```
/// use stratus_pod::{ByteSink, VecSink};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let mut sink = VecSink::default();
/// sink.write(b"hello ").await.unwrap();
/// sink.write(b"world").await.unwrap();
/// assert_eq!(sink.data(), b"hello world");
/// # });
/// ```
#[derive(Debug, Default, Clone)]
pub struct VecSink {
    data: Vec<u8>,
    closed: bool,
}

impl VecSink {
    /// The bytes written so far.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// True once `close` was called.
    pub fn is_closed(&self) -> bool {
        self.closed
    }
}

#[async_trait]
impl ByteSink for VecSink {
    async fn write(&mut self, data: &[u8]) -> io::Result<()> {
        if self.closed {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "sink is closed"));
        }
        self.data.extend_from_slice(data);
        Ok(())
    }

    async fn close(&mut self) -> io::Result<()> {
        self.closed = true;
        Ok(())
    }
}

/// A [`ByteStream`] over chunks already in memory.
pub fn stream_from_chunks(chunks: Vec<Vec<u8>>) -> ByteStream {
    Box::pin(Chunks(chunks.into_iter()))
}

struct Chunks(std::vec::IntoIter<Vec<u8>>);

impl Stream for Chunks {
    type Item = io::Result<Vec<u8>>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::task::Poll::Ready(self.0.next().map(Ok))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}
