//! The virtual node's side: capacity from the remote cluster, and a ping
//! that fails while the remote API does not answer (the node then holds its
//! heartbeat and lease, so the home control plane marks it NotReady, as it
//! would a kubelet that lost its runtime).
//!
//! Capacity is what the remote cluster can give this node: the sum of the
//! allocatable of its Ready, schedulable nodes, minus what the remote pods
//! not made by this node request (the home scheduler already counts this
//! node's own pods against it), capped by [`Caps`](crate::Caps).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, ListParams};
use stratus_pod::env::ParsedQuantity;
use stratus_pod::{NodeProvider, NodeStatusCallback, PodError, Result};

use crate::config::Caps;
use crate::dependencies::remote_error;
use crate::naming::{NODE_LABEL, node_label_value};

/// CPU (millicores), memory (bytes) and pods.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capacity {
    /// Millicores.
    pub cpu_millis: i64,
    /// Bytes.
    pub memory_bytes: i64,
    /// Pods.
    pub pods: i64,
}

impl Capacity {
    /// As a Node's `capacity` / `allocatable` map.
    ///
    /// ```
    /// use stratus_provider_kubernetes::Capacity;
    ///
    /// let map = Capacity { cpu_millis: 2500, memory_bytes: 1 << 30, pods: 110 }.to_resources();
    /// assert_eq!(map["cpu"].0, "2500m");
    /// assert_eq!(map["memory"].0, "1073741824");
    /// assert_eq!(map["pods"].0, "110");
    /// ```
    pub fn to_resources(self) -> BTreeMap<String, Quantity> {
        BTreeMap::from([
            ("cpu".to_string(), Quantity(format!("{}m", self.cpu_millis))),
            (
                "memory".to_string(),
                Quantity(self.memory_bytes.to_string()),
            ),
            ("pods".to_string(), Quantity(self.pods.to_string())),
        ])
    }

    fn capped(self, caps: &Caps) -> Self {
        let cap = |v: i64, c: Option<i64>| c.map_or(v, |c| v.min(c));
        let quantity = |q: &Option<String>, milli: bool| {
            q.as_deref()
                .and_then(|q| ParsedQuantity::parse(q).ok())
                .map(|q| if milli { q.milli_value() } else { q.value() })
        };
        Self {
            cpu_millis: cap(self.cpu_millis, quantity(&caps.cpu, true)),
            memory_bytes: cap(self.memory_bytes, quantity(&caps.memory, false)),
            pods: cap(self.pods, caps.pods),
        }
    }
}

fn parse(resources: Option<&BTreeMap<String, Quantity>>, name: &str, milli: bool) -> i64 {
    resources
        .and_then(|r| r.get(name))
        .and_then(|q| ParsedQuantity::parse(&q.0).ok())
        .map_or(0, |q| if milli { q.milli_value() } else { q.value() })
}

fn schedulable_and_ready(node: &Node) -> bool {
    let unschedulable = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    ready && !unschedulable
}

/// What a pod requests (its containers' requests; init containers run one
/// at a time, so the larger of their largest and the containers' sum).
fn requests(pod: &Pod) -> (i64, i64) {
    let Some(spec) = pod.spec.as_ref() else {
        return (0, 0);
    };
    let of = |c: &k8s_openapi::api::core::v1::Container| {
        let r = c.resources.as_ref().and_then(|r| r.requests.as_ref());
        (parse(r, "cpu", true), parse(r, "memory", false))
    };
    let (cpu, memory) = spec
        .containers
        .iter()
        .map(of)
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    let (init_cpu, init_memory) = spec
        .init_containers
        .iter()
        .flatten()
        .map(of)
        .fold((0, 0), |a, b| (a.0.max(b.0), a.1.max(b.1)));
    (cpu.max(init_cpu), memory.max(init_memory))
}

/// What the remote cluster can give node `node_name` now.
///
/// ```no_run
/// # async fn run(remote: kube::Client) -> Result<(), stratus_pod::PodError> {
/// let capacity = stratus_provider_kubernetes::remote_capacity(&remote, "vk-burst", &Default::default()).await?;
/// println!("{} millicores free", capacity.cpu_millis);
/// # Ok(()) }
/// ```
pub async fn remote_capacity(
    remote: &kube::Client,
    node_name: &str,
    caps: &Caps,
) -> Result<Capacity> {
    let nodes: Api<Node> = Api::all(remote.clone());
    let pods: Api<Pod> = Api::all(remote.clone());
    let nodes = nodes
        .list(&ListParams::default())
        .await
        .map_err(remote_error)?;
    let mut total = Capacity::default();
    let mut ready = std::collections::HashSet::new();
    for node in nodes.items.iter().filter(|n| schedulable_and_ready(n)) {
        let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        total.cpu_millis += parse(allocatable, "cpu", true);
        total.memory_bytes += parse(allocatable, "memory", false);
        total.pods += parse(allocatable, "pods", false);
        if let Some(name) = &node.metadata.name {
            ready.insert(name.clone());
        }
    }
    let label = node_label_value(node_name);
    let pods = pods
        .list(&ListParams::default())
        .await
        .map_err(remote_error)?;
    for pod in &pods.items {
        let ours = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(NODE_LABEL))
            .is_some_and(|v| *v == label);
        let on_ready = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .is_some_and(|n| ready.contains(n));
        let ended = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed");
        if ours || !on_ready || ended {
            continue;
        }
        let (cpu, memory) = requests(pod);
        total.cpu_millis -= cpu;
        total.memory_bytes -= memory;
        total.pods -= 1;
    }
    let floor = |v: i64| v.max(0);
    Ok(Capacity {
        cpu_millis: floor(total.cpu_millis),
        memory_bytes: floor(total.memory_bytes),
        pods: floor(total.pods),
    }
    .capped(caps))
}

/// The [`NodeProvider`] of an offload node: ping through the remote API,
/// capacity from the remote cluster, refreshed periodically.
#[derive(Clone)]
pub struct RemoteNode {
    remote: kube::Client,
    node_name: String,
    caps: Caps,
    refresh: std::time::Duration,
    state: Arc<Mutex<NodeState>>,
}

#[derive(Default)]
struct NodeState {
    capacity: Option<Capacity>,
    /// The node as configured, to send back with new capacity.
    node: Option<Node>,
    task: Option<tokio::task::AbortHandle>,
}

impl Drop for NodeState {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl std::fmt::Debug for RemoteNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteNode")
            .field("node_name", &self.node_name)
            .field("caps", &self.caps)
            .finish_non_exhaustive()
    }
}

impl RemoteNode {
    /// The node side of virtual node `node_name`: its capacity is read once
    /// now (an unreachable remote cluster is an error), then every
    /// `config.capacity_refresh()`.
    pub async fn connect(
        remote: kube::Client,
        node_name: impl Into<String>,
        config: &crate::OffloadConfig,
    ) -> Result<Self> {
        let node_name = node_name.into();
        let capacity = remote_capacity(&remote, &node_name, &config.caps).await?;
        Ok(Self {
            remote,
            node_name,
            caps: config.caps.clone(),
            refresh: config.capacity_refresh(),
            state: Arc::new(Mutex::new(NodeState {
                capacity: Some(capacity),
                node: None,
                task: None,
            })),
        })
    }

    /// The capacity last read.
    pub fn capacity(&self) -> Option<Capacity> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .capacity
    }
}

fn set_capacity(node: &mut Node, capacity: Capacity) {
    let status = node.status.get_or_insert_with(Default::default);
    status.capacity = Some(capacity.to_resources());
    status.allocatable = Some(capacity.to_resources());
}

#[async_trait]
impl NodeProvider for RemoteNode {
    async fn ping(&self) -> Result<()> {
        self.remote
            .apiserver_version()
            .await
            .map(|_| ())
            .map_err(|e| {
                PodError::unavailable(None, format!("the remote cluster does not answer: {e}"))
            })
    }

    fn configure_node(&self, node: &mut Node) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(capacity) = state.capacity {
            set_capacity(node, capacity);
        }
        state.node = Some(node.clone());
    }

    fn notify_node_status(&self, callback: NodeStatusCallback) {
        let me = self.clone();
        let weak = Arc::downgrade(&self.state);
        let task = tokio::spawn(async move {
            let mut ticker = tokio::time::interval(me.refresh);
            ticker.tick().await;
            drop(me.state);
            loop {
                ticker.tick().await;
                let Some(state) = weak.upgrade() else { return };
                let capacity = match remote_capacity(&me.remote, &me.node_name, &me.caps).await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(node = %me.node_name, error = %e, "cannot read the remote capacity");
                        continue;
                    }
                };
                let node = {
                    let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
                    if state.capacity == Some(capacity) {
                        continue;
                    }
                    state.capacity = Some(capacity);
                    state.node.as_mut().map(|n| {
                        set_capacity(n, capacity);
                        n.clone()
                    })
                };
                if let Some(node) = node {
                    tracing::info!(node = %me.node_name, ?capacity, "the remote capacity changed");
                    callback.notify(node);
                }
            }
        });
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(old) = state.task.replace(task.abort_handle()) {
            old.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_bound_the_capacity() {
        let caps = Caps {
            cpu: Some("2".into()),
            memory: Some("1Gi".into()),
            pods: Some(10),
        };
        let c = Capacity {
            cpu_millis: 64_000,
            memory_bytes: 1 << 40,
            pods: 5,
        }
        .capped(&caps);
        assert_eq!(
            c,
            Capacity {
                cpu_millis: 2000,
                memory_bytes: 1 << 30,
                pods: 5
            }
        );
    }

    #[test]
    fn a_pod_requests_the_larger_of_its_init_and_app_containers() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2", "memory": "64Mi"}}}],
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "128Mi"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "250m"}}}]
            }
        }))
        .unwrap();
        assert_eq!(requests(&pod), (2000, 128 << 20));
    }
}
