//! A cluster CIDR cut into node CIDRs of one mask size, with a bitmap of the
//! ones in use (the semantics of Kubernetes' `cidrset`): allocation takes the
//! next free CIDR after the last one given, round robin; occupying or
//! releasing a CIDR larger than the node size covers every node CIDR in it.
//!
//! Pure logic, unit tested without IO.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use stratus_cloud::helpers::Cidr;

/// Why a CIDR set could not be built or a CIDR not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrSetError {
    /// The node mask is shorter than the cluster CIDR's prefix.
    #[error("node CIDR mask size /{mask} is shorter than the cluster CIDR {cluster}")]
    MaskTooSmall {
        /// The cluster CIDR.
        cluster: Cidr,
        /// The node mask size.
        mask: u8,
    },
    /// More than 2^16 node CIDRs (Kubernetes' limit on the difference of the
    /// two masks).
    #[error(
        "node CIDR mask size /{mask} is too big for the cluster CIDR {cluster}: at most 16 bits more than its prefix"
    )]
    MaskTooBig {
        /// The cluster CIDR.
        cluster: Cidr,
        /// The node mask size.
        mask: u8,
    },
    /// The node mask is longer than the address.
    #[error("node CIDR mask size /{0} is longer than the address")]
    MaskTooLong(u8),
    /// The CIDR lies outside the cluster CIDR.
    #[error("CIDR {cidr} is outside the cluster CIDR {cluster}")]
    OutOfRange {
        /// The CIDR.
        cidr: Cidr,
        /// The cluster CIDR.
        cluster: Cidr,
    },
}

/// The node CIDRs of one cluster CIDR.
#[derive(Debug, Clone)]
pub struct CidrSet {
    cluster: Cidr,
    mask: u8,
    used: Vec<bool>,
    in_use: usize,
    next: usize,
}

fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

impl CidrSet {
    /// Cut `cluster` into `/mask` node CIDRs.
    pub fn new(cluster: Cidr, mask: u8) -> Result<Self, CidrSetError> {
        if mask > cluster.address_bits() {
            return Err(CidrSetError::MaskTooLong(mask));
        }
        if mask < cluster.prefix_len() {
            return Err(CidrSetError::MaskTooSmall { cluster, mask });
        }
        let bits = mask - cluster.prefix_len();
        if bits > 16 {
            return Err(CidrSetError::MaskTooBig { cluster, mask });
        }
        Ok(Self {
            cluster,
            mask,
            used: vec![false; 1usize << bits],
            in_use: 0,
            next: 0,
        })
    }

    /// The cluster CIDR.
    pub fn cluster(&self) -> Cidr {
        self.cluster
    }

    /// How many node CIDRs the set holds.
    pub fn capacity(&self) -> usize {
        self.used.len()
    }

    /// How many are in use.
    pub fn in_use(&self) -> usize {
        self.in_use
    }

    fn shift(&self) -> u32 {
        u32::from(self.cluster.address_bits() - self.mask)
    }

    fn cidr_at(&self, index: usize) -> Cidr {
        let base = to_u128(self.cluster.network());
        // A shift of the whole width (a /0 cut into one /0) leaves one
        // index, 0; `checked_shl` says so without overflowing.
        let addr = base + (index as u128).checked_shl(self.shift()).unwrap_or(0);
        let ip = if self.cluster.is_ipv6() {
            IpAddr::V6(Ipv6Addr::from(addr))
        } else {
            IpAddr::V4(Ipv4Addr::from(u32::try_from(addr).unwrap_or(u32::MAX)))
        };
        // The address is aligned to the mask by construction.
        Cidr::new(ip, self.mask).unwrap_or(self.cluster)
    }

    /// The node-CIDR indices `cidr` covers, clipped to the cluster CIDR; an
    /// error if it does not overlap the cluster CIDR at all.
    fn indices(&self, cidr: &Cidr) -> Result<std::ops::RangeInclusive<usize>, CidrSetError> {
        if cidr.is_ipv6() != self.cluster.is_ipv6() || !cidr.overlaps(&self.cluster) {
            return Err(CidrSetError::OutOfRange {
                cidr: *cidr,
                cluster: self.cluster,
            });
        }
        let base = to_u128(self.cluster.network());
        let first = to_u128(cidr.first()).max(base);
        let last = to_u128(cidr.last()).min(to_u128(self.cluster.last()));
        let shift = self.shift();
        let index = |addr: u128| {
            usize::try_from((addr - base).checked_shr(shift).unwrap_or(0)).unwrap_or(usize::MAX)
        };
        Ok(index(first)..=index(last).min(self.used.len() - 1))
    }

    /// The next free node CIDR, marked in use; `None` when all are used.
    pub fn allocate_next(&mut self) -> Option<Cidr> {
        let n = self.used.len();
        for step in 0..n {
            let i = (self.next + step) % n;
            if !self.used[i] {
                self.used[i] = true;
                self.in_use += 1;
                self.next = (i + 1) % n;
                return Some(self.cidr_at(i));
            }
        }
        None
    }

    /// Mark every node CIDR `cidr` covers as used (an existing node's
    /// podCIDR, or the service range).
    pub fn occupy(&mut self, cidr: &Cidr) -> Result<(), CidrSetError> {
        for i in self.indices(cidr)? {
            if !self.used[i] {
                self.used[i] = true;
                self.in_use += 1;
            }
        }
        Ok(())
    }

    /// Free every node CIDR `cidr` covers.
    pub fn release(&mut self, cidr: &Cidr) -> Result<(), CidrSetError> {
        for i in self.indices(cidr)? {
            if self.used[i] {
                self.used[i] = false;
                self.in_use -= 1;
            }
        }
        Ok(())
    }

    /// True if `cidr` is inside the cluster CIDR (same family).
    pub fn contains(&self, cidr: &Cidr) -> bool {
        cidr.is_ipv6() == self.cluster.is_ipv6()
            && self.cluster.contains(cidr.first())
            && self.cluster.contains(cidr.last())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Cidr {
        s.parse().unwrap()
    }

    #[test]
    fn allocates_round_robin_and_reuses_released() {
        let mut set = CidrSet::new(c("10.244.0.0/22"), 24).unwrap();
        assert_eq!(set.capacity(), 4);
        let got: Vec<String> = (0..4)
            .map(|_| set.allocate_next().unwrap().to_string())
            .collect();
        assert_eq!(
            got,
            [
                "10.244.0.0/24",
                "10.244.1.0/24",
                "10.244.2.0/24",
                "10.244.3.0/24"
            ]
        );
        assert_eq!(set.allocate_next(), None, "full");
        set.release(&c("10.244.1.0/24")).unwrap();
        assert_eq!(set.allocate_next(), Some(c("10.244.1.0/24")));
    }

    #[test]
    fn occupied_ranges_are_skipped_including_larger_ones() {
        let mut set = CidrSet::new(c("10.0.0.0/16"), 24).unwrap();
        // A service range inside the cluster range covers four node CIDRs.
        set.occupy(&c("10.0.0.0/22")).unwrap();
        assert_eq!(set.in_use(), 4);
        assert_eq!(set.allocate_next(), Some(c("10.0.4.0/24")));
        // A range that contains the whole cluster range fills it.
        let mut small = CidrSet::new(c("10.0.0.0/23"), 24).unwrap();
        small.occupy(&c("10.0.0.0/8")).unwrap();
        assert_eq!(small.allocate_next(), None);
    }

    #[test]
    fn ipv6_and_out_of_range() {
        let mut set = CidrSet::new(c("fd00:10:244::/56"), 64).unwrap();
        assert_eq!(set.capacity(), 256);
        assert_eq!(set.allocate_next(), Some(c("fd00:10:244::/64")));
        assert_eq!(set.allocate_next(), Some(c("fd00:10:244:1::/64")));
        assert!(matches!(
            set.occupy(&c("fd00:99::/64")),
            Err(CidrSetError::OutOfRange { .. })
        ));
        assert!(matches!(
            set.occupy(&c("10.0.0.0/24")),
            Err(CidrSetError::OutOfRange { .. })
        ));
    }

    #[test]
    fn a_whole_address_space_cut_into_itself_has_one_cidr() {
        // Found by `cargo xtask fuzz` (cidr): a /0 IPv6 cluster with a /0
        // node mask shifted a u128 by 128 bits, which panics in debug
        // builds.
        let mut set = CidrSet::new(c("::/0"), 0).unwrap();
        assert_eq!(set.capacity(), 1);
        assert_eq!(set.allocate_next(), Some(c("::/0")));
        set.release(&c("::1/128")).unwrap();
        assert_eq!(set.in_use(), 0);
        set.occupy(&c("fd00::/64")).unwrap();
        assert_eq!(set.allocate_next(), None);
        let mut v4 = CidrSet::new(c("0.0.0.0/0"), 0).unwrap();
        assert_eq!(v4.allocate_next(), Some(c("0.0.0.0/0")));
    }

    #[test]
    fn mask_rules() {
        assert!(matches!(
            CidrSet::new(c("10.0.0.0/16"), 8),
            Err(CidrSetError::MaskTooSmall { .. })
        ));
        assert!(matches!(
            CidrSet::new(c("10.0.0.0/8"), 25),
            Err(CidrSetError::MaskTooBig { .. })
        ));
        assert!(matches!(
            CidrSet::new(c("10.0.0.0/8"), 33),
            Err(CidrSetError::MaskTooLong(33))
        ));
    }
}
