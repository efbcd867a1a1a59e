//! Two-sample bootstrap: the difference of two means with a percentile
//! confidence interval (the in-stack monitor's calibration offset against its
//! VNF's own times, seed 003 §2.3).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::Serialize;

/// mean(a) − mean(b) and its percentile-bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Difference {
    /// mean(a) − mean(b).
    pub diff: f64,
    /// Lower bound.
    pub lo: f64,
    /// Upper bound.
    pub hi: f64,
    /// Size of `a`.
    pub n_a: usize,
    /// Size of `b`.
    pub n_b: usize,
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Percentile-bootstrap interval at `level` of mean(a) − mean(b): each resample
/// draws both samples with replacement, independently (ChaCha20 seeded with
/// `seed`: deterministic). `None` when either sample is empty.
pub fn mean_difference_ci(
    a: &[f64],
    b: &[f64],
    level: f64,
    resamples: usize,
    seed: u64,
) -> Option<Difference> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut resample = |v: &[f64]| {
        (0..v.len())
            .map(|_| v[rng.gen_range(0..v.len())])
            .sum::<f64>()
            / v.len() as f64
    };
    let mut diffs: Vec<f64> = (0..resamples.max(1))
        .map(|_| resample(a) - resample(b))
        .collect();
    let [lo, hi] = percentile_interval(&mut diffs, level)?;
    Some(Difference {
        diff: mean(a) - mean(b),
        lo,
        hi,
        n_a: a.len(),
        n_b: b.len(),
    })
}

/// The percentile interval at `level` of bootstrap replicates `v` (sorted here):
/// the nearest-rank (1 − level)/2 and (1 + level)/2 quantiles. `None` when empty.
pub fn percentile_interval(v: &mut [f64], level: f64) -> Option<[f64; 2]> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    let alpha = (1.0 - level) / 2.0;
    Some([q(alpha), q(1.0 - alpha)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_covers_the_difference_with_the_normal_width() {
        // Known answer: a ~ U(0,1)+3 and b ~ U(0,1), n = 4000 each: the difference's
        // standard error is sqrt(2/12/4000) = 0.00645, a 95 % interval ±0.0127.
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let a: Vec<f64> = (0..4000).map(|_| 3.0 + rng.gen::<f64>()).collect();
        let b: Vec<f64> = (0..4000).map(|_| rng.gen::<f64>()).collect();
        let d = mean_difference_ci(&a, &b, 0.95, 2000, 7).unwrap();
        assert!((d.diff - 3.0).abs() < 0.03, "{d:?}");
        assert!(d.lo < d.diff && d.diff < d.hi);
        let half = (d.hi - d.lo) / 2.0;
        assert!((half / 0.0127 - 1.0).abs() < 0.15, "half width {half}");
        assert_eq!(mean_difference_ci(&a, &[], 0.95, 10, 1), None);
    }
}
