//! The manager under exactly the RBAC it ships: the harness authorizes with
//! RBAC, the objects of `docs/deploy/rbac.yaml` (generated from the same
//! `deploy::rbac`) are the only grants, the manager runs with its
//! ServiceAccount's token and `--use-service-account-credentials`, and any
//! request the roles forgot fails the test with the request that was refused.

mod common;
mod documented;

use std::time::Duration;

use documented::DocumentedManager;
use k8s_openapi::api::core::v1::Service;
use kube::api::Api;
use stratus_ccm::app::default_controllers;
use stratus_ccm::app::deploy::{DeployConfig, rbac};
use stratus_testing::{ApiServer, TestCluster, eventually};

/// Fail with the refused requests, which name the missing permission.
fn assert_nothing_refused(cluster: &TestCluster) {
    let refused = cluster.server().refused_requests();
    assert!(
        refused.is_empty(),
        "requests the shipped RBAC does not allow: {refused:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manager_needs_no_permission_beyond_its_shipped_roles() {
    let server = ApiServer::builder().rbac().start().await.unwrap();
    let cluster = TestCluster::from_server(server);
    for object in rbac(&DeployConfig::new("fake", "unused"), &default_controllers()) {
        cluster.server().seed(object).unwrap();
    }
    // The manager's own identity: its ServiceAccount's token.
    let token = cluster
        .server()
        .service_account_token("kube-system", "cloud-controller-manager")
        .await
        .unwrap();
    let kubeconfig =
        std::env::temp_dir().join(format!("stratus-rbac-{}.kubeconfig", std::process::id()));
    std::fs::write(&kubeconfig, cluster.server().kubeconfig_with_token(&token)).unwrap();

    let manager = DocumentedManager::start(&kubeconfig, &[]);
    let _kubelet = manager
        .converge(&cluster, || assert_nothing_refused(&cluster))
        .await;
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    // Its admin port serves health under the same identity.
    let admin =
        stratus_testing::http_status::insecure_client(([127, 0, 0, 1], manager.port).into());
    let (code, body) = stratus_testing::http_status::get(&admin, "/healthz").await;
    assert_eq!(code, 200, "{body}");
    // Deleting the service releases its load balancer, also under RBAC.
    services.delete("web", &Default::default()).await.unwrap();
    eventually(
        "the load balancer is released",
        Duration::from_secs(30),
        || async { manager.cloud.load_balancers().is_empty() },
    )
    .await;
    manager.stop().await;
    let _ = std::fs::remove_file(&kubeconfig);

    assert_nothing_refused(&cluster);
    // The manager itself and each controller acted under their own accounts.
    let users: std::collections::BTreeSet<String> = cluster
        .server()
        .requests()
        .into_iter()
        .map(|r| r.user)
        .collect();
    for account in [
        "cloud-controller-manager",
        "cloud-node-controller",
        "service-controller",
        "route-controller",
    ] {
        let user = format!("system:serviceaccount:kube-system:{account}");
        assert!(users.contains(&user), "{user} made no request: {users:?}");
    }
}
