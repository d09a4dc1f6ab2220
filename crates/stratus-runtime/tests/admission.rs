//! The admission webhook server over real TLS: reviews answered by the
//! named handler, Go's status codes for bad requests and handler errors,
//! and the request metrics.

use kube::core::admission::AdmissionResponse;
use prometheus_client::registry::Registry;
use stratus_runtime::admission::{Webhook, WebhookMetrics, WebhookServer, WebhookServerError};
use stratus_runtime::metrics::encode_text;
use stratus_runtime::tls::self_signed;

/// POST `body` with `content_type` to `path`: status code and body.
async fn post(client: &kube::Client, path: &str, content_type: &str, body: &str) -> (u16, String) {
    let request = http::Request::post(path)
        .header("content-type", content_type)
        .body(body.as_bytes().to_vec())
        .unwrap();
    stratus_testing::http_status::send(client, request).await
}

fn review(uid: &str, service_type: &str) -> String {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Service"},
            "resource": {"group": "", "version": "v1", "resource": "services"},
            "name": "web",
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"type": service_type}
            },
            "dryRun": false
        }
    })
    .to_string()
}

#[tokio::test]
async fn reviews_are_answered_by_path_with_go_s_codes_and_metrics() {
    // Denies NodePort Services; fails on ExternalName ones.
    let no_node_ports = Webhook::new(
        "no-node-ports",
        "/validate-services",
        |request| async move {
            let kind = request
                .object
                .as_ref()
                .and_then(|o| o.data.pointer("/spec/type"))
                .and_then(|t| t.as_str())
                .unwrap_or("")
                .to_owned();
            // The handler leaves the uid out: the server sets it.
            let mut response = AdmissionResponse::from(&request);
            response.uid = String::new();
            match kind.as_str() {
                "ExternalName" => Err("the policy store is unreachable".into()),
                "NodePort" => Ok(response.deny("NodePort Services are not allowed here")),
                _ => Ok(response),
            }
        },
    );
    let mut registry = Registry::default();
    let certificate = self_signed("webhooks", &["localhost"]).unwrap();
    let ca = certificate.ca_der.clone();
    let server = WebhookServer::builder("127.0.0.1:0".parse().unwrap())
        .certificate(certificate)
        .webhook(no_node_ports)
        .metrics(WebhookMetrics::register(
            &mut registry,
            "cloud_provider_webhook",
        ))
        .bind()
        .await
        .unwrap();
    let addr = server.local_addr();
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(server.serve(stopped));
    let mut config = kube::Config::new(format!("https://{addr}").parse().unwrap());
    config.root_cert = Some(vec![ca]);
    let client = kube::Client::try_from(config).unwrap();
    let json = "application/json";

    let (code, body) = post(
        &client,
        "/validate-services",
        json,
        &review("u-1", "ClusterIP"),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(answer["response"]["uid"], "u-1");
    assert_eq!(answer["response"]["allowed"], true);

    let (code, body) = post(
        &client,
        "/validate-services",
        json,
        &review("u-2", "NodePort"),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["response"]["uid"], "u-2");
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(
        answer["response"]["status"]["message"],
        "NodePort Services are not allowed here"
    );

    let (code, body) = post(
        &client,
        "/validate-services",
        json,
        &review("u-3", "ExternalName"),
    )
    .await;
    assert_eq!(code, 500);
    assert!(body.contains("the policy store is unreachable"), "{body}");

    let (code, body) = post(&client, "/validate-services", json, "{not json").await;
    assert_eq!(code, 400);
    assert!(body.contains("not an AdmissionReview"), "{body}");
    let (code, body) = post(
        &client,
        "/validate-services",
        json,
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
    )
    .await;
    assert_eq!(code, 400);
    assert!(body.contains("no request"), "{body}");
    let (code, _) = post(
        &client,
        "/validate-services",
        "text/plain",
        &review("u-4", "ClusterIP"),
    )
    .await;
    assert_eq!(code, 415);
    let (code, _) = post(&client, "/elsewhere", json, &review("u-5", "ClusterIP")).await;
    assert_eq!(code, 404);
    let huge = " ".repeat(stratus_runtime::admission::MAX_REVIEW_BYTES + 1);
    let (code, _) = post(&client, "/validate-services", json, &huge).await;
    assert_eq!(code, 413);

    let text = encode_text(&registry).unwrap();
    for (code, count) in [("200", 2), ("500", 1), ("400", 2), ("415", 1), ("413", 1)] {
        let line = format!(
            "cloud_provider_webhook_request_total{{code=\"{code}\",webhook=\"no-node-ports\"}} {count}"
        );
        assert!(text.contains(&line), "{line} in {text}");
    }
    assert!(
        text.contains("cloud_provider_webhook_request_duration_seconds_bucket{le=\"0.25\",code=\"200\",webhook=\"no-node-ports\"} 2"),
        "{text}"
    );
    assert!(
        !text.contains("elsewhere"),
        "unknown paths are not webhooks: {text}"
    );
}

#[tokio::test]
async fn two_webhooks_on_one_path_are_refused() {
    let allow = |name: &str| {
        Webhook::new(name, "/same", |request| async move {
            Ok(AdmissionResponse::from(&request))
        })
    };
    let err = WebhookServer::builder("127.0.0.1:0".parse().unwrap())
        .plain_http()
        .webhook(allow("a"))
        .webhook(allow("b"))
        .bind()
        .await
        .unwrap_err();
    assert!(
        matches!(err, WebhookServerError::Duplicate(ref n) if n == "b"),
        "{err}"
    );
}
