//! SPDY/3.1 framing: the eight-byte frame header, the control frames
//! Kubernetes streams use, and data frames. Header blocks stay compressed
//! here (see `headers`). Parsing never panics on any input (proptest).

use thiserror::Error;

/// The SPDY version this codec speaks.
pub const VERSION: u16 = 3;
/// `FLAG_FIN`: the sender's last frame on the stream.
pub const FLAG_FIN: u8 = 0x01;
/// The largest frame payload accepted (16 MiB - 1: the 24-bit length).
pub const MAX_PAYLOAD: usize = 0x00ff_ffff;

/// A frame that breaks the protocol.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    /// A control frame of another SPDY version.
    #[error("unsupported SPDY version {0}")]
    Version(u16),
    /// A control frame shorter than its type requires.
    #[error("a {kind} frame of {len} bytes is too short")]
    Short {
        /// The frame type.
        kind: &'static str,
        /// Its length.
        len: usize,
    },
    /// Stream 0 where a stream is required.
    #[error("a {0} frame for stream 0")]
    StreamZero(&'static str),
}

/// One SPDY frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Bytes on a stream.
    Data {
        /// The stream.
        stream: u32,
        /// `FLAG_FIN`: the sender's last data on it.
        fin: bool,
        /// The bytes.
        data: Vec<u8>,
    },
    /// A new stream (type 1).
    SynStream {
        /// The new stream's id.
        stream: u32,
        /// The stream it is associated to (0: none).
        associated: u32,
        /// The flags (`FLAG_FIN`, unidirectional).
        flags: u8,
        /// The compressed header block.
        headers: Vec<u8>,
    },
    /// The answer to a new stream (type 2).
    SynReply {
        /// The stream.
        stream: u32,
        /// The flags.
        flags: u8,
        /// The compressed header block.
        headers: Vec<u8>,
    },
    /// Abort a stream (type 3).
    RstStream {
        /// The stream.
        stream: u32,
        /// The status code.
        status: u32,
    },
    /// Settings (type 4): `(flags, id, value)` entries.
    Settings(Vec<(u8, u32, u32)>),
    /// A ping (type 6), answered with the same id.
    Ping(u32),
    /// The end of the session (type 7).
    GoAway {
        /// The last stream the sender processed.
        last_stream: u32,
        /// The status code.
        status: u32,
    },
    /// More headers for a stream (type 8).
    Headers {
        /// The stream.
        stream: u32,
        /// The flags.
        flags: u8,
        /// The compressed header block.
        headers: Vec<u8>,
    },
    /// Flow-control credit (type 9; stream 0 is the session).
    WindowUpdate {
        /// The stream, or 0.
        stream: u32,
        /// The credit.
        delta: u32,
    },
    /// A control frame of a type this codec ignores (skipped, as the
    /// protocol requires).
    Unknown(u16),
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

const STREAM_MASK: u32 = 0x7fff_ffff;

impl Frame {
    /// Parse one frame from the front of `buf`: `Ok(None)` if more bytes
    /// are needed, else the frame and the bytes it used.
    ///
    /// ```
    /// use stratus_httpstream::spdy::Frame;
    /// let ping = Frame::Ping(7).encode();
    /// assert_eq!(Frame::parse(&ping).unwrap(), Some((Frame::Ping(7), 12)));
    /// assert_eq!(Frame::parse(&ping[..5]).unwrap(), None);
    /// ```
    pub fn parse(buf: &[u8]) -> Result<Option<(Frame, usize)>, FrameError> {
        if buf.len() < 8 {
            return Ok(None);
        }
        let flags = buf[4];
        let len = (usize::from(buf[5]) << 16) | (usize::from(buf[6]) << 8) | usize::from(buf[7]);
        if buf.len() < 8 + len {
            return Ok(None);
        }
        let body = &buf[8..8 + len];
        let used = 8 + len;
        if buf[0] & 0x80 == 0 {
            return Ok(Some((
                Frame::Data {
                    stream: u32_at(buf, 0) & STREAM_MASK,
                    fin: flags & FLAG_FIN != 0,
                    data: body.to_vec(),
                },
                used,
            )));
        }
        let version = u16::from_be_bytes([buf[0], buf[1]]) & 0x7fff;
        if version != VERSION {
            return Err(FrameError::Version(version));
        }
        let kind = u16::from_be_bytes([buf[2], buf[3]]);
        let need = |name: &'static str, n: usize| {
            if len < n {
                Err(FrameError::Short { kind: name, len })
            } else {
                Ok(())
            }
        };
        let frame = match kind {
            1 => {
                need("SYN_STREAM", 10)?;
                Frame::SynStream {
                    stream: u32_at(body, 0) & STREAM_MASK,
                    associated: u32_at(body, 4) & STREAM_MASK,
                    flags,
                    headers: body[10..].to_vec(),
                }
            }
            2 => {
                need("SYN_REPLY", 4)?;
                Frame::SynReply {
                    stream: u32_at(body, 0) & STREAM_MASK,
                    flags,
                    headers: body[4..].to_vec(),
                }
            }
            3 => {
                need("RST_STREAM", 8)?;
                Frame::RstStream {
                    stream: u32_at(body, 0) & STREAM_MASK,
                    status: u32_at(body, 4),
                }
            }
            4 => {
                need("SETTINGS", 4)?;
                let count = u32_at(body, 0) as usize;
                need("SETTINGS", 4usize.saturating_add(count.saturating_mul(8)))?;
                Frame::Settings(
                    (0..count)
                        .map(|i| {
                            let at = 4 + i * 8;
                            (
                                body[at],
                                u32_at(body, at) & 0x00ff_ffff,
                                u32_at(body, at + 4),
                            )
                        })
                        .collect(),
                )
            }
            6 => {
                need("PING", 4)?;
                Frame::Ping(u32_at(body, 0))
            }
            7 => {
                need("GOAWAY", 8)?;
                Frame::GoAway {
                    last_stream: u32_at(body, 0) & STREAM_MASK,
                    status: u32_at(body, 4),
                }
            }
            8 => {
                need("HEADERS", 4)?;
                Frame::Headers {
                    stream: u32_at(body, 0) & STREAM_MASK,
                    flags,
                    headers: body[4..].to_vec(),
                }
            }
            9 => {
                need("WINDOW_UPDATE", 8)?;
                Frame::WindowUpdate {
                    stream: u32_at(body, 0) & STREAM_MASK,
                    delta: u32_at(body, 4) & STREAM_MASK,
                }
            }
            other => Frame::Unknown(other),
        };
        match &frame {
            Frame::SynStream { stream: 0, .. } => return Err(FrameError::StreamZero("SYN_STREAM")),
            Frame::SynReply { stream: 0, .. } => return Err(FrameError::StreamZero("SYN_REPLY")),
            _ => {}
        }
        Ok(Some((frame, used)))
    }

    /// The frame's bytes. A payload over [`MAX_PAYLOAD`] must be split by
    /// the caller (data writers do).
    pub fn encode(&self) -> Vec<u8> {
        let control = |kind: u16, flags: u8, body: &[u8]| {
            let mut out = Vec::with_capacity(8 + body.len());
            out.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
            out.extend_from_slice(&kind.to_be_bytes());
            out.push(flags);
            out.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
            out.extend_from_slice(body);
            out
        };
        let cat = |parts: &[&[u8]]| parts.concat();
        match self {
            Frame::Data { stream, fin, data } => {
                let mut out = Vec::with_capacity(8 + data.len());
                out.extend_from_slice(&(stream & STREAM_MASK).to_be_bytes());
                out.push(if *fin { FLAG_FIN } else { 0 });
                out.extend_from_slice(&(data.len() as u32).to_be_bytes()[1..]);
                out.extend_from_slice(data);
                out
            }
            Frame::SynStream {
                stream,
                associated,
                flags,
                headers,
            } => control(
                1,
                *flags,
                &cat(&[
                    &stream.to_be_bytes(),
                    &associated.to_be_bytes(),
                    &[0, 0],
                    headers,
                ]),
            ),
            Frame::SynReply {
                stream,
                flags,
                headers,
            } => control(2, *flags, &cat(&[&stream.to_be_bytes(), headers])),
            Frame::RstStream { stream, status } => {
                control(3, 0, &cat(&[&stream.to_be_bytes(), &status.to_be_bytes()]))
            }
            Frame::Settings(entries) => {
                let mut body = (entries.len() as u32).to_be_bytes().to_vec();
                for (flags, id, value) in entries {
                    let mut head = (id & 0x00ff_ffff).to_be_bytes();
                    head[0] = *flags;
                    body.extend_from_slice(&head);
                    body.extend_from_slice(&value.to_be_bytes());
                }
                control(4, 0, &body)
            }
            Frame::Ping(id) => control(6, 0, &id.to_be_bytes()),
            Frame::GoAway {
                last_stream,
                status,
            } => control(
                7,
                0,
                &cat(&[&last_stream.to_be_bytes(), &status.to_be_bytes()]),
            ),
            Frame::Headers {
                stream,
                flags,
                headers,
            } => control(8, *flags, &cat(&[&stream.to_be_bytes(), headers])),
            Frame::WindowUpdate { stream, delta } => {
                control(9, 0, &cat(&[&stream.to_be_bytes(), &delta.to_be_bytes()]))
            }
            Frame::Unknown(kind) => control(*kind, 0, &[]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_frame_round_trips() {
        for frame in [
            Frame::Data {
                stream: 1,
                fin: true,
                data: b"hi".to_vec(),
            },
            Frame::SynStream {
                stream: 3,
                associated: 0,
                flags: 0,
                headers: vec![1, 2, 3],
            },
            Frame::SynReply {
                stream: 3,
                flags: FLAG_FIN,
                headers: vec![],
            },
            Frame::RstStream {
                stream: 5,
                status: 5,
            },
            Frame::Settings(vec![(0, 7, 65536)]),
            Frame::Ping(2),
            Frame::GoAway {
                last_stream: 9,
                status: 0,
            },
            Frame::Headers {
                stream: 1,
                flags: 0,
                headers: vec![9],
            },
            Frame::WindowUpdate {
                stream: 0,
                delta: 1000,
            },
        ] {
            let bytes = frame.encode();
            assert_eq!(Frame::parse(&bytes), Ok(Some((frame, bytes.len()))));
        }
    }

    #[test]
    fn bad_frames_are_errors() {
        let mut v2 = Frame::Ping(1).encode();
        v2[1] = 2;
        assert_eq!(Frame::parse(&v2), Err(FrameError::Version(2)));
        let short = [0x80, 3, 0, 1, 0, 0, 0, 2, 0, 0];
        assert!(matches!(
            Frame::parse(&short),
            Err(FrameError::Short { .. })
        ));
        let zero = Frame::SynStream {
            stream: 0,
            associated: 0,
            flags: 0,
            headers: vec![],
        }
        .encode();
        assert!(Frame::parse(&zero).is_err());
        // A SETTINGS count larger than the frame.
        let settings = [0x80, 3, 0, 4, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff];
        assert!(Frame::parse(&settings).is_err());
    }

    proptest! {
        #[test]
        fn parsing_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..96)) {
            if let Ok(Some((_, used))) = Frame::parse(&bytes) {
                prop_assert!(used <= bytes.len());
            }
        }

        #[test]
        fn control_frames_with_any_body_never_panic(kind in 0u16..12, flags in any::<u8>(), body in prop::collection::vec(any::<u8>(), 0..64)) {
            let mut bytes = vec![0x80, 3];
            bytes.extend_from_slice(&kind.to_be_bytes());
            bytes.push(flags);
            bytes.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
            bytes.extend_from_slice(&body);
            let _ = Frame::parse(&bytes);
        }

        #[test]
        fn data_round_trips(stream in 1u32..0x7fff_ffff, fin in any::<bool>(), data in prop::collection::vec(any::<u8>(), 0..512)) {
            let frame = Frame::Data { stream, fin, data };
            let bytes = frame.encode();
            prop_assert_eq!(Frame::parse(&bytes), Ok(Some((frame, bytes.len()))));
        }
    }
}
