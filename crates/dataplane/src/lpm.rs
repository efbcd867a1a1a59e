//! IPv4 longest-prefix match with DIR-24-8 (Gupta, Lin, McKeown 1998), the
//! table of MoonRoute (seed 000 §1.10) and of DPDK's `rte_lpm`.
//!
//! `tbl24` has one 16-bit entry per /24 (2²⁴ × 2 B = 32 MiB): either a next
//! hop, or — top bit set — the index of a 256-entry `tbl8` group that
//! resolves the last octet for prefixes longer than /24. A lookup is one
//! memory access for destinations covered by prefixes up to /24 and two
//! otherwise. Entry 0 means "no route".
//!
//! The table is built once from a whole route list: routes are applied from
//! the shortest prefix to the longest, so a longer prefix always overwrites
//! the part of a shorter one it covers, and a `tbl8` group starts as a copy
//! of the /24 entry it replaces (the covering route). That is all the
//! bookkeeping a read-only table needs; incremental delete would need the
//! per-entry prefix lengths `rte_lpm` keeps.

use std::net::Ipv4Addr;

/// Marks a `tbl24` entry as an index into `tbl8`.
const EXTENDED: u16 = 0x8000;
/// Largest next-hop id (15 bits; 0 means "no route").
pub const MAX_NEXT_HOP: u16 = 0x7fff;
/// Largest number of `tbl8` groups (15-bit index).
pub const MAX_TBL8_GROUPS: usize = 0x8000;

/// One route: prefix, length and a next-hop id (1..=[`MAX_NEXT_HOP`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Network address, host bits zero.
    pub prefix: Ipv4Addr,
    /// Prefix length, 0..=32.
    pub len: u8,
    /// Next-hop id.
    pub next_hop: u16,
}

/// Why a route list cannot become a table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LpmError {
    /// The length is above 32.
    #[error("{prefix}/{len} has a prefix length above 32: use 0 to 32")]
    BadLength {
        /// Address.
        prefix: Ipv4Addr,
        /// Length.
        len: u8,
    },
    /// Bits are set beyond the length.
    #[error("{prefix}/{len} has host bits set: did you mean {network}/{len}?")]
    HostBits {
        /// Address.
        prefix: Ipv4Addr,
        /// Length.
        len: u8,
        /// The address with the host bits cleared.
        network: Ipv4Addr,
    },
    /// The same prefix twice.
    #[error("{prefix}/{len} is listed twice: keep one route per prefix")]
    Duplicate {
        /// Address.
        prefix: Ipv4Addr,
        /// Length.
        len: u8,
    },
    /// A next-hop id outside 1..=MAX_NEXT_HOP.
    #[error("next-hop id {0} is out of range: use 1 to 32767")]
    BadNextHop(u16),
    /// More than MAX_TBL8_GROUPS /24s hold longer prefixes.
    #[error("more than 32768 different /24 networks hold prefixes longer than /24: the table cannot hold them")]
    Tbl8Full,
}

/// The mask of a prefix length.
#[inline]
pub fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len as u32)
    }
}

/// Check a route's prefix and length.
pub fn check_prefix(prefix: Ipv4Addr, len: u8) -> Result<(), LpmError> {
    if len > 32 {
        return Err(LpmError::BadLength { prefix, len });
    }
    let a = u32::from(prefix);
    if a & !mask(len) != 0 {
        return Err(LpmError::HostBits {
            prefix,
            len,
            network: Ipv4Addr::from(a & mask(len)),
        });
    }
    Ok(())
}

/// A built DIR-24-8 table.
pub struct Dir24_8 {
    tbl24: Vec<u16>,
    tbl8: Vec<u16>,
    routes: usize,
}

impl std::fmt::Debug for Dir24_8 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dir24_8")
            .field("routes", &self.routes)
            .field("tbl8_groups", &self.tbl8_groups())
            .finish()
    }
}

impl Dir24_8 {
    /// Build the table of `routes` (any order).
    pub fn build(routes: &[Route]) -> Result<Dir24_8, LpmError> {
        let mut sorted = routes.to_vec();
        for r in &sorted {
            check_prefix(r.prefix, r.len)?;
            if r.next_hop == 0 || r.next_hop > MAX_NEXT_HOP {
                return Err(LpmError::BadNextHop(r.next_hop));
            }
        }
        sorted.sort_by_key(|r| (r.len, u32::from(r.prefix)));
        for w in sorted.windows(2) {
            if w[0].len == w[1].len && w[0].prefix == w[1].prefix {
                return Err(LpmError::Duplicate {
                    prefix: w[0].prefix,
                    len: w[0].len,
                });
            }
        }
        // vec! of zeros is calloc: untouched pages cost nothing.
        let mut t = Dir24_8 {
            tbl24: vec![0; 1 << 24],
            tbl8: Vec::new(),
            routes: sorted.len(),
        };
        for r in &sorted {
            let a = u32::from(r.prefix);
            if r.len <= 24 {
                let start = (a >> 8) as usize;
                let n = 1usize << (24 - r.len);
                t.tbl24[start..start + n].fill(r.next_hop);
            } else {
                let i = (a >> 8) as usize;
                let e = t.tbl24[i];
                let group = if e & EXTENDED != 0 {
                    (e & !EXTENDED) as usize
                } else {
                    let g = t.tbl8.len() / 256;
                    if g >= MAX_TBL8_GROUPS {
                        return Err(LpmError::Tbl8Full);
                    }
                    t.tbl8.extend(std::iter::repeat_n(e, 256));
                    t.tbl24[i] = EXTENDED | g as u16;
                    g
                };
                let start = group * 256 + (a & 0xff) as usize;
                let n = 1usize << (32 - r.len);
                t.tbl8[start..start + n].fill(r.next_hop);
            }
        }
        Ok(t)
    }

    /// The next-hop id of the longest prefix matching `addr`.
    #[inline]
    pub fn lookup(&self, addr: u32) -> Option<u16> {
        let e = self.tbl24[(addr >> 8) as usize];
        let nh = if e & EXTENDED != 0 {
            self.tbl8[((e & !EXTENDED) as usize) << 8 | (addr & 0xff) as usize]
        } else {
            e
        };
        (nh != 0).then_some(nh)
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.routes
    }

    /// True with no routes.
    pub fn is_empty(&self) -> bool {
        self.routes == 0
    }

    /// `tbl8` groups in use.
    pub fn tbl8_groups(&self) -> usize {
        self.tbl8.len() / 256
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The reference: scan every route, keep the longest that matches.
    fn naive(routes: &[Route], addr: u32) -> Option<u16> {
        routes
            .iter()
            .filter(|r| addr & mask(r.len) == u32::from(r.prefix))
            .max_by_key(|r| r.len)
            .map(|r| r.next_hop)
    }

    fn route(a: u32, len: u8, nh: u16) -> Route {
        Route {
            prefix: Ipv4Addr::from(a & mask(len)),
            len,
            next_hop: nh,
        }
    }

    #[test]
    fn known_answers() {
        let routes = [
            route(0, 0, 1),
            route(0xc612_0000, 15, 2), // 198.18.0.0/15
            route(0xc613_0000, 24, 3), // 198.19.0.0/24
            route(0xc613_0080, 25, 4), // 198.19.0.128/25
            route(0xc613_00ff, 32, 5), // 198.19.0.255/32
        ];
        let t = Dir24_8::build(&routes).unwrap();
        let ip = |s: &str| u32::from(s.parse::<Ipv4Addr>().unwrap());
        assert_eq!(t.lookup(ip("8.8.8.8")), Some(1));
        assert_eq!(t.lookup(ip("198.18.7.1")), Some(2));
        assert_eq!(t.lookup(ip("198.19.0.1")), Some(3));
        assert_eq!(t.lookup(ip("198.19.0.200")), Some(4));
        assert_eq!(t.lookup(ip("198.19.0.255")), Some(5));
        assert_eq!(t.lookup(ip("198.19.1.1")), Some(2));
        assert_eq!(t.tbl8_groups(), 1);
        let t = Dir24_8::build(&routes[1..]).unwrap();
        assert_eq!(t.lookup(ip("8.8.8.8")), None);
    }

    #[test]
    fn bad_routes_are_rejected_with_the_fix() {
        let e = Dir24_8::build(&[Route {
            prefix: "10.0.0.1".parse().unwrap(),
            len: 8,
            next_hop: 1,
        }])
        .unwrap_err();
        assert!(e.to_string().contains("did you mean 10.0.0.0/8"), "{e}");
        let e = Dir24_8::build(&[Route {
            prefix: "10.0.0.0".parse().unwrap(),
            len: 33,
            next_hop: 1,
        }])
        .unwrap_err();
        assert!(matches!(e, LpmError::BadLength { .. }));
        let e = Dir24_8::build(&[route(0x0a00_0000, 8, 1), route(0x0a00_0000, 8, 2)]).unwrap_err();
        assert!(matches!(e, LpmError::Duplicate { .. }));
        assert!(Dir24_8::build(&[route(0, 0, 0)]).is_err());
    }

    fn arb_routes() -> impl Strategy<Value = Vec<Route>> {
        // Clustered prefixes so that routes overlap and share /24s: a few
        // bases, random lengths, lengths above 24 often.
        prop::collection::vec(
            (
                0u32..4,
                any::<u32>(),
                prop_oneof![0u8..=32, 20u8..=32, 25u8..=32],
            ),
            1..120,
        )
        .prop_map(|v| {
            let bases = [0xc612_0000u32, 0x0a00_0000, 0xc613_0000, 0xffff_ff00];
            let mut seen = std::collections::HashSet::new();
            let mut out = Vec::new();
            for (i, (b, r, len)) in v.into_iter().enumerate() {
                // Keep the random part inside a /16 around the base mostly.
                let a = if len > 16 {
                    bases[b as usize] ^ (r & 0xffff)
                } else {
                    r
                };
                let rt = route(a, len, (i % 300 + 1) as u16);
                if seen.insert((rt.prefix, rt.len)) {
                    out.push(rt);
                }
            }
            out
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        #[test]
        fn matches_naive_longest_prefix(routes in arb_routes(), probes in prop::collection::vec(any::<u32>(), 200)) {
            let t = Dir24_8::build(&routes).unwrap();
            // Random addresses, and the edges of every prefix and their neighbours.
            let mut addrs = probes;
            for r in &routes {
                let lo = u32::from(r.prefix);
                let hi = lo | !mask(r.len);
                addrs.extend([lo, hi, lo.wrapping_sub(1), hi.wrapping_add(1), lo ^ (0x55 & !mask(r.len))]);
            }
            for a in addrs {
                prop_assert_eq!(t.lookup(a), naive(&routes, a), "address {}", Ipv4Addr::from(a));
            }
        }
    }
}
