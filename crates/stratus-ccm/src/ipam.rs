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
//! use stratus_ccm::ipam::{NodeIpamConfig, NodeIpamController};
//!
//! # async fn run(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let config = NodeIpamConfig::new(vec!["10.244.0.0/16".parse()?]);
//! let (_stop, stopped) = tokio::sync::watch::channel(false);
//! NodeIpamController::new(client, config)?.run(stopped).await;
//! # Ok(())
//! # }
//! ```

mod cidr_set;
pub use cidr_set::{CidrSet, CidrSetError};

use std::collections::HashMap;

use crate::names::events;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube_runtime::reflector::{ObjectRef, Store};
use serde_json::json;
use stratus_cloud::helpers::Cidr;
use stratus_cloud::names::controllers;
use stratus_runtime::events::{EventRecorder, EventType};
use stratus_runtime::health::ControllerHealth;
use stratus_runtime::workqueue::{WorkQueue, default_controller_rate_limiter};
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

/// The node-ipam controller.
pub struct NodeIpamController {
    client: kube::Client,
    /// The Nodes it reads: its own watch unless it was handed a shared one.
    nodes: SharedInformer<Node>,
    config: NodeIpamConfig,
    sets: Vec<CidrSet>,
    /// The CIDRs each Node holds, to release them when it goes.
    assigned: HashMap<String, Vec<Cidr>>,
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
    /// A controller for `config`, or why the settings are invalid.
    pub fn new(client: kube::Client, config: NodeIpamConfig) -> Result<Self, IpamConfigError> {
        let sets = config.cidr_sets()?;
        let recorder = EventRecorder::new(client.clone(), controllers::NODE_IPAM.event_component);
        let nodes = SharedInformer::new(Api::all(client.clone()));
        Ok(Self {
            client,
            nodes,
            config,
            sets,
            assigned: HashMap::new(),
            recorder,
            metrics: CcmMetrics::default(),
            health: ControllerHealth::new(),
        })
    }

    /// Run until `stop` becomes true.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let queue: WorkQueue<String> = WorkQueue::with_metrics(
            default_controller_rate_limiter(),
            self.metrics.runtime.workqueue.queue("nodeipam"),
        );
        let feed = queue.clone();
        let health = self.health.clone();
        let informer = self.nodes.subscribe(&health, move |n| {
            if let Some(name) = n.metadata.name.clone() {
                feed.add(name);
            }
        });
        let store = informer.store().clone();
        tokio::select! {
            _ = informer.wait_until_ready() => {}
            _ = stop.changed() => return,
        }
        self.occupy_existing(&store);
        loop {
            let key = tokio::select! {
                k = queue.get() => k,
                _ = stop.changed() => None,
            };
            let Some(key) = key else { break };
            let started = std::time::Instant::now();
            let result = self.sync(&store, &key).await;
            self.metrics
                .runtime
                .reconcile
                .controller(controllers::NODE_IPAM.canonical)
                .observe(&result, started.elapsed());
            match result {
                Ok(()) => queue.forget(&key),
                Err(()) => queue.add_rate_limited(key.clone()),
            }
            queue.done(&key);
        }
        queue.shut_down();
        health.stopped();
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
    async fn sync(&mut self, store: &Store<Node>, name: &str) -> Result<(), ()> {
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
        for set in &mut self.sets {
            match set.allocate_next() {
                Some(c) => cidrs.push(c),
                None => {
                    tracing::warn!(node = %name, cluster = %set.cluster(), "no pod CIDR left");
                    break;
                }
            }
        }
        if cidrs.len() < self.sets.len() {
            self.release(&cidrs);
            self.event(&node, events::CIDR_NOT_AVAILABLE).await;
            return Err(());
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
                tracing::warn!(node = %name, error = %e, "could not write the node's pod CIDRs");
                self.release(&cidrs);
                self.event(&node, events::CIDR_ASSIGNMENT_FAILED).await;
                Err(())
            }
        }
    }
}

impl crate::Instrumented for NodeIpamController {
    fn instruments(&mut self) -> (&mut CcmMetrics, &mut ControllerHealth) {
        (&mut self.metrics, &mut self.health)
    }
}

impl crate::informers::ReadsNodes for NodeIpamController {
    fn node_informer(&mut self) -> &mut SharedInformer<Node> {
        &mut self.nodes
    }
}
