//! The whole manager with the `local` provider (`backends: endpoints`) on
//! the harness API server: a LoadBalancer Service gets the local cloud's
//! address, traffic through it reaches the pods' servers, and a pod that
//! stops being ready, or is deleted, is out of the load balancer at once;
//! process pods (real servers on their nodes' own addresses) behind a
//! Service made by kubectl restart without a failed request.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use common::{fetch, named_server};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stratus_ccm::app::{CloudControllerManager, ManagerOptions};
use stratus_cloud::helpers::ingress_ip;
use stratus_local_cloud::{Config, LocalCloud};
use stratus_provider_local::{Backends, LocalProvider};
use stratus_testing::http_status::page;
use stratus_testing::{NodeSpec, TestCluster, eventually};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

#[derive(Parser)]
struct Command {
    #[command(flatten)]
    options: ManagerOptions,
}

const WAIT: Duration = Duration::from_secs(15);

/// Act as the pod's kubelet: its IP, Running, Ready or not.
async fn report(pods: &Api<Pod>, name: &str, ip: &str, ready: bool) {
    let status = json!({"status": {
        "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}],
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_balancer_service_reaches_its_ready_pods_through_the_local_cloud() {
    let mut cluster = TestCluster::start().await.unwrap();
    cluster.start_endpoint_slices();
    let cloud = LocalCloud::start(Config {
        address_range: "127.77.16.0/24".parse().unwrap(),
        ..Config::default()
    })
    .await
    .unwrap();
    let provider = LocalProvider::from_config(Some(
        format!("endpoint: http://{}\nbackends: endpoints\n", cloud.addr()).as_bytes(),
    ))
    .unwrap();
    assert_eq!(
        LocalProvider::from_config(Some(b"endpoint: http://x:1\nbackends: endpoints"))
            .unwrap()
            .client()
            .authority(),
        "x:1"
    );
    // The node's instance, and the node.
    let mut api_call = TcpStream::connect(cloud.addr()).await.unwrap();
    let body = r#"{"nodeName":"n1","zone":"local-a","region":"local","instanceType":"process","addresses":[{"type":"InternalIP","address":"127.0.16.1"}]}"#;
    api_call
        .write_all(
            format!(
                "PUT /v1/instances/i-n1 HTTP/1.1\r\nHost: c\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut answer = String::new();
    api_call.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let _kubelet = cluster
        .add_node(NodeSpec::new("n1").with_heartbeat(Duration::from_secs(3600)))
        .await
        .unwrap();

    let manager = start_manager(
        &cluster,
        provider.clone().with_backends(Backends::Endpoints),
        "*,-route",
    )
    .await;

    // The node is initialized from the local cloud's instance.
    let nodes: Api<Node> = Api::all(cluster.client());
    eventually("n1 initialized", WAIT, || async {
        nodes
            .get("n1")
            .await
            .unwrap()
            .spec
            .unwrap_or_default()
            .provider_id
            .as_deref()
            == Some("local://i-n1")
    })
    .await;

    // Three pods with servers on addresses of their own.
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let ips = ["127.0.16.10", "127.0.16.11", "127.0.16.12"];
    let mut servers = Vec::new();
    for (i, name) in ["web-0", "web-1", "web-2"].into_iter().enumerate() {
        servers.push(start_pod(&pods, name, ips[i], name).await);
    }
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    let created = Instant::now();
    let address = expose_web(&services).await;
    println!("external IP after {:?}", created.elapsed());
    assert!(
        address.ip().to_string().starts_with("127.77.16."),
        "{address}"
    );

    // Every ready pod answers, spread round-robin.
    eventually("all three pods behind the load balancer", WAIT, || async {
        let mut seen = BTreeMap::new();
        for _ in 0..6 {
            if let Ok(name) = fetch(address).await {
                *seen.entry(name).or_insert(0) += 1;
            }
        }
        seen.len() == 3
    })
    .await;

    // web-1 stops being ready: it gets no new connection.
    report(&pods, "web-1", ips[1], false).await;
    eventually("web-1 out of the load balancer", WAIT, || async {
        let mut answers = Vec::new();
        for _ in 0..6 {
            answers.push(fetch(address).await.unwrap_or_default());
        }
        !answers.iter().any(|a| a == "web-1") && answers.iter().all(|a| !a.is_empty())
    })
    .await;

    // web-2 is deleted: only web-0 is left.
    pods.delete("web-2", &DeleteParams::default())
        .await
        .unwrap();
    eventually("only web-0 left", WAIT, || async {
        let mut answers = Vec::new();
        for _ in 0..4 {
            answers.push(fetch(address).await.unwrap_or_default());
        }
        answers.iter().all(|a| a == "web-0")
    })
    .await;

    // The Service deleted: the address is released, nothing listens on it.
    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the load balancer deleted", WAIT, || async {
        TcpStream::connect(address).await.is_err()
    })
    .await;

    manager.stop().await;
    cloud.stop().await;
    drop(servers);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backends_that_drifted_are_rewritten_when_the_controller_asks_and_the_answer_is_up_to_date()
{
    use stratus_cloud::{CloudProvider, InitContext, ShutdownSignal};
    let mut cluster = TestCluster::start().await.unwrap();
    cluster.start_endpoint_slices();
    let cloud = LocalCloud::start(Config {
        address_range: "127.77.19.0/24".parse().unwrap(),
        ..Config::default()
    })
    .await
    .unwrap();
    let provider = LocalProvider::from_config(Some(
        format!("endpoint: http://{}\nbackends: endpoints\n", cloud.addr()).as_bytes(),
    ))
    .unwrap();
    let (trigger, shutdown) = ShutdownSignal::new();
    let ctx = InitContext::new(
        "kubernetes",
        shutdown,
        Arc::new(stratus_ccm::app::TokioSpawner),
    )
    .with_extension(cluster.client());
    provider.initialize(&ctx).await.unwrap();

    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let _server = start_pod(&pods, "web-0", "127.0.19.10", "web-0").await;
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    let svc = services
        .create(&PostParams::default(), &web_service())
        .await
        .unwrap();
    let lb = provider.load_balancer().unwrap();
    let address: SocketAddr = eventually_address(lb, &svc).await;
    eventually("web-0 answers", WAIT, || async {
        fetch(address).await.is_ok_and(|a| a == "web-0")
    })
    .await;

    // Someone rewrites the backends behind the provider's back.
    let name = lb.get_load_balancer_name("kubernetes", &svc);
    let drifted = json!({"listeners": [{"protocol": "TCP", "port": 80, "backends": []}],
                         "tags": {"kubernetes.io/cluster": "kubernetes", "kubernetes.io/service": "default/web"}});
    provider
        .client()
        .call::<serde_json::Value>(
            http::Method::PUT,
            &format!("/v1/load-balancers/{name}"),
            Some(&drifted),
        )
        .await
        .unwrap();
    assert!(fetch(address).await.unwrap_or_default().is_empty());
    // The controller asks: the provider mends the backends and says yes.
    assert!(
        lb.load_balancer_up_to_date("kubernetes", &svc, &[])
            .await
            .unwrap()
    );
    assert_eq!(fetch(address).await.unwrap(), "web-0");
    trigger.trigger();
    cloud.stop().await;
}

/// Ensure until the endpoint cache has the Service's slice: its address.
async fn eventually_address(lb: &dyn stratus_cloud::LoadBalancer, svc: &Service) -> SocketAddr {
    let deadline = Instant::now() + WAIT;
    loop {
        let status = lb
            .ensure_load_balancer("kubernetes", svc, &[])
            .await
            .unwrap();
        let ip = status.ingress.unwrap()[0].ip.clone().unwrap();
        if Instant::now() > deadline
            || fetch(format!("{ip}:80").parse().unwrap())
                .await
                .is_ok_and(|a| !a.is_empty())
        {
            return format!("{ip}:80").parse().unwrap();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_balancer_outlives_a_restart_of_its_cloud_and_the_stop_of_its_manager() {
    let mut cluster = TestCluster::start().await.unwrap();
    cluster.start_endpoint_slices();
    let dir =
        std::env::temp_dir().join(format!("stratus-local-ccm-restart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("state.json");
    let config = |listen: SocketAddr| Config {
        listen,
        address_range: "127.77.20.0/24".parse().unwrap(),
        state_file: Some(state.clone()),
        ..Config::default()
    };
    let cloud = LocalCloud::start(config("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let api_addr = cloud.addr();
    let provider = LocalProvider::from_config(Some(
        format!("endpoint: http://{api_addr}\nbackends: endpoints\n").as_bytes(),
    ))
    .unwrap();
    let manager = start_manager(&cluster, provider.clone(), "service").await;

    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let _server = start_pod(&pods, "web-0", "127.0.20.10", "web-0").await;
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    let address = expose_web(&services).await;
    let ip = address.ip().to_string();
    eventually("web-0 behind the load balancer", WAIT, || async {
        fetch(address).await.is_ok_and(|a| a == "web-0")
    })
    .await;

    // The cloud is killed: nothing listens. It comes back on the same API
    // address from its state file: the same address serves again, and the
    // manager, which never noticed, recreates nothing.
    cloud.stop().await;
    assert!(TcpStream::connect(address).await.is_err());
    let cloud = LocalCloud::start(config(api_addr)).await.unwrap();
    assert_eq!(fetch(address).await.unwrap(), "web-0");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let calls: BTreeMap<String, u64> = provider
        .client()
        .call(http::Method::GET, "/v1/calls", None::<&()>)
        .await
        .unwrap();
    assert!(
        !calls
            .keys()
            .any(|k| k.starts_with("PUT /v1/load-balancers") || k.starts_with("DELETE")),
        "the restarted cloud was written to: {calls:?}"
    );
    assert_eq!(
        ingress_ip(&services.get("web").await.unwrap()),
        Some(ip.as_str())
    );

    // The manager stops: traffic keeps flowing.
    manager.stop().await;
    for _ in 0..10 {
        assert_eq!(fetch(address).await.unwrap(), "web-0");
    }
    cloud.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_request_fails_through_the_load_balancer_during_a_rolling_restart_of_its_pods() {
    let (cluster, cloud, cloud_client, manager) =
        service_manager_on_a_cloud("127.77.21.0/24").await;

    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let mut running = Vec::new();
    for i in 0..3 {
        let name = format!("web-old-{i}");
        let server = start_pod(&pods, &name, &format!("127.0.21.{}", 10 + i), "ok").await;
        running.push((name, server));
    }
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    let address = expose_web(&services).await;
    eventually("the pods behind the load balancer", WAIT, || async {
        fetch(address).await.is_ok_and(|a| a == "ok")
    })
    .await;

    // Requests, one after the other, for the whole restart.
    let (done_tx, client) = requests_until_done(move || async move {
        match fetch(address).await {
            Ok(a) if a == "ok" => Ok(a),
            other => Err(format!("{other:?}")),
        }
    });

    // The rolling restart: a new pod Ready, then an old one terminating
    // (out of the endpoints at once), serving 1 s more as a `preStop`
    // sleep lets it, then gone.
    for i in 0..3 {
        let name = format!("web-new-{i}");
        let server = start_pod(&pods, &name, &format!("127.0.21.{}", 20 + i), "ok").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (old, old_server) = running.remove(0);
        pods.delete(&old, &DeleteParams::default()).await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        // Out of the load balancer before its process stops.
        let backends = lb_backends(&cloud_client).await;
        assert!(
            !backends.contains(&format!("127.0.21.{}", 10 + i)),
            "{old} still a backend: {backends:?}"
        );
        old_server.abort();
        running.push((name, server));
    }
    let _ = done_tx.send(true);
    let (answers, failed) = client.await.unwrap();
    assert_none_failed(&answers, &failed);
    let mut backends = lb_backends(&cloud_client).await;
    backends.sort();
    assert_eq!(backends, ["127.0.21.20", "127.0.21.21", "127.0.21.22"]);

    manager.stop().await;
    cloud.stop().await;
}

/// The answers of many requests counted by body, and the failures.
type Tally = (BTreeMap<String, u64>, Vec<String>);

/// Requests made one after the other by `request` until the returned
/// sender says stop and at least 1,000 were made: the answers counted by
/// body, and the failures.
fn requests_until_done<F, Fut>(request: F) -> (watch::Sender<bool>, tokio::task::JoinHandle<Tally>)
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<String, String>> + Send,
{
    let (done_tx, done_rx) = watch::channel(false);
    let client = tokio::spawn(async move {
        let (mut answers, mut failed) = (BTreeMap::<String, u64>::new(), Vec::new());
        let mut total = 0u64;
        while !*done_rx.borrow() || total < 1_000 {
            match request().await {
                Ok(body) => *answers.entry(body).or_default() += 1,
                Err(e) => failed.push(e),
            }
            total += 1;
        }
        (answers, failed)
    });
    (done_tx, client)
}

/// At least 1,000 requests made during the rolling restart, none failed.
fn assert_none_failed(answers: &BTreeMap<String, u64>, failed: &[String]) {
    let total = answers.values().sum::<u64>() + failed.len() as u64;
    println!(
        "{total} requests during the rolling restart: {answers:?}, {} failed",
        failed.len()
    );
    assert!(total >= 1_000, "only {total} requests");
    assert!(
        failed.is_empty(),
        "{} of {total} failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(5)]
    );
}

/// The backend addresses of the cloud's only load balancer.
async fn lb_backends(client: &stratus_provider_local::Client) -> Vec<String> {
    let lbs: Vec<stratus_local_cloud::api::LoadBalancer> =
        client.list_all("/v1/load-balancers").await.unwrap();
    lbs[0].spec.listeners[0]
        .backends
        .iter()
        .map(|b| b.address.clone())
        .collect()
}

/// A pod of the Service `web` (port `http`, 8080), as its kubelet would run
/// it: a server on an address of its own answering `answer`, then Ready.
async fn start_pod(
    pods: &Api<Pod>,
    name: &str,
    ip: &str,
    answer: &'static str,
) -> tokio::task::JoinHandle<()> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "web",
                 "ports": [{"name": "http", "containerPort": 8080}]}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let server = named_server(ip, 8080, answer).await;
    report(pods, name, ip, true).await;
    server
}

/// The LoadBalancer Service `web`: port 80 to the pods' port named `http`.
fn web_service() -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"type": "LoadBalancer", "selector": {"app": "web"},
                 "ports": [{"name": "web", "port": 80, "targetPort": "http"}]}
    }))
    .unwrap()
}

/// Create `web_service` and wait for its external IP: the address of its
/// port 80.
async fn expose_web(services: &Api<Service>) -> SocketAddr {
    services
        .create(&PostParams::default(), &web_service())
        .await
        .unwrap();
    eventually("an external IP", WAIT, || async {
        ingress_ip(&services.get("web").await.unwrap()).is_some()
    })
    .await;
    let ip = ingress_ip(&services.get("web").await.unwrap())
        .unwrap()
        .to_owned();
    format!("{ip}:80").parse().unwrap()
}

/// A harness with its EndpointSlice controller, a local cloud whose load
/// balancers take addresses from `range`, and the manager's service
/// controller with the `local` provider in `backends: endpoints` mode.
async fn service_manager_on_a_cloud(
    range: &str,
) -> (
    TestCluster,
    LocalCloud,
    stratus_provider_local::Client,
    Manager,
) {
    let config = Config {
        address_range: range.parse().unwrap(),
        ..Config::default()
    };
    manager_on_a_cloud(config, "service", &[]).await
}

/// The same with the cloud's `config`, `--controllers=<controllers>` and
/// more manager `flags`.
async fn manager_on_a_cloud(
    config: Config,
    controllers: &str,
    flags: &[&str],
) -> (
    TestCluster,
    LocalCloud,
    stratus_provider_local::Client,
    Manager,
) {
    let mut cluster = TestCluster::start().await.unwrap();
    cluster.start_endpoint_slices();
    let cloud = LocalCloud::start(config).await.unwrap();
    let provider = LocalProvider::from_config(Some(
        format!("endpoint: http://{}\nbackends: endpoints\n", cloud.addr()).as_bytes(),
    ))
    .unwrap();
    let cloud_client = provider.client().clone();
    let manager = start_manager_with(&cluster, provider, controllers, flags).await;
    (cluster, cloud, cloud_client, manager)
}

/// The whole manager, with `provider` and `--controllers=<controllers>`,
/// from a kubeconfig of `cluster`'s as a deployed one starts.
struct Manager {
    stop: watch::Sender<bool>,
    running: stratus_ccm::app::RunningManager,
    kubeconfig: std::path::PathBuf,
}

async fn start_manager(
    cluster: &TestCluster,
    provider: LocalProvider,
    controllers: &str,
) -> Manager {
    start_manager_with(cluster, provider, controllers, &[]).await
}

/// The same with more flags.
async fn start_manager_with(
    cluster: &TestCluster,
    provider: LocalProvider,
    controllers: &str,
    flags: &[&str],
) -> Manager {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let kubeconfig = std::env::temp_dir().join(format!(
        "stratus-local-ccm-{}-{}.kubeconfig",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    cluster.server().write_kubeconfig(&kubeconfig).unwrap();
    let options = Command::try_parse_from(
        [
            "ccm".to_owned(),
            "--cloud-provider=local".to_owned(),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--controllers={controllers}"),
        ]
        .into_iter()
        .chain(flags.iter().map(|f| (*f).to_owned())),
    )
    .unwrap()
    .options;
    let (stop, stopped) = watch::channel(false);
    let running = CloudControllerManager::new(options)
        .with_provider(Arc::new(provider))
        .with_identity("local-ccm")
        .with_admin_addr("127.0.0.1:0".parse().unwrap())
        .start(stopped)
        .await
        .unwrap();
    Manager {
        stop,
        running,
        kubeconfig,
    }
}

impl Manager {
    /// Stop it gracefully (it must end without an error).
    async fn stop(self) {
        let _ = self.stop.send(true);
        self.running.wait().await.unwrap();
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

/// A process pod's HTTP server: answers every GET with the pod's name, on
/// `$(POD_IP)`:8080 (its node's own loopback address).
const POD_SERVER: &str = r#"
import http.server, sys
ip, name = sys.argv[1], sys.argv[2].encode()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(name)))
        self.end_headers()
        self.wfile.write(name)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer((ip, 8080), Handler).serve_forever()
"#;

/// Process node `i` of the test: its pods' address is `127.0.32.<i + 1>`.
fn process_node_ip(i: usize) -> String {
    format!("127.0.32.{}", i + 1)
}

/// Start process node `vk-web-<i>` on `cluster`: pods are real processes
/// with the node's own loopback address.
async fn start_process_node(
    cluster: &TestCluster,
    i: usize,
    root: &std::path::Path,
    stopped: watch::Receiver<bool>,
) {
    let mut config = stratus_provider_process::ProcessConfig::new(root.join(i.to_string()));
    config.pod_ip = process_node_ip(i);
    let provider = stratus_provider_process::ProcessProvider::new(config);
    let node = stratus_testing::kubelet_api::virtual_node_with_api(
        cluster.server(),
        stratus_kubelet::node::NodeConfig::new(format!("vk-web-{i}"), "process"),
        Arc::new(provider) as Arc<dyn stratus_pod::PodLifecycleHandler>,
    )
    .await
    .unwrap();
    tokio::spawn(node.run(stopped));
}

/// Create pod `name` of the app `web` on process node `i`: `POD_SERVER`
/// with a readiness probe, and a `preStop` sleep that keeps it serving
/// while its endpoint is taken out, as a rolling update's pods do.
async fn create_process_pod(pods: &Api<Pod>, name: &str, i: usize) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {
            "nodeName": format!("vk-web-{i}"),
            "terminationGracePeriodSeconds": 10,
            "containers": [{
                "name": "server", "image": "python:3",
                "command": ["python3", "-c", POD_SERVER, "$(POD_IP)", "$(POD_NAME)"],
                "env": [
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                ],
                "ports": [{"containerPort": 8080}],
                "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
                "lifecycle": {"preStop": {"exec": {"command": ["sleep", "3"]}}},
            }],
        },
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
}

/// Whether pod `name` is Ready.
async fn pod_ready(pods: &Api<Pod>, name: &str) -> bool {
    pods.get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|p| p.status?.conditions)
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// `kubectl create service loadbalancer web --tcp=80:8080` (selector
/// `app=web`), or the same Service through the API where kubectl is not
/// installed.
async fn kubectl_create_web_service(kubeconfig: &std::path::Path, services: &Api<Service>) {
    let out = std::process::Command::new("kubectl")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args([
            "-n",
            "default",
            "create",
            "service",
            "loadbalancer",
            "web",
            "--tcp=80:8080",
        ])
        .output();
    match out {
        Ok(out) => assert!(
            out.status.success(),
            "kubectl: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("kubectl is not installed: the Service is created through the API");
            let svc: Service = serde_json::from_value(json!({
                "metadata": {"name": "web"},
                "spec": {"type": "LoadBalancer", "selector": {"app": "web"},
                         "ports": [{"name": "80-8080", "port": 80, "targetPort": 8080}]}
            }))
            .unwrap();
            services.create(&PostParams::default(), &svc).await.unwrap();
        }
        Err(e) => panic!("kubectl: {e}"),
    }
}

/// `kubectl_create_web_service`, then its external address once it has
/// one, and which pods answered requests through it until three had (or
/// 30 s passed).
async fn kubectl_exposed_web(
    kubeconfig: &std::path::Path,
    services: &Api<Service>,
) -> (SocketAddr, BTreeMap<String, u32>) {
    kubectl_create_web_service(kubeconfig, services).await;
    eventually("an external IP", WAIT, || async {
        ingress_ip(&services.get("web").await.unwrap()).is_some()
    })
    .await;
    let ip = ingress_ip(&services.get("web").await.unwrap())
        .unwrap()
        .to_owned();
    let address: SocketAddr = format!("{ip}:80").parse().unwrap();
    let mut seen = BTreeMap::<String, u32>::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.len() < 3 && Instant::now() < deadline {
        match page(address, "web").await {
            Ok(name) => *seen.entry(name).or_default() += 1,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    (address, seen)
}

/// The issue's end-to-end case on one machine: three process pods (real
/// Python servers, each on its node's own address) behind a LoadBalancer
/// Service created with kubectl; requests through the external IP reach
/// all three; a rolling restart (a new pod Ready, then an old one deleted,
/// out of the load balancer while its process still serves) fails none of
/// more than 1,000 requests; the Service deleted releases the address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_pods_behind_a_kubectl_created_service_restart_without_a_failed_request() {
    let (cluster, cloud, cloud_client, manager) =
        service_manager_on_a_cloud("127.77.32.0/24").await;
    let root = std::env::temp_dir().join(format!("stratus-local-process-{}", std::process::id()));
    let (stop_nodes, nodes_stopped) = watch::channel(false);
    for i in 0..6 {
        start_process_node(&cluster, i, &root, nodes_stopped.clone()).await;
    }

    // Three replicas on nodes 0-2, behind a Service made by kubectl.
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    for i in 0..3 {
        create_process_pod(&pods, &format!("web-a-{i}"), i).await;
    }
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    let (address, seen) = kubectl_exposed_web(&manager.kubeconfig, &services).await;
    // Requests are spread over the three.
    assert_eq!(
        seen.keys().collect::<Vec<_>>(),
        ["web-a-0", "web-a-1", "web-a-2"]
    );

    // Requests, one after the other, for the whole restart.
    let (done_tx, client) = requests_until_done(move || page(address, "web"));

    // The rolling restart, as a Deployment's (maxSurge 1, maxUnavailable
    // 0): a new pod Ready, then an old one deleted.
    for i in 0..3 {
        let new = format!("web-b-{i}");
        create_process_pod(&pods, &new, 3 + i).await;
        eventually(&format!("{new} Ready"), Duration::from_secs(30), || {
            pod_ready(&pods, &new)
        })
        .await;
        let old = format!("web-a-{i}");
        pods.delete(&old, &DeleteParams::default()).await.unwrap();
        // Out of the load balancer while its process still serves (its
        // preStop hook holds SIGTERM back for 3 s; it must be out within 2 s).
        eventually(
            &format!("{old} out of the load balancer"),
            Duration::from_secs(2),
            || async {
                !lb_backends(&cloud_client)
                    .await
                    .contains(&process_node_ip(i))
            },
        )
        .await;
        let direct: SocketAddr = format!("{}:8080", process_node_ip(i)).parse().unwrap();
        assert_eq!(page(direct, "web").await.as_deref(), Ok(old.as_str()));
        eventually(&format!("{old} gone"), Duration::from_secs(20), || async {
            matches!(pods.get_opt(&old).await, Ok(None))
        })
        .await;
    }
    let _ = done_tx.send(true);
    let (answers, failed) = client.await.unwrap();
    assert_none_failed(&answers, &failed);
    let mut backends = lb_backends(&cloud_client).await;
    backends.sort();
    assert_eq!(
        backends,
        [process_node_ip(3), process_node_ip(4), process_node_ip(5)]
    );

    // The Service deleted: the address is released, nothing listens on it.
    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the load balancer deleted", WAIT, || async {
        cloud_client
            .list_all::<stratus_local_cloud::api::LoadBalancer>("/v1/load-balancers")
            .await
            .is_ok_and(|l| l.is_empty())
    })
    .await;
    assert!(TcpStream::connect(address).await.is_err());

    for i in 0..3 {
        pods.delete(&format!("web-b-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    eventually("the pods gone", Duration::from_secs(30), || async {
        pods.list(&Default::default())
            .await
            .is_ok_and(|l| l.items.is_empty())
    })
    .await;
    let _ = stop_nodes.send(true);
    manager.stop().await;
    cloud.stop().await;
    let _ = std::fs::remove_dir_all(&root);
}

/// Pods with addresses of their own from their nodes' pod CIDRs: the
/// manager's node-IPAM controller gives each process node a CIDR of
/// `198.19.32.0/20`, the node learns it by following its Node, its pods get
/// addresses from it; the route controller sends each CIDR to its node in
/// the local cloud, which programs it into the kernel, so the pods' servers
/// can bind those addresses; the load balancer of a kubectl-created Service
/// reaches every pod at its own address. The routes leave the kernel with
/// the cloud.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_get_addresses_from_their_node_s_pod_cidr_joined_by_the_cloud_s_routes() {
    const POD_NETWORK: &str = "198.19.32.0/20";
    // Whatever happens, the routes of this test's pod network go.
    struct Cleanup;
    impl Drop for Cleanup {
        fn drop(&mut self) {
            for third in 32..48 {
                let _ = std::process::Command::new("ip")
                    .args([
                        "-4",
                        "route",
                        "del",
                        "local",
                        &format!("198.19.{third}.0/24"),
                    ])
                    .args(["dev", "lo", "table", "local"])
                    .stderr(std::process::Stdio::null())
                    .status();
            }
        }
    }
    let _cleanup = Cleanup;
    let config = Config {
        address_range: "127.77.34.0/24".parse().unwrap(),
        pod_network: Some(POD_NETWORK.parse().unwrap()),
        ..Config::default()
    };
    let (cluster, cloud, cloud_client, manager) = manager_on_a_cloud(
        config,
        "service,route,node-ipam",
        &[
            &format!("--cluster-cidr={POD_NETWORK}"),
            "--allocate-node-cidrs",
            "--route-reconciliation-period=1s",
        ],
    )
    .await;

    let root = std::env::temp_dir().join(format!("stratus-local-cidr-{}", std::process::id()));
    let (stop_nodes, nodes_stopped) = watch::channel(false);
    for i in 0..2 {
        let mut config = stratus_provider_process::ProcessConfig::new(root.join(i.to_string()));
        config.pod_network = stratus_provider_process::PodNetwork::PodCidr(Default::default());
        let host = stratus_provider_process::HostNode::new(&config);
        let provider = stratus_provider_process::ProcessProvider::new(config);
        let node = stratus_testing::kubelet_api::virtual_node_builder_with_api(
            cluster.server(),
            stratus_kubelet::node::NodeConfig::new(format!("vk-web-{i}"), "process"),
            Arc::new(provider) as Arc<dyn stratus_pod::PodLifecycleHandler>,
        )
        .await
        .unwrap()
        .node_provider(Arc::new(host))
        .build()
        .unwrap();
        tokio::spawn(node.run(nodes_stopped.clone()));
    }
    // Two replicas on node 0, one on node 1.
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    for (name, node) in [("web-0", 0), ("web-1", 0), ("web-2", 1)] {
        create_process_pod(&pods, name, node).await;
    }
    for name in ["web-0", "web-1", "web-2"] {
        eventually(&format!("{name} Ready"), Duration::from_secs(30), || {
            pod_ready(&pods, name)
        })
        .await;
    }
    // Each pod's address is its own, from its node's CIDR.
    let nodes: Api<Node> = Api::all(cluster.client());
    let mut ips = Vec::new();
    for name in ["web-0", "web-1", "web-2"] {
        let pod = pods.get(name).await.unwrap();
        let node_name = pod.spec.unwrap().node_name.unwrap();
        let status = pod.status.unwrap();
        let ip = status.pod_ip.unwrap();
        let cidr = nodes
            .get(&node_name)
            .await
            .unwrap()
            .spec
            .unwrap()
            .pod_cidr
            .unwrap();
        let (network, _) = cidr.split_once('/').unwrap();
        assert_eq!(
            ip.rsplit_once('.').unwrap().0,
            network.rsplit_once('.').unwrap().0,
            "{name}'s {ip} is in {node_name}'s {cidr}"
        );
        assert_ne!(status.host_ip.as_deref(), Some(ip.as_str()));
        // Its server answers at its own address.
        let direct: SocketAddr = format!("{ip}:8080").parse().unwrap();
        assert_eq!(page(direct, "web").await.as_deref(), Ok(name));
        ips.push(ip);
    }
    let unique: std::collections::BTreeSet<_> = ips.iter().collect();
    assert_eq!(unique.len(), 3, "{ips:?}");
    let routes: Vec<stratus_local_cloud::api::Route> =
        cloud_client.list_all("/v1/routes").await.unwrap();
    let mut targets: Vec<_> = routes.iter().map(|r| r.target_node.as_str()).collect();
    targets.sort();
    assert_eq!(targets, ["vk-web-0", "vk-web-1"]);

    // Through the load balancer of a Service made by kubectl: all three.
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    let (_, seen) = kubectl_exposed_web(&manager.kubeconfig, &services).await;
    assert_eq!(seen.keys().collect::<Vec<_>>(), ["web-0", "web-1", "web-2"]);
    let mut backends = lb_backends(&cloud_client).await;
    backends.sort();
    ips.sort();
    assert_eq!(
        backends, ips,
        "the load balancer goes to the pods' own addresses"
    );

    for name in ["web-0", "web-1", "web-2"] {
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }
    eventually("the pods gone", Duration::from_secs(30), || async {
        pods.list(&Default::default())
            .await
            .is_ok_and(|l| l.items.is_empty())
    })
    .await;
    let _ = stop_nodes.send(true);
    manager.stop().await;
    cloud.stop().await;
    let gone = std::net::TcpListener::bind((ips[0].as_str(), 0)).is_err();
    assert!(gone, "the cloud's routes left the kernel with it");
    let _ = std::fs::remove_dir_all(&root);
}

/// kube-proxy's answer on a Service's `healthCheckNodePort`, as a node's
/// stand-in gives it: 200 while `local` (the node has a ready endpoint of
/// the Service), 503 otherwise.
async fn health_check_server(
    ip: &str,
    port: u16,
    local: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    let listener = tokio::net::TcpListener::bind((ip, port)).await.unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let local = local.load(std::sync::atomic::Ordering::Relaxed);
            tokio::spawn(async move {
                let mut head = [0u8; 1024];
                let _ = s.read(&mut head).await;
                let (status, count) = if local {
                    ("200 OK", 1)
                } else {
                    ("503 Service Unavailable", 0)
                };
                let body = format!(r#"{{"localEndpoints":{count}}}"#);
                let _ = s
                    .write_all(
                        format!(
                            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        )
                        .as_bytes(),
                    )
                    .await;
            });
        }
    })
}

/// Which nodes' servers answer 20 connections through `address`.
async fn answering(address: SocketAddr) -> std::collections::BTreeSet<String> {
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..20 {
        seen.insert(fetch(address).await.unwrap_or_default());
    }
    seen
}

/// `externalTrafficPolicy: Local` with the nodes as backends (`backends:
/// nodePorts`): the load balancer health-checks each node on the Service's
/// `healthCheckNodePort` (allocated by the API server) as clouds do, and
/// sends connections only to the nodes that answer 200, following a change
/// of answer; with the policy back to `Cluster` the check is gone and both
/// nodes get connections again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_traffic_policy_service_reaches_only_the_nodes_whose_health_check_passes() {
    local_traffic_policy(
        stratus_local_cloud::Forwarding::Proxy,
        "127.77.22.0/24",
        ["127.0.22.1", "127.0.22.2"],
    )
    .await;
}

/// The same with the kernel forwarding the connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_kernel_forwarding_a_local_traffic_policy_service_reaches_only_healthy_nodes() {
    local_traffic_policy(
        stratus_local_cloud::Forwarding::Kernel,
        "127.77.23.0/24",
        ["127.0.23.1", "127.0.23.2"],
    )
    .await;
}

async fn local_traffic_policy(
    forwarding: stratus_local_cloud::Forwarding,
    range: &str,
    ips: [&str; 2],
) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let cluster = TestCluster::start().await.unwrap();
    let mut kubelets = Vec::new();
    for (name, ip) in ["a", "b"].iter().zip(ips) {
        let mut spec = NodeSpec::new(*name)
            .with_internal_ip(ip)
            .with_heartbeat(Duration::from_secs(3600));
        spec.external_cloud_provider = false;
        kubelets.push(cluster.add_node(spec).await.unwrap());
    }
    let cloud = LocalCloud::start(Config {
        address_range: range.parse().unwrap(),
        health_interval: Duration::from_millis(100),
        connect_timeout: Duration::from_millis(300),
        forwarding,
        ..Config::default()
    })
    .await
    .unwrap();
    let provider = LocalProvider::from_config(Some(
        format!("endpoint: http://{}\n", cloud.addr()).as_bytes(),
    ))
    .unwrap();
    let cloud_client = provider.client().clone();
    let manager = start_manager(&cluster, provider, "service").await;

    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                 "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}
    }))
    .unwrap();
    let svc = services.create(&PostParams::default(), &svc).await.unwrap();
    let spec = svc.spec.clone().unwrap();
    let node_port = u16::try_from(spec.ports.unwrap()[0].node_port.unwrap()).unwrap();
    let check_port = u16::try_from(spec.health_check_node_port.expect("allocated")).unwrap();
    let local = [
        Arc::new(AtomicBool::new(true)),
        Arc::new(AtomicBool::new(false)),
    ];
    let _servers = [
        named_server(ips[0], node_port, "a").await,
        named_server(ips[1], node_port, "b").await,
        health_check_server(ips[0], check_port, local[0].clone()).await,
        health_check_server(ips[1], check_port, local[1].clone()).await,
    ];
    eventually("an external IP", WAIT, || async {
        ingress_ip(&services.get("web").await.unwrap()).is_some()
    })
    .await;
    let ip = ingress_ip(&services.get("web").await.unwrap())
        .unwrap()
        .to_owned();
    let address: SocketAddr = format!("{ip}:80").parse().unwrap();
    let name = stratus_cloud::helpers::default_load_balancer_name(&svc);
    let lb: serde_json::Value = cloud_client
        .call(
            http::Method::GET,
            &format!("/v1/load-balancers/{name}"),
            None::<&()>,
        )
        .await
        .unwrap();
    assert_eq!(lb["healthCheck"]["port"], check_port);
    assert_eq!(lb["healthCheck"]["path"], "/healthz");
    assert_eq!(lb["listeners"][0]["backends"].as_array().unwrap().len(), 2);

    // Only node a has an endpoint: every connection goes to a.
    eventually("only a answers", WAIT, || async {
        answering(address).await == ["a".to_owned()].into()
    })
    .await;
    // The endpoint moves to b: so do the connections.
    local[0].store(false, Ordering::Relaxed);
    local[1].store(true, Ordering::Relaxed);
    eventually("only b answers", WAIT, || async {
        answering(address).await == ["b".to_owned()].into()
    })
    .await;

    // The policy goes back to Cluster: no health check, both nodes serve
    // (each node forwards to the endpoints, wherever they are).
    local[1].store(false, Ordering::Relaxed);
    services
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"externalTrafficPolicy": "Cluster"}})),
        )
        .await
        .unwrap();
    eventually("a and b answer", WAIT, || async {
        answering(address).await == ["a".to_owned(), "b".to_owned()].into()
    })
    .await;
    let lb: serde_json::Value = cloud_client
        .call(
            http::Method::GET,
            &format!("/v1/load-balancers/{name}"),
            None::<&()>,
        )
        .await
        .unwrap();
    assert!(lb.get("healthCheck").is_none(), "{lb}");
    manager.stop().await;
    cloud.stop().await;
}
