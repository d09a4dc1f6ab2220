//! Server-side apply (PATCH with `application/apply-patch+yaml`).
//!
//! An apply gives its manager exactly the leaves of its configuration
//! (ownership is kept in [`crate::storage::managed_fields`]): a leaf
//! another manager owns with a different value is a conflict (409) unless
//! `force=true`, which takes it over; leaves the manager applied before and
//! no longer applies are removed unless someone else owns them. Lists merge
//! as in strategic merge patch (by key, as sets, or atomically).

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::meta::{self, str_at};
use crate::state::{Inner, ResourceRequest};
use crate::storage::managed_fields::{
    Elem, Entry, FieldSet, Lists, Path, SYSTEM_META, fields_of, lookup, read_entries, remove_path,
    render, write_entries,
};
use crate::storage::patch::ListStrategy;
use crate::storage::store::{Mutation, StoreError};

/// Merge an apply configuration into the live object (lists by their
/// strategy, maps recursively).
fn merge_config(lists: Lists<'_>, live: &mut Value, config: &Value, names: &mut Vec<String>) {
    match (live, config) {
        (Value::Object(l), Value::Object(c)) => {
            for (k, v) in c {
                if names.len() == 1 && names[0] == "metadata" && SYSTEM_META.contains(&k.as_str()) {
                    continue;
                }
                names.push(k.clone());
                match l.get_mut(k) {
                    Some(existing) if !v.is_null() => merge_config(lists, existing, v, names),
                    _ => {
                        if v.is_null() {
                            l.remove(k);
                        } else {
                            l.insert(k.clone(), v.clone());
                        }
                    }
                }
                names.pop();
            }
        }
        (l @ Value::Array(_), Value::Array(items)) => {
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            match lists.strategy(&refs) {
                ListStrategy::Atomic => *l = Value::Array(items.clone()),
                ListStrategy::MergePrimitive => {
                    if let Value::Array(list) = l {
                        for i in items {
                            if !list.contains(i) {
                                list.push(i.clone());
                            }
                        }
                    }
                }
                ListStrategy::MergeByKey(key) => {
                    if let Value::Array(list) = l {
                        for item in items {
                            match list
                                .iter_mut()
                                .find(|e| item.get(key).is_some() && e.get(key) == item.get(key))
                            {
                                Some(existing) => merge_config(lists, existing, item, names),
                                None => list.push(item.clone()),
                            }
                        }
                    }
                }
            }
        }
        (l, c) => *l = c.clone(),
    }
}

fn conflict_error(api_version: &str, conflicts: &[(String, String, String)]) -> ApiError {
    // structured-merge-diff names the manager's version only when it is
    // not the one applied.
    let using = |v: &str| {
        if v == api_version {
            String::new()
        } else {
            format!(" using {v}")
        }
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(manager, api_version, field)| {
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with {manager:?}{}", using(api_version)), "field": field})
        })
        .collect();
    let message = if let [(manager, version, field)] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {manager:?}{}: {field}",
            using(version)
        )
    } else {
        // Grouped by manager, in first-seen order.
        let mut groups: Vec<(&str, &str, Vec<&str>)> = Vec::new();
        for (m, v, f) in conflicts {
            match groups.iter_mut().find(|(gm, gv, _)| gm == m && gv == v) {
                Some(g) => g.2.push(f),
                None => groups.push((m, v, vec![f])),
            }
        }
        let parts: Vec<String> = groups
            .iter()
            .map(|(m, v, fs)| {
                let fields: Vec<String> = fs.iter().map(|f| format!("- {f}")).collect();
                format!("conflicts with {m:?}{}:\n{}", using(v), fields.join("\n"))
            })
            .collect();
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            parts.join("\n")
        )
    };
    ApiError {
        // kube-apiserver's apply conflicts carry only their causes.
        details: Some(json!({"causes": causes})),
        ..ApiError::new(409, "Conflict", message)
    }
}

/// Who applies what to which object.
struct ApplyRequest<'a> {
    lists: Lists<'a>,
    api_version: &'a str,
    manager: &'a str,
    force: bool,
}

/// Compute the applied object from the live one (`None`: create).
fn applied(
    req: &ApplyRequest<'_>,
    live: Option<&Value>,
    config: &Value,
) -> Result<Value, ApiError> {
    let ApplyRequest {
        lists,
        api_version,
        manager,
        force,
    } = *req;
    let config_fields = fields_of(lists, config);
    let mut entries = live.map(read_entries).unwrap_or_default();
    let mut conflicts = Vec::new();
    let mut conflicting = FieldSet::new();
    if let Some(live) = live {
        for e in &entries {
            if e.manager == manager && e.operation == "Apply" {
                continue;
            }
            for p in &e.fields {
                if config_fields.contains(p) && lookup(live, p) != lookup(config, p) {
                    conflicts.push((e.manager.clone(), e.api_version.clone(), render(p)));
                    conflicting.insert(p.clone());
                }
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(api_version, &conflicts));
    }
    let mut out = live.cloned().unwrap_or_else(|| json!({}));
    // Fields this manager applied before and no longer applies go away,
    // unless another manager owns them.
    let previous: FieldSet = entries
        .iter()
        .find(|e| e.manager == manager && e.operation == "Apply")
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let others = |e: &&Entry<'_>| !(e.manager == manager && e.operation == "Apply");
    let leaves: Vec<&Path> = previous
        .difference(&config_fields)
        .filter(|p| !entries.iter().filter(others).any(|e| e.fields.contains(*p)))
        .collect();
    // A keyed list item nobody owns a field of any more goes as a whole
    // (its key fields with it); it is found by its key, so before its
    // leaves are removed.
    let items: FieldSet = leaves
        .iter()
        .filter_map(|p| {
            p.iter()
                .rposition(|e| matches!(e, Elem::Key(_)))
                .map(|i| p[..=i].to_vec())
        })
        .collect();
    for item in &items {
        let owned = config_fields.iter().any(|f| f.starts_with(item))
            || entries
                .iter()
                .filter(others)
                .any(|e| e.fields.iter().any(|f| f.starts_with(item)));
        if !owned {
            remove_path(&mut out, item);
        }
    }
    for p in leaves {
        remove_path(&mut out, p);
    }
    merge_config(lists, &mut out, config, &mut Vec::new());
    // Forced conflicts change hands; equal values are shared.
    for e in &mut entries {
        if !(e.manager == manager && e.operation == "Apply") {
            e.retain_fields(|p| !conflicting.contains(p) && lookup(&out, p).is_some());
        }
    }
    entries.retain(|e| !(e.manager == manager && e.operation == "Apply"));
    entries.push(Entry {
        manager: manager.to_owned(),
        operation: "Apply".to_owned(),
        api_version: api_version.to_owned(),
        time: meta::now(),
        subresource: String::new(),
        fields: config_fields,
        rendered: None,
    });
    write_entries(&mut out, &entries);
    Ok(out)
}

/// PATCH with `application/apply-patch+yaml`.
pub(crate) fn server_side_apply(
    inner: &Inner,
    req: &ResourceRequest,
    config: Value,
) -> Result<(u16, Value), ApiError> {
    let def = &inner.defs().get(req.def);
    let name = req.name.clone().unwrap_or_default();
    let Some(manager) = req.query.get("fieldManager").map(str::to_owned) else {
        return Err(ApiError::invalid_options(
            "PatchOptions",
            vec![crate::error::Cause::required(
                "fieldManager",
                "is required for apply patch",
            )],
        ));
    };
    if !config.is_object() {
        return Err(ApiError::bad_request(
            "the apply configuration must be an object",
        ));
    }
    let force = req.query.flag("force");
    let config_name = str_at(&config, &["metadata", "name"]).unwrap_or_default();
    if !config_name.is_empty() && config_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({config_name}) does not match the name on the URL ({name})"
        )));
    }
    let api_version = def.api_version();
    let custom = inner.defs().custom(req.def);
    let schema = custom.as_ref().and_then(|c| c.schema.as_ref());
    let apply_req = ApplyRequest {
        lists: Lists::new(def.kind, schema),
        api_version: &api_version,
        manager: &manager,
        force,
    };
    match inner.store().get(req.def, req.ns_key(), &name) {
        None => {
            // Create on apply.
            let mut obj = applied(&apply_req, None, &config)?;
            if let Some(m) = meta::meta_mut(&mut obj) {
                m.insert("name".into(), json!(name));
            }
            let managed = meta::meta(&obj)
                .and_then(|m| m.get("managedFields"))
                .cloned();
            let body = serde_json::to_vec(&obj).unwrap_or_default();
            let create_req = ResourceRequest {
                query: {
                    let mut q = req.query.clone();
                    q.0.insert("fieldManager".into(), manager.clone());
                    q
                },
                ..req.clone()
            };
            let (code, created) = crate::rest::write::create::create(inner, &create_req, &body)?;
            // Creation recorded an Update; the apply owns those fields instead.
            if let Some(managed) = managed
                && code == 201
                && !req.dry_run()
            {
                let (stored, _) = inner
                    .store()
                    .update::<ApiError>(req.def, req.ns_key(), &name, |cur| {
                        let mut v = (*cur.object).clone();
                        if let Some(m) = meta::meta_mut(&mut v) {
                            m.insert("managedFields".into(), managed.clone());
                        }
                        Ok(Mutation::Replace(v))
                    })
                    .map_err(|e| match e {
                        StoreError::Rejected(e) => e,
                        _ => ApiError::not_found(def, &name),
                    })?;
                return Ok((201, (*stored.object).clone()));
            }
            Ok((code, created))
        }
        Some(_) => {
            let (stored, deleted) = inner
                .store()
                .update(req.def, req.ns_key(), &name, |cur| {
                    let mut desired = applied(&apply_req, Some(&cur.object), &config)?;
                    // Apply never changes what the update path protects.
                    let rv = str_at(&cur.object, &["metadata", "resourceVersion"])
                        .unwrap_or_default()
                        .to_owned();
                    meta::set_at(&mut desired, &["metadata", "resourceVersion"], json!(rv));
                    let managed = meta::meta(&desired)
                        .and_then(|m| m.get("managedFields"))
                        .cloned();
                    let mutation = crate::rest::write::object::next_state_for_apply(
                        inner,
                        def,
                        req,
                        &cur.object,
                        desired,
                    )?;
                    Ok(match mutation {
                        Mutation::Replace(mut v) => {
                            if let (Some(m), Some(managed)) = (meta::meta_mut(&mut v), managed) {
                                m.insert("managedFields".into(), managed);
                            }
                            Mutation::Replace(v)
                        }
                        other => other,
                    })
                })
                .map_err(|e| match e {
                    StoreError::NotFound => ApiError::not_found(def, &name),
                    StoreError::AlreadyExists => ApiError::already_exists(def, &name),
                    StoreError::Rejected(e) => e,
                })?;
            Ok(crate::rest::write::delete::committed(
                inner, def, stored, deleted,
            ))
        }
    }
}

/// The managers owning each field of an object, for assertions in tests.
#[cfg(test)]
pub(crate) fn owners(obj: &Value) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut out: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for e in read_entries(obj) {
        for p in &e.fields {
            out.entry(render(p)).or_default().push(e.manager.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::managed_fields::*;

    fn req(manager: &str, force: bool) -> ApplyRequest<'_> {
        ApplyRequest {
            lists: Lists::new("ConfigMap", None),
            api_version: "v1",
            manager,
            force,
        }
    }

    #[test]
    fn fields_v1_round_trip() {
        let obj = json!({"kind": "Pod", "metadata": {"name": "x", "labels": {"a": "1"}, "finalizers": ["f"]},
            "spec": {"containers": [{"name": "app", "image": "nginx"}], "tolerations": [{"key": "k"}]}});
        let set = fields_of(Lists::new("Pod", None), &obj);
        let v1 = to_fields_v1(&set, Written::Update);
        assert_eq!(from_fields_v1(&v1), set);
        let rendered: Vec<String> = set.iter().map(render).collect();
        assert!(
            rendered.contains(&".spec.containers[name=\"app\"].image".to_owned()),
            "{rendered:?}"
        );
        assert!(rendered.contains(&".metadata.finalizers[=\"f\"]".to_owned()));
        assert!(rendered.contains(&".spec.tolerations".to_owned()));
        assert!(!rendered.iter().any(|r| r == ".metadata.name"));
    }

    #[test]
    fn entries_an_update_keeps_or_changes_are_what_a_fresh_render_gives() {
        let writer = |manager, subresource| Writer {
            manager,
            operation: "Update",
            api_version: "v1",
            subresource,
        };
        let mut created = json!({"kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]}});
        record_update(&mut created, None, &writer("creator", ""), None);
        let mut running = created.clone();
        running["status"] = json!({"phase": "Running"});
        record_update(
            &mut running,
            Some(&created),
            &writer("kubelet", "status"),
            None,
        );
        let mut relabelled = running.clone();
        relabelled["metadata"]["labels"]["a"] = json!("2");
        relabelled["status"]["phase"] = json!("Succeeded");
        record_update(&mut relabelled, Some(&running), &writer("other", ""), None);
        // Each step's entries, kept as they were or rendered again, are
        // what rendering their field sets afresh gives.
        for obj in [&running, &relabelled] {
            let stored = obj["metadata"]["managedFields"].as_array().unwrap();
            let entries = read_entries(obj);
            assert_eq!(stored.len(), entries.len());
            for (entry, stored) in entries.iter().zip(stored) {
                assert_eq!(
                    stored["fieldsV1"],
                    to_fields_v1(&entry.fields, entry.written()),
                    "{}",
                    entry.manager
                );
            }
        }
        let owners = owners(&relabelled);
        assert_eq!(owners[".metadata.labels.a"], ["other"]);
        assert_eq!(owners[".status.phase"], ["other"]);
        assert_eq!(owners[".spec.containers[name=\"app\"].image"], ["creator"]);
    }

    #[test]
    fn apply_conflicts_and_force() {
        let mut live =
            json!({"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
        record_update(
            &mut live,
            None,
            &Writer {
                manager: "kubectl-edit",
                operation: "Update",
                api_version: "v1",
                subresource: "",
            },
            None,
        );
        let config = json!({"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "9"}});
        let err = applied(&req("mgr", false), Some(&live), &config).unwrap_err();
        assert_eq!(err.code, 409);
        assert!(err.message.contains(".data.a"), "{}", err.message);
        let forced = applied(&req("mgr", true), Some(&live), &config).unwrap();
        assert_eq!(forced["data"], json!({"a": "9", "b": "2"}));
        let owners = owners(&forced);
        assert_eq!(owners[".data.a"], vec!["mgr".to_owned()]);
        assert_eq!(owners[".data.b"], vec!["kubectl-edit".to_owned()]);
        // Same value: no conflict.
        let same = json!({"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"b": "2"}});
        assert!(applied(&req("other", false), Some(&live), &same).is_ok());
    }

    #[test]
    fn apply_removes_fields_it_stopped_applying() {
        let config1 = json!({"kind": "ConfigMap", "metadata": {"name": "c", "labels": {"x": "1"}}, "data": {"a": "1", "b": "2"}});
        let first = applied(&req("mgr", false), None, &config1).unwrap();
        let config2 = json!({"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
        let second = applied(&req("mgr", false), Some(&first), &config2).unwrap();
        assert_eq!(second["data"], json!({"a": "1"}));
        assert!(
            second["metadata"]
                .get("labels")
                .is_none_or(|l| l.as_object().is_none_or(|m| m.is_empty()))
        );
    }
}
