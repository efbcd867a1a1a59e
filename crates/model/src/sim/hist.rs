//! A log-linear histogram of non-negative integers (HDR-style): values
//! below 256 exactly, larger ones in buckets of relative width ≤ 1/128, so a
//! quantile read from it is within 0.4 % of the true value (the bucket
//! midpoint is reported). Fixed size, no allocation per value.

const SUB: u64 = 256;
const HALF: u64 = 128;
const BUCKETS: usize = (SUB + (63 - 8 + 1) * HALF) as usize;

/// Log-linear histogram with ≤ 0.4 % quantile error.
#[derive(Debug, Clone)]
pub struct LogHist {
    counts: Vec<u64>,
    n: u64,
    sum: f64,
    sum2: f64,
    min: u64,
    max: u64,
}

impl Default for LogHist {
    fn default() -> Self {
        LogHist {
            counts: vec![0; BUCKETS],
            n: 0,
            sum: 0.0,
            sum2: 0.0,
            min: u64::MAX,
            max: 0,
        }
    }
}

fn index(v: u64) -> usize {
    if v < SUB {
        v as usize
    } else {
        let e = 63 - v.leading_zeros() as u64; // ≥ 8
        let shift = e - 7;
        let m = v >> shift; // in [128, 256)
        (SUB + (e - 8) * HALF + (m - HALF)) as usize
    }
}

fn midpoint(i: usize) -> f64 {
    let i = i as u64;
    if i < SUB {
        i as f64
    } else {
        let e = (i - SUB) / HALF + 8;
        let m = (i - SUB) % HALF + HALF;
        let shift = e - 7;
        ((m << shift) as f64) + ((1u64 << shift) as f64 - 1.0) / 2.0
    }
}

impl LogHist {
    /// Add a value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[index(v)] += 1;
        self.n += 1;
        let f = v as f64;
        self.sum += f;
        self.sum2 += f * f;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Mean, or None when empty.
    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }

    /// Sample standard deviation, or None with fewer than two values.
    pub fn stdev(&self) -> Option<f64> {
        (self.n > 1).then(|| {
            let m = self.sum / self.n as f64;
            ((self.sum2 - self.n as f64 * m * m) / (self.n - 1) as f64)
                .max(0.0)
                .sqrt()
        })
    }

    /// Smallest and largest value.
    pub fn min_max(&self) -> Option<(u64, u64)> {
        (self.n > 0).then_some((self.min, self.max))
    }

    /// The q-quantile (0 ≤ q ≤ 1, nearest rank), or None when empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.n as f64).ceil() as u64).max(1);
        if rank >= self.n {
            return Some(self.max as f64);
        }
        let mut acc = 0;
        for (i, c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= rank {
                return Some(midpoint(i).clamp(self.min as f64, self.max as f64));
            }
        }
        Some(self.max as f64)
    }

    /// Merge another histogram into this one.
    pub fn merge(&mut self, o: &LogHist) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        self.n += o.n;
        self.sum += o.sum;
        self.sum2 += o.sum2;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_within_resolution() {
        let mut h = LogHist::default();
        for v in 1..=100_000u64 {
            h.record(v * 7);
        }
        for q in [0.5, 0.9, 0.99, 0.999] {
            let exact = (q * 100_000.0f64).ceil() * 7.0;
            let got = h.quantile(q).unwrap();
            assert!(
                (got - exact).abs() / exact < 1.0 / 256.0 + 1e-9,
                "{q}: {got} vs {exact}"
            );
        }
        assert_eq!(h.quantile(1.0).unwrap(), 700_000.0);
        assert_eq!(h.min_max(), Some((7, 700_000)));
        // Indices are monotone and cover u64.
        let mut last = 0;
        for v in [0u64, 255, 256, 257, 511, 512, 1 << 40, u64::MAX] {
            let i = index(v);
            assert!(i >= last && i < BUCKETS);
            last = i;
        }
    }
}
