//! Pairing the monitor's ingress and egress events (user space, as KOMon's
//! comparison in the kernel module). FIFO is KOMon's rule for FIFO VNFs: an egress
//! datagram pairs with the oldest datagram in flight; when it matches a younger one
//! instead, the older ones were dropped by the VNF (a FIFO VNF cannot have sent them
//! later) and are counted unmatched, so one loss does not block every later pair.
//! `any` takes the oldest in-flight datagram with the same key and leaves the others
//! waiting (VNFs that reorder). What cannot be paired is counted, never guessed.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// Matching rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MatchMode {
    /// Oldest entry only.
    #[default]
    Fifo,
    /// Any buffered entry with the same key.
    Any,
}

/// One event of the UDP monitor, on CLOCK_REALTIME.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// Timestamp.
    pub t_ns: u64,
    /// Payload hash.
    pub hash: u64,
    /// Probe (flow, seq), when the payload carries one.
    pub probe: Option<(u16, u64)>,
    /// Ingress (true) or egress.
    pub ingress: bool,
}

/// A paired datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Matched {
    /// Probe sequence number, when known.
    pub seq: Option<u64>,
    /// Probe flow, when known.
    pub flow: Option<u16>,
    /// Payload hash.
    pub hash: u64,
    /// Time at the ingress hook.
    pub t_in_ns: u64,
    /// Time at the egress hook.
    pub t_out_ns: u64,
}

/// Result of matching.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Matching {
    /// Pairs, in egress order.
    #[serde(skip)]
    pub pairs: Vec<Matched>,
    /// Egress datagrams that matched no in-flight ingress under the rule.
    pub unmatched_egress: u64,
    /// Ingress datagrams never paired (dropped by the VNF, still queued at the end,
    /// or skipped by a FIFO rule).
    pub unmatched_ingress: u64,
}

impl Matching {
    /// Everything that could not be paired.
    pub fn unmatched(&self) -> u64 {
        self.unmatched_egress + self.unmatched_ingress
    }
}

/// Pair `events` (in the order the ring buffer delivered them, which is the
/// order the hooks reserved their slots: an ingress precedes its egress).
pub fn pair(events: &[Event], mode: MatchMode) -> Matching {
    let mut queue: VecDeque<Event> = VecDeque::new();
    let mut m = Matching::default();
    for e in events {
        if e.ingress {
            queue.push_back(*e);
            continue;
        }
        let hit = queue.iter().position(|f| f.hash == e.hash);
        if mode == MatchMode::Fifo {
            if let Some(i) = hit {
                m.unmatched_ingress += i as u64;
                queue.drain(..i);
            }
        }
        match hit.and_then(|i| queue.remove(if mode == MatchMode::Fifo { 0 } else { i })) {
            Some(i) => m.pairs.push(Matched {
                seq: i.probe.map(|p| p.1),
                flow: i.probe.map(|p| p.0),
                hash: i.hash,
                t_in_ns: i.t_ns,
                t_out_ns: e.t_ns,
            }),
            None => m.unmatched_egress += 1,
        }
    }
    m.unmatched_ingress += queue.len() as u64;
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t: u64, hash: u64, ingress: bool) -> Event {
        Event {
            t_ns: t,
            hash,
            probe: Some((0, hash)),
            ingress,
        }
    }

    #[test]
    fn fifo_pairs_in_order_and_counts_a_reordered_pair_as_unmatched() {
        let evs = [
            ev(1, 10, true),
            ev(2, 11, true),
            ev(5, 10, false),
            ev(7, 11, false),
        ];
        let m = pair(&evs, MatchMode::Fifo);
        assert_eq!(m.pairs.len(), 2);
        assert_eq!((m.pairs[0].t_in_ns, m.pairs[0].t_out_ns), (1, 5));
        assert_eq!((m.pairs[1].t_in_ns, m.pairs[1].t_out_ns), (2, 7));
        assert_eq!(m.unmatched(), 0);
        // The VNF swaps them: FIFO takes 10 for lost when 11 leaves, and has
        // nothing left for 10.
        let swapped = [
            ev(1, 10, true),
            ev(2, 11, true),
            ev(5, 11, false),
            ev(7, 10, false),
        ];
        let m = pair(&swapped, MatchMode::Fifo);
        assert_eq!(m.pairs.len(), 1, "{:?}", m.pairs);
        assert_eq!((m.pairs[0].t_in_ns, m.pairs[0].t_out_ns), (2, 5));
        assert_eq!((m.unmatched_egress, m.unmatched_ingress), (1, 1));
        let m = pair(&swapped, MatchMode::Any);
        assert_eq!(m.pairs.len(), 2);
        assert_eq!((m.pairs[0].t_in_ns, m.pairs[0].t_out_ns), (2, 5));
        assert_eq!(m.unmatched(), 0);
    }

    #[test]
    fn a_dropped_datagram_is_unmatched_and_does_not_block_fifo() {
        // 10 is dropped by the VNF; 11 and 12 still pair under FIFO.
        let evs = [
            ev(1, 10, true),
            ev(2, 11, true),
            ev(3, 12, true),
            ev(5, 11, false),
            ev(6, 99, false),
            ev(8, 12, false),
        ];
        for mode in [MatchMode::Fifo, MatchMode::Any] {
            let m = pair(&evs, mode);
            assert_eq!(
                m.pairs.iter().map(|p| p.t_in_ns).collect::<Vec<_>>(),
                [2, 3]
            );
            assert_eq!(
                (m.unmatched_egress, m.unmatched_ingress),
                (1, 1),
                "{mode:?}"
            );
        }
    }
}
