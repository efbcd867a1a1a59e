//! The NCSbench part of the report (experiments with `[app] kind =
//! "ncsbench"`): seed 000's Tables 6.3 and 6.4 per run, the summary across
//! runs (`ncs-challenge.json`: runs that stayed up with their interval, the
//! failure bracket of a sweep), the scenario description, and the figures
//! of Figs. 6.7–6.9 — each delay over time and its histogram, pitch, wheel
//! angle and voltage over time.
//!
//! Every number is read from the run's artifacts: the statistics from
//! `ncs.json` and `ncs-challenge.json` (both written with `nflab-analyze`),
//! the per-period values from `ncs-periods.csv`; the histograms' bins are
//! counted by `nflab_analyze::curves`. This module computes no statistic.

use std::fmt::Write as _;
use std::path::Path;

use nflab_analyze::{curves, Distribution};
use serde_json::Value;

use crate::figures::{stack, Figure, Table};
use crate::load::{f, Experiment};
use crate::svg::{esc, num, Axis, Fmt, Plot, Style};

/// The delays in Table 6.3's column order: `ncs.json` key, heading.
const DELAYS: [(&str, &str); 5] = [
    ("d_PC", "d_P,C"),
    ("d_PS", "d_P,S"),
    ("d_N", "d_N"),
    ("d_PA", "d_P,A"),
    ("period", "Δ̂_T"),
];

/// At most this many runs are drawn in the figures (the first repetition of
/// each configuration first); the CSVs of the others are in their run directories.
const MAX_DRAWN: usize = 8;

const W: f64 = 860.0;
const PANEL_H: f64 = 190.0;

/// One run's NCSbench artifacts.
struct NcsRun {
    name: String,
    config: usize,
    label: String,
    ncs: Option<Value>,
    periods: Option<Periods>,
}

/// `ncs-periods.csv`, the columns the report draws.
#[derive(Default)]
struct Periods {
    t_read_ns: Vec<u64>,
    pitch_rad: Vec<f64>,
    wheel_rad: Vec<f64>,
    voltage_v: Vec<f64>,
    /// Per delay of [`DELAYS`], per period: ns (`None`: no value that period).
    delays_ns: Vec<Vec<Option<i64>>>,
    /// The file predates the delay columns.
    no_delay_columns: bool,
}

fn parse_periods(text: &str) -> Option<Periods> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next()?.split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let (t, pitch, wheel, volt) = (
        col("t_read_ns")?,
        col("pitch_rad")?,
        col("wheel_rad")?,
        col("voltage_v")?,
    );
    let delay_cols: Vec<Option<usize>> = DELAYS
        .iter()
        .map(|(k, _)| col(&format!("{k}_ns")))
        .collect();
    let mut p = Periods {
        delays_ns: vec![Vec::new(); DELAYS.len()],
        no_delay_columns: delay_cols.iter().any(Option::is_none),
        ..Periods::default()
    };
    for line in lines.filter(|l| !l.is_empty()) {
        let c: Vec<&str> = line.split(',').collect();
        let get = |i: usize| c.get(i).copied().unwrap_or("");
        p.t_read_ns.push(get(t).parse().ok()?);
        p.pitch_rad.push(get(pitch).parse().ok()?);
        p.wheel_rad.push(get(wheel).parse().ok()?);
        p.voltage_v.push(get(volt).parse().ok()?);
        for (j, dc) in delay_cols.iter().enumerate() {
            p.delays_ns[j].push(dc.and_then(|i| get(i).parse().ok()));
        }
    }
    Some(p)
}

fn read_json(p: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
}

/// Whether the experiment runs NCSbench.
pub fn applies(e: &Experiment) -> bool {
    e.spec
        .as_ref()
        .and_then(|s| s.get("app")?.get("kind")?.as_str().map(|k| k == "ncsbench"))
        .unwrap_or(false)
}

fn load(e: &Experiment) -> Vec<NcsRun> {
    e.runs
        .iter()
        .map(|r| {
            let dir = e.dir.join("runs").join(&r.name);
            NcsRun {
                name: r.name.clone(),
                config: r.config,
                label: e.configs[r.config].label.clone(),
                ncs: read_json(&dir.join("ncs.json")),
                periods: std::fs::read_to_string(dir.join("ncs-periods.csv"))
                    .ok()
                    .and_then(|t| parse_periods(&t)),
            }
        })
        .collect()
}

/// What is missing of the NCSbench artifacts, for the report's list.
pub fn problems(e: &Experiment) -> Vec<String> {
    if !applies(e) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for r in load(e) {
        if r.ncs.is_none() {
            out.push(format!(
                "run {}: no readable ncs.json (the benchmark did not finish): not in the NCSbench tables",
                r.name
            ));
        }
        match &r.periods {
            None => out.push(format!(
                "run {}: no readable ncs-periods.csv: not in the NCSbench figures",
                r.name
            )),
            Some(p) if p.no_delay_columns => out.push(format!(
                "run {}: ncs-periods.csv has no delay columns (written by an older nflab): its delays are not drawn",
                r.name
            )),
            _ => {}
        }
    }
    if !e.dir.join("ncs-challenge.json").is_file() {
        out.push("no ncs-challenge.json: the summary across runs is missing (nflab report DIR writes it from the runs)".into());
    }
    out
}

/// The runs drawn: the first repetition of each configuration, then the
/// others, up to [`MAX_DRAWN`]; and a note on the rest.
fn drawn(runs: &[NcsRun]) -> (Vec<&NcsRun>, Option<String>) {
    let with: Vec<&NcsRun> = runs.iter().filter(|r| r.periods.is_some()).collect();
    let mut order: Vec<&NcsRun> = Vec::new();
    for r in &with {
        if !order.iter().any(|o| o.config == r.config) {
            order.push(r);
        }
    }
    for r in &with {
        if !order.iter().any(|o| o.name == r.name) {
            order.push(r);
        }
    }
    let rest = order.len().saturating_sub(MAX_DRAWN);
    order.truncate(MAX_DRAWN);
    let note = (rest > 0).then(|| {
        format!("{rest} more run(s) with periods are not drawn (at most {MAX_DRAWN}, the first repetition of each configuration first): their values are in runs/NNN/ncs-periods.csv.")
    });
    (order, note)
}

fn run_label(r: &NcsRun) -> String {
    format!("run {} · {}", r.name, r.label)
}

fn t_s(p: &Periods, i: usize) -> f64 {
    (p.t_read_ns[i] - p.t_read_ns[0]) as f64 / 1e9
}

fn time_scale_note(e: &Experiment) -> String {
    let s = e
        .spec
        .as_ref()
        .and_then(|s| {
            s.get("app")?.get("time_scale")?.as_float().or_else(|| {
                s.get("app")?
                    .get("time_scale")?
                    .as_integer()
                    .map(|i| i as f64)
            })
        })
        .unwrap_or(1.0);
    if s == 1.0 {
        "in real time (app.time_scale = 1)".into()
    } else {
        format!("{s}× faster than real time (app.time_scale = {s}): every period and delay is shortened by that factor, wall clock")
    }
}

/// The NCSbench figures: delays over time, delay histograms, the plant's traces,
/// and survival along a one-parameter sweep.
pub fn figures(e: &Experiment) -> Vec<Figure> {
    if !applies(e) {
        return Vec::new();
    }
    let runs = load(e);
    let (drawn, note) = drawn(&runs);
    let mut out = Vec::new();
    if !drawn.is_empty() {
        out.extend(delays_over_time(e, &drawn, note.clone()));
        out.extend(delay_histograms(e, &drawn, note.clone()));
        out.push(plant_traces(e, &drawn, note));
    }
    out.extend(survival(e));
    out
}

fn delays_over_time(e: &Experiment, drawn: &[&NcsRun], note: Option<String>) -> Option<Figure> {
    let mut t = Table::new(&["run", "config", "delay", "period", "t_s", "delay_ns"]);
    let mut panels = Vec::new();
    let t_max = drawn
        .iter()
        .filter_map(|r| r.periods.as_ref())
        .filter(|p| !p.t_read_ns.is_empty())
        .map(|p| t_s(p, p.t_read_ns.len() - 1))
        .fold(0.0, f64::max);
    for (j, (key, head)) in DELAYS.iter().enumerate() {
        let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for r in drawn {
            let Some(p) = &r.periods else { continue };
            let pts: Vec<(f64, f64)> = p.delays_ns[j]
                .iter()
                .enumerate()
                .filter_map(|(i, d)| Some((t_s(p, i), (*d)? as f64)))
                .collect();
            for (i, d) in p.delays_ns[j].iter().enumerate() {
                if let Some(d) = d {
                    t.push(vec![
                        r.name.clone(),
                        r.label.clone(),
                        key.to_string(),
                        i.to_string(),
                        num(t_s(p, i)),
                        d.to_string(),
                    ]);
                }
            }
            series.push((run_label(r), pts));
        }
        let lo = series
            .iter()
            .flat_map(|s| s.1.iter().map(|p| p.1))
            .fold(f64::MAX, f64::min);
        let hi = series
            .iter()
            .flat_map(|s| s.1.iter().map(|p| p.1))
            .fold(f64::MIN, f64::max);
        if lo > hi {
            continue;
        }
        let x = Axis::lin_nice(
            "time since the first period (wall clock)",
            0.0,
            t_max,
            Fmt::Secs,
            true,
        );
        let y = Axis::lin_nice(head, lo, hi, Fmt::Ns, false);
        let mut pl = Plot::new(W, PANEL_H, x, y);
        pl.title(&format!("{head} ({key})"));
        pl.zoomable();
        for (k, (label, pts)) in series.iter().enumerate() {
            pl.dots(k, label, pts, Style::solid(k).color, 1.3);
            pl.legend_dot(k, label, Style::solid(k));
        }
        panels.push((pl.finish(), PANEL_H));
    }
    if panels.is_empty() {
        return None;
    }
    Some(Figure {
        id: "ncs-delays".into(),
        title: "NCSbench delays over time".into(),
        caption: format!(
            "Each delay of seed 000's Table 6.3, one dot per period (Fig. 6.7/6.8): d_P,C the controller's processing (actuation sent − sensor message received), d_P,S the plant's sending (sensor message sent − sensors read), d_N half the plant's round trip (Eq. 6.1: actuation received − sensor message sent, halved), d_P,A the wait for the deadline (motors written − actuation received), Δ̂_T the measured period. d_P,C, d_N and d_P,A exist only for periods whose actuation came before the deadline. Values from each run's ncs-periods.csv, CLOCK_MONOTONIC of one host; the run went {}.",
            time_scale_note(e)
        ),
        svg: stack(&panels, W),
        data: t,
        notes: note.into_iter().collect(),
    })
}

fn delay_histograms(e: &Experiment, drawn: &[&NcsRun], note: Option<String>) -> Option<Figure> {
    const BINS: usize = 40;
    let mut t = Table::new(&[
        "run",
        "config",
        "delay",
        "bin_lo_ns",
        "bin_hi_ns",
        "count",
        "fraction",
    ]);
    let mut panels = Vec::new();
    for (j, (key, head)) in DELAYS.iter().enumerate() {
        let mut dists: Vec<(&NcsRun, Distribution)> = Vec::new();
        for r in drawn {
            let Some(p) = &r.periods else { continue };
            let mut d = Distribution::new(u64::MAX, 3);
            p.delays_ns[j].iter().flatten().for_each(|&v| d.record(v));
            if d.count() > 0 {
                dists.push((r, d));
            }
        }
        let lo = dists.iter().filter_map(|d| d.1.min()).min();
        let hi = dists.iter().filter_map(|d| d.1.max()).max();
        let (Some(lo), Some(hi)) = (lo, hi) else {
            continue;
        };
        let edges = curves::linear_edges(lo as f64, hi as f64, BINS);
        let mut lines = Vec::new();
        let mut top: f64 = 0.0;
        for (r, d) in &mut dists {
            let n = d.count() as f64;
            let counts = curves::bin_counts(d, &edges);
            let mut pts = Vec::new();
            for (b, &k) in counts.iter().enumerate() {
                let fr = k as f64 / n;
                top = top.max(fr);
                pts.push((edges[b], fr));
                pts.push((edges[b + 1], fr));
                t.push(vec![
                    r.name.clone(),
                    r.label.clone(),
                    key.to_string(),
                    num(edges[b]),
                    num(edges[b + 1]),
                    k.to_string(),
                    num(fr),
                ]);
            }
            lines.push((run_label(r), pts));
        }
        let x = Axis::new(
            head,
            crate::svg::Scale::Lin,
            edges[0],
            *edges.last().unwrap_or(&edges[0]),
            Fmt::Ns,
        );
        let y = Axis::lin_nice("fraction of periods per bin", 0.0, top, Fmt::Prob, true);
        let mut pl = Plot::new(W, PANEL_H, x, y);
        pl.title(&format!("{head} ({key}), {BINS} equal bins"));
        for (k, (label, pts)) in lines.iter().enumerate() {
            pl.line(k, label, pts, Style::solid(k), false);
            pl.legend(k, label, Style::solid(k));
        }
        panels.push((pl.finish(), PANEL_H));
    }
    if panels.is_empty() {
        return None;
    }
    Some(Figure {
        id: "ncs-delay-histograms".into(),
        title: "NCSbench delay histograms".into(),
        caption: format!(
            "The distribution of each delay of Table 6.3 (the side histograms of seed 000's Figs. 6.7/6.8): the fraction of a run's periods in each of {BINS} equal bins between the smallest and the largest value drawn, bins counted by nflab-analyze (curves::bin_counts); one line per run. Medians, quartiles and p99.9 of the same values are in the NCSbench table. The run went {}.",
            time_scale_note(e)
        ),
        svg: stack(&panels, W),
        data: t,
        notes: note.into_iter().collect(),
    })
}

fn plant_traces(e: &Experiment, drawn: &[&NcsRun], note: Option<String>) -> Figure {
    let mut t = Table::new(&[
        "run",
        "config",
        "period",
        "t_s",
        "pitch_deg",
        "wheel_deg",
        "voltage_v",
    ]);
    for r in drawn {
        let Some(p) = &r.periods else { continue };
        for i in 0..p.t_read_ns.len() {
            t.push(vec![
                r.name.clone(),
                r.label.clone(),
                i.to_string(),
                num(t_s(p, i)),
                num(p.pitch_rad[i].to_degrees()),
                num(p.wheel_rad[i].to_degrees()),
                num(p.voltage_v[i]),
            ]);
        }
    }
    let t_max = drawn
        .iter()
        .filter_map(|r| r.periods.as_ref())
        .filter(|p| !p.t_read_ns.is_empty())
        .map(|p| t_s(p, p.t_read_ns.len() - 1))
        .fold(0.0, f64::max);
    type Get = fn(&Periods, usize) -> f64;
    let quantities: [(&str, Get); 3] = [
        ("pitch Θ (°)", |p, i| p.pitch_rad[i].to_degrees()),
        ("wheel angle Φ, the position (°)", |p, i| {
            p.wheel_rad[i].to_degrees()
        }),
        ("motor voltage ν (V)", |p, i| p.voltage_v[i]),
    ];
    let mut panels = Vec::new();
    for (title, get) in quantities {
        let series: Vec<(String, Vec<(f64, f64)>)> = drawn
            .iter()
            .filter_map(|r| {
                let p = r.periods.as_ref()?;
                Some((
                    run_label(r),
                    (0..p.t_read_ns.len())
                        .map(|i| (t_s(p, i), get(p, i)))
                        .collect(),
                ))
            })
            .collect();
        let lo = series
            .iter()
            .flat_map(|s| s.1.iter().map(|p| p.1))
            .fold(0.0, f64::min);
        let hi = series
            .iter()
            .flat_map(|s| s.1.iter().map(|p| p.1))
            .fold(0.0, f64::max);
        let x = Axis::lin_nice(
            "time since the first period (wall clock)",
            0.0,
            t_max,
            Fmt::Secs,
            true,
        );
        let y = Axis::lin_nice(title, lo, hi, Fmt::Num, true);
        let mut pl = Plot::new(W, PANEL_H, x, y);
        pl.title(title);
        pl.zoomable();
        for (k, (label, pts)) in series.iter().enumerate() {
            pl.line(k, label, pts, Style::solid(k), false);
            pl.legend(k, label, Style::solid(k));
        }
        panels.push((pl.finish(), PANEL_H));
    }
    Figure {
        id: "ncs-plant".into(),
        title: "NCSbench plant: pitch, position and voltage".into(),
        caption: format!(
            "The simulated robot at each sampling instant (seed 000's Fig. 6.9): pitch Θ (0 is upright; beyond 45° it has fallen and the run ends), mean wheel angle Φ (its position: distance = Φ × wheel radius) and the motor voltage ν applied at the deadline (±8 V at most; a backup or 0 V in periods whose actuation was late). The IAEs Σ_Θ, Σ_Φ, Σ_ν of Table 6.4 sum the absolute values drawn here. Values from each run's ncs-periods.csv; the run went {}.",
            time_scale_note(e)
        ),
        svg: stack(&panels, W),
        data: t,
        notes: note.into_iter().collect(),
    }
}

/// Fraction of runs that stayed up along the one swept parameter, with the
/// Clopper–Pearson intervals of `ncs-challenge.json`.
fn survival(e: &Experiment) -> Option<Figure> {
    let ch = read_json(&e.dir.join("ncs-challenge.json"))?;
    let key = ch.pointer("/bracket/key")?.as_str()?.to_string();
    let mut pts = Vec::new();
    let mut t = Table::new(&[&key, "runs", "stayed_up", "fraction", "ci95_lo", "ci95_hi"]);
    for c in ch.get("configurations")?.as_array()? {
        let x = c.get("sweep")?.get(&key)?.as_f64()?;
        let (fr, lo, hi) = (
            f(c, "/stayed_up/fraction")?,
            f(c, "/stayed_up/lo")?,
            f(c, "/stayed_up/hi")?,
        );
        t.push(vec![
            num(x),
            num(f(c, "/stayed_up/n")?),
            num(f(c, "/stayed_up/successes")?),
            num(fr),
            num(lo),
            num(hi),
        ]);
        pts.push((x, fr, lo, hi));
    }
    if pts.is_empty() {
        return None;
    }
    let (xlo, xhi) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |a, p| (a.0.min(p.0), a.1.max(p.0)));
    // Room right of the last value for the bracket lines' labels.
    let pad = ((xhi - xlo) * 0.12).max(1.0);
    let x = Axis::new(&key, crate::svg::Scale::Lin, xlo - pad, xhi + pad, Fmt::Num);
    let y = Axis::new(
        "runs up for all periods",
        crate::svg::Scale::Lin,
        0.0,
        1.0,
        Fmt::Prob,
    );
    let mut pl = Plot::new(W, 320.0, x, y);
    pl.errorbars(0, "fraction of runs up", &pts, Style::solid(0));
    pl.legend_dot(
        0,
        "fraction up, 95 % Clopper–Pearson interval",
        Style::solid(0),
    );
    if let Some(v) = f(&ch, "/bracket/largest_all_up") {
        pl.vline_at(v, "all up", "#1b7f3b", 0);
    }
    if let Some(v) = f(&ch, "/bracket/smallest_any_down") {
        pl.vline_at(v, "one down", "#a8321e", 1);
    }
    Some(Figure {
        id: "ncs-survival".into(),
        title: format!("NCSbench: runs that stayed up against {key}"),
        caption: format!(
            "The challenge search: per value of {key}, the fraction of its runs whose plant stayed up for all periods (no fall), with the exact 95 % Clopper–Pearson interval of that fraction (nflab-analyze, from ncs-challenge.json). The dotted lines bracket the failure point: “all up” at the largest value below the first failure at which every run stayed up, “one down” at the smallest at which one did not. The runs went {}.",
            time_scale_note(e)
        ),
        svg: pl.finish(),
        data: t,
        notes: Vec::new(),
    })
}

fn fmt_delay(d: &Value) -> Option<String> {
    Some(format!(
        "{:.2}±{:.3}; {:.2}; {:.2}; {:.2}",
        d.get("median")?.as_f64()?,
        d.get("ci95")?.as_f64()?,
        d.get("q1")?.as_f64()?,
        d.get("q3")?.as_f64()?,
        d.get("p99_9")?.as_f64()?
    ))
}

fn fmt_mean(m: &Value, digits: usize) -> String {
    let Some(mean) = m.get("mean").and_then(Value::as_f64) else {
        return "—".into();
    };
    match m.get("ci95").and_then(Value::as_array) {
        Some(ci) if ci.len() == 2 => format!(
            "{mean:.digits$} <span class=\"ci\">[{:.digits$}, {:.digits$}]</span>",
            ci[0].as_f64().unwrap_or(f64::NAN),
            ci[1].as_f64().unwrap_or(f64::NAN)
        ),
        _ => format!("{mean:.digits$}"),
    }
}

/// The NCSbench section of report.html: the summary across runs, the
/// scenario, and Tables 6.3 and 6.4 with one row per run.
pub fn section(h: &mut String, e: &Experiment) {
    if !applies(e) {
        return;
    }
    let runs = load(e);
    h.push_str("<h2 id=\"ncs\">NCSbench (seed 000, ch. 6)</h2>");
    let _ = write!(
        h,
        "<p>A simulated two-wheeled inverted pendulum (plant) and its controller exchange a sensor and an actuation message every period across the DuT; an actuation later than the deadline counts as lost and the plant uses a predicted backup voltage. The runs went {}. Every number here is from the runs' <code>ncs.json</code> and the experiment's <code>ncs-challenge.json</code>, computed by nflab-analyze.</p>",
        esc(&time_scale_note(e))
    );
    challenge_table(h, e);
    scenario(h, e);
    h.push_str("<h3 id=\"ncs-table-6-3\">Delays (Table 6.3)</h3><p>Each delay in ms as <i>median±ci95; q1; q3; p99.9</i>, the seed's format: ci95 is half the width of the distribution-free 95 % interval of the median.</p><div class=\"scroll\"><table class=\"ncs\" id=\"ncs-delays-table\"><tr><th>scenario</th>");
    for (_, head) in DELAYS {
        let _ = write!(h, "<th>{}</th>", esc(head));
    }
    h.push_str("</tr>");
    for r in &runs {
        let Some(ncs) = &r.ncs else { continue };
        let _ = write!(h, "<tr><td>{}</td>", esc(&run_label(r)));
        for (key, _) in DELAYS {
            let cell = ncs
                .get("delays_ms")
                .and_then(|d| d.get(key))
                .and_then(fmt_delay)
                .unwrap_or_else(|| "–".into());
            let _ = write!(h, "<td data-key=\"{key}\">{}</td>", esc(&cell));
        }
        h.push_str("</tr>");
    }
    h.push_str("</table></div>");
    h.push_str("<h3 id=\"ncs-table-6-4\">Quality of control (Table 6.4)</h3><p>Integrated absolute errors over the periods run (Eqs. 6.2–6.4): Σ_Θ of the pitch and Σ_Φ of the wheel angle in degrees, Σ_ν of the voltage in volts; l the actuations lost or late.</p><div class=\"scroll\"><table class=\"ncs\" id=\"ncs-control-table\"><tr><th>scenario</th><th>Σ_Θ</th><th>Σ_Φ</th><th>Σ_ν</th><th>l</th><th>fell</th><th>periods</th></tr>");
    for r in &runs {
        let Some(ncs) = &r.ncs else { continue };
        let g = |p: &str| f(ncs, p);
        let fell = ncs.get("fell").and_then(Value::as_bool);
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td{}>{}</td><td>{} of {}</td></tr>",
            esc(&run_label(r)),
            g("/iae/theta").map_or("—".into(), |v| format!("{v:.2}")),
            g("/iae/phi").map_or("—".into(), |v| format!("{v:.0}")),
            g("/iae/nu").map_or("—".into(), |v| format!("{v:.1}")),
            g("/losses").map_or("—".into(), |v| format!("{v:.0}")),
            if fell == Some(true) { " class=\"warn\"" } else { "" },
            fell.map_or("—", |b| if b { "fell" } else { "no" }),
            g("/periods_completed").map_or("—".into(), |v| format!("{v:.0}")),
            g("/periods").map_or("—".into(), |v| format!("{v:.0}")),
        );
    }
    h.push_str("</table></div>");
}

fn challenge_table(h: &mut String, e: &Experiment) {
    let Some(ch) = read_json(&e.dir.join("ncs-challenge.json")) else {
        return;
    };
    let g = |p: &str| f(&ch, p).map_or("?".into(), |v| format!("{v:.0}"));
    let _ = write!(
        h,
        "<h3 id=\"ncs-survival-table\">Runs that stayed up</h3><p><b>{} of {} runs</b> kept the plant up for all their periods. Per configuration, the fraction with its exact 95 % Clopper–Pearson interval, and the losses and d_N medians as means over its runs with 95 % Student-t intervals; then d_N over the periods of all its runs pooled (the tail a single run's 1,400 periods cannot pin down).</p><div class=\"scroll\"><table class=\"ncs\" id=\"ncs-challenge-table\"><tr><th>configuration</th><th>runs</th><th>stayed up</th><th>fraction up [95 % CI]</th><th>fell</th><th>losses per run</th><th>d_N median (ms)</th><th>d_N pooled: median; p99.9 (ms), periods</th></tr>",
        g("/stayed_up"),
        g("/runs"),
    );
    for c in ch
        .get("configurations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let sweep: Vec<String> = c
            .get("sweep")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| crate::load::fmt_param(k, v))
                    .collect()
            })
            .unwrap_or_default();
        let label = if sweep.is_empty() {
            "all runs".to_string()
        } else {
            sweep.join(" · ")
        };
        let n = |p: &str| f(c, p).map_or("?".into(), |v| format!("{v:.0}"));
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} <span class=\"ci\">[{}, {}]</span></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&label),
            n("/stayed_up/n"),
            n("/stayed_up/successes"),
            f(c, "/stayed_up/fraction").map_or("?".into(), |v| format!("{v:.3}")),
            f(c, "/stayed_up/lo").map_or("?".into(), |v| format!("{v:.3}")),
            f(c, "/stayed_up/hi").map_or("?".into(), |v| format!("{v:.3}")),
            n("/fell"),
            c.get("losses").map_or("—".into(), |m| fmt_mean(m, 1)),
            c.get("d_n_median_ms").map_or("—".into(), |m| fmt_mean(m, 3)),
            match (f(c, "/d_n_pooled_ms/median"), f(c, "/d_n_pooled_ms/p99_9")) {
                (Some(m), Some(p)) => format!("{m:.3}; {p:.3}, {}", n("/d_n_pooled_periods")),
                _ => "—".into(),
            },
        );
    }
    h.push_str("</table></div>");
    if let Some(b) = ch.get("bracket").filter(|b| !b.is_null()) {
        let key = b.get("key").and_then(Value::as_str).unwrap_or("?");
        let v = |p: &str| f(b, p);
        let text = match (v("/largest_all_up"), v("/smallest_any_down")) {
            (Some(up), Some(down)) => format!(
                "Failure point: every run stayed up at {key} = {} and a run did not at {} — the point lies in between (a bracket of {}).",
                num(up),
                num(down),
                num(down - up)
            ),
            (Some(up), None) => format!(
                "Every run stayed up up to the largest value swept, {key} = {}: the failure point lies beyond the sweep.",
                num(up)
            ),
            (None, Some(down)) => format!(
                "A run did not stay up already at the smallest value swept, {key} = {}: the failure point lies below the sweep.",
                num(down)
            ),
            (None, None) => String::new(),
        };
        let _ = write!(h, "<p class=\"ncs-bracket\">{}</p>", esc(&text));
        if let Some(a) = b
            .get("up_again_above")
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty())
        {
            let vals: Vec<String> = a.iter().filter_map(Value::as_f64).map(num).collect();
            let _ = write!(
                h,
                "<p class=\"warn\">Above the first failure every run stayed up again at {key} = {}: the failure point is not sharp at these repetitions.</p>",
                esc(&vals.join(", "))
            );
        }
    }
    for n in ch
        .get("notes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(s) = n.as_str() {
            let _ = write!(h, "<p class=\"hint\">{}</p>", esc(s));
        }
    }
}

fn scenario(h: &mut String, e: &Experiment) {
    let Some(s) = e
        .runs
        .iter()
        .find_map(|r| read_json(&e.dir.join("runs").join(&r.name).join("ncs-scenario.json")))
    else {
        return;
    };
    h.push_str("<h3 id=\"ncs-scenario\">Scenario (seed 000, Sec. 6.1.5)</h3><p>As recorded in the first run's <code>ncs-scenario.json</code>; each run has its own.</p><table class=\"small ncs-scenario\">");
    for item in [
        "application",
        "stack",
        "topology",
        "environment",
        "interference",
        "hardware",
    ] {
        let text = match s.get(item) {
            Some(Value::String(t)) => t.clone(),
            Some(v) => v.to_string(),
            None => "(not recorded)".into(),
        };
        let _ = write!(
            h,
            "<tr><th>{item}</th><td class=\"notes\">{}</td></tr>",
            esc(&text)
        );
    }
    h.push_str("</table>");
}
