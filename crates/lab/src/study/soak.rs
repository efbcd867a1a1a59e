//! The soak's verdict (`scripts/soak.sh`, docs/benchmarks.md "## Soak"): from
//! the resident-memory samples of the generator and the recorder, the
//! generator's and recorder's reports and the veth counters, the packet
//! accounting and whether memory stayed flat after warm-up.
//!
//! Warm-up ends at the first sample taken once both `warmup_fraction` of the
//! run (of the packets for a count, of the time for a duration) and
//! `warmup_min_s` have passed. The baseline is that sample's VmRSS; growth is
//! measured to the last sample and to the largest sample after warm-up, and
//! the verdict takes the larger. The statistics (max, median, the trend line)
//! come from `nflab-analyze`.

use std::path::Path;

use nflab_analyze::dist::{Distribution, Pct};
use nflab_analyze::linfit::linear_fit;
use serde::{Deserialize, Serialize};

/// What the script asked for (`params.json`).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct SoakParams {
    /// Packets to send (count form).
    pub count: Option<u64>,
    /// Seconds to send (duration form).
    pub duration_s: Option<f64>,
    /// Share of the run that is warm-up.
    pub warmup_fraction: f64,
    /// And at least this many seconds.
    pub warmup_min_s: f64,
    /// Largest growth after warm-up that passes, %.
    pub max_growth_pct: f64,
}

/// One row of `rss.csv`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Seconds since the generator started.
    pub t_s: f64,
    /// Generator VmRSS, KiB.
    pub gen_rss_kib: u64,
    /// Generator VmHWM, KiB.
    pub gen_hwm_kib: u64,
    /// Recorder VmRSS, KiB.
    pub rec_rss_kib: u64,
    /// Recorder VmHWM, KiB.
    pub rec_hwm_kib: u64,
    /// Packets the receiving veth has taken since the start.
    pub rx_packets: u64,
}

/// The header `rss.csv` must have.
pub const CSV_HEADER: &str = "t_s,gen_rss_kib,gen_hwm_kib,rec_rss_kib,rec_hwm_kib,rx_packets";

/// Parse `rss.csv`; the error names the line.
pub fn parse_samples(text: &str) -> Result<Vec<Sample>, String> {
    let mut lines = text.lines();
    match lines.next() {
        Some(h) if h.trim() == CSV_HEADER => {}
        other => {
            return Err(format!(
                "the first line is {:?}, not the header {CSV_HEADER}",
                other.unwrap_or("")
            ))
        }
    }
    let mut out = Vec::new();
    for (i, line) in lines.enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let bad = || format!("line {} ({line:?}) is not {CSV_HEADER}", i + 2);
        if f.len() != 6 {
            return Err(bad());
        }
        let u = |k: usize| f[k].parse::<u64>().map_err(|_| bad());
        out.push(Sample {
            t_s: f[0].parse::<f64>().map_err(|_| bad())?,
            gen_rss_kib: u(1)?,
            gen_hwm_kib: u(2)?,
            rec_rss_kib: u(3)?,
            rec_hwm_kib: u(4)?,
            rx_packets: u(5)?,
        });
    }
    Ok(out)
}

/// Memory of one process after warm-up.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MemoryVerdict {
    /// VmRSS at the first sample after warm-up, KiB.
    pub rss_after_warmup_kib: u64,
    /// VmRSS at the last sample, KiB.
    pub rss_end_kib: u64,
    /// Largest VmRSS after warm-up, KiB.
    pub rss_max_after_warmup_kib: u64,
    /// Median VmRSS after warm-up, KiB.
    pub rss_median_after_warmup_kib: u64,
    /// VmRSS at the first sample, KiB (before warm-up).
    pub rss_first_kib: u64,
    /// VmHWM at the last sample, KiB.
    pub hwm_end_kib: u64,
    /// (end − after warm-up) / after warm-up, %.
    pub growth_end_pct: f64,
    /// (max after warm-up − after warm-up) / after warm-up, %.
    pub growth_max_pct: f64,
    /// Least-squares slope of VmRSS over time after warm-up, KiB per hour, and the
    /// half-width of its 95 % CI (None with fewer than 3 samples).
    pub trend_kib_per_h: Option<f64>,
    /// Half-width of the trend's 95 % CI.
    pub trend_ci_kib_per_h: Option<f64>,
    /// max(growth_end_pct, growth_max_pct) ≤ the limit.
    pub pass: bool,
}

/// Where warm-up ends: the index of the first sample after it.
pub fn warmup_end(samples: &[Sample], p: &SoakParams) -> Option<usize> {
    samples.iter().position(|s| {
        let share_done = match (p.count, p.duration_s) {
            (Some(n), _) => s.rx_packets as f64 >= p.warmup_fraction * n as f64,
            (None, Some(d)) => s.t_s >= p.warmup_fraction * d,
            (None, None) => true,
        };
        share_done && s.t_s >= p.warmup_min_s
    })
}

/// The verdict for one series of (t_s, VmRSS KiB, VmHWM KiB) from sample `from` on.
pub fn memory_verdict(
    series: &[(f64, u64, u64)],
    from: usize,
    max_growth_pct: f64,
) -> Option<MemoryVerdict> {
    let after = series.get(from..).filter(|s| !s.is_empty())?;
    let mut dist = Distribution::new(u64::MAX, 3);
    for &(_, rss, _) in after {
        dist.record(rss as i64);
    }
    let base = after[0].1;
    let end = after[after.len() - 1].1;
    let max = dist.max().unwrap_or(0) as u64;
    let median = dist
        .quantiles(&[Pct::parse("50").expect("a valid percentile")])
        .first()
        .copied()
        .flatten()
        .map_or(0, |q| q.value as u64);
    let pct = |v: u64| {
        if base == 0 {
            0.0
        } else {
            (v as f64 - base as f64) / base as f64 * 100.0
        }
    };
    let xs: Vec<f64> = after.iter().map(|s| s.0).collect();
    let ys: Vec<f64> = after.iter().map(|s| s.1 as f64).collect();
    let fit = linear_fit(&xs, &ys, 0.95);
    let (growth_end_pct, growth_max_pct) = (pct(end), pct(max));
    Some(MemoryVerdict {
        rss_after_warmup_kib: base,
        rss_end_kib: end,
        rss_max_after_warmup_kib: max,
        rss_median_after_warmup_kib: median,
        rss_first_kib: series[0].1,
        hwm_end_kib: after[after.len() - 1].2,
        growth_end_pct,
        growth_max_pct,
        trend_kib_per_h: fit.map(|f| f.slope * 3600.0),
        trend_ci_kib_per_h: fit.map(|f| f.slope_ci * 3600.0),
        pass: growth_end_pct.max(growth_max_pct) <= max_growth_pct,
    })
}

/// Packet accounting of the soak.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Packets {
    /// What the generator was asked to send (count form).
    pub target: Option<u64>,
    /// The generator's count of frames sent.
    pub sent: u64,
    /// Frames the receiving veth took (rx_packets, end − start).
    pub veth_rx: u64,
    /// Frames the receiving veth dropped (rx_dropped, end − start).
    pub veth_rx_dropped: u64,
    /// Records the recorder wrote.
    pub recorded: u64,
    /// Frames the recorder's socket lost (ring full).
    pub kernel_drops: u64,
    /// Frames at the recorder that were not probes.
    pub foreign_frames: u64,
    /// sent − recorded.
    pub lost: u64,
    /// recorded + lost == sent, and recorded + kernel_drops + foreign_frames == veth_rx.
    pub consistent: bool,
}

/// Everything `soak.json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct SoakVerdict {
    /// The parameters.
    pub params: SoakParams,
    /// Packet accounting.
    pub packets: Packets,
    /// Seconds the generator sent (first to last frame).
    pub send_s: f64,
    /// The generator's rate.
    pub tx_pps: f64,
    /// Records per second of sending.
    pub recorded_pps: f64,
    /// Samples taken.
    pub samples: usize,
    /// Time of the first sample after warm-up, s.
    pub warmup_end_s: f64,
    /// Packets at the receiving veth by then.
    pub warmup_end_packets: u64,
    /// The recorder's memory.
    pub recorder: MemoryVerdict,
    /// The generator's memory.
    pub generator: MemoryVerdict,
    /// What the record segments kept (from `nflab recv --json`), if segmented.
    pub segments: Option<serde_json::Value>,
    /// Both processes stayed within the limit and the packets add up.
    pub pass: bool,
}

fn read_json(dir: &Path, name: &str) -> Result<serde_json::Value, String> {
    let p = dir.join(name);
    let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not valid JSON: {e}", p.display()))
}

fn field(v: &serde_json::Value, path: &str, file: &str) -> Result<u64, String> {
    path.split('.')
        .try_fold(v, |v, k| v.get(k))
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| format!("{file} has no number at {path}"))
}

/// Read a soak directory (`params.json`, `rss.csv`, `gen.json`, `recv.json`,
/// `counters.json`) and compute the verdict.
pub fn evaluate(dir: &Path) -> Result<SoakVerdict, String> {
    let params: SoakParams = serde_json::from_value(read_json(dir, "params.json")?)
        .map_err(|e| format!("params.json: {e}"))?;
    let csv_path = dir.join("rss.csv");
    let csv =
        std::fs::read_to_string(&csv_path).map_err(|e| format!("{}: {e}", csv_path.display()))?;
    let samples = parse_samples(&csv).map_err(|e| format!("{}: {e}", csv_path.display()))?;
    let gen = read_json(dir, "gen.json")?;
    let recv = read_json(dir, "recv.json")?;
    let counters = read_json(dir, "counters.json")?;
    let delta = |k: &str| -> Result<u64, String> {
        let a = field(&counters, &format!("after.{k}"), "counters.json")?;
        let b = field(&counters, &format!("before.{k}"), "counters.json")?;
        Ok(a.saturating_sub(b))
    };
    let sent = field(&gen, "sent", "gen.json")?;
    let recorded = field(&recv, "probes", "recv.json")?;
    let kernel_drops = field(&recv, "kernel_drops", "recv.json")?;
    let foreign_frames = field(&recv, "foreign_frames", "recv.json")?;
    let veth_rx = delta("rx_packets")?;
    let lost = sent.saturating_sub(recorded);
    let packets = Packets {
        target: params.count,
        sent,
        veth_rx,
        veth_rx_dropped: delta("rx_dropped")?,
        recorded,
        kernel_drops,
        foreign_frames,
        lost,
        consistent: recorded + lost == sent && recorded + kernel_drops + foreign_frames == veth_rx,
    };
    let from = warmup_end(&samples, &params).ok_or_else(|| {
        format!(
            "{}: no sample after warm-up ({} samples): run longer or sample more often",
            csv_path.display(),
            samples.len()
        )
    })?;
    let series = |f: fn(&Sample) -> (f64, u64, u64)| samples.iter().map(f).collect::<Vec<_>>();
    let rec = series(|s| (s.t_s, s.rec_rss_kib, s.rec_hwm_kib));
    let gen_mem = series(|s| (s.t_s, s.gen_rss_kib, s.gen_hwm_kib));
    let recorder = memory_verdict(&rec, from, params.max_growth_pct).expect("from < len");
    let generator = memory_verdict(&gen_mem, from, params.max_growth_pct).expect("from < len");
    let first = gen.get("first_tx_ns").and_then(serde_json::Value::as_u64);
    let last = gen.get("last_tx_ns").and_then(serde_json::Value::as_u64);
    let send_s = match (first, last) {
        (Some(a), Some(b)) if b > a => (b - a) as f64 / 1e9,
        _ => 0.0,
    };
    let per_s = |n: u64| if send_s > 0.0 { n as f64 / send_s } else { 0.0 };
    Ok(SoakVerdict {
        pass: recorder.pass && generator.pass && packets.consistent,
        tx_pps: per_s(sent),
        recorded_pps: per_s(recorded),
        send_s,
        samples: samples.len(),
        warmup_end_s: samples[from].t_s,
        warmup_end_packets: samples[from].rx_packets,
        recorder,
        generator,
        segments: recv.get("segments").cloned(),
        packets,
        params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(count: Option<u64>, min_s: f64) -> SoakParams {
        SoakParams {
            count,
            duration_s: Some(100.0),
            warmup_fraction: 0.1,
            warmup_min_s: min_s,
            max_growth_pct: 5.0,
        }
    }

    fn sample(t: f64, rss: u64, rx: u64) -> Sample {
        Sample {
            t_s: t,
            gen_rss_kib: 1000,
            gen_hwm_kib: 1000,
            rec_rss_kib: rss,
            rec_hwm_kib: rss,
            rx_packets: rx,
        }
    }

    #[test]
    fn warmup_ends_at_the_later_of_the_share_and_the_minimum() {
        let s: Vec<Sample> = (0..20).map(|i| sample(i as f64, 100, i * 1000)).collect();
        // 10 % of 20 000 packets = 2 000: sample 2; with 5 s minimum: sample 5.
        assert_eq!(warmup_end(&s, &params(Some(20_000), 0.0)), Some(2));
        assert_eq!(warmup_end(&s, &params(Some(20_000), 5.0)), Some(5));
        // Duration form: 10 % of 100 s = 10 s.
        assert_eq!(warmup_end(&s, &params(None, 0.0)), Some(10));
        assert_eq!(warmup_end(&s, &params(None, 30.0)), None);
    }

    #[test]
    fn growth_against_a_known_series() {
        // 10 warm-up samples climbing, then 1000 KiB rising to 1040 with a 1060 spike.
        let mut s: Vec<(f64, u64, u64)> = (0..10).map(|i| (i as f64, 100 * i, 100 * i)).collect();
        for i in 0..=40u64 {
            let rss = if i == 20 { 1060 } else { 1000 + i };
            s.push(((10 + i) as f64, rss, rss));
        }
        let v = memory_verdict(&s, 10, 5.0).unwrap();
        assert_eq!(v.rss_after_warmup_kib, 1000);
        assert_eq!(v.rss_end_kib, 1040);
        assert_eq!(v.rss_max_after_warmup_kib, 1060);
        // Nearest rank 21 of 41: 1000..=1019, then 1021 (1020 became the spike).
        assert_eq!(v.rss_median_after_warmup_kib, 1021);
        assert!((v.growth_end_pct - 4.0).abs() < 1e-9);
        assert!((v.growth_max_pct - 6.0).abs() < 1e-9);
        assert!(!v.pass, "the spike is above 5 %");
        // Without the spike the slope is 1 KiB/s = 3600 KiB/h (within its CI).
        let flat: Vec<(f64, u64, u64)> = (0..=40u64).map(|i| (i as f64, 1000 + i, 0)).collect();
        let f = memory_verdict(&flat, 0, 5.0).unwrap();
        assert!((f.trend_kib_per_h.unwrap() - 3600.0).abs() < 1e-6);
        assert!(f.pass);
    }

    #[test]
    fn a_bad_csv_line_is_named() {
        let e = parse_samples(&format!("{CSV_HEADER}\n1,2,3,4,5,6\n1,2,x,4,5,6\n")).unwrap_err();
        assert!(e.contains("line 3"), "{e}");
        assert!(parse_samples("t,rss\n").unwrap_err().contains("header"));
    }
}
