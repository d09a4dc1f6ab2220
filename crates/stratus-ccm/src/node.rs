//! The cloud-node controller: initializes Nodes registered by kubelets
//! started with `--cloud-provider=external`.
//!
//! For each Node carrying the `node.cloudprovider.kubernetes.io/uninitialized`
//! taint it asks the cloud for the instance's metadata (batched when the
//! provider can batch: nodes arriving within a short window share one call),
//! then writes exactly twice, as patches rather than Go's full updates:
//!
//! 1. a metadata + spec patch: `spec.providerID` when empty, the
//!    instance-type / zone / region labels (GA and beta), the provider's
//!    additional labels (never in the Kubernetes namespaces, never
//!    overwriting), and the taint removed (other taints kept), fenced by the
//!    resourceVersion read;
//! 2. a status patch with the addresses (filtered by the
//!    `alpha.kubernetes.io/provided-node-ip` annotation, Go's rules);
//!
//! and records the `Synced` event. Every `status_update_frequency` it
//! refreshes the addresses of initialized nodes: one cloud call per batch
//! when the provider batches, otherwise one per node with
//! `status_update_workers` nodes at once (Go's `ParallelizeUntil`); a legacy
//! provider is asked only for addresses then, as in Go. A changed order of
//! the addresses (a new primary InternalIP) is written too (Go compares
//! them as a set).
//!
//! As Go's `reconcileNodeLabels`, an initialized Node whose beta topology or
//! instance-type label differs from its GA twin (or has no GA twin) gets
//! the GA label set to the beta value, on any change of the Node and on each
//! refresh pass.
//!
//! Go's behaviour on the edges is kept:
//! `Ok(None)` metadata skips the node (the taint stays); an `InstancesV2`
//! provider that gives no provider ID for a node without one is an error (a
//! legacy provider whose `instance_id` is not implemented initializes the
//! node by name, as Go's V1 path); an invalid provided node IP is an error.
//! Cloud `RetryAfter` / `Throttled` delays are honoured; other errors back
//! off per node.

mod cloud_labels;
pub use cloud_labels::MANAGED_LABELS_ANNOTATION;

use crate::context::{Context, Part};
use crate::metrics::{CcmMetrics, seconds_since};
use futures_util::StreamExt;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use stratus_runtime::health::ControllerHealth;
use stratus_runtime::informer::SharedInformer;

use crate::names::events;
use k8s_openapi::api::core::v1::{Node, NodeAddress, ObjectReference, Taint};
use kube::api::{Api, Patch, PatchParams};
use kube_runtime::reflector::{ObjectRef, Store};
use serde_json::json;
use stratus_cloud::helpers::{
    filter_additional_labels, node_address_problem, node_addresses_from_node_ip,
};
use stratus_cloud::names::{annotations, controllers, taints};
use stratus_cloud::{CloudError, CloudProvider, InstanceMetadata, check_batch_len};
use stratus_runtime::controller::Controller;
use stratus_runtime::events::EventType;
use stratus_runtime::workqueue::{Action, Retry, WorkQueue, default_controller_rate_limiter};
use tokio::sync::watch;

/// The one key of the address-refresh pass's queue.
const REFRESH: &str = "addresses";

/// The Warning event recorded on a Node when its initialization fails, once
/// per streak of failures (not in Go, which records nothing): a bad
/// `alpha.kubernetes.io/provided-node-ip`, a provider that gives no provider
/// ID, a cloud error. Retries back off per node.
pub const INITIALIZATION_FAILED: &str = "InitializationFailed";

/// Settings of the cloud-node controller.
#[derive(Debug, Clone)]
pub struct NodeControllerConfig {
    /// Batches processed at once (`--concurrent-node-syncs`; 1 as in Go).
    pub workers: usize,
    /// How long to wait for more nodes before sending a batch.
    pub batch_window: Duration,
    /// The largest batch (also bounded by the provider's own limit).
    pub max_batch: usize,
    /// The cluster name.
    pub cluster_name: String,
    /// How often the addresses of initialized nodes are refreshed from the
    /// cloud (`--node-status-update-frequency`, 5 min). One pass costs one
    /// cloud call per batch of nodes, not one per node.
    pub status_update_frequency: Duration,
    /// Nodes of one batch written at once (default 16).
    pub write_concurrency: usize,
    /// Nodes refreshed at once by the periodic pass of a provider that does
    /// not batch: each one cloud call then its writes (Go's
    /// `--concurrent-node-status-updates`; the manager passes
    /// `--concurrent-node-syncs` for 0, as Go). Default 1.
    pub status_update_workers: usize,
    /// Also refresh instance type, zone, region and the additional labels
    /// of initialized nodes on each address-refresh pass (off by default;
    /// Go never refreshes them). Additional labels the controller set are
    /// listed in the [`MANAGED_LABELS_ANNOTATION`] annotation: only those
    /// are changed or removed later, and a label set by someone else is
    /// never overwritten.
    pub refresh_labels: bool,
    /// How often every cached Node is looked at again as if it had changed
    /// (client-go's informer resync; the manager draws it between
    /// `--min-resync-period` and twice it, as Go). An uninitialized node
    /// whose retries were dropped is picked up again. `None`: no resync.
    pub resync_period: Option<Duration>,
}

impl Default for NodeControllerConfig {
    fn default() -> Self {
        Self {
            workers: 1,
            batch_window: Duration::from_millis(10),
            max_batch: 500,
            cluster_name: "kubernetes".into(),
            status_update_frequency: Duration::from_secs(300),
            write_concurrency: 16,
            status_update_workers: 1,
            refresh_labels: false,
            resync_period: None,
        }
    }
}

/// Why one node could not be initialized.
#[derive(Debug, thiserror::Error)]
enum SyncError {
    #[error(transparent)]
    Cloud(#[from] CloudError),
    #[error("cloud provider does not set node provider ID")]
    NoProviderId,
    #[error(
        "the node carries provider ID {node:?} but the cloud provider gives {cloud:?}; the provider must give back the ID the node carries"
    )]
    ProviderIdMismatch { node: String, cloud: String },
    #[error("provided node ip for node {node:?} is not valid: {message}")]
    ProvidedNodeIp { node: String, message: String },
    #[error(transparent)]
    Api(#[from] kube::Error),
}

impl Retry for SyncError {
    fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Cloud(e) => e.retry_delay(),
            _ => None,
        }
    }
}

fn is_uninitialized(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == taints::UNINITIALIZED))
}

/// Why each of the cloud's addresses that cannot be written is refused
/// ([`node_address_problem`]).
fn invalid_addresses(meta: &InstanceMetadata) -> Vec<String> {
    meta.node_addresses
        .iter()
        .filter_map(node_address_problem)
        .collect()
}

/// The Warning event recorded on a Node when the cloud reports addresses
/// that cannot be written (Stratus; Go writes them and the API server may
/// keep an address that is no IP).
pub const INVALID_NODE_ADDRESS: &str = "InvalidNodeAddress";

/// The event reference of a Node.
pub(crate) fn reference(node: &Node) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: node.metadata.name.clone(),
        uid: node.metadata.uid.clone(),
        ..Default::default()
    }
}

/// The cloud-node controller.
pub struct NodeController {
    ctx: Context,
    config: NodeControllerConfig,
}

impl std::fmt::Debug for NodeController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeController")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl NodeController {
    /// A controller reading `nodes` for `cloud`, which must offer
    /// instances (V2, or the legacy Instances and Zones, adapted by
    /// [`with_legacy_instances`](stratus_cloud::legacy::with_legacy_instances)).
    pub fn new(
        client: kube::Client,
        nodes: &SharedInformer<Node>,
        cloud: Arc<dyn CloudProvider>,
        config: NodeControllerConfig,
    ) -> Self {
        // Legacy Instances and Zones answer for InstancesV2 (as in Go).
        let cloud = stratus_cloud::legacy::with_legacy_instances(cloud);
        let component = controllers::CLOUD_NODE.event_component;
        Self {
            ctx: Context::new(client, nodes, cloud, component),
            config,
        }
    }

    /// Run until `stop` becomes true: three controllers over the shared
    /// Node informer, one shape: initialization (batched), the beta-label
    /// mirror (Go's `reconcileNodeLabels`), and the address refresh pass
    /// every `status_update_frequency` (sliding, as Go's `wait.Until`).
    pub async fn run(self, stop: watch::Receiver<bool>) {
        if self.ctx.cloud.instances_v2().is_none() {
            tracing::warn!(
                "the cloud provider offers neither InstancesV2 nor Instances; the cloud-node controller does not start"
            );
            return;
        }
        let resync = self.config.resync_period.unwrap_or_default();
        let init = Controller::new(WorkQueue::with_metrics(
            default_controller_rate_limiter(),
            self.ctx.metrics.runtime.workqueue.queue("Nodes"),
        ))
        .workers(self.config.workers)
        .health(self.ctx.health.clone())
        .reconcile_metrics(self.ctx.metrics.reconciles(controllers::CLOUD_NODE))
        .watches_resynced(&self.ctx.nodes, resync, |node: &Node| {
            node.metadata
                .name
                .clone()
                .filter(|_| is_uninitialized(node))
        });
        let labels = Controller::new(WorkQueue::with_metrics(
            default_controller_rate_limiter(),
            self.ctx.metrics.runtime.workqueue.queue("NodeLabels"),
        ))
        .health(self.ctx.health.clone())
        .watches_resynced(&self.ctx.nodes, resync, |node: &Node| {
            static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();
            let labels = node.metadata.labels.as_ref().unwrap_or(&NO_LABELS);
            node.metadata.name.clone().filter(|_| {
                !is_uninitialized(node) && !cloud_labels::mirror_beta_labels(labels).is_empty()
            })
        });
        let period = self.config.status_update_frequency;
        let refresh = Controller::new(WorkQueue::new(default_controller_rate_limiter()))
            .health(self.ctx.health.clone())
            .passes_every(period)
            .watches(&self.ctx.nodes, |_: &Node| None);
        refresh.queue().add_after(REFRESH, period);
        let (window, max) = (self.config.batch_window, self.batch_limit());
        let queue = init.queue().clone();
        let store = self.ctx.nodes.store().clone();
        let this = Arc::new(self);
        let initialize = {
            let (this, store) = (this.clone(), store.clone());
            move |names: Vec<String>| {
                let (this, store, queue) = (this.clone(), store.clone(), queue.clone());
                async move { this.sync_batch(&store, &queue, names).await }
            }
        };
        let mirror = {
            let (this, store) = (this.clone(), store.clone());
            move |name: String| {
                let (this, store) = (this.clone(), store.clone());
                async move {
                    if let Some(node) = store.get(&ObjectRef::new(&name)) {
                        this.mirror_beta_labels(&node).await?;
                    }
                    Ok::<_, SyncError>(Action::Done)
                }
            }
        };
        let pass = move |_: &'static str| {
            let (this, store) = (this.clone(), store.clone());
            async move {
                this.refresh_addresses(&store).await;
                Ok::<_, Infallible>(Action::RequeueAfter(period))
            }
        };
        tokio::join!(
            init.run_batched(window, max, initialize, stop.clone()),
            labels.run(mirror, stop.clone()),
            refresh.run(pass, stop),
        );
    }

    /// Go's `reconcileNodeLabels` for one initialized node: the GA labels
    /// set to the values of their beta twins, in one patch.
    async fn mirror_beta_labels(&self, node: &Node) -> Result<(), SyncError> {
        let set = cloud_labels::mirror_beta_labels(
            node.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()),
        );
        if set.is_empty() {
            return Ok(());
        }
        let name = node.metadata.name.clone().unwrap_or_default();
        let api = self.ctx.api();
        match api
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": set}})),
            )
            .await
        {
            Ok(_) => {
                tracing::info!(node = %name, labels = ?set, "mirrored the beta labels to their GA keys");
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// One address-refresh pass over the initialized nodes (Go's
    /// `UpdateNodeStatus`): batched when the provider batches, otherwise
    /// `status_update_workers` nodes at once, each its own cloud call.
    async fn refresh_addresses(&self, store: &Store<Node>) {
        let nodes: Vec<Node> = store
            .state()
            .iter()
            .filter(|n| !is_uninitialized(n))
            .map(|n| (**n).clone())
            .collect();
        let api = self.ctx.api();
        let batches = self
            .ctx
            .cloud
            .instances_v2()
            .and_then(|i| i.batch())
            .is_some();
        if batches {
            for chunk in nodes.chunks(self.batch_limit()) {
                let answers = self.metadata(chunk).await;
                futures_util::stream::iter(chunk.iter().zip(answers))
                    .for_each_concurrent(self.config.write_concurrency.max(1), |(node, answer)| {
                        self.refresh_node(&api, node, answer)
                    })
                    .await;
            }
        } else {
            futures_util::stream::iter(&nodes)
                .for_each_concurrent(self.config.status_update_workers.max(1), |node| async {
                    let answer = self.refresh_answer(node).await;
                    self.refresh_node(&api, node, answer).await
                })
                .await;
        }
    }

    /// What one node's refresh needs from a provider that does not batch:
    /// the metadata when the labels are refreshed too, else only the
    /// addresses ([`InstancesV2::instance_addresses`]).
    ///
    /// [`InstancesV2::instance_addresses`]: stratus_cloud::InstancesV2::instance_addresses
    async fn refresh_answer(&self, node: &Node) -> Result<Option<InstanceMetadata>, CloudError> {
        let Some(instances) = self.ctx.cloud.instances_v2() else {
            return Err(CloudError::not_implemented());
        };
        if self.config.refresh_labels {
            return self
                .ctx
                .metrics
                .cloud("instance_metadata", instances.instance_metadata(node))
                .await;
        }
        let addresses = self
            .ctx
            .metrics
            .cloud("instance_addresses", instances.instance_addresses(node))
            .await?;
        Ok(addresses.map(|node_addresses| InstanceMetadata {
            node_addresses,
            ..Default::default()
        }))
    }

    /// One node of a refresh pass: its labels (when enabled) and addresses.
    async fn refresh_node(
        &self,
        api: &Api<Node>,
        node: &Node,
        answer: Result<Option<InstanceMetadata>, CloudError>,
    ) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let meta = match answer {
            Ok(Some(meta)) => meta,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(node = %name, error = %e, "could not refresh the node's addresses");
                return;
            }
        };
        if self.config.refresh_labels {
            self.refresh_labels(api, node, &meta).await;
        } else if let Err(e) = self.mirror_beta_labels(node).await {
            tracing::warn!(node = %name, error = %e, "could not mirror the beta labels");
        }
        let wanted = match self.addresses(node, &meta) {
            Ok(a) if !a.is_empty() => a,
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(node = %name, error = %e, "not refreshing the node's addresses");
                return;
            }
        };
        let current = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.clone())
            .unwrap_or_default();
        // In order: the first InternalIP is the node's primary address.
        if current == wanted {
            return;
        }
        let patch = Patch::Merge(json!({"status": {"addresses": wanted}}));
        self.ctx
            .patch_or_warn(&name, Part::Status, patch, "update the node's addresses")
            .await;
    }

    /// Bring one initialized node's cloud labels in line with `meta` (see
    /// [`NodeControllerConfig::refresh_labels`]); one patch, fenced by the
    /// resourceVersion read, only if something changed.
    async fn refresh_labels(&self, api: &Api<Node>, node: &Node, meta: &InstanceMetadata) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let current = node.metadata.labels.clone().unwrap_or_default();
        let managed = node
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(MANAGED_LABELS_ANNOTATION))
            .map(String::as_str);
        let changes = cloud_labels::refresh(&current, managed, meta);
        for key in &changes.conflicts {
            tracing::warn!(node = %name, label = %key, "additional label set by someone else to another value; left alone");
        }
        if changes.is_empty() {
            return;
        }
        let mut set = serde_json::Map::new();
        for (k, v) in &changes.set {
            set.insert(k.clone(), json!(v));
        }
        for k in &changes.remove {
            set.insert(k.clone(), serde_json::Value::Null);
        }
        let patch = json!({"metadata": {
            "labels": set,
            "annotations": {MANAGED_LABELS_ANNOTATION: cloud_labels::render_managed(&changes.managed)},
            "resourceVersion": node.metadata.resource_version,
        }});
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => {
                tracing::info!(node = %name, set = ?changes.set.keys().collect::<Vec<_>>(), removed = ?changes.remove, "refreshed the node's cloud labels")
            }
            // A conflict means the node changed meanwhile; the next pass
            // sees the new version.
            Err(e) => {
                tracing::warn!(node = %name, error = %e, "could not refresh the node's labels")
            }
        }
    }

    fn batch_limit(&self) -> usize {
        let provider = self
            .ctx
            .cloud
            .instances_v2()
            .and_then(|i| i.batch())
            .map_or(1, |b| b.max_batch_size().max(1));
        provider.min(self.config.max_batch.max(1))
    }

    /// Fetch metadata for the batch and initialize each node; the outcome
    /// of each node that still needed it (a node initialized or deleted
    /// meanwhile is left out).
    async fn sync_batch(
        &self,
        store: &Store<Node>,
        queue: &WorkQueue<String>,
        keys: Vec<String>,
    ) -> Vec<(String, Result<Action, SyncError>)> {
        let api = self.ctx.api();
        let mut nodes = Vec::with_capacity(keys.len());
        for key in &keys {
            // The reflector's store is published at the end of each (re)list;
            // a node it does not hold yet is read from the API instead.
            let node = match store.get(&ObjectRef::new(key)) {
                Some(n) => Some((*n).clone()),
                None => api.get_opt(key).await.ok().flatten(),
            };
            nodes.extend(node.filter(is_uninitialized));
        }
        if nodes.is_empty() {
            return Vec::new();
        }
        let metadata = self.metadata(&nodes).await;
        // The writes of one batch go out concurrently: a batch of 500 nodes
        // written one after another would leave the API server idle between
        // round trips.
        let writes = self.config.write_concurrency.max(1);
        futures_util::stream::iter(nodes.into_iter().zip(metadata))
            .map(|(node, meta)| async move {
                let name = node.metadata.name.clone().unwrap_or_default();
                let result = match meta {
                    Ok(Some(meta)) => self.initialize(&node, meta).await,
                    // Go: no metadata means skip; the taint stays until the node changes.
                    Ok(None) => Ok(()),
                    Err(e) => Err(SyncError::Cloud(e)),
                };
                // One event per failure streak, not one per retry.
                if let Err(e) = &result
                    && queue.num_requeues(&name) == 0
                {
                    self.ctx
                        .recorder
                        .record(
                            &reference(&node),
                            EventType::Warning,
                            INITIALIZATION_FAILED,
                            &format!("Failed to initialize the node: {e}"),
                        )
                        .await;
                }
                (name, result.map(|()| Action::Done))
            })
            .buffer_unordered(writes)
            .collect()
            .await
    }

    /// One metadata answer per node: one batched call when offered,
    /// otherwise one call per node.
    async fn metadata(&self, nodes: &[Node]) -> Vec<Result<Option<InstanceMetadata>, CloudError>> {
        let Some(instances) = self.ctx.cloud.instances_v2() else {
            return nodes
                .iter()
                .map(|_| Err(CloudError::not_implemented()))
                .collect();
        };
        if let Some(batch) = instances.batch()
            && nodes.len() > 1
        {
            let answers = self
                .ctx
                .metrics
                .cloud(
                    "instance_metadata_batch",
                    batch.instance_metadata_batch(nodes),
                )
                .await;
            return match answers {
                Ok(answers) => match check_batch_len(nodes.len(), &answers) {
                    Ok(()) => answers,
                    Err(e) => nodes
                        .iter()
                        .map(|_| Err(CloudError::new(e.kind(), e.to_string())))
                        .collect(),
                },
                Err(e) => nodes
                    .iter()
                    .map(|_| Err(CloudError::new(e.kind(), e.to_string())))
                    .collect(),
            };
        }
        let mut out = Vec::with_capacity(nodes.len());
        for node in nodes {
            let answer = self
                .ctx
                .metrics
                .cloud("instance_metadata", instances.instance_metadata(node))
                .await;
            out.push(answer);
        }
        out
    }

    /// The two writes and the event for one node.
    async fn initialize(&self, node: &Node, meta: InstanceMetadata) -> Result<(), SyncError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let node_provider_id = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .unwrap_or_default();
        let required = self
            .ctx
            .cloud
            .instances_v2()
            .is_none_or(|i| i.requires_provider_id());
        if meta.provider_id.is_empty() && node_provider_id.is_empty() && required {
            return Err(SyncError::NoProviderId);
        }
        // Never stamp a Node with metadata for another ID (Go keeps the
        // Node's silently): the provider renders the ID otherwise, and the
        // controllers could never match the Node to its instance.
        if !meta.provider_id.is_empty()
            && !node_provider_id.is_empty()
            && meta.provider_id != node_provider_id
        {
            return Err(SyncError::ProviderIdMismatch {
                node: node_provider_id,
                cloud: meta.provider_id,
            });
        }
        let addresses = self.addresses(node, &meta)?;
        let list = invalid_addresses(&meta);
        if !list.is_empty() {
            tracing::warn!(node = %name, addresses = ?list, "the cloud reports invalid addresses; they are not written");
            self.ctx
                .recorder
                .record(
                    &reference(node),
                    EventType::Warning,
                    INVALID_NODE_ADDRESS,
                    &format!(
                        "Invalid addresses from the cloud provider not written: {}",
                        list.join("; ")
                    ),
                )
                .await;
        }
        let existing_labels = node.metadata.labels.clone().unwrap_or_default();
        let mut new_labels: BTreeMap<String, String> = BTreeMap::new();
        for ((ga, beta), value) in cloud_labels::well_known(&meta) {
            if !value.is_empty() {
                new_labels.insert(ga.to_owned(), value.to_owned());
                new_labels.insert(beta.to_owned(), value.to_owned());
            }
        }
        let extra = filter_additional_labels(&meta.additional_labels, &existing_labels);
        for key in &extra.rejected {
            tracing::warn!(node = %name, label = %key, "additional label in a Kubernetes namespace refused");
        }
        new_labels.extend(extra.apply);
        let remaining: Vec<Taint> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t.key != taints::UNINITIALIZED)
            .collect();
        let mut spec = json!({"taints": remaining});
        if node_provider_id.is_empty() && !meta.provider_id.is_empty() {
            spec["providerID"] = json!(meta.provider_id);
        }
        let mut metadata =
            json!({"labels": new_labels, "resourceVersion": node.metadata.resource_version});
        if self.config.refresh_labels {
            let managed = cloud_labels::refresh(&existing_labels, None, &meta).managed;
            metadata["annotations"] =
                json!({MANAGED_LABELS_ANNOTATION: cloud_labels::render_managed(&managed)});
        }
        let patch = json!({"metadata": metadata, "spec": spec});
        let nodes = self.ctx.api();
        let params = PatchParams::default();
        nodes.patch(&name, &params, &Patch::Merge(patch)).await?;
        let created = node.metadata.creation_timestamp.as_ref();
        self.ctx
            .metrics
            .taint_removal_delay
            .observe(seconds_since(created));
        if !addresses.is_empty() {
            nodes
                .patch_status(
                    &name,
                    &params,
                    &Patch::Merge(json!({"status": {"addresses": addresses}})),
                )
                .await?;
        }
        self.ctx
            .metrics
            .initial_node_sync_delay
            .observe(seconds_since(created));
        self.ctx
            .recorder
            .record(
                &reference(node),
                EventType::Normal,
                events::SYNCED,
                events::SYNCED_MESSAGE,
            )
            .await;
        Ok(())
    }

    /// The addresses to write: the cloud's valid ones (see
    /// [`node_address_problem`]), filtered by the provided node IP; the
    /// kubelet's Hostname address is kept if the cloud has none.
    fn addresses(
        &self,
        node: &Node,
        meta: &InstanceMetadata,
    ) -> Result<Vec<NodeAddress>, SyncError> {
        let valid: Vec<NodeAddress> = meta
            .node_addresses
            .iter()
            .filter(|a| node_address_problem(a).is_none())
            .cloned()
            .collect();
        if valid.is_empty() {
            return Ok(Vec::new());
        }
        let name = node.metadata.name.clone().unwrap_or_default();
        let mut addresses = match node
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(annotations::PROVIDED_NODE_IP))
        {
            Some(ip) => {
                node_addresses_from_node_ip(ip, &valid).map_err(|e| SyncError::ProvidedNodeIp {
                    node: name.clone(),
                    message: e.to_string(),
                })?
            }
            None => valid,
        };
        if !addresses.iter().any(|a| a.type_ == "Hostname") {
            let kubelet_hostnames = node
                .status
                .as_ref()
                .and_then(|s| s.addresses.as_ref())
                .map(|a| {
                    a.iter()
                        .filter(|a| a.type_ == "Hostname")
                        .cloned()
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            addresses.extend(kubelet_hostnames);
        }
        Ok(addresses)
    }
}

impl crate::Instrumented for NodeController {
    fn instruments(&mut self) -> (&mut CcmMetrics, &mut ControllerHealth) {
        self.ctx.instruments()
    }
}
