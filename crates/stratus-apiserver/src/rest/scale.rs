//! The scale subresource (`autoscaling/v1` Scale) of Deployments,
//! ReplicaSets, StatefulSets and custom resources that declare one, as
//! `kubectl scale` and autoscalers use it.

use serde_json::{Value, json};

use crate::error::{ApiError, Cause};
use crate::meta::{self, at, set_at, str_at};
use crate::registry::ScalePaths;
use crate::resources::ResourceDef;
use crate::rest::write::Answer;
use crate::state::{Inner, ResourceRequest, parse_object};
use crate::storage::patch;
use crate::storage::store::{Mutation, StoreError};

fn paths(inner: &Inner, index: usize, def: &ResourceDef) -> Option<ScalePaths> {
    if def.custom {
        return inner.defs().custom(index).and_then(|c| c.scale.clone());
    }
    matches!(
        (def.group, def.kind),
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet")
    )
    .then(|| ScalePaths {
        spec: vec!["spec".into(), "replicas".into()],
        status: vec!["status".into(), "replicas".into()],
        selector: None,
    })
}

/// A label selector in its string form (`app=web,tier in (a,b)`).
fn selector_string(selector: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in labels {
            parts.push(format!("{k}={}", v.as_str().unwrap_or_default()));
        }
    }
    for expr in selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = str_at(expr, &["key"]).unwrap_or_default();
        let values: Vec<&str> = expr
            .get("values")
            .and_then(Value::as_array)
            .map(|v| v.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        parts.push(match str_at(expr, &["operator"]).unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_owned(),
            _ => format!("!{key}"),
        });
    }
    parts.join(",")
}

fn at_path<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    at(obj, &path)
}

/// The Scale of an object.
fn scale_of(obj: &Value, paths: &ScalePaths) -> Value {
    let selector = match &paths.selector {
        Some(p) => at_path(obj, p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        None => at(obj, &["spec", "selector"])
            .map(selector_string)
            .unwrap_or_default(),
    };
    let mut metadata = json!({});
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta::meta(obj).and_then(|m| m.get(field)) {
            metadata[field] = v.clone();
        }
    }
    let mut status = json!({
        "replicas": at_path(obj, &paths.status).and_then(Value::as_i64).unwrap_or(0),
    });
    if !selector.is_empty() {
        status["selector"] = json!(selector);
    }
    json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": metadata,
        "spec": {"replicas": at_path(obj, &paths.spec).and_then(Value::as_i64).unwrap_or(0)},
        "status": status,
    })
}

fn no_scale(def: &ResourceDef) -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        format!(
            "the server could not find the requested resource ({}/scale)",
            def.plural
        ),
    )
}

/// GET `.../{name}/scale`.
pub(crate) fn get(inner: &Inner, req: &ResourceRequest) -> Result<Answer, ApiError> {
    let def = &inner.defs().get(req.def);
    let paths = paths(inner, req.def, def).ok_or_else(|| no_scale(def))?;
    let name = req.name.clone().unwrap_or_default();
    let stored = inner
        .store()
        .get(req.def, req.ns_key(), &name)
        .ok_or_else(|| ApiError::not_found(def, &name))?;
    Ok((200, scale_of(&stored.object, &paths)))
}

/// The Scale `desired` written back into its object.
fn write(
    inner: &Inner,
    req: &ResourceRequest,
    desire: impl Fn(&Value) -> Result<Value, ApiError>,
) -> Result<Answer, ApiError> {
    let def = &inner.defs().get(req.def);
    let paths = paths(inner, req.def, def).ok_or_else(|| no_scale(def))?;
    let name = req.name.clone().unwrap_or_default();
    let update = |current: &Value| -> Result<Mutation, ApiError> {
        let desired = desire(&scale_of(current, &paths))?;
        let wanted_rv = str_at(&desired, &["metadata", "resourceVersion"]).unwrap_or_default();
        if !wanted_rv.is_empty()
            && Some(wanted_rv) != str_at(current, &["metadata", "resourceVersion"])
        {
            return Err(ApiError::stale(def, &name));
        }
        let replicas = at(&desired, &["spec", "replicas"])
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if replicas < 0 {
            return Err(ApiError::invalid(
                def,
                &name,
                vec![Cause::invalid_number(
                    "spec.replicas",
                    replicas,
                    "must be greater than or equal to 0",
                )],
            ));
        }
        if at_path(current, &paths.spec).and_then(Value::as_i64) == Some(replicas) {
            return Ok(Mutation::Unchanged);
        }
        let mut next = current.clone();
        let path: Vec<&str> = paths.spec.iter().map(String::as_str).collect();
        set_at(&mut next, &path, json!(replicas));
        crate::rest::write::bump_generation(current, &mut next);
        Ok(Mutation::Replace(next))
    };
    if req.dry_run() {
        let current = inner
            .store()
            .get(req.def, req.ns_key(), &name)
            .ok_or_else(|| ApiError::not_found(def, &name))?;
        let next = match update(&current.object)? {
            Mutation::Replace(v) => v,
            _ => (*current.object).clone(),
        };
        return Ok((200, scale_of(&next, &paths)));
    }
    let (stored, _) = inner
        .store()
        .update(req.def, req.ns_key(), &name, |cur| update(&cur.object))
        .map_err(|e| match e {
            StoreError::NotFound => ApiError::not_found(def, &name),
            StoreError::AlreadyExists => ApiError::already_exists(def, &name),
            StoreError::Rejected(e) => e,
        })?;
    Ok((200, scale_of(&stored.object, &paths)))
}

/// PUT `.../{name}/scale`.
pub(crate) fn update(
    inner: &Inner,
    req: &ResourceRequest,
    body: &[u8],
) -> Result<Answer, ApiError> {
    let scale = parse_object(body, "Scale")?;
    write(inner, req, |_| Ok(scale.clone()))
}

/// PATCH `.../{name}/scale` (a Scale has no lists: strategic merge is a
/// merge patch).
pub(crate) fn patch(
    inner: &Inner,
    req: &ResourceRequest,
    content_type: &str,
    body: &[u8],
) -> Result<Answer, ApiError> {
    let doc: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("the body of the request was not valid JSON: {e}"))
    })?;
    let media = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned();
    write(inner, req, |current| {
        let mut target = current.clone();
        match media.as_str() {
            "application/json-patch+json" => patch::json_patch(&mut target, &doc)
                .map_err(|e| ApiError::new(422, "Invalid", e.to_string()))?,
            "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                patch::merge_patch(&mut target, &doc).map_err(ApiError::bad_request)?
            }
            other => {
                return Err(ApiError::new(
                    415,
                    "UnsupportedMediaType",
                    format!(
                        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {other:?})"
                    ),
                ));
            }
        }
        Ok(target)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::split_path;

    #[test]
    fn selectors_render_as_strings() {
        let s = json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "canary", "operator": "DoesNotExist"}
            ]
        });
        assert_eq!(selector_string(&s), "app=web,tier in (a,b),!canary");
    }

    #[test]
    fn a_scale_shows_the_paths() {
        let paths = ScalePaths {
            spec: split_path(".spec.size"),
            status: split_path(".status.count"),
            selector: Some(split_path(".status.selector")),
        };
        let obj = json!({
            "metadata": {"name": "w", "resourceVersion": "7"},
            "spec": {"size": 3},
            "status": {"count": 2, "selector": "app=w"}
        });
        let scale = scale_of(&obj, &paths);
        assert_eq!(scale["spec"]["replicas"], 3);
        assert_eq!(scale["status"], json!({"replicas": 2, "selector": "app=w"}));
        assert_eq!(scale["metadata"]["resourceVersion"], "7");
    }
}
