//! The manager under exactly the RBAC it ships: the harness authorizes with
//! RBAC, the objects of `docs/deploy/rbac.yaml` (generated from the same
//! `deploy::rbac`) are the only grants, the manager runs with its
//! ServiceAccount's token and `--use-service-account-credentials`, and any
//! request the roles forgot fails the test with the request that was refused.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{free_port, load_balancer_service};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, PostParams};
use stratus_ccm::app::deploy::{DeployConfig, rbac};
use stratus_ccm::app::{Command, default_controllers};
use stratus_cloud::CloudProvider;
use stratus_testing::{ApiServer, FakeCloud, FakeInstance, NodeSpec, TestCluster, eventually};
use tokio::sync::watch;

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

    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("node-a").with_internal_ip("10.0.0.1"));
    let port = free_port();
    let args = vec![
        "cloud-controller-manager".to_string(),
        "--cloud-provider=fake".into(),
        "--leader-elect=true".into(),
        "--use-service-account-credentials".into(),
        "--allocate-node-cidrs=true".into(),
        "--configure-cloud-routes=true".into(),
        "--cluster-cidr=172.17.0.0/16".into(),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--secure-port={port}"),
        "--bind-address=127.0.0.1".into(),
    ];
    let provider = cloud.clone();
    let command = Command::new().cloud_initializer(move |_options, _flags| {
        Ok(Arc::new(provider) as Arc<dyn CloudProvider>)
    });
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(command.run_with_args(args, stopped));

    let _kubelet = cluster
        .add_node(NodeSpec::new("node-a").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    services
        .create(&PostParams::default(), &load_balancer_service("web"))
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(cluster.client());
    eventually(
        "the node is initialized, given a pod CIDR and a route; web has a load balancer",
        Duration::from_secs(30),
        || async {
            assert_nothing_refused(&cluster);
            let node = nodes.get("node-a").await.unwrap();
            let spec = node.spec.unwrap_or_default();
            let web = services.get("web").await.unwrap();
            spec.provider_id.as_deref() == Some("fake://node-a")
                && spec.pod_cidr.is_some()
                && !cloud.routes_list().is_empty()
                && web
                    .status
                    .and_then(|s| s.load_balancer)
                    .and_then(|l| l.ingress)
                    .is_some_and(|i| !i.is_empty())
        },
    )
    .await;
    // Deleting the service releases its load balancer, also under RBAC.
    services.delete("web", &Default::default()).await.unwrap();
    eventually(
        "the load balancer is released",
        Duration::from_secs(30),
        || async { cloud.load_balancers().is_empty() },
    )
    .await;
    stop.send(true).unwrap();
    task.await.unwrap().unwrap();
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
