//! 500 random create / delete cycles on a pool of pods while the controller
//! restarts at random and the API and provider misbehave (dropped watches,
//! compaction, 429s and 500s, an API pause, provider errors and a slow
//! provider that times out). At the end: every API pod runs in the provider
//! and is Running in the API, no provider pod lacks an API pod, and nothing
//! is stuck Terminating. Then pods force-deleted and re-created at once
//! (500 cycles, 20 names in parallel): every one runs as its newest UID.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use stratus_kubelet::pods::{PodController, PodControllerConfig};
use stratus_pod::PodError;
use stratus_testing::churn::force_delete_and_recreate;
use stratus_testing::{ApiServer, Fault, FaultAction, MockPodProvider, Verb, poll};
use tokio::sync::watch;

const NODE: &str = "vk-churn";

/// A small deterministic generator (xorshift), so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn start(api: &ApiServer, provider: &MockPodProvider) -> watch::Sender<bool> {
    let config = PodControllerConfig {
        dangling_sweep_period: Duration::from_millis(500),
        provider_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let (stop, stopped) = watch::channel(false);
    let controller = PodController::new(
        api.client(),
        &PodController::informer(api.client(), NODE),
        Arc::new(provider.clone()),
        NODE,
        config,
    );
    tokio::spawn(controller.run(stopped));
    stop
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 2,
                 "containers": [{"name": "app", "image": "nginx"}]},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_pod_is_lost_or_stuck_across_churn_faults_and_restarts() {
    // RUST_LOG=stratus_kubelet=debug shows the controllers' decisions.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .try_init();
    let api = ApiServer::start().await.unwrap();
    let provider = MockPodProvider::new();
    let client = api.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut stop = start(&api, &provider);
    // STRATUS_CHURN_SEED replays another run.
    let seed = std::env::var("STRATUS_CHURN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_cafe_f00d_1234);
    let mut rng = Rng(seed);
    let mut restarts = 0;
    for _ in 0..500 {
        let name = format!("p-{}", rng.below(20));
        match rng.below(100) {
            0..=44 => {
                let _ = pods.create(&PostParams::default(), &pod(&name)).await;
            }
            45..=84 => {
                let _ = pods.delete(&name, &DeleteParams::default()).await;
            }
            85..=88 => {
                // The controller restarts (sometimes staying down a while).
                let _ = stop.send(true);
                restarts += 1;
                if rng.below(2) == 0 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                stop = start(&api, &provider);
            }
            89 => api.drop_watches(),
            90 => {
                api.compact();
                api.drop_watches();
            }
            91 => api.inject(
                Fault::new(
                    Some(Verb::Patch),
                    Some("pods/status"),
                    FaultAction::Throttle {
                        retry_after_secs: 1,
                    },
                )
                .times(3),
            ),
            92 => api.inject(Fault::new(None, Some("pods"), FaultAction::Error(500)).times(2)),
            93 => api.pause(Duration::from_millis(300)),
            94 | 95 => provider.fail_next(
                if rng.below(2) == 0 {
                    "create_pod"
                } else {
                    "delete_pod"
                },
                PodError::unavailable(None, "the backend answered 503"),
                2,
            ),
            96 => {
                // A slow backend: calls time out until it recovers.
                provider.set_latency(Duration::from_millis(500));
                tokio::time::sleep(Duration::from_millis(100)).await;
                provider.set_latency(Duration::ZERO);
            }
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        restarts >= 3,
        "the run restarted the controller {restarts} times"
    );
    api.clear_faults();

    // Converged: the same pods in the API and the provider, all Running,
    // none Terminating. The last mismatch is reported if it never is.
    let watches_before = api.answered(Some(Verb::Watch), "pods", 200);
    let requests_before = api.requests().len();
    let converged = || async {
        let list = pods.list(&ListParams::default()).await.unwrap();
        let held = provider.pods();
        let mut problems = Vec::new();
        for p in &list.items {
            let name = p.metadata.name.clone().unwrap_or_default();
            let phase = p
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default();
            if p.metadata.deletion_timestamp.is_some() {
                let calls: Vec<&str> = provider
                    .calls()
                    .iter()
                    .filter(|c| c.pod == format!("default/{name}"))
                    .map(|c| c.method)
                    .collect();
                problems.push(format!(
                    "{name} Terminating since {:?} (phase {phase:?}, uid {:?}, finalizers {:?}; provider calls {calls:?})",
                    p.metadata.deletion_timestamp, p.metadata.uid, p.metadata.finalizers
                ));
            } else if phase != "Running" {
                problems.push(format!(
                    "{name} is {phase:?}: {:?}",
                    p.status.as_ref().and_then(|s| s.message.clone())
                ));
            }
            if !held.contains_key(&format!("default/{name}")) {
                problems.push(format!("{name} is not in the provider"));
            }
        }
        for key in held.keys() {
            let name = key.trim_start_matches("default/");
            if !list
                .items
                .iter()
                .any(|p| p.metadata.name.as_deref() == Some(name))
            {
                problems.push(format!("{name} is only in the provider"));
            }
        }
        if problems.is_empty() {
            return None;
        }
        Some(format!(
            "{} (pod watches {} then {}; requests since: {:?})",
            problems.join("; "),
            watches_before,
            api.answered(Some(Verb::Watch), "pods", 200),
            api.requests()
                .iter()
                .skip(requests_before)
                .filter(|r| r.resource == "pods" && r.verb != Verb::List)
                .take(8)
                .map(|r| format!("{:?} {:?} {}", r.verb, r.name, r.status))
                .collect::<Vec<_>>()
        ))
    };
    poll("the API and the provider to agree", Duration::from_secs(60))
        .every(Duration::from_millis(200))
        .until(converged)
        .await
        .unwrap();
    let _ = stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_deleted_and_recreated_pods_all_run_with_their_new_uid() {
    let api = ApiServer::start().await.unwrap();
    let provider = MockPodProvider::new();
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let _stop = start(&api, &provider);
    let recreated = force_delete_and_recreate(&pods, pod, 20, 25).await;
    assert!(recreated >= 500, "{recreated} pods re-created");
    poll(
        "every re-created pod Running as itself",
        Duration::from_secs(30),
    )
    .every(Duration::from_millis(200))
    .until(|| async {
        let list = pods.list(&ListParams::default()).await.unwrap();
        let held = provider.pods();
        let mut problems = Vec::new();
        for p in &list.items {
            let name = p.metadata.name.clone().unwrap_or_default();
            let phase = p.status.as_ref().and_then(|s| s.phase.clone());
            if phase.as_deref() != Some("Running") {
                problems.push(format!("{name} is {phase:?}"));
            }
            match held.get(&format!("default/{name}")) {
                Some(run) if run.metadata.uid == p.metadata.uid => {}
                Some(run) => problems.push(format!(
                    "{name}: the provider runs uid {:?}, the API has {:?}",
                    run.metadata.uid, p.metadata.uid
                )),
                None => problems.push(format!("{name} is not in the provider")),
            }
        }
        if held.len() != list.items.len() {
            problems.push(format!(
                "the provider runs {} pods, the API has {}",
                held.len(),
                list.items.len()
            ));
        }
        (!problems.is_empty()).then(|| problems.join("; "))
    })
    .await
    .unwrap();
}
