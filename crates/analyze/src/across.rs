//! The across-run block of `nflab analyze --json` over several files
//! (`_across_runs`): per headline figure, the mean over runs with its
//! Student-t and bootstrap confidence intervals. One definition for the CLI
//! and the Python package.

use crate::crossrun::{bootstrap_mean_ci, mean_t_ci};
use crate::Summary;

/// Reads one figure out of a summary.
type MetricOf = fn(&Summary) -> Option<f64>;

/// Bootstrap resamples of the across-run intervals.
pub const BOOTSTRAP_RESAMPLES: usize = 10_000;
/// Seed of the bootstrap, fixed so that the intervals are reproducible.
pub const BOOTSTRAP_SEED: u64 = 1;

/// The figures summarised across runs, by their name in `_across_runs`.
const METRICS: [(&str, MetricOf); 9] = [
    ("mean", |s| s.latency_ns.mean),
    ("p50", |s| s.latency_ns.p50.map(|v| v as f64)),
    ("p99", |s| s.latency_ns.p99.map(|v| v as f64)),
    ("p99.9", |s| s.latency_ns.p99_9.map(|v| v as f64)),
    ("p99.99", |s| s.latency_ns.p99_99.map(|v| v as f64)),
    ("p99.999", |s| s.latency_ns.p99_999.map(|v| v as f64)),
    ("max", |s| s.latency_ns.max.map(|v| v as f64)),
    ("loss_ratio", |s| Some(s.loss_ratio)),
    ("anomalies", |s| s.anomalies.first().map(|a| a.count as f64)),
];

/// `{"p99": {"n", "mean", "t_ci": [lo, hi], "bootstrap_ci": [lo, hi]}, ...}`
/// over `summaries` at confidence `level` (a run without the figure is left out).
pub fn across_runs<'a>(
    summaries: impl IntoIterator<Item = &'a Summary> + Clone,
    level: f64,
) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for (name, f) in METRICS {
        let vals: Vec<f64> = summaries.clone().into_iter().filter_map(f).collect();
        let t = mean_t_ci(&vals, level);
        let b = bootstrap_mean_ci(&vals, level, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED);
        m.insert(
            name.into(),
            serde_json::json!({
                "n": vals.len(),
                "mean": t.map(|t| t.mean).or(b.map(|b| b.mean)),
                "t_ci": t.map(|t| [t.lo, t.hi]),
                "bootstrap_ci": b.map(|b| [b.lo, b.hi]),
            }),
        );
    }
    serde_json::Value::Object(m)
}
