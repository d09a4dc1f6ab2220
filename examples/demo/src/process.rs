//! The demo's process node: `vk-process` runs pods as real processes
//! (`stratus-provider-process`), and `demo/hello-process` is a Python HTTP
//! server on the host's loopback whose log and port the demo reads through
//! the API server, as `kubectl logs` and `kubectl port-forward` do.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use stratus_kubelet::node::NodeConfig;
use stratus_kubelet::resources::ApiResources;
use stratus_provider_process::{ProcessConfig, ProcessProvider};
use stratus_testing::kubelet_api::{KubeletApiSite, virtual_node_builder_at};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

/// The process node's name.
pub(crate) const PROCESS_NODE: &str = "vk-process";
/// The pod the demo runs on it.
pub(crate) const PROCESS_POD: &str = "hello-process";

/// The running process node and the port its pod serves.
pub(crate) struct ProcessDemo {
    /// The node's task.
    pub(crate) task: tokio::task::JoinHandle<Result<(), stratus_kubelet::VirtualNodeError>>,
    /// The loopback port of the HTTP server.
    pub(crate) port: u16,
    /// The node's pod directory, removed with the pod.
    root: std::path::PathBuf,
}

/// Start `vk-process` at `site` and create its pod in `namespace`. With a
/// `node_address` (the real control plane, whose EndpointSlices refuse
/// loopback addresses) the node's pods have that address and the server
/// listens on every address; without, they have 127.0.0.1 and it listens
/// there.
pub(crate) async fn start(
    site: &KubeletApiSite,
    namespace: &str,
    node_address: Option<&str>,
    stopped: watch::Receiver<bool>,
) -> Result<ProcessDemo, String> {
    let root = std::env::temp_dir().join(format!("stratus-demo-process-{}", std::process::id()));
    let mut config = ProcessConfig::new(&root);
    if let Some(address) = node_address {
        config.pod_ip = address.to_owned();
    }
    let bind = if node_address.is_some() {
        "0.0.0.0"
    } else {
        "127.0.0.1"
    };
    config
        .images
        .insert("python".into(), vec!["python3".into()]);
    // As `cargo xtask apiserver --process-node`: busybox commands run
    // through the host's shell (the kubectl checks use them).
    config
        .images
        .insert("busybox".into(), vec!["sh".into(), "-c".into()]);
    let capacity = config.host_capacity();
    // The node's ConfigMaps and Secrets (pods on a real control plane
    // mount the `kube-root-ca.crt` ConfigMap through their
    // ServiceAccount's projected volume).
    let resources: Arc<dyn stratus_pod::PodResources> = Arc::new(ApiResources::new(
        site.client.clone(),
        Duration::from_secs(60),
    ));
    let provider = Arc::new(
        ProcessProvider::new(config)
            .with_node_name(PROCESS_NODE)
            .with_resources(resources.clone()),
    );
    let mut node_config = NodeConfig::new(PROCESS_NODE, stratus_provider_process::PROVIDER_NAME);
    node_config.capacity = capacity;
    node_config.labels.insert(
        "node.kubernetes.io/exclude-from-external-load-balancers".into(),
        "true".into(),
    );
    let node = virtual_node_builder_at(site, node_config, provider)
        .await
        .and_then(|b| Ok(b.resources(resources).build()?))
        .map_err(|e| format!("the process node: {e}"))?;
    let task = tokio::spawn(node.run(stopped));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free port: {e}"))?
        .port();
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": PROCESS_POD, "labels": {"app": "hello-process"}},
        "spec": {
            "nodeName": PROCESS_NODE,
            "terminationGracePeriodSeconds": 2,
            "containers": [{
                "name": "server", "image": "python:3",
                "args": ["-u", "-m", "http.server", port.to_string(), "--bind", bind],
            }],
        },
    }))
    .map_err(|e| e.to_string())?;
    Api::<Pod>::namespaced(site.client.clone(), namespace)
        .create(&PostParams::default(), &pod)
        .await
        .map_err(|e| format!("creating {PROCESS_POD}: {e}"))?;
    Ok(ProcessDemo { task, port, root })
}

impl ProcessDemo {
    /// Delete the pod and wait until its processes are gone (the node's
    /// processes would otherwise outlive the demo).
    pub(crate) async fn delete_pod(&self, pods: &Api<Pod>) {
        let _ = pods.delete(PROCESS_POD, &Default::default()).await;
        for _ in 0..100 {
            if matches!(pods.get_opt(PROCESS_POD).await, Ok(None)) {
                let _ = std::fs::remove_dir_all(&self.root);
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eprintln!("warning: {PROCESS_POD} was not deleted within 10s");
    }

    /// Wait for the pod to run, then read its log and one page through a
    /// port-forward: the summary line, or why not.
    pub(crate) async fn check(&self, pods: &Api<Pod>, wait: Duration) -> Result<String, String> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let running = pods
                .get_opt(PROCESS_POD)
                .await
                .ok()
                .flatten()
                .and_then(|p| p.status?.phase)
                .is_some_and(|p| p == "Running");
            let listening = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok();
            if running && listening {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!("{PROCESS_POD} did not run within {wait:?}"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let mut forwarder = pods
            .portforward(PROCESS_POD, &[self.port])
            .await
            .map_err(|e| format!("port-forward: {e}"))?;
        let mut stream = forwarder
            .take_stream(self.port)
            .ok_or("port-forward: no stream")?;
        stream
            .write_all(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .await
            .map_err(|e| format!("port-forward: {e}"))?;
        let mut answer = vec![0u8; 64];
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut answer))
            .await
            .map_err(|_| "port-forward: no answer within 10s".to_string())?
            .map_err(|e| format!("port-forward: {e}"))?;
        forwarder.abort();
        let status_line = String::from_utf8_lossy(&answer[..read])
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned();
        if !status_line.starts_with("HTTP/1.0 200") {
            return Err(format!("port-forward: the server answered {status_line:?}"));
        }
        // The server logs each request on stderr; give it a moment.
        let mut log = String::new();
        for _ in 0..20 {
            log = pods
                .logs(PROCESS_POD, &Default::default())
                .await
                .map_err(|e| format!("logs: {e}"))?;
            if log.contains("\"GET / HTTP/1.0\" 200") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let last = log.lines().last().unwrap_or_default().to_owned();
        if !last.contains("\"GET / HTTP/1.0\" 200") {
            return Err(format!("logs: the request is not in the log: {log:?}"));
        }
        Ok(format!(
            "port {} answered {status_line:?}; its log: {last:?}",
            self.port
        ))
    }
}
