//! The binary against an in-memory API server (Stratus's test harness):
//! it parses the manager's flags, takes the leader Lease, runs the
//! controllers and, on SIGTERM, releases the Lease and exits 0.

use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use stratus::testing::{TestCluster, eventually, process::terminate};

const BINARY: &str = env!("CARGO_BIN_EXE_{{crate}}");

fn holder(lease: Option<Lease>) -> String {
    lease
        .and_then(|l| l.spec?.holder_identity)
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leads_runs_and_stops_on_sigterm() {
    let cluster = TestCluster::start().await.expect("the API server starts");
    let kubeconfig = std::env::temp_dir().join(format!("{{crate}}-{}.kubeconfig", std::process::id()));
    cluster.server().write_kubeconfig(&kubeconfig).expect("kubeconfig written");
    let mut child = Command::new(BINARY)
        .args([
            "--cloud-provider={{name}}",
            &format!("--kubeconfig={}", kubeconfig.display()),
            "--secure-port=0",
            // The provider has routes: as in Go, they need the pod CIDR.
            "--cluster-cidr=10.244.0.0/16",
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=500ms",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let leases: kube::Api<Lease> = kube::Api::namespaced(cluster.client(), "kube-system");
    eventually("the manager holds the leader Lease", Duration::from_secs(30), || async {
        !holder(leases.get_opt("cloud-controller-manager").await.ok().flatten()).is_empty()
    })
    .await;
    let (status, stderr) = terminate(&mut child, Duration::from_secs(15)).await;
    assert!(status.success(), "{status}: {stderr}");
    let lease = leases.get_opt("cloud-controller-manager").await.expect("read the Lease");
    assert_eq!(holder(lease), "", "the Lease is released on the way out");
    let _ = std::fs::remove_file(&kubeconfig);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_cloud_config_is_refused_with_the_reason() {
    let cluster = TestCluster::start().await.expect("the API server starts");
    let dir = std::env::temp_dir().join(format!("{{crate}}-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let kubeconfig = dir.join("kubeconfig");
    cluster.server().write_kubeconfig(&kubeconfig).expect("kubeconfig written");
    let config = dir.join("cloud.yaml");
    std::fs::write(&config, "regoin: eu-1\n").expect("config written");
    let out = Command::new(BINARY)
        .args([
            "--cloud-provider={{name}}",
            &format!("--cloud-config={}", config.display()),
            &format!("--kubeconfig={}", kubeconfig.display()),
            "--secure-port=0",
        ])
        .output()
        .expect("the binary runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("regoin"), "{stderr}");
}
