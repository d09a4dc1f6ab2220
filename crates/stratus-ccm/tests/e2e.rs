//! The end-to-end runner (`stratus_testing::e2e::run_ccm_e2e`, what
//! `cargo xtask e2e --ccm` runs against a real cluster) against the
//! manager on the harness: a healthy cloud passes (routes and the deletion
//! of a Node whose instance is gone included); a cloud whose load
//! balancers fail is reported with the contract it broke, and so is a
//! cloud that never says an instance is gone.

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use stratus_ccm::app::{CloudControllerManager, ManagerOptions};
use stratus_cloud::CloudErrorKind;
use stratus_testing::conformance::Outcome;
use stratus_testing::e2e::{E2eConfig, run_ccm_e2e};
use stratus_testing::{FakeCloud, FakeInstance, NodeSpec, TestCluster};
use tokio::sync::watch;

#[derive(Parser)]
struct Command {
    #[command(flatten)]
    options: ManagerOptions,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_e2e_runner_passes_a_healthy_cloud_and_names_a_broken_contract() {
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    let mut kubelets = Vec::new();
    for name in ["e2e-0", "e2e-1"] {
        cloud.add_instance(FakeInstance::new(name).with_internal_ip("10.0.0.7"));
        kubelets.push(
            cluster
                .add_node(NodeSpec::new(name).with_heartbeat(Duration::from_secs(3600)))
                .await
                .unwrap(),
        );
    }
    let options = Command::try_parse_from([
        "ccm",
        "--cloud-provider=fake",
        "--leader-elect=false",
        "--cluster-cidr=10.244.0.0/16",
        "--allocate-node-cidrs",
        "--node-monitor-period=1s",
    ])
    .unwrap()
    .options;
    let (stop, stopped) = watch::channel(false);
    let manager = CloudControllerManager::new(options)
        .with_client(cluster.client())
        .with_provider(Arc::new(cloud.clone()))
        .with_admin_addr("127.0.0.1:0".parse().unwrap())
        .start(stopped)
        .await
        .unwrap();
    let config = E2eConfig {
        wait: Duration::from_secs(10),
        ..E2eConfig::default()
    };

    let healthy = run_ccm_e2e(cluster.client(), &config).await;
    healthy.assert_passed();
    let passed = healthy
        .checks
        .iter()
        .filter(|c| c.outcome == Outcome::Passed)
        .count();
    assert_eq!(passed, 6, "{healthy}");
    // The Node the runner registered for the lifecycle check is gone, and
    // the cloud was asked about it.
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(cluster.client());
    let left = nodes
        .list(&kube::api::ListParams::default().labels("app.kubernetes.io/managed-by=stratus-e2e"))
        .await
        .unwrap();
    assert!(left.items.is_empty(), "{:?}", left.items);

    cloud.fail_next("ensure_load_balancer", CloudErrorKind::Other, 10_000);
    let config = E2eConfig {
        wait: Duration::from_secs(5),
        ..E2eConfig::default()
    };
    let broken = run_ccm_e2e(cluster.client(), &config).await;
    let failed: Vec<String> = broken
        .failures()
        .iter()
        .map(|c| format!("{}: {:?}", c.name, c.outcome))
        .collect();
    assert!(
        failed
            .iter()
            .any(|f| f.starts_with("a LoadBalancer Service gets an ingress")
                && f.contains("no load balancer was provisioned (ensure_load_balancer)")),
        "{broken}"
    );
    // The Nodes still pass: only the broken contract is named.
    assert!(!failed.iter().any(|f| f.contains("Node")), "{broken}");

    // A cloud that answers every instance exists: the lifecycle check fails
    // and says which answer was wrong.
    let config = E2eConfig {
        wait: Duration::from_secs(4),
        gone_provider_id: Some("fake://e2e-0".into()),
        ..E2eConfig::default()
    };
    let kept = run_ccm_e2e(cluster.client(), &config).await;
    let lifecycle = kept
        .failures()
        .into_iter()
        .find(|c| c.name.contains("instance does not exist"))
        .unwrap_or_else(|| panic!("the lifecycle check should fail: {kept}"));
    assert!(
        format!("{:?}", lifecycle.outcome).contains("instance_state / instance_exists"),
        "{kept}"
    );
    stop.send(true).unwrap();
    manager.wait().await.unwrap();
}
