//! The body of every response the harness serves.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;

/// The response body type: any stream of bytes, boxed.
pub(crate) type Body = UnsyncBoxBody<Bytes, Infallible>;
