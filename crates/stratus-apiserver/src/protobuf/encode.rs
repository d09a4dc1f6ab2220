//! JSON → protobuf message, driven by the schema table.

use base64::Engine as _;
use serde_json::Value;

use super::schema::{Field, Schema, Shape, Type};
use super::well_known;
use super::wire::{self, WireType};
use super::{MAX_DEPTH, ProtobufError};

/// How strictly JSON is written.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mode {
    /// Leave out JSON fields that have no protobuf field instead of failing.
    pub(crate) prune: bool,
}

/// A top-level object (its `apiVersion` and `kind` live in the envelope).
pub(crate) fn top(
    name: &str,
    object: &Value,
    out: &mut Vec<u8>,
    depth: usize,
    mode: Mode,
) -> Result<(), ProtobufError> {
    message(name, object, out, depth, "", mode)
}

/// A list: `metadata` (ListMeta, 1) and `items` (2).
pub(crate) fn list(
    item: &str,
    object: &Value,
    out: &mut Vec<u8>,
    depth: usize,
    mode: Mode,
) -> Result<(), ProtobufError> {
    let obj = object
        .as_object()
        .ok_or_else(|| invalid("", "a list must be an object"))?;
    for key in obj.keys() {
        if !mode.prune && !matches!(key.as_str(), "apiVersion" | "kind" | "metadata" | "items") {
            return Err(ProtobufError::Unencodable(key.clone()));
        }
    }
    if let Some(meta) = obj.get("metadata").filter(|m| !m.is_null()) {
        let mut buf = Vec::new();
        message(
            "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
            meta,
            &mut buf,
            depth + 1,
            "metadata",
            mode,
        )?;
        wire::put_len(out, 1, &buf);
    }
    if let Some(items) = obj.get("items").and_then(Value::as_array) {
        for (i, it) in items.iter().enumerate() {
            let mut buf = Vec::new();
            message(item, it, &mut buf, depth + 1, &format!("items[{i}]"), mode)?;
            wire::put_len(out, 2, &buf);
        }
    }
    Ok(())
}

fn invalid(path: &str, message: &str) -> ProtobufError {
    ProtobufError::InvalidValue {
        path: path.to_owned(),
        message: message.to_owned(),
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

/// One message's bytes (without its own key and length).
pub(crate) fn message(
    name: &str,
    value: &Value,
    out: &mut Vec<u8>,
    depth: usize,
    path: &str,
    mode: Mode,
) -> Result<(), ProtobufError> {
    if depth > MAX_DEPTH {
        return Err(ProtobufError::TooDeep);
    }
    if well_known::encode(name, value, out, depth, path, mode)? {
        return Ok(());
    }
    let schema = Schema::get();
    let msg = schema
        .message(name)
        .ok_or_else(|| invalid(path, &format!("no layout for message {name}")))?;
    if let Some((number, ty)) = msg.list_of {
        let items = value
            .as_array()
            .ok_or_else(|| invalid(path, "expected a list"))?;
        for item in items {
            single(out, number, ty, item, depth, path, mode)?;
        }
        return Ok(());
    }
    let obj = value
        .as_object()
        .ok_or_else(|| invalid(path, "expected an object"))?;
    let mut used = 0usize;
    fields(name, obj, out, depth, path, &mut used, mode)?;
    if used != obj.len() && !mode.prune {
        // Some key was not a field: name it. `apiVersion` and `kind` of a
        // message without such fields are the envelope's (or, inside a
        // list, repeat the list's).
        let mut known = Vec::new();
        known_names(name, &mut known);
        for key in obj.keys() {
            let type_meta = matches!(key.as_str(), "apiVersion" | "kind");
            if !known.contains(&key.as_str()) && !type_meta {
                return Err(ProtobufError::Unencodable(join(path, key)));
            }
        }
    }
    Ok(())
}

/// The JSON names of a message's fields, inline ones included.
fn known_names(name: &str, out: &mut Vec<&'static str>) {
    let Some(msg) = Schema::get().message(name) else {
        return;
    };
    for f in &msg.fields {
        match (f.shape, f.ty) {
            (Shape::Inline, Type::Message(m)) => known_names(m, out),
            _ => out.push(f.json),
        }
    }
}

/// Write the fields of `name` found in `obj`, counting the keys used.
fn fields(
    name: &str,
    obj: &serde_json::Map<String, Value>,
    out: &mut Vec<u8>,
    depth: usize,
    path: &str,
    used: &mut usize,
    mode: Mode,
) -> Result<(), ProtobufError> {
    let Some(msg) = Schema::get().message(name) else {
        return Err(invalid(path, &format!("no layout for message {name}")));
    };
    let mut ordered: Vec<&Field> = msg.fields.iter().collect();
    ordered.sort_by_key(|f| f.number);
    for f in ordered {
        if let (Shape::Inline, Type::Message(m)) = (f.shape, f.ty) {
            let mut buf = Vec::new();
            fields(m, obj, &mut buf, depth + 1, path, used, mode)?;
            wire::put_len(out, f.number, &buf);
            continue;
        }
        let Some(v) = obj.get(f.json) else {
            continue;
        };
        *used += 1;
        let child = join(path, f.json);
        match f.shape {
            _ if v.is_null() => {}
            Shape::Single { .. } | Shape::Inline => {
                single(out, f.number, f.ty, v, depth, &child, mode)?;
            }
            Shape::Repeated => {
                let items = v
                    .as_array()
                    .ok_or_else(|| invalid(&child, "expected a list"))?;
                for item in items {
                    single(out, f.number, f.ty, item, depth, &child, mode)?;
                }
            }
            Shape::Map => {
                let map = v
                    .as_object()
                    .ok_or_else(|| invalid(&child, "expected an object"))?;
                // Go writes map entries sorted by key.
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                for key in keys {
                    let mut entry = Vec::new();
                    wire::put_len(&mut entry, 1, key.as_bytes());
                    single(&mut entry, 2, f.ty, &map[key.as_str()], depth, &child, mode)?;
                    wire::put_len(out, f.number, &entry);
                }
            }
        }
    }
    Ok(())
}

/// One value with its key.
fn single(
    out: &mut Vec<u8>,
    number: u32,
    ty: Type,
    v: &Value,
    depth: usize,
    path: &str,
    mode: Mode,
) -> Result<(), ProtobufError> {
    match ty {
        Type::String => {
            let s = v
                .as_str()
                .ok_or_else(|| invalid(path, "expected a string"))?;
            wire::put_len(out, number, s.as_bytes());
        }
        Type::Bytes => {
            let s = v
                .as_str()
                .ok_or_else(|| invalid(path, "expected base64 bytes"))?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|e| invalid(path, &format!("invalid base64: {e}")))?;
            wire::put_len(out, number, &bytes);
        }
        Type::Bool => {
            let b = v
                .as_bool()
                .ok_or_else(|| invalid(path, "expected a boolean"))?;
            wire::put_varint_field(out, number, u64::from(b));
        }
        Type::Int32 => {
            let i = v
                .as_i64()
                .and_then(|i| i32::try_from(i).ok())
                .ok_or_else(|| invalid(path, "expected a 32-bit integer"))?;
            wire::put_varint_field(out, number, i64::from(i) as u64);
        }
        Type::Int64 => {
            let i = v
                .as_i64()
                .ok_or_else(|| invalid(path, "expected a 64-bit integer"))?;
            wire::put_varint_field(out, number, i as u64);
        }
        Type::Double => {
            let d = v
                .as_f64()
                .ok_or_else(|| invalid(path, "expected a number"))?;
            wire::put_key(out, number, WireType::Fixed64);
            out.extend_from_slice(&d.to_bits().to_le_bytes());
        }
        Type::Message(m) => {
            let mut buf = Vec::new();
            message(m, v, &mut buf, depth + 1, path, mode)?;
            wire::put_len(out, number, &buf);
        }
    }
    Ok(())
}
