//! What every write shares: the body's type and namespace checks,
//! admission (validation, defaulting, a definition's and a schema's rules),
//! the update rules that make an object's next state, and the answer.

use serde_json::{Map, Value, json};

use crate::admission::crd;
use crate::admission::defaults;
use crate::admission::field_validation::{self, Directive};
use crate::admission::validation;
use crate::error::{ApiError, Cause};
use crate::meta::{self, at, is_terminating, set_at, str_at};
use crate::openapi::builtin_schemas;
use crate::resources::{ResourceDef, idx};
use crate::state::{Inner, ResourceRequest};
use crate::storage::event::Stored;
use crate::storage::managed_fields;
use crate::storage::store::{Mutation, StoreError};

/// The namespaces that always exist and cannot be deleted.
pub(crate) const SYSTEM_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// A write's answer: status code and body.
pub(crate) type Answer = (u16, Value);

pub(crate) fn to_value(stored: &Stored) -> Value {
    (*stored.object).clone()
}

pub(crate) fn map_store_err(def: &ResourceDef, name: &str, e: StoreError<ApiError>) -> ApiError {
    match e {
        StoreError::NotFound => ApiError::not_found(def, name),
        StoreError::AlreadyExists => ApiError::already_exists(def, name),
        StoreError::Rejected(e) => e,
    }
}

/// Check `kind` / `apiVersion` of a body against the resource, filling them
/// in when absent.
pub(crate) fn check_type(def: &ResourceDef, obj: &mut Value) -> Result<(), ApiError> {
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
pub(crate) fn check_namespace(inner: &Inner, req: &ResourceRequest) -> Result<(), ApiError> {
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

pub(crate) fn check_body_namespace(req: &ResourceRequest, obj: &mut Value) -> Result<(), ApiError> {
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
pub(crate) fn spec_part(obj: &Value) -> Map<String, Value> {
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
pub(crate) fn reset_status_on_create(def: &ResourceDef, obj: &mut Value) {
    if def.has_status
        && def.kind != "Node"
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
}

/// Kind-specific defaulting and allocation on create (`old` on update).
pub(crate) fn default_for(
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
pub(crate) fn check_duplicates(
    req: &ResourceRequest,
    def: &ResourceDef,
    body: &[u8],
) -> Result<(), ApiError> {
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
pub(crate) fn uid_precondition_failed(
    def: &ResourceDef,
    name: &str,
    wanted: &str,
    actual: &str,
) -> ApiError {
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

/// The validation causes of an object about to be stored (`old`: its
/// current state on update): the resource's own rules, a definition's rules
/// for CustomResourceDefinitions, and the schema of a custom resource (which
/// also defaults and prunes the object). Unknown fields are dropped, and
/// warned about or refused as `fieldValidation` says.
pub(crate) fn admit(
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

/// Build the next state of an object from a desired body, enforcing the
/// update rules; returns the mutation to store.
pub(crate) fn next_state(
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
        managed_fields::record_update(
            &mut desired,
            Some(current),
            &managed_fields::Writer {
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
pub(crate) fn finish(
    def: &ResourceDef,
    current: &Value,
    desired: Value,
) -> Result<Mutation, ApiError> {
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
pub(crate) fn same_but_bookkeeping(a: &Value, b: &Value) -> bool {
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
pub(crate) fn same_except(
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
