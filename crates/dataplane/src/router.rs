//! # `router`: an IPv4 router in the MoonRoute style (seed 000 §1.10)
//!
//! **Fast path**, per packet: parse Ethernet (optionally one 802.1Q tag)
//! and the IPv4 header, verify the header checksum (RFC 1812 §5.2.2), look
//! the destination up in a [`Dir24_8`] table, decrement the TTL, patch the
//! checksum incrementally (RFC 1624), rewrite the MACs for the next hop and
//! transmit on the next hop's port.
//!
//! **Slow path**: packets whose TTL would expire and packets without a route
//! leave the fast loop through *drop-out batching*: the fast loop moves them
//! to a separate slow-path link and goes on with the rest of its batch
//! untouched — no rebatching, no flag vector to skip over later. After the
//! fast loop, the slow path builds at most [`SLOW_BUDGET`] ICMP errors per
//! breath (time exceeded, RFC 792 type 11; destination unreachable, type 3
//! code 0), routed back to the sender through the same table and rate-limited
//! by a token bucket (RFC 1812 §4.3.2.8). MoonRoute runs the slow path on a
//! core of its own; with two cores here it runs after the fast batch on the
//! same worker, which keeps the property that matters: the fast batch stays
//! whole and its packets leave before any slow-path work.
//!
//! # Route table
//!
//! One route per line, `#` starts a comment:
//!
//! ```text
//! 198.19.0.0/24   out  02:4e:46:00:00:02   # prefix, port (out | in), next-hop MAC
//! 198.18.0.0/24   in   02:4e:46:00:00:01
//! ```

use std::net::Ipv4Addr;

use nflab_wire::checksum;
use nflab_wire::MacAddr;

use crate::app::{App, Output};
use crate::link::Link;
use crate::lpm::{Dir24_8, LpmError, Route};
use crate::packet::{self, Packet};

/// Slow-path packets handled per breath, so ICMP work never starves the fast path.
pub const SLOW_BUDGET: usize = 32;
/// Capacity of the slow-path link; beyond it slow packets are dropped and counted.
pub const SLOW_QUEUE: usize = 256;
/// Bytes of the offending datagram quoted after its IP header (RFC 792: 64 bits).
const ICMP_QUOTE: usize = 8;

const ETH_HLEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_VLAN: u16 = 0x8100;

/// Which port a next hop is behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortSide {
    /// The worker's output port (`dut1` in the lab).
    Out,
    /// The worker's input port, where the packet came from (`dut0`).
    In,
}

/// A next hop: a port and the neighbour's MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextHop {
    /// Port.
    pub port: PortSide,
    /// Neighbour MAC.
    pub mac: MacAddr,
}

/// A route table as read from text: routes and their next hops (id = index + 1).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouteTable {
    /// Routes; `next_hop` indexes `hops` from 1.
    pub routes: Vec<Route>,
    /// Distinct next hops.
    pub hops: Vec<NextHop>,
}

/// A route-table line that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin} line {line}: {message}")]
pub struct RouteError {
    /// File name or "routes".
    pub origin: String,
    /// 1-based line.
    pub line: usize,
    /// What is wrong and what is valid.
    pub message: String,
}

impl RouteTable {
    /// Parse route-table text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<RouteTable, RouteError> {
        let mut t = RouteTable::default();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            t.add_line(line).map_err(|message| RouteError {
                origin: origin.to_string(),
                line: i + 1,
                message,
            })?;
        }
        let lpm_check = Dir24_8::check_routes(&t.routes);
        if let Err((idx, e)) = lpm_check {
            // Point at the line of the offending route.
            let line = text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.split('#').next().unwrap_or("").trim().is_empty())
                .nth(idx)
                .map_or(0, |(i, _)| i + 1);
            return Err(RouteError {
                origin: origin.to_string(),
                line,
                message: e.to_string(),
            });
        }
        Ok(t)
    }

    /// Parse and add one `PREFIX/LEN PORT MAC` route.
    pub fn add_line(&mut self, line: &str) -> Result<(), String> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [prefix, port, mac] = f[..] else {
            return Err(format!(
                "\"{line}\" is not a route: write PREFIX/LEN PORT MAC, e.g. \"198.19.0.0/24 out 02:4e:46:00:00:02\""
            ));
        };
        let (addr, len) = prefix.split_once('/').ok_or_else(|| {
            format!("\"{prefix}\" is not a prefix: write ADDRESS/LENGTH, e.g. 198.19.0.0/24")
        })?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| {
            format!("\"{prefix}\" is not a valid prefix: \"{addr}\" is not an IPv4 address")
        })?;
        let len: u8 = len.parse().ok().filter(|l| *l <= 32).ok_or_else(|| {
            format!("\"{prefix}\" is not a valid prefix: the length must be 0 to 32")
        })?;
        crate::lpm::check_prefix(addr, len).map_err(|e| e.to_string())?;
        let port = match port {
            "out" => PortSide::Out,
            "in" => PortSide::In,
            other => return Err(format!("port \"{other}\" is not known: use out or in")),
        };
        let mac: MacAddr = mac.parse().map_err(|_| {
            format!("\"{mac}\" is not a MAC address: write six hex pairs, e.g. 02:4e:46:00:00:02")
        })?;
        let hop = NextHop { port, mac };
        let id = match self.hops.iter().position(|h| *h == hop) {
            Some(i) => i + 1,
            None => {
                self.hops.push(hop);
                self.hops.len()
            }
        };
        if id > crate::lpm::MAX_NEXT_HOP as usize {
            return Err("more than 32767 distinct next hops".into());
        }
        self.routes.push(Route {
            prefix: addr,
            len,
            next_hop: id as u16,
        });
        Ok(())
    }
}

impl Dir24_8 {
    /// Check a route list as `build` would, naming the index of a bad route.
    pub fn check_routes(routes: &[Route]) -> Result<(), (usize, LpmError)> {
        let mut seen = std::collections::HashSet::new();
        for (i, r) in routes.iter().enumerate() {
            crate::lpm::check_prefix(r.prefix, r.len).map_err(|e| (i, e))?;
            if !seen.insert((r.prefix, r.len)) {
                return Err((
                    i,
                    LpmError::Duplicate {
                        prefix: r.prefix,
                        len: r.len,
                    },
                ));
            }
        }
        Ok(())
    }
}

/// Counters of the router.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, PartialEq, Eq)]
pub struct RouterCounters {
    /// Forwarded by the fast path.
    pub forwarded: u64,
    /// Not IPv4, too short, bad header or bad header checksum: dropped.
    pub bad_header: u64,
    /// TTL would reach 0: to the slow path.
    pub ttl_expired: u64,
    /// No route: to the slow path.
    pub unroutable: u64,
    /// Slow-path link full: dropped without ICMP.
    pub slow_queue_full: u64,
    /// ICMP errors sent.
    pub icmp_sent: u64,
    /// ICMP errors suppressed by the rate limit or because the sender has no route.
    pub icmp_suppressed: u64,
}

/// The `router` app.
pub struct Router {
    lpm: Dir24_8,
    hops: Vec<NextHop>,
    /// MAC of the output port and of the input port.
    out_mac: MacAddr,
    in_mac: MacAddr,
    /// Source address of ICMP errors.
    icmp_source: Ipv4Addr,
    slow: Link,
    /// Token bucket of ICMP errors: tokens, last refill, rate per s, burst.
    tokens: f64,
    last_refill_ns: u64,
    icmp_rate: f64,
    icmp_burst: f64,
    counters: RouterCounters,
}

impl Router {
    /// A router over `table`; `out_mac`/`in_mac` are the ports' own MACs.
    pub fn new(
        table: &RouteTable,
        out_mac: MacAddr,
        in_mac: MacAddr,
        icmp_source: Ipv4Addr,
        icmp_rate_pps: f64,
    ) -> Result<Router, LpmError> {
        Ok(Router {
            lpm: Dir24_8::build(&table.routes)?,
            hops: table.hops.clone(),
            out_mac,
            in_mac,
            icmp_source,
            slow: Link::new(SLOW_QUEUE),
            tokens: icmp_rate_pps.clamp(1.0, 100.0),
            last_refill_ns: 0,
            icmp_rate: icmp_rate_pps,
            icmp_burst: icmp_rate_pps.clamp(1.0, 100.0),
            counters: RouterCounters::default(),
        })
    }

    /// The counters.
    pub fn counters(&self) -> RouterCounters {
        self.counters
    }

    fn hop(&self, id: u16) -> NextHop {
        self.hops[id as usize - 1]
    }

    fn port_mac(&self, side: PortSide) -> MacAddr {
        match side {
            PortSide::Out => self.out_mac,
            PortSide::In => self.in_mac,
        }
    }

    /// The fast path for one packet; Err(packet) sends it to the slow path.
    #[inline]
    fn fast(&mut self, mut p: Packet, out: &mut Output<'_>) -> Result<(), Packet> {
        let d = p.data_mut();
        let Some(l3) = ipv4_offset(d) else {
            self.counters.bad_header += 1;
            return Ok(());
        };
        let ihl = ((d[l3] & 0x0f) as usize) * 4;
        if d[l3] >> 4 != 4 || ihl < 20 || d.len() < l3 + ihl {
            self.counters.bad_header += 1;
            return Ok(());
        }
        if checksum::internet_checksum(&d[l3..l3 + ihl]) != 0 {
            self.counters.bad_header += 1;
            return Ok(());
        }
        let dst = u32::from_be_bytes([d[l3 + 16], d[l3 + 17], d[l3 + 18], d[l3 + 19]]);
        let Some(nh) = self.lpm.lookup(dst) else {
            self.counters.unroutable += 1;
            return Err(p);
        };
        let ttl = d[l3 + 8];
        if ttl <= 1 {
            self.counters.ttl_expired += 1;
            return Err(p);
        }
        // TTL shares a 16-bit word with the protocol (RFC 1624 example).
        let old_word = u16::from_be_bytes([ttl, d[l3 + 9]]);
        let new_word = u16::from_be_bytes([ttl - 1, d[l3 + 9]]);
        let old_csum = u16::from_be_bytes([d[l3 + 10], d[l3 + 11]]);
        let csum = checksum::incremental_update(old_csum, old_word, new_word);
        d[l3 + 8] = ttl - 1;
        d[l3 + 10..l3 + 12].copy_from_slice(&csum.to_be_bytes());
        let hop = self.hop(nh);
        d[0..6].copy_from_slice(&hop.mac.0);
        d[6..12].copy_from_slice(&self.port_mac(hop.port).0);
        self.counters.forwarded += 1;
        match hop.port {
            PortSide::Out => out.fwd.transmit(p),
            PortSide::In => out.back.transmit(p),
        };
        Ok(())
    }

    /// The slow path: at most SLOW_BUDGET ICMP errors.
    fn slow_path(&mut self, out: &mut Output<'_>, now_ns: u64) {
        if self.slow.is_empty() {
            return;
        }
        // The fast path needs no clock, so a chain of routers may run without one.
        let now_ns = if now_ns == 0 {
            nflab_io::clock::monotonic_ns()
        } else {
            now_ns
        };
        let dt = now_ns.saturating_sub(self.last_refill_ns) as f64 / 1e9;
        self.tokens = (self.tokens + dt * self.icmp_rate).min(self.icmp_burst);
        self.last_refill_ns = now_ns;
        for _ in 0..self.slow.nreadable().min(SLOW_BUDGET) {
            let Some(orig) = self.slow.receive() else {
                break;
            };
            if self.tokens < 1.0 {
                self.counters.icmp_suppressed += 1;
                continue;
            }
            match self.icmp_error(&orig) {
                Some((icmp, port)) => {
                    self.tokens -= 1.0;
                    self.counters.icmp_sent += 1;
                    match port {
                        PortSide::Out => out.fwd.transmit(icmp),
                        PortSide::In => out.back.transmit(icmp),
                    };
                }
                None => self.counters.icmp_suppressed += 1,
            }
        }
    }

    /// Build the ICMP error for `orig` (time exceeded if its TTL expired,
    /// else destination unreachable), routed to its source.
    fn icmp_error(&self, orig: &Packet) -> Option<(Packet, PortSide)> {
        let d = orig.data();
        let l3 = ipv4_offset(d)?;
        let ihl = ((d[l3] & 0x0f) as usize) * 4;
        let src = Ipv4Addr::new(d[l3 + 12], d[l3 + 13], d[l3 + 14], d[l3 + 15]);
        // Never answer an ICMP error with an error (RFC 1812 §4.3.2.7): type < 8 excluded loosely.
        if d[l3 + 9] == 1 && d.len() > l3 + ihl && matches!(d[l3 + ihl], 3 | 4 | 5 | 11 | 12) {
            return None;
        }
        let hop = self.hop(self.lpm.lookup(u32::from(src))?);
        let (icmp_type, code) = if d[l3 + 8] <= 1 && self.lpm.lookup(dst_of(d, l3)).is_some() {
            (11u8, 0u8)
        } else {
            (3u8, 0u8)
        };
        let quote = &d[l3..(l3 + ihl + ICMP_QUOTE).min(d.len())];
        let mut p = packet::allocate();
        let total = 20 + 8 + quote.len();
        p.set_len(ETH_HLEN + total);
        let b = p.data_mut();
        b[0..6].copy_from_slice(&hop.mac.0);
        b[6..12].copy_from_slice(&self.port_mac(hop.port).0);
        b[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let ip = &mut b[ETH_HLEN..];
        ip[0] = 0x45;
        ip[1] = 0xc0; // precedence: internetwork control (RFC 1812 §4.3.2.5)
        ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        ip[4..8].fill(0);
        ip[8] = 64;
        ip[9] = 1;
        ip[10..12].fill(0);
        ip[12..16].copy_from_slice(&self.icmp_source.octets());
        ip[16..20].copy_from_slice(&src.octets());
        let c = checksum::internet_checksum(&ip[..20]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        let icmp = &mut ip[20..];
        icmp[0] = icmp_type;
        icmp[1] = code;
        icmp[2..8].fill(0);
        icmp[8..].copy_from_slice(quote);
        let c = checksum::internet_checksum(icmp);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        Some((p, hop.port))
    }
}

fn dst_of(d: &[u8], l3: usize) -> u32 {
    u32::from_be_bytes([d[l3 + 16], d[l3 + 17], d[l3 + 18], d[l3 + 19]])
}

/// Offset of the IPv4 header (after an optional 802.1Q tag), if the frame
/// is IPv4 and long enough for a minimal header.
#[inline]
fn ipv4_offset(d: &[u8]) -> Option<usize> {
    if d.len() < ETH_HLEN + 20 {
        return None;
    }
    let mut off = 12;
    let mut et = u16::from_be_bytes([d[off], d[off + 1]]);
    if et == ETHERTYPE_VLAN {
        off += 4;
        et = u16::from_be_bytes([d[off], d[off + 1]]);
    }
    let l3 = off + 2;
    (et == ETHERTYPE_IPV4 && d.len() >= l3 + 20).then_some(l3)
}

impl App for Router {
    fn name(&self) -> &'static str {
        "router"
    }

    fn push(&mut self, input: &mut Link, out: &mut Output<'_>, now_ns: u64) {
        for _ in 0..input.nreadable() {
            let Some(p) = input.receive() else { break };
            if let Err(p) = self.fast(p, out) {
                // Drop-out: the packet leaves the batch; the batch goes on.
                if !self.slow.transmit(p) {
                    self.counters.slow_queue_full += 1;
                }
            }
        }
        self.slow_path(out, now_ns);
    }

    fn held(&self) -> usize {
        self.slow.nreadable()
    }

    fn counters(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self.counters).unwrap_or_default();
        v["routes"] = self.lpm.len().into();
        v["tbl8_groups"] = self.lpm.tbl8_groups().into();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nflab_wire::{ProbeSpec, ProbeTemplate};

    const LG0: MacAddr = MacAddr([2, 0x4e, 0x46, 0, 0, 1]);
    const LG1: MacAddr = MacAddr([2, 0x4e, 0x46, 0, 0, 2]);
    const DUT0: MacAddr = MacAddr([2, 0x4e, 0x46, 0, 1, 1]);
    const DUT1: MacAddr = MacAddr([2, 0x4e, 0x46, 0, 1, 2]);

    fn probe(dst: &str, ttl: u8, seq: u64) -> Packet {
        let t = ProbeTemplate::new(&ProbeSpec {
            src_mac: LG0,
            dst_mac: DUT0,
            vlan: None,
            src_ip: "198.18.0.1".parse().unwrap(),
            dst_ip: dst.parse().unwrap(),
            src_port: 49152,
            dst_port: 9,
            dscp: 0,
            ttl,
            flow: 0,
            frame_bytes: 64,
            mtu: 1500,
        })
        .unwrap();
        let mut buf = vec![0u8; 2048];
        let n = t.write(&mut buf, seq, 1234);
        Packet::from_slice(&buf[..n])
    }

    fn router() -> Router {
        let table = RouteTable::parse(
            "# lab\n198.19.0.0/24 out 02:4e:46:00:00:02\n198.18.0.0/24 in 02:4e:46:00:00:01\n",
            "t",
        )
        .unwrap();
        Router::new(&table, DUT1, DUT0, "198.18.0.2".parse().unwrap(), 1000.0).unwrap()
    }

    fn run(r: &mut Router, pkts: Vec<Packet>) -> (Vec<Packet>, Vec<Packet>) {
        let (mut input, mut fwd, mut back) = (Link::new(64), Link::new(64), Link::new(64));
        for p in pkts {
            input.transmit(p);
        }
        r.push(
            &mut input,
            &mut Output {
                fwd: &mut fwd,
                back: &mut back,
            },
            1_000_000_000,
        );
        let drain = |l: &mut Link| std::iter::from_fn(|| l.receive()).collect::<Vec<_>>();
        (drain(&mut fwd), drain(&mut back))
    }

    #[test]
    fn forwards_with_ttl_and_checksum_equal_to_a_full_recomputation() {
        let mut r = router();
        let (fwd, back) = run(
            &mut r,
            (0..5)
                .map(|i| probe("198.19.0.1", 64 - i, i as u64))
                .collect(),
        );
        assert!(back.is_empty());
        assert_eq!(fwd.len(), 5);
        for (i, p) in fwd.iter().enumerate() {
            let d = p.data();
            assert_eq!(&d[0..6], &LG1.0);
            assert_eq!(&d[6..12], &DUT1.0);
            assert_eq!(d[14 + 8], 63 - i as u8);
            // Reference: clear and recompute the whole header checksum.
            let mut h = d[14..34].to_vec();
            h[10] = 0;
            h[11] = 0;
            let full = checksum::internet_checksum(&h);
            assert_eq!(&d[24..26], &full.to_be_bytes());
            let info = nflab_wire::parse_probe(d).unwrap();
            assert_eq!(info.seq, i as u64);
        }
        assert_eq!(r.counters().forwarded, 5);
    }

    #[test]
    fn expired_and_unroutable_drop_out_to_icmp_after_the_fast_batch() {
        let mut r = router();
        let pkts = vec![
            probe("198.19.0.1", 64, 0),
            probe("198.19.0.1", 1, 1),
            probe("198.19.0.1", 64, 2),
            probe("198.20.0.1", 64, 3),
            probe("198.19.0.1", 64, 4),
        ];
        let (fwd, back) = run(&mut r, pkts);
        // The fast batch stays whole and in order.
        let seqs: Vec<u64> = fwd
            .iter()
            .map(|p| nflab_wire::parse_probe(p.data()).unwrap().seq)
            .collect();
        assert_eq!(seqs, vec![0, 2, 4]);
        assert_eq!(back.len(), 2);
        let c = r.counters();
        assert_eq!((c.ttl_expired, c.unroutable, c.icmp_sent), (1, 1, 2));
        for (p, want_type) in back.iter().zip([11u8, 3]) {
            let d = p.data();
            assert_eq!(&d[0..6], &LG0.0);
            assert_eq!(&d[6..12], &DUT0.0);
            assert_eq!(d[14 + 9], 1, "ICMP");
            assert_eq!(&d[14 + 12..14 + 16], &[198, 18, 0, 2]);
            assert_eq!(&d[14 + 16..14 + 20], &[198, 18, 0, 1]);
            assert_eq!(checksum::internet_checksum(&d[14..34]), 0);
            assert_eq!(checksum::internet_checksum(&d[34..]), 0, "ICMP checksum");
            assert_eq!(d[34], want_type);
            // Quotes the original header (TTL as received) and 8 bytes.
            assert_eq!(d.len(), 14 + 20 + 8 + 20 + 8);
            assert_eq!(d[34 + 8], 0x45);
        }
    }

    #[test]
    fn bad_header_checksum_is_dropped() {
        let mut r = router();
        let mut p = probe("198.19.0.1", 64, 0);
        p.data_mut()[24] ^= 0xff;
        let (fwd, back) = run(&mut r, vec![p]);
        assert!(fwd.is_empty() && back.is_empty());
        assert_eq!(r.counters().bad_header, 1);
    }

    #[test]
    fn route_table_errors_name_line_and_fix() {
        let e = RouteTable::parse("\n10.0.0.0/33 out 02:00:00:00:00:01\n", "r.txt").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(
            e.to_string().contains("r.txt line 2") && e.to_string().contains("0 to 32"),
            "{e}"
        );
        let e = RouteTable::parse("10.1.0.0/8 out 02:00:00:00:00:01\n", "r").unwrap_err();
        assert!(e.to_string().contains("10.0.0.0/8"), "{e}");
        let e = RouteTable::parse("10.0.0.0/8 sideways 02:00:00:00:00:01\n", "r").unwrap_err();
        assert!(e.to_string().contains("out or in"), "{e}");
        let e = RouteTable::parse("10.0.0.0/8 out zz\n", "r").unwrap_err();
        assert!(e.to_string().contains("MAC"), "{e}");
        let e = RouteTable::parse(
            "a\n10.0.0.0/8 out 02:00:00:00:00:01\n# c\n10.0.0.0/8 in 02:00:00:00:00:01",
            "r",
        );
        assert!(e.is_err());
        let e = RouteTable::parse(
            "10.0.0.0/8 out 02:00:00:00:00:01\n# c\n10.0.0.0/8 in 02:00:00:00:00:01",
            "r",
        )
        .unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.to_string().contains("twice"));
    }
}
