//! SPDY/3 header blocks: name/value pairs, each length-prefixed, compressed
//! with zlib over the whole session (one context per direction) and
//! seeded with the protocol's dictionary.

use std::sync::OnceLock;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use thiserror::Error;

/// Header names and values, in order; a name may repeat.
pub type Headers = Vec<(String, String)>;

/// The largest decompressed header block accepted.
pub const MAX_HEADER_BLOCK: usize = 256 * 1024;

/// A header block that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HeaderError {
    /// The zlib stream is corrupt.
    #[error("corrupt header compression: {0}")]
    Zlib(String),
    /// The decompressed block is larger than [`MAX_HEADER_BLOCK`].
    #[error("header block over {MAX_HEADER_BLOCK} bytes")]
    TooLarge,
    /// The block ends inside a length or a string.
    #[error("truncated header block")]
    Truncated,
    /// A name or value is not UTF-8.
    #[error("a header that is not UTF-8")]
    NotUtf8,
}

/// The words of the SPDY/3 compression dictionary, each written with a
/// four-byte big-endian length before it.
const DICTIONARY_WORDS: &[&str] = &[
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
];

/// The raw text that ends the dictionary.
const DICTIONARY_TAIL: &str = concat!(
    "100101201202205206300302303304305306307402405406407408409410411412413414",
    "415416417502504505203 Non-Authoritative Information204 No Content301 Moved ",
    "Permanently400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 ",
    "Internal Server Error501 Not Implemented503 Service UnavailableJan Feb Mar ",
    "Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, ",
    "Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,",
    "application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=gzip,",
    "deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.",
);

/// The SPDY/3 zlib dictionary (1,423 bytes).
pub fn dictionary() -> &'static [u8] {
    static DICTIONARY: OnceLock<Vec<u8>> = OnceLock::new();
    DICTIONARY.get_or_init(|| {
        let mut out = Vec::with_capacity(1423);
        for word in DICTIONARY_WORDS {
            out.extend_from_slice(&(word.len() as u32).to_be_bytes());
            out.extend_from_slice(word.as_bytes());
        }
        out.extend_from_slice(DICTIONARY_TAIL.as_bytes());
        out
    })
}

/// Encode `headers` as an uncompressed block (names lower-cased).
pub fn encode_block(headers: &[(String, String)]) -> Vec<u8> {
    let mut out = (headers.len() as u32).to_be_bytes().to_vec();
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        out.extend_from_slice(&(name.len() as u32).to_be_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(value.len() as u32).to_be_bytes());
        out.extend_from_slice(value.as_bytes());
    }
    out
}

/// Decode an uncompressed block. A value holding NUL bytes is several
/// values of the same name.
pub fn decode_block(block: &[u8]) -> Result<Headers, HeaderError> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], HeaderError> {
        if b.len() < n {
            return Err(HeaderError::Truncated);
        }
        let (head, rest) = b.split_at(n);
        *b = rest;
        Ok(head)
    }
    fn length(b: &mut &[u8]) -> Result<usize, HeaderError> {
        let l = take(b, 4)?;
        Ok(u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize)
    }
    let mut b = block;
    let count = length(&mut b)?;
    let mut headers = Vec::new();
    for _ in 0..count {
        let n = length(&mut b)?;
        let name = std::str::from_utf8(take(&mut b, n)?).map_err(|_| HeaderError::NotUtf8)?;
        let n = length(&mut b)?;
        let value = std::str::from_utf8(take(&mut b, n)?).map_err(|_| HeaderError::NotUtf8)?;
        for v in value.split('\0') {
            headers.push((name.to_owned(), v.to_owned()));
        }
    }
    Ok(headers)
}

/// The first value of `name` (case-insensitive).
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The compressing side of a session.
pub struct Compressor(Compress);

impl std::fmt::Debug for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressor").finish_non_exhaustive()
    }
}

impl Default for Compressor {
    fn default() -> Self {
        let mut c = Compress::new(Compression::default(), true);
        // Setting a dictionary on a fresh stream cannot fail.
        let _ = c.set_dictionary(dictionary());
        Self(c)
    }
}

impl Compressor {
    /// Compress `headers` into the next header block of the session.
    pub fn compress(&mut self, headers: &[(String, String)]) -> Vec<u8> {
        let input = encode_block(headers);
        let mut out = Vec::with_capacity(input.len() + 64);
        let mut consumed = 0;
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(256);
            }
            let before = self.0.total_in();
            let status = self
                .0
                .compress_vec(&input[consumed..], &mut out, FlushCompress::Sync);
            consumed += (self.0.total_in() - before) as usize;
            // Done once all input is in and the flush left spare room.
            if consumed >= input.len() && out.capacity() > out.len() {
                break;
            }
            if status.is_err() {
                break;
            }
        }
        out
    }
}

/// The decompressing side of a session.
pub struct Decompressor(Decompress);

impl std::fmt::Debug for Decompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decompressor").finish_non_exhaustive()
    }
}

impl Default for Decompressor {
    fn default() -> Self {
        Self(Decompress::new(true))
    }
}

impl Decompressor {
    /// Decompress the session's next header block.
    pub fn decompress(&mut self, data: &[u8]) -> Result<Headers, HeaderError> {
        let mut out = Vec::with_capacity(data.len() * 4 + 64);
        let mut consumed = 0;
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(1024);
            }
            let before = self.0.total_in();
            let result = self
                .0
                .decompress_vec(&data[consumed..], &mut out, FlushDecompress::Sync);
            consumed += (self.0.total_in() - before) as usize;
            if out.len() > MAX_HEADER_BLOCK {
                return Err(HeaderError::TooLarge);
            }
            match result {
                Ok(Status::StreamEnd) => break,
                Ok(_) => {
                    if consumed >= data.len() && out.capacity() > out.len() {
                        break;
                    }
                }
                Err(e) if e.needs_dictionary().is_some() => {
                    self.0
                        .set_dictionary(dictionary())
                        .map_err(|e| HeaderError::Zlib(e.to_string()))?;
                }
                Err(e) => return Err(HeaderError::Zlib(e.to_string())),
            }
        }
        decode_block(&out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn h(pairs: &[(&str, &str)]) -> Headers {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_dictionary_is_the_protocols() {
        let d = dictionary();
        assert_eq!(d.len(), 1423);
        assert_eq!(&d[..11], b"\0\0\0\x07options");
        assert!(d.ends_with(b",enq=0."));
        // zlib's Adler-32 of the SPDY/3 dictionary, as peers announce it.
        let mut c = Compress::new(Compression::default(), true);
        assert_eq!(c.set_dictionary(d).unwrap(), 0xe3c6_a7c2);
    }

    #[test]
    fn a_session_of_blocks_round_trips() {
        let mut c = Compressor::default();
        let mut d = Decompressor::default();
        for block in [
            h(&[("streamtype", "error")]),
            h(&[("streamtype", "stdout"), ("port", "8080")]),
            h(&[]),
            h(&[("x", &"y".repeat(5000))]),
        ] {
            let wire = c.compress(&block);
            assert_eq!(d.decompress(&wire).unwrap(), block);
        }
    }

    #[test]
    fn nul_separated_values_and_bad_blocks() {
        let block = encode_block(&h(&[("a", "1\u{0}2")]));
        assert_eq!(decode_block(&block).unwrap(), h(&[("a", "1"), ("a", "2")]));
        assert_eq!(
            decode_block(&[0, 0, 0, 1, 0, 0]),
            Err(HeaderError::Truncated)
        );
        assert_eq!(
            decode_block(&[0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0, 0, 0, 0]),
            Err(HeaderError::NotUtf8)
        );
        assert!(
            Decompressor::default()
                .decompress(b"not zlib at all")
                .is_err()
        );
        assert_eq!(
            header(&h(&[("StreamType", "data")]), "streamtype"),
            Some("data")
        );
    }

    proptest! {
        #[test]
        fn decoding_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..128)) {
            let _ = decode_block(&bytes);
            let _ = Decompressor::default().decompress(&bytes);
        }

        #[test]
        fn blocks_round_trip(pairs in prop::collection::vec(("[a-z-]{1,12}", "[ -~]{0,40}"), 0..8)) {
            let headers: Headers = pairs;
            let mut c = Compressor::default();
            let mut d = Decompressor::default();
            prop_assert_eq!(d.decompress(&c.compress(&headers)).unwrap(), headers);
        }
    }
}
