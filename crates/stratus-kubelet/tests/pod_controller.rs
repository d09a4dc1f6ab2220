//! The pod controller against the harness API server with MockPodProvider:
//! create, update, graceful deletion, provider errors, status from
//! notifications and from polls, dangling pods and their safeguard,
//! deletions missed while the controller was away, provider evictions.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use stratus_kubelet::pods::{PodController, PodControllerConfig};
use stratus_pod::PodError;
use stratus_testing::{ApiServer, Fault, FaultAction, MockPodProvider, Verb, eventually};
use tokio::sync::watch;

const NODE: &str = "vk-0";

fn config() -> PodControllerConfig {
    PodControllerConfig {
        poll_interval: Duration::from_millis(200),
        dangling_sweep_period: Duration::from_millis(300),
        missing_grace: Duration::from_secs(1),
        ..Default::default()
    }
}

/// A fresh API server, the controller over `provider`, and the pods API.
async fn setup(provider: &MockPodProvider) -> (ApiServer, watch::Sender<bool>, Api<Pod>) {
    let api = ApiServer::start().await.unwrap();
    let stop = start(&api, provider);
    let pods = Api::namespaced(api.client(), "default");
    (api, stop, pods)
}

/// The controller under test, for the node `NODE`.
fn controller(
    api: &ApiServer,
    provider: &MockPodProvider,
    config: PodControllerConfig,
) -> PodController {
    let pods = PodController::informer(api.client(), NODE);
    PodController::new(
        api.client(),
        &pods,
        Arc::new(provider.clone()),
        NODE,
        config,
    )
}

fn start(api: &ApiServer, provider: &MockPodProvider) -> watch::Sender<bool> {
    let (stop, stopped) = watch::channel(false);
    let controller = controller(api, provider, config());
    tokio::spawn(controller.run(stopped));
    stop
}

fn pod(name: &str, extra: serde_json::Value) -> Pod {
    let mut value = serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": NODE, "containers": [{"name": "app", "image": "nginx"}]},
    });
    json_patch::merge(&mut value, &extra);
    serde_json::from_value(value).unwrap()
}

async fn create(pods: &Api<Pod>, p: Pod) {
    pods.create(&PostParams::default(), &p).await.unwrap();
}

/// Whether every container of `p` terminated with `code`.
fn exited_with(p: &Pod, code: i32) -> bool {
    let statuses = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    !statuses.is_empty()
        && statuses.iter().all(|c| {
            c.state
                .as_ref()
                .and_then(|st| st.terminated.as_ref())
                .is_some_and(|t| t.exit_code == code)
        })
}

fn phase(p: &Pod) -> Option<String> {
    p.status.as_ref()?.phase.clone()
}

async fn phase_of(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.get_opt(name).await.unwrap().as_ref().and_then(phase)
}

async fn reasons(api: &ApiServer, name: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(api.client(), "default");
    events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect()
}

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_run_update_and_leave_gracefully() {
    let provider = MockPodProvider::new();
    let (api, _stop, pods) = setup(&provider).await;
    create(&pods, pod("web", serde_json::json!({}))).await;
    // Another node's pod is not ours.
    create(
        &pods,
        pod(
            "elsewhere",
            serde_json::json!({"spec": {"nodeName": "other"}}),
        ),
    )
    .await;

    eventually("web runs with an IP", WAIT, || async {
        let p = pods.get("web").await.unwrap();
        phase(&p).as_deref() == Some("Running")
            && p.status
                .and_then(|s| s.pod_ip)
                .is_some_and(|ip| ip.starts_with("10.244."))
    })
    .await;
    assert!(
        reasons(&api, "web")
            .await
            .contains(&"ProviderCreateSuccess".to_string())
    );
    // Go's event source: `<node>/pod-controller`.
    let events: Api<Event> = Api::namespaced(api.client(), "default");
    let created = events
        .list(&ListParams::default().fields("involvedObject.name=web,reason=ProviderCreateSuccess"))
        .await
        .unwrap();
    assert_eq!(
        created.items[0]
            .source
            .as_ref()
            .and_then(|s| s.component.as_deref()),
        Some("vk-0/pod-controller")
    );
    assert!(!provider.pods().contains_key("default/elsewhere"));
    assert_eq!(provider.calls_to("create_pod"), 1);

    // A label change reaches the provider; a status-only change does not.
    pods.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"labels": {"tier": "gold"}}})),
    )
    .await
    .unwrap();
    eventually("updated in the provider", WAIT, || async {
        provider.pods()["default/web"]
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.get("tier").map(String::as_str) == Some("gold"))
    })
    .await;
    assert!(
        reasons(&api, "web")
            .await
            .contains(&"ProviderUpdateSuccess".to_string())
    );

    // Graceful delete (30 s grace): the provider deletes, reports the
    // containers terminated, and the pod is gone long before the grace ends.
    pods.delete("web", &DeleteParams::default()).await.unwrap();
    eventually(
        "gone from the API and the provider",
        Duration::from_secs(5),
        || async { pods.get_opt("web").await.unwrap().is_none() && provider.pods().is_empty() },
    )
    .await;
    assert_eq!(provider.calls_to("create_pod"), 1, "never re-created");
}

/// Go's `handleProviderError`: a `restartPolicy: Never` pod whose create
/// fails is `Failed` / `ProviderFailed` at the first error, transient or
/// not, so a Job's pod is not left Pending; a pod that restarts stays
/// Pending and is retried until the provider takes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_errors_fail_never_pods_as_go_and_are_retried_for_others() {
    let api = ApiServer::start().await.unwrap();
    let provider = MockPodProvider::new();
    let _stop = start(&api, &provider);
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    provider.fail_next(
        "create_pod",
        PodError::unavailable(None, "the backend answered 503"),
        1,
    );
    create(
        &pods,
        pod(
            "job",
            serde_json::json!({"spec": {"restartPolicy": "Never"}}),
        ),
    )
    .await;
    eventually("failed at the first error, as Go", WAIT, || async {
        let p = pods.get("job").await.unwrap();
        let s = p.status.clone().unwrap_or_default();
        s.phase.as_deref() == Some("Failed")
            && s.reason.as_deref() == Some("ProviderFailed")
            && s.message.unwrap_or_default().contains("503")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        provider.calls_to("create_pod"),
        1,
        "a failed pod is not retried"
    );

    provider.fail_next(
        "create_pod",
        PodError::unavailable(None, "the backend answered 503"),
        2,
    );
    create(&pods, pod("web", serde_json::json!({}))).await;
    eventually("runs after the retries", WAIT, || async {
        phase_of(&pods, "web").await.as_deref() == Some("Running")
    })
    .await;
    let r = reasons(&api, "web").await;
    assert!(r.contains(&"ProviderCreateFailed".to_string()), "{r:?}");
    assert!(r.contains(&"ProviderCreateSuccess".to_string()), "{r:?}");
    assert_eq!(provider.calls_to("create_pod"), 4);
}

/// Beyond Go, `never_restart_retries` lets a `Never` pod survive that many
/// transient errors; a permanent one (`InvalidInput`) still fails it at
/// once, and one more transient error than allowed fails it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_restart_retries_bound_the_retries_of_a_never_pod() {
    let api = ApiServer::start().await.unwrap();
    let provider = MockPodProvider::new();
    let (_stop, stopped) = watch::channel(false);
    let config = PodControllerConfig {
        never_restart_retries: 2,
        ..config()
    };
    tokio::spawn(controller(&api, &provider, config).run(stopped));
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let never = serde_json::json!({"spec": {"restartPolicy": "Never"}});
    let transient = || PodError::unavailable(None, "the backend answered 503");

    provider.fail_next("create_pod", transient(), 2);
    create(&pods, pod("flaky", never.clone())).await;
    eventually("runs after two retries", WAIT, || async {
        phase_of(&pods, "flaky").await.as_deref() == Some("Running")
    })
    .await;
    assert_eq!(provider.calls_to("create_pod"), 3);

    provider.fail_next("create_pod", transient(), 3);
    create(&pods, pod("broken", never.clone())).await;
    eventually("failed after the third error", WAIT, || async {
        phase_of(&pods, "broken").await.as_deref() == Some("Failed")
    })
    .await;
    assert_eq!(provider.calls_to("create_pod"), 6);

    provider.fail_next(
        "create_pod",
        PodError::invalid_input("unknown instance size"),
        1,
    );
    create(&pods, pod("invalid", never)).await;
    eventually("failed for good at once", WAIT, || async {
        let p = pods.get("invalid").await.unwrap();
        let s = p.status.clone().unwrap_or_default();
        s.phase.as_deref() == Some("Failed")
            && s.message
                .unwrap_or_default()
                .contains("unknown instance size")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        provider.calls_to("create_pod"),
        7,
        "a failed pod is not retried"
    );
}

/// Go's `deleteDanglingPods`: every provider pod without an API pod is
/// deleted at start, however many (pods deleted while the node was down
/// must stop running and billing), and counted in
/// `stratus_kubelet_dangling_pods_deleted`. With `dangling_safeguard` on,
/// a sweep that would delete most of the provider's pods (and more than
/// ten) deletes none, and `stratus_kubelet_dangling_pods_held` says how
/// many it kept; a single orphan among live pods is still deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dangling_pods_are_deleted_as_go_and_the_safeguard_is_explicit() {
    use prometheus_client::registry::Registry;
    use stratus_kubelet::metrics::KubeletMetrics;
    let run = |api: &ApiServer, provider: &MockPodProvider, safeguard: bool| {
        let mut registry = Registry::default();
        let metrics = KubeletMetrics::register(&mut registry);
        let (stop, stopped) = watch::channel(false);
        let config = PodControllerConfig {
            dangling_safeguard: safeguard,
            ..config()
        };
        let controller = controller(api, provider, config).with_metrics(metrics);
        tokio::spawn(controller.run(stopped));
        (stop, registry)
    };
    let metric = |registry: &Registry, name: &str| {
        let text = stratus_runtime::metrics::encode_text(registry).unwrap();
        stratus_testing::metric_sample(&text, &format!("{name}{{node=\"{NODE}\"}}"))
    };

    let api = ApiServer::start().await.unwrap();
    let provider = MockPodProvider::new();
    for i in 0..20 {
        provider.insert(pod(&format!("orphan-{i}"), serde_json::json!({})));
    }
    let (stop, registry) = run(&api, &provider, false);
    eventually("all twenty orphans deleted", WAIT, || async {
        provider.pods().is_empty()
    })
    .await;
    assert_eq!(
        metric(&registry, "stratus_kubelet_dangling_pods_deleted_total"),
        Some(20.0)
    );
    stop.send(true).unwrap();

    let provider = MockPodProvider::new();
    for i in 0..20 {
        provider.insert(pod(&format!("orphan-{i}"), serde_json::json!({})));
    }
    let (stop, registry) = run(&api, &provider, true);
    eventually("the safeguard reports what it holds", WAIT, || async {
        metric(&registry, "stratus_kubelet_dangling_pods_held") == Some(20.0)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(provider.pods().len(), 20);
    assert_eq!(provider.calls_to("delete_pod"), 0);
    stop.send(true).unwrap();

    // With the API pods present, the one true orphan is deleted even with
    // the safeguard on.
    let provider = MockPodProvider::new();
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    for i in 0..3 {
        create(&pods, pod(&format!("kept-{i}"), serde_json::json!({}))).await;
    }
    provider.insert(pod("orphan", serde_json::json!({})));
    let (_stop, _registry) = run(&api, &provider, true);
    eventually("the orphan is deleted, the others run", WAIT, || async {
        let held = provider.pods();
        !held.contains_key("default/orphan")
            && (0..3).all(|i| held.contains_key(&format!("default/kept-{i}")))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_deleted_while_the_controller_was_away_is_deleted_in_the_provider() {
    let api = ApiServer::start().await.unwrap();
    let provider = MockPodProvider::new();
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let stop = start(&api, &provider);
    for name in ["stays", "goes"] {
        create(&pods, pod(name, serde_json::json!({}))).await;
    }
    eventually("both run", WAIT, || async { provider.pods().len() == 2 }).await;
    stop.send(true).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Force-deleted while no controller watched.
    pods.delete("goes", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let _stop = start(&api, &provider);
    eventually("deleted in the provider after the relist", WAIT, || async {
        let held = provider.pods();
        !held.contains_key("default/goes") && held.contains_key("default/stays")
    })
    .await;
    assert_eq!(
        provider.calls_to("create_pod"),
        2,
        "the running pod is not re-created"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polled_provider_reports_status_and_missing_pods_fail() {
    let provider = MockPodProvider::new().without_notifications();
    let (_api, _stop, pods) = setup(&provider).await;
    create(&pods, pod("polled", serde_json::json!({}))).await;
    eventually("running through polls", WAIT, || async {
        phase_of(&pods, "polled").await.as_deref() == Some("Running")
    })
    .await;
    assert!(provider.calls_to("get_pod_status") >= 1);
    // The backend loses the pod.
    provider.remove("default", "polled");
    eventually("failed as not found with exit code -137", WAIT, || async {
        let p = pods.get("polled").await.unwrap();
        let s = p.status.clone().unwrap_or_default();
        s.phase.as_deref() == Some("Failed")
            && s.reason.as_deref() == Some("NotFound")
            && exited_with(&p, -137)
    })
    .await;
}

/// Go's polling wrapper reports a pod its provider deleted as ended
/// (`Succeeded`, reason `Terminated`, every container terminated), so a
/// graceful delete of a pod on a provider without notifications completes
/// at once instead of at the end of its grace period (30 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polled_provider_s_deleted_pod_is_reported_ended_at_once() {
    let provider = MockPodProvider::new().without_notifications();
    let (_api, _stop, pods) = setup(&provider).await;
    create(&pods, pod("polled", serde_json::json!({}))).await;
    eventually("running through polls", WAIT, || async {
        phase_of(&pods, "polled").await.as_deref() == Some("Running")
    })
    .await;
    pods.delete("polled", &DeleteParams::default().grace_period(30))
        .await
        .unwrap();
    eventually(
        "gone long before its 30 s grace",
        Duration::from_secs(5),
        || async { pods.get_opt("polled").await.unwrap().is_none() },
    )
    .await;
    assert!(provider.pods().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_that_exit_and_provider_evictions_reach_the_api() {
    let provider = MockPodProvider::new();
    let (_api, _stop, pods) = setup(&provider).await;
    create(
        &pods,
        pod(
            "job",
            serde_json::json!({"metadata": {"annotations": {
                "mock.stratus.dev/exit-code": "3", "mock.stratus.dev/run-for": "200ms"
            }}, "spec": {"restartPolicy": "Never"}}),
        ),
    )
    .await;
    eventually("the job failed with its exit code", WAIT, || async {
        let p = pods.get("job").await.unwrap();
        let s = p.status.clone().unwrap_or_default();
        s.phase.as_deref() == Some("Failed") && exited_with(&p, 3)
    })
    .await;

    create(&pods, pod("evicted", serde_json::json!({}))).await;
    eventually("running", WAIT, || async {
        phase_of(&pods, "evicted").await.as_deref() == Some("Running")
    })
    .await;
    provider.evict("default", "evicted");
    eventually(
        "the API pod follows the provider's deletion",
        WAIT,
        || async { pods.get_opt("evicted").await.unwrap().is_none() },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environments_are_resolved_on_demand_before_the_provider_sees_the_pod() {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    let provider = MockPodProvider::new();
    let (api, _stop, pods) = setup(&provider).await;
    create(
        &pods,
        pod(
            "env",
            serde_json::json!({"spec": {"enableServiceLinks": false, "containers": [{
                "name": "app", "image": "nginx",
                "envFrom": [{"secretRef": {"name": "creds"}, "prefix": "DB_"}],
                "env": [
                    {"name": "COLOR", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "color"}}},
                    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "GREETING", "value": "$(COLOR) $(POD)"}
                ]
            }]}}),
        ),
    )
    .await;
    // The mandatory Secret is missing: not created, a Warning, retried.
    eventually("the missing Secret is reported", WAIT, || async {
        reasons(&api, "env")
            .await
            .contains(&"MandatorySecretNotFound".to_string())
    })
    .await;
    assert!(provider.pods().is_empty());

    let maps: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    let secrets: Api<Secret> = Api::namespaced(api.client(), "default");
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(
            serde_json::json!({"metadata": {"name": "settings"}, "data": {"color": "blue"}}),
        )
        .unwrap(),
    )
    .await
    .unwrap();
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": "creds"}, "stringData": {"PASSWORD": "s3cret"}}))
                .unwrap(),
        )
        .await
        .unwrap();
    eventually("created with the resolved environment", WAIT, || async {
        provider.pods().contains_key("default/env")
    })
    .await;
    let created = &provider.pods()["default/env"];
    let container = &created.spec.as_ref().unwrap().containers[0];
    let env: std::collections::BTreeMap<_, _> = container
        .env
        .clone()
        .unwrap()
        .into_iter()
        .map(|v| (v.name, v.value.unwrap_or_default()))
        .collect();
    assert_eq!(env["COLOR"], "blue");
    assert_eq!(env["GREETING"], "blue env");
    assert_eq!(env["DB_PASSWORD"], "s3cret");
    assert!(container.env_from.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_force_delete_then_the_pod_gone_leaves_no_state() {
    let provider = MockPodProvider::new();
    let api = ApiServer::start().await.unwrap();
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = stratus_kubelet::metrics::KubeletMetrics::register(&mut registry);
    let (_stop, stopped) = watch::channel(false);
    let controller = controller(&api, &provider, config()).with_metrics(metrics);
    tokio::spawn(controller.run(stopped));
    let pods: Api<Pod> = Api::namespaced(api.client(), "default");
    let states = || {
        let text = stratus_runtime::metrics::encode_text(&registry).unwrap();
        stratus_testing::metric_sample(
            &text,
            &format!("stratus_kubelet_pod_states{{node=\"{NODE}\"}}"),
        )
    };
    create(
        &pods,
        pod(
            "doomed",
            serde_json::json!({"metadata": {"labels": {"app": "doomed"}}}),
        ),
    )
    .await;
    eventually("doomed Running", WAIT, || async {
        phase_of(&pods, "doomed").await.as_deref() == Some("Running")
    })
    .await;
    eventually("its state counted", WAIT, || async {
        states() == Some(1.0)
    })
    .await;

    // The controller's force-delete (DELETE of the pod) fails; the graceful
    // delete and the final removal come through the collection.
    api.inject(Fault::new(
        Some(Verb::Delete),
        Some("pods"),
        FaultAction::Error(500),
    ));
    let doomed = ListParams::default().labels("app=doomed");
    pods.delete_collection(&DeleteParams::default().grace_period(30), &doomed)
        .await
        .unwrap();
    eventually("deleted in the provider", WAIT, || async {
        provider.pods().is_empty()
    })
    .await;
    eventually("the force-delete refused", WAIT, || async {
        api.requests()
            .iter()
            .any(|r| r.verb == Verb::Delete && r.resource == "pods" && r.status == 500)
    })
    .await;
    assert!(pods.get_opt("doomed").await.unwrap().is_some());
    pods.delete_collection(&DeleteParams::default().grace_period(0), &doomed)
        .await
        .unwrap();
    eventually("gone from the API", WAIT, || async {
        pods.get_opt("doomed").await.unwrap().is_none()
    })
    .await;
    eventually("no state left behind", WAIT, || async {
        states() == Some(0.0)
    })
    .await;
    api.clear_faults();
}
