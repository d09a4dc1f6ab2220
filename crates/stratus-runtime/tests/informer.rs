//! The informer through the harness: changes reach the callback, a resync
//! hands unchanged objects to it again, and dropping it stops both.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use stratus_runtime::health::ControllerHealth;
use stratus_runtime::informer::Informer;
use stratus_testing::{ApiServer, eventually};

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
