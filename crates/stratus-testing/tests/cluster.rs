//! The simulated kubelet and scheduler of `TestCluster`.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stratus_testing::eventually;
use stratus_testing::{NodeSpec, TestCluster};

/// How long a test waits for the controllers to converge.
const WAIT: Duration = Duration::from_secs(5);

#[tokio::test]
async fn kubelets_register_heartbeat_and_reregister() {
    let cluster = TestCluster::start().await.unwrap();
    let kubelet = cluster
        .add_node(
            NodeSpec::new("node-a")
                .with_internal_ip("10.0.0.7")
                .with_heartbeat(Duration::from_millis(50)),
        )
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(cluster.client());
    let node = nodes.get("node-a").await.unwrap();
    let taints = node.spec.unwrap().taints.unwrap();
    assert_eq!(
        taints[0].key,
        "node.cloudprovider.kubernetes.io/uninitialized"
    );
    assert_eq!(taints[0].effect, "NoSchedule");
    let status = node.status.unwrap();
    assert!(
        status
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );
    assert_eq!(status.addresses.unwrap()[0].address, "10.0.0.7");

    let leases: Api<Lease> = Api::namespaced(cluster.client(), "kube-node-lease");
    eventually("a lease", WAIT, || async {
        leases.get_opt("node-a").await.unwrap().is_some()
    })
    .await;
    let first = leases
        .get("node-a")
        .await
        .unwrap()
        .spec
        .unwrap()
        .renew_time
        .unwrap();
    eventually("a renewal", WAIT, || {
        let leases = leases.clone();
        let first = first.clone();
        async move {
            leases
                .get("node-a")
                .await
                .unwrap()
                .spec
                .unwrap()
                .renew_time
                .unwrap()
                != first
        }
    })
    .await;

    kubelet.set_ready(false);
    eventually("NotReady", WAIT, || async {
        let n = nodes.get("node-a").await.unwrap();
        n.status
            .unwrap()
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "False")
    })
    .await;

    nodes
        .delete("node-a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("re-registration", WAIT, || async {
        nodes.get_opt("node-a").await.unwrap().is_some()
    })
    .await;
    kubelet.stop();
}

#[tokio::test]
async fn scheduler_binds_pods_to_untainted_ready_nodes() {
    let mut cluster = TestCluster::start().await.unwrap();
    let _tainted = cluster.add_node(NodeSpec::new("tainted")).await.unwrap();
    let mut spec = NodeSpec::new("free");
    spec.external_cloud_provider = false;
    let _free = cluster.add_node(spec).await.unwrap();
    cluster.start_scheduler();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    for i in 0..3 {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": format!("p{i}")},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    eventually("all pods bound", WAIT, || async {
        let list = pods.list(&Default::default()).await.unwrap();
        list.items
            .iter()
            .all(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some("free"))
    })
    .await;
    // Removing the taint makes the other node eligible too.
    let nodes: Api<Node> = Api::all(cluster.client());
    nodes
        .patch(
            "tainted",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": null}})),
        )
        .await
        .unwrap();
    for i in 3..7 {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": format!("p{i}")},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    eventually("pods on both nodes", WAIT, || async {
        let list = pods.list(&Default::default()).await.unwrap();
        let on_tainted = list
            .items
            .iter()
            .filter(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some("tainted"))
            .count();
        let unbound = list
            .items
            .iter()
            .filter(|p| p.spec.as_ref().unwrap().node_name.is_none())
            .count();
        on_tainted > 0 && unbound == 0
    })
    .await;
}
