//! Closed forms of single-server queues, the reference the simulator is
//! validated against (Kleinrock, *Queueing Systems* vol. 1, §3.2 and §5.6).
use serde::Serialize;

use crate::{positive, ModelError};

/// Stationary figures of a single-server FIFO queue with infinite capacity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct QueueFigures {
    /// Utilisation ρ = λ · E[S].
    pub rho: f64,
    /// Mean waiting time before service, ns.
    pub mean_wait_ns: f64,
    /// Mean sojourn time (waiting + service), ns.
    pub mean_sojourn_ns: f64,
    /// Mean number in the system (Little: λ · E[T]).
    pub mean_in_system: f64,
}

fn rho_of(rate_pps: f64, mean_service_ns: f64, model: &'static str) -> Result<f64, ModelError> {
    positive("--rate-pps", rate_pps)?;
    positive("--service-ns", mean_service_ns)?;
    let rho = rate_pps * mean_service_ns * 1e-9;
    if rho >= 1.0 {
        return Err(ModelError::Unstable { rho, model });
    }
    Ok(rho)
}

/// M/M/1: E[T] = E[S] / (1 − ρ); the sojourn time is exponential with that mean.
pub fn mm1(rate_pps: f64, mean_service_ns: f64) -> Result<QueueFigures, ModelError> {
    let rho = rho_of(rate_pps, mean_service_ns, "M/M/1")?;
    let t = mean_service_ns / (1.0 - rho);
    Ok(QueueFigures {
        rho,
        mean_wait_ns: t - mean_service_ns,
        mean_sojourn_ns: t,
        mean_in_system: rho / (1.0 - rho),
    })
}

/// P(T > t) of the M/M/1 sojourn time: exp(−(1 − ρ) t / E[S]).
pub fn mm1_sojourn_ccdf(rate_pps: f64, mean_service_ns: f64, t_ns: f64) -> Result<f64, ModelError> {
    let rho = rho_of(rate_pps, mean_service_ns, "M/M/1")?;
    Ok((-(1.0 - rho) * t_ns.max(0.0) / mean_service_ns).exp())
}

/// M/D/1, Pollaczek–Khinchine: E[W] = ρ · E[S] / (2 (1 − ρ)).
pub fn md1(rate_pps: f64, service_ns: f64) -> Result<QueueFigures, ModelError> {
    mg1(rate_pps, service_ns, 0.0).map_err(|e| match e {
        ModelError::Unstable { rho, .. } => ModelError::Unstable {
            rho,
            model: "M/D/1",
        },
        e => e,
    })
}

/// M/G/1, Pollaczek–Khinchine: E[W] = λ E[S²] / (2 (1 − ρ)), with
/// E[S²] = Var[S] + E[S]².
pub fn mg1(
    rate_pps: f64,
    mean_service_ns: f64,
    service_var_ns2: f64,
) -> Result<QueueFigures, ModelError> {
    let rho = rho_of(rate_pps, mean_service_ns, "M/G/1")?;
    crate::non_negative("service time variance", service_var_ns2)?;
    let lambda_per_ns = rate_pps * 1e-9;
    let es2 = service_var_ns2 + mean_service_ns * mean_service_ns;
    let w = lambda_per_ns * es2 / (2.0 * (1.0 - rho));
    let t = w + mean_service_ns;
    Ok(QueueFigures {
        rho,
        mean_wait_ns: w,
        mean_sojourn_ns: t,
        mean_in_system: lambda_per_ns * t,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn textbook_values() {
        // ρ = 0.5, E[S] = 1 µs: M/M/1 E[T] = 2 µs; M/D/1 E[W] = 0.5 µs.
        let m = mm1(500_000.0, 1000.0).unwrap();
        assert!((m.mean_sojourn_ns - 2000.0).abs() < 1e-9);
        assert!((m.mean_in_system - 1.0).abs() < 1e-12);
        let d = md1(500_000.0, 1000.0).unwrap();
        assert!((d.mean_wait_ns - 500.0).abs() < 1e-9);
        // M/G/1 with exponential service (Var = E[S]²) is M/M/1.
        let g = mg1(500_000.0, 1000.0, 1e6).unwrap();
        assert!((g.mean_sojourn_ns - m.mean_sojourn_ns).abs() < 1e-9);
        assert!(
            (mm1_sojourn_ccdf(500_000.0, 1000.0, 2000.0).unwrap() - (-1f64).exp()).abs() < 1e-15
        );
    }

    #[test]
    fn unstable_is_an_error_naming_rho() {
        let e = mm1(1e6, 1000.0).unwrap_err().to_string();
        assert!(e.contains("ρ = 1.0000 ≥ 1") && e.contains("M/M/1"), "{e}");
        let e = md1(2e6, 1000.0).unwrap_err().to_string();
        assert!(e.contains("M/D/1"), "{e}");
        let e = mm1(-5.0, 1000.0).unwrap_err().to_string();
        assert!(e.contains("--rate-pps = -5"), "{e}");
    }
}
