//! Monitors: time-weighted levels (queue length, busy servers) and counters,
//! both kept as totals and as per-second series.

/// A level that changes at events; its time integral is kept in total and
/// per second of simulated time, so means over any whole-second window
/// (e.g. after a warm-up) are exact.
#[derive(Debug, Clone, Default)]
pub struct TimeWeighted {
    last_t: f64,
    value: f64,
    bins: Vec<f64>,
}

impl TimeWeighted {
    /// The current level.
    #[inline]
    pub fn value(&self) -> f64 {
        self.value
    }

    /// Sets the level to `value` from time `t` on.
    #[inline]
    pub fn set(&mut self, t: f64, value: f64) {
        self.accumulate(t);
        self.value = value;
    }

    /// Adds `delta` to the level from time `t` on.
    #[inline]
    pub fn add(&mut self, t: f64, delta: f64) {
        self.accumulate(t);
        self.value += delta;
    }

    fn accumulate(&mut self, t: f64) {
        if t <= self.last_t {
            return;
        }
        if self.value != 0.0 {
            let mut from = self.last_t;
            let last_bin = t as usize;
            if self.bins.len() <= last_bin {
                self.bins.resize(last_bin + 1, 0.0);
            }
            let mut bin = from as usize;
            while bin < last_bin {
                let edge = (bin + 1) as f64;
                self.bins[bin] += self.value * (edge - from);
                from = edge;
                bin += 1;
            }
            self.bins[last_bin] += self.value * (t - from);
        }
        self.last_t = t;
    }

    /// Closes the record at `t` (the end of the run).
    pub fn close(&mut self, t: f64) {
        self.accumulate(t);
    }

    /// Mean level over `[from, to)` (whole seconds), after [`close`](Self::close).
    pub fn mean_between(&self, from_s: usize, to_s: usize) -> f64 {
        if to_s <= from_s {
            return 0.0;
        }
        let sum: f64 = (from_s..to_s)
            .map(|s| self.bins.get(s).copied().unwrap_or(0.0))
            .sum();
        sum / (to_s - from_s) as f64
    }

    /// Mean level in each second `0..seconds`.
    pub fn per_second(&self, seconds: usize) -> Vec<f64> {
        (0..seconds)
            .map(|s| self.bins.get(s).copied().unwrap_or(0.0))
            .collect()
    }
}

/// A count of events per second of simulated time.
#[derive(Debug, Clone, Default)]
pub struct Counter {
    total: u64,
    bins: Vec<u64>,
}

impl Counter {
    /// Counts one event at time `t`.
    #[inline]
    pub fn hit(&mut self, t: f64) {
        let b = t as usize;
        if self.bins.len() <= b {
            self.bins.resize(b + 1, 0);
        }
        self.bins[b] += 1;
        self.total += 1;
    }

    /// Events counted in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Events in each second `0..seconds`.
    pub fn per_second(&self, seconds: usize) -> Vec<u64> {
        (0..seconds)
            .map(|s| self.bins.get(s).copied().unwrap_or(0))
            .collect()
    }

    /// Mean events per second over `[from, to)`.
    pub fn rate_between(&self, from_s: usize, to_s: usize) -> f64 {
        if to_s <= from_s {
            return 0.0;
        }
        let n: u64 = (from_s..to_s)
            .map(|s| self.bins.get(s).copied().unwrap_or(0))
            .sum();
        n as f64 / (to_s - from_s) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_weighted_splits_across_seconds() {
        let mut m = TimeWeighted::default();
        m.set(0.5, 2.0); // 0 on [0,0.5), 2 on [0.5, 2.25)
        m.set(2.25, 4.0); // 4 on [2.25, 3)
        m.close(3.0);
        let s = m.per_second(3);
        assert!((s[0] - 1.0).abs() < 1e-12);
        assert!((s[1] - 2.0).abs() < 1e-12);
        assert!((s[2] - (0.5 + 3.0)).abs() < 1e-12);
        assert!((m.mean_between(1, 3) - 2.75).abs() < 1e-12);
    }

    #[test]
    fn counter_bins() {
        let mut c = Counter::default();
        for t in [0.1, 0.9, 1.0, 2.5] {
            c.hit(t);
        }
        assert_eq!(c.per_second(4), vec![2, 1, 1, 0]);
        assert_eq!(c.total(), 4);
        assert!((c.rate_between(0, 2) - 1.5).abs() < 1e-12);
    }
}
