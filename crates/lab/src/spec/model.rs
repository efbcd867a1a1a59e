//! `[model]` of the spec: model predictions laid over the measurements.
//!
//! With this section `nflab run` ends as `nflab model fit DIR` would, with
//! the settings below: it fits the batch-polling model of `nflab-model`
//! (t_CPU from the DuT's `sheep` cycles at `cpu_hz` — the resource model —
//! or from the lowest-rate run's median minus the loopback baseline) and
//! writes the predicted p50 and mean of every run to `DIR/model.json`
//! before it draws the report, which lays them over the measurements.
//!
//! ```toml
//! [model]
//! cpu_hz = 3.3e9
//! interrupts = ["250:10900"]
//! ```

use serde::{Deserialize, Serialize};

/// `[model]`: the settings of `nflab model fit`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// Fit at the end of `nflab run` (`false` keeps the settings but skips it).
    #[serde(default = "yes")]
    pub fit: bool,
    /// Core clock of the DuT, Hz: with the DuT's `sheep` cycles, t_CPU comes
    /// from the resource model instead of the lowest-rate run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_hz: Option<f64>,
    /// Cores of the DuT processing packets.
    #[serde(default = "one")]
    pub cores: f64,
    /// Framework I/O cycles per packet added to the `sheep` cycles.
    #[serde(default)]
    pub c_io: f64,
    /// Median latency of a forwarder without processing, ns (default: the
    /// median of the experiment's loopback runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_median_ns: Option<f64>,
    /// Batch size of the DuT's poller (default: `dut.batch`, else 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u64>,
    /// Receive queue capacity of the DuT (default: `dut.queue`, else 4096).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<u64>,
    /// Interrupt sources of the DuT core, `"RATE_HZ:DURATION_NS"`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interrupts: Vec<String>,
    /// Packets simulated per run, at most.
    #[serde(default = "default_sim_packets")]
    pub sim_packets: u64,
}

fn yes() -> bool {
    true
}
fn one() -> f64 {
    1.0
}
fn default_sim_packets() -> u64 {
    200_000
}

/// Most packets simulated per run: beyond this a fit takes minutes.
pub const MAX_SIM_PACKETS: u64 = 100_000_000;

impl Default for ModelSection {
    fn default() -> Self {
        ModelSection {
            fit: true,
            cpu_hz: None,
            cores: 1.0,
            c_io: 0.0,
            baseline_median_ns: None,
            batch: None,
            queue: None,
            interrupts: Vec::new(),
            sim_packets: default_sim_packets(),
        }
    }
}

/// `"RATE_HZ:DURATION_NS"` as `(rate_hz, duration_ns)`, or why not (a sentence the
/// caller prefixes with the key or flag it came from).
pub fn parse_interrupt(s: &str) -> Result<(f64, f64), String> {
    let bad = || {
        format!("{s:?} is not RATE_HZ:DURATION_NS with two positive numbers, e.g. \"250:10900\"")
    };
    let (r, d) = s.split_once(':').ok_or_else(bad)?;
    let r: f64 = r.trim().parse().map_err(|_| bad())?;
    let d: f64 = d.trim().parse().map_err(|_| bad())?;
    if r.is_finite() && d.is_finite() && r > 0.0 && d > 0.0 {
        Ok((r, d))
    } else {
        Err(bad())
    }
}

impl ModelSection {
    /// Check the values serde cannot: `Err((key, sentence))`.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let positive = |key: &'static str, v: f64, what: &str| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err((key, format!("model.{key} = {v} is not valid: use {what}")))
            }
        };
        if let Some(hz) = self.cpu_hz {
            positive("cpu_hz", hz, "the DuT's core clock in Hz, e.g. 3.3e9")?;
        }
        positive("cores", self.cores, "the number of DuT cores, above 0")?;
        if !(self.c_io.is_finite() && self.c_io >= 0.0) {
            return Err((
                "c_io",
                format!(
                    "model.c_io = {} is not valid: use cycles per packet, 0 or more",
                    self.c_io
                ),
            ));
        }
        if let Some(b) = self.baseline_median_ns {
            if !(b.is_finite() && b >= 0.0) {
                return Err((
                    "baseline_median_ns",
                    format!("model.baseline_median_ns = {b} is not valid: use ns, 0 or more"),
                ));
            }
        }
        for (key, v) in [("batch", self.batch), ("queue", self.queue)] {
            if v == Some(0) {
                return Err((key, format!("model.{key} = 0 is not valid: use 1 or more")));
            }
        }
        if !(1..=MAX_SIM_PACKETS).contains(&self.sim_packets) {
            return Err((
                "sim_packets",
                format!(
                    "model.sim_packets = {} is not valid: use 1 to {MAX_SIM_PACKETS}",
                    self.sim_packets
                ),
            ));
        }
        for i in &self.interrupts {
            parse_interrupt(i).map_err(|m| ("interrupts", format!("model.interrupts: {m}")))?;
        }
        Ok(())
    }
}
