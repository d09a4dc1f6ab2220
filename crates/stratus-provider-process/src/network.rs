//! Pod addresses: the node's own for every pod, or one per pod from the
//! node's pod CIDR.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::Node;

/// Where a process node's pods get their IPs.
#[derive(Debug, Clone, Default)]
pub enum PodNetwork {
    /// Every pod has the node's address ([`ProcessConfig::pod_ip`]): pods
    /// share it as they share the host's network (the default).
    ///
    /// [`ProcessConfig::pod_ip`]: crate::ProcessConfig::pod_ip
    #[default]
    NodeAddress,
    /// Each pod has an address of its own from the node's pod CIDR
    /// (`spec.podCIDR`, which the node-IPAM controller assigns and the node
    /// learns by following its Node), lowest free first, the first two of
    /// the range (network, gateway) and the last (broadcast) left out. The
    /// address must be this machine's for the pod's server to bind it: the
    /// local cloud's routes make a node's pod CIDR so (`--pod-network`). A
    /// pod created before the node knows its CIDR waits (Pending).
    PodCidr(PodCidr),
}

/// A node's pod CIDR and the addresses given from it, shared by the clones
/// of a [`ProcessConfig`](crate::ProcessConfig): the node side learns the
/// CIDR ([`HostNode`](crate::HostNode) follows its Node), the pod side
/// gives addresses ([`ProcessProvider`](crate::ProcessProvider)).
///
/// ```
/// use stratus_provider_process::PodCidr;
///
/// let pool = PodCidr::default();
/// assert_eq!(pool.cidr(), None);
/// pool.set("198.19.3.0/24")?;
/// assert_eq!(pool.cidr().as_deref(), Some("198.19.3.0/24"));
/// assert!(pool.set("198.19.3.0/31").is_err(), "no room for pods");
/// # Ok::<(), stratus_provider_process::CidrError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct PodCidr(Arc<Mutex<Pool>>);

#[derive(Debug, Default)]
struct Pool {
    cidr: Option<Cidr>,
    /// Pod key → its address.
    given: HashMap<String, Ipv4Addr>,
}

/// An IPv4 CIDR with room for pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cidr {
    network: u32,
    prefix: u8,
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.network), self.prefix)
    }
}

/// Why a pod CIDR was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("pod CIDR {cidr:?}: {why}")]
pub struct CidrError {
    cidr: String,
    why: &'static str,
}

impl Cidr {
    fn parse(text: &str) -> Result<Self, CidrError> {
        let bad = |why| CidrError {
            cidr: text.to_owned(),
            why,
        };
        let (ip, prefix) = text.split_once('/').ok_or_else(|| bad("not a.b.c.d/n"))?;
        let ip: Ipv4Addr = ip.parse().map_err(|_| bad("not an IPv4 address"))?;
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= 30)
            .ok_or_else(|| bad("the prefix is not 0 to 30 (no room for pods)"))?;
        let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
        Ok(Self {
            network: u32::from(ip) & mask,
            prefix,
        })
    }

    /// The addresses pods get: after the network and gateway addresses,
    /// before the broadcast one.
    fn hosts(&self) -> impl Iterator<Item = Ipv4Addr> {
        let size = 1u64 << (32 - u32::from(self.prefix));
        let last = u64::from(self.network) + size - 2;
        (u64::from(self.network) + 2..=last)
            .filter_map(|a| u32::try_from(a).ok().map(Ipv4Addr::from))
    }
}

fn lock(pool: &Mutex<Pool>) -> std::sync::MutexGuard<'_, Pool> {
    pool.lock().unwrap_or_else(PoisonError::into_inner)
}

impl PodCidr {
    /// The CIDR addresses come from, once known.
    pub fn cidr(&self) -> Option<String> {
        lock(&self.0).cidr.map(|c| c.to_string())
    }

    /// Give addresses from `cidr` from now on (a node that knows its CIDR
    /// without a node-IPAM controller, as the kubelet's `--pod-cidr`). The
    /// addresses given before stay with their pods.
    pub fn set(&self, cidr: &str) -> Result<(), CidrError> {
        let cidr = Cidr::parse(cidr)?;
        lock(&self.0).cidr = Some(cidr);
        Ok(())
    }

    /// Take the first IPv4 pod CIDR of `node`, if it has one.
    pub(crate) fn learn(&self, node: &Node) {
        let spec = node.spec.as_ref();
        let cidrs = spec
            .and_then(|s| s.pod_cidrs.clone())
            .unwrap_or_default()
            .into_iter()
            .chain(spec.and_then(|s| s.pod_cidr.clone()));
        for cidr in cidrs {
            if let Ok(parsed) = Cidr::parse(&cidr) {
                let mut pool = lock(&self.0);
                if pool.cidr != Some(parsed) {
                    tracing::info!(cidr = %parsed, "the node's pod CIDR");
                    pool.cidr = Some(parsed);
                }
                return;
            }
        }
    }

    /// The address of the pod `key`: the one it has, or the lowest free.
    pub(crate) fn assign(&self, key: &str) -> Result<Ipv4Addr, NoAddress> {
        let mut pool = lock(&self.0);
        if let Some(ip) = pool.given.get(key) {
            return Ok(*ip);
        }
        let cidr = pool.cidr.ok_or(NoAddress::NoCidr)?;
        let taken: BTreeSet<Ipv4Addr> = pool.given.values().copied().collect();
        let ip = cidr
            .hosts()
            .find(|ip| !taken.contains(ip))
            .ok_or(NoAddress::Exhausted(cidr.to_string()))?;
        pool.given.insert(key.to_owned(), ip);
        Ok(ip)
    }

    /// The pod `key` is gone: its address is free again.
    pub(crate) fn release(&self, key: &str) {
        lock(&self.0).given.remove(key);
    }
}

/// Why a pod has no address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoAddress {
    /// The node has no pod CIDR yet.
    #[error("the node has no pod CIDR yet (spec.podCIDR)")]
    NoCidr,
    /// Every address of the CIDR is a pod's.
    #[error("every address of the pod CIDR {0} is taken")]
    Exhausted(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_given_lowest_free_first_kept_per_pod_and_freed() {
        let pool = PodCidr::default();
        assert_eq!(pool.assign("ns/a"), Err(NoAddress::NoCidr));
        pool.set("198.19.3.77/29").unwrap();
        assert_eq!(pool.cidr().as_deref(), Some("198.19.3.72/29"));
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        assert_eq!(pool.assign("ns/a"), Ok(ip("198.19.3.74")));
        assert_eq!(pool.assign("ns/a"), Ok(ip("198.19.3.74")), "kept");
        let others: Vec<_> = ["ns/b", "ns/c", "ns/d", "ns/e"]
            .iter()
            .map(|k| pool.assign(k).unwrap())
            .collect();
        assert_eq!(others.last(), Some(&ip("198.19.3.78")));
        assert_eq!(
            pool.assign("ns/f"),
            Err(NoAddress::Exhausted("198.19.3.72/29".into())),
            "the broadcast address is no pod's"
        );
        pool.release("ns/b");
        assert_eq!(pool.assign("ns/f"), Ok(ip("198.19.3.75")));
    }

    #[test]
    fn the_node_s_first_ipv4_cidr_is_learned() {
        let pool = PodCidr::default();
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n"},
            "spec": {"podCIDR": "fd00::/64", "podCIDRs": ["fd00::/64", "198.19.9.0/24"]},
        }))
        .unwrap();
        pool.learn(&node);
        assert_eq!(pool.cidr().as_deref(), Some("198.19.9.0/24"));
        pool.learn(&Node::default());
        assert_eq!(pool.cidr().as_deref(), Some("198.19.9.0/24"), "kept");
        for bad in ["198.19.9.0", "x/24", "198.19.9.0/31"] {
            assert!(pool.set(bad).is_err(), "{bad}");
        }
    }
}
