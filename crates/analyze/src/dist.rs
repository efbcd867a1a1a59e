//! [`Distribution`]: a stream of signed integer values (latencies, IPDV, ...)
//! with exact min/max/mean/stdev and percentiles that are exact while the
//! values fit in memory and HDR-histogram estimates beyond that.
//!
//! Exact mode keeps every value in a `Vec<i64>` (8 bytes each). When the
//! count passes `exact_limit`, the values move into two HDR histograms
//! (one for values >= 0, one for the magnitudes of negative values) and the
//! vector is freed; from then on memory is constant (a few hundred KiB for 3
//! significant digits). Min, max, count, mean and stdev stay exact in both
//! modes (integer sums).

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Percentile method of a [`Distribution`] when it was evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Every value in memory; nearest rank, exact.
    Exact,
    /// HDR histogram with the given significant digits.
    Hdr,
}

/// A percentile as an exact fraction `num/den` of 100 (p = 99.9 is
/// `999/1000`), so ranks are computed in integer arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pct {
    /// Numerator of p/100.
    pub num: u64,
    /// Denominator of p/100.
    pub den: u64,
}

impl Pct {
    /// Parse a percentile written as a decimal in (0, 100], e.g. `"99.999"`
    /// or `"p99.9"`; `None` when it is not one.
    pub fn parse(s: &str) -> Option<Pct> {
        let t = s.trim();
        let t = t.strip_prefix('p').unwrap_or(t);
        if t.is_empty() || t.starts_with('-') || t.starts_with('+') {
            return None;
        }
        let (i, f) = t.split_once('.').unwrap_or((t, ""));
        if !i.bytes().all(|b| b.is_ascii_digit()) || !f.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if i.is_empty() && f.is_empty() || f.len() > 15 {
            return None;
        }
        let digits = format!("{i}{f}");
        let num: u64 = digits.parse().ok()?;
        let den = 100u64.checked_mul(10u64.checked_pow(f.len() as u32)?)?;
        if num == 0 || num > den {
            return None;
        }
        let g = gcd(num, den);
        Some(Pct {
            num: num / g,
            den: den / g,
        })
    }

    /// The percentile as a float, e.g. 99.9.
    pub fn as_f64(&self) -> f64 {
        self.num as f64 * 100.0 / self.den as f64
    }

    /// The percentile as written in JSON keys: `"p99.9"`, `"p50"`.
    pub fn label(&self) -> String {
        // Exact decimal expansion: den divides a power of ten (from parse).
        let mut num = u128::from(self.num) * 100;
        let den = u128::from(self.den);
        let int = num / den;
        num %= den;
        let mut s = format!("p{int}");
        if num != 0 {
            s.push('.');
            let mut k = 0;
            while num != 0 && k < 20 {
                num *= 10;
                s.push(char::from(b'0' + (num / den) as u8));
                num %= den;
                k += 1;
            }
        }
        s
    }

    /// 1-based nearest rank among `n` values: `clamp(ceil(p/100 · n), 1, n)`.
    pub fn rank(&self, n: u64) -> u64 {
        let r = (u128::from(self.num) * u128::from(n)).div_ceil(u128::from(self.den));
        r.clamp(1, u128::from(n.max(1))) as u64
    }
}

/// Count, nearest-rank p50, p99, p99.9 and the largest value of one sample
/// (a short tail summary, e.g. of timer lateness).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tail {
    /// Values in the sample.
    pub count: u64,
    /// Median.
    pub p50: Option<i64>,
    /// 99th percentile.
    pub p99: Option<i64>,
    /// 99.9th percentile.
    pub p99_9: Option<i64>,
    /// Largest value.
    pub max: Option<i64>,
}

impl Tail {
    /// The percentiles of `values` (exact: the sample is kept whole).
    pub fn of(values: &[i64]) -> Tail {
        let mut d = Distribution::new(u64::MAX, 3);
        values.iter().for_each(|&v| d.record(v));
        let pcts = ["50", "99", "99.9"].map(|p| Pct::parse(p).expect("valid percentile"));
        let q = d.quantiles(&pcts);
        let at = |i: usize| q[i].map(|q| q.value);
        Tail {
            count: d.count(),
            p50: at(0),
            p99: at(1),
            p99_9: at(2),
            max: d.max(),
        }
    }
}

/// The q-quantile (0 < q ≤ 1) of a distribution given as probabilities
/// over 0, 1, 2, … (`pmf[k]` ∝ P(X = k), normalised here): the smallest k
/// with P(X ≤ k) ≥ q — the nearest-rank rule of [`Pct::rank`] for a model's
/// probability mass function instead of a sample (the batch model's sojourn
/// quantiles). The last index when rounding keeps the sum below q; `None`
/// for an empty pmf.
pub fn pmf_quantile(pmf: &[f64], q: f64) -> Option<usize> {
    let last = pmf.len().checked_sub(1)?;
    let total: f64 = pmf.iter().sum();
    let mut acc = 0.0;
    for (k, p) in pmf.iter().enumerate() {
        acc += p / total;
        if acc >= q {
            return Some(k);
        }
    }
    Some(last)
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// One evaluated percentile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantile {
    /// Reported value. Exact mode: the nearest-rank value. HDR mode: the
    /// upper end of the HDR bucket holding it (clamped to min..max).
    pub value: i64,
    /// Lower end of the interval that surely holds the exact value
    /// (`== value` in exact mode).
    pub lower: i64,
}

/// Streaming distribution of i64 values; see the module docs.
#[derive(Debug, Clone)]
pub struct Distribution {
    moments: Moments,
    exact: Option<Vec<i64>>,
    exact_limit: u64,
    digits: u8,
    pos: Option<Histogram<u64>>,
    neg: Option<Histogram<u64>>,
}

/// An empty auto-resizing HDR histogram with `digits` significant digits
/// (clamped to 1..=5).
pub(crate) fn new_histogram(digits: u8) -> Histogram<u64> {
    Histogram::new(digits.clamp(1, 5))
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!()))
}

/// HDR significant digits used when none is configured.
pub const DEFAULT_HDR_DIGITS: u8 = 3;
/// Values held exactly before switching to HDR, when not configured:
/// 2^24 values = 128 MiB.
pub const DEFAULT_EXACT_LIMIT: u64 = 1 << 24;

/// Count, min, max, mean and stdev of a stream of i64 values, exact:
/// values are summed as `v - shift` (shift = the first value) in integers,
/// so the sums stay small and the variance has no cancellation error. Two
/// accumulators over parts of a stream [`merge`](Moments::merge) into the
/// one of the whole.
#[derive(Debug, Clone, Copy)]
pub struct Moments {
    count: u64,
    min: i64,
    max: i64,
    shift: i64,
    sum_d: i128,
    sum_d2: u128,
    /// Absurd values (timestamps of garbage) overflowed the integer sums;
    /// the f64 sums carry on.
    sums_overflowed: bool,
    f_sum: f64,
    f_sum2: f64,
}

impl Default for Moments {
    fn default() -> Self {
        Moments::new()
    }
}

impl Moments {
    /// No values yet.
    pub const fn new() -> Moments {
        Moments {
            count: 0,
            min: i64::MAX,
            max: i64::MIN,
            shift: 0,
            sum_d: 0,
            sum_d2: 0,
            sums_overflowed: false,
            f_sum: 0.0,
            f_sum2: 0.0,
        }
    }

    /// Add one value.
    #[inline]
    pub fn record(&mut self, v: i64) {
        if self.count == 0 {
            self.shift = v;
        }
        self.count += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        let d = i128::from(v) - i128::from(self.shift);
        if !self.sums_overflowed {
            let a = d.unsigned_abs();
            // |d| < 2^32 is the common case: the square fits a u64.
            let d2 = if a < 1 << 32 {
                Some(u128::from((a as u64) * (a as u64)))
            } else {
                a.checked_mul(a)
            };
            match (
                self.sum_d.checked_add(d),
                d2.and_then(|x| self.sum_d2.checked_add(x)),
            ) {
                (Some(s), Some(s2)) => {
                    self.sum_d = s;
                    self.sum_d2 = s2;
                    return;
                }
                _ => self.overflow(),
            }
        }
        let x = d as f64;
        self.f_sum += x;
        self.f_sum2 += x * x;
    }

    /// The moments of `vals`, the same as recording them one by one, but
    /// in a loop without 128-bit arithmetic when the values lie within 2^32
    /// of each other (every latency block of a sane trace).
    pub fn of_block(vals: &[i64]) -> Moments {
        let Some(&first) = vals.first() else {
            return Moments::new();
        };
        let (lo, hi) = vals
            .iter()
            .fold((first, first), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        Moments::of_block_within(vals, lo, hi)
    }

    /// The moments of `count` values (`count` > 0) from `min` to `max`, the
    /// first being `first`, that add up to `sum` and whose squares add up to
    /// `sum_sq`: the same as recording them one by one (the sums are re-based
    /// on the first value exactly).
    pub(crate) fn from_sums(
        count: u64,
        min: i64,
        max: i64,
        first: i64,
        sum: i128,
        sum_sq: u128,
    ) -> Moments {
        // Σ(v−f) = Σv − n·f and Σ(v−f)² = Σv² − 2f·Σv + n·f².
        let (n, f) = (i128::from(count), i128::from(first));
        Moments {
            count,
            min,
            max,
            shift: first,
            sum_d: sum - n * f,
            sum_d2: (sum_sq as i128 - 2 * f * sum + n * f * f) as u128,
            ..Moments::new()
        }
    }

    /// [`of_block`](Moments::of_block) of values known to lie in `lo..=hi`
    /// (the smallest and largest of them).
    pub(crate) fn of_block_within(vals: &[i64], lo: i64, hi: i64) -> Moments {
        let Some(&first) = vals.first() else {
            return Moments::new();
        };
        let range = i128::from(hi) - i128::from(lo);
        if range >= 1 << 32 || vals.len() > 1 << 32 {
            let mut m = Moments::new();
            vals.iter().for_each(|&v| m.record(v));
            return m;
        }
        // d = v − lo < 2^32, so d² fits a u64 (one vector multiply of 32-bit
        // halves) and chunks of `chunk` squares fit a u64 sum.
        let r = range as u64;
        let chunk = u64::MAX
            .checked_div(r * r)
            .unwrap_or(u64::MAX)
            .clamp(1, 1 << 20) as usize;
        let (mut sum, mut sum2) = (0u128, 0u128);
        for c in vals.chunks(chunk) {
            let (mut s, mut s2) = (0u64, 0u64);
            for &v in c {
                let d = u64::from(v.wrapping_sub(lo) as u32);
                s += d;
                s2 += d * d;
            }
            sum += u128::from(s);
            sum2 += u128::from(s2);
        }
        // Re-base on the first value, as recording does: with k = first − lo,
        // Σ(v−first) = Σd − n·k and Σ(v−first)² = Σd² − 2k·Σd + n·k².
        let (n, k) = (vals.len() as i128, i128::from(first) - i128::from(lo));
        let (sum, sum2) = (sum as i128, sum2 as i128);
        Moments {
            count: vals.len() as u64,
            min: lo,
            max: hi,
            shift: first,
            sum_d: sum - n * k,
            sum_d2: (sum2 - 2 * k * sum + n * k * k) as u128,
            ..Moments::new()
        }
    }

    fn overflow(&mut self) {
        self.sums_overflowed = true;
        self.f_sum = self.sum_d as f64;
        self.f_sum2 = self.sum_d2 as f64;
    }

    /// Fold `other` (values of another part of the stream) into `self`; the
    /// result equals recording both parts into one accumulator.
    pub fn merge(&mut self, other: &Moments) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *other;
            return;
        }
        // Re-base other's sums on self.shift: Σ(v−s) = Σ(v−o) + n·(o−s),
        // Σ(v−s)² = Σ(v−o)² + 2(o−s)·Σ(v−o) + n·(o−s)².
        let k = i128::from(other.shift) - i128::from(self.shift);
        let n = i128::from(other.count);
        let exact = (!self.sums_overflowed && !other.sums_overflowed)
            .then(|| {
                let s = other.sum_d.checked_add(n.checked_mul(k)?)?;
                let cross = k.checked_mul(other.sum_d)?.checked_mul(2)?;
                let s2 = i128::try_from(other.sum_d2)
                    .ok()?
                    .checked_add(cross)?
                    .checked_add(n.checked_mul(k.checked_mul(k)?)?)?;
                Some((
                    self.sum_d.checked_add(s)?,
                    self.sum_d2.checked_add(u128::try_from(s2).ok()?)?,
                ))
            })
            .flatten();
        match exact {
            Some((s, s2)) => {
                self.sum_d = s;
                self.sum_d2 = s2;
            }
            None => {
                if !self.sums_overflowed {
                    self.overflow();
                }
                let (o1, o2) = if other.sums_overflowed {
                    (other.f_sum, other.f_sum2)
                } else {
                    (other.sum_d as f64, other.sum_d2 as f64)
                };
                let (k, n) = (k as f64, other.count as f64);
                self.f_sum += o1 + n * k;
                self.f_sum2 += o2 + 2.0 * k * o1 + n * k * k;
            }
        }
        self.count += other.count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Number of values.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Smallest value.
    pub fn min(&self) -> Option<i64> {
        (self.count > 0).then_some(self.min)
    }

    /// Largest value.
    pub fn max(&self) -> Option<i64> {
        (self.count > 0).then_some(self.max)
    }

    /// Arithmetic mean.
    pub fn mean(&self) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let m = if self.sums_overflowed {
            self.f_sum / self.count as f64
        } else {
            self.sum_d as f64 / self.count as f64
        };
        Some(self.shift as f64 + m)
    }

    /// Population standard deviation (divides by N).
    pub fn stdev(&self) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let n = self.count as f64;
        if !self.sums_overflowed {
            // N·Σd² − (Σd)², exact in integers when it fits.
            let n_i = u128::from(self.count);
            let s2 = self
                .sum_d
                .unsigned_abs()
                .checked_mul(self.sum_d.unsigned_abs());
            if let (Some(a), Some(b)) = (n_i.checked_mul(self.sum_d2), s2) {
                let num = a.saturating_sub(b) as f64;
                return Some((num / n / n).sqrt());
            }
        }
        let m = self.f_sum / n;
        Some((self.f_sum2 / n - m * m).max(0.0).sqrt())
    }
}

impl Distribution {
    /// An empty distribution that stays exact for `exact_limit` values and
    /// then uses HDR histograms with `digits` (1..=5) significant digits.
    pub fn new(exact_limit: u64, digits: u8) -> Distribution {
        Distribution {
            moments: Moments::new(),
            exact: if exact_limit > 0 {
                Some(Vec::new())
            } else {
                None
            },
            exact_limit,
            digits: digits.clamp(1, 5),
            pos: None,
            neg: None,
        }
    }

    /// A distribution in HDR mode assembled from parts accumulated elsewhere
    /// (the parallel pass): exact `moments` and the histograms of the values
    /// >= 0 and of the magnitudes of the negative ones.
    pub(crate) fn from_hdr(
        moments: Moments,
        pos: Option<Histogram<u64>>,
        neg: Option<Histogram<u64>>,
        digits: u8,
    ) -> Distribution {
        Distribution {
            moments,
            exact: None,
            exact_limit: 0,
            digits: digits.clamp(1, 5),
            pos,
            neg,
        }
    }

    /// A distribution in exact mode assembled elsewhere (the parallel pass):
    /// exact `moments` and every value, in any order.
    pub(crate) fn from_exact(moments: Moments, values: Vec<i64>, digits: u8) -> Distribution {
        Distribution {
            moments,
            exact_limit: values.len() as u64,
            exact: Some(values),
            digits: digits.clamp(1, 5),
            pos: None,
            neg: None,
        }
    }

    /// Add every value of `other` (repetitions pooled): stays exact while the
    /// total fits `self`'s exact limit, else both become HDR histograms.
    pub fn merge(&mut self, other: &Distribution) {
        let total = self.count().saturating_add(other.count());
        self.moments.merge(&other.moments);
        if let (Some(a), Some(b)) = (&mut self.exact, &other.exact) {
            if total <= self.exact_limit {
                a.extend_from_slice(b);
                return;
            }
        }
        for x in self.exact.take().unwrap_or_default() {
            self.hdr_record(x);
        }
        for &x in other.exact.as_deref().unwrap_or_default() {
            self.hdr_record(x);
        }
        let digits = self.digits;
        for (mine, theirs) in [(&mut self.pos, &other.pos), (&mut self.neg, &other.neg)] {
            if let Some(h) = theirs {
                // Auto-resizing: adding any histogram succeeds.
                let _ = mine.get_or_insert_with(|| new_histogram(digits)).add(h);
            }
        }
    }

    /// Reserve room for `n` more values in exact mode (no effect when they
    /// would exceed the exact limit).
    pub fn reserve(&mut self, n: u64) {
        if let Some(v) = &mut self.exact {
            if self.moments.count.saturating_add(n) <= self.exact_limit {
                v.reserve(n as usize);
            }
        }
    }

    /// Add one value.
    #[inline]
    pub fn record(&mut self, v: i64) {
        self.moments.record(v);
        match &mut self.exact {
            Some(vals) if self.moments.count <= self.exact_limit => vals.push(v),
            Some(_) => {
                let vals = self.exact.take().unwrap_or_default();
                for x in vals {
                    self.hdr_record(x);
                }
                self.hdr_record(v);
            }
            None => self.hdr_record(v),
        }
    }

    fn hdr_record(&mut self, v: i64) {
        let digits = self.digits;
        let make = || new_histogram(digits);
        let h = if v >= 0 {
            self.pos.get_or_insert_with(make)
        } else {
            self.neg.get_or_insert_with(make)
        };
        // Auto-resizing histogram: recording any u64 succeeds.
        let _ = h.record(v.unsigned_abs());
    }

    /// Number of values.
    pub fn count(&self) -> u64 {
        self.moments.count
    }

    /// Smallest value.
    pub fn min(&self) -> Option<i64> {
        self.moments.min()
    }

    /// Largest value.
    pub fn max(&self) -> Option<i64> {
        self.moments.max()
    }

    /// Arithmetic mean.
    pub fn mean(&self) -> Option<f64> {
        self.moments.mean()
    }

    /// Population standard deviation (divides by N).
    pub fn stdev(&self) -> Option<f64> {
        self.moments.stdev()
    }

    /// Mean squared difference of the values from `target` (a generator's
    /// gaps from the configured gap): `stdev² + (mean − target)²`.
    pub fn mse_about(&self, target: f64) -> Option<f64> {
        Some(self.stdev()?.powi(2) + (self.mean()? - target).powi(2))
    }

    /// Sum of all values as a float.
    pub fn sum(&self) -> f64 {
        self.mean().map_or(0.0, |m| m * self.moments.count as f64)
    }

    /// How percentiles are computed now.
    pub fn method(&self) -> Method {
        if self.exact.is_some() {
            Method::Exact
        } else {
            Method::Hdr
        }
    }

    /// HDR significant digits.
    pub fn digits(&self) -> u8 {
        self.digits
    }

    /// Largest relative error of an HDR percentile: the HDR bucket width over
    /// its value, `2^-floor(log2(10^digits))`... bounded above by `10^-digits`.
    pub fn relative_error_bound(&self) -> f64 {
        10f64.powi(-i32::from(self.digits))
    }

    /// Evaluate percentiles; `None` entries for an empty distribution.
    /// Exact mode reorders the stored values (selection), which is fine: the
    /// order of values is not used elsewhere.
    pub fn quantiles(&mut self, pcts: &[Pct]) -> Vec<Option<Quantile>> {
        if self.moments.count == 0 {
            return vec![None; pcts.len()];
        }
        let n = self.moments.count;
        let ranks: Vec<u64> = pcts.iter().map(|p| p.rank(n)).collect();
        let values = self.values_at_ranks(&ranks);
        values.into_iter().map(Some).collect()
    }

    /// The values at 1-based ranks (any order, duplicates allowed).
    pub fn values_at_ranks(&mut self, ranks: &[u64]) -> Vec<Quantile> {
        let (min, max) = (self.moments.min, self.moments.max);
        if let Some(vals) = &mut self.exact {
            let mut idx: Vec<usize> = ranks
                .iter()
                .map(|&r| (r.clamp(1, vals.len() as u64) - 1) as usize)
                .collect();
            idx.sort_unstable();
            idx.dedup();
            select_many(vals, &idx, 0);
            return ranks
                .iter()
                .map(|&r| {
                    let v = vals[(r.clamp(1, vals.len() as u64) - 1) as usize];
                    Quantile { value: v, lower: v }
                })
                .collect();
        }
        let neg_count = self.neg.as_ref().map_or(0, |h| h.len());
        ranks
            .iter()
            .map(|&r| {
                let r = r.clamp(1, self.moments.count);
                let q = if r <= neg_count {
                    // Ascending values = descending magnitudes: the r-th
                    // smallest value is the (neg_count - r + 1)-th smallest magnitude.
                    let h = self.neg.as_ref().unwrap_or_else(|| unreachable!());
                    let (hi, lo) = hdr_at_rank(h, neg_count - r + 1);
                    Quantile {
                        value: -(lo as i64),
                        lower: -(hi.min(i64::MAX as u64) as i64),
                    }
                } else {
                    let h = self.pos.as_ref().unwrap_or_else(|| unreachable!());
                    let (hi, lo) = hdr_at_rank(h, r - neg_count);
                    Quantile {
                        value: hi.min(i64::MAX as u64) as i64,
                        lower: lo.min(i64::MAX as u64) as i64,
                    }
                };
                Quantile {
                    value: q.value.clamp(min, max),
                    lower: q.lower.clamp(min, max),
                }
            })
            .collect()
    }

    /// Sorted values (exact mode only); sorts in place on first use.
    pub fn sorted_values(&mut self) -> Option<&[i64]> {
        let v = self.exact.as_mut()?;
        if !v.is_sorted() {
            v.sort_unstable();
        }
        Some(v)
    }

    /// `(value, count)` pairs in ascending value order: distinct values in
    /// exact mode, HDR buckets (upper end of each bucket) otherwise.
    pub fn value_counts(&mut self) -> Vec<(i64, u64)> {
        if let Some(v) = self.sorted_values() {
            let mut out: Vec<(i64, u64)> = Vec::new();
            for &x in v {
                match out.last_mut() {
                    Some((last, c)) if *last == x => *c += 1,
                    _ => out.push((x, 1)),
                }
            }
            return out;
        }
        let mut out = Vec::new();
        if let Some(h) = &self.neg {
            let mut buckets: Vec<(i64, u64)> = h
                .iter_recorded()
                .map(|it| {
                    (
                        -(h.lowest_equivalent(it.value_iterated_to()) as i64),
                        it.count_at_value(),
                    )
                })
                .collect();
            buckets.reverse();
            out.extend(buckets);
        }
        if let Some(h) = &self.pos {
            out.extend(h.iter_recorded().map(|it| {
                (
                    it.value_iterated_to().min(i64::MAX as u64) as i64,
                    it.count_at_value(),
                )
            }));
        }
        out
    }

    /// The histogram of values >= 0 (for interval logs), built from the exact
    /// values when in exact mode. Negative values are counted as 0.
    pub fn to_hdr(&self) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new(self.digits).unwrap_or_else(|_| unreachable!());
        if let Some(vals) = &self.exact {
            for &v in vals {
                let _ = h.record(v.max(0) as u64);
            }
        }
        if let Some(p) = &self.pos {
            let _ = h.add(p);
        }
        if let Some(n) = &self.neg {
            let _ = h.record_n(0, n.len());
        }
        h
    }
}

/// hdrhistogram's bucket index of an integer `v` in [0, 2^53) held exactly
/// as an f64 `l`, without a leading-zero count (no vector instruction in
/// x86-64's baseline): with `m` = log2(sub-buckets) and `h = m − 1`, a value
/// below 2^h is its own index; above, with exponent `e`, the bucket is
/// `b = e − h` and `v >> b` is the leading 1 and the top h mantissa bits, so
/// the index `(b << h) + (v >> b)` is `(bits(l) >> (53 − m)) − ((1021 + m) << h)`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct F64Index {
    shift: u32,
    sub: u64,
    below: f64,
}

impl F64Index {
    /// The index of `v` (`l == v as f64`, `0 <= v < 2^53`); garbage otherwise.
    #[inline(always)]
    pub(crate) fn of(&self, l: f64, v: i64) -> u64 {
        let high = (l.to_bits() >> self.shift).wrapping_sub(self.sub);
        if l < self.below {
            v as u64
        } else {
            high
        }
    }

    /// [`of`](Self::of) for `0 <= a < 2^31` (`f == a as f64`) in 32-bit
    /// lanes, which vectorises next to other 32-bit work.
    #[inline(always)]
    pub(crate) fn of_i31(&self, f: f64, a: i32) -> u32 {
        let high = ((f.to_bits() >> self.shift) as u32).wrapping_sub(self.sub as u32);
        if (a as u32) < self.below as u32 {
            a as u32
        } else {
            high
        }
    }
}

/// Counts per HDR bucket in a flat array, folded into a
/// [`Histogram`] at the end: equal, field for field, to recording every
/// value into `Histogram::new(digits)` (the bucket index is hdrhistogram's
/// own for a lowest discernible value of 1), at a fraction of the cost —
/// `Histogram::record` checks the range, resizes and updates min, max and
/// the total per value.
#[derive(Debug, Clone)]
pub(crate) struct HdrCounts {
    digits: u8,
    /// log2 of half the sub-buckets per bucket.
    half_mag: u32,
    /// 64 − log2(sub-buckets): hdrhistogram's `leading_zero_count_base`.
    lz_base: u32,
    /// Values below it all lie in bucket 0.
    sub_mask: u64,
    counts: Vec<u64>,
    total: u64,
    max: u64,
    /// Smallest non-zero value (`u64::MAX`: none).
    min_nz: u64,
}

impl HdrCounts {
    /// Empty counts for `digits` (clamped to 1..=5) significant digits.
    pub(crate) fn new(digits: u8) -> HdrCounts {
        let digits = digits.clamp(1, 5);
        // hdrhistogram: sub-buckets = 2^ceil(log2(2·10^digits)).
        let sub = (2u64 * 10u64.pow(u32::from(digits))).next_power_of_two();
        let mag = sub.trailing_zeros();
        HdrCounts {
            digits,
            half_mag: mag - 1,
            lz_base: 64 - mag,
            sub_mask: sub - 1,
            counts: Vec::new(),
            total: 0,
            max: 0,
            min_nz: u64::MAX,
        }
    }

    /// hdrhistogram's `index_for`: bucket b = how many halvings bring `v`
    /// below the sub-bucket count, then `(b + 1)·half + (v >> b) − half`.
    #[inline]
    pub(crate) fn index(&self, v: u64) -> usize {
        let b = self.lz_base - (v | self.sub_mask).leading_zeros();
        (((b as u64) << self.half_mag) + (v >> b)) as usize
    }

    /// The lowest value of the bucket at `index` (hdrhistogram's `value_for`).
    fn value_at(&self, index: usize) -> u64 {
        let half = 1usize << self.half_mag;
        let b = (index >> self.half_mag).saturating_sub(1);
        let sub = if index < half {
            index
        } else {
            (index & (half - 1)) + half
        };
        (sub as u64) << b
    }

    /// How to find bucket indices from f64 latencies: see [`F64Index`].
    pub(crate) fn f64_index(&self) -> F64Index {
        let m = self.half_mag + 1;
        F64Index {
            shift: 53 - m,
            sub: (1021 + u64::from(m)) << self.half_mag,
            below: (1u64 << self.half_mag) as f64,
        }
    }

    /// Count the values `vals` (all in `lo..=hi`, `lo >= 0`) whose bucket
    /// indices are `idx` (from [`F64Index`]).
    pub(crate) fn record_indexed(&mut self, idx: &[u32], vals: &[i64], lo: i64, hi: i64) {
        if vals.is_empty() {
            return;
        }
        debug_assert!(lo >= 0 && lo <= hi && idx.len() == vals.len());
        self.grow(hi as u64);
        let counts = &mut self.counts[..];
        for &i in idx {
            counts[i as usize] += 1;
        }
        self.note(vals, lo as u64, hi as u64);
    }

    fn grow(&mut self, max: u64) {
        let need = self.index(max) + 1;
        if self.counts.len() < need {
            self.counts.resize(need, 0);
        }
    }

    /// Count one value.
    pub(crate) fn record(&mut self, v: u64) {
        self.grow(v);
        let i = self.index(v);
        self.counts[i] += 1;
        self.total += 1;
        self.max = self.max.max(v);
        if v != 0 {
            self.min_nz = self.min_nz.min(v);
        }
    }

    /// Count every value of `vals`, all in `lo..=hi` with `lo >= 0`.
    pub(crate) fn record_nonneg(&mut self, vals: &[i64], lo: i64, hi: i64) {
        if vals.is_empty() {
            return;
        }
        debug_assert!(lo >= 0 && lo <= hi);
        let (lo, hi) = (lo as u64, hi as u64);
        self.grow(hi);
        let counts = &mut self.counts[..];
        let (lz_base, mask, half_mag) = (self.lz_base, self.sub_mask, self.half_mag);
        for &v in vals {
            let v = v as u64;
            let b = lz_base - (v | mask).leading_zeros();
            counts[(((b as u64) << half_mag) + (v >> b)) as usize] += 1;
        }
        self.note(vals, lo, hi);
    }

    /// Total, max and smallest non-zero after counting `vals` (in `lo..=hi`).
    fn note(&mut self, vals: &[i64], lo: u64, hi: u64) {
        self.total += vals.len() as u64;
        self.max = self.max.max(hi);
        if lo != 0 {
            self.min_nz = self.min_nz.min(lo);
        } else if let Some(m) = vals.iter().filter(|&&v| v != 0).min() {
            self.min_nz = self.min_nz.min(*m as u64);
        }
    }

    /// Add `total` values counted elsewhere per bucket (`counts`, in this
    /// layout), the largest being `max` and the smallest non-zero `min_nz`
    /// (`u64::MAX`: none).
    pub(crate) fn add_counts(
        &mut self,
        counts: impl Iterator<Item = u64>,
        total: u64,
        max: u64,
        min_nz: u64,
    ) {
        self.grow(max);
        for (mine, c) in self.counts.iter_mut().zip(counts) {
            *mine += c;
        }
        self.total += total;
        self.max = self.max.max(max);
        self.min_nz = self.min_nz.min(min_nz);
    }

    /// Number of values counted.
    pub(crate) fn len(&self) -> u64 {
        self.total
    }

    /// The histogram that recording every counted value would have built.
    /// Each bucket is recorded once, with a value inside it; the buckets of
    /// the smallest non-zero and the largest value with those very values,
    /// so the histogram's own min/max tracking (and auto-resize, which
    /// depends only on the largest value) ends in the same state.
    pub(crate) fn to_histogram(&self) -> Histogram<u64> {
        let mut h =
            Histogram::<u64>::new(self.digits).unwrap_or_else(|_| unreachable!("digits in 1..=5"));
        if self.total == 0 {
            return h;
        }
        let (i_min, i_max) = (
            (self.min_nz != u64::MAX).then(|| self.index(self.min_nz)),
            self.index(self.max),
        );
        for (i, &c) in self.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            // Auto-resizing: recording any u64 succeeds.
            let _ = if Some(i) == i_min && i == i_max && self.min_nz != self.max {
                h.record_n(self.min_nz, 1)
                    .and_then(|()| h.record_n(self.max, c - 1))
            } else if Some(i) == i_min {
                h.record_n(self.min_nz, c)
            } else if i == i_max {
                h.record_n(self.max, c)
            } else {
                h.record_n(self.value_at(i), c)
            };
        }
        h
    }
}

/// `(upper, lower)` end of the HDR bucket holding the value at 1-based `rank`.
fn hdr_at_rank(h: &Histogram<u64>, rank: u64) -> (u64, u64) {
    let mut cum = 0u64;
    let mut last = 0u64;
    for it in h.iter_recorded() {
        cum += it.count_at_value();
        last = it.value_iterated_to();
        if cum >= rank {
            return (last, h.lowest_equivalent(last));
        }
    }
    (last, h.lowest_equivalent(last))
}

/// Place the values of sorted, distinct 0-based indices `idx` (relative to
/// the whole slice, `offset` = index of `v[0]`) at their sorted positions.
fn select_many(v: &mut [i64], idx: &[usize], offset: usize) {
    if idx.is_empty() || v.is_empty() {
        return;
    }
    if v.len() <= 64 {
        v.sort_unstable();
        return;
    }
    let mid = idx.len() / 2;
    let k = idx[mid] - offset;
    let (left, _, right) = v.select_nth_unstable(k);
    select_many(left, &idx[..mid], offset);
    select_many(right, &idx[mid + 1..], offset + k + 1);
}

/// The percentile ladder of an HDR "percentile distribution": 0, then
/// `ticks` steps per halving of the distance to 100 %, down to 1/n.
pub fn percentile_ladder(n: u64, ticks_per_half: u32) -> Vec<f64> {
    let mut out = vec![0.0];
    if n == 0 {
        return out;
    }
    let mut half = 50.0f64;
    let mut base = 0.0f64;
    let floor = 100.0 / n as f64;
    while 100.0 - base > floor && out.len() < 10_000 {
        for k in 1..=ticks_per_half {
            out.push(base + half * f64::from(k) / f64::from(ticks_per_half));
        }
        base += half;
        half /= 2.0;
    }
    out.push(100.0);
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::test_runner::TestCaseError;

    #[test]
    fn a_tail_summary_of_a_known_sample() {
        let v: Vec<i64> = (1..=1000).rev().collect();
        let t = Tail::of(&v);
        assert_eq!(
            (t.count, t.p50, t.p99, t.p99_9, t.max),
            (1000, Some(500), Some(990), Some(999), Some(1000))
        );
        assert_eq!(Tail::of(&[]).p50, None);
    }

    #[test]
    fn pct_parse_and_label() {
        for (s, num, den, label) in [
            ("50", 1, 2, "p50"),
            ("p99.9", 999, 1000, "p99.9"),
            ("99.999", 99_999, 100_000, "p99.999"),
            ("100", 1, 1, "p100"),
            ("0.1", 1, 1000, "p0.1"),
        ] {
            let p = Pct::parse(s).expect(s);
            assert_eq!((p.num, p.den), (num, den), "{s}");
            assert_eq!(p.label(), label);
        }
        for s in ["0", "-1", "100.1", "abc", "", "1e3", "p", "1.2.3"] {
            assert!(Pct::parse(s).is_none(), "{s}");
        }
    }

    #[test]
    fn pmf_quantile_is_nearest_rank() {
        // P = (0.2, 0.3, 0.5): F = 0.2, 0.5, 1.
        let pmf = [2.0, 3.0, 5.0];
        assert_eq!(pmf_quantile(&pmf, 0.2), Some(0));
        assert_eq!(pmf_quantile(&pmf, 0.5), Some(1));
        assert_eq!(pmf_quantile(&pmf, 0.51), Some(2));
        assert_eq!(pmf_quantile(&[], 0.5), None);
        // The same as nearest rank over a sample drawn in those proportions.
        let mut d = Distribution::new(u64::MAX, 3);
        for (k, &c) in pmf.iter().enumerate() {
            (0..c as usize).for_each(|_| d.record(k as i64));
        }
        for p in ["10", "20", "50", "51", "90", "100"] {
            let pct = Pct::parse(p).unwrap();
            let want = d.quantiles(&[pct])[0].unwrap().value;
            let got = pmf_quantile(&pmf, pct.as_f64() / 100.0).unwrap() as i64;
            assert_eq!(got, want, "p{p}");
        }
    }

    #[test]
    fn select_many_matches_sort() {
        let mut v: Vec<i64> = (0..1000).map(|i| (i * 7919) % 1000 - 300).collect();
        let mut d = Distribution::new(u64::MAX, 3);
        for &x in &v {
            d.record(x);
        }
        v.sort();
        let ranks = [1, 2, 500, 501, 999, 1000, 17, 17];
        let got = d.values_at_ranks(&ranks);
        for (r, q) in ranks.iter().zip(got) {
            assert_eq!(q.value, v[*r as usize - 1]);
        }
    }

    use proptest::strategy::Strategy;

    /// Values for the histogram tests: clustered, spread, and huge.
    fn hdr_values(max_bits: u32) -> impl Strategy<Value = Vec<u64>> {
        let max = if max_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << max_bits) - 1
        };
        proptest::collection::vec(
            proptest::prop_oneof![
                0u64..4,
                0u64..5_000,
                15_000u64..2_000_000,
                0u64..=max,
                (0u32..max_bits).prop_map(|b| 1u64 << b),
                (1u32..max_bits).prop_map(|b| (1u64 << b) - 1),
            ],
            0..300,
        )
    }

    /// Counting into [`HdrCounts`] and folding gives the very histogram
    /// (every field, by `Debug`) that `Histogram::record` builds. Values go
    /// in blocks of `chunk`: by `record_nonneg` when they fit i64, else one
    /// by one.
    fn check_hdr_counts(vals: &[u64], digits: u8, chunk: usize) -> Result<(), TestCaseError> {
        let mut plain = Histogram::<u64>::new(digits).unwrap_or_else(|e| panic!("{e}"));
        for &v in vals {
            plain.record(v).unwrap_or_else(|e| panic!("{e}"));
        }
        let mut flat = HdrCounts::new(digits);
        for c in vals.chunks(chunk) {
            match c
                .iter()
                .map(|&v| i64::try_from(v))
                .collect::<Result<Vec<i64>, _>>()
            {
                Ok(block) => {
                    let lo = block.iter().copied().min().unwrap_or(0);
                    let hi = block.iter().copied().max().unwrap_or(0);
                    flat.record_nonneg(&block, lo, hi);
                }
                Err(_) => c.iter().for_each(|&v| flat.record(v)),
            }
        }
        let folded = flat.to_histogram();
        proptest::prop_assert_eq!(flat.len(), plain.len());
        proptest::prop_assert_eq!(format!("{folded:?}"), format!("{plain:?}"));
        Ok(())
    }

    proptest::proptest! {
        #[test]
        fn hdr_counts_equal_plain_record(vals in hdr_values(64), digits in 1u8..=3, chunk in 1usize..40) {
            check_hdr_counts(&vals, digits, chunk)?;
        }

        /// 4 and 5 digits: smaller values (a histogram of 5 digits up to
        /// 2^64 has 6 M counters).
        #[test]
        fn hdr_counts_equal_plain_record_fine(vals in hdr_values(36), digits in 4u8..=5, chunk in 1usize..40) {
            check_hdr_counts(&vals, digits, chunk)?;
        }

        /// The f64 route to a bucket index is hdrhistogram's.
        #[test]
        fn f64_index_equals_index(
            v in proptest::prop_oneof![0u64..5_000, 0u64..1 << 53, (0u32..53).prop_map(|b| 1u64 << b)],
            digits in 1u8..=5,
        ) {
            let c = HdrCounts::new(digits);
            proptest::prop_assert_eq!(c.f64_index().of(v as f64, v as i64), c.index(v) as u64);
        }

        /// Block moments (any offset, spreads up to just under 2^32 and
        /// beyond) are the very accumulator recording builds.
        #[test]
        fn block_moments_equal_recording(
            base in proptest::prop_oneof![
                proptest::num::i64::ANY,
                -1_000_000i64..1_000_000,
            ],
            offs in proptest::collection::vec(
                proptest::prop_oneof![0i64..1 << 32, 0i64..1_000, (1i64 << 32) - 3..1 << 33],
                1..200,
            ),
        ) {
            let vals: Vec<i64> = offs.iter().map(|&o| base.saturating_add(o)).collect();
            let mut one = Moments::new();
            vals.iter().for_each(|&v| one.record(v));
            proptest::prop_assert_eq!(
                format!("{:?}", Moments::of_block(&vals)),
                format!("{one:?}")
            );
        }
    }

    proptest::proptest! {
        /// Merging the moments of two parts equals recording the whole, and
        /// both match a direct f64 computation.
        #[test]
        fn moments_merge_equals_whole(
            v in proptest::collection::vec(-5_000_000_000i64..5_000_000_000, 1..300)
                .prop_union(proptest::collection::vec(-1_000_000i64..1_000_000, 1..300)),
            cut in 0usize..300,
        ) {
            let cut = cut.min(v.len());
            let (mut whole, mut a, mut b) = (Moments::new(), Moments::new(), Moments::new());
            v.iter().for_each(|&x| whole.record(x));
            v[..cut].iter().for_each(|&x| a.record(x));
            v[cut..].iter().for_each(|&x| b.record(x));
            a.merge(&b);
            proptest::prop_assert_eq!(a.count(), whole.count());
            proptest::prop_assert_eq!(a.min(), whole.min());
            proptest::prop_assert_eq!(a.max(), whole.max());
            proptest::prop_assert_eq!(a.mean(), whole.mean());
            proptest::prop_assert_eq!(a.stdev(), whole.stdev());
            let block = Moments::of_block(&v);
            proptest::prop_assert_eq!(block.count(), whole.count());
            proptest::prop_assert_eq!((block.min(), block.max()), (whole.min(), whole.max()));
            proptest::prop_assert_eq!(block.mean(), whole.mean());
            proptest::prop_assert_eq!(block.stdev(), whole.stdev());
            let n = v.len() as f64;
            let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
            let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
            let m = a.mean().unwrap_or(f64::NAN);
            proptest::prop_assert!((m - mean).abs() <= 1e-6 * mean.abs().max(1.0));
            let sd = a.stdev().unwrap_or(f64::NAN);
            proptest::prop_assert!((sd - var.sqrt()).abs() <= 1e-6 * var.sqrt().max(1.0));
        }
    }
}
