//! JSON patch, JSON merge patch and strategic merge patch.
//!
//! Strategic merge patch follows the patch strategies and merge keys of the
//! core types (`patchStrategy` / `patchMergeKey` in the Go types): lists of
//! conditions and node addresses merge by `type`; containers, env, volumes
//! by `name`; ports by `containerPort` / `port`; owner references by `uid`;
//! finalizers and pod CIDRs merge as sets; every other list (taints,
//! tolerations, ...) is replaced. The `$patch`, `$retainKeys`,
//! `$deleteFromPrimitiveList/` and `$setElementOrder/` directives are
//! honoured.

use serde_json::{Map, Value, json};

/// How a list field merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListStrategy {
    /// The patch replaces the list.
    Atomic,
    /// Elements merge by this key.
    MergeByKey(&'static str),
    /// A list of scalars merged as a set.
    MergePrimitive,
}

/// The strategy of the list at `path` (field names from the object root,
/// list indexes omitted) of an object of `kind`.
pub(crate) fn list_strategy(kind: &str, path: &[&str]) -> ListStrategy {
    use ListStrategy::*;
    match path {
        ["metadata", "finalizers"] => MergePrimitive,
        ["metadata", "ownerReferences"] => MergeByKey("uid"),
        ["status", "conditions"] => MergeByKey("type"),
        _ => match (kind, path) {
            (
                "Pod",
                [
                    "spec",
                    "containers" | "initContainers" | "ephemeralContainers",
                ],
            ) => MergeByKey("name"),
            (
                "Pod",
                [
                    "spec",
                    "containers" | "initContainers" | "ephemeralContainers",
                    field,
                ],
            ) => match *field {
                "env" => MergeByKey("name"),
                "ports" => MergeByKey("containerPort"),
                "volumeMounts" => MergeByKey("mountPath"),
                "volumeDevices" => MergeByKey("devicePath"),
                "resizePolicy" => MergeByKey("resourceName"),
                _ => Atomic,
            },
            (
                "Pod",
                [
                    "spec",
                    "volumes" | "imagePullSecrets" | "resourceClaims" | "schedulingGates",
                ],
            ) => MergeByKey("name"),
            ("Pod", ["spec", "hostAliases"]) => MergeByKey("ip"),
            ("Pod", ["spec", "topologySpreadConstraints"]) => MergeByKey("topologyKey"),
            ("Pod", ["status", "podIPs" | "hostIPs"]) => MergeByKey("ip"),
            ("Node", ["spec", "podCIDRs"]) => MergePrimitive,
            ("Node", ["status", "addresses"]) => MergeByKey("type"),
            ("Service", ["spec", "ports"]) => MergeByKey("port"),
            ("ServiceAccount", ["secrets"]) => MergeByKey("name"),
            _ => Atomic,
        },
    }
}

/// Why a JSON patch was not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum JsonPatchError {
    /// The document is not a list of operations (kube-apiserver: 400).
    #[error("invalid JSON patch: {0}")]
    Decode(String),
    /// An operation is malformed or does not apply (kube-apiserver: 422).
    #[error("{0}")]
    Apply(String),
}

/// Apply an RFC 6902 JSON patch as kube-apiserver applies it (with
/// evanphx/json-patch v4): all of it, or nothing (`target` is left as it
/// was when an operation fails). Where that library departs from the RFC,
/// this follows it: a `test` of a missing member against `null` passes (so
/// kube-runtime's finalizer helper can add the first finalizer); `add`,
/// `replace` and `test` without a value use `null`; a `replace` of a
/// missing member of an object adds it; a `copy` from a missing member
/// copies `null`.
pub(crate) fn json_patch(target: &mut Value, patch: &Value) -> Result<(), JsonPatchError> {
    let Some(ops) = patch.as_array() else {
        return Err(JsonPatchError::Decode(
            "a JSON patch is a list of operations".to_owned(),
        ));
    };
    if let Some(other) = ops.iter().find(|op| !op.is_object()) {
        return Err(JsonPatchError::Decode(format!(
            "an operation must be an object, not {other}"
        )));
    }
    // On a copy, without json-patch's own undo: its undo panics when an
    // operation it undoes cannot be reversed (a `move` of a value into
    // itself after an earlier `move`; found by `cargo xtask fuzz`).
    let mut patched = target.clone();
    for (index, raw) in ops.iter().enumerate() {
        let op = as_kube_apiserver_applies(raw, &patched);
        let op: json_patch::PatchOperation = serde_json::from_value(op)
            .map_err(|e| JsonPatchError::Apply(format!("operation '/{index}' is invalid: {e}")))?;
        if let json_patch::PatchOperation::Test(test) = &op
            && test.value.is_null()
            && patched.pointer(&test.path.to_string()).is_none()
        {
            continue;
        }
        json_patch::patch_unsafe(&mut patched, std::slice::from_ref(&op)).map_err(|e| {
            // The operation's position in the whole patch, as one call reports it.
            JsonPatchError::Apply(e.to_string().replacen(
                "operation '/0'",
                &format!("operation '/{index}'"),
                1,
            ))
        })?;
    }
    *target = patched;
    Ok(())
}

/// One operation rewritten into the RFC operation that evanphx/json-patch
/// v4 carries out for it on `doc`.
fn as_kube_apiserver_applies(raw: &Value, doc: &Value) -> Value {
    let mut op = raw.clone();
    let kind = op
        .get("op")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let str_field =
        |op: &Value, field: &str| op.get(field).and_then(Value::as_str).map(str::to_owned);
    if let Some(m) = op.as_object_mut() {
        if matches!(kind.as_str(), "add" | "replace" | "test") {
            m.entry("value").or_insert(Value::Null);
        }
        for field in ["path", "from"] {
            if let Some(Value::String(pointer)) = m.get_mut(field) {
                *pointer = indices_as_go_reads_them(doc, pointer);
            }
        }
    }
    match kind.as_str() {
        "replace" => {
            if let Some(path) = str_field(&op, "path")
                && missing_member_of_an_object(doc, &path)
            {
                op["op"] = json!("add");
            }
        }
        "copy" => {
            if let (Some(from), Some(path)) = (str_field(&op, "from"), str_field(&op, "path"))
                && doc.pointer(&from).is_none()
            {
                op = json!({"op": "add", "path": path, "value": null});
            }
        }
        _ => {}
    }
    op
}

/// `pointer` with each index into a list read as Go's `strconv.Atoi` reads
/// it (`01` is `1`), where the RFC refuses leading zeros.
fn indices_as_go_reads_them(doc: &Value, pointer: &str) -> String {
    let mut node = Some(doc);
    let mut out = String::with_capacity(pointer.len());
    for token in pointer.split('/').skip(1) {
        let token = match node {
            Some(Value::Array(_))
                if token.len() > 1
                    && token.starts_with('0')
                    && token.bytes().all(|b| b.is_ascii_digit()) =>
            {
                let trimmed = token.trim_start_matches('0');
                if trimmed.is_empty() { "0" } else { trimmed }
            }
            _ => token,
        };
        node = node.and_then(|n| match n {
            Value::Array(items) => token.parse::<usize>().ok().and_then(|i| items.get(i)),
            Value::Object(map) => map.get(&token.replace("~1", "/").replace("~0", "~")),
            _ => None,
        });
        out.push('/');
        out.push_str(token);
    }
    out
}

/// Whether `path` names a member an existing object lacks.
fn missing_member_of_an_object(doc: &Value, path: &str) -> bool {
    let Some((parent, _)) = path.rsplit_once('/') else {
        return false;
    };
    doc.pointer(parent).is_some_and(Value::is_object) && doc.pointer(path).is_none()
}

/// Apply an RFC 7386 JSON merge patch.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) -> Result<(), String> {
    if !patch.is_object() {
        return Err("a merge patch must be a JSON object".to_owned());
    }
    json_patch::merge(target, patch);
    Ok(())
}

/// Apply a strategic merge patch to an object of `kind`.
pub(crate) fn strategic_merge(kind: &str, target: &mut Value, patch: &Value) -> Result<(), String> {
    let Value::Object(patch) = patch else {
        return Err("a strategic merge patch must be a JSON object".to_owned());
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let mut path = Vec::new();
    merge_map(kind, target, patch, &mut path)
}

/// A copy of `v` without `$`-directives (for values inserted whole).
fn clean(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), clean(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|e| !e.as_object().is_some_and(|m| m.contains_key("$patch")))
                .map(clean)
                .collect(),
        ),
        other => other.clone(),
    }
}

fn merge_map(
    kind: &str,
    target: &mut Value,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
) -> Result<(), String> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *target = clean(&Value::Object(patch.clone()));
            return Ok(());
        }
        Some("delete") => {
            *target = Value::Null;
            return Ok(());
        }
        Some("merge") | None => {}
        Some(other) => return Err(format!("unknown patch type {other:?}")),
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let mut orders: Vec<(String, Vec<Value>)> = Vec::new();
    for (key, value) in patch {
        if key == "$patch" || key == "$retainKeys" {
            continue;
        }
        if let Some(field) = key.strip_prefix("$setElementOrder/") {
            let order = value
                .as_array()
                .ok_or_else(|| format!("{key} must be a list"))?
                .clone();
            orders.push((field.to_owned(), order));
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            let remove = value
                .as_array()
                .ok_or_else(|| format!("{key} must be a list"))?;
            let map = target.as_object_mut().ok_or("target is not an object")?;
            if let Some(Value::Array(list)) = map.get_mut(field) {
                list.retain(|v| !remove.contains(v));
            }
            continue;
        }
        if key.starts_with('$') {
            return Err(format!("unknown directive {key:?}"));
        }
        let map = target.as_object_mut().ok_or("target is not an object")?;
        match value {
            Value::Null => {
                map.remove(key);
            }
            Value::Object(sub) => {
                path.push(key.clone());
                let entry = map.entry(key.clone()).or_insert(Value::Null);
                merge_map(kind, entry, sub, path)?;
                if entry.is_null() {
                    map.remove(key);
                }
                path.pop();
            }
            Value::Array(items) => {
                path.push(key.clone());
                let names: Vec<&str> = path.iter().map(String::as_str).collect();
                let strategy = list_strategy(kind, &names);
                let entry = map.entry(key.clone()).or_insert(Value::Array(Vec::new()));
                merge_list(kind, strategy, entry, items, path)?;
                path.pop();
            }
            scalar => {
                map.insert(key.clone(), scalar.clone());
            }
        }
    }
    if let Some(Value::Array(keep)) = patch.get("$retainKeys") {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        if let Some(map) = target.as_object_mut() {
            map.retain(|k, _| keep.contains(&k.as_str()));
        }
    }
    for (field, order) in orders {
        let names: Vec<String> = path.iter().cloned().chain([field.clone()]).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let strategy = list_strategy(kind, &names);
        if let Some(Value::Array(list)) = target.get_mut(&field) {
            reorder(list, &order, strategy);
        }
    }
    Ok(())
}

fn key_of<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object().and_then(|m| m.get(key))
}

fn reorder(list: &mut [Value], order: &[Value], strategy: ListStrategy) {
    let position = |v: &Value| -> usize {
        order
            .iter()
            .position(|o| match strategy {
                ListStrategy::MergeByKey(k) => {
                    key_of(o, k).is_some() && key_of(o, k) == key_of(v, k)
                }
                _ => o == v,
            })
            .unwrap_or(usize::MAX)
    };
    list.sort_by_key(|v| position(v));
}

fn merge_list(
    kind: &str,
    strategy: ListStrategy,
    target: &mut Value,
    items: &[Value],
    path: &mut Vec<String>,
) -> Result<(), String> {
    let replace_all = items
        .iter()
        .any(|e| key_of(e, "$patch").and_then(Value::as_str) == Some("replace"));
    if replace_all || !target.is_array() {
        *target = clean(&Value::Array(items.to_vec()));
        return Ok(());
    }
    match strategy {
        ListStrategy::Atomic => *target = clean(&Value::Array(items.to_vec())),
        ListStrategy::MergePrimitive => {
            let list = target.as_array_mut().ok_or("target is not a list")?;
            let original = list.clone();
            for item in items {
                if !list.contains(item) {
                    list.push(item.clone());
                }
            }
            let merged = std::mem::take(list);
            *list = in_patch_order(merged, items, &original, |v| Some(v.clone()));
        }
        ListStrategy::MergeByKey(key) => {
            let list = target.as_array_mut().ok_or("target is not a list")?;
            let original = list.clone();
            for item in items {
                let Some(id) = key_of(item, key).cloned() else {
                    return Err(format!(
                        "map: {item} does not contain declared merge key: {key}"
                    ));
                };
                let existing = list.iter().position(|e| key_of(e, key) == Some(&id));
                if key_of(item, "$patch").and_then(Value::as_str) == Some("delete") {
                    if let Some(i) = existing {
                        list.remove(i);
                    }
                    continue;
                }
                match existing {
                    Some(i) => {
                        let sub = item.as_object().ok_or("list element is not an object")?;
                        merge_map(kind, &mut list[i], sub, path)?;
                    }
                    None => list.push(clean(item)),
                }
            }
            let merged = std::mem::take(list);
            *list = in_patch_order(merged, items, &original, |v| key_of(v, key).cloned());
        }
    }
    Ok(())
}

/// The order kube-apiserver gives a merged list: the items the patch
/// names, in the patch's order, with the server's other items placed
/// among them where the live list had them relative to each other, and
/// before a patch item only when the live list had them before it (so
/// items new to the list come first).
fn in_patch_order(
    merged: Vec<Value>,
    patch: &[Value],
    original: &[Value],
    id: impl Fn(&Value) -> Option<Value>,
) -> Vec<Value> {
    let position = |list: &[Value], item: &Value| {
        let wanted = id(item);
        list.iter()
            .position(|e| wanted.is_some() && id(e) == wanted)
    };
    let (mut named, server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|item| position(patch, item).is_some());
    named.sort_by_key(|item| position(patch, item));
    let mut out = Vec::with_capacity(named.len() + server_only.len());
    let (mut left, mut right) = (
        server_only.into_iter().peekable(),
        named.into_iter().peekable(),
    );
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (position(original, l), position(original, r)),
                (Some(a), Some(b)) if a < b
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn smp(kind: &str, mut target: Value, patch: Value) -> Value {
        strategic_merge(kind, &mut target, &patch).unwrap();
        target
    }

    #[test]
    fn items_new_to_a_list_come_first() {
        let node = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let out = smp(
            "Node",
            node,
            json!({"status": {"conditions": [{"type": "NetworkUnavailable", "status": "False"}]}}),
        );
        assert_eq!(
            out["status"]["conditions"],
            json!([
                {"type": "NetworkUnavailable", "status": "False"},
                {"type": "Ready", "status": "True"}
            ])
        );
    }

    #[test]
    fn conditions_merge_by_type() {
        let node = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "NetworkUnavailable", "status": "True"}
        ]}});
        let out = smp(
            "Node",
            node,
            json!({"status": {"conditions": [
                {"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated"}
            ]}}),
        );
        assert_eq!(
            out["status"]["conditions"],
            json!([
                {"type": "Ready", "status": "True"},
                {"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated"}
            ])
        );
    }

    #[test]
    fn taints_are_replaced_and_finalizers_merged() {
        let node = json!({"metadata": {"finalizers": ["a"]}, "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}});
        let out = smp(
            "Node",
            node,
            json!({"metadata": {"finalizers": ["b", "a"]}, "spec": {"taints": [{"key": "y", "effect": "NoSchedule"}]}}),
        );
        assert_eq!(
            out["spec"]["taints"],
            json!([{"key": "y", "effect": "NoSchedule"}])
        );
        // The patch's order, as kube-apiserver merges it.
        assert_eq!(out["metadata"]["finalizers"], json!(["b", "a"]));
    }

    #[test]
    fn containers_and_env_by_name_with_delete_directive() {
        let pod = json!({"spec": {"containers": [
            {"name": "app", "image": "a:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
            {"name": "side", "image": "s:1"}
        ]}});
        let out = smp(
            "Pod",
            pod,
            json!({"spec": {"containers": [
                {"name": "app", "image": "a:2", "env": [{"name": "B", "$patch": "delete"}, {"name": "C", "value": "3"}]},
                {"name": "side", "$patch": "delete"}
            ]}}),
        );
        assert_eq!(
            out["spec"]["containers"],
            json!([
                // New items first, as kube-apiserver orders them.
                {"name": "app", "image": "a:2", "env": [{"name": "C", "value": "3"}, {"name": "A", "value": "1"}]}
            ])
        );
    }

    #[test]
    fn directives() {
        let obj =
            json!({"metadata": {"finalizers": ["a", "b", "c"], "labels": {"x": "1", "y": "2"}}});
        let out = smp(
            "Pod",
            obj.clone(),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}),
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "c"]));
        let out = smp(
            "Pod",
            obj.clone(),
            json!({"metadata": {"labels": {"$patch": "replace", "z": "3"}}}),
        );
        assert_eq!(out["metadata"]["labels"], json!({"z": "3"}));
        let out = smp(
            "Pod",
            obj.clone(),
            json!({"metadata": {"labels": {"y": null}}}),
        );
        assert_eq!(out["metadata"]["labels"], json!({"x": "1"}));
        let out = smp(
            "Pod",
            obj.clone(),
            json!({"metadata": {"$setElementOrder/finalizers": ["c", "a", "b"]}}),
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["c", "a", "b"]));
        let out = smp(
            "Pod",
            obj.clone(),
            json!({"metadata": {"labels": {"$retainKeys": ["y"], "y": "5"}}}),
        );
        assert_eq!(out["metadata"]["labels"], json!({"y": "5"}));
        let out = smp(
            "Pod",
            obj,
            json!({"metadata": {"labels": {"$patch": "delete"}}}),
        );
        assert!(out["metadata"].get("labels").is_none());
        let mut t = json!({});
        assert!(strategic_merge("Pod", &mut t, &json!({"$bogus": 1})).is_err());
        assert!(strategic_merge("Pod", &mut t, &json!([1])).is_err());
    }

    #[test]
    fn owner_references_by_uid_and_replace_list() {
        let obj = json!({"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}, "spec": {"ports": [{"port": 80, "name": "http"}]}});
        let out = smp(
            "Service",
            obj,
            json!({
                "metadata": {"ownerReferences": [{"uid": "2", "name": "b"}]},
                "spec": {"ports": [{"$patch": "replace"}, {"port": 443}]}
            }),
        );
        assert_eq!(
            out["metadata"]["ownerReferences"].as_array().unwrap().len(),
            2
        );
        assert_eq!(out["spec"]["ports"], json!([{"port": 443}]));
    }

    #[test]
    fn json_and_merge_patches() {
        let mut v = json!({"a": 1, "b": {"c": 2}});
        json_patch(&mut v, &json!([{"op": "test", "path": "/a", "value": 1}, {"op": "replace", "path": "/a", "value": 5}])).unwrap();
        assert_eq!(v["a"], 5);
        assert!(json_patch(&mut v, &json!([{"op": "test", "path": "/a", "value": 1}])).is_err());
        assert!(matches!(
            json_patch(&mut v, &json!({"op": "add"})),
            Err(JsonPatchError::Decode(_))
        ));
        // A missing member tests equal to null, as in kube-apiserver.
        let mut v = json!({"metadata": {}});
        json_patch(
            &mut v,
            &json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                    {"op": "add", "path": "/metadata/finalizers", "value": ["a/b"]}]),
        )
        .unwrap();
        assert_eq!(v, json!({"metadata": {"finalizers": ["a/b"]}}));
        let err = json_patch(
            &mut v,
            &json!([{"op": "test", "path": "/metadata/finalizers", "value": null}]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("operation '/0'"), "{err}");
        merge_patch(&mut v, &json!({"b": {"c": null, "d": 3}})).unwrap();
        assert_eq!(v["b"], json!({"d": 3}));
        assert!(merge_patch(&mut v, &json!([1])).is_err());
    }

    #[test]
    fn json_patches_follow_evanphx_json_patch_where_it_leaves_the_rfc() {
        let doc = json!({"m": {"a": "1"}, "l": ["x", "y"]});
        let applied = |patch: Value| {
            let mut v = doc.clone();
            json_patch(&mut v, &patch).map(|()| v)
        };
        // A replace of a missing member adds it; one of a missing parent fails.
        let v = applied(json!([{"op": "replace", "path": "/m/b", "value": "2"}])).unwrap();
        assert_eq!(v["m"], json!({"a": "1", "b": "2"}));
        assert!(applied(json!([{"op": "replace", "path": "/n/b", "value": "2"}])).is_err());
        // A copy from a missing member copies null; a move from one fails.
        let v = applied(json!([{"op": "copy", "from": "/m/z", "path": "/m/c"}])).unwrap();
        assert_eq!(v["m"]["c"], Value::Null);
        assert!(applied(json!([{"op": "move", "from": "/m/z", "path": "/m/c"}])).is_err());
        // No value is null.
        let v = applied(json!([{"op": "add", "path": "/m/c"}])).unwrap();
        assert_eq!(v["m"]["c"], Value::Null);
        // Indices with leading zeros are numbers; member names are not.
        let v = applied(json!([{"op": "add", "path": "/l/01", "value": "z"}])).unwrap();
        assert_eq!(v["l"], json!(["x", "z", "y"]));
        let v = applied(json!([{"op": "add", "path": "/m/01", "value": "z"}])).unwrap();
        assert_eq!(v["m"]["01"], "z");
        assert_eq!(indices_as_go_reads_them(&doc, "/l/00"), "/l/0");
    }

    #[test]
    fn a_json_patch_that_fails_after_a_move_leaves_the_object_alone() {
        // Found by `cargo xtask fuzz` (json-patch): the second operation
        // fails, and undoing the first (a move from /0 into /0/0, "inside
        // itself") used to panic inside json-patch.
        let original = json!([[1]]);
        let mut target = original.clone();
        let patch = json!([
            {"op": "move", "from": "/0/0", "path": "/0"},
            {"op": "remove", "path": "/9"},
        ]);
        assert!(json_patch(&mut target, &patch).is_err());
        assert_eq!(target, original);
        let ok = json!([{"op": "move", "from": "/0/0", "path": "/0"}]);
        json_patch(&mut target, &ok).unwrap();
        assert_eq!(target, json!([1, []]));
    }
}
