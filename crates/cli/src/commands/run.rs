//! `nflab run SPEC.toml`

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use nflab_lab::{results, RunOptions};

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
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    if args.dry_run {
        let path = match (&args.spec, &args.resume) {
            (Some(p), _) => p.clone(),
            (None, Some(dir)) => dir.join("spec.toml"),
            (None, None) => unreachable!("clap requires a spec or --resume"),
        };
        let (spec, text) = nflab_lab::Spec::from_file(&path)?;
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
    let stop = super::stop_flag()?;
    let (version, commit) = super::version();
    let opts = RunOptions {
        out: args.out.clone(),
        resume: args.resume.clone(),
        progress: std::io::stderr().is_terminal() && !args.json,
        version,
        commit,
    };
    let spec_path = args.spec.clone().unwrap_or_default();
    let result = nflab_lab::run_experiment(&spec_path, &opts, stop)?;
    let report = nflab_report::write_report(&result.dir)
        .with_context(|| format!("writing the report of {}", result.dir.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        print!("{}", results::format_table(&result.runs));
        if !result.rfc2544.is_empty() {
            println!();
            print!("{}", nflab_lab::rfc2544::format_verdicts(&result.rfc2544));
        }
        println!(
            "\nlatency: one-way, rx (kernel software timestamp) − tx ({}), CLOCK_REALTIME",
            tx_stamp_label(&result)
        );
        if result.resumed_runs > 0 {
            println!(
                "resumed: {} runs were complete already and kept",
                result.resumed_runs
            );
        }
        println!("artifacts: {}", result.dir.display());
        println!("report:    {}", report.display());
    }
    if result.interrupted {
        eprintln!(
            "interrupted: the completed runs and the records of the interrupted one are kept"
        );
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

/// Where the tx stamps of the runs came from (their gen.json), in words.
fn tx_stamp_label(result: &nflab_lab::experiment::ExperimentResult) -> String {
    let mut sources: Vec<String> = result
        .runs
        .iter()
        .filter_map(|r| {
            let p = result.dir.join("runs").join(&r.run).join("gen.json");
            let v: serde_json::Value = serde_json::from_slice(&std::fs::read(p).ok()?).ok()?;
            Some(v["tx_timestamp"].as_str()?.to_string())
        })
        .collect();
    sources.sort();
    sources.dedup();
    if sources.is_empty() {
        sources.push("application".into());
    }
    sources
        .iter()
        .map(|s| match s.as_str() {
            "application" => "application timestamp".to_string(),
            "kernel-xdp" => "kernel timestamp of the XDP program that sent it".to_string(),
            other => format!("{other} timestamp"),
        })
        .collect::<Vec<_>>()
        .join(" / ")
}
