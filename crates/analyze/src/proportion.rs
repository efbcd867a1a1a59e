//! A confidence interval of a proportion: the fraction of repetitions with
//! an outcome (say, NCSbench runs whose plant stayed up), by the exact
//! Clopper–Pearson method, which holds at least its level for any n —
//! the right choice for the few repetitions of a lab sweep, where the
//! normal approximation fails at 0 or n successes.

use crate::crossrun::betai;

/// A fraction of repetitions with its interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Proportion {
    /// Repetitions with the outcome.
    pub successes: u64,
    /// Repetitions.
    pub n: u64,
    /// successes / n.
    pub fraction: f64,
    /// Lower bound.
    pub lo: f64,
    /// Upper bound.
    pub hi: f64,
}

/// `successes` of `n` with the two-sided Clopper–Pearson interval at
/// `level` (e.g. 0.95): `lo` is the p with P(X ≥ successes | p) = α/2
/// (0 when successes = 0), `hi` the p with P(X ≤ successes | p) = α/2 (1
/// when successes = n), X ~ Binomial(n, p), α = 1 − level; found by
/// bisection on the regularized incomplete beta function. `None` for n = 0,
/// successes > n or a level outside (0, 1).
pub fn clopper_pearson(successes: u64, n: u64, level: f64) -> Option<Proportion> {
    if n == 0 || successes > n || !(level > 0.0 && level < 1.0) {
        return None;
    }
    let (x, nf) = (successes as f64, n as f64);
    let half_alpha = (1.0 - level) / 2.0;
    // P(X ≥ x | p) = I_p(x, n − x + 1), rising in p.
    let lo = if successes == 0 {
        0.0
    } else {
        bisect(|p| betai(x, nf - x + 1.0, p), half_alpha)
    };
    // P(X ≤ x | p) = 1 − I_p(x + 1, n − x), falling in p.
    let hi = if successes == n {
        1.0
    } else {
        bisect(|p| betai(x + 1.0, nf - x, p), 1.0 - half_alpha)
    };
    Some(Proportion {
        successes,
        n,
        fraction: x / nf,
        lo,
        hi,
    })
}

/// The p in (0, 1) where the rising `f(p)` crosses `target`.
fn bisect(f: impl Fn(f64) -> f64, target: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if f(mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// P(X ≤ k) for X ~ Binomial(n, p), summed term by term (each term in
    /// logs, so p near 0 or 1 does not underflow): independent of the
    /// incomplete beta function the interval is computed with.
    fn binom_cdf(k: u64, n: u64, p: f64) -> f64 {
        let ln_fact = |m: u64| (1..=m).map(|i| (i as f64).ln()).sum::<f64>();
        (0..=k)
            .map(|i| {
                let ln_c = ln_fact(n) - ln_fact(i) - ln_fact(n - i);
                (ln_c + i as f64 * p.ln() + (n - i) as f64 * (1.0 - p).ln()).exp()
            })
            .sum()
    }

    #[test]
    fn the_bounds_are_where_the_binomial_tails_reach_alpha_over_two() {
        for n in [1u64, 3, 7, 10, 30, 100] {
            for x in 0..=n {
                let c = clopper_pearson(x, n, 0.95).unwrap();
                assert_eq!(c.fraction, x as f64 / n as f64);
                assert!(c.lo <= c.fraction && c.fraction <= c.hi, "{n} {x}: {c:?}");
                if x > 0 {
                    let upper_tail = 1.0 - binom_cdf(x - 1, n, c.lo);
                    assert!(
                        (upper_tail - 0.025).abs() < 1e-9,
                        "{n} {x}: {upper_tail} at {c:?}"
                    );
                } else {
                    assert_eq!(c.lo, 0.0);
                }
                if x < n {
                    let lower_tail = binom_cdf(x, n, c.hi);
                    assert!((lower_tail - 0.025).abs() < 1e-9, "{n} {x}: {lower_tail}");
                } else {
                    assert_eq!(c.hi, 1.0);
                }
            }
        }
    }

    #[test]
    fn closed_forms_and_a_textbook_value() {
        // All n up: lo = (α/2)^(1/n); none: hi = 1 − (α/2)^(1/n).
        let c = clopper_pearson(30, 30, 0.95).unwrap();
        assert!((c.lo - 0.025f64.powf(1.0 / 30.0)).abs() < 1e-12, "{c:?}");
        let c = clopper_pearson(0, 3, 0.95).unwrap();
        assert!(
            (c.hi - (1.0 - 0.025f64.powf(1.0 / 3.0))).abs() < 1e-12,
            "{c:?}"
        );
        // 5 of 10: (0.1871, 0.8129) (Clopper and Pearson's tables; e.g. R binom.test).
        let c = clopper_pearson(5, 10, 0.95).unwrap();
        assert!((c.lo - 0.187_086).abs() < 1e-5 && (c.hi - 0.812_914).abs() < 1e-5);
        assert_eq!(clopper_pearson(0, 0, 0.95), None);
        assert_eq!(clopper_pearson(4, 3, 0.95), None);
        assert_eq!(clopper_pearson(1, 3, 1.0), None);
    }
}
