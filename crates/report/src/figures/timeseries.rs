//! Latency over time: min/max-decimated series with the worst packets
//! marked, and per-window p99/max.

use super::{stack, Ctx, Figure, Table};
use crate::svg::{self, fmt_ns, num, Axis, Fmt, Plot, Style};

const W: f64 = 860.0;
use crate::load::WORST_N;
/// Panels drawn at most (the CSV has all runs).
const MAX_PANELS: usize = 12;

/// One panel per run: min/max per pixel column, worst N marked.
pub fn over_time(ctx: &Ctx) -> Option<Figure> {
    let e = ctx.e;
    let runs: Vec<usize> = (0..e.runs.len())
        .filter(|&i| e.runs[i].data.as_ref().is_some_and(|d| d.n > 0))
        .collect();
    if runs.is_empty() {
        return None;
    }
    let span = runs
        .iter()
        .filter_map(|&i| Some(e.runs[i].data.as_ref()?.span_ns))
        .max()
        .unwrap_or(1)
        .max(1);
    let lo = runs
        .iter()
        .filter_map(|&i| e.runs[i].data.as_ref()?.lat().min())
        .min()
        .unwrap_or(1) as f64;
    let hi = runs
        .iter()
        .filter_map(|&i| e.runs[i].data.as_ref()?.lat().max())
        .max()
        .unwrap_or(1) as f64;
    let mut t = Table::new(&["run", "config", "kind", "t0_s", "t1_s", "min_ns", "max_ns"]);
    let mut panels = Vec::new();
    let mut notes = Vec::new();
    let mut col_ns = 0.0;
    let mut slice_ns = 0;
    let specs = e.anomaly_specs();
    for (k, &ri) in runs.iter().enumerate() {
        let r = &e.runs[ri];
        let Some(d) = r.data.as_ref() else { continue };
        let label = format!("run {} · {}", r.name, e.configs[r.config].label);
        let last = k + 1 == runs.len().min(MAX_PANELS);
        let xl = if last {
            "transmit time since the first measured packet"
        } else {
            ""
        };
        let x = Axis::lin_nice(xl, 0.0, span as f64 / 1e9, Fmt::Secs, true);
        let y = Axis::log_decades("latency (log)", lo.max(1.0), hi, Fmt::Ns);
        let h = if last { 200.0 } else { 170.0 };
        let mut p = Plot::new(W, h, x, y);
        p.mb = if h > 170.0 { 44.0 } else { 16.0 };
        p.title(&label);
        p.zoomable();
        // Two data columns per pixel, so a 2× zoom in the report still shows detail.
        let cols_n = (p.pw() * 2.0) as usize;
        col_ns = span as f64 / cols_n as f64;
        let cols = d.columns(span, cols_n);
        slice_ns = slice_ns.max(d.slice_ns);
        let cols_s: Vec<(f64, f64, f64, f64)> = cols
            .iter()
            .map(|c| (c.0 / 1e9, c.1 / 1e9, c.2, c.3))
            .collect();
        let worst = d.worst(WORST_N);
        let wpts: Vec<(f64, f64)> = worst
            .iter()
            .map(|q| (q.t_ns as f64 / 1e9, q.lat_ns as f64))
            .collect();
        let ci = r.config;
        p.columns(0, "min–max per column", &cols_s, svg::color(ci));
        p.dots(1, &format!("worst {WORST_N}"), &wpts, "#C00000", 1.8);
        if let Some(p99) = r.num("/latency_ns/p99") {
            p.hline(p99, &format!("p99 {}", fmt_ns(p99)), "#555");
        }
        for (k, a) in specs.iter().enumerate() {
            let thr = d.anomaly_detail(k).map_or(a.t_ns, |x| x.t_ns) as f64;
            if thr < hi * 1.5 {
                p.hline_at(
                    thr,
                    &format!("anomaly {}:{}", a.n, fmt_ns(thr)),
                    "#B8860B",
                    true,
                );
            }
        }
        p.legend(
            0,
            "min–max per column",
            Style {
                color: svg::color(ci),
                width: 1.0,
                dash: "",
            },
        );
        p.legend_dot(
            1,
            &format!("worst {}", worst.len()),
            Style {
                color: "#C00000",
                width: 1.0,
                dash: "",
            },
        );
        for c in &cols_s {
            t.push(vec![
                r.name.clone(),
                e.configs[r.config].label.clone(),
                "column".into(),
                num(c.0),
                num(c.1),
                num(c.2),
                num(c.3),
            ]);
        }
        for q in &worst {
            let ts = q.t_ns as f64 / 1e9;
            t.push(vec![
                r.name.clone(),
                e.configs[r.config].label.clone(),
                "worst".into(),
                num(ts),
                num(ts),
                q.lat_ns.to_string(),
                q.lat_ns.to_string(),
            ]);
        }
        if k < MAX_PANELS {
            panels.push((p.finish(), h));
        }
    }
    if runs.len() > MAX_PANELS {
        notes.push(format!(
            "{} runs have records; the first {MAX_PANELS} are drawn, the CSV holds all.",
            runs.len()
        ));
    }
    Some(Figure {
        id: "timeseries".into(),
        title: "Latency over time".into(),
        caption: format!(
            "Latency of every packet against its transmit time, one panel per run on shared axes. The series is decimated to the minimum and maximum of each column (two columns per pixel, {} of transmit time each): every packet is counted and no spike can fall between pixels, and the figure has as many points for 10⁹ packets as for 10⁴ (the pass over the records grows with N: docs/benchmarks.md § Report). The engine keeps the minimum and maximum of {} time slices per run (at most {} each), and a column is the union of the slices whose middle falls in it, so a packet's time is placed to within half a slice. Red dots: the {WORST_N} packets of highest latency in the run (the worst-case scatter of the sources). Grey line: the run's p99; gold: anomaly thresholds of the spec. Drag across a panel to zoom in time, double-click to reset. {}",
            fmt_ns(col_ns),
            crate::load::TIME_SLICES,
            fmt_ns(slice_ns as f64),
            ctx.method
        ),
        svg: stack(&panels, W),
        data: t,
        notes,
    })
}

/// p99 and max per time window, one line pair per configuration (its first run).
pub fn windows(ctx: &Ctx) -> Option<Figure> {
    let e = ctx.e;
    let picks: Vec<usize> = e
        .configs
        .iter()
        .filter_map(|c| {
            c.runs
                .iter()
                .copied()
                .find(|&r| e.runs[r].data.as_ref().is_some_and(|d| d.n > 1))
        })
        .collect();
    if picks.is_empty() {
        return None;
    }
    let span = picks
        .iter()
        .filter_map(|&i| Some(e.runs[i].data.as_ref()?.span_ns))
        .max()
        .unwrap_or(1)
        .max(1);
    let win_ns = e.window_ns;
    let mut series = Vec::new();
    let (mut lo, mut hi) = (f64::MAX, 0f64);
    for &ri in &picks {
        let r = &e.runs[ri];
        let d = r.data.as_ref()?;
        let w = d.windows();
        for x in &w {
            lo = lo.min(x.2);
            hi = hi.max(x.3);
        }
        series.push((ri, w));
    }
    let x = Axis::lin_nice(
        "transmit time since the first measured packet",
        0.0,
        span as f64 / 1e9,
        Fmt::Secs,
        true,
    );
    let y = Axis::log_decades(
        &format!("latency per {} window (log)", fmt_ns(win_ns as f64)),
        lo.max(1.0),
        hi,
        Fmt::Ns,
    );
    let mut p = Plot::new(W, 360.0, x, y);
    p.zoomable();
    let mut t = Table::new(&[
        "run",
        "config",
        "window_start_s",
        "window_ns",
        "packets",
        "p50_ns",
        "p99_ns",
        "max_ns",
    ]);
    for (ri, w) in &series {
        let r = &e.runs[*ri];
        let ci = r.config;
        let label = &e.configs[ci].label;
        let mid = |x: &crate::load::Window| (x.0 + win_ns / 2) as f64 / 1e9;
        let p99: Vec<(f64, f64)> = w.iter().map(|x| (mid(x), x.2)).collect();
        let mx: Vec<(f64, f64)> = w.iter().map(|x| (mid(x), x.3)).collect();
        let st = Style::solid(ci);
        p.line(ci, &format!("{label} p99"), &p99, st, false);
        p.line(
            ci,
            &format!("{label} max"),
            &mx,
            Style {
                color: st.color,
                width: 1.0,
                dash: "1 2",
            },
            false,
        );
        p.legend(ci, label, st);
        for x in w {
            t.push(vec![
                r.name.clone(),
                label.clone(),
                num(x.0 as f64 / 1e9),
                win_ns.to_string(),
                x.4.to_string(),
                num(x.1),
                num(x.2),
                num(x.3),
            ]);
        }
    }
    Some(Figure {
        id: "windows".into(),
        title: "p99 and maximum per time window".into(),
        caption: format!(
            "Tail latency over the run: for each window of {} of transmit time, the 99th percentile (solid) and the maximum (dotted) of the packets sent in it, nearest rank; one colour per run configuration (its first repetition). A flat p99 with isolated maxima means rare spikes; a p99 that moves means the whole distribution shifted. The windows are the engine's (summary.windows of figures/analysis.json): exact up to 2^20 packets per window, an HDR histogram of 3 significant digits beyond. Drag to zoom, double-click to reset. {}",
            fmt_ns(win_ns as f64),
            ctx.method
        ),
        svg: p.finish(),
        data: t,
        notes: Vec::new(),
    })
}
