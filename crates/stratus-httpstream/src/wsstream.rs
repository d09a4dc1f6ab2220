//! The WebSocket channel protocols of exec, attach and port-forward
//! (`channel.k8s.io` and its versions): each message carries one channel's
//! bytes behind a channel number. Binary protocols prefix the raw bytes with
//! the number as one byte; base64 protocols send text, the number as an
//! ASCII digit and the bytes base64-encoded. `v5.channel.k8s.io` adds a
//! close signal: channel 255 with the number of the channel being closed.
//! Pure framing, no IO; the parsers are property-tested.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// The remote-command channels.
pub mod channels {
    /// The client's input.
    pub const STDIN: u8 = 0;
    /// Standard output.
    pub const STDOUT: u8 = 1;
    /// Standard error.
    pub const STDERR: u8 = 2;
    /// The outcome: a `Status` (v4, v5) or an error text (older).
    pub const ERROR: u8 = 3;
    /// Terminal resizes, JSON `{"Width": w, "Height": h}`.
    pub const RESIZE: u8 = 4;
    /// The v5 close signal: the payload names the closed channel.
    pub const CLOSE: u8 = 255;
}

/// A WebSocket subprotocol of the channel family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChannelProtocol {
    /// `v5.channel.k8s.io`: binary, `Status` errors, close signal.
    V5,
    /// `v4.channel.k8s.io`: binary, `Status` errors.
    V4,
    /// `v4.base64.channel.k8s.io`: base64 text, `Status` errors.
    V4Base64,
    /// `channel.k8s.io` (or no subprotocol): binary, text errors.
    V1,
    /// `base64.channel.k8s.io`: base64 text, text errors.
    V1Base64,
}

/// The subprotocols exec and attach accept.
pub const REMOTE_COMMAND_PROTOCOLS: &[ChannelProtocol] = &[
    ChannelProtocol::V5,
    ChannelProtocol::V4,
    ChannelProtocol::V4Base64,
    ChannelProtocol::V1,
    ChannelProtocol::V1Base64,
];

/// The subprotocols port-forward accepts (the kubelet's: v4 and none).
pub const PORT_FORWARD_PROTOCOLS: &[ChannelProtocol] =
    &[ChannelProtocol::V4, ChannelProtocol::V4Base64];

/// The protocols a client offers, from header values that may each hold
/// a comma-separated list.
pub fn offers<'a>(headers: &[&'a str]) -> Vec<&'a str> {
    headers
        .iter()
        .flat_map(|h| h.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

/// A message that breaks the channel protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A text message under a binary protocol, or the reverse.
    #[error("a {got} message under the {protocol} protocol")]
    WrongKind {
        /// The protocol's name.
        protocol: &'static str,
        /// `text` or `binary`.
        got: &'static str,
    },
    /// A base64 message whose channel is not a digit.
    #[error("invalid channel prefix {0:?}")]
    BadChannel(char),
    /// A base64 payload that does not decode.
    #[error("invalid base64 payload: {0}")]
    BadBase64(String),
    /// A close signal without the channel it closes.
    #[error("a close signal without a channel")]
    BadClose,
}

/// One decoded message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Bytes on a channel.
    Data(u8, Vec<u8>),
    /// The peer will write no more on this channel (v5).
    Close(u8),
    /// An empty message (ignored, as Go does).
    Empty,
}

impl ChannelProtocol {
    /// The subprotocol name sent in `Sec-WebSocket-Protocol`.
    pub fn name(self) -> &'static str {
        match self {
            Self::V5 => "v5.channel.k8s.io",
            Self::V4 => "v4.channel.k8s.io",
            Self::V4Base64 => "v4.base64.channel.k8s.io",
            Self::V1 => "channel.k8s.io",
            Self::V1Base64 => "base64.channel.k8s.io",
        }
    }

    /// Pick the client's first offered protocol (comma-separated
    /// `Sec-WebSocket-Protocol` values) that `supported` holds. No offer
    /// means the plain binary protocol (answered without a subprotocol);
    /// `None` if nothing offered is supported.
    ///
    /// ```
    /// use stratus_httpstream::wsstream::{ChannelProtocol, REMOTE_COMMAND_PROTOCOLS as P};
    /// assert_eq!(ChannelProtocol::negotiate(&["v5.channel.k8s.io, v4.channel.k8s.io"], P), Some((ChannelProtocol::V5, true)));
    /// assert_eq!(ChannelProtocol::negotiate(&[], P), Some((ChannelProtocol::V1, false)));
    /// assert_eq!(ChannelProtocol::negotiate(&["v9.channel.k8s.io"], P), None);
    /// ```
    ///
    /// The `bool` says whether to name the protocol in the answer.
    pub fn negotiate(offered: &[&str], supported: &[ChannelProtocol]) -> Option<(Self, bool)> {
        let offers = offers(offered);
        if offers.is_empty() {
            return Some((Self::V1, false));
        }
        offers.iter().find_map(|offer| {
            supported
                .iter()
                .find(|p| p.name() == *offer)
                .map(|p| (*p, true))
        })
    }

    /// Whether payloads travel base64-encoded in text messages.
    pub fn is_base64(self) -> bool {
        matches!(self, Self::V4Base64 | Self::V1Base64)
    }

    /// Whether the error channel carries a JSON `Status` (v4, v5) rather
    /// than a plain message.
    pub fn status_errors(self) -> bool {
        matches!(self, Self::V5 | Self::V4 | Self::V4Base64)
    }

    /// Whether the close signal exists (v5).
    pub fn supports_close(self) -> bool {
        self == Self::V5
    }

    /// Encode `data` on `channel`: `(is_text, payload)`.
    ///
    /// ```
    /// use stratus_httpstream::wsstream::ChannelProtocol;
    /// assert_eq!(ChannelProtocol::V4.encode(1, b"hi"), (false, b"\x01hi".to_vec()));
    /// assert_eq!(ChannelProtocol::V4Base64.encode(1, b"hi"), (true, b"1aGk=".to_vec()));
    /// ```
    pub fn encode(self, channel: u8, data: &[u8]) -> (bool, Vec<u8>) {
        if self.is_base64() {
            let mut out = Vec::with_capacity(1 + data.len().div_ceil(3) * 4);
            out.push(b'0' + channel);
            out.extend_from_slice(STANDARD.encode(data).as_bytes());
            (true, out)
        } else {
            let mut out = Vec::with_capacity(1 + data.len());
            out.push(channel);
            out.extend_from_slice(data);
            (false, out)
        }
    }

    /// Decode one message (`is_text` says which WebSocket kind it was).
    ///
    /// ```
    /// use stratus_httpstream::wsstream::{ChannelProtocol, Frame};
    /// assert_eq!(ChannelProtocol::V5.decode(false, b"\x00ls\n"), Ok(Frame::Data(0, b"ls\n".to_vec())));
    /// assert_eq!(ChannelProtocol::V5.decode(false, &[255, 0]), Ok(Frame::Close(0)));
    /// assert!(ChannelProtocol::V4Base64.decode(true, b"0%%%").is_err());
    /// ```
    pub fn decode(self, is_text: bool, message: &[u8]) -> Result<Frame, FrameError> {
        if self.is_base64() != is_text {
            return Err(FrameError::WrongKind {
                protocol: self.name(),
                got: if is_text { "text" } else { "binary" },
            });
        }
        let Some((&first, rest)) = message.split_first() else {
            return Ok(Frame::Empty);
        };
        if self.is_base64() {
            if !first.is_ascii_digit() {
                return Err(FrameError::BadChannel(first as char));
            }
            let data = STANDARD
                .decode(rest)
                .map_err(|e| FrameError::BadBase64(e.to_string()))?;
            return Ok(Frame::Data(first - b'0', data));
        }
        if first == channels::CLOSE && self.supports_close() {
            return rest
                .first()
                .map(|&c| Frame::Close(c))
                .ok_or(FrameError::BadClose);
        }
        Ok(Frame::Data(first, rest.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn negotiation_follows_the_clients_order() {
        let p = REMOTE_COMMAND_PROTOCOLS;
        assert_eq!(
            ChannelProtocol::negotiate(&["v4.channel.k8s.io", "v5.channel.k8s.io"], p),
            Some((ChannelProtocol::V4, true))
        );
        assert_eq!(
            ChannelProtocol::negotiate(&["base64.channel.k8s.io"], p),
            Some((ChannelProtocol::V1Base64, true))
        );
        // Port-forward has no v5; a v5-first client gets v4.
        assert_eq!(
            ChannelProtocol::negotiate(
                &["v5.channel.k8s.io, v4.channel.k8s.io"],
                PORT_FORWARD_PROTOCOLS
            ),
            Some((ChannelProtocol::V4, true))
        );
        assert_eq!(
            ChannelProtocol::negotiate(&[" , "], PORT_FORWARD_PROTOCOLS),
            Some((ChannelProtocol::V1, false))
        );
    }

    #[test]
    fn v4_has_no_close_signal() {
        assert_eq!(
            ChannelProtocol::V4.decode(false, &[255, 0]),
            Ok(Frame::Data(255, vec![0]))
        );
        assert_eq!(
            ChannelProtocol::V5.decode(false, &[255]),
            Err(FrameError::BadClose)
        );
        assert_eq!(ChannelProtocol::V5.decode(false, &[]), Ok(Frame::Empty));
        assert!(ChannelProtocol::V5.decode(true, b"0abc").is_err());
    }

    fn any_protocol() -> impl Strategy<Value = ChannelProtocol> {
        prop::sample::select(REMOTE_COMMAND_PROTOCOLS.to_vec())
    }

    proptest! {
        #[test]
        fn decoding_never_panics(p in any_protocol(), text in any::<bool>(), bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = p.decode(text, &bytes);
        }

        #[test]
        fn encode_then_decode_round_trips(p in any_protocol(), channel in 0u8..5, data in prop::collection::vec(any::<u8>(), 0..256)) {
            let (text, message) = p.encode(channel, &data);
            prop_assert_eq!(p.decode(text, &message), Ok(Frame::Data(channel, data)));
        }
    }
}
