//! The end-to-end checks against a real cluster running this manager
//! (Nodes initialized with provider ID and addresses, routes for their pod
//! CIDRs, a LoadBalancer Service provisioned and released, a Node whose
//! instance is gone deleted), seen through the API server only. Everything
//! it creates is labelled `app.kubernetes.io/managed-by=stratus-e2e` and
//! deleted. A cluster without cloud routes sets `routes: false`; a cloud
//! whose provider IDs carry more than a trailing instance name sets
//! `gone_provider_id` to the ID of an instance that does not exist.
//!
//! ```sh
//! STRATUS_E2E_KUBECONFIG=~/.kube/config cargo test --test e2e -- --ignored --nocapture
//! ```

use stratus::testing::e2e::{E2eConfig, run_ccm_e2e};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster running this manager: set STRATUS_E2E_KUBECONFIG"]
async fn the_manager_keeps_its_contracts_in_a_real_cluster() {
    let path = std::env::var("STRATUS_E2E_KUBECONFIG")
        .expect("STRATUS_E2E_KUBECONFIG: the kubeconfig of the cluster under test");
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).expect("a readable kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("a usable kubeconfig");
    let client = kube::Client::try_from(config).expect("a client");
    let report = run_ccm_e2e(client, &E2eConfig::default()).await;
    println!("{report}");
    report.assert_passed();
}
