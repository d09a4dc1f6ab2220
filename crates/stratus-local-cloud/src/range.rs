//! The range load-balancer addresses are allocated from.

use std::collections::BTreeSet;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// An IPv4 range in CIDR form, e.g. `127.77.0.0/16`, whose host addresses
/// (the first and the last left out when the range has more than two) are
/// handed to load balancers, lowest free first.
///
/// ```
/// use stratus_local_cloud::AddressRange;
///
/// let range: AddressRange = "127.77.0.0/30".parse().unwrap();
/// assert_eq!(range.len(), 2);
/// let taken = ["127.77.0.1".parse().unwrap()].into();
/// assert_eq!(range.first_free(&taken, &Default::default()), Some("127.77.0.2".parse().unwrap()));
/// assert!("127.77.0.0/33".parse::<AddressRange>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressRange {
    first: u32,
    last: u32,
    text: (Ipv4Addr, u8),
}

impl AddressRange {
    /// How many addresses it hands out.
    pub fn len(&self) -> u64 {
        u64::from(self.last - self.first) + 1
    }

    /// Always false: a range hands out at least one address.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether `address` is one it hands out.
    pub fn contains(&self, address: Ipv4Addr) -> bool {
        (self.first..=self.last).contains(&u32::from(address))
    }

    /// Whether every address of `other`, its network and broadcast
    /// addresses too, lies in this range's network.
    ///
    /// ```
    /// use stratus_local_cloud::AddressRange;
    ///
    /// let pods: AddressRange = "198.19.0.0/16".parse().unwrap();
    /// assert!(pods.covers(&"198.19.3.0/24".parse().unwrap()));
    /// assert!(!pods.covers(&"198.18.0.0/15".parse().unwrap()));
    /// ```
    pub fn covers(&self, other: &AddressRange) -> bool {
        let (network, broadcast) = self.bounds();
        let (first, last) = other.bounds();
        network <= first && last <= broadcast
    }

    /// The network and broadcast addresses.
    fn bounds(&self) -> (u32, u32) {
        let mask = u32::MAX
            .checked_shl(32 - u32::from(self.text.1))
            .unwrap_or(0);
        let network = u32::from(self.text.0);
        (network, network | !mask)
    }

    /// The lowest address neither `taken` nor `skipped`.
    pub fn first_free(
        &self,
        taken: &BTreeSet<Ipv4Addr>,
        skipped: &BTreeSet<Ipv4Addr>,
    ) -> Option<Ipv4Addr> {
        (self.first..=self.last)
            .map(Ipv4Addr::from)
            .find(|a| !taken.contains(a) && !skipped.contains(a))
    }
}

impl fmt::Display for AddressRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.text.0, self.text.1)
    }
}

/// Why a range does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeError(String);

impl fmt::Display for RangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RangeError {}

impl FromStr for AddressRange {
    type Err = RangeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| RangeError(format!("address range {s:?}: {why}"));
        let (ip, prefix) = s
            .split_once('/')
            .ok_or_else(|| bad("not in CIDR form (a.b.c.d/n)"))?;
        let ip: Ipv4Addr = ip.parse().map_err(|_| bad("not an IPv4 address"))?;
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= 32)
            .ok_or_else(|| bad("the prefix length is not 0 to 32"))?;
        let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
        let network = u32::from(ip) & mask;
        let broadcast = network | !mask;
        let (first, last) = if broadcast - network >= 2 {
            (network + 1, broadcast - 1)
        } else {
            (network, broadcast)
        };
        Ok(Self {
            first,
            last,
            text: (Ipv4Addr::from(network), prefix),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_leave_out_the_network_and_broadcast_addresses() {
        let r: AddressRange = "127.77.1.9/24".parse().unwrap();
        assert_eq!(r.to_string(), "127.77.1.0/24");
        assert_eq!(r.len(), 254);
        assert!(!r.contains("127.77.1.0".parse().unwrap()));
        assert!(r.contains("127.77.1.254".parse().unwrap()));
        assert!(!r.contains("127.77.1.255".parse().unwrap()));
        let single: AddressRange = "127.77.1.9/32".parse().unwrap();
        assert_eq!(single.len(), 1);
        assert!(single.contains("127.77.1.9".parse().unwrap()));
    }

    #[test]
    fn an_exhausted_range_has_no_free_address() {
        let r: AddressRange = "127.77.2.0/31".parse().unwrap();
        let taken = ["127.77.2.0".parse().unwrap()].into();
        let skipped = ["127.77.2.1".parse().unwrap()].into();
        assert_eq!(r.first_free(&taken, &skipped), None);
    }

    #[test]
    fn bad_ranges_are_named() {
        for (text, why) in [
            ("127.0.0.1", "CIDR"),
            ("nope/8", "IPv4"),
            ("::1/128", "IPv4"),
            ("127.0.0.0/40", "prefix"),
        ] {
            let err = text.parse::<AddressRange>().unwrap_err().to_string();
            assert!(err.contains(why), "{text}: {err}");
        }
    }
}
