//! The stage breakdown of runs with `[monitor] kind = "stages"`: one stacked bar
//! per run, the mean time per segment (tx → DuT ingress → … → DuT egress → rx),
//! read from `runs/NNN/monitor.json` (computed there by nflab-analyze; nothing is
//! computed here).

use std::fmt::Write as _;

use serde_json::Value;

use super::{Ctx, Figure, Table};

const COLORS: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

/// `stages`: `None` unless some run has a stage breakdown.
pub fn stacked(ctx: &Ctx) -> Option<Figure> {
    let e = ctx.e;
    let mut bars: Vec<(String, Vec<(String, f64)>)> = Vec::new();
    for run in &e.runs {
        let path = e.dir.join("runs").join(&run.name).join("monitor.json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let Some(segs) = v["breakdown"]["segments"].as_array() else {
            continue;
        };
        let label = e.configs.get(run.config).map_or_else(
            || run.name.clone(),
            |c| format!("{} · {}", run.name, c.label),
        );
        let segs: Vec<(String, f64)> = segs
            .iter()
            .filter_map(|s| Some((s["name"].as_str()?.to_string(), s["mean_ns"].as_f64()?)))
            .collect();
        if !segs.is_empty() {
            bars.push((label, segs));
        }
    }
    if bars.is_empty() {
        return None;
    }
    let max_total = bars
        .iter()
        .map(|(_, s)| s.iter().map(|x| x.1).sum::<f64>())
        .fold(0.0, f64::max)
        .max(1.0);
    // One colour per segment name, in order of first appearance: DuT kinds have
    // different stages, and a name keeps its colour across bars.
    let mut names: Vec<&str> = Vec::new();
    for (_, segs) in &bars {
        for (n, _) in segs {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    let color = |n: &str| COLORS[names.iter().position(|x| *x == n).unwrap_or(0) % COLORS.len()];
    let (w, left, bar_h, gap) = (760.0, 230.0, 22.0, 34.0);
    // Legend rows of at most four names.
    let legend_rows = names.len().div_ceil(4);
    let top = 14.0 + 16.0 * legend_rows as f64;
    let h = top + bars.len() as f64 * gap + 30.0;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"11\">"
    );
    let mut data = Table::new(&["run", "segment", "mean_us"]);
    let scale = (w - left - 20.0) / max_total;
    for (row, (label, segs)) in bars.iter().enumerate() {
        let y = top + row as f64 * gap;
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            left - 6.0,
            y + bar_h * 0.7,
            label.replace('&', "&amp;").replace('<', "&lt;")
        );
        let mut x = left;
        for (name, mean) in segs {
            let bw = mean.max(0.0) * scale;
            let _ = write!(
                svg,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{bw:.1}\" height=\"{bar_h}\" fill=\"{}\"><title>{name}: {:.2} µs</title></rect>",
                color(name),
                mean / 1e3
            );
            x += bw;
            data.push(vec![
                label.clone(),
                name.clone(),
                format!("{:.3}", mean / 1e3),
            ]);
        }
    }
    // Legend: every segment name.
    for (i, name) in names.iter().enumerate() {
        let (lx, ly) = (10.0 + 185.0 * (i % 4) as f64, 8.0 + 16.0 * (i / 4) as f64);
        let _ = write!(
            svg,
            "<rect x=\"{lx}\" y=\"{ly}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>",
            color(name),
            lx + 13.0,
            ly + 9.0,
            name
        );
    }
    let _ = write!(
        svg,
        "<text x=\"{left}\" y=\"{}\">0</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.1} µs</text></svg>",
        h - 8.0,
        w - 20.0,
        h - 8.0,
        max_total / 1e3
    );
    Some(Figure {
        id: "stages".into(),
        title: "One-way latency inside the DuT, stage by stage".into(),
        caption: "Mean time per segment of the path, per run: generator send (tx) → DuT ingress → the DuT's stages → DuT egress → recorder (rx). Stage times from the eBPF stages monitor (BTF tracepoints, CLOCK_TAI converted to CLOCK_REALTIME), joined per probe with the records; the segments of a packet add up to its end-to-end latency. Numbers from runs/NNN/monitor.json (docs/monitor.md).".into(),
        svg,
        data,
        notes: Vec::new(),
    })
}
