//! [`TestCluster`]: the harness API server plus the other actors of a
//! cluster: kubelets that register Nodes and heartbeat them, and a scheduler
//! that binds pods to nodes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::task::JoinHandle;

use crate::{ApiServer, ApiServerError};

/// The taint a kubelet started with `--cloud-provider=external` registers
/// with.
pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// How a simulated kubelet registers its Node.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    /// The node name.
    pub name: String,
    /// `InternalIP` address (also the `alpha.kubernetes.io/provided-node-ip`
    /// annotation when `provided_node_ip` is set).
    pub internal_ip: Option<String>,
    /// Set the provided-node-ip annotation, as `kubelet --node-ip` does.
    pub provided_node_ip: bool,
    /// Register with the external-cloud-provider taint (default true).
    pub external_cloud_provider: bool,
    /// `spec.providerID` set by the kubelet (`--provider-id`), if any.
    pub provider_id: Option<String>,
    /// Extra labels.
    pub labels: BTreeMap<String, String>,
    /// How often the Lease is renewed and the Ready condition refreshed.
    pub heartbeat: Duration,
}

impl NodeSpec {
    /// A node named `name` with the defaults: external cloud provider taint,
    /// no IP, 10 s heartbeats.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            internal_ip: None,
            provided_node_ip: false,
            external_cloud_provider: true,
            provider_id: None,
            labels: BTreeMap::new(),
            heartbeat: Duration::from_secs(10),
        }
    }

    /// Set the node's InternalIP.
    pub fn with_internal_ip(mut self, ip: impl Into<String>) -> Self {
        self.internal_ip = Some(ip.into());
        self
    }

    /// Set the heartbeat interval.
    pub fn with_heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every;
        self
    }

    fn node(&self) -> serde_json::Value {
        let mut labels = BTreeMap::from([
            ("kubernetes.io/hostname".to_owned(), self.name.clone()),
            ("kubernetes.io/os".to_owned(), "linux".to_owned()),
            ("kubernetes.io/arch".to_owned(), "amd64".to_owned()),
            ("beta.kubernetes.io/os".to_owned(), "linux".to_owned()),
            ("beta.kubernetes.io/arch".to_owned(), "amd64".to_owned()),
        ]);
        labels.extend(self.labels.clone());
        let mut annotations = BTreeMap::new();
        if self.provided_node_ip
            && let Some(ip) = &self.internal_ip
        {
            annotations.insert(
                "alpha.kubernetes.io/provided-node-ip".to_owned(),
                ip.clone(),
            );
        }
        let mut addresses = vec![json!({"type": "Hostname", "address": self.name})];
        if let Some(ip) = &self.internal_ip {
            addresses.insert(0, json!({"type": "InternalIP", "address": ip}));
        }
        let taints = if self.external_cloud_provider {
            json!([{"key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule"}])
        } else {
            json!([])
        };
        let resources =
            json!({"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"});
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels, "annotations": annotations},
            "spec": {"taints": taints, "providerID": self.provider_id},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "addresses": addresses,
                "conditions": conditions(true),
                "nodeInfo": {
                    "kubeletVersion": "v1.37.0-stratus",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                    "osImage": "Stratus simulated kubelet",
                    "kernelVersion": "6.0.0",
                    "containerRuntimeVersion": "simulated://1.0",
                    "machineID": "", "systemUUID": "", "bootID": "", "kubeProxyVersion": ""
                },
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}
            }
        })
    }
}

fn conditions(ready: bool) -> serde_json::Value {
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let c = |ty: &str, status: &str, reason: &str, message: &str| {
        json!({"type": ty, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    json!([
        c(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available"
        ),
        c(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure"
        ),
        c(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available"
        ),
        if ready {
            c(
                "Ready",
                "True",
                "KubeletReady",
                "kubelet is posting ready status",
            )
        } else {
            c(
                "Ready",
                "False",
                "KubeletNotReady",
                "container runtime is down",
            )
        },
    ])
}

/// A running simulated kubelet.
pub struct SimulatedKubelet {
    name: String,
    ready: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for SimulatedKubelet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimulatedKubelet")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl SimulatedKubelet {
    /// Register a Node as a kubelet does through `client` (any API server)
    /// and keep heartbeating it (Lease in `kube-node-lease`, Ready
    /// condition) until the returned handle is dropped or stopped.
    /// Re-registers the Node if it is deleted.
    pub async fn start(client: kube::Client, spec: NodeSpec) -> Result<Self, kube::Error> {
        let nodes: Api<Node> = Api::all(client.clone());
        let node: Node = serde_json::from_value(spec.node()).map_err(kube::Error::SerdeError)?;
        nodes.create(&PostParams::default(), &node).await?;
        let ready = Arc::new(AtomicBool::new(true));
        let name = spec.name.clone();
        let task = tokio::spawn(heartbeat(client, spec, ready.clone()));
        Ok(Self { name, ready, task })
    }

    /// The node name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Report Ready (true) or NotReady (false) from the next heartbeat on.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    /// Stop heartbeating (the node goes stale, as if the machine died).
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for SimulatedKubelet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn heartbeat(client: kube::Client, spec: NodeSpec, ready: Arc<AtomicBool>) {
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let mut ticker = tokio::time::interval(spec.heartbeat);
    loop {
        ticker.tick().await;
        let now_micro = k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string();
        let uid = match nodes.get_opt(&spec.name).await {
            Ok(Some(n)) => n.metadata.uid.unwrap_or_default(),
            // The node was deleted: register it again, as a kubelet does.
            Ok(None) => match nodes
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(spec.node()).unwrap_or_default(),
                )
                .await
            {
                Ok(n) => n.metadata.uid.unwrap_or_default(),
                Err(_) => continue,
            },
            Err(_) => continue,
        };
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": spec.name, "namespace": "kube-node-lease",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": spec.name, "uid": uid}]},
            "spec": {"holderIdentity": spec.name, "leaseDurationSeconds": 40, "renewTime": now_micro}
        });
        let _ = leases
            .patch(
                &spec.name,
                &PatchParams::apply("kubelet").force(),
                &Patch::Apply(lease),
            )
            .await;
        let is_ready = ready.load(Ordering::SeqCst);
        let _ = nodes
            .patch_status(
                &spec.name,
                &PatchParams::default(),
                &Patch::Strategic(json!({"status": {"conditions": conditions(is_ready)}})),
            )
            .await;
    }
}

/// A cluster: the harness API server, simulated kubelets and a scheduler.
pub struct TestCluster {
    server: ApiServer,
    scheduler: Option<JoinHandle<()>>,
    endpoint_slices: Option<JoinHandle<()>>,
    deployments: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCluster")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl TestCluster {
    /// Start the API server on 127.0.0.1, a free port.
    pub async fn start() -> Result<Self, ApiServerError> {
        Ok(Self {
            server: ApiServer::start().await?,
            scheduler: None,
            endpoint_slices: None,
            deployments: None,
        })
    }

    /// A cluster around an API server built with [`ApiServer::builder`]
    /// (for example with RBAC on).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use stratus_testing::{ApiServer, TestCluster};
    /// let server = ApiServer::builder().rbac().start().await.unwrap();
    /// let cluster = TestCluster::from_server(server);
    /// // RBAC serves HTTPS: kubectl sends its token only over TLS.
    /// assert!(cluster.server().url().starts_with("https://127.0.0.1:"));
    /// # });
    /// ```
    pub fn from_server(server: ApiServer) -> Self {
        Self {
            server,
            scheduler: None,
            endpoint_slices: None,
            deployments: None,
        }
    }

    /// The API server.
    pub fn server(&self) -> &ApiServer {
        &self.server
    }

    /// A new `kube::Client`.
    pub fn client(&self) -> kube::Client {
        self.server.client()
    }

    /// Register a Node as a kubelet does and keep heartbeating it (Lease in
    /// `kube-node-lease`, Ready condition) until the returned handle is
    /// dropped or stopped. Re-registers the Node if it is deleted.
    pub async fn add_node(&self, spec: NodeSpec) -> Result<SimulatedKubelet, kube::Error> {
        SimulatedKubelet::start(self.server.client(), spec).await
    }

    /// Start a scheduler that binds every unbound pod (of the default
    /// scheduler) to a Ready, schedulable node whose taints it tolerates
    /// and whose host ports it asks for are free, round-robin.
    pub fn start_scheduler(&mut self) {
        if self.scheduler.is_some() {
            return;
        }
        let client = self.server.client();
        self.scheduler = Some(tokio::spawn(run_scheduler(client)));
    }

    /// Start the harness's EndpointSlice controller
    /// ([`crate::endpoint_slices`]): every Service with a selector gets the
    /// EndpointSlice kube-controller-manager would write, kept in step with
    /// its pods' addresses and readiness.
    pub fn start_endpoint_slices(&mut self) {
        if self.endpoint_slices.is_some() {
            return;
        }
        let client = self.server.client();
        self.endpoint_slices = Some(tokio::spawn(crate::endpoint_slices::run_endpoint_slices(
            client,
        )));
    }

    /// Start the harness's Deployment and ReplicaSet controllers
    /// ([`crate::deployments`]): Deployments get their ReplicaSets and
    /// rolling updates, ReplicaSets their pods, as kube-controller-manager
    /// makes them (bind the pods with [`TestCluster::start_scheduler`] or a
    /// `nodeName`).
    pub fn start_deployments(&mut self) {
        if self.deployments.is_some() {
            return;
        }
        let client = self.server.client();
        self.deployments = Some(tokio::spawn(crate::deployments::run_deployments(client)));
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if let Some(s) = self.scheduler.take() {
            s.abort();
        }
        if let Some(e) = self.endpoint_slices.take() {
            e.abort();
        }
        if let Some(d) = self.deployments.take() {
            d.abort();
        }
    }
}

fn tolerates_all(pod: &Pod, node: &Node) -> bool {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .iter()
        .all(|t| {
            t.effect == "PreferNoSchedule"
                || tolerations.iter().any(|tol| {
                    let key_ok = tol
                        .key
                        .as_deref()
                        .is_none_or(|k| k.is_empty() || k == t.key);
                    let op_exists = tol.operator.as_deref() == Some("Exists");
                    let value_ok = op_exists
                        || tol.value.as_deref().unwrap_or_default()
                            == t.value.as_deref().unwrap_or_default();
                    let effect_ok = tol
                        .effect
                        .as_deref()
                        .is_none_or(|e| e.is_empty() || e == t.effect);
                    key_ok && value_ok && effect_ok
                })
        })
}

/// The harness's scheduler over `client`'s API server, for ever (spawn it
/// and abort it; [`TestCluster::start_scheduler`] does): every 100 ms, each
/// pod of the default scheduler without a node is bound to a Ready,
/// schedulable node whose taints it tolerates, whose labels match its
/// `nodeSelector` and where no pod (a terminating one too) holds a host
/// port it asks for, round-robin.
pub async fn run_scheduler(client: kube::Client) {
    let pods: Api<Pod> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let next = AtomicUsize::new(0);
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let Ok(pending) = pods
            .list(
                &ListParams::default()
                    .fields("spec.nodeName=,spec.schedulerName=default-scheduler"),
            )
            .await
        else {
            continue;
        };
        if pending.items.is_empty() {
            continue;
        }
        let Ok(all_nodes) = nodes.list(&ListParams::default()).await else {
            continue;
        };
        // The host ports each node's pods hold (terminating ones too,
        // until they are gone: the scheduler's NodePorts filter).
        let Ok(bound) = pods.list(&ListParams::default()).await else {
            continue;
        };
        let mut taken: BTreeSet<(String, HostPort)> = bound
            .items
            .iter()
            .filter_map(|p| Some((p.spec.as_ref()?.node_name.clone()?, p)))
            .flat_map(|(node, p)| host_ports(p).into_iter().map(move |hp| (node.clone(), hp)))
            .collect();
        for pod in pending.items {
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let wanted = host_ports(&pod);
            let candidates: Vec<&Node> = all_nodes
                .items
                .iter()
                .filter(|n| {
                    let name = n.metadata.name.clone().unwrap_or_default();
                    node_ready(n)
                        && !unschedulable(n)
                        && tolerates_all(&pod, n)
                        && matches_node_selector(&pod, n)
                        && wanted
                            .iter()
                            .all(|hp| !taken.contains(&(name.clone(), hp.clone())))
                })
                .collect();
            if candidates.is_empty() {
                continue;
            }
            let node = candidates[next.fetch_add(1, Ordering::Relaxed) % candidates.len()];
            let (Some(ns), Some(name), Some(node_name)) = (
                pod.metadata.namespace.as_deref(),
                pod.metadata.name.as_deref(),
                node.metadata.name.as_deref(),
            ) else {
                continue;
            };
            let api: Api<Pod> = Api::namespaced(client.clone(), ns);
            let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}});
            let bound = api
                .create_subresource::<_, serde_json::Value>(
                    "binding",
                    name,
                    &PostParams::default(),
                    &binding,
                )
                .await;
            if bound.is_ok() {
                taken.extend(wanted.into_iter().map(|hp| (node_name.to_owned(), hp)));
            }
        }
    }
}

/// A host port a container asks for: protocol, host IP, port.
type HostPort = (String, String, i32);

/// The host ports `pod`'s containers ask for.
fn host_ports(pod: &Pod) -> Vec<HostPort> {
    pod.spec
        .iter()
        .flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        })
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|p| *p > 0)?;
            Some((
                p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                p.host_ip.clone().unwrap_or_default(),
                port,
            ))
        })
        .collect()
}

/// Every `spec.nodeSelector` entry is a label of the node.
fn matches_node_selector(pod: &Pod, node: &Node) -> bool {
    let Some(selector) = pod.spec.as_ref().and_then(|s| s.node_selector.as_ref()) else {
        return true;
    };
    let labels = node.metadata.labels.clone().unwrap_or_default();
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn unschedulable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
