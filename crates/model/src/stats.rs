//! Error metrics of seed 003 (§2.4.5) for comparing a model with a measurement.
use crate::ModelError;

/// Relative error RE(P, Q) = |E[P] − E[Q]| / E[P], with P the reference.
pub fn relative_error(reference: f64, other: f64) -> Result<f64, ModelError> {
    if !(reference.is_finite() && other.is_finite()) || reference == 0.0 {
        return Err(ModelError::Input {
            name: "relative error",
            reason: format!(
                "needs a finite, non-zero reference mean (got {reference} and {other})"
            ),
        });
    }
    Ok((reference - other).abs() / reference.abs())
}

/// Jensen–Shannon divergence (natural log, so in [0, ln 2]) of two
/// histograms over the same bins. Each is normalised first; bins where both
/// are zero contribute nothing.
pub fn jensen_shannon(p: &[f64], q: &[f64]) -> Result<f64, ModelError> {
    let sp: f64 = p.iter().sum();
    let sq: f64 = q.iter().sum();
    if p.len() != q.len() || !(sp > 0.0 && sq > 0.0 && sp.is_finite() && sq.is_finite()) {
        return Err(ModelError::Input {
            name: "Jensen-Shannon divergence",
            reason: "needs two non-empty histograms over the same bins".into(),
        });
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
    Ok(d.max(0.0))
}

/// Histograms of two samples over common bins of `bin` width from the
/// smaller minimum: the input of [`jensen_shannon`].
pub fn common_histograms(a: &[f64], b: &[f64], bins: usize) -> (Vec<f64>, Vec<f64>) {
    let lo = a.iter().chain(b).copied().fold(f64::INFINITY, f64::min);
    let hi = a.iter().chain(b).copied().fold(f64::NEG_INFINITY, f64::max);
    let bins = bins.max(1);
    let w = if hi > lo {
        (hi - lo) / bins as f64
    } else {
        1.0
    };
    let fill = |x: &[f64]| {
        let mut h = vec![0.0; bins];
        for v in x {
            let i = (((v - lo) / w) as usize).min(bins - 1);
            h[i] += 1.0;
        }
        h
    };
    (fill(a), fill(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsd_known_values() {
        assert_eq!(jensen_shannon(&[1.0, 2.0], &[2.0, 4.0]).unwrap(), 0.0);
        // Disjoint supports: ln 2.
        let d = jensen_shannon(&[1.0, 0.0], &[0.0, 1.0]).unwrap();
        assert!((d - std::f64::consts::LN_2).abs() < 1e-15);
        // p = (1/2, 1/2), q = (1, 0): m = (3/4, 1/4);
        // ½(½ ln(2/3) + ½ ln 2) + ½ ln(4/3).
        let want = 0.5 * (0.5 * (0.5f64 / 0.75).ln() + 0.5 * (0.5f64 / 0.25).ln())
            + 0.5 * (1.0f64 / 0.75).ln();
        let d = jensen_shannon(&[1.0, 1.0], &[1.0, 0.0]).unwrap();
        assert!((d - want).abs() < 1e-15);
        assert!(jensen_shannon(&[], &[]).is_err());
        assert!(jensen_shannon(&[0.0], &[1.0]).is_err());
    }

    #[test]
    fn relative_error_and_histograms() {
        assert!((relative_error(10.0, 9.0).unwrap() - 0.1).abs() < 1e-15);
        assert!(relative_error(0.0, 1.0).is_err());
        let (h1, h2) = common_histograms(&[0.0, 1.0, 2.0, 3.0], &[3.0, 3.0], 4);
        assert_eq!(h1, vec![1.0, 1.0, 1.0, 1.0]);
        assert_eq!(h2, vec![0.0, 0.0, 0.0, 2.0]);
    }
}
