//! The Node a virtual node registers: labels, taint, capacity, addresses,
//! daemon endpoint and node info with sensible defaults, which the provider
//! may then adjust ([`NodeProvider::configure_node`]).
//!
//! [`NodeProvider::configure_node`]: stratus_pod::NodeProvider::configure_node

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::NodeConfig;

/// The taint key a virtual node carries by default (value: the provider
/// name, effect `NoSchedule`), as Go's virtual-kubelet.
pub const PROVIDER_TAINT_KEY: &str = "virtual-kubelet.io/provider";

/// The condition types a node reports, with the status of a healthy node.
pub(crate) const CONDITIONS: [(&str, &str, &str, &str); 5] = [
    (
        "Ready",
        "True",
        "KubeletReady",
        "kubelet is posting ready status",
    ),
    (
        "MemoryPressure",
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    (
        "DiskPressure",
        "False",
        "KubeletHasNoDiskPressure",
        "kubelet has no disk pressure",
    ),
    (
        "PIDPressure",
        "False",
        "KubeletHasSufficientPID",
        "kubelet has sufficient PID available",
    ),
    (
        "NetworkUnavailable",
        "False",
        "RouteCreated",
        "the virtual node's network is managed by its provider",
    ),
];

/// The healthy conditions, stamped `now`.
pub(crate) fn healthy_conditions(now: &Time) -> Vec<NodeCondition> {
    CONDITIONS
        .iter()
        .map(|(kind, status, reason, message)| NodeCondition {
            type_: (*kind).into(),
            status: (*status).into(),
            reason: Some((*reason).into()),
            message: Some((*message).into()),
            last_heartbeat_time: Some(now.clone()),
            last_transition_time: Some(now.clone()),
        })
        .collect()
}

/// The default taint of a node of `provider_name`:
/// `virtual-kubelet.io/provider=<provider_name>:NoSchedule`.
///
/// ```
/// let taint = stratus_kubelet::node::provider_taint("acme");
/// assert_eq!((taint.key.as_str(), taint.value.as_deref(), taint.effect.as_str()),
///            ("virtual-kubelet.io/provider", Some("acme"), "NoSchedule"));
/// ```
pub fn provider_taint(provider_name: &str) -> Taint {
    Taint {
        key: PROVIDER_TAINT_KEY.into(),
        value: Some(provider_name.to_owned()),
        effect: "NoSchedule".into(),
        time_added: None,
    }
}

/// The Node of `config` before the provider adjusts it.
///
/// ```
/// use stratus_kubelet::node::{NodeConfig, node_template};
///
/// let node = node_template(&NodeConfig::new("vk-0", "acme"));
/// let labels = node.metadata.labels.unwrap();
/// assert_eq!(labels["type"], "virtual-kubelet");
/// assert_eq!(labels["kubernetes.io/hostname"], "vk-0");
/// let taint = &node.spec.unwrap().taints.unwrap()[0];
/// assert_eq!((taint.key.as_str(), taint.value.as_deref()), ("virtual-kubelet.io/provider", Some("acme")));
/// let status = node.status.unwrap();
/// assert_eq!(status.daemon_endpoints.unwrap().kubelet_endpoint.unwrap().port, 10250);
/// ```
pub fn node_template(config: &NodeConfig) -> Node {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let mut labels: BTreeMap<String, String> = [
        ("type", "virtual-kubelet"),
        ("kubernetes.io/role", "agent"),
        ("kubernetes.io/os", config.operating_system.as_str()),
        ("kubernetes.io/arch", config.architecture.as_str()),
        ("kubernetes.io/hostname", config.name.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    labels.extend(config.labels.clone());
    let taints = config.taint.clone().map(|taint| vec![taint]);
    let capacity: BTreeMap<String, Quantity> = config
        .capacity
        .iter()
        .map(|(k, v)| (k.clone(), Quantity(v.clone())))
        .collect();
    let mut addresses = Vec::new();
    if let Some(ip) = &config.internal_ip {
        addresses.push(NodeAddress {
            type_: "InternalIP".into(),
            address: ip.clone(),
        });
    }
    addresses.push(NodeAddress {
        type_: "Hostname".into(),
        address: config.name.clone(),
    });
    Node {
        metadata: ObjectMeta {
            name: Some(config.name.clone()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints,
            ..Default::default()
        }),
        status: Some(NodeStatus {
            allocatable: Some(capacity.clone()),
            capacity: Some(capacity),
            addresses: Some(addresses),
            conditions: Some(healthy_conditions(&now)),
            daemon_endpoints: Some(NodeDaemonEndpoints {
                kubelet_endpoint: Some(DaemonEndpoint {
                    port: config.daemon_port,
                }),
            }),
            node_info: Some(NodeSystemInfo {
                architecture: config.architecture.clone(),
                operating_system: config.operating_system.clone(),
                kubelet_version: config.kubelet_version.clone(),
                kube_proxy_version: String::new(),
                os_image: String::new(),
                kernel_version: String::new(),
                container_runtime_version: format!("stratus://{}", config.provider_name),
                machine_id: String::new(),
                system_uuid: String::new(),
                boot_id: String::new(),
                ..Default::default()
            }),
            phase: Some("Running".into()),
            ..Default::default()
        }),
    }
}
