//! Service-time distributions given by mean and coefficient of variation
//! (gamma, lognormal, exponential, deterministic) or by empirical samples.

use crate::rng::Rng;

/// The family a mean and cv are turned into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// Gamma with shape 1/cv²; any cv > 0.
    Gamma,
    /// Lognormal with σ² = ln(1 + cv²); any cv > 0.
    Lognormal,
    /// Exponential: cv must be 1.
    Exponential,
    /// Constant: cv must be 0.
    Deterministic,
}

impl Family {
    /// The family's name as written in a spec.
    pub fn name(self) -> &'static str {
        match self {
            Family::Gamma => "gamma",
            Family::Lognormal => "lognormal",
            Family::Exponential => "exponential",
            Family::Deterministic => "deterministic",
        }
    }
}

/// A sampler of non-negative durations (seconds).
#[derive(Debug, Clone)]
pub enum Service {
    /// Always the same.
    Constant(f64),
    /// Exponential with this mean.
    Exponential(f64),
    /// Gamma(shape, scale).
    Gamma {
        /// Shape k = 1/cv².
        shape: f64,
        /// Scale θ = mean/k.
        scale: f64,
    },
    /// exp(N(mu, sigma²)).
    Lognormal {
        /// Mean of the log.
        mu: f64,
        /// Standard deviation of the log.
        sigma: f64,
    },
    /// Uniform choice among measured samples.
    Empirical(Vec<f64>),
}

/// Why a mean/cv pair does not make a distribution; the caller adds the key.
#[derive(Debug, Clone, PartialEq)]
pub enum ServiceError {
    /// The mean is not a positive finite number.
    Mean(f64),
    /// The cv is outside what the family can take.
    Cv {
        /// The family asked for.
        family: Family,
        /// The cv given.
        cv: f64,
        /// What is valid.
        valid: &'static str,
    },
    /// No samples.
    Empty,
}

impl std::fmt::Display for ServiceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServiceError::Mean(m) => write!(f, "mean {m} is not valid: use a positive number"),
            ServiceError::Cv { family, cv, valid } => write!(
                f,
                "cv {cv} is not valid for the {} family: {valid}",
                family.name()
            ),
            ServiceError::Empty => write!(f, "has no samples: give at least one value"),
        }
    }
}

impl Service {
    /// A distribution of `family` with this mean (seconds) and cv.
    pub fn from_mean_cv(family: Family, mean: f64, cv: f64) -> Result<Service, ServiceError> {
        if !(mean.is_finite() && mean > 0.0) {
            return Err(ServiceError::Mean(mean));
        }
        let bad = |valid| Err(ServiceError::Cv { family, cv, valid });
        match family {
            Family::Deterministic if cv == 0.0 => Ok(Service::Constant(mean)),
            Family::Deterministic => bad("a constant has cv = 0"),
            Family::Exponential if cv == 1.0 => Ok(Service::Exponential(mean)),
            Family::Exponential => bad("an exponential has cv = 1"),
            _ if !(cv.is_finite() && cv > 0.0) => bad("use a finite cv > 0"),
            Family::Gamma => {
                let shape = 1.0 / (cv * cv);
                Ok(Service::Gamma {
                    shape,
                    scale: mean / shape,
                })
            }
            Family::Lognormal => {
                let s2 = (1.0 + cv * cv).ln();
                Ok(Service::Lognormal {
                    mu: mean.ln() - s2 / 2.0,
                    sigma: s2.sqrt(),
                })
            }
        }
    }

    /// Uniform resampling of measured values (seconds).
    pub fn empirical(samples: Vec<f64>) -> Result<Service, ServiceError> {
        if samples.is_empty() {
            return Err(ServiceError::Empty);
        }
        Ok(Service::Empirical(samples))
    }

    /// The distribution's mean.
    pub fn mean(&self) -> f64 {
        match self {
            Service::Constant(m) | Service::Exponential(m) => *m,
            Service::Gamma { shape, scale } => shape * scale,
            Service::Lognormal { mu, sigma } => (mu + sigma * sigma / 2.0).exp(),
            Service::Empirical(v) => v.iter().sum::<f64>() / v.len() as f64,
        }
    }

    /// One duration.
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> f64 {
        match self {
            Service::Constant(m) => *m,
            Service::Exponential(m) => rng.exp(*m),
            Service::Gamma { shape, scale } => gamma(rng, *shape) * scale,
            Service::Lognormal { mu, sigma } => (mu + sigma * normal(rng)).exp(),
            Service::Empirical(v) => v[(rng.next_u64() % v.len() as u64) as usize],
        }
    }
}

/// Standard normal (Marsaglia's polar method, one of the pair kept).
#[inline]
pub fn normal(rng: &mut Rng) -> f64 {
    loop {
        let u = 2.0 * rng.uniform_open0() - 1.0;
        let v = 2.0 * rng.uniform_open0() - 1.0;
        let s = u * u + v * v;
        if s < 1.0 && s > 0.0 {
            return u * (-2.0 * s.ln() / s).sqrt();
        }
    }
}

/// Gamma(shape, 1) by Marsaglia & Tsang (2000); shape < 1 by the boost
/// G(k) = G(k+1) · U^(1/k).
#[inline]
pub fn gamma(rng: &mut Rng, shape: f64) -> f64 {
    if shape < 1.0 {
        let u = rng.uniform_open0();
        return gamma(rng, shape + 1.0) * u.powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = normal(rng);
        let v = 1.0 + c * x;
        if v <= 0.0 {
            continue;
        }
        let v = v * v * v;
        let u = rng.uniform_open0();
        if u < 1.0 - 0.0331 * x * x * x * x || u.ln() < 0.5 * x * x + d * (1.0 - v + v.ln()) {
            return d * v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_cv(s: &Service, n: usize) -> (f64, f64) {
        let mut rng = Rng::new(11);
        let xs: Vec<f64> = (0..n).map(|_| s.sample(&mut rng)).collect();
        let m = xs.iter().sum::<f64>() / n as f64;
        let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1) as f64;
        (m, v.sqrt() / m)
    }

    #[test]
    fn families_hit_mean_and_cv() {
        let n = 400_000;
        for family in [Family::Gamma, Family::Lognormal] {
            for (mean, cv) in [(1659e-6, 0.07), (5998e-6, 1.43), (70482e-6, 0.68)] {
                let s = Service::from_mean_cv(family, mean, cv).expect("valid");
                assert!((s.mean() - mean).abs() < 1e-12 * mean.max(1.0));
                let (m, c) = mean_cv(&s, n);
                // σ of the sample mean is cv·mean/√n; the cv of a heavy
                // lognormal converges slowly, hence the looser 5 %.
                assert!(
                    (m - mean).abs() < 5.0 * cv * mean / (n as f64).sqrt(),
                    "{family:?} {m} {mean}"
                );
                assert!((c - cv).abs() < 0.05 * cv, "{family:?} cv {c} vs {cv}");
            }
        }
    }

    #[test]
    fn family_refuses_cv_it_cannot_take() {
        assert!(Service::from_mean_cv(Family::Gamma, 1.0, 0.0).is_err());
        assert!(Service::from_mean_cv(Family::Lognormal, 1.0, -1.0).is_err());
        assert!(Service::from_mean_cv(Family::Exponential, 1.0, 0.5).is_err());
        assert!(Service::from_mean_cv(Family::Deterministic, 1.0, 0.1).is_err());
        assert!(matches!(
            Service::from_mean_cv(Family::Gamma, -1.0, 0.5),
            Err(ServiceError::Mean(m)) if m == -1.0
        ));
    }
}
