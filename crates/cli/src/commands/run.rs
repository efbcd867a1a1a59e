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
    spec: PathBuf,
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
        let (spec, text) = nflab_lab::Spec::from_file(&args.spec)?;
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
        progress: std::io::stderr().is_terminal() && !args.json,
        version,
        commit,
    };
    let result = nflab_lab::run_experiment(&args.spec, &opts, stop)?;
    let report = nflab_report::write_report(&result.dir)
        .with_context(|| format!("writing the report of {}", result.dir.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        print!("{}", results::format_table(&result.runs));
        println!("\nlatency: one-way, rx (kernel software timestamp) − tx (application timestamp), CLOCK_REALTIME");
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
