//! The kube-runtime idioms, each written the way the kube-rs docs and
//! examples write it, run unchanged against the harness: `finalizer()`,
//! `Controller` with `owns`, `watches`, `reconcile_all_on`, error requeues and
//! shared streams, `reflector` + `watcher` (re-list after 410 Gone, streaming
//! lists, metadata-only), `await_condition` with the built-in conditions, the
//! events `Recorder` (a series), `Api::entry`, `get_opt`, status writes,
//! server-side apply with field managers and `force`, the `scale`, `eviction`
//! and `ephemeralcontainers` subresources, `DynamicObject` with
//! `Discovery`, a Lease-based leader election, JSON patches as
//! kube-apiserver applies them, and exec, attach and port-forward through
//! the API server to a virtual node (with `STRATUS_TEST_MOCK_NODE`).
//!
//! Each test runs on a fresh harness server by default. With
//! `STRATUS_TEST_KUBECONFIG=FILE` every test runs instead in a namespace of
//! its own on the cluster of that kubeconfig (CI: the real control plane of
//! `cargo xtask cluster up`), so a case that fails on Kubernetes is a wrong
//! case; the steps that need the harness's controls (compaction, dropped
//! watches) say they are skipped there.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{StreamExt, future};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{
    Api, DeleteParams, DynamicObject, EvictParams, ListParams, PartialObjectMeta, Patch,
    PatchParams, PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::discovery::Discovery;
use kube::{Client, CustomResource, CustomResourceExt, Resource, ResourceExt};
use kube_runtime::controller::{Action, Controller};
use kube_runtime::events::{Event as RecordedEvent, EventType, Recorder, Reporter};
use kube_runtime::finalizer::{self, finalizer};
use kube_runtime::reflector::ObjectRef;
use kube_runtime::wait::{await_condition, conditions};
use kube_runtime::{WatchStreamExt, reflector, watcher};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use stratus_apiserver::{ApiServer, Fault, FaultAction, Verb, eventually};

/// How long a step may take to be seen (a real control plane's garbage
/// collector and watch cache take longer than the harness).
const WAIT: Duration = Duration::from_secs(20);

/// How long garbage collection may take (see its use).
const GC_WAIT: Duration = Duration::from_secs(90);

/// A custom resource as an operator declares it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "idioms.stratus.dev",
    version = "v1",
    kind = "Gizmo",
    namespaced,
    status = "GizmoStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct GizmoSpec {
    size: i64,
    /// The reconciler fails its first pass over this object.
    #[serde(default)]
    fail_first: bool,
}

/// What the reconciler writes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
pub struct GizmoStatus {
    observed: i64,
}

/// Where a test runs: its own harness server, or a namespace of its own on
/// the cluster of `STRATUS_TEST_KUBECONFIG`.
struct Target {
    client: Client,
    namespace: String,
    /// The harness, when the test runs on one.
    harness: Option<ApiServer>,
}

impl Target {
    async fn new() -> Self {
        let (client, harness) = match std::env::var_os("STRATUS_TEST_KUBECONFIG") {
            Some(path) => {
                let kubeconfig = Kubeconfig::read_from(&path).expect("STRATUS_TEST_KUBECONFIG");
                let config =
                    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                        .await
                        .expect("a client configuration from STRATUS_TEST_KUBECONFIG");
                (Client::try_from(config).unwrap(), None)
            }
            None => {
                let server = ApiServer::start().await.unwrap();
                (server.client(), Some(server))
            }
        };
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let mut ns = Namespace::default();
        ns.metadata.generate_name = Some("idioms-".into());
        let ns = namespaces
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        Self {
            client,
            namespace: ns.name_any(),
            harness,
        }
    }

    fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The Gizmo definition, created once per server and established.
    async fn gizmos(&self) -> Api<Gizmo> {
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        match crds.create(&PostParams::default(), &Gizmo::crd()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("creating the Gizmo definition: {e}"),
        }
        tokio::time::timeout(
            WAIT,
            await_condition(
                crds,
                "gizmos.idioms.stratus.dev",
                conditions::is_crd_established(),
            ),
        )
        .await
        .expect("the Gizmo definition established")
        .unwrap();
        self.api()
    }

    /// Say that a step needs the harness's controls.
    fn skipped(&self, step: &str) {
        eprintln!("skipped on a real control plane: {step}");
    }

    /// Remove the test's namespace (on a real cluster; a harness goes with
    /// its server).
    async fn finish(self) {
        if self.harness.is_none() {
            let namespaces: Api<Namespace> = Api::all(self.client.clone());
            let _ = namespaces
                .delete(&self.namespace, &DeleteParams::default())
                .await;
        }
    }
}

fn config_map(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    cm.data = Some(BTreeMap::from([("key".to_owned(), "1".to_owned())]));
    cm
}

/// A pod bound to a node no kubelet serves: nothing runs it, on either
/// server, so the test decides its status.
fn unrun_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "nodeName": "idioms-nowhere",
            "containers": [{"name": "main", "image": "registry.example/app:1"}]
        }
    }))
    .unwrap()
}

/// A Deployment of one replica whose pods no node can take (on a real
/// control plane its pods stay Pending).
fn unplaced_deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {"idioms.stratus.dev/none": "none"},
                    "containers": [{"name": "app", "image": "registry.example/app:1"}]
                }
            }
        }
    }))
    .unwrap()
}

fn api_code(err: kube::Error) -> u16 {
    match err {
        kube::Error::Api(s) => s.code,
        other => panic!("expected an API error, got {other}"),
    }
}

// --- finalizer() ---------------------------------------------------------

const FINALIZER: &str = "idioms.stratus.dev/cleanup";

#[derive(Default)]
struct Seen(Mutex<Vec<String>>);

impl Seen {
    fn push(&self, what: String) {
        self.0.lock().unwrap().push(what);
    }
    fn has(&self, what: &str) -> bool {
        self.0.lock().unwrap().iter().any(|s| s == what)
    }
}

async fn reconcile_with_finalizer(
    cm: Arc<ConfigMap>,
    ctx: Arc<(Api<ConfigMap>, Seen)>,
) -> Result<Action, finalizer::Error<kube::Error>> {
    let (api, seen) = &*ctx;
    finalizer(api, FINALIZER, cm, |event| async move {
        match event {
            finalizer::Event::Apply(cm) => seen.push(format!("apply {}", cm.name_any())),
            finalizer::Event::Cleanup(cm) => seen.push(format!("cleanup {}", cm.name_any())),
        }
        Ok::<_, kube::Error>(Action::await_change())
    })
    .await
}

#[tokio::test]
async fn the_finalizer_helper_adds_cleans_up_and_removes_its_finalizer() {
    let target = Target::new().await;
    let cms: Api<ConfigMap> = target.api();
    let ctx = Arc::new((cms.clone(), Seen::default()));
    let controller = tokio::spawn(
        Controller::new(
            cms.clone(),
            watcher::Config::default().labels("idiom=finalizer"),
        )
        .run(
            reconcile_with_finalizer,
            |_, _, _| Action::requeue(Duration::from_millis(200)),
            ctx.clone(),
        )
        .for_each(|_| future::ready(())),
    );
    let created = cms
        .create(
            &PostParams::default(),
            &config_map("held", &[("idiom", "finalizer")]),
        )
        .await
        .unwrap();
    eventually("the finalizer added and the object applied", WAIT, || {
        let (cms, ctx) = (cms.clone(), ctx.clone());
        async move {
            let cm = cms.get("held").await.unwrap();
            cm.finalizers().iter().any(|f| f == FINALIZER) && ctx.1.has("apply held")
        }
    })
    .await;
    cms.delete("held", &DeleteParams::default()).await.unwrap();
    let uid = created.uid().unwrap();
    tokio::time::timeout(
        WAIT,
        await_condition(cms.clone(), "held", conditions::is_deleted(&uid)),
    )
    .await
    .expect("the object gone once its cleanup removed the finalizer")
    .unwrap();
    assert!(ctx.1.has("cleanup held"));
    controller.abort();
    target.finish().await;
}

// --- Controller: owns, watches, reconcile_all_on, error requeues -----------

/// The operator's state: reconciliations per object.
#[derive(Default)]
struct Counts(Mutex<BTreeMap<String, usize>>);

impl Counts {
    fn bump(&self, name: &str) -> usize {
        let mut counts = self.0.lock().unwrap();
        let n = counts.entry(name.to_owned()).or_default();
        *n += 1;
        *n
    }
    fn of(&self, name: &str) -> usize {
        self.0.lock().unwrap().get(name).copied().unwrap_or(0)
    }
}

struct GizmoCtx {
    client: Client,
    counts: Counts,
}

/// Failing a reconciliation on purpose.
#[derive(Debug, thiserror::Error)]
enum ReconcileError {
    #[error("failing the first pass on purpose")]
    OnPurpose,
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

/// The usual operator: server-side apply an owned ConfigMap, then the
/// status.
async fn reconcile_gizmo(g: Arc<Gizmo>, ctx: Arc<GizmoCtx>) -> Result<Action, ReconcileError> {
    let name = g.name_any();
    let ns = g.namespace().unwrap();
    if ctx.counts.bump(&name) == 1 && g.spec.fail_first {
        return Err(ReconcileError::OnPurpose);
    }
    let owner = g.controller_owner_ref(&()).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    let wanted = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": format!("{name}-config"), "ownerReferences": [owner]},
        "data": {"size": g.spec.size.to_string()}
    });
    let apply = PatchParams::apply("gizmo-operator").force();
    cms.patch(&format!("{name}-config"), &apply, &Patch::Apply(&wanted))
        .await?;
    let gizmos: Api<Gizmo> = Api::namespaced(ctx.client.clone(), &ns);
    let status = json!({
        "apiVersion": "idioms.stratus.dev/v1",
        "kind": "Gizmo",
        "status": {"observed": g.spec.size}
    });
    gizmos
        .patch_status(&name, &apply, &Patch::Apply(&status))
        .await?;
    Ok(Action::await_change())
}

async fn observed(gizmos: &Api<Gizmo>, name: &str) -> Option<i64> {
    gizmos.get(name).await.ok()?.status.map(|s| s.observed)
}

#[tokio::test]
async fn a_controller_owns_watches_reconciles_all_on_a_trigger_and_requeues_errors() {
    let target = Target::new().await;
    let gizmos = target.gizmos().await;
    let cms: Api<ConfigMap> = target.api();
    let secrets: Api<Secret> = target.api();
    let ctx = Arc::new(GizmoCtx {
        client: target.client.clone(),
        counts: Counts::default(),
    });
    let (trigger, triggers) = tokio::sync::mpsc::unbounded_channel::<()>();
    let on_trigger = futures_util::stream::unfold(triggers, |mut rx| async move {
        rx.recv().await.map(|t| (t, rx))
    });
    let ns = target.namespace.clone();
    let controller = tokio::spawn(
        Controller::new(gizmos.clone(), watcher::Config::default())
            .owns(cms.clone(), watcher::Config::default())
            .watches(
                secrets.clone(),
                watcher::Config::default(),
                move |s: Secret| {
                    s.labels()
                        .get("gizmo")
                        .map(|g| ObjectRef::<Gizmo>::new(g).within(&ns))
                },
            )
            .reconcile_all_on(on_trigger)
            .run(
                reconcile_gizmo,
                |_, _, _| Action::requeue(Duration::from_millis(100)),
                ctx.clone(),
            )
            .for_each(|_| future::ready(())),
    );
    let post = PostParams::default();
    let a = gizmos
        .create(
            &post,
            &Gizmo::new(
                "a",
                GizmoSpec {
                    size: 1,
                    fail_first: false,
                },
            ),
        )
        .await
        .unwrap();
    gizmos
        .create(
            &post,
            &Gizmo::new(
                "b",
                GizmoSpec {
                    size: 2,
                    fail_first: true,
                },
            ),
        )
        .await
        .unwrap();

    // Both reconciled: b after its failed first pass was requeued.
    eventually("both gizmos observed", WAIT, || {
        let gizmos = gizmos.clone();
        async move { observed(&gizmos, "a").await == Some(1) && observed(&gizmos, "b").await == Some(2) }
    })
    .await;
    assert!(
        ctx.counts.of("b") >= 2,
        "b was reconciled again after its error"
    );
    let config = cms.get("a-config").await.unwrap();
    let owner = &config.owner_references()[0];
    assert_eq!(
        (owner.name.as_str(), owner.uid.as_str()),
        ("a", a.uid().unwrap().as_str())
    );
    assert_eq!(owner.controller, Some(true));

    // owns: the owned ConfigMap deleted is put back.
    cms.delete("a-config", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the owned ConfigMap put back", WAIT, || {
        let cms = cms.clone();
        async move { cms.get_opt("a-config").await.unwrap().is_some() }
    })
    .await;

    // watches: a Secret labelled for b reconciles b.
    let before = ctx.counts.of("b");
    let mut secret = Secret::default();
    secret.metadata.name = Some("for-b".into());
    secret.metadata.labels = Some(BTreeMap::from([("gizmo".to_owned(), "b".to_owned())]));
    secrets.create(&post, &secret).await.unwrap();
    eventually("the watched Secret reconciles its gizmo", WAIT, || {
        let n = ctx.counts.of("b");
        async move { n > before }
    })
    .await;

    // reconcile_all_on: one trigger reconciles every gizmo.
    let (a_before, b_before) = (ctx.counts.of("a"), ctx.counts.of("b"));
    trigger.send(()).unwrap();
    eventually("every gizmo reconciled on the trigger", WAIT, || {
        let done = ctx.counts.of("a") > a_before && ctx.counts.of("b") > b_before;
        async move { done }
    })
    .await;

    // A change of spec is reconciled; the owner's deletion takes its
    // ConfigMap with it (garbage collection by owner reference).
    gizmos
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 5}})),
        )
        .await
        .unwrap();
    eventually("the change observed", WAIT, || {
        let gizmos = gizmos.clone();
        async move { observed(&gizmos, "a").await == Some(5) }
    })
    .await;
    assert_eq!(
        cms.get("a-config").await.unwrap().data.unwrap()["size"],
        "5"
    );
    gizmos.delete("a", &DeleteParams::default()).await.unwrap();
    // kube-controller-manager's garbage collector watches a new kind only
    // after its next discovery pass (every 30 s), so on a real control
    // plane this can take that long for a definition made just now.
    eventually("the owned ConfigMap collected", GC_WAIT, || {
        let cms = cms.clone();
        async move { cms.get_opt("a-config").await.unwrap().is_none() }
    })
    .await;
    controller.abort();
    target.finish().await;
}

#[tokio::test]
async fn shared_streams_feed_two_controllers_from_one_watch() {
    let target = Target::new().await;
    let cms: Api<ConfigMap> = target.api();
    let (reader, writer) = reflector::store_shared(64);
    let first = writer.subscribe().unwrap();
    let second = writer.subscribe().unwrap();
    let root = tokio::spawn(
        watcher(
            cms.clone(),
            watcher::Config::default().labels("idiom=shared"),
        )
        .default_backoff()
        .reflect_shared(writer)
        .for_each(|_| future::ready(())),
    );
    let seen: [Arc<Seen>; 2] = Default::default();
    let mut controllers = Vec::new();
    for (i, stream) in [first, second].into_iter().enumerate() {
        let seen = seen[i].clone();
        controllers.push(tokio::spawn(
            Controller::for_shared_stream(stream, reader.clone())
                .run(
                    |cm: Arc<ConfigMap>, seen: Arc<Seen>| async move {
                        seen.push(cm.name_any());
                        Ok::<_, kube::Error>(Action::await_change())
                    },
                    |_, _, _| Action::await_change(),
                    seen,
                )
                .for_each(|_| future::ready(())),
        ));
    }
    for name in ["s1", "s2"] {
        cms.create(
            &PostParams::default(),
            &config_map(name, &[("idiom", "shared")]),
        )
        .await
        .unwrap();
    }
    eventually("both controllers reconciled both objects", WAIT, || {
        let done = seen.iter().all(|s| s.has("s1") && s.has("s2"));
        async move { done }
    })
    .await;
    if let Some(server) = &target.harness {
        let watches = server.answered(Some(Verb::Watch), "configmaps", 200);
        assert_eq!(watches, 1, "one watch serves both controllers");
    } else {
        target.skipped("counting the watches (the request log)");
    }
    root.abort();
    controllers.iter().for_each(|c| c.abort());
    target.finish().await;
}

// --- reflector + watcher --------------------------------------------------

#[tokio::test]
async fn a_reflector_relists_after_410_gone_and_a_metadata_watcher_carries_no_data() {
    let target = Target::new().await;
    let cms: Api<ConfigMap> = target.api();
    let post = PostParams::default();
    cms.create(&post, &config_map("r1", &[("idiom", "reflector")]))
        .await
        .unwrap();
    let lists = Arc::new(AtomicUsize::new(0));
    let (reader, writer) = reflector::store();
    let counted = lists.clone();
    let reflecting = tokio::spawn(
        reflector(
            writer,
            watcher(
                cms.clone(),
                watcher::Config::default().labels("idiom=reflector"),
            )
            .map(move |event| {
                if let Ok(watcher::Event::InitDone) = &event {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
                event
            }),
        )
        .default_backoff()
        .for_each(|_| future::ready(())),
    );
    let (meta_reader, meta_writer) = reflector::store::<PartialObjectMeta<ConfigMap>>();
    let metas = tokio::spawn(
        reflector(
            meta_writer,
            // kube 5: an `Api<PartialObjectMeta<K>>` watches metadata only.
            watcher(
                target.api::<PartialObjectMeta<ConfigMap>>(),
                watcher::Config::default().labels("idiom=reflector"),
            ),
        )
        .default_backoff()
        .for_each(|_| future::ready(())),
    );
    tokio::time::timeout(WAIT, reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    let names = |r: &reflector::Store<ConfigMap>| {
        let mut n: Vec<String> = r.state().iter().map(|o| o.name_any()).collect();
        n.sort();
        n
    };
    assert_eq!(names(&reader), ["r1"]);

    match &target.harness {
        Some(server) => {
            // The watch ended and kept away while the objects change and
            // the history is forgotten: resuming from the last
            // resourceVersion gets 410 Gone, and the watcher lists again.
            server.inject(Fault::new(
                Some(Verb::Watch),
                Some("configmaps"),
                FaultAction::Error(500),
            ));
            server.drop_watches();
            cms.create(&post, &config_map("r2", &[("idiom", "reflector")]))
                .await
                .unwrap();
            cms.delete("r1", &DeleteParams::default()).await.unwrap();
            server.compact();
            server.clear_faults();
            eventually("the store re-listed", WAIT, || {
                let (now, lists) = (names(&reader), lists.load(Ordering::SeqCst));
                let pending = (now != ["r2"] || lists < 2)
                    .then(|| format!("store {now:?} after {lists} lists"));
                async move { pending }
            })
            .await;
        }
        None => {
            target.skipped("compaction and dropped watches (410 Gone)");
            cms.create(&post, &config_map("r2", &[("idiom", "reflector")]))
                .await
                .unwrap();
            cms.delete("r1", &DeleteParams::default()).await.unwrap();
            eventually("the store follows the watch", WAIT, || {
                let done = names(&reader) == ["r2"];
                async move { done }
            })
            .await;
        }
    }

    // The metadata-only store: names and labels, no data.
    eventually("the metadata store follows", WAIT, || {
        let state = meta_reader.state();
        let done = state.len() == 1 && state[0].name_any() == "r2";
        async move { done }
    })
    .await;
    let meta = meta_reader.state()[0].clone();
    assert_eq!(meta.labels()["idiom"], "reflector");
    let raw = serde_json::to_value(&*meta).unwrap();
    assert!(raw.get("data").is_none(), "{raw}");
    reflecting.abort();
    metas.abort();
    target.finish().await;
}

#[tokio::test]
async fn a_streaming_list_fills_the_store_then_follows() {
    let target = Target::new().await;
    let cms: Api<ConfigMap> = target.api();
    let post = PostParams::default();
    for name in ["l1", "l2", "l3"] {
        cms.create(&post, &config_map(name, &[("idiom", "streaming")]))
            .await
            .unwrap();
    }
    let (reader, writer) = reflector::store();
    let reflecting = tokio::spawn(
        reflector(
            writer,
            watcher(
                cms.clone(),
                watcher::Config::default()
                    .labels("idiom=streaming")
                    .streaming_lists(),
            ),
        )
        .default_backoff()
        .for_each(|_| future::ready(())),
    );
    tokio::time::timeout(WAIT, reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reader.state().len(), 3);
    cms.create(&post, &config_map("l4", &[("idiom", "streaming")]))
        .await
        .unwrap();
    eventually("the new object streamed", WAIT, || {
        let done = reader
            .get(&ObjectRef::new("l4").within(&target.namespace))
            .is_some();
        async move { done }
    })
    .await;
    if let Some(server) = &target.harness {
        let listed = server.answered(Some(Verb::List), "configmaps", 200);
        assert_eq!(listed, 0, "a streaming list is a watch, not a list");
    }
    reflecting.abort();
    target.finish().await;
}

// --- await_condition ------------------------------------------------------

#[tokio::test]
async fn await_condition_with_the_built_in_conditions() {
    let target = Target::new().await;
    let pods: Api<Pod> = target.api();
    let created = pods
        .create(&PostParams::default(), &unrun_pod("waiter"))
        .await
        .unwrap();
    tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), "waiter", conditions::is_created()),
    )
    .await
    .unwrap()
    .unwrap();
    let running = tokio::spawn(await_condition(
        pods.clone(),
        "waiter",
        conditions::is_pod_running(),
    ));
    pods.patch_status(
        "waiter",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    let pod = tokio::time::timeout(WAIT, running)
        .await
        .expect("the pod seen Running")
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(pod.status.unwrap().phase.as_deref(), Some("Running"));
    let uid = created.uid().unwrap();
    pods.delete("waiter", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), "waiter", conditions::is_deleted(&uid)),
    )
    .await
    .expect("the pod seen deleted")
    .unwrap();
    target.finish().await;
}

// --- the events Recorder --------------------------------------------------

#[tokio::test]
async fn the_recorder_publishes_events_and_aggregates_a_series() {
    let target = Target::new().await;
    let cms: Api<ConfigMap> = target.api();
    let cm = cms
        .create(&PostParams::default(), &config_map("noted", &[]))
        .await
        .unwrap();
    let recorder = Recorder::new(
        target.client.clone(),
        Reporter {
            controller: "idioms-operator".into(),
            instance: Some("idioms-operator-0".into()),
        },
    );
    let event = RecordedEvent {
        type_: EventType::Warning,
        reason: "Invalid".into(),
        note: Some("the size is out of range".into()),
        action: "Reconciling".into(),
        secondary: None,
    };
    let reference = cm.object_ref(&());
    recorder.publish(&event, &reference).await.unwrap();
    recorder.publish(&event, &reference).await.unwrap();
    let events: Api<K8sEvent> = target.api();
    let listed = events.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let e = &listed[0];
    assert_eq!(e.series.as_ref().map(|s| s.count), Some(2));
    assert_eq!(e.reason.as_deref(), Some("Invalid"));
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(e.reporting_controller.as_deref(), Some("idioms-operator"));
    assert_eq!(e.regarding.as_ref().and_then(|r| r.uid.clone()), cm.uid());
    target.finish().await;
}

// --- Api: entry, get_opt, status, server-side apply -----------------------

#[tokio::test]
async fn entry_get_opt_status_writes_and_apply_ownership() {
    let target = Target::new().await;
    let cms: Api<ConfigMap> = target.api();
    assert!(cms.get_opt("absent").await.unwrap().is_none());

    // entry: insert, then modify.
    let post = PostParams::default();
    cms.entry("settings")
        .await
        .unwrap()
        .or_insert(|| config_map("settings", &[]))
        .commit(&post)
        .await
        .unwrap();
    cms.entry("settings")
        .await
        .unwrap()
        .and_modify(|cm| {
            cm.data
                .get_or_insert_default()
                .insert("key".into(), "2".into());
        })
        .or_insert(|| config_map("settings", &[]))
        .commit(&post)
        .await
        .unwrap();
    assert_eq!(cms.get("settings").await.unwrap().data.unwrap()["key"], "2");

    // Status writes leave the spec alone; spec writes leave the status.
    let gizmos = target.gizmos().await;
    let mut g = gizmos
        .create(
            &post,
            &Gizmo::new(
                "st",
                GizmoSpec {
                    size: 3,
                    fail_first: false,
                },
            ),
        )
        .await
        .unwrap();
    g.status = Some(GizmoStatus { observed: 3 });
    g.spec.size = 100;
    let replaced = gizmos.replace_status("st", &post, &g).await.unwrap();
    assert_eq!(
        (replaced.spec.size, replaced.status.unwrap().observed),
        (3, 3)
    );
    gizmos
        .patch_status(
            "st",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"observed": 4}})),
        )
        .await
        .unwrap();
    let replaced = gizmos
        .replace("st", &post, &{
            let mut g = gizmos.get("st").await.unwrap();
            g.spec.size = 7;
            g.status = None;
            g
        })
        .await
        .unwrap();
    assert_eq!(
        (replaced.spec.size, replaced.status.unwrap().observed),
        (7, 4)
    );

    // Server-side apply: a second manager conflicts, then takes the field
    // with force.
    let applied = |value: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned"}, "data": {"key": value}});
    cms.patch(
        "owned",
        &PatchParams::apply("alpha"),
        &Patch::Apply(applied("a")),
    )
    .await
    .unwrap();
    let err = cms
        .patch(
            "owned",
            &PatchParams::apply("beta"),
            &Patch::Apply(applied("b")),
        )
        .await
        .unwrap_err();
    assert_eq!(api_code(err), 409);
    let taken = cms
        .patch(
            "owned",
            &PatchParams::apply("beta").force(),
            &Patch::Apply(applied("b")),
        )
        .await
        .unwrap();
    assert_eq!(taken.data.as_ref().unwrap()["key"], "b");
    let owners: Vec<String> = taken
        .managed_fields()
        .iter()
        .filter(|m| {
            m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0.to_string().contains("f:key"))
        })
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(owners, ["beta"]);
    target.finish().await;
}

// --- subresources -----------------------------------------------------------

#[tokio::test]
async fn scale_eviction_and_ephemeral_containers() {
    let target = Target::new().await;
    let deployments: Api<Deployment> = target.api();
    deployments
        .create(&PostParams::default(), &unplaced_deployment("web"))
        .await
        .unwrap();
    let scale = deployments.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    deployments
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(deployments.get("web").await.unwrap().spec.replicas, Some(3));

    // An ephemeral container added through its subresource, defaulted; an
    // existing one may not be removed.
    let pods: Api<Pod> = target.api();
    pods.create(&PostParams::default(), &unrun_pod("debugged"))
        .await
        .unwrap();
    let debug = json!({"spec": {"ephemeralContainers": [{
        "name": "debugger", "image": "registry.example/busybox:1", "targetContainerName": "main"
    }]}});
    let pod = pods
        .patch_ephemeral_containers(
            "debugged",
            &PatchParams::default(),
            &Patch::Strategic(debug),
        )
        .await
        .unwrap();
    let ephemeral = &pod
        .spec
        .as_ref()
        .unwrap()
        .ephemeral_containers
        .as_ref()
        .unwrap()[0];
    assert_eq!(ephemeral.name, "debugger");
    assert_eq!(
        ephemeral.termination_message_path.as_deref(),
        Some("/dev/termination-log")
    );
    let listed = pods.get_ephemeral_containers("debugged").await.unwrap();
    assert_eq!(listed.spec.unwrap().ephemeral_containers.unwrap().len(), 1);
    let err = pods
        .patch_ephemeral_containers(
            "debugged",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"ephemeralContainers": []}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_code(err), 422);
    // Neither can the pod's creation...
    let mut born_debugged = unrun_pod("born-debugged");
    born_debugged.spec.as_mut().unwrap().ephemeral_containers =
        pod.spec.as_ref().unwrap().ephemeral_containers.clone();
    let err = pods
        .create(&PostParams::default(), &born_debugged)
        .await
        .unwrap_err();
    assert_eq!(api_code(err), 422);
    // ...nor the pod's own update.
    let err = pods
        .patch(
            "debugged",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"ephemeralContainers": [{"name": "x", "image": "y"}]}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_code(err), 422);

    // Eviction (no disruption budget): a graceful deletion. kube 5's
    // `EvictParams` sends its delete options as `delete_options`, a field
    // neither server reads (a warning), so the pod's own grace period
    // applies and, with no kubelet to confirm, it stays terminating.
    pods.evict("debugged", &EvictParams::default())
        .await
        .unwrap();
    let evicted = pods.get("debugged").await.unwrap();
    assert!(evicted.metadata.deletion_timestamp.is_some());
    assert_eq!(evicted.metadata.deletion_grace_period_seconds, Some(30));
    target.finish().await;
}

// --- DynamicObject + Discovery --------------------------------------------

#[tokio::test]
async fn dynamic_objects_through_discovery() {
    let target = Target::new().await;
    let typed = target.gizmos().await;
    let discovery = Discovery::new(target.client.clone())
        .filter(&["idioms.stratus.dev"])
        .run_aggregated()
        .await
        .unwrap();
    let gvk = GroupVersionKind::gvk("idioms.stratus.dev", "v1", "Gizmo");
    let (resource, capabilities) = discovery.resolve_gvk(&gvk).expect("Gizmo discovered");
    assert_eq!(resource.plural, "gizmos");
    assert!(capabilities.supports_operation(kube::discovery::verbs::WATCH));
    let dynamic: Api<DynamicObject> =
        Api::namespaced_with(target.client.clone(), &target.namespace, &resource);
    let object = DynamicObject::new("dyn", &resource).data(json!({"spec": {"size": 9}}));
    dynamic
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let listed = dynamic.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].data["spec"]["size"], 9);
    assert_eq!(typed.get("dyn").await.unwrap().spec.size, 9);
    target.finish().await;
}

// --- JSON patch as kube-apiserver applies it --------------------------------

/// What a JSON patch should come to.
enum Outcome {
    /// Applied (200): each pointer of the patched object holds its value.
    Applied(&'static [(&'static str, &'static str)]),
    /// Refused with this code, the object left as it was.
    Refused(u16),
}

/// Send `patch` as an `application/json-patch+json` body (raw, so that
/// malformed documents reach the server) and answer the status code and the
/// object or `Status` returned.
async fn send_json_patch(target: &Target, uri: &str, patch: &str) -> (u16, serde_json::Value) {
    use http_body_util::BodyExt as _;
    let request = http::Request::patch(uri)
        .header("Content-Type", "application/json-patch+json")
        .body(kube::client::Body::from(patch.as_bytes().to_vec()))
        .unwrap();
    let response = target.client.send(request).await.unwrap();
    let code = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&body).unwrap_or_default())
}

#[tokio::test]
async fn json_patches_are_applied_as_kube_apiserver_applies_them() {
    use Outcome::{Applied, Refused};
    // Each case on a fresh ConfigMap: data {a: "1", b: "2"}, labels
    // {x: "y"}, finalizers [a/one, a/two], no annotations.
    let cases: &[(&str, &str, Outcome)] = &[
        (
            "add to a member whose parent is missing",
            r#"[{"op":"add","path":"/metadata/annotations/k","value":"v"}]"#,
            Refused(422),
        ),
        (
            "add at the end with -",
            r#"[{"op":"add","path":"/metadata/finalizers/-","value":"a/three"}]"#,
            Applied(&[("/metadata/finalizers", r#"["a/one","a/two","a/three"]"#)]),
        ),
        (
            "add at an index",
            r#"[{"op":"add","path":"/metadata/finalizers/0","value":"a/zero"}]"#,
            Applied(&[("/metadata/finalizers", r#"["a/zero","a/one","a/two"]"#)]),
        ),
        (
            "add at the length",
            r#"[{"op":"add","path":"/metadata/finalizers/2","value":"a/three"}]"#,
            Applied(&[("/metadata/finalizers", r#"["a/one","a/two","a/three"]"#)]),
        ),
        (
            "add beyond the length",
            r#"[{"op":"add","path":"/metadata/finalizers/3","value":"a/four"}]"#,
            Refused(422),
        ),
        (
            "add over an existing member",
            r#"[{"op":"add","path":"/data/a","value":"5"}]"#,
            Applied(&[("/data", r#"{"a":"5","b":"2"}"#)]),
        ),
        (
            "escaped names (~1 is /)",
            r#"[{"op":"add","path":"/metadata/labels/example.com~1role","value":"web"}]"#,
            Applied(&[("/metadata/labels", r#"{"example.com/role":"web","x":"y"}"#)]),
        ),
        (
            "remove a missing member",
            r#"[{"op":"remove","path":"/data/zzz"}]"#,
            Refused(422),
        ),
        (
            "remove an item",
            r#"[{"op":"remove","path":"/metadata/finalizers/0"}]"#,
            Applied(&[("/metadata/finalizers", r#"["a/two"]"#)]),
        ),
        (
            "replace a missing member (evanphx/json-patch adds it)",
            r#"[{"op":"replace","path":"/data/zzz","value":"1"}]"#,
            Applied(&[("/data", r#"{"a":"1","b":"2","zzz":"1"}"#)]),
        ),
        (
            "replace a member whose parent is missing",
            r#"[{"op":"replace","path":"/metadata/annotations/k","value":"v"}]"#,
            Refused(422),
        ),
        (
            "replace an item beyond the list",
            r#"[{"op":"replace","path":"/metadata/finalizers/2","value":"a/three"}]"#,
            Refused(422),
        ),
        (
            "an index with a leading zero (read as Go's Atoi reads it)",
            r#"[{"op":"add","path":"/metadata/finalizers/01","value":"a/three"}]"#,
            Applied(&[("/metadata/finalizers", r#"["a/one","a/three","a/two"]"#)]),
        ),
        (
            "move a value into its own child",
            r#"[{"op":"move","from":"/data","path":"/data/inner"}]"#,
            Refused(422),
        ),
        (
            "move a value onto itself",
            r#"[{"op":"move","from":"/data/a","path":"/data/a"}]"#,
            Applied(&[("/data", r#"{"a":"1","b":"2"}"#)]),
        ),
        (
            "move a member",
            r#"[{"op":"move","from":"/data/a","path":"/data/c"}]"#,
            Applied(&[("/data", r#"{"b":"2","c":"1"}"#)]),
        ),
        (
            "copy a map",
            r#"[{"op":"copy","from":"/metadata/labels","path":"/metadata/annotations"}]"#,
            Applied(&[("/metadata/annotations", r#"{"x":"y"}"#)]),
        ),
        (
            "copy from a missing member (evanphx/json-patch copies null)",
            r#"[{"op":"copy","from":"/data/zzz","path":"/data/c"}]"#,
            Applied(&[("/data", r#"{"a":"1","b":"2","c":""}"#)]),
        ),
        (
            "move from a missing member",
            r#"[{"op":"move","from":"/data/zzz","path":"/data/c"}]"#,
            Refused(422),
        ),
        (
            "test a map whatever the order of its members",
            r#"[{"op":"test","path":"/data","value":{"b":"2","a":"1"}},{"op":"replace","path":"/data/a","value":"9"}]"#,
            Applied(&[("/data", r#"{"a":"9","b":"2"}"#)]),
        ),
        (
            "test a missing member against null",
            r#"[{"op":"test","path":"/metadata/annotations","value":null},{"op":"add","path":"/metadata/annotations","value":{"k":"v"}}]"#,
            Applied(&[("/metadata/annotations", r#"{"k":"v"}"#)]),
        ),
        (
            "test an existing member against null",
            r#"[{"op":"test","path":"/data","value":null}]"#,
            Refused(422),
        ),
        (
            "a failed test undoes the operations before it",
            r#"[{"op":"replace","path":"/data/a","value":"9"},{"op":"test","path":"/data/b","value":"x"}]"#,
            Refused(422),
        ),
        (
            "an empty patch",
            "[]",
            Applied(&[("/data", r#"{"a":"1","b":"2"}"#)]),
        ),
        (
            "an unknown operation",
            r#"[{"op":"frob","path":"/data/a"}]"#,
            Refused(422),
        ),
        (
            "an operation without a path",
            r#"[{"op":"remove"}]"#,
            Refused(422),
        ),
        (
            "an operation without its value (null, a string's zero value)",
            r#"[{"op":"add","path":"/data/c"}]"#,
            Applied(&[("/data", r#"{"a":"1","b":"2","c":""}"#)]),
        ),
        (
            "a patch that is not a list",
            r#"{"op":"add"}"#,
            Refused(400),
        ),
        ("a patch that is not JSON", "[{", Refused(400)),
    ];
    let target = Target::new().await;
    let cms: Api<ConfigMap> = target.api();
    let mut disagreements = Vec::new();
    for (i, (case, patch, outcome)) in cases.iter().enumerate() {
        let name = format!("patched-{i}");
        let mut cm = config_map(&name, &[("x", "y")]);
        cm.data = Some(BTreeMap::from([
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), "2".to_owned()),
        ]));
        cm.metadata.finalizers = Some(vec!["a/one".into(), "a/two".into()]);
        let created = cms.create(&PostParams::default(), &cm).await.unwrap();
        let uri = format!("/api/v1/namespaces/{}/configmaps/{name}", target.namespace);
        let (code, body) = send_json_patch(&target, &uri, patch).await;
        let now = serde_json::to_value(cms.get(&name).await.unwrap()).unwrap();
        let problem = match outcome {
            Applied(expected) => {
                let wrong: Vec<String> = expected
                    .iter()
                    .filter(|(pointer, value)| {
                        now.pointer(pointer)
                            != Some(&serde_json::from_str::<serde_json::Value>(value).unwrap())
                    })
                    .map(|(pointer, _)| format!("{pointer} is {:?}", now.pointer(pointer)))
                    .collect();
                (code != 200 || !wrong.is_empty())
                    .then(|| format!("answered {code} {body}; {}", wrong.join(", ")))
            }
            Refused(expected) => {
                let unchanged =
                    now["metadata"]["resourceVersion"] == json!(created.resource_version());
                (code != *expected || !unchanged)
                    .then(|| format!("answered {code} {body} (unchanged: {unchanged})"))
            }
        };
        if let Some(problem) = problem {
            disagreements.push(format!("{case}: {problem}"));
        }
        // Let the namespace go on a real cluster.
        cms.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    }

    // Numbers compare as written: evanphx/json-patch compares a test's
    // value with the member's JSON text, so 1 is not 1.0 (nor "1").
    let deployments: Api<Deployment> = target.api();
    deployments
        .create(&PostParams::default(), &unplaced_deployment("numbers"))
        .await
        .unwrap();
    let uri = format!(
        "/apis/apps/v1/namespaces/{}/deployments/numbers",
        target.namespace
    );
    for (value, expected) in [("1", 200), ("1.0", 422), (r#""1""#, 422)] {
        let patch = format!(r#"[{{"op":"test","path":"/spec/replicas","value":{value}}}]"#);
        let (code, _) = send_json_patch(&target, &uri, &patch).await;
        if code != expected {
            disagreements.push(format!(
                "test /spec/replicas against {value}: answered {code}"
            ));
        }
    }
    assert!(disagreements.is_empty(), "{disagreements:#?}");
    target.finish().await;
}

// --- leader election on a Lease ---------------------------------------------

const LEASE: &str = "idioms-leader";

/// One round of the Lease-based election operators write (as the
/// kube-leader-election crate does it): take the Lease when it is free or
/// expired, renew it while held, each write guarded by the Lease's
/// resourceVersion so that two contenders never both win. Answers whether
/// `me` leads after the round.
async fn lead_once(leases: &Api<Lease>, me: &str, seconds: i32) -> Result<bool, kube::Error> {
    let now = Timestamp::now();
    let mine = |transitions: i32, acquired: Option<MicroTime>| LeaseSpec {
        holder_identity: Some(me.into()),
        lease_duration_seconds: Some(seconds),
        acquire_time: acquired.or(Some(MicroTime(now))),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    };
    let lost = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 409);
    let Some(mut lease) = leases.get_opt(LEASE).await? else {
        let mut lease = Lease::default();
        lease.metadata.name = Some(LEASE.into());
        lease.spec = Some(mine(0, None));
        return match leases.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(e) if lost(&e) => Ok(false),
            Err(e) => Err(e),
        };
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let held = spec.holder_identity.as_deref() == Some(me);
    let expires = spec.renew_time.and_then(|t| {
        let duration = SignedDuration::from_secs(spec.lease_duration_seconds.unwrap_or(0).into());
        t.0.checked_add(duration).ok()
    });
    if !held && expires.is_some_and(|t| t > now) {
        return Ok(false);
    }
    let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!held);
    lease.spec = Some(mine(transitions, spec.acquire_time.filter(|_| held)));
    // `replace` sends the resourceVersion read above: a write made since
    // wins, and this one is answered 409.
    match leases.replace(LEASE, &PostParams::default(), &lease).await {
        Ok(_) => Ok(true),
        Err(e) if lost(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

#[tokio::test]
async fn leader_election_on_a_lease_as_operators_write_it() {
    let target = Target::new().await;
    let leases: Api<Lease> = target.api();
    // Two contenders at once: exactly one leads.
    let (a, b) = tokio::join!(lead_once(&leases, "a", 2), lead_once(&leases, "b", 2));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(a != b, "exactly one leads: a {a}, b {b}");
    let (leader, other) = if a { ("a", "b") } else { ("b", "a") };
    // The leader renews; the other cannot take a Lease that is held.
    assert!(lead_once(&leases, leader, 2).await.unwrap());
    assert!(!lead_once(&leases, other, 2).await.unwrap());
    // Two writes from the same read: the first wins, the second is refused.
    let read = leases.get(LEASE).await.unwrap();
    let mut first = read.clone();
    first.spec.as_mut().unwrap().renew_time = Some(MicroTime(Timestamp::now()));
    leases
        .replace(LEASE, &PostParams::default(), &first)
        .await
        .unwrap();
    let mut second = read;
    second.spec.as_mut().unwrap().holder_identity = Some(other.into());
    let err = leases
        .replace(LEASE, &PostParams::default(), &second)
        .await
        .unwrap_err();
    assert_eq!(api_code(err), 409);
    // The leader stops renewing: once the Lease expires, the other takes it.
    eventually(
        "the other contender leads once the Lease expires",
        WAIT,
        || {
            let leases = leases.clone();
            async move { lead_once(&leases, other, 2).await.unwrap() }
        },
    )
    .await;
    let spec = leases.get(LEASE).await.unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(other));
    assert_eq!(spec.lease_transitions, Some(1));
    target.finish().await;
}

// --- exec, attach and port-forward through the API server -------------------

/// Read a stream to its end, within the suite's wait.
async fn read_to_end(reader: impl tokio::io::AsyncRead + Unpin) -> String {
    use tokio::io::AsyncReadExt as _;
    let mut out = String::new();
    let mut reader = reader;
    tokio::time::timeout(WAIT, reader.read_to_string(&mut out))
        .await
        .expect("the output in time")
        .unwrap();
    out
}

#[tokio::test]
async fn exec_attach_and_port_forward_through_the_api_server() {
    use kube::api::AttachParams;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    // A node whose kubelet API the API server proxies to: a Stratus virtual
    // node with the MockPodProvider (exec runs its built-in commands, attach
    // and port-forward echo). CI serves one beside the real control plane
    // (`cargo xtask cluster virtual-node`); on the harness, stratus-kubelet's
    // `kubelet_api` tests drive the same calls through the server.
    let Ok(node) = std::env::var("STRATUS_TEST_MOCK_NODE") else {
        eprintln!("skipped: no STRATUS_TEST_MOCK_NODE (a MockPodProvider virtual node)");
        return;
    };
    let target = Target::new().await;
    let pods: Api<Pod> = target.api();
    let mut pod = unrun_pod("streams");
    pod.spec.as_mut().unwrap().node_name = Some(node);
    pods.create(&PostParams::default(), &pod).await.unwrap();
    tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), "streams", conditions::is_pod_running()),
    )
    .await
    .expect("the pod Running on the virtual node")
    .unwrap();

    let mut echo = pods
        .exec(
            "streams",
            ["echo", "through", "the", "proxy"],
            &AttachParams::default().stderr(false),
        )
        .await
        .unwrap();
    let status = echo.take_status().unwrap();
    assert_eq!(
        read_to_end(echo.stdout().unwrap()).await,
        "through the proxy\n"
    );
    assert_eq!(status.await.unwrap().status.as_deref(), Some("Success"));

    let mut attached = pods
        .attach(
            "streams",
            &AttachParams::default().stdin(true).stderr(false),
        )
        .await
        .unwrap();
    let mut stdin = attached.stdin().unwrap();
    let stdout = attached.stdout().unwrap();
    stdin.write_all(b"ping\n").await.unwrap();
    stdin.shutdown().await.unwrap();
    assert_eq!(read_to_end(stdout).await, "ping\n");

    let mut forwarder = pods.portforward("streams", &[8080]).await.unwrap();
    let mut stream = forwarder.take_stream(8080).unwrap();
    stream.write_all(b"hello port 8080").await.unwrap();
    let mut buf = [0u8; 15];
    tokio::time::timeout(WAIT, stream.read_exact(&mut buf))
        .await
        .expect("the echo in time")
        .unwrap();
    assert_eq!(&buf, b"hello port 8080");
    forwarder.abort();
    pods.delete("streams", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    target.finish().await;
}
