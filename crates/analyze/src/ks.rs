//! Kolmogorov–Smirnov tests: two-sample (seed 000 compares replicated
//! platforms with it; `nflab compare` calls it) and one sample against a
//! known distribution (the generator's check that Poisson gaps are
//! exponential, `crates/gen/src/selfcheck.rs`). p-value: the asymptotic
//! Kolmogorov distribution with the small-sample correction of Stephens
//! (1970), λ = (√nₑ + 0.12 + 0.11/√nₑ)·D, nₑ = n·m/(n+m) (two samples) or
//! n (one), p = Q(λ) = 2 Σ (−1)^{k−1} e^{−2k²λ²}.

/// Two-sample KS statistic of sorted samples.
pub fn ks_statistic(a: &[i64], b: &[i64]) -> f64 {
    ks_of_runs(runs(a), a.len() as u64, runs(b), b.len() as u64)
}

/// A sorted sample as runs of equal values.
fn runs(s: &[i64]) -> impl Iterator<Item = (i64, u64)> + '_ {
    s.chunk_by(|x, y| x == y).map(|c| (c[0], c.len() as u64))
}

/// Two-sample KS statistic of samples given as `(value, count)` pairs in
/// increasing order of value (a histogram: the IoT analysis compares
/// inter-sequence times this way without expanding them).
pub fn ks_statistic_counts(a: &[(i64, u64)], b: &[(i64, u64)]) -> f64 {
    let total = |s: &[(i64, u64)]| s.iter().map(|&(_, c)| c).sum::<u64>();
    ks_of_runs(a.iter().copied(), total(a), b.iter().copied(), total(b))
}

/// D over two samples as runs of equal values (in increasing order) with
/// their sizes `n` and `m`.
fn ks_of_runs(
    a: impl Iterator<Item = (i64, u64)>,
    n: u64,
    b: impl Iterator<Item = (i64, u64)>,
    m: u64,
) -> f64 {
    if n == 0 || m == 0 {
        return 1.0;
    }
    let (mut a, mut b) = (a.peekable(), b.peekable());
    let (mut ca, mut cb, mut d) = (0u64, 0u64, 0f64);
    while let (Some(&(xa, _)), Some(&(xb, _))) = (a.peek(), b.peek()) {
        let x = xa.min(xb);
        // Step both CDFs past every sample equal to x: ties move together.
        while let Some((_, c)) = a.next_if(|&(v, _)| v == x) {
            ca += c;
        }
        while let Some((_, c)) = b.next_if(|&(v, _)| v == x) {
            cb += c;
        }
        d = d.max((ca as f64 / n as f64 - cb as f64 / m as f64).abs());
    }
    d
}

/// Asymptotic p-value of a two-sample KS statistic.
pub fn ks_p_value(d: f64, n: usize, m: usize) -> f64 {
    if n == 0 || m == 0 {
        return 0.0;
    }
    let ne = (n * m) as f64 / (n + m) as f64;
    kolmogorov_q((ne.sqrt() + 0.12 + 0.11 / ne.sqrt()) * d)
}

/// One-sample KS statistic D = sup |F_n(x) − F(x)| of `samples` (sorted
/// here) against the distribution function `cdf`.
pub fn ks_one_sample(samples: &mut [f64], cdf: impl Fn(f64) -> f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let n = samples.len() as f64;
    samples
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let f = cdf(x);
            (f - i as f64 / n).abs().max(((i + 1) as f64 / n - f).abs())
        })
        .fold(0.0, f64::max)
}

/// `(D, p)` of the one-sample test of `samples` against the exponential
/// distribution with the given mean (F(x) = 1 − e^{−x/mean}, 0 below 0).
/// With the mean estimated from the same samples the p-value is optimistic
/// (Lilliefors): both uses here say so.
pub fn ks_exponential(samples: &mut [f64], mean: f64) -> (f64, f64) {
    let d = ks_one_sample(samples, |x| 1.0 - (-x.max(0.0) / mean).exp());
    (d, ks_one_sample_p_value(d, samples.len()))
}

/// Asymptotic p-value of a one-sample KS statistic over `n` samples
/// (1 when there are none: nothing contradicts the distribution).
pub fn ks_one_sample_p_value(d: f64, n: usize) -> f64 {
    if n == 0 {
        return 1.0;
    }
    let sn = (n as f64).sqrt();
    kolmogorov_q((sn + 0.12 + 0.11 / sn) * d)
}

/// Q(λ) = 2 Σ_{k≥1} (−1)^{k−1} e^{−2k²λ²}, the survival function of the
/// Kolmogorov distribution. Below λ = 0.2 it is 1 within 10⁻¹² (the series
/// would need more than 100 terms there, so it is not summed).
pub fn kolmogorov_q(lambda: f64) -> f64 {
    if lambda < 0.2 {
        return 1.0;
    }
    let mut sum = 0.0;
    for k in 1..=100 {
        let term = (-2.0 * (k * k) as f64 * lambda * lambda).exp();
        sum += if k % 2 == 1 { term } else { -term };
        if term < 1e-12 {
            break;
        }
    }
    (2.0 * sum).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kolmogorov_q_known_values() {
        // Known value: Q(1.0) = 0.26999967.
        assert!((kolmogorov_q(1.0) - 0.269_999_67).abs() < 1e-6);
        // Tabulated: Q(1.36) ≈ 0.0495 (the 5 % critical value), Q(1.63) ≈ 0.0098.
        assert!((kolmogorov_q(1.36) - 0.0495).abs() < 5e-4);
        assert!((kolmogorov_q(1.63) - 0.0098).abs() < 2e-4);
        // Small λ: 1, also where 100 terms of the series would not converge
        // (λ = 0.01 needs about 370).
        for l in [0.0, 0.01, 0.05, 0.199] {
            assert_eq!(kolmogorov_q(l), 1.0, "{l}");
        }
        assert!(kolmogorov_q(0.2) > 1.0 - 1e-9);
    }

    #[test]
    fn histogram_form_equals_the_expanded_samples() {
        // a = 1,1,2,5,5,5 ; b = 2,3,3,5: ECDF differences after 1: 2/6−0,
        // after 2: 3/6−1/4, after 3: 3/6−3/4, after 5: 0 → D = 1/3.
        let a = [(1, 2), (2, 1), (5, 3)];
        let b = [(2, 1), (3, 2), (5, 1)];
        let d = ks_statistic_counts(&a, &b);
        assert!((d - 1.0 / 3.0).abs() < 1e-15, "{d}");
        assert_eq!(d, ks_statistic(&[1, 1, 2, 5, 5, 5], &[2, 3, 3, 5]));
        assert_eq!(ks_statistic_counts(&[], &b), 1.0);
    }

    #[test]
    fn exponential_by_hand() {
        // One sample at the median ln 2 of Exp(1): F = 0.5, D = max(0.5, 0.5) = 0.5.
        let (d, p) = ks_exponential(&mut [std::f64::consts::LN_2], 1.0);
        assert!((d - 0.5).abs() < 1e-12, "{d}");
        assert_eq!(p, ks_one_sample_p_value(0.5, 1));
        // Negative values sit at F = 0.
        let (d, _) = ks_exponential(&mut [-1.0], 1.0);
        assert_eq!(d, 1.0);
    }

    #[test]
    fn one_sample_statistic_by_hand() {
        // Uniform CDF on [0, 1], samples 0.1, 0.5, 0.9 (given unsorted):
        // steps at 1/3, 2/3, 1 → D = max(|0.1−0|, |1/3−0.1|, |0.5−1/3|,
        // |2/3−0.5|, |0.9−2/3|, |1−0.9|) = 0.2333….
        let d = ks_one_sample(&mut [0.9, 0.1, 0.5], |x| x.clamp(0.0, 1.0));
        assert!((d - (1.0 / 3.0 - 0.1)).abs() < 1e-12, "{d}");
        assert_eq!(ks_one_sample_p_value(0.0, 0), 1.0);
    }
}
