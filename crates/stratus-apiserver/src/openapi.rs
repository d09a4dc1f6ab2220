//! A minimal OpenAPI v3 description: enough for kubectl to see that the
//! server validates fields itself (`fieldValidation`) so it skips its
//! client-side schema validation. It lists the paths and operations of
//! every resource with their group-version-kind; it carries no schemas.
//! The v2 document has no definitions at all.

use serde_json::{Map, Value, json};

use super::resources::{ResourceDef, groups};

/// The protobuf media type of an OpenAPI v2 document.
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// `GET /openapi/v2`: a document without schemas, in protobuf when asked
/// (kubectl before 1.28 reads it before `apply`; with no schema for a kind
/// it builds strategic merge patches from its compiled-in types). The
/// protobuf form is gnostic's `Document` with `swagger` (1) and
/// `info.title` (2.1).
pub(crate) fn v2(accept: &str) -> (&'static str, bytes::Bytes) {
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
    let version = super::discovery::version()["gitVersion"].clone();
    let doc = json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": version},
        "paths": {}, "definitions": {}});
    (
        "application/json",
        bytes::Bytes::from(serde_json::to_vec(&doc).unwrap_or_default()),
    )
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
pub(crate) fn group_version(defs: &[ResourceDef], group: &str, version: &str) -> Option<Value> {
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
    for d in in_gv {
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
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (stratus-testing)", "version": format!("v1.{}.0", super::discovery::MINOR)},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}
