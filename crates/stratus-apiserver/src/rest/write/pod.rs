//! The pod subresources that write: `binding` and `eviction`.

use serde_json::{Value, json};

use crate::error::{ApiError, Cause, success_status};
use crate::meta::{self, at, is_terminating, set_at, str_at};
use crate::state::{Inner, ResourceRequest, parse_object};
use crate::storage::store::Mutation;

use super::delete::{DeleteOptions, delete_one, delete_options};
use super::object::{Answer, map_store_err};

/// POST pods/{name}/binding: assign the pod to a node.
pub(crate) fn bind(inner: &Inner, req: &ResourceRequest, body: &[u8]) -> Result<Answer, ApiError> {
    let def = &inner.defs().get(req.def);
    let name = req.name.clone().unwrap_or_default();
    let binding = parse_object(body, "Binding")?;
    let node = str_at(&binding, &["target", "name"])
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| ApiError::invalid(def, &name, vec![Cause::required("target.name", "")]))?;
    let (stored, _) = inner
        .store()
        .update(req.def, req.ns_key(), &name, |cur| {
            let current = &*cur.object;
            if is_terminating(current) {
                return Err(ApiError::conflict(def, &name, "pod is being deleted, cannot be assigned to a host"));
            }
            if let Some(existing) = str_at(current, &["spec", "nodeName"]).filter(|n| !n.is_empty()) {
                return Err(ApiError::conflict(def, &name, &format!("pod {name} is already assigned to node {existing:?}")));
            }
            let mut next = current.clone();
            set_at(&mut next, &["spec", "nodeName"], json!(node));
            let mut conditions = at(&next, &["status", "conditions"]).and_then(Value::as_array).cloned().unwrap_or_default();
            conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
            conditions.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": meta::now()}));
            set_at(&mut next, &["status", "conditions"], Value::Array(conditions));
            Ok(Mutation::Replace(next))
        })
        .map_err(|e| map_store_err(def, &name, e))?;
    Ok((201, success_status(def, &name, meta::uid(&stored.object))))
}

/// POST pods/{name}/eviction: a graceful delete.
pub(crate) fn evict(inner: &Inner, req: &ResourceRequest, body: &[u8]) -> Result<Answer, ApiError> {
    let def = &inner.defs().get(req.def);
    let name = req.name.clone().unwrap_or_default();
    let eviction = parse_object(body, "Eviction")?;
    let opts = match eviction.get("deleteOptions") {
        Some(d) => delete_options(req, &serde_json::to_vec(d).unwrap_or_default())?,
        None => DeleteOptions::default(),
    };
    let pod = inner
        .store()
        .get(req.def, req.ns_key(), &name)
        .ok_or_else(|| ApiError::not_found(def, &name))?;
    crate::rest::disruption::check(inner, &pod.object)?;
    let (stored, _) = delete_one(inner, req.def, req.ns_key(), &name, &opts)?;
    Ok((201, success_status(def, &name, meta::uid(&stored.object))))
}
