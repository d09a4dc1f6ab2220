//! The pod-provider conformance suite: runs a vendor's
//! [`PodLifecycleHandler`] as a virtual node on the in-memory API server
//! through Go virtual-kubelet's end-to-end cases: the node becomes Ready; a
//! pod runs (IP, Running); through the API server's node proxy, `/pods`
//! lists it, `/runningpods/` has it, its container's log comes through the
//! API server with `tailLines` honoured (skipped, as "not supported
//! (declared)", for a provider whose `container_logs()` is `None`; a
//! declared capability answering `NotImplemented` fails), `kubectl attach`'s
//! request is accepted, `echo` runs in it through `kubectl exec`'s and
//! `kubectl port-forward`'s request for its port 80 is taken (all three
//! skipped and failed the same way),
//! `/stats/summary` has the node, the pod
//! and each of its containers and `/metrics/resource` has the pod and one
//! series per container (the last two are skipped for a provider without
//! stats or metrics); labels reach the provider; graceful and forced
//! deletion remove the pod from the provider, and after `delete_pod` the
//! provider reports the pod ended, so a graceful delete with a 60 s grace
//! completes within 10 s; a pod force-deleted and
//! re-created at once runs as the new pod, and a late repeated delete of
//! the old one leaves it running; optional missing Secrets /
//! ConfigMaps let a pod run with an `Optional*NotFound` event, mandatory
//! ones keep it out of the provider with a `Mandatory*NotFound` event;
//! unknown pods are `None` / `NotFound`, not errors.
//! [`crate::MockPodProvider`] passes it in CI.
//!
//! ```no_run
//! use std::sync::Arc;
//! use stratus_testing::MockPodProvider;
//! use stratus_testing::pod_conformance::run_pod_conformance;
//!
//! # async fn run() {
//! let report = run_pod_conformance(|| Arc::new(MockPodProvider::new()) as _).await;
//! report.assert_passed();
//! # }
//! ```

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, LogParams, Patch, PatchParams, PostParams};
use stratus_kubelet::node::NodeConfig;
use stratus_pod::PodLifecycleHandler;
use tokio::sync::watch;

use crate::ApiServer;
use crate::conformance::{Outcome, Report};
use stratus_apiserver::Check;

mod watched;
use watched::Watched;

const NODE: &str = "vk-conformance";
const NAMESPACE: &str = "default";
/// How long each case waits for the cluster to converge by default.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

fn pod(name: &str, extra_env: serde_json::Value) -> Result<Pod, String> {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name}},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": "nginx", "env": extra_env}],
        },
    }))
    .map_err(|e| e.to_string())
}

/// How long a case waits before giving up early when a lifecycle method
/// answered `NotImplemented` (a generated provider answers it everywhere).
const NOT_IMPLEMENTED_GRACE: Duration = Duration::from_secs(3);

/// Poll `check` until it is `Ok(true)` or `wait` passes, or, once
/// [`NOT_IMPLEMENTED_GRACE`] has passed, a lifecycle method has answered
/// `NotImplemented`.
async fn until<F, Fut>(
    wait: Duration,
    watched: &Watched,
    what: &str,
    mut check: F,
) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, String>>,
{
    let started = std::time::Instant::now();
    stratus_apiserver::poll(what, wait)
        .every(Duration::from_millis(100))
        .until(|| {
            let look = check();
            async move {
                match look.await {
                    Ok(false) if started.elapsed() > NOT_IMPLEMENTED_GRACE => {
                        match watched.unimplemented() {
                            Some(methods) => {
                                Check::Failed(format!("{methods} answer NotImplemented"))
                            }
                            None => Check::from(false),
                        }
                    }
                    answer => answer.into(),
                }
            }
        })
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Whether an event of `reason` about the object `name` is in `events`.
pub(crate) async fn event_recorded(
    events: &Api<Event>,
    name: &str,
    reason: &str,
) -> Result<bool, String> {
    let list = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .map_err(|e| e.to_string())?;
    Ok(list
        .items
        .iter()
        .any(|e| e.reason.as_deref() == Some(reason)))
}

struct Case {
    wait: Duration,
    watched: Arc<Watched>,
    pods: Api<Pod>,
    events: Api<Event>,
    provider: Arc<dyn PodLifecycleHandler>,
}

impl Case {
    async fn create(&self, p: Pod) -> Result<(), String> {
        self.pods
            .create(&PostParams::default(), &p)
            .await
            .map(|_| ())
            .map_err(|e| format!("creating the pod: {e}"))
    }

    async fn running(&self, name: &str) -> Result<(), String> {
        until(
            self.wait,
            &self.watched,
            &format!("{name} Running with an IP"),
            || async {
                let p = self.pods.get(name).await.map_err(|e| e.to_string())?;
                let status = p.status.unwrap_or_default();
                Ok(status.phase.as_deref() == Some("Running") && status.pod_ip.is_some())
            },
        )
        .await
    }

    async fn in_provider(&self, name: &str) -> Result<bool, String> {
        self.provider
            .get_pod(NAMESPACE, name)
            .await
            .map(|p| p.is_some())
            .map_err(|e| format!("get_pod: {e}"))
    }

    async fn has_event(&self, name: &str, reason: &str) -> Result<(), String> {
        until(
            self.wait,
            &self.watched,
            &format!("event {reason} on {name}"),
            || event_recorded(&self.events, name, reason),
        )
        .await
    }

    async fn deleted(&self, name: &str, grace: u32) -> Result<(), String> {
        self.pods
            .delete(name, &DeleteParams::default().grace_period(grace))
            .await
            .map_err(|e| format!("deleting: {e}"))?;
        until(
            self.wait,
            &self.watched,
            &format!("{name} gone from the API"),
            || async {
                Ok(self
                    .pods
                    .get_opt(name)
                    .await
                    .map_err(|e| e.to_string())?
                    .is_none())
            },
        )
        .await?;
        until(
            self.wait,
            &self.watched,
            &format!("{name} gone from the provider"),
            || async { Ok(!self.in_provider(name).await?) },
        )
        .await
    }
}

/// Record a case's result: a failure while a lifecycle method answers
/// `NotImplemented` is what is left to write, not a broken contract.
fn settle(report: &mut Report, watched: &Watched, name: &'static str, result: Result<(), String>) {
    match (result, watched.unimplemented()) {
        (Err(why), Some(methods)) => report.push(
            name,
            Outcome::NotImplemented(if why.contains("answer NotImplemented") {
                why
            } else {
                format!("{why} (left to write: {methods})")
            }),
        ),
        (result, _) => report.result(name, result),
    }
}

/// A kubelet-API capability the provider does not declare (its accessor
/// `accessor()` is `None`): skipped, as `kubectl command` answers 501.
fn not_declared(accessor: &str, command: &str) -> Outcome {
    Outcome::Skipped(format!(
        "not supported (declared): {accessor}() is None, so kubectl {command} answers 501"
    ))
}

/// The logs case on the running pod `basic`: its whole log, then
/// `tailLines` 1 (at most the last line) and 0 (nothing), each through the
/// API server as `kubectl logs` asks. A 501 there is a provider that declares
/// logs but answers `NotImplemented`: a broken contract, not a capability
/// left out.
async fn logs_case(pods: &Api<Pod>) -> Outcome {
    let get = |tail: Option<i64>| async move {
        let params = LogParams {
            container: Some("app".into()),
            tail_lines: tail,
            ..LogParams::default()
        };
        pods.logs("basic", &params).await.map_err(|e| {
            let not_implemented = matches!(&e, kube::Error::Api(s) if s.code == 501);
            match not_implemented {
                true => format!("container_logs is declared (Some) but answers NotImplemented (kubectl logs gets 501: {e}); return None from container_logs() if the provider has no logs"),
                false => format!("GET pods/basic/log (tailLines {tail:?}): {e}"),
            }
        })
    };
    let checked = async {
        let all = get(None).await?;
        let last = all.lines().last().unwrap_or_default().to_owned();
        let tail = get(Some(1)).await?;
        let lines: Vec<&str> = tail.lines().collect();
        if lines.len() > 1 {
            return Err(format!(
                "tailLines 1 answered {} lines ({tail:?}): ContainerLogOptions::tail_lines is the provider's to apply",
                lines.len()
            ));
        }
        if !all.is_empty() && lines.first().copied() != Some(last.as_str()) {
            return Err(format!(
                "tailLines 1 answered {tail:?}, not the log's last line {last:?}"
            ));
        }
        let none = get(Some(0)).await?;
        if !none.is_empty() {
            return Err(format!("tailLines 0 answered {none:?}, not nothing"));
        }
        Ok(())
    };
    match checked.await {
        Ok(()) => Outcome::Passed,
        Err(why) => Outcome::Failed(why),
    }
}

/// A streaming case's outcome: `probe`'s answer once the provider declares
/// the capability (`None` from the node is then a failure: the 501 of an
/// undeclared capability from a provider that declares it).
fn streamed(accessor: &str, probe: Result<Option<()>, String>) -> Outcome {
    match probe {
        Ok(Some(())) => Outcome::Passed,
        Ok(None) => Outcome::Failed(format!(
            "{accessor}() is declared (Some) but the kubelet API answered 501"
        )),
        Err(why) => Outcome::Failed(why),
    }
}

/// Run the suite on a fresh API server with a virtual node over the
/// provider `make` returns, each case waiting up to [`DEFAULT_WAIT`].
pub async fn run_pod_conformance(make: impl FnOnce() -> Arc<dyn PodLifecycleHandler>) -> Report {
    run_pod_conformance_within(make, DEFAULT_WAIT).await
}

/// The same, each case waiting up to `wait` (a slow backend needs more; a
/// test of a broken provider, less).
pub async fn run_pod_conformance_within(
    make: impl FnOnce() -> Arc<dyn PodLifecycleHandler>,
    wait: Duration,
) -> Report {
    let mut report = Report::default();
    let api = match ApiServer::start().await {
        Ok(a) => a,
        Err(e) => {
            report.push("api server", Outcome::Failed(e.to_string()));
            return report;
        }
    };
    let client = api.client();
    let watched = Arc::new(Watched::new(make()));
    let provider: Arc<dyn PodLifecycleHandler> = watched.clone();
    let node = match crate::kubelet_api::virtual_node_with_api(
        &api,
        NodeConfig::new(NODE, "conformance"),
        provider.clone(),
    )
    .await
    {
        Ok(n) => n,
        Err(e) => {
            report.push("virtual node", Outcome::Failed(e.to_string()));
            return report;
        }
    };
    let (stop, stopped) = watch::channel(false);
    let running = tokio::spawn(node.run(stopped));
    let case = Case {
        wait,
        watched: watched.clone(),
        pods: Api::namespaced(client.clone(), NAMESPACE),
        events: Api::namespaced(client.clone(), NAMESPACE),
        provider: provider.clone(),
    };
    let nodes: Api<Node> = Api::all(client.clone());

    settle(
        &mut report,
        &watched,
        "the node registers and is Ready",
        until(wait, &watched, "the node Ready", || async {
            let n = nodes.get_opt(NODE).await.map_err(|e| e.to_string())?;
            Ok(n.and_then(|n| n.status?.conditions)
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")))
        })
        .await,
    );

    settle(
        &mut report,
        &watched,
        "a pod runs with an IP and is listed by the provider",
        async {
            case.create(pod("basic", serde_json::json!([]))?).await?;
            case.running("basic").await?;
            let listed = provider
                .get_pods()
                .await
                .map_err(|e| format!("get_pods: {e}"))?;
            if !listed
                .iter()
                .any(|p| p.metadata.name.as_deref() == Some("basic"))
            {
                return Err("get_pods does not list the running pod".into());
            }
            match provider.get_pod_status(NAMESPACE, "basic").await {
                Ok(Some(s)) if s.phase.as_deref() == Some("Running") => Ok(()),
                other => Err(format!("get_pod_status: {other:?}")),
            }
        }
        .await,
    );

    let proxy = |path: &str| {
        let client = client.clone();
        let path = format!("/api/v1/nodes/{NODE}/proxy/{path}");
        async move {
            let request = http::Request::get(&path)
                .body(Vec::new())
                .map_err(|e| e.to_string())?;
            client
                .request_text(request)
                .await
                .map_err(|e| format!("GET {path}: {e}"))
        }
    };
    settle(
        &mut report,
        &watched,
        "the kubelet API lists the node's pods (/pods) and the running ones (/runningpods/)",
        async {
            let list: serde_json::Value =
                serde_json::from_str(&proxy("pods").await?).map_err(|e| format!("/pods: {e}"))?;
            let items = list["items"].as_array().cloned().unwrap_or_default();
            if items.iter().any(|p| p["spec"]["nodeName"] != NODE) {
                return Err("/pods lists a pod of another node".into());
            }
            if !items.iter().any(|p| p["metadata"]["name"] == "basic") {
                return Err("/pods does not list the running pod".into());
            }
            if !proxy("runningpods/").await?.contains("\"basic\"") {
                return Err("/runningpods/ does not list the running pod".into());
            }
            Ok(())
        }
        .await,
    );

    const LOGS: &str =
        "container logs come through the API server, tailLines honoured (kubectl logs --tail)";
    const ATTACH: &str =
        "attaching to the pod's container through the API server works (kubectl attach)";
    const EXEC: &str = "a command runs in the pod through the API server (kubectl exec)";
    const PORT_FORWARD: &str =
        "a port of the pod is forwarded through the API server (kubectl port-forward)";
    let logs = match provider.container_logs() {
        None => not_declared("container_logs", "logs"),
        Some(_) => logs_case(&case.pods).await,
    };
    report.push(LOGS, logs);
    let attach = match provider.attach() {
        None => not_declared("attach", "attach"),
        Some(_) => streamed(
            "attach",
            crate::e2e::attach_probe(&case.pods, "basic").await,
        ),
    };
    report.push(ATTACH, attach);
    let exec = match provider.exec() {
        None => not_declared("exec", "exec"),
        Some(_) => streamed("exec", crate::e2e::exec_echo(&case.pods, "basic").await),
    };
    report.push(EXEC, exec);
    let forward = match provider.port_forward() {
        None => not_declared("port_forward", "port-forward"),
        Some(_) => streamed(
            "port_forward",
            crate::e2e::port_forward_probe(&case.pods, "basic", 80).await,
        ),
    };
    report.push(PORT_FORWARD, forward);

    let stats_pod = async {
        let mut three = pod("stats", serde_json::json!([]))?;
        if let Some(spec) = three.spec.as_mut() {
            let first = spec.containers[0].clone();
            spec.containers = ["one", "two", "three"]
                .iter()
                .map(|n| k8s_openapi::api::core::v1::Container {
                    name: (*n).into(),
                    ..first.clone()
                })
                .collect();
        }
        case.create(three).await?;
        case.running("stats").await
    };
    let stats_ready: Result<(), String> =
        if provider.stats_summary().is_some() || provider.resource_metrics().is_some() {
            stats_pod.await
        } else {
            Ok(())
        };
    if provider.stats_summary().is_none() {
        report.push(
            "the stats summary has the node, the pod and its containers",
            Outcome::Skipped("the provider serves no stats summary".into()),
        );
    } else {
        settle(
            &mut report,
            &watched,
            "the stats summary has the node, the pod and its containers",
            async {
                stats_ready.clone()?;
                let summary: serde_json::Value =
                    serde_json::from_str(&proxy("stats/summary").await?)
                        .map_err(|e| format!("/stats/summary: {e}"))?;
                if summary["node"]["nodeName"] != NODE {
                    return Err(format!("node name {}", summary["node"]["nodeName"]));
                }
                let uid = case
                    .pods
                    .get("stats")
                    .await
                    .map_err(|e| e.to_string())?
                    .metadata
                    .uid
                    .unwrap_or_default();
                let pods = summary["pods"].as_array().cloned().unwrap_or_default();
                let Some(stats) = pods.iter().find(|p| p["podRef"]["name"] == "stats") else {
                    return Err("the pod is not in the summary".into());
                };
                if stats["podRef"]["namespace"] != NAMESPACE || stats["podRef"]["uid"] != uid {
                    return Err(format!("wrong podRef {}", stats["podRef"]));
                }
                let containers = stats["containers"].as_array().map_or(0, Vec::len);
                if containers != 3 {
                    return Err(format!("{containers} container stats, not 3"));
                }
                Ok(())
            }
            .await,
        );
    }
    if provider.resource_metrics().is_none() {
        report.push(
            "resource metrics have the pod and one series per container",
            Outcome::Skipped("the provider serves no resource metrics".into()),
        );
    } else {
        settle(&mut report, &watched,
            "resource metrics have the pod and one series per container",
            async {
                stats_ready.clone()?;
                let text = proxy("metrics/resource").await?;
                let series = |family: &str| {
                    text.lines()
                        .filter(|l| l.starts_with(&format!("{family}{{")))
                        .filter(|l| l.contains("pod=\"stats\""))
                        .count()
                };
                if series("pod_cpu_usage_seconds_total") != 1 {
                    return Err("pod_cpu_usage_seconds_total has no series for the pod".into());
                }
                let containers = series("container_cpu_usage_seconds_total");
                if containers != 3 {
                    return Err(format!(
                        "container_cpu_usage_seconds_total has {containers} series for the pod, not 3"
                    ));
                }
                Ok(())
            }
            .await,
        );
    }

    settle(
        &mut report,
        &watched,
        "a label change reaches the provider",
        async {
            case.pods
                .patch(
                    "basic",
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({"metadata": {"labels": {"tier": "gold"}}})),
                )
                .await
                .map_err(|e| e.to_string())?;
            until(wait, &watched, "the label in the provider", || async {
                let p = provider
                    .get_pod(NAMESPACE, "basic")
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(p.and_then(|p| p.metadata.labels)
                    .is_some_and(|l| l.get("tier").map(String::as_str) == Some("gold")))
            })
            .await
        }
        .await,
    );

    settle(
        &mut report,
        &watched,
        "a graceful delete removes the pod from the provider",
        async { case.deleted("basic", 1).await }.await,
    );

    settle(
        &mut report,
        &watched,
        "after delete_pod the provider reports the pod ended, so a graceful delete does not wait out its grace period",
        async {
            case.create(pod("ends", serde_json::json!([]))?).await?;
            case.running("ends").await?;
            case.pods
                .delete("ends", &DeleteParams::default().grace_period(60))
                .await
                .map_err(|e| format!("deleting: {e}"))?;
            // The node force-deletes the API pod once nothing runs: well
            // before the 60 s grace when the provider reports the end.
            until(
                case.wait.min(Duration::from_secs(10)),
                &watched,
                "ends gone from the API",
                || async {
                    Ok(case
                        .pods
                        .get_opt("ends")
                        .await
                        .map_err(|e| e.to_string())?
                        .is_none())
                },
            )
            .await
            .map_err(|e| {
                format!("{e}: after delete_pod the provider must report the pod ended (a terminal phase, or every container terminated); it still reports it running, so every graceful delete takes the whole grace period")
            })
        }
        .await,
    );

    settle(
        &mut report,
        &watched,
        "a forced delete removes the pod from the provider",
        async {
            case.create(pod("forced", serde_json::json!([]))?).await?;
            case.running("forced").await?;
            case.deleted("forced", 0).await
        }
        .await,
    );

    settle(
        &mut report,
        &watched,
        "a pod force-deleted and re-created at once runs as the new pod, and a repeated delete of the old one leaves it",
        async {
            case.create(pod("again", serde_json::json!([]))?).await?;
            case.running("again").await?;
            let old = case.pods.get("again").await.map_err(|e| e.to_string())?;
            case.pods
                .delete("again", &DeleteParams::default().grace_period(0))
                .await
                .map_err(|e| format!("deleting: {e}"))?;
            case.create(pod("again", serde_json::json!([]))?).await?;
            let new_uid = case
                .pods
                .get("again")
                .await
                .map_err(|e| e.to_string())?
                .metadata
                .uid;
            let runs_new = || async {
                let held = provider
                    .get_pod(NAMESPACE, "again")
                    .await
                    .map_err(|e| format!("get_pod: {e}"))?;
                Ok(held.is_some_and(|p| p.metadata.uid == new_uid))
            };
            until(wait, &watched, "the provider running the new pod", runs_new).await?;
            case.running("again").await?;
            // A delete of the old pod retried late (its first answer was
            // lost) must not touch its successor.
            match provider.delete_pod(&old).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(format!("delete_pod of the old pod: {e}")),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            if !runs_new().await? {
                return Err("a delete of the old pod removed the new one".into());
            }
            case.deleted("again", 0).await
        }
        .await,
    );

    for (source, reason_optional, reason_mandatory) in [
        (
            "secretKeyRef",
            "OptionalSecretNotFound",
            "MandatorySecretNotFound",
        ),
        (
            "configMapKeyRef",
            "OptionalConfigMapNotFound",
            "MandatoryConfigMapNotFound",
        ),
    ] {
        let optional = format!("optional-{}", source.to_lowercase());
        settle(&mut report, &watched,
            if source == "secretKeyRef" {
                "a missing optional Secret lets the pod run, with an event"
            } else {
                "a missing optional ConfigMap lets the pod run, with an event"
            },
            async {
                let env = serde_json::json!([{"name": "X", "valueFrom": {source: {"name": "nowhere", "key": "k", "optional": true}}}]);
                case.create(pod(&optional, env)?).await?;
                case.running(&optional).await?;
                case.has_event(&optional, reason_optional).await
            }
            .await,
        );
        let mandatory = format!("mandatory-{}", source.to_lowercase());
        settle(&mut report, &watched,
            if source == "secretKeyRef" {
                "a missing mandatory Secret keeps the pod out of the provider, with an event"
            } else {
                "a missing mandatory ConfigMap keeps the pod out of the provider, with an event"
            },
            async {
                let env = serde_json::json!([{"name": "X", "valueFrom": {source: {"name": "nowhere", "key": "k"}}}]);
                case.create(pod(&mandatory, env)?).await?;
                case.has_event(&mandatory, reason_mandatory).await?;
                if case.in_provider(&mandatory).await? {
                    return Err("the provider runs a pod whose mandatory source is missing".into());
                }
                Ok(())
            }
            .await,
        );
    }

    settle(
        &mut report,
        &watched,
        "unknown pods are None or NotFound, not errors",
        async {
            match provider.get_pod(NAMESPACE, "never-created").await {
                Ok(None) => {}
                Err(e) if e.is_not_found() => {}
                other => return Err(format!("get_pod: {other:?}")),
            }
            match provider.get_pod_status(NAMESPACE, "never-created").await {
                Ok(None) => {}
                Err(e) if e.is_not_found() => {}
                other => return Err(format!("get_pod_status: {other:?}")),
            }
            let ghost = pod("never-created", serde_json::json!([]))?;
            match provider.delete_pod(&ghost).await {
                Ok(()) => Ok(()),
                Err(e) if e.is_not_found() => Ok(()),
                Err(e) => Err(format!("delete_pod of an unknown pod: {e}")),
            }
        }
        .await,
    );

    let _ = stop.send(true);
    match tokio::time::timeout(Duration::from_secs(10), running).await {
        Ok(Ok(Ok(()))) => report.push("the node stops cleanly", Outcome::Passed),
        other => report.push(
            "the node stops cleanly",
            Outcome::Failed(format!("{other:?}")),
        ),
    }
    report
}
