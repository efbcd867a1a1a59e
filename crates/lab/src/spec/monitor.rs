//! `[monitor]` of the spec: which eBPF monitor watches the DuT, and how it samples,
//! matches and rotates its modes. Running it is `run::monitor`'s job.

use nflab_monitor::matcher::MatchMode;
use nflab_monitor::udp::{Rotation, RotationMode, Sample};
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::error::LabError;

/// `[monitor]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MonitorSection {
    /// "udp" (seed 003's KOMon) or "stages".
    pub kind: String,
    /// udp: "all", "off" or `{ packets = 10, mean_interval_s = 0.2 }` (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<SampleSpec>,
    /// udp: "fifo" (default) or "any".
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub matching: Option<String>,
    /// udp over a udp-relay: subtract the calibration offset (the constant-delay
    /// run's of the same mean) from every run's sojourn times at the end of the
    /// experiment (`monitor_corrected.parquet`, `monitor.json`'s `offset_subtracted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtract_offset: Option<bool>,
    /// udp: modes taking turns in blocks of `rotate_block_s` ("off", "sampling",
    /// "all"; randomised complete blocks): the monitor's cost in one run
    /// (`monitor_modes.parquet`, `monitor.json`'s `rotation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotate: Option<Vec<String>>,
    /// udp with `rotate`: length of a block, s (default 0.25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotate_block_s: Option<f64>,
}

/// Blocks the order is drawn for; a longer run starts it over (whole rounds).
const ROTATION_ROUNDS: usize = 40_000;

/// `monitor.sample`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum SampleSpec {
    /// "all" or "off".
    Word(String),
    /// N packets at exponential intervals.
    Windows {
        /// Packets per sample.
        packets: u32,
        /// Mean interval in s.
        mean_interval_s: f64,
    },
}

fn bad(m: String) -> LabError {
    LabError::Unsupported(m)
}

impl MonitorSection {
    pub(crate) fn sample(&self) -> Result<Sample, LabError> {
        match &self.sample {
            None => Ok(Sample::Windows {
                packets: 10,
                mean_interval_s: 0.2,
            }),
            Some(SampleSpec::Word(w)) if w == "all" => Ok(Sample::All),
            Some(SampleSpec::Word(w)) if w == "off" => Ok(Sample::Off),
            Some(SampleSpec::Word(w)) => Err(bad(format!(
                "monitor.sample = \"{w}\" is unknown: use \"all\", \"off\" or {{ packets = 10, mean_interval_s = 0.2 }}"
            ))),
            Some(SampleSpec::Windows {
                packets,
                mean_interval_s,
            }) => {
                if *packets == 0 || !(mean_interval_s.is_finite() && *mean_interval_s > 0.0) {
                    return Err(bad(format!(
                        "monitor.sample = {{ packets = {packets}, mean_interval_s = {mean_interval_s} }} needs packets >= 1 and mean_interval_s > 0"
                    )));
                }
                Ok(Sample::Windows {
                    packets: *packets,
                    mean_interval_s: *mean_interval_s,
                })
            }
        }
    }

    /// The rotation of `rotate`, its order drawn with `seed`; `None` without.
    pub(crate) fn rotation(&self, seed: u64) -> Result<Option<Rotation>, LabError> {
        let Some(names) = &self.rotate else {
            return match self.rotate_block_s {
                Some(b) => Err(bad(format!(
                    "monitor.rotate_block_s = {b} needs monitor.rotate, e.g. rotate = [\"off\", \"sampling\", \"all\"]"
                ))),
                None => Ok(None),
            };
        };
        let mut modes = Vec::new();
        for (i, n) in names.iter().enumerate() {
            let mode = match n.as_str() {
                "detached" => RotationMode::Detached,
                "off" => RotationMode::Attached(Sample::Off),
                "all" => RotationMode::Attached(Sample::All),
                "sampling" => RotationMode::Attached(self.sample()?),
                _ => {
                    return Err(bad(format!(
                        "monitor.rotate[{i}] = \"{n}\" is unknown: use \"detached\", \"off\", \"sampling\" or \"all\""
                    )))
                }
            };
            if names[..i].contains(n) {
                return Err(bad(format!(
                    "monitor.rotate names \"{n}\" twice: give each mode once"
                )));
            }
            modes.push(mode);
        }
        if modes.len() < 2 {
            return Err(bad(format!(
                "monitor.rotate = {names:?} needs at least two modes to compare, e.g. [\"off\", \"sampling\", \"all\"]"
            )));
        }
        if let Some(SampleSpec::Word(w)) = &self.sample {
            return Err(bad(format!(
                "monitor.sample = \"{w}\" cannot go with monitor.rotate: the rotation sets the mode (monitor.sample may give the windows of its \"sampling\")"
            )));
        }
        let block_s = self.rotate_block_s.unwrap_or(0.25);
        if !(0.05..=60.0).contains(&block_s) {
            return Err(bad(format!(
                "monitor.rotate_block_s = {block_s} is out of range: use 0.05 to 60 s"
            )));
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x524f_5441_5445);
        let mut order = nflab_analyze::design::BlockOrder::new(modes.len());
        let order = (0..ROTATION_ROUNDS * modes.len())
            .map(|_| order.next(&mut rng))
            .collect();
        Ok(Some(Rotation {
            modes,
            block: std::time::Duration::from_secs_f64(block_s),
            order,
        }))
    }

    pub(crate) fn matching(&self) -> Result<MatchMode, LabError> {
        match self.matching.as_deref() {
            None | Some("fifo") => Ok(MatchMode::Fifo),
            Some("any") => Ok(MatchMode::Any),
            Some(o) => Err(bad(format!(
                "monitor.match = \"{o}\" is unknown: use \"fifo\" or \"any\""
            ))),
        }
    }
}
