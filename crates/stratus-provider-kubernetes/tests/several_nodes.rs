//! Several offload nodes in one process, one per remote cluster: each
//! node's pods run in its own cluster, the ConfigMap they share is copied
//! into both, and stopping one node leaves the other's pods alone.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use stratus_provider_kubernetes::OffloadConfig;
use stratus_provider_kubernetes::naming::NODE_LABEL;
use stratus_testing::ApiServer;

const EAST: &str = "vk-east";
const WEST: &str = "vk-west";

fn on(node: &str, name: &str) -> Pod {
    let mut pod = pod(
        name,
        serde_json::json!({
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "settings", "configMap": {"name": "shared"}}],
            "containers": [{"name": "app", "image": "nginx",
                "volumeMounts": [{"name": "settings", "mountPath": "/etc/settings"}]}],
        }),
    );
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = Some(node.into());
    }
    pod
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_in_one_process_offload_to_their_own_clusters() {
    let (east, west) = (Remote::start().await, Remote::start().await);
    let api = ApiServer::start().await.unwrap();
    let start = async |name: &str, remote: &Remote| {
        Home::start_named(
            &api,
            name,
            remote.client(),
            OffloadConfig::default(),
            None,
            |_| {},
        )
        .await
    };
    let east_node = start(EAST, &east).await;
    let west_node = start(WEST, &west).await;
    let maps: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    let shared: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "shared"}, "data": {"region": "any"},
    }))
    .unwrap();
    maps.create(&PostParams::default(), &shared).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    for i in 0..3 {
        create(&pods, on(EAST, &format!("east-{i}"))).await;
        create(&pods, on(WEST, &format!("west-{i}"))).await;
    }
    for i in 0..3 {
        running(&pods, &format!("east-{i}")).await;
        running(&pods, &format!("west-{i}")).await;
    }

    // Each cluster holds its node's pods and nothing of the other's.
    let names = |pods: Vec<Pod>| -> Vec<String> {
        let mut names: Vec<String> = pods
            .into_iter()
            .filter_map(|p| {
                p.metadata
                    .annotations?
                    .get("offload.stratus.dev/home-name")
                    .cloned()
            })
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        names(east.offloaded_by(EAST).await),
        ["east-0", "east-1", "east-2"]
    );
    assert_eq!(
        names(west.offloaded_by(WEST).await),
        ["west-0", "west-1", "west-2"]
    );
    assert!(east.offloaded_by(WEST).await.is_empty());
    assert!(west.offloaded_by(EAST).await.is_empty());
    // The ConfigMap both nodes' pods use is copied into each cluster, by
    // that cluster's node.
    for (remote, node) in [(&east, EAST), (&west, WEST)] {
        let copy = Api::<ConfigMap>::namespaced(remote.client(), "default")
            .get("shared")
            .await
            .unwrap();
        assert_eq!(copy.metadata.labels.unwrap()[NODE_LABEL], node);
    }

    // One node stopped: the other's pods are untouched and it still works.
    east_node.stop().await;
    create(&pods, on(WEST, "west-3")).await;
    running(&pods, "west-3").await;
    pods.delete("west-0", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "west-0 gone in the west cluster",
        Duration::from_secs(30),
        async || names(west.offloaded_by(WEST).await) == ["west-1", "west-2", "west-3"],
    )
    .await;
    assert_eq!(
        east.offloaded_by(EAST).await.len(),
        3,
        "the stopped node's pods stay"
    );
    drop(west_node);
}
