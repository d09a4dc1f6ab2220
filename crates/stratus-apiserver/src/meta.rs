//! Reading and writing `metadata` on JSON objects, and timestamps.

use serde_json::{Map, Value, json};

/// The current time as Kubernetes writes it (RFC 3339, seconds).
pub(crate) fn now() -> String {
    let ts = k8s_openapi::jiff::Timestamp::now();
    ts.round(k8s_openapi::jiff::Unit::Second)
        .unwrap_or(ts)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Parse an RFC 3339 timestamp.
pub(crate) fn parse_time(s: &str) -> Option<k8s_openapi::jiff::Timestamp> {
    s.parse().ok()
}

/// `now + secs` in RFC 3339, seconds.
pub(crate) fn now_plus(secs: i64) -> String {
    let ts = k8s_openapi::jiff::Timestamp::now()
        .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(secs))
        .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now());
    ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub(crate) fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

/// The `metadata` map of an object, created if missing. `None` only if
/// `obj` is not a JSON object (the handlers reject those first).
pub(crate) fn meta_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let entry = obj
        .as_object_mut()?
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut()
}

pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj)?.get(field)?.as_str()
}

pub(crate) fn name(obj: &Value) -> &str {
    meta_str(obj, "name").unwrap_or_default()
}

pub(crate) fn uid(obj: &Value) -> &str {
    meta_str(obj, "uid").unwrap_or_default()
}

pub(crate) fn labels(obj: &Value) -> Option<&Map<String, Value>> {
    meta(obj)?.get("labels")?.as_object()
}

pub(crate) fn finalizers(obj: &Value) -> Vec<String> {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|f| {
            f.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn is_terminating(obj: &Value) -> bool {
    meta(obj).is_some_and(|m| m.get("deletionTimestamp").is_some_and(|v| !v.is_null()))
}

pub(crate) fn at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |v, k| v.get(*k))
}

pub(crate) fn str_at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(obj, path)?.as_str()
}

/// Set `path` to `value`, creating objects on the way (and replacing
/// non-objects in the way).
pub(crate) fn set_at(obj: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for key in parents {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        cur = match cur {
            Value::Object(m) => m.entry(*key).or_insert_with(|| Value::Object(Map::new())),
            _ => return,
        };
    }
    if !cur.is_object() {
        *cur = Value::Object(Map::new());
    }
    if let Value::Object(m) = cur {
        m.insert((*last).to_owned(), value);
    }
}

/// Set `path` only when it is absent or null.
pub(crate) fn default_at(obj: &mut Value, path: &[&str], value: Value) {
    if at(obj, path).is_none_or(Value::is_null) {
        set_at(obj, path, value);
    }
}

/// The strings of a JSON array (other items and a missing array: none).
pub(crate) fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Remove empty `labels`, `annotations`, `finalizers` and
/// `ownerReferences` from an object's metadata: kube-apiserver decodes
/// metadata into ObjectMeta, whose empty maps and lists are not written
/// back (a patch removing the last annotation leaves no `annotations: {}`).
pub(crate) fn drop_empty(obj: &mut Value) {
    if let Some(m) = meta_mut(obj) {
        m.retain(|k, v| {
            let listed = matches!(
                k.as_str(),
                "labels" | "annotations" | "finalizers" | "ownerReferences"
            );
            let empty = match v {
                Value::Object(o) => o.is_empty(),
                Value::Array(a) => a.is_empty(),
                Value::Null => true,
                _ => false,
            };
            !(listed && empty)
        });
    }
}

/// The metadata-only form of an object.
pub(crate) fn partial(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_metadata_collections_are_dropped() {
        let mut obj = json!({"metadata": {"name": "a", "labels": {}, "annotations": {"k": "v"},
            "finalizers": [], "ownerReferences": null, "generateName": ""}});
        drop_empty(&mut obj);
        assert_eq!(
            obj,
            json!({"metadata": {"name": "a", "annotations": {"k": "v"}, "generateName": ""}})
        );
    }
}
