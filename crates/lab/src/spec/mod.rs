//! The experiment spec (DESIGN §3.5): parsing, validation, and expansion of
//! `[sweep]` into concrete runs.
//!
//! A sweep is applied to the *TOML document* before it is deserialized, so a
//! swept key is checked by exactly the same rules as a key written by hand:
//! an unknown key or a bad value is an error naming the key.

pub mod analysis;
pub mod app;
pub mod capture;
mod defaults;
pub mod dut;
pub mod experiment;
pub mod external;
pub mod hosts;
mod includes;
pub mod knobs;
pub mod model;
pub mod monitor;
pub mod pairs;
pub mod rfc2544;
mod sweep;
#[cfg(test)]
mod tests;
pub mod topology;
pub mod traffic;
mod validate;

pub use analysis::AnalysisSection;
pub use app::AppSection;
pub use dut::{DutKind, DutSection};
pub use experiment::{ExperimentSection, OnRunFailure, Order};
use includes::resolve_includes;
pub use sweep::Refused;
pub use topology::{TopologyKind, TopologySection};
pub use traffic::*;
pub(crate) use validate::where_is;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::LabError;

/// The most runs one spec may declare (sweep combinations × repetitions).
pub const MAX_RUNS: u64 = 100_000;

/// A whole experiment as declared in one TOML file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Name, repetitions, order and seed.
    pub experiment: ExperimentSection,
    /// Where the LoadGen and DuT live.
    #[serde(default)]
    pub topology: TopologySection,
    /// The device under test.
    #[serde(default)]
    pub dut: DutSection,
    /// What the generator sends.
    #[serde(default)]
    pub traffic: TrafficSection,
    /// Which statistics to compute.
    #[serde(default)]
    pub analysis: AnalysisSection,
    /// Loop variables: dotted key -> list of values (kept as written).
    #[serde(default)]
    pub sweep: toml::Table,
    /// Host settings applied for each run, read back, recorded and reverted.
    #[serde(
        default,
        skip_serializing_if = "crate::spec::knobs::KnobsSection::is_empty"
    )]
    pub knobs: crate::spec::knobs::KnobsSection,
    /// Real hosts by role ("loadgen", "dut") for `topology.kind = "hosts"`.
    #[serde(
        default,
        skip_serializing_if = "crate::spec::hosts::Inventory::is_empty"
    )]
    pub hosts: crate::spec::hosts::Inventory,
    /// An RFC 2544 procedure instead of fixed-rate runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rfc2544: Option<crate::spec::rfc2544::Rfc2544Section>,
    /// Model predictions written as `model.json` before the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<crate::spec::model::ModelSection>,
    /// An application run over the DuT next to the probe traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<AppSection>,
    /// A capture with time travel during each run (`runs/NNN/capture/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<crate::spec::capture::CaptureSection>,
    /// An eBPF monitor inside the DuT (`runs/NNN/monitor.parquet`, `stages.parquet`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<crate::spec::monitor::MonitorSection>,
    /// `[[pair]]`: LoadGen/DuT host pairs the runs are spread over (crate::spec::pairs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pair: Vec<crate::spec::pairs::PairEntry>,
}

/// One concrete run of an experiment.
#[derive(Debug, Clone, Serialize)]
pub struct RunPlan {
    /// Index in execution order, also the directory name `runs/NNN`.
    pub index: usize,
    /// Which repetition of its parameter combination (0-based).
    pub repetition: u32,
    /// Index of its parameter combination in the cross product.
    pub combination: usize,
    /// The swept values of this run, key as written in `[sweep]`.
    pub params: BTreeMap<String, toml::Value>,
    /// The fully resolved spec of this run.
    pub spec: Spec,
}

impl Spec {
    /// Read and validate a spec file; its includes must lie under its directory.
    pub fn from_file(path: &Path) -> Result<(Spec, String), LabError> {
        Spec::from_file_with(path, false)
    }

    /// [`Spec::from_file`]; `allow_include_outside` lets `[experiment] include`
    /// name files anywhere (`nflab run --allow-include-outside`).
    pub fn from_file_with(
        path: &Path,
        allow_include_outside: bool,
    ) -> Result<(Spec, String), LabError> {
        let text = std::fs::read_to_string(path).map_err(|e| LabError::Spec {
            file: path.display().to_string(),
            message: format!("cannot read it: {e}"),
        })?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let confine = if allow_include_outside {
            None
        } else {
            Some(std::fs::canonicalize(dir).map_err(|e| LabError::Spec {
                file: path.display().to_string(),
                message: format!("cannot resolve its directory: {e}"),
            })?)
        };
        let text = resolve_includes(path, &text, 0, confine.as_deref())?;
        let spec = Spec::parse(&text, &path.display().to_string())?;
        Ok((spec, text))
    }

    /// Parse and validate spec text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Spec, LabError> {
        let spec: Spec = toml::from_str(text).map_err(|e| LabError::Spec {
            file: origin.to_string(),
            message: one_line(&e.to_string()),
        })?;
        spec.validate(text, origin)?;
        // Expanding checks every swept value too.
        spec.expand_with_text(text, origin)?;
        Ok(spec)
    }
}

/// [`one_line`] without the source text: for a file that may not be a spec
/// (an include), whose lines are never echoed.
pub(crate) fn one_line_unquoted(s: &str) -> String {
    one_line_with(s, false)
}

/// Collapse toml's multi-line error display into one sentence with its line
/// and the offending source text, so the key is always named.
pub(crate) fn one_line(s: &str) -> String {
    one_line_with(s, true)
}

fn one_line_with(s: &str, quote: bool) -> String {
    // toml errors look like: "TOML parse error at line 3, column 1\n  |\n3 | foo = 1\n  | ^^^\nunknown field `foo`, expected ...\n"
    let mut head = String::new();
    let mut source = String::new();
    let mut tail = Vec::new();
    for line in s.lines() {
        let l = line.trim();
        if l.starts_with("TOML parse error") {
            head = l.replace("TOML parse error at ", "").to_string();
        } else if let Some((num, text)) = l.split_once(" | ") {
            if num.trim().chars().all(|c| c.is_ascii_digit()) && source.is_empty() {
                source = text.trim().to_string();
            }
        } else if l.is_empty() || l.starts_with('|') || l.starts_with('^') {
            continue;
        } else {
            tail.push(l.to_string());
        }
    }
    let msg = tail.join(" ");
    if !quote {
        source.clear();
    }
    match (head.is_empty(), source.is_empty()) {
        (true, _) => msg,
        (false, true) => format!("{head}: {msg}"),
        (false, false) => format!("{head} (`{source}`): {msg}"),
    }
}
