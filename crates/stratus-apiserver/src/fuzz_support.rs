//! The harness's parsers of what clients send, callable on their own:
//! the entry points of `cargo xtask fuzz` (label and field selectors, JSON
//! patches, JSON merge patches and strategic merge patches). Each answers
//! as the server would: a value or the message of its 400/422, never a
//! panic.
//!
//! ```
//! use stratus_apiserver::fuzz_support::{json_patch, label_selector};
//! use serde_json::json;
//!
//! assert_eq!(label_selector("app in (web,db),!canary", &json!({"app": "web"})), Ok(true));
//! assert!(label_selector("app in (", &json!({})).is_err());
//! let mut pod = json!({"metadata": {"labels": {}}});
//! json_patch(&mut pod, &json!([{"op": "add", "path": "/metadata/labels/a", "value": "b"}])).unwrap();
//! assert_eq!(pod["metadata"]["labels"]["a"], "b");
//! ```

use std::collections::BTreeMap;

use serde_json::Value;

use crate::selectors::{FieldSelector, LabelSelector};
use crate::storage::patch;

/// Parse label selector `input` and match it against the labels object
/// `labels`.
pub fn label_selector(input: &str, labels: &Value) -> Result<bool, String> {
    let selector = LabelSelector::parse(input)?;
    Ok(selector.matches(labels.as_object()))
}

/// Parse field selector `input` and match it against `fields` (field path
/// → value, as the server reads `metadata.name`, `spec.nodeName`, ...; a
/// field absent from it is empty).
pub fn field_selector(
    input: &str,
    fields: &BTreeMap<&'static str, String>,
) -> Result<bool, String> {
    let selector = FieldSelector::parse(input)?;
    Ok(selector
        .matches(|field| std::borrow::Cow::Borrowed(fields.get(field).map_or("", String::as_str))))
}

/// Apply RFC 6902 JSON patch `patch` to `target`.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), String> {
    patch::json_patch(target, patch).map_err(|e| e.to_string())
}

/// Apply RFC 7386 JSON merge patch `patch` to `target`.
pub fn merge_patch(target: &mut Value, patch: &Value) -> Result<(), String> {
    patch::merge_patch(target, patch)
}

/// Apply strategic merge patch `patch` to `target`, an object of `kind`
/// (its list merge keys and strategies).
pub fn strategic_merge(kind: &str, target: &mut Value, patch: &Value) -> Result<(), String> {
    patch::strategic_merge(kind, target, patch)
}
