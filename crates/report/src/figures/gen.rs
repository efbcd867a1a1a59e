//! Generator self-check: the inter-packet gap (IPG) histogram and its mean
//! squared error against the configured gap (seed 000 §3.3, MoonGen's
//! generator comparison).
//!
//! When `gen.json` has a `selfcheck` section (measured by the generator's own
//! check at the receive side) it is drawn as it is. Otherwise the gaps are
//! computed here from the transmit timestamps in the records of CBR runs:
//! the gaps the generator stamped into consecutive probes.

use super::{Ctx, Figure, Table};
use crate::load::f;
use crate::svg::{fmt_ns, num, Axis, Fmt, Plot, Style};

const W: f64 = 900.0;

struct Hist {
    ci: usize,
    label: String,
    /// (lo_ns, hi_ns, count)
    bins: Vec<(f64, f64, u64)>,
    total: u64,
    target_ns: Option<f64>,
    mse_ns2: Option<f64>,
    source: &'static str,
}

/// Counts at values `(x, count)` into 10 log-spaced bins per decade (the engine's).
fn rebin(raw: &[(f64, u64)]) -> Vec<(f64, f64, u64)> {
    nflab_analyze::curves::log_bins(raw, 10)
}

/// The IPG histogram per run configuration (first run with data).
pub fn selfcheck(ctx: &Ctx) -> Option<Figure> {
    let e = ctx.e;
    let mut hs: Vec<Hist> = Vec::new();
    let mut warnings = Vec::new();
    for (ci, c) in e.configs.iter().enumerate() {
        for &ri in &c.runs {
            let r = &e.runs[ri];
            if let Some(sc) = r.gen.as_ref().and_then(|g| g.get("selfcheck")) {
                let w = sc
                    .get("histogram_width_ns")
                    .and_then(|v| v.as_f64())
                    .unwrap_or(1.0)
                    .max(1.0);
                // The self-check's buckets are linear (width w); re-bin them
                // by midpoint into 10 log-spaced bins per decade, like the
                // fallback, so one log axis shows 1 µs and 10 ms alike.
                let raw: Vec<(f64, u64)> = sc
                    .get("histogram")
                    .and_then(|v| v.as_array())
                    .map(|a| {
                        a.iter()
                            .filter_map(|b| {
                                Some((
                                    b.get("lo_ns")?.as_f64()? + w / 2.0,
                                    b.get("count")?.as_u64()?,
                                ))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let bins = rebin(&raw);
                if bins.is_empty() {
                    continue;
                }
                for wn in sc
                    .get("warnings")
                    .and_then(|v| v.as_array())
                    .into_iter()
                    .flatten()
                {
                    if let Some(s) = wn.as_str() {
                        warnings.push(format!("{} (run {}): {s}", c.label, r.name));
                    }
                }
                hs.push(Hist {
                    ci,
                    label: c.label.clone(),
                    total: bins.iter().map(|b| b.2).sum(),
                    bins,
                    target_ns: f(sc, "/configured_ipg_ns"),
                    mse_ns2: f(sc, "/ipg_mse_ns2"),
                    source: "gen.json selfcheck (receive side)",
                });
                break;
            }
            // Fallback: transmit gaps of a CBR run from the records.
            let cbr = r
                .params
                .pointer("/traffic/pattern")
                .and_then(|v| v.as_str())
                == Some("cbr");
            let (Some(d), Some(rate)) = (r.data.as_ref(), r.offered_pps()) else {
                continue;
            };
            if !cbr || rate <= 0.0 {
                continue;
            }
            let target = 1e9 / rate;
            let Some(g) = d.analysis.tx_gap.as_ref().filter(|g| g.count() >= 2) else {
                continue;
            };
            let raw: Vec<(f64, u64)> = g
                .clone()
                .value_counts()
                .into_iter()
                .map(|(v, c)| (v as f64, c))
                .collect();
            let (bins, total, mse) = (
                rebin(&raw),
                g.count(),
                g.mse_about(target).unwrap_or(f64::NAN),
            );
            hs.push(Hist {
                ci,
                label: c.label.clone(),
                bins,
                total,
                target_ns: Some(target),
                mse_ns2: Some(mse),
                source: "transmit timestamps in the records",
            });
            break;
        }
    }
    if hs.is_empty() {
        return None;
    }
    let lo = hs
        .iter()
        .flat_map(|h| h.bins.iter().map(|b| b.0))
        .fold(f64::MAX, f64::min)
        .max(1.0);
    let hi = hs
        .iter()
        .flat_map(|h| h.bins.iter().map(|b| b.1))
        .fold(1.0, f64::max);
    let fmin = hs
        .iter()
        .flat_map(|h| {
            h.bins
                .iter()
                .map(move |b| b.2 as f64 / h.total.max(1) as f64)
        })
        .fold(1.0, f64::min);
    let x = Axis::log_decades("inter-packet gap (log)", lo, hi, Fmt::Ns);
    let y = Axis::log_decades("fraction of gaps per bin (log)", fmin, 1.0, Fmt::Prob);
    let mut p = Plot::new(W, 360.0, x, y);
    p.mr = 290.0;
    let mut t = Table::new(&[
        "config",
        "source",
        "bin_lo_ns",
        "bin_hi_ns",
        "count",
        "fraction",
        "target_ipg_ns",
        "mse_ns2",
    ]);
    for (hi_, h) in hs.iter().enumerate() {
        let floor = p.y.min;
        let mut pts: Vec<(f64, f64)> = Vec::new();
        for (i, b) in h.bins.iter().enumerate() {
            let fr = b.2 as f64 / h.total.max(1) as f64;
            if pts.last().map(|l| l.0 < b.0).unwrap_or(true) {
                pts.push((b.0, floor));
            }
            pts.push((b.0, fr));
            pts.push((b.1, fr));
            if h.bins.get(i + 1).map(|n| n.0 > b.1).unwrap_or(true) {
                pts.push((b.1, floor));
            }
            t.push(vec![
                h.label.clone(),
                h.source.into(),
                num(b.0),
                num(b.1),
                b.2.to_string(),
                num(fr),
                h.target_ns.map(num).unwrap_or_default(),
                h.mse_ns2.map(num).unwrap_or_default(),
            ]);
        }
        let st = Style::solid(h.ci);
        let name = match h.mse_ns2 {
            Some(m) => format!("{} · MSE {:.1e} ns²", h.label, m),
            None => h.label.clone(),
        };
        p.line(h.ci, &name, &pts, st, false);
        p.legend(h.ci, &name, st);
        if let Some(tg) = h.target_ns {
            if !hs[..hi_].iter().any(|o| o.target_ns == Some(tg)) {
                p.vline_at(tg, &fmt_ns(tg), st.color, hi_);
            }
        }
    }
    let sources: Vec<&str> = {
        let mut v: Vec<&str> = hs.iter().map(|h| h.source).collect();
        v.dedup();
        v
    };
    Some(Figure {
        id: "ipg".into(),
        title: "Generator self-check: inter-packet gaps".into(),
        caption: format!(
            "Histogram (10 log-spaced bins per decade; the self-check's linear buckets are re-binned by their midpoint) of the gaps between consecutive probes of the first run of each configuration (pairs with a lost packet between them are skipped), log axes; the dotted vertical lines mark the configured gap 1/rate, and the legend gives the mean squared error of the gaps against it in ns² (ideal: one bar at the target, MSE 0). Source: {}. A software generator that falls behind sends the missed packets back to back: that shows as a second peak at short gaps. Timestamps from {} (resolution {} ns).",
            sources.join("; "),
            e.clock().0,
            e.clock().1
        ),
        svg: p.finish(),
        data: t,
        notes: warnings,
    })
}
