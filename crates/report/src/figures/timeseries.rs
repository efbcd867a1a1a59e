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
        .filter_map(|&i| e.runs[i].data.as_ref()?.lat.min())
        .min()
        .unwrap_or(1) as f64;
    let hi = runs
        .iter()
        .filter_map(|&i| e.runs[i].data.as_ref()?.lat.max())
        .max()
        .unwrap_or(1) as f64;
    let mut streamed: Vec<String> = Vec::new();
    let mut t = Table::new(&["run", "config", "kind", "t0_s", "t1_s", "min_ns", "max_ns"]);
    let mut panels = Vec::new();
    let mut notes = Vec::new();
    let mut col_ns = 0.0;
    let thresholds = e.anomaly_specs();
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
        if let Some(st) = d.streamed() {
            streamed.push(format!("{} ({})", r.name, fmt_ns(st.slice_ns() as f64)));
        }
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
        if let Some(p99) = d.lat.quantile(0.99) {
            p.hline(p99, &format!("p99 {}", fmt_ns(p99)), "#555");
        }
        for (n, thr) in &thresholds {
            if (*thr as f64) < hi * 1.5 {
                p.hline_at(
                    *thr as f64,
                    &format!("anomaly {n}:{}", fmt_ns(*thr as f64)),
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
            "Latency of every packet against its transmit time, one panel per run on shared axes. The series is decimated to the minimum and maximum of each column (two columns per pixel, {} of transmit time each): every packet is counted and no spike can fall between pixels, and the figure has as many points for 10⁹ packets as for 10⁴ (the pass over the records grows with N: docs/benchmarks.md § Report). Red dots: the {WORST_N} packets of highest latency in the run (the worst-case scatter of the sources). Grey line: the run's p99; gold: anomaly thresholds of the spec. Drag across a panel to zoom in time, double-click to reset.{} {}",
            fmt_ns(col_ns),
            super::streamed_note(
                &streamed,
                &format!("columns are assembled from {} time slices per run, of the width given", crate::stream::TIME_SLICES),
                "so a packet's time is placed to within half a slice"
            ),
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
    // About 60 windows over the longest run, a 1-2-5 number of milliseconds.
    let win_ns = (svg::nice_step(span as f64 / 60.0 / 1e6) * 1e6).max(1e3) as u64;
    let mut series = Vec::new();
    let mut streamed = Vec::new();
    let (mut lo, mut hi) = (f64::MAX, 0f64);
    for &ri in &picks {
        let r = &e.runs[ri];
        let d = r.data.as_ref()?;
        let Some(w) = d.windows(win_ns) else { continue };
        if let Some(st) = d.streamed() {
            streamed.push(format!(
                "{} ({})",
                r.name,
                fmt_ns(st.window_slice_ns() as f64)
            ));
        }
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
        let mid = |x: &(u64, f64, f64, f64, usize)| (x.0 + win_ns / 2) as f64 / 1e9;
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
            "Tail latency over the run: for each window of {} of transmit time, the 99th percentile (solid) and the maximum (dotted) of the packets sent in it, nearest rank; one colour per run configuration (its first repetition). A flat p99 with isolated maxima means rare spikes; a p99 that moves means the whole distribution shifted. Drag to zoom, double-click to reset.{} {}",
            fmt_ns(win_ns as f64),
            super::streamed_note(
                &streamed,
                &format!(
                    "windows are unions of time slices of the width given (a divisor of the window), each with an HDR histogram of {} significant digits",
                    crate::stream::WINDOW_DIGITS
                ),
                "so p50 and p99 are at most 1 % above the exact values (packet counts and maximum are exact)"
            ),
            ctx.method
        ),
        svg: p.finish(),
        data: t,
        notes: Vec::new(),
    })
}
