//! Latency distribution figures: HDR percentile plot, CDF, CCDF, histogram.

use super::{Ctx, Figure, Table};
use crate::svg::{fmt_ns, num, Axis, Fmt, Plot, Scale};
use nflab_analyze::curves;

const W: f64 = 860.0;
const H: f64 = 380.0;

fn lat_range(ctx: &Ctx) -> (f64, f64) {
    let lo = ctx
        .lat
        .iter()
        .filter_map(|l| l.2.borrow().min())
        .map(|v| v as f64)
        .fold(f64::MAX, f64::min);
    let hi = ctx
        .lat
        .iter()
        .filter_map(|l| l.2.borrow().max())
        .map(|v| v as f64)
        .fold(0.0, f64::max);
    (lo.max(1.0), hi.max(1.0))
}

fn notes(ctx: &Ctx) -> Vec<String> {
    let mut n: Vec<String> = ctx.missing_note().into_iter().collect();
    if ctx
        .lat
        .iter()
        .any(|l| l.2.borrow().min().is_some_and(|v| v <= 0))
    {
        n.push("Some latencies are zero or negative (clock problem); a log axis draws them at its lower edge.".into());
    }
    n
}

/// HDR percentile plot: latency against 1/(1−p) on a log axis.
pub fn hdr(ctx: &Ctx) -> Option<Figure> {
    if ctx.lat.is_empty() {
        return None;
    }
    let (lo, hi) = lat_range(ctx);
    let max_inv = ctx
        .lat
        .iter()
        .map(|l| l.2.borrow().count() as f64)
        .fold(10.0, f64::max);
    let x = Axis::log_decades("percentile (axis: 1/(1−p), log)", 1.0, max_inv, Fmt::Nines);
    let y = Axis::log_decades("one-way latency (log)", lo, hi, Fmt::Ns);
    let mut p = Plot::new(W, H, x, y);
    let mut t = Table::new(&["config", "percentile", "inv_1_minus_p", "latency_ns"]);
    for (ci, label, dist, _) in &ctx.lat {
        let pts: Vec<(f64, f64)> = curves::percentile_curve(&mut dist.borrow_mut(), 40)
            .into_iter()
            .map(|(inv, v)| (inv, v as f64))
            .collect();
        for (inv, v) in &pts {
            t.push(vec![
                label.clone(),
                num((1.0 - 1.0 / inv) * 100.0),
                num(*inv),
                num(*v),
            ]);
        }
        let st = ctx.style(*ci);
        p.line(*ci, label, &pts, st, false);
        p.legend(*ci, label, st);
    }
    Some(Figure {
        id: "hdr".into(),
        title: "Latency percentiles (HDR plot)".into(),
        caption: format!(
            "One-way latency at each percentile p, with p on a log scale of 1/(1−p) so the tail from 90 % to the last nine the sample resolves gets equal room; one line per run configuration, the maximum at the line's right end (plotted at 1/(1−p) = N). Percentiles are nearest-rank over every recorded packet. Dashed lines are loopback runs: the measurement's own noise floor. {}{} {}",
            ctx.sample_note(),
            ctx.hdr_note(),
            ctx.method
        ),
        svg: p.finish(),
        data: t,
        notes: notes(ctx),
    })
}

/// CDF (`ccdf = false`) or CCDF (`ccdf = true`) of latency.
pub fn cdf(ctx: &Ctx, ccdf: bool) -> Option<Figure> {
    if ctx.lat.is_empty() {
        return None;
    }
    let (lo, hi) = lat_range(ctx);
    let x = Axis::log_decades("one-way latency (log)", lo, hi, Fmt::Ns);
    let nmax = ctx
        .lat
        .iter()
        .map(|l| l.2.borrow().count())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let y = if ccdf {
        Axis::log_decades("P(latency > x) (log)", 1.0 / nmax, 1.0, Fmt::Prob)
    } else {
        Axis::new("P(latency ≤ x)", Scale::Lin, 0.0, 1.0, Fmt::Prob)
    };
    let mut p = Plot::new(W, H, x, y);
    let col = if ccdf { "ccdf" } else { "cdf" };
    let mut t = Table::new(&["config", "latency_ns", col]);
    for (ci, label, dist, _) in &ctx.lat {
        let pts: Vec<(f64, f64)> = curves::cdf_points(&mut dist.borrow_mut(), 600)
            .into_iter()
            .map(|(v, p)| (v as f64, p))
            .collect();
        let pts: Vec<(f64, f64)> = if ccdf {
            // P(L > x) = 1 − F(x); the last point (F = 1) has no place on a log axis.
            pts.iter()
                .filter(|(_, c)| *c < 1.0)
                .map(|(x, c)| (*x, 1.0 - c))
                .collect()
        } else {
            // Start the staircase at F = 0 just before the minimum.
            let mut v = vec![(pts[0].0, 0.0)];
            v.extend(pts);
            v
        };
        for (x, c) in &pts {
            t.push(vec![label.clone(), num(*x), num(*c)]);
        }
        let st = ctx.style(*ci);
        p.line(*ci, label, &pts, st, false);
        p.legend(*ci, label, st);
    }
    let what = if ccdf {
        "Complementary CDF: the fraction of packets slower than x, on log axes, so each decade of the tail is visible; a line ends at 1/N, the rarest event its sample of N packets shows."
    } else {
        "Empirical CDF: the fraction of packets with latency at most x (log latency axis); a step is a latency many packets share, a long flat top the tail."
    };
    Some(Figure {
        id: col.into(),
        title: if ccdf {
            "Latency CCDF".into()
        } else {
            "Latency CDF".into()
        },
        caption: format!(
            "{what} One line per run configuration; dashed: loopback (noise floor). Drawn from every packet, reduced to at most ~900 points per line evenly in rank plus every tail rank N−k for k = 1, 2, 5, 10, … {}{} {}",
            ctx.sample_note(),
            ctx.hdr_note(),
            ctx.method
        ),
        svg: p.finish(),
        data: t,
        notes: notes(ctx),
    })
}

/// Histogram of latency with log-spaced bins, as fractions of packets.
pub fn histogram(ctx: &Ctx) -> Option<Figure> {
    if ctx.lat.is_empty() {
        return None;
    }
    let (lo, hi) = lat_range(ctx);
    const PER_DECADE: usize = 20;
    let edges = curves::log_edges(lo, hi, PER_DECADE);
    let x = Axis::log_decades("one-way latency (log, 20 bins per decade)", lo, hi, Fmt::Ns);
    let mut counts = Vec::new();
    let mut fmin: f64 = 1.0;
    for (_, _, dist, _) in &ctx.lat {
        let c = curves::bin_counts(&mut dist.borrow_mut(), &edges);
        let n = dist.borrow().count() as f64;
        for &k in &c {
            if k > 0 {
                fmin = fmin.min(k as f64 / n);
            }
        }
        counts.push(c);
    }
    let y = Axis::log_decades("fraction of packets per bin (log)", fmin, 1.0, Fmt::Prob);
    let mut p = Plot::new(W, H, x, y);
    let mut t = Table::new(&["config", "bin_lo_ns", "bin_hi_ns", "count", "fraction"]);
    for ((ci, label, dist, _), c) in ctx.lat.iter().zip(&counts) {
        let n = dist.borrow().count() as f64;
        // A step line: flat over each non-empty bin, dropping to the floor between.
        let floor = p.y.min;
        let mut pts = Vec::new();
        for (b, &k) in c.iter().enumerate() {
            if k == 0 {
                continue;
            }
            let (a, z) = (edges[b], edges[b + 1]);
            let fr = k as f64 / n;
            if pts.last().map(|l: &(f64, f64)| l.0 < a).unwrap_or(true) {
                pts.push((a, floor));
            }
            pts.push((a, fr));
            pts.push((z, fr));
            if c.get(b + 1).copied().unwrap_or(0) == 0 {
                pts.push((z, floor));
            }
            t.push(vec![label.clone(), num(a), num(z), k.to_string(), num(fr)]);
        }
        let st = ctx.style(*ci);
        p.line(*ci, label, &pts, st, false);
        p.legend(*ci, label, st);
    }
    Some(Figure {
        id: "histogram".into(),
        title: "Latency histogram".into(),
        caption: format!(
            "Fraction of packets in each latency bin; bins are log-spaced, {PER_DECADE} per decade (each bin {:.0} % wider than the previous), from {} to {}; log axes, so single outliers stay visible at 1/N. One line per run configuration; dashed: loopback. {}{} {}",
            (10f64.powf(1.0 / PER_DECADE as f64) - 1.0) * 100.0,
            fmt_ns(edges[0]),
            fmt_ns(*edges.last().unwrap_or(&0.0)),
            ctx.sample_note(),
            ctx.hdr_note(),
            ctx.method
        ),
        svg: p.finish(),
        data: t,
        notes: notes(ctx),
    })
}
