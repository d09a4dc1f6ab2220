//! The controller shape through the harness: keys from a shared informer
//! reconciled after the first list, writes seen through the API, retries
//! as the error asks, requeues, batches, metrics, health (passes expected
//! included), and stop.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube_runtime::reflector::ObjectRef;
use prometheus_client::registry::Registry;
use stratus_runtime::controller::Controller;
use stratus_runtime::health::{ControllerHealth, HealthCheck};
use stratus_runtime::informer::SharedInformer;
use stratus_runtime::metrics::{RuntimeMetrics, encode_text};
use stratus_runtime::workqueue::{Action, Retry, WorkQueue, default_controller_rate_limiter};
use stratus_testing::{ApiServer, Verb, eventually};

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

fn annotation(cm: &ConfigMap) -> Option<String> {
    cm.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("example.com/reconciled").cloned())
}

/// A failure that asks for a fixed delay.
#[derive(Debug, thiserror::Error)]
#[error("not yet")]
struct NotYet;

impl Retry for NotYet {
    fn retry_after(&self) -> Option<Duration> {
        Some(Duration::from_millis(50))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciles_each_object_after_the_first_list_and_retries_as_asked() {
    let server = ApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for name in ["a", "b"] {
        api.create(&PostParams::default(), &config_map(name))
            .await
            .unwrap();
    }
    let informer = SharedInformer::new(api.clone());
    let mut registry = Registry::default();
    let metrics = RuntimeMetrics::register(&mut registry);
    let health = ControllerHealth::new();
    let controller = Controller::new(WorkQueue::with_metrics(
        default_controller_rate_limiter(),
        metrics.workqueue.queue("configmaps"),
    ))
    .workers(2)
    .health(health.clone())
    .reconcile_metrics(metrics.reconcile.controller("annotator"))
    // Only objects not reconciled yet are queued: the mapper filters.
    .watches(&informer, |cm: &ConfigMap| {
        annotation(cm)
            .is_none()
            .then(|| cm.metadata.name.clone())
            .flatten()
    });
    // A key queued before `run` waits for the cache: "a" is in the store
    // when it is reconciled.
    controller.queue().add("a".to_string());
    let store = informer.store().clone();
    let failures = Arc::new(Mutex::new(BTreeMap::<String, u32>::new()));
    let (reconcile_api, counts) = (api.clone(), failures.clone());
    let reconcile = move |name: String| {
        let (api, store, counts) = (reconcile_api.clone(), store.clone(), counts.clone());
        async move {
            let cached = store.get(&ObjectRef::new(&name).within("default"));
            assert!(cached.is_some(), "{name} reconciled before the first list");
            // "b" fails twice before it succeeds.
            if name == "b" {
                let mut counts = counts.lock().unwrap();
                let n = counts.entry(name.clone()).or_default();
                if *n < 2 {
                    *n += 1;
                    return Err(NotYet);
                }
            }
            let patch =
                serde_json::json!({"metadata": {"annotations": {"example.com/reconciled": "yes"}}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap();
            Ok(Action::Done)
        }
    };
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let running = tokio::spawn(controller.run(reconcile, stop));

    api.create(&PostParams::default(), &config_map("c"))
        .await
        .unwrap();
    eventually("a, b and c annotated", WAIT, || async {
        let list = api.list(&Default::default()).await.unwrap();
        list.items.len() == 3 && list.items.iter().all(|cm| annotation(cm).is_some())
    })
    .await;
    assert_eq!(failures.lock().unwrap()["b"], 2);
    let text = encode_text(&registry).unwrap();
    assert!(
        text.contains("stratus_reconcile_total{controller=\"annotator\",result=\"error\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("stratus_reconcile_total{controller=\"annotator\",result=\"success\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("workqueue_retries_total{name=\"configmaps\"} 0"),
        "a fixed delay is no backoff retry: {text}"
    );
    assert!(health.check().is_ok());

    // Stopped, it reconciles nothing more and reports it.
    stop_tx.send(true).unwrap();
    tokio::time::timeout(WAIT, running).await.unwrap().unwrap();
    assert!(health.check().is_err(), "a stopped controller is unhealthy");
    api.create(&PostParams::default(), &config_map("d"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let d = api.get("d").await.unwrap();
    assert_eq!(annotation(&d), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_controllers_share_one_list_and_one_watch_and_a_pass_requeues_itself() {
    let server = ApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();
    let informer = SharedInformer::new(api.clone());

    // A batched controller: the keys arrive together.
    let batches = Arc::new(Mutex::new(Vec::<Vec<String>>::new()));
    let batched = Controller::new(WorkQueue::new(default_controller_rate_limiter()))
        .watches(&informer, |cm: &ConfigMap| cm.metadata.name.clone());
    let seen = batches.clone();
    let batch = move |names: Vec<String>| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push(names.clone());
            names
                .into_iter()
                .map(|n| (n, Ok::<_, NotYet>(Action::Done)))
                .collect::<Vec<_>>()
        }
    };

    // A periodic pass: one key that asks to come back.
    let passes = Arc::new(Mutex::new(0u32));
    let health = ControllerHealth::new();
    let periodic = Controller::new(WorkQueue::new(default_controller_rate_limiter()))
        .health(health.clone())
        .passes_every(Duration::from_millis(100))
        .watches(&informer, |_: &ConfigMap| None::<&'static str>);
    periodic.queue().add("pass");
    let counter = passes.clone();
    let pass = move |_: &'static str| {
        let counter = counter.clone();
        async move {
            *counter.lock().unwrap() += 1;
            Ok::<_, std::convert::Infallible>(Action::RequeueAfter(Duration::from_millis(100)))
        }
    };

    // A periodic controller whose pass never comes (no key): its health,
    // handed over after `passes_every`, turns unhealthy.
    let idle_health = ControllerHealth::new();
    let idle = Controller::new(WorkQueue::new(default_controller_rate_limiter()))
        .passes_every(Duration::from_millis(50))
        .health(idle_health.clone())
        .watches(&informer, |_: &ConfigMap| None::<&'static str>);
    let nothing = |_: &'static str| async { Ok::<_, std::convert::Infallible>(Action::Done) };

    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let running = tokio::spawn(async move {
        tokio::join!(
            batched.run_batched(Duration::from_millis(200), 10, batch, stop.clone()),
            periodic.run(pass, stop.clone()),
            idle.run(nothing, stop),
        )
    });
    eventually("a reconciled", WAIT, || async {
        batches.lock().unwrap().iter().flatten().any(|n| n == "a")
    })
    .await;
    for name in ["b", "c", "e"] {
        api.create(&PostParams::default(), &config_map(name))
            .await
            .unwrap();
    }
    eventually("b, c and e reconciled in one batch", WAIT, || async {
        batches
            .lock()
            .unwrap()
            .iter()
            .any(|b| b.len() == 3 && b.contains(&"b".to_string()))
    })
    .await;
    eventually("passes every 100 ms", WAIT, || async {
        *passes.lock().unwrap() >= 3
    })
    .await;
    assert!(health.check().is_ok());
    eventually("no pass in three periods: unhealthy", WAIT, || async {
        idle_health.check().is_err()
    })
    .await;
    assert!(health.check().is_ok(), "the periodic one still passes");
    assert_eq!(server.answered(Some(Verb::List), "configmaps", 200), 1);
    assert_eq!(server.answered(Some(Verb::Watch), "configmaps", 200), 1);

    stop_tx.send(true).unwrap();
    tokio::time::timeout(WAIT, running).await.unwrap().unwrap();
    let after = *passes.lock().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(*passes.lock().unwrap(), after, "no pass after stop");
}
