//! A whole experiment: every run of a spec, in order, into one artifact tree
//! (DESIGN §3.2), resumable.
//!
//! A run counts as done only when its directory holds the `.complete`
//! marker, written after its summary. `--resume DIR` re-expands the spec
//! stored in DIR (the order is deterministic, also when shuffled, because
//! the shuffle is seeded), keeps every complete run, and redoes any other run
//! from scratch, so a partial run is never mixed into the results.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::artifacts::env::Environment;
use crate::artifacts::files::{write_file, write_json};
use crate::artifacts::snapshot::Snapshot;
use crate::error::LabError;
use crate::knobs::host::{AppliedKnobs, KnobRoots};
use crate::run::failure::{check_writable, mark_failed, DiskReserve};
use crate::run::{run_one_with, KeptTopology};
use crate::spec::{OnRunFailure, RunPlan, Spec};
use crate::study::results::{self, RunRow};
use crate::study::rfc2544;
use crate::study::tree::{completed_summary, same_params};
pub use crate::study::tree::{
    create_experiment_dir, params_json, run_dir, ExperimentResult, RunOptions, COMPLETE_MARKER,
};
use crate::topo;

/// Run every run of the spec at `spec_path` (or resume `opts.resume`).
pub fn run_experiment(
    spec_path: &Path,
    opts: &RunOptions,
    stop: Arc<AtomicBool>,
) -> Result<ExperimentResult, LabError> {
    let mut dir = None;
    let started = std::time::Instant::now();
    let result = crate::study::events::with_sampler(&opts.events, || {
        run_experiment_in(spec_path, opts, stop, &mut dir)
    });
    opts.events
        .emit(&crate::study::events::study_end(&result, started));
    if let (Err(_), Some(f), Some(d)) = (&result, opts.after_failure, &dir) {
        // Only when a run finished: otherwise there is nothing to report but the error.
        let finished = std::fs::read_dir(d.join("runs")).is_ok_and(|runs| {
            runs.filter_map(Result::ok)
                .any(|r| r.path().join("summary.json").is_file())
        });
        if finished {
            f(d);
        }
    }
    // Run through sudo, the tree is the caller's, whatever ended the study.
    if let Some(d) = &dir {
        if let Err(e) = crate::artifacts::files::give_to_invoking_user(d) {
            eprintln!("warning: cannot hand the results to the user who ran sudo: {e}");
        }
    }
    result
}

fn run_experiment_in(
    spec_path: &Path,
    opts: &RunOptions,
    stop: Arc<AtomicBool>,
    dir_out: &mut Option<PathBuf>,
) -> Result<ExperimentResult, LabError> {
    let (dir, spec, text) = match &opts.resume {
        Some(dir) => {
            let stored = dir.join("spec.toml");
            // nflab wrote it as a plain file: a symlink there points elsewhere.
            let plain = std::fs::symlink_metadata(&stored).is_ok_and(|m| m.is_file());
            if !plain {
                return Err(LabError::Other(format!(
                    "{} is not an nflab experiment directory (no spec.toml, or one that is not a plain file): give the directory `nflab run` printed",
                    dir.display()
                )));
            }
            // Runs are removed and remade under runs/: a symlink there would
            // have root delete and write wherever it points.
            let runs = dir.join("runs");
            if std::fs::symlink_metadata(&runs).is_ok_and(|m| !m.is_dir()) {
                return Err(LabError::Other(format!(
                    "{} is not a directory (a symlink or a file), so {} cannot be resumed: nflab makes runs/ a plain directory",
                    runs.display(),
                    dir.display()
                )));
            }
            let (spec, text) = Spec::from_file_with(&stored, opts.allow_include_outside)?;
            (Some(dir.clone()), spec, text)
        }
        None => {
            let (spec, text) = Spec::from_file_with(spec_path, opts.allow_include_outside)?;
            (None, spec, text)
        }
    };
    *dir_out = dir.clone();
    // A read-only or unusable output directory: one sentence before anything starts.
    match &opts.resume {
        Some(d) => check_writable(d, "the experiment directory")?,
        None => check_writable(&opts.out, "the output directory")?,
    }
    let (plans, refused) = spec.expand_all(&text)?;
    for p in &plans {
        p.spec.check_supported()?;
    }
    topo::check_root()?;
    // Leftovers of runs that were killed (kill -9, power loss) go first.
    for item in topo::gc::gc()? {
        eprintln!("removed {item}, left by an nflab process that no longer exists");
    }
    let dir = match dir {
        Some(d) => d,
        None => {
            // Made exclusively: a run of the same spec started in the same second gets
            // its own directory (`-2`, …) instead of sharing, and deleting, this one's.
            let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
            create_experiment_dir(&opts.out, &format!("{stamp}-{}", spec.experiment.name))?
        }
    };
    *dir_out = Some(dir.clone());

    std::fs::create_dir_all(dir.join("runs")).map_err(|e| LabError::artifact(&dir, e))?;
    let reserve = DiskReserve::take(&dir);
    let mut env = Environment::capture(&opts.version, &opts.commit);
    if spec.topology.kind == crate::spec::TopologyKind::Hosts {
        for (role, host) in &spec.hosts {
            // This machine answers in-process (and a library caller is no nflab binary).
            let info = if host.is_local() {
                crate::hosts::remote_dut::host_info()
            } else {
                host.remote(&["info"])?
            };
            env.hosts.insert(role.clone(), info);
        }
        // Every pair's hosts at once: each answer costs an SSH handshake.
        env.hosts
            .extend(crate::study::pairs::host_infos(&spec.pair)?);
    }
    if opts.resume.is_none() {
        write_file(&dir.join("spec.toml"), text.as_bytes())?;
        write_json(&dir.join("env.json"), &env)?;
    } else {
        // The original provenance stays; each resumption adds its own.
        let n = (1..)
            .find(|i| !dir.join(format!("env-resume-{i}.json")).exists())
            .unwrap_or(1);
        write_json(&dir.join(format!("env-resume-{n}.json")), &env)?;
    }

    if !refused.is_empty() {
        // experiment.skip_refused: what was left out, and why.
        write_json(&dir.join("refused.json"), &refused)?;
        if opts.progress {
            eprintln!(
                "{} combinations of the sweep refused and left out (refused.json)",
                refused.len()
            );
        }
    }
    // The report compares it with the runs it finds (an RFC 2544 search plans as it goes).
    if spec.rfc2544.is_none() {
        write_json(
            &dir.join("plan.json"),
            &serde_json::json!({ "runs": plans.len() }),
        )?;
    }

    opts.events
        .emit(&crate::artifacts::events::Event::StudyStart {
            name: spec.experiment.name.clone(),
            dir: dir.display().to_string(),
            runs: spec.rfc2544.is_none().then_some(plans.len()),
            pairs: spec.pair.len().max(1),
            unix_s: crate::artifacts::events::unix_s(),
        });
    let mut rows: Vec<RunRow> = Vec::new();
    let mut resumed_runs = 0;
    let mut interrupted = false;
    let total = plans.len();
    // A topology kept across runs (`topology.keep`); removed when this ends.
    let mut kept: KeptTopology = None;
    // One run: reuse it if an earlier invocation completed it with the same
    // parameters, otherwise (re)do it whole.
    let mut execute = |plan: &RunPlan| -> Result<RunRow, LabError> {
        let rd = run_dir(&dir, plan.index);
        opts.events
            .emit(&crate::study::events::run_start(plan, None));
        // A run directory that is a symlink is no run of this tree: removed
        // (the link itself) and redone.
        let plain = std::fs::symlink_metadata(&rd).is_ok_and(|m| m.is_dir());
        if let Some(summary) = completed_summary(&rd).filter(|_| plain) {
            if same_params(&rd, plan) {
                resumed_runs += 1;
                opts.events.emit(&crate::artifacts::events::Event::run_end(
                    &run_name(plan),
                    "resumed",
                    &summary,
                    None,
                ));
                return Ok(RunRow::new(plan, &summary).with_app(&rd));
            }
        }
        // Whatever is there, a dangling symlink too (remove_dir_all removes a
        // symlink itself, never what it points to).
        if std::fs::symlink_metadata(&rd).is_ok() {
            std::fs::remove_dir_all(&rd).map_err(|e| LabError::artifact(&rd, e))?;
        }
        std::fs::create_dir_all(&rd).map_err(|e| LabError::artifact(&rd, e))?;
        write_json(&rd.join("params.json"), &params_json(plan))?;
        if opts.progress {
            eprintln!(
                "run {}{}: {} at {} pps, {} B, {} s",
                plan.index + 1,
                if spec.rfc2544.is_some() {
                    String::new()
                } else {
                    format!("/{total}")
                },
                plan.spec.dut.kind.as_str(),
                plan.spec.traffic.rate_pps,
                plan.spec.traffic.frame_bytes,
                plan.spec.traffic.duration_s
            );
        }
        // Knobs hold for this run only; the guard reverts them on any exit.
        // Another run's host knobs: wait until they are put back (or this study is stopped).
        let mut knobs =
            AppliedKnobs::apply_when_free(&plan.spec.knobs, &KnobRoots::default(), Some(&stop))?;
        crate::failpoint::hit("knobs");
        if !plan.spec.knobs.is_empty() {
            write_json(&rd.join("knobs.json"), &knobs.records())?;
        }
        let before = Snapshot::take();
        let outcome = run_one_with(plan, &rd, &stop, &mut kept);
        let after = Snapshot::take();
        opts.events
            .emit(&crate::study::events::run_end(plan, &outcome, None));
        knobs.revert();
        // The run's own error (say, a full disk while recording) is the
        // one to report; these small files may fail for the same reason.
        let knobs_written = if plan.spec.knobs.is_empty() {
            Ok(())
        } else {
            write_json(&rd.join("knobs.json"), &knobs.records())
        };
        let snapshot_written = results::write_snapshot(&rd, &before, &after);
        let outcome = outcome?;
        knobs_written?;
        snapshot_written?;
        if !outcome.summary.interrupted {
            write_file(&rd.join(COMPLETE_MARKER), b"")?;
        }
        Ok(RunRow::new(plan, &outcome.summary).with_app(&rd))
    };

    let mut verdicts = Vec::new();
    let mut failed_runs = Vec::new();
    match &spec.rfc2544 {
        // [[pair]]: the runs go to the pairs in parallel.
        None if !spec.pair.is_empty() => {
            let out = crate::study::pairs::run_on_pairs(&spec, &plans, &dir, &opts.events, &stop);
            rows = out.rows;
            resumed_runs = out.resumed;
            interrupted = out.interrupted;
            if let Some(e) = out.error {
                let _ = results::write_parquet(&dir.join("results.parquet"), &rows);
                return Err(e);
            }
        }
        None => {
            for plan in &plans {
                if stop.load(Ordering::Relaxed) {
                    interrupted = true;
                    break;
                }
                let row = match execute(plan) {
                    Ok(row) => row,
                    Err(e) => {
                        // The disk may be full: the reserve makes room for the marks.
                        reserve.release();
                        let failed = mark_failed(&run_dir(&dir, plan.index), plan.index, &e);
                        if spec.experiment.on_run_failure == OnRunFailure::Continue {
                            eprintln!("run {} failed: {}", failed.run, failed.error);
                            failed_runs.push(failed);
                            continue;
                        }
                        // Completed runs stay usable (and resumable) whatever failed.
                        let _ = results::write_parquet(&dir.join("results.parquet"), &rows);
                        return Err(e);
                    }
                };
                let stopped = row.summary.interrupted;
                rows.push(row);
                if stopped {
                    interrupted = true;
                    break;
                }
            }
        }
        Some(cfg) => {
            let mut next_index = 0;
            for base in &plans {
                let mut run_trial = |p: &RunPlan| {
                    let row = execute(p)?;
                    rows.push(row.clone());
                    Ok(row)
                };
                let v = rfc2544::run_procedure(cfg, base, &mut next_index, &stop, &mut run_trial)?;
                let stopped = v.interrupted;
                verdicts.push(v);
                if stopped {
                    interrupted = true;
                    break;
                }
            }
            rfc2544::write_verdicts(&dir, &verdicts)?;
        }
    }
    results::write_parquet(&dir.join("results.parquet"), &rows)?;
    // NCSbench: the runs' survival across repetitions and the failure bracket.
    if matches!(spec.app, Some(crate::spec::AppSection::Ncsbench(_))) {
        crate::app::ncs::write_challenge(&dir)?;
    }
    // The in-stack UDP monitor: seed 003's accuracy table, the offset subtracted if asked.
    if let Some(m) = spec.monitor.as_ref().filter(|m| m.kind == "udp") {
        crate::study::monitor_accuracy::write(&dir, m.subtract_offset == Some(true))?;
    }
    // [model]: the predictions the report lays over the measurements.
    let model = if interrupted {
        None
    } else {
        crate::study::model_fit::write_model(&dir, &spec)
    };
    Ok(ExperimentResult {
        dir,
        runs: rows,
        resumed_runs,
        interrupted,
        rfc2544: verdicts,
        failed_runs,
        model,
    })
}

/// Directory name of a run (`000`).
fn run_name(plan: &RunPlan) -> String {
    format!("{:03}", plan.index)
}
