//! The two-sample Kolmogorov–Smirnov test (seed 000 compares replicated
//! platforms with it; `nflab compare` calls it). p-value: the asymptotic
//! Kolmogorov distribution with the small-sample correction of Stephens
//! (1970), λ = (√nₑ + 0.12 + 0.11/√nₑ)·D, nₑ = n·m/(n+m),
//! p = 2 Σ (−1)^{k−1} e^{−2k²λ²}.

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
    let lambda = (ne.sqrt() + 0.12 + 0.11 / ne.sqrt()) * d;
    if lambda < 1e-3 {
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
