//! Content negotiation: JSON or protobuf request bodies and answers.
//!
//! The server stores JSON. A protobuf request body is translated to JSON
//! before the write handlers see it; an answer is translated to protobuf
//! when the client lists protobuf first in `Accept` (client-go's
//! `application/vnd.kubernetes.protobuf, application/json`). An object that
//! protobuf cannot carry whole (a custom resource, or a field newer than the
//! protobuf table) is answered in JSON when the client accepts JSON, and
//! with 406 when it accepts protobuf alone.

use crate::protobuf;
use bytes::Bytes;
use serde_json::Value;

use crate::error::ApiError;

/// The media types a request body may have.
const ACCEPTED_BODIES: &str = "application/json, application/vnd.kubernetes.protobuf";

/// The media type of a header value, lower-cased, without parameters.
fn media_type(value: &str) -> String {
    value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// A create, update, delete or subresource body as JSON.
pub(crate) fn body_as_json(content_type: &str, body: Bytes) -> Result<Bytes, ApiError> {
    match media_type(content_type).as_str() {
        protobuf::MEDIA_TYPE => {
            let value = protobuf::decode_object(&body).map_err(|e| {
                ApiError::bad_request(format!(
                    "the body of the request was not valid protobuf: {e}"
                ))
            })?;
            serde_json::to_vec(&value)
                .map(Bytes::from)
                .map_err(|e| ApiError::internal(e.to_string()))
        }
        "" | "application/json" | "*/*" => Ok(body),
        _ if body.is_empty() => Ok(body),
        _ => Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {ACCEPTED_BODIES}"
            ),
        )),
    }
}

/// What the client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Negotiated {
    /// Protobuf is the client's first choice (of the types served).
    pub(crate) protobuf: bool,
    /// JSON is acceptable too.
    pub(crate) json: bool,
    /// Some type kube-apiserver serves is acceptable (JSON, YAML, which
    /// the harness answers as JSON, or protobuf): else a 406 before
    /// anything is written.
    pub(crate) acceptable: bool,
}

impl Negotiated {
    pub(crate) fn from_accept(accept: &str) -> Self {
        let alternatives: Vec<String> = accept
            .split(',')
            .map(|a| a.trim().to_ascii_lowercase())
            .filter(|a| !a.is_empty())
            .collect();
        let json_like = |m: &str| matches!(m, "application/json" | "*/*" | "application/*");
        // The first alternative the server can serve decides.
        let first = alternatives
            .iter()
            .map(String::as_str)
            .find(|a| json_like(&media_type(a)) || media_type(a) == protobuf::MEDIA_TYPE)
            .unwrap_or_default();
        let protobuf = media_type(first) == protobuf::MEDIA_TYPE && !first.contains("as=");
        let json =
            alternatives.is_empty() || alternatives.iter().any(|a| json_like(&media_type(a)));
        let acceptable = json
            || !first.is_empty()
            || alternatives
                .iter()
                .any(|a| media_type(a) == "application/yaml");
        Self {
            protobuf,
            json,
            acceptable,
        }
    }

    /// kube-apiserver's 406 for a request that accepts nothing it serves.
    pub(crate) fn refusal(protobuf: bool) -> ApiError {
        let served = if protobuf {
            "application/json, application/yaml, application/vnd.kubernetes.protobuf"
        } else {
            "application/json, application/yaml"
        };
        ApiError::new(
            406,
            "NotAcceptable",
            format!("406: Not Acceptable\n\nAvailable representations: {served}"),
        )
    }
}

/// An answer from a value (a write's result) in the negotiated format: the
/// body and its content type.
pub(crate) fn answer_value(
    negotiated: Negotiated,
    value: &Value,
) -> Result<(Bytes, &'static str), ApiError> {
    let json = || {
        serde_json::to_vec(value)
            .map(|b| (Bytes::from(b), "application/json"))
            .map_err(|e| ApiError::internal(e.to_string()))
    };
    if !negotiated.protobuf {
        return json();
    }
    match protobuf::encode_object(value) {
        Ok(bytes) => Ok((Bytes::from(bytes), protobuf::MEDIA_TYPE)),
        Err(_) if negotiated.json => json(),
        Err(why) => Err(not_acceptable(&why)),
    }
}

/// An answer from stored JSON (a read) in the negotiated format; the JSON
/// is parsed only when protobuf is asked for.
pub(crate) fn answer_json(
    negotiated: Negotiated,
    json: Bytes,
) -> Result<(Bytes, &'static str), ApiError> {
    if !negotiated.protobuf {
        return Ok((json, "application/json"));
    }
    let value: Value =
        serde_json::from_slice(&json).map_err(|e| ApiError::internal(e.to_string()))?;
    match protobuf::encode_object(&value) {
        Ok(bytes) => Ok((Bytes::from(bytes), protobuf::MEDIA_TYPE)),
        Err(_) if negotiated.json => Ok((json, "application/json")),
        Err(why) => Err(not_acceptable(&why)),
    }
}

fn not_acceptable(why: &protobuf::ProtobufError) -> ApiError {
    ApiError::new(
        406,
        "NotAcceptable",
        format!("the object cannot be represented in protobuf ({why}); accept application/json"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_go_accept_headers() {
        let n = Negotiated::from_accept("application/vnd.kubernetes.protobuf, application/json");
        assert!(n.protobuf && n.json);
        let n = Negotiated::from_accept("application/vnd.kubernetes.protobuf;stream=watch");
        assert!(n.protobuf && !n.json);
        let n = Negotiated::from_accept(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        );
        assert!(!n.protobuf && n.json);
        assert_eq!(
            Negotiated::from_accept(""),
            Negotiated {
                protobuf: false,
                json: true,
                acceptable: true,
            }
        );
        // The first type served decides; nothing served is refused.
        let n = Negotiated::from_accept("text/plain, application/vnd.kubernetes.protobuf");
        assert!(n.protobuf && !n.json && n.acceptable);
        assert!(Negotiated::from_accept("application/yaml").acceptable);
        assert!(!Negotiated::from_accept("garbage/garbage").acceptable);
    }

    #[test]
    fn unknown_body_types_are_415() {
        let err = body_as_json("text/plain", Bytes::from_static(b"x")).unwrap_err();
        assert_eq!(err.code, 415);
        let err = body_as_json(protobuf::MEDIA_TYPE, Bytes::from_static(b"{}")).unwrap_err();
        assert_eq!(err.code, 400);
        assert!(body_as_json("application/json; charset=utf-8", Bytes::from_static(b"{}")).is_ok());
    }
}
