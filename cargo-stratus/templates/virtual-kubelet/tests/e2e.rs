//! Go virtual-kubelet's end-to-end cases against a real cluster running
//! this node (Ready, Lease renewed, a pod runs and is deleted gracefully and
//! forcibly, logs, exec and stats through the API server), seen through the
//! API server only.
//! Everything it creates is labelled `app.kubernetes.io/managed-by=stratus-e2e`
//! and deleted.
//!
//! ```sh
//! STRATUS_E2E_KUBECONFIG=~/.kube/config STRATUS_E2E_NODE=vk-{{name}} \
//!     cargo test --test e2e -- --ignored --nocapture
//! ```

use stratus::testing::e2e::{E2eConfig, run_virtual_node_e2e};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster running this node: set STRATUS_E2E_KUBECONFIG"]
async fn the_node_keeps_its_contracts_in_a_real_cluster() {
    let path = std::env::var("STRATUS_E2E_KUBECONFIG")
        .expect("STRATUS_E2E_KUBECONFIG: the kubeconfig of the cluster under test");
    let node = std::env::var("STRATUS_E2E_NODE").unwrap_or_else(|_| "vk-{{name}}".into());
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).expect("a readable kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("a usable kubeconfig");
    let client = kube::Client::try_from(config).expect("a client");
    let report = run_virtual_node_e2e(client, &node, &E2eConfig::default()).await;
    println!("{report}");
    report.assert_passed();
}
