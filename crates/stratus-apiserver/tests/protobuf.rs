//! Protobuf on the wire, as kubectl 1.32+ and client-go speak it: request
//! bodies, answers, lists and watch streams, and bad bodies.

use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use stratus_apiserver::ApiServer;
use stratus_apiserver::protobuf;

const PB: &str = "application/vnd.kubernetes.protobuf";
const CLIENT_GO_ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

/// Send a request; the status, content type and body.
async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (u16, String, Vec<u8>) {
    let mut req = http::Request::builder().method(method).uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = client
        .send(req.body(kube::client::Body::from(body)).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, content_type, bytes)
}

#[tokio::test]
async fn protobuf_bodies_are_stored_like_json_and_answered_in_protobuf() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let body = protobuf::encode_object(&json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "team-a", "labels": {"tier": "gold"}},
    }))
    .unwrap();
    let (status, content_type, answer) = send(
        &client,
        "POST",
        "/api/v1/namespaces",
        &[("content-type", PB), ("accept", CLIENT_GO_ACCEPT)],
        body,
    )
    .await;
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&answer));
    assert_eq!(content_type, PB);
    let created = protobuf::decode_object(&answer).unwrap();
    assert_eq!(created["metadata"]["name"], "team-a");
    assert!(created["metadata"]["uid"].as_str().is_some());
    // Read back in JSON through the typed client: the same object.
    let ns: Namespace = Api::all(client.clone()).get("team-a").await.unwrap();
    assert_eq!(
        ns.metadata.labels.unwrap().get("tier").map(String::as_str),
        Some("gold")
    );
    assert_eq!(
        Some(ns.metadata.uid.unwrap().as_str()),
        created["metadata"]["uid"].as_str()
    );

    // A pod with wrapper types: quantities, int-or-string ports, a false
    // pointer boolean, a zero grace period.
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "app", "image": "nginx",
            "ports": [{"containerPort": 8080, "name": "http"}],
            "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}},
            "readinessProbe": {"httpGet": {"port": "http", "path": "/"}}}],
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 0},
    });
    let (status, _, answer) = send(
        &client,
        "POST",
        "/api/v1/namespaces/default/pods",
        &[("content-type", PB), ("accept", "application/json")],
        protobuf::encode_object(&pod).unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&answer));
    let stored: Pod = Api::namespaced(client.clone(), "default")
        .get("web")
        .await
        .unwrap();
    let spec = stored.spec.unwrap();
    assert_eq!(spec.automount_service_account_token, Some(false));
    assert_eq!(spec.termination_grace_period_seconds, Some(0));
    let c = &spec.containers[0];
    assert_eq!(
        c.resources.as_ref().unwrap().limits.as_ref().unwrap()["cpu"].0,
        "500m"
    );
    let probe_port = &c
        .readiness_probe
        .as_ref()
        .unwrap()
        .http_get
        .as_ref()
        .unwrap()
        .port;
    assert_eq!(
        *probe_port,
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("http".into())
    );
    // Defaulting happened as for JSON.
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));

    // A list in protobuf.
    let (status, content_type, answer) = send(
        &client,
        "GET",
        "/api/v1/namespaces/default/pods",
        &[("accept", CLIENT_GO_ACCEPT)],
        Vec::new(),
    )
    .await;
    assert_eq!((status, content_type.as_str()), (200, PB));
    let list = protobuf::decode_object(&answer).unwrap();
    assert_eq!(list["kind"], "PodList");
    assert_eq!(list["items"][0]["metadata"]["name"], "web");
    assert!(list["metadata"]["resourceVersion"].as_str().is_some());
}

#[tokio::test]
async fn watches_stream_length_prefixed_protobuf_events() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut req = http::Request::builder()
        .method("GET")
        .uri("/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=10")
        .header("accept", "application/vnd.kubernetes.protobuf;stream=watch")
        .body(kube::client::Body::empty())
        .unwrap();
    req.headers_mut().remove("content-type");
    let resp = client.send(req).await.unwrap();
    assert_eq!(resp.headers()["content-type"], protobuf::WATCH_MEDIA_TYPE);
    let mut body = resp.into_body();
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("settings".into());
    cm.data = Some([("color".to_owned(), "blue".to_owned())].into());
    cms.create(&PostParams::default(), &cm).await.unwrap();

    let mut buf: Vec<u8> = Vec::new();
    let event = next_protobuf_event(&mut body, &mut buf).await;
    assert_eq!(event.0, "ADDED");
    assert_eq!(event.1["kind"], "ConfigMap");
    assert_eq!(event.1["data"], json!({"color": "blue"}));
}

/// The next event of a protobuf watch stream (`buf` holds what was read
/// past it).
async fn next_protobuf_event(body: &mut kube::client::Body, buf: &mut Vec<u8>) -> (String, Value) {
    loop {
        if buf.len() >= 4 {
            let len = u32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
            if buf.len() >= 4 + len {
                let event = protobuf::decode_watch_event(&buf[4..4 + len]).unwrap();
                buf.drain(..4 + len);
                return event;
            }
        }
        let frame = body.frame().await.expect("the watch ended").unwrap();
        if let Ok(data) = frame.into_data() {
            buf.extend_from_slice(&data);
        }
    }
}

#[tokio::test]
async fn an_event_protobuf_cannot_carry_is_an_error_event_not_a_gap() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let req = http::Request::builder()
        .uri("/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=10")
        .header("accept", CLIENT_GO_ACCEPT)
        .body(kube::client::Body::empty())
        .unwrap();
    let mut body = client.send(req).await.unwrap().into_body();
    // Stored through JSON, but `binaryData` that is not base64 has no
    // protobuf form.
    let (status, _, answer) = send(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[("content-type", "application/json")],
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "odd"}, "binaryData": {"k": "not base64!"}}))
        .unwrap(),
    )
    .await;
    // The harness does not validate base64 in `binaryData` (kube-apiserver
    // would refuse it); this is how such an object reaches a watch.
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&answer));
    let mut buf = Vec::new();
    let (kind, object) = next_protobuf_event(&mut body, &mut buf).await;
    assert_eq!(kind, "ERROR");
    assert_eq!(object["code"], 500);
    assert!(object["message"].as_str().unwrap().contains("binaryData"));
}

#[tokio::test]
async fn bad_bodies_get_400_and_415_statuses() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let path = "/api/v1/namespaces/default/configmaps";
    let status = |bytes: &[u8]| serde_json::from_slice::<Value>(bytes).unwrap();

    let (code, _, body) = send(
        &client,
        "POST",
        path,
        &[("content-type", "text/plain")],
        b"x".to_vec(),
    )
    .await;
    assert_eq!(code, 415);
    let s = status(&body);
    assert_eq!(s["reason"], "UnsupportedMediaType");
    assert!(s["message"].as_str().unwrap().contains(PB));

    for garbage in [
        b"{\"kind\":\"ConfigMap\"}".to_vec(),
        b"k8s\0\x0a\xff\xff\xff\xff\x0f".to_vec(),
        [b"k8s\0".as_slice(), &[0x12, 0x05, 0x0a]].concat(),
    ] {
        let (code, _, body) = send(&client, "POST", path, &[("content-type", PB)], garbage).await;
        assert_eq!(code, 400);
        assert!(
            status(&body)["message"]
                .as_str()
                .unwrap()
                .contains("not valid protobuf")
        );
    }
    // A kind that does not belong here is refused by the write path.
    let wrong = protobuf::encode_object(&json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s"}}))
    .unwrap();
    let (code, _, _) = send(&client, "POST", path, &[("content-type", PB)], wrong).await;
    assert_eq!(code, 400);
    // And the server still serves.
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    assert!(
        cms.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}
