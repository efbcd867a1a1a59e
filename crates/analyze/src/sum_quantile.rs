//! Quantiles of a sum of two independent delays, from a sample of each.
//!
//! A floor made of two sources — the path's own noise with no delay
//! configured (X) and the host's lateness when a thread holds something for
//! a set time (Y) — is the distribution of X + Y. With X uniform over the
//! sample `xs` and Y over `ys`, independent, X + Y takes each of the
//! `|xs|·|ys|` pairwise sums with equal weight. [`independent_sum_quantile`]
//! gives the nearest-rank quantile of those sums ([`Pct::rank`] over
//! `|xs|·|ys|` values) exactly, without forming them: a binary search on the
//! value, counting the sums at or below it with two pointers over the sorted
//! samples — O((n + m) · 64) time, O(n + m) memory.
//!
//! Independence is the assumption to state with the figure: it holds when
//! the two samples come from different periods of time, not when one event
//! (a host stall) shows up in both.

use crate::dist::Pct;

/// The nearest-rank `pct` quantile of `x + y` over all pairs of `xs` × `ys`;
/// `None` when either sample is empty.
pub fn independent_sum_quantile(xs: &[i64], ys: &[i64], pct: Pct) -> Option<i64> {
    if xs.is_empty() || ys.is_empty() {
        return None;
    }
    let (mut xs, mut ys) = (xs.to_vec(), ys.to_vec());
    xs.sort_unstable();
    ys.sort_unstable();
    let pairs = xs.len() as u64 * ys.len() as u64;
    let rank = pct.rank(pairs);
    // The answer is one of the sums, between the smallest and the largest.
    let (mut lo, mut hi) = (
        i128::from(xs[0]) + i128::from(ys[0]),
        i128::from(xs[xs.len() - 1]) + i128::from(ys[ys.len() - 1]),
    );
    while lo < hi {
        let mid = lo + (hi - lo).div_euclid(2);
        if sums_at_or_below(&xs, &ys, mid) >= rank {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    i64::try_from(lo).ok()
}

/// How many pairs of the sorted `xs`, `ys` sum to `v` or less.
fn sums_at_or_below(xs: &[i64], ys: &[i64], v: i128) -> u64 {
    // For ascending x the ys that fit (y ≤ v − x) shrink: one pointer walks down.
    let mut fit = ys.len();
    let mut count = 0u64;
    for &x in xs {
        while fit > 0 && i128::from(x) + i128::from(ys[fit - 1]) > v {
            fit -= 1;
        }
        if fit == 0 {
            break;
        }
        count += fit as u64;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn brute(xs: &[i64], ys: &[i64], pct: Pct) -> i64 {
        let mut all: Vec<i64> = xs
            .iter()
            .flat_map(|x| ys.iter().map(move |y| x + y))
            .collect();
        all.sort_unstable();
        all[(pct.rank(all.len() as u64) - 1) as usize]
    }

    #[test]
    fn a_hand_built_case() {
        // Sums of {0, 10} and {1, 2, 100}: 1 2 11 12 100 110.
        let (xs, ys) = ([10, 0], [100, 1, 2]);
        let q = |p: &str| independent_sum_quantile(&xs, &ys, Pct::parse(p).unwrap());
        assert_eq!(q("50"), Some(11)); // rank 3 of 6
        assert_eq!(q("66.7"), Some(100)); // rank ⌈4.002⌉ = 5
        assert_eq!(q("100"), Some(110));
        assert_eq!(q("1"), Some(1));
        assert_eq!(
            independent_sum_quantile(&[], &ys, Pct::parse("50").unwrap()),
            None
        );
    }

    #[test]
    fn a_constant_shifts_the_other_sample() {
        let xs: Vec<i64> = (1..=1000).collect();
        let p999 = Pct::parse("99.9").unwrap();
        assert_eq!(independent_sum_quantile(&xs, &[7], p999), Some(999 + 7));
        assert_eq!(independent_sum_quantile(&[7], &xs, p999), Some(999 + 7));
    }

    #[test]
    fn extreme_values_do_not_overflow() {
        let (xs, ys) = ([i64::MAX, 0], [i64::MIN, -1]);
        let q = independent_sum_quantile(&xs, &ys, Pct::parse("100").unwrap());
        assert_eq!(q, Some(i64::MAX - 1));
    }

    proptest! {
        #[test]
        fn equals_sorting_every_sum(
            xs in proptest::collection::vec(-1000i64..1000, 1..40),
            ys in proptest::collection::vec(-1000i64..100_000, 1..40),
            p in 1u64..=1000,
        ) {
            let pct = Pct { num: p, den: 1000 };
            prop_assert_eq!(independent_sum_quantile(&xs, &ys, pct), Some(brute(&xs, &ys, pct)));
        }
    }
}
