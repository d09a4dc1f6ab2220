//! The virtual node's Node: registration (create or adopt), status
//! heartbeats that keep conditions written by others, the node Lease in
//! `kube-node-lease`, and ping gating, as Go's virtual-kubelet
//! `NodeController` does, plus re-creation of a deleted Node.
//!
//! - **Registration**: the Node from [`node_template`] (adjusted by the
//!   provider's `configure_node`) is created; an existing one is adopted
//!   (its labels, annotations and status are patched; its spec is left).
//!   Gated with [`NodeController::ready_after`] (as [`VirtualNode`] gates
//!   it on its pod controller's first sync, Go's order), the node reports
//!   `Ready` `False` (`KubeletNotReady`) until the gate opens.
//!
//! [`VirtualNode`]: crate::VirtualNode
//! - **Status**: every `status_interval`, or at once when the provider
//!   notifies a new node status, one strategic-merge patch of
//!   `nodes/status` writes the node's labels, annotations and status with
//!   `lastHeartbeatTime` refreshed (the provider's `lastTransitionTime`
//!   kept). It has Go's three-way semantics: what the node applied last is
//!   recorded in the [`LAST_APPLIED_ANNOTATION`] annotation, so a label,
//!   annotation, condition or capacity / allocatable resource the provider
//!   stops reporting is removed (a withdrawn GPU is no longer advertised),
//!   while those other components add are kept (conditions merge by type).
//! - **Lease**: `kube-node-lease/<node>`, held by the node, owned by the
//!   Node (garbage-collected with it), renewed every `renew_interval` (10 s)
//!   with a `lease_duration` of 40 s.
//! - **Ping**: the provider's `ping` runs every `ping_interval` on a task of
//!   its own, one at a time, each bounded by `ping_timeout`; while the
//!   latest one failed, neither the status nor the Lease is renewed, so the
//!   control plane marks the node unreachable (Go's behaviour). A slow ping
//!   delays neither (as Go's separate ping controller).
//! - **Following**: a provider whose `follows_node` is true gets every
//!   version of the Node from one watch of it (the kubelet's own-node
//!   watch), e.g. to learn the `spec.podCIDR` the node-IPAM controller
//!   assigned.
//! - **Deletion**: a Node deleted by someone else is registered again at
//!   the next heartbeat, with a new Lease (Go needs an opt-in handler).

mod lease;
mod template;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams, PostParams};
use stratus_pod::{NodeProvider, NodeStatusCallback};
use stratus_runtime::health::ControllerHealth;
use stratus_runtime::informer::Informer;
use tokio::sync::watch;

pub use lease::NODE_LEASE_NAMESPACE;
pub use template::{PROVIDER_TAINT_KEY, node_template, provider_taint};

use lease::NodeLease;

/// The Kubernetes version the node's API types are built for: the first
/// part of its `nodeInfo.kubeletVersion` (`v1.37.0-stratus-<SDK version>`,
/// or `v1.37.0-vk-<binary version>` with the command's `with_version`, as
/// Go's `<k8s>-vk-<build>`).
pub const KUBERNETES_VERSION: &str = "v1.37.0";

/// The Node annotation recording what the virtual node applied last: the
/// keys of its labels and annotations, its condition types and its
/// capacity and allocatable resources (JSON). What is in it and no longer
/// reported is removed at the next write (Go keeps the same in
/// `virtual-kubelet.io/last-applied-*`).
pub const LAST_APPLIED_ANNOTATION: &str = "node.stratus.dev/last-applied";

/// What the virtual node applied to its Node: the keys, by field.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Applied {
    #[serde(default)]
    labels: BTreeSet<String>,
    #[serde(default)]
    annotations: BTreeSet<String>,
    #[serde(default)]
    conditions: BTreeSet<String>,
    #[serde(default)]
    capacity: BTreeSet<String>,
    #[serde(default)]
    allocatable: BTreeSet<String>,
}

impl Applied {
    /// The keys `node` sets.
    fn of(node: &Node) -> Self {
        let keys = |m: Option<&BTreeMap<String, String>>| {
            m.map(|m| m.keys().cloned().collect()).unwrap_or_default()
        };
        let status = node.status.as_ref();
        let quantities = |m: Option<
            &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
        >| { m.map(|m| m.keys().cloned().collect()).unwrap_or_default() };
        Self {
            labels: keys(node.metadata.labels.as_ref()),
            annotations: keys(node.metadata.annotations.as_ref())
                .into_iter()
                .filter(|k: &String| k != LAST_APPLIED_ANNOTATION)
                .collect(),
            conditions: status
                .and_then(|s| s.conditions.as_ref())
                .map(|cs| cs.iter().map(|c| c.type_.clone()).collect())
                .unwrap_or_default(),
            capacity: quantities(status.and_then(|s| s.capacity.as_ref())),
            allocatable: quantities(status.and_then(|s| s.allocatable.as_ref())),
        }
    }

    /// The record in `node`'s annotation (empty if none or unreadable).
    fn recorded(node: &Node) -> Self {
        node.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(LAST_APPLIED_ANNOTATION))
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default()
    }
}

/// The heartbeat patch of `nodes/status` for `desired`, at `now`, given
/// what was applied `last`: the labels, annotations and status, with
/// `null` (maps) or `$patch: delete` (conditions) for what `last` has and
/// `desired` no longer does, and the new record.
fn status_patch(desired: &Node, last: &Applied, now: &Time) -> serde_json::Value {
    use serde_json::{Map, Value, json};
    let current = Applied::of(desired);
    let with_removals =
        |set: Option<&BTreeMap<String, String>>, was: &BTreeSet<String>, now: &BTreeSet<String>| {
            let mut map: Map<String, Value> = set
                .map(|m| m.iter().map(|(k, v)| (k.clone(), json!(v))).collect())
                .unwrap_or_default();
            for gone in was.difference(now) {
                map.insert(gone.clone(), Value::Null);
            }
            map
        };
    let mut annotations = with_removals(
        desired.metadata.annotations.as_ref(),
        &last.annotations,
        &current.annotations,
    );
    annotations.insert(
        LAST_APPLIED_ANNOTATION.to_owned(),
        json!(serde_json::to_string(&current).unwrap_or_default()),
    );
    let labels = with_removals(
        desired.metadata.labels.as_ref(),
        &last.labels,
        &current.labels,
    );
    let mut status = desired.status.clone().unwrap_or_default();
    // The provider's transition times are kept; the heartbeat is now.
    for condition in status.conditions.iter_mut().flatten() {
        condition.last_heartbeat_time = Some(now.clone());
    }
    let mut object = match serde_json::to_value(&status) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    for (field, was, is) in [
        ("capacity", &last.capacity, &current.capacity),
        ("allocatable", &last.allocatable, &current.allocatable),
    ] {
        let mut gone = was.difference(is).peekable();
        if gone.peek().is_none() {
            continue;
        }
        if let Value::Object(map) = object.entry(field).or_insert_with(|| json!({})) {
            map.extend(gone.map(|key| (key.clone(), Value::Null)));
        }
    }
    let mut withdrawn = last
        .conditions
        .difference(&current.conditions)
        .map(|t| json!({"type": t, "$patch": "delete"}))
        .peekable();
    if withdrawn.peek().is_some()
        && let Value::Array(list) = object.entry("conditions").or_insert_with(|| json!([]))
    {
        list.extend(withdrawn);
    }
    let status = Value::Object(object);
    json!({
        "metadata": {"labels": labels, "annotations": annotations},
        "status": status,
    })
}

/// How a virtual node registers and reports itself.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeConfig {
    /// The Node name (also the Lease name and `kubernetes.io/hostname`).
    pub name: String,
    /// The provider's name: the value of the default taint and of the
    /// container runtime version.
    pub provider_name: String,
    /// The node's taint: `virtual-kubelet.io/provider=<provider>:NoSchedule`
    /// by default, as Go's CLI, so only pods that tolerate it land here;
    /// `None` for no taint.
    pub taint: Option<k8s_openapi::api::core::v1::Taint>,
    /// More labels.
    pub labels: BTreeMap<String, String>,
    /// Capacity (and allocatable): resource name → quantity.
    pub capacity: BTreeMap<String, String>,
    /// The `InternalIP` address the API server reaches the kubelet API on.
    pub internal_ip: Option<String>,
    /// The kubelet API port (`daemonEndpoints.kubeletEndpoint.port`).
    pub daemon_port: i32,
    /// `nodeInfo.operatingSystem` and the `kubernetes.io/os` label.
    pub operating_system: String,
    /// `nodeInfo.architecture` and the `kubernetes.io/arch` label.
    pub architecture: String,
    /// `nodeInfo.kubeletVersion`.
    pub kubelet_version: String,
    /// How often the status heartbeat is written (Go: 1 min with a Lease).
    pub status_interval: Duration,
    /// How often the provider is pinged (Go: 10 s;
    /// `--node-ping-interval`).
    pub ping_interval: Duration,
    /// How long a ping may take before it counts as failed (5 s;
    /// `--node-ping-timeout`). Go's default is no bound (its
    /// `WithNodePingTimeout` sets one): a hung ping there holds the node's
    /// status and Lease as a failed one does, only for ever.
    pub ping_timeout: Duration,
    /// The Lease duration (40 s).
    pub lease_duration: Duration,
    /// How often the Lease is renewed (10 s, a quarter of the duration).
    pub renew_interval: Duration,
}

impl NodeConfig {
    /// The defaults for the node `name` of `provider_name`: Go's intervals,
    /// cpu 20 / memory 100Gi / 110 pods, port 10250, linux/amd64.
    pub fn new(name: impl Into<String>, provider_name: impl Into<String>) -> Self {
        let provider_name = provider_name.into();
        Self {
            name: name.into(),
            taint: Some(template::provider_taint(&provider_name)),
            provider_name,
            labels: BTreeMap::new(),
            capacity: [("cpu", "20"), ("memory", "100Gi"), ("pods", "110")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            internal_ip: None,
            daemon_port: 10250,
            operating_system: "linux".into(),
            architecture: "amd64".into(),
            kubelet_version: format!("{KUBERNETES_VERSION}-stratus-{}", env!("CARGO_PKG_VERSION")),
            status_interval: Duration::from_secs(60),
            ping_interval: Duration::from_secs(10),
            ping_timeout: Duration::from_secs(5),
            lease_duration: Duration::from_secs(40),
            renew_interval: Duration::from_secs(10),
        }
    }
}

/// Why the node controller stopped.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The Node could not be registered.
    #[error("cannot register node {name}: {source}")]
    Register {
        /// The node.
        name: String,
        /// Why.
        source: kube::Error,
    },
}

/// Keeps the virtual node's Node and Lease.
pub struct NodeController {
    client: kube::Client,
    provider: Arc<dyn NodeProvider>,
    config: NodeConfig,
    ready: watch::Sender<bool>,
    /// Until this becomes true, the node reports itself not Ready.
    gate: Option<watch::Receiver<bool>>,
}

impl std::fmt::Debug for NodeController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeController")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl NodeController {
    /// The controller of the node `config.name`.
    pub fn new(client: kube::Client, provider: Arc<dyn NodeProvider>, config: NodeConfig) -> Self {
        Self {
            client,
            provider,
            config,
            ready: watch::channel(false).0,
            gate: None,
        }
    }

    /// Report the node `Ready` only once `synced` becomes true (until then
    /// `Ready` is `False`, reason `KubeletNotReady`), as Go's node becomes
    /// ready only after its pod controller: [`VirtualNode`] gates its node
    /// on the pod controller's first sync.
    ///
    /// [`VirtualNode`]: crate::VirtualNode
    pub fn ready_after(mut self, synced: watch::Receiver<bool>) -> Self {
        self.gate = Some(synced);
        self
    }

    /// Becomes true once the Node is registered and its Lease held.
    pub fn ready(&self) -> watch::Receiver<bool> {
        self.ready.subscribe()
    }

    /// The Node to register: the template, then the provider's changes.
    fn desired(&self) -> Node {
        let mut node = node_template(&self.config);
        self.provider.configure_node(&mut node);
        node
    }

    /// Create the Node, or adopt an existing one (patch its labels,
    /// annotations and status); its UID and what was recorded as applied
    /// to it before (by an earlier run, for an adopted Node).
    async fn register(&self, desired: &Node) -> Result<(String, Applied), kube::Error> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let created = match nodes.create(&PostParams::default(), desired).await {
            Ok(n) => n,
            Err(kube::Error::Api(s)) if s.code == 409 => {
                self.patch_metadata(desired).await?;
                Node::default()
            }
            Err(e) => return Err(e),
        };
        // The status of a new Node is written through its subresource too,
        // as the API server ignores status on create.
        let status = serde_json::json!({"status": desired.status});
        let written = nodes
            .patch_status(
                &self.config.name,
                &PatchParams::default(),
                &Patch::Strategic(status),
            )
            .await?;
        tracing::info!(node = %self.config.name, "registered the virtual node");
        let applied = Applied::recorded(&written);
        Ok((
            written
                .metadata
                .uid
                .or(created.metadata.uid)
                .unwrap_or_default(),
            applied,
        ))
    }

    /// Merge the node's labels and annotations into the API object.
    async fn patch_metadata(&self, desired: &Node) -> Result<(), kube::Error> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let meta = serde_json::json!({"metadata": {
            "labels": desired.metadata.labels,
            "annotations": desired.metadata.annotations,
        }});
        nodes
            .patch(
                &self.config.name,
                &PatchParams::default(),
                &Patch::Merge(meta),
            )
            .await?;
        Ok(())
    }

    /// The heartbeat: the node's labels, annotations and status (the
    /// provider's latest, `lastHeartbeatTime` now), with what `last`
    /// recorded and the node no longer reports removed; on success `last`
    /// is what was applied now.
    async fn heartbeat(&self, desired: &Node, last: &mut Applied) -> Result<(), kube::Error> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let patch = status_patch(desired, last, &now);
        nodes
            .patch_status(
                &self.config.name,
                &PatchParams::default(),
                &Patch::Strategic(patch),
            )
            .await?;
        *last = Applied::of(desired);
        Ok(())
    }

    /// Run until `stop` becomes true. Registration failures are retried;
    /// `Err` only if the first registration is refused for good (invalid).
    pub async fn run(self, mut stop: watch::Receiver<bool>) -> Result<(), NodeError> {
        let (provided_tx, mut provided) = watch::channel::<Option<Node>>(None);
        self.provider
            .notify_node_status(NodeStatusCallback::new(move |node| {
                provided_tx.send_replace(Some(node));
            }));
        // The node's own part (template and `configure_node`); the
        // provider's latest report is laid over it, not accumulated, so
        // what the provider withdraws goes.
        let mut base = self.desired();
        // Held not Ready until the gate opens (for ever if its sender goes).
        let mut gate = self.gate.clone().filter(|g| !*g.borrow());
        let mut hold = gate.is_some();
        let gated = |node: &Node, hold: bool| {
            let mut node = node.clone();
            if hold {
                hold_ready(&mut node);
            }
            node
        };
        let mut desired = base.clone();
        let mut backoff = Duration::from_millis(200);
        let (uid, mut applied) = loop {
            match self.register(&gated(&desired, hold)).await {
                Ok(registered) => break registered,
                Err(kube::Error::Api(s)) if s.code == 422 || s.code == 400 => {
                    return Err(NodeError::Register {
                        name: self.config.name.clone(),
                        source: kube::Error::Api(s),
                    });
                }
                Err(e) => {
                    tracing::warn!(node = %self.config.name, error = %e, "cannot register the node; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stratus_runtime::stopped(&mut stop) => return Ok(()),
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(7));
                }
            }
        };
        // The provider that follows its Node gets every version of it from
        // one watch of its own, kept until the node stops.
        let _following = self.provider.follows_node().then(|| {
            let provider = self.provider.clone();
            Informer::start_with(
                Api::<Node>::all(self.client.clone()),
                kube_runtime::watcher::Config::default()
                    .fields(&format!("metadata.name={}", self.config.name)),
                &ControllerHealth::new(),
                move |node: &Node| provider.node_changed(node),
                || {},
            )
        });
        let mut lease = NodeLease::new(self.client.clone(), &self.config, uid);
        if let Err(e) = lease.renew().await {
            tracing::warn!(node = %self.config.name, error = %e, "cannot write the node lease yet");
        }
        self.ready.send_replace(true);

        // The pings run on their own (one at a time, as Go's singleflight):
        // a slow ping never delays a heartbeat or a Lease renewal, which
        // read the latest ping's outcome. The loop ends when `ping_rx` is
        // dropped with this function.
        let (ping_tx, ping_rx) = watch::channel(true);
        tokio::spawn(ping_loop(
            self.provider.clone(),
            self.config.name.clone(),
            (self.config.ping_interval, self.config.ping_timeout),
            ping_tx,
        ));
        let ping_ok = || *ping_rx.borrow();
        let mut notifications_open = true;
        let mut status = tokio::time::interval(self.config.status_interval);
        let mut renew = tokio::time::interval(self.config.renew_interval);
        for t in [&mut status, &mut renew] {
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t.reset();
        }
        loop {
            tokio::select! {
                _ = stratus_runtime::stopped(&mut stop) => return Ok(()),
                changed = provided.changed(), if notifications_open => {
                    if changed.is_err() {
                        // The provider dropped its callback (it has no
                        // node-status notifications): stop listening, or
                        // this branch would be ready on every turn.
                        notifications_open = false;
                        continue;
                    }
                    let latest = provided.borrow_and_update().clone();
                    if let Some(node) = latest {
                        desired = base.clone();
                        merge_provided(&mut desired, node);
                    }
                }
                synced = async {
                    match gate.as_mut() {
                        Some(g) => g.wait_for(|s| *s).await.is_ok(),
                        None => std::future::pending().await,
                    }
                }, if gate.is_some() => {
                    gate = None;
                    if synced {
                        tracing::info!(node = %self.config.name, "the pod controller has synced; the node reports Ready");
                        hold = false;
                        let now = Time(k8s_openapi::jiff::Timestamp::now());
                        for node in [&mut base, &mut desired] {
                            restamp_ready(node, &now);
                        }
                    } else {
                        tracing::warn!(node = %self.config.name, "the pod controller stopped before it synced; the node stays not Ready");
                    }
                }
                _ = status.tick() => {}
                _ = renew.tick() => {
                    if ping_ok() && let Err(e) = lease.renew().await {
                        tracing::warn!(node = %self.config.name, error = %e, "cannot renew the node lease");
                    }
                    continue;
                }
            }
            if !ping_ok() {
                continue;
            }
            match self.heartbeat(&gated(&desired, hold), &mut applied).await {
                Ok(()) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    tracing::warn!(node = %self.config.name, "the node was deleted; registering it again");
                    match self.register(&gated(&desired, hold)).await {
                        Ok((uid, recorded)) => {
                            applied = recorded;
                            lease = NodeLease::new(self.client.clone(), &self.config, uid);
                            if let Err(e) = lease.renew().await {
                                tracing::warn!(node = %self.config.name, error = %e, "cannot write the node lease");
                            }
                        }
                        Err(e) => {
                            tracing::warn!(node = %self.config.name, error = %e, "cannot register the node again")
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(node = %self.config.name, error = %e, "cannot update the node status")
                }
            }
        }
    }
}

/// Ping the provider every `interval`, one ping at a time, each bounded
/// by `timeout`; publish whether the latest one succeeded, until nobody
/// reads `ok` any more.
async fn ping_loop(
    provider: Arc<dyn NodeProvider>,
    node: String,
    (interval, timeout): (Duration, Duration),
    ok: watch::Sender<bool>,
) {
    // (A zero interval would spin: one millisecond at least.)
    let mut tick = tokio::time::interval(interval.max(Duration::from_millis(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.reset();
    loop {
        let outcome = tokio::select! {
            () = ok.closed() => return,
            _ = tick.tick() => tokio::select! {
                () = ok.closed() => return,
                outcome = tokio::time::timeout(timeout, provider.ping()) => outcome,
            },
        };
        let was_ok = ok.send_replace(matches!(outcome, Ok(Ok(()))));
        match (was_ok, outcome) {
            (true, Err(_)) => tracing::warn!(
                node,
                ?timeout,
                "the provider's ping timed out; holding the node status and lease"
            ),
            (true, Ok(Err(e))) => tracing::warn!(
                node,
                error = %e,
                "the provider's ping failed; holding the node status and lease"
            ),
            (false, Ok(Ok(()))) => tracing::info!(
                node,
                "the provider's ping succeeded again; renewing the node status and lease"
            ),
            _ => {}
        }
    }
}

/// `Ready` is `False` until the pod controller has synced.
fn hold_ready(node: &mut Node) {
    for condition in node
        .status
        .iter_mut()
        .flat_map(|s| s.conditions.iter_mut().flatten())
        .filter(|c| c.type_ == "Ready")
    {
        condition.status = "False".into();
        condition.reason = Some("KubeletNotReady".into());
        condition.message = Some("the pod controller has not synced yet".into());
    }
}

/// The `Ready` condition's transition time is `now` (it just became true).
fn restamp_ready(node: &mut Node, now: &Time) {
    for condition in node
        .status
        .iter_mut()
        .flat_map(|s| s.conditions.iter_mut().flatten())
        .filter(|c| c.type_ == "Ready")
    {
        condition.last_transition_time = Some(now.clone());
    }
}

/// Take the provider's status, labels and annotations into the node the
/// controller reports.
fn merge_provided(desired: &mut Node, provided: Node) {
    if let Some(status) = provided.status {
        desired.status = Some(status);
    }
    if let Some(labels) = provided.metadata.labels {
        desired
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .extend(labels);
    }
    if let Some(annotations) = provided.metadata.annotations {
        desired
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .extend(annotations);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(value: serde_json::Value) -> Node {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_patch_removes_only_what_was_applied_and_is_withdrawn() {
        let before = node(json!({
            "metadata": {"labels": {"a": "1", "gone": "x"}, "annotations": {"n": "1"}},
            "status": {
                "capacity": {"cpu": "4", "nvidia.com/gpu": "1"},
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "GpuHealthy", "status": "True"}],
            },
        }));
        let last = Applied::of(&before);
        let after = node(json!({
            "metadata": {"labels": {"a": "1"}},
            "status": {
                "capacity": {"cpu": "4"},
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z"}],
            },
        }));
        let now = Time("2026-11-26T00:00:00Z".parse().unwrap());
        let patch = status_patch(&after, &last, &now);
        assert_eq!(patch["metadata"]["labels"], json!({"a": "1", "gone": null}));
        assert_eq!(patch["metadata"]["annotations"]["n"], json!(null));
        let record: Applied = serde_json::from_str(
            patch["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(record, Applied::of(&after));
        assert_eq!(
            patch["status"]["capacity"],
            json!({"cpu": "4", "nvidia.com/gpu": null})
        );
        let conditions = patch["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions[0]["lastTransitionTime"], "2026-01-02T03:04:05Z");
        assert_eq!(conditions[0]["lastHeartbeatTime"], "2026-11-26T00:00:00Z");
        assert_eq!(
            conditions[1],
            json!({"type": "GpuHealthy", "$patch": "delete"})
        );
        // Nothing applied before: nothing removed.
        let first = status_patch(&after, &Applied::default(), &now);
        assert_eq!(first["metadata"]["labels"], json!({"a": "1"}));
        assert_eq!(first["status"]["capacity"], json!({"cpu": "4"}));
    }
}
