//! `[experiment]` of the spec: the study's name, includes, repetitions, order and
//! what a failed run does.

use serde::{Deserialize, Serialize};

use super::defaults::*;

/// `[experiment]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExperimentSection {
    /// Name used in the artifact directory.
    pub name: String,
    /// Free text for the report.
    #[serde(default)]
    pub description: Option<String>,
    /// Spec fragments merged in first (paths relative to this file); this
    /// file's own values override theirs. Resolved before the run, so the
    /// stored spec.toml is self-contained.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    /// How often each parameter combination runs.
    #[serde(default = "one")]
    pub repetitions: u32,
    /// Run order.
    #[serde(default)]
    pub order: Order,
    /// Seed of the shuffled order (and of any other randomness).
    #[serde(default = "one_u64")]
    pub seed: u64,
    /// Leave out the sweep's combinations that a rule refuses (listed with the
    /// sentence in `refused.json`) instead of refusing the whole spec.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_refused: bool,
    /// What a failed run (a full disk while recording, a DuT that died) does
    /// to the study: `stop` it (the default) or `continue` with the next run.
    #[serde(default, skip_serializing_if = "OnRunFailure::is_stop")]
    pub on_run_failure: OnRunFailure,
}

/// `experiment.on_run_failure`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum OnRunFailure {
    /// The study ends with the run's error (completed runs are kept).
    #[default]
    Stop,
    /// The run is marked failed (`runs/NNN/failed.json`) and the study goes on.
    Continue,
}

impl OnRunFailure {
    fn is_stop(&self) -> bool {
        *self == OnRunFailure::Stop
    }
}

/// Order of the runs.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    /// Cross product in the order written, repetitions innermost.
    #[default]
    Sequential,
    /// The same list, shuffled with `experiment.seed` (seed 001's regret: no randomised order).
    Random,
}
