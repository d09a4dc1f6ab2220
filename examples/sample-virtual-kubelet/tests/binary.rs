//! The sample binary end to end: it registers its Node, runs a pod bound to
//! it, and stops with exit 0 on SIGTERM.

use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use stratus::testing::ApiServer;

const BINARY: &str = env!("CARGO_BIN_EXE_sample-virtual-kubelet");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_pods_and_stops_on_sigterm() {
    let api = ApiServer::start().await.unwrap();
    let kubeconfig =
        std::env::temp_dir().join(format!("sample-vk-{}.kubeconfig", std::process::id()));
    api.write_kubeconfig(&kubeconfig).unwrap();
    let client_ca = std::env::temp_dir().join(format!("sample-vk-{}.ca.crt", std::process::id()));
    std::fs::write(&client_ca, api.kubelet_client_ca_pem()).unwrap();
    let mut child = Command::new(BINARY)
        .args([
            &format!("--kubeconfig={}", kubeconfig.display()),
            "--provider=mock",
            "--nodename=vk-sample",
            "--listen-address=127.0.0.1",
            "--kubelet-port=0",
            "--metrics-addr=127.0.0.1:0",
            &format!("--client-ca-file={}", client_ca.display()),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let nodes: kube::Api<Node> = kube::Api::all(api.client());
    stratus::testing::eventually("the node registers", Duration::from_secs(20), || async {
        nodes.get_opt("vk-sample").await.unwrap().is_some()
    })
    .await;
    let pods: kube::Api<Pod> = kube::Api::namespaced(api.client(), "default");
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "hello"},
        "spec": {"nodeName": "vk-sample", "containers": [{"name": "app", "image": "busybox"}]},
    }))
    .unwrap();
    pods.create(&Default::default(), &pod).await.unwrap();
    stratus::testing::eventually("the pod runs", Duration::from_secs(20), || async {
        pods.get("hello")
            .await
            .unwrap()
            .status
            .and_then(|s| s.phase)
            .as_deref()
            == Some("Running")
    })
    .await;
    // The kubelet API answers through the API server, which presents its
    // client certificate (trusted through --client-ca-file).
    let logs = pods.logs("hello", &Default::default()).await.unwrap();
    assert_eq!(logs, "started container app\n");
    let (status, stderr) =
        stratus::testing::process::terminate(&mut child, Duration::from_secs(10)).await;
    assert!(status.success(), "{status}: {stderr}");
    let _ = std::fs::remove_file(&kubeconfig);
    let _ = std::fs::remove_file(&client_ca);
}
