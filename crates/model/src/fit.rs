//! Models against measurement: predict an experiment's saturation rate and
//! latency distributions from few inputs, and report the errors with seed
//! 003's metrics (relative error of the means, Jensen–Shannon divergence of
//! the distributions).
//!
//! Method. The processing time per packet `t_CPU` comes either from a known
//! cost (`sheep` cycles per packet + c_IO at a known clock: the resource
//! model) or from the median latency of the lowest-rate run minus the
//! baseline's median (seed 000 §5.4.4). The saturation rate is then
//! `R_max = cores · (1 s − Σ r_k d_k) / t_CPU` (5.10), and each run's
//! latency distribution is predicted by simulating the run's offered
//! traffic through a poller that spends `t_CPU` per packet, plus the
//! baseline as a constant offset (seed 003's 5 µs calibration).
use nflab_analyze::dist::{Distribution, Pct, DEFAULT_EXACT_LIMIT, DEFAULT_HDR_DIGITS};
use nflab_analyze::divergence::{distribution_jsd, relative_error};
use serde::Serialize;

use crate::resource::{fit_t_cpu_ns, urllc_r_max, InterruptLoad};
use crate::sim::{self, Arrivals, Service, ServiceDist, ServiceMean, SimConfig};
use crate::{positive, ModelError};

/// What one measured run offers the fit.
#[derive(Debug, Clone)]
pub struct RunObservation {
    /// Run name (`001`).
    pub name: String,
    /// Offered rate, packets/s.
    pub offered_pps: f64,
    /// Received rate, packets/s.
    pub carried_pps: f64,
    /// Loss ratio.
    pub loss_ratio: f64,
    /// Per-packet latencies (rx − tx), ns, in the metrics engine's
    /// distribution (every statistic of them is the engine's).
    pub latency_ns: Distribution,
    /// Cycles per packet the DuT was told to spend (`sheep`), if known.
    pub sheep_cycles: Option<f64>,
    /// Poisson arrivals (else CBR).
    pub poisson: bool,
    /// Packets sent in the run (the simulation sends as many), if known.
    pub sent: Option<u64>,
}

/// Settings of the fit.
#[derive(Debug, Clone)]
pub struct FitConfig {
    /// Core clock, Hz (needed to use known cycles per packet).
    pub cpu_hz: Option<f64>,
    /// Cores processing packets.
    pub cores: f64,
    /// Framework I/O cycles per packet added to `sheep` cycles.
    pub c_io: f64,
    /// Median latency of a forwarder without processing, ns.
    pub baseline_ns: Option<f64>,
    /// Batch size of the DuT's poller.
    pub batch: usize,
    /// Queue (receive ring) capacity of the DuT.
    pub queue_capacity: usize,
    /// Interruptions of the processing core.
    pub interrupts: Vec<InterruptLoad>,
    /// Packets simulated per run (at most).
    pub sim_packets: u64,
    /// Seed of the simulations.
    pub seed: u64,
}

/// Predicted vs measured for one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunFit {
    /// Run name.
    pub name: String,
    /// Offered rate, packets/s.
    pub offered_pps: f64,
    /// Measured loss ratio.
    pub measured_loss: f64,
    /// Predicted loss ratio.
    pub predicted_loss: f64,
    /// Measured mean latency, ns.
    pub measured_mean_ns: Option<f64>,
    /// Predicted mean latency, ns.
    pub predicted_mean_ns: f64,
    /// Measured median latency, ns.
    pub measured_p50_ns: Option<f64>,
    /// Predicted median latency, ns.
    pub predicted_p50_ns: f64,
    /// |measured − predicted| / measured of the mean latency.
    pub latency_relative_error: Option<f64>,
    /// Jensen–Shannon divergence of the latency histograms (64 common bins
    /// up to the nearest-rank 99.9th percentile of both pooled, the tail in
    /// the last bin), in [0, ln 2].
    pub latency_jsd: Option<f64>,
}

/// The fit's result.
#[derive(Debug, Clone, Serialize)]
pub struct FitReport {
    /// How t_CPU was obtained.
    pub method: String,
    /// Processing time per packet, ns.
    pub t_cpu_ns: f64,
    /// Baseline latency added to predictions, ns.
    pub baseline_ns: f64,
    /// Predicted saturation rate, packets/s.
    pub predicted_saturation_pps: f64,
    /// Measured saturation rate: mean carried rate of the runs with more
    /// than 1 % loss; absent when no run saturated.
    pub measured_saturation_pps: Option<f64>,
    /// Highest carried rate of any run, packets/s.
    pub max_carried_pps: f64,
    /// |measured − predicted| / measured of the saturation rate.
    pub saturation_relative_error: Option<f64>,
    /// Cycles per packet implied by the measured saturation (needs the clock).
    pub fitted_cycles_per_packet: Option<f64>,
    /// Per run.
    pub runs: Vec<RunFit>,
    /// Remarks (what was assumed or missing).
    pub notes: Vec<String>,
}

/// The engine's median (nearest rank: the ⌈N/2⌉-th smallest, the lower of
/// the two middle values for even N).
fn median(d: &mut Distribution) -> Option<f64> {
    let p50 = Pct::parse("50").unwrap_or_else(|| unreachable!("50 is a percentile"));
    Some(d.quantiles(&[p50]).first().copied().flatten()?.value as f64)
}

/// Fit and compare. The runs' latency distributions are only reordered
/// (quantiles are found by selection).
pub fn fit(runs: &mut [RunObservation], cfg: &FitConfig) -> Result<FitReport, ModelError> {
    if runs.is_empty() {
        return Err(ModelError::Input {
            name: "DIR",
            reason: "the experiment has no runs with params.json and summary.json".into(),
        });
    }
    positive("--cores", cfg.cores)?;
    let mut notes = Vec::new();
    let baseline = match cfg.baseline_ns {
        Some(b) => b,
        None => {
            notes.push(
                "no baseline given (--baseline-median-ns or a loopback run): t_CPU includes \
                 the transfer time, so the saturation prediction is a lower bound"
                    .into(),
            );
            0.0
        }
    };
    let lowest = runs
        .iter_mut()
        .min_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps))
        .expect("non-empty");
    let (method, t_cpu) = match (lowest.sheep_cycles, cfg.cpu_hz) {
        (Some(c), Some(hz)) => {
            positive("--cpu-hz", hz)?;
            (
                format!(
                    "resource model: ({c} sheep + {} c_IO) cycles at {hz} Hz",
                    cfg.c_io
                ),
                (c + cfg.c_io) / hz * 1e9,
            )
        }
        _ => {
            let m = median(&mut lowest.latency_ns).ok_or_else(|| ModelError::Input {
                name: "DIR",
                reason: format!(
                    "run {} has no latency samples to take the median of; keep records.nfr",
                    lowest.name
                ),
            })?;
            (
                format!(
                    "t_CPU = median latency of the lowest-rate run ({}) − baseline",
                    lowest.name
                ),
                fit_t_cpu_ns(m, baseline)?,
            )
        }
    };
    let predicted_sat = urllc_r_max(t_cpu, &cfg.interrupts)?.r_max_pps * cfg.cores;
    let lossy: Vec<f64> = runs
        .iter()
        .filter(|r| r.loss_ratio > 0.01)
        .map(|r| r.carried_pps)
        .collect();
    let measured_sat = nflab_analyze::crossrun::mean(&lossy);
    if measured_sat.is_none() {
        notes.push("no run lost more than 1 %: the saturation rate was not reached".into());
    }
    let max_carried = runs.iter().map(|r| r.carried_pps).fold(0.0, f64::max);
    let mut out = Vec::new();
    for r in runs.iter_mut() {
        positive("offered rate of a run (pps)", r.offered_pps)?;
        let packets = r
            .sent
            .unwrap_or(r.latency_ns.count())
            .clamp(10_000, cfg.sim_packets.max(10_000));
        let s = sim::simulate(&SimConfig {
            arrivals: if r.poisson {
                Arrivals::Poisson {
                    rate_pps: r.offered_pps,
                }
            } else {
                Arrivals::Cbr {
                    rate_pps: r.offered_pps,
                }
            },
            packets,
            warmup_packets: packets / 20,
            cores: 1,
            batch: cfg.batch.max(1),
            queue_capacity: cfg.queue_capacity.max(cfg.batch),
            service: Service {
                mean: ServiceMean::Linear {
                    fixed_ns: 0.0,
                    per_packet_ns: t_cpu / cfg.cores,
                },
                dist: ServiceDist::Deterministic,
            },
            wire_ns: baseline.round() as u64,
            seed: cfg.seed,
            keep_packets: true,
            ..SimConfig::default()
        })?;
        let mut predicted = Distribution::new(DEFAULT_EXACT_LIMIT, DEFAULT_HDR_DIGITS);
        for d in s.delivered.iter().skip(s.delivered.len() / 20) {
            predicted.record(d.rx_ns as i64 - d.tx_ns as i64);
        }
        let pred_mean = predicted.mean().unwrap_or(0.0);
        let pred_p50 = median(&mut predicted).unwrap_or(0.0);
        let meas_mean = r.latency_ns.mean();
        let p999 = Pct::parse("99.9").unwrap_or_else(|| unreachable!("a percentile"));
        let jsd = distribution_jsd(&mut r.latency_ns, &mut predicted, 64, p999);
        out.push(RunFit {
            name: r.name.clone(),
            offered_pps: r.offered_pps,
            measured_loss: r.loss_ratio,
            predicted_loss: s.stats.loss_probability,
            measured_mean_ns: meas_mean,
            predicted_mean_ns: pred_mean,
            measured_p50_ns: median(&mut r.latency_ns),
            predicted_p50_ns: pred_p50,
            latency_relative_error: meas_mean.and_then(|m| relative_error(m, pred_mean)),
            latency_jsd: jsd,
        });
    }
    Ok(FitReport {
        method,
        t_cpu_ns: t_cpu,
        baseline_ns: baseline,
        predicted_saturation_pps: predicted_sat,
        measured_saturation_pps: measured_sat,
        max_carried_pps: max_carried,
        saturation_relative_error: measured_sat.and_then(|m| relative_error(m, predicted_sat)),
        fitted_cycles_per_packet: match (measured_sat, cfg.cpu_hz) {
            (Some(m), Some(hz)) => Some(crate::resource::fit_cycles_per_packet(m, hz, cfg.cores)?),
            _ => None,
        },
        runs: out,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A "measured" run: the simulator with a known 2 µs per packet behind a
    /// 5 µs baseline, CBR at `rate`, queue 256.
    fn measured(rate: f64, seed: u64) -> RunObservation {
        let cfg = SimConfig {
            arrivals: Arrivals::Cbr { rate_pps: rate },
            packets: 20_000,
            warmup_packets: 1_000,
            batch: 32,
            queue_capacity: 256,
            service: Service {
                mean: ServiceMean::Linear {
                    fixed_ns: 0.0,
                    per_packet_ns: 2_000.0,
                },
                dist: ServiceDist::Deterministic,
            },
            wire_ns: 5_000,
            seed,
            keep_packets: true,
            ..SimConfig::default()
        };
        let s = sim::simulate(&cfg).unwrap();
        RunObservation {
            name: format!("{rate}"),
            offered_pps: rate,
            carried_pps: s.stats.throughput_pps,
            loss_ratio: s.stats.loss_probability,
            latency_ns: {
                let mut d = Distribution::new(u64::MAX, DEFAULT_HDR_DIGITS);
                s.delivered
                    .iter()
                    .for_each(|p| d.record((p.rx_ns - p.tx_ns) as i64));
                d
            },
            sheep_cycles: None,
            poisson: false,
            sent: Some(20_000),
        }
    }

    fn cfg() -> FitConfig {
        FitConfig {
            cpu_hz: Some(3e9),
            cores: 1.0,
            c_io: 0.0,
            baseline_ns: Some(5_000.0),
            batch: 32,
            queue_capacity: 256,
            interrupts: Vec::new(),
            sim_packets: 20_000,
            seed: 9,
        }
    }

    #[test]
    fn recovers_t_cpu_and_saturation() {
        let mut runs: Vec<_> = [50_000.0, 200_000.0, 400_000.0, 600_000.0]
            .iter()
            .map(|r| measured(*r, 1))
            .collect();
        let f = fit(&mut runs, &cfg()).unwrap();
        assert!((f.t_cpu_ns - 2_000.0).abs() < 1.0, "{}", f.t_cpu_ns);
        assert!((f.predicted_saturation_pps - 500_000.0).abs() < 500.0);
        let m = f.measured_saturation_pps.unwrap();
        assert!((m - 500_000.0).abs() / 5e5 < 0.01, "{m}");
        assert!(f.saturation_relative_error.unwrap() < 0.01);
        assert!((f.fitted_cycles_per_packet.unwrap() - 6_000.0).abs() < 60.0);
        // Above it the same queue loses the same share.
        let over = &f.runs[3];
        assert!(
            (over.predicted_loss - over.measured_loss).abs() < 0.01,
            "{over:?}"
        );
        // Below saturation the prediction reproduces the distribution.
        for r in &f.runs[..3] {
            assert!(r.latency_relative_error.unwrap() < 0.02, "{r:?}");
            assert!(r.latency_jsd.unwrap() < 0.05, "{r:?}");
        }
    }

    #[test]
    fn known_sheep_cycles_and_a_wrong_model_is_visible() {
        let mut runs: Vec<_> = [50_000.0, 200_000.0]
            .iter()
            .map(|r| measured(*r, 2))
            .collect();
        // Claim 3,000 cycles at 3 GHz = 1 µs: half the true cost.
        for r in &mut runs {
            r.sheep_cycles = Some(3_000.0);
        }
        let f = fit(&mut runs, &cfg()).unwrap();
        assert!(f.method.contains("resource model"));
        assert!((f.t_cpu_ns - 1_000.0).abs() < 1e-9);
        assert!(f.measured_saturation_pps.is_none());
        // The latency prediction is now off, and the metrics say so.
        assert!(f.runs[0].latency_relative_error.unwrap() > 0.1);
        assert!(f.runs[0].latency_jsd.unwrap() > 0.3);
    }

    #[test]
    fn empty_experiment_is_an_error() {
        let e = fit(&mut [], &cfg()).unwrap_err().to_string();
        assert!(e.contains("no runs"), "{e}");
    }
}
