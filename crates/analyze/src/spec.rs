//! Parsing of durations and anomaly specs (`N:T`).

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::AnalyzeError;

/// How a lost packet (a sequence number never received) affects an anomaly run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LostMode {
    /// A lost packet ends the run (default): consecutive means consecutive
    /// sequence numbers, all received.
    #[default]
    Break,
    /// A lost packet counts as infinite latency: it extends (or starts) a run.
    Inf,
    /// Lost packets are ignored: consecutive means consecutive *received*
    /// packets, as in seed 001's tool (which cannot see losses).
    Skip,
}

/// How a latency is compared with the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cmp {
    /// `L >= t` (default; seed 001's code).
    #[default]
    Ge,
    /// `L > t` (seed 001's thesis text).
    Gt,
}

/// Reference value of a relative threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Base {
    /// The minimum latency of the run.
    Min,
    /// The mean latency of the run (seed 001's `-d`).
    Mean,
    /// A percentile of the run's latency, e.g. p50.
    Pct(crate::dist::Pct),
}

/// The threshold of an anomaly spec.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Threshold {
    /// An absolute latency, ns.
    Abs(u64),
    /// `base + add_ns`.
    Plus(Base, u64),
    /// `base · factor`, rounded up to a whole ns.
    Times(Base, f64),
}

impl Serialize for crate::dist::Pct {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.label())
    }
}

impl<'de> Deserialize<'de> for crate::dist::Pct {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        crate::dist::Pct::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("not a percentile: {s:?}")))
    }
}

/// An anomaly definition: `n` or more consecutive sequence numbers of a flow
/// with latency `>= t` (by default; see [`Cmp`], [`LostMode`]). Written
/// `N:T[:OPTIONS]`, e.g. `2:250us`, `2:p50*3`, `3:min+100us:gt,lost=inf`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AnomalySpec {
    /// Minimum run length, packets (at least 1).
    pub n: u32,
    /// Threshold, ns: the absolute threshold, or for a relative one the value
    /// it resolved to (0 before [`AnomalySpec::resolve`]).
    pub t_ns: u64,
    /// Comparison with the threshold.
    #[serde(default)]
    pub cmp: Cmp,
    /// What a lost packet does to a run.
    #[serde(default)]
    pub lost: LostMode,
    /// The threshold as written (absolute or relative).
    #[serde(default = "default_threshold")]
    pub threshold: Threshold,
}

fn default_threshold() -> Threshold {
    Threshold::Abs(0)
}

impl AnomalySpec {
    /// `n` packets at `>= t_ns`, lost packets break runs.
    pub fn new(n: u32, t_ns: u64) -> AnomalySpec {
        AnomalySpec {
            n,
            t_ns,
            cmp: Cmp::Ge,
            lost: LostMode::Break,
            threshold: Threshold::Abs(t_ns),
        }
    }

    /// `true` when the threshold depends on the run's own latencies.
    pub fn is_relative(&self) -> bool {
        !matches!(self.threshold, Threshold::Abs(_))
    }

    /// Set `t_ns` from the run's latency figures (`base(b)` gives the value
    /// of a base, ns). Negative results are clamped to 0.
    pub fn resolve(&mut self, mut base: impl FnMut(Base) -> Option<f64>) {
        let v = match self.threshold {
            Threshold::Abs(t) => Some(t as f64),
            Threshold::Plus(b, add) => base(b).map(|x| x + add as f64),
            Threshold::Times(b, f) => base(b).map(|x| x * f),
        };
        self.t_ns = v.map_or(u64::MAX, |x| x.max(0.0).ceil().min(u64::MAX as f64) as u64);
    }

    /// Whether a latency is above the threshold.
    #[inline]
    pub fn above(&self, lat_ns: i64) -> bool {
        let t = i128::from(self.t_ns);
        match self.cmp {
            Cmp::Ge => i128::from(lat_ns) >= t,
            Cmp::Gt => i128::from(lat_ns) > t,
        }
    }

    /// The lowest latency that is [`above`](Self::above) the threshold, so that a scan
    /// can test `lat >= low` for either comparison; `None` when no i64 latency is.
    pub fn lowest_above(&self) -> Option<i64> {
        match self.cmp {
            Cmp::Ge => i64::try_from(self.t_ns).ok(),
            Cmp::Gt => i64::try_from(self.t_ns.saturating_add(1)).ok(),
        }
    }
}

fn parse_base(s: &str) -> Option<Base> {
    match s {
        "min" => Some(Base::Min),
        "mean" | "avg" => Some(Base::Mean),
        _ if s.starts_with('p') => crate::dist::Pct::parse(s).map(Base::Pct),
        _ => None,
    }
}

fn parse_threshold(t: &str) -> Result<Threshold, String> {
    let t = t.trim();
    if let Some((a, b)) = t.split_once('+') {
        let base = parse_base(a.trim()).ok_or_else(|| {
            format!(
                "{:?} is not a base (min, mean or a percentile like p50)",
                a.trim()
            )
        })?;
        let add = parse_duration_ns(b.trim()).map_err(|e| match e {
            AnalyzeError::BadDuration { reason, .. } => reason,
            other => other.to_string(),
        })?;
        return Ok(Threshold::Plus(base, add));
    }
    if let Some((a, b)) = t.split_once('*').or_else(|| t.split_once('x')) {
        let (a, b) = (a.trim(), b.trim());
        let (base, factor) = match (parse_base(a), parse_base(b)) {
            (Some(base), None) => (base, b),
            (None, Some(base)) => (base, a),
            _ => {
                return Err(format!(
                    "{t:?} needs one base (min, mean, pNN) and one factor"
                ))
            }
        };
        let f: f64 = factor
            .parse()
            .ok()
            .filter(|f: &f64| f.is_finite() && *f >= 0.0)
            .ok_or_else(|| format!("factor {factor:?} is not a number >= 0"))?;
        return Ok(Threshold::Times(base, f));
    }
    if parse_base(t).is_some() {
        return Ok(Threshold::Times(parse_base(t).unwrap_or(Base::Min), 1.0));
    }
    parse_duration_ns(t)
        .map(Threshold::Abs)
        .map_err(|e| match e {
            AnalyzeError::BadDuration { reason, .. } => reason,
            other => other.to_string(),
        })
}

/// One flow's current run under an [`AnomalySpec`], fed packet by packet in
/// sequence order: what a live trigger needs to see an anomaly as it forms
/// (the engine's pass counts runs when they close, with the same rule).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveRun {
    /// Packets in the current run (lost ones too under [`LostMode::Inf`]).
    pub len: u64,
}

impl LiveRun {
    /// A received packet of latency `lat_ns`; true when the run has just
    /// become an anomaly (its length reached `spec.n`).
    pub fn observe(&mut self, spec: &AnomalySpec, lat_ns: i64) -> bool {
        if spec.above(lat_ns) {
            self.len += 1;
            self.len == u64::from(spec.n)
        } else {
            self.len = 0;
            false
        }
    }

    /// `count` lost packets just before the next received one, by the spec's
    /// [`LostMode`]; true when they made the run an anomaly.
    pub fn lost(&mut self, spec: &AnomalySpec, count: u64) -> bool {
        match spec.lost {
            LostMode::Break => {
                self.len = 0;
                false
            }
            LostMode::Skip => false,
            LostMode::Inf => {
                let before = self.len;
                self.len += count;
                before < u64::from(spec.n) && self.len >= u64::from(spec.n)
            }
        }
    }
}

impl FromStr for AnomalySpec {
    type Err = AnalyzeError;

    /// Parse `N:T[:OPTIONS]`, e.g. `"2:250us"`, `"3:1ms"`, `"2:p50*3"`,
    /// `"2:min+100us"`, `"2:250us:gt,lost=inf"`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason: String| AnalyzeError::BadAnomalySpec {
            text: s.to_string(),
            reason,
        };
        let (n_text, rest) = s
            .split_once(':')
            .ok_or_else(|| bad("there is no ':' between N and T".into()))?;
        let n: u32 = n_text
            .trim()
            .parse()
            .map_err(|_| bad(format!("N = {:?} is not a whole number", n_text.trim())))?;
        if n == 0 {
            return Err(bad("N must be at least 1".into()));
        }
        let (t_text, opts) = rest.split_once(':').unwrap_or((rest, ""));
        let threshold = parse_threshold(t_text).map_err(|r| bad(format!("T: {r}")))?;
        let mut spec = AnomalySpec::new(n, 0);
        spec.threshold = threshold;
        if let Threshold::Abs(t) = threshold {
            spec.t_ns = t;
        }
        for opt in opts.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            match opt {
                "ge" | ">=" => spec.cmp = Cmp::Ge,
                "gt" | ">" => spec.cmp = Cmp::Gt,
                "lost=break" => spec.lost = LostMode::Break,
                "lost=inf" => spec.lost = LostMode::Inf,
                "lost=skip" => spec.lost = LostMode::Skip,
                other => {
                    return Err(bad(format!(
                    "unknown option {other:?} (options: ge, gt, lost=break, lost=inf, lost=skip)"
                )))
                }
            }
        }
        Ok(spec)
    }
}

impl std::fmt::Display for Base {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Base::Min => f.write_str("min"),
            Base::Mean => f.write_str("mean"),
            Base::Pct(p) => f.write_str(&p.label()),
        }
    }
}

impl std::fmt::Display for AnomalySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.threshold {
            Threshold::Abs(_) => write!(f, "{}:{}ns", self.n, self.t_ns)?,
            Threshold::Plus(b, add) => write!(f, "{}:{b}+{add}ns", self.n)?,
            Threshold::Times(b, x) => write!(f, "{}:{b}*{x}", self.n)?,
        }
        let mut opts = Vec::new();
        if self.cmp == Cmp::Gt {
            opts.push("gt");
        }
        match self.lost {
            LostMode::Break => {}
            LostMode::Inf => opts.push("lost=inf"),
            LostMode::Skip => opts.push("lost=skip"),
        }
        if !opts.is_empty() {
            write!(f, ":{}", opts.join(","))?;
        }
        Ok(())
    }
}

/// Parse a duration into whole nanoseconds: a decimal number with an
/// optional unit `ns`, `us` (or `µs`), `ms` or `s`; no unit means ns.
/// Examples: `"250us"` = 250 000, `"1.5ms"` = 1 500 000, `"2s"`, `"10"` = 10.
/// The value must be a whole number of nanoseconds (`"0.5ns"` is an error)
/// and fit in a u64. Decimal arithmetic is exact (no floating point).
pub fn parse_duration_ns(s: &str) -> Result<u64, AnalyzeError> {
    let bad = |reason: &str| AnalyzeError::BadDuration {
        text: s.to_string(),
        reason: reason.to_string(),
    };
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: u64 = match unit.trim() {
        "" | "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return Err(bad("the unit must be one of ns, us, ms, s")),
    };
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(bad("there is no number"));
    }
    if frac_part.contains('.') {
        return Err(bad("the number has more than one '.'"));
    }
    let overflow = || bad("the value is too large");
    let int: u64 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().map_err(|_| overflow())?
    };
    let mut value = int.checked_mul(scale).ok_or_else(overflow)?;
    // Fractional digits: the k-th is worth scale / 10^k ns (scale is a power
    // of ten); digits below 1 ns must be zero.
    let mut unit_ns = scale;
    for d in frac_part.bytes() {
        let digit = u64::from(d - b'0');
        if unit_ns == 1 {
            if digit != 0 {
                return Err(bad("the value is not a whole number of nanoseconds"));
            }
            continue;
        }
        unit_ns /= 10;
        value = value.checked_add(digit * unit_ns).ok_or_else(overflow)?;
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_above_agrees_with_above() {
        for text in ["1:250ns", "1:250ns:gt", "1:0ns", "1:0ns:gt"] {
            let s: AnomalySpec = text.parse().unwrap();
            let low = s.lowest_above().unwrap();
            for lat in [-1, 0, 1, 249, 250, 251, 252] {
                assert_eq!(s.above(lat), lat >= low, "{text} at {lat}");
            }
        }
        let mut never: AnomalySpec = "1:1ns:gt".parse().unwrap();
        never.t_ns = i64::MAX as u64;
        assert_eq!(never.lowest_above(), None);
        assert!(!never.above(i64::MAX));
    }

    #[test]
    fn durations() {
        for (text, ns) in [
            ("250us", 250_000),
            ("250µs", 250_000),
            ("1.5ms", 1_500_000),
            ("100ns", 100),
            ("2s", 2_000_000_000),
            ("10", 10),
            ("0.000000001s", 1),
            (".5us", 500),
            ("750000ns", 750_000),
            (" 3 ms ", 3_000_000),
        ] {
            assert_eq!(parse_duration_ns(text).expect(text), ns, "{text}");
        }
        for text in [
            "",
            "ms",
            "1.2.3ms",
            "-5us",
            "5 minutes",
            "0.5ns",
            "1.25",
            "99999999999999999999",
        ] {
            let e = parse_duration_ns(text).expect_err(text);
            assert!(e.to_string().contains(&format!("{text:?}")), "{e}");
        }
    }

    #[test]
    fn anomaly_specs() {
        for (text, n, t_ns) in [
            ("2:250us", 2, 250_000),
            ("3:1ms", 3, 1_000_000),
            ("2:750000ns", 2, 750_000),
            ("1:1.5ms", 1, 1_500_000),
            ("2:1s", 2, 1_000_000_000),
        ] {
            assert_eq!(
                text.parse::<AnomalySpec>().expect(text),
                AnomalySpec::new(n, t_ns)
            );
        }
        for text in [
            "2",
            "0:1ms",
            "x:1ms",
            "2:1parsec",
            "2:",
            "2:1ms:lost=maybe",
            "2:p50*x",
            "2:p101+1us",
        ] {
            let e = text.parse::<AnomalySpec>().expect_err(text);
            let msg = e.to_string();
            assert!(msg.contains(&format!("{text:?}")), "{msg}");
            assert!(msg.contains("N:T[:OPTIONS] with T like 250us"), "{msg}");
        }
    }
}
