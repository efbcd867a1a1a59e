//! Periodic OS interruptions of a core (timer ticks, IRQ work): while one
//! runs the core makes no progress, so work in flight is stretched by it.
use serde::Serialize;

/// A periodic interruption source: every `1/rate_hz`, for a duration taken
/// cyclically from `durations_ns` (seed 000's DuT: `loc` and `iwi` at 250 Hz
/// in total with an `iwi` after every second `loc`, i.e. durations
/// `[10.9 µs, 10.9 µs, 13.6 µs]`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interruption {
    /// Trigger rate, Hz.
    pub rate_hz: f64,
    /// Durations in cyclic order, ns.
    pub durations_ns: Vec<u64>,
    /// Time of the first trigger, ns.
    pub phase_ns: u64,
}

struct Source {
    period_ns: f64,
    phase_ns: f64,
    durations: Vec<u64>,
    k: u64,
}

impl Source {
    fn start(&self) -> u64 {
        (self.phase_ns + self.k as f64 * self.period_ns).round() as u64
    }
    fn duration(&self) -> u64 {
        self.durations[(self.k % self.durations.len() as u64) as usize]
    }
}

/// The merged interruption intervals of one core, consumed in time order.
pub(crate) struct IrqSchedule {
    sources: Vec<Source>,
    /// Current interval [start, end); `u64::MAX` when there is none.
    cur: (u64, u64),
}

impl IrqSchedule {
    pub(crate) fn new(list: &[Interruption]) -> IrqSchedule {
        let sources = list
            .iter()
            .filter(|i| i.rate_hz > 0.0 && i.durations_ns.iter().any(|d| *d > 0))
            .map(|i| Source {
                period_ns: 1e9 / i.rate_hz,
                phase_ns: i.phase_ns as f64,
                durations: i.durations_ns.clone(),
                k: 0,
            })
            .collect();
        let mut s = IrqSchedule {
            sources,
            cur: (0, 0),
        };
        s.next_interval();
        s
    }

    fn pop(&mut self) -> Option<(u64, u64)> {
        let src = self.sources.iter_mut().min_by_key(|s| s.start())?;
        let r = (src.start(), src.duration());
        src.k += 1;
        Some(r)
    }

    fn peek_start(&self) -> u64 {
        self.sources
            .iter()
            .map(Source::start)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Interruptions that arrive while one runs are served right after it.
    fn next_interval(&mut self) {
        let Some((s, d)) = self.pop() else {
            self.cur = (u64::MAX, u64::MAX);
            return;
        };
        let mut end = s + d;
        while self.peek_start() <= end {
            let (_, d2) = self.pop().expect("peeked");
            end += d2;
        }
        self.cur = (s, end);
    }

    fn skip_to(&mut self, t: u64) {
        while self.cur.1 <= t && self.cur.1 != u64::MAX {
            self.next_interval();
        }
    }

    /// The first instant ≥ t at which the core is not interrupted.
    #[inline]
    pub(crate) fn free_at(&mut self, t: u64) -> u64 {
        self.skip_to(t);
        if self.cur.0 <= t {
            self.cur.1
        } else {
            t
        }
    }

    /// When work of `d` ns started at `t` finishes, interruptions included.
    #[inline]
    pub(crate) fn advance(&mut self, t: u64, d: u64) -> u64 {
        if self.cur.0 == u64::MAX {
            return t + d;
        }
        let mut t = self.free_at(t);
        let mut rem = d;
        loop {
            self.skip_to(t);
            if self.cur.0 <= t {
                t = self.cur.1;
                continue;
            }
            if t + rem <= self.cur.0 {
                return t + rem;
            }
            rem -= self.cur.0 - t;
            t = self.cur.1;
        }
    }

    /// Start of the next interruption after the free instant `t`.
    #[inline]
    pub(crate) fn next_start(&mut self, t: u64) -> u64 {
        self.skip_to(t);
        self.cur.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_is_stretched_by_interruptions() {
        // Every 1000 ns for 100 ns, starting at 500.
        let mut s = IrqSchedule::new(&[Interruption {
            rate_hz: 1e6,
            durations_ns: vec![100],
            phase_ns: 500,
        }]);
        assert_eq!(s.free_at(0), 0);
        assert_eq!(s.advance(0, 400), 400);
        assert_eq!(s.advance(400, 200), 700); // 400..500, irq 500..600, 600..700
        assert_eq!(s.free_at(1550), 1600);
        assert_eq!(s.advance(1600, 2000), 3800); // crosses irqs at 2500 and 3500
        assert_eq!(s.next_start(3800), 4500);
    }

    #[test]
    fn overlapping_sources_queue_up() {
        let mut s = IrqSchedule::new(&[
            Interruption {
                rate_hz: 1e3,
                durations_ns: vec![300],
                phase_ns: 0,
            },
            Interruption {
                rate_hz: 1e3,
                durations_ns: vec![200, 400],
                phase_ns: 100,
            },
        ]);
        // 0..300 then the second source (100) runs 300..500.
        assert_eq!(s.free_at(0), 500);
        // Second period: 1e6..1.0003e6, then 400 ns more.
        assert_eq!(s.free_at(1_000_000), 1_000_700);
    }
}
