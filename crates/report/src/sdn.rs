//! The SDN figures (issue 19, docs/sdn.md) as a report: `nflab sdn report
//! DIR` reads what `bench/sdn/run.sh` wrote into DIR and draws, with the
//! report's own SVG and HTML layer,
//!
//! - `sdn_install`: FlowMod installation time against bridges, directly and
//!   through the proxy, per k (mean and 95 % CI over the repetitions, as
//!   `nflab sdn bench` computed them with `nflab_analyze`);
//! - `sdn_stats_delay`: FlowStats delay, the same way;
//! - `sdn_flower` (with `flower.json`, the output of `nflab sdn flower-fit
//!   --json`): median latency against port hops with the fitted line;
//! - `sdn_qos` (with `qos.json`): realtime probe latency with and without
//!   background traffic and priority queue.
//!
//! Inputs: `bench.jsonl`, one line per cell `{"bridges", "flowmods",
//! "direct": <bench --json>, "proxy": <bench --json>}`; `flower.json` and
//! `qos.json` when present. Nothing is recomputed here but the drawing.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::figures::{Figure, Table};
use crate::svg::{self, esc, num, Axis, Fmt, Plot, Style};
use crate::ReportError;

const W: f64 = 760.0;
const H: f64 = 380.0;

/// One cell of the bench: bridges, k, and the two runs.
#[derive(Debug, Clone)]
pub struct Cell {
    /// Bridges.
    pub bridges: u64,
    /// FlowMods.
    pub flowmods: u64,
    /// `nflab sdn bench --json` directly.
    pub direct: Value,
    /// Through the proxy.
    pub proxy: Value,
}

fn read(path: &Path) -> Result<String, ReportError> {
    std::fs::read_to_string(path)
        .map_err(|e| ReportError::Input(format!("cannot read {}: {e}", path.display())))
}

/// Parse `bench.jsonl` (blank lines skipped); a bad line is an error naming it.
pub fn parse_cells(text: &str, what: &str) -> Result<Vec<Cell>, ReportError> {
    let mut cells = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |why: &str| {
            ReportError::Input(format!(
                "{what}:{}: {why}; each line is {{\"bridges\", \"flowmods\", \"direct\", \"proxy\"}} as bench/sdn/run.sh writes it",
                i + 1
            ))
        };
        let v: Value = serde_json::from_str(line).map_err(|e| bad(&e.to_string()))?;
        let (Some(bridges), Some(flowmods)) = (v["bridges"].as_u64(), v["flowmods"].as_u64())
        else {
            return Err(bad("a line needs \"bridges\" and \"flowmods\""));
        };
        cells.push(Cell {
            bridges,
            flowmods,
            direct: v["direct"].clone(),
            proxy: v["proxy"].clone(),
        });
    }
    Ok(cells)
}

/// Mean and CI half-width of `key` (e.g. `install_s`) of one bench output.
fn mean_ci(v: &Value, key: &str) -> Option<(f64, f64)> {
    let m = v[key]["mean"].as_f64()?;
    Some((m, v[key]["ci95"].as_f64().unwrap_or(0.0)))
}

/// A figure of `key` against bridges: one series per (k, direct/proxy).
pub fn bench_figure(
    cells: &[Cell],
    key: &str,
    scale: f64,
    id: &str,
    title: &str,
    unit: &str,
) -> Figure {
    let mut ks: Vec<u64> = cells.iter().map(|c| c.flowmods).collect();
    ks.sort_unstable();
    ks.dedup();
    let mut series = Vec::new();
    for k in &ks {
        for (mode, pick) in [("direct", 0), ("proxy", 1)] {
            let mut pts: Vec<(f64, f64, f64, f64)> = cells
                .iter()
                .filter(|c| c.flowmods == *k)
                .filter_map(|c| {
                    let v = if pick == 0 { &c.direct } else { &c.proxy };
                    let (m, ci) = mean_ci(v, key)?;
                    let (m, ci) = (m * scale, ci * scale);
                    Some((c.bridges as f64, m, m - ci, m + ci))
                })
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            series.push((format!("k = {k}, {mode}"), pick, pts));
        }
    }
    let all = series.iter().flat_map(|s| s.2.iter());
    let ymax = all.clone().map(|p| p.3).fold(0.0, f64::max);
    let xmax = all.map(|p| p.0).fold(1.0, f64::max);
    let x = Axis::log_decades("bridges", 1.0, xmax, Fmt::Num);
    let y = Axis::lin_nice(
        &format!("{title} ({unit})"),
        0.0,
        ymax.max(1e-9),
        Fmt::Num,
        true,
    );
    let mut p = Plot::new(W, H, x, y);
    let mut data = Table::new(&[
        "bridges",
        "flowmods",
        "mode",
        "mean",
        "ci95_low",
        "ci95_high",
    ]);
    for (i, (name, pick, pts)) in series.iter().enumerate() {
        let st = if *pick == 0 {
            Style::dashed(i / 2)
        } else {
            Style::solid(i / 2)
        };
        let line: Vec<(f64, f64)> = pts.iter().map(|q| (q.0, q.1)).collect();
        p.line(i, name, &line, st, false);
        p.errorbars(i, name, pts, st);
        p.legend(i, name, st);
        for q in pts {
            let (k, mode) = name.split_once(", ").unwrap_or((name, ""));
            data.push(vec![
                num(q.0),
                k.trim_start_matches("k = ").to_string(),
                mode.to_string(),
                num(q.1),
                num(q.2),
                num(q.3),
            ]);
        }
    }
    Figure {
        id: id.into(),
        title: format!("{title} against bridges"),
        caption: format!(
            "{title} of nflab sdn bench on Open vSwitch (userspace datapath): mean over the repetitions with its 95 % Student-t interval, directly (dashed: one harness thread per bridge) and through nflab's proxy (solid: one emulated switch, table i on bridge i)."
        ),
        svg: p.finish(),
        data,
        notes: Vec::new(),
    }
}

/// The FLOWer figure: median latency per run against hops, and the fit.
pub fn flower_figure(fit: &Value) -> Option<Figure> {
    let pts: Vec<(f64, f64)> = fit["points"]
        .as_array()?
        .iter()
        .filter_map(|p| Some((p["hops"].as_f64()?, p["latency_p50_ns"].as_f64()?)))
        .collect();
    if pts.is_empty() {
        return None;
    }
    let line = &fit["per_hop_p50_ns"];
    let (slope, icpt) = (line["slope"].as_f64()?, line["intercept"].as_f64()?);
    let xmax = pts.iter().map(|p| p.0).fold(1.0, f64::max);
    let ymax = pts.iter().map(|p| p.1).fold(0.0, f64::max);
    let x = Axis::lin_nice("port hops k", 0.0, xmax, Fmt::Num, true);
    let y = Axis::lin_nice("median one-way latency (ns)", 0.0, ymax, Fmt::Ns, true);
    let mut p = Plot::new(W, H, x, y);
    p.dots(0, "runs", &pts, svg::color(0), 3.5);
    p.legend_dot(0, "runs (median latency)", Style::solid(0));
    let fitted = [(0.0, icpt), (xmax, icpt + slope * xmax)];
    p.line(1, "fit", &fitted, Style::dashed(1), false);
    p.legend(1, "least-squares line", Style::dashed(1));
    let mut data = Table::new(&["hops", "latency_p50_ns"]);
    for (h, l) in &pts {
        data.push(vec![num(*h), num(*l)]);
    }
    Some(Figure {
        id: "sdn_flower".into(),
        title: "FLOWer: latency against port hops".into(),
        caption: format!(
            "Each probe crosses k veth cables looped on one Open vSwitch bridge. Slope {} ± {} ns per hop (95 % CI), R² {:.4}, over {} runs (nflab_analyze::linfit).",
            num(slope),
            num(line["slope_ci"].as_f64().unwrap_or(f64::NAN)),
            line["r2"].as_f64().unwrap_or(f64::NAN),
            pts.len()
        ),
        svg: p.finish(),
        data,
        notes: Vec::new(),
    })
}

/// The QoS figure from `qos.json`: `[{"label", "p50_ns", "p99_ns"}, …]`.
pub fn qos_figure(q: &Value) -> Option<Figure> {
    let rows = q.as_array()?;
    let bars: Vec<(String, f64, f64)> = rows
        .iter()
        .filter_map(|r| {
            Some((
                r["label"].as_str()?.to_string(),
                r["p50_ns"].as_f64()?,
                r["p99_ns"].as_f64()?,
            ))
        })
        .collect();
    if bars.is_empty() {
        return None;
    }
    let ymax = bars.iter().map(|b| b.2).fold(1.0, f64::max);
    let x = Axis::lin_nice("case", 0.0, bars.len() as f64, Fmt::Num, true);
    let y = Axis::log_decades("probe one-way latency (ns)", 1e3, ymax, Fmt::Ns);
    let mut p = Plot::new(W, H, x, y);
    let mut data = Table::new(&["case", "label", "p50_ns", "p99_ns"]);
    let mut rects = Vec::new();
    let mut p99 = Vec::new();
    for (i, (label, p50, q99)) in bars.iter().enumerate() {
        let c = i as f64 + 0.5;
        rects.push((
            c - 0.3,
            c + 0.3,
            1e3,
            *p50,
            format!("{label}: p50 {}", svg::fmt_ns(*p50)),
        ));
        p99.push((c, *q99));
        data.push(vec![i.to_string(), label.clone(), num(*p50), num(*q99)]);
    }
    p.rects(0, &rects, svg::color(0), 2.0);
    p.legend(0, "median", Style::solid(0));
    p.dots(1, "p99", &p99, svg::color(1), 4.0);
    p.legend_dot(1, "99th percentile", Style::solid(1));
    let cases = bars
        .iter()
        .enumerate()
        .map(|(i, b)| format!("{i}: {}", b.0))
        .collect::<Vec<_>>()
        .join("; ");
    Some(Figure {
        id: "sdn_qos".into(),
        title: "Realtime probes, background traffic and a priority queue".into(),
        caption: format!("Probe latency through Open vSwitch with dut1's egress limited by OvS linux-htb QoS. Cases: {cases}."),
        svg: p.finish(),
        data,
        notes: Vec::new(),
    })
}

/// Write `report.html` and `figures/` into `dir` from its `bench.jsonl`
/// (and `flower.json`, `qos.json` when there).
pub fn write(dir: &Path) -> Result<PathBuf, ReportError> {
    let mut figs = Vec::new();
    let bench = dir.join("bench.jsonl");
    let mut cells = Vec::new();
    if bench.exists() {
        cells = parse_cells(&read(&bench)?, &bench.display().to_string())?;
        figs.push(bench_figure(
            &cells,
            "install_s",
            1.0,
            "sdn_install",
            "FlowMod installation time",
            "s",
        ));
        figs.push(bench_figure(
            &cells,
            "stats_delay_ms",
            1.0,
            "sdn_stats_delay",
            "FlowStats delay",
            "ms",
        ));
    }
    for (name, f) in [
        ("flower.json", flower_figure as fn(&Value) -> Option<Figure>),
        ("qos.json", qos_figure),
    ] {
        let path = dir.join(name);
        if path.exists() {
            let v: Value = serde_json::from_str(&read(&path)?)
                .map_err(|e| ReportError::Input(format!("{} is not JSON: {e}", path.display())))?;
            figs.extend(f(&v));
        }
    }
    if figs.is_empty() {
        return Err(ReportError::Input(format!(
            "{} has no bench.jsonl, flower.json or qos.json: run bash bench/sdn/run.sh OUT first",
            dir.display()
        )));
    }
    let figdir = dir.join("figures");
    std::fs::create_dir_all(&figdir).map_err(|source| ReportError::Write {
        path: figdir.display().to_string(),
        source,
    })?;
    for f in &figs {
        crate::write(&figdir.join(format!("{}.svg", f.id)), f.svg.as_bytes())?;
        crate::write(
            &figdir.join(format!("{}.csv", f.id)),
            f.data.to_csv().as_bytes(),
        )?;
    }
    let machine = dir.join("machine.txt");
    let machine = std::fs::read_to_string(machine).unwrap_or_default();
    let path = dir.join("report.html");
    crate::write(&path, page(&figs, &cells, &machine).as_bytes())?;
    Ok(path)
}

fn page(figs: &[Figure], cells: &[Cell], machine: &str) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>nflab · SDN</title><style>{}</style></head><body><header><h1>SDN on Open vSwitch</h1><p class=\"lead\">nflab's TableVisor-class proxy and FLOWer (issue 19, docs/sdn.md).</p><pre>{}</pre></header>",
        crate::html::CSS,
        esc(machine.trim())
    );
    if !cells.is_empty() {
        h.push_str("<section><h2>Proxy cost</h2><table><tr><th>bridges</th><th>k</th><th>install direct (s)</th><th>install proxy (s)</th><th>ratio</th><th>stats direct (ms)</th><th>stats proxy (ms)</th><th>difference (ms)</th></tr>");
        for c in cells {
            let f = |v: &Value, k: &str| {
                mean_ci(v, k).map_or("–".to_string(), |(m, ci)| {
                    format!("{} ± {}", num(m), num(ci))
                })
            };
            let ratio = match (
                mean_ci(&c.proxy, "install_s"),
                mean_ci(&c.direct, "install_s"),
            ) {
                (Some(p), Some(d)) if d.0 > 0.0 => format!("{:.2}", p.0 / d.0),
                _ => "–".into(),
            };
            let diff = match (
                mean_ci(&c.proxy, "stats_delay_ms"),
                mean_ci(&c.direct, "stats_delay_ms"),
            ) {
                (Some(p), Some(d)) => format!("{:+.3}", p.0 - d.0),
                _ => "–".into(),
            };
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{ratio}</td><td>{}</td><td>{}</td><td>{diff}</td></tr>",
                c.bridges,
                c.flowmods,
                f(&c.direct, "install_s"),
                f(&c.proxy, "install_s"),
                f(&c.direct, "stats_delay_ms"),
                f(&c.proxy, "stats_delay_ms"),
            );
        }
        h.push_str("</table></section>");
    }
    for f in figs {
        let _ = write!(
            h,
            "<section class=\"fig\" id=\"{}\"><h2>{}</h2>{}<p class=\"cap\">{} Data: <code>figures/{}.csv</code>.</p></section>",
            esc(&f.id),
            esc(&f.title),
            f.svg,
            esc(&f.caption),
            esc(&f.id)
        );
    }
    let _ = write!(h, "<script>{}</script></body></html>", crate::html::JS);
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bench(mean: f64, ci: f64) -> String {
        format!("{{\"install_s\": {{\"mean\": {mean}, \"ci95\": {ci}}}, \"stats_delay_ms\": {{\"mean\": {}, \"ci95\": null}}}}", mean * 1000.0)
    }

    #[test]
    fn the_bench_figure_draws_exactly_the_cells() {
        let text = format!(
            "{{\"bridges\": 1, \"flowmods\": 50, \"direct\": {}, \"proxy\": {}}}\n\n{{\"bridges\": 5, \"flowmods\": 50, \"direct\": {}, \"proxy\": {}}}\n",
            bench(0.01, 0.001),
            bench(0.02, 0.002),
            bench(0.05, 0.005),
            bench(0.04, 0.004)
        );
        let cells = parse_cells(&text, "t").unwrap();
        assert_eq!(cells.len(), 2);
        let f = bench_figure(&cells, "install_s", 1.0, "x", "Install", "s");
        assert_eq!(f.data.rows.len(), 4);
        let row = f
            .data
            .rows
            .iter()
            .find(|r| r[0] == "5" && r[2] == "proxy")
            .unwrap();
        let v: Vec<f64> = row[3..].iter().map(|c| c.parse().unwrap()).collect();
        assert!(
            (v[0] - 0.04).abs() < 1e-12
                && (v[1] - 0.036).abs() < 1e-12
                && (v[2] - 0.044).abs() < 1e-12,
            "{row:?}"
        );
        assert!(f.svg.starts_with("<svg") && f.svg.ends_with("</svg>"));
        // A null CI draws the mean alone.
        let s = bench_figure(&cells, "stats_delay_ms", 1.0, "y", "Stats", "ms");
        assert!(s.data.rows.iter().all(|r| r[3] == r[4] && r[4] == r[5]));
        let e = parse_cells("{\"bridges\": 1}\n", "b.jsonl")
            .unwrap_err()
            .to_string();
        assert!(e.contains("b.jsonl:1"), "{e}");
    }

    #[test]
    fn the_flower_figure_draws_the_fit_it_was_given() {
        let fit = serde_json::json!({
            "points": [{"hops": 1, "latency_p50_ns": 1000.0}, {"hops": 2, "latency_p50_ns": 2000.0}],
            "per_hop_p50_ns": {"slope": 1000.0, "intercept": 0.0, "slope_ci": 5.0, "r2": 1.0}
        });
        let f = flower_figure(&fit).unwrap();
        assert_eq!(f.data.rows, vec![vec!["1", "1000"], vec!["2", "2000"]]);
        assert!(
            f.caption.contains("Slope 1000 ± 5 ns per hop"),
            "{}",
            f.caption
        );
    }
}
