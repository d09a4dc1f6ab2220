//! The node-ipam controller with `RangeAllocator` semantics (not in Go's
//! cloud-provider library; the reference is kube-controller-manager's range
//! allocator, which Go CCMs copy): each Node without pod CIDRs gets one
//! node CIDR per cluster CIDR (dual-stack: one IPv4, one IPv6), written to
//! `spec.podCIDR` / `spec.podCIDRs`.
//!
//! - At start, the pod CIDRs of existing Nodes and the service range are
//!   marked in use.
//! - A Node's CIDRs are released when the Node is deleted.
//! - No CIDR left: Warning `CIDRNotAvailable`; the write failed: Warning
//!   `CIDRAssignmentFailed` and the CIDRs released; both retried with
//!   backoff. Events come from `cidrAllocator`, as in Go.
//!
//! Run it only with `--allocate-node-cidrs` (the manager command decides).
//!
//! ```no_run
//! use stratus_ccm::informers::SharedInformers;
//! use stratus_ccm::ipam::{NodeIpamConfig, NodeIpamController};
//!
//! # async fn run(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let informers = SharedInformers::new(client.clone());
//! let config = NodeIpamConfig::new(vec!["10.244.0.0/16".parse()?]);
//! let (_stop, stopped) = tokio::sync::watch::channel(false);
//! NodeIpamController::new(client, informers.nodes(), config)?.run(stopped).await;
//! # Ok(())
//! # }
//! ```

mod cidr_set;
pub use cidr_set::{CidrSet, CidrSetError};

use std::collections::HashMap;
use std::sync::Arc;

use crate::names::events;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube_runtime::reflector::{ObjectRef, Store};
use serde_json::json;
use stratus_cloud::helpers::Cidr;
use stratus_cloud::names::controllers;
use stratus_runtime::controller::Controller;
use stratus_runtime::events::{EventRecorder, EventType};
use stratus_runtime::health::ControllerHealth;
use stratus_runtime::workqueue::{Action, Retry, WorkQueue, default_controller_rate_limiter};
use tokio::sync::watch;

use crate::metrics::CcmMetrics;
use crate::route::pod_cidrs;
use stratus_runtime::informer::SharedInformer;

/// Settings of the node-ipam controller (Go's flags in brackets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIpamConfig {
    /// The cluster CIDRs: one, or two of different families
    /// (`--cluster-cidr`).
    pub cluster_cidrs: Vec<Cidr>,
    /// The service ranges, never given to nodes
    /// (`--service-cluster-ip-range`, primary and secondary).
    pub service_cidrs: Vec<Cidr>,
    /// The IPv4 node CIDR size (`--node-cidr-mask-size-ipv4`, 24).
    pub node_cidr_mask_size_ipv4: u8,
    /// The IPv6 node CIDR size (`--node-cidr-mask-size-ipv6`, 64).
    pub node_cidr_mask_size_ipv6: u8,
}

impl NodeIpamConfig {
    /// Go's defaults for `cluster_cidrs`: masks /24 and /64, no service
    /// range.
    pub fn new(cluster_cidrs: Vec<Cidr>) -> Self {
        Self {
            cluster_cidrs,
            service_cidrs: Vec::new(),
            node_cidr_mask_size_ipv4: 24,
            node_cidr_mask_size_ipv6: 64,
        }
    }

    /// One CIDR set per cluster CIDR, or why the settings are invalid.
    ///
    /// ```
    /// use stratus_ccm::ipam::{IpamConfigError, NodeIpamConfig};
    ///
    /// let ok = NodeIpamConfig::new(vec!["10.244.0.0/16".parse().unwrap(), "fd00::/56".parse().unwrap()]);
    /// assert_eq!(ok.cidr_sets().unwrap().len(), 2);
    /// let two_v4 = NodeIpamConfig::new(vec!["10.0.0.0/16".parse().unwrap(), "10.1.0.0/16".parse().unwrap()]);
    /// assert_eq!(two_v4.cidr_sets().unwrap_err(), IpamConfigError::NotDualStack);
    /// ```
    pub fn cidr_sets(&self) -> Result<Vec<CidrSet>, IpamConfigError> {
        match self.cluster_cidrs.as_slice() {
            [] => return Err(IpamConfigError::NoClusterCidr),
            [a, b] if a.is_ipv6() == b.is_ipv6() => return Err(IpamConfigError::NotDualStack),
            [_] | [_, _] => {}
            more => return Err(IpamConfigError::TooManyClusterCidrs(more.len())),
        }
        self.cluster_cidrs
            .iter()
            .map(|c| {
                let mask = if c.is_ipv6() {
                    self.node_cidr_mask_size_ipv6
                } else {
                    self.node_cidr_mask_size_ipv4
                };
                CidrSet::new(*c, mask).map_err(IpamConfigError::Mask)
            })
            .collect()
    }
}

/// Invalid node-ipam settings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IpamConfigError {
    /// No cluster CIDR.
    #[error("node-ipam needs a cluster CIDR (--cluster-cidr)")]
    NoClusterCidr,
    /// More than two cluster CIDRs.
    #[error("at most two cluster CIDRs (one per IP family) are allowed, got {0}")]
    TooManyClusterCidrs(usize),
    /// Two cluster CIDRs of one family.
    #[error("two cluster CIDRs must be one IPv4 and one IPv6 (dual-stack)")]
    NotDualStack,
    /// A mask size that does not fit its cluster CIDR.
    #[error(transparent)]
    Mask(CidrSetError),
}

/// Why one Node got no pod CIDRs this time (retried with backoff).
#[derive(Debug, thiserror::Error)]
enum SyncError {
    #[error("no pod CIDR left in {0}")]
    Exhausted(Cidr),
    #[error("could not write the node's pod CIDRs: {0}")]
    Write(#[from] kube::Error),
}

impl Retry for SyncError {}

/// The node-ipam controller.
pub struct NodeIpamController {
    client: kube::Client,
    /// The shared Node informer it reads.
    nodes: SharedInformer<Node>,
    config: NodeIpamConfig,
    sets: Vec<CidrSet>,
    /// The CIDRs each Node holds, to release them when it goes.
    assigned: HashMap<String, Vec<Cidr>>,
    /// Whether the existing Nodes' CIDRs were marked in use (at the first
    /// reconcile, once the cache holds the first list).
    occupied: bool,
    recorder: EventRecorder,
    metrics: CcmMetrics,
    health: ControllerHealth,
}

impl std::fmt::Debug for NodeIpamController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeIpamController")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl NodeIpamController {
    /// A controller reading `nodes` for `config`, or why the settings are
    /// invalid.
    pub fn new(
        client: kube::Client,
        nodes: &SharedInformer<Node>,
        config: NodeIpamConfig,
    ) -> Result<Self, IpamConfigError> {
        let sets = config.cidr_sets()?;
        let recorder = EventRecorder::new(client.clone(), controllers::NODE_IPAM.event_component);
        Ok(Self {
            client,
            nodes: nodes.clone(),
            config,
            sets,
            assigned: HashMap::new(),
            occupied: false,
            recorder,
            metrics: CcmMetrics::default(),
            health: ControllerHealth::new(),
        })
    }

    /// Run until `stop` becomes true: one worker, one Node at a time.
    pub async fn run(self, stop: watch::Receiver<bool>) {
        let controller = Controller::new(WorkQueue::with_metrics(
            default_controller_rate_limiter(),
            self.metrics.runtime.workqueue.queue("nodeipam"),
        ))
        .health(self.health.clone())
        .reconcile_metrics(self.metrics.reconciles(controllers::NODE_IPAM))
        .watches(&self.nodes, |n: &Node| n.metadata.name.clone());
        let store = self.nodes.store().clone();
        let this = Arc::new(tokio::sync::Mutex::new(self));
        let reconcile = move |name: String| {
            let (this, store) = (this.clone(), store.clone());
            async move {
                let mut this = this.lock().await;
                if !this.occupied {
                    this.occupy_existing(&store);
                    this.occupied = true;
                }
                this.sync(&store, &name).await.map(|()| Action::Done)
            }
        };
        controller.run(reconcile, stop).await;
    }

    /// Mark the service ranges and every existing Node's pod CIDRs in use.
    fn occupy_existing(&mut self, store: &Store<Node>) {
        for service in self.config.service_cidrs.clone() {
            for set in &mut self.sets {
                if service.is_ipv6() == set.cluster().is_ipv6()
                    && service.overlaps(&set.cluster())
                    && let Err(e) = set.occupy(&service)
                {
                    tracing::warn!(error = %e, "could not exclude the service range");
                }
            }
        }
        for node in store.state() {
            let name = node.metadata.name.clone().unwrap_or_default();
            self.record_existing(&name, &node);
        }
    }

    /// Mark `node`'s pod CIDRs in use and remember them; CIDRs outside the
    /// cluster CIDRs (set by someone else) are logged and ignored.
    fn record_existing(&mut self, name: &str, node: &Node) {
        let mut held = Vec::new();
        for text in pod_cidrs(node) {
            let Ok(cidr) = text.parse::<Cidr>() else {
                tracing::warn!(node = %name, cidr = %text, "the node's pod CIDR does not parse");
                continue;
            };
            match self.sets.iter_mut().find(|s| s.contains(&cidr)) {
                Some(set) => match set.occupy(&cidr) {
                    Ok(()) => held.push(cidr),
                    Err(e) => {
                        tracing::warn!(node = %name, error = %e, "could not mark a pod CIDR in use")
                    }
                },
                None => {
                    tracing::warn!(node = %name, cidr = %cidr, "the node's pod CIDR is outside the cluster CIDRs")
                }
            }
        }
        self.assigned.insert(name.to_owned(), held);
    }

    fn release(&mut self, cidrs: &[Cidr]) {
        for cidr in cidrs {
            if let Some(set) = self.sets.iter_mut().find(|s| s.contains(cidr)) {
                let _ = set.release(cidr);
            }
        }
    }

    async fn event(&self, node: &Node, reason: &str) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let reference = crate::node::reference(node);
        self.recorder
            .record(
                &reference,
                EventType::Warning,
                reason,
                &format!("Node {name} status is now: {reason}"),
            )
            .await;
    }

    /// One Node: release a deleted one's CIDRs, adopt existing ones, or
    /// allocate and write new ones. `Err` asks for a retry.
    async fn sync(&mut self, store: &Store<Node>, name: &str) -> Result<(), SyncError> {
        let Some(node) = store.get(&ObjectRef::new(name)) else {
            if let Some(held) = self.assigned.remove(name) {
                self.release(&held);
                tracing::info!(node = %name, cidrs = ?held, "released the deleted node's pod CIDRs");
            }
            return Ok(());
        };
        if !pod_cidrs(&node).is_empty() {
            if !self.assigned.contains_key(name) {
                self.record_existing(name, &node);
            }
            return Ok(());
        }
        if let Some(held) = self.assigned.remove(name) {
            // Recreated under the same name without CIDRs.
            self.release(&held);
        }
        let mut cidrs = Vec::with_capacity(self.sets.len());
        let mut exhausted = None;
        for set in &mut self.sets {
            match set.allocate_next() {
                Some(c) => cidrs.push(c),
                None => {
                    exhausted = Some(set.cluster());
                    break;
                }
            }
        }
        if let Some(cluster) = exhausted {
            self.release(&cidrs);
            self.event(&node, events::CIDR_NOT_AVAILABLE).await;
            return Err(SyncError::Exhausted(cluster));
        }
        let texts: Vec<String> = cidrs.iter().map(Cidr::to_string).collect();
        let patch = json!({"spec": {"podCIDR": texts[0], "podCIDRs": texts}});
        let nodes: Api<Node> = Api::all(self.client.clone());
        match nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => {
                tracing::info!(node = %name, cidrs = ?texts, "assigned pod CIDRs");
                self.assigned.insert(name.to_owned(), cidrs);
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.is_not_found() => {
                self.release(&cidrs);
                Ok(())
            }
            Err(e) => {
                self.release(&cidrs);
                self.event(&node, events::CIDR_ASSIGNMENT_FAILED).await;
                Err(e.into())
            }
        }
    }
}

impl crate::Instrumented for NodeIpamController {
    fn instruments(&mut self) -> (&mut CcmMetrics, &mut ControllerHealth) {
        (&mut self.metrics, &mut self.health)
    }
}
