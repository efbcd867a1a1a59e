//! Autocorrelation (seed 003 §4.2: the periodicity of an IoT device's activity
//! and the memory of aggregated arrivals). One estimator everywhere, the
//! biased one R's `acf` uses:
//!
//! r_k = Σ_{t<n−k} (x_t − x̄)(x_{t+k} − x̄) / Σ_t (x_t − x̄)²
//!
//! It divides every lag by the same n (not n − k), so |r_k| ≤ 1 and long lags
//! are shrunk towards 0. A constant series has no autocorrelation: r_k = 0.

/// r_1 … r_L of `x`, L = min(max_lag, n − 1).
pub fn autocorrelation(x: &[f64], max_lag: usize) -> Vec<f64> {
    let lags = max_lag.min(x.len().saturating_sub(1));
    let mean = x.iter().sum::<f64>() / x.len().max(1) as f64;
    let g: Vec<f64> = x.iter().map(|v| v - mean).collect();
    let den = dot(&g, &g);
    if den <= 0.0 {
        return vec![0.0; lags];
    }
    lagged_dots(&g, lags).into_iter().map(|s| s / den).collect()
}

/// The largest |r_k| over lags 1 … max_lag (0 when there is none).
pub fn max_abs_autocorrelation(x: &[f64], max_lag: usize) -> f64 {
    autocorrelation(x, max_lag)
        .into_iter()
        .map(f64::abs)
        .fold(0.0, f64::max)
}

/// Seed 003's periodicity metric of one device: the sum of the `top` largest
/// r_k, k = 1 … min(max_lag, horizon − 1), of its 0/1 activity series over
/// `horizon` minutes, given only the minutes it was active (any order,
/// repeats allowed). `None` if a minute lies outside [0, horizon).
///
/// The series is sparse, so the sums are counted instead of multiplied: with m
/// active minutes and x̄ = m/n, the lag-k sum Σ (x_t − x̄)(x_{t+k} − x̄) is
/// C_k − x̄(A_k + B_k) + (n − k)x̄², where C_k counts active pairs k apart, A_k
/// the active minutes below n − k and B_k those from k on; the denominator is
/// m − m²/n. Exact in integers up to the last division, and O(m · min(m, L))
/// instead of O(n · L).
pub fn periodicity(minutes: &[i64], horizon: usize, max_lag: usize, top: usize) -> Option<f64> {
    let n = horizon;
    let mut t: Vec<usize> = Vec::with_capacity(minutes.len());
    for &m in minutes {
        t.push(usize::try_from(m).ok().filter(|&m| m < n)?);
    }
    t.sort_unstable();
    t.dedup();
    let lags = max_lag.min(n.saturating_sub(1));
    let m = t.len();
    let xbar = m as f64 / n.max(1) as f64;
    let den = m as f64 - m as f64 * xbar;
    let take = top.min(lags);
    if den <= 1e-12 || take == 0 {
        return Some(0.0);
    }
    let mut pairs = vec![0u64; lags + 1];
    for (i, &a) in t.iter().enumerate() {
        for &b in t[i + 1..].iter().take_while(|&&b| b - a <= lags) {
            pairs[b - a] += 1;
        }
    }
    let below = |x: usize| t.partition_point(|&v| v < x) as f64;
    let mut r: Vec<f64> = (1..=lags)
        .map(|k| {
            let (a_k, b_k) = (below(n - k), m as f64 - below(k));
            (pairs[k] as f64 - xbar * (a_k + b_k) + (n - k) as f64 * xbar * xbar) / den
        })
        .collect();
    r.sort_unstable_by(|a, b| b.total_cmp(a));
    Some(r[..take].iter().sum())
}

/// Σ_{t<n−k} g_t g_{t+k} for k = 1 … lags, the lags split over the cores
/// (a trace of 10⁷ gaps at 1000 lags is 10¹⁰ products).
fn lagged_dots(g: &[f64], lags: usize) -> Vec<f64> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(lags.max(1));
    let mut out = vec![0.0; lags];
    let chunk = lags.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (c, part) in out.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                for (i, v) in part.iter_mut().enumerate() {
                    let k = 1 + c * chunk + i;
                    *v = dot(&g[..g.len() - k], &g[k..]);
                }
            });
        }
    });
    out
}

/// Dot product with four running sums, which lets the compiler vectorise
/// (one sum would serialise every addition).
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut s = [0.0f64; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for j in 0..4 {
            s[j] += x[j] * y[j];
        }
    }
    s.iter().sum::<f64>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, term by term.
    fn naive(x: &[f64], max_lag: usize) -> Vec<f64> {
        let n = x.len();
        let mean = x.iter().sum::<f64>() / n as f64;
        let den: f64 = x.iter().map(|v| (v - mean).powi(2)).sum();
        (1..=max_lag.min(n - 1))
            .map(|k| {
                (0..n - k)
                    .map(|t| (x[t] - mean) * (x[t + k] - mean))
                    .sum::<f64>()
                    / den
            })
            .collect()
    }

    #[test]
    fn known_answers() {
        // 1, 2, 3, 4: x̄ = 2.5, deviations −1.5 −0.5 0.5 1.5, Σ² = 5;
        // lag 1: 0.75 − 0.25 + 0.75 = 1.25 → 0.25; lag 2: −0.75 − 0.75 → −0.3;
        // lag 3: −2.25 → −0.45.
        let r = autocorrelation(&[1.0, 2.0, 3.0, 4.0], 10);
        let want = [0.25, -0.3, -0.45];
        assert_eq!(r.len(), 3);
        for (a, b) in r.iter().zip(want) {
            assert!((a - b).abs() < 1e-15, "{r:?}");
        }
        assert!((max_abs_autocorrelation(&[1.0, 2.0, 3.0, 4.0], 10) - 0.45).abs() < 1e-15);
        // Alternating signs: r_1 = −(n−1)/n.
        let alt: Vec<f64> = (0..10)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        assert!((autocorrelation(&alt, 1)[0] + 0.9).abs() < 1e-15);
        assert_eq!(autocorrelation(&[3.0; 5], 3), vec![0.0; 3]);
        assert!(autocorrelation(&[], 3).is_empty());
    }

    #[test]
    fn equals_the_definition_on_a_long_series() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let x: Vec<f64> = (0..3001)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % 1000) as f64 / 7.0
            })
            .collect();
        let (fast, slow) = (autocorrelation(&x, 1000), naive(&x, 1000));
        assert_eq!(fast.len(), 1000);
        for (k, (a, b)) in fast.iter().zip(&slow).enumerate() {
            assert!((a - b).abs() < 1e-12, "lag {}: {a} vs {b}", k + 1);
        }
    }

    #[test]
    fn periodicity_equals_the_dense_definition() {
        let horizon = 500;
        let cases: Vec<Vec<i64>> = vec![
            (7..500).step_by(15).collect(),            // period 15
            vec![3, 3, 90, 91, 250, 499, 0],           // repeats, both ends
            (0..500).filter(|t| t % 7 != 3).collect(), // dense
            vec![100],                                 // one minute
            (0..500).collect(),                        // constant
        ];
        for minutes in cases {
            let mut x = vec![0.0; horizon];
            for &m in &minutes {
                x[m as usize] = 1.0;
            }
            let mut r = naive(&x, 300);
            r.sort_unstable_by(|a, b| b.total_cmp(a));
            let constant = x.iter().all(|&v| v == x[0]);
            let want = if constant { 0.0 } else { r[..3].iter().sum() };
            let got = periodicity(&minutes, horizon, 300, 3).unwrap();
            assert!((got - want).abs() < 1e-12, "{minutes:?}: {got} vs {want}");
        }
        assert!(periodicity(&(7..500).step_by(15).collect::<Vec<_>>(), 500, 300, 3).unwrap() > 2.5);
        assert_eq!(periodicity(&[500], 500, 300, 3), None);
        assert_eq!(periodicity(&[-1], 500, 300, 3), None);
    }
}
