//! Discrete distributions on a time grid, shared by the batch model and the
//! simulator, so that both work on exactly the same inputs.
//!
//! A [`SlotDist`] is a probability mass function on the non-negative
//! integers (slots of `Δt`), stored from its smallest to its largest value
//! with tails below [`TAIL_EPS`] cut and the rest renormalised.
use serde::Serialize;

use crate::rng::Rng;
use crate::{non_negative, positive, ModelError};

/// Mass cut from each tail of a distribution: small against every tolerance
/// the models are checked to, large enough to keep supports short.
pub const TAIL_EPS: f64 = 1e-13;

/// ln Γ(x) for x > 0 (Lanczos, g = 7, n = 9; relative error < 1e-14).
pub fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1−x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// A pmf on slots `offset ..= offset + pmf.len() − 1`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlotDist {
    /// Smallest value with mass.
    pub offset: u64,
    /// Masses from `offset` on; they sum to 1.
    pub pmf: Vec<f64>,
    #[serde(skip)]
    cdf: Vec<f64>,
}

impl SlotDist {
    /// From masses starting at `offset`; cuts the tails and renormalises.
    pub fn from_pmf(offset: u64, pmf: Vec<f64>) -> Result<SlotDist, ModelError> {
        let total: f64 = pmf.iter().sum();
        if pmf.is_empty() || !(total.is_finite() && total > 0.0) || pmf.iter().any(|p| *p < 0.0) {
            return Err(ModelError::Input {
                name: "distribution",
                reason: "it has no mass; give at least one value".into(),
            });
        }
        // Cut tails below TAIL_EPS · total.
        let mut lo = 0;
        let mut acc = 0.0;
        while lo + 1 < pmf.len() && acc + pmf[lo] < TAIL_EPS * total {
            acc += pmf[lo];
            lo += 1;
        }
        let mut hi = pmf.len();
        let mut acc = 0.0;
        while hi > lo + 1 && acc + pmf[hi - 1] < TAIL_EPS * total {
            acc += pmf[hi - 1];
            hi -= 1;
        }
        let kept: f64 = pmf[lo..hi].iter().sum();
        let pmf: Vec<f64> = pmf[lo..hi].iter().map(|p| p / kept).collect();
        let mut cdf = Vec::with_capacity(pmf.len());
        let mut c = 0.0;
        for p in &pmf {
            c += p;
            cdf.push(c);
        }
        if let Some(last) = cdf.last_mut() {
            *last = 1.0;
        }
        Ok(SlotDist {
            offset: offset + lo as u64,
            pmf,
            cdf,
        })
    }

    /// All mass on one value.
    pub fn deterministic(slots: u64) -> SlotDist {
        SlotDist {
            offset: slots,
            pmf: vec![1.0],
            cdf: vec![1.0],
        }
    }

    /// Poisson with the given mean (in slots); mean 0 is the point mass at 0.
    pub fn poisson(mean: f64) -> Result<SlotDist, ModelError> {
        non_negative("mean (slots)", mean)?;
        if mean == 0.0 {
            return Ok(SlotDist::deterministic(0));
        }
        let sd = mean.sqrt();
        let lo = (mean - 12.0 * sd - 10.0).max(0.0).floor() as u64;
        let hi = (mean + 12.0 * sd + 20.0).ceil() as u64;
        let pmf = (lo..=hi)
            .map(|k| {
                let k = k as f64;
                (k * mean.ln() - mean - ln_gamma(k + 1.0)).exp()
            })
            .collect();
        SlotDist::from_pmf(lo, pmf)
    }

    /// Geometric on {0, 1, 2, …} with the given mean: P(k) = p·q^k, mean q/p,
    /// c_v = 1/√q. The discrete-time memoryless distribution.
    pub fn geometric(mean: f64) -> Result<SlotDist, ModelError> {
        positive("mean (slots)", mean)?;
        let p = 1.0 / (1.0 + mean);
        let q = 1.0 - p;
        let n = ((TAIL_EPS.ln() / q.ln()).ceil() as usize).max(1) + 1;
        let pmf = (0..n).map(|k| p * q.powi(k as i32)).collect();
        SlotDist::from_pmf(0, pmf)
    }

    /// Negative binomial on {0, 1, …} with the given mean and coefficient of
    /// variation (overdispersed: needs c_v² · mean > 1).
    pub fn negative_binomial(mean: f64, cv: f64) -> Result<SlotDist, ModelError> {
        positive("mean (slots)", mean)?;
        positive("--cv", cv)?;
        let var = cv * cv * mean * mean;
        if var <= mean {
            return Err(ModelError::Input {
                name: "--cv",
                reason: format!(
                    "a negative binomial with mean {mean} slots needs c_v > {:.4} (variance above \
                     the mean); use poisson or deterministic for less variable arrivals",
                    (1.0 / mean).sqrt()
                ),
            });
        }
        let p = mean / var;
        let r = mean * p / (1.0 - p);
        let sd = var.sqrt();
        let hi = (mean + 40.0 * sd + 50.0).ceil() as u64;
        let lnp = p.ln();
        let lnq = (1.0 - p).ln();
        let pmf = (0..=hi)
            .map(|k| {
                let k = k as f64;
                (ln_gamma(k + r) - ln_gamma(r) - ln_gamma(k + 1.0) + r * lnp + k * lnq).exp()
            })
            .collect();
        SlotDist::from_pmf(0, pmf)
    }

    /// The empirical distribution of samples (slots).
    pub fn empirical(samples: &[u64]) -> Result<SlotDist, ModelError> {
        let (Some(&lo), Some(&hi)) = (samples.iter().min(), samples.iter().max()) else {
            return Err(ModelError::Input {
                name: "empirical distribution",
                reason: "the input holds no samples; give a record file with at least two packets"
                    .into(),
            });
        };
        if hi - lo > 100_000_000 {
            return Err(ModelError::Input {
                name: "empirical distribution",
                reason: format!("the samples span {} slots; use a coarser --dt-ns", hi - lo),
            });
        }
        let mut pmf = vec![0.0; (hi - lo + 1) as usize];
        for s in samples {
            pmf[(s - lo) as usize] += 1.0;
        }
        SlotDist::from_pmf(lo, pmf)
    }

    /// Largest value with mass.
    pub fn max(&self) -> u64 {
        self.offset + self.pmf.len() as u64 - 1
    }

    /// P(X = k).
    pub fn p(&self, k: u64) -> f64 {
        if k < self.offset {
            0.0
        } else {
            self.pmf
                .get((k - self.offset) as usize)
                .copied()
                .unwrap_or(0.0)
        }
    }

    /// E[X].
    pub fn mean(&self) -> f64 {
        self.pmf
            .iter()
            .enumerate()
            .map(|(i, p)| (self.offset + i as u64) as f64 * p)
            .sum()
    }

    /// Var[X].
    pub fn variance(&self) -> f64 {
        let m = self.mean();
        self.pmf
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let d = (self.offset + i as u64) as f64 - m;
                d * d * p
            })
            .sum()
    }

    /// Dense pmf from 0 to `max()`.
    pub fn dense(&self) -> Vec<f64> {
        let mut v = vec![0.0; self.offset as usize];
        v.extend_from_slice(&self.pmf);
        v
    }

    /// A variate, by inverting the CDF.
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        if self.cdf.len() == 1 {
            return self.offset;
        }
        let u = rng.uniform_open0();
        let i = self.cdf.partition_point(|c| *c < u).min(self.cdf.len() - 1);
        self.offset + i as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_gamma_known_values() {
        assert!((ln_gamma(1.0)).abs() < 1e-13);
        assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-12);
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-12);
        // Stirling at 1e4: ln Γ(10001) = ln 10000!.
        let s: f64 = (1..=10_000).map(|k| (k as f64).ln()).sum();
        assert!((ln_gamma(10_001.0) - s).abs() / s < 1e-12);
    }

    #[test]
    fn moments_match_parameters() {
        let p = SlotDist::poisson(6.7).unwrap();
        assert!((p.mean() - 6.7).abs() < 1e-9 && (p.variance() - 6.7).abs() < 1e-8);
        let big = SlotDist::poisson(2160.0).unwrap();
        assert!((big.mean() - 2160.0).abs() < 1e-6 && (big.variance() - 2160.0).abs() < 1e-4);
        let g = SlotDist::geometric(6.7).unwrap();
        assert!((g.mean() - 6.7).abs() < 1e-9);
        // c_v = 1/√q for the geometric on {0, 1, …}.
        let q: f64 = 6.7 / 7.7;
        assert!((g.variance().sqrt() / g.mean() - 1.0 / q.sqrt()).abs() < 1e-9);
        for cv in [0.5, 2.0] {
            let n = SlotDist::negative_binomial(26.9, cv).unwrap();
            assert!((n.mean() - 26.9).abs() < 1e-6, "{}", n.mean());
            assert!((n.variance().sqrt() / n.mean() - cv).abs() < 1e-6);
        }
        assert!(SlotDist::negative_binomial(6.7, 0.1).is_err());
    }

    #[test]
    fn empirical_and_empty() {
        let e = SlotDist::empirical(&[3, 3, 5, 9]).unwrap();
        assert_eq!(e.offset, 3);
        assert_eq!(e.p(3), 0.5);
        assert_eq!(e.p(4), 0.0);
        assert_eq!(e.max(), 9);
        let err = SlotDist::empirical(&[]).unwrap_err().to_string();
        assert!(err.contains("no samples"), "{err}");
    }

    #[test]
    fn sampling_follows_the_pmf() {
        let d = SlotDist::from_pmf(2, vec![0.25, 0.5, 0.25]).unwrap();
        let mut rng = Rng::new(1);
        let n = 100_000;
        let mut c = [0u32; 3];
        for _ in 0..n {
            c[(d.sample(&mut rng) - 2) as usize] += 1;
        }
        // Binomial σ = sqrt(n p (1−p)) ≈ 158 for p = 0.5; 5σ bounds.
        assert!((c[1] as f64 - 50_000.0).abs() < 800.0, "{c:?}");
        assert!((c[0] as f64 - 25_000.0).abs() < 700.0, "{c:?}");
    }
}
