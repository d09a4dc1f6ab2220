//! Well-known names: every taint, label, annotation, finalizer, condition
//! and controller name the Go cloud-provider library uses, spelled exactly
//! as it spells them, so a Stratus manager can replace a Go one in a
//! running cluster. (The manager's own defaults and event reasons are
//! `stratus_ccm::names`.)

/// Taints.
pub mod taints {
    /// Added by a kubelet started with `--cloud-provider=external` (value
    /// `true`, effect `NoSchedule`); removed by the node controller once the
    /// node is initialized.
    pub const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
    /// Added (effect `NoSchedule`) by the lifecycle controller to a not-Ready
    /// node whose instance is shut down; removed when the node is Ready.
    pub const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
    /// The effect both taints above use.
    pub const EFFECT_NO_SCHEDULE: &str = "NoSchedule";
    /// Set by the cluster autoscaler; a node carrying it is not a
    /// load-balancer backend.
    pub const TO_BE_DELETED_BY_CLUSTER_AUTOSCALER: &str = "ToBeDeletedByClusterAutoscaler";
}

/// Labels.
pub mod labels {
    /// Zone (GA).
    pub const TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
    /// Region (GA).
    pub const TOPOLOGY_REGION: &str = "topology.kubernetes.io/region";
    /// Zone (beta).
    pub const FAILURE_DOMAIN_BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
    /// Region (beta).
    pub const FAILURE_DOMAIN_BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
    /// Instance type (GA).
    pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
    /// Instance type (beta).
    pub const INSTANCE_TYPE_BETA: &str = "beta.kubernetes.io/instance-type";
    /// A node with this label (any value but one that parses as `false`) is
    /// not a load-balancer backend.
    pub const EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS: &str =
        "node.kubernetes.io/exclude-from-external-load-balancers";

    /// The (beta, GA) label pairs the node controller keeps in step on
    /// initialized nodes: when the GA label is missing or differs, it gets the
    /// beta value.
    pub const BETA_TO_GA: [(&str, &str); 3] = [
        (FAILURE_DOMAIN_BETA_ZONE, TOPOLOGY_ZONE),
        (FAILURE_DOMAIN_BETA_REGION, TOPOLOGY_REGION),
        (INSTANCE_TYPE_BETA, INSTANCE_TYPE),
    ];
}

/// Annotations.
pub mod annotations {
    /// Set by the kubelet from `--node-ip`: one IP, or a dual-stack pair
    /// separated by a comma.
    pub const PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";
    /// Service source ranges, used when `spec.loadBalancerSourceRanges` is
    /// empty: comma-separated CIDRs.
    pub const LOAD_BALANCER_SOURCE_RANGES: &str =
        "service.beta.kubernetes.io/load-balancer-source-ranges";
}

/// Finalizers.
pub mod finalizers {
    /// Held on a LoadBalancer Service until its load balancer is deleted.
    pub const LOAD_BALANCER_CLEANUP: &str = "service.kubernetes.io/load-balancer-cleanup";
}

/// Node conditions written by the route controller.
pub mod conditions {
    /// The condition type.
    pub const NETWORK_UNAVAILABLE: &str = "NetworkUnavailable";
    /// Reason when every route of the node exists (status `False`).
    pub const ROUTE_CREATED: &str = "RouteCreated";
    /// Message with [`ROUTE_CREATED`].
    pub const ROUTE_CREATED_MESSAGE: &str = "RouteController created a route";
    /// Reason when a route could not be created (status `True`).
    pub const NO_ROUTE_CREATED: &str = "NoRouteCreated";
    /// Message with [`NO_ROUTE_CREATED`].
    pub const NO_ROUTE_CREATED_MESSAGE: &str = "RouteController failed to create a route";
}

/// A controller of the Go manager, with every name it goes by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerNames {
    /// The canonical name used by `--controllers` and `/healthz/<name>`.
    pub canonical: &'static str,
    /// The short alias `--controllers` also accepts.
    pub alias: &'static str,
    /// The client name: the ServiceAccount in `kube-system` the controller
    /// authenticates as under `--use-service-account-credentials` (Go's
    /// `ClientName`).
    pub client: &'static str,
    /// The event source component.
    pub event_component: &'static str,
}

impl ControllerNames {
    /// A vendor controller's names: its canonical name and alias; it uses
    /// the canonical name as its client and event component too.
    ///
    /// ```
    /// use stratus_cloud::names::ControllerNames;
    /// const TAGGING: ControllerNames = ControllerNames::new("tagging-controller", "tagging");
    /// assert_eq!(TAGGING.event_component, "tagging-controller");
    /// ```
    pub const fn new(canonical: &'static str, alias: &'static str) -> Self {
        Self {
            canonical,
            alias,
            client: canonical,
            event_component: canonical,
        }
    }
}

/// Controller names.
pub mod controllers {
    use super::ControllerNames;

    /// The node controller.
    pub const CLOUD_NODE: ControllerNames = ControllerNames {
        canonical: "cloud-node-controller",
        alias: "cloud-node",
        client: "cloud-node-controller",
        event_component: "cloud-node-controller",
    };
    /// The node lifecycle controller.
    pub const CLOUD_NODE_LIFECYCLE: ControllerNames = ControllerNames {
        canonical: "cloud-node-lifecycle-controller",
        alias: "cloud-node-lifecycle",
        client: "cloud-node-lifecycle-controller",
        event_component: "cloud-node-lifecycle-controller",
    };
    /// The service load-balancer controller.
    pub const SERVICE_LB: ControllerNames = ControllerNames {
        canonical: "service-lb-controller",
        alias: "service",
        client: "service-controller",
        event_component: "service-controller",
    };
    /// The route controller.
    pub const NODE_ROUTE: ControllerNames = ControllerNames {
        canonical: "node-route-controller",
        alias: "route",
        client: "route-controller",
        event_component: "route_controller",
    };
    /// Node IPAM (not in the Go library; as `cmd/cloud-controller-manager`
    /// adds it).
    pub const NODE_IPAM: ControllerNames = ControllerNames {
        canonical: "nodeipam",
        alias: "node-ipam",
        client: "node-controller",
        event_component: "cidrAllocator",
    };

    /// The four controllers the Go library starts by default, in the order
    /// Stratus starts them.
    pub const DEFAULT: [ControllerNames; 4] =
        [CLOUD_NODE, CLOUD_NODE_LIFECYCLE, SERVICE_LB, NODE_ROUTE];
}
