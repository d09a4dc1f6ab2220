//! Port forwarding.

use async_trait::async_trait;

use crate::{ByteStream, OutputStream, Result};

/// One forwarded connection: bytes from the client and a sink back to it.
pub struct PortForwardStream {
    /// Bytes the client sends to the pod's port.
    pub incoming: ByteStream,
    /// Bytes the pod's port sends back.
    pub outgoing: OutputStream,
}

impl std::fmt::Debug for PortForwardStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortForwardStream").finish_non_exhaustive()
    }
}

/// Forwards connections to a pod's port (Go: `PortForward`).
#[async_trait]
pub trait PortForward: Send + Sync {
    /// Copy `stream` to and from `port` of the pod until either side closes.
    async fn port_forward(
        &self,
        namespace: &str,
        pod: &str,
        port: u16,
        stream: PortForwardStream,
    ) -> Result<()>;
}
