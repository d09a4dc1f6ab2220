//! Providers with only some capabilities, run through the manager command
//! (`Command::run_with_args`, a kubeconfig, real HTTPS on `--secure-port`):
//! the controllers they cannot serve are not started (logged once with the
//! reason, no health check, not counted as running, shown as not started in
//! `/readyz` and `/configz`), the manager stays healthy, and the
//! controllers that can run do their job.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::{free_port, load_balancer_service};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, PostParams};
use stratus_ccm::app::Command;
use stratus_cloud::CloudProvider;
use stratus_testing::fake_cloud::Capability;
use stratus_testing::http_status::{get, insecure_client};
use stratus_testing::{FakeCloud, FakeInstance, NodeSpec, TestCluster, eventually};
use tokio::sync::watch;

/// The log of the test binary, as text.
fn log() -> &'static Mutex<Vec<u8>> {
    static LOG: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();
    LOG.get_or_init(|| {
        struct Writer;
        impl Write for Writer {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                log().lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        tracing_subscriber::fmt()
            .with_writer(|| Writer)
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .init();
        Mutex::new(Vec::new())
    })
}

fn log_text() -> String {
    String::from_utf8_lossy(&log().lock().unwrap()).into_owned()
}

/// A [`FakeCloud`] offering only the capabilities in `keep`.
fn only(keep: &[Capability]) -> FakeCloud {
    [
        Capability::LoadBalancer,
        Capability::InstancesV2,
        Capability::Instances,
        Capability::Zones,
        Capability::Routes,
        Capability::Clusters,
    ]
    .into_iter()
    .filter(|c| !keep.contains(c))
    .fold(FakeCloud::new(), FakeCloud::without)
}

/// A running manager for one provider.
struct Running {
    cluster: TestCluster,
    cloud: FakeCloud,
    admin: kube::Client,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), stratus_ccm::app::CommandError>>,
    kubeconfig: std::path::PathBuf,
}

async fn start(name: &str, cloud: FakeCloud, extra: &[&str]) -> Running {
    log().lock().unwrap().clear();
    let cluster = TestCluster::start().await.unwrap();
    cloud.add_instance(FakeInstance::new("node-a").with_internal_ip("10.0.0.1"));
    let kubeconfig = std::env::temp_dir().join(format!(
        "stratus-minimal-{name}-{}.kubeconfig",
        std::process::id()
    ));
    cluster.server().write_kubeconfig(&kubeconfig).unwrap();
    let port = free_port();
    let mut args = vec![
        "cloud-controller-manager".to_owned(),
        format!("--cloud-provider={name}"),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--secure-port={port}"),
        "--bind-address=127.0.0.1".into(),
        "--leader-elect=false".into(),
        "--authentication-skip-lookup".into(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let provider = Arc::new(cloud.clone());
    let (stop, stopped) = watch::channel(false);
    let command = Command::new().provider(name, move |_options, _flags| {
        Ok(provider as Arc<dyn CloudProvider>)
    });
    let task = tokio::spawn(command.run_with_args(args, stopped));
    let admin = insecure_client(([127, 0, 0, 1], port).into());
    eventually(
        "the admin server answers",
        Duration::from_secs(15),
        || async {
            matches!(
                admin
                    .request_text(http::Request::get("/healthz").body(Vec::new()).unwrap())
                    .await,
                Ok(_) | Err(kube::Error::Api(_))
            )
        },
    )
    .await;
    Running {
        cluster,
        cloud,
        admin,
        stop,
        task,
        kubeconfig,
    }
}

impl Running {
    /// `/healthz` and `/readyz` answer 200 (also once every controller had
    /// time to start), and `/readyz?verbose`, `/configz` and the log show
    /// each of `not_started` as not started, with its reason; `started`
    /// have a passing check and count as running.
    async fn assert_healthy(&self, started: &[&str], not_started: &[(&str, &str)]) {
        eventually(
            "every controller started or skipped",
            Duration::from_secs(15),
            || async {
                let (_, body) = get(&self.admin, "/readyz?verbose").await;
                started.iter().all(|n| body.contains(&format!("[+]{n} ok")))
                    && not_started
                        .iter()
                        .all(|(n, _)| body.contains(&format!("[+]{n} not started")))
            },
        )
        .await;
        // A controller that returned on its own would fail by now.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (code, healthz) = get(&self.admin, "/healthz?verbose").await;
        assert_eq!(code, 200, "{healthz}");
        let (code, readyz) = get(&self.admin, "/readyz?verbose").await;
        assert_eq!(code, 200, "{readyz}");
        let (_, configz) = get(&self.admin, "/configz").await;
        let configz: serde_json::Value = serde_json::from_str(&configz).unwrap();
        let status = &configz["cloudcontrollermanager.config.k8s.io"]["ControllerStatus"];
        let (_, metrics) = get(&self.admin, "/metrics").await;
        let log = log_text();
        for name in started {
            assert!(
                healthz.contains(&format!("[+]{name} ok")),
                "{name}: {healthz}"
            );
            assert_eq!(status[name]["Started"], true, "{name}: {configz}");
            assert!(
                metrics.contains(&format!(
                    "running_managed_controllers{{name=\"{name}\",manager=\"cloud-controller-manager\"}} 1"
                )),
                "{name}: {metrics}"
            );
        }
        for (name, reason) in not_started {
            assert!(
                !healthz.contains(name),
                "{name} has no health check: {healthz}"
            );
            assert!(
                readyz.contains(&format!("[+]{name} not started: {reason}")),
                "{name}: {readyz}"
            );
            assert_eq!(status[name]["Started"], false, "{name}: {configz}");
            assert_eq!(status[name]["Reason"], *reason, "{name}: {configz}");
            assert!(
                !metrics.contains(&format!("running_managed_controllers{{name=\"{name}\"")),
                "{name} is not counted: {metrics}"
            );
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("the controller is not started") && l.contains(name))
                .collect();
            assert_eq!(lines.len(), 1, "logged once, at info: {log}");
            assert!(
                lines[0].contains(" INFO ") && lines[0].contains(reason),
                "{}",
                lines[0]
            );
        }
        assert!(!log.contains("stopped on its own"), "{log}");
        // (The test's own client logs errors while the server starts.)
        assert!(!log.lines().any(|l| l.contains(" ERROR stratus")), "{log}");
    }

    async fn node_is_initialized(&self, zone: bool) -> stratus_testing::SimulatedKubelet {
        let kubelet = self
            .cluster
            .add_node(NodeSpec::new("node-a").with_heartbeat(Duration::from_millis(500)))
            .await
            .unwrap();
        let nodes: Api<Node> = Api::all(self.cluster.client());
        eventually("node-a is initialized", Duration::from_secs(15), || async {
            let node = nodes.get("node-a").await.unwrap();
            let spec = node.spec.clone().unwrap_or_default();
            let labels = node.metadata.labels.clone().unwrap_or_default();
            spec.provider_id.as_deref() == Some("fake://node-a")
                && !spec
                    .taints
                    .unwrap_or_default()
                    .iter()
                    .any(|t| t.key == "node.cloudprovider.kubernetes.io/uninitialized")
                && labels
                    .get("node.kubernetes.io/instance-type")
                    .map(String::as_str)
                    == Some("fake.small")
                && (!zone
                    || labels
                        .get("topology.kubernetes.io/zone")
                        .map(String::as_str)
                        == Some("fake-1a"))
        })
        .await;
        kubelet
    }

    async fn stop(self) {
        self.stop.send(true).unwrap();
        self.task.await.unwrap().unwrap();
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

const NO_INSTANCES: &str = "the cloud provider offers neither InstancesV2 nor Instances";
const NO_LB: &str = "the cloud provider offers no load balancers";
const NO_ROUTES: &str = "--configure-cloud-routes is set, but the cloud provider offers no routes";
const NO_IPAM: &str = "--allocate-node-cidrs is false";

/// One test: the log is the process's, so the providers run in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minimal_providers_stay_healthy_and_run_what_they_can() {
    // InstancesV2 only (a bare-metal provider leaving load balancers to
    // MetalLB).
    let run = start("only-instances-v2", only(&[Capability::InstancesV2]), &[]).await;
    let _kubelet = run.node_is_initialized(true).await;
    run.assert_healthy(
        &["cloud-node-controller", "cloud-node-lifecycle-controller"],
        &[
            ("service-lb-controller", NO_LB),
            ("node-route-controller", NO_ROUTES),
            ("nodeipam", NO_IPAM),
        ],
    )
    .await;
    run.stop().await;

    // LoadBalancer only.
    let run = start("only-load-balancer", only(&[Capability::LoadBalancer]), &[]).await;
    let services: Api<Service> = Api::namespaced(run.cluster.client(), "default");
    services
        .create(&PostParams::default(), &load_balancer_service("web"))
        .await
        .unwrap();
    eventually(
        "web gets a load balancer",
        Duration::from_secs(15),
        || async {
            let web = services.get("web").await.unwrap();
            web.status
                .and_then(|s| s.load_balancer)
                .and_then(|l| l.ingress)
                .is_some_and(|i| !i.is_empty())
        },
    )
    .await;
    assert_eq!(run.cloud.load_balancers().len(), 1);
    run.assert_healthy(
        &["service-lb-controller"],
        &[
            ("cloud-node-controller", NO_INSTANCES),
            ("cloud-node-lifecycle-controller", NO_INSTANCES),
            ("node-route-controller", NO_ROUTES),
            ("nodeipam", NO_IPAM),
        ],
    )
    .await;
    run.stop().await;

    // Instances (legacy) + Zones only: the node controllers answer through
    // them, as Go's do.
    let run = start(
        "legacy-instances-and-zones",
        only(&[Capability::Instances, Capability::Zones]),
        &["--configure-cloud-routes=false", "--node-monitor-period=1s"],
    )
    .await;
    let kubelet = run.node_is_initialized(true).await;
    let calls: BTreeMap<String, usize> =
        run.cloud.calls().iter().fold(BTreeMap::new(), |mut m, c| {
            *m.entry(c.method.to_string()).or_default() += 1;
            m
        });
    assert!(calls.contains_key("instance_id"), "{calls:?}");
    assert!(calls.contains_key("get_zone_by_provider_id"), "{calls:?}");
    assert!(
        !calls.contains_key("instance_metadata"),
        "no InstancesV2 call: {calls:?}"
    );
    run.assert_healthy(
        &["cloud-node-controller", "cloud-node-lifecycle-controller"],
        &[
            ("service-lb-controller", NO_LB),
            ("node-route-controller", "--configure-cloud-routes is false"),
            ("nodeipam", NO_IPAM),
        ],
    )
    .await;
    // The lifecycle controller sees the instance of the NotReady node go
    // (the legacy exists call) and deletes the Node.
    run.cloud.remove_instance("node-a");
    kubelet.set_ready(false);
    let nodes: Api<Node> = Api::all(run.cluster.client());
    eventually("node-a is deleted", Duration::from_secs(30), || async {
        nodes.get_opt("node-a").await.unwrap().is_none()
    })
    .await;
    run.stop().await;

    // Nothing but a name.
    let run = start("only-a-name", only(&[]), &[]).await;
    run.assert_healthy(
        &[],
        &[
            ("cloud-node-controller", NO_INSTANCES),
            ("cloud-node-lifecycle-controller", NO_INSTANCES),
            ("service-lb-controller", NO_LB),
            ("node-route-controller", NO_ROUTES),
            ("nodeipam", NO_IPAM),
        ],
    )
    .await;
    run.stop().await;
}
