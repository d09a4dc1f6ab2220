//! The messages whose JSON is not an object with the same fields: times,
//! quantities, int-or-string, embedded JSON, and the unions of CRD schemas.

use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;

use super::wire::{self, Payload, Reader};
use super::{Path, ProtobufError, decode, encode, invalid};

const TIME: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime";
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
const RAW_EXTENSION: &str = "io.k8s.apimachinery.pkg.runtime.RawExtension";
const FIELDS_V1: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1";
const APIEXT: &str = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.";
const PROPS: &str = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps";

fn apiext(name: &str) -> Option<&str> {
    name.strip_prefix(APIEXT)
}

/// Read the fields of a small message into (number, payload) pairs.
fn fields(bytes: &[u8]) -> Result<Vec<(u32, Payload<'_>)>, ProtobufError> {
    let mut out = Vec::new();
    let mut reader = Reader::new(bytes);
    while let Some(f) = reader.field()? {
        out.push(f);
    }
    Ok(out)
}

fn varint(fields: &[(u32, Payload<'_>)], number: u32) -> Option<u64> {
    fields.iter().rev().find_map(|(n, p)| match p {
        Payload::Varint(v) if *n == number => Some(*v),
        _ => None,
    })
}

fn bytes<'a>(fields: &[(u32, Payload<'a>)], number: u32) -> Option<&'a [u8]> {
    fields.iter().rev().find_map(|(n, p)| match p {
        Payload::Len(b) if *n == number => Some(*b),
        _ => None,
    })
}

fn string(
    fields: &[(u32, Payload<'_>)],
    number: u32,
    path: Path<'_>,
) -> Result<String, ProtobufError> {
    let b = bytes(fields, number).unwrap_or_default();
    String::from_utf8(b.to_vec()).map_err(|_| ProtobufError::InvalidUtf8(path.render()))
}

fn embedded_json(raw: &[u8], path: Path<'_>, depth: usize) -> Result<Value, ProtobufError> {
    if raw.is_empty() {
        return Ok(Value::Null);
    }
    if raw.starts_with(super::MAGIC) {
        return super::decode_enveloped(raw, depth + 1);
    }
    serde_json::from_slice(raw).map_err(|e| ProtobufError::EmbeddedJson {
        path: path.render(),
        message: e.to_string(),
    })
}

/// JSON for a well-known message, or `None` for an ordinary one.
pub(super) fn decode(
    name: &str,
    bytes_in: &[u8],
    depth: usize,
    path: Path<'_>,
) -> Result<Option<Value>, ProtobufError> {
    let value = match name {
        TIME | MICRO_TIME => {
            if bytes_in.is_empty() {
                // Go writes a zero time as an empty message; JSON omits it.
                return Ok(Some(Value::Null));
            }
            let f = fields(bytes_in)?;
            let seconds = varint(&f, 1).unwrap_or(0) as i64;
            let nanos = varint(&f, 2).unwrap_or(0) as i64 as i32;
            Value::String(format_time(seconds, nanos, name == MICRO_TIME, path)?)
        }
        QUANTITY => Value::String(string(&fields(bytes_in)?, 1, path)?),
        INT_OR_STRING => {
            let f = fields(bytes_in)?;
            if varint(&f, 1) == Some(1) {
                Value::String(string(&f, 3, path)?)
            } else {
                let i = varint(&f, 2).unwrap_or(0) as i64 as i32;
                Value::Number(i64::from(i).into())
            }
        }
        RAW_EXTENSION | FIELDS_V1 => embedded_json(
            bytes(&fields(bytes_in)?, 1).unwrap_or_default(),
            path,
            depth,
        )?,
        _ => match apiext(name) {
            Some("JSON") => embedded_json(
                bytes(&fields(bytes_in)?, 1).unwrap_or_default(),
                path,
                depth,
            )?,
            Some("JSONSchemaPropsOrBool") => {
                let f = fields(bytes_in)?;
                match bytes(&f, 2) {
                    Some(schema) => props(schema, depth, path)?,
                    None => Value::Bool(varint(&f, 1).unwrap_or(0) != 0),
                }
            }
            Some("JSONSchemaPropsOrArray") => {
                let f = fields(bytes_in)?;
                let many: Vec<&[u8]> = f
                    .iter()
                    .filter_map(|(n, p)| match p {
                        Payload::Len(b) if *n == 2 => Some(*b),
                        _ => None,
                    })
                    .collect();
                if many.is_empty() {
                    props(bytes(&f, 1).unwrap_or_default(), depth, path)?
                } else {
                    Value::Array(
                        many.into_iter()
                            .map(|b| props(b, depth, path))
                            .collect::<Result<_, _>>()?,
                    )
                }
            }
            Some("JSONSchemaPropsOrStringArray") => {
                let f = fields(bytes_in)?;
                let strings: Vec<Value> = f
                    .iter()
                    .filter_map(|(n, p)| match p {
                        Payload::Len(b) if *n == 2 => Some(*b),
                        _ => None,
                    })
                    .map(|b| {
                        String::from_utf8(b.to_vec())
                            .map(Value::String)
                            .map_err(|_| ProtobufError::InvalidUtf8(path.render()))
                    })
                    .collect::<Result<_, _>>()?;
                if strings.is_empty() {
                    props(bytes(&f, 1).unwrap_or_default(), depth, path)?
                } else {
                    Value::Array(strings)
                }
            }
            _ => return Ok(None),
        },
    };
    Ok(Some(value))
}

fn props(bytes: &[u8], depth: usize, path: Path<'_>) -> Result<Value, ProtobufError> {
    decode::message(PROPS, bytes, depth + 1, path)
}

fn format_time(
    seconds: i64,
    nanos: i32,
    micro: bool,
    path: Path<'_>,
) -> Result<String, ProtobufError> {
    let t = OffsetDateTime::from_unix_timestamp(seconds)
        .map_err(|e| invalid(path, format!("time out of range: {e}")))?;
    let formatted = if micro {
        let micros = nanos.clamp(0, 999_999_999) / 1000;
        let base = t
            .format(format_description!(
                "[year]-[month]-[day]T[hour]:[minute]:[second]"
            ))
            .map_err(|e| invalid(path, e.to_string()))?;
        format!("{base}.{micros:06}Z")
    } else {
        t.format(format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second]Z"
        ))
        .map_err(|e| invalid(path, e.to_string()))?
    };
    Ok(formatted)
}

/// Write a well-known message from its JSON; `false` for an ordinary one.
pub(super) fn encode(
    name: &str,
    v: &Value,
    out: &mut Vec<u8>,
    depth: usize,
    path: Path<'_>,
    mode: encode::Mode,
) -> Result<bool, ProtobufError> {
    match name {
        TIME | MICRO_TIME => {
            let s = v
                .as_str()
                .ok_or_else(|| invalid(path, "expected an RFC 3339 time"))?;
            let t = OffsetDateTime::parse(s, &Rfc3339)
                .map_err(|e| invalid(path, format!("invalid time {s:?}: {e}")))?;
            wire::put_varint_field(out, 1, t.unix_timestamp() as u64);
            let nanos = if name == MICRO_TIME {
                t.nanosecond() / 1000 * 1000
            } else {
                0
            };
            wire::put_varint_field(out, 2, u64::from(nanos));
        }
        QUANTITY => {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err(invalid(path, "expected a quantity")),
            };
            wire::put_len(out, 1, s.as_bytes());
        }
        INT_OR_STRING => match v {
            Value::Number(n) => {
                let i = n
                    .as_i64()
                    .and_then(|i| i32::try_from(i).ok())
                    .ok_or_else(|| invalid(path, "expected a 32-bit integer or a string"))?;
                wire::put_varint_field(out, 1, 0);
                wire::put_varint_field(out, 2, i64::from(i) as u64);
                wire::put_len(out, 3, b"");
            }
            Value::String(s) => {
                wire::put_varint_field(out, 1, 1);
                wire::put_varint_field(out, 2, 0);
                wire::put_len(out, 3, s.as_bytes());
            }
            _ => return Err(invalid(path, "expected an integer or a string")),
        },
        RAW_EXTENSION | FIELDS_V1 => put_json(out, v, path)?,
        _ => match apiext(name) {
            Some("JSON") => put_json(out, v, path)?,
            Some("JSONSchemaPropsOrBool") => match v {
                Value::Bool(b) => wire::put_varint_field(out, 1, u64::from(*b)),
                Value::Object(_) => {
                    wire::put_varint_field(out, 1, 1);
                    put_props(out, 2, v, depth, path, mode)?;
                }
                _ => return Err(invalid(path, "expected a boolean or a schema")),
            },
            Some("JSONSchemaPropsOrArray") => match v {
                Value::Array(items) => {
                    for item in items {
                        put_props(out, 2, item, depth, path, mode)?;
                    }
                }
                Value::Object(_) => put_props(out, 1, v, depth, path, mode)?,
                _ => return Err(invalid(path, "expected a schema or a list of schemas")),
            },
            Some("JSONSchemaPropsOrStringArray") => match v {
                Value::Array(items) => {
                    for item in items {
                        let s = item
                            .as_str()
                            .ok_or_else(|| invalid(path, "expected a list of strings"))?;
                        wire::put_len(out, 2, s.as_bytes());
                    }
                }
                Value::Object(_) => put_props(out, 1, v, depth, path, mode)?,
                _ => return Err(invalid(path, "expected a schema or a list of strings")),
            },
            _ => return Ok(false),
        },
    }
    Ok(true)
}

fn put_json(out: &mut Vec<u8>, v: &Value, path: Path<'_>) -> Result<(), ProtobufError> {
    let raw = serde_json::to_vec(v).map_err(|e| invalid(path, e.to_string()))?;
    wire::put_len(out, 1, &raw);
    Ok(())
}

fn put_props(
    out: &mut Vec<u8>,
    number: u32,
    v: &Value,
    depth: usize,
    path: Path<'_>,
    mode: encode::Mode,
) -> Result<(), ProtobufError> {
    let mut buf = Vec::new();
    encode::message(PROPS, v, &mut buf, depth + 1, path, mode)?;
    wire::put_len(out, number, &buf);
    Ok(())
}
