//! `[rfc2544]` of the spec: the procedure and its keys (the search itself
//! is in `study::rfc2544`).

use serde::{Deserialize, Serialize};

/// `[rfc2544]` of the spec.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Rfc2544Section {
    /// Which procedure.
    pub procedure: Procedure,
    /// Largest loss ratio a trial may have and still pass (RFC 2544: 0).
    #[serde(default)]
    pub loss_tolerance: f64,
    /// The search stops when the pass/fail interval is this narrow.
    #[serde(default = "default_resolution")]
    pub resolution_pps: f64,
    /// Lowest rate tried.
    #[serde(default = "default_min")]
    pub min_rate_pps: f64,
    /// Highest rate tried (the first trial of the throughput search).
    #[serde(default = "default_max")]
    pub max_rate_pps: f64,
    /// Measured seconds of each trial (RFC 2544 asks for at least 60 s on
    /// real equipment; shorter trials are fine for exploration).
    #[serde(default = "default_trial")]
    pub trial_s: f64,
    /// Latency procedure: fraction of the found throughput to measure at.
    #[serde(default = "one")]
    pub latency_fraction: f64,
    /// Knee procedure: number of geometrically spaced rates.
    #[serde(default = "default_steps")]
    pub knee_steps: u32,
    /// Back-to-back: shortest burst tried.
    #[serde(default = "default_min_burst")]
    pub min_burst: u64,
    /// Back-to-back: longest burst tried (the first trial).
    #[serde(default = "default_max_burst")]
    pub max_burst: u64,
    /// Back-to-back: the search stops when pass and fail are this close.
    #[serde(default = "default_burst_resolution")]
    pub burst_resolution: u64,
}

fn default_min_burst() -> u64 {
    16
}
fn default_max_burst() -> u64 {
    65_536
}
fn default_burst_resolution() -> u64 {
    16
}

fn default_resolution() -> f64 {
    1_000.0
}
fn default_min() -> f64 {
    1_000.0
}
fn default_max() -> f64 {
    1_000_000.0
}
fn default_trial() -> f64 {
    2.0
}
fn one() -> f64 {
    1.0
}
fn default_steps() -> u32 {
    8
}

/// RFC 2544 procedure.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Procedure {
    /// Highest rate with loss ≤ tolerance (§26.1).
    Throughput,
    /// Throughput, then latency at `latency_fraction` of it (§26.2).
    Latency,
    /// Rates from min to max, geometric: where loss starts, how latency jumps.
    Knee,
    /// Longest burst of back-to-back frames with no loss (§26.4).
    BackToBack,
}

impl Rfc2544Section {
    /// Check ranges; names the key and what is valid.
    pub fn validate(&self) -> Result<(), String> {
        let pos = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!(
                    "rfc2544.{name} = {v} is not valid: use a positive number"
                ))
            }
        };
        pos("resolution_pps", self.resolution_pps)?;
        pos("min_rate_pps", self.min_rate_pps)?;
        pos("max_rate_pps", self.max_rate_pps)?;
        pos("trial_s", self.trial_s)?;
        if !(0.0..1.0).contains(&self.loss_tolerance) {
            return Err(format!(
                "rfc2544.loss_tolerance = {} is not valid: use a loss ratio from 0 up to (not including) 1",
                self.loss_tolerance
            ));
        }
        if self.min_rate_pps >= self.max_rate_pps {
            return Err(format!(
                "rfc2544.min_rate_pps = {} must be below rfc2544.max_rate_pps = {}",
                self.min_rate_pps, self.max_rate_pps
            ));
        }
        if !(self.latency_fraction > 0.0 && self.latency_fraction <= 1.0) {
            return Err(format!(
                "rfc2544.latency_fraction = {} is not valid: use a fraction above 0 and at most 1",
                self.latency_fraction
            ));
        }
        if self.min_burst == 0 || self.min_burst >= self.max_burst || self.burst_resolution == 0 {
            return Err(format!(
                "rfc2544.min_burst = {}, max_burst = {}, burst_resolution = {} are not valid: use 1 ≤ min_burst < max_burst and a resolution of 1 or more",
                self.min_burst, self.max_burst, self.burst_resolution
            ));
        }
        if self.knee_steps < 2 {
            return Err(format!(
                "rfc2544.knee_steps = {} is not valid: use 2 or more",
                self.knee_steps
            ));
        }
        Ok(())
    }
}
