//! # `sheep`: emulated per-packet cost (SHEEP, seed 000 §1.7)
//!
//! Two independent loads per packet, as in the SHEEP tool:
//!
//! - **CPULoader**: spin for a calibrated number of TSC cycles (`cycles`).
//! - **CacheLoader**: `accesses` dependent reads into a table of
//!   `table_bytes`, following a circular linked list whose links form a
//!   single random cycle, so the prefetcher cannot guess the next line and a
//!   full traversal touches every element once. The cursor advances across
//!   packets. Elements are 64 bytes (one cache line: the next index and
//!   padding), the element count is rounded up to a power of two, as SHEEP
//!   does.
//!
//! The cycle is drawn with Sattolo's algorithm from a seeded ChaCha8 stream
//! (SHEEP uses an LCG), so a run is repeatable.

use rand::{Rng, SeedableRng};

use crate::app::{App, Output};
use crate::link::Link;
use crate::tsc;

/// Bytes per table element: one cache line.
pub const ELEMENT_BYTES: usize = 64;
/// Largest table (8 GiB, the largest size seed 000 measured).
pub const MAX_TABLE_BYTES: u64 = 8 << 30;

/// One cache line: the index of the next element, then padding.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Element {
    next: u64,
    _pad: [u64; 7],
}

/// The `sheep` app.
pub struct Sheep {
    cycles: u64,
    accesses: u32,
    table: Vec<Element>,
    cursor: usize,
    /// Folded values of the visited elements, so the reads cannot be elided.
    sink: u64,
    packets: u64,
}

impl Sheep {
    /// Burn `cycles` TSC ticks and make `accesses` random reads into a table
    /// of `table_bytes` (rounded up to a power-of-two number of 64-byte lines)
    /// per packet.
    pub fn new(cycles: u64, accesses: u32, table_bytes: u64, seed: u64) -> Sheep {
        let n = ((table_bytes.min(MAX_TABLE_BYTES) as usize) / ELEMENT_BYTES)
            .max(1)
            .next_power_of_two();
        let mut table = vec![
            Element {
                next: 0,
                _pad: [0; 7]
            };
            n
        ];
        // Sattolo: a uniformly random permutation that is one single cycle.
        let mut perm: Vec<u64> = (0..n as u64).collect();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        for i in (1..n).rev() {
            let j = rng.gen_range(0..i);
            perm.swap(i, j);
        }
        for (i, e) in table.iter_mut().enumerate() {
            e.next = perm[i];
        }
        Sheep {
            cycles,
            accesses,
            table,
            cursor: 0,
            sink: 0,
            packets: 0,
        }
    }

    /// Elements in the table.
    pub fn elements(&self) -> usize {
        self.table.len()
    }

    /// Follow `k` links from the cursor.
    #[inline]
    fn chase(&mut self, k: u32) {
        let mut c = self.cursor;
        for _ in 0..k {
            c = self.table[c].next as usize;
        }
        self.sink = self.sink.wrapping_add(c as u64);
        self.cursor = c;
    }
}

impl App for Sheep {
    fn name(&self) -> &'static str {
        "sheep"
    }

    fn push(&mut self, input: &mut Link, out: &mut Output<'_>, _now_ns: u64) {
        for _ in 0..input.nreadable() {
            let Some(p) = input.receive() else { break };
            tsc::spin_cycles(self.cycles);
            self.chase(self.accesses);
            self.packets += 1;
            out.fwd.transmit(p);
        }
        std::hint::black_box(self.sink);
    }

    fn counters(&self) -> serde_json::Value {
        serde_json::json!({
            "packets": self.packets,
            "cycles_per_packet": self.cycles,
            "accesses_per_packet": self.accesses,
            "table_bytes": self.table.len() * ELEMENT_BYTES,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Packet;

    #[test]
    fn the_links_form_one_cycle_over_every_element() {
        for bytes in [64u64, 4096, 100_000, 1 << 20] {
            let mut s = Sheep::new(0, 0, bytes, 7);
            let n = s.elements();
            assert!(n.is_power_of_two() && n * 64 >= bytes as usize);
            let mut seen = vec![false; n];
            for _ in 0..n {
                s.chase(1);
                assert!(
                    !seen[s.cursor],
                    "element visited twice before the cycle closed"
                );
                seen[s.cursor] = true;
            }
            assert_eq!(s.cursor, 0, "back at the start after n steps");
            assert!(seen.iter().all(|&v| v));
        }
    }

    #[test]
    fn each_packet_costs_at_least_the_configured_cycles() {
        let cycles = 20_000;
        let mut s = Sheep::new(cycles, 10, 1 << 16, 1);
        let (mut input, mut fwd, mut back) = (Link::new(64), Link::new(64), Link::new(1));
        for _ in 0..50 {
            input.transmit(Packet::from_slice(&[0; 60]));
        }
        let t0 = tsc::rdtsc();
        s.push(
            &mut input,
            &mut Output {
                fwd: &mut fwd,
                back: &mut back,
            },
            0,
        );
        assert!(tsc::rdtsc() - t0 >= 50 * cycles);
        assert_eq!(fwd.nreadable(), 50);
        // 10 accesses per packet: the cursor is 500 steps along the cycle.
        let mut r = Sheep::new(0, 0, 1 << 16, 1);
        r.chase(500);
        assert_eq!(r.cursor, s.cursor);
    }
}
