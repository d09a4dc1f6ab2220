//! PUT and PATCH on an object (or its status and other subresources).

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::meta::{set_at, str_at};
use crate::resources::ResourceDef;
use crate::rest::apply;
use crate::state::{Inner, ResourceRequest, parse_object};
use crate::storage::patch;
use crate::storage::store::{Mutation, StoreError};

use super::create::create;
use super::delete::committed;
use super::object::{
    Answer, check_body_namespace, check_duplicates, map_store_err, next_state, to_value,
};

/// PUT on an object (or its status / approval / finalize subresource).
pub(crate) fn update(
    inner: &Inner,
    req: &ResourceRequest,
    body: &[u8],
) -> Result<Answer, ApiError> {
    let def = &inner.defs().get(req.def);
    let name = req.name.clone().unwrap_or_default();
    let mut desired = parse_object(body, def.kind)?;
    check_duplicates(req, def, body)?;
    check_body_namespace(req, &mut desired)?;
    if req.dry_run() {
        let current = inner
            .store()
            .get(req.def, req.ns_key(), &name)
            .ok_or_else(|| ApiError::not_found(def, &name))?;
        return match next_state(inner, def, req, &current.object, desired, Some("Update"))? {
            Mutation::Replace(v) | Mutation::Delete(v) => Ok((200, v)),
            Mutation::Unchanged => Ok((200, to_value(&current))),
        };
    }
    let result = inner.store().update(req.def, req.ns_key(), &name, |cur| {
        next_state(
            inner,
            def,
            req,
            &cur.object,
            desired.clone(),
            Some("Update"),
        )
    });
    let (stored, deleted) = match result {
        // The kinds whose strategy allows it are created by an update
        // (kube's `AllowCreateOnUpdate`): Services, Endpoints, Events,
        // Leases, LimitRanges, RBAC.
        Err(StoreError::NotFound) if req.sub.is_none() && creates_on_update(def) => {
            if let Some(meta) = desired.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("resourceVersion");
            }
            let body =
                serde_json::to_vec(&desired).map_err(|e| ApiError::bad_request(e.to_string()))?;
            return create(inner, req, &body);
        }
        other => other.map_err(|e| map_store_err(def, &name, e))?,
    };
    Ok(committed(inner, def, stored, deleted))
}

/// Whether an update of a missing object of `def` creates it.
fn creates_on_update(def: &ResourceDef) -> bool {
    matches!(
        (def.group, def.plural),
        ("", "services" | "endpoints" | "events" | "limitranges")
            | ("events.k8s.io", "events")
            | ("coordination.k8s.io", "leases")
            | ("discovery.k8s.io", "endpointslices")
            | (
                "rbac.authorization.k8s.io",
                "roles" | "clusterroles" | "rolebindings" | "clusterrolebindings"
            )
    )
}

/// PATCH on an object (or its status subresource).
pub(crate) fn patch(
    inner: &Inner,
    req: &ResourceRequest,
    content_type: &str,
    body: &[u8],
) -> Result<Answer, ApiError> {
    let def = &inner.defs().get(req.def);
    let name = req.name.clone().unwrap_or_default();
    let media = content_type.split(';').next().unwrap_or_default().trim();
    let patch_doc: Value = serde_json::from_slice(body).map_err(|e| {
        if media == "application/merge-patch+json" {
            // kube-apiserver's words for a merge patch that is not JSON.
            ApiError::bad_request("invalid JSON patch")
        } else {
            ApiError::bad_request(format!("the body of the request was not valid JSON: {e}"))
        }
    })?;
    if media == "application/apply-patch+yaml" {
        return apply::server_side_apply(inner, req, patch_doc);
    }
    let apply_patch = |current: &Value| -> Result<Value, ApiError> {
        let mut target = current.clone();
        match media {
            "application/json-patch+json" => {
                patch::json_patch(&mut target, &patch_doc).map_err(|e| {
                    if let patch::JsonPatchError::Decode(message) = e {
                        return ApiError::bad_request(message);
                    }
                    // kube-apiserver answers a failed operation without
                    // saying which (empty details); the harness logs it.
                    tracing::debug!(error = %e, "JSON patch failed");
                    let mut err = ApiError::new(
                        422,
                        "Invalid",
                        "the server rejected our request due to an error in our request",
                    );
                    err.details = Some(json!({}));
                    err
                })?
            }
            "application/merge-patch+json" => {
                patch::merge_patch(&mut target, &patch_doc).map_err(ApiError::bad_request)?
            }
            "application/strategic-merge-patch+json" if def.custom => {
                return Err(ApiError::new(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
                ));
            }
            "application/strategic-merge-patch+json" => {
                patch::strategic_merge(def.kind, &mut target, &patch_doc)
                    .map_err(ApiError::bad_request)?
            }
            other => {
                return Err(ApiError::new(
                    415,
                    "UnsupportedMediaType",
                    format!(
                        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {other:?})"
                    ),
                ));
            }
        }
        // A patch that does not name a resourceVersion applies to the current one.
        if str_at(&target, &["metadata", "resourceVersion"]).is_none() {
            let rv = str_at(current, &["metadata", "resourceVersion"])
                .unwrap_or_default()
                .to_owned();
            set_at(&mut target, &["metadata", "resourceVersion"], json!(rv));
        }
        Ok(target)
    };
    if req.dry_run() {
        let current = inner
            .store()
            .get(req.def, req.ns_key(), &name)
            .ok_or_else(|| ApiError::not_found(def, &name))?;
        let desired = apply_patch(&current.object)?;
        return match next_state(inner, def, req, &current.object, desired, Some("Update"))? {
            Mutation::Replace(v) | Mutation::Delete(v) => Ok((200, v)),
            Mutation::Unchanged => Ok((200, to_value(&current))),
        };
    }
    let (stored, deleted) = inner
        .store()
        .update(req.def, req.ns_key(), &name, |cur| {
            let desired = apply_patch(&cur.object)?;
            next_state(inner, def, req, &cur.object, desired, Some("Update"))
        })
        .map_err(|e| map_store_err(def, &name, e))?;
    Ok(committed(inner, def, stored, deleted))
}
