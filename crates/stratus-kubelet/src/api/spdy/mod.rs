//! SPDY/3.1 on the kubelet side: the protocol itself (frames, header
//! blocks, sessions, version negotiation) comes from `stratus-httpstream`
//! and is re-exported here; this module serves exec, attach and
//! port-forward over it, as kube-apiserver speaks them to kubelets.
//!
//! ```
//! use stratus_kubelet::api::spdy::{negotiate, REMOTE_COMMAND_VERSIONS};
//! assert_eq!(negotiate(&["v5.channel.k8s.io"], REMOTE_COMMAND_VERSIONS), Some(Some("v5.channel.k8s.io")));
//! ```

pub(crate) mod serve;
mod sink;

pub use sink::StreamSink;
pub use stratus_httpstream::spdy::*;
