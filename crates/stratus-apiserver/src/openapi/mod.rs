//! The OpenAPI descriptions: `/openapi/v3` (one document per group-version
//! with the paths and operations of every resource and, as components, the
//! schema of each kind and of everything it refers to, custom resources
//! included) and `/openapi/v2` (every definition). `kubectl explain` reads
//! the v3 documents; kubectl also sees from them that the server validates
//! fields itself (`fieldValidation`).
//!
//! The patch operations list no request body types, so kubectl (1.29+)
//! computes the strategic merge patches of `apply` from its compiled-in
//! types rather than from these schemas, which carry no patch merge keys
//! (k8s-openapi has none); for the same reason the protobuf form of the v2
//! document, which kubectl 1.27–1.28 read for `apply`, has no definitions.

pub(crate) mod builtin_schemas;

use serde_json::{Map, Value, json};

use crate::registry::Registry;
use crate::resources::{ResourceDef, groups};
use builtin_schemas::V3_REF_PREFIX;

/// The protobuf media type of an OpenAPI v2 document.
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// `GET /openapi/v2`: a document without schemas, in protobuf when asked
/// (kubectl before 1.28 reads it before `apply`; with no schema for a kind
/// it builds strategic merge patches from its compiled-in types). The
/// protobuf form is gnostic's `Document` with `swagger` (1) and
/// `info.title` (2.1).
pub(crate) fn v2(registry: &Registry, accept: &str) -> (&'static str, bytes::Bytes) {
    const TITLE: &[u8] = b"Kubernetes";
    if accept.contains(V2_PROTOBUF) {
        let mut info = vec![0x0a, TITLE.len() as u8];
        info.extend_from_slice(TITLE);
        let mut doc = vec![0x0a, 3, b'2', b'.', b'0', 0x12, info.len() as u8];
        doc.extend_from_slice(&info);
        // Go's mime parser refuses `@` in a Content-Type, so the body goes
        // out as octet-stream, as kube-apiserver's does.
        return ("application/octet-stream", bytes::Bytes::from(doc));
    }
    let version = crate::version::version()["gitVersion"].clone();
    let mut definitions = Map::new();
    for (name, schema) in &builtin_schemas::get().definitions {
        definitions.insert(name.clone(), builtin_schemas::as_v2(schema));
    }
    for (name, schema) in custom_schemas(registry, None) {
        definitions.insert(name, builtin_schemas::as_v2(&schema));
    }
    let doc = json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": version},
        "paths": {}, "definitions": definitions});
    (
        "application/json",
        bytes::Bytes::from(serde_json::to_vec(&doc).unwrap_or_default()),
    )
}

/// The definition name kube-apiserver gives a custom kind: the group
/// reversed, the version, the kind (`com.example.v1.Widget`).
fn custom_name(def: &ResourceDef) -> String {
    let mut group: Vec<&str> = def.group.split('.').collect();
    group.reverse();
    format!("{}.{}.{}", group.join("."), def.version, def.kind)
}

/// The schemas of the served custom kinds (of `only` group-version), as
/// kube-apiserver publishes them: the definition's schema, `metadata` as
/// ObjectMeta, and the kind's group-version-kind.
fn custom_schemas(registry: &Registry, only: Option<(&str, &str)>) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (index, def) in registry.all() {
        if !def.served || !def.custom {
            continue;
        }
        if only.is_some_and(|(g, v)| (g, v) != (def.group, def.version)) {
            continue;
        }
        let Some(custom) = registry.custom(index) else {
            continue;
        };
        let mut schema = custom.schema.clone().unwrap_or_else(
            || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        );
        if let Some(map) = schema.as_object_mut() {
            let props = map
                .entry("properties")
                .or_insert_with(|| json!({}))
                .as_object_mut();
            if let Some(props) = props {
                props.insert("apiVersion".into(), json!({"type": "string",
                    "description": "APIVersion defines the versioned schema of this representation of an object."}));
                props.insert("kind".into(), json!({"type": "string",
                    "description": "Kind is a string value representing the REST resource this object represents."}));
                props.insert("metadata".into(), json!({"allOf": [{"$ref": format!("{V3_REF_PREFIX}io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")}],
                    "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}));
            }
            map.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": def.group, "kind": def.kind, "version": def.version}]),
            );
        }
        out.push((custom_name(&def), schema));
    }
    out
}

fn gv_key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `GET /openapi/v3`: the group-version documents served.
pub(crate) fn root(defs: &[ResourceDef]) -> Value {
    let mut paths = Map::new();
    let mut gvs = vec![("", "v1")];
    gvs.extend(groups(defs));
    for (g, v) in gvs {
        let key = gv_key(g, v);
        paths.insert(
            key.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash=stratus")}),
        );
    }
    json!({"paths": paths})
}

fn param(name: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": "string"}, "uniqueItems": true})
}

/// `GET /openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`.
pub(crate) fn group_version(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs = registry.served();
    let in_gv: Vec<&ResourceDef> = defs
        .iter()
        .filter(|d| d.group == group && d.version == version)
        .collect();
    if in_gv.is_empty() {
        return None;
    }
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let mut paths = Map::new();
    for d in &in_gv {
        let gvk = json!({"group": d.group, "version": d.version, "kind": d.kind});
        let item = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", d.plural)
        } else {
            format!("{prefix}/{}/{{name}}", d.plural)
        };
        let collection = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", d.plural)
        } else {
            format!("{prefix}/{}", d.plural)
        };
        let op = |id: &str, extra: &[&str]| {
            let mut params = vec![
                param("dryRun"),
                param("fieldManager"),
                param("fieldValidation"),
            ];
            params.extend(extra.iter().map(|p| param(p)));
            json!({
                "operationId": format!("{id}{}", d.kind),
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": id,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        if d.review {
            paths.insert(collection, json!({"post": op("post", &[])}));
            continue;
        }
        paths.insert(
            item,
            json!({
                "get": op("get", &[]),
                "put": op("put", &[]),
                "patch": op("patch", &["force"]),
                "delete": op("delete", &["gracePeriodSeconds", "propagationPolicy"]),
            }),
        );
        paths.insert(
            collection,
            json!({
                "get": op("list", &["labelSelector", "fieldSelector", "limit", "continue", "watch", "resourceVersion"]),
                "post": op("post", &[]),
                "delete": op("deletecollection", &["labelSelector", "fieldSelector"]),
            }),
        );
    }
    let schemas = builtin_schemas::get();
    let roots = in_gv
        .iter()
        .filter_map(|d| schemas.root(d.group, d.version, d.kind));
    let mut components = Map::new();
    let mut referenced = Vec::new();
    for (name, schema) in custom_schemas(registry, Some((group, version))) {
        referenced.push(name.clone());
        components.insert(name, schema);
    }
    referenced.push("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta".to_owned());
    for name in schemas.closure(roots.chain(referenced.iter().map(String::as_str))) {
        if let Some(schema) = schemas.definitions.get(&name) {
            components.insert(name, schema.clone());
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{}.0", crate::version::MINOR)},
        "paths": paths,
        "components": {"schemas": components},
    }))
}
