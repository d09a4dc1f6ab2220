//! CustomResourceDefinitions: validation and defaulting of the definitions,
//! serving their resources (the establishing controller), and deleting their
//! objects before the definition goes (the finalizer controller), as
//! kube-apiserver's apiextensions server does.
//!
//! Every served version is served. Objects are stored at the storage
//! version; a request at another served version is carried out at the
//! storage version with its `apiVersion` rewritten both ways (the `None`
//! conversion strategy; see `conversion`).

use serde_json::{Value, json};

use crate::admission::field_validation::{self, Directive};
use crate::admission::schema;
use crate::error::{ApiError, Cause};
use crate::meta::{self, at, is_terminating, set_at, str_at, strings};
use crate::registry::{CustomVersion, PrinterColumn, ScalePaths, intern, intern_list, split_path};
use crate::resources::{NameRule, ResourceDef};
use crate::state::Inner;
use crate::storage::store::Mutation;

/// The API group of CustomResourceDefinitions.
pub(crate) const GROUP: &str = "apiextensions.k8s.io";
/// The finalizer that keeps a definition until its objects are gone.
pub(crate) const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// True for the CustomResourceDefinition resource itself.
pub(crate) fn is_crd(def: &ResourceDef) -> bool {
    def.group == GROUP && def.kind == "CustomResourceDefinition"
}

/// The name of the definition that serves a custom resource.
pub(crate) fn crd_name(def: &ResourceDef) -> String {
    format!("{}.{}", def.plural, def.group)
}

fn crd_index(inner: &Inner) -> Option<usize> {
    inner.defs().find(GROUP, "v1", "customresourcedefinitions")
}

/// The names a definition's spec gives, with kube-apiserver's defaults.
struct Names {
    group: String,
    plural: String,
    singular: String,
    kind: String,
    list_kind: String,
    short_names: Vec<String>,
    categories: Vec<String>,
}

fn names(crd: &Value) -> Names {
    let s = |path: &[&str]| str_at(crd, path).unwrap_or_default().to_owned();
    let kind = s(&["spec", "names", "kind"]);
    let singular = str_at(crd, &["spec", "names", "singular"])
        .filter(|v| !v.is_empty())
        .map_or_else(|| kind.to_lowercase(), str::to_owned);
    let list_kind = str_at(crd, &["spec", "names", "listKind"])
        .filter(|v| !v.is_empty())
        .map_or_else(|| format!("{kind}List"), str::to_owned);
    Names {
        group: s(&["spec", "group"]),
        plural: s(&["spec", "names", "plural"]),
        singular,
        kind,
        list_kind,
        short_names: strings(at(crd, &["spec", "names", "shortNames"])),
        categories: strings(at(crd, &["spec", "names", "categories"])),
    }
}

fn versions(crd: &Value) -> &[Value] {
    at(crd, &["spec", "versions"])
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// An RFC 1123 label (plural names, version names).
fn is_dns_label(s: &str) -> bool {
    crate::admission::validation::dns_label(s, 63, false)
}

/// Defaulting of a definition (`names.singular`, `names.listKind`,
/// `conversion.strategy`), as on every write.
pub(crate) fn default_definition(crd: &mut Value) {
    let n = names(crd);
    if !n.kind.is_empty() {
        meta::default_at(crd, &["spec", "names", "singular"], json!(n.singular));
        meta::default_at(crd, &["spec", "names", "listKind"], json!(n.list_kind));
    }
    meta::default_at(crd, &["spec", "conversion", "strategy"], json!("None"));
}

/// A new definition's status, before its controllers name and establish
/// it: no names accepted, the storage version recorded.
pub(crate) fn initial_status(crd: &mut Value) {
    let stored: Vec<Value> = versions(crd)
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").cloned())
        .collect();
    set_at(
        crd,
        &["status"],
        json!({"acceptedNames": {"kind": "", "plural": ""}, "storedVersions": stored}),
    );
}

/// The validation of a definition that matters to serving it.
pub(crate) fn validate_definition(crd: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let n = names(crd);
    if n.group.is_empty() {
        causes.push(Cause::required("spec.group", ""));
    } else if !n.group.contains('.') {
        causes.push(Cause::invalid(
            "spec.group",
            &n.group,
            "should be a domain with at least one dot",
        ));
    }
    if n.plural.is_empty() {
        causes.push(Cause::required("spec.names.plural", ""));
    } else if !crate::admission::validation::dns_label(&n.plural, 63, true) {
        causes.push(Cause::invalid(
            "spec.names.plural",
            &n.plural,
            &crate::admission::validation::dns1035_label_message(),
        ));
    }
    if !n.singular.is_empty() && !crate::admission::validation::dns_label(&n.singular, 63, true) {
        causes.push(Cause::invalid(
            "spec.names.singular",
            &n.singular,
            &crate::admission::validation::dns1035_label_message(),
        ));
    }
    if n.kind.is_empty() {
        causes.push(Cause::required("spec.names.kind", ""));
    }
    let expected = format!("{}.{}", n.plural, n.group);
    let name = meta::name(crd);
    if !n.plural.is_empty() && !n.group.is_empty() && !name.is_empty() && name != expected {
        causes.push(Cause::invalid(
            "metadata.name",
            name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    match str_at(crd, &["spec", "scope"]) {
        Some("Namespaced" | "Cluster") => {}
        None | Some("") => causes.push(Cause::required("spec.scope", "")),
        Some(other) => causes.push(Cause {
            reason: "FieldValueNotSupported",
            field: "spec.scope".into(),
            message: format!(
                "Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
            ),
        }),
    }
    let versions = versions(crd);
    if versions.is_empty() {
        causes.push(Cause::invalid(
            "spec.versions",
            "null",
            "must have exactly one version marked as storage version",
        ));
        return causes;
    }
    let storage = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if storage != 1 {
        causes.push(Cause::invalid(
            "spec.versions",
            &storage.to_string(),
            "must have exactly one version marked as storage version",
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        let field = |f: &str| format!("spec.versions[{i}].{f}");
        if v.get("name")
            .and_then(Value::as_str)
            .is_none_or(|n| !is_dns_label(n))
        {
            causes.push(Cause::required(field("name"), ""));
        }
        match at(v, &["schema", "openAPIV3Schema"]) {
            None => causes.push(Cause::required(
                field("schema.openAPIV3Schema"),
                "schemas are required",
            )),
            Some(s) if s.get("type").and_then(Value::as_str) != Some("object") => {
                causes.push(Cause::required(
                    field("schema.openAPIV3Schema.type"),
                    "must not be empty at the root",
                ));
            }
            Some(_) => {}
        }
    }
    causes
}

/// The immutable parts of a definition.
pub(crate) fn immutable(old: &Value, new: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (path, field) in [
        (&["spec", "group"][..], "spec.group"),
        (&["spec", "names", "plural"][..], "spec.names.plural"),
        (&["spec", "scope"][..], "spec.scope"),
    ] {
        if at(old, path) != at(new, path) {
            causes.push(Cause::invalid(
                field,
                str_at(new, path).unwrap_or_default(),
                "field is immutable",
            ));
        }
    }
    causes
}

fn columns(version: &Value) -> Vec<PrinterColumn> {
    version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(|cols| {
            cols.iter()
                .map(|c| {
                    let s = |k: &str| {
                        c.get(k)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned()
                    };
                    PrinterColumn {
                        name: s("name"),
                        type_: s("type"),
                        format: s("format"),
                        description: s("description"),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                        path: split_path(&s("jsonPath")),
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The resource a definition's storage version serves.
fn resource_of(crd: &Value) -> Option<(ResourceDef, CustomVersion)> {
    let storage = versions(crd)
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))?;
    if storage.get("served").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    version_resource(crd, storage, None)
}

/// The resources of a definition's other served versions, each carried
/// out at `storage_version`.
fn other_versions(crd: &Value, storage_version: &'static str) -> Vec<(ResourceDef, CustomVersion)> {
    versions(crd)
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) != Some(true))
        .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| version_resource(crd, v, Some(storage_version)))
        .collect()
}

/// The resource one version of a definition serves (`storage`: the
/// storage version, for a version that is not it).
fn version_resource(
    crd: &Value,
    storage: &Value,
    storage_version: Option<&'static str>,
) -> Option<(ResourceDef, CustomVersion)> {
    let n = names(crd);
    let version = storage.get("name").and_then(Value::as_str)?;
    let subresources = storage.get("subresources");
    let has_status = subresources.and_then(|s| s.get("status")).is_some();
    let scale = subresources.and_then(|s| s.get("scale")).map(|s| {
        let path = |k: &str| split_path(s.get(k).and_then(Value::as_str).unwrap_or_default());
        ScalePaths {
            spec: path("specReplicasPath"),
            status: path("statusReplicasPath"),
            selector: s
                .get("labelSelectorPath")
                .and_then(Value::as_str)
                .map(split_path),
        }
    });
    let sub_list: &'static [&'static str] = match (has_status, scale.is_some()) {
        (true, true) => &["status", "scale"],
        (true, false) => &["status"],
        (false, true) => &["scale"],
        (false, false) => &[],
    };
    let def = ResourceDef {
        group: intern(&n.group),
        version: intern(version),
        kind: intern(&n.kind),
        plural: intern(&n.plural),
        singular: intern(&n.singular),
        namespaced: str_at(crd, &["spec", "scope"]) == Some("Namespaced"),
        short_names: intern_list(&n.short_names),
        categories: intern_list(&n.categories),
        subresources: sub_list,
        review: false,
        names: NameRule::Subdomain,
        has_status,
        served: true,
        custom: true,
    };
    let custom = CustomVersion {
        crd: meta::name(crd).to_owned(),
        schema: at(storage, &["schema", "openAPIV3Schema"]).cloned(),
        columns: columns(storage),
        list_kind: n.list_kind,
        scale,
        storage_version,
        selectable: storage
            .get("selectableFields")
            .and_then(Value::as_array)
            .map(|fields| {
                fields
                    .iter()
                    .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
                    .map(|p| {
                        let name = p.trim_start_matches('.');
                        (intern(name), split_path(p))
                    })
                    .collect()
            })
            .unwrap_or_default(),
    };
    Some((def, custom))
}

fn condition(type_: &str, status: bool, reason: &str, message: &str) -> Value {
    json!({
        "type": type_,
        "status": if status { "True" } else { "False" },
        "lastTransitionTime": meta::now(),
        "reason": reason,
        "message": message,
    })
}

/// Merge `new` conditions into the stored ones, keeping transition times of
/// conditions whose status did not change.
fn merge_conditions(current: &Value, new: Vec<Value>) -> Value {
    let old = at(current, &["status", "conditions"])
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out: Vec<Value> = old
        .iter()
        .filter(|c| !new.iter().any(|n| n.get("type") == c.get("type")))
        .cloned()
        .collect();
    for mut c in new {
        if let Some(prev) = old.iter().find(|o| o.get("type") == c.get("type"))
            && prev.get("status") == c.get("status")
            && prev.get("reason") == c.get("reason")
        {
            c["lastTransitionTime"] = prev["lastTransitionTime"].clone();
        }
        out.push(c);
    }
    Value::Array(out)
}

/// The names a definition may have and its `NamesAccepted` condition, as
/// kube-apiserver's naming controller decides them: each name it asks for
/// is taken unless it is already its own or another definition of the
/// group has accepted it; a conflict keeps the name it had (the last
/// conflict found names the condition).
fn accept_names(inner: &Inner, index: usize, crd: &Value, n: &Names) -> (Value, Value) {
    let (all, _) = inner.store().list(index, None);
    let mut resources: std::collections::BTreeSet<String> = Default::default();
    let mut kinds: std::collections::BTreeSet<String> = Default::default();
    for other in all.iter().filter(|o| names(&o.object).group == n.group) {
        let accepted = at(&other.object, &["status", "acceptedNames"]);
        let get = |k: &str| {
            accepted
                .and_then(|a| a.get(k))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        resources.insert(get("plural"));
        resources.insert(get("singular"));
        resources.extend(strings(accepted.and_then(|a| a.get("shortNames"))));
        kinds.insert(get("kind"));
        kinds.insert(get("listKind"));
    }
    let current = at(crd, &["status", "acceptedNames"])
        .cloned()
        .unwrap_or_else(|| json!({}));
    let had = |k: &str| current.get(k).and_then(Value::as_str).unwrap_or_default();
    let mut out = current.clone();
    if !out.is_object() {
        out = json!({});
    }
    let mut conflict: Option<(&str, String)> = None;
    // Each name in the naming controller's order: taken, or a conflict
    // (the last one found is reported). `None`: the short names.
    let checks = [
        Some(("plural", &n.plural, &resources, "PluralConflict")),
        Some(("singular", &n.singular, &resources, "SingularConflict")),
        None,
        Some(("kind", &n.kind, &kinds, "KindConflict")),
        Some(("listKind", &n.list_kind, &kinds, "ListKindConflict")),
    ];
    for check in checks {
        let Some((field, wanted, used, reason)) = check else {
            let had_short = strings(current.get("shortNames"));
            if n.short_names == had_short {
                continue;
            }
            let taken: Vec<String> = n
                .short_names
                .iter()
                .filter(|s| !had_short.contains(s) && resources.contains(*s))
                .map(|s| format!("{s:?} is already in use"))
                .collect();
            match taken.as_slice() {
                [] => out["shortNames"] = json!(n.short_names),
                [one] => conflict = Some(("ShortNamesConflict", one.clone())),
                many => {
                    conflict = Some(("ShortNamesConflict", format!("[{}]", many.join(", "))));
                }
            }
            continue;
        };
        if *wanted == had(field) || !used.contains(wanted.as_str()) {
            out[field] = json!(wanted);
        } else {
            conflict = Some((reason, format!("{wanted:?} is already in use")));
        }
    }
    out["categories"] = json!(n.categories);
    // Empty strings and lists are left out, as Go's `omitempty` does (but
    // for plural and kind, which are always written).
    if let Some(map) = out.as_object_mut() {
        map.retain(|k, v| {
            matches!(k.as_str(), "plural" | "kind")
                || !(v.as_str() == Some("")
                    || v.as_array().is_some_and(Vec::is_empty)
                    || v.is_null())
        });
    }
    let condition = match conflict {
        Some((reason, message)) => condition("NamesAccepted", false, reason, &message),
        None => condition("NamesAccepted", true, "NoConflicts", "no conflicts found"),
    };
    (out, condition)
}

/// The objects of a terminating definition, to delete: they stay served
/// meanwhile, so that clients can remove their finalizers (creates are
/// refused). Admission does not write; the caller deletes them, then calls
/// [`finish_if_empty`] to let the definition go once none is left.
#[derive(Debug, Default)]
pub(crate) struct Terminating {
    /// Each object: its resource's index, its namespace (`""` when
    /// cluster-scoped) and its name.
    pub(crate) objects: Vec<(usize, String, String)>,
}

/// Serve a created or updated definition and report it in its status
/// (`NamesAccepted`, `Established`, `acceptedNames`, `storedVersions`); for
/// a terminating one, the objects to delete instead.
pub(crate) fn reconcile(inner: &Inner, name: &str) -> Option<Terminating> {
    let index = crd_index(inner)?;
    let stored = inner.store().get(index, "", name)?;
    let crd = &*stored.object;
    if is_terminating(crd) {
        return Some(terminating(inner, crd));
    }
    let mut conditions = Vec::new();
    let served = resource_of(crd);
    let n = names(crd);
    let (accepted_names, names_condition) = accept_names(inner, index, crd, &n);
    // A built-in resource of the same group, version and plural keeps its
    // name too.
    let builtin_conflict = served.as_ref().is_some_and(|(def, _)| {
        inner
            .defs()
            .find(def.group, def.version, def.plural)
            .is_some_and(|i| {
                let other = inner.defs().get(i);
                !other.custom || inner.defs().custom(i).is_some_and(|c| c.crd != name)
            })
    });
    let names_condition = if builtin_conflict {
        condition(
            "NamesAccepted",
            false,
            "PluralConflict",
            &format!("{:?} is already in use", n.plural),
        )
    } else {
        names_condition
    };
    let accepted = names_condition["status"] == "True";
    match (&served, accepted) {
        (_, false) => {
            conditions.push(names_condition);
            let established = at(crd, &["status", "conditions"])
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c["type"] == "Established"))
                .cloned()
                .unwrap_or_else(|| {
                    condition(
                        "Established",
                        false,
                        "NotAccepted",
                        "not all names are accepted",
                    )
                });
            conditions.push(established);
        }
        (Some((def, custom)), true) => {
            inner.defs().serve(*def, custom.clone(), inner.store());
            let others = other_versions(crd, def.version);
            let mut kept = vec![def.version];
            for (other, custom) in others {
                if inner
                    .defs()
                    .find(other.group, other.version, other.plural)
                    .is_some_and(|i| !inner.defs().get(i).custom)
                {
                    continue;
                }
                kept.push(other.version);
                inner.defs().serve(other, custom, inner.store());
            }
            inner.defs().unserve_versions(name, &kept);
            conditions.push(names_condition);
            conditions.push(condition(
                "Established",
                true,
                "InitialNamesAccepted",
                "the initial names have been accepted",
            ));
        }
        (None, true) => {
            // The storage version is not served: nothing to serve.
            inner.defs().unserve(name);
            conditions.push(names_condition);
        }
    }
    let storage_version = versions(crd)
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name").cloned());
    let _ = inner.store().update::<ApiError>(index, "", name, |cur| {
        let mut next = (*cur.object).clone();
        set_at(
            &mut next,
            &["status", "conditions"],
            merge_conditions(&cur.object, conditions.clone()),
        );
        set_at(
            &mut next,
            &["status", "acceptedNames"],
            accepted_names.clone(),
        );
        let mut stored_versions = strings(at(&next, &["status", "storedVersions"]));
        if let Some(v) = storage_version.as_ref().and_then(Value::as_str)
            && !stored_versions.iter().any(|s| s == v)
        {
            stored_versions.push(v.to_owned());
        }
        set_at(
            &mut next,
            &["status", "storedVersions"],
            json!(stored_versions),
        );
        if next == *cur.object {
            Ok(Mutation::Unchanged)
        } else {
            // The API server's own controllers write the status as
            // `kube-apiserver`, and own what they wrote.
            crate::storage::managed_fields::record_update(
                &mut next,
                Some(&cur.object),
                &crate::storage::managed_fields::Writer {
                    manager: "kube-apiserver",
                    operation: "Update",
                    api_version: "apiextensions.k8s.io/v1",
                    subresource: "status",
                },
                None,
            );
            Ok(Mutation::Replace(next))
        }
    });
    None
}

/// The objects of terminating definition `crd`.
fn terminating(inner: &Inner, crd: &Value) -> Terminating {
    let n = names(crd);
    let mut objects = Vec::new();
    for index in inner.defs().custom_index(&n.group, &n.plural) {
        let (items, _) = inner.store().list(index, None);
        objects.extend(items.into_iter().map(|item| {
            let namespace = str_at(&item.object, &["metadata", "namespace"])
                .unwrap_or_default()
                .to_owned();
            (index, namespace, meta::name(&item.object).to_owned())
        }));
    }
    Terminating { objects }
}

/// Remove the cleanup finalizer of a terminating definition whose objects
/// are all gone (objects with finalizers of their own hold it).
pub(crate) fn finish_if_empty(inner: &Inner, name: &str) {
    let Some(index) = crd_index(inner) else {
        return;
    };
    let Some(stored) = inner.store().get(index, "", name) else {
        return;
    };
    if !is_terminating(&stored.object) {
        return;
    }
    let n = names(&stored.object);
    let remaining: usize = inner
        .defs()
        .custom_index(&n.group, &n.plural)
        .into_iter()
        .map(|i| inner.store().list(i, None).0.len())
        .sum();
    let result = inner.store().update::<ApiError>(index, "", name, |cur| {
        let mut next = (*cur.object).clone();
        if remaining > 0 {
            let message = format!("CustomResource deletion is in progress: {remaining} remaining");
            set_at(
                &mut next,
                &["status", "conditions"],
                merge_conditions(
                    &cur.object,
                    vec![condition(
                        "Terminating",
                        true,
                        "InstanceDeletionInProgress",
                        &message,
                    )],
                ),
            );
            return Ok(if next == *cur.object {
                Mutation::Unchanged
            } else {
                Mutation::Replace(next)
            });
        }
        let finalizers: Vec<String> = meta::finalizers(&next)
            .into_iter()
            .filter(|f| f != CLEANUP_FINALIZER)
            .collect();
        if finalizers.is_empty() {
            return Ok(Mutation::Delete(next));
        }
        set_at(&mut next, &["metadata", "finalizers"], json!(finalizers));
        Ok(Mutation::Replace(next))
    });
    if let Ok((_, true)) = result {
        removed(inner, name, &n.group, &n.plural);
    }
}

/// A definition is gone (also when a client removed its finalizer itself):
/// its resources are no longer served and their objects are deleted.
pub(crate) fn removed(inner: &Inner, name: &str, group: &str, plural: &str) {
    inner.defs().unserve(name);
    for index in inner.defs().custom_index(group, plural) {
        let (items, _) = inner.store().list(index, None);
        for item in items {
            let ns = str_at(&item.object, &["metadata", "namespace"])
                .unwrap_or_default()
                .to_owned();
            let _ = inner
                .store()
                .update::<ApiError>(index, &ns, meta::name(&item.object), |cur| {
                    Ok(Mutation::Delete((*cur.object).clone()))
                });
        }
    }
}

/// After a definition was deleted from the store.
pub(crate) fn definition_deleted(inner: &Inner, crd: &Value) {
    let n = names(crd);
    removed(inner, meta::name(crd), &n.group, &n.plural);
}

/// Creating custom objects stops when their definition terminates.
pub(crate) fn check_creatable(inner: &Inner, def: &ResourceDef) -> Result<(), ApiError> {
    let terminating = crd_index(inner)
        .and_then(|i| inner.store().get(i, "", &crd_name(def)))
        .is_some_and(|s| is_terminating(&s.object));
    if terminating {
        return Err(ApiError::method_not_allowed(
            "create not allowed while custom resource definition is terminating",
        ));
    }
    Ok(())
}

/// Defaulting, pruning and validation of a custom object against its
/// schema: the validation causes, and the warnings about pruned fields
/// (`fieldValidation=Strict` refuses them instead).
pub(crate) fn admit(
    inner: &Inner,
    index: usize,
    obj: &mut Value,
    directive: Directive,
) -> Result<(Vec<Cause>, Vec<String>), ApiError> {
    let Some(custom) = inner.defs().custom(index) else {
        return Ok((Vec::new(), Vec::new()));
    };
    let Some(schema_value) = &custom.schema else {
        return Ok((Vec::new(), Vec::new()));
    };
    let pruned = schema::prune(schema_value, obj, "", true);
    let warnings = field_validation::judge(directive, &inner.defs().get(index), &pruned)?;
    schema::apply_defaults(schema_value, obj);
    let mut causes = Vec::new();
    let mut body = obj.clone();
    if let Some(m) = body.as_object_mut() {
        for field in ["apiVersion", "kind", "metadata"] {
            m.remove(field);
        }
    }
    schema::validate(schema_value, &body, "", &mut causes);
    Ok((causes, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widget_crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]
                }]
            }
        })
    }

    #[test]
    fn a_valid_definition_serves_its_storage_version() {
        let mut crd = widget_crd();
        default_definition(&mut crd);
        assert!(validate_definition(&crd).is_empty());
        assert_eq!(crd["spec"]["names"]["listKind"], "WidgetList");
        let (def, custom) = resource_of(&crd).expect("served");
        assert_eq!(
            (def.group, def.version, def.kind, def.plural),
            ("example.com", "v1", "Widget", "widgets")
        );
        assert_eq!(def.singular, "widget");
        assert_eq!(def.short_names, &["wd"]);
        assert!(def.has_status && def.namespaced && def.custom);
        assert_eq!(custom.columns[0].path, vec!["spec", "size"]);
    }

    #[test]
    fn invalid_definitions_name_their_fields() {
        let mut crd = widget_crd();
        crd["metadata"]["name"] = json!("gadgets.example.com");
        crd["spec"]["scope"] = json!("Galaxy");
        crd["spec"]["versions"][0]["storage"] = json!(false);
        let fields: Vec<String> = validate_definition(&crd)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(fields, vec!["metadata.name", "spec.scope", "spec.versions"]);
        let mut no_schema = widget_crd();
        no_schema["spec"]["versions"][0]
            .as_object_mut()
            .map(|v| v.remove("schema"));
        let causes = validate_definition(&no_schema);
        assert_eq!(causes[0].field, "spec.versions[0].schema.openAPIV3Schema");
    }
}
