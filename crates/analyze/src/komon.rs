//! The in-stack UDP monitor against its VNF's own times (seed 003 ch. 2, KOMon;
//! issue 16): the accuracy table (Table 2.2: mean and cv of the relay's truth next to
//! monitor − offset, the offset calibrated on the constant-delay run of the same
//! mean, or on the constant arm of the same mean in the same run when the relay
//! interleaves distributions) and the load curve (the monitor's p95 and the VNF's own
//! p95 against the offered rate, and their correlation with the socket's buffer
//! fill).
//!
//! Input files: `monitor.parquet` (`seq`, `t_in_ns`, `t_out_ns`) and
//! `relay_truth.parquet` (`seq`, `processing_ns`, `arm`) of a run; the relay's
//! settings from its `params.json` ([`runs_of`]).

use std::fs::File;
use std::path::Path;

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use serde::Serialize;

use crate::bootstrap::{mean_difference_ci, Difference};
use crate::{AnalyzeError, Distribution, Pct};

/// The accuracy goal of issue 16 (seed 003: within 0.8 µs and 0.01).
pub const GOAL_MEAN_NS: f64 = 1_000.0;
/// The goal on the coefficients of variation.
pub const GOAL_CV: f64 = 0.05;
/// The means (µs) the goal is stated for; μ = 2 µs is measured and shown only.
pub const GOAL_MEANS_US: [f64; 2] = [50.0, 100.0];

/// Bootstrap resamples of the calibration offset's interval.
const RESAMPLES: usize = 1000;

fn input_err(path: &Path, what: String) -> AnalyzeError {
    AnalyzeError::Input {
        path: path.to_path_buf(),
        reason: what,
    }
}

/// The named int64 columns of a Parquet file (nulls as `None`), in the order asked.
pub fn read_i64_columns(
    path: &Path,
    names: &[&str],
) -> Result<Vec<Vec<Option<i64>>>, AnalyzeError> {
    let file = File::open(path).map_err(|e| AnalyzeError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    let bad = |what: String| input_err(path, what);
    let reader =
        SerializedFileReader::new(file).map_err(|e| bad(format!("not a Parquet file: {e}")))?;
    let mut out = vec![Vec::new(); names.len()];
    for row in reader
        .get_row_iter(None)
        .map_err(|e| bad(format!("cannot read rows: {e}")))?
    {
        let row = row.map_err(|e| bad(format!("cannot read a row: {e}")))?;
        for (name, field) in row.get_column_iter() {
            let Some(i) = names.iter().position(|n| n == name) else {
                continue;
            };
            out[i].push(match field {
                Field::Long(v) => Some(*v),
                Field::Null => None,
                other => return Err(bad(format!("column {name}: not an integer ({other})"))),
            });
        }
    }
    // The schema, not the rows: an empty file with the columns is fine.
    let schema: Vec<String> = reader
        .metadata()
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    if let Some(missing) = names.iter().find(|n| !schema.iter().any(|c| c == *n)) {
        return Err(bad(format!("no column {missing}")));
    }
    Ok(out)
}

/// The monitor's sojourn times (`t_out_ns − t_in_ns`) of a `monitor.parquet`.
pub fn read_sojourns(path: &Path) -> Result<Vec<i64>, AnalyzeError> {
    let c = read_i64_columns(path, &["t_in_ns", "t_out_ns"])?;
    Ok(c[0]
        .iter()
        .zip(&c[1])
        .filter_map(|(a, b)| Some((*b)? - (*a)?))
        .collect())
}

/// The steady-state, unqueued pairs of one relay arm ([`read_pairs`]).
#[derive(Default)]
struct ArmPairs {
    monitor_ns: Vec<i64>,
    truth_ns: Vec<i64>,
    /// Steady-state pairs left out because they queued.
    queued: u64,
}

/// `value(i)` of every row `i` keyed by its seq, for the seqs seen exactly once in
/// `seq` (the readiness probes of another flow reuse small seqs: left out).
fn once_by_seq<T>(
    seq: &[Option<i64>],
    value: impl Fn(usize) -> Option<T>,
) -> std::collections::HashMap<i64, T> {
    let mut count: std::collections::HashMap<i64, u32> = Default::default();
    for s in seq.iter().flatten() {
        *count.entry(*s).or_default() += 1;
    }
    seq.iter()
        .enumerate()
        .filter_map(|(i, s)| Some(((*s)?, i)))
        .filter(|(s, _)| count[s] == 1)
        .filter_map(|(s, i)| Some((s, value(i)?)))
        .collect()
}

/// The relay arm of each probe seq seen once in a `relay_truth.parquet`.
pub fn arm_by_seq(truth: &Path) -> Result<std::collections::HashMap<i64, i64>, AnalyzeError> {
    let t = read_i64_columns(truth, &["seq", "arm"])?;
    Ok(once_by_seq(&t[0], |i| t[1][i]))
}

/// Monitor and truth of one run, packet by packet and by relay arm (all arm 0
/// unless `with_arm`), steady state and unqueued only: the probes whose seq appears
/// exactly once in each file (the readiness probes of another flow reuse small seqs
/// and are left out), ingress at least `warmup_ns` after the first monitored
/// ingress (the run's warm-up, excluded as everywhere in nflab), and not queued: a
/// datagram whose ingress came before an earlier datagram's egress found the VNF
/// busy, and its sojourn holds that wait, which the VNF's own time does not (seed
/// 003's accuracy load is "designed to be low enough to not induce waiting
/// times"; a stalled generator's burst breaks that now and then). Judged from the
/// monitor's own stamps, never the truth, against the monitored datagrams only
/// (with sampling, an unsampled datagram in front is not seen). A late egress
/// stamp of the datagram in front (a stall on the send path) also marks the next
/// one queued: those are counted (`queued_excluded`).
fn read_pairs(
    monitor: &Path,
    truth: &Path,
    warmup_ns: i64,
    with_arm: bool,
) -> Result<std::collections::BTreeMap<i64, ArmPairs>, AnalyzeError> {
    let m = read_i64_columns(monitor, &["seq", "t_in_ns", "t_out_ns"])?;
    let cols: &[&str] = if with_arm {
        &["seq", "processing_ns", "arm"]
    } else {
        &["seq", "processing_ns"]
    };
    let t = read_i64_columns(truth, cols)?;
    let truth_by_seq = once_by_seq(&t[0], |i| {
        Some((t[1][i]?, if with_arm { t[2][i]? } else { 0 }))
    });
    let monitored_once = once_by_seq(&m[0], |_| Some(()));
    // Every monitored datagram in ingress order (probe or not: any of them keeps
    // the VNF busy), each marked queued when an earlier one left after it came.
    let mut by_ingress: Vec<(i64, i64, Option<i64>)> = m[0]
        .iter()
        .zip(&m[1])
        .zip(&m[2])
        .filter_map(|((s, a), b)| Some(((*a)?, (*b)?, *s)))
        .collect();
    by_ingress.sort_by_key(|(a, _, _)| *a);
    let start = by_ingress.first().map_or(0, |(a, _, _)| *a);
    let mut arms: std::collections::BTreeMap<i64, ArmPairs> = Default::default();
    let mut latest_egress = i64::MIN;
    for (a, b, s) in by_ingress {
        let queued = a < latest_egress;
        latest_egress = latest_egress.max(b);
        let Some(s) = s else { continue };
        if a < start + warmup_ns || !monitored_once.contains_key(&s) {
            continue;
        }
        let Some((p, arm)) = truth_by_seq.get(&s) else {
            continue;
        };
        let pairs = arms.entry(*arm).or_default();
        if queued {
            pairs.queued += 1;
        } else {
            pairs.monitor_ns.push(b - a);
            pairs.truth_ns.push(*p);
        }
    }
    Ok(arms)
}

/// The relay's own processing times of a `relay_truth.parquet`.
pub fn read_truth(path: &Path) -> Result<Vec<i64>, AnalyzeError> {
    Ok(read_i64_columns(path, &["processing_ns"])?
        .swap_remove(0)
        .into_iter()
        .flatten()
        .collect())
}

/// The relay settings of a run (`dut.relay` of its `params.json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RelaySettings {
    /// constant | exponential | uniform | normal.
    pub distribution: String,
    /// Mean artificial delay, µs.
    pub mean_us: f64,
    /// cv of `normal`.
    pub cv: Option<f64>,
    /// The relay spins instead of sleeping.
    pub busy_poll: bool,
}

impl RelaySettings {
    /// From a run's `params.json` value (`dut.relay`, defaults as the relay's).
    pub fn from_params(params: &serde_json::Value) -> Option<RelaySettings> {
        let r = params.get("dut")?.get("relay")?;
        if r.get("flood").and_then(serde_json::Value::as_bool) == Some(true) {
            return None;
        }
        Some(Self::of_table(r, Self::busy_poll_of(r)))
    }

    /// One per arm of `dut.relay.interleave` (each with the relay's busy_poll), or
    /// None when the run has no interleave.
    pub fn arms_from_params(params: &serde_json::Value) -> Option<Vec<RelaySettings>> {
        let r = params.get("dut")?.get("relay")?;
        let busy_poll = Self::busy_poll_of(r);
        let arms = r.get("interleave")?.as_array()?;
        Some(arms.iter().map(|a| Self::of_table(a, busy_poll)).collect())
    }

    fn busy_poll_of(relay: &serde_json::Value) -> bool {
        relay.get("busy_poll").and_then(serde_json::Value::as_bool) == Some(true)
    }

    /// `distribution`, `mean_us`, `cv` of `dut.relay` or of one of its arms.
    fn of_table(t: &serde_json::Value, busy_poll: bool) -> RelaySettings {
        RelaySettings {
            distribution: t
                .get("distribution")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("constant")
                .to_string(),
            mean_us: t
                .get("mean_us")
                .and_then(serde_json::Value::as_f64)
                .unwrap_or(0.0),
            cv: t.get("cv").and_then(serde_json::Value::as_f64),
            busy_poll,
        }
    }

    /// `exponential`, `normal cv=0.2`, …
    pub fn label(&self) -> String {
        match self.cv {
            Some(cv) => format!("{} cv={cv}", self.distribution),
            None => self.distribution.clone(),
        }
    }

    fn is_calibration(&self) -> bool {
        self.distribution == "constant"
    }

    fn same_calibration_group(&self, o: &RelaySettings) -> bool {
        self.mean_us == o.mean_us && self.busy_poll == o.busy_poll
    }
}

/// One run's monitor and truth (or one arm's, of an interleaved relay).
#[derive(Debug, Clone)]
pub struct AccuracyRun {
    /// Run name (`003`).
    pub run: String,
    /// The arm's index in `dut.relay.interleave`; None for a run of one distribution.
    pub arm: Option<u16>,
    /// How the relay ran.
    pub relay: RelaySettings,
    /// Monitor sojourn times, ns.
    pub monitor_ns: Vec<i64>,
    /// The relay's own processing times, ns.
    pub truth_ns: Vec<i64>,
    /// Steady-state datagrams left out because they found the VNF busy.
    pub queued: u64,
}

/// The accuracy runs of run `name` in `dir` (`runs/NNN`) made with `params`: one
/// per arm of an interleaved relay, one otherwise; none for a flood relay or a run
/// without `monitor.parquet` and `relay_truth.parquet`. Steady state only (the
/// run's `traffic.warmup_s` left out).
pub fn runs_of(
    name: &str,
    dir: &Path,
    params: &serde_json::Value,
) -> Result<Vec<AccuracyRun>, AnalyzeError> {
    let (mon, truth) = (dir.join("monitor.parquet"), dir.join("relay_truth.parquet"));
    let Some(single) = RelaySettings::from_params(params) else {
        return Ok(Vec::new());
    };
    if !mon.is_file() || !truth.is_file() {
        return Ok(Vec::new());
    }
    let warmup_ns = params
        .pointer("/traffic/warmup_s")
        .and_then(serde_json::Value::as_f64)
        .map_or(0, |s| (s * 1e9) as i64);
    let arms = RelaySettings::arms_from_params(params);
    let mut pairs = read_pairs(&mon, &truth, warmup_ns, arms.is_some())?;
    let mut take = |arm: i64| pairs.remove(&arm).unwrap_or_default();
    let Some(arms) = arms else {
        let p = take(0);
        return Ok(vec![AccuracyRun {
            run: name.to_string(),
            arm: None,
            relay: single,
            monitor_ns: p.monitor_ns,
            truth_ns: p.truth_ns,
            queued: p.queued,
        }]);
    };
    Ok(arms
        .into_iter()
        .enumerate()
        .map(|(i, relay)| {
            let p = take(i as i64);
            AccuracyRun {
                run: name.to_string(),
                arm: Some(i as u16),
                relay,
                monitor_ns: p.monitor_ns,
                truth_ns: p.truth_ns,
                queued: p.queued,
            }
        })
        .collect())
}

/// Mean and cv (population standard deviation / mean) of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MeanCv {
    /// Values.
    pub n: u64,
    /// Mean, ns.
    pub mean_ns: f64,
    /// Standard deviation, ns.
    pub stdev_ns: f64,
    /// stdev / mean (0 for a zero mean).
    pub cv: f64,
}

/// Mean, standard deviation and cv of `v` (None when empty).
pub fn mean_cv(v: &[i64]) -> Option<MeanCv> {
    let mut d = Distribution::new(0, 3);
    for x in v {
        d.record(*x);
    }
    let (mean, sd) = (d.mean()?, d.stdev()?);
    Some(MeanCv {
        n: d.count(),
        mean_ns: mean,
        stdev_ns: sd,
        cv: if mean > 0.0 { sd / mean } else { 0.0 },
    })
}

/// Means, cvs and the error of monitor − offset against the truth, on one basis
/// (all values, or each dataset up to its 99 % quantile).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Figures {
    /// The relay's own processing time.
    pub truth: MeanCv,
    /// The monitor's sojourn time as measured.
    pub monitor: MeanCv,
    /// The calibration's mean(monitor) − mean(truth), ns.
    pub offset_ns: Option<f64>,
    /// monitor − offset: mean and cv (the standard deviation is unchanged: seed
    /// 003's estimate).
    pub corrected: Option<MeanCv>,
    /// The stack overhead's standard deviation by the calibration: √(var(monitor) −
    /// var(truth)) of the constant run or arm, ns (0 when the difference is not
    /// positive).
    pub overhead_stdev_ns: Option<f64>,
    /// monitor − offset with the overhead's variance taken out too: mean as
    /// `corrected`, standard deviation √(var(monitor) − overhead²). The overhead is
    /// independent of the drawn delay (arms are assigned at random), so variances
    /// add; where the overhead's spread is not small against the delay's (a 2-core
    /// VM: several µs against normal cv = 0.2's 10 µs at μ = 50), this is the cv
    /// estimate that does not carry the host's jitter. It checks that the overhead
    /// is additive and independent of the delay, not that it is small: seed 003's
    /// cv (`cv_error`) is the one that bounds the monitor's jitter.
    pub deconvolved: Option<MeanCv>,
    /// mean(monitor − offset) − mean(truth), ns.
    pub mean_error_ns: Option<f64>,
    /// cv(monitor − offset) − cv(truth): seed 003's cv.
    pub cv_error: Option<f64>,
    /// cv of `deconvolved` − cv(truth).
    pub deconvolved_cv_error: Option<f64>,
}

impl Figures {
    /// `monitor` and `truth` of a run (or arm) against its calibration's.
    fn of(monitor: &[i64], truth: &[i64], calibration: Option<(&[i64], &[i64])>) -> Option<Self> {
        let (truth, monitor) = (mean_cv(truth)?, mean_cv(monitor)?);
        let cal = calibration.and_then(|(m, t)| Some((mean_cv(m)?, mean_cv(t)?)));
        let offset_ns = cal.map(|(m, t)| m.mean_ns - t.mean_ns);
        let overhead_var = cal.map(|(m, t)| (m.stdev_ns.powi(2) - t.stdev_ns.powi(2)).max(0.0));
        let with_stdev = |mean: f64, stdev_ns: f64| MeanCv {
            mean_ns: mean,
            stdev_ns,
            cv: if mean > 0.0 { stdev_ns / mean } else { 0.0 },
            ..monitor
        };
        let corrected = offset_ns.map(|o| with_stdev(monitor.mean_ns - o, monitor.stdev_ns));
        let deconvolved = corrected
            .zip(overhead_var)
            .map(|(c, v)| with_stdev(c.mean_ns, (monitor.stdev_ns.powi(2) - v).max(0.0).sqrt()));
        Some(Figures {
            truth,
            monitor,
            offset_ns,
            corrected,
            overhead_stdev_ns: overhead_var.map(f64::sqrt),
            deconvolved,
            mean_error_ns: corrected.map(|c| c.mean_ns - truth.mean_ns),
            cv_error: corrected.map(|c| c.cv - truth.cv),
            deconvolved_cv_error: deconvolved.map(|d| d.cv - truth.cv),
        })
    }

    /// Issue 16's goal as stated: the mean, and seed 003's cv (the overhead's
    /// spread left in).
    fn meets_goal(&self) -> Option<bool> {
        Some(self.mean_error_ns?.abs() <= GOAL_MEAN_NS && self.cv_error?.abs() <= GOAL_CV)
    }

    /// The same with the deconvolved cv: whether the VNF's own cv can be recovered
    /// from the monitor when the overhead's variance is calibrated too.
    fn meets_goal_deconvolved(&self) -> Option<bool> {
        Some(
            self.mean_error_ns?.abs() <= GOAL_MEAN_NS
                && self.deconvolved_cv_error?.abs() <= GOAL_CV,
        )
    }
}

/// The exact nearest-rank quantile `pct` ("95", "99") of `v`.
fn exact_quantile(v: &[i64], pct: &str) -> Option<i64> {
    let mut d = Distribution::new(u64::MAX, 3);
    for x in v {
        d.record(*x);
    }
    let p = Pct::parse(pct).expect("a valid percentile");
    d.quantiles(&[p])[0].map(|q| q.value)
}

/// The values of `v` up to its 99 % quantile (exact): seed 003's figures "only
/// contain values up to the 99% quantile of the dataset", to soften the
/// scheduling of a general-purpose OS.
pub fn up_to_p99(v: &[i64]) -> Vec<i64> {
    match exact_quantile(v, "99") {
        Some(q) => v.iter().copied().filter(|x| *x <= q).collect(),
        None => Vec::new(),
    }
}

/// One row of the accuracy table.
#[derive(Debug, Clone, Serialize)]
pub struct AccuracyRow {
    /// Run name.
    pub run: String,
    /// The arm of an interleaved relay (None: the run has one distribution).
    pub arm: Option<u16>,
    /// Relay settings.
    pub relay: RelaySettings,
    /// Datagrams (of the run, or the arm) left out because they queued behind
    /// another.
    pub queued_excluded: u64,
    /// mean(monitor) − mean(truth) of this run, with its bootstrapped 95 % CI.
    pub own_offset: Option<Difference>,
    /// The run whose offset is subtracted: the constant-delay run of the same mean
    /// (and the same busy_poll); for an arm, its own run. None when there is none.
    pub calibration_run: Option<String>,
    /// For an arm: the constant arm of the same mean in the same run.
    pub calibration_arm: Option<u16>,
    /// Every value (the calibration's too).
    pub all_values: Figures,
    /// Monitor and truth of this row and of its calibration each up to its own
    /// 99 % quantile: seed 003's basis, on which the goal is judged. Trimming each
    /// dataset at its own p99 takes more of the overhead's tail off the constant
    /// arm than off an arm whose top 1 % is mostly its own delay: the mean error
    /// leans positive, and the calibrated overhead variance low (neither flatters
    /// the monitor).
    pub p99: Figures,
    /// Whether issue 16's goal holds on the p99 basis (mean error and seed 003's
    /// cv); None for a calibration, a mean the goal is not stated for, or no
    /// calibration.
    pub goal_met: Option<bool>,
    /// The same with the deconvolved cv.
    pub goal_met_deconvolved: Option<bool>,
    /// The goal (seed 003's cv) on every value.
    pub goal_met_all_values: Option<bool>,
}

impl AccuracyRow {
    /// Whether this row is the calibration its offset comes from (not judged).
    pub fn calibrates_itself(&self) -> bool {
        self.calibration_run.as_deref() == Some(self.run.as_str())
            && self.calibration_arm == self.arm
    }
}

/// The accuracy table of `runs`, in their order. Runs without monitor or truth
/// values are left out. A run of one distribution is calibrated by the constant
/// run of the same mean; an arm of an interleaved run by the constant arm of the
/// same mean in the same run (never by another run: the point of interleaving is
/// that calibration and measurement share the host's drift).
pub fn accuracy_table(runs: &[AccuracyRun]) -> Vec<AccuracyRow> {
    let offset_of = |r: &AccuracyRun| {
        let a: Vec<f64> = r.monitor_ns.iter().map(|x| *x as f64).collect();
        let b: Vec<f64> = r.truth_ns.iter().map(|x| *x as f64).collect();
        mean_difference_ci(&a, &b, 0.95, RESAMPLES, 1)
    };
    // Each run's datasets up to their p99, once (a calibration serves several rows).
    let capped: Vec<(Vec<i64>, Vec<i64>)> = runs
        .iter()
        .map(|r| (up_to_p99(&r.monitor_ns), up_to_p99(&r.truth_ns)))
        .collect();
    runs.iter()
        .zip(&capped)
        .filter_map(|(r, (r_mon, r_truth))| {
            let cal = runs.iter().position(|c| {
                c.relay.is_calibration()
                    && c.relay.same_calibration_group(&r.relay)
                    && match r.arm {
                        None => c.arm.is_none(),
                        Some(_) => c.arm.is_some() && c.run == r.run,
                    }
                    && !c.monitor_ns.is_empty()
                    && !c.truth_ns.is_empty()
            });
            let all = Figures::of(
                &r.monitor_ns,
                &r.truth_ns,
                cal.map(|c| (&runs[c].monitor_ns[..], &runs[c].truth_ns[..])),
            )?;
            let p99 = Figures::of(
                r_mon,
                r_truth,
                cal.map(|c| (&capped[c].0[..], &capped[c].1[..])),
            )?;
            let cal = cal.map(|c| &runs[c]);
            let judged = cal.is_some_and(|c| (&c.run, c.arm) != (&r.run, r.arm))
                && GOAL_MEANS_US.contains(&r.relay.mean_us);
            Some(AccuracyRow {
                run: r.run.clone(),
                arm: r.arm,
                relay: r.relay.clone(),
                queued_excluded: r.queued,
                own_offset: offset_of(r),
                calibration_run: cal.map(|c| c.run.clone()),
                calibration_arm: cal.and_then(|c| c.arm),
                all_values: all,
                p99,
                goal_met: judged.then(|| p99.meets_goal()).flatten(),
                goal_met_deconvolved: judged.then(|| p99.meets_goal_deconvolved()).flatten(),
                goal_met_all_values: judged.then(|| all.meets_goal()).flatten(),
            })
        })
        .collect()
}

/// One point of the load experiment.
#[derive(Debug, Clone, Serialize)]
pub struct LoadPoint {
    /// Run name.
    pub run: String,
    /// Offered rate, packets/s.
    pub rate_pps: f64,
    /// The monitor's sojourn p95, ns.
    pub monitor_p95_ns: Option<i64>,
    /// The VNF's own processing-time p95, ns.
    pub truth_p95_ns: Option<i64>,
    /// Mean receive-queue fill, bytes.
    pub buffer_mean_bytes: Option<f64>,
}

/// The 95th percentile (exact) of `v`.
pub fn p95(v: &[i64]) -> Option<i64> {
    exact_quantile(v, "95")
}

/// Pearson's r across the load points between the monitor's p95 and the buffer
/// fill (seed 003: 0.85); None with fewer than two points with both.
pub fn load_buffer_r(points: &[LoadPoint]) -> Option<f64> {
    let (x, y): (Vec<f64>, Vec<f64>) = points
        .iter()
        .filter_map(|p| Some((p.monitor_p95_ns? as f64, p.buffer_mean_bytes?)))
        .unzip();
    crate::correlation::pearson(&x, &y)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(d: &str, mean_us: f64) -> RelaySettings {
        RelaySettings {
            distribution: d.into(),
            mean_us,
            cv: None,
            busy_poll: true,
        }
    }

    #[test]
    fn offset_comes_from_the_constant_run_of_the_same_mean() {
        // Known answer: the constant run's monitor is truth + 20 µs exactly; the
        // exponential run's monitor is truth + 21 µs: after the offset the mean is
        // 1 µs high, the cv is stdev / (mean + 1 µs).
        let truth_c = vec![50_000; 100];
        let mon_c: Vec<i64> = truth_c.iter().map(|t| t + 20_000).collect();
        let truth_e: Vec<i64> = (0..100).map(|i| 30_000 + 400 * i).collect();
        let mon_e: Vec<i64> = truth_e.iter().map(|t| t + 21_000).collect();
        let runs = vec![
            AccuracyRun {
                run: "000".into(),
                arm: None,
                queued: 0,
                relay: settings("constant", 50.0),
                monitor_ns: mon_c,
                truth_ns: truth_c,
            },
            AccuracyRun {
                run: "001".into(),
                arm: None,
                queued: 0,
                relay: settings("exponential", 50.0),
                monitor_ns: mon_e,
                truth_ns: truth_e.clone(),
            },
            AccuracyRun {
                run: "002".into(),
                arm: None,
                queued: 0,
                relay: settings("uniform", 2.0),
                monitor_ns: vec![1, 2],
                truth_ns: vec![1, 2],
            },
        ];
        let t = accuracy_table(&runs);
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].all_values.offset_ns, Some(20_000.0));
        assert_eq!(t[0].goal_met, None, "the calibration run is not judged");
        let r = &t[1];
        assert_eq!(r.calibration_run.as_deref(), Some("000"));
        assert!((r.all_values.mean_error_ns.unwrap() - 1_000.0).abs() < 1e-6);
        // By hand: truth mean 49 800, population sd = 400·sd(0..99) = 400·28.866.
        let sd = 400.0 * (((100.0f64 * 100.0) - 1.0) / 12.0).sqrt();
        assert!(
            (r.all_values.truth.cv - sd / 49_800.0).abs() < 1e-9,
            "{:?}",
            r.all_values.truth
        );
        assert!((r.all_values.corrected.unwrap().cv - sd / 50_800.0).abs() < 1e-9);
        assert_eq!(r.goal_met, Some(true), "1 µs and a cv 0.005 apart");
        let own = r.own_offset.unwrap();
        assert!((own.diff - 21_000.0).abs() < 1e-6 && own.lo <= own.diff);
        // μ = 2 µs has no constant run here: nothing subtracted, nothing judged.
        assert_eq!((t[2].all_values.offset_ns, t[2].goal_met), (None, None));
    }

    #[test]
    fn an_arm_is_calibrated_by_the_constant_arm_of_its_own_run() {
        // Run 000 is a separate constant run (offset 30 µs, another host state);
        // run 001 interleaves a constant arm (offset 20 µs) and a uniform arm
        // (truth + 20.4 µs). The uniform arm takes 20 µs from its own run: error
        // 0.4 µs. The constant run calibrates no arm.
        let arm = |run: &str, arm: Option<u16>, d: &str, truth: Vec<i64>, extra: i64| AccuracyRun {
            run: run.into(),
            arm,
            queued: 0,
            relay: settings(d, 50.0),
            monitor_ns: truth.iter().map(|t| t + extra).collect(),
            truth_ns: truth,
        };
        let uniform: Vec<i64> = (0..100).map(|i| 1_000 * i).collect();
        let runs = vec![
            arm("000", None, "constant", vec![50_000; 100], 30_000),
            arm("001", Some(0), "uniform", uniform, 20_400),
            arm("001", Some(1), "constant", vec![50_000; 100], 20_000),
        ];
        let t = accuracy_table(&runs);
        let u = &t[1];
        assert_eq!(
            (u.calibration_run.as_deref(), u.calibration_arm),
            (Some("001"), Some(1))
        );
        assert_eq!(u.all_values.offset_ns, Some(20_000.0));
        assert!((u.all_values.mean_error_ns.unwrap() - 400.0).abs() < 1e-6);
        assert_eq!(u.goal_met, Some(true));
        assert!(t[2].calibrates_itself() && t[2].goal_met.is_none());
        assert!(t[0].calibrates_itself());
        assert_eq!(t[0].calibration_arm, None);
    }

    #[test]
    fn the_goal_is_judged_up_to_each_datasets_p99_as_in_seed_003() {
        // 1..=100: the exact p99 is 99, so only 100 goes.
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(up_to_p99(&v), (1..=99).collect::<Vec<_>>());
        assert!(up_to_p99(&[]).is_empty());
        // A uniform arm whose monitor is truth + 20 µs, except one datagram the host
        // held for 2 ms: on every value the mean is 20 µs high and the cv 0.57
        // off; up to each dataset's p99 (the held one and the top truth go) the
        // error is what trimming the two tails differently leaves (by hand below).
        let truth: Vec<i64> = (0..100).map(|i| 1_000 * i).collect();
        let mut mon: Vec<i64> = truth.iter().map(|t| t + 20_000).collect();
        mon[10] += 2_000_000;
        let runs = vec![
            AccuracyRun {
                run: "000".into(),
                arm: Some(0),
                queued: 0,
                relay: settings("constant", 50.0),
                monitor_ns: vec![70_000; 100],
                truth_ns: vec![50_000; 100],
            },
            AccuracyRun {
                run: "000".into(),
                arm: Some(1),
                queued: 0,
                relay: settings("uniform", 50.0),
                monitor_ns: mon,
                truth_ns: truth,
            },
        ];
        let r = &accuracy_table(&runs)[1];
        assert!((r.all_values.mean_error_ns.unwrap() - 20_000.0).abs() < 1e-6);
        assert_eq!(r.goal_met_all_values, Some(false));
        // p99 basis: truth 0..=98 µs (mean 49 000), monitor 20..=119 µs less the
        // held one (10 µs + 20) and nothing else (its p99 is 119 000 of 100
        // values, the held one 2 030 000 above it): mean of {20..119} \ {30}.
        let mon_mean = ((20..=119).sum::<i64>() - 30) as f64 * 1_000.0 / 99.0;
        let want = mon_mean - 20_000.0 - 49_000.0;
        assert!(
            (r.p99.mean_error_ns.unwrap() - want).abs() < 1e-6,
            "{:?}",
            r.p99
        );
        assert!((want - 899.0).abs() < 1.0, "0.9 µs by hand: {want}");
        assert!(r.p99.cv_error.unwrap().abs() < 0.01, "{:?}", r.p99);
        assert_eq!(r.goal_met, Some(true));
    }

    #[test]
    fn the_overheads_variance_comes_out_of_the_cv() {
        // The overhead alternates 10/20 µs (mean 15, sd 5) in both arms and is
        // uncorrelated with the delay (each delay once with each overhead): the
        // variances add exactly, so taking the constant arm's out leaves the
        // uniform arm's own sd, while seed 003's cv keeps the overhead's.
        let overhead = |i: usize| if i.is_multiple_of(2) { 10_000 } else { 20_000 };
        let truth_u: Vec<i64> = (0..200).map(|i| 2_000 * (i as i64 / 2)).collect();
        let runs = vec![
            AccuracyRun {
                run: "000".into(),
                arm: Some(0),
                queued: 0,
                relay: settings("constant", 50.0),
                monitor_ns: (0..200).map(|i| 50_000 + overhead(i)).collect(),
                truth_ns: vec![50_000; 200],
            },
            AccuracyRun {
                run: "000".into(),
                arm: Some(1),
                queued: 0,
                relay: settings("uniform", 50.0),
                monitor_ns: truth_u
                    .iter()
                    .enumerate()
                    .map(|(i, t)| t + overhead(i))
                    .collect(),
                truth_ns: truth_u,
            },
        ];
        let t = accuracy_table(&runs);
        let f = &t[1].all_values;
        assert!((f.overhead_stdev_ns.unwrap() - 5_000.0).abs() < 1e-6);
        assert!(f.mean_error_ns.unwrap().abs() < 1e-6);
        assert!(f.deconvolved_cv_error.unwrap().abs() < 1e-9, "{f:?}");
        let d = f.deconvolved.unwrap();
        assert!((d.stdev_ns - f.truth.stdev_ns).abs() < 1e-6);
        // Seed 003's cv: √(sd² + 5²) / mean.
        let want = (f.truth.stdev_ns.powi(2) + 25e6).sqrt() / f.truth.mean_ns - f.truth.cv;
        assert!((f.cv_error.unwrap() - want).abs() < 1e-9);
        assert!(want > 0.001);
    }

    #[test]
    fn runs_of_splits_an_interleaved_run_by_arm() {
        use crate::export::{write_parquet, Column, Table};
        let dir = std::env::temp_dir().join(format!("nflab-komon-arms-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let col = |v: Vec<i64>| Column::I64(v.into_iter().map(Some).collect());
        // Six probes, arms 1 0 1 0 0 1; ingress 1 ms apart, sojourn = truth + 10 µs.
        let arms = vec![1, 0, 1, 0, 0, 1];
        let truth: Vec<i64> = vec![100, 50, 120, 50, 50, 110];
        let t_in: Vec<i64> = (0..6).map(|i| 1_000_000 * i).collect();
        let t_out: Vec<i64> = t_in
            .iter()
            .zip(&truth)
            .map(|(a, t)| a + t + 10_000)
            .collect();
        let seq: Vec<i64> = (10..16).collect();
        write_parquet(
            &Table {
                name: "monitor".into(),
                columns: vec![
                    ("seq".into(), col(seq.clone())),
                    ("t_in_ns".into(), col(t_in)),
                    ("t_out_ns".into(), col(t_out)),
                ],
            },
            &dir.join("monitor.parquet"),
        )
        .unwrap();
        write_parquet(
            &Table {
                name: "relay_truth".into(),
                columns: vec![
                    ("seq".into(), col(seq)),
                    ("processing_ns".into(), col(truth)),
                    ("arm".into(), col(arms)),
                ],
            },
            &dir.join("relay_truth.parquet"),
        )
        .unwrap();
        let params = serde_json::json!({
            "dut": { "relay": { "interleave": [
                { "distribution": "constant", "mean_us": 0.05 },
                { "distribution": "normal", "mean_us": 0.1, "cv": 0.2 },
            ] } },
            "traffic": { "warmup_s": 0.0015 },
        });
        let runs = runs_of("007", &dir, &params).unwrap();
        assert_eq!(runs.len(), 2);
        // The first two pairs are in the warm-up (ingress < 1.5 ms after the first).
        assert_eq!((runs[0].arm, &runs[0].truth_ns), (Some(0), &vec![50, 50]));
        assert_eq!(runs[1].truth_ns, vec![120, 110]);
        assert_eq!(runs[1].monitor_ns, vec![10_120, 10_110]);
        assert_eq!(runs[1].relay.label(), "normal cv=0.2");
        // Without interleave: one run, the arm column not needed.
        let plain = serde_json::json!({ "dut": { "relay": { "mean_us": 50.0 } } });
        let one = runs_of("008", &dir, &plain).unwrap();
        assert_eq!((one.len(), one[0].arm, one[0].truth_ns.len()), (1, None, 6));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_datagram_that_found_the_vnf_busy_is_left_out_and_counted() {
        use crate::export::{write_parquet, Column, Table};
        let dir = std::env::temp_dir().join(format!("nflab-komon-q-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let col = |v: Vec<Option<i64>>| Column::I64(v);
        // Ingress 0, 1 ms, 1.005 ms (the VNF still holds the one of 1 ms until
        // 1.06 ms: queued), 1.007 ms (a datagram without probe: also queued, and it
        // keeps the VNF busy until 1.2 ms), 1.1 ms (queued behind it), 3 ms.
        let t_in = [0, 1_000_000, 1_005_000, 1_007_000, 1_100_000, 3_000_000];
        let t_out = [
            50_000, 1_060_000, 1_110_000, 1_200_000, 1_250_000, 3_050_000,
        ];
        let seq = vec![Some(1), Some(2), Some(3), None, Some(4), Some(5)];
        write_parquet(
            &Table {
                name: "monitor".into(),
                columns: vec![
                    ("seq".into(), col(seq)),
                    (
                        "t_in_ns".into(),
                        col(t_in.iter().map(|v| Some(*v)).collect()),
                    ),
                    (
                        "t_out_ns".into(),
                        col(t_out.iter().map(|v| Some(*v)).collect()),
                    ),
                ],
            },
            &dir.join("monitor.parquet"),
        )
        .unwrap();
        write_parquet(
            &Table {
                name: "relay_truth".into(),
                columns: vec![
                    ("seq".into(), col((1..=5).map(Some).collect())),
                    ("processing_ns".into(), col(vec![Some(40_000); 5])),
                ],
            },
            &dir.join("relay_truth.parquet"),
        )
        .unwrap();
        let params = serde_json::json!({ "dut": { "relay": { "mean_us": 40.0 } } });
        let r = runs_of("000", &dir, &params).unwrap().remove(0);
        assert_eq!(r.queued, 2, "seq 3 and 4 queued");
        assert_eq!(r.monitor_ns, vec![50_000, 60_000, 50_000]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn p95_and_the_load_correlation() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(p95(&v), Some(95));
        let pts: Vec<LoadPoint> = [(10, 1.0), (20, 2.0), (40, 4.0)]
            .iter()
            .map(|(p, b)| LoadPoint {
                run: String::new(),
                rate_pps: 0.0,
                monitor_p95_ns: Some(*p),
                truth_p95_ns: None,
                buffer_mean_bytes: Some(*b),
            })
            .collect();
        assert!((load_buffer_r(&pts).unwrap() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn reads_monitor_and_truth_parquet() {
        use crate::export::{write_parquet, Column, Table};
        let dir = std::env::temp_dir().join(format!("nflab-komon-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let m = dir.join("monitor.parquet");
        write_parquet(
            &Table {
                name: "monitor".into(),
                columns: vec![
                    ("seq".into(), Column::I64(vec![Some(1), None])),
                    ("t_in_ns".into(), Column::I64(vec![Some(100), Some(200)])),
                    ("t_out_ns".into(), Column::I64(vec![Some(150), Some(290)])),
                ],
            },
            &m,
        )
        .unwrap();
        assert_eq!(read_sojourns(&m).unwrap(), vec![50, 90]);
        let e = read_truth(&m).unwrap_err().to_string();
        assert!(e.contains("processing_ns"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
