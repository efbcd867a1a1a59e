//! `nflab report DIR [--figure ID] [--no-png]`

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `nflab report`.
#[derive(clap::Args)]
pub struct Args {
    /// An experiment directory written by `nflab run`.
    dir: PathBuf,
    /// Redraw only this figure (its SVG, PNG and CSV in DIR/figures/), e.g. `hdr`.
    #[arg(long, value_name = "ID")]
    figure: Option<String>,
    /// Do not render PNG files next to the SVGs.
    #[arg(long)]
    no_png: bool,
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let opts = nflab_report::Options {
        only_figure: args.figure,
        no_png: args.no_png,
        ..Default::default()
    };
    // An NCSbench tree's summary across runs is redone from its runs first.
    let mut written = Vec::new();
    if opts.only_figure.is_none()
        && args.dir.join("spec.toml").is_file()
        && nflab_lab::app::ncs::write_challenge(&args.dir)?.is_some()
    {
        written.push(args.dir.join("ncs-challenge.json"));
    }
    let w = nflab_report::write_report_with(&args.dir, &opts)?;
    // Through sudo, what was redrawn is the caller's: report.html, figures/
    // and the files written there, nothing else of a tree that may be
    // another user's.
    written.extend(w.report.iter().cloned());
    written.push(args.dir.join("figures"));
    written.extend(w.files.iter().cloned());
    nflab_lab::artifacts::files::give_written_to_invoking_user(&args.dir, &written)?;
    for p in &w.problems {
        eprintln!("note: {p}");
    }
    match w.report {
        Some(path) => println!("{}", path.display()),
        None => {
            for f in &w.files {
                println!("{}", f.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
