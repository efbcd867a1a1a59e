//! Error metrics of seed 003 (§2.4.5) for comparing a model with a
//! measurement: the relative error of two means and the Jensen–Shannon
//! divergence of two distributions over common bins. `nflab model fit`
//! reports both (`crates/model/src/fit.rs` calls them).

use crate::curves::{bin_counts, linear_edges};
use crate::dist::Distribution;

/// Relative error RE(P, Q) = |E[P] − E[Q]| / |E[P]|, with P the reference;
/// `None` unless both are finite and the reference is not zero.
pub fn relative_error(reference: f64, other: f64) -> Option<f64> {
    (reference.is_finite() && other.is_finite() && reference != 0.0)
        .then(|| (reference - other).abs() / reference.abs())
}

/// Jensen–Shannon divergence (natural log, so in [0, ln 2]) of two
/// histograms over the same bins. Each is normalised first; bins where both
/// are zero contribute nothing. `None` unless both have the same number of
/// bins and a positive, finite total.
pub fn jensen_shannon(p: &[f64], q: &[f64]) -> Option<f64> {
    let sp: f64 = p.iter().sum();
    let sq: f64 = q.iter().sum();
    if p.len() != q.len() || !(sp > 0.0 && sq > 0.0 && sp.is_finite() && sq.is_finite()) {
        return None;
    }
    let mut d = 0.0;
    for (a, b) in p.iter().zip(q) {
        let (a, b) = (a / sp, b / sq);
        let m = 0.5 * (a + b);
        if a > 0.0 {
            d += 0.5 * a * (a / m).ln();
        }
        if b > 0.0 {
            d += 0.5 * b * (b / m).ln();
        }
    }
    Some(d.max(0.0))
}

/// Counts of `a` and `b` in `bins` equal bins from the smaller minimum of
/// the two to `cap` ([`linear_edges`]); values above `cap` count in the last
/// bin (clipped), as [`bin_counts`] does. The input of [`jensen_shannon`].
/// Empty vectors when either distribution is empty.
pub fn common_bin_counts(
    a: &mut Distribution,
    b: &mut Distribution,
    bins: usize,
    cap: i64,
) -> (Vec<f64>, Vec<f64>) {
    let (Some(lo_a), Some(lo_b)) = (a.min(), b.min()) else {
        return (Vec::new(), Vec::new());
    };
    let lo = lo_a.min(lo_b).min(cap) as f64;
    let edges = linear_edges(lo, cap as f64, bins);
    let as_f64 = |c: Vec<u64>| c.into_iter().map(|x| x as f64).collect::<Vec<f64>>();
    (as_f64(bin_counts(a, &edges)), as_f64(bin_counts(b, &edges)))
}

/// [`jensen_shannon`] of `a` and `b` over [`common_bin_counts`] with `bins`
/// bins up to the nearest-rank `cap_pct` percentile of both pooled (the tail
/// beyond it in the last bin, so a few outliers do not squash every other
/// bin into one). `None` when either is empty.
pub fn distribution_jsd(
    a: &mut Distribution,
    b: &mut Distribution,
    bins: usize,
    cap_pct: crate::dist::Pct,
) -> Option<f64> {
    if a.count() == 0 || b.count() == 0 {
        return None;
    }
    let mut pooled = a.clone();
    pooled.merge(b);
    let cap = pooled
        .quantiles(&[cap_pct])
        .first()
        .copied()
        .flatten()?
        .value;
    let (p, q) = common_bin_counts(a, b, bins, cap);
    jensen_shannon(&p, &q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::Pct;

    fn dist(vals: &[i64]) -> Distribution {
        let mut d = Distribution::new(u64::MAX, 3);
        vals.iter().for_each(|&v| d.record(v));
        d
    }

    #[test]
    fn jsd_known_values() {
        assert_eq!(jensen_shannon(&[1.0, 2.0], &[2.0, 4.0]), Some(0.0));
        // Disjoint supports: ln 2.
        let d = jensen_shannon(&[1.0, 0.0], &[0.0, 1.0]).unwrap();
        assert!((d - std::f64::consts::LN_2).abs() < 1e-15);
        // p = (1/2, 1/2), q = (1, 0): m = (3/4, 1/4);
        // ½(½ ln(2/3) + ½ ln 2) + ½ ln(4/3).
        let want = 0.5 * (0.5 * (0.5f64 / 0.75).ln() + 0.5 * (0.5f64 / 0.25).ln())
            + 0.5 * (1.0f64 / 0.75).ln();
        let d = jensen_shannon(&[1.0, 1.0], &[1.0, 0.0]).unwrap();
        assert!((d - want).abs() < 1e-15);
        assert!(jensen_shannon(&[], &[]).is_none());
        assert!(jensen_shannon(&[0.0], &[1.0]).is_none());
    }

    #[test]
    fn relative_error_and_common_bins() {
        assert!((relative_error(10.0, 9.0).unwrap() - 0.1).abs() < 1e-15);
        assert!(relative_error(0.0, 1.0).is_none());
        // Bins of width 3/4 over [0, 3]: 0 | 1 | 2 | 3.
        let (h1, h2) = common_bin_counts(&mut dist(&[0, 1, 2, 3]), &mut dist(&[3, 3]), 4, 3);
        assert_eq!(h1, vec![1.0, 1.0, 1.0, 1.0]);
        assert_eq!(h2, vec![0.0, 0.0, 0.0, 2.0]);
        // Values above the cap count in the last bin.
        let (h1, _) = common_bin_counts(&mut dist(&[0, 1, 2, 3, 50]), &mut dist(&[3]), 4, 3);
        assert_eq!(h1, vec![1.0, 1.0, 1.0, 2.0]);
    }

    #[test]
    fn jsd_of_distributions() {
        let p999 = Pct::parse("99.9").unwrap();
        let same = distribution_jsd(&mut dist(&[1, 2, 3]), &mut dist(&[1, 2, 3]), 64, p999);
        assert_eq!(same, Some(0.0));
        // Disjoint halves of [0, 100): every bin holds one or the other.
        let a: Vec<i64> = (0..50).collect();
        let b: Vec<i64> = (50..100).collect();
        let d = distribution_jsd(&mut dist(&a), &mut dist(&b), 10, p999).unwrap();
        assert!((d - std::f64::consts::LN_2).abs() < 1e-12, "{d}");
        assert!(distribution_jsd(&mut dist(&[]), &mut dist(&[1]), 4, p999).is_none());
    }
}
