//! Admission webhooks called by the server: a real HTTPS webhook (its own
//! CA, handed over in `caBundle`) mutates and validates writes made
//! through `kube::Client`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stratus_apiserver::ApiServer;

type Decide = Arc<dyn Fn(&Value) -> Value + Send + Sync>;

/// A webhook over HTTPS: its URL, its CA (PEM), and the requests it saw.
struct Webhook {
    url: String,
    ca_pem: String,
    seen: Arc<Mutex<Vec<Value>>>,
}

async fn webhook(decide: impl Fn(&Value) -> Value + Send + Sync + 'static) -> Webhook {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let cert = params.signed_by(&key, &issuer).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let decide: Decide = Arc::new(decide);
    let (seen2, decide2) = (seen.clone(), decide.clone());
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let Ok(tls) = acceptor.accept(tcp).await else {
                continue;
            };
            let (seen, decide) = (seen2.clone(), decide2.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: http::Request<Incoming>| {
                    let (seen, decide) = (seen.clone(), decide.clone());
                    async move {
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let review: Value = serde_json::from_slice(&body).unwrap();
                        let request = review["request"].clone();
                        seen.lock().unwrap().push(request.clone());
                        let mut response = decide(&request);
                        response["uid"] = request["uid"].clone();
                        let answer = json!({"apiVersion": "admission.k8s.io/v1",
                            "kind": "AdmissionReview", "response": response});
                        Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(
                            bytes::Bytes::from(answer.to_string()),
                        )))
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Webhook {
        url: format!("https://{addr}/admit"),
        ca_pem: ca.pem(),
        seen,
    }
}

fn client_config(hook: &Webhook) -> Value {
    json!({"url": hook.url,
        "caBundle": base64::engine::general_purpose::STANDARD.encode(&hook.ca_pem)})
}

fn configmap_rules() -> Value {
    json!([{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [""],
        "apiVersions": ["v1"], "resources": ["configmaps"]}])
}

async fn configure(server: &ApiServer, kind: &str, webhooks: Value) {
    let plural = format!("{}s", kind.to_lowercase());
    let body = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": format!("test-{}", plural)}, "webhooks": webhooks});
    let req = http::Request::post(format!("/apis/admissionregistration.k8s.io/v1/{plural}"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    server.client().request_text(req).await.unwrap();
}

fn cm(name: &str, labels: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels},
        "data": {"k": "v"}}))
    .unwrap()
}

fn api_error(err: kube::Error) -> (u16, String) {
    match err {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn add_label_patch() -> String {
    let ops = json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]);
    base64::engine::general_purpose::STANDARD.encode(ops.to_string())
}

#[tokio::test]
async fn validating_webhooks_allow_deny_and_warn() {
    let server = ApiServer::start().await.unwrap();
    let hook = webhook(|request| {
        let denied = request.pointer("/object/metadata/labels/deny").is_some()
            || request.pointer("/oldObject/metadata/labels/keep").is_some()
                && request["operation"] == "DELETE";
        if denied {
            json!({"allowed": false, "status": {"code": 403, "message": "labelled deny"}})
        } else {
            json!({"allowed": true, "warnings": ["seen by the test webhook"]})
        }
    })
    .await;
    configure(
        &server,
        "ValidatingWebhookConfiguration",
        json!([{
        "name": "deny.example.com", "clientConfig": client_config(&hook),
        "rules": configmap_rules(), "sideEffects": "None", "admissionReviewVersions": ["v1"]}]),
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    cms.create(&PostParams::default(), &cm("fine", json!({"keep": "1"})))
        .await
        .unwrap();
    let (code, message) = api_error(
        cms.create(&PostParams::default(), &cm("bad", json!({"deny": "1"})))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403);
    assert_eq!(
        message,
        "admission webhook \"deny.example.com\" denied the request: labelled deny"
    );
    assert!(cms.get_opt("bad").await.unwrap().is_none());
    // An update that would add the label is refused too; the object stays.
    let patch = Patch::Merge(json!({"metadata": {"labels": {"deny": "1"}}}));
    let (code, _) = api_error(
        cms.patch("fine", &PatchParams::default(), &patch)
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403);
    assert!(
        !cms.get("fine")
            .await
            .unwrap()
            .metadata
            .labels
            .unwrap()
            .contains_key("deny")
    );
    // Deletes are reviewed with the old object.
    let (code, _) = api_error(
        cms.delete("fine", &DeleteParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403);

    // A generated name: the object is stored under the name the webhook saw.
    let mut generated = cm("", json!({}));
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".into());
    let made = cms
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let made_name = made.metadata.name.unwrap();
    assert!(
        hook.seen
            .lock()
            .unwrap()
            .iter()
            .any(|r| r["name"] == made_name.as_str() && r["operation"] == "CREATE"),
        "the webhook saw {made_name}"
    );

    let seen = hook.seen.lock().unwrap().clone();
    let create = &seen[0];
    assert_eq!(create["operation"], "CREATE");
    assert_eq!(create["name"], "fine");
    assert_eq!(create["namespace"], "default");
    assert_eq!(
        create["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        create["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(create["userInfo"]["username"], "kubernetes-admin");
    assert!(create["object"]["metadata"]["uid"].is_string());
    let update = seen.iter().find(|r| r["operation"] == "UPDATE").unwrap();
    assert_eq!(update["oldObject"]["metadata"]["name"], "fine");
    let delete = seen.iter().find(|r| r["operation"] == "DELETE").unwrap();
    assert!(delete["object"].is_null());
    assert_eq!(delete["oldObject"]["metadata"]["labels"]["keep"], "1");
}

#[tokio::test]
async fn mutating_webhooks_patch_what_is_stored() {
    let server = ApiServer::start().await.unwrap();
    let patch = add_label_patch();
    let hook = webhook(move |request| {
        if request.pointer("/object/metadata/labels/mutated").is_some() {
            json!({"allowed": true})
        } else {
            json!({"allowed": true, "patchType": "JSONPatch", "patch": patch})
        }
    })
    .await;
    configure(
        &server,
        "MutatingWebhookConfiguration",
        json!([{
        "name": "label.example.com", "clientConfig": client_config(&hook),
        "rules": configmap_rules(), "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "objectSelector": {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]}}]),
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let created = cms
        .create(&PostParams::default(), &cm("m", json!({"app": "x"})))
        .await
        .unwrap();
    let labels = created.metadata.labels.unwrap();
    assert_eq!(labels["mutated"], "yes");
    assert_eq!(labels["app"], "x");
    assert_eq!(
        cms.get("m").await.unwrap().metadata.labels.unwrap()["mutated"],
        "yes"
    );

    // A patch that removes the label gets it back.
    let remove = Patch::Json::<()>(
        serde_json::from_value(json!([
        {"op": "remove", "path": "/metadata/labels/mutated"}]))
        .unwrap(),
    );
    let patched = cms
        .patch("m", &PatchParams::default(), &remove)
        .await
        .unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["mutated"], "yes");

    // The object selector leaves labelled objects alone.
    let skipped = cms
        .create(&PostParams::default(), &cm("s", json!({"skip": "1"})))
        .await
        .unwrap();
    assert!(!skipped.metadata.labels.unwrap().contains_key("mutated"));
    // generateName: the webhook sees the generated name.
    let mut generated = cm("", json!({"app": "generated"}));
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".into());
    let made = cms
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let name = made.metadata.name.unwrap();
    assert!(name.starts_with("gen-"));
    assert!(
        hook.seen
            .lock()
            .unwrap()
            .iter()
            .any(|r| r["name"] == name.as_str())
    );
}

#[tokio::test]
async fn failure_policy_namespace_selector_and_dry_run() {
    let server = ApiServer::start().await.unwrap();
    let hook = webhook(|_| json!({"allowed": true})).await;
    configure(
        &server,
        "ValidatingWebhookConfiguration",
        json!([
            {"name": "down.example.com", "failurePolicy": "Fail",
             "clientConfig": {"url": "https://127.0.0.1:1/nowhere"},
             "rules": configmap_rules(), "sideEffects": "None", "admissionReviewVersions": ["v1"],
             "namespaceSelector": {"matchLabels": {"guarded": "true"}}},
            {"name": "ignored.example.com", "failurePolicy": "Ignore", "timeoutSeconds": 1,
             "clientConfig": {"url": "https://127.0.0.1:1/nowhere"},
             "rules": configmap_rules(), "sideEffects": "None", "admissionReviewVersions": ["v1"]},
            {"name": "effects.example.com", "clientConfig": client_config(&hook),
             "rules": configmap_rules(), "sideEffects": "Some", "admissionReviewVersions": ["v1"]},
        ]),
    )
    .await;
    let client = server.client();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ns = serde_json::from_value(
        json!({"metadata": {"name": "guarded", "labels": {"guarded": "true"}}}),
    )
    .unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();

    // Outside the selected namespace the failing webhook is not called, the
    // ignored one fails quietly and the third answers.
    let plain: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    plain
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    assert_eq!(hook.seen.lock().unwrap().len(), 1);
    // In it, the unreachable webhook fails the request.
    let guarded: Api<ConfigMap> = Api::namespaced(client.clone(), "guarded");
    let (code, message) = api_error(
        guarded
            .create(&PostParams::default(), &cm("b", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 500);
    assert!(
        message.starts_with("Internal error occurred: failed calling webhook \"down.example.com\": failed to call webhook: Post \"https://127.0.0.1:1/nowhere\""),
        "{message}"
    );
    // A webhook with side effects refuses dry runs.
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let (code, message) = api_error(plain.create(&dry, &cm("c", json!({}))).await.unwrap_err());
    assert_eq!(code, 400);
    assert_eq!(
        message,
        "admission webhook \"effects.example.com\" does not support dry run"
    );
}
