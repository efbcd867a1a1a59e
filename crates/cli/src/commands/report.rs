//! `nflab report DIR`

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `nflab report`.
#[derive(clap::Args)]
pub struct Args {
    /// An experiment directory written by `nflab run`.
    dir: PathBuf,
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let path = nflab_report::write_report(&args.dir)?;
    println!("{}", path.display());
    Ok(ExitCode::SUCCESS)
}
