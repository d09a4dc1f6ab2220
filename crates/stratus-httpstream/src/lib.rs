//! Kubernetes' streaming protocols for `exec`, `attach` and `port-forward`,
//! as pure framing plus a SPDY session over any `AsyncRead + AsyncWrite`:
//!
//! - [`spdy`]: SPDY/3.1 frames, header blocks, [`spdy::Session`] and the
//!   `X-Stream-Protocol-Version` negotiation;
//! - [`wsstream`]: the WebSocket channel protocols (`channel.k8s.io` up to
//!   `v5.channel.k8s.io`), one channel number per message.
//!
//! Shared by the kubelet API of `stratus-kubelet` and the API server of
//! `stratus-apiserver`; it depends on no other Stratus crate.
//!
//! ```
//! use stratus_httpstream::wsstream::{ChannelProtocol, Frame, channels};
//!
//! // A v5 message carrying "hi" on stdout, and the close signal of stdin.
//! let protocol = ChannelProtocol::V5;
//! let (is_text, bytes) = protocol.encode(channels::STDOUT, b"hi");
//! assert!(!is_text);
//! assert_eq!(protocol.decode(false, &bytes).unwrap(), Frame::Data(channels::STDOUT, b"hi".to_vec()));
//! assert_eq!(protocol.decode(false, &[channels::CLOSE, channels::STDIN]).unwrap(), Frame::Close(channels::STDIN));
//! ```

pub mod spdy;
pub mod wsstream;
