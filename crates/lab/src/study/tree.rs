//! An experiment's artifact tree (DESIGN §3.2): where each run's directory is, what
//! marks a run complete, the parameters a run is known by, and what a study
//! returns.

use std::path::{Path, PathBuf};

use nflab_analyze::Summary;
use serde::Serialize;

use crate::error::LabError;
use crate::run::failure::FailedRun;
use crate::spec::RunPlan;
use crate::study::results::RunRow;
use crate::study::rfc2544;

/// Create the experiment directory `out/<stem>` exclusively, or `out/<stem>-2`,
/// `-3`, … when another study (of the same spec, in the same second) has it.
pub fn create_experiment_dir(out: &Path, stem: &str) -> Result<PathBuf, LabError> {
    let made = !out.exists();
    std::fs::create_dir_all(out).map_err(|e| LabError::artifact(out, e))?;
    if made {
        // Through sudo: the directory of results is the caller's, like what goes in it.
        crate::artifacts::files::give_to_invoking_user(out)?;
    }
    for n in 1..=1000u32 {
        let dir = if n == 1 {
            out.join(stem)
        } else {
            out.join(format!("{stem}-{n}"))
        };
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(LabError::artifact(&dir, e)),
        }
    }
    Err(LabError::Other(format!(
        "{} holds 1000 experiment directories named {stem}: choose another --out",
        out.display()
    )))
}

/// Name of the marker file of a finished run.
pub const COMPLETE_MARKER: &str = ".complete";

/// How to run an experiment.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Parent of the experiment directory.
    pub out: PathBuf,
    /// Finish this existing experiment directory instead of starting anew.
    pub resume: Option<PathBuf>,
    /// Show progress lines on stderr.
    pub progress: bool,
    /// nflab version for `env.json`.
    pub version: String,
    /// git commit.
    pub commit: String,
    /// Called with the experiment directory when the experiment fails after at least
    /// one run finished (its results and `results.parquet` are written by then): the CLI
    /// writes the report of what exists there.
    pub after_failure: Option<fn(&Path)>,
    /// Who hears the study's events (progress bar, `--events`); none by default.
    pub events: crate::artifacts::events::Observers,
    /// Let `[experiment] include` name files outside the spec's directory
    /// (`--allow-include-outside`).
    pub allow_include_outside: bool,
}

/// What an experiment produced.
#[derive(Debug, Serialize)]
pub struct ExperimentResult {
    /// The experiment directory.
    pub dir: PathBuf,
    /// One row per completed run, in run order.
    pub runs: Vec<RunRow>,
    /// Runs taken over from an earlier, interrupted invocation.
    pub resumed_runs: usize,
    /// A signal stopped the experiment.
    pub interrupted: bool,
    /// Verdicts of an RFC 2544 procedure, when the spec has one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rfc2544: Vec<rfc2544::Verdict>,
    /// Runs that failed while the study went on (`experiment.on_run_failure = "continue"`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed_runs: Vec<FailedRun>,
    /// The model fit of `[model]` (`model.json`), when the spec asks for one.
    #[serde(skip)]
    pub model: Option<crate::study::model_fit::ModelFit>,
}

/// Directory of run `index`.
pub fn run_dir(experiment: &Path, index: usize) -> PathBuf {
    experiment.join("runs").join(format!("{index:03}"))
}

/// The summary of a complete run, or None if the run must be (re)done.
pub(crate) fn completed_summary(dir: &Path) -> Option<Summary> {
    if !dir.join(COMPLETE_MARKER).exists() {
        return None;
    }
    let text = std::fs::read_to_string(dir.join("summary.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// Whether a stored run was made with the parameters of `plan`.
pub(crate) fn same_params(dir: &Path, plan: &RunPlan) -> bool {
    let stored: Option<serde_json::Value> = std::fs::read_to_string(dir.join("params.json"))
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok());
    stored.as_ref() == Some(&params_json(plan))
}

/// `params.json` of a run: the resolved parameters and where they came from.
pub fn params_json(plan: &RunPlan) -> serde_json::Value {
    serde_json::json!({
        "run": format!("{:03}", plan.index),
        "repetition": plan.repetition,
        "combination": plan.combination,
        "sweep": plan.params,
        "seed": plan.spec.experiment.seed,
        "dut": plan.spec.dut,
        "traffic": plan.spec.traffic,
        "topology": plan.spec.topology,
        "analysis": plan.spec.analysis,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_experiment_of_the_same_second_gets_its_own_directory() {
        let out =
            nflab_io::safe_fs::fresh_private_dir(&std::env::temp_dir(), "nflab-tree").unwrap();
        struct Gone(PathBuf);
        impl Drop for Gone {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        let _gone = Gone(out.clone());
        let stem = "20260101T000000Z-quick";
        let a = create_experiment_dir(&out, stem).unwrap();
        std::fs::write(a.join("spec.toml"), "a").unwrap();
        let b = create_experiment_dir(&out, stem).unwrap();
        let c = create_experiment_dir(&out, stem).unwrap();
        assert_eq!(a, out.join(stem));
        assert_eq!(b, out.join(format!("{stem}-2")));
        assert_eq!(c, out.join(format!("{stem}-3")));
        assert_eq!(std::fs::read_to_string(a.join("spec.toml")).unwrap(), "a");
    }
}
