//! The virtual-kubelet command under exactly the RBAC it documents
//! (`stratus_kubelet::app::rbac`, `docs/deploy/virtual-kubelet-rbac.yaml`):
//! the harness authorizes with RBAC, the node runs with its ServiceAccount's
//! token, pods with ConfigMap and Secret references run and are deleted, the
//! kubelet API authenticates a caller through TokenReview and authorizes it
//! through SubjectAccessReview, `kubectl logs` through the API server works
//! with no `--client-ca-file` (the command reads the client CA the API
//! server publishes) — and any refused request fails the test.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
use kube::api::{Api, DeleteParams, LogParams, PostParams};
use serde_json::json;
use stratus_kubelet::app::{ProviderInit, register_pod_provider, run_with_args};
use stratus_testing::{ApiServer, MockPodProvider, ReviewUser, eventually};
use tokio::sync::watch;

/// Fail with the refused requests, which name the missing permission.
fn assert_nothing_refused(api: &ApiServer) {
    let refused = api.refused_requests();
    assert!(
        refused.is_empty(),
        "requests the documented RBAC does not allow: {refused:#?}"
    );
}

fn object<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_virtual_node_needs_no_permission_beyond_its_documented_roles() {
    let api = ApiServer::builder().rbac().start().await.unwrap();
    for o in stratus_kubelet::app::rbac::rbac("kube-system", "virtual-kubelet") {
        api.seed(o).unwrap();
    }
    let token = api
        .service_account_token("kube-system", "virtual-kubelet")
        .await
        .unwrap();
    let kubeconfig =
        std::env::temp_dir().join(format!("vk-rbac-{}.kubeconfig", std::process::id()));
    std::fs::write(&kubeconfig, api.kubeconfig_with_token(&token)).unwrap();
    register_pod_provider("rbac-test", |init: ProviderInit| {
        Ok(Arc::new(MockPodProvider::new().with_node_name(&init.node_name)) as _)
    })
    .unwrap();
    let (stop, stopped) = watch::channel(false);
    let args = vec![
        "virtual-kubelet".to_string(),
        "--provider=rbac-test".into(),
        "--nodename=vk-rbac".into(),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--listen-address=127.0.0.1".into(),
        "--kubelet-port=0".into(),
        "--authorization-mode=Webhook".into(),
        "--metrics-addr=".into(),
    ];
    let task = tokio::spawn(run_with_args(args, stopped));

    let nodes: Api<Node> = Api::all(api.client());
    eventually("vk-rbac Ready", Duration::from_secs(20), || async {
        assert_nothing_refused(&api);
        nodes
            .get_opt("vk-rbac")
            .await
            .unwrap()
            .and_then(|n| n.status?.conditions)
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    })
    .await;

    // A pod with references to a ConfigMap and a Secret runs and is deleted.
    let cms: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    cms.create(
        &PostParams::default(),
        &object(json!({"metadata": {"name": "settings"}, "data": {"color": "blue"}})),
    )
    .await
    .unwrap();
    let secrets: Api<Secret> = Api::namespaced(api.client(), "default");
    secrets
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": "token"}, "stringData": {"key": "s3cret"}})),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    pods.create(
        &PostParams::default(),
        &object(json!({
            "metadata": {"name": "web"},
            "spec": {
                "nodeName": "vk-rbac",
                "containers": [{
                    "name": "web", "image": "nginx",
                    "env": [
                        {"name": "COLOR", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "color"}}},
                        {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "token", "key": "key"}}}
                    ],
                    "volumeMounts": [{"name": "settings", "mountPath": "/etc/settings"}]
                }],
                "volumes": [{"name": "settings", "configMap": {"name": "settings"}}]
            }
        })),
    )
    .await
    .unwrap();
    eventually("the pod runs", Duration::from_secs(20), || async {
        assert_nothing_refused(&api);
        pods.get("web")
            .await
            .unwrap()
            .status
            .and_then(|s| s.phase)
            .as_deref()
            == Some("Running")
    })
    .await;

    // The kubelet API: a caller's token is reviewed, its access too.
    api.add_token(
        "reader-token",
        ReviewUser {
            username: "reader".into(),
            uid: "u-reader".into(),
            groups: vec!["system:authenticated".into()],
        },
    );
    api.seed(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "node-proxy-reader"},
        "rules": [{"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]}]
    }))
    .unwrap();
    api.seed(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "node-proxy-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "node-proxy-reader"},
        "subjects": [{"kind": "User", "name": "reader"}]
    }))
    .unwrap();
    let node = nodes.get("vk-rbac").await.unwrap();
    let port = node
        .status
        .unwrap()
        .daemon_endpoints
        .unwrap()
        .kubelet_endpoint
        .unwrap()
        .port;
    let client = kubelet_get(port, "/pods", "reader-token").await;
    assert!(
        client.0 == 200 && client.1.contains("\"web\""),
        "{client:?}"
    );
    let denied = kubelet_get(port, "/pods", "no-such-token").await;
    assert_eq!(denied.0, 401, "{denied:?}");

    // `kubectl logs` through the API server, which presents its kubelet
    // client certificate: the command was given no --client-ca-file and
    // read the CA the API server publishes in
    // kube-system/extension-apiserver-authentication.
    let logs = pods.logs("web", &LogParams::default()).await.unwrap();
    assert!(logs.contains("started container web"), "{logs:?}");

    pods.delete("web", &DeleteParams::default()).await.unwrap();
    eventually("the pod is gone", Duration::from_secs(20), || async {
        assert_nothing_refused(&api);
        pods.get_opt("web").await.unwrap().is_none()
    })
    .await;
    stop.send(true).unwrap();
    task.await.unwrap().unwrap();
    let _ = std::fs::remove_file(&kubeconfig);
    assert_nothing_refused(&api);
}

/// GET `path` from the kubelet API (self-signed TLS) with a bearer token.
async fn kubelet_get(port: i32, path: &str, token: &str) -> (u16, String) {
    let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().unwrap());
    config.accept_invalid_certs = true;
    config.auth_info.token = Some(token.to_owned().into());
    let client = kube::Client::try_from(config).unwrap();
    stratus_testing::http_status::send(&client, http::Request::get(path).body(Vec::new()).unwrap())
        .await
}
