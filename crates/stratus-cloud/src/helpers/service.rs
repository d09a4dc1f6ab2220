//! Service and backend-node helpers of the service load-balancer controller.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Node, PortStatus, Service,
};

use super::net::Cidr;
use crate::names::{annotations, finalizers, labels, taints};
use crate::{CloudError, CloudErrorKind, LoadBalancerClasses};

/// `spec.type` of a load-balancer Service.
pub const SERVICE_TYPE_LOAD_BALANCER: &str = "LoadBalancer";
/// `spec.type` of a node-port Service.
pub const SERVICE_TYPE_NODE_PORT: &str = "NodePort";
/// `spec.externalTrafficPolicy` that keeps traffic on the receiving node.
pub const EXTERNAL_TRAFFIC_POLICY_LOCAL: &str = "Local";
/// The source range used when a Service gives none.
pub const DEFAULT_LOAD_BALANCER_SOURCE_RANGE: &str = "0.0.0.0/0";
/// The health-check path for `externalTrafficPolicy: Local` Services.
pub const HEALTH_CHECK_PATH: &str = "/healthz";

fn service_type(service: &Service) -> &str {
    service
        .spec
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("ClusterIP")
}

/// Why the source ranges of a Service are invalid. The messages are Go's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SourceRangesError {
    /// An entry of `spec.loadBalancerSourceRanges` is not a CIDR.
    #[error("service.Spec.LoadBalancerSourceRanges: [{}] is not valid. Expecting a list of IP ranges. For example, 10.0.0.0/24. Error msg: invalid CIDR address: {invalid}", .specs.join(" "))]
    Spec {
        /// The whole field.
        specs: Vec<String>,
        /// The first invalid entry.
        invalid: String,
    },
    /// The annotation is not a comma-separated list of CIDRs.
    #[error(
        "service.beta.kubernetes.io/load-balancer-source-ranges: {value} is not valid. Expecting a comma-separated list of source IP ranges. For example, 10.0.0.0/24,192.168.2.0/24"
    )]
    Annotation {
        /// The annotation value, trimmed.
        value: String,
    },
}

impl From<SourceRangesError> for CloudError {
    fn from(err: SourceRangesError) -> Self {
        CloudError::new(CloudErrorKind::InvalidInput, err.to_string()).with_source(err)
    }
}

/// A set of source CIDRs, deduplicated by network (Go: `utilnet.IPNetSet`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceRanges(BTreeSet<Cidr>);

impl SourceRanges {
    /// The networks, sorted.
    pub fn iter(&self) -> impl Iterator<Item = &Cidr> {
        self.0.iter()
    }

    /// The number of networks.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True if there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True if `0.0.0.0/0` is among them (Go: `IsAllowAll`). As in Go, `::/0`
    /// alone does not count.
    pub fn is_allow_all(&self) -> bool {
        self.0.iter().any(|c| !c.is_ipv6() && c.prefix_len() == 0)
    }

    /// The networks as strings (`10.0.0.0/24`), sorted.
    pub fn to_strings(&self) -> Vec<String> {
        self.0.iter().map(ToString::to_string).collect()
    }
}

fn parse_cidrs<'a>(specs: impl Iterator<Item = &'a str>) -> Result<SourceRanges, String> {
    let mut set = BTreeSet::new();
    for spec in specs {
        let spec = spec.trim();
        set.insert(spec.parse::<Cidr>().map_err(|_| spec.to_owned())?);
    }
    Ok(SourceRanges(set))
}

/// The source ranges a load balancer should allow (Go:
/// `GetLoadBalancerSourceRanges`): `spec.loadBalancerSourceRanges` if
/// non-empty, else the `service.beta.kubernetes.io/load-balancer-source-ranges`
/// annotation, else `0.0.0.0/0`. Entries are trimmed; any invalid entry is an
/// error.
///
/// ```
/// use k8s_openapi::api::core::v1::{Service, ServiceSpec};
/// use stratus_cloud::helpers::load_balancer_source_ranges;
///
/// let mut svc = Service::default();
/// assert!(load_balancer_source_ranges(&svc).unwrap().is_allow_all());
///
/// svc.spec = Some(ServiceSpec {
///     load_balancer_source_ranges: Some(vec!["10.0.0.5/24".into(), " 192.168.0.0/16".into()]),
///     ..Default::default()
/// });
/// let ranges = load_balancer_source_ranges(&svc).unwrap();
/// assert_eq!(ranges.to_strings(), ["10.0.0.0/24", "192.168.0.0/16"]);
/// ```
pub fn load_balancer_source_ranges(service: &Service) -> Result<SourceRanges, SourceRangesError> {
    let specs = service
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_source_ranges.as_deref())
        .unwrap_or_default();
    if !specs.is_empty() {
        return parse_cidrs(specs.iter().map(String::as_str)).map_err(|invalid| {
            SourceRangesError::Spec {
                specs: specs.to_vec(),
                invalid,
            }
        });
    }
    let annotation = service
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(annotations::LOAD_BALANCER_SOURCE_RANGES))
        .map(|v| v.trim())
        .unwrap_or_default();
    let value = if annotation.is_empty() {
        DEFAULT_LOAD_BALANCER_SOURCE_RANGE
    } else {
        annotation
    };
    parse_cidrs(value.split(',')).map_err(|_| SourceRangesError::Annotation {
        value: value.to_owned(),
    })
}

/// The first IP of the Service's load balancer ingress
/// (`status.loadBalancer.ingress[0].ip`), if it has one: the address
/// clients reach the Service on once the load balancer is ensured.
///
/// ```
/// use k8s_openapi::api::core::v1::{
///     LoadBalancerIngress, LoadBalancerStatus, Service, ServiceStatus,
/// };
/// use stratus_cloud::helpers::ingress_ip;
///
/// let svc = Service {
///     status: Some(ServiceStatus {
///         load_balancer: Some(LoadBalancerStatus {
///             ingress: Some(vec![LoadBalancerIngress {
///                 ip: Some("203.0.113.7".into()),
///                 ..Default::default()
///             }]),
///         }),
///         ..Default::default()
///     }),
///     ..Default::default()
/// };
/// assert_eq!(ingress_ip(&svc), Some("203.0.113.7"));
/// assert_eq!(ingress_ip(&Service::default()), None);
/// ```
pub fn ingress_ip(service: &Service) -> Option<&str> {
    service
        .status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?
        .ip
        .as_deref()
}

/// True if the Service keeps external traffic on the receiving node:
/// `externalTrafficPolicy: Local` on a LoadBalancer or NodePort Service (Go:
/// `RequestsOnlyLocalTraffic`).
pub fn requests_only_local_traffic(service: &Service) -> bool {
    let ty = service_type(service);
    if ty != SERVICE_TYPE_LOAD_BALANCER && ty != SERVICE_TYPE_NODE_PORT {
        return false;
    }
    service
        .spec
        .as_ref()
        .and_then(|s| s.external_traffic_policy.as_deref())
        == Some(EXTERNAL_TRAFFIC_POLICY_LOCAL)
}

/// True if the load balancer needs a health check: a LoadBalancer Service
/// that requests only local traffic (Go: `NeedsHealthCheck`).
pub fn needs_health_check(service: &Service) -> bool {
    service_type(service) == SERVICE_TYPE_LOAD_BALANCER && requests_only_local_traffic(service)
}

/// The health-check path and node port, when the load balancer needs one and
/// the API server allocated `spec.healthCheckNodePort` (Go:
/// `GetServiceHealthCheckPathPort`, which returns `("", 0)` for "none").
///
/// ```
/// use k8s_openapi::api::core::v1::{Service, ServiceSpec};
/// use stratus_cloud::helpers::health_check_path_port;
///
/// let svc = Service {
///     spec: Some(ServiceSpec {
///         type_: Some("LoadBalancer".into()),
///         external_traffic_policy: Some("Local".into()),
///         health_check_node_port: Some(32000),
///         ..Default::default()
///     }),
///     ..Default::default()
/// };
/// assert_eq!(health_check_path_port(&svc), Some(("/healthz", 32000)));
/// assert_eq!(health_check_path_port(&Service::default()), None);
/// ```
pub fn health_check_path_port(service: &Service) -> Option<(&'static str, i32)> {
    if !needs_health_check(service) {
        return None;
    }
    match service.spec.as_ref().and_then(|s| s.health_check_node_port) {
        Some(port) if port != 0 => Some((HEALTH_CHECK_PATH, port)),
        _ => None,
    }
}

fn non_empty(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or_default()
}

fn ports_equal(a: &Option<Vec<PortStatus>>, b: &Option<Vec<PortStatus>>) -> bool {
    let a = a.as_deref().unwrap_or_default();
    let b = b.as_deref().unwrap_or_default();
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.port == y.port && x.protocol == y.protocol && x.error == y.error)
}

fn ingress_equal(a: &LoadBalancerIngress, b: &LoadBalancerIngress) -> bool {
    // `hostname` and `ip` are plain strings in Go (empty == absent);
    // `ipMode` is a pointer (absent != empty).
    non_empty(&a.hostname) == non_empty(&b.hostname)
        && non_empty(&a.ip) == non_empty(&b.ip)
        && a.ip_mode == b.ip_mode
        && ports_equal(&a.ports, &b.ports)
}

/// True if two load-balancer statuses have the same ingress (Go:
/// `LoadBalancerStatusEqual`, a semantic comparison of `.ingress` only, where
/// an absent list equals an empty one).
///
/// ```
/// use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus};
/// use stratus_cloud::helpers::load_balancer_status_equal;
///
/// let empty = LoadBalancerStatus::default();
/// let explicit_empty = LoadBalancerStatus { ingress: Some(vec![]) };
/// assert!(load_balancer_status_equal(&empty, &explicit_empty));
///
/// let one = LoadBalancerStatus {
///     ingress: Some(vec![LoadBalancerIngress { ip: Some("203.0.113.7".into()), ..Default::default() }]),
/// };
/// assert!(!load_balancer_status_equal(&empty, &one));
/// ```
pub fn load_balancer_status_equal(a: &LoadBalancerStatus, b: &LoadBalancerStatus) -> bool {
    let a = a.ingress.as_deref().unwrap_or_default();
    let b = b.ingress.as_deref().unwrap_or_default();
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| ingress_equal(x, y))
}

/// True if the Service carries the load-balancer cleanup finalizer.
pub fn has_load_balancer_finalizer(service: &Service) -> bool {
    service
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == finalizers::LOAD_BALANCER_CLEANUP))
}

/// True if the service controller should own this Service's load balancer:
/// `type: LoadBalancer` and a `loadBalancerClass` the provider serves. With
/// the default classes this is Go's `wantsLoadBalancer`.
pub fn wants_load_balancer(service: &Service, classes: &LoadBalancerClasses) -> bool {
    service_type(service) == SERVICE_TYPE_LOAD_BALANCER
        && classes.serves(
            service
                .spec
                .as_ref()
                .and_then(|s| s.load_balancer_class.as_deref()),
        )
}

/// True if the Service's load balancer must be deleted: it has the cleanup
/// finalizer and is being deleted or is no longer `type: LoadBalancer` (Go:
/// `needsCleanup`).
pub fn needs_cleanup(service: &Service) -> bool {
    has_load_balancer_finalizer(service)
        && (service.metadata.deletion_timestamp.is_some()
            || service_type(service) != SERVICE_TYPE_LOAD_BALANCER)
}

/// Parse a boolean as Go's `strconv.ParseBool`.
pub fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// True if the node is a load-balancer backend (Go's stable node-set
/// predicates): not being deleted; no
/// `node.kubernetes.io/exclude-from-external-load-balancers` label, unless
/// its value parses as `false` (an unparsable value excludes); no
/// `ToBeDeletedByClusterAutoscaler` taint. Readiness is deliberately not
/// considered (KEP-3458).
pub fn is_load_balancer_backend(node: &Node) -> bool {
    if node.metadata.deletion_timestamp.is_some() {
        return false;
    }
    if let Some(value) = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS))
        && parse_go_bool(value) != Some(false)
    {
        return false;
    }
    !node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter()
                .any(|t| t.key == taints::TO_BE_DELETED_BY_CLUSTER_AUTOSCALER)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, ServiceSpec, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use std::collections::BTreeMap;

    fn svc(ty: &str) -> Service {
        Service {
            spec: Some(ServiceSpec {
                type_: Some(ty.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn with_annotation(mut s: Service, v: &str) -> Service {
        s.metadata.annotations = Some(BTreeMap::from([(
            annotations::LOAD_BALANCER_SOURCE_RANGES.to_owned(),
            v.to_owned(),
        )]));
        s
    }

    fn with_ranges(mut s: Service, r: &[&str]) -> Service {
        s.spec.as_mut().unwrap().load_balancer_source_ranges =
            Some(r.iter().map(|x| (*x).to_owned()).collect());
        s
    }

    #[test]
    fn source_ranges_precedence() {
        let base = svc("LoadBalancer");
        assert_eq!(
            load_balancer_source_ranges(&base).unwrap().to_strings(),
            ["0.0.0.0/0"]
        );
        let annotated = with_annotation(base.clone(), " 10.0.0.0/8, 192.168.1.1/24 ");
        assert_eq!(
            load_balancer_source_ranges(&annotated)
                .unwrap()
                .to_strings(),
            ["10.0.0.0/8", "192.168.1.0/24"]
        );
        // The spec wins over the annotation, even an invalid annotation.
        let both = with_ranges(with_annotation(base.clone(), "garbage"), &["172.16.0.0/12"]);
        assert_eq!(
            load_balancer_source_ranges(&both).unwrap().to_strings(),
            ["172.16.0.0/12"]
        );
        // Whitespace-only annotation means allow-all.
        let blank = with_annotation(base.clone(), "   ");
        assert!(load_balancer_source_ranges(&blank).unwrap().is_allow_all());
        // Duplicates collapse by network.
        let dup = with_ranges(base.clone(), &["10.0.0.1/24", "10.0.0.2/24"]);
        assert_eq!(load_balancer_source_ranges(&dup).unwrap().len(), 1);
        // Empty spec list falls through to the annotation.
        let empty_spec = with_ranges(with_annotation(base, "10.1.0.0/16"), &[]);
        assert_eq!(
            load_balancer_source_ranges(&empty_spec)
                .unwrap()
                .to_strings(),
            ["10.1.0.0/16"]
        );
    }

    #[test]
    fn invalid_source_ranges_are_errors() {
        let base = svc("LoadBalancer");
        let err = load_balancer_source_ranges(&with_ranges(base.clone(), &["10.0.0.0/8", "nope"]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "service.Spec.LoadBalancerSourceRanges: [10.0.0.0/8 nope] is not valid. Expecting a list of IP ranges. For example, 10.0.0.0/24. Error msg: invalid CIDR address: nope"
        );
        let err =
            load_balancer_source_ranges(&with_annotation(base.clone(), "10.0.0.0/8,")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "service.beta.kubernetes.io/load-balancer-source-ranges: 10.0.0.0/8, is not valid. Expecting a comma-separated list of source IP ranges. For example, 10.0.0.0/24,192.168.2.0/24"
        );
        assert!(load_balancer_source_ranges(&with_annotation(base.clone(), "10.0.0.1")).is_err());
        assert!(load_balancer_source_ranges(&with_ranges(base, &["::/200"])).is_err());
        let cloud: CloudError = SourceRangesError::Annotation { value: "x".into() }.into();
        assert!(cloud.is_invalid_input());
    }

    #[test]
    fn allow_all_is_ipv4_only_as_in_go() {
        let base = svc("LoadBalancer");
        assert!(
            !load_balancer_source_ranges(&with_ranges(base.clone(), &["::/0"]))
                .unwrap()
                .is_allow_all()
        );
        assert!(
            load_balancer_source_ranges(&with_ranges(base, &["::/0", "0.0.0.0/0"]))
                .unwrap()
                .is_allow_all()
        );
    }

    fn local(ty: &str, port: Option<i32>) -> Service {
        let mut s = svc(ty);
        let spec = s.spec.as_mut().unwrap();
        spec.external_traffic_policy = Some("Local".into());
        spec.health_check_node_port = port;
        s
    }

    #[test]
    fn local_traffic_and_health_checks() {
        assert!(requests_only_local_traffic(&local("LoadBalancer", None)));
        assert!(requests_only_local_traffic(&local("NodePort", None)));
        assert!(!requests_only_local_traffic(&local("ClusterIP", None)));
        assert!(!requests_only_local_traffic(&svc("LoadBalancer")));
        assert!(needs_health_check(&local("LoadBalancer", None)));
        assert!(!needs_health_check(&local("NodePort", Some(30000))));
        assert_eq!(
            health_check_path_port(&local("LoadBalancer", Some(31000))),
            Some(("/healthz", 31000))
        );
        assert_eq!(
            health_check_path_port(&local("LoadBalancer", Some(0))),
            None
        );
        assert_eq!(health_check_path_port(&local("LoadBalancer", None)), None);
        assert_eq!(
            health_check_path_port(&local("NodePort", Some(30000))),
            None
        );
        let mut cluster = local("LoadBalancer", Some(1));
        cluster.spec.as_mut().unwrap().external_traffic_policy = Some("Cluster".into());
        assert_eq!(health_check_path_port(&cluster), None);
    }

    fn ingress(ip: Option<&str>, host: Option<&str>) -> LoadBalancerIngress {
        LoadBalancerIngress {
            ip: ip.map(Into::into),
            hostname: host.map(Into::into),
            ..Default::default()
        }
    }

    fn status(ingress: Option<Vec<LoadBalancerIngress>>) -> LoadBalancerStatus {
        LoadBalancerStatus { ingress }
    }

    #[test]
    fn status_equality_is_semantic_on_ingress_only() {
        assert!(load_balancer_status_equal(
            &status(None),
            &status(Some(vec![]))
        ));
        assert!(load_balancer_status_equal(
            &status(Some(vec![ingress(Some("1.2.3.4"), None)])),
            &status(Some(vec![ingress(Some("1.2.3.4"), Some(""))]))
        ));
        // Order matters, as in Go's DeepEqual.
        assert!(!load_balancer_status_equal(
            &status(Some(vec![
                ingress(Some("1.1.1.1"), None),
                ingress(Some("2.2.2.2"), None)
            ])),
            &status(Some(vec![
                ingress(Some("2.2.2.2"), None),
                ingress(Some("1.1.1.1"), None)
            ]))
        ));
        let mut with_mode = ingress(Some("1.1.1.1"), None);
        with_mode.ip_mode = Some("VIP".into());
        assert!(!load_balancer_status_equal(
            &status(Some(vec![with_mode.clone()])),
            &status(Some(vec![ingress(Some("1.1.1.1"), None)]))
        ));
        let mut with_ports = with_mode.clone();
        with_ports.ports = Some(vec![]);
        assert!(load_balancer_status_equal(
            &status(Some(vec![with_mode])),
            &status(Some(vec![with_ports]))
        ));
    }

    #[test]
    fn ownership_and_cleanup() {
        let classes = LoadBalancerClasses::default();
        let lb = svc("LoadBalancer");
        assert!(wants_load_balancer(&lb, &classes));
        assert!(!wants_load_balancer(&svc("NodePort"), &classes));
        assert!(!wants_load_balancer(&Service::default(), &classes));
        let mut classed = lb.clone();
        classed.spec.as_mut().unwrap().load_balancer_class = Some("example.com/x".into());
        assert!(!wants_load_balancer(&classed, &classes));
        assert!(wants_load_balancer(
            &classed,
            &classes.clone().with_class("example.com/x")
        ));

        assert!(!needs_cleanup(&lb));
        let mut finalized = lb.clone();
        finalized.metadata.finalizers = Some(vec![finalizers::LOAD_BALANCER_CLEANUP.into()]);
        assert!(has_load_balancer_finalizer(&finalized));
        assert!(!needs_cleanup(&finalized));
        let mut deleting = finalized.clone();
        deleting.metadata.deletion_timestamp = Some(Time(Default::default()));
        assert!(needs_cleanup(&deleting));
        let mut retyped = finalized;
        retyped.spec.as_mut().unwrap().type_ = Some("ClusterIP".into());
        assert!(needs_cleanup(&retyped));
    }

    fn node(label: Option<&str>, taint: Option<&str>, deleting: bool) -> Node {
        let mut n = Node::default();
        if let Some(v) = label {
            n.metadata.labels = Some(BTreeMap::from([(
                labels::EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS.to_owned(),
                v.to_owned(),
            )]));
        }
        if let Some(k) = taint {
            n.spec = Some(NodeSpec {
                taints: Some(vec![Taint {
                    key: k.into(),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            });
        }
        if deleting {
            n.metadata.deletion_timestamp = Some(Time(Default::default()));
        }
        n
    }

    #[test]
    fn backend_predicates() {
        assert!(is_load_balancer_backend(&node(None, None, false)));
        assert!(!is_load_balancer_backend(&node(None, None, true)));
        assert!(!is_load_balancer_backend(&node(Some(""), None, false)));
        assert!(!is_load_balancer_backend(&node(Some("true"), None, false)));
        assert!(!is_load_balancer_backend(&node(Some("yes"), None, false)));
        assert!(is_load_balancer_backend(&node(Some("false"), None, false)));
        assert!(is_load_balancer_backend(&node(Some("F"), None, false)));
        assert!(is_load_balancer_backend(&node(Some("0"), None, false)));
        assert!(!is_load_balancer_backend(&node(
            None,
            Some("ToBeDeletedByClusterAutoscaler"),
            false
        )));
        assert!(is_load_balancer_backend(&node(
            None,
            Some(taints::UNINITIALIZED),
            false
        )));
    }
}
