//! Copying between a provider's Tokio I/O (a process's pipes, a socket, a
//! remote session) and the kubelet API's runtime-free streams
//! ([`ByteStream`] in, [`OutputStream`] out), as exec, attach and
//! port-forward need on both directions.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use stratus_kubelet::streams::copy_to_sink;
//! use stratus_pod::ByteSink;
//!
//! /// The client's end of stdout, shared with the test.
//! struct Client(Arc<Mutex<Vec<u8>>>);
//!
//! #[async_trait::async_trait]
//! impl ByteSink for Client {
//!     async fn write(&mut self, data: &[u8]) -> std::io::Result<()> {
//!         self.0.lock().unwrap().extend_from_slice(data);
//!         Ok(())
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! copy_to_sink(&b"hello"[..], Box::new(Client(seen.clone()))).await;
//! assert_eq!(*seen.lock().unwrap(), b"hello");
//! # });
//! ```

use futures_util::StreamExt;
use stratus_pod::{ByteStream, OutputStream};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The most bytes read at once.
const CHUNK: usize = 16 * 1024;

/// Copy `reader` into `sink` until end of input or a read error, or until
/// the client goes away (a failed write); then close the sink, which ends
/// that stream for the client.
pub async fn copy_to_sink(mut reader: impl AsyncRead + Unpin, mut sink: OutputStream) {
    let mut buffer = vec![0u8; CHUNK];
    loop {
        match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if sink.write(&buffer[..n]).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = sink.close().await;
}

/// Write every chunk of the client's `input` to `writer` (flushed chunk by
/// chunk, so a terminal or a file sees each at once) until the input ends
/// or breaks, or the writer fails; then shut the writer down, which is end
/// of input for the process or connection behind it.
///
/// ```
/// use stratus_kubelet::streams::copy_from_stream;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let input = futures_util::stream::iter([Ok(b"ab".to_vec()), Ok(b"c".to_vec())]);
/// let mut written = Vec::new();
/// copy_from_stream(Box::pin(input), &mut written).await;
/// assert_eq!(written, b"abc");
/// # });
/// ```
pub async fn copy_from_stream(mut input: ByteStream, mut writer: impl AsyncWrite + Unpin) {
    while let Some(Ok(chunk)) = input.next().await {
        if writer.write_all(&chunk).await.is_err() || writer.flush().await.is_err() {
            return;
        }
    }
    let _ = writer.shutdown().await;
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use stratus_pod::ByteSink;

    /// A sink shared with the test: the bytes, and whether it was closed.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<(Vec<u8>, bool)>>);

    #[async_trait::async_trait]
    impl ByteSink for Shared {
        async fn write(&mut self, data: &[u8]) -> std::io::Result<()> {
            self.0.lock().unwrap().0.extend_from_slice(data);
            Ok(())
        }

        async fn close(&mut self) -> std::io::Result<()> {
            self.0.lock().unwrap().1 = true;
            Ok(())
        }
    }

    #[tokio::test]
    async fn output_stops_when_the_client_is_gone() {
        struct Gone;
        #[async_trait::async_trait]
        impl ByteSink for Gone {
            async fn write(&mut self, _: &[u8]) -> std::io::Result<()> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
        }
        // An endless reader: only the failed write ends the copy.
        copy_to_sink(tokio::io::repeat(b'x'), Box::new(Gone)).await;
    }

    #[tokio::test]
    async fn output_is_copied_and_closed() {
        let sink = Shared::default();
        let big = vec![7u8; 3 * CHUNK + 5];
        copy_to_sink(&big[..], Box::new(sink.clone())).await;
        let (data, closed) = sink.0.lock().unwrap().clone();
        assert_eq!(data, big);
        assert!(closed);
    }

    #[tokio::test]
    async fn a_broken_input_stops_the_copy_without_shutting_down() {
        let input = futures_util::stream::iter([
            Ok(b"a".to_vec()),
            Err(std::io::ErrorKind::ConnectionReset.into()),
            Ok(b"b".to_vec()),
        ]);
        let mut written = Vec::new();
        copy_from_stream(Box::pin(input), &mut written).await;
        assert_eq!(written, b"a");
    }
}
