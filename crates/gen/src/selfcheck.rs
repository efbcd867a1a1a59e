//! The generator's check of its own precision, measured where the packets arrive.
//!
//! Seed 000 §1.4/§3.3 (MoonGen's generator comparison) rates a generator by
//! *accuracy* — the achieved mean rate against the configured one — and *precision* —
//! how far individual inter-packet gaps (IPGs) stray from the configured gap, shown as an
//! IPG histogram and summarised by the mean squared error (ns²). Both are measured at
//! the receiver, because that is where a DuT sees the pattern.
//!
//! Here the configured gap of every pair of consecutive packets comes from the
//! deterministic schedule ([`crate::pattern`]), so the same check covers CBR (every
//! gap equal), bursts (zero gaps inside a burst), Poisson and replay: the error of a gap
//! is `(rx[i+1] - rx[i]) - (t[i+1] - t[i])`. Pairs with a lost packet in between are
//! skipped.
//!
//! Two warnings come out of it: the generator *turned bursty* (more than 1 % of the gaps
//! that should be at least 1 µs arrived at under a quarter of their configured length —
//! a software generator that falls behind catches up in batches, which seed 000 notes
//! deceptively lowers the MSE), and the generator *fell behind* (achieved rate more than
//! 0.1 % off the configured one).

use nflab_analyze::dist::Moments;
use serde::Serialize;

/// Share of gaps that may arrive compressed before the generator counts as bursty.
pub const BURSTY_FRACTION: f64 = 0.01;
/// Accuracy bound: |achieved / configured - 1| above this is "fell behind".
pub const ACCURACY_BOUND: f64 = 0.001;
/// Gaps configured shorter than this are not judged for burstiness (veth and the
/// kernel cannot resolve them).
const MIN_JUDGED_GAP_NS: u64 = 1_000;

/// One bucket of the IPG histogram.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Bucket {
    /// Lower edge, ns (inclusive).
    pub lo_ns: u64,
    /// Gaps in [lo_ns, lo_ns + width_ns).
    pub count: u64,
}

/// The self-check of one run (`gen.json` → `selfcheck`).
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct SelfCheck {
    /// Where the timestamps were taken, e.g. "receive side, kernel-software".
    pub measured_on: String,
    /// Packets of the probe stream used (measured part, received).
    pub packets: u64,
    /// Gaps between consecutive received packets used for precision.
    pub gaps: u64,
    /// Configured mean rate over the received span, packets/s; `None` when the schedule
    /// has no timing (`rate = "max"`).
    pub configured_pps: Option<f64>,
    /// Achieved rate over the same packets, packets/s.
    pub achieved_pps: f64,
    /// achieved / configured (1 = exact); `None` at `rate = "max"`.
    pub rate_accuracy: Option<f64>,
    /// The configured gap when it is constant (CBR), ns.
    pub configured_ipg_ns: Option<f64>,
    /// Mean received gap, ns.
    pub ipg_mean_ns: f64,
    /// Mean squared error of the received gaps against the configured ones, ns²; `None`
    /// at `rate = "max"`, where no gap is configured.
    pub ipg_mse_ns2: Option<f64>,
    /// Square root of the MSE, ns.
    pub ipg_rmse_ns: Option<f64>,
    /// Share of judged gaps that arrived at under a quarter of their configured length.
    pub compressed_gap_fraction: f64,
    /// Width of a histogram bucket, ns.
    pub histogram_width_ns: u64,
    /// Non-empty buckets of the received-gap histogram, in order.
    pub histogram: Vec<Bucket>,
    /// Problems found; empty when the generator was accurate and precise.
    pub warnings: Vec<String>,
}

/// Check a received probe stream against its schedule.
///
/// `received` holds `(n, rx_ns)` — the packet's index in the stream's schedule and its
/// receive time — in any order; `sched_ns[n]` is packet n's configured send time.
/// Packets whose index is beyond `sched_ns` are ignored.
pub fn check(received: &[(u64, u64)], sched_ns: &[u64], measured_on: &str) -> SelfCheck {
    let mut v: Vec<(u64, u64)> = received
        .iter()
        .copied()
        .filter(|(n, _)| (*n as usize) < sched_ns.len())
        .collect();
    v.sort_unstable();
    v.dedup_by_key(|x| x.0);
    let mut sc = SelfCheck {
        measured_on: measured_on.to_string(),
        packets: v.len() as u64,
        ..SelfCheck::default()
    };
    if v.len() < 2 {
        sc.warnings
            .push("fewer than 2 probe packets arrived: no self-check possible".into());
        return sc;
    }
    let (n0, r0) = v[0];
    let (n1, r1) = v[v.len() - 1];
    let sched_span = sched_ns[n1 as usize].saturating_sub(sched_ns[n0 as usize]) as f64;
    let rx_span = r1.saturating_sub(r0) as f64;
    let npk = (n1 - n0) as f64;
    // A schedule without timing (rate = "max") sends every packet at once: it has an
    // achieved rate but no configured one and no configured gaps to err from.
    let paced = sched_span > 0.0;
    if rx_span > 0.0 {
        sc.achieved_pps = npk * 1e9 / rx_span;
        if paced {
            sc.configured_pps = Some(npk * 1e9 / sched_span);
            sc.rate_accuracy = Some(sched_span / rx_span);
        }
    }

    let mut gaps: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for w in v.windows(2) {
        if w[1].0 == w[0].0 + 1 {
            let cfg = sched_ns[w[1].0 as usize] - sched_ns[w[0].0 as usize];
            gaps.push((w[1].1.saturating_sub(w[0].1), cfg));
        }
    }
    sc.gaps = gaps.len() as u64;
    if gaps.is_empty() {
        return sc;
    }
    let first_cfg = gaps[0].1;
    if gaps.iter().all(|g| g.1.abs_diff(first_cfg) <= 1) {
        let mut cfg = Moments::new();
        gaps.iter().for_each(|g| cfg.record(g.1 as i64));
        sc.configured_ipg_ns = cfg.mean();
    }
    // Mean and mean squared error from the engine's moments (exact sums).
    let mut rx_gaps = Moments::new();
    let mut errors = Moments::new();
    let mut judged = 0u64;
    let mut compressed = 0u64;
    for &(rx, cfg) in &gaps {
        rx_gaps.record(rx as i64);
        errors.record(rx as i64 - cfg as i64);
        if cfg >= MIN_JUDGED_GAP_NS {
            judged += 1;
            if rx * 4 < cfg {
                compressed += 1;
            }
        }
    }
    sc.ipg_mean_ns = rx_gaps.mean().unwrap_or(0.0);
    if paced {
        // E[e²] = Var(e) + E[e]².
        let mse = errors.stdev().unwrap_or(0.0).powi(2) + errors.mean().unwrap_or(0.0).powi(2);
        sc.ipg_mse_ns2 = Some(mse);
        sc.ipg_rmse_ns = Some(mse.sqrt());
    }
    sc.compressed_gap_fraction = if judged > 0 {
        compressed as f64 / judged as f64
    } else {
        0.0
    };
    // About 100 buckets across the mean gap, on a round width.
    let width = [10u64, 50, 100, 500, 1_000, 5_000, 10_000, 50_000, 100_000]
        .into_iter()
        .find(|w| (*w as f64) * 100.0 >= sc.ipg_mean_ns)
        .unwrap_or(1_000_000);
    sc.histogram_width_ns = width;
    let mut hist = std::collections::BTreeMap::<u64, u64>::new();
    for &(rx, _) in &gaps {
        *hist.entry(rx / width * width).or_default() += 1;
    }
    sc.histogram = hist
        .into_iter()
        .map(|(lo_ns, count)| Bucket { lo_ns, count })
        .collect();

    if sc.compressed_gap_fraction > BURSTY_FRACTION {
        sc.warnings.push(format!(
            "the generator turned bursty: {:.1} % of the gaps arrived at under a quarter of their configured length",
            sc.compressed_gap_fraction * 100.0
        ));
    }
    if let (Some(acc), Some(configured)) = (sc.rate_accuracy, sc.configured_pps) {
        if (acc - 1.0).abs() > ACCURACY_BOUND {
            sc.warnings.push(format!(
                "the generator fell behind or ran ahead: it achieved {:.0} pps of the configured {configured:.0} pps ({:+.3} %)",
                sc.achieved_pps,
                (acc - 1.0) * 100.0
            ));
        }
    }
    sc
}

/// Kolmogorov–Smirnov test of `samples` against an exponential distribution with rate
/// `lambda` (per unit of the samples); returns the asymptotic p-value (Kolmogorov
/// distribution with Stephens' small-sample correction). The test is the engine's
/// (`nflab_analyze::ks::ks_exponential`).
pub fn exponential_ks_pvalue(samples: &[f64], lambda: f64) -> f64 {
    nflab_analyze::ks::ks_exponential(&mut samples.to_vec(), 1.0 / lambda).1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_cbr_has_zero_mse_and_accuracy_one() {
        let sched: Vec<u64> = (0..1000).map(|i| i * 10_000).collect();
        let rx: Vec<(u64, u64)> = (0..1000).map(|i| (i, 5_000_000 + i * 10_000)).collect();
        let sc = check(&rx, &sched, "test");
        assert_eq!(sc.ipg_mse_ns2, Some(0.0));
        assert!((sc.rate_accuracy.unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(sc.configured_ipg_ns, Some(10_000.0));
        assert_eq!(
            sc.histogram,
            [Bucket {
                lo_ns: 10_000,
                count: 999
            }]
        );
        assert!(sc.warnings.is_empty());
    }

    #[test]
    fn mse_matches_an_independent_computation() {
        // Gaps alternate 9 µs / 11 µs around a 10 µs schedule: every error is ±1000 ns,
        // so the MSE is exactly 1e6 ns² and the mean rate is still exact.
        let sched: Vec<u64> = (0..101).map(|i| i * 10_000).collect();
        let rx: Vec<(u64, u64)> = (0..101u64)
            .map(|i| (i, i * 10_000 - if i % 2 == 1 { 1_000 } else { 0 }))
            .collect();
        let sc = check(&rx, &sched, "test");
        let mse = sc.ipg_mse_ns2.unwrap();
        assert!((mse - 1e6).abs() < 1e-6, "{mse}");
        assert!((sc.rate_accuracy.unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(sc.histogram.len(), 2);
    }

    #[test]
    fn bursty_and_slow_generators_are_flagged() {
        // Pairs arrive back to back, every other gap doubled: bursts of two.
        let sched: Vec<u64> = (0..1000).map(|i| i * 10_000).collect();
        let rx: Vec<(u64, u64)> = (0..1000).map(|i| (i, (i / 2) * 20_000)).collect();
        let sc = check(&rx, &sched, "test");
        assert!((sc.compressed_gap_fraction - 0.5).abs() < 0.01);
        assert!(
            sc.warnings.iter().any(|w| w.contains("bursty")),
            "{:?}",
            sc.warnings
        );
        // 1 % slow.
        let rx: Vec<(u64, u64)> = (0..1000).map(|i| (i, i * 10_100)).collect();
        let sc = check(&rx, &sched, "test");
        assert!((sc.rate_accuracy.unwrap() - 1.0 / 1.01).abs() < 1e-9);
        assert!(sc.warnings.iter().any(|w| w.contains("fell behind")));
    }

    #[test]
    fn losses_are_skipped_not_counted_as_long_gaps() {
        let sched: Vec<u64> = (0..10).map(|i| i * 1_000).collect();
        let rx: Vec<(u64, u64)> = [0u64, 1, 2, 5, 6].iter().map(|&i| (i, i * 1_000)).collect();
        let sc = check(&rx, &sched, "test");
        assert_eq!(sc.gaps, 3);
        assert_eq!(sc.ipg_mse_ns2, Some(0.0));
    }

    #[test]
    fn max_rate_has_an_achieved_rate_but_nothing_configured() {
        // rate = "max": every slot at 0. 1001 packets over 1 ms arrive at 1 Mpps.
        let sched = vec![0u64; 1001];
        let rx: Vec<(u64, u64)> = (0..1001u64).map(|i| (i, 7_000 + i * 1_000)).collect();
        let sc = check(&rx, &sched, "test");
        assert!((sc.achieved_pps - 1e6).abs() < 1e-6, "{}", sc.achieved_pps);
        assert_eq!(sc.configured_pps, None);
        assert_eq!(sc.rate_accuracy, None);
        assert_eq!(sc.ipg_mse_ns2, None);
        assert_eq!(sc.ipg_rmse_ns, None);
        assert_eq!(sc.ipg_mean_ns, 1_000.0);
        assert!(sc.warnings.is_empty(), "{:?}", sc.warnings);
    }

    #[test]
    fn ks_accepts_exponential_and_rejects_uniform() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(42);
        let exp: Vec<f64> = (0..5000)
            .map(|_| -(1.0 - rng.gen::<f64>()).ln() * 2.0)
            .collect();
        assert!(exponential_ks_pvalue(&exp, 0.5) > 0.01);
        let uni: Vec<f64> = (0..5000).map(|_| rng.gen::<f64>() * 4.0).collect();
        assert!(exponential_ks_pvalue(&uni, 0.5) < 1e-6);
    }
}
