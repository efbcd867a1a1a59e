//! Parsing of durations and anomaly specs (`N:T`).

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::AnalyzeError;

/// An anomaly definition: `n` or more consecutive sequence numbers of a flow,
/// all received, each with latency `>= t_ns`. Written `N:T`, e.g. `2:250us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnomalySpec {
    /// Minimum run length, packets (at least 1).
    pub n: u32,
    /// Latency threshold, ns (inclusive).
    pub t_ns: u64,
}

impl FromStr for AnomalySpec {
    type Err = AnalyzeError;

    /// Parse `N:T`, e.g. `"2:250us"`, `"3:1ms"`, `"1:1.5ms"`, `"2:750000ns"`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason: String| AnalyzeError::BadAnomalySpec {
            text: s.to_string(),
            reason,
        };
        let (n_text, t_text) = s
            .split_once(':')
            .ok_or_else(|| bad("there is no ':' between N and T".into()))?;
        let n: u32 = n_text
            .trim()
            .parse()
            .map_err(|_| bad(format!("N = {:?} is not a whole number", n_text.trim())))?;
        if n == 0 {
            return Err(bad("N must be at least 1".into()));
        }
        let t_ns = parse_duration_ns(t_text.trim()).map_err(|e| match e {
            AnalyzeError::BadDuration { reason, .. } => bad(format!("T: {reason}")),
            other => other,
        })?;
        Ok(AnomalySpec { n, t_ns })
    }
}

impl std::fmt::Display for AnomalySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}ns", self.n, self.t_ns)
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
                AnomalySpec { n, t_ns }
            );
        }
        for text in ["2", "0:1ms", "x:1ms", "2:1parsec", "2:"] {
            let e = text.parse::<AnomalySpec>().expect_err(text);
            let msg = e.to_string();
            assert!(msg.contains(&format!("{text:?}")), "{msg}");
            assert!(msg.contains("N:T with T like 250us, 1ms, 500ns"), "{msg}");
        }
    }
}
