//! # `reorder`: the packet ordering function of RFC 9550 (seed 004's POF)
//!
//! State: the next expected sequence number, a buffer of the packets that
//! arrived ahead of it, and one timer per buffered packet (`arrival +
//! max_delay`). For each packet:
//!
//! - **expected**: send it, then every buffered successor up to the first gap;
//! - **ahead** within the window: buffer it and start its timer;
//! - **ahead beyond the window**: slide the window forward — send, in order,
//!   the buffered packets that fall out of it (skipping the gaps), then
//!   buffer the packet;
//! - **behind** (it arrives after a timeout already gave up on it): drop it
//!   (`late = "drop"`, the default: the output is then strictly in order) or
//!   send it at once (`late = "forward"`, RFC 9550's choice).
//!
//! When a timer expires and its packet is still buffered, the gap before it
//! is declared lost: the POF sends every buffered packet up to and
//! including it, in order, and expects its successor. So no packet waits
//! longer than `max_delay` (the loss timeout) for a predecessor.
//!
//! **Sequence numbers** are the nflab probe header's (48 bits, DESIGN §3.3),
//! compared modulo 2^`seq_bits`: a packet is ahead if it is less than half
//! the sequence space after the expected number, so wrap-around needs no
//! special case. The buffer is a ring of `window` slots (a power of two)
//! indexed by sequence number: O(1) insert, duplicate detection and
//! in-order release; timers are a FIFO, because every timer is `arrival +
//! max_delay` and arrivals are in time order. Frames without a probe header
//! pass through untouched. One sequence space per instance (as seed 004).
//! The first packet starts the sequence; one older than it counts as late.

use std::collections::VecDeque;

use crate::app::{App, Output};
use crate::link::Link;
use crate::packet::Packet;

/// What to do with a packet that arrives after its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Late {
    /// Drop it: the output stays in order.
    Drop,
    /// Send it at once, out of order (RFC 9550).
    Forward,
}

/// Counters of the POF.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, PartialEq, Eq)]
pub struct ReorderCounters {
    /// Sent in order on arrival.
    pub in_order: u64,
    /// Buffered because a predecessor was missing.
    pub buffered: u64,
    /// Sent from the buffer once the gap closed.
    pub released_in_order: u64,
    /// Sent from the buffer when a timer gave up on a gap, or the window slid.
    pub released_on_timeout: u64,
    /// Sequence numbers declared lost (gaps skipped).
    pub gaps_skipped: u64,
    /// Arrived after their turn: dropped or forwarded per `late`.
    pub late: u64,
    /// Same sequence number twice while buffered: dropped.
    pub duplicates: u64,
    /// The window slid because a packet arrived too far ahead.
    pub window_slides: u64,
    /// Frames without a probe header, passed through.
    pub passthrough: u64,
}

/// The `reorder` app.
pub struct Reorder {
    window: u64,
    max_delay_ns: u64,
    modulus: u64,
    late: Late,
    /// Next expected sequence number, unwrapped; None before the first packet.
    expected: Option<u64>,
    slots: Vec<Option<Packet>>,
    held: usize,
    timers: VecDeque<(u64, u64)>,
    counters: ReorderCounters,
}

impl Reorder {
    /// A POF; `window` is rounded up to a power of two (and at most 2^20 and
    /// half the sequence space), `seq_bits` is the width of the sequence
    /// numbers (48 for the probe header).
    pub fn new(window: u32, max_delay_ns: u64, seq_bits: u8, late: Late) -> Reorder {
        let seq_bits = seq_bits.clamp(2, 64);
        let modulus = if seq_bits == 64 { 0 } else { 1u64 << seq_bits };
        let mut w = (window.max(1) as u64).next_power_of_two().min(1 << 20);
        if modulus != 0 {
            w = w.min(modulus / 2);
        }
        Reorder {
            window: w,
            max_delay_ns,
            modulus,
            late,
            expected: None,
            slots: (0..w).map(|_| None).collect(),
            held: 0,
            timers: VecDeque::with_capacity(w as usize),
            counters: ReorderCounters::default(),
        }
    }

    /// The counters.
    pub fn counters(&self) -> ReorderCounters {
        self.counters
    }

    /// Signed distance of wire number `seq` from the expected one.
    fn distance(&self, seq: u64, expected: u64) -> i64 {
        if self.modulus == 0 {
            return seq.wrapping_sub(expected) as i64;
        }
        let d = seq.wrapping_sub(expected) & (self.modulus - 1);
        if d < self.modulus / 2 {
            d as i64
        } else {
            d as i64 - self.modulus as i64
        }
    }

    fn slot(&self, ext: u64) -> usize {
        (ext & (self.window - 1)) as usize
    }

    /// Send buffered packets from `expected` up to and including `last`
    /// (unwrapped), skipping gaps.
    fn release_through(&mut self, last: u64, out: &mut Output<'_>) {
        let Some(mut e) = self.expected else { return };
        while e <= last {
            let i = self.slot(e);
            match self.slots[i].take() {
                Some(p) => {
                    self.held -= 1;
                    self.counters.released_on_timeout += 1;
                    out.fwd.transmit(p);
                }
                None => self.counters.gaps_skipped += 1,
            }
            e += 1;
        }
        self.expected = Some(e);
    }

    /// Send the consecutive run starting at `expected`.
    fn release_run(&mut self, out: &mut Output<'_>) {
        let Some(mut e) = self.expected else { return };
        while self.held > 0 {
            let i = self.slot(e);
            let Some(p) = self.slots[i].take() else { break };
            self.held -= 1;
            self.counters.released_in_order += 1;
            out.fwd.transmit(p);
            e += 1;
        }
        self.expected = Some(e);
    }

    fn expire(&mut self, out: &mut Output<'_>, now_ns: u64) {
        while let Some(&(due, ext)) = self.timers.front() {
            if due > now_ns {
                break;
            }
            self.timers.pop_front();
            let Some(e) = self.expected else { continue };
            if ext < e {
                continue; // already sent
            }
            self.release_through(ext, out);
            self.release_run(out);
        }
    }

    fn handle(&mut self, p: Packet, seq: u64, out: &mut Output<'_>, now_ns: u64) {
        let Some(e) = self.expected else {
            self.expected = Some(seq + 1);
            self.counters.in_order += 1;
            out.fwd.transmit(p);
            return;
        };
        let d = self.distance(seq, e);
        if d < 0 {
            self.counters.late += 1;
            if self.late == Late::Forward {
                out.fwd.transmit(p);
            }
            return;
        }
        let ext = e + d as u64;
        if d == 0 {
            self.counters.in_order += 1;
            out.fwd.transmit(p);
            self.expected = Some(e + 1);
            self.release_run(out);
            return;
        }
        if d as u64 >= self.window {
            // Slide: everything older than ext - window + 1 goes now.
            self.counters.window_slides += 1;
            self.release_through(ext - self.window, out);
            self.release_run(out);
            if self.expected == Some(ext) {
                self.counters.in_order += 1;
                out.fwd.transmit(p);
                self.expected = Some(ext + 1);
                self.release_run(out);
                return;
            }
        }
        let i = self.slot(ext);
        if self.slots[i].is_some() {
            self.counters.duplicates += 1;
            return;
        }
        self.slots[i] = Some(p);
        self.held += 1;
        self.counters.buffered += 1;
        self.timers.push_back((now_ns + self.max_delay_ns, ext));
    }
}

/// The probe sequence number of a frame: Ethernet, optional 802.1Q tag,
/// IPv4 without options or with, UDP, probe magic. No checksum checks: the
/// POF only needs the number.
#[inline]
pub fn probe_seq(d: &[u8]) -> Option<u64> {
    let mut off = 12;
    let mut et = u16::from_be_bytes([*d.get(off)?, *d.get(off + 1)?]);
    if et == 0x8100 {
        off += 4;
        et = u16::from_be_bytes([*d.get(off)?, *d.get(off + 1)?]);
    }
    let l3 = off + 2;
    if et != 0x0800 || d.len() < l3 + 20 || d[l3 + 9] != 17 {
        return None;
    }
    let l4 = l3 + ((d[l3] & 0x0f) as usize) * 4;
    let probe = l4 + 8;
    let h = d.get(probe..probe + 10)?;
    if h[0] != nflab_wire::probe::MAGIC {
        return None;
    }
    Some(u64::from_be_bytes([
        0, 0, h[4], h[5], h[6], h[7], h[8], h[9],
    ]))
}

impl App for Reorder {
    fn name(&self) -> &'static str {
        "reorder"
    }

    fn needs_clock(&self) -> bool {
        true
    }

    fn push(&mut self, input: &mut Link, out: &mut Output<'_>, now_ns: u64) {
        self.expire(out, now_ns);
        for _ in 0..input.nreadable() {
            let Some(p) = input.receive() else { break };
            match probe_seq(p.data()) {
                Some(seq) => self.handle(p, seq, out, now_ns),
                None => {
                    self.counters.passthrough += 1;
                    out.fwd.transmit(p);
                }
            }
        }
    }

    fn held(&self) -> usize {
        self.held
    }

    fn next_deadline_ns(&self) -> Option<u64> {
        self.timers.front().map(|t| t.0)
    }

    fn counters(&self) -> serde_json::Value {
        serde_json::to_value(self.counters).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// A frame whose probe sequence number is `seq` (mod 2^48).
    fn frame(seq: u64) -> Packet {
        let t = nflab_wire::ProbeTemplate::new(&nflab_wire::ProbeSpec {
            src_mac: nflab_wire::MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: nflab_wire::MacAddr([2, 0, 0, 0, 0, 2]),
            vlan: None,
            src_ip: "198.18.0.1".parse().unwrap(),
            dst_ip: "198.19.0.1".parse().unwrap(),
            src_port: 1,
            dst_port: 9,
            dscp: 0,
            ttl: 64,
            flow: 0,
            frame_bytes: 64,
            mtu: 1500,
        })
        .unwrap();
        let mut b = vec![0u8; 128];
        let n = t.write(&mut b, seq, 0);
        Packet::from_slice(&b[..n])
    }

    /// Feed (arrival_ns, seq) events on a virtual clock that also stops at
    /// every timer; returns (exit_ns, seq) in output order.
    fn run(pof: &mut Reorder, mut events: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
        events.sort_by_key(|e| e.0);
        let (mut input, mut fwd, mut back) = (Link::new(1 << 16), Link::new(1 << 16), Link::new(1));
        let mut out = Vec::new();
        let mut i = 0;
        loop {
            let next_arrival = events.get(i).map(|e| e.0);
            let now = match (next_arrival, pof.next_deadline_ns()) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) => a,
                (None, Some(b)) => b,
                (None, None) => break,
            };
            while i < events.len() && events[i].0 == now {
                input.transmit(frame(events[i].1));
                i += 1;
            }
            pof.push(
                &mut input,
                &mut Output {
                    fwd: &mut fwd,
                    back: &mut back,
                },
                now,
            );
            while let Some(p) = fwd.receive() {
                out.push((now, probe_seq(p.data()).unwrap()));
            }
        }
        out
    }

    /// Seed 004's scrambler: every packet sent every 1 µs, a quarter of them
    /// recirculated for up to 16 µs; `loss` of them never arrive.
    fn scrambled(
        n: u64,
        loss: f64,
        first: u64,
        bits: u8,
        seed: u64,
    ) -> (Vec<(u64, u64)>, Vec<u64>) {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut ev = Vec::new();
        let mut kept = Vec::new();
        for i in 0..n {
            if i > 0 && rng.gen::<f64>() < loss {
                continue;
            }
            // The first packet starts the sequence (RFC 9550): it is not scrambled.
            let extra = if i > 0 && rng.gen::<f64>() < 0.25 {
                rng.gen_range(1..16_000)
            } else {
                0
            };
            let seq = (first + i) & ((1u64 << bits) - 1);
            ev.push((1_000 + i * 1_000 + extra, seq));
            kept.push(first + i);
        }
        (ev, kept)
    }

    fn check_in_order(out: &[(u64, u64)], kept: &[u64], bits: u8) {
        let m = (1u64 << bits) - 1;
        let got: Vec<u64> = out.iter().map(|o| o.1).collect();
        let want: Vec<u64> = kept.iter().map(|k| k & m).collect();
        assert_eq!(
            got.len(),
            want.len(),
            "every packet that arrived leaves once"
        );
        assert_eq!(got, want, "output is exactly the sent order minus losses");
    }

    #[test]
    fn permuted_stream_leaves_in_order() {
        let (ev, kept) = scrambled(20_000, 0.0, 0, 48, 1);
        let mut pof = Reorder::new(1024, 50_000, 48, Late::Drop);
        let out = run(&mut pof, ev);
        check_in_order(&out, &kept, 48);
        let c = pof.counters();
        assert!(c.buffered > 1000, "{c:?}");
        assert_eq!((c.late, c.gaps_skipped, c.duplicates), (0, 0, 0));
    }

    #[test]
    fn lossy_stream_leaves_in_order_and_no_packet_waits_beyond_max_delay() {
        let max_delay = 50_000;
        let (ev, kept) = scrambled(20_000, 0.03, 0, 48, 2);
        let arrival: std::collections::HashMap<u64, u64> = ev.iter().map(|e| (e.1, e.0)).collect();
        let mut pof = Reorder::new(1024, max_delay, 48, Late::Drop);
        let out = run(&mut pof, ev);
        check_in_order(&out, &kept, 48);
        for (t, s) in &out {
            assert!(
                t - arrival[s] <= max_delay,
                "seq {s} waited {}",
                t - arrival[s]
            );
        }
        assert!(pof.counters().gaps_skipped > 0);
    }

    #[test]
    fn wrap_around_of_a_small_sequence_space() {
        // 8-bit numbers, 5000 packets: wraps 19 times, starting near the top.
        let (ev, kept) = scrambled(5_000, 0.02, 250, 8, 3);
        let mut pof = Reorder::new(64, 50_000, 8, Late::Drop);
        let out = run(&mut pof, ev);
        check_in_order(&out, &kept, 8);
    }

    #[test]
    fn late_duplicate_and_far_ahead_packets() {
        let mut pof = Reorder::new(8, 10_000, 48, Late::Drop);
        // 0, then 2 (buffered), timeout gives up on 1, then 1 arrives late.
        let out = run(
            &mut pof,
            vec![(0, 0), (1, 2), (2, 2), (20_000, 1), (20_001, 3)],
        );
        assert_eq!(out.iter().map(|o| o.1).collect::<Vec<_>>(), vec![0, 2, 3]);
        let c = pof.counters();
        assert_eq!((c.late, c.duplicates, c.gaps_skipped), (1, 1, 1));
        // 100 ahead of a window of 8: the window slides, nothing is held forever.
        let mut pof = Reorder::new(8, 1_000_000, 48, Late::Forward);
        let out = run(&mut pof, vec![(0, 0), (1, 3), (2, 100), (3, 1)]);
        assert_eq!(
            out.iter().map(|o| o.1).collect::<Vec<_>>(),
            vec![0, 3, 1, 100]
        );
        assert_eq!(pof.counters().window_slides, 1);
    }
}
