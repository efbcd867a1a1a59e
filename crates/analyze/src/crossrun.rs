//! Statistics across repetitions: Student-t confidence intervals of a mean,
//! percentile-bootstrap confidence intervals, and SLA verdicts.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};

use crate::{parse_duration_ns, AnalyzeError, Pct, Summary};

/// A mean with a confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Number of values.
    pub n: usize,
    /// Sample mean.
    pub mean: f64,
    /// Lower bound.
    pub lo: f64,
    /// Upper bound.
    pub hi: f64,
}

/// Regularized incomplete beta I_x(a, b) (continued fraction, Numerical
/// Recipes §6.4).
pub(crate) fn betai(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * betacf(a, b, x) / a
    } else {
        1.0 - front * betacf(b, a, 1.0 - x) / b
    }
}

fn betacf(a: f64, b: f64, x: f64) -> f64 {
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let tiny = 1e-300;
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < tiny {
        d = tiny;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < tiny {
            d = tiny;
        }
        c = 1.0 + aa / c;
        if c.abs() < tiny {
            c = tiny;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < tiny {
            d = tiny;
        }
        c = 1.0 + aa / c;
        if c.abs() < tiny {
            c = tiny;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// ln Γ(x), Lanczos approximation (g = 7, n = 9).
fn ln_gamma(x: f64) -> f64 {
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
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// CDF of Student's t with `df` degrees of freedom.
pub fn t_cdf(t: f64, df: f64) -> f64 {
    let x = df / (df + t * t);
    let tail = 0.5 * betai(df / 2.0, 0.5, x);
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// Quantile of Student's t: the `t` with `t_cdf(t, df) = p` (bisection).
pub fn t_quantile(p: f64, df: f64) -> f64 {
    let (mut lo, mut hi) = (-1e4, 1e4);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Arithmetic mean of a few floats (values across runs, a model's outputs
/// in seconds or packets/s); `None` for none. [`mean_t_ci`]'s mean.
pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Mean with a two-sided Student-t confidence interval at `level` (e.g.
/// 0.95): `mean ± t_{(1+level)/2, n−1} · s/√n`, s the sample standard
/// deviation (÷ n−1). `None` for fewer than 2 values.
pub fn mean_t_ci(values: &[f64], level: f64) -> Option<Interval> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let mean = mean(values)?;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let half = t_quantile((1.0 + level) / 2.0, (n - 1) as f64) * (var / n as f64).sqrt();
    Some(Interval {
        n,
        mean,
        lo: mean - half,
        hi: mean + half,
    })
}

/// Percentile-bootstrap confidence interval of the mean of `values` at
/// `level`, with `resamples` resamples drawn by a ChaCha20 RNG seeded with
/// `seed` (deterministic). Used for tail percentiles across repetitions,
/// where normality is doubtful. `None` for no values.
pub fn bootstrap_mean_ci(
    values: &[f64],
    level: f64,
    resamples: usize,
    seed: u64,
) -> Option<Interval> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut means: Vec<f64> = (0..resamples.max(1))
        .map(|_| (0..n).map(|_| values[rng.gen_range(0..n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let q = |p: f64| {
        let idx = ((p * means.len() as f64).ceil() as usize).clamp(1, means.len()) - 1;
        means[idx]
    };
    let alpha = (1.0 - level) / 2.0;
    Some(Interval {
        n,
        mean,
        lo: q(alpha),
        hi: q(1.0 - alpha),
    })
}

// ---------------------------------------------------------------------------
// SLA verdicts
// ---------------------------------------------------------------------------

/// A comparison operator of an SLA clause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// `<=`
    Le,
    /// `<`
    Lt,
    /// `>=`
    Ge,
    /// `>`
    Gt,
}

/// A metric an SLA clause constrains.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum SlaMetric {
    /// A latency percentile.
    Pct(Pct),
    /// Minimum latency.
    Min,
    /// Maximum latency.
    Max,
    /// Mean latency.
    Mean,
    /// Latency standard deviation.
    Stdev,
    /// RFC 3550 jitter.
    Jitter,
    /// Loss ratio.
    Loss,
    /// Reordered ratio.
    Reorder,
    /// Number of anomalies of the i-th spec.
    Anomalies(usize),
}

/// One clause, e.g. `p99.999<=350us`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlaClause {
    /// The clause as written.
    pub text: String,
    /// The metric.
    pub metric: SlaMetric,
    /// The operator.
    pub op: Op,
    /// The bound (ns for latencies, a ratio or count otherwise).
    pub bound: f64,
}

/// The verdict of one clause.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The clause as written.
    pub clause: String,
    /// The measured value (`null` if the summary has none).
    pub value: Option<f64>,
    /// Whether the clause holds (a missing value fails).
    pub pass: bool,
}

/// Parse `'p99.999<=350us,loss<=1e-5,max<1ms,jitter<=10us,anomalies[0]==0'`.
/// Latency bounds take a unit (ns, us, ms, s); ratios and counts are plain
/// numbers. Metrics: pNN, min, max, mean, stdev, jitter, loss, reorder,
/// anomalies (the first `--anomaly` spec) or anomalies[i].
pub fn parse_sla(s: &str) -> Result<Vec<SlaClause>, AnalyzeError> {
    let bad = |clause: &str, why: String| {
        AnalyzeError::Invalid(format!(
            "invalid SLA clause {clause:?} in {s:?}: {why}; write e.g. 'p99.999<=350us,loss<=1e-5'"
        ))
    };
    let mut out = Vec::new();
    for clause in s.split(',').map(str::trim) {
        if clause.is_empty() {
            return Err(bad(clause, "empty clause".into()));
        }
        let (pos, op, oplen) = ["<=", ">=", "<", ">"]
            .iter()
            .filter_map(|o| clause.find(o).map(|p| (p, *o)))
            .min_by_key(|(p, o)| (*p, std::cmp::Reverse(o.len())))
            .map(|(p, o)| {
                let op = match o {
                    "<=" => Op::Le,
                    ">=" => Op::Ge,
                    "<" => Op::Lt,
                    _ => Op::Gt,
                };
                (p, op, o.len())
            })
            .ok_or_else(|| bad(clause, "no comparison (<=, <, >=, >)".into()))?;
        let name = clause[..pos].trim();
        let value = clause[pos + oplen..].trim();
        let metric = match name {
            "min" => SlaMetric::Min,
            "max" => SlaMetric::Max,
            "mean" => SlaMetric::Mean,
            "stdev" => SlaMetric::Stdev,
            "jitter" | "rfc3550" => SlaMetric::Jitter,
            "loss" => SlaMetric::Loss,
            "reorder" => SlaMetric::Reorder,
            "anomalies" => SlaMetric::Anomalies(0),
            _ if name.starts_with("anomalies[") && name.ends_with(']') => {
                let i = name["anomalies[".len()..name.len() - 1]
                    .parse()
                    .map_err(|_| bad(clause, format!("{name:?} needs an index like anomalies[1]")))?;
                SlaMetric::Anomalies(i)
            }
            _ if name.starts_with('p') => SlaMetric::Pct(Pct::parse(name).ok_or_else(|| {
                bad(clause, format!("{name:?} is not a percentile in (0, 100]"))
            })?),
            _ => {
                return Err(bad(
                    clause,
                    format!(
                        "unknown metric {name:?} (pNN, min, max, mean, stdev, jitter, loss, reorder, anomalies)"
                    ),
                ))
            }
        };
        let is_time = matches!(
            metric,
            SlaMetric::Pct(_)
                | SlaMetric::Min
                | SlaMetric::Max
                | SlaMetric::Mean
                | SlaMetric::Stdev
                | SlaMetric::Jitter
        );
        let bound = if is_time {
            parse_duration_ns(value).map_err(|e| bad(clause, e.to_string()))? as f64
        } else {
            value
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| bad(clause, format!("{value:?} is not a number")))?
        };
        out.push(SlaClause {
            text: clause.to_string(),
            metric,
            op,
            bound,
        });
    }
    Ok(out)
}

/// Percentiles an SLA needs computed (pass them to `Options::percentiles`).
pub fn sla_percentiles(clauses: &[SlaClause]) -> Vec<Pct> {
    clauses
        .iter()
        .filter_map(|c| match c.metric {
            SlaMetric::Pct(p) => Some(p),
            _ => None,
        })
        .collect()
}

/// Evaluate the clauses on a summary.
pub fn evaluate_sla(clauses: &[SlaClause], s: &Summary) -> Vec<Verdict> {
    clauses
        .iter()
        .map(|c| {
            let l = &s.latency_ns;
            let value = match c.metric {
                SlaMetric::Pct(p) => s
                    .latency_quantiles
                    .iter()
                    .find(|q| (q.p - p.as_f64()).abs() < 1e-12)
                    .map(|q| q.ns as f64),
                SlaMetric::Min => l.min.map(|v| v as f64),
                SlaMetric::Max => l.max.map(|v| v as f64),
                SlaMetric::Mean => l.mean,
                SlaMetric::Stdev => l.stdev,
                SlaMetric::Jitter => s.jitter_ns.rfc3550,
                SlaMetric::Loss => Some(s.loss_ratio),
                SlaMetric::Reorder => s.reorder.as_ref().map(|r| r.ratio),
                SlaMetric::Anomalies(i) => s.anomalies.get(i).map(|a| a.count as f64),
            };
            let pass = value.is_some_and(|v| match c.op {
                Op::Le => v <= c.bound,
                Op::Lt => v < c.bound,
                Op::Ge => v >= c.bound,
                Op::Gt => v > c.bound,
            });
            Verdict {
                clause: c.text.clone(),
                value,
                pass,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_tables() {
        // Two-sided 95 % critical values from any t table.
        for (df, t) in [
            (1.0, 12.706),
            (2.0, 4.303),
            (5.0, 2.571),
            (14.0, 2.145),
            (30.0, 2.042),
        ] {
            assert!((t_quantile(0.975, df) - t).abs() < 1e-3, "df {df}");
        }
        assert!((t_quantile(0.995, 10.0) - 3.169).abs() < 1e-3);
    }
}
