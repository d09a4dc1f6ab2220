//! Structural schemas of custom resources (`openAPIV3Schema`): defaulting,
//! pruning of unknown fields, and validation with kube-apiserver's messages.
//!
//! Pure functions over JSON values, unit tested without a server.

use serde_json::{Map, Value};

use crate::error::Cause;

/// The fields every object keeps whatever its schema says.
const ROOT_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

fn properties(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

/// The schema of map values: `additionalProperties` as a schema (`true` means
/// any value, kept whole).
fn additional(schema: &Value) -> Option<&Value> {
    schema
        .get("additionalProperties")
        .filter(|a| a.is_object() || a.as_bool() == Some(true))
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_owned()
    } else {
        format!("{path}.{field}")
    }
}

/// Fill in `default`s of absent (or null, where not nullable) properties,
/// from the outside in, as kube-apiserver does on every write.
pub(crate) fn apply_defaults(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(props) = properties(schema) {
                for (name, prop) in props {
                    let Some(default) = prop.get("default") else {
                        continue;
                    };
                    let absent = match map.get(name) {
                        None => true,
                        Some(Value::Null) => !flag(prop, "nullable"),
                        Some(_) => false,
                    };
                    if absent {
                        map.insert(name.clone(), default.clone());
                    }
                }
                for (name, prop) in props {
                    if let Some(v) = map.get_mut(name) {
                        apply_defaults(prop, v);
                    }
                }
            } else if let Some(values) = additional(schema).filter(|a| a.is_object()) {
                for v in map.values_mut() {
                    apply_defaults(values, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    apply_defaults(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

/// Remove the fields the schema does not know (unless it preserves unknown
/// fields there), returning their paths. `root` keeps `apiVersion`, `kind`
/// and `metadata`, as does an embedded resource.
pub(crate) fn prune(schema: &Value, value: &mut Value, path: &str, root: bool) -> Vec<String> {
    let mut pruned = Vec::new();
    prune_into(schema, value, path, root, &mut pruned);
    pruned
}

fn prune_into(schema: &Value, value: &mut Value, path: &str, root: bool, out: &mut Vec<String>) {
    let keeps_meta = root || flag(schema, "x-kubernetes-embedded-resource");
    match value {
        Value::Object(map) => {
            let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
            if let Some(props) = properties(schema) {
                let unknown: Vec<String> = map
                    .keys()
                    .filter(|k| !props.contains_key(*k))
                    .filter(|k| !(keeps_meta && ROOT_FIELDS.contains(&k.as_str())))
                    .cloned()
                    .collect();
                if !preserve {
                    for k in unknown {
                        map.remove(&k);
                        out.push(join(path, &k));
                    }
                }
                for (name, prop) in props {
                    if let Some(v) = map.get_mut(name) {
                        prune_into(prop, v, &join(path, name), false, out);
                    }
                }
            } else if let Some(values) = additional(schema) {
                if values.is_object() {
                    for (k, v) in map.iter_mut() {
                        prune_into(values, v, &join(path, k), false, out);
                    }
                }
            } else if !preserve && !flag(schema, "x-kubernetes-int-or-string") {
                let unknown: Vec<String> = map
                    .keys()
                    .filter(|k| !(keeps_meta && ROOT_FIELDS.contains(&k.as_str())))
                    .cloned()
                    .collect();
                for k in unknown {
                    map.remove(&k);
                    out.push(join(path, &k));
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_into(item_schema, item, &format!("{path}[{i}]"), false, out);
                }
            }
        }
        _ => {}
    }
}

/// The JSON type name kube-apiserver reports for a value.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(want: &str, value: &Value) -> bool {
    match want {
        "number" => value.is_number(),
        other => type_name(value) == other,
    }
}

/// A value as Go's `%v`-ish rendering in kube's messages: strings quoted,
/// numbers bare.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        Value::Object(_) => "\"object\"".to_owned(),
        Value::Array(_) => "\"array\"".to_owned(),
        other => other.to_string(),
    }
}

fn invalid(path: &str, value: &Value, detail: String) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field: path.to_owned(),
        message: format!("Invalid value: {}: {detail}", shown(value)),
    }
}

/// Validate `value` at `path` against `schema`, collecting kube-apiserver's
/// causes.
pub(crate) fn validate(schema: &Value, value: &Value, path: &str, out: &mut Vec<Cause>) {
    let display = if path.is_empty() { "body" } else { path };
    if value.is_null() {
        if !flag(schema, "nullable")
            && let Some(want) = schema.get("type").and_then(Value::as_str)
        {
            out.push(Cause {
                reason: "FieldValueInvalid",
                field: path.to_owned(),
                message: format!(
                    "Invalid value: \"null\": {display} in body must be of type {want}: \"null\""
                ),
            });
        }
        return;
    }
    if flag(schema, "x-kubernetes-int-or-string") {
        if !matches!(type_name(value), "integer" | "string") {
            out.push(Cause {
                reason: "FieldValueInvalid",
                field: path.to_owned(),
                message: format!(
                    "Invalid value: \"{}\": {display} in body must be of type integer,string: \"{}\"",
                    type_name(value),
                    type_name(value)
                ),
            });
            return;
        }
    } else if let Some(want) = schema.get("type").and_then(Value::as_str)
        && !type_matches(want, value)
    {
        out.push(Cause {
            reason: "FieldValueTypeInvalid",
            field: path.to_owned(),
            message: format!(
                "Invalid value: \"{}\": {display} in body must be of type {want}: \"{}\"",
                type_name(value),
                type_name(value)
            ),
        });
        return;
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        let supported: Vec<String> = options.iter().map(shown).collect();
        out.push(Cause {
            reason: "FieldValueNotSupported",
            field: path.to_owned(),
            message: format!(
                "Unsupported value: {}: supported values: {}",
                shown(value),
                supported.join(", ")
            ),
        });
    }
    match value {
        Value::String(s) => validate_string(schema, s, value, path, display, out),
        Value::Number(n) => {
            validate_number(schema, n.as_f64().unwrap_or(0.0), value, path, display, out)
        }
        Value::Array(items) => {
            let len = items.len() as u64;
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && len > max
            {
                out.push(Cause {
                    reason: "FieldValueTooMany",
                    field: path.to_owned(),
                    message: format!("Too many: {len}: must have at most {max} items"),
                });
            }
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && len < min
            {
                out.push(invalid(
                    path,
                    &Value::from(len),
                    format!("{display} in body should have at least {min} items"),
                ));
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    validate(item_schema, item, &format!("{path}[{i}]"), out);
                }
            }
        }
        Value::Object(map) => {
            if let Some(required) = schema.get("required").and_then(Value::as_array) {
                for name in required.iter().filter_map(Value::as_str) {
                    if !map.contains_key(name) {
                        out.push(Cause::required(join(path, name), ""));
                    }
                }
            }
            let len = map.len() as u64;
            if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
                && len > max
            {
                out.push(Cause {
                    reason: "FieldValueTooMany",
                    field: path.to_owned(),
                    message: format!("Too many: {len}: must have at most {max} items"),
                });
            }
            if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
                && len < min
            {
                out.push(invalid(
                    path,
                    &Value::from(len),
                    format!("{display} in body should have at least {min} properties"),
                ));
            }
            let props = properties(schema);
            for (k, v) in map {
                if let Some(prop) = props.and_then(|p| p.get(k)) {
                    validate(prop, v, &join(path, k), out);
                } else if let Some(values) = additional(schema).filter(|a| a.is_object()) {
                    validate(values, v, &join(path, k), out);
                }
            }
        }
        _ => {}
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        for sub in all {
            validate(sub, value, path, out);
        }
    }
}

fn validate_string(
    schema: &Value,
    s: &str,
    value: &Value,
    path: &str,
    display: &str,
    out: &mut Vec<Cause>,
) {
    let chars = s.chars().count() as u64;
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && chars > max
    {
        out.push(Cause {
            reason: "FieldValueTooLong",
            field: path.to_owned(),
            message: format!("Too long: may not be more than {max} bytes"),
        });
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && chars < min
    {
        out.push(invalid(
            path,
            value,
            format!("{display} in body should be at least {min} chars long"),
        ));
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str)
        && crate::admission::formats::conforms(format, s) == Some(false)
    {
        out.push(invalid(
            path,
            value,
            format!("{display} in body must be of type {format}: {s:?}"),
        ));
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        match regex::Regex::new(pattern) {
            Ok(re) if !re.is_match(s) => out.push(invalid(
                path,
                value,
                format!("{display} in body should match '{pattern}'"),
            )),
            Ok(_) => {}
            Err(_) => out.push(invalid(
                path,
                value,
                format!("{display} in body: the schema's pattern '{pattern}' does not compile"),
            )),
        }
    }
}

fn validate_number(
    schema: &Value,
    n: f64,
    value: &Value,
    path: &str,
    display: &str,
    out: &mut Vec<Cause>,
) {
    let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
    let fmt = |b: f64| Value::from(b).to_string().trim_end_matches(".0").to_owned();
    if let Some(min) = bound("minimum") {
        if flag(schema, "exclusiveMinimum") && n <= min {
            out.push(invalid(
                path,
                value,
                format!("{display} in body should be greater than {}", fmt(min)),
            ));
        } else if n < min {
            out.push(invalid(
                path,
                value,
                format!(
                    "{display} in body should be greater than or equal to {}",
                    fmt(min)
                ),
            ));
        }
    }
    if let Some(max) = bound("maximum") {
        if flag(schema, "exclusiveMaximum") && n >= max {
            out.push(invalid(
                path,
                value,
                format!("{display} in body should be less than {}", fmt(max)),
            ));
        } else if n > max {
            out.push(invalid(
                path,
                value,
                format!(
                    "{display} in body should be less than or equal to {}",
                    fmt(max)
                ),
            ));
        }
    }
    if let Some(m) = bound("multipleOf")
        && m > 0.0
        && (n / m).fract() != 0.0
    {
        out.push(invalid(
            path,
            value,
            format!("{display} in body should be a multiple of {}", fmt(m)),
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn widget_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["size"],
                    "properties": {
                        "size": {"type": "integer", "minimum": 1, "maximum": 10},
                        "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                        "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                        "port": {"x-kubernetes-int-or-string": true},
                        "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "items": {"type": "array", "items": {
                            "type": "object",
                            "properties": {"weight": {"type": "number", "default": 1.5}}
                        }}
                    }
                },
                "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
            }
        })
    }

    fn causes(obj: &Value) -> Vec<String> {
        let mut out = Vec::new();
        validate(&widget_schema(), obj, "", &mut out);
        out.iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn defaults_fill_absent_fields_inside_present_objects() {
        let mut obj = json!({"spec": {"size": 2, "items": [{}, {"weight": 3}]}});
        apply_defaults(&widget_schema(), &mut obj);
        assert_eq!(obj["spec"]["color"], "red");
        assert_eq!(obj["spec"]["items"][0]["weight"], 1.5);
        assert_eq!(obj["spec"]["items"][1]["weight"], 3);
        // No parent object, no defaults inside it.
        let mut empty = json!({});
        apply_defaults(&widget_schema(), &mut empty);
        assert_eq!(empty, json!({}));
    }

    #[test]
    fn pruning_removes_unknown_fields_and_keeps_preserved_ones() {
        let mut obj = json!({
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"size": 1, "bogus": true, "extra": {"anything": [1]}, "labels": {"a": "b"}},
            "other": 1
        });
        let pruned = prune(&widget_schema(), &mut obj, "", true);
        assert_eq!(pruned, vec!["other".to_owned(), "spec.bogus".to_owned()]);
        assert_eq!(obj["spec"]["extra"]["anything"], json!([1]));
        assert_eq!(obj["spec"]["labels"]["a"], "b");
        assert_eq!(obj["metadata"]["name"], "w");
    }

    #[test]
    fn validation_messages_match_kube_apiserver() {
        assert_eq!(causes(&json!({"spec": {"size": 3}})), Vec::<String>::new());
        assert_eq!(
            causes(&json!({"spec": {}})),
            vec!["spec.size: Required value"]
        );
        assert_eq!(
            causes(&json!({"spec": {"size": "big"}})),
            vec![
                r#"spec.size: Invalid value: "string": spec.size in body must be of type integer: "string""#
            ]
        );
        assert_eq!(
            causes(&json!({"spec": {"size": 0}})),
            vec![
                "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"
            ]
        );
        assert_eq!(
            causes(&json!({"spec": {"size": 11}})),
            vec![
                "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10"
            ]
        );
        assert_eq!(
            causes(&json!({"spec": {"size": 1, "color": "pink"}})),
            vec![r#"spec.color: Unsupported value: "pink": supported values: "red", "blue""#]
        );
        assert_eq!(
            causes(&json!({"spec": {"size": 1, "name": "AB"}})),
            vec![r#"spec.name: Invalid value: "AB": spec.name in body should match '^[a-z]+$'"#]
        );
        assert_eq!(
            causes(&json!({"spec": {"size": 1, "name": "abcdef"}})),
            vec!["spec.name: Too long: may not be more than 5 bytes"]
        );
        assert_eq!(
            causes(&json!({"spec": {"size": 1, "tags": ["a", "b", "c"]}})),
            vec!["spec.tags: Too many: 3: must have at most 2 items"]
        );
        assert_eq!(
            causes(&json!({"spec": {"size": 1, "labels": {"a": 1}}})),
            vec![
                r#"spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer""#
            ]
        );
        assert!(causes(&json!({"spec": {"size": 1, "port": 80}})).is_empty());
        assert!(causes(&json!({"spec": {"size": 1, "port": "http"}})).is_empty());
        assert_eq!(causes(&json!({"spec": {"size": 1, "port": true}})).len(), 1);
        assert_eq!(
            causes(&json!({"spec": {"size": 1, "items": [{"weight": 2}]}})),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_bad_pattern_is_a_cause_not_a_panic() {
        let schema = json!({"type": "string", "pattern": "(["});
        let mut out = Vec::new();
        validate(&schema, &json!("x"), "spec.name", &mut out);
        assert_eq!(out.len(), 1);
    }
}
