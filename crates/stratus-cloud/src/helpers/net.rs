//! IP and CIDR parsing with Kubernetes' "sloppy" rules.
//!
//! Kubernetes parses IPs with the Go 1.16 rules (`netutils.ParseIPSloppy`):
//! IPv4 parts may carry leading zeros, read as decimal (`010.0.0.1` is
//! `10.0.0.1`). An IPv4-mapped IPv6 address equals its IPv4 address.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Parse an IP address as Kubernetes does: IPv4 parts may have leading zeros.
///
/// ```
/// use stratus_cloud::helpers::parse_ip_sloppy;
///
/// assert_eq!(parse_ip_sloppy("010.000.0.1"), Some("10.0.0.1".parse().unwrap()));
/// assert_eq!(parse_ip_sloppy("fd00::1"), Some("fd00::1".parse().unwrap()));
/// assert_eq!(parse_ip_sloppy("not-an-ip"), None);
/// assert_eq!(parse_ip_sloppy(" 10.0.0.1"), None);
/// ```
pub fn parse_ip_sloppy(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    if !s.contains(':') {
        return parse_ipv4_sloppy(s).map(IpAddr::V4);
    }
    // An IPv6 address ending in an IPv4 part with leading zeros.
    let (head, tail) = s.rsplit_once(':')?;
    if !tail.contains('.') {
        return None;
    }
    let v4 = parse_ipv4_sloppy(tail)?;
    format!("{head}:{v4}")
        .parse::<Ipv6Addr>()
        .ok()
        .map(IpAddr::V6)
}

fn parse_ipv4_sloppy(s: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut parts = s.split('.');
    for octet in &mut octets {
        let part = parts.next()?;
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let trimmed = part.trim_start_matches('0');
        if trimmed.len() > 3 {
            return None;
        }
        let value: u16 = if trimmed.is_empty() {
            0
        } else {
            trimmed.parse().ok()?
        };
        *octet = u8::try_from(value).ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(Ipv4Addr::from(octets))
}

/// IP equality as Go's `net.IP.Equal`: an IPv4-mapped IPv6 address equals
/// its IPv4 address.
pub fn ip_equal(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

/// True if `ip` is IPv6 and not an IPv4-mapped address (Go's `IsIPv6`).
pub fn is_ipv6(ip: IpAddr) -> bool {
    matches!(ip.to_canonical(), IpAddr::V6(_))
}

/// Why a CIDR did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CIDR address: {0}")]
pub struct CidrError(pub String);

/// An IP network: an address masked to its prefix, like Go's `*net.IPNet`.
///
/// ```
/// use stratus_cloud::helpers::Cidr;
///
/// let cidr: Cidr = "10.244.1.7/16".parse().unwrap();
/// assert_eq!(cidr.to_string(), "10.244.0.0/16");
/// assert!(cidr.contains("10.244.200.1".parse().unwrap()));
/// assert!(!cidr.contains("10.245.0.1".parse().unwrap()));
/// assert_eq!(cidr.last().to_string(), "10.244.255.255");
/// assert!("10.0.0.0/33".parse::<Cidr>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// The network `addr/prefix`, masking `addr`. `None` if the prefix is
    /// longer than the address.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<Self> {
        let bits = Self::bits_of(addr);
        if prefix > bits {
            return None;
        }
        Some(Self {
            network: mask(addr, prefix),
            prefix,
        })
    }

    fn bits_of(addr: IpAddr) -> u8 {
        match addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        }
    }

    /// The network address (the first address).
    pub fn network(&self) -> IpAddr {
        self.network
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.prefix
    }

    /// The address length in bits: 32 or 128.
    pub fn address_bits(&self) -> u8 {
        Self::bits_of(self.network)
    }

    /// True for an IPv6 network.
    pub fn is_ipv6(&self) -> bool {
        self.network.is_ipv6()
    }

    /// The first address.
    pub fn first(&self) -> IpAddr {
        self.network
    }

    /// The last address.
    pub fn last(&self) -> IpAddr {
        match self.network {
            IpAddr::V4(a) => {
                let host = u32::MAX.checked_shr(u32::from(self.prefix)).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(a) | host))
            }
            IpAddr::V6(a) => {
                let host = u128::MAX.checked_shr(u32::from(self.prefix)).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(a) | host))
            }
        }
    }

    /// True if `ip` is inside the network. IPv4-mapped IPv6 addresses match
    /// IPv4 networks.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match (self.network, ip) {
            (IpAddr::V4(_), IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => return false,
            },
            _ => ip,
        };
        if Self::bits_of(ip) != self.address_bits() {
            return false;
        }
        mask(ip, self.prefix) == self.network
    }

    /// True if the two networks share an address.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.contains(other.network) || other.contains(self.network)
    }
}

fn mask(addr: IpAddr, prefix: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
        }
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    /// Parse `addr/prefix` with the sloppy address rules.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || CidrError(s.to_owned());
        let (addr, prefix) = s.split_once('/').ok_or_else(err)?;
        let addr = parse_ip_sloppy(addr).ok_or_else(err)?;
        if prefix.is_empty() || prefix.len() > 3 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        let prefix: u8 = prefix.parse().map_err(|_| err())?;
        Cidr::new(addr, prefix).ok_or_else(err)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sloppy_ipv4() {
        assert_eq!(parse_ip_sloppy("1.2.3.4"), Some("1.2.3.4".parse().unwrap()));
        assert_eq!(
            parse_ip_sloppy("01.02.03.004"),
            Some("1.2.3.4".parse().unwrap())
        );
        assert_eq!(
            parse_ip_sloppy("0000.0.0.0"),
            Some("0.0.0.0".parse().unwrap())
        );
        assert_eq!(parse_ip_sloppy("256.0.0.1"), None);
        assert_eq!(parse_ip_sloppy("1.2.3"), None);
        assert_eq!(parse_ip_sloppy("1.2.3.4.5"), None);
        assert_eq!(parse_ip_sloppy("1..3.4"), None);
        assert_eq!(parse_ip_sloppy("+1.2.3.4"), None);
        assert_eq!(parse_ip_sloppy(""), None);
    }

    #[test]
    fn sloppy_ipv6_with_v4_tail() {
        assert_eq!(
            parse_ip_sloppy("::ffff:010.0.0.1"),
            Some("::ffff:10.0.0.1".parse().unwrap())
        );
        assert_eq!(parse_ip_sloppy("fe80::1%eth0"), None);
        assert_eq!(parse_ip_sloppy(":::"), None);
    }

    #[test]
    fn equality_and_family() {
        let v4: IpAddr = "10.0.0.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert!(ip_equal(v4, mapped));
        assert!(!is_ipv6(mapped));
        assert!(is_ipv6("fd00::1".parse().unwrap()));
    }

    #[test]
    fn cidr_parsing_and_bounds() {
        let c: Cidr = "fd00:10::/64".parse().unwrap();
        assert!(c.is_ipv6());
        assert_eq!(c.last().to_string(), "fd00:10::ffff:ffff:ffff:ffff");
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("255.255.255.255".parse().unwrap()));
        assert_eq!(all.last().to_string(), "255.255.255.255");
        let host: Cidr = "10.1.2.3/32".parse().unwrap();
        assert_eq!(host.first(), host.last());
        for bad in [
            "10.0.0.0",
            "10.0.0.0/",
            "10.0.0.0/-1",
            "x/8",
            "10.0.0.0/8/8",
            "::/129",
            "10.0.0.0/ 8",
        ] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
        assert!(!c.contains("10.0.0.1".parse().unwrap()));
        assert!(all.contains("::ffff:1.2.3.4".parse().unwrap()));
        let a: Cidr = "10.0.0.0/8".parse().unwrap();
        assert!(a.overlaps(&"10.2.0.0/16".parse().unwrap()));
        assert!(!a.overlaps(&"11.0.0.0/8".parse().unwrap()));
    }
}
