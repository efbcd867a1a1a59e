//! `nflab dut CONFIG.toml [--stats] [--duration-s N]`: the nflab data plane
//! (or, with `kind = "link"`, the emulated link, both ways) alone, on the
//! interfaces the config names.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use nflab_lab::dut::standalone::{self, StandaloneConfig};

/// Arguments of `nflab dut`.
#[derive(clap::Args)]
pub struct Args {
    /// Config: a `[dut]` section (keys as in a spec) and `[ports]` with
    /// `input`, `output` and optionally `netns`.
    config: PathBuf,
    /// Print the data plane's counters as JSON on stdout when it stops.
    #[arg(long)]
    stats: bool,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long)]
    duration_s: Option<f64>,
}

/// Run it.
pub fn main(a: Args) -> anyhow::Result<ExitCode> {
    let config = StandaloneConfig::from_file(&a.config)?;
    let duration = match a.duration_s {
        Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
        Some(s) => anyhow::bail!("--duration-s {s} is not valid: use a positive number of seconds"),
        None => None,
    };
    let stop = super::stop_flag()?;
    let counters = standalone::run(&config, duration, &stop)?;
    if a.stats {
        println!("{}", counters.json);
    }
    if let Some(e) = counters.error {
        anyhow::bail!("{e}");
    }
    Ok(ExitCode::SUCCESS)
}
