//! A provider with the `resource_changes` hook is told when a ConfigMap or
//! Secret its pods use changes (and not for others), with the pods that use
//! it, and once when a namespace's watch first lists them; the next
//! environment resolution sees the new value.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use stratus_kubelet::VirtualNode;
use stratus_kubelet::node::NodeConfig;
use stratus_kubelet::pods::PodControllerConfig;
use stratus_pod::{ResourceChange, ResourceKind};
use stratus_testing::{ApiServer, MockPodProvider, eventually};
use tokio::sync::watch;

const NODE: &str = "vk-refs";

fn object<K: serde::de::DeserializeOwned>(value: serde_json::Value) -> K {
    serde_json::from_value(value).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn referenced_config_maps_and_secrets_are_told() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    for name in ["settings", "unrelated"] {
        config_maps
            .create(
                &pp,
                &object(serde_json::json!({"metadata": {"name": name}, "data": {"color": "blue"}})),
            )
            .await
            .unwrap();
    }
    secrets
        .create(
            &pp,
            &object(serde_json::json!({"metadata": {"name": "tls"}, "stringData": {"key": "one"}})),
        )
        .await
        .unwrap();

    let provider = MockPodProvider::new();
    let pods_config = PodControllerConfig {
        reference_rescan: Duration::from_millis(100),
        ..Default::default()
    };
    let node = VirtualNode::builder(client.clone(), NodeConfig::new(NODE, "mock"))
        .provider(Arc::new(provider.clone()))
        .pods(pods_config)
        .build()
        .unwrap();
    let (_stop, stopped) = watch::channel(false);
    tokio::spawn(node.run(stopped));

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = |name: &str| -> Pod {
        object(serde_json::json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "nodeName": NODE,
                "containers": [{"name": "app", "image": "nginx",
                    "env": [{"name": "COLOR", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "color"}}}]}],
                "volumes": [{"name": "tls", "secret": {"secretName": "tls"}}],
            },
        }))
    };
    // One pod first: the namespace's watch starts at the next rescan and
    // its first listing is told with the pods that use each object then.
    pods.create(&pp, &pod("web-1")).await.unwrap();
    eventually("web-1 runs", Duration::from_secs(10), || async {
        provider.pods().contains_key("default/web-1")
    })
    .await;
    let env_of = |p: &Pod| {
        p.spec.as_ref().unwrap().containers[0]
            .env
            .as_ref()
            .unwrap()
            .iter()
            .find(|e| e.name == "COLOR")
            .and_then(|e| e.value.clone())
    };
    assert_eq!(
        env_of(&provider.pods()["default/web-1"]).as_deref(),
        Some("blue")
    );
    // The watches' first listing is told once (a change made before the
    // watch started is not lost): what the pods use, not the rest.
    let first = |kind, name: &str| ResourceChange {
        kind,
        namespace: "default".into(),
        name: name.into(),
        deleted: false,
        pods: vec!["web-1".into()],
    };
    eventually(
        "the first listing is told",
        Duration::from_secs(10),
        || async { provider.resource_changes_told().len() >= 2 },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut listed = provider.resource_changes_told();
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(
        listed,
        [
            first(ResourceKind::ConfigMap, "settings"),
            first(ResourceKind::Secret, "tls")
        ]
    );
    // A second pod in a namespace already watched starts no new listing.
    pods.create(&pp, &pod("web-2")).await.unwrap();
    eventually("web-2 runs", Duration::from_secs(10), || async {
        provider.pods().contains_key("default/web-2")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(provider.resource_changes_told().len(), listed.len());
    let told_before = listed.len();

    let patch = |color: &str| Patch::Merge(serde_json::json!({"data": {"color": color}}));
    config_maps
        .patch("unrelated", &PatchParams::default(), &patch("red"))
        .await
        .unwrap();
    config_maps
        .patch("settings", &PatchParams::default(), &patch("green"))
        .await
        .unwrap();
    eventually(
        "the ConfigMap change is told",
        Duration::from_secs(10),
        || async { provider.resource_changes_told().len() > told_before },
    )
    .await;
    assert_eq!(
        provider.resource_changes_told()[told_before..],
        [ResourceChange {
            kind: ResourceKind::ConfigMap,
            namespace: "default".into(),
            name: "settings".into(),
            deleted: false,
            pods: vec!["web-1".into(), "web-2".into()],
        }],
        "the unrelated ConfigMap is not told"
    );

    // A new pod resolves the new value (the cached copy was forgotten).
    pods.create(&pp, &pod("web-3")).await.unwrap();
    eventually("web-3 runs", Duration::from_secs(10), || async {
        provider.pods().contains_key("default/web-3")
    })
    .await;
    assert_eq!(
        env_of(&provider.pods()["default/web-3"]).as_deref(),
        Some("green")
    );

    secrets
        .delete("tls", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the Secret deletion is told",
        Duration::from_secs(10),
        || async {
            provider.resource_changes_told().iter().any(|c| {
                c.kind == ResourceKind::Secret && c.name == "tls" && c.deleted && c.pods.len() == 3
            })
        },
    )
    .await;
}
