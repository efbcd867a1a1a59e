//! The curves a figure draws of a latency [`Distribution`]: the HDR
//! percentile plot, the empirical CDF reduced to a few hundred points, and
//! counts per bin. Every value is a nearest-rank value of the distribution
//! (exact, or the HDR bucket's upper end), so a curve and the summary's
//! percentiles can never disagree.

use crate::dist::Distribution;

/// Points `(1/(1−p), latency)` of an HDR percentile plot, `per_decade`
/// points per decade of `1/(1−p)`: percentiles from 0 up to the highest the
/// sample resolves, then the maximum, plotted at `1/(1−p) = n`.
pub fn percentile_curve(d: &mut Distribution, per_decade: u32) -> Vec<(f64, i64)> {
    let n = d.count();
    if n == 0 {
        return Vec::new();
    }
    let mut invs = Vec::new();
    let mut ranks = Vec::new();
    for i in 0.. {
        let inv = 10f64.powf(f64::from(i) / f64::from(per_decade.max(1)));
        if inv >= n as f64 {
            break;
        }
        let q = 1.0 - 1.0 / inv;
        invs.push(inv);
        ranks.push(((q * n as f64).ceil() as u64).clamp(1, n));
    }
    invs.push(n as f64);
    ranks.push(n);
    invs.into_iter()
        .zip(d.values_at_ranks(&ranks))
        .map(|(inv, q)| (inv, q.value))
        .collect()
}

/// Empirical CDF points `(latency, P(L ≤ latency))`, at most about
/// `max_points`, spread evenly in rank and dense in the tail (ranks
/// `n − m·10^k`), so both the body and the tail keep their shape. The last
/// point is always the maximum.
pub fn cdf_points(d: &mut Distribution, max_points: usize) -> Vec<(i64, f64)> {
    let n = d.count();
    if n == 0 {
        return Vec::new();
    }
    let step = (n / (max_points as u64 / 2).max(1)).max(1);
    let mut ranks: Vec<u64> = (1..=n).step_by(step as usize).collect();
    let mut t = 1u64;
    while t < n {
        for m in [1, 2, 5] {
            if t * m < n {
                ranks.push(n - t * m + 1);
            }
        }
        t = t.saturating_mul(10);
    }
    ranks.push(n);
    ranks.sort_unstable();
    ranks.dedup();
    let vals = d.values_at_ranks(&ranks);
    ranks
        .into_iter()
        .zip(vals)
        .map(|(r, q)| (q.value, r as f64 / n as f64))
        .collect()
}

/// Log-spaced bin edges covering `[lo, hi]` with `per_decade` bins per
/// decade, starting at the decade below `lo` (values below 1 count as 1).
pub fn log_edges(lo: f64, hi: f64, per_decade: usize) -> Vec<f64> {
    let lo = lo.max(1.0);
    let hi = hi.max(lo * 1.0001);
    let d0 = lo.log10().floor();
    let mut e = Vec::new();
    for k in 0.. {
        let v = 10f64.powf(d0 + f64::from(k) / per_decade.max(1) as f64);
        e.push(v);
        if v > hi {
            break;
        }
    }
    e
}

/// `bins` equal bins covering `[lo, hi]`: `bins + 1` edges from `lo` to
/// `hi` (one bin of width 1 around `lo` when the range is empty).
pub fn linear_edges(lo: f64, hi: f64, bins: usize) -> Vec<f64> {
    let bins = bins.max(1);
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo - 0.5, lo + 0.5)
    };
    let w = (hi - lo) / bins as f64;
    (0..=bins)
        .map(|i| if i == bins { hi } else { lo + w * i as f64 })
        .collect()
}

/// Values per bin `[edges[i], edges[i+1])`; values below the first edge
/// count in the first bin and values beyond the last in the last.
pub fn bin_counts(d: &mut Distribution, edges: &[f64]) -> Vec<u64> {
    let mut c = vec![0u64; edges.len().saturating_sub(1)];
    if c.is_empty() {
        return c;
    }
    let mut b = 0;
    for (v, k) in d.value_counts() {
        let v = v as f64;
        while b + 1 < c.len() && v >= edges[b + 1] {
            b += 1;
        }
        c[b] += k;
    }
    c
}

/// Counts at values `(x, count)` re-binned into `per_decade` log-spaced bins
/// per decade: `(lo, hi, count)` of the non-empty bins, ascending. Bin `k`
/// holds `[10^(k/per_decade), 10^((k+1)/per_decade))`; values below 1 go to
/// the first bin. The generator self-check figure's histogram.
pub fn log_bins(raw: &[(f64, u64)], per_decade: u32) -> Vec<(f64, f64, u64)> {
    let per = f64::from(per_decade.max(1));
    let mut bins: std::collections::BTreeMap<i64, u64> = Default::default();
    for (x, c) in raw {
        let k = (x.max(1.0).log10() * per).floor() as i64;
        *bins.entry(k).or_default() += c;
    }
    bins.into_iter()
        .filter(|(_, c)| *c > 0)
        .map(|(k, c)| {
            (
                10f64.powf(k as f64 / per),
                10f64.powf((k + 1) as f64 / per),
                c,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(vals: impl IntoIterator<Item = i64>, exact_limit: u64) -> Distribution {
        let mut d = Distribution::new(exact_limit, 3);
        vals.into_iter().for_each(|v| d.record(v));
        d
    }

    #[test]
    fn linear_edges_cover_the_range_and_bin_counts_put_the_max_in_the_last_bin() {
        let e = linear_edges(0.0, 10.0, 5);
        assert_eq!(e, vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        // 0..=10: bins [0,2) [2,4) [4,6) [6,8) [8,10] hold 2, 2, 2, 2, 3.
        let mut d = dist(0..=10, u64::MAX);
        assert_eq!(bin_counts(&mut d, &e), vec![2, 2, 2, 2, 3]);
        assert_eq!(linear_edges(3.0, 3.0, 4).first(), Some(&2.5));
        assert_eq!(linear_edges(3.0, 3.0, 4).last(), Some(&3.5));
    }

    #[test]
    fn percentile_curve_is_nearest_rank_and_ends_at_the_max() {
        // 1..=1000: the value at rank r is r.
        let mut d = dist((1..=1000).rev(), u64::MAX);
        let pts = percentile_curve(&mut d, 40);
        for &(inv, v) in &pts[..pts.len() - 1] {
            let q = 1.0 - 1.0 / inv;
            assert_eq!(
                v,
                ((q * 1000.0).ceil() as i64).clamp(1, 1000),
                "at 1/(1-p)={inv}"
            );
        }
        assert_eq!(*pts.last().unwrap(), (1000.0, 1000));
        // 40 per decade up to 1000 = 3 decades, plus the max.
        assert_eq!(pts.len(), 121);
    }

    #[test]
    fn cdf_points_are_ranks_over_n_and_dense_in_the_tail() {
        let mut d = dist(1..=10_000, u64::MAX);
        let pts = cdf_points(&mut d, 100);
        for &(v, p) in &pts {
            assert_eq!(p, v as f64 / 10_000.0);
        }
        assert_eq!(*pts.last().unwrap(), (10_000, 1.0));
        // Ranks n − m·10^k + 1: 10^k values lie at or above each.
        for r in [9_999, 9_991, 9_901, 9_001] {
            assert!(pts.iter().any(|&(v, _)| v == r), "tail rank {r} drawn");
        }
        assert!(pts.len() <= 100 + 14);
    }

    #[test]
    fn bins_count_every_value_once() {
        let mut d = dist([1, 5, 9, 10, 11, 99, 100, 1000], u64::MAX);
        let edges = log_edges(1.0, 1000.0, 1);
        assert_eq!(edges, vec![1.0, 10.0, 100.0, 1000.0, 10000.0]);
        assert_eq!(bin_counts(&mut d, &edges), vec![3, 3, 1, 1]);
        // HDR buckets land in the bin of their upper end.
        let mut h = dist([1, 5, 9, 10, 11, 99, 100, 1000], 0);
        assert_eq!(bin_counts(&mut h, &edges).iter().sum::<u64>(), 8);
    }

    #[test]
    fn log_bins_sum_counts_per_tenth_of_a_decade() {
        // 99.5 and 100.5: bins [10^1.9, 10^2) and [10^2, 10^2.1); 0.5 counts as 1.
        let b = log_bins(
            &[(99.5, 10), (100.5, 80), (101.5, 10), (0.5, 3), (7.0, 0)],
            10,
        );
        assert_eq!(b.len(), 3);
        assert_eq!((b[0].0, b[0].2), (1.0, 3));
        assert_eq!((b[1].1, b[1].2), (100.0, 10));
        assert_eq!((b[2].0, b[2].2), (100.0, 90));
        assert!((b[1].0 - 10f64.powf(1.9)).abs() < 1e-9);
    }
}
