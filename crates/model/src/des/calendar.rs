//! The event calendar: a binary heap ordered by time, ties broken by the
//! order of scheduling, so a run is a pure function of its seed.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Entry<E> {
    t: f64,
    seq: u64,
    ev: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    // BinaryHeap is a max-heap: the earliest (time, seq) must compare greatest.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .t
            .total_cmp(&self.t)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// Pending events in time order; equal times come out first-scheduled first.
pub struct Calendar<E> {
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
    now: f64,
}

impl<E> Default for Calendar<E> {
    fn default() -> Self {
        Calendar {
            heap: BinaryHeap::new(),
            seq: 0,
            now: 0.0,
        }
    }
}

impl<E> Calendar<E> {
    /// The time of the last event taken out (0 before the first).
    #[inline]
    pub fn now(&self) -> f64 {
        self.now
    }

    /// Schedules `ev` at absolute time `t`; a time in the past is taken as now.
    #[inline]
    pub fn schedule(&mut self, t: f64, ev: E) {
        let t = if t < self.now { self.now } else { t };
        self.seq += 1;
        self.heap.push(Entry {
            t,
            seq: self.seq,
            ev,
        });
    }

    /// Takes out the earliest event if it is due no later than `until`.
    #[inline]
    pub fn pop_until(&mut self, until: f64) -> Option<(f64, E)> {
        if self.heap.peek()?.t > until {
            return None;
        }
        let e = self.heap.pop()?;
        self.now = e.t;
        Some((e.t, e.ev))
    }

    /// Moves the clock forward to `t` (the end of a run) without an event.
    pub fn advance_to(&mut self, t: f64) {
        if t > self.now {
            self.now = t;
        }
    }

    /// Events still pending.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True when nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_order_with_fifo_ties() {
        let mut c = Calendar::default();
        c.schedule(2.0, 'a');
        c.schedule(1.0, 'b');
        c.schedule(2.0, 'c');
        c.schedule(1.0, 'd');
        let mut out = Vec::new();
        while let Some((_, e)) = c.pop_until(f64::INFINITY) {
            out.push(e);
        }
        assert_eq!(out, vec!['b', 'd', 'a', 'c']);
        assert_eq!(c.now(), 2.0);
    }

    #[test]
    fn stops_at_horizon_and_clamps_the_past() {
        let mut c = Calendar::default();
        c.schedule(5.0, 1);
        assert!(c.pop_until(4.0).is_none());
        assert_eq!(c.pop_until(5.0), Some((5.0, 1)));
        c.schedule(1.0, 2);
        assert_eq!(c.pop_until(10.0), Some((5.0, 2)));
    }
}
