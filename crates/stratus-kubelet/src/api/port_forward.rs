//! Port-forward over a WebSocket channel protocol (the kubelet's
//! WebSocket port-forward): port `i` of the request uses data channel `2i`
//! and error channel `2i+1`; the server first writes each port's number
//! (two bytes, little-endian) on both of its channels, then copies bytes
//! between the data channel and the provider's connection, and writes a
//! failure as text on the error channel.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use stratus_pod::{PodError, PodLifecycleHandler, PortForwardStream};

use super::channel::ChannelProtocol;
use super::session::{Inputs, Session, Socket};

/// Serve one port-forward session for `ports` of `namespace/pod`.
pub(crate) async fn serve(
    socket: Socket,
    protocol: ChannelProtocol,
    provider: Arc<dyn PodLifecycleHandler>,
    namespace: String,
    pod: String,
    ports: Vec<u16>,
    idle_timeout: Duration,
) {
    let mut inputs = Inputs::default();
    let incoming: Vec<_> = (0..ports.len())
        .map(|i| inputs.input(data_channel(i)))
        .collect();
    let session = Session::start(socket, protocol, inputs);
    for (i, port) in ports.iter().enumerate() {
        let prefix = port.to_le_bytes();
        session.send(data_channel(i), &prefix).await;
        session.send(data_channel(i) + 1, &prefix).await;
    }
    {
        let session = &session;
        let forwards = ports
            .iter()
            .zip(incoming)
            .enumerate()
            .map(|(i, (&port, incoming))| {
                let provider = provider.clone();
                let (namespace, pod) = (namespace.clone(), pod.clone());
                let stream = PortForwardStream {
                    incoming,
                    outgoing: session.sink(data_channel(i)),
                };
                async move {
                    let result = match provider.port_forward() {
                        Some(forward) => forward.port_forward(&namespace, &pod, port, stream).await,
                        None => Err(PodError::not_implemented("port-forward")),
                    };
                    if let Err(e) = result {
                        let message = super::server::forward_error(port, &namespace, &pod, &e);
                        session.send(data_channel(i) + 1, message.as_bytes()).await;
                    }
                }
            });
        tokio::select! {
            _ = join_all(forwards) => {}
            _ = session.client_gone() => {}
            _ = session.idle(idle_timeout) => {}
        }
    }
    session.finish().await;
}

/// The data channel of the `i`-th port (its error channel follows).
fn data_channel(i: usize) -> u8 {
    u8::try_from(i * 2).unwrap_or(u8::MAX - 1)
}
