//! POST on a collection: create an object.

use serde_json::json;

use crate::admission::crd;
use crate::error::ApiError;
use crate::meta::{self, str_at};
use crate::state::{Inner, ResourceRequest, parse_object};
use crate::storage::managed_fields;

use super::delete::reconcile_definition;
use super::object::{
    Answer, admit, check_body_namespace, check_duplicates, check_namespace, check_type,
    default_for, reset_status_on_create, to_value, tracks_generation,
};

/// POST on a collection.
pub(crate) fn create(
    inner: &Inner,
    req: &ResourceRequest,
    body: &[u8],
) -> Result<Answer, ApiError> {
    let def = &inner.defs().get(req.def);
    let mut obj = parse_object(body, def.kind)?;
    if def.review {
        return crate::auth::reviews::answer(inner, def, req, obj);
    }
    check_duplicates(req, def, body)?;
    check_type(def, &mut obj)?;
    check_body_namespace(req, &mut obj)?;
    check_namespace(inner, req)?;
    if def.custom {
        crd::check_creatable(inner, def)?;
    }
    if str_at(&obj, &["metadata", "resourceVersion"]).is_some_and(|rv| !rv.is_empty()) {
        return Err(ApiError::internal(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let name = match str_at(&obj, &["metadata", "name"]).filter(|n| !n.is_empty()) {
        Some(n) => n.to_owned(),
        None => match str_at(&obj, &["metadata", "generateName"]).filter(|g| !g.is_empty()) {
            Some(prefix) => {
                let prefix = prefix.to_owned();
                format!("{prefix}{}", inner.name_suffix())
            }
            None => String::new(),
        },
    };
    if let Some(m) = meta::meta_mut(&mut obj) {
        m.insert("name".into(), json!(name));
        m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        m.insert("creationTimestamp".into(), json!(meta::now()));
        if tracks_generation(def) {
            m.insert("generation".into(), json!(1));
        }
        for field in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            m.remove(field);
        }
    }
    reset_status_on_create(def, &mut obj);
    let causes = admit(inner, req, def, &mut obj, None)?;
    if !causes.is_empty() {
        return Err(ApiError::invalid(def, &name, causes));
    }
    default_for(inner, def, &mut obj, None)?;
    let custom = inner.defs().custom(req.def);
    let schema = custom.as_ref().and_then(|c| c.schema.as_ref());
    managed_fields::record_update(
        &mut obj,
        None,
        &managed_fields::Writer {
            manager: &req.manager(),
            operation: "Update",
            api_version: &def.api_version(),
            subresource: "",
        },
        schema,
    );
    if crd::is_crd(def) {
        crd::initial_status(&mut obj);
    }
    if req.dry_run() {
        if def.kind == "Service" {
            inner.alloc().release_service(&obj);
        }
        return Ok((201, obj));
    }
    let allocated = (def.kind == "Service").then(|| obj.clone());
    match inner.store().create(req.def, req.ns_key(), &name, obj) {
        Ok(stored) => {
            if def.kind == "Namespace" {
                ensure_default_service_account(inner, &name);
            }
            if crd::is_crd(def) {
                // Named and established at once; the answer is the
                // definition as created, before its controllers ran, as
                // kube-apiserver's is.
                reconcile_definition(inner, &name);
            }
            Ok((201, to_value(&stored)))
        }
        Err(_) => {
            // Give back what was allocated for the rejected object.
            if let Some(svc) = allocated {
                inner.alloc().release_service(&svc);
            }
            Err(ApiError::already_exists(def, &name))
        }
    }
}

/// The serviceaccount controller's `default` ServiceAccount.
pub(crate) fn ensure_default_service_account(inner: &Inner, namespace: &str) {
    let sa_idx = inner.defs().core("serviceaccounts");
    if let Some(sa_idx) = sa_idx {
        let sa = json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {
                "name": "default",
                "namespace": namespace,
                "uid": uuid::Uuid::new_v4().to_string(),
                "creationTimestamp": meta::now(),
            }
        });
        let _ = inner.store().create(sa_idx, namespace, "default", sa);
    }
}
