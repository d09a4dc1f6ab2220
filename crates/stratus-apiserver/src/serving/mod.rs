//! HTTP and serving: the listener and its TLS, routing and content
//! negotiation, discovery, and the proxy to kubelets (with the
//! WebSocket-to-SPDY translation kube-apiserver does for exec, attach and
//! port-forward).

pub(crate) mod discovery;
pub(crate) mod http;
pub(crate) mod keys;
pub(crate) mod kubelet;
pub(crate) mod route;
pub(crate) mod server;
pub(crate) mod stream_translation;
pub(crate) mod tls;
pub(crate) mod wire_format;
