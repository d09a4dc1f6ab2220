//! CustomResourceDefinitions through `kube::Client`: kube-rs's derive,
//! establishing, schemas (defaults, pruning, validation), the status
//! subresource, printer columns, kube-runtime's `Controller`, and deleting a
//! definition with its objects.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::GroupVersionKind;
use kube::{Client, CustomResource, CustomResourceExt, ResourceExt};
use kube_runtime::controller::{Action, Controller};
use kube_runtime::wait::{await_condition, conditions};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use stratus_apiserver::{ApiServer, eventually};

/// A custom resource as a kube-rs user declares it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "stratus.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    shortname = "wd",
    printcolumn = r#"{"name":"Size","type":"integer","jsonPath":".spec.size"}"#,
    printcolumn = r#"{"name":"Seen","type":"integer","jsonPath":".status.seen"}"#
)]
pub struct WidgetSpec {
    size: i64,
}

/// The status a controller writes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
pub struct WidgetStatus {
    seen: i64,
}

async fn establish(client: &Client, crd: &CustomResourceDefinition) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), crd).await.unwrap();
    let name = crd.name_any();
    tokio::time::timeout(
        Duration::from_secs(1),
        await_condition(crds, &name, conditions::is_crd_established()),
    )
    .await
    .expect("established within a second")
    .unwrap();
}

fn api_error(err: kube::Error) -> (u16, String) {
    match err {
        kube::Error::Api(s) => (s.code, s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_derived_definition_is_established_and_served() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    establish(&client, &Widget::crd()).await;

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds.get("widgets.stratus.dev").await.unwrap();
    let status = crd.status.unwrap();
    assert_eq!(status.accepted_names.unwrap().kind, "Widget");
    assert_eq!(status.stored_versions, Some(vec!["v1".to_owned()]));
    // The cleanup finalizer comes with the deletion, as in kube-apiserver.
    assert_eq!(crd.metadata.finalizers, None);

    // Discovery serves the new group with its names.
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .unwrap();
    let (resource, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("stratus.dev", "v1", "Widget"))
        .expect("widgets in discovery");
    assert_eq!(resource.plural, "widgets");
    let aggregated = client.list_api_groups_aggregated().await.unwrap();
    assert!(
        aggregated
            .items
            .iter()
            .any(|g| g.metadata.as_ref().and_then(|m| m.name.as_deref()) == Some("stratus.dev")),
        "the new group in aggregated discovery"
    );
    let subresources: Vec<&str> = caps
        .subresources
        .iter()
        .map(|(r, _)| r.plural.as_str())
        .collect();
    assert!(
        subresources.iter().any(|p| p.ends_with("status")),
        "{subresources:?}"
    );

    // Objects round-trip; status is ignored on create (status subresource).
    let widgets: Api<Widget> = Api::namespaced(client.clone(), "default");
    let mut w = Widget::new("w1", WidgetSpec { size: 3 });
    w.status = Some(WidgetStatus { seen: 99 });
    let created = widgets.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(created.spec.size, 3);
    assert!(created.status.is_none());
    let patched = widgets
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"seen": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.status.unwrap().seen, 3);
    assert_eq!(patched.metadata.generation, Some(1));
    let changed = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(changed.metadata.generation, Some(2));
    assert_eq!(changed.status.unwrap().seen, 3, "main writes keep status");

    // Strategic merge patches are refused for custom resources.
    let err = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"size": 5}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(err).0, 415);

    // Server-side apply works on custom resources.
    let applied = widgets
        .patch(
            "w2",
            &PatchParams::apply("tests"),
            &Patch::Apply(
                json!({"apiVersion": "stratus.dev/v1", "kind": "Widget", "spec": {"size": 7}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(applied.spec.size, 7);
    assert_eq!(
        widgets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2
    );
    let by_name = widgets
        .list(&ListParams::default().fields("metadata.name=w2"))
        .await
        .unwrap();
    assert_eq!(by_name.items.len(), 1);
}

#[tokio::test]
async fn printer_columns_make_the_table() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    establish(&client, &Widget::crd()).await;
    let widgets: Api<Widget> = Api::namespaced(client.clone(), "default");
    widgets
        .create(
            &PostParams::default(),
            &Widget::new("w1", WidgetSpec { size: 5 }),
        )
        .await
        .unwrap();
    let req = http::Request::get("/apis/stratus.dev/v1/namespaces/default/widgets")
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())
        .unwrap();
    let table: Value = client.request(req).await.unwrap();
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Name", "Size", "Seen"]);
    assert_eq!(table["rows"][0]["cells"], json!(["w1", 5, null]));
}

/// A definition written as YAML users write it: defaults, enums, bounds,
/// required fields, a pattern and a preserved subtree.
fn gadget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Cluster",
            "names": {"plural": "gadgets", "kind": "Gadget", "singular": "gadget"},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector"
                }},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["replicas"],
                            "properties": {
                                "replicas": {"type": "integer", "minimum": 1, "maximum": 5},
                                "mode": {"type": "string", "enum": ["fast", "slow"], "default": "slow"},
                                "owner": {"type": "string", "pattern": "^[a-z]+$"},
                                "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                            }
                        },
                        "status": {
                            "type": "object",
                            "properties": {
                                "replicas": {"type": "integer"},
                                "selector": {"type": "string"}
                            }
                        }
                    }
                }}
            }]
        }
    }))
    .unwrap()
}

/// The Gadget definition established, and its objects' API.
async fn established_gadgets(client: &kube::Client) -> Api<DynamicObject> {
    establish(client, &gadget_crd()).await;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1alpha1", "Gadget"),
        "gadgets",
    );
    Api::all_with(client.clone(), &resource)
}

#[tokio::test]
async fn schemas_default_prune_and_validate() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let gadgets = established_gadgets(&client).await;
    let object = |spec: Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "example.com/v1alpha1", "kind": "Gadget",
            "metadata": {"name": "g1"}, "spec": spec
        }))
        .unwrap()
    };
    let created = gadgets
        .create(
            &PostParams::default(),
            &object(json!({"replicas": 2, "bogus": 1, "config": {"free": {"form": true}}})),
        )
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["mode"], "slow", "defaulted");
    assert!(created.data["spec"].get("bogus").is_none(), "pruned");
    assert_eq!(
        created.data["spec"]["config"]["free"]["form"], true,
        "preserved"
    );

    let (code, message) = api_error(
        gadgets
            .create(
                &PostParams::default(),
                &object(json!({"replicas": 9, "mode": "warp", "owner": "Bob"})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(
        message.starts_with(r#"Gadget.example.com "g1" is invalid: ["#),
        "{message}"
    );
    for part in [
        "spec.replicas: Invalid value: 9: spec.replicas in body should be less than or equal to 5",
        r#"spec.mode: Unsupported value: "warp": supported values: "fast", "slow""#,
        r#"spec.owner: Invalid value: "Bob": spec.owner in body should match '^[a-z]+$'"#,
    ] {
        assert!(message.contains(part), "{message} lacks {part}");
    }
    let (code, message) = api_error(
        gadgets
            .create(&PostParams::default(), &object(json!({"mode": "fast"})))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(
        message.contains("spec.replicas: Required value"),
        "{message}"
    );

    // fieldValidation=Strict (kubectl's default) refuses unknown fields.
    let body = serde_json::to_vec(&object(json!({"replicas": 1, "bogus": 1}))).unwrap();
    let req = http::Request::post("/apis/example.com/v1alpha1/gadgets?fieldValidation=Strict")
        .header("Content-Type", "application/json")
        .body(body)
        .unwrap();
    let (code, message) = api_error(client.request::<Value>(req).await.unwrap_err());
    assert_eq!(code, 400);
    assert!(
        message.contains(r#"strict decoding error: unknown field "spec.bogus""#),
        "{message}"
    );

    // Updates are validated too.
    let (code, _) = api_error(
        gadgets
            .patch(
                "g1",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": 0}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);

    // An invalid definition is refused with its fields named.
    let mut bad = gadget_crd();
    bad.metadata.name = Some("gizmos.example.com".into());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let (code, message) = api_error(crds.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!(code, 422);
    assert!(message.contains("metadata.name"), "{message}");
}

#[tokio::test]
async fn the_scale_subresource_follows_the_declared_paths() {
    use k8s_openapi::api::autoscaling::v1::Scale;
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let gadgets = established_gadgets(&client).await;
    let gadget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1alpha1", "kind": "Gadget",
        "metadata": {"name": "g1"}, "spec": {"replicas": 2},
        "status": {"replicas": 1, "selector": "app=g1"}
    }))
    .unwrap();
    gadgets
        .create(&PostParams::default(), &gadget)
        .await
        .unwrap();
    let scale = gadgets.get_scale("g1").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    let status = scale.status.unwrap();
    assert_eq!(
        (status.replicas, status.selector.as_deref()),
        (1, Some("app=g1"))
    );
    let scaled: Scale = gadgets
        .patch_scale(
            "g1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.as_ref().unwrap().replicas, Some(4));
    let object = gadgets.get("g1").await.unwrap();
    assert_eq!(object.data["spec"]["replicas"], 4);
    assert_eq!(object.metadata.generation, Some(2));
    // A stale resourceVersion in a Scale is a conflict; negative replicas are invalid.
    let mut stale = scaled.clone();
    stale.metadata.resource_version = Some("1".into());
    stale.spec.as_mut().unwrap().replicas = Some(3);
    let (code, _) = api_error(
        gadgets
            .replace_scale("g1", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 409);
    let (code, _) = api_error(
        gadgets
            .patch_scale(
                "g1",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": -1}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);
}

#[tokio::test]
async fn workloads_scale_through_the_subresource() {
    use k8s_openapi::api::apps::v1::Deployment;
    let server = ApiServer::start().await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(server.client(), "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}
        }
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let scale = deployments.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=web"));
    deployments
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(deployments.get("web").await.unwrap().spec.replicas, Some(5));
}

#[tokio::test]
async fn deleting_a_definition_deletes_its_objects() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    establish(&client, &Widget::crd()).await;
    let widgets: Api<Widget> = Api::namespaced(client.clone(), "default");
    for name in ["a", "b", "held"] {
        widgets
            .create(
                &PostParams::default(),
                &Widget::new(name, WidgetSpec { size: 1 }),
            )
            .await
            .unwrap();
    }
    widgets
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["stratus.dev/hold"]}})),
        )
        .await
        .unwrap();

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete("widgets.stratus.dev", &DeleteParams::default())
        .await
        .unwrap();
    // The object with a finalizer holds the definition, terminating.
    let crd = crds.get("widgets.stratus.dev").await.unwrap();
    assert!(crd.metadata.deletion_timestamp.is_some());
    let terminating = crd
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Terminating")
        .expect("a Terminating condition");
    assert_eq!(terminating.status, "True");
    let left = widgets.list(&ListParams::default()).await.unwrap();
    assert_eq!(left.items.len(), 1);
    assert!(left.items[0].metadata.deletion_timestamp.is_some());
    let (code, message) = api_error(
        widgets
            .create(
                &PostParams::default(),
                &Widget::new("late", WidgetSpec { size: 1 }),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 405, "{message}");

    // Removing the finalizer lets the object and then the definition go.
    widgets
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    eventually("the definition is gone", Duration::from_secs(5), || {
        let crds = crds.clone();
        async move { crds.get_opt("widgets.stratus.dev").await.unwrap().is_none() }
    })
    .await;
    let (code, _) = api_error(widgets.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(code, 404);

    // Created again, the definition serves an empty resource.
    establish(&client, &Widget::crd()).await;
    assert!(
        widgets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

struct Ctx {
    widgets: Api<Widget>,
}

async fn reconcile(w: Arc<Widget>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    ctx.widgets
        .patch_status(
            &w.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"seen": w.spec.size}})),
        )
        .await?;
    Ok(Action::await_change())
}

#[tokio::test]
async fn a_kube_runtime_controller_reconciles_custom_resources() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    establish(&client, &Widget::crd()).await;
    let widgets: Api<Widget> = Api::namespaced(client.clone(), "default");
    let ctx = Arc::new(Ctx {
        widgets: widgets.clone(),
    });
    let controller = tokio::spawn(
        Controller::new(widgets.clone(), Default::default())
            .run(
                reconcile,
                |_, _: &kube::Error, _| Action::requeue(Duration::from_secs(1)),
                ctx,
            )
            .for_each(|_| async {}),
    );
    for (i, name) in ["one", "two", "three"].into_iter().enumerate() {
        widgets
            .create(
                &PostParams::default(),
                &Widget::new(name, WidgetSpec { size: i as i64 + 1 }),
            )
            .await
            .unwrap();
    }
    eventually("every widget reconciled", Duration::from_secs(10), || {
        let widgets = widgets.clone();
        async move {
            let list = widgets.list(&ListParams::default()).await.unwrap();
            list.items.len() == 3
                && list
                    .items
                    .iter()
                    .all(|w| w.status.as_ref().map(|s| s.seen) == Some(w.spec.size))
        }
    })
    .await;
    // A change is seen through the watch and reconciled again.
    widgets
        .patch(
            "two",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 20}})),
        )
        .await
        .unwrap();
    eventually("the change reconciled", Duration::from_secs(10), || {
        let widgets = widgets.clone();
        async move { widgets.get("two").await.unwrap().status.map(|s| s.seen) == Some(20) }
    })
    .await;
    controller.abort();
}

#[tokio::test]
async fn selectable_fields_and_formats() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "probes.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "probes", "kind": "Probe", "singular": "probe"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "selectableFields": [{"jsonPath": ".spec.color"}],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {"type": "object", "properties": {
                        "color": {"type": "string"},
                        "at": {"type": "string", "format": "date-time"},
                        "address": {"type": "string", "format": "ipv4"}
                    }}}
                }}
            }]
        }
    }))
    .unwrap();
    establish(&client, &crd).await;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Probe"),
        "probes",
    );
    let probes: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
    let probe = |name: &str, spec: serde_json::Value| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Probe",
            "metadata": {"name": name}, "spec": spec}))
        .unwrap()
    };
    let pp = PostParams::default();
    probes
        .create(
            &pp,
            &probe(
                "red",
                json!({"color": "red", "at": "2026-11-25T13:00:00Z", "address": "10.0.0.1"}),
            ),
        )
        .await
        .unwrap();
    probes
        .create(&pp, &probe("blue", json!({"color": "blue"})))
        .await
        .unwrap();

    // selectableFields: a field selector on the declared path.
    let red: Vec<String> = probes
        .list(&ListParams::default().fields("spec.color=red"))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(red, ["red"]);
    let not_red = probes
        .list(&ListParams::default().fields("spec.color!=red"))
        .await
        .unwrap();
    assert_eq!(not_red.items.len(), 1);
    let (code, message) = api_error(
        probes
            .list(&ListParams::default().fields("spec.at=x"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, message.as_str()),
        (400, "field label not supported: spec.at")
    );

    // Formats are checked.
    let (code, message) = api_error(
        probes
            .create(
                &pp,
                &probe("bad", json!({"at": "yesterday", "address": "10.0.0.300"})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(
        message.contains("spec.at in body must be of type date-time: \"yesterday\""),
        "{message}"
    );
    assert!(
        message.contains("spec.address in body must be of type ipv4"),
        "{message}"
    );
}

#[tokio::test]
async fn server_side_apply_merges_lists_by_their_schema_list_type() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "routers.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "routers", "kind": "Router", "singular": "router"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {"type": "object", "properties": {
                        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name"],
                            "items": {"type": "object", "required": ["name"], "properties": {
                                "name": {"type": "string"}, "port": {"type": "integer"}}}},
                        "tags": {"type": "array", "x-kubernetes-list-type": "set",
                            "items": {"type": "string"}},
                        "hosts": {"type": "array", "items": {"type": "string"}}
                    }}}
                }}
            }]
        }
    }))
    .unwrap();
    establish(&client, &crd).await;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Router"),
        "routers",
    );
    let routers: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
    let apply = |manager: &str, spec: Value| {
        let routers = routers.clone();
        let manager = manager.to_owned();
        async move {
            let config = json!({"apiVersion": "example.com/v1", "kind": "Router",
                "metadata": {"name": "r"}, "spec": spec});
            routers
                .patch("r", &PatchParams::apply(&manager), &Patch::Apply(config))
                .await
                .unwrap()
        }
    };
    apply(
        "a",
        json!({"ports": [{"name": "http", "port": 80}], "tags": ["x"], "hosts": ["h1"]}),
    )
    .await;
    let merged = apply(
        "b",
        json!({"ports": [{"name": "https", "port": 443}], "tags": ["y"]}),
    )
    .await;
    let spec = &merged.data["spec"];
    // A map list keeps both managers' items, a set both values.
    assert_eq!(
        spec["ports"],
        json!([{"name": "http", "port": 80}, {"name": "https", "port": 443}])
    );
    assert_eq!(spec["tags"], json!(["x", "y"]));
    assert_eq!(spec["hosts"], json!(["h1"]));
    // An atomic list is owned whole: another manager's different value
    // conflicts.
    let config = json!({"apiVersion": "example.com/v1", "kind": "Router",
        "metadata": {"name": "r"}, "spec": {"hosts": ["h2"]}});
    let (code, message) = api_error(
        routers
            .patch("r", &PatchParams::apply("b"), &Patch::Apply(config))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 409);
    assert!(message.contains(".spec.hosts"), "{message}");
    // Each manager owns its own item: `a` dropping its port removes it only.
    let after = apply("a", json!({"tags": ["x"], "hosts": ["h1"]})).await;
    assert_eq!(
        after.data["spec"]["ports"],
        json!([{"name": "https", "port": 443}])
    );
}

#[tokio::test]
async fn every_served_version_is_served_from_the_storage_version() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}});
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "boxes.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "boxes", "kind": "Box", "singular": "box"},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema},
                {"name": "v1beta1", "served": true, "storage": false, "schema": schema},
                {"name": "v1alpha1", "served": false, "storage": false, "schema": schema}
            ]
        }
    }))
    .unwrap();
    establish(&client, &crd).await;
    let at = |version: &str| -> Api<DynamicObject> {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("example.com", version, "Box"),
            "boxes",
        );
        Api::namespaced_with(client.clone(), "default", &resource)
    };
    let (v1, beta) = (at("v1"), at("v1beta1"));
    let mut events = beta
        .watch(&kube::api::WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();

    let b: DynamicObject = serde_json::from_value(json!({"apiVersion": "example.com/v1beta1",
        "kind": "Box", "metadata": {"name": "b1"}, "spec": {"size": 2}}))
    .unwrap();
    let created = beta.create(&PostParams::default(), &b).await.unwrap();
    assert_eq!(created.types.unwrap().api_version, "example.com/v1beta1");
    let stored = v1.get("b1").await.unwrap();
    assert_eq!(stored.types.unwrap().api_version, "example.com/v1");
    assert_eq!(stored.data["spec"]["size"], 2);
    let listed = beta.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        listed.items[0].types.as_ref().unwrap().api_version,
        "example.com/v1beta1"
    );
    match events.next().await.unwrap().unwrap() {
        kube::api::WatchEvent::Added(o) => {
            assert_eq!(o.types.unwrap().api_version, "example.com/v1beta1")
        }
        other => panic!("{other:?}"),
    }
    // An update at one version is seen at the other.
    beta.patch(
        "b1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 3}})),
    )
    .await
    .unwrap();
    assert_eq!(v1.get("b1").await.unwrap().data["spec"]["size"], 3);
    // A version that is not served is not found.
    let (code, _) = api_error(at("v1alpha1").get("b1").await.unwrap_err());
    assert_eq!(code, 404);
    // Discovery lists both served versions.
    let group: Value = serde_json::from_str(
        &server
            .client()
            .request_text(
                http::Request::get("/apis/example.com")
                    .body(Vec::new())
                    .unwrap(),
            )
            .await
            .unwrap(),
    )
    .unwrap();
    let versions: Vec<&str> = group["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["version"].as_str())
        .collect();
    assert_eq!(versions, ["v1", "v1beta1"]);
    assert_eq!(group["preferredVersion"]["version"], "v1");
}
