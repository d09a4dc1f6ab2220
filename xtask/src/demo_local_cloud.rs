//! The demo's cloud: `stratus-local-cloud` in this process, its instances
//! for the demo's nodes, and the `local` provider (load balancers straight
//! to the Services' ready endpoints) for the manager. At the end a process
//! pod is exposed with `kubectl expose --type=LoadBalancer` and a page is
//! fetched through the Service's external IP.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Method;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, PostParams};
use stratus_cloud::CloudProvider;
use stratus_local_cloud::api::{Address, Instance, InstanceState, LoadBalancer, Route};
use stratus_local_cloud::{Config, LocalCloud};
use stratus_provider_local::{Backends, Client, LocalProvider, RetryPolicy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The range the demo's load balancers get their addresses from (the
/// tests use 127.77.0.0/16).
const ADDRESS_RANGE: &str = "127.78.0.0/16";

/// The Service the demo creates with kubectl.
pub(crate) const EXPOSED: &str = "hello-lb";

/// The running cloud and a client of its API.
pub(crate) struct LocalCloudDemo {
    cloud: LocalCloud,
    client: Client,
}

/// Start the cloud with one instance per `(node name, internal IP)`.
/// Backends may be on this machine's loopback, and at `node_address` when
/// the process node's pods have that address (on the real control plane).
pub(crate) async fn start(
    nodes: &[(String, String)],
    node_address: Option<&str>,
) -> Result<LocalCloudDemo, String> {
    let mut allowed_backends = vec!["127.0.0.0/8".parse().map_err(|e| format!("{e}"))?];
    if let Some(address) = node_address {
        allowed_backends.push(
            format!("{address}/32")
                .parse()
                .map_err(|e| format!("{e}"))?,
        );
    }
    let cloud = LocalCloud::start(Config {
        address_range: ADDRESS_RANGE.parse().map_err(|e| format!("{e}"))?,
        allowed_backends,
        ..Config::default()
    })
    .await
    .map_err(|e| format!("the local cloud: {e}"))?;
    let client = Client::new(&format!("http://{}", cloud.addr()), RetryPolicy::default())
        .map_err(|e| e.to_string())?;
    for (i, (name, ip)) in nodes.iter().enumerate() {
        let instance = Instance {
            id: format!("i-{name}"),
            node_name: name.clone(),
            zone: format!("local-{}", ["a", "b", "c"][i % 3]),
            region: "local".into(),
            instance_type: "simulated".into(),
            addresses: vec![Address {
                kind: "InternalIP".into(),
                address: ip.clone(),
            }],
            state: InstanceState::Running,
        };
        client
            .call::<Instance>(
                Method::PUT,
                &format!("/v1/instances/i-{name}"),
                Some(&instance),
            )
            .await
            .map_err(|e| format!("registering {name} with the local cloud: {e}"))?;
    }
    Ok(LocalCloudDemo { cloud, client })
}

impl LocalCloudDemo {
    /// The `local` provider for the manager.
    pub(crate) fn provider(&self) -> Arc<dyn CloudProvider> {
        LocalProvider::new(self.client.clone())
            .with_backends(Backends::Endpoints)
            .into_dyn()
    }

    /// The cloud's API address.
    pub(crate) fn addr(&self) -> std::net::SocketAddr {
        self.cloud.addr()
    }

    /// The API calls the cloud answered, by kind.
    pub(crate) async fn calls(&self) -> Result<BTreeMap<String, u64>, String> {
        self.client
            .call(Method::GET, "/v1/calls", None::<&()>)
            .await
            .map_err(|e| e.to_string())
    }

    /// Every load balancer.
    pub(crate) async fn load_balancers(&self) -> Result<Vec<LoadBalancer>, String> {
        self.client
            .list_all("/v1/load-balancers")
            .await
            .map_err(|e| e.to_string())
    }

    /// Every route.
    pub(crate) async fn routes(&self) -> Result<Vec<Route>, String> {
        self.client
            .list_all("/v1/routes")
            .await
            .map_err(|e| e.to_string())
    }

    /// `kubectl expose pod POD --type=LoadBalancer` (through the API when
    /// kubectl is not installed), wait for the external IP and fetch `/`
    /// through it: the summary line, or why not.
    pub(crate) async fn expose_and_fetch(
        &self,
        client: &kube::Client,
        kubeconfig: &std::path::Path,
        namespace: &str,
        pod: &str,
        port: u16,
        wait: Duration,
    ) -> Result<String, String> {
        let created = Instant::now();
        let kubectl = std::process::Command::new("kubectl")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(["-n", namespace, "expose", "pod", pod, "--type=LoadBalancer"])
            .arg(format!("--name={EXPOSED}"))
            .args(["--port=80", &format!("--target-port={port}")])
            .output();
        let how = match kubectl {
            Ok(out) if out.status.success() => "kubectl expose",
            Ok(out) => {
                return Err(format!(
                    "kubectl expose: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Err(_) => {
                // What `kubectl expose pod` makes: the pod's labels (the
                // demo's pod is labelled `app=<its name>`) as the selector.
                let svc: Service = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": EXPOSED},
                    "spec": {"type": "LoadBalancer", "selector": {"app": pod},
                             "ports": [{"port": 80, "targetPort": port}]}
                }))
                .map_err(|e| e.to_string())?;
                Api::<Service>::namespaced(client.clone(), namespace)
                    .create(&PostParams::default(), &svc)
                    .await
                    .map_err(|e| format!("creating {EXPOSED}: {e}"))?;
                "the API (kubectl is not installed)"
            }
        };
        let services: Api<Service> = Api::namespaced(client.clone(), namespace);
        let deadline = created + wait;
        let ip = loop {
            let ip = services
                .get_opt(EXPOSED)
                .await
                .ok()
                .flatten()
                .and_then(|s| s.status?.load_balancer?.ingress?.first()?.ip.clone());
            if let Some(ip) = ip {
                break ip;
            }
            if Instant::now() > deadline {
                return Err(format!("{EXPOSED} got no external IP within {wait:?}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let external_ip_after = created.elapsed();
        // The endpoint may trail the address by a slice update.
        let status_line = loop {
            match get_page(&ip).await {
                Ok(line) if line.starts_with("HTTP/1.0 200") => break line,
                result if Instant::now() > deadline => {
                    return Err(format!(
                        "no page through {ip}:80 within {wait:?}: {result:?}"
                    ));
                }
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        Ok(format!(
            "{EXPOSED} created with {how}; external IP {ip} after {:.0} ms; GET http://{ip}/ answered {status_line:?} from {namespace}/{pod}",
            external_ip_after.as_secs_f64() * 1000.0
        ))
    }

    /// Delete the exposed Service and wait until its address is released.
    pub(crate) async fn unexpose(&self, client: &kube::Client, namespace: &str) {
        let services: Api<Service> = Api::namespaced(client.clone(), namespace);
        let _ = services.delete(EXPOSED, &DeleteParams::default()).await;
        for _ in 0..100 {
            if matches!(services.get_opt(EXPOSED).await, Ok(None)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eprintln!("warning: {EXPOSED} was not deleted within 10s");
    }

    /// Stop the cloud (its load balancers stop listening).
    pub(crate) async fn stop(self) {
        self.cloud.stop().await;
    }
}

/// `GET /` on `ip:80`: the status line.
async fn get_page(ip: &str) -> Result<String, String> {
    let mut stream = tokio::time::timeout(
        Duration::from_secs(2),
        tokio::net::TcpStream::connect((ip, 80)),
    )
    .await
    .map_err(|_| "connect timed out".to_owned())?
    .map_err(|e| e.to_string())?;
    stream
        .write_all(b"GET / HTTP/1.0\r\nHost: demo\r\n\r\n")
        .await
        .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
        .await
        .map_err(|_| "no answer within 5s".to_owned())?
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned())
}
