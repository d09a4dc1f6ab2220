//! The node side of a process node: the host's capacity (cores, memory
//! minus the reserve, the pod limit) as the Node's capacity and
//! allocatable, and an annotation saying which limits the node enforces.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use stratus_pod::NodeProvider;

use crate::{PodCidr, PodNetwork, ProcessConfig};

/// The annotation saying how the node enforces container limits:
/// `memory=rlimit-data,cpu=cgroup-v1` (or `cgroup-v2`) where this process
/// may write the `cpu` controller, `memory=cgroup-v2,cpu=cgroup-v2` where
/// the v2 `memory` controller is delegated too, `memory=rlimit-data,cpu=none`
/// elsewhere (see `docs/providers/process.md`).
pub const LIMITS_ANNOTATION: &str = "process.stratus.dev/limits";

/// A [`NodeProvider`] reporting the host's capacity (or the configured
/// one) and the operator's labels and taints; with
/// [`PodNetwork::PodCidr`] it follows its Node to learn the pod CIDR the
/// pods' addresses come from (shared with the provider made from the same
/// configuration).
///
/// ```
/// use stratus_pod::NodeProvider;
/// use stratus_provider_process::{HostNode, LIMITS_ANNOTATION, ProcessConfig};
///
/// let mut config = ProcessConfig::new("/tmp/pods");
/// config.max_pods = 20;
/// let mut node = k8s_openapi::api::core::v1::Node::default();
/// HostNode::new(&config).configure_node(&mut node);
/// let status = node.status.unwrap();
/// assert_eq!(status.capacity.unwrap()["pods"].0, "20");
/// assert_eq!(status.allocatable.unwrap()["pods"].0, "20");
/// assert!(node.metadata.annotations.unwrap().contains_key(LIMITS_ANNOTATION));
/// ```
#[derive(Debug, Clone)]
pub struct HostNode {
    /// What [`LIMITS_ANNOTATION`] says.
    enforced: &'static str,
    capacity: BTreeMap<String, Quantity>,
    labels: BTreeMap<String, String>,
    taints: Vec<k8s_openapi::api::core::v1::Taint>,
    /// The pod CIDR to learn from the Node, with [`PodNetwork::PodCidr`].
    pod_cidr: Option<PodCidr>,
}

impl HostNode {
    /// The node of `config`'s host ([`ProcessConfig::host_capacity`]).
    pub fn new(config: &ProcessConfig) -> Self {
        Self {
            enforced: crate::cgroups::Cgroups::detect()
                .map_or("memory=rlimit-data,cpu=none", |c| c.enforced()),
            capacity: config
                .host_capacity()
                .into_iter()
                .map(|(k, v)| (k, Quantity(v)))
                .collect(),
            labels: config.node_labels.clone(),
            taints: config.node_taints.clone(),
            pod_cidr: match &config.pod_network {
                PodNetwork::PodCidr(pool) => Some(pool.clone()),
                PodNetwork::NodeAddress => None,
            },
        }
    }
}

impl NodeProvider for HostNode {
    /// With [`PodNetwork::PodCidr`]: the node learns its pod CIDR from its
    /// Node.
    fn follows_node(&self) -> bool {
        self.pod_cidr.is_some()
    }

    fn node_changed(&self, node: &Node) {
        if let Some(pool) = &self.pod_cidr {
            pool.learn(node);
        }
    }

    fn configure_node(&self, node: &mut Node) {
        let status = node.status.get_or_insert_with(Default::default);
        for resources in [&mut status.capacity, &mut status.allocatable] {
            resources
                .get_or_insert_with(Default::default)
                .extend(self.capacity.clone());
        }
        node.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(LIMITS_ANNOTATION.into(), self.enforced.into());
        node.metadata
            .labels
            .get_or_insert_with(Default::default)
            .extend(self.labels.clone());
        if !self.taints.is_empty() {
            let taints = node
                .spec
                .get_or_insert_with(Default::default)
                .taints
                .get_or_insert_with(Default::default);
            for taint in &self.taints {
                taints.retain(|t| t.key != taint.key || t.effect != taint.effect);
                taints.push(taint.clone());
            }
        }
    }
}
