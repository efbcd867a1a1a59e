//! `nflab compare DIR_A DIR_B`

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `nflab compare`.
#[derive(clap::Args)]
pub struct Args {
    /// First experiment directory.
    a: PathBuf,
    /// Second experiment directory (a replication).
    b: PathBuf,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let c = nflab_lab::study::compare::compare(&args.a, &args.b)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        print!("{}", nflab_lab::study::compare::format_comparison(&c));
    }
    Ok(ExitCode::SUCCESS)
}
