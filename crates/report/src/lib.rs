//! The experiment report: one self-contained `report.html` per artifact
//! tree, and every figure of it as a file for papers.
//!
//! [`write_report`] reads an artifact tree (DESIGN §3.2) and writes
//!
//! ```text
//! DIR/report.html          the report: experiment, spec, provenance, noise floor,
//!                          results per run configuration with 95 % CIs, figures
//! DIR/figures/ID.svg       each figure as standalone SVG
//! DIR/figures/ID.png       ... as PNG (rendered from the SVG; feature `png`)
//! DIR/figures/ID.csv       ... and exactly the data it draws
//! DIR/figures/README.md    what each figure shows and the command that redraws it
//! DIR/figures/analysis.json  per run, the engine's summary every number is read from,
//!                          and the `nflab analyze` command that prints the same
//! ```
//!
//! The HTML opens offline: figures are inline SVG drawn by [`svg`], the
//! interaction (hover values, legend toggles, zoom on time axes) is a few
//! hundred lines of inline script, and there are no fonts, styles or
//! scripts from the network.
//!
//! # Figures
//!
//! HDR percentile plot, CDF, CCDF, histogram, latency over time (min/max
//! decimated per pixel column, worst N marked), p99/max per window, anomaly
//! timeline, latency against a swept parameter with CIs, throughput and loss
//! against offered load, model against measurement (when the tree has
//! `model.json`), and the generator's inter-packet-gap self-check. A figure
//! that does not apply (no sweep, no anomaly spec, nothing received) is left
//! out and listed with the reason.
//!
//! # Bad input
//!
//! Only a directory that is neither an artifact tree (no `spec.toml`, no
//! `runs/`) nor readable is an error. Everything else — a missing summary, a
//! truncated record file, a run that received nothing — is described in the
//! report's "What is missing" section and the figures draw what exists.
//!
//! # Limitations and caveats
//!
//! * The report computes no statistic of its own: each run's records go
//!   through one pass of the metrics engine (`nflab_analyze`), with the
//!   options of [`load::analyze_command`], and every number, curve, window,
//!   anomaly and worst packet drawn is the engine's. A run's latency
//!   distribution is exact up to [`load::EXACT_PACKETS`] values and an HDR
//!   histogram (3 significant digits) beyond, as in `nflab analyze`; the
//!   captions say where this applies and its error bound.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::path::{Path, PathBuf};

pub mod figures;
mod html;
mod komon;
pub mod load;
pub mod mvno;
mod ncs;
#[cfg(feature = "png")]
mod png;
pub mod prrt;
mod registry;
pub mod sdn;
pub mod svg;

pub use figures::Figure;

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The directory is not an artifact tree of `nflab run`.
    #[error("{0} is not an nflab experiment directory (it has no spec.toml and no runs/): give the directory that `nflab run` printed")]
    NotAnExperiment(String),
    /// `--figure` named a figure the experiment does not have.
    #[error("this experiment has no figure `{id}`; it has: {have}")]
    NoSuchFigure {
        /// The id asked for.
        id: String,
        /// The ids it has.
        have: String,
    },
    /// An input file is missing or not what it should be (one sentence).
    #[error("{0}")]
    Input(String),
    /// Writing a file failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// Target file.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
}

/// What [`write_report_with`] should write.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Redraw only this figure's files in `figures/` (not report.html).
    pub only_figure: Option<String>,
    /// Skip PNG rendering even when the `png` feature is built.
    pub no_png: bool,
    /// Latencies held one by one per run (default [`load::EXACT_PACKETS`],
    /// `nflab analyze`'s); a run beyond has an HDR distribution.
    pub exact_packets: Option<u64>,
}

/// What was written.
#[derive(Debug, Clone)]
pub struct Written {
    /// `report.html`, unless only a figure was redrawn.
    pub report: Option<PathBuf>,
    /// Files written in `figures/`.
    pub files: Vec<PathBuf>,
    /// Figure ids drawn.
    pub figures: Vec<String>,
    /// Problems found in the tree (also shown in the report).
    pub problems: Vec<String>,
}

/// Write `report.html` and `figures/` into the experiment directory and
/// return the path of `report.html`.
pub fn write_report(dir: &Path) -> Result<PathBuf, ReportError> {
    let w = write_report_with(dir, &Options::default())?;
    Ok(w.report.unwrap_or_else(|| dir.join("report.html")))
}

/// Written whole and durably (fsync, rename, fsync of the directory): a
/// reader or a power cut sees the old file or the new one.
fn write(path: &Path, data: &[u8]) -> Result<(), ReportError> {
    nflab_io::safe_fs::replace_file(path, data).map_err(|e| ReportError::Write {
        path: path.display().to_string(),
        source: e,
    })
}

/// Like [`write_report`], with options.
pub fn write_report_with(dir: &Path, opts: &Options) -> Result<Written, ReportError> {
    if !dir.is_dir() || !load::is_experiment(dir) {
        return Err(ReportError::NotAnExperiment(dir.display().to_string()));
    }
    let mut e = load::load_with(dir, opts.exact_packets.unwrap_or(load::EXACT_PACKETS));
    e.problems.extend(ncs::problems(&e));
    let figs = registry::all(&e);
    let mut problems = e.problems.clone();
    for r in &e.runs {
        problems.extend(r.problems.iter().map(|p| format!("run {}: {p}", r.name)));
    }
    let selected: Vec<&Figure> = match &opts.only_figure {
        None => figs.iter().collect(),
        Some(id) => {
            let v: Vec<&Figure> = figs.iter().filter(|f| &f.id == id).collect();
            if v.is_empty() {
                return Err(ReportError::NoSuchFigure {
                    id: id.clone(),
                    have: figs
                        .iter()
                        .map(|f| f.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
            v
        }
    };
    let fdir = dir.join("figures");
    // A figures/ planted as a symlink would have the report written (as root)
    // wherever it points.
    if std::fs::symlink_metadata(&fdir).is_ok_and(|m| !m.is_dir()) {
        return Err(ReportError::Write {
            path: fdir.display().to_string(),
            source: std::io::Error::other(
                "it is a symlink or a file, not the directory nflab writes figures into",
            ),
        });
    }
    std::fs::create_dir_all(&fdir).map_err(|e| ReportError::Write {
        path: fdir.display().to_string(),
        source: e,
    })?;
    let mut files = Vec::new();
    #[cfg_attr(not(feature = "png"), allow(unused_mut))]
    let mut png_notes: Vec<String> = Vec::new();
    #[cfg(feature = "png")]
    let mut pngs = if opts.no_png {
        Vec::new()
    } else {
        png::render_all(&selected.iter().map(|f| f.svg.as_str()).collect::<Vec<_>>())
    }
    .into_iter();
    for f in &selected {
        let svg_path = fdir.join(format!("{}.svg", f.id));
        let doc = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- {}: {} -->\n{}\n",
            f.title.replace("--", "–"),
            f.caption.replace("--", "–"),
            f.svg
        );
        write(&svg_path, doc.as_bytes())?;
        files.push(svg_path);
        let csv_path = fdir.join(format!("{}.csv", f.id));
        write(&csv_path, f.data.to_csv().as_bytes())?;
        files.push(csv_path);
        #[cfg(feature = "png")]
        if let Some(png) = pngs.next() {
            let png_path = fdir.join(format!("{}.png", f.id));
            match png {
                Ok(bytes) => {
                    write(&png_path, &bytes)?;
                    files.push(png_path);
                }
                Err(msg) => {
                    let note = format!("PNG files not written: {msg}");
                    if !png_notes.contains(&note) {
                        png_notes.push(note);
                    }
                }
            }
        }
    }
    let mut report = None;
    if opts.only_figure.is_none() {
        let readme = fdir.join("README.md");
        write(&readme, figures::readme(&e, &figs).as_bytes())?;
        files.push(readme);
        let analysis = fdir.join("analysis.json");
        write(&analysis, analysis_json(&e).as_bytes())?;
        files.push(analysis);
        let skipped = skipped(&e, &figs);
        let page = html::page(&e, &figs, &skipped, &png_notes);
        let path = dir.join("report.html");
        write(&path, page.as_bytes())?;
        report = Some(path);
    }
    problems.extend(png_notes);
    Ok(Written {
        report,
        files,
        figures: selected.iter().map(|f| f.id.clone()).collect(),
        problems,
    })
}

/// `figures/analysis.json`: `{"command": …, "runs": {"000": summary, …}}`,
/// the engine's summary of each run with records, which every number of the
/// report is read from; `command` + the run's `records.nfr` prints the same.
fn analysis_json(e: &load::Experiment) -> String {
    let runs: serde_json::Map<String, serde_json::Value> = e
        .runs
        .iter()
        .filter_map(|r| Some((r.name.clone(), r.data.as_ref()?.summary_json.clone())))
        .collect();
    let v = serde_json::json!({
        "command": load::analyze_command(e),
        "runs": runs,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

/// Figures that were not drawn and why.
fn skipped(e: &load::Experiment, figs: &[Figure]) -> html::Skipped {
    let have = |id: &str| figs.iter().any(|f| f.id == id);
    let any_data = e
        .runs
        .iter()
        .any(|r| r.data.as_ref().is_some_and(|d| d.n > 0));
    let mut out: html::Skipped = Vec::new();
    let nodata = "no run has received packets with readable records".to_string();
    for (id, title) in [
        ("hdr", "HDR percentile plot"),
        ("cdf", "CDF"),
        ("ccdf", "CCDF"),
        ("histogram", "Histogram"),
        ("timeseries", "Latency over time"),
        ("windows", "p99 and maximum per window"),
    ] {
        if !have(id) {
            out.push((id, title, nodata.clone()));
        }
    }
    if !have("anomalies") {
        out.push((
            "anomalies",
            "Anomaly timeline",
            if any_data {
                "the spec has no [analysis] anomalies".into()
            } else {
                nodata.clone()
            },
        ));
    }
    if !have("sweep") {
        out.push((
            "sweep",
            "Latency against a swept parameter",
            "no numeric parameter is swept over two or more values".into(),
        ));
    }
    if !have("throughput") {
        out.push((
            "throughput",
            "Throughput and loss against offered load",
            "traffic.rate_pps is not swept over two or more values".into(),
        ));
    }
    if !have("model") {
        // `nflab run` writes the reason there when the spec's [model] fit failed.
        let failed = std::fs::read_to_string(e.dir.join("model.json"))
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
            .and_then(|v| v.get("error")?.as_str().map(str::to_string));
        out.push((
            "model",
            "Model against measurement",
            match failed {
                Some(why) => format!("the model fit of the spec's [model] section failed: {why}"),
                None => "the experiment has no model predictions (model.json; add a [model] section to the spec or run nflab model fit DIR)".into(),
            },
        ));
    }
    if !have("ipg") {
        out.push((
            "ipg",
            "Generator self-check",
            "no run has a gen.json selfcheck or CBR records with consecutive packets".into(),
        ));
    }
    out
}
