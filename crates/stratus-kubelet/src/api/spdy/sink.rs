//! A SPDY stream's writer as a provider's output stream.

use std::io;

use async_trait::async_trait;
use stratus_httpstream::spdy::StreamWriter;
use stratus_pod::{ByteSink, OutputStream};

/// A [`StreamWriter`] as a [`ByteSink`], the type providers write exec
/// and attach output and port-forward data to.
///
/// ```
/// use stratus_kubelet::api::spdy::StreamSink;
/// fn output(writer: stratus_kubelet::api::spdy::StreamWriter) -> stratus_pod::OutputStream {
///     StreamSink::boxed(writer)
/// }
/// ```
#[derive(Debug, Clone)]
pub struct StreamSink(pub StreamWriter);

impl StreamSink {
    /// The writer as a boxed output stream.
    pub fn boxed(writer: StreamWriter) -> OutputStream {
        Box::new(Self(writer))
    }
}

#[async_trait]
impl ByteSink for StreamSink {
    async fn write(&mut self, data: &[u8]) -> io::Result<()> {
        self.0.write(data)
    }

    async fn close(&mut self) -> io::Result<()> {
        self.0.close();
        Ok(())
    }
}
