//! Writes: create, update, patch, delete, and the write subresources.

use serde_json::{Map, Value, json};

use crate::admission::crd;
use crate::admission::defaults;
use crate::admission::field_validation::{self, Directive};
use crate::admission::validation;
use crate::error::{ApiError, Cause, success_status};
use crate::meta::{self, at, is_terminating, set_at, str_at};
use crate::openapi::builtin_schemas;
use crate::resources::{ResourceDef, idx};
use crate::state::{Inner, ResourceRequest, parse_object};
use crate::storage::apply;
use crate::storage::event::Stored;
use crate::storage::patch;
use crate::storage::store::{Mutation, StoreError};

/// The namespaces that always exist and cannot be deleted.
pub(crate) const SYSTEM_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// A write's answer: status code and body.
pub(crate) type Answer = (u16, Value);

fn to_value(stored: &Stored) -> Value {
    (*stored.object).clone()
}

fn map_store_err(def: &ResourceDef, name: &str, e: StoreError<ApiError>) -> ApiError {
    match e {
        StoreError::NotFound => ApiError::not_found(def, name),
        StoreError::AlreadyExists => ApiError::already_exists(def, name),
        StoreError::Rejected(e) => e,
    }
}

/// Check `kind` / `apiVersion` of a body against the resource, filling them
/// in when absent.
fn check_type(def: &ResourceDef, obj: &mut Value) -> Result<(), ApiError> {
    let want_version = def.api_version();
    match str_at(obj, &["apiVersion"]) {
        Some(v) if v != want_version => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({want_version})"
            )));
        }
        _ => {}
    }
    match str_at(obj, &["kind"]) {
        Some(k) if k != def.kind => {
            // kube-apiserver's decoder: the kind is looked up in its scheme.
            let group_version = str_at(obj, &["apiVersion"]).unwrap_or(&want_version);
            let version = group_version.rsplit('/').next().unwrap_or(group_version);
            return Err(ApiError::bad_request(format!(
                "{k} in version {version:?} cannot be handled as a {}: no kind {k:?} is registered for version {group_version:?} in scheme \"pkg/runtime/scheme.go:111\"",
                def.kind
            )));
        }
        _ => {}
    }
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), json!(want_version));
        m.insert("kind".into(), json!(def.kind));
    }
    Ok(())
}

/// The namespace a request writes into must exist and not be terminating.
fn check_namespace(inner: &Inner, req: &ResourceRequest) -> Result<(), ApiError> {
    let Some(ns) = req.namespace.as_deref() else {
        return Ok(());
    };
    match inner.store().get(idx::NAMESPACES, "", ns) {
        None => Err(ApiError::namespace_not_found(ns)),
        Some(n) if is_terminating(&n.object) => Err(ApiError::new(
            403,
            "Forbidden",
            format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            ),
        )),
        Some(_) => Ok(()),
    }
}

fn check_body_namespace(req: &ResourceRequest, obj: &mut Value) -> Result<(), ApiError> {
    let def_namespaced = req.namespace.is_some();
    let body_ns = str_at(obj, &["metadata", "namespace"]).map(str::to_owned);
    if def_namespaced {
        if let Some(b) = body_ns.filter(|b| !b.is_empty())
            && Some(b.as_str()) != req.namespace.as_deref()
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        if let Some(m) = meta::meta_mut(obj) {
            m.insert("namespace".into(), json!(req.namespace));
        }
    } else if let Some(m) = meta::meta_mut(obj) {
        m.remove("namespace");
    }
    Ok(())
}

/// Everything outside `metadata` and `status`.
fn spec_part(obj: &Value) -> Map<String, Value> {
    obj.as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| {
                    !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind")
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Reset status on create, as each resource's strategy does.
fn reset_status_on_create(def: &ResourceDef, obj: &mut Value) {
    if def.has_status
        && def.kind != "Node"
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
}

/// Kind-specific defaulting and allocation on create (`old` on update).
fn default_for(
    inner: &Inner,
    def: &ResourceDef,
    obj: &mut Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    match (def.group, def.kind) {
        ("", "Pod") if old.is_none() => defaults::pod(obj),
        ("", "Namespace") if old.is_none() => defaults::namespace(obj),
        ("", "Secret") => defaults::secret(obj),
        ("", "Service") => defaults::service(obj, old, inner.alloc())
            .map_err(|causes| ApiError::invalid(def, meta::name(obj), causes))?,
        ("scheduling.k8s.io", "PriorityClass") => {
            meta::default_at(obj, &["preemptionPolicy"], json!("PreemptLowerPriority"));
        }
        ("storage.k8s.io", "StorageClass") => {
            meta::default_at(obj, &["reclaimPolicy"], json!("Delete"));
            meta::default_at(obj, &["volumeBindingMode"], json!("Immediate"));
        }
        ("certificates.k8s.io", "CertificateSigningRequest") if old.is_none() => {
            meta::default_at(obj, &["status"], json!({}));
        }
        _ => {}
    }
    Ok(())
}

/// Report duplicated fields of a JSON body as `fieldValidation` says.
fn check_duplicates(req: &ResourceRequest, def: &ResourceDef, body: &[u8]) -> Result<(), ApiError> {
    let duplicated = crate::admission::duplicates::duplicate_fields(body);
    if !duplicated.is_empty() {
        let directive = Directive::of(&req.query)?;
        req.warnings.extend(field_validation::judge_duplicates(
            directive,
            def,
            &duplicated,
        )?);
    }
    Ok(())
}

/// A delete or update whose UID precondition names another object, in
/// kube-apiserver's words (a CRD's go through its own store, as there).
fn uid_precondition_failed(def: &ResourceDef, name: &str, wanted: &str, actual: &str) -> ApiError {
    if crd::is_crd(def) {
        return ApiError::conflict(
            def,
            name,
            &format!(
                "precondition failed: UID in precondition: {wanted}, UID in object meta: {actual}"
            ),
        );
    }
    let mut err = ApiError::new(
        409,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on {} {name:?}: the UID in the precondition ({wanted}) does not match the UID in record ({actual}). The object might have been deleted and then recreated",
            // The kind qualified by its group, as the Go type's scheme
            // names it.
            if def.group.is_empty() {
                def.kind.to_owned()
            } else {
                format!("{}.{}", def.kind, def.group)
            }
        ),
    );
    err.details = Some(json!({"name": name, "group": def.group, "kind": def.kind}));
    err
}

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
    apply::record_update(
        &mut obj,
        None,
        &apply::Writer {
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
                crd::reconcile(inner, &name);
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

/// The validation causes of an object about to be stored (`old`: its
/// current state on update): the resource's own rules, a definition's rules
/// for CustomResourceDefinitions, and the schema of a custom resource (which
/// also defaults and prunes the object). Unknown fields are dropped, and
/// warned about or refused as `fieldValidation` says.
fn admit(
    inner: &Inner,
    req: &ResourceRequest,
    def: &ResourceDef,
    obj: &mut Value,
    old: Option<&Value>,
) -> Result<Vec<Cause>, ApiError> {
    let mut causes = Vec::new();
    meta::drop_empty(obj);
    let directive = Directive::of(&req.query)?;
    if def.custom {
        let (found, warnings) = crd::admit(inner, req.def, obj, directive)?;
        causes.extend(found);
        req.warnings.extend(warnings);
    } else {
        let schemas = builtin_schemas::get();
        if let Some(root) = schemas.root(def.group, def.version, def.kind) {
            let unknown = field_validation::prune_builtin(schemas, root, obj);
            req.warnings
                .extend(field_validation::judge(directive, def, &unknown)?);
        }
    }
    // A definition's own rules come after its metadata's, as
    // kube-apiserver lists them.
    let mut definition_causes = Vec::new();
    if crd::is_crd(def) {
        crd::default_definition(obj);
        definition_causes.extend(crd::validate_definition(obj));
        if let Some(old) = old {
            definition_causes.extend(crd::immutable(old, obj));
        }
    }
    if inner.settings().rbac
        && let Some(user) = &req.user
    {
        crate::auth::escalation::check_escalation(inner, user, def, req.ns_key(), obj)?;
    }
    crate::admission::workloads::default(def, obj);
    causes.extend(crate::admission::workloads::validate(def, obj));
    causes.extend(crate::admission::validation_groups::validate(def, obj));
    causes.extend(validation::validate(def, obj));
    causes.extend(definition_causes);
    match old {
        Some(old) => causes.extend(validation::immutable(def, req.sub.as_deref(), old, obj)),
        None => causes.extend(validation::on_create(def, obj)),
    }
    Ok(causes)
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

/// Build the next state of an object from a desired body, enforcing the
/// update rules; returns the mutation to store.
fn next_state(
    inner: &Inner,
    def: &ResourceDef,
    req: &ResourceRequest,
    current: &Value,
    mut desired: Value,
    operation: Option<&str>,
) -> Result<Mutation, ApiError> {
    let name = meta::name(current).to_owned();
    // Optimistic concurrency.
    let wanted_rv = str_at(&desired, &["metadata", "resourceVersion"])
        .unwrap_or_default()
        .to_owned();
    let current_rv = str_at(current, &["metadata", "resourceVersion"]).unwrap_or_default();
    if !wanted_rv.is_empty() && wanted_rv != current_rv {
        return Err(ApiError::stale(def, &name));
    }
    check_type(def, &mut desired)?;
    let sub = req.sub.as_deref();
    match sub {
        Some("status") => {
            // Status writes keep everything but status (and metadata the
            // caller may change).
            let mut merged = current.clone();
            if let Some(m) = merged.as_object_mut() {
                match desired.get("status") {
                    Some(s) => m.insert("status".into(), s.clone()),
                    None => m.remove("status"),
                };
            }
            for field in ["labels", "annotations", "finalizers"] {
                match at(&desired, &["metadata", field]) {
                    Some(v) => set_at(&mut merged, &["metadata", field], v.clone()),
                    None => {
                        if let Some(m) = meta::meta_mut(&mut merged) {
                            m.remove(field);
                        }
                    }
                }
            }
            desired = merged;
        }
        Some("ephemeralcontainers") if def.kind == "Pod" => {
            // Only the ephemeral containers change (defaulted as
            // containers are); the rest is the stored pod.
            let mut merged = current.clone();
            let ephemeral = ["spec", "ephemeralContainers"];
            match at(&desired, &ephemeral) {
                Some(list) => set_at(&mut merged, &ephemeral, list.clone()),
                None => {
                    if let Some(spec) = merged.get_mut("spec").and_then(Value::as_object_mut) {
                        spec.remove("ephemeralContainers");
                    }
                }
            }
            crate::admission::defaults::default_containers(&mut merged, "ephemeralContainers");
            desired = merged;
        }
        Some("approval") => {
            let mut merged = current.clone();
            let conditions = at(&desired, &["status", "conditions"])
                .cloned()
                .unwrap_or(json!([]));
            set_at(&mut merged, &["status", "conditions"], conditions);
            desired = merged;
        }
        Some("finalize") | None => {
            if def.has_status && sub.is_none() {
                match current.get("status") {
                    Some(s) => set_at(&mut desired, &["status"], s.clone()),
                    None => {
                        if let Some(m) = desired.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            if sub == Some("finalize") {
                let finalizers = at(&desired, &["spec", "finalizers"])
                    .cloned()
                    .unwrap_or(json!([]));
                let mut merged = current.clone();
                set_at(&mut merged, &["spec", "finalizers"], finalizers);
                desired = merged;
            }
        }
        Some(other) => {
            return Err(ApiError::method_not_allowed(format!(
                "the subresource {other:?} does not accept updates"
            )));
        }
    }
    // Identity and system metadata come from the stored object.
    let body_name = str_at(&desired, &["metadata", "name"]).unwrap_or_default();
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    if let Some(body_uid) = str_at(&desired, &["metadata", "uid"]).filter(|u| !u.is_empty())
        && body_uid != meta::uid(current)
    {
        return Err(uid_precondition_failed(
            def,
            &name,
            body_uid,
            meta::uid(current),
        ));
    }
    let current_meta = meta::meta(current).cloned().unwrap_or_default();
    if let Some(m) = meta::meta_mut(&mut desired) {
        for field in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "managedFields",
        ] {
            match current_meta.get(field) {
                Some(v) => m.insert(field.into(), v.clone()),
                None => m.remove(field),
            };
        }
    }
    // Once terminating, finalizers may only be removed.
    if is_terminating(current) {
        let before = meta::finalizers(current);
        let after = meta::finalizers(&desired);
        if after.iter().any(|f| !before.contains(f)) {
            return Err(ApiError::invalid(
                def,
                &name,
                vec![Cause::forbidden(
                    "metadata.finalizers",
                    "no new finalizers can be added if the object is being deleted",
                )],
            ));
        }
    }
    let causes = admit(inner, req, def, &mut desired, Some(current))?;
    if !causes.is_empty() {
        return Err(ApiError::invalid(def, &name, causes));
    }
    default_for(inner, def, &mut desired, Some(current))?;
    // A PriorityClass starts at generation 1 and stays there: its
    // strategy never moves it.
    if tracks_generation(def)
        && def.kind != "PriorityClass"
        && spec_part(&desired) != spec_part(current)
    {
        bump_generation(current, &mut desired);
    }
    if let Some(operation) = operation {
        let custom = inner.defs().custom(req.def);
        apply::record_update(
            &mut desired,
            Some(current),
            &apply::Writer {
                manager: &req.manager(),
                operation,
                api_version: &def.api_version(),
                subresource: req.sub.as_deref().unwrap_or_default(),
            },
            custom.as_ref().and_then(|c| c.schema.as_ref()),
        );
    }
    finish(def, current, desired)
}

/// The update rules for a server-side apply: as an update, but the apply
/// has already recorded field ownership.
pub(crate) fn next_state_for_apply(
    inner: &Inner,
    def: &ResourceDef,
    req: &ResourceRequest,
    current: &Value,
    desired: Value,
) -> Result<Mutation, ApiError> {
    next_state(inner, def, req, current, desired, None)
}

/// Decide between delete (terminating, no finalizers, no grace left),
/// unchanged and replace.
fn finish(def: &ResourceDef, current: &Value, desired: Value) -> Result<Mutation, ApiError> {
    if is_terminating(&desired) && meta::finalizers(&desired).is_empty() {
        let graceful_pod = def.kind == "Pod"
            && at(&desired, &["metadata", "deletionGracePeriodSeconds"])
                .and_then(Value::as_i64)
                .unwrap_or(0)
                > 0;
        if !graceful_pod {
            return Ok(Mutation::Delete(desired));
        }
    }
    if same_but_bookkeeping(&desired, current) {
        return Ok(Mutation::Unchanged);
    }
    Ok(Mutation::Replace(desired))
}

/// True if `a` and `b` differ at most in `metadata.resourceVersion` and
/// `metadata.managedFields` (compared in place: no copies).
fn same_but_bookkeeping(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let same_meta = match (a.get("metadata"), b.get("metadata")) {
                (Some(Value::Object(am)), Some(Value::Object(bm))) => {
                    same_except(am, bm, &["resourceVersion", "managedFields"])
                }
                (am, bm) => am == bm,
            };
            same_meta && same_except(a, b, &["metadata"])
        }
        _ => a == b,
    }
}

/// True if the maps hold the same entries, leaving out the keys `skip`.
fn same_except(
    a: &serde_json::Map<String, Value>,
    b: &serde_json::Map<String, Value>,
    skip: &[&str],
) -> bool {
    let kept = |k: &&String| !skip.contains(&k.as_str());
    a.keys().filter(kept).count() == b.keys().filter(kept).count()
        && a.iter()
            .filter(|(k, _)| kept(k))
            .all(|(k, v)| b.get(k) == Some(v))
}

/// The answer to a write that may have removed the object (the last
/// finalizer of a terminating object went away).
pub(crate) fn committed(inner: &Inner, def: &ResourceDef, stored: Stored, deleted: bool) -> Answer {
    if deleted {
        after_delete(inner, def, &stored.object, false);
    } else if crd::is_crd(def) {
        crd::reconcile(inner, meta::name(&stored.object));
    }
    (200, to_value(&stored))
}

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

/// Delete options from the query and the body.
#[derive(Debug, Default, Clone)]
pub(crate) struct DeleteOptions {
    /// Grace period seconds (`gracePeriodSeconds`).
    grace: Option<i64>,
    /// `propagationPolicy: Orphan`: dependents keep living.
    orphan: bool,
    uid: Option<String>,
    resource_version: Option<String>,
    dry_run: bool,
}

impl DeleteOptions {
    /// A deletion at grace 0, as the server's own controllers delete.
    pub(crate) fn immediate() -> Self {
        Self {
            grace: Some(0),
            ..Default::default()
        }
    }
}

pub(crate) fn delete_options(
    req: &ResourceRequest,
    body: &[u8],
) -> Result<DeleteOptions, ApiError> {
    let mut opts = DeleteOptions {
        grace: req.query.number("gracePeriodSeconds")?,
        dry_run: req.dry_run(),
        orphan: req.query.get("propagationPolicy") == Some("Orphan"),
        ..Default::default()
    };
    if !body.iter().all(u8::is_ascii_whitespace) {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?;
        if let Some(g) = v.get("gracePeriodSeconds").and_then(Value::as_i64) {
            opts.grace = Some(g);
        }
        opts.uid = str_at(&v, &["preconditions", "uid"]).map(str::to_owned);
        opts.resource_version =
            str_at(&v, &["preconditions", "resourceVersion"]).map(str::to_owned);
        if v.get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|d| d.iter().any(|x| x == "All"))
        {
            opts.dry_run = true;
        }
        match v.get("propagationPolicy").and_then(Value::as_str) {
            Some("Orphan") => opts.orphan = true,
            Some("Background" | "Foreground") | None => {}
            Some(other) => {
                return Err(ApiError::invalid_options(
                    "DeleteOptions",
                    vec![crate::error::Cause::unsupported(
                        "propagationPolicy",
                        &format!("{other:?}"),
                        &["Foreground", "Background", "Orphan", "nil"],
                    )],
                ));
            }
        }
        if v.get("orphanDependents").and_then(Value::as_bool) == Some(true) {
            opts.orphan = true;
        }
    }
    Ok(opts)
}

/// The deletion decision for one object.
fn delete_state(
    def: &ResourceDef,
    current: &Value,
    opts: &DeleteOptions,
) -> Result<Mutation, ApiError> {
    let name = meta::name(current).to_owned();
    if let Some(uid) = &opts.uid
        && uid != meta::uid(current)
    {
        return Err(uid_precondition_failed(def, &name, uid, meta::uid(current)));
    }
    if let Some(rv) = &opts.resource_version
        && Some(rv.as_str()) != str_at(current, &["metadata", "resourceVersion"])
    {
        return Err(ApiError::conflict(
            def,
            &name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                str_at(current, &["metadata", "resourceVersion"]).unwrap_or_default()
            ),
        ));
    }
    let mut next = current.clone();
    // Pods bound to a node terminate gracefully, as a kubelet would see them.
    let mut grace = 0;
    if def.kind == "Pod" {
        let bound = str_at(current, &["spec", "nodeName"]).is_some_and(|n| !n.is_empty());
        let terminal = matches!(
            str_at(current, &["status", "phase"]),
            Some("Succeeded" | "Failed")
        );
        if bound && !terminal {
            let default_grace = at(current, &["spec", "terminationGracePeriodSeconds"])
                .and_then(Value::as_i64)
                .unwrap_or(30);
            grace = opts.grace.unwrap_or(default_grace).max(0);
            if let Some(existing) =
                at(current, &["metadata", "deletionGracePeriodSeconds"]).and_then(Value::as_i64)
                && is_terminating(current)
            {
                grace = grace.min(existing);
            }
        }
    }
    // A CRD's deletion adds its cleanup finalizer (as kube-apiserver's CRD
    // store does): its objects are deleted first.
    if crd::is_crd(def)
        && !meta::finalizers(current)
            .iter()
            .any(|f| f == crd::CLEANUP_FINALIZER)
        && let Some(m) = meta::meta_mut(&mut next)
        && let Some(list) = m
            .entry("finalizers")
            .or_insert_with(|| json!([]))
            .as_array_mut()
    {
        list.push(json!(crd::CLEANUP_FINALIZER));
    }
    let finalizers = meta::finalizers(&next);
    // A namespace always terminates first: its contents are deleted, then it.
    let is_namespace = def.kind == "Namespace" && def.group.is_empty();
    if grace == 0 && finalizers.is_empty() && !is_namespace {
        return Ok(Mutation::Delete(next));
    }
    if let Some(m) = meta::meta_mut(&mut next) {
        let shortened = m
            .get("deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .is_none_or(|g| grace < g);
        if !is_terminating(current) || shortened {
            m.insert("deletionTimestamp".into(), json!(meta::now_plus(grace)));
            m.insert("deletionGracePeriodSeconds".into(), json!(grace));
        }
    }
    if is_namespace {
        set_at(&mut next, &["status", "phase"], json!("Terminating"));
    }
    if next == *current {
        return Ok(Mutation::Unchanged);
    }
    Ok(Mutation::Replace(next))
}

/// Delete one object: remove it, or mark it terminating.
pub(crate) fn delete_one(
    inner: &Inner,
    resource: usize,
    namespace: &str,
    name: &str,
    opts: &DeleteOptions,
) -> Result<(Stored, bool), ApiError> {
    let def = inner.defs().get(resource);
    if def.kind == "Namespace" && def.group.is_empty() && SYSTEM_NAMESPACES.contains(&name) {
        return Err(ApiError::new(
            403,
            "Forbidden",
            format!("namespaces {name:?} is forbidden: this namespace may not be deleted"),
        ));
    }
    if opts.dry_run {
        let current = inner
            .store()
            .get(resource, namespace, name)
            .ok_or_else(|| ApiError::not_found(&def, name))?;
        let gone = matches!(
            delete_state(&def, &current.object, opts)?,
            Mutation::Delete(_)
        );
        return Ok((current, gone));
    }
    let (stored, deleted) = inner
        .store()
        .update(resource, namespace, name, |cur| {
            delete_state(&def, &cur.object, opts)
        })
        .map_err(|e| map_store_err(&def, name, e))?;
    if deleted {
        after_delete(inner, &def, &stored.object, opts.orphan);
    } else if def.kind == "Namespace" {
        empty_namespace(inner, name);
    } else if crd::is_crd(&def) {
        crd::reconcile(inner, name);
    }
    Ok((stored, deleted))
}

/// DELETE on an object.
pub(crate) fn delete(
    inner: &Inner,
    req: &ResourceRequest,
    body: &[u8],
) -> Result<Answer, ApiError> {
    let opts = delete_options(req, body)?;
    let name = req.name.clone().unwrap_or_default();
    let (stored, gone) = delete_one(inner, req.def, req.ns_key(), &name, &opts)?;
    let def = &inner.defs().get(req.def);
    if gone && !returns_deleted_object(def) {
        // kube-apiserver answers a removal (or a dry run of one) with a
        // success Status, but for the kinds whose store returns the object.
        return Ok((200, success_status(def, &name, meta::uid(&stored.object))));
    }
    Ok((200, to_value(&stored)))
}

/// The kinds whose store answers a delete with the deleted object
/// (`ReturnDeletedObject`); the others answer a success `Status`. An
/// object that only starts terminating is always returned.
fn returns_deleted_object(def: &ResourceDef) -> bool {
    matches!(
        (def.group, def.plural),
        (
            "",
            "pods"
                | "services"
                | "namespaces"
                | "serviceaccounts"
                | "persistentvolumes"
                | "persistentvolumeclaims"
                | "resourcequotas"
                | "podtemplates"
        ) | (
            "storage.k8s.io",
            "storageclasses"
                | "csidrivers"
                | "csinodes"
                | "volumeattachments"
                | "volumeattributesclasses"
        ) | ("resource.k8s.io", _)
    )
}

/// DELETE on a collection: every object the selectors match.
pub(crate) fn delete_collection(
    inner: &Inner,
    req: &ResourceRequest,
    body: &[u8],
) -> Result<Answer, ApiError> {
    let def = &inner.defs().get(req.def);
    let opts = delete_options(req, body)?;
    let filter = crate::storage::read::Filter::of(inner, req.def, &req.query)?;
    let (items, _) = inner.store().list(req.def, req.namespace.as_deref());
    let mut deleted = Vec::new();
    for item in items.iter().filter(|s| filter.matches(def, &s.object)) {
        let ns = str_at(&item.object, &["metadata", "namespace"])
            .unwrap_or_default()
            .to_owned();
        match delete_one(inner, req.def, &ns, meta::name(&item.object), &opts) {
            Ok((stored, _)) => {
                let mut item = to_value(&stored);
                // A built-in kind's list items carry no type (see `read::list`).
                if !def.custom
                    && let Some(m) = item.as_object_mut()
                {
                    m.remove("apiVersion");
                    m.remove("kind");
                }
                deleted.push(item);
            }
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok((
        200,
        json!({
            "kind": inner.defs().list_kind(req.def),
            "apiVersion": def.api_version(),
            "metadata": {"resourceVersion": &inner.store().revision().to_string()},
            "items": deleted,
        }),
    ))
}

/// After an object is gone: give back allocations, collect (or orphan)
/// dependents, finish a terminating namespace.
fn after_delete(inner: &Inner, def: &ResourceDef, obj: &Value, orphan: bool) {
    if def.kind == "Service" && def.group.is_empty() {
        inner.alloc().release_service(obj);
    }
    if orphan {
        orphan_dependents(inner, meta::uid(obj));
    } else {
        collect_dependents(inner, meta::uid(obj));
    }
    if def.namespaced
        && let Some(ns) = str_at(obj, &["metadata", "namespace"])
    {
        finalize_namespace_if_empty(inner, ns);
    }
    if crd::is_crd(def) {
        crd::definition_deleted(inner, obj);
    } else if def.custom {
        crd::finish_if_empty(inner, &crd::crd_name(def));
    }
}

/// `Orphan` propagation: dependents lose the owner reference and live on.
fn orphan_dependents(inner: &Inner, owner_uid: &str) {
    for (resource, ns, name, _) in dependents(inner, owner_uid) {
        let _ = inner
            .store()
            .update::<ApiError>(resource, &ns, &name, |cur| {
                let mut next = (*cur.object).clone();
                if let Some(Value::Array(refs)) = next
                    .get_mut("metadata")
                    .and_then(|m| m.get_mut("ownerReferences"))
                {
                    refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid));
                }
                Ok(Mutation::Replace(next))
            });
    }
}

/// Every object that lists `owner_uid` among its owner references, with the
/// uids of all its owners.
fn dependents(inner: &Inner, owner_uid: &str) -> Vec<(usize, String, String, Vec<String>)> {
    if owner_uid.is_empty() {
        return Vec::new();
    }
    inner
        .store()
        .dependents_of(owner_uid)
        .into_iter()
        .filter_map(|(resource, ns, name)| {
            let item = inner.store().get(resource, &ns, &name)?;
            let owners = crate::storage::store::owner_uids(&item.object);
            Some((resource, ns, name, owners))
        })
        .collect()
}

/// Background garbage collection: delete objects whose owners are all gone.
fn collect_dependents(inner: &Inner, owner_uid: &str) {
    for (resource, ns, name, owners) in dependents(inner, owner_uid) {
        let others_alive = owners
            .iter()
            .any(|uid| uid != owner_uid && uid_exists(inner, uid));
        if !others_alive {
            let opts = DeleteOptions {
                grace: Some(0),
                ..Default::default()
            };
            let _ = delete_one(inner, resource, &ns, &name, &opts);
        }
    }
}

fn uid_exists(inner: &Inner, uid: &str) -> bool {
    inner.defs().all().into_iter().any(|(i, d)| {
        !d.review
            && inner
                .store()
                .list(i, None)
                .0
                .iter()
                .any(|s| meta::uid(&s.object) == uid)
    })
}

/// Delete the contents of a terminating namespace.
fn empty_namespace(inner: &Inner, namespace: &str) {
    for (resource, def) in inner.defs().all() {
        if !def.namespaced || def.review {
            continue;
        }
        let (items, _) = inner.store().list(resource, Some(namespace));
        for item in items {
            let _ = delete_one(
                inner,
                resource,
                namespace,
                meta::name(&item.object),
                &DeleteOptions {
                    grace: Some(0),
                    ..Default::default()
                },
            );
        }
    }
    finalize_namespace_if_empty(inner, namespace);
}

/// Remove a terminating namespace once nothing is left in it.
fn finalize_namespace_if_empty(inner: &Inner, namespace: &str) {
    let Some(ns) = inner.store().get(idx::NAMESPACES, "", namespace) else {
        return;
    };
    if !is_terminating(&ns.object) {
        return;
    }
    let empty = inner
        .defs()
        .all()
        .into_iter()
        .all(|(i, d)| !d.namespaced || d.review || inner.store().count(i, namespace) == 0);
    if empty {
        let _ = inner
            .store()
            .update::<ApiError>(idx::NAMESPACES, "", namespace, |cur| {
                Ok(Mutation::Delete((*cur.object).clone()))
            });
    }
}

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
    crate::storage::disruption::check(inner, &pod.object)?;
    let (stored, _) = delete_one(inner, req.def, req.ns_key(), &name, &opts)?;
    Ok((201, success_status(def, &name, meta::uid(&stored.object))))
}

/// Whether the kind's strategy keeps `metadata.generation` (set to 1 on
/// create, bumped on spec changes): workloads, Pods, the policy and
/// networking kinds with a spec, EndpointSlices, webhook configurations,
/// PriorityClasses, CustomResourceDefinitions and custom resources. ConfigMaps, Secrets,
/// Services, Nodes, Namespaces, RBAC objects and the rest have none.
pub(crate) fn tracks_generation(def: &ResourceDef) -> bool {
    def.custom
        || matches!(
            (def.group, def.kind),
            ("", "Pod")
                | ("apps", _)
                | ("batch", _)
                | ("policy", "PodDisruptionBudget")
                | ("networking.k8s.io", _)
                | ("discovery.k8s.io", "EndpointSlice")
                | ("admissionregistration.k8s.io", _)
                | ("apiextensions.k8s.io", _)
                | ("scheduling.k8s.io", "PriorityClass")
        ) && def.kind != "ControllerRevision"
}

/// `next`'s `metadata.generation`: one more than `current`'s (a spec
/// change, as kube-apiserver counts them).
pub(crate) fn bump_generation(current: &Value, next: &mut Value) {
    let generation = at(current, &["metadata", "generation"])
        .and_then(Value::as_i64)
        .unwrap_or(1);
    set_at(next, &["metadata", "generation"], json!(generation + 1));
}

#[cfg(test)]
mod bookkeeping_tests {
    use super::same_but_bookkeeping;
    use serde_json::json;

    #[test]
    fn objects_that_differ_only_in_version_or_managers_are_the_same() {
        let a = json!({"metadata": {"name": "a", "resourceVersion": "1", "managedFields": [1]}, "data": {"k": "v"}});
        let b = json!({"metadata": {"name": "a", "resourceVersion": "2"}, "data": {"k": "v"}});
        assert!(same_but_bookkeeping(&a, &b));
        for other in [
            json!({"metadata": {"name": "a"}, "data": {"k": "w"}}),
            json!({"metadata": {"name": "a", "labels": {}}, "data": {"k": "v"}}),
            json!({"metadata": {"name": "a"}, "data": {"k": "v"}, "binaryData": {}}),
            json!({"data": {"k": "v"}}),
        ] {
            assert!(!same_but_bookkeeping(&a, &other), "{other}");
            assert!(!same_but_bookkeeping(&other, &a), "{other}");
        }
    }
}
