//! A distribution-free confidence interval of a quantile: the order
//! statistics whose ranks bound it, from the binomial count of values below
//! the quantile (normal approximation), as for the median ± 95 % CI of seed
//! 000's Table 6.3.

use crate::crossrun::t_quantile;

/// 1-based ranks `(lo, hi)` into the sorted `n` values such that
/// `[x_(lo), x_(hi)]` holds the `p`-quantile with probability about `level`:
/// `lo = ⌊np − z·√(np(1−p))⌋`, `hi = ⌈np + z·√(np(1−p))⌉ + 1`, clamped to
/// 1..=n, z the standard normal quantile of (1 + level)/2. `None` for no
/// values or p, level outside (0, 1).
pub fn quantile_ci_ranks(n: u64, p: f64, level: f64) -> Option<(u64, u64)> {
    if n == 0 || !(p > 0.0 && p < 1.0) || !(level > 0.0 && level < 1.0) {
        return None;
    }
    // Student's t with very many degrees of freedom is the standard normal.
    let z = t_quantile((1.0 + level) / 2.0, 1e7);
    let (nf, half) = (n as f64, z * (n as f64 * p * (1.0 - p)).sqrt());
    let lo = (nf * p - half).floor().max(1.0) as u64;
    let hi = ((nf * p + half).ceil() + 1.0).min(nf) as u64;
    Some((lo.min(n), hi.max(lo.min(n))))
}

/// The interval `[x_(lo), x_(hi)]` of [`quantile_ci_ranks`] read off the
/// ascending `sorted` values; `None` as there.
pub fn quantile_ci_of_sorted(sorted: &[i64], p: f64, level: f64) -> Option<(i64, i64)> {
    let (lo, hi) = quantile_ci_ranks(sorted.len() as u64, p, level)?;
    Some((sorted[lo as usize - 1], sorted[hi as usize - 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_is_read_off_the_sorted_values_at_those_ranks() {
        let sorted: Vec<i64> = (1..=100).map(|v| v * 10).collect();
        assert_eq!(quantile_ci_of_sorted(&sorted, 0.5, 0.95), Some((400, 610)));
        assert_eq!(quantile_ci_of_sorted(&[], 0.5, 0.95), None);
    }

    #[test]
    fn ranks_match_the_textbook_and_cover_the_median() {
        // n = 100, median, 95 %: ranks 40 and 61 (Conover, Practical Nonparametric Statistics).
        assert_eq!(quantile_ci_ranks(100, 0.5, 0.95), Some((40, 61)));
        assert_eq!(quantile_ci_ranks(1, 0.5, 0.95), Some((1, 1)));
        assert_eq!(quantile_ci_ranks(0, 0.5, 0.95), None);
        // Coverage over many samples of U(0, 1), whose median is 0.5.
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let (n, trials) = (200usize, 2000);
        let (lo, hi) = quantile_ci_ranks(n as u64, 0.5, 0.95).unwrap();
        let mut covered = 0;
        for _ in 0..trials {
            let mut v: Vec<f64> = (0..n).map(|_| rng.gen()).collect();
            v.sort_by(|a, b| a.total_cmp(b));
            covered += (v[lo as usize - 1] <= 0.5 && 0.5 <= v[hi as usize - 1]) as u32;
        }
        let rate = covered as f64 / trials as f64;
        assert!((0.93..=0.98).contains(&rate), "coverage {rate}");
    }
}
