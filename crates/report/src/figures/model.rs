//! Model predictions laid over measurements.
//!
//! An experiment whose spec has a `[model]` section gets its predictions
//! written by the lab as `model.json` at the top of the artifact tree (or
//! `runs/NNN/model.json` per run). This figure reads either, in a loose form
//! so it keeps working while the model grows:
//!
//! ```json
//! {"predictions": [{"run": "003", "p50_ns": 3500, "p99_ns": 150000,
//!                   "rx_pps": 10000, "loss_ratio": 0.0}]}
//! ```
//!
//! and draws, per run configuration, the measured value (points) next to the
//! predicted one (open diamonds) for every latency metric both have. The sweep
//! figure also draws the predicted p50 and p99 over the measured ones.

use serde_json::Value;

use super::{Ctx, Figure, Table};
use crate::svg::{self, num, Axis, Fmt, Plot, Style};

const METRICS: [(&str, &str); 4] = [
    ("p50_ns", "/latency_ns/p50"),
    ("p99_ns", "/latency_ns/p99"),
    ("mean_ns", "/latency_ns/mean"),
    ("max_ns", "/latency_ns/max"),
];

/// Each run's predictions (run index, its entry of `model.json`).
pub(super) fn predictions(ctx: &Ctx) -> Vec<(usize, Value)> {
    let e = ctx.e;
    let mut out = Vec::new();
    let top: Option<Value> = std::fs::read_to_string(e.dir.join("model.json"))
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok());
    for (ri, r) in e.runs.iter().enumerate() {
        let per_run: Option<Value> =
            std::fs::read_to_string(e.dir.join("runs").join(&r.name).join("model.json"))
                .ok()
                .and_then(|s| serde_json::from_str(&s).ok());
        if let Some(v) = per_run {
            out.push((ri, v));
            continue;
        }
        if let Some(p) = top
            .as_ref()
            .and_then(|t| t.get("predictions"))
            .and_then(Value::as_array)
            .and_then(|a| {
                a.iter()
                    .find(|p| p.get("run").and_then(Value::as_str) == Some(&r.name))
            })
        {
            out.push((ri, p.clone()));
        }
    }
    out
}

/// Measured against predicted latency per run.
pub fn overlay(ctx: &Ctx) -> Option<Figure> {
    let e = ctx.e;
    let preds = predictions(ctx);
    if preds.is_empty() {
        return None;
    }
    let mut pts: Vec<(usize, &str, f64, f64)> = Vec::new(); // (run, metric, measured, predicted)
    for (ri, p) in &preds {
        for (m, ptr) in METRICS {
            if let (Some(pv), Some(mv)) = (p.get(m).and_then(Value::as_f64), e.runs[*ri].num(ptr)) {
                pts.push((*ri, m, mv, pv));
            }
        }
    }
    if pts.is_empty() {
        return None;
    }
    let lo = pts
        .iter()
        .map(|p| p.2.min(p.3))
        .fold(f64::MAX, f64::min)
        .max(1.0);
    let hi = pts.iter().map(|p| p.2.max(p.3)).fold(1.0, f64::max);
    let mut p = Plot::new(
        860.0,
        380.0,
        Axis::log_decades("predicted by the model (log)", lo, hi, Fmt::Ns),
        Axis::log_decades("measured (log)", lo, hi, Fmt::Ns),
    );
    let d = (p.x.min, p.x.max);
    p.line(
        99,
        "measured = predicted",
        &[(d.0, d.0), (d.1, d.1)],
        Style {
            color: "#aaa",
            width: 1.0,
            dash: "4 3",
        },
        false,
    );
    p.legend(
        99,
        "measured = predicted",
        Style {
            color: "#aaa",
            width: 1.0,
            dash: "4 3",
        },
    );
    let mut t = Table::new(&["run", "config", "metric", "measured_ns", "predicted_ns"]);
    for (mi, (m, _)) in METRICS.iter().enumerate() {
        let v: Vec<(f64, f64)> = pts
            .iter()
            .filter(|q| q.1 == *m)
            .map(|q| (q.3, q.2))
            .collect();
        if v.is_empty() {
            continue;
        }
        p.dots(mi, m, &v, svg::color(mi), 3.5);
        p.legend_dot(mi, m, Style::solid(mi));
    }
    for q in &pts {
        let r = &e.runs[q.0];
        t.push(vec![
            r.name.clone(),
            e.configs[r.config].label.clone(),
            q.1.into(),
            num(q.2),
            num(q.3),
        ]);
    }
    Some(Figure {
        id: "model".into(),
        title: "Model against measurement".into(),
        caption: format!(
            "Each point is one run and one latency statistic: the model's prediction (model.json) on the x axis, the measurement (summary.json) on the y axis; on the grey diagonal the model is exact, above it the model is optimistic. {}",
            ctx.method
        ),
        svg: p.finish(),
        data: t,
        notes: Vec::new(),
    })
}
