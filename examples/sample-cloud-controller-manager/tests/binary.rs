//! The sample binary end to end: flags, kubeconfig, the registered
//! provider, node initialization, and SIGTERM → graceful stop with exit 0.

use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use stratus::testing::{NodeSpec, TestCluster};

const BINARY: &str = env!("CARGO_BIN_EXE_sample-cloud-controller-manager");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initializes_nodes_and_stops_on_sigterm() {
    let cluster = TestCluster::start().await.unwrap();
    let _kubelet = cluster
        .add_node(NodeSpec::new("node-1").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    let kubeconfig =
        std::env::temp_dir().join(format!("sample-ccm-{}.kubeconfig", std::process::id()));
    cluster.server().write_kubeconfig(&kubeconfig).unwrap();
    let mut child = Command::new(BINARY)
        .args([
            "--cloud-provider=fake",
            &format!("--kubeconfig={}", kubeconfig.display()),
            "--secure-port=0",
            // FakeCloud has routes: as in Go, they need the pod CIDR.
            "--cluster-cidr=10.244.0.0/16",
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=500ms",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let nodes: kube::Api<Node> = kube::Api::all(cluster.client());
    stratus::testing::eventually(
        "node-1 initialized by the binary",
        Duration::from_secs(20),
        || async {
            nodes
                .get("node-1")
                .await
                .unwrap()
                .spec
                .unwrap_or_default()
                .provider_id
                .as_deref()
                == Some("fake://node-1")
        },
    )
    .await;
    let (status, stderr) =
        stratus::testing::process::terminate(&mut child, Duration::from_secs(10)).await;
    assert!(status.success(), "{status}: {stderr}");
    // The Lease was released on the way out.
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(cluster.client(), "kube-system");
    let lease = leases.get("cloud-controller-manager").await.unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity.unwrap_or_default(), "");
    let _ = std::fs::remove_file(&kubeconfig);
}

#[test]
fn bad_flags_exit_non_zero_with_every_problem() {
    let out = Command::new(BINARY)
        .args([
            "--cloud-provider=fake",
            "--controllers=nope",
            "--kube-api-burst=0",
            "--kubeconfig=/nonexistent",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\"nope\" is not a known controller"),
        "{stderr}"
    );
    let version = Command::new(BINARY).arg("--version").output().unwrap();
    assert!(version.status.success());
    assert!(String::from_utf8_lossy(&version.stdout).contains("cloud-controller-manager"));
}
