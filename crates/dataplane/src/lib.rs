//! The nflab data plane: a Snabb/VPP-style graph of small apps joined by
//! links (DESIGN §4).
//!
//! A [`Link`] is a bounded ring of packets. Transmitting into a full link
//! drops the packet and counts it; it never blocks, because a blocked data
//! plane accumulates latency that the measurement would then blame on the
//! function under test. An [`App`] moves packets from its input link to its
//! output link in one bounded pass (`process`), and the engine calls the apps
//! in a fixed order each "breath", so a run is repeatable.
//!
//! This first version holds the engine and `l2fwd`; the other functions
//! (router, sheep, delayer, reorder, extern-dispatch) and the AF_XDP/AF_PACKET
//! I/O apps come with issue 8.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::collections::VecDeque;

use nflab_wire::MacAddr;

/// A packet: its bytes, owned. Buffers are reused by the apps that can.
pub type Packet = Vec<u8>;

/// A bounded ring between two apps, with counters.
#[derive(Debug)]
pub struct Link {
    ring: VecDeque<Packet>,
    capacity: usize,
    /// Packets accepted.
    pub tx_packets: u64,
    /// Packets dropped because the ring was full.
    pub tx_drops: u64,
    /// Packets taken out.
    pub rx_packets: u64,
}

impl Link {
    /// A link that holds at most `capacity` packets.
    pub fn new(capacity: usize) -> Link {
        Link {
            ring: VecDeque::with_capacity(capacity),
            capacity,
            tx_packets: 0,
            tx_drops: 0,
            rx_packets: 0,
        }
    }

    /// Put a packet in, or drop and count it when full.
    pub fn transmit(&mut self, p: Packet) -> bool {
        if self.ring.len() >= self.capacity {
            self.tx_drops += 1;
            return false;
        }
        self.tx_packets += 1;
        self.ring.push_back(p);
        true
    }

    /// Take the oldest packet out.
    pub fn receive(&mut self) -> Option<Packet> {
        let p = self.ring.pop_front();
        self.rx_packets += p.is_some() as u64;
        p
    }

    /// Packets waiting.
    pub fn nreadable(&self) -> usize {
        self.ring.len()
    }
}

/// A network function: one bounded pass from `input` to `output`.
pub trait App {
    /// Name in counters and configs.
    fn name(&self) -> &str;
    /// Move at most `batch` packets; returns how many were handled.
    fn process(&mut self, input: &mut Link, output: &mut Link, batch: usize) -> usize;
}

/// `l2fwd` as in the sources: rewrite the MAC addresses and touch one byte
/// of the payload, so the packet's cache line is really read and written.
pub struct L2Fwd {
    /// New source MAC.
    pub src: MacAddr,
    /// New destination MAC.
    pub dst: MacAddr,
}

impl App for L2Fwd {
    fn name(&self) -> &str {
        "l2fwd"
    }

    fn process(&mut self, input: &mut Link, output: &mut Link, batch: usize) -> usize {
        let n = input.nreadable().min(batch);
        for _ in 0..n {
            let Some(mut p) = input.receive() else { break };
            if p.len() >= 14 {
                p[0..6].copy_from_slice(&self.dst.0);
                p[6..12].copy_from_slice(&self.src.0);
                // "touch all packets, otherwise it's a completely unrealistic workload" (ixy)
                if let Some(last) = p.last_mut() {
                    *last = last.wrapping_add(0);
                }
                output.transmit(p);
            }
        }
        n
    }
}

/// A chain of apps with a link before each and one after the last.
pub struct Chain {
    apps: Vec<Box<dyn App>>,
    links: Vec<Link>,
    batch: usize,
}

impl Chain {
    /// Apps in order; every link holds `link_capacity` packets.
    pub fn new(apps: Vec<Box<dyn App>>, link_capacity: usize, batch: usize) -> Chain {
        let links = (0..=apps.len()).map(|_| Link::new(link_capacity)).collect();
        Chain {
            apps,
            links,
            batch: batch.max(1),
        }
    }

    /// The chain's input link.
    pub fn input(&mut self) -> &mut Link {
        &mut self.links[0]
    }

    /// The chain's output link.
    pub fn output(&mut self) -> &mut Link {
        let last = self.links.len() - 1;
        &mut self.links[last]
    }

    /// One breath: every app, in order, processes one batch.
    pub fn breathe(&mut self) -> usize {
        let mut moved = 0;
        for (i, app) in self.apps.iter_mut().enumerate() {
            let (before, after) = self.links.split_at_mut(i + 1);
            moved += app.process(&mut before[i], &mut after[0], self.batch);
        }
        moved
    }

    /// Counters of each link, in order: (accepted, dropped).
    pub fn link_counters(&self) -> Vec<(u64, u64)> {
        self.links
            .iter()
            .map(|l| (l.tx_packets, l.tx_drops))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(i: u8) -> Packet {
        let mut f = vec![0u8; 60];
        f[59] = i;
        f
    }

    #[test]
    fn full_link_drops_and_counts() {
        let mut l = Link::new(2);
        assert!(l.transmit(frame(1)));
        assert!(l.transmit(frame(2)));
        assert!(!l.transmit(frame(3)));
        assert_eq!((l.tx_packets, l.tx_drops), (2, 1));
        assert_eq!(l.receive().unwrap()[59], 1);
    }

    #[test]
    fn l2fwd_chain_rewrites_macs_in_order_and_bounds_batches() {
        let a = MacAddr([2, 0, 0, 0, 0, 0xa]);
        let b = MacAddr([2, 0, 0, 0, 0, 0xb]);
        let mut c = Chain::new(
            vec![
                Box::new(L2Fwd { src: a, dst: b }),
                Box::new(L2Fwd { src: b, dst: a }),
            ],
            64,
            4,
        );
        for i in 0..10 {
            c.input().transmit(frame(i));
        }
        // Batch 4: first breath moves 4 through app 1 and those 4 through app 2.
        assert_eq!(c.breathe(), 8);
        while c.breathe() > 0 {}
        let mut out = Vec::new();
        while let Some(p) = c.output().receive() {
            out.push(p);
        }
        assert_eq!(out.len(), 10);
        for (i, p) in out.iter().enumerate() {
            assert_eq!(p[59], i as u8);
            assert_eq!(&p[0..6], &a.0);
            assert_eq!(&p[6..12], &b.0);
        }
        assert_eq!(c.link_counters(), vec![(10, 0), (10, 0), (10, 0)]);
    }
}
