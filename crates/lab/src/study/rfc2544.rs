//! RFC 2544 procedures: throughput by binary search (§26.1), latency at the
//! found throughput (§26.2), and the overload knee of seed 000 (the rate at
//! which loss starts and the median latency jumps by orders of magnitude).
//!
//! Every trial is an ordinary run with its own directory, records and
//! summary, so a search can be re-analysed like any experiment; the verdicts
//! go to `rfc2544.json`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Serialize;

use crate::error::LabError;
pub use crate::spec::rfc2544::{Procedure, Rfc2544Section};
use crate::spec::{Rate, RunPlan};
use crate::study::results::RunRow;

/// A trial whose generator achieved less than this share of the offered
/// rate did not test the DuT at that rate.
pub const GENERATOR_SHORTFALL: f64 = 0.99;

/// One trial of a search.
#[derive(Debug, Clone, Serialize)]
pub struct Trial {
    /// Run directory name.
    pub run: String,
    /// Offered rate.
    pub rate_pps: f64,
    /// Measured loss ratio.
    pub loss_ratio: f64,
    /// Loss within tolerance and the rate really offered.
    pub pass: bool,
    /// The generator sent more than 1 % below the offered rate: the trial
    /// says nothing about the DuT at this rate and counts as a failure.
    pub generator_limited: bool,
    /// Rate the generator achieved.
    pub tx_pps: Option<f64>,
    /// Median latency, ns.
    pub p50_ns: Option<i64>,
    /// 99th percentile latency, ns.
    pub p99_ns: Option<i64>,
}

/// The verdict of a procedure for one parameter combination.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// Which combination of the sweep.
    pub combination: usize,
    /// Its swept values.
    pub params: std::collections::BTreeMap<String, toml::Value>,
    /// The procedure.
    pub procedure: Procedure,
    /// Highest passing rate found (throughput, latency); None if even the
    /// minimum rate failed.
    pub throughput_pps: Option<f64>,
    /// Knee: the lowest rate with loss above the tolerance.
    pub loss_onset_pps: Option<f64>,
    /// Knee: median latency above the onset divided by the median below it.
    pub latency_jump: Option<f64>,
    /// Latency procedure: the run measured at the fraction of throughput.
    pub latency_run: Option<String>,
    /// Back-to-back: the longest burst that passed.
    pub back_to_back_frames: Option<u64>,
    /// Every trial in order.
    pub trials: Vec<Trial>,
    /// The search was cut short by a signal.
    pub interrupted: bool,
}

/// Runs one trial; given the plan (with rate and duration set) and its index.
pub type TrialRunner<'a> = dyn FnMut(&RunPlan) -> Result<RunRow, LabError> + 'a;

/// One trial of the back-to-back search: exactly one burst of `frames`
/// frames, sent as fast as the generator can, in a trial of `trial_s`.
fn burst_plan(base: &RunPlan, index: usize, frames: u64, trial_s: f64) -> RunPlan {
    let mut p = trial_plan(base, index, frames as f64 / trial_s, trial_s);
    p.spec.traffic.pattern = crate::spec::Pattern::Burst;
    p.spec.traffic.burst = frames.min(u32::MAX as u64) as u32;
    p.spec.traffic.warmup_s = 0.0;
    p.params
        .insert("traffic.burst".into(), toml::Value::Integer(frames as i64));
    p
}

fn trial_plan(base: &RunPlan, index: usize, rate: f64, trial_s: f64) -> RunPlan {
    let mut p = base.clone();
    p.index = index;
    p.spec.traffic.rate_pps = Rate::Pps(rate);
    p.spec.traffic.duration_s = trial_s;
    p.params
        .insert("traffic.rate_pps".into(), toml::Value::Float(rate));
    p
}

/// Carry out the procedure for one combination. `next_index` numbers the
/// run directories across combinations.
pub fn run_procedure(
    cfg: &Rfc2544Section,
    base: &RunPlan,
    next_index: &mut usize,
    stop: &Arc<AtomicBool>,
    run_trial: &mut TrialRunner<'_>,
) -> Result<Verdict, LabError> {
    let mut verdict = Verdict {
        combination: base.combination,
        params: base.params.clone(),
        procedure: cfg.procedure,
        throughput_pps: None,
        loss_onset_pps: None,
        latency_jump: None,
        latency_run: None,
        back_to_back_frames: None,
        trials: Vec::new(),
        interrupted: false,
    };
    // One trial: at a rate, or (back-to-back) one burst of that many frames.
    // Ok(None) when a signal stopped it.
    let back_to_back = cfg.procedure == Procedure::BackToBack;
    let mut trial = |x: f64, verdict: &mut Verdict| -> Result<Option<bool>, LabError> {
        if stop.load(Ordering::Relaxed) {
            verdict.interrupted = true;
            return Ok(None);
        }
        let plan = if back_to_back {
            burst_plan(base, *next_index, x as u64, cfg.trial_s)
        } else {
            trial_plan(base, *next_index, x, cfg.trial_s)
        };
        *next_index += 1;
        let row = run_trial(&plan)?;
        let s = &row.summary;
        if s.interrupted {
            verdict.interrupted = true;
            return Ok(None);
        }
        let rate = plan.spec.traffic.rate_pps.pps().unwrap_or(0.0);
        // A burst's offered rate is its own; only loss matters there.
        let generator_limited = !back_to_back
            && s.rate
                .tx_pps
                .is_none_or(|tx| tx < rate * GENERATOR_SHORTFALL);
        let lossless = if back_to_back {
            s.packets.lost == 0
        } else {
            s.loss_ratio <= cfg.loss_tolerance
        };
        let pass = lossless && s.packets.received > 0 && !generator_limited;
        verdict.trials.push(Trial {
            run: row.run.clone(),
            rate_pps: rate,
            loss_ratio: s.loss_ratio,
            pass,
            generator_limited,
            tx_pps: s.rate.tx_pps,
            p50_ns: s.latency_ns.p50,
            p99_ns: s.latency_ns.p99,
        });
        Ok(Some(pass))
    };

    match cfg.procedure {
        Procedure::BackToBack => {
            let found = search(
                cfg.max_burst as f64,
                cfg.min_burst as f64,
                cfg.burst_resolution as f64,
                |l, h| ((l + h) / 2.0).floor(),
                &mut |x| trial(x, &mut verdict),
            )?;
            verdict.back_to_back_frames = found.map(|f| f as u64);
        }
        Procedure::Throughput | Procedure::Latency => {
            let found = search(
                cfg.max_rate_pps,
                cfg.min_rate_pps,
                cfg.resolution_pps,
                |l, h| ((l + h) / 2.0).round(),
                &mut |x| trial(x, &mut verdict),
            )?;
            verdict.throughput_pps = found;
            if cfg.procedure == Procedure::Latency && !verdict.interrupted {
                if let Some(t) = found {
                    let before = verdict.trials.len();
                    trial((t * cfg.latency_fraction).max(1.0), &mut verdict)?;
                    verdict.latency_run = verdict.trials.get(before).map(|t| t.run.clone());
                }
            }
        }
        Procedure::Knee => {
            let n = cfg.knee_steps;
            let ratio = (cfg.max_rate_pps / cfg.min_rate_pps).powf(1.0 / (n - 1) as f64);
            for i in 0..n {
                let rate = (cfg.min_rate_pps * ratio.powi(i as i32)).round();
                if trial(rate, &mut verdict)?.is_none() {
                    break;
                }
            }
            if let Some(k) = verdict.trials.iter().position(|t| !t.pass) {
                verdict.loss_onset_pps = Some(verdict.trials[k].rate_pps);
                if k > 0 {
                    if let (Some(a), Some(b)) =
                        (verdict.trials[k - 1].p50_ns, verdict.trials[k].p50_ns)
                    {
                        if a > 0 {
                            verdict.latency_jump = Some(b as f64 / a as f64);
                        }
                    }
                }
            }
        }
    }
    Ok(verdict)
}

/// RFC 2544 §26.1's search: a trial at the maximum; if it fails, one at the
/// minimum; then halve the interval between the highest pass and the lowest
/// failure until it is `resolution` wide. Returns the highest pass, if any;
/// a stopped trial ends the search with what was found so far.
fn search(
    max: f64,
    min: f64,
    resolution: f64,
    midpoint: impl Fn(f64, f64) -> f64,
    trial: &mut dyn FnMut(f64) -> Result<Option<bool>, LabError>,
) -> Result<Option<f64>, LabError> {
    match trial(max)? {
        Some(true) => return Ok(Some(max)),
        None => return Ok(None),
        Some(false) => {}
    }
    if trial(min)? != Some(true) {
        return Ok(None);
    }
    let (mut lo, mut hi) = (min, max);
    while hi - lo > resolution {
        let mid = midpoint(lo, hi);
        match trial(mid)? {
            None => break,
            Some(true) => lo = mid,
            Some(false) => hi = mid,
        }
    }
    Ok(Some(lo))
}

/// Write `rfc2544.json`.
pub fn write_verdicts(dir: &Path, verdicts: &[Verdict]) -> Result<(), LabError> {
    crate::artifacts::files::write_json(&dir.join("rfc2544.json"), &verdicts)
}

/// One line per verdict for the terminal.
pub fn format_verdicts(verdicts: &[Verdict]) -> String {
    use crate::study::results::human_pps;
    let mut out = String::new();
    for v in verdicts {
        let params: Vec<String> = v
            .params
            .iter()
            .filter(|(k, _)| *k != "traffic.rate_pps")
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let what = match v.procedure {
            Procedure::Throughput | Procedure::Latency => match v.throughput_pps {
                Some(t) => format!("throughput {}", human_pps(Some(t))),
                None => "throughput below the minimum rate".into(),
            },
            Procedure::BackToBack => match v.back_to_back_frames {
                Some(b) => format!("longest lossless burst {b} frames"),
                None => "even the shortest burst lost frames".into(),
            },
            Procedure::Knee => match (v.loss_onset_pps, v.latency_jump) {
                (Some(r), Some(j)) => format!(
                    "loss starts at {}, median latency ×{j:.1}",
                    human_pps(Some(r))
                ),
                (Some(r), None) => format!("loss starts at {}", human_pps(Some(r))),
                (None, _) => "no loss up to the maximum rate".into(),
            },
        };
        out.push_str(&format!(
            "RFC 2544 {:?}{}: {what} ({} trials{})\n",
            v.procedure,
            if params.is_empty() {
                String::new()
            } else {
                format!(" [{}]", params.join(" "))
            },
            v.trials.len(),
            if v.interrupted { ", interrupted" } else { "" }
        ));
        if let Some(g) = v
            .trials
            .iter()
            .filter(|t| t.generator_limited)
            .map(|t| t.tx_pps.unwrap_or(0.0))
            .reduce(f64::max)
        {
            out.push_str(&format!(
                "  note: the generator reached only {} where more was offered: rates above that were not tested, so the result is bounded by this host's generator, not the DuT\n",
                human_pps(Some(g))
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Spec;
    use nflab_analyze::Summary;

    const SPEC: &str = "[experiment]\nname = \"t\"\n[dut]\nkind = \"loopback\"\n";

    fn cfg(procedure: Procedure) -> Rfc2544Section {
        Rfc2544Section {
            procedure,
            loss_tolerance: 0.0,
            resolution_pps: 1_000.0,
            min_rate_pps: 1_000.0,
            max_rate_pps: 100_000.0,
            trial_s: 1.0,
            latency_fraction: 0.5,
            knee_steps: 5,
            min_burst: 16,
            max_burst: 4096,
            burst_resolution: 16,
        }
    }

    /// A simulated DuT that loses packets above `capacity` pps and whose
    /// median latency jumps 100× when overloaded.
    fn dut(capacity: f64) -> impl FnMut(&RunPlan) -> Result<RunRow, LabError> {
        move |plan: &RunPlan| {
            let rate = plan.spec.traffic.rate_pps.pps().unwrap();
            let mut s = Summary::default();
            s.packets.sent = rate as u64;
            s.rate.tx_pps = Some(rate);
            s.packets.received = rate.min(capacity) as u64;
            s.loss_ratio = 1.0 - rate.min(capacity) / rate;
            s.latency_ns.p50 = Some(if rate > capacity { 500_000 } else { 5_000 });
            Ok(RunRow::new(plan, &s))
        }
    }

    fn base() -> RunPlan {
        Spec::parse(SPEC, "t")
            .unwrap()
            .expand(SPEC)
            .unwrap()
            .remove(0)
    }

    #[test]
    fn binary_search_finds_capacity_within_resolution() {
        for capacity in [1_500.0, 37_123.0, 99_999.0] {
            let mut idx = 0;
            let v = run_procedure(
                &cfg(Procedure::Throughput),
                &base(),
                &mut idx,
                &Arc::new(AtomicBool::new(false)),
                &mut dut(capacity),
            )
            .unwrap();
            let t = v.throughput_pps.unwrap();
            assert!(
                t <= capacity && capacity - t <= 1_000.0,
                "capacity {capacity}: found {t}"
            );
            assert_eq!(idx, v.trials.len());
            // Every passing trial is at or below capacity, every failing one above.
            assert!(v
                .trials
                .iter()
                .all(|tr| tr.pass == (tr.rate_pps <= capacity)));
        }
    }

    #[test]
    fn max_rate_passing_ends_at_once_and_min_failing_finds_nothing() {
        let mut idx = 0;
        let stop = Arc::new(AtomicBool::new(false));
        let v = run_procedure(
            &cfg(Procedure::Throughput),
            &base(),
            &mut idx,
            &stop,
            &mut dut(1e9),
        )
        .unwrap();
        assert_eq!((v.throughput_pps, v.trials.len()), (Some(100_000.0), 1));
        let v = run_procedure(
            &cfg(Procedure::Throughput),
            &base(),
            &mut idx,
            &stop,
            &mut dut(10.0),
        )
        .unwrap();
        assert_eq!((v.throughput_pps, v.trials.len()), (None, 2));
    }

    #[test]
    fn a_generator_that_cannot_offer_the_rate_fails_the_trial() {
        // Lossless DuT, but the generator tops out at 60 kpps.
        let mut inner = dut(1e9);
        let mut limited = |plan: &RunPlan| {
            let mut row = inner(plan)?;
            let r = plan.spec.traffic.rate_pps.pps().unwrap();
            row.summary.rate.tx_pps = Some(r.min(60_000.0));
            Ok(row)
        };
        let mut idx = 0;
        let v = run_procedure(
            &cfg(Procedure::Throughput),
            &base(),
            &mut idx,
            &Arc::new(AtomicBool::new(false)),
            &mut limited,
        )
        .unwrap();
        let t = v.throughput_pps.unwrap();
        // Within the 1 % shortfall allowance of the generator's ceiling.
        assert!(t <= 60_000.0 / GENERATOR_SHORTFALL && t > 59_000.0, "{t}");
        assert!(v.trials[0].generator_limited && !v.trials[0].pass);
        assert!(format_verdicts(&[v]).contains("generator reached only"));
    }

    #[test]
    fn latency_runs_at_the_fraction() {
        let mut idx = 0;
        let v = run_procedure(
            &cfg(Procedure::Latency),
            &base(),
            &mut idx,
            &Arc::new(AtomicBool::new(false)),
            &mut dut(50_000.0),
        )
        .unwrap();
        let t = v.throughput_pps.unwrap();
        let last = v.trials.last().unwrap();
        assert_eq!(last.rate_pps, (t * 0.5).max(1.0));
        assert_eq!(v.latency_run.as_deref(), Some(last.run.as_str()));
    }

    #[test]
    fn back_to_back_finds_the_longest_lossless_burst() {
        // A DuT with a 1000-frame buffer: a burst longer than that loses frames.
        let mut buffer = |plan: &RunPlan| {
            assert_eq!(plan.spec.traffic.pattern, crate::spec::Pattern::Burst);
            let frames = plan.spec.traffic.burst as u64;
            // One burst per trial: rate × duration = frames.
            let sent = (plan.spec.traffic.rate_pps.pps().unwrap() * plan.spec.traffic.duration_s)
                .round() as u64;
            assert_eq!(sent, frames);
            let mut s = Summary::default();
            s.packets.sent = frames;
            s.packets.received = frames.min(1000);
            s.packets.lost = frames - s.packets.received;
            Ok(RunRow::new(plan, &s))
        };
        let mut idx = 0;
        let v = run_procedure(
            &cfg(Procedure::BackToBack),
            &base(),
            &mut idx,
            &Arc::new(AtomicBool::new(false)),
            &mut buffer,
        )
        .unwrap();
        let b = v.back_to_back_frames.unwrap();
        assert!(b <= 1000 && 1000 - b <= 16, "{b}");
        assert!(format_verdicts(&[v]).contains("longest lossless burst"));
    }

    #[test]
    fn knee_finds_loss_onset_and_jump() {
        let mut idx = 0;
        let v = run_procedure(
            &cfg(Procedure::Knee),
            &base(),
            &mut idx,
            &Arc::new(AtomicBool::new(false)),
            &mut dut(20_000.0),
        )
        .unwrap();
        // Rates 1k, 3.16k, 10k, 31.6k, 100k: loss starts at 31.6k.
        assert_eq!(v.trials.len(), 5);
        assert_eq!(v.loss_onset_pps, Some(31_623.0));
        assert_eq!(v.latency_jump, Some(100.0));
    }

    #[test]
    fn bad_values_name_the_key() {
        let mut c = cfg(Procedure::Throughput);
        c.loss_tolerance = 1.5;
        assert!(c.validate().unwrap_err().contains("rfc2544.loss_tolerance"));
        let mut c = cfg(Procedure::Throughput);
        c.min_rate_pps = 1e6;
        assert!(c.validate().unwrap_err().contains("min_rate_pps"));
    }
}
