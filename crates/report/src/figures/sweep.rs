//! Sweep figures: a metric against a swept parameter with confidence
//! intervals over repetitions, and throughput/loss against offered load.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{stack, Ctx, Figure, Table};
use crate::load::{fmt_param, Experiment};
use crate::svg::{num, Axis, Fmt, Plot, Style};

const W: f64 = 860.0;

/// (group, series name, dash, [(x, mean, ci lo, ci hi, repetitions)]).
/// A model line of the sweep figure: group, metric, name, (x, predicted ns).
type ModelLine = (usize, &'static str, String, Vec<(f64, f64)>);
type SweepLine<'a> = (usize, String, &'a str, Vec<(f64, f64, f64, f64, usize)>);
/// (offered, (rx mean, rx ci), (loss mean, loss ci), repetitions).
type LoadPoint = (f64, (f64, f64), (f64, f64), usize);

/// The numeric sweep key to put on the x axis: `traffic.rate_pps` if it is
/// swept, else the first swept key with at least two numeric values.
pub fn x_key(e: &Experiment) -> Option<String> {
    let keys = e.sweep_keys();
    let numeric = |k: &String| {
        let mut vals: Vec<f64> = e
            .configs
            .iter()
            .filter_map(|c| c.sweep.get(k)?.as_f64())
            .collect();
        vals.sort_by(f64::total_cmp);
        vals.dedup();
        vals.len() >= 2
    };
    if keys.iter().any(|k| k == "traffic.rate_pps") && numeric(&"traffic.rate_pps".to_string()) {
        return Some("traffic.rate_pps".into());
    }
    keys.into_iter().find(|k| numeric(k))
}

/// Configurations grouped by every sweep value except `x`: (group label, [(x, config index)]).
fn groups(e: &Experiment, x: &str) -> Vec<(String, Vec<(f64, usize)>)> {
    let keys = e.sweep_keys();
    let mut out: Vec<(String, Vec<(f64, usize)>)> = Vec::new();
    for (ci, c) in e.configs.iter().enumerate() {
        let Some(xv) = c.sweep.get(x).and_then(Value::as_f64) else {
            continue;
        };
        let label: Vec<String> = keys
            .iter()
            .filter(|k| k.as_str() != x)
            .filter_map(|k| c.sweep.get(k).map(|v| fmt_param(k, v)))
            .collect();
        let label = if label.is_empty() {
            "all".to_string()
        } else {
            label.join(" · ")
        };
        match out.iter_mut().find(|g| g.0 == label) {
            Some(g) => g.1.push((xv, ci)),
            None => out.push((label, vec![(xv, ci)])),
        }
    }
    for g in &mut out {
        g.1.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

fn axis_for(key: &str, lo: f64, hi: f64) -> Axis {
    let label = key.to_string();
    let fmt = if key.ends_with("_pps") {
        Fmt::Pps
    } else {
        Fmt::Num
    };
    if lo > 0.0 && hi / lo >= 20.0 {
        Axis::log_decades(&format!("{label} (log)"), lo, hi, fmt)
    } else {
        // A little room so the last point is not on the frame.
        Axis::lin_nice(&label, lo, hi * 1.04, fmt, true)
    }
}

/// Per-run values of a metric for one configuration.
fn per_run(
    e: &Experiment,
    ci: usize,
    metric: &dyn Fn(&crate::load::Run) -> Option<f64>,
) -> Vec<f64> {
    e.configs[ci]
        .runs
        .iter()
        .filter_map(|&r| metric(&e.runs[r]))
        .collect()
}

/// p50 and p99 against the swept parameter, mean ± 95 % CI over repetitions.
pub fn sweep(ctx: &Ctx) -> Option<Figure> {
    let e = ctx.e;
    let xk = x_key(e)?;
    let gs = groups(e, &xk);
    let metrics: [(&str, &str); 2] = [("p99", ""), ("p50", "5 3")];
    let mut pts: Vec<SweepLine> = Vec::new();
    let (mut lo, mut hi) = (f64::MAX, 0f64);
    for (gi, (gl, cfgs)) in gs.iter().enumerate() {
        for (mname, dash) in metrics {
            let mut v = Vec::new();
            for (x, ci) in cfgs {
                let ptr = format!("/latency_ns/{mname}");
                let vals = per_run(e, *ci, &|r| r.num(&ptr));
                if let Some((m, h)) = crate::figures::mean_ci(&vals) {
                    let h = h.unwrap_or(0.0);
                    lo = lo.min(m - h).min(m);
                    hi = hi.max(m + h);
                    v.push((*x, m, m - h, m + h, vals.len()));
                }
            }
            if !v.is_empty() {
                pts.push((gi, format!("{gl} {mname}"), dash, v));
            }
        }
    }
    if pts.is_empty() {
        return None;
    }
    // The model's prediction of the same percentile (model.json), mean over the runs of
    // each configuration, as a dotted line in the group's colour.
    let predicted = super::model::predictions(ctx);
    let mut model_lines: Vec<ModelLine> = Vec::new();
    for (gi, (gl, cfgs)) in gs.iter().enumerate() {
        for (mname, _) in metrics {
            let key = format!("{mname}_ns");
            let mut v = Vec::new();
            for (x, ci) in cfgs {
                let vals: Vec<f64> = predicted
                    .iter()
                    .filter(|(ri, _)| e.runs[*ri].config == *ci)
                    .filter_map(|(_, pr)| pr.get(&key).and_then(serde_json::Value::as_f64))
                    .filter(|v| *v > 0.0)
                    .collect();
                if let Some(m) = nflab_analyze::crossrun::mean(&vals) {
                    lo = lo.min(m);
                    hi = hi.max(m);
                    v.push((*x, m));
                }
            }
            if !v.is_empty() {
                model_lines.push((gi, mname, format!("{gl} {mname} (model)"), v));
            }
        }
    }
    let xs: Vec<f64> = gs.iter().flat_map(|g| g.1.iter().map(|p| p.0)).collect();
    let x = axis_for(
        &xk,
        xs.iter().copied().fold(f64::MAX, f64::min),
        xs.iter().copied().fold(0.0, f64::max),
    );
    let y = Axis::log_decades("latency (log)", lo.max(1.0), hi, Fmt::Ns);
    let mut p = Plot::new(W, 360.0, x, y);
    let mut t = Table::new(&[
        "group",
        "metric",
        &xk,
        "mean_ns",
        "ci95_lo_ns",
        "ci95_hi_ns",
        "repetitions",
    ]);
    let mut reps_max = 0;
    for (gi, name, dash, v) in &pts {
        let st = Style {
            dash,
            ..Style::solid(*gi)
        };
        let line: Vec<(f64, f64)> = v.iter().map(|p| (p.0, p.1)).collect();
        p.line(*gi, name, &line, st, false);
        let bars: Vec<(f64, f64, f64, f64)> =
            v.iter().map(|p| (p.0, p.1, p.2.max(1.0), p.3)).collect();
        p.errorbars(*gi, name, &bars, st);
        p.legend(*gi, name, st);
        for q in v {
            reps_max = reps_max.max(q.4);
            let (l, h) = if q.4 > 1 {
                (num(q.2), num(q.3))
            } else {
                (String::new(), String::new())
            };
            t.push(vec![
                gs[*gi].0.clone(),
                name.rsplit(' ').next().unwrap_or("").to_string(),
                num(q.0),
                num(q.1),
                l,
                h,
                q.4.to_string(),
            ]);
        }
    }
    for (gi, mname, name, v) in &model_lines {
        let st = Style {
            dash: "1 3",
            ..Style::solid(*gi)
        };
        p.line(*gi, name, v, st, false);
        p.legend(*gi, name, st);
        for (x, m) in v {
            t.push(vec![
                gs[*gi].0.clone(),
                format!("{mname} (model)"),
                num(*x),
                num(*m),
                String::new(),
                String::new(),
                String::new(),
            ]);
        }
    }
    let model_text = if model_lines.is_empty() {
        ""
    } else {
        " Dotted: the model's prediction of the same percentile (model.json of `[model]` or `nflab model fit`)."
    };
    let ci_text = if reps_max > 1 {
        "Points are the mean over repetitions of each run's percentile; bars the 95 % confidence interval of that mean (Student t)."
    } else {
        "Each point is one run: the experiment has one repetition, so there is no confidence interval (set [experiment] repetitions ≥ 3 to get one)."
    };
    Some(Figure {
        id: "sweep".into(),
        title: format!("Latency against {xk}"),
        caption: format!(
            "Median (dashed) and 99th percentile (solid) of one-way latency against the swept parameter {xk}, one colour per value of the other swept parameters. {ci_text}{model_text} Percentiles from summary.json (nearest rank over all packets of a run). {}",
            ctx.method
        ),
        svg: p.finish(),
        data: t,
        notes: Vec::new(),
    })
}

/// Received rate and loss against offered load.
pub fn throughput(ctx: &Ctx) -> Option<Figure> {
    let e = ctx.e;
    // Group by everything swept except the rate; x is the offered rate.
    let xk = "traffic.rate_pps";
    let gs: Vec<(String, Vec<(f64, usize)>)> = if e.sweep_keys().iter().any(|k| k == xk) {
        groups(e, xk)
    } else {
        Vec::new()
    };
    let n_rates: usize = {
        let mut v: Vec<f64> = gs.iter().flat_map(|g| g.1.iter().map(|p| p.0)).collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v.len()
    };
    if n_rates < 2 {
        return None;
    }
    let mut rows: BTreeMap<usize, Vec<LoadPoint>> = BTreeMap::new();
    let (mut xhi, mut lhi) = (0f64, 0f64);
    for (gi, (_, cfgs)) in gs.iter().enumerate() {
        for (x, ci) in cfgs {
            let rx = per_run(e, *ci, &|r| {
                r.num("/rate/rx_pps").or_else(|| {
                    // A run without packets received nothing.
                    (r.received()? == 0.0).then_some(0.0)
                })
            });
            let loss = per_run(e, *ci, &|r| r.num("/loss_ratio"));
            let (Some(a), b) = (crate::figures::mean_ci(&rx), crate::figures::mean_ci(&loss))
            else {
                continue;
            };
            let b = b.unwrap_or((f64::NAN, None));
            xhi = xhi.max(*x).max(a.0 + a.1.unwrap_or(0.0));
            if b.0.is_finite() {
                lhi = lhi.max(b.0 + b.1.unwrap_or(0.0));
            }
            rows.entry(gi).or_default().push((
                *x,
                (a.0, a.1.unwrap_or(0.0)),
                (b.0, b.1.unwrap_or(0.0)),
                rx.len(),
            ));
        }
    }
    if rows.is_empty() {
        return None;
    }
    let mut top = Plot::new(
        W,
        320.0,
        Axis::lin_nice("offered load", 0.0, xhi * 1.04, Fmt::Pps, true),
        Axis::lin_nice("received rate", 0.0, xhi, Fmt::Pps, true),
    );
    top.mb = 36.0;
    top.title("throughput");
    let diag_hi = top.x.max;
    top.line(
        99,
        "offered = received",
        &[(0.0, 0.0), (diag_hi, diag_hi)],
        Style {
            color: "#aaa",
            width: 1.0,
            dash: "4 3",
        },
        false,
    );
    let lmax = if lhi > 0.0 { lhi * 1.15 } else { 0.01 };
    let mut bot = Plot::new(
        W,
        220.0,
        Axis::lin_nice("offered load", 0.0, xhi * 1.04, Fmt::Pps, true),
        Axis::lin_nice("loss", 0.0, lmax, Fmt::Percent, true),
    );
    bot.title("loss");
    let mut t = Table::new(&[
        "group",
        "offered_pps",
        "rx_pps_mean",
        "rx_pps_ci95",
        "loss_ratio_mean",
        "loss_ratio_ci95",
        "repetitions",
    ]);
    for (gi, v) in &rows {
        let label = &gs[*gi].0;
        let st = Style::solid(*gi);
        let thr: Vec<(f64, f64, f64, f64)> = v
            .iter()
            .map(|p| (p.0, p.1 .0, p.1 .0 - p.1 .1, p.1 .0 + p.1 .1))
            .collect();
        top.line(
            *gi,
            label,
            &thr.iter().map(|p| (p.0, p.1)).collect::<Vec<_>>(),
            st,
            false,
        );
        top.errorbars(*gi, label, &thr, st);
        top.legend(*gi, label, st);
        let loss: Vec<(f64, f64, f64, f64)> = v
            .iter()
            .filter(|p| p.2 .0.is_finite())
            .map(|p| (p.0, p.2 .0, (p.2 .0 - p.2 .1).max(0.0), p.2 .0 + p.2 .1))
            .collect();
        bot.line(
            *gi,
            label,
            &loss.iter().map(|p| (p.0, p.1)).collect::<Vec<_>>(),
            st,
            false,
        );
        bot.errorbars(*gi, label, &loss, st);
        bot.legend(*gi, label, st);
        for p in v {
            t.push(vec![
                label.clone(),
                num(p.0),
                num(p.1 .0),
                if p.3 > 1 { num(p.1 .1) } else { String::new() },
                num(p.2 .0),
                if p.3 > 1 { num(p.2 .1) } else { String::new() },
                p.3.to_string(),
            ]);
        }
    }
    top.legend(
        99,
        "offered = received",
        Style {
            color: "#aaa",
            width: 1.0,
            dash: "4 3",
        },
    );
    Some(Figure {
        id: "throughput".into(),
        title: "Throughput and loss against offered load".into(),
        caption: format!(
            "Top: received rate (rx_pps of summary.json: received packets over the span of their receive timestamps) against the offered rate of the spec; the grey diagonal is lossless forwarding. Bottom: loss ratio (lost / sent after warm-up). One colour per value of the other swept parameters; error bars are 95 % confidence intervals over repetitions where there are several. Rates are measured with {} (resolution {} ns).",
            e.clock().0,
            e.clock().1
        ),
        svg: stack(&[(top.finish(), 320.0), (bot.finish(), 220.0)], W),
        data: t,
        notes: Vec::new(),
    })
}
