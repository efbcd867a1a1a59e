//! The figures of the report, one module per kind.
//!
//! Each figure function looks at the experiment and returns `None` when the
//! figure does not apply (no sweep, no anomaly spec, nothing received), or a
//! [`Figure`]: the SVG, a caption that says what is plotted and how it was
//! measured, the table of exactly the data drawn, and notes on what is
//! missing.

use std::cell::RefCell;
use std::fmt::Write as _;

use nflab_analyze::{Distribution, Method};

use crate::load::Experiment;
use crate::svg::{self, Style};

pub(crate) mod anomaly;
pub(crate) mod gen;
pub(crate) mod latency;
pub(crate) mod model;
pub(crate) mod stages;
pub(crate) mod sweep;
pub(crate) mod timeseries;

/// The data behind a figure, written as CSV next to its SVG.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Column names (with units).
    pub header: Vec<String>,
    /// Rows of already formatted values.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub fn new(cols: &[&str]) -> Table {
        Table {
            header: cols.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Append a row.
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// As CSV (RFC 4180 quoting where needed).
    pub fn to_csv(&self) -> String {
        let mut s = String::new();
        let q = |c: &str| {
            if c.contains(',') || c.contains('"') || c.contains('\n') {
                format!("\"{}\"", c.replace('"', "\"\""))
            } else {
                c.to_string()
            }
        };
        s.push_str(
            &self
                .header
                .iter()
                .map(|c| q(c))
                .collect::<Vec<_>>()
                .join(","),
        );
        s.push('\n');
        for r in &self.rows {
            s.push_str(&r.iter().map(|c| q(c)).collect::<Vec<_>>().join(","));
            s.push('\n');
        }
        s
    }
}

/// One figure of the report.
#[derive(Debug, Clone)]
pub struct Figure {
    /// File stem in `figures/` and anchor in the report, e.g. `hdr`.
    pub id: String,
    /// Heading.
    pub title: String,
    /// What is plotted and how it was measured (plain text).
    pub caption: String,
    /// The SVG document.
    pub svg: String,
    /// Exactly the data drawn.
    pub data: Table,
    /// What could not be drawn and why.
    pub notes: Vec<String>,
}

/// Shared context: per-configuration latency samples and the caption text
/// about the measurement.
pub struct Ctx<'a> {
    /// The experiment.
    pub e: &'a Experiment,
    /// Per configuration with data: (config index, label, latency
    /// distributions of its runs pooled, loopback?). In a cell because
    /// reading ranks of an exact distribution reorders its values.
    pub lat: Vec<(usize, String, RefCell<Distribution>, bool)>,
    /// "how it was measured", appended to captions.
    pub method: String,
}

impl<'a> Ctx<'a> {
    /// Build the context: pool the sorted latencies of each configuration's repetitions.
    pub fn new(e: &'a Experiment) -> Ctx<'a> {
        let mut lat = Vec::new();
        for (ci, c) in e.configs.iter().enumerate() {
            let mut pooled: Option<Distribution> = None;
            let mut loopback = false;
            for &ri in &c.runs {
                let r = &e.runs[ri];
                loopback |= r.dut() == "loopback";
                if let Some(d) = &r.data {
                    match &mut pooled {
                        None => pooled = Some(d.lat().clone()),
                        Some(p) => p.merge(d.lat()),
                    }
                }
            }
            if let Some(v) = pooled.filter(|v| v.count() > 0) {
                lat.push((ci, c.label.clone(), RefCell::new(v), loopback));
            }
        }
        let (clock, res) = e.clock();
        let (tx, rx) = e.timestamping();
        let res = if res > 0 {
            format!("resolution {res} ns")
        } else {
            "resolution not recorded".into()
        };
        let method = format!(
            "Latency is one-way, receive minus transmit timestamp (tx: {tx}, rx: {rx}), both from {clock} ({res}) on one host; warm-up packets are excluded and only the first copy of a duplicated packet counts."
        );
        Ctx { e, lat, method }
    }

    /// Line style of configuration `ci`: dashed for the loopback noise floor.
    pub fn style(&self, ci: usize) -> Style {
        let lb = self
            .e
            .configs
            .get(ci)
            .map(|c| c.runs.iter().any(|&r| self.e.runs[r].dut() == "loopback"))
            .unwrap_or(false);
        if lb {
            Style::dashed(ci)
        } else {
            Style::solid(ci)
        }
    }

    /// "N packets in R runs" for a caption.
    pub fn sample_note(&self) -> String {
        let n: u64 = self.lat.iter().map(|l| l.2.borrow().count()).sum();
        let reps: Vec<usize> = self.e.configs.iter().map(|c| c.runs.len()).collect();
        let r = reps.iter().max().copied().unwrap_or(0);
        format!(
            "{} packets over {} configuration(s){}.",
            svg::fmt_num(n as f64),
            self.lat.len(),
            if r > 1 {
                format!(", repetitions of a configuration pooled ({r} at most)")
            } else {
                String::new()
            }
        )
    }

    /// For a caption: which configurations are HDR histograms (runs over
    /// the exact budget) and the error that brings; empty when all are exact.
    pub fn hdr_note(&self) -> String {
        let hdr: Vec<&str> = self
            .lat
            .iter()
            .filter(|l| l.2.borrow().method() == Method::Hdr)
            .map(|l| l.1.as_str())
            .collect();
        if hdr.is_empty() {
            return String::new();
        }
        format!(
            " Too many packets to hold one by one for {}: there the distribution is an HDR histogram with {} significant digits, read in one pass, and each value drawn is the upper end of its bucket — at most {} % above the exact nearest-rank value (the minimum and maximum are exact).",
            hdr.join(", "),
            nflab_analyze::dist::DEFAULT_HDR_DIGITS,
            svg::fmt_num(10f64.powi(-i32::from(nflab_analyze::dist::DEFAULT_HDR_DIGITS)) * 100.0)
        )
    }

    /// Configurations that have no latency sample, as a note.
    pub fn missing_note(&self) -> Option<String> {
        let missing: Vec<&str> = self
            .e
            .configs
            .iter()
            .enumerate()
            .filter(|(ci, _)| !self.lat.iter().any(|l| l.0 == *ci))
            .map(|(_, c)| c.label.as_str())
            .collect();
        if missing.is_empty() {
            None
        } else {
            Some(format!(
                "Not drawn, no packet received: {}.",
                missing.join(", ")
            ))
        }
    }
}

/// Mean over repetitions and the half-width of its 95 % Student-t
/// confidence interval (`nflab_analyze::crossrun`); no half-width for
/// fewer than 2 values.
pub fn mean_ci(xs: &[f64]) -> Option<(f64, Option<f64>)> {
    match xs {
        [] => None,
        [x] => Some((*x, None)),
        _ => nflab_analyze::crossrun::mean_t_ci(xs, 0.95).map(|i| (i.mean, Some(i.hi - i.mean))),
    }
}

/// Stack several SVG panels vertically into one SVG document.
pub fn stack(panels: &[(String, f64)], w: f64) -> String {
    let h: f64 = panels.iter().map(|p| p.1).sum();
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"stack\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\">"
    );
    let mut y = 0.0;
    for (p, ph) in panels {
        // Nested <svg> elements keep each panel's own coordinates.
        let inner = p.replacen("<svg ", &format!("<svg x=\"0\" y=\"{y}\" "), 1);
        s.push_str(&inner);
        y += ph;
    }
    s.push_str("</svg>");
    s
}

/// `figures/README.md`: what each file is and the command that redraws it.
pub fn readme(e: &Experiment, figs: &[Figure]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Figures of {}\n", e.name);
    let _ = writeln!(
        s,
        "Each figure is here as SVG (vector, for papers), PNG (when this nflab was built with PNG support) and CSV (exactly the data drawn). Redraw all of them, and `report.html`, with `nflab report {dir}`; one of them with `nflab report {dir} --figure ID`. In Python: `python -m nflab plot {dir} ID` (package in `python/` of the nflab repository).\n",
        dir = e.dir.display()
    );
    for f in figs {
        let _ = writeln!(
            s,
            "## {} — `{id}.svg`, `{id}.csv`\n\n{}\n\nRedraw: `nflab report {} --figure {id}`\n",
            f.title,
            f.caption,
            e.dir.display(),
            id = f.id
        );
    }
    s
}
