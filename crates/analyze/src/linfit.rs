//! Least-squares line `y = intercept + slope · x` with the slope's Student-t
//! confidence interval and R² (FLOWer's per-hop cost: latency against the
//! number of port hops).

use serde::Serialize;

use crate::crossrun::t_quantile;

/// A fitted line.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinearFit {
    /// Points.
    pub n: usize,
    /// Slope.
    pub slope: f64,
    /// Intercept.
    pub intercept: f64,
    /// Half-width of the slope's two-sided confidence interval at `level`
    /// (`t_{(1+level)/2, n−2} · SE(slope)`).
    pub slope_ci: f64,
    /// Confidence level of `slope_ci`.
    pub level: f64,
    /// Coefficient of determination.
    pub r2: f64,
}

/// Fit `ys` against `xs`; `None` with fewer than three points or all `xs` equal.
pub fn linear_fit(xs: &[f64], ys: &[f64], level: f64) -> Option<LinearFit> {
    let n = xs.len();
    if n < 3 || ys.len() != n {
        return None;
    }
    let nf = n as f64;
    let mx = xs.iter().sum::<f64>() / nf;
    let my = ys.iter().sum::<f64>() / nf;
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let syy: f64 = ys.iter().map(|y| (y - my).powi(2)).sum();
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let sse: f64 = xs
        .iter()
        .zip(ys)
        .map(|(x, y)| (y - intercept - slope * x).powi(2))
        .sum();
    let se = (sse / (nf - 2.0) / sxx).sqrt();
    let r2 = if syy == 0.0 { 1.0 } else { 1.0 - sse / syy };
    Some(LinearFit {
        n,
        slope,
        intercept,
        slope_ci: t_quantile((1.0 + level) / 2.0, nf - 2.0) * se,
        level,
        r2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_line_has_zero_width_and_r2_one() {
        let xs = [1.0, 2.0, 4.0, 8.0, 16.0];
        let ys: Vec<f64> = xs.iter().map(|x| 3000.0 + 729.0 * x).collect();
        let f = linear_fit(&xs, &ys, 0.95).unwrap();
        assert!((f.slope - 729.0).abs() < 1e-9);
        assert!((f.intercept - 3000.0).abs() < 1e-9);
        assert!(f.slope_ci.abs() < 1e-6);
        assert!((f.r2 - 1.0).abs() < 1e-12);
    }

    #[test]
    fn matches_a_hand_computed_fit() {
        // x = 1..5, y = 2, 4, 5, 4, 5: slope 0.6, intercept 2.2, SSE 2.4,
        // SE = sqrt(2.4/3/10) = 0.28284, t(0.975, 3) = 3.18245, R² = 3.6/6 = 0.6.
        let f = linear_fit(&[1.0, 2.0, 3.0, 4.0, 5.0], &[2.0, 4.0, 5.0, 4.0, 5.0], 0.95).unwrap();
        assert!((f.slope - 0.6).abs() < 1e-12);
        assert!((f.intercept - 2.2).abs() < 1e-12);
        assert!((f.r2 - 0.6).abs() < 1e-12);
        assert!(
            (f.slope_ci - 3.182446 * 0.282843).abs() < 1e-4,
            "{}",
            f.slope_ci
        );
    }

    #[test]
    fn degenerate_inputs_give_none() {
        assert!(linear_fit(&[1.0, 2.0], &[1.0, 2.0], 0.95).is_none());
        assert!(linear_fit(&[2.0, 2.0, 2.0], &[1.0, 2.0, 3.0], 0.95).is_none());
    }
}
