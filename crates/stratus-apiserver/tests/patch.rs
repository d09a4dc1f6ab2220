//! Patch types and server-side apply through `kube::Client`.

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use stratus_apiserver::ApiServer;

async fn node(server: &ApiServer) -> Api<Node> {
    let nodes: Api<Node> = Api::all(server.client());
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": "n1", "finalizers": ["a"]},
        "spec": {"taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}]},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n1"}]
        }
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &n).await.unwrap();
    nodes
}

#[tokio::test]
async fn strategic_merge_uses_core_merge_keys() {
    let server = ApiServer::start().await.unwrap();
    let nodes = node(&server).await;
    // Conditions merge by type, addresses by type, through the status subresource.
    let patched = nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {
                "conditions": [{"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated"}],
                "addresses": [{"type": "ExternalIP", "address": "203.0.113.5"}]
            }})),
        )
        .await
        .unwrap();
    let status = patched.status.unwrap();
    let types: Vec<String> = status
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| c.type_)
        .collect();
    // Items new to a list come first, as kube-apiserver merges them.
    assert_eq!(types, ["NetworkUnavailable", "Ready", "MemoryPressure"]);
    assert_eq!(status.addresses.unwrap().len(), 3);
    // Taints are replaced whole; finalizers merge.
    let patched = nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"finalizers": ["b"]}, "spec": {"taints": []}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().taints.unwrap_or_default().len(), 0);
    assert_eq!(patched.metadata.finalizers.unwrap(), ["b", "a"]);
    // $deleteFromPrimitiveList.
    let patched = nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.finalizers.unwrap(), ["b"]);
}

#[tokio::test]
async fn json_and_merge_patches() {
    let server = ApiServer::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}}))
            .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let merged = cms
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": null, "c": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        merged.data.unwrap().into_iter().collect::<Vec<_>>(),
        [("b".into(), "2".into()), ("c".into(), "3".into())]
    );
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/b", "value": "2"},
        {"op": "replace", "path": "/data/b", "value": "22"}
    ]))
    .unwrap();
    let patched = cms
        .patch("c", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["b"], "22");
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/data/b", "value": "nope"}]))
            .unwrap();
    let err = cms
        .patch("c", &PatchParams::default(), &Patch::<()>::Json(failing))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422),
        "{err:?}"
    );
    // A patch carrying a stale resourceVersion is a conflict.
    let err = cms
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"resourceVersion": "1"}, "data": {"x": "y"}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.is_conflict()),
        "{err:?}"
    );
    // Patching a missing object is 404.
    let err = cms
        .patch("missing", &PatchParams::default(), &Patch::Merge(json!({})))
        .await
        .unwrap_err();
    assert!(matches!(&err, kube::Error::Api(s) if s.is_not_found()));
}

#[tokio::test]
async fn server_side_apply_ownership_and_conflicts() {
    let server = ApiServer::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let apply = |data: serde_json::Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"}, "data": data});
    // Create on apply.
    let created = cms
        .patch(
            "app",
            &PatchParams::apply("alice"),
            &Patch::Apply(apply(json!({"color": "blue", "size": "L"}))),
        )
        .await
        .unwrap();
    assert_eq!(created.data.as_ref().unwrap()["color"], "blue");
    let managers: Vec<String> = created
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, ["alice"]);
    // Another manager setting a field alice owns to another value conflicts.
    let err = cms
        .patch(
            "app",
            &PatchParams::apply("bob"),
            &Patch::Apply(apply(json!({"color": "red"}))),
        )
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert!(s.message.contains(".data.color"), "{}", s.message);
        }
        other => panic!("{other:?}"),
    }
    // With force it takes the field over.
    let forced = cms
        .patch(
            "app",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(apply(json!({"color": "red"}))),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["color"], "red");
    // Alice re-applies without color: she keeps size; color is bob's and stays.
    let reapplied = cms
        .patch(
            "app",
            &PatchParams::apply("alice"),
            &Patch::Apply(apply(json!({"size": "M"}))),
        )
        .await
        .unwrap();
    let data = reapplied.data.unwrap();
    assert_eq!(data["size"], "M");
    assert_eq!(data["color"], "red");
    // Alice stops applying size: it is removed.
    let pruned = cms
        .patch(
            "app",
            &PatchParams::apply("alice"),
            &Patch::Apply(apply(json!({}))),
        )
        .await
        .unwrap();
    assert!(!pruned.data.unwrap_or_default().contains_key("size"));
    // An update by another manager takes ownership of what it changed.
    let updated = cms
        .patch(
            "app",
            &PatchParams {
                field_manager: Some("carol".into()),
                ..Default::default()
            },
            &Patch::Merge(json!({"data": {"color": "green"}})),
        )
        .await
        .unwrap();
    let carol = updated
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .find(|m| m.manager.as_deref() == Some("carol"))
        .expect("carol owns a field");
    assert_eq!(carol.operation.as_deref(), Some("Update"));
    // Apply without a field manager is refused.
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let err = pods
        .patch(
            "x",
            &PatchParams {
                field_manager: None,
                ..PatchParams::apply("")
            },
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Pod"})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 400 || s.code == 422),
        "{err:?}"
    );
}
