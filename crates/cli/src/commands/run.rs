//! `nflab run SPEC.toml`

use std::io::IsTerminal;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use nflab_lab::{study::results, RunOptions};

/// Arguments of `nflab run`.
#[derive(clap::Args)]
pub struct Args {
    /// Experiment spec (TOML, DESIGN §3.5).
    #[arg(required_unless_present = "resume")]
    spec: Option<PathBuf>,
    /// Finish an interrupted experiment: keep its complete runs, redo the rest.
    #[arg(long, value_name = "DIR", conflicts_with = "spec")]
    resume: Option<PathBuf>,
    /// Parent directory of the experiment's artifact tree.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Print the results as JSON on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// List the runs the spec expands to, and do nothing.
    #[arg(long)]
    dry_run: bool,
    /// Stream the study's events as JSON lines to FILE (`jsonl` or - for stdout): study
    /// start, run start/end, progress samples, study end (docs/experiments.md).
    #[arg(long, value_name = "FILE|-")]
    events: Option<PathBuf>,
    /// Draw the report's figures as SVG only, without the PNG copies (faster;
    /// the PNGs are for documents that cannot embed SVG).
    #[arg(long)]
    no_png: bool,
    /// Let `[experiment] include` read files outside the spec's directory (absolute
    /// paths, `..`): nflab runs as root, so a spec may read only its own directory.
    #[arg(long)]
    allow_include_outside: bool,
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    if args.dry_run {
        let path = match (&args.spec, &args.resume) {
            (Some(p), _) => p.clone(),
            (None, Some(dir)) => dir.join("spec.toml"),
            (None, None) => unreachable!("clap requires a spec or --resume"),
        };
        let (spec, text) = nflab_lab::Spec::from_file_with(&path, args.allow_include_outside)?;
        let plans = spec.expand(&text)?;
        for p in &plans {
            let params: Vec<String> = p.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!(
                "{:03}  rep {}  {}  {}",
                p.index,
                p.repetition,
                p.spec.dut.kind.as_str(),
                params.join(" ")
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.json
        && args
            .events
            .as_deref()
            .is_some_and(super::progress::events_to_stdout)
    {
        anyhow::bail!(
            "--events jsonl (or -) and --json both write to stdout: give --events a file name, or drop --json"
        );
    }
    let stop = super::stop_flag()?;
    let (version, commit) = super::version();
    // On a terminal the bar shows what the progress lines would.
    let terminal = std::io::stderr().is_terminal();
    let opts = RunOptions {
        out: args.out.clone(),
        resume: args.resume.clone(),
        progress: false,
        version,
        commit,
        after_failure: Some(if args.no_png {
            |d: &std::path::Path| report_after_failure(d, true)
        } else {
            |d: &std::path::Path| report_after_failure(d, false)
        }),
        events: super::progress::observers(terminal, args.events.as_deref())?,
        allow_include_outside: args.allow_include_outside,
    };
    let spec_path = args.spec.clone().unwrap_or_default();
    let result = nflab_lab::run_experiment(&spec_path, &opts, stop)?;
    nflab_lab::failpoint::hit("report");
    let report = report_of(&result.dir, args.no_png)
        .with_context(|| format!("writing the report of {}", result.dir.display()));
    let report = match report {
        Ok(r) => r,
        // The runs' failures (a full disk, say) are the news, not the report they also stopped.
        Err(e) if !result.failed_runs.is_empty() => {
            for f in &result.failed_runs {
                eprintln!("failed: run {}: {}", f.run, f.error);
            }
            eprintln!("note: no report: {e:#}");
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        // JSON lines on stdout stay parseable: the table then goes to stderr.
        let events_on_stdout = args
            .events
            .as_deref()
            .is_some_and(super::progress::events_to_stdout);
        let mut out: Box<dyn std::io::Write> = if events_on_stdout {
            Box::new(std::io::stderr())
        } else {
            Box::new(std::io::stdout())
        };
        write!(out, "{}", results::format_table(&result.runs))?;
        if !result.rfc2544.is_empty() {
            writeln!(out)?;
            write!(
                out,
                "{}",
                nflab_lab::study::rfc2544::format_verdicts(&result.rfc2544)
            )?;
        }
        writeln!(out, "\n{}", latency_line(&result.runs))?;
        if result.resumed_runs > 0 {
            writeln!(
                out,
                "resumed: {} runs were complete already and kept",
                result.resumed_runs
            )?;
        }
        writeln!(out, "artifacts: {}", result.dir.display())?;
        if let Some(nflab_lab::study::model_fit::ModelFit { path, method }) = &result.model {
            writeln!(out, "model:     {} ({method})", path.display())?;
        }
        writeln!(out, "report:    {}", report.display())?;
    }
    if !result.failed_runs.is_empty() {
        // experiment.on_run_failure = "continue": the study went on; each failure said once.
        for f in &result.failed_runs {
            eprintln!("failed: run {}: {}", f.run, f.error);
        }
        return Ok(ExitCode::from(1));
    }
    if result.interrupted {
        eprintln!(
            "interrupted: the completed runs and the records of the interrupted one are kept"
        );
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

/// What the latency column subtracts, from the runs' timestamp sources (the records'
/// metadata, via summary.json → timestamps).
fn latency_line(runs: &[results::RunRow]) -> String {
    let label = |s: &str| match s {
        "kernel-xdp" => "kernel timestamp of the XDP program that sent it".to_string(),
        other => format!("{} timestamp", other.replace('-', " ")),
    };
    let mut tx = std::collections::BTreeSet::new();
    let mut rx = std::collections::BTreeSet::new();
    for r in runs {
        match &r.summary.timestamps {
            Some(t) => {
                tx.insert(label(&t.tx));
                rx.insert(label(&t.rx));
            }
            None => {
                tx.insert(label("application"));
                rx.insert(label("kernel-software"));
            }
        }
    }
    let join =
        |s: &std::collections::BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(" / ");
    let hw = tx.iter().chain(rx.iter()).any(|s| s.contains("hardware"));
    format!(
        "latency: one-way, rx ({}) − tx ({}), {}",
        join(&rx),
        join(&tx),
        if hw {
            "hardware stamps in NIC (PHC) time"
        } else {
            "CLOCK_REALTIME"
        }
    )
}

/// Write the experiment's report; the path of its page.
fn report_of(
    dir: &std::path::Path,
    no_png: bool,
) -> Result<std::path::PathBuf, nflab_report::ReportError> {
    let opts = nflab_report::Options {
        no_png,
        ..Default::default()
    };
    let w = nflab_report::write_report_with(dir, &opts)?;
    if let Err(e) = nflab_lab::artifacts::files::give_to_invoking_user(dir) {
        eprintln!("warning: cannot hand the report to the user who ran sudo: {e}");
    }
    Ok(w.report.unwrap_or_else(|| dir.join("report.html")))
}

/// The report of what a failed experiment left (its completed runs). The failure is
/// what the user must read, so a report that cannot be written (a full disk) adds nothing.
fn report_after_failure(dir: &std::path::Path, no_png: bool) {
    if let Ok(path) = report_of(dir, no_png) {
        eprintln!("report of the completed runs: {}", path.display());
    }
}
