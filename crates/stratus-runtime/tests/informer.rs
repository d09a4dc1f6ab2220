//! The informer through the harness: changes reach the callback, a resync
//! hands unchanged objects to it again, and dropping it stops both; a
//! shared informer serves several subscribers from one list and one watch.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use stratus_runtime::health::ControllerHealth;
use stratus_runtime::informer::{Informer, SharedInformer};
use stratus_testing::{ApiServer, Fault, FaultAction, Verb, eventually};

/// How long a test waits for the informer.
const WAIT: Duration = Duration::from_secs(10);

fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_hands_unchanged_objects_to_the_callback_again() {
    let server = ApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    let informer = Informer::start(
        api.clone(),
        &ControllerHealth::new(),
        move |cm: &ConfigMap| {
            if cm.metadata.name.as_deref() == Some("a") {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        },
    );
    eventually("the first list", WAIT, || async {
        seen.load(Ordering::SeqCst) == 1
    })
    .await;

    // Without a resync nothing more arrives for an object nobody touches.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(seen.load(Ordering::SeqCst), 1);

    // With one, it arrives again each period, though it never changed.
    let informer = informer.resync_every(Duration::from_millis(200));
    eventually("two resyncs", WAIT, || async {
        seen.load(Ordering::SeqCst) >= 3
    })
    .await;

    // A zero period turns it off again.
    let informer = informer.resync_every(Duration::ZERO);
    let before = seen.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(seen.load(Ordering::SeqCst), before);

    // Dropped, the informer calls nothing any more.
    let informer = informer.resync_every(Duration::from_millis(100));
    eventually("a resync", WAIT, || async {
        seen.load(Ordering::SeqCst) > before
    })
    .await;
    drop(informer);
    let after_drop = seen.load(Ordering::SeqCst);
    let mut changed = config_map("a");
    changed.data = Some([("k".to_string(), "v".to_string())].into());
    api.replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(seen.load(Ordering::SeqCst), after_drop);
}

/// The names a subscriber was handed, in order.
fn recorder() -> (
    Arc<Mutex<Vec<String>>>,
    impl FnMut(&ConfigMap) + Send + 'static,
) {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = seen.clone();
    (seen, move |cm: &ConfigMap| {
        sink.lock()
            .unwrap()
            .push(cm.metadata.name.clone().unwrap_or_default())
    })
}

fn has(seen: &Mutex<Vec<String>>, name: &str) -> bool {
    seen.lock().unwrap().iter().any(|n| n == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_informer_serves_every_subscriber_from_one_watch() {
    let server = ApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();
    let shared = SharedInformer::new(api.clone());
    // Nothing is watched before the first subscriber.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(server.answered(Some(Verb::List), "configmaps", 200), 0);

    // A slow first list: both subscribers wait for it at once, and both are
    // woken (kube-runtime's own store readiness wakes only the last waiter).
    server.inject(Fault::new(
        Some(Verb::List),
        Some("configmaps"),
        FaultAction::Latency(Duration::from_millis(300)),
    ));
    let (first_seen, first_cb) = recorder();
    let first = shared.subscribe(&ControllerHealth::new(), first_cb);
    let (second_seen, second_cb) = recorder();
    let second = shared.subscribe(&ControllerHealth::new(), second_cb);
    let (a, b) = tokio::time::timeout(WAIT, async {
        tokio::join!(first.wait_until_ready(), second.wait_until_ready())
    })
    .await
    .expect("both waiters woken");
    assert!(a.is_ok() && b.is_ok());
    server.clear_faults();
    eventually("both subscribers handed a", WAIT, || async {
        has(&first_seen, "a") && has(&second_seen, "a")
    })
    .await;
    api.create(&PostParams::default(), &config_map("b"))
        .await
        .unwrap();
    eventually("both subscribers handed b", WAIT, || async {
        has(&first_seen, "b") && has(&second_seen, "b")
    })
    .await;

    // A late subscriber is handed what is already cached, then changes.
    let (late_seen, late_cb) = recorder();
    let late = shared.subscribe(&ControllerHealth::new(), late_cb);
    eventually("the late subscriber handed a and b", WAIT, || async {
        has(&late_seen, "a") && has(&late_seen, "b")
    })
    .await;
    assert_eq!(first.store().state().len(), 2);
    assert_eq!(late.store().state().len(), 2);

    // One list and one watch for the three of them.
    assert_eq!(server.answered(Some(Verb::List), "configmaps", 200), 1);
    assert_eq!(server.answered(Some(Verb::Watch), "configmaps", 200), 1);

    // A dropped subscription is called no more; the others still are.
    drop(second);
    let second_count = second_seen.lock().unwrap().len();
    api.create(&PostParams::default(), &config_map("c"))
        .await
        .unwrap();
    eventually("the others handed c", WAIT, || async {
        has(&first_seen, "c") && has(&late_seen, "c")
    })
    .await;
    assert_eq!(second_seen.lock().unwrap().len(), second_count);

    // With every handle and subscription gone, the watch ends: closed by
    // the server, it is not opened again.
    drop((first, late, shared));
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.drop_watches();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(server.answered(Some(Verb::Watch), "configmaps", 200), 1);
    assert_eq!(server.answered(Some(Verb::List), "configmaps", 200), 1);
}

/// What a callback saw: the object's name, its resourceVersion, and the
/// resourceVersion the store held for it at that moment.
type Sighting = (String, Option<String>, Option<String>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_hands_over_the_new_store_and_what_it_no_longer_has() {
    let server = ApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for name in ["kept", "doomed"] {
        api.create(&PostParams::default(), &config_map(name))
            .await
            .unwrap();
    }
    let shared = SharedInformer::new(api.clone());
    let store = shared.store().clone();
    let seen: Arc<Mutex<Vec<Sighting>>> = Arc::default();
    let sightings = seen.clone();
    let _informer = shared.subscribe(&ControllerHealth::new(), move |cm: &ConfigMap| {
        let key = kube_runtime::reflector::ObjectRef::from_obj(cm);
        let cached = store
            .get(&key)
            .and_then(|c| c.metadata.resource_version.clone());
        sightings.lock().unwrap().push((
            cm.metadata.name.clone().unwrap_or_default(),
            cm.metadata.resource_version.clone(),
            cached,
        ));
    });
    eventually("both listed", WAIT, || async {
        seen.lock().unwrap().len() >= 2
    })
    .await;

    // The watch kept away while one object changes, one goes and one comes,
    // and the history is forgotten: the watch's return is a 410 and a relist.
    server.inject(Fault::new(
        Some(Verb::Watch),
        Some("configmaps"),
        FaultAction::Error(500),
    ));
    server.drop_watches();
    let mut kept = api.get("kept").await.unwrap();
    kept.data = Some([("v".to_owned(), "2".to_owned())].into());
    let kept = api
        .replace("kept", &PostParams::default(), &kept)
        .await
        .unwrap();
    api.delete("doomed", &Default::default()).await.unwrap();
    api.create(&PostParams::default(), &config_map("born"))
        .await
        .unwrap();
    let relist_from = seen.lock().unwrap().len();
    server.compact();
    server.clear_faults();

    eventually("the relist handed over", WAIT, || async {
        let seen = seen.lock().unwrap();
        let names: Vec<&str> = seen[relist_from..].iter().map(|s| s.0.as_str()).collect();
        ["kept", "doomed", "born"].iter().all(|n| names.contains(n))
    })
    .await;
    let after: Vec<Sighting> = seen.lock().unwrap()[relist_from..].to_vec();
    for (name, handed, cached) in &after {
        match name.as_str() {
            // Handed with the store already holding it.
            "kept" => {
                assert_eq!(handed, &kept.metadata.resource_version);
                assert_eq!(cached, handed, "the store held the listed object");
            }
            "born" => assert_eq!(cached, handed),
            // Deleted while the watch was away: handed over, gone from the
            // store.
            "doomed" => assert_eq!(cached, &None),
            other => panic!("unexpected {other}"),
        }
    }
}
