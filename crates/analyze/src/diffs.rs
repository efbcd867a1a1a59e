//! Differences of consecutive latencies (IPDV) of one block of the split
//! default pass ([`crate::fast`]), in one vectorised loop per step of
//! [`STEP`] differences when they all fit an `i32` (every block of a sane
//! trace): signed and magnitude sums, min/max, the smallest non-zero value
//! of each sign and each difference's HDR bucket (sign in the lowest bit),
//! instead of one pass over the block per statistic. The caller turns the
//! sums into [`Moments`] ([`Moments::from_sums`]), which are then equal
//! field for field to recording each difference.

use crate::dist::{F64Index, HdrCounts, Moments};

/// Differences per step: the step's buffers (4 B of bucket and 8 B of
/// magnitude per difference) stay in L1. A multiple of 4, so the RFC 3550
/// chain groups them as over the whole block.
pub(crate) const STEP: usize = 2048;

/// What one step of differences adds up to. Every value fits `i32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StepSums {
    pub count: u64,
    /// The step's first difference.
    pub first: i64,
    /// Σ|d| and Σ|d| over the negative d only.
    pub sum_abs: u64,
    pub sum_neg: u64,
    /// Σd² (the caller keeps steps short enough: see [`step_len`]).
    pub sum_sq: u64,
    pub min: i64,
    pub max: i64,
    /// Smallest |d|.
    pub min_abs: i64,
    /// Smallest d > 0 and smallest |d| of d < 0 (`i32::MAX`: none; every
    /// magnitude is below it).
    pub min_pos: i64,
    pub min_neg: i64,
}

/// How many differences of magnitude at most `bound` (< 2^31) one step may
/// take so that Σd² fits a u64: at most [`STEP`], at least 4, a multiple of 4.
pub(crate) fn step_len(bound: u64) -> usize {
    let sq = bound.saturating_mul(bound).max(1);
    ((u64::MAX / sq).min(STEP as u64) as usize / 4 * 4).max(4)
}

/// The differences `win[1] − win[0]`, `win[2] − win[1]`, … (each within
/// ±(2^31 − 1): the caller checks): their sums, and per difference its
/// magnitude as f64 in `mags[..count]` and `2·bucket + (d < 0)` in
/// `idx[..count]` (the buffers only grow: no zeroing per step). One loop of
/// 32-bit lane operations, which vectorises.
pub(crate) fn step(
    win: &[i64],
    hdr: F64Index,
    mags: &mut Vec<f64>,
    idx: &mut Vec<u32>,
) -> StepSums {
    let n = win.len().saturating_sub(1);
    if mags.len() < n {
        mags.resize(n, 0.0);
    }
    if idx.len() < n {
        idx.resize(n, 0);
    }
    let (prevs, curs) = (&win[..n], &win[win.len() - n..]);
    let (mags, idx) = (&mut mags[..n], &mut idx[..n]);
    let (mut sum_abs, mut sum_neg, mut sum_sq) = (0u64, 0u64, 0u64);
    let (mut lo, mut hi, mut lo_abs) = (i32::MAX, i32::MIN, i32::MAX);
    let (mut lo_pos, mut lo_neg) = (i32::MAX, i32::MAX);
    for i in 0..n {
        let d = curs[i].wrapping_sub(prevs[i]) as i32;
        let neg = d >> 31; // 0 or −1
        let pos = d.wrapping_neg() >> 31; // −1 when d > 0
        let a = (d ^ neg).wrapping_sub(neg); // |d| < 2^31
        sum_abs += u64::from(a as u32);
        sum_neg += u64::from((a & neg) as u32);
        sum_sq += u64::from(a as u32) * u64::from(a as u32);
        lo = lo.min(d);
        hi = hi.max(d);
        lo_abs = lo_abs.min(a);
        // a | i32::MAX is i32::MAX: the candidate is a only for its sign.
        lo_pos = lo_pos.min(a | (!pos & i32::MAX));
        lo_neg = lo_neg.min(a | (!neg & i32::MAX));
        let f = f64::from(a);
        mags[i] = f;
        idx[i] = (hdr.of_i31(f, a) << 1) | (neg as u32 & 1);
    }
    StepSums {
        count: n as u64,
        first: if n > 0 {
            win[1].wrapping_sub(win[0])
        } else {
            0
        },
        sum_abs,
        sum_neg,
        sum_sq,
        min: i64::from(lo),
        max: i64::from(hi),
        min_abs: i64::from(lo_abs),
        min_pos: i64::from(lo_pos),
        min_neg: i64::from(lo_neg),
    }
}

impl StepSums {
    /// The moments of the signed differences and of their magnitudes.
    pub(crate) fn moments(&self) -> (Moments, Moments) {
        let sum = i128::from(self.sum_abs) - 2 * i128::from(self.sum_neg);
        let sq = u128::from(self.sum_sq);
        let max_abs = self.max.max(-self.min);
        (
            Moments::from_sums(self.count, self.min, self.max, self.first, sum, sq),
            Moments::from_sums(
                self.count,
                self.min_abs,
                max_abs,
                self.first.abs(),
                i128::from(self.sum_abs),
                sq,
            ),
        )
    }
}

/// HDR counts of the differences by sign, interleaved (`2·bucket` for
/// d >= 0, `2·bucket + 1` for the magnitude of d < 0) so that counting
/// needs no branch on the sign; folded into two [`HdrCounts`] at the end.
#[derive(Debug, Clone)]
pub(crate) struct SignedCounts {
    counts: Vec<u64>,
    /// Per sign (0: d >= 0, 1: d < 0): values, largest, smallest non-zero.
    total: [u64; 2],
    max: [u64; 2],
    min_nz: [u64; 2],
}

impl SignedCounts {
    pub(crate) fn new() -> SignedCounts {
        SignedCounts {
            counts: Vec::new(),
            total: [0; 2],
            max: [0; 2],
            min_nz: [u64::MAX; 2],
        }
    }

    /// Count the differences of `s` whose interleaved buckets are `idx`;
    /// `like` gives the bucket layout.
    pub(crate) fn record(&mut self, like: &HdrCounts, s: &StepSums, idx: &[u32]) {
        let max_abs = s.max.max(-s.min) as u64;
        let need = 2 * like.index(max_abs) + 2;
        if self.counts.len() < need {
            self.counts.resize(need, 0);
        }
        let counts = &mut self.counts[..];
        for &i in idx {
            counts[i as usize] += 1;
        }
        let (n_neg, n) = (
            idx.iter().map(|&i| u64::from(i & 1)).sum::<u64>(),
            idx.len() as u64,
        );
        self.total[0] += n - n_neg;
        self.total[1] += n_neg;
        if s.max >= 0 {
            self.max[0] = self.max[0].max(s.max as u64);
        }
        if s.min < 0 {
            self.max[1] = self.max[1].max(s.min.unsigned_abs());
        }
        for (k, m) in [(0, s.min_pos), (1, s.min_neg)] {
            if m != i64::from(i32::MAX) {
                self.min_nz[k] = self.min_nz[k].min(m as u64);
            }
        }
    }

    /// Add the counts into `pos` (d >= 0) and `neg` (magnitudes of d < 0).
    pub(crate) fn fold_into(&self, pos: &mut HdrCounts, neg: &mut HdrCounts) {
        for (k, h) in [pos, neg].into_iter().enumerate() {
            if self.total[k] > 0 {
                let counts = self.counts.iter().skip(k).step_by(2).copied();
                h.add_counts(counts, self.total[k], self.max[k], self.min_nz[k]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A window of latencies whose consecutive differences all fit `i32`:
    /// small ones (ties, zeros, both signs) or up to ±(2^31 − 1).
    fn window() -> impl Strategy<Value = Vec<i64>> {
        let diffs = prop_oneof![
            proptest::collection::vec(-3i64..4, 0..60),
            proptest::collection::vec(-40_000i64..40_000, 0..300),
            proptest::collection::vec(-(1i64 << 31) + 1..1 << 31, 0..30),
        ];
        (-(1i64 << 40)..1 << 40, diffs).prop_map(|(start, diffs)| {
            std::iter::once(start)
                .chain(diffs.iter().scan(start, |v, d| {
                    *v += d;
                    Some(*v)
                }))
                .collect()
        })
    }

    proptest! {
        /// One step equals recording each difference: the moments of the
        /// signed values and of the magnitudes, the magnitudes, the buckets,
        /// and the histograms by sign (every field, by `Debug`).
        #[test]
        fn step_equals_recording_each_difference(win in window(), digits in 1u8..=3) {
            // As long as the caller makes a step of such differences.
            let bound = win.windows(2).map(|w| (w[1] - w[0]).unsigned_abs()).max().unwrap_or(0);
            let win = &win[..win.len().min(step_len(bound) + 1)];
            let like = HdrCounts::new(digits);
            let (mut mags, mut idx) = (Vec::new(), Vec::new());
            let sums = step(win, like.f64_index(), &mut mags, &mut idx);
            let d: Vec<i64> = win.windows(2).map(|w| w[1] - w[0]).collect();
            prop_assert_eq!(sums.count, d.len() as u64);
            let want_mags: Vec<f64> = d.iter().map(|x| x.abs() as f64).collect();
            prop_assert_eq!(&mags[..d.len()], &want_mags[..]);
            let want_idx: Vec<u32> = d
                .iter()
                .map(|&x| 2 * like.index(x.unsigned_abs()) as u32 + u32::from(x < 0))
                .collect();
            let idx = &idx[..d.len()];
            prop_assert_eq!(idx, &want_idx[..]);
            if d.is_empty() {
                return Ok(());
            }
            let (signed, abs) = sums.moments();
            let (mut want_signed, mut want_abs) = (Moments::new(), Moments::new());
            d.iter().for_each(|&x| want_signed.record(x));
            d.iter().for_each(|&x| want_abs.record(x.abs()));
            prop_assert_eq!(format!("{signed:?}"), format!("{want_signed:?}"));
            prop_assert_eq!(format!("{abs:?}"), format!("{want_abs:?}"));

            let mut counts = SignedCounts::new();
            counts.record(&like, &sums, idx);
            let (mut pos, mut neg) = (HdrCounts::new(digits), HdrCounts::new(digits));
            counts.fold_into(&mut pos, &mut neg);
            let (mut want_pos, mut want_neg) = (HdrCounts::new(digits), HdrCounts::new(digits));
            for &x in &d {
                match u64::try_from(x) {
                    Ok(v) => want_pos.record(v),
                    Err(_) => want_neg.record(x.unsigned_abs()),
                }
            }
            for (got, want) in [(&pos, &want_pos), (&neg, &want_neg)] {
                prop_assert_eq!(got.len(), want.len());
                prop_assert_eq!(
                    format!("{:?}", got.to_histogram()),
                    format!("{:?}", want.to_histogram())
                );
            }
        }

        /// A step of `step_len(bound)` differences of magnitude up to
        /// `bound` never overflows Σd², and is a multiple of 4.
        #[test]
        fn step_len_keeps_the_squares_in_a_u64(bound in 0u64..1 << 31) {
            let n = step_len(bound);
            prop_assert!((4..=STEP).contains(&n) && n.is_multiple_of(4));
            prop_assert!((n as u128) * u128::from(bound) * u128::from(bound) <= u128::from(u64::MAX));
        }
    }
}
