//! Field ownership (`metadata.managedFields`), as every write records it.
//!
//! Each manager owns a set of leaf fields. An update (PUT, or a non-apply
//! PATCH) gives its manager the leaves it changed and takes them from the
//! others; server-side apply (the `apply` module beside this one) gives
//! its manager exactly the leaves of its configuration.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::meta::{self, str_at};
use crate::storage::patch::{ListStrategy, list_strategy};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Elem {
    Field(String),
    /// A list item identified by its merge key (JSON of `{key: value}`).
    Key(String),
    /// A set item (JSON of the value).
    Value(String),
}

pub(crate) type Path = Vec<Elem>;
pub(crate) type FieldSet = BTreeSet<Path>;

/// How the lists of an object merge: a custom resource's schema
/// (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`; lists without
/// one are atomic), else the built-in kind's merge keys.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lists<'a> {
    kind: &'a str,
    schema: Option<&'a Value>,
}

impl<'a> Lists<'a> {
    /// The lists of `kind`, from `schema` when it has one (custom resources).
    pub(crate) fn new(kind: &'a str, schema: Option<&'a Value>) -> Self {
        Self { kind, schema }
    }

    pub(crate) fn strategy(&self, names: &[&str]) -> ListStrategy {
        match self.schema {
            Some(schema) => schema_list_strategy(schema, names),
            None => list_strategy(self.kind, names),
        }
    }
}

/// The strategy a structural schema gives the list at `names` (field
/// names from the root, list indexes left out).
pub(crate) fn schema_list_strategy(schema: &Value, names: &[&str]) -> ListStrategy {
    let mut at = schema;
    for name in names {
        while let Some(items) = at.get("items") {
            at = items;
        }
        at = match at
            .get("properties")
            .and_then(|p| p.get(*name))
            .or_else(|| at.get("additionalProperties").filter(|a| a.is_object()))
        {
            Some(next) => next,
            None => return ListStrategy::Atomic,
        };
    }
    match at.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => ListStrategy::MergePrimitive,
        Some("map") => at
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .and_then(|keys| keys.first())
            .and_then(Value::as_str)
            .map_or(ListStrategy::Atomic, |k| {
                ListStrategy::MergeByKey(crate::registry::intern(k))
            }),
        _ => ListStrategy::Atomic,
    }
}

/// Metadata fields the server owns; never tracked.
pub(crate) const SYSTEM_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "generateName",
];

pub(crate) fn field_names(path: &Path) -> Vec<&str> {
    path.iter()
        .filter_map(|e| match e {
            Elem::Field(f) => Some(f.as_str()),
            _ => None,
        })
        .collect()
}

/// Objects structured-merge-diff treats as atomic (one field): label
/// selectors (`+structType=atomic`) and a Service's selector map
/// (`+mapType=atomic`).
pub(crate) const ATOMIC_OBJECTS: &[&str] = &[
    "selector",
    "podSelector",
    "namespaceSelector",
    "labelSelector",
];

/// The leaf fields of `value` at `path`.
pub(crate) fn collect(lists: Lists<'_>, value: &Value, path: &mut Path, out: &mut FieldSet) {
    match value {
        Value::Object(_) if matches!(path.last(), Some(Elem::Field(f)) if ATOMIC_OBJECTS.contains(&f.as_str())) =>
        {
            out.insert(path.clone());
        }
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                if path.is_empty() && matches!(k.as_str(), "apiVersion" | "kind") {
                    continue;
                }
                if path.len() == 1
                    && path[0] == Elem::Field("metadata".into())
                    && SYSTEM_META.contains(&k.as_str())
                {
                    continue;
                }
                path.push(Elem::Field(k.clone()));
                collect(lists, v, path, out);
                path.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let names = field_names(path);
            match lists.strategy(&names) {
                ListStrategy::Atomic => {
                    out.insert(path.clone());
                }
                ListStrategy::MergePrimitive => {
                    for item in items {
                        path.push(Elem::Value(item.to_string()));
                        out.insert(path.clone());
                        path.pop();
                    }
                }
                ListStrategy::MergeByKey(key) => {
                    let keys = map_keys(lists.kind, &names, key);
                    for item in items {
                        let Some(id) = item_key(&keys, item) else {
                            out.insert(path.clone());
                            continue;
                        };
                        path.push(Elem::Key(id));
                        collect(lists, item, path, out);
                        path.pop();
                    }
                }
            }
        }
        _ => {
            if !path.is_empty() {
                out.insert(path.clone());
            }
        }
    }
}

/// Lists structured-merge-diff keys by more than their strategic-merge
/// key: ports are told apart by port and protocol.
pub(crate) fn map_keys(kind: &str, names: &[&str], key: &'static str) -> Vec<&'static str> {
    match (kind, names) {
        ("Service", ["spec", "ports"]) => vec!["port", "protocol"],
        (
            _,
            [
                ..,
                "containers" | "initContainers" | "ephemeralContainers",
                "ports",
            ],
        ) => {
            vec!["containerPort", "protocol"]
        }
        _ => vec![key],
    }
}

/// The identity of a keyed list item: the JSON object of its key fields
/// (a missing protocol is the default, TCP), or `None` without its key.
pub(crate) fn item_key(keys: &[&str], item: &Value) -> Option<String> {
    let mut id = Map::new();
    for &k in keys {
        let v = match item.get(k) {
            Some(v) => v.clone(),
            None if k == "protocol" => json!("TCP"),
            None => return None,
        };
        id.insert(k.to_owned(), v);
    }
    Some(Value::Object(id).to_string())
}

/// Whether a list item has the identity `key` (see `item_key`).
pub(crate) fn has_key(item: &Value, key: &Map<String, Value>) -> bool {
    !key.is_empty()
        && key.iter().all(|(k, v)| match item.get(k) {
            Some(found) => found == v,
            None => k == "protocol" && v == "TCP",
        })
}

pub(crate) fn fields_of(lists: Lists<'_>, value: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    collect(lists, value, &mut Vec::new(), &mut out);
    out
}

/// The value at a path, if present.
pub(crate) fn lookup<'a>(root: &'a Value, path: &Path) -> Option<&'a Value> {
    let mut cur = root;
    for elem in path {
        match elem {
            Elem::Field(f) => {
                cur = cur.get(f)?;
            }
            Elem::Key(k) => {
                let key: Map<String, Value> = serde_json::from_str(k).ok()?;
                cur = cur.as_array()?.iter().find(|i| has_key(i, &key))?;
            }
            Elem::Value(v) => {
                let value: Value = serde_json::from_str(v).ok()?;
                cur = cur.as_array()?.iter().find(|i| **i == value)?;
            }
        }
    }
    Some(cur)
}

/// Remove the value at a path.
pub(crate) fn remove_path(root: &mut Value, path: &Path) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = root;
    for elem in parents {
        let next = match elem {
            Elem::Field(f) => cur.get_mut(f),
            Elem::Key(k) => {
                let key: Map<String, Value> = match serde_json::from_str(k) {
                    Ok(k) => k,
                    Err(_) => return,
                };
                cur.as_array_mut()
                    .and_then(|a| a.iter_mut().find(|i| has_key(i, &key)))
            }
            Elem::Value(_) => return,
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match last {
        Elem::Field(f) => {
            if let Some(m) = cur.as_object_mut() {
                m.remove(f);
            }
        }
        Elem::Key(k) => {
            if let (Ok(key), Some(list)) = (
                serde_json::from_str::<Map<String, Value>>(k),
                cur.as_array_mut(),
            ) {
                list.retain(|i| !has_key(i, &key));
            }
        }
        Elem::Value(v) => {
            if let (Ok(value), Some(list)) = (serde_json::from_str::<Value>(v), cur.as_array_mut())
            {
                list.retain(|i| *i != value);
            }
        }
    }
}

/// How an entry's field set is written (see `mark_granular_nodes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    Apply,
    Update,
    /// An update through the status subresource.
    StatusUpdate,
}

/// The `fieldsV1` form of a manager's field set.
pub(crate) fn to_fields_v1(set: &FieldSet, written: Written) -> Value {
    let paths: Vec<&[Elem]> = set.iter().map(Vec::as_slice).collect();
    let mut root = fields_tree(&paths, 0);
    strip_leaf_dots(&mut root);
    mark_granular_nodes(&mut root, written);
    Value::Object(root)
}

/// The `fieldsV1` tree below `depth` of `paths`, which share their first
/// `depth` elements and are sorted (so the paths through each child are
/// side by side): each node's key is written once, and a node where a path
/// ends gets `"."`.
pub(crate) fn fields_tree(paths: &[&[Elem]], depth: usize) -> Map<String, Value> {
    let mut map = Map::new();
    let mut i = 0;
    while i < paths.len() {
        let Some(elem) = paths[i].get(depth) else {
            map.insert(".".into(), json!({}));
            i += 1;
            continue;
        };
        let end = i + paths[i..]
            .iter()
            .take_while(|p| p.get(depth) == Some(elem))
            .count();
        let key = match elem {
            Elem::Field(f) => format!("f:{f}"),
            Elem::Key(k) => format!("k:{k}"),
            Elem::Value(v) => format!("v:{v}"),
        };
        map.insert(key, Value::Object(fields_tree(&paths[i..end], depth + 1)));
        i = end;
    }
    map
}

/// Maps of built-in kinds that structured-merge-diff treats as granular
/// (`map[string]X`, not atomic), and optional structs (pointers in the Go
/// types): both absent from an empty object, so an update that adds them
/// owns their node too.
pub(crate) const GRANULAR_MAPS: &[&str] = &[
    "f:labels",
    "f:annotations",
    "f:data",
    "f:binaryData",
    "f:stringData",
    "f:nodeSelector",
    "f:matchLabels",
    "f:capacity",
    "f:allocatable",
    "f:limits",
    "f:requests",
    "f:hard",
    "f:parameters",
    "f:conversion",
    "f:sessionAffinityConfig",
    "f:clientIP",
    "f:securityContext",
    "f:affinity",
    "f:nodeAffinity",
    "f:podAffinity",
    "f:podAntiAffinity",
    "f:livenessProbe",
    "f:readinessProbe",
    "f:startupProbe",
    "f:httpGet",
    "f:tcpSocket",
    "f:grpc",
    "f:lifecycle",
    "f:preStop",
    "f:postStart",
    "f:rollingUpdate",
    "f:valueFrom",
    "f:fieldRef",
    "f:resourceFieldRef",
    "f:configMapKeyRef",
    "f:secretKeyRef",
    "f:configMapRef",
    "f:secretRef",
    "f:emptyDir",
    "f:hostPath",
    "f:configMap",
    "f:secret",
    "f:projected",
    "f:downwardAPI",
    "f:persistentVolumeClaim",
];

/// Write `"."` where kube-apiserver's structured-merge-diff records the
/// node itself as owned beside its children. An update owns the nodes it
/// adds that an empty object lacks: lists (`k:` / `v:` children), keyed
/// items, granular maps and optional structs; a status update finds its
/// lists already there (created empty with the object). An apply owns its
/// configuration's leaves and keyed items only. Only the written form
/// changes: reading ignores a `"."` beside children (see `from_fields_v1`),
/// since the harness's sets own leaves.
pub(crate) fn mark_granular_nodes(map: &mut Map<String, Value>, written: Written) {
    for (key, value) in map.iter_mut() {
        let Value::Object(child) = value else {
            continue;
        };
        if child.is_empty() {
            continue;
        }
        let list = child
            .keys()
            .any(|k| k.starts_with("k:") || k.starts_with("v:"));
        let owned = match written {
            Written::Apply => key.starts_with("k:"),
            Written::Update => {
                key.starts_with("k:") || list || GRANULAR_MAPS.contains(&key.as_str())
            }
            Written::StatusUpdate => {
                key.starts_with("k:") || (!list && GRANULAR_MAPS.contains(&key.as_str()))
            }
        };
        if owned {
            child.entry(".").or_insert_with(|| json!({}));
        }
        mark_granular_nodes(child, written);
    }
}

/// Leaves are written `{}`; `"."` marks an owned node that also has children.
pub(crate) fn strip_leaf_dots(map: &mut Map<String, Value>) {
    for v in map.values_mut() {
        if let Value::Object(child) = v {
            if child.len() == 1 && child.contains_key(".") {
                child.clear();
            } else {
                strip_leaf_dots(child);
            }
        }
    }
}

pub(crate) fn from_fields_v1(value: &Value) -> FieldSet {
    fn walk(map: &Map<String, Value>, path: &mut Path, out: &mut FieldSet) {
        let children: Vec<_> = map.iter().filter(|(k, _)| k.as_str() != ".").collect();
        // A `"."` beside children (a list, a keyed item, a granular map) is
        // not a field of its own here: the harness owns leaves.
        if children.is_empty() && !path.is_empty() {
            out.insert(path.clone());
        }
        for (k, v) in children {
            let elem = if let Some(f) = k.strip_prefix("f:") {
                Elem::Field(f.to_owned())
            } else if let Some(key) = k.strip_prefix("k:") {
                Elem::Key(key.to_owned())
            } else if let Some(val) = k.strip_prefix("v:") {
                Elem::Value(val.to_owned())
            } else {
                continue;
            };
            path.push(elem);
            if let Value::Object(m) = v {
                walk(m, path, out);
            }
            path.pop();
        }
    }
    let mut out = FieldSet::new();
    if let Value::Object(m) = value {
        walk(m, &mut Vec::new(), &mut out);
    }
    out
}

/// A manager's entry in `managedFields`.
#[derive(Debug, Clone)]
pub(crate) struct Entry<'a> {
    pub(crate) manager: String,
    pub(crate) operation: String,
    pub(crate) api_version: String,
    pub(crate) time: String,
    pub(crate) subresource: String,
    pub(crate) fields: FieldSet,
    /// The stored `fieldsV1` that `fields` was read from, while `fields`
    /// is unchanged: written back as it is instead of rendered again (the
    /// server wrote it, so it is already `fields` rendered).
    pub(crate) rendered: Option<&'a Value>,
}

impl Entry<'_> {
    /// How the entry's fields were written, which decides the nodes its
    /// `fieldsV1` marks as owned.
    pub(crate) fn written(&self) -> Written {
        match (self.operation.as_str(), self.subresource.as_str()) {
            ("Apply", _) => Written::Apply,
            (_, "status") => Written::StatusUpdate,
            _ => Written::Update,
        }
    }

    /// Keep only the fields `keep` accepts.
    pub(crate) fn retain_fields(&mut self, keep: impl FnMut(&Path) -> bool) {
        let before = self.fields.len();
        self.fields.retain(keep);
        if self.fields.len() != before {
            self.rendered = None;
        }
    }
}

pub(crate) fn read_entries(obj: &Value) -> Vec<Entry<'_>> {
    meta::meta(obj)
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|e| Entry {
                    manager: e
                        .get("manager")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    operation: e
                        .get("operation")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    api_version: e
                        .get("apiVersion")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    time: e
                        .get("time")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    subresource: e
                        .get("subresource")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
                    rendered: e.get("fieldsV1"),
                })
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn write_entries(obj: &mut Value, entries: &[Entry]) {
    // In kube-apiserver's order: by operation (Apply before Update), time,
    // manager, version and subresource.
    let mut sorted: Vec<&Entry<'_>> = entries.iter().filter(|e| !e.fields.is_empty()).collect();
    sorted.sort_by(|a, b| {
        (
            &a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    let list: Vec<Value> = sorted
        .into_iter()
        .map(|e| {
            let mut v = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": e
                    .rendered
                    .cloned()
                    .unwrap_or_else(|| to_fields_v1(&e.fields, e.written())),
            });
            if !e.subresource.is_empty() {
                v["subresource"] = json!(e.subresource);
            }
            v
        })
        .collect();
    if let Some(m) = meta::meta_mut(obj) {
        if list.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), Value::Array(list));
        }
    }
}

pub(crate) fn kind_of(obj: &Value) -> String {
    str_at(obj, &["kind"]).unwrap_or_default().to_owned()
}

/// Who records an update, and through which subresource (`""`: the
/// object itself).
pub(crate) struct Writer<'a> {
    /// The field manager.
    pub(crate) manager: &'a str,
    /// `Update` (or `Apply`, recorded by `server_side_apply`).
    pub(crate) operation: &'a str,
    /// The version the writer sent.
    pub(crate) api_version: &'a str,
    /// `status`, `scale`, or empty.
    pub(crate) subresource: &'a str,
}

/// Record an update (create when `old` is `None`): the manager owns the
/// leaves it changed; other managers lose them.
pub(crate) fn record_update(
    new: &mut Value,
    old: Option<&Value>,
    writer: &Writer<'_>,
    schema: Option<&Value>,
) {
    let Writer {
        manager,
        operation,
        api_version,
        subresource,
    } = *writer;
    let same = |e: &Entry<'_>| {
        e.manager == manager && e.operation == operation && e.subresource == subresource
    };
    let kind = kind_of(new);
    let new_fields = fields_of(Lists::new(&kind, schema), new);
    let changed: FieldSet = match old {
        None => new_fields.clone(),
        Some(old) => new_fields
            .iter()
            .filter(|p| lookup(new, p) != lookup(old, p))
            .cloned()
            .collect(),
    };
    // What the server sets itself (allocations, its own finalizers) is
    // nobody's field, as kube-apiserver records managers before its
    // strategy runs.
    let changed: FieldSet = changed
        .into_iter()
        .filter(|p| !server_set(&kind, p))
        .collect();
    let mut entries = old.map(read_entries).unwrap_or_default();
    // Removed leaves are owned by nobody.
    for e in &mut entries {
        e.retain_fields(|p| new_fields.contains(p));
    }
    if !changed.is_empty() {
        for e in &mut entries {
            if !same(e) {
                e.retain_fields(|p| !changed.contains(p));
            }
        }
        match entries.iter_mut().find(|e| same(e)) {
            Some(e) => {
                e.fields.extend(changed);
                e.rendered = None;
                e.time = meta::now();
            }
            None => entries.push(Entry {
                manager: manager.to_owned(),
                operation: operation.to_owned(),
                api_version: api_version.to_owned(),
                time: meta::now(),
                subresource: subresource.to_owned(),
                fields: changed,
                rendered: None,
            }),
        }
    }
    write_entries(new, &entries);
}

/// Whether `path` of a `kind` object is set by the server, not a client.
pub(crate) fn server_set(kind: &str, path: &Path) -> bool {
    let names = field_names(path);
    match kind {
        "Service" => {
            matches!(
                names.as_slice(),
                [
                    "spec",
                    "clusterIP"
                        | "clusterIPs"
                        | "ipFamilies"
                        | "ipFamilyPolicy"
                        | "healthCheckNodePort",
                    ..
                ] | ["spec", "ports", "nodePort"]
            ) || (names.as_slice() == ["status", "loadBalancer"] && path.len() == 2)
        }
        "Namespace" => matches!(
            names.as_slice(),
            ["spec", "finalizers", ..] | ["status", ..]
        ),
        _ => false,
    }
}

pub(crate) fn render(path: &Path) -> String {
    let mut s = String::new();
    for e in path {
        match e {
            Elem::Field(f) => {
                s.push('.');
                s.push_str(f);
            }
            Elem::Key(k) => {
                let key: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
                let parts: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
                s.push_str(&format!("[{}]", parts.join(",")));
            }
            Elem::Value(v) => s.push_str(&format!("[={v}]")),
        }
    }
    s
}
