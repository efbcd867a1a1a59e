//! Pearson's correlation coefficient (seed 003 correlates the in-stack monitor's
//! sojourn times with the VNF socket's receive-buffer fill).

/// Pearson's r of the pairs `(x[i], y[i])`; `None` for fewer than two pairs, unequal
/// lengths, or a constant side (r undefined).
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len();
    if n < 2 || y.len() != n {
        return None;
    }
    let (mx, my) = (
        x.iter().sum::<f64>() / n as f64,
        y.iter().sum::<f64>() / n as f64,
    );
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        let (dx, dy) = (a - mx, b - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answers() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(pearson(&x, &[2.0, 4.0, 6.0, 8.0, 10.0]), Some(1.0));
        assert_eq!(pearson(&x, &[5.0, 4.0, 3.0, 2.0, 1.0]), Some(-1.0));
        // By hand: x = 1..5, y = 2,1,4,3,5: sxy = 8, sxx = syy = 10, r = 0.8.
        let r = pearson(&x, &[2.0, 1.0, 4.0, 3.0, 5.0]).unwrap();
        assert!((r - 0.8).abs() < 1e-12, "{r}");
        assert_eq!(pearson(&x, &[1.0; 5]), None);
        assert_eq!(pearson(&[1.0], &[1.0]), None);
    }
}
