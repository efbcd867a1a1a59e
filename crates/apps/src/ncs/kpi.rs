//! The figures of a run, `ncs.json` (seed 000, Tables 6.3 and 6.4).
//!
//! Delays per period, from the timestamps of [`PeriodRecord`] (seed 000,
//! Sec. 6.1.7):
//!
//! | key | formula |
//! |---|---|
//! | `d_PS` | sensor message sent − sensors read (t_S,STX − t_S,R) |
//! | `d_PC` | actuation sent − sensor message received, at the controller (t_A,STX − t_S,SRX) |
//! | `d_N` | ½ (actuation received − sensor message sent), at the plant (Eq. 6.1: both directions' network and stacks, and d_PC) |
//! | `d_PA` | motors written − actuation received (t_A,W − t_A,SRX: the wait for the deadline) |
//! | `period` | sensors read − the previous period's (Δ̂_T) |
//!
//! Each as `median`, `ci95` (half the width of the order-statistic 95 %
//! interval of the median), `q1`, `q3` and `p99_9`, in ms of wall-clock
//! time; d_PC, d_N and d_PA over the periods whose actuation came in time.
//! IAEs (Eqs. 6.2–6.4) sum |Θ(kT)| and |Φ(kT)| in degrees and |ν(kT)| in
//! volts over the periods run; `losses` counts actuations lost or later
//! than the deadline.

use std::collections::BTreeMap;

use nflab_analyze::dist::{Distribution, Pct};
use nflab_analyze::order_ci::quantile_ci_ranks;
use serde::Serialize;

use super::session::{NcsConfig, PeriodRecord};

/// One delay's statistics, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DelayStats {
    /// Median.
    pub median: f64,
    /// Half-width of the 95 % confidence interval of the median.
    pub ci95: f64,
    /// First quartile.
    pub q1: f64,
    /// Third quartile.
    pub q3: f64,
    /// 99.9th percentile.
    pub p99_9: f64,
}

/// Integrated absolute errors.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Iae {
    /// Σ |Θ(kT)|, degrees.
    pub theta: f64,
    /// Σ |Φ(kT)|, degrees.
    pub phi: f64,
    /// Σ |ν(kT)|, volts.
    pub nu: f64,
}

/// `ncs.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NcsReport {
    /// `d_PC`, `d_PS`, `d_N`, `d_PA`, `period`; a delay without values is absent.
    pub delays_ms: BTreeMap<String, DelayStats>,
    /// Quality of control.
    pub iae: Iae,
    /// Actuations lost or late.
    pub losses: u64,
    /// The pitch went beyond 45°.
    pub fell: bool,
    /// Periods run (all of them unless it fell).
    pub periods_completed: u32,
    /// Periods asked for.
    pub periods: u32,
    /// Faster than real time by this factor (1: real time); delays are wall-clock.
    pub time_scale: f64,
    /// Sensor messages the controller answered, when it ran in this process:
    /// `periods_completed` of them means every loss was an actuation that came
    /// too late or was lost on the way back, not a sensor message that never
    /// reached the controller.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller_answered: Option<u64>,
}

/// The statistics of `values_ns`, or `None` without values.
pub fn delay_stats(values_ns: &[i64]) -> Option<DelayStats> {
    let mut d = Distribution::new(u64::MAX, 3);
    values_ns.iter().for_each(|&v| d.record(v));
    let pcts = ["25", "50", "75", "99.9"].map(|p| Pct::parse(p).expect("a percentile"));
    let q = d.quantiles(&pcts);
    let ms = |i: usize| q[i].map(|x| x.value as f64 / 1e6);
    let (lo, hi) = quantile_ci_ranks(d.count(), 0.5, 0.95)?;
    let bounds = d.values_at_ranks(&[lo, hi]);
    Some(DelayStats {
        median: ms(1)?,
        ci95: (bounds[1].value - bounds[0].value) as f64 / 2e6,
        q1: ms(0)?,
        q3: ms(2)?,
        p99_9: ms(3)?,
    })
}

/// The delays of Table 6.3, in its column order, as they appear in
/// `ncs.json` and as columns `<key>_ns` of `ncs-periods.csv`.
pub const DELAY_KEYS: [&str; 5] = ["d_PC", "d_PS", "d_N", "d_PA", "period"];

/// Each delay of each period, ns, in [`DELAY_KEYS`] order (the formulas of
/// the module's table): `None` where a period has no value (no actuation in
/// time, or the first period's `period`).
pub fn period_delays(records: &[PeriodRecord]) -> Vec<[Option<i64>; 5]> {
    let diff = |a: u64, b: u64| a as i64 - b as i64;
    records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let answered = match (r.t_ctrl_recv_ns, r.t_ctrl_send_ns, r.t_act_recv_ns) {
                (Some(rx), Some(tx), Some(arx)) => Some((rx, tx, arx)),
                _ => None,
            };
            [
                answered.map(|(rx, tx, _)| diff(tx, rx)),
                Some(diff(r.t_sensor_send_ns, r.t_read_ns)),
                answered.map(|(_, _, arx)| diff(arx, r.t_sensor_send_ns) / 2),
                answered.map(|(_, _, arx)| diff(r.t_write_ns, arx)),
                i.checked_sub(1)
                    .map(|p| diff(r.t_read_ns, records[p].t_read_ns)),
            ]
        })
        .collect()
}

/// The report of a run's records.
pub fn report(records: &[PeriodRecord], fell: bool, cfg: &NcsConfig) -> NcsReport {
    let per_period = period_delays(records);
    let series = DELAY_KEYS.iter().enumerate().map(|(j, k)| {
        let v: Vec<i64> = per_period.iter().filter_map(|d| d[j]).collect();
        (*k, v)
    });
    let delays_ms = series
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_string(), delay_stats(&v)?)))
        .collect();
    NcsReport {
        delays_ms,
        iae: Iae {
            theta: records.iter().map(|r| r.pitch_rad.abs().to_degrees()).sum(),
            phi: records.iter().map(|r| r.wheel_rad.abs().to_degrees()).sum(),
            nu: records.iter().map(|r| r.voltage_at_sample_v.abs()).sum(),
        },
        losses: records.iter().filter(|r| r.lost).count() as u64,
        fell,
        periods_completed: records.len() as u32,
        periods: cfg.periods,
        time_scale: cfg.time_scale,
        controller_answered: None,
    }
}

impl NcsReport {
    /// Seed 000's Tables 6.3 and 6.4 for this run, as Markdown: each delay as
    /// "median±ci95; q1; q3; p99.9" in ms, then Σ_Θ, Σ_Φ, Σ_ν and l.
    pub fn tables_markdown(&self, scenario: &str) -> String {
        let mut out = String::from(
            "| Scenario | d_P,C | d_P,S | d_N | d_P,A | Δ̂_T |\n|---|---|---|---|---|---|\n",
        );
        out.push_str(&format!("| {scenario} |"));
        for k in DELAY_KEYS {
            match self.delays_ms.get(k) {
                Some(d) => out.push_str(&format!(
                    " {:.2}±{:.3}; {:.2}; {:.2}; {:.2} |",
                    d.median, d.ci95, d.q1, d.q3, d.p99_9
                )),
                None => out.push_str(" – |"),
            }
        }
        out.push_str("\n\n| Scenario | Σ_Θ | Σ_Φ | Σ_ν | l | fell | periods |\n|---|---|---|---|---|---|---|\n");
        out.push_str(&format!(
            "| {scenario} | {:.2} | {:.0} | {:.1} | {} | {} | {} of {} |\n",
            self.iae.theta,
            self.iae.phi,
            self.iae.nu,
            self.losses,
            self.fell,
            self.periods_completed,
            self.periods
        ));
        out
    }
}

/// The per-period records as CSV (one row per period; times in ns, angles
/// in rad, voltages in V; empty cells for an actuation that did not come),
/// then each period's delays of [`period_delays`] as `d_PC_ns` … `period_ns`,
/// for time series and histograms.
pub fn periods_csv(records: &[PeriodRecord]) -> String {
    let mut out = String::from(
        "seq,t_read_ns,t_sensor_send_ns,t_ctrl_recv_ns,t_ctrl_send_ns,t_act_recv_ns,t_write_ns,pitch_rad,wheel_rad,voltage_at_sample_v,voltage_v,lost",
    );
    for k in DELAY_KEYS {
        out.push_str(&format!(",{k}_ns"));
    }
    out.push('\n');
    let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
    for (r, d) in records.iter().zip(period_delays(records)) {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            r.seq,
            r.t_read_ns,
            r.t_sensor_send_ns,
            opt(r.t_ctrl_recv_ns),
            opt(r.t_ctrl_send_ns),
            opt(r.t_act_recv_ns),
            r.t_write_ns,
            r.pitch_rad,
            r.wheel_rad,
            r.voltage_at_sample_v,
            r.voltage_v,
            r.lost
        ));
        for v in d {
            out.push(',');
            if let Some(v) = v {
                out.push_str(&v.to_string());
            }
        }
        out.push('\n');
    }
    out
}

/// One delay's values (`key` of [`DELAY_KEYS`]) read back from the text of
/// an `ncs-periods.csv` ([`periods_csv`]), ns, skipping periods without one;
/// empty when the file has no such column (written by an older nflab).
pub fn periods_csv_delays(text: &str, key: &str) -> Vec<i64> {
    let mut lines = text.lines();
    let column = format!("{key}_ns");
    let Some(i) = lines
        .next()
        .and_then(|h| h.split(',').position(|c| c == column))
    else {
        return Vec::new();
    };
    lines
        .filter_map(|l| l.split(',').nth(i)?.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_and_iaes_of_hand_built_periods() {
        // Period k: read at 35k ms, sensor sent 1 ms later, controller gets it
        // after 2 + (k mod 3) ms and answers 0.5 ms later, the plant gets it
        // at the same one-way delay, writes at 29 ms. Period 4 is lost.
        let ms = 1_000_000u64;
        let records: Vec<PeriodRecord> = (0..9u64)
            .map(|k| {
                let t0 = 35 * ms * k + 1_000 * ms;
                let one_way = (2 + k % 3) * ms;
                let lost = k == 4;
                PeriodRecord {
                    seq: k as u32,
                    t_read_ns: t0,
                    t_sensor_send_ns: t0 + ms,
                    t_ctrl_recv_ns: (!lost).then_some(t0 + ms + one_way),
                    t_ctrl_send_ns: (!lost).then_some(t0 + ms + one_way + ms / 2),
                    t_act_recv_ns: (!lost).then_some(t0 + ms + 2 * one_way + ms / 2),
                    t_write_ns: t0 + 29 * ms,
                    pitch_rad: if k % 2 == 0 { 0.01 } else { -0.01 },
                    wheel_rad: 0.1,
                    voltage_at_sample_v: -2.0,
                    voltage_v: 0.0,
                    lost,
                }
            })
            .collect();
        let r = report(&records, false, &NcsConfig::default());
        let d = |k: &str| r.delays_ms[k];
        assert_eq!(d("d_PS").median, 1.0);
        assert_eq!(d("d_PC").median, 0.5);
        // One-way delays of the 8 answered periods: 2,3,4,2,(lost 3),4,2,3,4 →
        // d_N = one_way + 0.25 ms; median of {2,2,2,3,3,4,4,4} (nearest rank) = 3.
        assert_eq!(d("d_N").median, 3.25);
        assert_eq!(d("d_N").q1, 2.25);
        assert_eq!(d("d_N").p99_9, 4.25);
        assert_eq!(d("period").median, 35.0);
        assert_eq!(d("period").ci95, 0.0);
        // d_PA = 29 − (1 + 2·one_way + 0.5) ms, median one_way 3 → 21.5.
        assert_eq!(d("d_PA").median, 21.5);
        assert_eq!(r.losses, 1);
        assert!((r.iae.theta - 9.0 * 0.01f64.to_degrees()).abs() < 1e-9);
        assert!((r.iae.phi - 9.0 * 0.1f64.to_degrees()).abs() < 1e-9);
        assert_eq!(r.iae.nu, 18.0);
        assert_eq!(r.periods_completed, 9);
        let json = serde_json::to_value(&r).unwrap();
        for k in ["d_PC", "d_PS", "d_N", "d_PA", "period"] {
            for f in ["median", "ci95", "q1", "q3", "p99_9"] {
                assert!(json["delays_ms"][k][f].is_number(), "{k}.{f}");
            }
        }
        for k in ["theta", "phi", "nu"] {
            assert!(json["iae"][k].is_number());
        }
        assert_eq!(json["fell"], false);
        let md = r.tables_markdown("x");
        assert!(md.contains("| x | 0.50±"), "{md}");
        assert!(md.contains(" 3.25±"), "{md}");
        assert!(md.contains("| 1 | false | 9 of 1400 |"), "{md}");
        let csv = periods_csv(&records);
        assert_eq!(csv.lines().count(), 10);
        // Read back: the in-time periods' d_N, as `delay_stats` saw them.
        let d_n: Vec<i64> = period_delays(&records)
            .iter()
            .filter_map(|d| d[2])
            .collect();
        assert_eq!(periods_csv_delays(&csv, "d_N"), d_n);
        assert_eq!(d_n.len(), 8);
        assert!(periods_csv_delays("seq,t_read_ns\n0,1\n", "d_N").is_empty());
        // Period 4 was lost: d_PS and period only.
        assert!(
            csv.lines().nth(5).unwrap().starts_with("4,")
                && csv
                    .lines()
                    .nth(5)
                    .unwrap()
                    .ends_with(",true,,1000000,,,35000000")
        );
        // Period 1: one-way 3 ms → d_PC 0.5, d_PS 1, d_N 3.25, d_PA 21.5 ms
        // (29 − 1 − 6 − 0.5), period 35 ms.
        assert!(
            csv.lines()
                .nth(2)
                .unwrap()
                .ends_with(",false,500000,1000000,3250000,21500000,35000000"),
            "{}",
            csv.lines().nth(2).unwrap()
        );
        assert!(csv
            .lines()
            .nth(1)
            .unwrap()
            .ends_with(",false,500000,1000000,2250000,23500000,"));
        assert!(csv
            .lines()
            .next()
            .unwrap()
            .ends_with(",lost,d_PC_ns,d_PS_ns,d_N_ns,d_PA_ns,period_ns"));
    }
}
