//! The experiment report: one self-contained `report.html` per artifact tree.
//!
//! It opens offline (no scripts or fonts from the network): the figures are
//! inline SVG drawn here. This first version shows the experiment, its spec
//! and provenance, the noise floor of the host (the loopback runs), the
//! results table, and an HDR percentile plot (latency against 1/(1−p) on a
//! log axis, the plot of seed 000) with one line per run.
//!
//! It reads only the artifact tree, so `nflab report DIR` rebuilds it later,
//! and a run with missing files is described instead of failing the report.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use nflab_analyze::Summary;

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The directory is not an artifact tree of `nflab run`.
    #[error("{0} is not an nflab experiment directory (it has no spec.toml and no runs/): give the directory that `nflab run` printed")]
    NotAnExperiment(String),
    /// Writing the file failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// Target file.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
}

/// One run as found in the tree.
struct RunView {
    name: String,
    params: serde_json::Value,
    summary: Option<Summary>,
    /// (percentile, latency ns) points of the HDR plot.
    percentiles: Vec<(f64, f64)>,
    problem: Option<String>,
}

/// Percentiles drawn in the HDR plot: 0, 50, 90, 99, ... up to 99.9999.
fn plot_quantiles() -> Vec<f64> {
    let mut q = vec![0.0];
    let mut tail = 0.5_f64;
    while tail >= 1e-6 {
        for step in [1.0, 0.8, 0.6, 0.4, 0.2] {
            let p = 1.0 - tail * step;
            if p < 1.0 {
                q.push(p);
            }
        }
        tail /= 10.0;
    }
    q.sort_by(|a, b| a.total_cmp(b));
    q.dedup();
    q
}

fn load_run(dir: &Path) -> RunView {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let params = std::fs::read_to_string(dir.join("params.json"))
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(serde_json::Value::Null);
    let summary: Option<Summary> = std::fs::read_to_string(dir.join("summary.json"))
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok());
    let mut problem = None;
    let mut percentiles = Vec::new();
    match nflab_record::read_all(&dir.join("records.nfr")) {
        Ok(f) => {
            let warm = f
                .trailer
                .as_ref()
                .map(|t| {
                    t.sent
                        .iter()
                        .map(|s| (s.flow, s.warmup))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            let mut lat: Vec<i64> = f
                .records
                .iter()
                .filter(|r| !warm.iter().any(|(fl, w)| *fl == r.flow && r.seq < *w))
                .map(|r| r.rx_ns as i64 - r.tx_ns as i64)
                .collect();
            lat.sort_unstable();
            if lat.is_empty() {
                problem = Some("no packet was received in this run".into());
            } else {
                for q in plot_quantiles() {
                    // Only draw percentiles the sample can resolve.
                    if (1.0 - q) * (lat.len() as f64) < 1.0 && q > 0.0 {
                        break;
                    }
                    let rank = ((q * lat.len() as f64).ceil() as usize).clamp(1, lat.len());
                    percentiles.push((q, lat[rank - 1] as f64));
                }
                percentiles.push((
                    1.0 - 1.0 / lat.len() as f64,
                    *lat.last().unwrap_or(&0) as f64,
                ));
            }
        }
        Err(e) => problem = Some(format!("records unreadable: {e}")),
    }
    if summary.is_none() {
        problem.get_or_insert_with(|| "summary.json is missing: the run did not finish".into());
    }
    RunView {
        name,
        params,
        summary,
        percentiles,
        problem,
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn fmt_ns(v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(v) if v.abs() < 1e3 => format!("{v:.0} ns"),
        Some(v) if v.abs() < 1e6 => format!("{:.1} µs", v / 1e3),
        Some(v) => format!("{:.2} ms", v / 1e6),
    }
}

fn label(r: &RunView) -> String {
    let dut = r
        .params
        .pointer("/dut/kind")
        .and_then(|v| v.as_str())
        .unwrap_or("?");
    let rate = r
        .params
        .pointer("/traffic/rate_pps")
        .map(|v| v.to_string())
        .unwrap_or_default();
    format!("{} {dut} {rate} pps", r.name)
}

const COLORS: [&str; 8] = [
    "#1b6ca8", "#d1495b", "#2e8b57", "#edae49", "#6a4c93", "#00798c", "#8d6a9f", "#444",
];

/// HDR percentile plot as inline SVG.
fn hdr_plot(runs: &[RunView]) -> String {
    let (w, h, ml, mr, mt, mb) = (760.0, 380.0, 70.0, 190.0, 20.0, 50.0);
    let pw = w - ml - mr;
    let ph = h - mt - mb;
    let max_x: f64 = runs
        .iter()
        .flat_map(|r| r.percentiles.iter().map(|(q, _)| (1.0 / (1.0 - q)).log10()))
        .fold(1.0, f64::max)
        .ceil();
    let max_y = runs
        .iter()
        .flat_map(|r| r.percentiles.iter().map(|(_, v)| *v))
        .fold(1.0, f64::max);
    let min_y = runs
        .iter()
        .flat_map(|r| r.percentiles.iter().map(|(_, v)| *v))
        .fold(f64::MAX, f64::min)
        .max(1.0);
    let (ly0, ly1) = (
        min_y.log10().floor(),
        max_y.log10().ceil().max(min_y.log10().floor() + 1.0),
    );
    let x = |q: f64| ml + (1.0 / (1.0 - q)).log10() / max_x * pw;
    let y = |v: f64| mt + ph - (v.max(1.0).log10() - ly0) / (ly1 - ly0) * ph;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(
        s,
        r##"<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>"##
    );
    for d in 0..=(max_x as i32) {
        let xx = ml + d as f64 / max_x * pw;
        let lab = match d {
            0 => "0%".to_string(),
            1 => "90%".into(),
            2 => "99%".into(),
            n => format!("99.{}%", "9".repeat(n as usize - 2)),
        };
        let _ = write!(
            s,
            r##"<line x1="{xx}" x2="{xx}" y1="{mt}" y2="{}" stroke="#eee"/><text x="{xx}" y="{}" text-anchor="middle">{lab}</text>"##,
            mt + ph,
            mt + ph + 15.0
        );
    }
    for d in (ly0 as i32)..=(ly1 as i32) {
        let v = 10f64.powi(d);
        let yy = y(v);
        let _ = write!(
            s,
            r##"<line x1="{ml}" x2="{}" y1="{yy}" y2="{yy}" stroke="#eee"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
            ml + pw,
            ml - 5.0,
            yy + 4.0,
            fmt_ns(Some(v))
        );
    }
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">percentile (log scale of 1/(1−p))</text>"#,
        ml + pw / 2.0,
        h - 8.0
    );
    for (i, r) in runs
        .iter()
        .filter(|r| !r.percentiles.is_empty())
        .enumerate()
    {
        let c = COLORS[i % COLORS.len()];
        let pts: Vec<String> = r
            .percentiles
            .iter()
            .map(|(q, v)| format!("{:.1},{:.1}", x(*q), y(*v)))
            .collect();
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="1.6" points="{}"><title>{}</title></polyline>"#,
            pts.join(" "),
            esc(&label(r))
        );
        let ly = mt + 12.0 + i as f64 * 14.0;
        let _ = write!(
            s,
            r#"<line x1="{}" x2="{}" y1="{ly}" y2="{ly}" stroke="{c}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
            w - mr + 10.0,
            w - mr + 28.0,
            w - mr + 32.0,
            ly + 4.0,
            esc(&label(r))
        );
    }
    s.push_str("</svg>");
    s
}

/// Write `report.html` into the experiment directory and return its path.
pub fn write_report(dir: &Path) -> Result<PathBuf, ReportError> {
    let runs_dir = dir.join("runs");
    if !dir.join("spec.toml").exists() && !runs_dir.is_dir() {
        return Err(ReportError::NotAnExperiment(dir.display().to_string()));
    }
    let spec = std::fs::read_to_string(dir.join("spec.toml"))
        .unwrap_or_else(|_| "(spec.toml missing)".into());
    let env: serde_json::Value = std::fs::read_to_string(dir.join("env.json"))
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(serde_json::Value::Null);
    let mut run_dirs: Vec<PathBuf> = std::fs::read_dir(&runs_dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    run_dirs.sort();
    let runs: Vec<RunView> = run_dirs.iter().map(|d| load_run(d)).collect();
    let title = dir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();

    let mut h = String::new();
    let _ = write!(h, "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>nflab · {}</title><style>{}</style></head><body>", esc(&title), CSS);
    let _ = write!(h, "<h1>nflab experiment <code>{}</code></h1>", esc(&title));
    let clock = env
        .get("clock_source")
        .and_then(|v| v.as_str())
        .unwrap_or("CLOCK_REALTIME");
    let res = env
        .get("clock_resolution_ns")
        .and_then(|v| v.as_u64())
        .unwrap_or(1);
    let machine = format!(
        "{} · {} CPUs · kernel {} · clocksource {}",
        env.get("cpu_model").and_then(|v| v.as_str()).unwrap_or("?"),
        env.get("cpus").and_then(|v| v.as_u64()).unwrap_or(0),
        env.get("kernel").and_then(|v| v.as_str()).unwrap_or("?"),
        env.get("kernel_clocksource")
            .and_then(|v| v.as_str())
            .unwrap_or("?"),
    );
    let _ = write!(
        h,
        "<p class=\"meta\">{} · started {} · nflab {} ({})</p>",
        esc(&machine),
        esc(env
            .get("started_utc")
            .and_then(|v| v.as_str())
            .unwrap_or("?")),
        esc(env
            .get("nflab_version")
            .and_then(|v| v.as_str())
            .unwrap_or("?")),
        esc(env
            .get("nflab_commit")
            .and_then(|v| v.as_str())
            .unwrap_or("?"))
    );
    let _ = write!(h, "<p>Latency is one-way: receive timestamp (kernel software, at the recorder's socket) minus transmit timestamp (application, written into the probe right before the send), both <code>{clock}</code> with a resolution of {res} ns on one host.</p>");

    // Noise floor: the loopback runs of this experiment.
    h.push_str("<h2>Noise floor of this host</h2>");
    let floor: Vec<&RunView> = runs
        .iter()
        .filter(|r| r.params.pointer("/dut/kind").and_then(|v| v.as_str()) == Some("loopback"))
        .collect();
    if floor.is_empty() {
        h.push_str("<p class=\"warn\">This experiment has no <code>loopback</code> run, so its own measurement noise is not shown here: run <code>nflab doctor</code> or add <code>\"dut.kind\" = [\"loopback\", …]</code> to the sweep.</p>");
    } else {
        h.push_str("<p>The <code>loopback</code> runs cable the generator straight to the recorder: whatever latency they show is the measurement's own, and a DuT's figure is only meaningful well above it.</p><ul>");
        for r in floor {
            if let Some(s) = &r.summary {
                let l = &s.latency_ns;
                let _ = write!(
                    h,
                    "<li>{}: p50 {}, p99 {}, max {}</li>",
                    esc(&label(r)),
                    fmt_ns(l.p50.map(|v| v as f64)),
                    fmt_ns(l.p99.map(|v| v as f64)),
                    fmt_ns(l.max.map(|v| v as f64))
                );
            }
        }
        h.push_str("</ul>");
    }

    h.push_str("<h2>Results</h2><table><tr><th>run</th><th>DuT</th><th>offered</th><th>sent</th><th>received</th><th>loss</th><th>p50</th><th>p99</th><th>p99.9</th><th>p99.99</th><th>max</th><th>RFC 3550 jitter</th><th>anomalies</th><th>notes</th></tr>");
    for r in &runs {
        let dut = r
            .params
            .pointer("/dut/kind")
            .and_then(|v| v.as_str())
            .unwrap_or("?");
        match &r.summary {
            Some(s) => {
                let l = &s.latency_ns;
                let an: Vec<String> = s
                    .anomalies
                    .iter()
                    .map(|a| format!("{}:{} → {}", a.n, fmt_ns(Some(a.t_ns as f64)), a.count))
                    .collect();
                let mut notes = s.notes.clone();
                if s.interrupted {
                    notes.insert(0, "interrupted".into());
                }
                let _ = write!(h, "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2e}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(&r.name), esc(dut), s.rate.offered_pps.map_or("max".into(), |v| format!("{v:.0} pps")), s.packets.sent, s.packets.received, s.loss_ratio,
                    fmt_ns(l.p50.map(|v| v as f64)), fmt_ns(l.p99.map(|v| v as f64)), fmt_ns(l.p99_9.map(|v| v as f64)), fmt_ns(l.p99_99.map(|v| v as f64)), fmt_ns(l.max.map(|v| v as f64)),
                    fmt_ns(s.jitter_ns.rfc3550), esc(&an.join(", ")), esc(&notes.join("; ")));
            }
            None => {
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td colspan=\"12\" class=\"warn\">{}</td></tr>",
                    esc(&r.name),
                    esc(dut),
                    esc(r.problem.as_deref().unwrap_or("no summary"))
                );
            }
        }
    }
    h.push_str("</table>");

    h.push_str("<h2>Latency percentiles</h2>");
    if runs.iter().any(|r| !r.percentiles.is_empty()) {
        let _ = write!(h, "<figure>{}<figcaption>HDR percentile plot: one-way latency (log scale) against percentile, on a log scale of 1/(1−p), one line per run, computed exactly from every recorded packet (warm-up excluded). A line ends at the highest percentile its sample size resolves, then its maximum. Clock {clock}, resolution {res} ns.</figcaption></figure>", hdr_plot(&runs));
    } else {
        h.push_str("<p class=\"warn\">No run has received packets, so there is no latency distribution to draw.</p>");
    }
    for r in runs.iter().filter(|r| r.problem.is_some()) {
        let _ = write!(
            h,
            "<p class=\"warn\">run {}: {}</p>",
            esc(&r.name),
            esc(r.problem.as_deref().unwrap_or(""))
        );
    }

    let _ = write!(h, "<h2>Spec</h2><pre>{}</pre>", esc(&spec));
    let _ = write!(
        h,
        "<h2>Provenance</h2><pre>{}</pre>",
        esc(&serde_json::to_string_pretty(&env).unwrap_or_default())
    );
    h.push_str("</body></html>\n");
    let path = dir.join("report.html");
    std::fs::write(&path, h).map_err(|e| ReportError::Write {
        path: path.display().to_string(),
        source: e,
    })?;
    Ok(path)
}

const CSS: &str = "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}\
th{background:#f3f3f3}td:nth-child(2),td:first-child{text-align:left}pre{background:#f7f7f7;padding:1em;overflow:auto;font-size:12px}\
.meta{color:#666}.warn{color:#a33}figcaption{font-size:13px;color:#444;max-width:760px}";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_an_experiment_is_one_sentence() {
        let d = std::env::temp_dir().join(format!("nflab-report-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let e = write_report(&d).unwrap_err().to_string();
        assert!(e.contains("not an nflab experiment directory"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn quantiles_reach_six_nines_in_order() {
        let q = plot_quantiles();
        assert_eq!(q[0], 0.0);
        assert!(q.windows(2).all(|w| w[0] < w[1]));
        assert!(q.contains(&0.5) && q.contains(&0.99));
        assert!(*q.last().unwrap() > 0.99999);
    }
}
