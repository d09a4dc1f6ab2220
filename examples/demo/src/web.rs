//! The demo's web app on the local cloud: three process nodes whose pods
//! get addresses of their own from the node's pod CIDR (the manager's
//! node-IPAM gives each node one of 198.19.0.0/19, its route controller
//! sends it to the node in the local cloud, which writes it into the
//! kernel), and a Deployment of three replicas of a Python server (HTTP on
//! 8080 and UDP on 8081, both answering with the pod's name; one per node:
//! they select the web nodes and hold host port 8080), exposed with
//! `kubectl expose deployment --type=LoadBalancer` and a UDP port added
//! with `kubectl patch`. The demo then spreads requests over the replicas,
//! sends a datagram, restarts them with `kubectl rollout restart` under
//! load (each old replica out of the load balancer before its process
//! stops), and deletes the Service (its address released). The
//! Deployment's ReplicaSets and pods come from kube-controller-manager on
//! the real control plane, from the harness's Deployment controller
//! (`TestCluster::start_deployments`) on the harness.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use stratus_cloud::helpers::ingress_ip;
use stratus_kubelet::node::NodeConfig;
use stratus_kubelet::resources::ApiResources;
use stratus_provider_process::{HostNode, PodNetwork, ProcessConfig, ProcessProvider};
use stratus_testing::http_status::page;
use stratus_testing::kubelet_api::{KubeletApiSite, virtual_node_builder_at};
use tokio::sync::watch;

use crate::local_cloud::LocalCloudDemo;

/// The app's name: its pods' `app` label and its Service.
pub(crate) const APP: &str = "hello-web";
/// Replicas, one per process node.
const REPLICAS: usize = 3;
/// Requests the rolling restart is measured over, at least.
const RESTART_REQUESTS: u64 = 1_000;

/// Each replica's server: HTTP on 8080 and UDP on 8081 of `$(POD_IP)`,
/// both answering with the pod's name.
const SERVER: &str = r#"
import http.server, socket, sys, threading
ip, name = sys.argv[1], sys.argv[2].encode()
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((ip, 8081))
    while True:
        _, peer = s.recvfrom(2048)
        s.sendto(name, peer)
threading.Thread(target=udp, daemon=True).start()
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

/// The web app's nodes.
pub(crate) struct WebDemo {
    tasks: Vec<tokio::task::JoinHandle<Result<(), stratus_kubelet::VirtualNodeError>>>,
    root: PathBuf,
}

/// Web node `i`'s own address (its pods' `status.hostIP`; their own
/// addresses come from the node's pod CIDR): one of the loopback's.
fn node_address(i: usize) -> String {
    format!("127.0.78.{}", i + 1)
}

/// The name of web node `i`.
fn node_name(i: usize) -> String {
    format!("vk-web-{i}")
}

/// Start the web nodes at `site` and create the replicas in `namespace`.
pub(crate) async fn start(
    site: &KubeletApiSite,
    namespace: &str,
    stopped: watch::Receiver<bool>,
) -> Result<WebDemo, String> {
    let root = std::env::temp_dir().join(format!("stratus-demo-web-{}", std::process::id()));
    let mut demo = WebDemo {
        tasks: Vec::new(),
        root,
    };
    for i in 0..REPLICAS {
        let mut config = ProcessConfig::new(demo.root.join(node_name(i)));
        config.pod_ip = node_address(i);
        config.pod_network = PodNetwork::PodCidr(Default::default());
        let host = HostNode::new(&config);
        config
            .images
            .insert("python".into(), vec!["python3".into()]);
        let capacity = config.host_capacity();
        // ConfigMaps and Secrets (on a real control plane every pod mounts
        // `kube-root-ca.crt` through its ServiceAccount's projected volume).
        let resources: Arc<dyn stratus_pod::PodResources> = Arc::new(ApiResources::new(
            site.client.clone(),
            Duration::from_secs(60),
        ));
        let provider = Arc::new(
            ProcessProvider::new(config)
                .with_node_name(node_name(i))
                .with_resources(resources.clone()),
        );
        let mut node_config =
            NodeConfig::new(node_name(i), stratus_provider_process::PROVIDER_NAME);
        node_config.capacity = capacity;
        node_config.labels.insert(
            "node.kubernetes.io/exclude-from-external-load-balancers".into(),
            "true".into(),
        );
        node_config
            .labels
            .insert(WEB_NODE_LABEL.into(), "true".into());
        let node = virtual_node_builder_at(site, node_config, provider)
            .await
            .and_then(|b| {
                Ok(b.resources(resources)
                    .node_provider(Arc::new(host))
                    .build()?)
            })
            .map_err(|e| format!("the web node {}: {e}", node_name(i)))?;
        demo.tasks.push(tokio::spawn(node.run(stopped.clone())));
    }
    {
        let deployment: Deployment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": APP},
            "spec": {
                "replicas": REPLICAS,
                "selector": {"matchLabels": {"app": APP}},
                // One node's replica down at a time: a new one can only
                // take the node (its host port) once the old one is gone.
                "strategy": {"type": "RollingUpdate",
                             "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
                "template": {
                    "metadata": {"labels": {"app": APP}},
                    "spec": replica_spec(),
                },
            },
        }))
        .map_err(|e| e.to_string())?;
        Api::<Deployment>::namespaced(site.client.clone(), namespace)
            .create(&PostParams::default(), &deployment)
            .await
            .map_err(|e| format!("creating the Deployment {APP}: {e}"))?;
    }
    Ok(demo)
}

/// The label of the web nodes, which the Deployment's pods select.
const WEB_NODE_LABEL: &str = "stratus.dev/demo-web";

/// The replicas' pod spec, on any web node with host port 8080 free: the
/// server with a readiness probe, and a `preStop` sleep that keeps it
/// serving while its endpoint is taken out of the load balancer.
fn replica_spec() -> serde_json::Value {
    let mut http = serde_json::json!({"name": "http", "containerPort": 8080});
    let mut spec = serde_json::json!({
        "terminationGracePeriodSeconds": 10,
        "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{
            "name": "server", "image": "python:3",
            "args": ["-c", SERVER, "$(POD_IP)", "$(POD_NAME)"],
            "env": [
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            ],
            "ports": [],
            "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
            "lifecycle": {"preStop": {"exec": {"command": ["sleep", "3"]}}},
        }],
    });
    spec["nodeSelector"] = serde_json::json!({WEB_NODE_LABEL: "true"});
    // The scheduler puts one replica on each node.
    http["hostPort"] = 8080.into();
    spec["containers"][0]["ports"] = serde_json::json!([
        http,
        {"name": "udp", "containerPort": 8081, "protocol": "UDP"},
    ]);
    spec
}

/// The app's pods that are Ready and not terminating.
async fn ready_replicas(pods: &Api<Pod>) -> Vec<Pod> {
    let listed = pods
        .list(&ListParams::default().labels(&format!("app={APP}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    listed
        .into_iter()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .collect()
}

/// Wait until `done` holds, checking every 50 ms, or fail saying `what`.
async fn wait_for<F, Fut>(what: &str, within: Duration, mut done: F) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !done().await {
        if Instant::now() > deadline {
            return Err(format!("{what}: not within {within:?}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Wait until `found` gives a value, trying every 50 ms, or fail saying
/// `what`.
async fn wait_value<T, F, Fut>(what: &str, within: Duration, mut found: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = found().await {
            return Ok(value);
        }
        if Instant::now() > deadline {
            return Err(format!("{what}: not within {within:?}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Run `kubectl ARGS` with `kubeconfig` in `namespace`: `Ok(None)` when
/// kubectl is not installed.
fn kubectl(kubeconfig: &Path, namespace: &str, args: &[&str]) -> Result<Option<()>, String> {
    match std::process::Command::new("kubectl")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(["-n", namespace])
        .args(args)
        .output()
    {
        Ok(out) if out.status.success() => Ok(Some(())),
        Ok(out) => Err(format!(
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("kubectl: {e}")),
    }
}

/// One datagram to `addr`: the answer, or why none came.
async fn udp_exchange(addr: SocketAddr) -> Result<String, String> {
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    socket
        .send_to(b"ping", addr)
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = [0u8; 2048];
    let (n, _) = tokio::time::timeout(Duration::from_secs(1), socket.recv_from(&mut buf))
        .await
        .map_err(|_| "no answer within 1 s".to_owned())?
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// The IPs of the app's pods, sorted.
async fn pod_ips(pods: &Api<Pod>) -> Result<Vec<String>, String> {
    let labelled = ListParams::default().labels(&format!("app={APP}"));
    let mut ips: Vec<String> = pods
        .list(&labelled)
        .await
        .map_err(|e| format!("listing {APP}'s pods: {e}"))?
        .items
        .into_iter()
        .filter_map(|p| p.status?.pod_ip)
        .collect();
    ips.sort();
    Ok(ips)
}

/// The backend addresses of the load balancer at `ip`.
async fn backends(cloud: &LocalCloudDemo, ip: &str) -> Result<Vec<String>, String> {
    Ok(cloud
        .load_balancers()
        .await?
        .into_iter()
        .filter(|lb| lb.address == ip)
        .flat_map(|lb| lb.spec.listeners)
        .flat_map(|l| l.backends)
        .map(|b| b.address)
        .collect())
}

impl WebDemo {
    /// The app's whole story (see the module docs): the summary lines, or
    /// what failed.
    pub(crate) async fn run(
        &self,
        client: &kube::Client,
        kubeconfig: &Path,
        namespace: &str,
        cloud: &LocalCloudDemo,
    ) -> Result<Vec<String>, String> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let services: Api<Service> = Api::namespaced(client.clone(), namespace);
        let mut lines = Vec::new();
        if let Err(e) = wait_for(
            &format!("{REPLICAS} replicas Ready"),
            Duration::from_secs(60),
            || async { ready_replicas(&pods).await.len() == REPLICAS },
        )
        .await
        {
            let listed = pods
                .list(&ListParams::default().labels(&format!("app={APP}")))
                .await
                .map(|l| {
                    l.items
                        .into_iter()
                        .map(|p| (p.metadata.name, p.status))
                        .collect::<Vec<_>>()
                });
            return Err(format!("{e}; the pods: {listed:?}"));
        }

        // Each web node's pod CIDR (node-ipam) has its route in the cloud
        // (node-route), which wrote it into the kernel: how the replicas
        // could bind their addresses.
        let routes = cloud.routes().await?;
        let nodes: Api<Node> = Api::all(client.clone());
        let mut routed = Vec::new();
        for i in 0..REPLICAS {
            let name = node_name(i);
            let cidr = nodes
                .get(&name)
                .await
                .map_err(|e| format!("reading {name}: {e}"))?
                .spec
                .and_then(|s| s.pod_cidr)
                .ok_or_else(|| format!("{name} has no pod CIDR"))?;
            if !routes
                .iter()
                .any(|r| r.target_node == name && r.destination_cidr == cidr)
            {
                return Err(format!("{name}'s pod CIDR {cidr} has no route: {routes:?}"));
            }
            routed.push(format!("{name} {cidr}"));
        }
        lines.push(format!(
            "pod CIDRs (node-ipam) routed to their nodes (node-route) by the local cloud into this machine's kernel: {} ({} routes in all)",
            routed.join(", "),
            routes.len()
        ));

        // The Service, by kubectl (through the API where it is missing).
        let created = Instant::now();
        let (command, args): (&str, &[&str]) = (
            "kubectl expose deployment",
            &[
                "expose",
                "deployment",
                APP,
                "--type=LoadBalancer",
                "--port=80",
                "--target-port=8080",
            ],
        );
        let how = match kubectl(kubeconfig, namespace, args)? {
            Some(()) => command,
            None => {
                let svc: Service = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": APP},
                    "spec": {"type": "LoadBalancer", "selector": {"app": APP},
                             "ports": [{"name": "80-8080", "port": 80, "targetPort": 8080}]}
                }))
                .map_err(|e| e.to_string())?;
                services
                    .create(&PostParams::default(), &svc)
                    .await
                    .map_err(|e| format!("creating {APP}: {e}"))?;
                "the API (kubectl is not installed)"
            }
        };
        let ip = wait_value("an external IP", Duration::from_secs(30), || async {
            services
                .get_opt(APP)
                .await
                .ok()
                .flatten()
                .as_ref()
                .and_then(ingress_ip)
                .map(str::to_owned)
        })
        .await?;
        let external_ip_after = created.elapsed();
        let address: SocketAddr = format!("{ip}:80")
            .parse()
            .map_err(|e| format!("{ip}: {e}"))?;

        // Spread: one request after the other, counted per replica.
        let mut answers = BTreeMap::<String, u32>::new();
        wait_for(
            "a page through the external IP",
            Duration::from_secs(30),
            || async { page(address, "demo").await.is_ok() },
        )
        .await?;
        for _ in 0..30 {
            *answers.entry(page(address, "demo").await?).or_default() += 1;
        }
        if answers.len() != REPLICAS {
            return Err(format!(
                "30 GETs through {address} reached {} of {REPLICAS} replicas: {answers:?}",
                answers.len()
            ));
        }
        lines.push(format!(
            "{APP} ({REPLICAS} replicas on vk-web-0..2, pod IPs {} from their nodes' pod CIDRs) exposed with {how}: external IP {ip} after {:.0} ms; 30 GETs answered by {answers:?}",
            pod_ips(&pods).await?.join(", "),
            external_ip_after.as_secs_f64() * 1000.0
        ));

        // UDP: a port added with kubectl patch (with two ports, each needs
        // a name), one datagram through it.
        let udp_port = serde_json::json!([
            {"op": "add", "path": "/spec/ports/0/name", "value": "http"},
            {"op": "add", "path": "/spec/ports/-",
             "value": {"name": "udp", "port": 53, "protocol": "UDP", "targetPort": 8081}},
        ]);
        let udp_how = match kubectl(
            kubeconfig,
            namespace,
            &[
                "patch",
                "service",
                APP,
                "--type=json",
                "-p",
                &udp_port.to_string(),
            ],
        )? {
            Some(()) => "kubectl patch",
            None => {
                // A merge patch replaces the list: both ports.
                let ports = serde_json::json!({"spec": {"ports": [
                    {"name": "http", "port": 80, "targetPort": 8080},
                    {"name": "udp", "port": 53, "protocol": "UDP", "targetPort": 8081},
                ]}});
                services
                    .patch(APP, &PatchParams::default(), &Patch::Merge(&ports))
                    .await
                    .map_err(|e| format!("patching {APP}: {e}"))?;
                "the API"
            }
        };
        let udp_address: SocketAddr = format!("{ip}:53")
            .parse()
            .map_err(|e| format!("{ip}: {e}"))?;
        let datagram = wait_value(
            "a UDP answer through port 53",
            Duration::from_secs(30),
            || async { udp_exchange(udp_address).await.ok() },
        )
        .await?;
        lines.push(format!(
            "UDP port 53 added with {udp_how}: a datagram to {udp_address} answered by {}",
            datagram
        ));

        // A rolling restart under requests one after the other.
        let (done_tx, done_rx) = watch::channel(false);
        let load = tokio::spawn(async move {
            let (mut ok, mut failed) = (0u64, Vec::new());
            while !*done_rx.borrow() || ok + (failed.len() as u64) < RESTART_REQUESTS {
                match page(address, "demo").await {
                    Ok(_) => ok += 1,
                    Err(e) => failed.push(e),
                }
            }
            (ok, failed)
        });
        let restart = rollout_restart(client, kubeconfig, namespace, cloud, &ip).await;
        let _ = done_tx.send(true);
        let (ok, failed) = load.await.map_err(|e| e.to_string())?;
        let restarted = restart?;
        let total = ok + failed.len() as u64;
        lines.push(format!(
            "{restarted}: {total} requests, {} failed",
            failed.len()
        ));
        if !failed.is_empty() {
            return Err(format!(
                "{} of {total} requests failed during the rolling restart: {:?}",
                failed.len(),
                &failed[..failed.len().min(3)]
            ));
        }

        // The Service deleted: the address released, nothing listening.
        match kubectl(kubeconfig, namespace, &["delete", "service", APP])? {
            Some(()) => {}
            None => {
                services
                    .delete(APP, &DeleteParams::default())
                    .await
                    .map_err(|e| format!("deleting {APP}: {e}"))?;
            }
        }
        wait_for(
            "the load balancer deleted",
            Duration::from_secs(30),
            || async {
                backends(cloud, &ip).await.is_ok_and(|b| b.is_empty())
                    && cloud
                        .load_balancers()
                        .await
                        .is_ok_and(|l| l.iter().all(|lb| lb.address != ip))
            },
        )
        .await?;
        if tokio::net::TcpStream::connect(address).await.is_ok() {
            return Err(format!(
                "{address} still accepts connections after the Service was deleted"
            ));
        }
        lines.push(format!(
            "{APP} deleted: its load balancer is gone and {address} refuses connections"
        ));
        Ok(lines)
    }

    /// Delete the replicas and the Service (after a failure), and wait
    /// until the pods' processes are gone.
    pub(crate) async fn delete(&self, client: &kube::Client, namespace: &str) {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let services: Api<Service> = Api::namespaced(client.clone(), namespace);
        let _ = services.delete(APP, &DeleteParams::default()).await;
        let _ = Api::<Deployment>::namespaced(client.clone(), namespace)
            .delete(APP, &DeleteParams::foreground())
            .await;
        let labelled = ListParams::default().labels(&format!("app={APP}"));
        if wait_for(
            &format!("{APP}'s pods deleted"),
            Duration::from_secs(60),
            || async { pods.list(&labelled).await.is_ok_and(|l| l.items.is_empty()) },
        )
        .await
        .is_err()
        {
            eprintln!("warning: {APP}'s pods were not deleted within 60s");
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }

    /// Wait for the nodes to stop (the demo's stop signal).
    pub(crate) async fn stop(mut self) -> Result<(), String> {
        let mut result = Ok(());
        for task in std::mem::take(&mut self.tasks) {
            if let Ok(Err(e)) = task.await {
                result = Err(format!("a web node stopped with an error: {e}"));
            }
        }
        result
    }
}

/// `kubectl rollout restart deployment/hello-web` (a template annotation
/// through the API where kubectl is missing), then watch it: each old pod,
/// once terminating, must be out of the load balancer while its process
/// still answers directly; done when the Deployment has its replicas
/// updated and available and the old pods are gone. What happened.
async fn rollout_restart(
    client: &kube::Client,
    kubeconfig: &Path,
    namespace: &str,
    cloud: &LocalCloudDemo,
    ip: &str,
) -> Result<String, String> {
    use std::collections::BTreeSet;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let old: BTreeSet<String> = ready_replicas(&pods)
        .await
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    let started = Instant::now();
    let how = match kubectl(
        kubeconfig,
        namespace,
        &["rollout", "restart", &format!("deployment/{APP}")],
    )? {
        Some(()) => "kubectl rollout restart",
        None => {
            let patch = serde_json::json!({"spec": {"template": {"metadata": {"annotations": {
                "kubectl.kubernetes.io/restartedAt": format!("{:?}", std::time::SystemTime::now()),
            }}}}});
            deployments
                .patch(APP, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| format!("restarting {APP}: {e}"))?;
            "a template annotation"
        }
    };
    let labelled = ListParams::default().labels(&format!("app={APP}"));
    let mut out_while_serving = BTreeSet::new();
    let deadline = started + Duration::from_secs(120);
    loop {
        let listed = pods
            .list(&labelled)
            .await
            .map_err(|e| format!("listing {APP}'s pods: {e}"))?
            .items;
        for pod in &listed {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let pod_ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone());
            if pod.metadata.deletion_timestamp.is_none()
                || !old.contains(&name)
                || out_while_serving.contains(&name)
            {
                continue;
            }
            let Some(pod_ip) = pod_ip else { continue };
            if backends(cloud, ip).await?.contains(&pod_ip) {
                continue;
            }
            let direct: SocketAddr = format!("{pod_ip}:8080")
                .parse()
                .map_err(|e| format!("{pod_ip}: {e}"))?;
            if page(direct, "demo")
                .await
                .is_ok_and(|answer| answer == name)
            {
                out_while_serving.insert(name);
            }
        }
        let rolled_out = deployments.get(APP).await.ok().is_some_and(|d| {
            let generation = d.metadata.generation.unwrap_or_default();
            d.status.is_some_and(|s| {
                s.observed_generation.unwrap_or_default() >= generation
                    && s.updated_replicas == Some(REPLICAS as i32)
                    && s.available_replicas == Some(REPLICAS as i32)
                    && s.replicas == Some(REPLICAS as i32)
            })
        });
        let old_gone = listed
            .iter()
            .all(|p| p.metadata.name.as_ref().is_none_or(|n| !old.contains(n)));
        if rolled_out && old_gone {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{how} of {APP}: not rolled out within 120 s ({} of {} old pods gone)",
                old.len()
                    - listed
                        .iter()
                        .filter(|p| p.metadata.name.as_ref().is_some_and(|n| old.contains(n)))
                        .count(),
                old.len()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if out_while_serving.len() != old.len() {
        return Err(format!(
            "{how}: only {} of {} old replicas were seen out of the load balancer while their process still served",
            out_while_serving.len(),
            old.len()
        ));
    }
    Ok(format!(
        "{how} of the Deployment {APP} (maxUnavailable 1; each old replica out of the load balancer while its process still served, its successor on the node it freed) in {:.1} s",
        started.elapsed().as_secs_f64()
    ))
}
