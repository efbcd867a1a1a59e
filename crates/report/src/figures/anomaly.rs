//! Anomaly timeline: when each anomaly happened and how long it lasted.

use super::{stack, Ctx, Figure, Table};
use crate::load::{Anomaly, DumpRef, Experiment, Run};
use crate::svg::{self, fmt_ns, num, Axis, Fmt, Plot, Style};

const W: f64 = 860.0;
/// Anomalies drawn per panel at most (the CSV has all).
const MAX_MARKS: usize = 3000;

/// One panel per anomaly spec `n:t`: each anomaly is a mark at its start
/// time and its duration, coloured by run configuration.
pub fn timeline(ctx: &Ctx) -> Option<Figure> {
    let e = ctx.e;
    let specs = e.anomaly_specs();
    let with_data: Vec<usize> = (0..e.runs.len())
        .filter(|&i| e.runs[i].data.as_ref().is_some_and(|d| d.n > 0))
        .collect();
    if specs.is_empty() || with_data.is_empty() {
        return None;
    }
    let span = with_data
        .iter()
        .filter_map(|&i| Some(e.runs[i].data.as_ref()?.span_ns))
        .max()
        .unwrap_or(1)
        .max(1);
    let mut t = Table::new(&[
        "run",
        "config",
        "spec",
        "flow",
        "start_s",
        "end_s",
        "duration_ns",
        "packets",
        "max_latency_ns",
        "dump",
        "dump_packets",
    ]);
    let mut panels = Vec::new();
    let mut notes = Vec::new();
    for (k, a) in specs.iter().enumerate() {
        // A relative threshold resolves per run: the title shows the first run's.
        let thr = with_data
            .iter()
            .find_map(|&ri| Some(e.runs[ri].data.as_ref()?.anomaly_detail(k)?.t_ns))
            .unwrap_or(a.t_ns);
        let n = &a.n;
        let spec = format!("{n}:{}", fmt_ns(thr as f64));
        let mut found: Vec<(usize, Anomaly)> = Vec::new();
        for &ri in &with_data {
            let Some(d) = e.runs[ri].data.as_ref() else {
                continue;
            };
            let (v, dropped) = d.anomalies(k);
            found.extend(v.into_iter().map(|a| (ri, a)));
            if dropped > 0 {
                notes.push(format!(
                    "{spec}, run {}: {dropped} further anomalies beyond the first {} were counted but are neither drawn nor in the CSV.",
                    e.runs[ri].name,
                    crate::load::MAX_ANOMALIES
                ));
            }
        }
        let dmin = found
            .iter()
            .map(|(_, a)| (a.t1_ns - a.t0_ns).max(1) as f64)
            .fold(f64::MAX, f64::min);
        let dmax = found
            .iter()
            .map(|(_, a)| (a.t1_ns - a.t0_ns).max(1) as f64)
            .fold(1.0, f64::max);
        let last = k + 1 == specs.len();
        let h = if last { 230.0 } else { 190.0 };
        let xl = if last {
            "transmit time of the anomaly's first packet"
        } else {
            ""
        };
        let x = Axis::lin_nice(xl, 0.0, span as f64 / 1e9, Fmt::Secs, true);
        let y = if found.is_empty() {
            Axis::log_decades("duration (log)", 1e3, 1e6, Fmt::Ns)
        } else {
            Axis::log_decades("duration (log)", dmin, dmax, Fmt::Ns)
        };
        let mut p = Plot::new(W, h, x, y);
        p.mb = if last { 44.0 } else { 20.0 };
        p.title(&format!(
            "anomaly {spec}: ≥ {n} consecutive packets with latency ≥ {} — {} found",
            fmt_ns(thr as f64),
            found.len()
        ));
        p.zoomable();
        let mut per_cfg: std::collections::BTreeMap<usize, Vec<(f64, f64)>> = Default::default();
        for (i, (ri, a)) in found.iter().enumerate() {
            let r = &e.runs[*ri];
            let label = &e.configs[r.config].label;
            let dur = (a.t1_ns - a.t0_ns).max(1) as f64;
            let dump = covering_dump(r, a);
            t.push(vec![
                r.name.clone(),
                label.clone(),
                spec.clone(),
                a.flow.to_string(),
                num(a.t0_ns as f64 / 1e9),
                num(a.t1_ns as f64 / 1e9),
                num(dur),
                a.packets.to_string(),
                a.max_ns.map_or(String::new(), |v| v.to_string()),
                dump.map_or(String::new(), |d| d.file.clone()),
                dump.map_or(String::new(), |d| d.packets.to_string()),
            ]);
            if i < MAX_MARKS {
                // A bar from start to end at the height of the duration: wide
                // anomalies are visibly wide, short ones get a 4 px mark.
                let tip = format!(
                    "run {} · {label}: {} packets over {} from {:.4} s, peak latency {}{}",
                    r.name,
                    a.packets,
                    fmt_ns(dur),
                    a.t0_ns as f64 / 1e9,
                    a.max_ns.map_or("—".into(), |v| fmt_ns(v as f64)),
                    dump.map_or(String::new(), |d| format!(
                        " · packets around it: {} ({} packets)",
                        d.file, d.packets
                    ))
                );
                let y0 = dur / 1.25;
                let y1 = dur * 1.25;
                p.rects(
                    r.config,
                    &[(a.t0_ns as f64 / 1e9, a.t1_ns as f64 / 1e9, y0, y1, tip)],
                    svg::color(r.config),
                    4.0,
                );
                per_cfg
                    .entry(r.config)
                    .or_default()
                    .push((a.t0_ns as f64 / 1e9, dur));
            }
        }
        for (ci, pts) in &per_cfg {
            // Invisible hover carriers with the values.
            p.dots(*ci, &e.configs[*ci].label, pts, "transparent", 3.0);
            p.legend(*ci, &e.configs[*ci].label, Style::solid(*ci));
        }
        if found.is_empty() {
            p.text(
                span as f64 / 2e9 * 0.8,
                (p.y.min * p.y.max).sqrt(),
                "no anomaly in any run",
                "#555",
            );
        }
        if found.len() > MAX_MARKS {
            notes.push(format!(
                "{spec}: {} anomalies, the first {MAX_MARKS} are drawn; the CSV has all.",
                found.len()
            ));
        }
        panels.push((p.finish(), h));
    }
    Some(Figure {
        id: "anomalies".into(),
        title: "Anomaly timeline".into(),
        caption: format!(
            "Each mark is one anomaly — a run of at least n consecutive sequence numbers whose latency is at least t (docs/metrics.md) — placed at the transmit time of its first packet, at the height of its duration (from the send of its first packet to the send of its last, as in summary.json's anomaly events), and as wide as it lasted (at least 4 px); hover for packets and peak latency. One panel per anomaly definition of the spec, colours by run configuration, all runs on one time axis. The count alone hides whether anomalies cluster; this shows when and for how long. {}",
            ctx.method
        ),
        svg: stack(&panels, W),
        data: t,
        notes,
    })
}

/// The dump of `run`'s capture whose receive window overlaps the anomaly's
/// packets: sent from its first to its last transmit, received up to its
/// peak latency later.
pub fn covering_dump<'a>(run: &'a Run, a: &Anomaly) -> Option<&'a DumpRef> {
    let origin = run.data.as_ref()?.t0_ns;
    let first_tx = origin + a.t0_ns;
    let last_rx = origin + a.t1_ns + a.max_ns.map_or(0, |m| m.max(0) as u64);
    run.dumps
        .iter()
        .find(|d| d.from_ns <= last_rx && d.to_ns >= first_tx)
}

/// An anomaly that a capture dump covers, for the report's list of links.
pub struct DumpLink {
    pub run: String,
    pub spec: String,
    /// Transmit time of the anomaly's first packet, s after the run's first.
    pub start_s: f64,
    pub packets: u64,
    pub dump: DumpRef,
}

/// Every anomaly of every run that a dump covers, run by run.
pub fn dump_links(e: &Experiment) -> Vec<DumpLink> {
    let mut out = Vec::new();
    for (k, spec) in e.anomaly_specs().iter().enumerate() {
        for r in e.runs.iter().filter(|r| !r.dumps.is_empty()) {
            let Some(d) = r.data.as_ref() else {
                continue;
            };
            let thr = d.anomaly_detail(k).map_or(spec.t_ns, |a| a.t_ns);
            for a in d.anomalies(k).0 {
                if let Some(dump) = covering_dump(r, &a) {
                    out.push(DumpLink {
                        run: r.name.clone(),
                        spec: format!("{}:{}", spec.n, fmt_ns(thr as f64)),
                        start_s: a.t0_ns as f64 / 1e9,
                        packets: a.packets,
                        dump: dump.clone(),
                    });
                }
            }
        }
    }
    out
}
