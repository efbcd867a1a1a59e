//! # `l2fwd`: rewrite the MAC addresses, touch one byte
//!
//! The forwarder of the framework comparisons (seed 000 §1.8, DPDK's
//! `l2fwd`): no table lookup; the destination MAC becomes the next hop's,
//! the source MAC the output port's, and one payload byte is read and
//! written so the packet's cache line is really pulled in ("touch all
//! packets, otherwise it's a completely unrealistic workload", ixy).

use nflab_wire::MacAddr;

use crate::app::{App, Output};
use crate::link::Link;

/// Offset of the byte that is touched: the first byte after the Ethernet
/// header, in the same cache line as the MACs on purpose (seed 000 modifies
/// one byte "so the packet is pulled into L1").
const TOUCH_OFFSET: usize = 14;

/// The `l2fwd` app.
pub struct L2Fwd {
    /// New source MAC (the output port's).
    pub src: MacAddr,
    /// New destination MAC (the next hop's).
    pub dst: MacAddr,
    /// Frames shorter than an Ethernet header, dropped.
    pub runts: u64,
}

impl L2Fwd {
    /// Rewrite to `src` → `dst`.
    pub fn new(src: MacAddr, dst: MacAddr) -> L2Fwd {
        L2Fwd { src, dst, runts: 0 }
    }
}

impl App for L2Fwd {
    fn name(&self) -> &'static str {
        "l2fwd"
    }

    fn push(&mut self, input: &mut Link, out: &mut Output<'_>, _now_ns: u64) {
        for _ in 0..input.nreadable() {
            let Some(mut p) = input.receive() else { break };
            let d = p.data_mut();
            if d.len() <= TOUCH_OFFSET {
                self.runts += 1;
                continue;
            }
            d[0..6].copy_from_slice(&self.dst.0);
            d[6..12].copy_from_slice(&self.src.0);
            // A real read-modify-write that the compiler cannot drop.
            d[TOUCH_OFFSET] = std::hint::black_box(d[TOUCH_OFFSET]);
            out.fwd.transmit(p);
        }
    }

    fn counters(&self) -> serde_json::Value {
        serde_json::json!({ "runts": self.runts })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::Chain;
    use crate::packet::Packet;

    fn frame(i: u8) -> Packet {
        let mut f = vec![0u8; 60];
        f[12] = 0x08;
        f[59] = i;
        Packet::from_slice(&f)
    }

    #[test]
    fn chain_rewrites_macs_in_order() {
        let a = MacAddr([2, 0, 0, 0, 0, 0xa]);
        let b = MacAddr([2, 0, 0, 0, 0, 0xb]);
        let mut c = Chain::new(
            vec![Box::new(L2Fwd::new(a, b)), Box::new(L2Fwd::new(b, a))],
            64,
        );
        for i in 0..10 {
            c.input().transmit(frame(i));
        }
        c.input().transmit(Packet::from_slice(&[0; 10]));
        c.breathe(0);
        let mut out = Vec::new();
        while let Some(p) = c.output().receive() {
            out.push(p);
        }
        assert_eq!(out.len(), 10);
        for (i, p) in out.iter().enumerate() {
            assert_eq!(p.data()[59], i as u8);
            assert_eq!(&p.data()[0..6], &a.0);
            assert_eq!(&p.data()[6..12], &b.0);
            assert_eq!(p.data()[12], 0x08, "payload untouched");
        }
        let s = c.app_stats();
        assert_eq!((s[0].packets_in, s[0].packets_out, s[0].drops), (11, 10, 1));
        assert_eq!((s[1].packets_in, s[1].packets_out, s[1].drops), (10, 10, 0));
        let l = c.link_stats();
        assert_eq!(l[0].name, "rx -> l2fwd");
        assert_eq!(l[2].name, "l2fwd -> tx");
        assert_eq!(l[2].counters.tx_packets, 10);
    }
}
