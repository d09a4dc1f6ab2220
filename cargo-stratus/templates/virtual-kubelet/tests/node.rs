//! The binary against an in-memory API server (Stratus's test harness): it
//! registers its Node with the provider's taint, keeps it Ready, and on
//! SIGTERM exits 0.

use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use stratus::testing::{ApiServer, eventually, process::terminate};

const BINARY: &str = env!("CARGO_BIN_EXE_{{crate}}");

fn ready_with_taint(node: &Node) -> bool {
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter().any(|t| {
                t.key == "virtual-kubelet.io/provider"
                    && t.value.as_deref() == Some("{{name}}")
                    && t.effect == "NoSchedule"
            })
        });
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    tainted && ready
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registers_the_node_and_stops_on_sigterm() {
    let api = ApiServer::start().await.expect("the API server starts");
    let dir = std::env::temp_dir().join(format!("{{crate}}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).expect("kubeconfig written");
    let client_ca = dir.join("ca.crt");
    std::fs::write(&client_ca, api.kubelet_client_ca_pem()).expect("client CA written");
    let mut child = Command::new(BINARY)
        .args([
            &format!("--kubeconfig={}", kubeconfig.display()),
            "--provider={{name}}",
            "--nodename=vk-{{name}}",
            "--listen-address=127.0.0.1",
            "--kubelet-port=0",
            "--metrics-addr=127.0.0.1:0",
            &format!("--client-ca-file={}", client_ca.display()),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let nodes: kube::Api<Node> = kube::Api::all(api.client());
    eventually("the node Ready with the provider's taint", Duration::from_secs(30), || async {
        nodes
            .get_opt("vk-{{name}}")
            .await
            .ok()
            .flatten()
            .is_some_and(|n| ready_with_taint(&n))
    })
    .await;
    let (status, stderr) = terminate(&mut child, Duration::from_secs(15)).await;
    assert!(status.success(), "{status}: {stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_provider_config_is_refused_with_the_reason() {
    let api = ApiServer::start().await.expect("the API server starts");
    let dir = std::env::temp_dir().join(format!("{{crate}}-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).expect("kubeconfig written");
    let config = dir.join("provider.yaml");
    std::fs::write(&config, "regoin: eu-1\n").expect("config written");
    let out = Command::new(BINARY)
        .args([
            "--provider={{name}}",
            &format!("--provider-config={}", config.display()),
            "--nodename=vk-{{name}}",
            &format!("--kubeconfig={}", kubeconfig.display()),
            "--listen-address=127.0.0.1",
            "--kubelet-port=0",
            "--metrics-addr=127.0.0.1:0",
        ])
        .output()
        .expect("the binary runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("regoin"), "{stderr}");
}
