//! OpenAPI documents built from k8s-openapi's schemas, and unknown fields
//! in built-in kinds pruned, warned about or refused as `fieldValidation`
//! says.

use http_body_util::BodyExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use serde_json::{Value, json};
use stratus_apiserver::ApiServer;

async fn get_json(client: &kube::Client, path: &str) -> Value {
    let req = http::Request::get(path).body(Vec::new()).unwrap();
    serde_json::from_str(&client.request_text(req).await.unwrap()).unwrap()
}

/// POST `body` to `path`: status, `Warning` headers, answer.
async fn post(client: &kube::Client, path: &str, body: &Value) -> (u16, Vec<String>, Value) {
    let req = http::Request::post(path)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let status = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, warnings, serde_json::from_slice(&bytes).unwrap())
}

fn deployment(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": 1, "replicaz": 3,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx", "imagePolicy": "x"}]}}},
    })
}

#[tokio::test]
async fn group_version_documents_carry_the_schemas_kubectl_explain_reads() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let root = get_json(&client, "/openapi/v3").await;
    assert!(root["paths"]["apis/apps/v1"]["serverRelativeURL"].is_string());
    let apps = get_json(&client, "/openapi/v3/apis/apps/v1").await;
    let schemas = &apps["components"]["schemas"];
    let d = &schemas["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        d["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
    );
    assert!(d["description"].as_str().unwrap().contains("Deployment"));
    // Everything referred to is in the same document.
    assert_eq!(
        schemas["io.k8s.api.core.v1.Container"]["properties"]["image"]["type"],
        "string"
    );
    assert!(schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
    assert!(schemas.get("io.k8s.api.rbac.v1.Role").is_none());
    let core = get_json(&client, "/openapi/v3/api/v1").await;
    assert!(core["components"]["schemas"]["io.k8s.api.core.v1.Pod"].is_object());

    let v2 = get_json(&client, "/openapi/v2").await;
    let pod_spec = &v2["definitions"]["io.k8s.api.core.v1.PodSpec"];
    assert_eq!(
        pod_spec["properties"]["containers"]["items"]["$ref"],
        "#/definitions/io.k8s.api.core.v1.Container"
    );
}

#[tokio::test]
async fn unknown_fields_are_dropped_and_warned_about_by_default() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let path = "/apis/apps/v1/namespaces/default/deployments";
    let (status, warnings, created) = post(&client, path, &deployment("web")).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        warnings,
        [
            r#"299 - "unknown field \"spec.replicaz\"""#,
            r#"299 - "unknown field \"spec.template.spec.containers[0].imagePolicy\"""#,
        ]
    );
    assert!(created["spec"].get("replicaz").is_none());
    let stored: Deployment = Api::namespaced(client.clone(), "default")
        .get("web")
        .await
        .unwrap();
    assert_eq!(stored.spec.replicas, Some(1));

    let (status, warnings, _) = post(
        &client,
        &format!("{path}?fieldValidation=Ignore"),
        &deployment("quiet"),
    )
    .await;
    assert_eq!((status, warnings.len()), (201, 0));
}

#[tokio::test]
async fn strict_field_validation_refuses_unknown_fields() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let path = "/apis/apps/v1/namespaces/default/deployments?fieldValidation=Strict";
    let (status, _, answer) = post(&client, path, &deployment("web")).await;
    assert_eq!(status, 400);
    assert_eq!(
        answer["message"],
        r#"Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.replicaz", unknown field "spec.template.spec.containers[0].imagePolicy""#
    );
    let (status, _, answer) = post(
        &client,
        "/apis/apps/v1/namespaces/default/deployments?fieldValidation=Nope",
        &deployment("web"),
    )
    .await;
    // As kube-apiserver 1.37: the options are refused before the body.
    assert_eq!(status, 422, "{answer}");
    assert_eq!(
        answer["message"],
        r#"CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Nope": supported values: "", "Ignore", "Strict", "Warn""#
    );

    // Objects without unknown fields pass Strict, warned about nothing.
    let mut clean = deployment("clean");
    clean["spec"].as_object_mut().unwrap().remove("replicaz");
    clean["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("imagePolicy");
    let (status, warnings, answer) = post(&client, path, &clean).await;
    assert_eq!((status, warnings.len()), (201, 0), "{answer}");
    let typed: Deployment = serde_json::from_value(answer).unwrap();
    assert_eq!(typed.metadata.name.as_deref(), Some("clean"));
}

#[tokio::test]
async fn duplicate_fields_are_warned_about_or_refused() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let send = |query: &'static str| {
        let client = client.clone();
        async move {
            let body = br#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "twice", "name": "twice"}, "data": {"a": "1", "a": "2"}}"#;
            let req = http::Request::post(format!("/api/v1/namespaces/default/configmaps{query}"))
                .header("content-type", "application/json")
                .body(kube::client::Body::from(body.to_vec()))
                .unwrap();
            let resp = client.send(req).await.unwrap();
            let status = resp.status().as_u16();
            let warnings: Vec<String> = resp
                .headers()
                .get_all("warning")
                .iter()
                .map(|v| v.to_str().unwrap().to_owned())
                .collect();
            let bytes = resp.into_body().collect().await.unwrap().to_bytes();
            (
                status,
                warnings,
                serde_json::from_slice::<Value>(&bytes).unwrap(),
            )
        }
    };
    let (status, _, answer) = send("?fieldValidation=Strict").await;
    assert_eq!(status, 400);
    assert_eq!(
        answer["message"],
        r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: duplicate field "metadata.name", duplicate field "data.a""#
    );
    let (status, warnings, answer) = send("").await;
    assert_eq!(status, 201);
    assert_eq!(
        warnings,
        [
            r#"299 - "duplicate field \"metadata.name\"""#,
            r#"299 - "duplicate field \"data.a\"""#
        ]
    );
    assert_eq!(answer["data"]["a"], "2", "the last one wins");
}
