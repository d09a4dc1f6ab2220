//! Watch semantics, and kube-runtime's watcher and reflector running
//! unmodified against the harness.

use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube_runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;
use stratus_apiserver::ApiServer;

fn cm(name: &str, label: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"app": label}}, "data": {"k": "v"}}),
    )
    .unwrap()
}

async fn next_event(
    stream: &mut (impl futures_util::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin),
) -> WatchEvent<ConfigMap> {
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("an event within 10s")
        .expect("stream open")
        .expect("a decodable event")
}

fn name_of(e: &WatchEvent<ConfigMap>) -> (String, String) {
    match e {
        WatchEvent::Added(o) => ("ADDED".into(), o.metadata.name.clone().unwrap_or_default()),
        WatchEvent::Modified(o) => (
            "MODIFIED".into(),
            o.metadata.name.clone().unwrap_or_default(),
        ),
        WatchEvent::Deleted(o) => (
            "DELETED".into(),
            o.metadata.name.clone().unwrap_or_default(),
        ),
        WatchEvent::Bookmark(b) => ("BOOKMARK".into(), b.metadata.resource_version.clone()),
        WatchEvent::Error(e) => ("ERROR".into(), e.code.to_string()),
    }
}

#[tokio::test]
async fn watch_from_resource_version_and_selector_transitions() {
    let server = ApiServer::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let first = cms
        .create(&PostParams::default(), &cm("a", "web"))
        .await
        .unwrap();
    let rv = first.metadata.resource_version.unwrap();

    let mut stream = cms
        .watch(&WatchParams::default().labels("app=web"), &rv)
        .await
        .unwrap()
        .boxed();
    cms.create(&PostParams::default(), &cm("b", "web"))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("c", "db"))
        .await
        .unwrap();
    // c starts matching → ADDED; a stops matching → DELETED.
    cms.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "web"}}})),
    )
    .await
    .unwrap();
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "db"}}})),
    )
    .await
    .unwrap();
    cms.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "w"}})),
    )
    .await
    .unwrap();
    cms.delete("b", &DeleteParams::default()).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..5 {
        seen.push(name_of(&next_event(&mut stream).await));
    }
    let want: Vec<(String, String)> = [
        ("ADDED", "b"),
        ("ADDED", "c"),
        ("DELETED", "a"),
        ("MODIFIED", "b"),
        ("DELETED", "b"),
    ]
    .iter()
    .map(|(t, n)| ((*t).into(), (*n).into()))
    .collect();
    assert_eq!(seen, want);
}

#[tokio::test]
async fn watch_without_version_starts_with_state_and_expired_versions_get_410() {
    let server = ApiServer::builder().history(5).start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let first = cms
        .create(&PostParams::default(), &cm("x", "web"))
        .await
        .unwrap();
    let old_rv = first.metadata.resource_version.unwrap();
    for i in 0..10 {
        cms.create(&PostParams::default(), &cm(&format!("y{i}"), "web"))
            .await
            .unwrap();
    }
    // "0": the current state first.
    let mut stream = cms
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let e = next_event(&mut stream).await;
    assert_eq!(name_of(&e), ("ADDED".into(), "x".into()));
    // An expired version gets an ERROR event with 410.
    let mut stream = cms
        .watch(&WatchParams::default(), &old_rv)
        .await
        .unwrap()
        .boxed();
    match next_event(&mut stream).await {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
        }
        other => panic!("expected 410, got {:?}", name_of(&other)),
    }
}

#[tokio::test]
async fn bookmarks_initial_events_and_timeouts() {
    let server = ApiServer::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    cms.create(&PostParams::default(), &cm("a", "web"))
        .await
        .unwrap();
    let mut stream = cms
        .watch(&WatchParams::streaming_lists(), "")
        .await
        .unwrap()
        .boxed();
    assert_eq!(name_of(&next_event(&mut stream).await).0, "ADDED");
    match next_event(&mut stream).await {
        WatchEvent::Bookmark(b) => {
            assert_eq!(
                b.metadata
                    .annotations
                    .get("k8s.io/initial-events-end")
                    .map(String::as_str),
                Some("true")
            );
        }
        other => panic!(
            "expected the initial-events-end bookmark, got {:?}",
            name_of(&other)
        ),
    }
    // Periodic bookmarks.
    match next_event(&mut stream).await {
        WatchEvent::Bookmark(b) => assert!(b.metadata.annotations.is_empty()),
        other => panic!("expected a bookmark, got {:?}", name_of(&other)),
    }
    // timeoutSeconds ends the stream.
    let rv = server.revision().to_string();
    let mut short = cms
        .watch(&WatchParams::default().timeout(1), &rv)
        .await
        .unwrap()
        .boxed();
    let drained = tokio::time::timeout(Duration::from_secs(10), async {
        let mut kinds = Vec::new();
        while let Some(e) = short.next().await {
            kinds.push(name_of(&e.unwrap()).0);
        }
        kinds
    })
    .await
    .expect("the stream ends within 10s");
    assert!(drained.iter().all(|k| k == "BOOKMARK"), "{drained:?}");

    // A timeout past what the clock can count is no timeout (it panicked).
    let rv = server.revision().to_string();
    let endless = http::Request::get(format!(
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds={}",
        u64::MAX
    ))
    .body(vec![])
    .unwrap();
    let mut endless = server
        .client()
        .request_events::<ConfigMap>(endless)
        .await
        .unwrap()
        .boxed();
    cms.create(&PostParams::default(), &cm("after-endless", "x"))
        .await
        .unwrap();
    assert_eq!(
        name_of(&next_event(&mut endless).await),
        ("ADDED".into(), "after-endless".into())
    );
}

#[tokio::test]
async fn reflector_follows_changes_and_recovers_from_dropped_watches_and_410() {
    let server = ApiServer::builder().history(50).start().await.unwrap();
    let client = server.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let (reader, writer) = reflector::store::<Pod>();
    let stream = reflector(writer, watcher(pods.clone(), watcher::Config::default()))
        .default_backoff()
        .applied_objects();
    let task = tokio::spawn(async move {
        let _ = stream.try_for_each(|_| async { Ok(()) }).await;
    });
    let pod = |name: &str| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}})).unwrap()
    };
    let wait_for = |n: usize| {
        let reader = reader.clone();
        async move {
            for _ in 0..200 {
                if reader.state().len() == n {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            panic!("store has {} objects, wanted {n}", reader.state().len());
        }
    };
    for i in 0..3 {
        pods.create(&PostParams::default(), &pod(&format!("p{i}")))
            .await
            .unwrap();
    }
    wait_for(3).await;

    // A dropped watch is resumed; nothing is lost.
    server.drop_watches();
    pods.create(&PostParams::default(), &pod("after-drop"))
        .await
        .unwrap();
    wait_for(4).await;

    // History compacted while disconnected: the watcher relists after 410,
    // and a delete made during the gap is seen.
    server.compact();
    server.drop_watches();
    pods.delete("p0", &DeleteParams::default()).await.unwrap();
    for i in 0..60 {
        pods.create(&PostParams::default(), &pod(&format!("bulk{i}")))
            .await
            .unwrap();
    }
    wait_for(3 + 60).await;
    assert!(
        reader
            .get(&reflector::ObjectRef::new("p0").within("default"))
            .is_none()
    );

    // A restart of the server keeps state; the reflector reconnects.
    let mut server = server;
    server.restart().await.unwrap();
    let pods_after: Api<Pod> = Api::namespaced(server.client(), "default");
    pods_after
        .create(&PostParams::default(), &pod("after-restart"))
        .await
        .unwrap();
    wait_for(3 + 60 + 1).await;
    task.abort();
}

#[tokio::test]
async fn metadata_only_watches() {
    use kube::core::PartialObjectMeta;
    let server = ApiServer::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let meta: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(server.client(), "default");
    let rv = server.revision().to_string();
    let mut stream = meta
        .watch_metadata(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    cms.create(&PostParams::default(), &cm("m", "web"))
        .await
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match event {
        WatchEvent::Added(o) => {
            assert_eq!(o.metadata.name.as_deref(), Some("m"));
            assert_eq!(
                o.types.as_ref().map(|t| t.kind.as_str()),
                Some("PartialObjectMetadata")
            );
        }
        other => panic!("expected ADDED, got {other:?}"),
    }
}

#[tokio::test]
async fn a_watch_from_a_future_resource_version_stays_open_and_sends_only_later_events() {
    let server = ApiServer::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let first = cms
        .create(&PostParams::default(), &cm("a", "web"))
        .await
        .unwrap();
    let current: u64 = first.metadata.resource_version.unwrap().parse().unwrap();

    // As kube-apiserver's watch cache: no error, no wait; the watch opens
    // and sends the events after the revision asked for, none before.
    let far = current + 2;
    let mut stream = cms
        .watch(&WatchParams::default(), &far.to_string())
        .await
        .unwrap()
        .boxed();
    for name in ["b", "c", "d"] {
        cms.create(&PostParams::default(), &cm(name, "web"))
            .await
            .unwrap();
    }
    // "b" and "c" were written at `current + 1` and `far`.
    assert_eq!(
        name_of(&next_event(&mut stream).await),
        ("ADDED".into(), "d".into())
    );
}

#[tokio::test]
async fn a_read_at_a_future_resource_version_waits_then_gets_504() {
    let server = ApiServer::start().await.unwrap();
    // kube's client retries a 504 15 times by default; this one answers
    // the first.
    let mut config = server.config().unwrap();
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let first = cms
        .create(&PostParams::default(), &cm("a", "web"))
        .await
        .unwrap();
    let current: u64 = first.metadata.resource_version.unwrap().parse().unwrap();

    // Never reached: after kube-apiserver's 3 s, 504 with its cause, for a
    // list (with or without resourceVersionMatch) and for a get.
    let far = current + 1_000;
    for path in [
        format!("/api/v1/namespaces/default/configmaps?resourceVersion={far}"),
        format!(
            "/api/v1/namespaces/default/configmaps?resourceVersion={far}&resourceVersionMatch=NotOlderThan"
        ),
        format!("/api/v1/namespaces/default/configmaps/a?resourceVersion={far}"),
    ] {
        let request = http::Request::get(&path).body(Vec::new()).unwrap();
        let started = std::time::Instant::now();
        let err = client.request_text(request).await.unwrap_err();
        assert!(started.elapsed() >= Duration::from_secs(3), "{path}");
        let kube::Error::Api(status) = err else {
            panic!("{path}: not a Status: {err:?}")
        };
        assert_eq!((status.code, status.reason.as_str()), (504, "Timeout"));
        assert!(
            status.message.starts_with(&format!(
                "Timeout: Too large resource version: {far}, current: "
            )),
            "{}",
            status.message
        );
        let details = status.details.expect("details");
        assert_eq!(details.retry_after_seconds, 1);
        assert_eq!(details.causes[0].reason, "ResourceVersionTooLarge");
    }

    // Reached while waiting: the list answers with that revision's state.
    let next = current + 1;
    let list = {
        let client = client.clone();
        tokio::spawn(async move {
            let request = http::Request::get(format!(
                "/api/v1/namespaces/default/configmaps?resourceVersion={next}"
            ))
            .body(Vec::new())
            .unwrap();
            client
                .request::<k8s_openapi::List<ConfigMap>>(request)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    cms.create(&PostParams::default(), &cm("b", "web"))
        .await
        .unwrap();
    let list = list.await.unwrap().unwrap();
    let names: Vec<_> = list
        .items
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert_eq!(names, ["a", "b"]);
}

fn pod_event(e: kube::Result<WatchEvent<Pod>>) -> (String, String) {
    match e.expect("a decodable event") {
        WatchEvent::Added(o) => ("ADDED".into(), o.metadata.name.unwrap_or_default()),
        WatchEvent::Modified(o) => ("MODIFIED".into(), o.metadata.name.unwrap_or_default()),
        WatchEvent::Deleted(o) => ("DELETED".into(), o.metadata.name.unwrap_or_default()),
        other => panic!("unexpected {other:?}"),
    }
}

/// The events of a pod watch until it is quiet for half a second.
async fn events_until_quiet(
    stream: &mut (impl futures_util::Stream<Item = kube::Result<WatchEvent<Pod>>> + Unpin),
) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    while let Ok(Some(e)) = tokio::time::timeout(Duration::from_millis(500), stream.next()).await {
        seen.push(pod_event(e));
    }
    seen
}

/// The resourceVersion of a list of `api` now.
async fn current_version<K>(api: &Api<K>) -> String
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
}

#[tokio::test]
async fn pod_watches_of_one_node_see_that_nodes_pods_from_a_version_and_from_now() {
    let server = ApiServer::start().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let pod = |name: &str, node: Option<&str>| -> Pod {
        let mut spec = json!({"containers": [{"name": "c", "image": "i"}]});
        if let Some(node) = node {
            spec["nodeName"] = json!(node);
        }
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
    };
    let early = pods
        .create(&PostParams::default(), &pod("early", Some("a")))
        .await
        .unwrap();
    let before = early.metadata.resource_version.unwrap();
    pods.create(&PostParams::default(), &pod("early-b", Some("b")))
        .await
        .unwrap();
    // One watch resumes from before "early" was written (the history, then
    // its node's events), one starts from now, one watches unbound pods.
    let on_node = |node: &str| WatchParams::default().fields(&format!("spec.nodeName={node}"));
    let mut a_resumed = pods
        .watch(
            &on_node("a"),
            &(before.parse::<u64>().unwrap() - 1).to_string(),
        )
        .await
        .unwrap()
        .boxed();
    let current = current_version(&pods).await;
    let mut a = pods.watch(&on_node("a"), &current).await.unwrap().boxed();
    let mut unbound = pods.watch(&on_node(""), &current).await.unwrap().boxed();

    pods.create(&PostParams::default(), &pod("p", None))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("q", Some("b")))
        .await
        .unwrap();
    pods.create_subresource::<_, serde_json::Value>(
        "binding",
        "p",
        &PostParams::default(),
        &json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "a"}}),
    )
    .await
    .unwrap();
    pods.delete("p", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    pods.delete("q", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();

    let ev = |kind: &str, name: &str| (kind.to_owned(), name.to_owned());
    assert_eq!(
        events_until_quiet(&mut a_resumed).await,
        [ev("ADDED", "early"), ev("ADDED", "p"), ev("DELETED", "p")]
    );
    assert_eq!(
        events_until_quiet(&mut a).await,
        [ev("ADDED", "p"), ev("DELETED", "p")]
    );
    // Bound, "p" leaves the unbound pods' watch.
    assert_eq!(
        events_until_quiet(&mut unbound).await,
        [ev("ADDED", "p"), ev("DELETED", "p")]
    );
}

#[tokio::test]
async fn a_watch_that_is_not_read_for_thousands_of_events_misses_none() {
    let server = ApiServer::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let current = current_version(&cms).await;
    let mut stream = cms
        .watch(&WatchParams::default(), &current)
        .await
        .unwrap()
        .boxed();
    // Far more than the watch's queue holds, and (8 KB each) more than the
    // connection buffers: the watch falls behind and catches up from the
    // history.
    let big = "x".repeat(8 * 1024);
    let total = 3_000;
    futures_util::stream::iter(0..total)
        .map(|i| {
            let cms = cms.clone();
            let data = big.clone();
            async move {
                let cm: ConfigMap = serde_json::from_value(
                    json!({"metadata": {"name": format!("cm-{i:05}")}, "data": {"k": data}}),
                )
                .unwrap();
                cms.create(&PostParams::default(), &cm).await.unwrap();
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    let mut versions = Vec::new();
    while versions.len() < total {
        match next_event(&mut stream).await {
            WatchEvent::Added(cm) => versions.push(
                cm.metadata
                    .resource_version
                    .unwrap()
                    .parse::<u64>()
                    .unwrap(),
            ),
            other => panic!("expected ADDED, got {other:?}"),
        }
    }
    // Each once, in the order written.
    assert!(
        versions.windows(2).all(|w| w[0] < w[1]),
        "out of order or repeated"
    );
}
