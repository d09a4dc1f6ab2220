//! DELETE of an object or a collection, and what follows a deletion:
//! finalizers and grace, garbage collection of dependents, a namespace's
//! contents, a terminating definition's objects.

use serde_json::{Value, json};

use crate::admission::crd;
use crate::error::{ApiError, success_status};
use crate::meta::{self, at, is_terminating, set_at, str_at};
use crate::resources::{ResourceDef, idx};
use crate::state::{Inner, ResourceRequest};
use crate::storage::event::Stored;
use crate::storage::store::Mutation;

use super::object::{Answer, SYSTEM_NAMESPACES, map_store_err, to_value, uid_precondition_failed};

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
pub(crate) fn delete_state(
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
        reconcile_definition(inner, name);
    }
    Ok((stored, deleted))
}

/// Reconcile definition `name` ([`crd::reconcile`]); for a terminating
/// one, delete its objects and let it go once none is left.
pub(crate) fn reconcile_definition(inner: &Inner, name: &str) {
    let Some(terminating) = crd::reconcile(inner, name) else {
        return;
    };
    for (index, namespace, object) in terminating.objects {
        let _ = delete_one(
            inner,
            index,
            &namespace,
            &object,
            &DeleteOptions::immediate(),
        );
    }
    crd::finish_if_empty(inner, name);
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
pub(crate) fn returns_deleted_object(def: &ResourceDef) -> bool {
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
    let filter = crate::rest::read::Filter::of(inner, req.def, &req.query)?;
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

/// The answer to a write that may have removed the object (the last
/// finalizer of a terminating object went away).
pub(crate) fn committed(inner: &Inner, def: &ResourceDef, stored: Stored, deleted: bool) -> Answer {
    if deleted {
        after_delete(inner, def, &stored.object, false);
    } else if crd::is_crd(def) {
        reconcile_definition(inner, meta::name(&stored.object));
    }
    (200, to_value(&stored))
}

/// After an object is gone: give back allocations, collect (or orphan)
/// dependents, finish a terminating namespace.
pub(crate) fn after_delete(inner: &Inner, def: &ResourceDef, obj: &Value, orphan: bool) {
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
pub(crate) fn orphan_dependents(inner: &Inner, owner_uid: &str) {
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
pub(crate) fn dependents(
    inner: &Inner,
    owner_uid: &str,
) -> Vec<(usize, String, String, Vec<String>)> {
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
pub(crate) fn collect_dependents(inner: &Inner, owner_uid: &str) {
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

pub(crate) fn uid_exists(inner: &Inner, uid: &str) -> bool {
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
pub(crate) fn empty_namespace(inner: &Inner, namespace: &str) {
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
pub(crate) fn finalize_namespace_if_empty(inner: &Inner, namespace: &str) {
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
