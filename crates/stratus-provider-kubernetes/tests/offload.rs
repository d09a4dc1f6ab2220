//! Pods offloaded from a home harness cluster to a remote one, seen from
//! both API servers: dependencies copied and kept in step, status from the
//! remote watch, logs/exec/port-forward through the home API server,
//! deletion with the grace period, remote endings, restarts, outages.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use futures_util::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
use kube::api::{Api, AttachParams, DeleteParams, Patch, PatchParams, PostParams};
use stratus_pod::NodeProvider;
use stratus_provider_kubernetes::naming::NODE_LABEL;
use stratus_provider_kubernetes::{
    KubernetesProvider, OffloadConfig, REMOTE_POD_DELETED, RemoteNode,
};
use stratus_testing::ApiServer;
use stratus_testing::pod_conformance::run_pod_conformance;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pod_provider_conformance_suite_passes() {
    let remote = Remote::start().await;
    let client = remote.client();
    let report = run_pod_conformance(move || {
        Arc::new(KubernetesProvider::builder(client, "vk-conformance").start()) as _
    })
    .await;
    report.assert_passed();
}

async fn text_log(api: &ApiServer, pod: &str, query: &str) -> String {
    let request = http::Request::get(format!("/api/v1/namespaces/default/pods/{pod}/log?{query}"))
        .body(Vec::new())
        .unwrap();
    api.client().request_text(request).await.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_runs_remotely_with_its_config_and_is_reached_from_home() {
    // The remote cluster authorizes with RBAC, and the node holds exactly
    // the documented remote access (docs/deploy/offload-remote-rbac.yaml).
    let remote = Remote::with_rbac().await;
    let api = ApiServer::start().await.unwrap();
    let home = Home::start(
        &api,
        remote.offload_node_client().await,
        OffloadConfig::default(),
        None,
        |_| {},
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let maps: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    let secrets: Api<Secret> = Api::namespaced(api.client(), "default");
    let settings: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "settings"}, "data": {"greeting": "hello"},
    }))
    .unwrap();
    maps.create(&PostParams::default(), &settings)
        .await
        .unwrap();
    let token: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "token"}, "stringData": {"value": "s3cret"},
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &token)
        .await
        .unwrap();
    let web = pod(
        "web",
        serde_json::json!({
            "terminationGracePeriodSeconds": 7,
            "volumes": [
                {"name": "config", "configMap": {"name": "settings"}},
                {"name": "token", "secret": {"secretName": "token"}},
            ],
            "containers": [{
                "name": "app", "image": "nginx",
                "env": [{"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "greeting"}}}],
                "volumeMounts": [
                    {"name": "config", "mountPath": "/etc/config"},
                    {"name": "token", "mountPath": "/etc/token"},
                ],
            }],
        }),
    );
    create(&pods, web).await;
    running(&pods, "web").await;

    // The remote pod: made by this node, its IP the home pod's.
    let offloaded = remote.offloaded().await;
    assert_eq!(offloaded.len(), 1);
    let remote_pod = &offloaded[0];
    let remote_name = remote_pod.metadata.name.clone().unwrap();
    assert_eq!(
        home.provider.remote_pod("default", "web"),
        Some(("default".into(), remote_name.clone()))
    );
    eventually("the home pod IP", Duration::from_secs(20), async || {
        let home_ip = pods.get("web").await.unwrap().status.and_then(|s| s.pod_ip);
        let remote_ip = remote
            .pods("default")
            .get(&remote_name)
            .await
            .unwrap()
            .status
            .and_then(|s| s.pod_ip);
        home_ip.is_some() && home_ip == remote_ip
    })
    .await;
    let env = remote_pod.spec.as_ref().unwrap().containers[0]
        .env
        .clone()
        .unwrap();
    assert!(
        env.iter()
            .any(|e| e.name == "GREETING" && e.value.as_deref() == Some("hello")),
        "{env:?}"
    );
    assert_eq!(
        remote_pod.spec.as_ref().unwrap().node_name.as_deref(),
        Some(REMOTE_NODE)
    );

    // The ConfigMap and Secret were copied, with the node's label.
    let remote_maps: Api<ConfigMap> = Api::namespaced(remote.client(), "default");
    let remote_secrets: Api<Secret> = Api::namespaced(remote.client(), "default");
    let copy = remote_maps.get("settings").await.unwrap();
    assert_eq!(copy.data.unwrap()["greeting"], "hello");
    assert_eq!(copy.metadata.labels.unwrap()[NODE_LABEL], NODE);
    let secret = remote_secrets.get("token").await.unwrap();
    assert_eq!(secret.data.unwrap()["value"].0, b"s3cret");

    // Logs, exec and port-forward through the home API server.
    eventually(
        "the log through the home API server",
        Duration::from_secs(20),
        async || {
            text_log(&api, "web", "container=app")
                .await
                .contains("started container app")
        },
    )
    .await;
    let mut exec = pods
        .exec(
            "web",
            ["echo", "from", "home"],
            &AttachParams::default().stderr(false),
        )
        .await
        .unwrap();
    let mut out = String::new();
    exec.stdout()
        .unwrap()
        .read_to_string(&mut out)
        .await
        .unwrap();
    exec.join().await.unwrap();
    assert_eq!(out, "from home\n");
    let mut forwarder = pods.portforward("web", &[8080]).await.unwrap();
    let mut stream = forwarder.take_stream(8080).unwrap();
    stream.write_all(b"ping").await.unwrap();
    let mut echoed = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut echoed))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&echoed, b"ping");
    drop(stream);
    forwarder.abort();

    // The ConfigMap changes at home; the remote copy follows.
    maps.patch(
        "settings",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"data": {"greeting": "bonjour"}})),
    )
    .await
    .unwrap();
    eventually(
        "the remote copy updated",
        Duration::from_secs(30),
        async || remote_maps.get("settings").await.unwrap().data.unwrap()["greeting"] == "bonjour",
    )
    .await;

    // Home deletion: the remote pod is deleted with the grace period,
    // then the home pod goes, then the copies no pod uses.
    let remote_pods = remote.pods("default");
    let graces = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = graces.clone();
    let watched = remote_pods.clone();
    let watcher = tokio::spawn(async move {
        let mut events = kube_runtime::watcher(watched, Default::default()).boxed();
        while let Some(Ok(event)) = events.next().await {
            if let kube_runtime::watcher::Event::Apply(p) = event
                && let Some(g) = p.metadata.deletion_grace_period_seconds
            {
                seen.lock().unwrap().push(g);
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    pods.delete("web", &DeleteParams::default()).await.unwrap();
    eventually("web gone at home", Duration::from_secs(30), async || {
        pods.get_opt("web").await.unwrap().is_none()
    })
    .await;
    assert!(remote.offloaded().await.is_empty());
    assert!(
        graces.lock().unwrap().contains(&7),
        "grace periods seen remotely: {:?}",
        graces.lock().unwrap()
    );
    watcher.abort();
    eventually("the copies deleted", Duration::from_secs(20), async || {
        remote_maps.get_opt("settings").await.unwrap().is_none()
            && remote_secrets.get_opt("token").await.unwrap().is_none()
    })
    .await;
    drop(home);
    let refused = remote.refused();
    assert!(
        refused.is_empty(),
        "the documented remote RBAC lacks: {refused:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_endings_fail_the_home_pod() {
    let remote = Remote::start().await;
    let api = ApiServer::start().await.unwrap();
    let config = OffloadConfig::from_yaml("namespaces: {mode: prefix, value: home-}").unwrap();
    let home = Home::start(&api, remote.client(), config, None, |_| {}).await;
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    for name in ["evicted", "removed"] {
        create(&pods, simple(name)).await;
    }
    running(&pods, "evicted").await;
    running(&pods, "removed").await;
    let (ns, evicted) = home.provider.remote_pod("default", "evicted").unwrap();
    assert_eq!(ns, "home-default");
    let (_, removed) = home.provider.remote_pod("default", "removed").unwrap();

    // The remote kubelet evicts one pod (node pressure)...
    remote.mock.set_status(&ns, &evicted, |s| {
        s.phase = Some("Failed".into());
        s.reason = Some("Evicted".into());
        s.message = Some("The node was low on resource: memory.".into());
    });
    eventually(
        "evicted Failed at home",
        Duration::from_secs(20),
        async || {
            let status = pods
                .get("evicted")
                .await
                .unwrap()
                .status
                .unwrap_or_default();
            status.phase.as_deref() == Some("Failed") && status.reason.as_deref() == Some("Evicted")
        },
    )
    .await;

    // ...and someone deletes the other in the remote cluster.
    remote
        .pods(&ns)
        .delete(&removed, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "removed Failed at home",
        Duration::from_secs(20),
        async || {
            let status = pods
                .get("removed")
                .await
                .unwrap()
                .status
                .unwrap_or_default();
            status.phase.as_deref() == Some("Failed")
                && status.reason.as_deref() == Some(REMOTE_POD_DELETED)
        },
    )
    .await;
    let status = pods.get("removed").await.unwrap().status.unwrap();
    let app = &status.container_statuses.unwrap()[0];
    assert_eq!(
        app.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        137
    );
    // Failed pods stay (as a kubelet leaves them) and are not offloaded again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(phase(&pods, "removed").await.as_deref(), Some("Failed"));
    assert!(remote.pods(&ns).get_opt(&removed).await.unwrap().is_none());
    for name in ["evicted", "removed"] {
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }
    eventually("both gone at home", Duration::from_secs(30), async || {
        pods.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;
    assert!(remote.offloaded().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_adopts_its_remote_pods() {
    let remote = Remote::start().await;
    let api = ApiServer::start().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let home = Home::default_for(&api, &remote).await;
    for i in 0..3 {
        create(&pods, simple(&format!("p{i}"))).await;
    }
    for i in 0..3 {
        running(&pods, &format!("p{i}")).await;
    }
    let before: Vec<_> = remote
        .offloaded()
        .await
        .into_iter()
        .map(|p| p.metadata.uid)
        .collect();
    assert_eq!(before.len(), 3);
    home.stop().await;

    // While the node is away, one home pod is deleted for good.
    pods.delete("p2", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually("p2 gone", Duration::from_secs(10), async || {
        pods.get_opt("p2").await.unwrap().is_none()
    })
    .await;

    let home = Home::default_for(&api, &remote).await;
    eventually("the provider synced", Duration::from_secs(20), async || {
        home.provider.synced()
    })
    .await;
    // p0 and p1 are adopted, not made again; p2's remote pod is deleted.
    eventually(
        "p2's remote pod deleted",
        Duration::from_secs(30),
        async || remote.offloaded().await.len() == 2,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after: Vec<_> = remote
        .offloaded()
        .await
        .into_iter()
        .map(|p| p.metadata.uid)
        .collect();
    assert_eq!(after.len(), 2);
    assert!(
        after.iter().all(|uid| before.contains(uid)),
        "a remote pod was made again"
    );
    for name in ["p0", "p1"] {
        assert_eq!(phase(&pods, name).await.as_deref(), Some("Running"));
    }
    pods.delete("p0", &DeleteParams::default()).await.unwrap();
    eventually("p0 gone everywhere", Duration::from_secs(30), async || {
        pods.get_opt("p0").await.unwrap().is_none() && remote.offloaded().await.len() == 1
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_outage_holds_the_node_and_loses_no_pod() {
    let remote = Remote::start().await;
    let api = ApiServer::start().await.unwrap();
    let config = OffloadConfig {
        capacity_refresh_seconds: 1,
        ..Default::default()
    };
    let node = RemoteNode::connect(remote.client(), NODE, &config)
        .await
        .unwrap();
    let capacity = node.capacity().unwrap();
    assert!(capacity.pods > 0 && capacity.cpu_millis > 0, "{capacity:?}");
    let home = Home::start(
        &api,
        remote.client(),
        config,
        Some(Arc::new(node.clone()) as Arc<dyn NodeProvider>),
        |n| {
            n.ping_interval = Duration::from_millis(500);
            n.ping_timeout = Duration::from_secs(1);
            n.renew_interval = Duration::from_millis(500);
        },
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let nodes: Api<Node> = Api::all(api.client());
    eventually(
        "the home node shows the remote capacity",
        Duration::from_secs(20),
        async || {
            nodes
                .get_opt(NODE)
                .await
                .unwrap()
                .and_then(|n| n.status?.capacity)
                .is_some_and(|c| {
                    c.get("pods").map(|q| q.0.clone()) == Some(capacity.pods.to_string())
                })
        },
    )
    .await;
    create(&pods, simple("steady")).await;
    running(&pods, "steady").await;

    // A pod of someone else's takes remote capacity: the home node shrinks.
    let other: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "other", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]},
    }))
    .unwrap();
    remote
        .pods("default")
        .create(&PostParams::default(), &other)
        .await
        .unwrap();
    eventually(
        "the capacity shrinks",
        Duration::from_secs(20),
        async || {
            node.capacity()
                .is_some_and(|c| c.cpu_millis == capacity.cpu_millis - 1000)
        },
    )
    .await;

    // The remote API is down for 30 s.
    let leases: Api<Lease> = Api::namespaced(api.client(), "kube-node-lease");
    let renewed = async || leases.get(NODE).await.unwrap().spec.unwrap().renew_time;
    let outage = Duration::from_secs(30);
    let began = tokio::time::Instant::now();
    remote.cluster.server().pause(outage);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let held = renewed().await;
    create(&pods, simple("during")).await;
    tokio::time::sleep(outage.saturating_sub(began.elapsed() + Duration::from_secs(1))).await;
    assert_eq!(
        renewed().await,
        held,
        "the lease was renewed while the remote API was down"
    );
    assert_eq!(phase(&pods, "steady").await.as_deref(), Some("Running"));
    assert_ne!(phase(&pods, "during").await.as_deref(), Some("Running"));

    // It answers again: the lease is renewed, the pending pod is offloaded,
    // the running one was never lost.
    eventually("the lease renewed", Duration::from_secs(30), async || {
        renewed().await != held
    })
    .await;
    running(&pods, "during").await;
    assert_eq!(phase(&pods, "steady").await.as_deref(), Some("Running"));
    assert_eq!(remote.offloaded().await.len(), 2);
    drop(home);
}
