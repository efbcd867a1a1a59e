//! `nflab dut CONFIG.toml [--stats] [--duration-s N]`: the nflab data plane
//! (or, with `kind = "link"`, the emulated link, both ways) alone, on the
//! interfaces the config names.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use nflab_lab::dut::nflab::{run_standalone, StandaloneConfig};

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
    if config.dut.kind == nflab_lab::spec::DutKind::Link {
        let stats = nflab_lab::dut::link::run_standalone(&config, duration, &stop)?;
        if a.stats {
            println!(
                "{}",
                serde_json::to_string_pretty(&stats).context("cannot print the counters")?
            );
        }
        if let Some(e) = stats.error() {
            anyhow::bail!("{e}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let stats = run_standalone(&config, duration, &stop)?;
    if a.stats {
        println!(
            "{}",
            serde_json::to_string_pretty(&stats).context("cannot print the counters")?
        );
    }
    if let Some(e) = stats.error {
        anyhow::bail!("{e}");
    }
    Ok(ExitCode::SUCCESS)
}
