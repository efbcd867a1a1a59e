//! Latency samples as the distribution figures read them: every value,
//! sorted, while a run fits the exact budget ([`crate::load::EXACT_PACKETS`]),
//! else an HDR histogram of bounded size.
//!
//! Both answer the same questions — count, min, max, the value at a rank,
//! counts per bin — so the figures do not care which one they draw. HDR
//! values are the upper end of their bucket clamped to the exact min and
//! max, as in `nflab analyze` (`crates/analyze/src/dist.rs`): within
//! [`HDR_DIGITS`] significant digits (0.1 %) of the exact value.

use hdrhistogram::Histogram;

/// Significant digits of the HDR histograms of latency.
pub const HDR_DIGITS: u8 = 3;

/// Largest relative error of an HDR value, `10^-HDR_DIGITS`.
pub const HDR_REL_ERROR: f64 = 1e-3;

/// A sorted sample or an HDR histogram with exact count, min and max.
#[derive(Debug, Clone)]
pub enum Lat {
    /// Every value, ascending.
    Exact(Vec<i64>),
    /// Bucketed values.
    Hdr(Box<HdrLat>),
}

/// Latencies in HDR histograms: one for values ≥ 0, one for the magnitudes
/// of negative values (clock problems), with exact count, min and max.
#[derive(Debug, Clone)]
pub struct HdrLat {
    pos: Histogram<u64>,
    neg: Option<Histogram<u64>>,
    n: u64,
    min: i64,
    max: i64,
}

fn hist(digits: u8) -> Histogram<u64> {
    // Auto-resizing, so recording any u64 succeeds; 1..=5 digits are valid.
    Histogram::new(digits).unwrap_or_else(|_| unreachable!("valid significant digits"))
}

impl Default for HdrLat {
    fn default() -> Self {
        HdrLat::new()
    }
}

impl HdrLat {
    /// An empty histogram with [`HDR_DIGITS`] digits.
    pub fn new() -> HdrLat {
        HdrLat {
            pos: hist(HDR_DIGITS),
            neg: None,
            n: 0,
            min: i64::MAX,
            max: i64::MIN,
        }
    }

    /// Add one value.
    #[inline]
    pub fn record(&mut self, v: i64) {
        self.n += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        let h = if v >= 0 {
            &mut self.pos
        } else {
            self.neg.get_or_insert_with(|| hist(HDR_DIGITS))
        };
        let _ = h.record(v.unsigned_abs());
    }

    /// Number of values.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// No value yet.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Add everything of `o`.
    pub fn add(&mut self, o: &HdrLat) {
        if o.n == 0 {
            return;
        }
        self.n += o.n;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        let _ = self.pos.add(&o.pos);
        if let Some(on) = &o.neg {
            let _ = self.neg.get_or_insert_with(|| hist(HDR_DIGITS)).add(on);
        }
    }

    /// `(value, count)` per recorded bucket, ascending; the value is the
    /// bucket's upper end (lower end for negatives) clamped to min..max.
    fn buckets(&self) -> impl Iterator<Item = (i64, u64)> + '_ {
        let (min, max) = (self.min, self.max);
        let neg = self.neg.iter().flat_map(move |h| {
            let mut v: Vec<(i64, u64)> = h
                .iter_recorded()
                .map(|it| {
                    (
                        -(h.lowest_equivalent(it.value_iterated_to())
                            .min(i64::MAX as u64) as i64),
                        it.count_at_value(),
                    )
                })
                .collect();
            v.reverse();
            v
        });
        let pos = self.pos.iter_recorded().map(|it| {
            (
                it.value_iterated_to().min(i64::MAX as u64) as i64,
                it.count_at_value(),
            )
        });
        neg.chain(pos).map(move |(v, c)| (v.clamp(min, max), c))
    }
}

/// Read access to a sorted sample by rank: implemented for sorted slices and
/// for [`Lat`], so the statistics need one definition for both.
pub trait Sample {
    /// Number of values.
    fn count(&self) -> usize;
    /// The values at 0-based ascending ranks `idx` (each `< count()`).
    fn at(&self, idx: &[usize]) -> Vec<i64>;
    /// `(value, count)` in ascending value order.
    fn counts(&self) -> Vec<(i64, u64)>;
}

impl Sample for [i64] {
    fn count(&self) -> usize {
        self.len()
    }
    fn at(&self, idx: &[usize]) -> Vec<i64> {
        idx.iter().map(|&i| self[i]).collect()
    }
    fn counts(&self) -> Vec<(i64, u64)> {
        let mut out: Vec<(i64, u64)> = Vec::new();
        for &v in self {
            match out.last_mut() {
                Some((x, c)) if *x == v => *c += 1,
                _ => out.push((v, 1)),
            }
        }
        out
    }
}

impl Sample for Vec<i64> {
    fn count(&self) -> usize {
        self.as_slice().count()
    }
    fn at(&self, idx: &[usize]) -> Vec<i64> {
        self.as_slice().at(idx)
    }
    fn counts(&self) -> Vec<(i64, u64)> {
        self.as_slice().counts()
    }
}

impl Sample for Lat {
    fn count(&self) -> usize {
        self.len() as usize
    }
    fn at(&self, idx: &[usize]) -> Vec<i64> {
        match self {
            Lat::Exact(v) => v.at(idx),
            Lat::Hdr(h) => {
                // One walk over the buckets for all ranks (ascending).
                let mut out = Vec::with_capacity(idx.len());
                let mut it = h.buckets();
                let (mut cum, mut cur) = (0u64, (h.min, 0u64));
                for &i in idx {
                    while cum <= i as u64 {
                        match it.next() {
                            Some(b) => {
                                cur = b;
                                cum += b.1;
                            }
                            None => break,
                        }
                    }
                    // Rank 1 is the exact minimum (the top rank is clamped to the max).
                    out.push(if i == 0 { h.min } else { cur.0 });
                }
                out
            }
        }
    }
    fn counts(&self) -> Vec<(i64, u64)> {
        match self {
            Lat::Exact(v) => v.counts(),
            Lat::Hdr(h) => h.buckets().collect(),
        }
    }
}

impl Lat {
    /// Number of values.
    pub fn len(&self) -> u64 {
        match self {
            Lat::Exact(v) => v.len() as u64,
            Lat::Hdr(h) => h.n,
        }
    }

    /// No value at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every value is held (nearest rank is exact).
    pub fn is_exact(&self) -> bool {
        matches!(self, Lat::Exact(_))
    }

    /// Smallest value.
    pub fn min(&self) -> Option<i64> {
        match self {
            Lat::Exact(v) => v.first().copied(),
            Lat::Hdr(h) => (h.n > 0).then_some(h.min),
        }
    }

    /// Largest value.
    pub fn max(&self) -> Option<i64> {
        match self {
            Lat::Exact(v) => v.last().copied(),
            Lat::Hdr(h) => (h.n > 0).then_some(h.max),
        }
    }

    /// Nearest-rank quantile `q ∈ [0, 1]` (see [`crate::stats::quantile`]).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        match self {
            Lat::Exact(v) => crate::stats::quantile(v, q),
            Lat::Hdr(_) => {
                let n = self.len() as usize;
                if n == 0 {
                    return None;
                }
                let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
                self.at(&[rank - 1]).first().map(|v| *v as f64)
            }
        }
    }

    /// The samples of several runs as one: exact when all are exact.
    pub fn pool(parts: &[&Lat]) -> Lat {
        if parts.iter().all(|l| l.is_exact()) {
            let mut v: Vec<i64> = Vec::new();
            for p in parts {
                if let Lat::Exact(x) = p {
                    v.extend_from_slice(x);
                }
            }
            if parts.len() > 1 {
                v.sort_unstable();
            }
            return Lat::Exact(v);
        }
        let mut h = HdrLat::new();
        for p in parts {
            match p {
                Lat::Exact(x) => x.iter().for_each(|&v| h.record(v)),
                Lat::Hdr(o) => h.add(o),
            }
        }
        Lat::Hdr(Box::new(h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hdr_ranks_are_within_the_error_bound_and_clamped() {
        let v: Vec<i64> = (1..=100_000).map(|i| i * 37 - 5_000).collect();
        let mut h = HdrLat::new();
        v.iter().for_each(|&x| h.record(x));
        let lat = Lat::Hdr(Box::new(h));
        assert_eq!(
            (lat.len(), lat.min(), lat.max()),
            (100_000, Some(-4_963), Some(3_695_000))
        );
        let idx = [0, 1, 134, 135, 50_000, 99_000, 99_999];
        for (i, got) in idx.iter().zip(lat.at(&idx)) {
            let want = v[*i];
            assert!(
                (got - want).abs() as f64 <= want.abs() as f64 * HDR_REL_ERROR * 2.0 + 1.0,
                "rank {i}: {got} vs {want}"
            );
        }
        assert_eq!(lat.quantile(1.0), Some(3_695_000.0));
        assert_eq!(lat.quantile(0.0), Some(-4_963.0));
        assert_eq!(lat.counts().iter().map(|c| c.1).sum::<u64>(), 100_000);
    }

    #[test]
    fn pooling_exact_stays_exact() {
        let a = Lat::Exact(vec![1, 5, 9]);
        let b = Lat::Exact(vec![2, 3]);
        match Lat::pool(&[&a, &b]) {
            Lat::Exact(v) => assert_eq!(v, vec![1, 2, 3, 5, 9]),
            Lat::Hdr(_) => panic!("became HDR"),
        }
        let mut h = HdrLat::new();
        h.record(100);
        let c = Lat::Hdr(Box::new(h));
        let p = Lat::pool(&[&a, &c]);
        assert!(!p.is_exact());
        assert_eq!((p.len(), p.min(), p.max()), (4, Some(1), Some(100)));
    }
}
