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

/// Act as the kubelet of every pod, until aborted: a bound pod becomes
/// Running and Ready with an IP; a terminating one goes at once.
fn fake_kubelet(client: kube::Client) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let all: Api<Pod> = Api::all(client.clone());
        loop {
            for pod in all.list(&Default::default()).await.unwrap().items {
                let (Some(ns), Some(name)) = (pod.metadata.namespace, pod.metadata.name) else {
                    continue;
                };
                let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
                if pod.metadata.deletion_timestamp.is_some() {
                    let _ = api
                        .delete(&name, &DeleteParams::default().grace_period(0))
                        .await;
                } else if pod.status.and_then(|s| s.phase).as_deref() != Some("Running") {
                    let status = json!({"status": {"phase": "Running", "podIP": "10.1.0.1",
                        "conditions": [{"type": "Ready", "status": "True"}]}});
                    let _ = api
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
                        .await;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_roll_out_within_their_budget_scale_and_are_collected() {
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use stratus_testing::deployments::POD_TEMPLATE_HASH;
    let mut cluster = TestCluster::start().await.unwrap();
    cluster.start_deployments();
    let kubelet = fake_kubelet(cluster.client());
    let deployments: Api<Deployment> = Api::namespaced(cluster.client(), "default");
    let sets: Api<ReplicaSet> = Api::namespaced(cluster.client(), "default");
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]}},
        },
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let rolled_out = || async {
        let d = deployments.get("web").await.unwrap();
        let want = d.spec.replicas.unwrap_or(1);
        d.status.is_some_and(|s| {
            s.observed_generation == d.metadata.generation
                && s.updated_replicas == Some(want)
                && s.available_replicas == Some(want)
                && s.replicas == Some(want)
        })
    };
    eventually("web rolled out", Duration::from_secs(10), rolled_out).await;
    let first = sets.list(&Default::default()).await.unwrap().items;
    assert_eq!(first.len(), 1);
    let hash = first[0].metadata.labels.as_ref().unwrap()[POD_TEMPLATE_HASH].clone();
    assert_eq!(
        first[0].metadata.name.as_deref(),
        Some(format!("web-{hash}").as_str())
    );
    let owned = pods.list(&Default::default()).await.unwrap().items;
    assert_eq!(owned.len(), 3);
    assert!(owned.iter().all(|p| {
        p.metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with(&format!("web-{hash}-"))
            && p.metadata.labels.as_ref().unwrap()[POD_TEMPLATE_HASH] == hash
    }));

    // A restart (what `kubectl rollout restart` writes): a new ReplicaSet,
    // never more than 3 pods (maxSurge 0) nor fewer than 2 Ready
    // (maxUnavailable 1) while it rolls.
    let restart = json!({"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": "2026-11-28T00:00:00Z"}}}}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(restart))
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let listed = pods.list(&Default::default()).await.unwrap().items;
        let live: Vec<&Pod> = listed
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        assert!(live.len() <= 3, "maxSurge 0: {} pods", live.len());
        let ready = live
            .iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        assert!(ready >= 2, "maxUnavailable 1: {ready} Ready");
        if rolled_out().await && sets.list(&Default::default()).await.unwrap().items.len() == 2 {
            let listed = pods.list(&Default::default()).await.unwrap().items;
            if listed.len() == 3
                && listed
                    .iter()
                    .all(|p| p.metadata.labels.as_ref().unwrap()[POD_TEMPLATE_HASH] != hash)
            {
                break;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not rolled out: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let old = sets.get(&format!("web-{hash}")).await.unwrap();
    assert_eq!(
        old.spec.replicas,
        Some(0),
        "the old ReplicaSet is kept at zero"
    );

    // Scaled down to one; then deleted, with everything it owns.
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    eventually("one pod left", Duration::from_secs(10), || async {
        pods.list(&Default::default()).await.unwrap().items.len() == 1 && rolled_out().await
    })
    .await;
    deployments
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "its ReplicaSets and pods collected",
        Duration::from_secs(10),
        || async {
            sets.list(&Default::default())
                .await
                .unwrap()
                .items
                .is_empty()
                && pods
                    .list(&Default::default())
                    .await
                    .unwrap()
                    .items
                    .is_empty()
        },
    )
    .await;
    kubelet.abort();
}

#[tokio::test]
async fn the_scheduler_puts_pods_with_one_host_port_on_different_nodes() {
    let mut cluster = TestCluster::start().await.unwrap();
    let mut kubelets = Vec::new();
    for name in ["a", "b"] {
        let mut spec = NodeSpec::new(name);
        spec.external_cloud_provider = false;
        kubelets.push(cluster.add_node(spec).await.unwrap());
    }
    cluster.start_scheduler();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let with_port = |name: &str| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "i",
                "ports": [{"containerPort": 8080, "hostPort": 8080}]}]}}))
        .unwrap()
    };
    for name in ["p0", "p1", "p2"] {
        pods.create(&PostParams::default(), &with_port(name))
            .await
            .unwrap();
    }
    let node_of = |p: &Pod| p.spec.as_ref().unwrap().node_name.clone();
    eventually("two bound, one per node", WAIT, || async {
        let list = pods.list(&Default::default()).await.unwrap().items;
        let mut nodes: Vec<_> = list.iter().filter_map(node_of).collect();
        nodes.sort();
        nodes == ["a", "b"]
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let list = pods.list(&Default::default()).await.unwrap().items;
    let waiting: Vec<_> = list.iter().filter(|p| node_of(p).is_none()).collect();
    assert_eq!(waiting.len(), 1, "no node has the port free for the third");
    // A pod gone frees its node's port for the one waiting.
    let first = list.iter().find(|p| node_of(p).is_some()).unwrap();
    let freed = node_of(first);
    pods.delete(
        first.metadata.name.as_deref().unwrap(),
        &DeleteParams::default().grace_period(0),
    )
    .await
    .unwrap();
    let waiting = waiting[0].metadata.name.clone().unwrap();
    eventually("the third on the freed node", WAIT, || async {
        node_of(&pods.get(&waiting).await.unwrap()) == freed
    })
    .await;
}
