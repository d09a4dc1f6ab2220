//! SPDY/3.1, the stream protocol kube-apiserver speaks to kubelets for
//! exec, attach and port-forward (and kubectl speaks to the API server
//! when WebSockets are off): framing, compressed header blocks, a session
//! for either side, and the version negotiation of the Kubernetes stream
//! protocols. Written here because no maintained Rust crate implements
//! SPDY; every parser is property-tested against arbitrary bytes.
//!
//! ```
//! use stratus_httpstream::spdy::{Compressor, Decompressor, Frame};
//!
//! let mut out = Compressor::default();
//! let mut inn = Decompressor::default();
//! let syn = Frame::SynStream {
//!     stream: 1,
//!     associated: 0,
//!     flags: 0,
//!     headers: out.compress(&[("streamType".into(), "error".into())]),
//! };
//! let bytes = syn.encode();
//! let Some((Frame::SynStream { headers, .. }, _)) = Frame::parse(&bytes).unwrap() else { panic!() };
//! assert_eq!(inn.decompress(&headers).unwrap(), [("streamtype".to_string(), "error".to_string())]);
//! ```

mod frame;
mod headers;
mod negotiate;
mod session;

pub use frame::{FLAG_FIN, Frame, FrameError, MAX_PAYLOAD, VERSION};
pub use headers::{
    Compressor, Decompressor, HeaderError, Headers, MAX_HEADER_BLOCK, decode_block, dictionary,
    encode_block, header,
};
pub use negotiate::{PORT_FORWARD_VERSION, REMOTE_COMMAND_VERSIONS, negotiate};
pub use session::{ByteStream, Session, Stream, StreamWriter};
