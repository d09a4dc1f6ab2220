//! JSON → protobuf message, driven by the schema table.

use base64::Engine as _;
use serde_json::Value;

use super::schema::{Message, Schema, Shape, Type};
use super::well_known;
use super::wire::{self, WireType};
use super::{MAX_DEPTH, Path, ProtobufError, invalid};

/// How strictly JSON is written.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mode {
    /// Leave out JSON fields that have no protobuf field instead of failing.
    pub(crate) prune: bool,
}

/// A list: `metadata` (ListMeta, 1) and `items` (2).
pub(crate) fn list(
    item: &str,
    object: &Value,
    out: &mut Vec<u8>,
    mode: Mode,
) -> Result<(), ProtobufError> {
    let obj = object
        .as_object()
        .ok_or_else(|| invalid(Path::ROOT, "a list must be an object"))?;
    for key in obj.keys() {
        if !mode.prune && !matches!(key.as_str(), "apiVersion" | "kind" | "metadata" | "items") {
            return Err(ProtobufError::Unencodable(key.clone()));
        }
    }
    if let Some(meta) = obj.get("metadata").filter(|m| !m.is_null()) {
        let mut buf = Vec::new();
        let path = Path::ROOT.child("metadata");
        message(LIST_META, meta, &mut buf, 1, path, mode)?;
        wire::put_len(out, 1, &buf);
    }
    if let Some(items) = obj.get("items").and_then(Value::as_array) {
        let path = Path::ROOT.child("items");
        for it in items {
            let mut buf = Vec::new();
            message(item, it, &mut buf, 1, path, mode)?;
            wire::put_len(out, 2, &buf);
        }
    }
    Ok(())
}

const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

/// JSON keys a message's fields consumed.
#[derive(Debug, Default)]
struct Used {
    keys: usize,
    /// Of which `apiVersion` or `kind` (fields of some messages, such as
    /// `OwnerReference`; elsewhere the envelope's).
    type_meta: usize,
}

/// One message's bytes (without its own key and length).
pub(crate) fn message(
    name: &str,
    value: &Value,
    out: &mut Vec<u8>,
    depth: usize,
    path: Path<'_>,
    mode: Mode,
) -> Result<(), ProtobufError> {
    if depth > MAX_DEPTH {
        return Err(ProtobufError::TooDeep);
    }
    if well_known::encode(name, value, out, depth, path, mode)? {
        return Ok(());
    }
    let msg = Schema::get()
        .message(name)
        .ok_or_else(|| invalid(path, format!("no layout for message {name}")))?;
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
    let mut used = Used::default();
    fields(msg, obj, out, depth, path, &mut used, mode)?;
    // `apiVersion` and `kind` of a message without such fields are the
    // envelope's (or, inside a list, repeat the list's): not lost.
    let type_meta_keys = ["apiVersion", "kind"]
        .iter()
        .filter(|k| obj.contains_key(**k))
        .count();
    let accounted = used.keys + type_meta_keys - used.type_meta.min(type_meta_keys);
    if accounted != obj.len() && !mode.prune {
        // Name the first key that is not a field (the slow path of errors).
        let mut known = Vec::new();
        known_names(msg, &mut known);
        if let Some(key) = obj
            .keys()
            .find(|k| !known.contains(&k.as_str()) && !matches!(k.as_str(), "apiVersion" | "kind"))
        {
            return Err(ProtobufError::Unencodable(path.child(key).render()));
        }
    }
    Ok(())
}

/// The JSON names of a message's fields, inline ones included.
fn known_names(msg: &Message, out: &mut Vec<&'static str>) {
    for f in &msg.fields {
        match (f.shape, f.ty) {
            (Shape::Inline, Type::Message(m)) => {
                if let Some(inner) = Schema::get().message(m) {
                    known_names(inner, out);
                }
            }
            _ => out.push(f.json),
        }
    }
}

/// Write the fields of `msg` found in `obj` (in field-number order, as Go
/// does), counting the keys used.
fn fields(
    msg: &Message,
    obj: &serde_json::Map<String, Value>,
    out: &mut Vec<u8>,
    depth: usize,
    path: Path<'_>,
    used: &mut Used,
    mode: Mode,
) -> Result<(), ProtobufError> {
    for f in &msg.fields {
        if let (Shape::Inline, Type::Message(m)) = (f.shape, f.ty) {
            let inner = Schema::get()
                .message(m)
                .ok_or_else(|| invalid(path, format!("no layout for message {m}")))?;
            let mut buf = Vec::new();
            fields(inner, obj, &mut buf, depth + 1, path, used, mode)?;
            wire::put_len(out, f.number, &buf);
            continue;
        }
        let Some(v) = obj.get(f.json) else {
            continue;
        };
        used.keys += 1;
        if matches!(f.json, "apiVersion" | "kind") {
            used.type_meta += 1;
        }
        let child = path.child(f.json);
        match f.shape {
            _ if v.is_null() => {}
            Shape::Single { .. } | Shape::Inline => {
                single(out, f.number, f.ty, v, depth, child, mode)?;
            }
            Shape::Repeated => {
                let items = v
                    .as_array()
                    .ok_or_else(|| invalid(child, "expected a list"))?;
                for item in items {
                    single(out, f.number, f.ty, item, depth, child, mode)?;
                }
            }
            Shape::Map => {
                let map = v
                    .as_object()
                    .ok_or_else(|| invalid(child, "expected an object"))?;
                // Go writes map entries sorted by key: serde_json's map is
                // sorted (unless a crate turns on its `preserve_order`;
                // protobuf readers take entries in any order).
                for (key, value) in map {
                    let mut entry = Vec::new();
                    wire::put_len(&mut entry, 1, key.as_bytes());
                    single(&mut entry, 2, f.ty, value, depth, child, mode)?;
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
    path: Path<'_>,
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
                .map_err(|e| invalid(path, format!("invalid base64: {e}")))?;
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
