//! The service load-balancer controller against the harness and FakeCloud.

use std::sync::Arc;
use std::time::Duration;
use stratus_cloud::helpers::ingress_ip;

use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stratus_ccm::Instrumented;
use stratus_ccm::informers::SharedInformers;
use stratus_ccm::service::{ServiceController, ServiceControllerConfig};
use stratus_cloud::{CloudErrorKind, LoadBalancerClasses};
use stratus_testing::eventually;
use stratus_testing::{FakeCloud, NodeSpec, TestCluster};
use tokio::sync::watch;

/// How long a test waits for the controllers to converge.
const WAIT: Duration = Duration::from_secs(10);

fn lb_service(name: &str, class: Option<&str>) -> Service {
    let mut spec = json!({"type": "LoadBalancer", "ports": [{"port": 80}]});
    if let Some(c) = class {
        spec["loadBalancerClass"] = json!(c);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

async fn reasons(cluster: &TestCluster, service: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(cluster.client(), "default");
    let mut list = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={service}")))
        .await
        .unwrap()
        .items;
    list.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
    list.into_iter().filter_map(|e| e.reason).collect()
}

/// Create the LoadBalancer Service `name` and wait until its ingress is
/// written.
async fn create_and_wait_for_ingress(services: &Api<Service>, name: &str) {
    services
        .create(&PostParams::default(), &lb_service(name, None))
        .await
        .unwrap();
    eventually("an ingress", WAIT, || async {
        ingress_ip(&services.get(name).await.unwrap()).is_some()
    })
    .await;
}

/// The controller's defaults with retries from 5 ms (Go waits 5 s first;
/// `go_s_service_backoff_spaces_the_retries_of_a_failing_ensure` checks
/// that): these tests fail the cloud on purpose and want the retry soon.
fn fast_retries() -> ServiceControllerConfig {
    ServiceControllerConfig {
        min_retry_delay: Duration::from_millis(5),
        max_retry_delay: Duration::from_secs(1),
        ..Default::default()
    }
}

fn start(cluster: &TestCluster, cloud: &FakeCloud) -> watch::Sender<bool> {
    let (stop, stopped) = watch::channel(false);
    let controller = ServiceController::new(
        cluster.client(),
        SharedInformers::new(cluster.client()).services(),
        SharedInformers::new(cluster.client()).nodes(),
        Arc::new(cloud.clone()),
        fast_retries(),
    );
    tokio::spawn(controller.run(stopped));
    stop
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_update_and_delete_load_balancers() {
    let cluster = TestCluster::start().await.unwrap();
    let hb = Duration::from_secs(3600);
    let _a = cluster
        .add_node(NodeSpec::new("a").with_heartbeat(hb))
        .await
        .unwrap();
    let mut excluded = NodeSpec::new("excluded").with_heartbeat(hb);
    excluded.labels.insert(
        "node.kubernetes.io/exclude-from-external-load-balancers".into(),
        "true".into(),
    );
    let _x = cluster.add_node(excluded).await.unwrap();
    let cloud = FakeCloud::new();
    let _stop = start(&cluster, &cloud);
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    create_and_wait_for_ingress(&services, "web").await;
    let svc = services.get("web").await.unwrap();
    assert_eq!(
        svc.metadata.finalizers.unwrap(),
        ["service.kubernetes.io/load-balancer-cleanup"]
    );
    let lbs = cloud.load_balancers();
    assert_eq!(lbs.len(), 1);
    let lb = lbs.values().next().unwrap().clone();
    assert_eq!(lb.hosts, ["a"], "excluded nodes are not backends");
    eventually("the ensure events", WAIT, || async {
        let r = reasons(&cluster, "web").await;
        r.contains(&"EnsuringLoadBalancer".to_owned())
            && r.contains(&"EnsuredLoadBalancer".to_owned())
    })
    .await;
    // The status write does not cause a second ensure.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(cloud.calls_to("ensure_load_balancer"), 1);

    // A new node: only the hosts are updated.
    let _b = cluster
        .add_node(NodeSpec::new("b").with_heartbeat(hb))
        .await
        .unwrap();
    eventually("the new backend", WAIT, || async {
        cloud.load_balancers()[&lb.name].hosts == ["a", "b"]
    })
    .await;
    assert_eq!(cloud.calls_to("ensure_load_balancer"), 1);
    assert!(cloud.calls_to("update_load_balancer") >= 1);
    eventually("UpdatedLoadBalancer", WAIT, || async {
        reasons(&cluster, "web")
            .await
            .contains(&"UpdatedLoadBalancer".to_owned())
    })
    .await;
    // A label flip excludes a node.
    let nodes: Api<Node> = Api::all(cluster.client());
    nodes
        .patch(
            "b",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "true"}}})),
        )
        .await
        .unwrap();
    eventually("b excluded", WAIT, || async {
        cloud.load_balancers()[&lb.name].hosts == ["a"]
    })
    .await;

    // Type change → load balancer deleted, finalizer removed, status cleared.
    services
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"type": "ClusterIP"}})),
        )
        .await
        .unwrap();
    eventually("cleanup", WAIT, || async {
        let s = services.get("web").await.unwrap();
        cloud.load_balancers().is_empty()
            && s.metadata.finalizers.clone().unwrap_or_default().is_empty()
            && ingress_ip(&s).is_none()
    })
    .await;

    // Deletion of a LoadBalancer Service waits for the cloud cleanup.
    services
        .create(&PostParams::default(), &lb_service("api", None))
        .await
        .unwrap();
    eventually("api ingress", WAIT, || async {
        ingress_ip(&services.get("api").await.unwrap()).is_some()
    })
    .await;
    services
        .delete("api", &DeleteParams::default())
        .await
        .unwrap();
    eventually("api gone", WAIT, || async {
        services.get_opt("api").await.unwrap().is_none()
    })
    .await;
    assert!(cloud.load_balancers().is_empty());
    let r = reasons(&cluster, "api").await;
    assert!(
        r.contains(&"DeletingLoadBalancer".to_owned())
            && r.contains(&"DeletedLoadBalancer".to_owned()),
        "{r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classes_elsewhere_retries_and_no_nodes() {
    let cluster = TestCluster::start().await.unwrap();
    let cloud = FakeCloud::new();
    cloud.set_load_balancer_classes(
        LoadBalancerClasses::default().with_class("fake.example/internal"),
    );
    cloud.implement_elsewhere("default/elsewhere");
    cloud.fail_next(
        "ensure_load_balancer",
        CloudErrorKind::RetryAfter(Duration::from_millis(300)),
        1,
    );
    let _stop = start(&cluster, &cloud);
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    services
        .create(&PostParams::default(), &lb_service("retried", None))
        .await
        .unwrap();
    // The scripted failure goes to this Service's first ensure.
    eventually("the first ensure", WAIT, || async {
        cloud.calls_to("ensure_load_balancer") >= 1
    })
    .await;
    services
        .create(
            &PostParams::default(),
            &lb_service("internal", Some("fake.example/internal")),
        )
        .await
        .unwrap();
    services
        .create(
            &PostParams::default(),
            &lb_service("other-class", Some("other.example/lb")),
        )
        .await
        .unwrap();
    services
        .create(&PostParams::default(), &lb_service("elsewhere", None))
        .await
        .unwrap();

    eventually("served classes provisioned", WAIT, || async {
        ingress_ip(&services.get("retried").await.unwrap()).is_some()
            && ingress_ip(&services.get("internal").await.unwrap()).is_some()
    })
    .await;
    let retried = reasons(&cluster, "retried").await;
    assert!(
        retried.contains(&"SyncLoadBalancerFailed".to_owned()),
        "{retried:?}"
    );
    assert!(
        retried.contains(&"UnAvailableLoadBalancer".to_owned()),
        "no nodes: {retried:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let other = services.get("other-class").await.unwrap();
    assert!(
        other.metadata.finalizers.is_none() && ingress_ip(&other).is_none(),
        "a class we do not serve is left alone"
    );
    let elsewhere = services.get("elsewhere").await.unwrap();
    assert_eq!(
        elsewhere.metadata.finalizers.clone().unwrap(),
        ["service.kubernetes.io/load-balancer-cleanup"]
    );
    assert!(
        ingress_ip(&elsewhere).is_none(),
        "ImplementedElsewhere leaves the status alone"
    );
}

/// Random creates, deletes and type changes with random controller restarts:
/// the cloud ends with exactly one load balancer per LoadBalancer Service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_leaked_load_balancers_across_random_cycles_and_restarts() {
    use stratus_cloud::CloudProvider;
    let cluster = TestCluster::start().await.unwrap();
    let _node = cluster
        .add_node(NodeSpec::new("a").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    let cloud = FakeCloud::new();
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    let mut stop = start(&cluster, &cloud);
    let mut rng: u64 = 0x5eed_1234_abcd_0001;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    for cycle in 0..200 {
        let name = format!("svc-{}", next(10));
        match (services.get_opt(&name).await.unwrap(), next(3)) {
            (None, _) => {
                let _ = services
                    .create(&PostParams::default(), &lb_service(&name, None))
                    .await;
            }
            (Some(_), 0) => {
                let _ = services.delete(&name, &DeleteParams::default()).await;
            }
            (Some(s), _) => {
                let ty = if s.spec.and_then(|s| s.type_).as_deref() == Some("LoadBalancer") {
                    "ClusterIP"
                } else {
                    "LoadBalancer"
                };
                let _ = services
                    .patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"type": ty}})),
                    )
                    .await;
            }
        }
        if next(20) == 0 {
            // Restart the controller; sometimes leave it down for a few cycles.
            let _ = stop.send(true);
            if cycle % 2 == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            stop = start(&cluster, &cloud);
        }
        if next(4) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let lb = cloud.load_balancer().unwrap();
    stratus_testing::eventually(
        "the cloud matches the Services",
        Duration::from_secs(30),
        || async {
            let list = services.list(&ListParams::default()).await.unwrap().items;
            let wanted: std::collections::BTreeSet<String> = list
                .iter()
                .filter(|s| {
                    s.metadata.deletion_timestamp.is_none()
                        && s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
                })
                .map(|s| lb.get_load_balancer_name("kubernetes", s))
                .collect();
            let stuck = list.iter().any(|s| s.metadata.deletion_timestamp.is_some());
            let actual: std::collections::BTreeSet<String> =
                cloud.load_balancers().keys().cloned().collect();
            !stuck && wanted == actual
        },
    )
    .await;
    let _ = stop.send(true);
}

fn start_with(
    cluster: &TestCluster,
    cloud: &FakeCloud,
    config: ServiceControllerConfig,
    metrics: stratus_ccm::metrics::CcmMetrics,
) -> watch::Sender<bool> {
    let (stop, stopped) = watch::channel(false);
    let controller = ServiceController::new(
        cluster.client(),
        SharedInformers::new(cluster.client()).services(),
        SharedInformers::new(cluster.client()).nodes(),
        Arc::new(cloud.clone()),
        config,
    )
    .with_metrics(metrics);
    tokio::spawn(controller.run(stopped));
    stop
}

/// The value of a sample in the text exposition (0 if absent).
fn sample(text: &str, name_and_labels: &str) -> f64 {
    stratus_testing::metric_sample(text, name_and_labels).unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_checks_instead_of_re_ensuring_and_drift_is_repaired() {
    let cluster = TestCluster::start().await.unwrap();
    let _a = cluster
        .add_node(NodeSpec::new("a").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    let cloud = FakeCloud::new();
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    let names = ["s1", "s2", "s3", "s4"];
    for name in names {
        services
            .create(&PostParams::default(), &lb_service(name, None))
            .await
            .unwrap();
    }
    let stop = start(&cluster, &cloud);
    eventually("four ingresses", WAIT, || async {
        let list = services.list(&ListParams::default()).await.unwrap().items;
        list.iter().filter(|s| ingress_ip(s).is_some()).count() == 4
    })
    .await;
    stop.send(true).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(cloud.calls_to("ensure_load_balancer"), 4);

    // A restart: every Service is checked, none is ensured again.
    cloud.clear_calls();
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = stratus_ccm::metrics::CcmMetrics::register(&mut registry);
    let config = ServiceControllerConfig {
        drift_check_period: Some(Duration::from_millis(400)),
        ..fast_retries()
    };
    let _stop = start_with(&cluster, &cloud, config, metrics);
    eventually("four checks", WAIT, || async {
        cloud.calls_to("load_balancer_up_to_date") >= 4
    })
    .await;
    assert_eq!(
        cloud.calls_to("ensure_load_balancer"),
        0,
        "no re-ensure storm"
    );

    // Drift: one load balancer edited in the cloud, one deleted there.
    let lb_of = |svc: &str| {
        cloud
            .load_balancers()
            .into_values()
            .find(|lb| lb.service == format!("default/{svc}"))
            .unwrap()
    };
    let (edited, deleted) = (lb_of("s1"), lb_of("s2"));
    assert!(cloud.tamper_load_balancer(&edited.name, |lb| lb.hosts.clear()));
    assert!(cloud.remove_load_balancer(&deleted.name).is_some());
    eventually("the drifted load balancers repaired", WAIT, || async {
        let lbs = cloud.load_balancers();
        lbs.get(&edited.name).is_some_and(|lb| lb.hosts == ["a"])
            && lbs.get(&deleted.name).is_some_and(|lb| lb.hosts == ["a"])
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ensured: Vec<String> = cloud
        .calls()
        .into_iter()
        .filter(|c| c.method == "ensure_load_balancer")
        .map(|c| c.target)
        .collect();
    assert!(
        ensured
            .iter()
            .all(|t| *t == edited.name || *t == deleted.name),
        "only the drifted ones are ensured again: {ensured:?}"
    );
    let text = stratus_runtime::metrics::encode_text(&registry).unwrap();
    assert!(
        sample(
            &text,
            "stratus_cloud_provider_requests_total{method=\"load_balancer_up_to_date\",result=\"ok\"}"
        ) >= 8.0,
        "{text}"
    );
    assert!(sample(&text, "workqueue_adds_total{name=\"service\"}") >= 8.0);
    assert!(
        sample(
            &text,
            "stratus_reconcile_total{controller=\"service-lb-controller\",result=\"success\"}"
        ) >= 8.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_balancers_survive_api_faults_without_leaks() {
    use stratus_testing::{Fault, FaultAction, Verb};
    let cluster = TestCluster::start().await.unwrap();
    let server = cluster.server();
    let _a = cluster
        .add_node(NodeSpec::new("a").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    let cloud = FakeCloud::new();
    server.inject(Fault::new(
        None,
        None,
        FaultAction::Latency(Duration::from_millis(20)),
    ));
    // The first finalizer / status writes are throttled, then fail.
    server.inject(
        Fault::new(
            Some(Verb::Patch),
            Some("services/status"),
            FaultAction::Throttle {
                retry_after_secs: 1,
            },
        )
        .times(2),
    );
    server.inject(
        Fault::new(
            Some(Verb::Patch),
            Some("services/status"),
            FaultAction::Error(500),
        )
        .times(2),
    );
    let _stop = start(&cluster, &cloud);
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    for i in 0..3 {
        services
            .create(
                &PostParams::default(),
                &lb_service(&format!("before-{i}"), None),
            )
            .await
            .unwrap();
    }
    // Services created while the watches are cut, and after a compaction.
    server.drop_watches();
    services
        .create(&PostParams::default(), &lb_service("cut", None))
        .await
        .unwrap();
    server.compact();
    services
        .create(&PostParams::default(), &lb_service("compacted", None))
        .await
        .unwrap();
    eventually("five ingresses", WAIT, || async {
        let list = services.list(&ListParams::default()).await.unwrap().items;
        list.iter().filter(|s| ingress_ip(s).is_some()).count() == 5
    })
    .await;
    assert_eq!(
        (
            server.answered(None, "services/status", 429),
            server.answered(None, "services/status", 500)
        ),
        (2, 2),
        "the faults were hit"
    );
    assert_eq!(cloud.load_balancers().len(), 5);

    // Deleted while the watches are cut: every load balancer goes, and no
    // Service is left stuck on its finalizer.
    server.drop_watches();
    services
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    server.inject(
        Fault::new(
            Some(Verb::Patch),
            Some("services/status"),
            FaultAction::Error(500),
        )
        .times(1),
    );
    eventually(
        "every load balancer deleted and every Service gone",
        WAIT,
        || async {
            cloud.load_balancers().is_empty()
                && services
                    .list(&ListParams::default())
                    .await
                    .unwrap()
                    .items
                    .is_empty()
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_host_update_is_retried_in_place_and_a_failed_one_repaired_by_a_full_ensure() {
    let cluster = TestCluster::start().await.unwrap();
    let hb = Duration::from_secs(3600);
    let _a = cluster
        .add_node(NodeSpec::new("a").with_heartbeat(hb))
        .await
        .unwrap();
    let cloud = FakeCloud::new();
    let _stop = start(&cluster, &cloud);
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    create_and_wait_for_ingress(&services, "web").await;
    let ensures = cloud.calls_to("ensure_load_balancer");
    // Throttled: the same update again after the cloud's delay, nothing else
    // (no existence check, no full ensure, no failure event).
    cloud.fail_next(
        "update_load_balancer",
        CloudErrorKind::Throttled {
            retry_after: Some(Duration::from_millis(200)),
        },
        1,
    );
    let _b = cluster
        .add_node(NodeSpec::new("b").with_heartbeat(hb))
        .await
        .unwrap();
    eventually("the new backend after the throttle", WAIT, || async {
        cloud
            .load_balancers()
            .values()
            .all(|lb| lb.hosts == ["a", "b"])
    })
    .await;
    assert_eq!(cloud.calls_to("update_load_balancer"), 2);
    assert_eq!(cloud.calls_to("get_load_balancer"), 0);
    assert_eq!(cloud.calls_to("ensure_load_balancer"), ensures);
    assert!(
        !reasons(&cluster, "web")
            .await
            .contains(&"UpdateLoadBalancerFailed".to_owned())
    );
    // Any other failure: the new node must still reach the load balancer,
    // through a full ensure, and the failure is told.
    cloud.fail_next("update_load_balancer", CloudErrorKind::Other, 1);
    let _c = cluster
        .add_node(NodeSpec::new("c").with_heartbeat(hb))
        .await
        .unwrap();
    eventually(
        "the new backend despite the failed update",
        WAIT,
        || async {
            cloud
                .load_balancers()
                .values()
                .all(|lb| lb.hosts == ["a", "b", "c"])
        },
    )
    .await;
    assert!(
        cloud.calls_to("ensure_load_balancer") > ensures,
        "repaired by an ensure"
    );
    eventually("UpdateLoadBalancerFailed", WAIT, || async {
        reasons(&cluster, "web")
            .await
            .contains(&"UpdateLoadBalancerFailed".to_owned())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_source_ranges_get_one_counted_event_and_backed_off_retries() {
    let cluster = TestCluster::start().await.unwrap();
    let _a = cluster
        .add_node(NodeSpec::new("a").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    let cloud = FakeCloud::new();
    let _stop = start(&cluster, &cloud);
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    let mut svc = lb_service("bad", None);
    svc.metadata.annotations = Some(
        [(
            "service.beta.kubernetes.io/load-balancer-source-ranges".to_string(),
            "10.0.0.0/8, not-a-cidr".to_string(),
        )]
        .into(),
    );
    services.create(&PostParams::default(), &svc).await.unwrap();
    let events: Api<Event> = Api::namespaced(cluster.client(), "default");
    // The failures for the bad range (a first attempt may also race the
    // finalizer write and fail with a conflict, a different message).
    let failures = || async {
        events
            .list(&ListParams::default().fields("reason=SyncLoadBalancerFailed"))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| {
                e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("not-a-cidr"))
            })
            .collect::<Vec<_>>()
    };
    eventually("a counted SyncLoadBalancerFailed", WAIT, || async {
        failures().await.first().and_then(|e| e.count) >= Some(3)
    })
    .await;
    assert_eq!(failures().await.len(), 1, "one event object, counted");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let attempts = cloud.calls_to("ensure_load_balancer");
    assert!(
        attempts <= 14,
        "backed off, not a hot loop: {attempts} attempts"
    );
    assert!(cloud.load_balancers().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_classes_replace_the_provider_s() {
    let cluster = TestCluster::start().await.unwrap();
    // The provider serves unclassed Services; this manager is told to serve
    // only `split.example/b` (another manager takes the rest).
    let cloud = FakeCloud::new();
    let config = ServiceControllerConfig {
        classes: Some(LoadBalancerClasses::named(["split.example/b"])),
        ..fast_retries()
    };
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = stratus_ccm::metrics::CcmMetrics::register(&mut registry);
    let _stop = start_with(&cluster, &cloud, config, metrics);
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    for (name, class) in [("plain", None), ("b", Some("split.example/b"))] {
        services
            .create(&PostParams::default(), &lb_service(name, class))
            .await
            .unwrap();
    }
    eventually("the configured class is provisioned", WAIT, || async {
        ingress_ip(&services.get("b").await.unwrap()).is_some()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let plain = services.get("plain").await.unwrap();
    assert!(
        plain.metadata.finalizers.is_none() && ingress_ip(&plain).is_none(),
        "the provider's default class is not served here"
    );
    assert_eq!(cloud.load_balancers().len(), 1);
}

/// Go's service controller retries a failing Service on its own backoff,
/// 5 s doubling to 300 s (`minRetryDelay`, `maxRetryDelay`), not the
/// generic 5 ms one: one cloud call and one `SyncLoadBalancerFailed` in the
/// first seconds, the second call about 5 s later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_s_service_backoff_spaces_the_retries_of_a_failing_ensure() {
    let cluster = TestCluster::start().await.unwrap();
    let _a = cluster
        .add_node(NodeSpec::new("a").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    let cloud = FakeCloud::new();
    cloud.fail_next("ensure_load_balancer", CloudErrorKind::Other, 100);
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = stratus_ccm::metrics::CcmMetrics::register(&mut registry);
    let _stop = start_with(
        &cluster,
        &cloud,
        ServiceControllerConfig::default(),
        metrics,
    );
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    services
        .create(&PostParams::default(), &lb_service("failing", None))
        .await
        .unwrap();
    eventually("the first ensure", WAIT, || async {
        cloud.calls_to("ensure_load_balancer") >= 1
    })
    .await;
    let first = std::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        cloud.calls_to("ensure_load_balancer"),
        1,
        "retried within 4 s"
    );
    let failures = || async {
        let events: Api<Event> = Api::namespaced(cluster.client(), "default");
        events
            .list(&ListParams::default().fields("reason=SyncLoadBalancerFailed"))
            .await
            .unwrap()
            .items
            .iter()
            .map(|e| e.count.unwrap_or(1))
            .sum::<i32>()
    };
    assert_eq!(failures().await, 1);
    eventually("the second ensure", Duration::from_secs(6), || async {
        cloud.calls_to("ensure_load_balancer") >= 2
    })
    .await;
    let second = first.elapsed();
    assert!(
        second >= Duration::from_millis(4500),
        "the second ensure came {second:?} after the first"
    );
    eventually("a second SyncLoadBalancerFailed", WAIT, || async {
        failures().await == 2
    })
    .await;
}

/// The events about `service`, as `reason: message`.
async fn event_texts(cluster: &TestCluster, service: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(cluster.client(), "default");
    events
        .list(&ListParams::default().fields(&format!("involvedObject.name={service}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| {
            format!(
                "{}: {}",
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default()
            )
        })
        .collect()
}

/// Go's `processServiceDeletion`: a Service whose finalizer was stripped by
/// hand and then deleted still has its load balancer deleted, from the last
/// version the controller saw (`DeletingLoadBalancer`, a failure reported as
/// `DeleteLoadBalancerFailed` and retried, `DeletedLoadBalancer`). A Service
/// deleted that way and re-created at once under a new UID gets a new load
/// balancer and the old one is deleted, as Go's UID check does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_deleted_without_its_finalizer_still_has_its_load_balancer_deleted() {
    let cluster = TestCluster::start().await.unwrap();
    let _a = cluster
        .add_node(NodeSpec::new("a").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    let cloud = FakeCloud::new();
    let _stop = start(&cluster, &cloud);
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    let strip_and_delete = |name: &'static str| {
        let services = services.clone();
        async move {
            services
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                )
                .await
                .unwrap();
            services
                .delete(name, &DeleteParams::default())
                .await
                .unwrap();
        }
    };

    create_and_wait_for_ingress(&services, "web").await;
    assert_eq!(cloud.load_balancers().len(), 1);
    cloud.fail_next("ensure_load_balancer_deleted", CloudErrorKind::Other, 1);
    strip_and_delete("web").await;
    eventually("the orphaned load balancer deleted", WAIT, || async {
        cloud.load_balancers().is_empty()
    })
    .await;
    eventually("the deletion events", WAIT, || async {
        let texts = event_texts(&cluster, "web").await;
        [
            "DeletingLoadBalancer: Deleting load balancer",
            "DeleteLoadBalancerFailed: Error deleting load balancer: ",
            "DeletedLoadBalancer: Deleted load balancer",
        ]
        .iter()
        .all(|want| texts.iter().any(|t| t.starts_with(want)))
    })
    .await;

    // Deleted without the finalizer and re-created under the same name.
    create_and_wait_for_ingress(&services, "api").await;
    let old_lb = cloud.load_balancers().into_keys().next().unwrap();
    strip_and_delete("api").await;
    create_and_wait_for_ingress(&services, "api").await;
    eventually("only the new Service's load balancer", WAIT, || async {
        let lbs = cloud.load_balancers();
        lbs.len() == 1 && !lbs.contains_key(&old_lb)
    })
    .await;
}

/// Go's delete path reports its failures as `SyncLoadBalancerFailed`
/// ("Error syncing load balancer: failed to delete load balancer: ..."),
/// not `DeleteLoadBalancerFailed`, and retries until the finalizer can go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delete_with_the_finalizer_is_a_sync_failure_as_in_go() {
    let cluster = TestCluster::start().await.unwrap();
    let _a = cluster
        .add_node(NodeSpec::new("a").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    let cloud = FakeCloud::new();
    let _stop = start(&cluster, &cloud);
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    create_and_wait_for_ingress(&services, "web").await;
    cloud.fail_next("ensure_load_balancer_deleted", CloudErrorKind::Other, 1);
    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("web gone", WAIT, || async {
        services.get_opt("web").await.unwrap().is_none()
    })
    .await;
    assert!(cloud.load_balancers().is_empty());
    let texts = event_texts(&cluster, "web").await;
    assert!(
        texts.iter().any(|t| t.starts_with(
            "SyncLoadBalancerFailed: Error syncing load balancer: failed to delete load balancer: "
        )),
        "{texts:?}"
    );
    assert!(
        !texts
            .iter()
            .any(|t| t.starts_with("DeleteLoadBalancerFailed")),
        "{texts:?}"
    );
}

/// Go's `UpdateLoadBalancer` failure path: the controller first asks whether
/// the load balancer still exists; one deleted in the cloud behind its back
/// is left deleted (no `UpdateLoadBalancerFailed`, no re-create), while a
/// failed update of one that exists is reported and repaired by an ensure
/// (`a_failed_host_update_is_repaired_by_a_full_ensure`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_update_failing_on_a_deleted_load_balancer_does_not_recreate_it() {
    let cluster = TestCluster::start().await.unwrap();
    let hb = Duration::from_secs(3600);
    let _a = cluster
        .add_node(NodeSpec::new("a").with_heartbeat(hb))
        .await
        .unwrap();
    let cloud = FakeCloud::new();
    let _stop = start(&cluster, &cloud);
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    create_and_wait_for_ingress(&services, "web").await;
    let name = cloud.load_balancers().into_keys().next().unwrap();
    cloud.remove_load_balancer(&name).unwrap();
    let _b = cluster
        .add_node(NodeSpec::new("b").with_heartbeat(hb))
        .await
        .unwrap();
    eventually("the host update tried", WAIT, || async {
        cloud.calls_to("update_load_balancer") >= 1 && cloud.calls_to("get_load_balancer") >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(cloud.load_balancers().is_empty(), "not re-created");
    assert_eq!(cloud.calls_to("ensure_load_balancer"), 1);
    let texts = event_texts(&cluster, "web").await;
    assert!(
        !texts
            .iter()
            .any(|t| t.starts_with("UpdateLoadBalancerFailed")),
        "{texts:?}"
    );
}

/// Go's `needsUpdate`: only the fields it compares re-ensure a load
/// balancer. A new selector does not (the load balancer does not see it);
/// a new port does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_fields_go_compares_re_ensure_a_load_balancer() {
    let cluster = TestCluster::start().await.unwrap();
    let _a = cluster
        .add_node(NodeSpec::new("a").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();
    let cloud = FakeCloud::new();
    let _stop = start(&cluster, &cloud);
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    create_and_wait_for_ingress(&services, "web").await;
    assert_eq!(cloud.calls_to("ensure_load_balancer"), 1);
    services
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"selector": {"app": "web"}}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        cloud.calls_to("ensure_load_balancer"),
        1,
        "a selector change"
    );
    services
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"ports": [{"port": 8080}]}})),
        )
        .await
        .unwrap();
    eventually("a port change re-ensures", WAIT, || async {
        cloud.calls_to("ensure_load_balancer") == 2
    })
    .await;
}
