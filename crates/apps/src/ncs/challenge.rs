//! The summary of an NCSbench experiment across its runs,
//! `ncs-challenge.json`: per configuration (sweep point) how many runs kept
//! the plant up for all periods, as a fraction with its 95 % Clopper–Pearson
//! interval, the losses and d_N medians as means with Student-t intervals
//! (all from `nflab-analyze`), and, when one numeric parameter is swept (the
//! challenge search: `dut.link.delay_us`, a loss rate), the bracket of the
//! failure point: the largest value under which every run stayed up and the
//! smallest at which one fell. With the host's timer floor measured
//! alongside (`timer-floor.json`, from `nflab doctor --timer-out`), each
//! configuration's pooled d_N is also composed with it: the d_N tail a link
//! that holds every frame for the floor's hold cannot beat on this host.

use std::collections::BTreeMap;

use nflab_analyze::crossrun::mean_t_ci;
use nflab_analyze::order_ci::quantile_ci_of_sorted;
use nflab_analyze::proportion::{clopper_pearson, Proportion};
use nflab_analyze::sum_quantile::independent_sum_quantile;
use nflab_analyze::Pct;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::kpi::{delay_stats, DelayStats};

/// The file of an artifact tree that holds the host's timer floor.
pub const TIMER_FLOOR_FILE: &str = "timer-floor.json";

/// Confidence level of every interval here.
pub const LEVEL: f64 = 0.95;

/// What the summary needs of one run (its `params.json` and `ncs.json`).
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// Run directory name, `NNN`.
    pub run: String,
    /// Index of its parameter combination.
    pub combination: usize,
    /// Its swept values, key as in `[sweep]`.
    pub sweep: BTreeMap<String, Value>,
    /// The plant fell.
    pub fell: bool,
    /// Actuations lost or late.
    pub losses: u64,
    /// Periods run.
    pub periods_completed: u64,
    /// Periods asked for.
    pub periods: u64,
    /// d_N's median, ms, when the run had one.
    pub d_n_median_ms: Option<f64>,
    /// d_N of each period whose actuation came in time, ns (`ncs-periods.csv`).
    pub d_n_ns: Vec<i64>,
}

impl RunOutcome {
    /// Up for all its periods: no fall and every period run.
    pub fn stayed_up(&self) -> bool {
        !self.fell && self.periods_completed >= self.periods
    }
}

/// A mean over runs with its Student-t interval (none for one run).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Mean {
    /// Mean.
    pub mean: f64,
    /// Interval `[lo, hi]` at [`LEVEL`], for two runs or more.
    pub ci95: Option<[f64; 2]>,
}

fn mean_of(values: &[f64]) -> Option<Mean> {
    match values {
        [] => None,
        [v] => Some(Mean {
            mean: *v,
            ci95: None,
        }),
        _ => mean_t_ci(values, LEVEL).map(|i| Mean {
            mean: i.mean,
            ci95: Some([i.lo, i.hi]),
        }),
    }
}

/// One configuration's runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Configuration {
    /// Its swept values.
    pub sweep: BTreeMap<String, Value>,
    /// Its runs, `NNN`.
    pub runs: Vec<String>,
    /// Runs that kept the plant up for all periods, of all runs, with the
    /// Clopper–Pearson interval of the fraction.
    pub stayed_up: Proportion,
    /// Runs whose plant fell.
    pub fell: u64,
    /// Losses per run.
    pub losses: Option<Mean>,
    /// d_N median per run, ms.
    pub d_n_median_ms: Option<Mean>,
    /// d_N over the periods of all its runs together, ms (as one run's
    /// `delays_ms.d_N` in `ncs.json`), with how many periods that is.
    pub d_n_pooled_ms: Option<DelayStats>,
    /// Periods in `d_n_pooled_ms`.
    pub d_n_pooled_periods: u64,
    /// The 95 % interval of the pooled d_N's p99.9, `[lo, hi]` ms: the order
    /// statistics that bound it (`nflab_analyze::order_ci`), as wide as a
    /// tail's few values make it — what a p99.9 is compared against a floor with.
    pub d_n_pooled_p99_9_ci95_ms: Option<[f64; 2]>,
}

/// Where the plant stops surviving along the one swept parameter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bracket {
    /// The swept key.
    pub key: String,
    /// The largest value below the first failure at which every run stayed
    /// up (`None`: it failed at the smallest value already).
    pub largest_all_up: Option<f64>,
    /// The smallest value at which a run did not stay up (`None`: every run
    /// stayed up, the failure point lies beyond the sweep).
    pub smallest_any_down: Option<f64>,
    /// `smallest_any_down − largest_all_up`, when both exist.
    pub width: Option<f64>,
    /// Values above the first failure at which every run stayed up again
    /// (a failure point that is not sharp, or too few repetitions).
    pub up_again_above: Vec<f64>,
}

/// `ncs-challenge.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Challenge {
    /// Confidence level of the intervals.
    pub level: f64,
    /// Runs summarized.
    pub runs: u64,
    /// Runs that stayed up.
    pub stayed_up: u64,
    /// Per configuration, in combination order.
    pub configurations: Vec<Configuration>,
    /// The failure point along the swept parameter, when exactly one
    /// numeric parameter is swept.
    pub bracket: Option<Bracket>,
    /// Why there is no bracket, or other remarks.
    pub notes: Vec<String>,
    /// The host's timer floor composed with each configuration, when the
    /// tree holds one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timer_floor: Option<TimerFloorSummary>,
}

/// The host's timer floor as `nflab doctor --timer-out` writes it (the
/// fields read here): how long one hold was, and per period half the
/// lateness of its two holds (what two timed link crossings add to d_N).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TimerFloorSample {
    /// One hold, µs (the link delay it stands for).
    pub hold_us: f64,
    /// Half the two holds' lateness, per period, ns.
    pub half_excess_ns: Vec<i64>,
}

/// `timer_floor` of `ncs-challenge.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimerFloorSummary {
    /// One hold, µs.
    pub hold_us: f64,
    /// Periods the floor was measured over.
    pub periods: u64,
    /// The half excess of two holds, ms.
    pub two_hold_half_excess_ms: Option<DelayStats>,
    /// Per configuration (in the order of `configurations`): `hold_us` plus
    /// the nearest-rank p99.9 of its pooled d_N plus the half excess, the two
    /// taken as independent (every pair of a period's d_N and a floor
    /// period), ms. For a configuration whose link has no delay — the path's
    /// own floor — this is the d_N p99.9 below which a link holding each
    /// frame for `hold_us` cannot get on this host.
    pub d_n_p99_9_floor_ms: Vec<Option<f64>>,
}

/// The summary of `runs`, composed with the host's `timer` floor if given.
pub fn summarize(runs: &[RunOutcome], timer: Option<&TimerFloorSample>) -> Challenge {
    let mut by_combination: BTreeMap<usize, Vec<&RunOutcome>> = BTreeMap::new();
    for r in runs {
        by_combination.entry(r.combination).or_default().push(r);
    }
    // Each configuration's d_N over all its runs' periods, ascending.
    let pooled: Vec<Vec<i64>> = by_combination
        .values()
        .map(|rs| {
            let mut v: Vec<i64> = rs.iter().flat_map(|r| r.d_n_ns.iter().copied()).collect();
            v.sort_unstable();
            v
        })
        .collect();
    let configurations: Vec<Configuration> = by_combination
        .values()
        .zip(&pooled)
        .filter_map(|(rs, pooled)| {
            let up = rs.iter().filter(|r| r.stayed_up()).count() as u64;
            let losses: Vec<f64> = rs.iter().map(|r| r.losses as f64).collect();
            let d_n: Vec<f64> = rs.iter().filter_map(|r| r.d_n_median_ms).collect();
            Some(Configuration {
                sweep: rs[0].sweep.clone(),
                runs: rs.iter().map(|r| r.run.clone()).collect(),
                stayed_up: clopper_pearson(up, rs.len() as u64, LEVEL)?,
                fell: rs.iter().filter(|r| r.fell).count() as u64,
                losses: mean_of(&losses),
                d_n_median_ms: mean_of(&d_n),
                d_n_pooled_ms: delay_stats(pooled),
                d_n_pooled_periods: pooled.len() as u64,
                d_n_pooled_p99_9_ci95_ms: quantile_ci_of_sorted(pooled, 0.999, LEVEL)
                    .map(|(lo, hi)| [lo as f64 / 1e6, hi as f64 / 1e6]),
            })
        })
        .collect();
    let mut notes = Vec::new();
    let bracket = bracket(&configurations, &mut notes);
    let timer_floor = timer.map(|t| {
        let p999 = Pct::parse("99.9").expect("valid percentile");
        TimerFloorSummary {
            hold_us: t.hold_us,
            periods: t.half_excess_ns.len() as u64,
            two_hold_half_excess_ms: delay_stats(&t.half_excess_ns),
            d_n_p99_9_floor_ms: pooled
                .iter()
                .map(|d_n| {
                    independent_sum_quantile(d_n, &t.half_excess_ns, p999)
                        .map(|ns| t.hold_us / 1e3 + ns as f64 / 1e6)
                })
                .collect(),
        }
    });
    Challenge {
        level: LEVEL,
        runs: runs.len() as u64,
        stayed_up: runs.iter().filter(|r| r.stayed_up()).count() as u64,
        configurations,
        bracket,
        notes,
        timer_floor,
    }
}

fn bracket(configs: &[Configuration], notes: &mut Vec<String>) -> Option<Bracket> {
    let keys: Vec<&String> = configs.first()?.sweep.keys().collect();
    let [key] = keys.as_slice() else {
        notes.push(format!(
            "no failure bracket: it needs exactly one swept parameter, this experiment sweeps {}",
            if keys.is_empty() {
                "none".to_string()
            } else {
                keys.iter()
                    .map(|k| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ));
        return None;
    };
    let mut points: Vec<(f64, bool)> = Vec::new();
    for c in configs {
        let Some(v) = c.sweep.get(*key).and_then(Value::as_f64) else {
            notes.push(format!(
                "no failure bracket: {key} is not swept over numbers"
            ));
            return None;
        };
        points.push((v, c.stayed_up.successes == c.stayed_up.n));
    }
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let first_down = points.iter().position(|p| !p.1);
    let (largest_all_up, smallest_any_down, up_again_above) = match first_down {
        None => (points.last().map(|p| p.0), None, Vec::new()),
        Some(i) => (
            i.checked_sub(1).map(|j| points[j].0),
            Some(points[i].0),
            points[i + 1..]
                .iter()
                .filter(|p| p.1)
                .map(|p| p.0)
                .collect(),
        ),
    };
    Some(Bracket {
        key: key.to_string(),
        largest_all_up,
        smallest_any_down,
        width: largest_all_up.zip(smallest_any_down).map(|(a, b)| b - a),
        up_again_above,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(i: usize, combination: usize, delay: u64, fell: bool, losses: u64) -> RunOutcome {
        RunOutcome {
            run: format!("{i:03}"),
            combination,
            sweep: [("dut.link.delay_us".to_string(), Value::from(delay))].into(),
            fell,
            losses,
            periods_completed: if fell { 300 } else { 1400 },
            periods: 1400,
            d_n_median_ms: Some(delay as f64 / 1000.0 + 0.1),
            d_n_ns: Vec::new(),
        }
    }

    #[test]
    fn fractions_intervals_and_the_bracket_of_a_delay_sweep() {
        // 3 repetitions at 12, 13, 14, 15 ms: all up, all up, 1 of 3 fell, all fell.
        let falls = [[false; 3], [false; 3], [false, true, false], [true; 3]];
        let mut runs = Vec::new();
        for (c, f) in falls.iter().enumerate() {
            for (rep, &fell) in f.iter().enumerate() {
                runs.push(run(
                    runs.len(),
                    c,
                    12_000 + 1000 * c as u64,
                    fell,
                    10 * c as u64 + rep as u64,
                ));
            }
        }
        let s = summarize(&runs, None);
        assert_eq!((s.runs, s.stayed_up), (12, 8));
        assert_eq!(s.configurations.len(), 4);
        let c2 = &s.configurations[2];
        assert_eq!((c2.stayed_up.successes, c2.stayed_up.n, c2.fell), (2, 3, 1));
        assert_eq!(c2.stayed_up, clopper_pearson(2, 3, 0.95).unwrap());
        // Losses 20, 21, 22: mean 21, t interval 21 ± 4.303·1/√3.
        let l = c2.losses.unwrap();
        assert_eq!(l.mean, 21.0);
        let half = 4.302_652_7 / 3f64.sqrt();
        assert!((l.ci95.unwrap()[1] - (21.0 + half)).abs() < 1e-5, "{l:?}");
        let b = s.bracket.unwrap();
        assert_eq!(b.key, "dut.link.delay_us");
        assert_eq!(
            (b.largest_all_up, b.smallest_any_down, b.width),
            (Some(13_000.0), Some(14_000.0), Some(1000.0))
        );
        assert!(b.up_again_above.is_empty());
        let json = serde_json::to_value(summarize(&runs, None)).unwrap();
        assert_eq!(json["configurations"][2]["stayed_up"]["successes"], 2);
        assert_eq!(json["bracket"]["smallest_any_down"], 14_000.0);
    }

    #[test]
    fn no_sweep_one_configuration_and_a_note() {
        let runs: Vec<RunOutcome> = (0..30)
            .map(|i| RunOutcome {
                sweep: BTreeMap::new(),
                ..run(i, 0, 3910, false, 0)
            })
            .collect();
        let s = summarize(&runs, None);
        assert_eq!(s.configurations.len(), 1);
        let p = s.configurations[0].stayed_up;
        assert_eq!((p.successes, p.n, p.hi), (30, 30, 1.0));
        assert!((p.lo - 0.025f64.powf(1.0 / 30.0)).abs() < 1e-12);
        assert!(s.bracket.is_none());
        assert!(s.notes[0].contains("sweeps none"), "{:?}", s.notes);
        // A run that stopped early without falling is not "up for all periods".
        assert!(s.configurations[0].d_n_pooled_ms.is_none());
        let mut short = run(0, 0, 1, false, 0);
        short.periods_completed = 10;
        assert!(!short.stayed_up());
    }

    #[test]
    fn d_n_pools_the_periods_of_a_configurations_runs() {
        // Run A: 1..=999 ms; run B: 1000 ms twice. Pooled, 1001 values:
        // median 501 ms (nearest rank), p99.9 the 1000th value, 1000 ms; run A
        // alone has p99.9 999 ms, run B alone 1000 ms.
        let ms = |v: i64| v * 1_000_000;
        let mut a = run(0, 0, 0, false, 0);
        a.d_n_ns = (1..=999).map(ms).collect();
        let mut b = run(1, 0, 0, false, 0);
        b.d_n_ns = vec![ms(1000), ms(1000)];
        let mut other = run(2, 1, 5, false, 0);
        other.d_n_ns = vec![ms(7)];
        let s = summarize(&[a, b, other], None);
        let c = &s.configurations[0];
        assert_eq!(c.d_n_pooled_periods, 1001);
        let d = c.d_n_pooled_ms.unwrap();
        assert!((d.median - 501.0).abs() <= 501.0 * 1e-3, "{d:?}");
        assert!((d.p99_9 - 1000.0).abs() <= 1000.0 * 1e-3, "{d:?}");
        assert!((d.q1 - 251.0).abs() <= 251.0 * 1e-3, "{d:?}");
        // The other configuration keeps its own periods.
        let o = s.configurations[1].d_n_pooled_ms.unwrap();
        assert!((o.median - 7.0).abs() < 0.01, "{o:?}");
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["configurations"][0]["d_n_pooled_periods"], 1001);
        assert!(json["configurations"][0]["d_n_pooled_ms"]["p99_9"].is_number());
        assert!(json.get("timer_floor").is_none());
        // 1001 pooled values (1..=999 ms, 1000 ms twice): np = 999.999, half
        // width 1.96·√(np(1−p)) ≈ 1.960, ranks ⌊998.04⌋ = 998 and ⌈1001.96⌉ + 1
        // = 1003, clamped to 1001: [998 ms, 1000 ms].
        assert_eq!(c.d_n_pooled_p99_9_ci95_ms, Some([998.0, 1000.0]));
    }

    #[test]
    fn the_timer_floor_is_composed_with_each_configuration() {
        // Configuration 0 (no delay): d_N 1..=1000 µs. The floor: a half excess of 0
        // in 999 periods and 10 ms in one. Of the 10⁶ sums, 999·1000 are d_N itself
        // and 1000 are d_N + 10 ms, so the p99.9 (rank 999 000) is the largest of
        // the first kind, 1000 µs; a floor with 10 ms in two periods moves it to
        // the 1000th smallest of the 2000 sums d_N + 10 ms (each d_N twice):
        // 10.5 ms. Plus the 3.91-ms hold.
        let us = |v: i64| v * 1_000;
        let mut a = run(0, 0, 0, false, 0);
        a.d_n_ns = (1..=1000).map(us).collect();
        let mut b = run(1, 1, 3910, false, 0);
        b.d_n_ns = vec![us(3_950)];
        let floor = |tens: usize| TimerFloorSample {
            hold_us: 3910.0,
            half_excess_ns: (0..1000)
                .map(|i| if i < tens { us(10_000) } else { 0 })
                .collect(),
        };
        let s = summarize(&[a.clone(), b.clone()], Some(&floor(1)));
        let t = s.timer_floor.unwrap();
        assert_eq!((t.hold_us, t.periods), (3910.0, 1000));
        let f0 = t.d_n_p99_9_floor_ms[0].unwrap();
        assert!((f0 - (3.91 + 1.0)).abs() < 1e-9, "{f0}");
        assert!((t.d_n_p99_9_floor_ms[1].unwrap() - (3.91 + 3.95)).abs() < 1e-9);
        let s = summarize(&[a, b], Some(&floor(2)));
        let f0 = s.timer_floor.unwrap().d_n_p99_9_floor_ms[0].unwrap();
        assert!((f0 - (3.91 + 10.5)).abs() < 1e-9, "{f0}");
    }
}
