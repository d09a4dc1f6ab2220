//! Node addresses and the `alpha.kubernetes.io/provided-node-ip` annotation.

use std::collections::BTreeSet;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::NodeAddress;

use super::net::{ip_equal, is_ipv6, parse_ip_sloppy};
use crate::{CloudError, CloudErrorKind};

/// Why the cloud's `address` cannot be written to a Node, if it cannot: an
/// `InternalIP` or `ExternalIP` that is no IP address, an empty name, or a
/// type Kubernetes does not know. The node controller drops such addresses
/// and the conformance suite fails a provider that reports them.
///
/// ```
/// use k8s_openapi::api::core::v1::NodeAddress;
/// use stratus_cloud::helpers::node_address_problem;
///
/// let address = |t: &str, a: &str| NodeAddress { type_: t.into(), address: a.into() };
/// assert_eq!(node_address_problem(&address("InternalIP", "10.0.0.1")), None);
/// assert_eq!(
///     node_address_problem(&address("InternalIP", "10.0.0.999")).as_deref(),
///     Some("InternalIP \"10.0.0.999\" is not an IP address")
/// );
/// assert!(node_address_problem(&address("Private", "10.0.0.1")).is_some());
/// ```
pub fn node_address_problem(address: &NodeAddress) -> Option<String> {
    match address.type_.as_str() {
        "InternalIP" | "ExternalIP" => address.address.parse::<IpAddr>().err().map(|_| {
            format!(
                "{} {:?} is not an IP address",
                address.type_, address.address
            )
        }),
        "Hostname" | "InternalDNS" | "ExternalDNS" => address
            .address
            .is_empty()
            .then(|| format!("an empty {}", address.type_)),
        other => Some(format!(
            "address type {other:?} is none of Hostname, InternalIP, ExternalIP, InternalDNS, ExternalDNS"
        )),
    }
}

/// Why the provided node IP could not be applied. The messages are Go's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeIpError {
    /// A part of the annotation is not an IP.
    #[error("failed to parse node IP {value:?}: could not parse {part:?}")]
    Parse {
        /// The whole annotation.
        value: String,
        /// The part that is not an IP.
        part: String,
    },
    /// More than two IPs, or two of the same family.
    #[error(
        "failed to parse node IP {value:?}: must contain either a single IP or a dual-stack pair of IPs"
    )]
    NotSingleOrDualStack {
        /// The whole annotation.
        value: String,
    },
    /// A dual-stack pair with an unspecified address.
    #[error(
        "failed to parse node IP {value:?}: dual-stack node IP cannot include '0.0.0.0' or '::'"
    )]
    UnspecifiedInDualStack {
        /// The whole annotation.
        value: String,
    },
    /// The IP is not among the cloud's addresses for the node.
    #[error("failed to get node address from cloud provider that matches ip: {ip}")]
    NoMatch {
        /// The IP.
        ip: IpAddr,
    },
}

impl From<NodeIpError> for CloudError {
    fn from(err: NodeIpError) -> Self {
        CloudError::new(CloudErrorKind::InvalidInput, err.to_string()).with_source(err)
    }
}

/// Parse the `alpha.kubernetes.io/provided-node-ip` annotation: one IP or a
/// comma-separated dual-stack pair. Unlike the kubelet flag, whitespace is
/// not trimmed and any invalid part is an error (Go:
/// `ParseNodeIPAnnotation`).
///
/// ```
/// use stratus_cloud::helpers::parse_node_ip_annotation;
///
/// assert_eq!(parse_node_ip_annotation("10.0.0.1,fd00::1").unwrap().len(), 2);
/// assert!(parse_node_ip_annotation("10.0.0.1,10.0.0.2").is_err());
/// assert!(parse_node_ip_annotation("10.0.0.1, fd00::1").is_err());
/// ```
pub fn parse_node_ip_annotation(value: &str) -> Result<Vec<IpAddr>, NodeIpError> {
    let mut ips = Vec::with_capacity(2);
    for part in value.split(',') {
        let ip = parse_ip_sloppy(part).ok_or_else(|| NodeIpError::Parse {
            value: value.to_owned(),
            part: part.to_owned(),
        })?;
        ips.push(ip);
    }
    let same_family = ips.len() == 2 && is_ipv6(ips[0]) == is_ipv6(ips[1]);
    if ips.len() > 2 || same_family {
        return Err(NodeIpError::NotSingleOrDualStack {
            value: value.to_owned(),
        });
    }
    if ips.len() == 2 && ips.iter().any(|ip| ip.to_canonical().is_unspecified()) {
        return Err(NodeIpError::UnspecifiedInDualStack {
            value: value.to_owned(),
        });
    }
    Ok(ips)
}

/// Filter the cloud's addresses by the provided node IP (Go:
/// `GetNodeAddressesFromNodeIP`):
///
/// - each provided IP must be among the cloud's addresses, else an error;
/// - the matching addresses come first, in the order of the provided IPs;
/// - other addresses of a type that a provided IP matched are dropped;
/// - addresses of other types follow, in the cloud's order.
///
/// ```
/// use k8s_openapi::api::core::v1::NodeAddress;
/// use stratus_cloud::helpers::node_addresses_from_node_ip;
///
/// let addr = |t: &str, a: &str| NodeAddress { type_: t.into(), address: a.into() };
/// let cloud = vec![
///     addr("InternalIP", "10.0.0.1"),
///     addr("InternalIP", "10.0.0.2"),
///     addr("ExternalIP", "203.0.113.9"),
///     addr("Hostname", "node-1"),
/// ];
/// let got = node_addresses_from_node_ip("10.0.0.2", &cloud).unwrap();
/// assert_eq!(got, vec![
///     addr("InternalIP", "10.0.0.2"),
///     addr("ExternalIP", "203.0.113.9"),
///     addr("Hostname", "node-1"),
/// ]);
/// assert!(node_addresses_from_node_ip("10.9.9.9", &cloud).is_err());
/// ```
pub fn node_addresses_from_node_ip(
    provided_node_ip: &str,
    cloud_addresses: &[NodeAddress],
) -> Result<Vec<NodeAddress>, NodeIpError> {
    let node_ips = parse_node_ip_annotation(provided_node_ip)?;
    let mut enforced = Vec::with_capacity(cloud_addresses.len());
    let mut matched_types = BTreeSet::new();
    for ip in node_ips {
        let mut matched = false;
        for address in cloud_addresses {
            if parse_ip_sloppy(&address.address).is_some_and(|a| ip_equal(a, ip)) {
                enforced.push(address.clone());
                matched_types.insert(address.type_.as_str());
                matched = true;
            }
        }
        if !matched {
            return Err(NodeIpError::NoMatch { ip });
        }
    }
    enforced.extend(
        cloud_addresses
            .iter()
            .filter(|a| !matched_types.contains(a.type_.as_str()))
            .cloned(),
    );
    Ok(enforced)
}

/// Append addresses that are not already present (same type and address)
/// (Go: `AddToNodeAddresses`).
///
/// ```
/// use k8s_openapi::api::core::v1::NodeAddress;
/// use stratus_cloud::helpers::add_to_node_addresses;
///
/// let addr = |t: &str, a: &str| NodeAddress { type_: t.into(), address: a.into() };
/// let mut list = vec![addr("InternalIP", "10.0.0.1")];
/// add_to_node_addresses(&mut list, [addr("InternalIP", "10.0.0.1"), addr("Hostname", "n1")]);
/// assert_eq!(list.len(), 2);
/// ```
pub fn add_to_node_addresses(
    addresses: &mut Vec<NodeAddress>,
    new: impl IntoIterator<Item = NodeAddress>,
) {
    for add in new {
        if !addresses
            .iter()
            .any(|e| e.address == add.address && e.type_ == add.type_)
        {
            addresses.push(add);
        }
    }
}

/// True if two address lists hold the same addresses (with the same
/// multiplicity), ignoring order.
pub fn node_addresses_equal(a: &[NodeAddress], b: &[NodeAddress]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    fn sorted(list: &[NodeAddress]) -> Vec<(&str, &str)> {
        let mut keys: Vec<(&str, &str)> = list
            .iter()
            .map(|x| (x.type_.as_str(), x.address.as_str()))
            .collect();
        keys.sort_unstable();
        keys
    }
    sorted(a) == sorted(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(t: &str, a: &str) -> NodeAddress {
        NodeAddress {
            type_: t.into(),
            address: a.into(),
        }
    }

    fn cloud() -> Vec<NodeAddress> {
        vec![
            addr("InternalIP", "10.0.0.1"),
            addr("InternalIP", "10.0.0.2"),
            addr("InternalIP", "fd00::1"),
            addr("InternalIP", "fd00::2"),
            addr("ExternalIP", "203.0.113.1"),
            addr("ExternalIP", "2001:db8::1"),
            addr("Hostname", "node-1"),
        ]
    }

    #[test]
    fn single_ip_keeps_only_it_for_its_type() {
        let got = node_addresses_from_node_ip("10.0.0.2", &cloud()).unwrap();
        assert_eq!(
            got,
            vec![
                addr("InternalIP", "10.0.0.2"),
                addr("ExternalIP", "203.0.113.1"),
                addr("ExternalIP", "2001:db8::1"),
                addr("Hostname", "node-1"),
            ]
        );
    }

    #[test]
    fn dual_stack_pair_in_annotation_order() {
        let got = node_addresses_from_node_ip("fd00::2,10.0.0.1", &cloud()).unwrap();
        assert_eq!(
            got,
            vec![
                addr("InternalIP", "fd00::2"),
                addr("InternalIP", "10.0.0.1"),
                addr("ExternalIP", "203.0.113.1"),
                addr("ExternalIP", "2001:db8::1"),
                addr("Hostname", "node-1"),
            ]
        );
    }

    #[test]
    fn external_ip_as_node_ip_drops_other_external_ips() {
        let got = node_addresses_from_node_ip("203.0.113.1", &cloud()).unwrap();
        assert_eq!(got[0], addr("ExternalIP", "203.0.113.1"));
        assert_eq!(got.iter().filter(|a| a.type_ == "ExternalIP").count(), 1);
        assert_eq!(got.iter().filter(|a| a.type_ == "InternalIP").count(), 4);
    }

    #[test]
    fn ip_matching_two_types_keeps_both() {
        let cloud = vec![
            addr("InternalIP", "10.0.0.1"),
            addr("ExternalIP", "10.0.0.1"),
            addr("ExternalIP", "203.0.113.1"),
        ];
        let got = node_addresses_from_node_ip("10.0.0.1", &cloud).unwrap();
        assert_eq!(
            got,
            vec![
                addr("InternalIP", "10.0.0.1"),
                addr("ExternalIP", "10.0.0.1")
            ]
        );
    }

    #[test]
    fn sloppy_and_mapped_addresses_match() {
        let cloud = vec![addr("InternalIP", "010.000.000.001"), addr("Hostname", "h")];
        let got = node_addresses_from_node_ip("::ffff:10.0.0.1", &cloud).unwrap();
        assert_eq!(got[0], addr("InternalIP", "010.000.000.001"));
    }

    #[test]
    fn invalid_annotations() {
        let c = cloud();
        for (value, want) in [
            ("", "failed to parse node IP \"\": could not parse \"\""),
            (
                "garbage",
                "failed to parse node IP \"garbage\": could not parse \"garbage\"",
            ),
            (
                " 10.0.0.1",
                "failed to parse node IP \" 10.0.0.1\": could not parse \" 10.0.0.1\"",
            ),
            (
                "10.0.0.1,",
                "failed to parse node IP \"10.0.0.1,\": could not parse \"\"",
            ),
            (
                "10.0.0.1,10.0.0.2",
                "failed to parse node IP \"10.0.0.1,10.0.0.2\": must contain either a single IP or a dual-stack pair of IPs",
            ),
            (
                "fd00::1,fd00::2",
                "failed to parse node IP \"fd00::1,fd00::2\": must contain either a single IP or a dual-stack pair of IPs",
            ),
            (
                "10.0.0.1,fd00::1,10.0.0.2",
                "failed to parse node IP \"10.0.0.1,fd00::1,10.0.0.2\": must contain either a single IP or a dual-stack pair of IPs",
            ),
            (
                "0.0.0.0,fd00::1",
                "failed to parse node IP \"0.0.0.0,fd00::1\": dual-stack node IP cannot include '0.0.0.0' or '::'",
            ),
            (
                "10.0.0.1,::",
                "failed to parse node IP \"10.0.0.1,::\": dual-stack node IP cannot include '0.0.0.0' or '::'",
            ),
            (
                "10.9.9.9",
                "failed to get node address from cloud provider that matches ip: 10.9.9.9",
            ),
            (
                "10.0.0.1,fd00::9",
                "failed to get node address from cloud provider that matches ip: fd00::9",
            ),
        ] {
            let err = node_addresses_from_node_ip(value, &c).unwrap_err();
            assert_eq!(err.to_string(), want, "{value:?}");
        }
        // A v4-mapped v6 address counts as IPv4, so this is not a dual-stack pair.
        assert!(parse_node_ip_annotation("10.0.0.1,::ffff:10.0.0.2").is_err());
        // A single unspecified address is accepted (only pairs reject it).
        assert!(parse_node_ip_annotation("0.0.0.0").is_ok());
        let err: CloudError = node_addresses_from_node_ip("x", &c).unwrap_err().into();
        assert!(err.is_invalid_input());
    }

    #[test]
    fn hostnames_never_match_an_ip() {
        let cloud = vec![
            addr("Hostname", "10.0.0.1.example"),
            addr("InternalIP", "10.0.0.2"),
        ];
        assert!(node_addresses_from_node_ip("10.0.0.1", &cloud).is_err());
    }

    #[test]
    fn equality_ignores_order() {
        let a = vec![addr("InternalIP", "1.1.1.1"), addr("Hostname", "h")];
        let b = vec![addr("Hostname", "h"), addr("InternalIP", "1.1.1.1")];
        assert!(node_addresses_equal(&a, &b));
        assert!(!node_addresses_equal(&a, &a[..1]));
    }
}
