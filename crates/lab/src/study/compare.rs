//! Replication: two experiments side by side, per run configuration.
//!
//! For every configuration (the swept values of a run, repetitions pooled)
//! that both experiments have, it reports the median and tail percentiles of
//! the one-way latency with distribution-free 95 % confidence intervals, and
//! a two-sample Kolmogorov–Smirnov test of the two latency distributions, as
//! seed 000 does for its replicated platforms.
//!
//! Every statistic is the engine's (`crates/analyze`): the nearest-rank
//! quantile (`Pct::rank`), its interval (`order_ci::quantile_ci_ranks`:
//! order statistics at ranks ⌊n·q − 1.96·√(n·q·(1−q))⌋ and ⌈…⌉ + 1, valid
//! for n·q·(1−q) ≳ 5, flagged otherwise) and the KS test (`ks`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::app::results::{column_names, get, read_app_columns, AppColumns, AppValue};
use nflab_analyze::order_ci::quantile_ci_of_sorted;
// The KS test is the engine's; re-exported for the callers of this module.
pub use nflab_analyze::ks::{ks_p_value, ks_statistic};
use nflab_analyze::Pct;

use crate::error::LabError;

/// A quantile with its confidence interval, ns.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct QuantileCi {
    /// The quantile in [0, 1].
    pub q: f64,
    /// Point estimate (nearest rank).
    pub value: i64,
    /// Lower end of the 95 % interval.
    pub low: i64,
    /// Upper end of the 95 % interval.
    pub high: i64,
    /// n·q·(1−q) ≥ 5, so the normal approximation holds.
    pub reliable: bool,
}

/// One side of a comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// Runs pooled.
    pub runs: usize,
    /// Latency samples pooled.
    pub samples: usize,
    /// Loss ratio over the pooled runs.
    pub loss_ratio: f64,
    /// p50, p99, p99.9 with intervals.
    pub quantiles: Vec<QuantileCi>,
    /// The application's figures (the `results.parquet` columns of `prrt.json` or
    /// `ncs.json`) over the pooled runs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub app: Vec<AppStat>,
}

/// One application column over the runs of a configuration: a yes/no outcome as the
/// fraction of runs with a Clopper–Pearson interval, a number as the mean with a Student-t
/// interval (none for one run); both 95 %, from `nflab-analyze`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AppStat {
    /// The column, as in `results.parquet`.
    pub column: String,
    /// Runs with a value.
    pub n: usize,
    /// Mean (fraction of true for a yes/no column).
    pub mean: f64,
    /// 95 % interval, when there is one.
    pub ci95: Option<[f64; 2]>,
}

/// The statistics of each application column over `runs`.
pub fn app_stats(runs: &[AppColumns]) -> Vec<AppStat> {
    column_names(runs)
        .into_iter()
        .filter_map(|column| {
            let vals: Vec<AppValue> = runs.iter().filter_map(|r| get(r, &column)).collect();
            let n = vals.len();
            if n == 0 {
                return None;
            }
            let (mean, ci95) = if vals.iter().all(|v| matches!(v, AppValue::Bool(_))) {
                let k = vals.iter().filter(|v| **v == AppValue::Bool(true)).count();
                let p = nflab_analyze::proportion::clopper_pearson(k as u64, n as u64, 0.95)?;
                (p.fraction, Some([p.lo, p.hi]))
            } else {
                let x: Vec<f64> = vals.iter().map(|v| v.as_f64()).collect();
                let mean = nflab_analyze::crossrun::mean(&x)?;
                let ci = nflab_analyze::crossrun::mean_t_ci(&x, 0.95).map(|i| [i.lo, i.hi]);
                (mean, ci)
            };
            Some(AppStat {
                column,
                n,
                mean,
                ci95,
            })
        })
        .collect()
}

/// One configuration in both experiments.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The swept values, as JSON.
    pub config: String,
    /// Experiment A.
    pub a: Side,
    /// Experiment B.
    pub b: Side,
    /// KS statistic: largest distance between the two empirical CDFs.
    pub ks_d: f64,
    /// Asymptotic p-value of D under "same distribution".
    pub ks_p: f64,
}

/// Quantile `q` of sorted `v` (nearest rank, `Pct::rank`) with the
/// distribution-free 95 % interval of `nflab_analyze::order_ci`.
pub fn quantile_ci(v: &[i64], q: f64) -> Option<QuantileCi> {
    let n = v.len() as u64;
    let pct = Pct::parse(&format!("{}", (q * 1e6).round() / 1e4))?;
    let (low, high) = quantile_ci_of_sorted(v, q, 0.95)?;
    Some(QuantileCi {
        q,
        value: v[pct.rank(n) as usize - 1],
        low,
        high,
        reliable: n as f64 * q * (1.0 - q) >= 5.0,
    })
}

struct Pooled {
    runs: usize,
    latencies: Vec<i64>,
    sent: u64,
    lost: u64,
    app: Vec<AppColumns>,
}

/// Add one way of a run (its records and its part of `summary.json`) to `entry`.
fn pool(entry: &mut Pooled, records: &Path, summary: &serde_json::Value) -> Result<(), LabError> {
    let file = nflab_record::read_all(records)?;
    let warm: Vec<(u16, u64)> = file
        .trailer
        .as_ref()
        .map(|t| t.sent.iter().map(|s| (s.flow, s.warmup)).collect())
        .unwrap_or_default();
    entry.runs += 1;
    entry.sent += summary["packets"]["sent"].as_u64().unwrap_or(0);
    entry.lost += summary["packets"]["lost"].as_u64().unwrap_or(0);
    entry.latencies.extend(
        file.records
            .iter()
            .filter(|r| !warm.iter().any(|(f, w)| *f == r.flow && r.seq < *w))
            .map(|r| r.rx_ns as i64 - r.tx_ns as i64),
    );
    Ok(())
}

/// Latencies of every run of an experiment, pooled by configuration (and way).
fn load(dir: &Path) -> Result<BTreeMap<String, Pooled>, LabError> {
    let runs = dir.join("runs");
    let entries = std::fs::read_dir(&runs).map_err(|e| {
        LabError::Other(format!(
            "{} is not an nflab experiment directory ({e}): give a directory `nflab run` printed",
            dir.display()
        ))
    })?;
    let mut out: BTreeMap<String, Pooled> = BTreeMap::new();
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    paths.sort();
    for rd in paths {
        if !rd.join(crate::study::tree::COMPLETE_MARKER).exists() {
            continue;
        }
        let params: serde_json::Value = std::fs::read_to_string(rd.join("params.json"))
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default();
        let key = serde_json::to_string(&params["sweep"]).unwrap_or_default();
        let summary: serde_json::Value = std::fs::read_to_string(rd.join("summary.json"))
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default();
        // Each way a run sent is a configuration of its own: the reverse way's key
        // says so, so that it is compared with the reverse way only.
        let ways = &summary["directions"];
        let first_way = if ways.get("forward").is_none() && ways.get("reverse").is_some() {
            "reverse"
        } else {
            "forward"
        };
        let mut files = vec![(first_way, rd.join("records.nfr"), &summary)];
        if first_way == "forward" && ways.get("reverse").is_some() {
            files.push(("reverse", rd.join("records-reverse.nfr"), &ways["reverse"]));
        }
        for (way, records, summary) in files {
            let key = match way {
                "reverse" => format!("{key} ← reverse"),
                _ => key.clone(),
            };
            let entry = out.entry(key).or_insert(Pooled {
                runs: 0,
                latencies: Vec::new(),
                sent: 0,
                lost: 0,
                app: Vec::new(),
            });
            pool(entry, &records, summary)?;
            entry.app.push(read_app_columns(&rd));
        }
    }
    for p in out.values_mut() {
        p.latencies.sort_unstable();
    }
    Ok(out)
}

fn side(p: &Pooled) -> Side {
    Side {
        runs: p.runs,
        samples: p.latencies.len(),
        loss_ratio: if p.sent > 0 {
            p.lost as f64 / p.sent as f64
        } else {
            0.0
        },
        quantiles: [0.5, 0.99, 0.999]
            .iter()
            .filter_map(|q| quantile_ci(&p.latencies, *q))
            .collect(),
        app: app_stats(&p.app),
    }
}

/// Compare two experiment directories configuration by configuration.
pub fn compare(a: &Path, b: &Path) -> Result<Vec<Comparison>, LabError> {
    let (pa, pb) = (load(a)?, load(b)?);
    let mut out = Vec::new();
    for (key, xa) in &pa {
        let Some(xb) = pb.get(key) else { continue };
        let d = ks_statistic(&xa.latencies, &xb.latencies);
        out.push(Comparison {
            config: key.clone(),
            a: side(xa),
            b: side(xb),
            ks_d: d,
            ks_p: ks_p_value(d, xa.latencies.len(), xb.latencies.len()),
        });
    }
    if out.is_empty() {
        return Err(LabError::Other(format!(
            "{} and {} have no run configuration in common (compare runs of the same spec, or of specs sweeping the same values)",
            a.display(),
            b.display()
        )));
    }
    Ok(out)
}

/// The application columns of both sides, one line each: `  column: A mean [lo, hi] (n)  B …`.
fn format_app(a: &[AppStat], b: &[AppStat]) -> String {
    let names = {
        let mut v: Vec<&str> = a.iter().map(|s| s.column.as_str()).collect();
        for s in b {
            if !v.contains(&s.column.as_str()) {
                v.push(&s.column);
            }
        }
        v
    };
    let cell = |side: &[AppStat], name: &str| match side.iter().find(|s| s.column == name) {
        None => "—".to_string(),
        Some(s) => match s.ci95 {
            Some([lo, hi]) => format!("{:.4} [{lo:.4}, {hi:.4}] (n={})", s.mean, s.n),
            None => format!("{:.4} (n={})", s.mean, s.n),
        },
    };
    names
        .iter()
        .map(|name| format!("  {name}: A {}  B {}\n", cell(a, name), cell(b, name)))
        .collect()
}

/// Human table of a comparison.
pub fn format_comparison(c: &[Comparison]) -> String {
    use crate::study::results::human_ns;
    let h = |v: i64| human_ns(Some(v as f64));
    let mut out = String::new();
    for x in c {
        out.push_str(&format!("configuration {}\n", x.config));
        for (name, s) in [("A", &x.a), ("B", &x.b)] {
            let qs: Vec<String> = s
                .quantiles
                .iter()
                .map(|q| {
                    format!(
                        "p{} {} [{}, {}]{}",
                        q.q * 100.0,
                        h(q.value),
                        h(q.low),
                        h(q.high),
                        if q.reliable { "" } else { "?" }
                    )
                })
                .collect();
            out.push_str(&format!(
                "  {name}: {} runs, {} samples, loss {:.2e}; {}\n",
                s.runs,
                s.samples,
                s.loss_ratio,
                qs.join("  ")
            ));
        }
        out.push_str(&format_app(&x.a.app, &x.b.app));
        out.push_str(&format!(
            "  KS D = {:.4}, p = {:.3e}: {}\n",
            x.ks_d,
            x.ks_p,
            if x.ks_p < 0.05 {
                "the latency distributions differ (5 % level)"
            } else {
                "no evidence of a difference (5 % level)"
            }
        ));
    }
    out.push_str("intervals: 95 %, distribution-free (order statistics); ? = too few samples for that quantile\n");
    if c.iter().any(|x| !x.a.app.is_empty() || !x.b.app.is_empty()) {
        out.push_str("application columns: mean over runs with a Student-t 95 % interval; yes/no columns as the fraction of runs with a Clopper–Pearson 95 % interval\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn naive_ks(a: &[i64], b: &[i64]) -> f64 {
        let cdf = |v: &[i64], x: i64| v.iter().filter(|&&y| y <= x).count() as f64 / v.len() as f64;
        a.iter()
            .chain(b.iter())
            .map(|&x| (cdf(a, x) - cdf(b, x)).abs())
            .fold(0.0, f64::max)
    }

    fn sample(seed: u64, n: usize, shift: i64, spread: i64) -> Vec<i64> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut v: Vec<i64> = (0..n).map(|_| shift + rng.gen_range(0..spread)).collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn ks_statistic_matches_a_naive_computation_with_ties() {
        for seed in 0..50 {
            let a = sample(seed, 40, 0, 20);
            let b = sample(seed + 1000, 55, (seed % 5) as i64, 20);
            assert!(
                (ks_statistic(&a, &b) - naive_ks(&a, &b)).abs() < 1e-12,
                "seed {seed}"
            );
        }
    }

    #[test]
    fn app_columns_pool_as_means_and_fractions_with_their_intervals() {
        let run = |losses: i64, fell: bool, ratio: Option<f64>| -> AppColumns {
            vec![
                ("ncs_losses".into(), Some(AppValue::Int(losses))),
                ("ncs_fell".into(), Some(AppValue::Bool(fell))),
                ("ncs_d_N_median_ms".into(), ratio.map(AppValue::Float)),
            ]
        };
        let s = app_stats(&[
            run(1, false, Some(4.0)),
            run(2, true, None),
            run(3, false, Some(5.0)),
        ]);
        assert_eq!(s.len(), 3);
        // 1, 2, 3: mean 2, s = 1, t(0.975, 2) = 4.302653 → 2 ± 4.302653/√3.
        assert_eq!(
            (s[0].column.as_str(), s[0].n, s[0].mean),
            ("ncs_losses", 3, 2.0)
        );
        let half = 4.302_652_7 / 3f64.sqrt();
        let [lo, hi] = s[0].ci95.unwrap();
        assert!((lo - (2.0 - half)).abs() < 1e-5 && (hi - (2.0 + half)).abs() < 1e-5);
        // 1 of 3 fell: the fraction with the exact binomial interval.
        let p = nflab_analyze::proportion::clopper_pearson(1, 3, 0.95).unwrap();
        assert_eq!(s[1].mean, 1.0 / 3.0);
        assert_eq!(s[1].ci95, Some([p.lo, p.hi]));
        // A run without a value does not count.
        assert_eq!((s[2].n, s[2].mean), (2, 4.5));
        let text = format_app(&s, &s[..1]);
        assert!(text.contains("ncs_fell: A 0.3333 ["), "{text}");
        assert!(
            text.contains("ncs_d_N_median_ms: A 4.5000 [") && text.contains("B —"),
            "{text}"
        );
    }

    #[test]
    fn ks_p_value_known_points() {
        // Large samples: λ ≈ √ne·D; the 5 % critical λ is 1.358.
        let n = 1_000_000;
        let d = 1.358 / ((n / 2) as f64).sqrt();
        let p = ks_p_value(d, n, n);
        assert!((p - 0.05).abs() < 0.002, "{p}");
        assert!((ks_p_value(1.628 / ((n / 2) as f64).sqrt(), n, n) - 0.01).abs() < 0.001);
        assert_eq!(ks_p_value(0.0, 10, 10), 1.0);
    }

    #[test]
    fn same_distribution_is_not_rejected_and_a_shift_is() {
        let a = sample(1, 20_000, 0, 10_000);
        let b = sample(2, 20_000, 0, 10_000);
        let c = sample(3, 20_000, 300, 10_000);
        assert!(ks_p_value(ks_statistic(&a, &b), a.len(), b.len()) > 0.01);
        assert!(ks_p_value(ks_statistic(&a, &c), a.len(), c.len()) < 1e-6);
    }

    #[test]
    fn median_interval_covers_the_true_median_about_95_percent() {
        let mut covered = 0;
        for seed in 0..400 {
            let v = sample(seed, 201, 0, 1_000_000);
            let ci = quantile_ci(&v, 0.5).unwrap();
            assert!(ci.low <= ci.value && ci.value <= ci.high);
            if ci.low <= 500_000 && 500_000 <= ci.high {
                covered += 1;
            }
        }
        // Binomial(400, 0.95): 95 % of seeds fall in 371..389.
        assert!((360..=395).contains(&covered), "covered {covered} of 400");
    }
}
