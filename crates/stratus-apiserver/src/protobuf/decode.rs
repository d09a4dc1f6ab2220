//! Protobuf message → JSON, driven by the schema table.

use base64::Engine as _;
use serde_json::{Map, Number, Value};

use super::schema::{Schema, Shape, Type};
use super::well_known;
use super::wire::{Payload, Reader};
use super::{MAX_DEPTH, Object, Path, ProtobufError, invalid};

/// A top-level object's fields.
pub(crate) fn object(name: &str, bytes: &[u8], depth: usize) -> Result<Object, ProtobufError> {
    match message(name, bytes, depth, Path::ROOT)? {
        Value::Object(map) => Ok(map),
        _ => Err(ProtobufError::InvalidValue {
            path: name.to_owned(),
            message: "not an object type".into(),
        }),
    }
}

/// A list: `metadata` (ListMeta, 1) and `items` (2).
pub(crate) fn list(item: &str, bytes: &[u8], depth: usize) -> Result<Object, ProtobufError> {
    let mut out = Map::new();
    let mut items = Vec::new();
    let mut reader = Reader::new(bytes);
    while let Some((number, payload)) = reader.field()? {
        match (number, payload) {
            (1, Payload::Len(b)) => {
                let meta = message(
                    "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
                    b,
                    depth + 1,
                    Path::ROOT.child("metadata"),
                )?;
                out.insert("metadata".into(), meta);
            }
            (2, Payload::Len(b)) => {
                items.push(message(item, b, depth + 1, Path::ROOT.child("items"))?);
            }
            (1, _) => return Err(wrong(Path::ROOT.child("metadata"), "message")),
            (2, _) => return Err(wrong(Path::ROOT.child("items"), "message")),
            _ => {}
        }
    }
    out.insert("items".into(), Value::Array(items));
    Ok(out)
}

/// One message as JSON: an object, or for the well-known types their JSON
/// form (`Value::Null` for a zero time, which JSON leaves out).
pub(crate) fn message(
    name: &str,
    bytes: &[u8],
    depth: usize,
    path: Path<'_>,
) -> Result<Value, ProtobufError> {
    if depth > MAX_DEPTH {
        return Err(ProtobufError::TooDeep);
    }
    if let Some(value) = well_known::decode(name, bytes, depth, path)? {
        return Ok(value);
    }
    let schema = Schema::get();
    let msg = schema
        .message(name)
        .ok_or_else(|| invalid(path, format!("no layout for message {name}")))?;
    if let Some((number, ty)) = msg.list_of {
        let mut items = Vec::new();
        let mut reader = Reader::new(bytes);
        while let Some((n, payload)) = reader.field()? {
            if n == number {
                repeated(ty, payload, depth, path, &mut items)?;
            }
        }
        return Ok(Value::Array(items));
    }
    let mut out = Map::new();
    let mut reader = Reader::new(bytes);
    while let Some((number, payload)) = reader.field()? {
        // Fields this table does not know (newer than it) are skipped, as
        // Go's generated code skips unknown fields.
        let Some(field) = msg.by_number(number) else {
            continue;
        };
        let child = path.child(field.json);
        match field.shape {
            Shape::Single { required } => {
                let v = scalar_or_message(field.ty, payload, depth, child)?;
                let empty_string = v.as_str().is_some_and(str::is_empty);
                if !v.is_null() && (required || !empty_string) {
                    out.insert(field.json.to_owned(), v);
                }
            }
            Shape::Repeated => {
                let entry = out
                    .entry(field.json.to_owned())
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(items) = entry {
                    repeated(field.ty, payload, depth, child, items)?;
                }
            }
            Shape::Map => {
                let Payload::Len(entry) = payload else {
                    return Err(wrong(child, "map entry"));
                };
                let (key, value) = map_entry(field.ty, entry, depth, child)?;
                let map = out
                    .entry(field.json.to_owned())
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(map) = map {
                    map.insert(key, value);
                }
            }
            Shape::Inline => {
                let (Type::Message(m), Payload::Len(b)) = (field.ty, payload) else {
                    return Err(wrong(child, "embedded message"));
                };
                if let Value::Object(inner) = message(m, b, depth + 1, path)? {
                    out.extend(inner);
                }
            }
        }
    }
    Ok(Value::Object(out))
}

fn wrong(path: Path<'_>, expected: &'static str) -> ProtobufError {
    ProtobufError::WrongWireType {
        path: path.render(),
        expected,
    }
}

/// Append a repeated field's values: one per occurrence, or several from a
/// packed run of numbers.
fn repeated(
    ty: Type,
    payload: Payload<'_>,
    depth: usize,
    path: Path<'_>,
    items: &mut Vec<Value>,
) -> Result<(), ProtobufError> {
    let packable = matches!(ty, Type::Bool | Type::Int32 | Type::Int64 | Type::Double);
    if let (true, Payload::Len(run)) = (packable, payload) {
        let mut reader = Reader::new(run);
        while !reader.at_end() {
            let p = if ty == Type::Double {
                Payload::Fixed64(reader.fixed64()?)
            } else {
                Payload::Varint(reader.varint()?)
            };
            items.push(scalar_or_message(ty, p, depth, path)?);
        }
        return Ok(());
    }
    items.push(scalar_or_message(ty, payload, depth, path)?);
    Ok(())
}

fn map_entry(
    ty: Type,
    entry: &[u8],
    depth: usize,
    path: Path<'_>,
) -> Result<(String, Value), ProtobufError> {
    let mut key = String::new();
    let mut value = None;
    let mut reader = Reader::new(entry);
    while let Some((n, p)) = reader.field()? {
        match (n, p) {
            (1, Payload::Len(b)) => {
                key = String::from_utf8(b.to_vec())
                    .map_err(|_| ProtobufError::InvalidUtf8(path.render()))?;
            }
            (2, p) => value = Some(scalar_or_message(ty, p, depth, path)?),
            _ => {}
        }
    }
    let value = match value {
        Some(v) => v,
        // An absent value is the type's zero.
        None => match ty {
            Type::String | Type::Bytes => Value::String(String::new()),
            Type::Message(m) => message(m, &[], depth + 1, path)?,
            Type::Bool => Value::Bool(false),
            Type::Int32 | Type::Int64 => Value::Number(0.into()),
            Type::Double => Value::Number(0.into()),
        },
    };
    Ok((key, value))
}

fn scalar_or_message(
    ty: Type,
    payload: Payload<'_>,
    depth: usize,
    path: Path<'_>,
) -> Result<Value, ProtobufError> {
    Ok(match (ty, payload) {
        (Type::String, Payload::Len(b)) => Value::String(
            String::from_utf8(b.to_vec()).map_err(|_| ProtobufError::InvalidUtf8(path.render()))?,
        ),
        (Type::Bytes, Payload::Len(b)) => {
            Value::String(base64::engine::general_purpose::STANDARD.encode(b))
        }
        (Type::Message(m), Payload::Len(b)) => message(m, b, depth + 1, path)?,
        (Type::Bool, Payload::Varint(v)) => Value::Bool(v != 0),
        // int32 values are sign-extended to 64 bits on the wire.
        (Type::Int32, Payload::Varint(v)) => Value::Number(i64::from(v as i64 as i32).into()),
        (Type::Int64, Payload::Varint(v)) => Value::Number((v as i64).into()),
        (Type::Double, Payload::Fixed64(bits)) => Number::from_f64(f64::from_bits(bits))
            .map(Value::Number)
            .ok_or_else(|| invalid(path, "a number that is not finite"))?,
        (ty, _) => {
            let expected = match ty {
                Type::String => "string",
                Type::Bytes => "bytes",
                Type::Message(_) => "message",
                Type::Bool => "bool",
                Type::Int32 => "int32",
                Type::Int64 => "int64",
                Type::Double => "double",
            };
            return Err(wrong(path, expected));
        }
    })
}
