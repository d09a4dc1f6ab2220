//! The pod-provider conformance suite: MockPodProvider passes it; a provider
//! that forgets pods it deleted, reports a deleted pod running, or declares
//! logs or exec it does not serve fails it.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use stratus_pod::{
    AttachIo, ByteStream, ContainerAttach, ContainerExec, ContainerLogOptions, ContainerLogs,
    ContainerRef, ExitCode, PodError, PodLifecycleHandler, PodNotifier, PortForward,
    PortForwardStream, Result,
};
use stratus_testing::MockPodProvider;
use stratus_testing::conformance::Outcome;
use stratus_testing::pod_conformance::{run_pod_conformance, run_pod_conformance_within};

/// `PodLifecycleHandler` for a broken provider wrapping the mock in field
/// `$mock`: the methods given, and the mock's updates and reads.
macro_rules! wraps_mock {
    ($provider:ty, $mock:tt, { $($own:tt)* }) => {
        #[async_trait]
        impl PodLifecycleHandler for $provider {
            async fn update_pod(&self, pod: &Pod) -> Result<()> {
                self.$mock.update_pod(pod).await
            }
            async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>> {
                self.$mock.get_pod(namespace, name).await
            }
            async fn get_pod_status(
                &self,
                namespace: &str,
                name: &str,
            ) -> Result<Option<PodStatus>> {
                self.$mock.get_pod_status(namespace, name).await
            }
            async fn get_pods(&self) -> Result<Vec<Pod>> {
                self.$mock.get_pods().await
            }
            $($own)*
        }
    };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mock_provider_passes() {
    let report = run_pod_conformance(|| Arc::new(MockPodProvider::new()) as _).await;
    report.assert_passed();
    assert!(report.checks.len() >= 10, "{report}");
}

/// Ignores deletions: the pod stays in the "backend".
struct NeverDeletes(MockPodProvider);

wraps_mock!(NeverDeletes, 0, {
    async fn create_pod(&self, pod: &Pod) -> Result<()> {
        self.0.create_pod(pod).await
    }
    async fn delete_pod(&self, _pod: &Pod) -> Result<()> {
        Ok(())
    }
    fn notifier(&self) -> Option<&dyn PodNotifier> {
        self.0.notifier()
    }
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_never_deletes_fails() {
    let report = run_pod_conformance_within(
        || Arc::new(NeverDeletes(MockPodProvider::new())) as _,
        std::time::Duration::from_secs(2),
    )
    .await;
    let failed: Vec<&str> = report.failures().iter().map(|c| c.name).collect();
    assert!(
        failed.contains(&"a graceful delete removes the pod from the provider"),
        "{report}"
    );
    assert!(
        matches!(report.checks[0].outcome, Outcome::Passed),
        "{report}"
    );
}

/// A provider as `cargo xtask new-provider` writes it: every lifecycle
/// method answers `NotImplemented`.
struct Unwritten;

#[async_trait]
impl PodLifecycleHandler for Unwritten {
    async fn create_pod(&self, _: &Pod) -> Result<()> {
        Err(stratus_pod::PodError::not_implemented("create_pod"))
    }
    async fn update_pod(&self, _: &Pod) -> Result<()> {
        Err(stratus_pod::PodError::not_implemented("update_pod"))
    }
    async fn delete_pod(&self, _: &Pod) -> Result<()> {
        Err(stratus_pod::PodError::not_implemented("delete_pod"))
    }
    async fn get_pod(&self, _: &str, _: &str) -> Result<Option<Pod>> {
        Err(stratus_pod::PodError::not_implemented("get_pod"))
    }
    async fn get_pod_status(&self, _: &str, _: &str) -> Result<Option<PodStatus>> {
        Err(stratus_pod::PodError::not_implemented("get_pod_status"))
    }
    async fn get_pods(&self) -> Result<Vec<Pod>> {
        Err(stratus_pod::PodError::not_implemented("get_pods"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn methods_left_not_implemented_are_listed_not_failed() {
    let started = std::time::Instant::now();
    let report = run_pod_conformance(|| Arc::new(Unwritten) as _).await;
    report.assert_passed();
    let left: Vec<&str> = report.not_implemented().iter().map(|c| c.name).collect();
    assert!(
        left.contains(&"a pod runs with an IP and is listed by the provider"),
        "{report}"
    );
    assert!(
        left.contains(&"unknown pods are None or NotFound, not errors"),
        "{report}"
    );
    assert!(report.to_string().contains("left to write: "), "{report}");
    // The node itself works without the provider's pods.
    assert!(
        matches!(report.checks[0].outcome, Outcome::Passed),
        "{report}"
    );
    // Each case gives up a few seconds after a NotImplemented answer
    // instead of waiting out the 30 s default.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(120),
        "{:?}",
        started.elapsed()
    );
}

/// The end-to-end runner, pointed at a cluster whose virtual node is
/// healthy (every check passes) or whose provider never deletes pods (the
/// deletion checks fail and name `delete_pod`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_e2e_runner_passes_a_healthy_node_and_names_a_broken_contract() {
    use stratus_testing::e2e::{E2eConfig, cleanup, run_virtual_node_e2e};
    let api = stratus_testing::ApiServer::start().await.unwrap();
    let mut nodes = Vec::new();
    for (name, provider) in [
        (
            "vk-healthy",
            Arc::new(MockPodProvider::new().with_node_name("vk-healthy"))
                as Arc<dyn PodLifecycleHandler>,
        ),
        (
            "vk-never-deletes",
            Arc::new(NeverDeletes(
                MockPodProvider::new().with_node_name("vk-never-deletes"),
            )) as _,
        ),
    ] {
        let mut config = stratus_kubelet::node::NodeConfig::new(name, "mock");
        config.renew_interval = std::time::Duration::from_millis(500);
        let node = stratus_testing::kubelet_api::virtual_node_with_api(&api, config, provider)
            .await
            .unwrap();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        nodes.push((stop, tokio::spawn(node.run(stopped))));
    }
    let config = E2eConfig {
        wait: std::time::Duration::from_secs(5),
        ..E2eConfig::default()
    };
    let healthy = run_virtual_node_e2e(api.client(), "vk-healthy", &config).await;
    healthy.assert_complete();
    assert!(healthy.checks.len() >= 10, "{healthy}");
    for part in [
        "(exec)",
        "(/pods)",
        "(/metrics/resource)",
        "optional Secret",
        "mandatory Secret",
        "optional ConfigMap",
        "mandatory ConfigMap",
    ] {
        let check = healthy
            .checks
            .iter()
            .find(|c| c.name.contains(part))
            .unwrap_or_else(|| panic!("a check of {part}: {healthy}"));
        assert_eq!(
            check.outcome,
            stratus_testing::conformance::Outcome::Passed,
            "{healthy}"
        );
    }

    let broken = run_virtual_node_e2e(api.client(), "vk-never-deletes", &config).await;
    let failed: Vec<String> = broken
        .failures()
        .iter()
        .map(|c| format!("{}: {:?}", c.name, c.outcome))
        .collect();
    assert_eq!(failed.len(), 2, "{broken}");
    for f in &failed {
        assert!(f.contains("delete removes the pod"), "{broken}");
        assert!(
            f.contains("the provider still runs a deleted pod (delete_pod)"),
            "{broken}"
        );
    }
    // Nothing the runner made is left, and cleanup finds nothing to do.
    let pods: kube::Api<Pod> = kube::Api::namespaced(api.client(), "default");
    let left = pods
        .list(&kube::api::ListParams::default().labels("app.kubernetes.io/managed-by=stratus-e2e"))
        .await
        .unwrap();
    assert!(left.items.is_empty(), "{:?}", left.items);
    assert_eq!(cleanup(api.client(), "default").await.unwrap(), 0);
    for (stop, task) in nodes {
        stop.send(true).unwrap();
        let _ = task.await;
    }
}

/// Still reports a pod running after `delete_pod` (a vendor mistake: the
/// backend deletes asynchronously and the provider echoes the last status).
struct RunningAfterDelete {
    inner: MockPodProvider,
    callback: std::sync::Mutex<Option<stratus_pod::PodStatusCallback>>,
    deleted: Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
}

fn key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

wraps_mock!(RunningAfterDelete, inner, {
    async fn create_pod(&self, pod: &Pod) -> Result<()> {
        self.deleted.lock().unwrap().remove(&key(pod));
        self.inner.create_pod(pod).await
    }
    async fn delete_pod(&self, pod: &Pod) -> Result<()> {
        self.deleted.lock().unwrap().insert(key(pod));
        self.inner.delete_pod(pod).await?;
        if let Some(callback) = self.callback.lock().unwrap().clone() {
            callback.notify(pod.clone());
        }
        Ok(())
    }
    fn notifier(&self) -> Option<&dyn PodNotifier> {
        Some(self)
    }
});

impl PodNotifier for RunningAfterDelete {
    fn notify_pods(&self, callback: stratus_pod::PodStatusCallback) {
        *self.callback.lock().unwrap() = Some(callback.clone());
        let deleted = self.deleted.clone();
        if let Some(inner) = self.inner.notifier() {
            // The backend's own reports of a deleted pod's end are lost.
            inner.notify_pods(stratus_pod::PodStatusCallback::new(move |pod| {
                if !deleted.lock().unwrap().contains(&key(&pod)) {
                    callback.notify(pod);
                }
            }));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_reporting_running_after_delete_fails() {
    let report = run_pod_conformance_within(
        || {
            Arc::new(RunningAfterDelete {
                inner: MockPodProvider::new(),
                callback: Default::default(),
                deleted: Default::default(),
            }) as _
        },
        std::time::Duration::from_secs(5),
    )
    .await;
    let failed: Vec<String> = report.failure_messages();
    assert!(
        failed.iter().any(
            |f| f.starts_with("after delete_pod the provider reports the pod ended")
                && f.contains("takes the whole grace period")
        ),
        "{report}"
    );
}

/// Declares logs, exec, attach and port-forward (their accessors are
/// `Some`) but answers
/// `NotImplemented` to each, or serves logs ignoring `tailLines`: the rest
/// is the mock's.
struct BrokenLogs {
    inner: MockPodProvider,
    ignores_tail: bool,
}

wraps_mock!(BrokenLogs, inner, {
    async fn create_pod(&self, pod: &Pod) -> Result<()> {
        self.inner.create_pod(pod).await
    }
    async fn delete_pod(&self, pod: &Pod) -> Result<()> {
        self.inner.delete_pod(pod).await
    }
    fn notifier(&self) -> Option<&dyn PodNotifier> {
        self.inner.notifier()
    }
    fn container_logs(&self) -> Option<&dyn ContainerLogs> {
        Some(self)
    }
    fn exec(&self) -> Option<&dyn ContainerExec> {
        Some(self)
    }
    fn attach(&self) -> Option<&dyn ContainerAttach> {
        Some(self)
    }
    fn port_forward(&self) -> Option<&dyn PortForward> {
        Some(self)
    }
});

#[async_trait]
impl PortForward for BrokenLogs {
    async fn port_forward(
        &self,
        _namespace: &str,
        _pod: &str,
        _port: u16,
        _stream: PortForwardStream,
    ) -> Result<()> {
        Err(PodError::not_implemented("port-forward"))
    }
}

#[async_trait]
impl ContainerAttach for BrokenLogs {
    async fn attach(&self, _container: &ContainerRef, _io: AttachIo) -> Result<()> {
        Err(PodError::not_implemented("attach"))
    }
}

#[async_trait]
impl ContainerExec for BrokenLogs {
    async fn exec(
        &self,
        _container: &ContainerRef,
        _command: &[String],
        _io: AttachIo,
    ) -> Result<ExitCode> {
        Err(PodError::not_implemented("exec"))
    }
}

#[async_trait]
impl ContainerLogs for BrokenLogs {
    async fn container_logs(
        &self,
        _container: &ContainerRef,
        _options: &ContainerLogOptions,
    ) -> Result<ByteStream> {
        if !self.ignores_tail {
            return Err(PodError::not_implemented("container logs"));
        }
        // Two lines whatever the request asks.
        Ok(Box::pin(futures_util::stream::iter([Ok(
            b"one\ntwo\n".to_vec()
        )])))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_declaring_capabilities_it_does_not_serve_fails_and_one_without_them_is_skipped()
{
    let run = |ignores_tail| {
        run_pod_conformance_within(
            move || {
                Arc::new(BrokenLogs {
                    inner: MockPodProvider::new(),
                    ignores_tail,
                }) as _
            },
            std::time::Duration::from_secs(5),
        )
    };
    let logs =
        "container logs come through the API server, tailLines honoured (kubectl logs --tail)";
    let exec = "a command runs in the pod through the API server (kubectl exec)";
    let attach = "attaching to the pod's container through the API server works (kubectl attach)";
    let forward = "a port of the pod is forwarded through the API server (kubectl port-forward)";
    let failed = run(false).await.failure_messages();
    assert!(
        failed.iter().any(|f| f.starts_with(logs)
            && f.contains("container_logs is declared (Some) but answers NotImplemented")),
        "{failed:#?}"
    );
    assert!(
        failed
            .iter()
            .any(|f| f.starts_with(exec) && f.contains("(ContainerExec::exec)")),
        "{failed:#?}"
    );
    assert!(
        failed.iter().any(|f| f.starts_with(attach)
            && f.contains("attach() is declared (Some) but answers NotImplemented")),
        "{failed:#?}"
    );
    assert!(
        failed.iter().any(|f| f.starts_with(forward)
            && f.contains("port_forward() is declared (Some) but answers NotImplemented")),
        "{failed:#?}"
    );
    let failed = run(true).await.failure_messages();
    assert!(
        failed
            .iter()
            .any(|f| f.starts_with(logs) && f.contains("tailLines 1 answered 2 lines")),
        "{failed:#?}"
    );
    // A provider without them declares so: skipped, named as such.
    let report = run_pod_conformance_within(
        || Arc::new(NeverDeletes(MockPodProvider::new())) as _,
        std::time::Duration::from_secs(2),
    )
    .await;
    for case in [logs, exec, attach, forward] {
        let skipped = report
            .checks
            .iter()
            .find(|c| c.name == case)
            .map(|c| &c.outcome);
        assert!(
            matches!(skipped, Some(Outcome::Skipped(why)) if why.starts_with("not supported (declared)")),
            "{case}: {report}"
        );
    }
}
