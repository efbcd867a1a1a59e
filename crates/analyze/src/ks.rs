//! Kolmogorov–Smirnov tests: two-sample (seed 000 compares replicated
//! platforms with it; `nflab compare` calls it) and one sample against a
//! known distribution (the generator's check that Poisson gaps are
//! exponential, `crates/gen/src/selfcheck.rs`). p-value: the asymptotic
//! Kolmogorov distribution with the small-sample correction of Stephens
//! (1970), λ = (√nₑ + 0.12 + 0.11/√nₑ)·D, nₑ = n·m/(n+m) (two samples) or
//! n (one), p = Q(λ) = 2 Σ (−1)^{k−1} e^{−2k²λ²}.

/// Two-sample KS statistic of sorted samples.
pub fn ks_statistic(a: &[i64], b: &[i64]) -> f64 {
    let (n, m) = (a.len(), b.len());
    if n == 0 || m == 0 {
        return 1.0;
    }
    let (mut i, mut j, mut d) = (0usize, 0usize, 0f64);
    while i < n && j < m {
        let x = a[i].min(b[j]);
        // Step both CDFs past every sample equal to x: ties move together.
        while i < n && a[i] == x {
            i += 1;
        }
        while j < m && b[j] == x {
            j += 1;
        }
        d = d.max((i as f64 / n as f64 - j as f64 / m as f64).abs());
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
    fn one_sample_statistic_by_hand() {
        // Uniform CDF on [0, 1], samples 0.1, 0.5, 0.9 (given unsorted):
        // steps at 1/3, 2/3, 1 → D = max(|0.1−0|, |1/3−0.1|, |0.5−1/3|,
        // |2/3−0.5|, |0.9−2/3|, |1−0.9|) = 0.2333….
        let d = ks_one_sample(&mut [0.9, 0.1, 0.5], |x| x.clamp(0.0, 1.0));
        assert!((d - (1.0 / 3.0 - 0.1)).abs() < 1e-12, "{d}");
        assert_eq!(ks_one_sample_p_value(0.0, 0), 1.0);
    }
}
