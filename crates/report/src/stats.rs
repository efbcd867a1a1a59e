//! The statistics the figures draw, computed from the records.
//!
//! Definitions follow `docs/metrics.md` (nearest-rank percentiles, anomalies
//! as runs of consecutive sequence numbers). Each function is one pass or one
//! sort, and the decimation of a time series is streaming, so drawing 10⁹
//! packets costs one pass over them.

use crate::lat::Sample;
use crate::load::Pkt;

/// Nearest-rank quantile `q ∈ [0, 1]` of ascending `sorted`.
pub fn quantile(sorted: &[i64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    Some(sorted[rank - 1] as f64)
}

/// Points `(1/(1−p), latency)` of an HDR percentile plot: percentiles from 0
/// up to the highest the sample resolves (at least one value beyond it),
/// then the maximum, plotted at `1/(1−p) = n`.
pub fn hdr_points<S: Sample + ?Sized>(sorted: &S) -> Vec<(f64, f64)> {
    let n = sorted.count();
    if n == 0 {
        return Vec::new();
    }
    // 40 points per decade of 1/(1-p); nearest rank as in `quantile`.
    let mut invs = Vec::new();
    let mut idx = Vec::new();
    let mut i = 0;
    loop {
        let inv = 10f64.powf(i as f64 / 40.0);
        if inv >= n as f64 {
            break;
        }
        let q = 1.0 - 1.0 / inv;
        invs.push(inv);
        idx.push(((q * n as f64).ceil() as usize).clamp(1, n) - 1);
        i += 1;
    }
    invs.push(n as f64);
    idx.push(n - 1);
    invs.into_iter()
        .zip(sorted.at(&idx))
        .map(|(inv, v)| (inv, v as f64))
        .collect()
}

/// Empirical CDF points `(latency, P(L ≤ latency))`, reduced to at most
/// about `max_pts` points spread evenly in rank and in log-latency, so both
/// the body and the tail keep their shape. The last point is always the max.
pub fn cdf_points<S: Sample + ?Sized>(sorted: &S, max_pts: usize) -> Vec<(f64, f64)> {
    let n = sorted.count();
    if n == 0 {
        return Vec::new();
    }
    let mut ranks: Vec<usize> = Vec::new();
    let step = (n / (max_pts / 2).max(1)).max(1);
    ranks.extend((0..n).step_by(step));
    // Dense in the tail: ranks n - 10^k·m.
    let mut t = 1usize;
    while t < n {
        for m in [1, 2, 5] {
            if t * m < n {
                ranks.push(n - t * m);
            }
        }
        t *= 10;
    }
    ranks.push(n - 1);
    ranks.sort_unstable();
    ranks.dedup();
    let vals = sorted.at(&ranks);
    ranks
        .into_iter()
        .zip(vals)
        .map(|(r, v)| (v as f64, (r + 1) as f64 / n as f64))
        .collect()
}

/// Log-spaced histogram edges covering `[lo, hi]` with `per_decade` bins.
pub fn log_edges(lo: f64, hi: f64, per_decade: usize) -> Vec<f64> {
    let lo = lo.max(1.0);
    let hi = hi.max(lo * 1.0001);
    let d0 = lo.log10().floor();
    let mut e = Vec::new();
    let mut k = 0;
    loop {
        let v = 10f64.powf(d0 + k as f64 / per_decade as f64);
        e.push(v);
        if v > hi {
            break;
        }
        k += 1;
    }
    e
}

/// Counts of `sorted` values in `[edges[i], edges[i+1])`.
pub fn histogram<S: Sample + ?Sized>(sorted: &S, edges: &[f64]) -> Vec<u64> {
    let mut c = vec![0u64; edges.len().saturating_sub(1)];
    let mut b = 0;
    for (v, k) in sorted.counts() {
        let v = v as f64;
        while b + 1 < edges.len() - 1 && v >= edges[b + 1] {
            b += 1;
        }
        if !c.is_empty() {
            c[b] += k;
        }
    }
    c
}

/// Min/max decimation of a time series into `cols` equal columns over
/// `[0, span_ns]`: `(t0_ns, t1_ns, min, max)` for each non-empty column.
/// Streaming and O(n): this is what makes 10⁹ points drawable.
pub fn decimate(
    pts: impl Iterator<Item = (u64, i64)>,
    span_ns: u64,
    cols: usize,
) -> Vec<(f64, f64, f64, f64)> {
    let cols = cols.max(1);
    let w = (span_ns as f64 / cols as f64).max(1.0);
    let mut mm: Vec<(i64, i64)> = vec![(i64::MAX, i64::MIN); cols];
    for (t, l) in pts {
        let c = ((t as f64 / w) as usize).min(cols - 1);
        let e = &mut mm[c];
        e.0 = e.0.min(l);
        e.1 = e.1.max(l);
    }
    mm.iter()
        .enumerate()
        .filter(|(_, e)| e.0 <= e.1)
        .map(|(i, e)| (i as f64 * w, (i + 1) as f64 * w, e.0 as f64, e.1 as f64))
        .collect()
}

/// The `n` packets with the highest latency, in time order.
pub fn worst(pkts: &[Pkt], n: usize) -> Vec<Pkt> {
    if n == 0 || pkts.is_empty() {
        return Vec::new();
    }
    let mut v: Vec<Pkt> = pkts.to_vec();
    let k = n.min(v.len());
    if k < v.len() {
        v.select_nth_unstable_by(k - 1, |a, b| b.lat_ns.cmp(&a.lat_ns));
        v.truncate(k);
    }
    v.sort_by_key(|p| p.t_ns);
    v
}

/// Statistics of one time window: `(t0_ns, p50, p99, max, count)`.
pub type Window = (u64, f64, f64, f64, usize);

/// Per-window statistics over windows of `win_ns` of transmit time.
pub fn windows(pkts: &[Pkt], win_ns: u64) -> Vec<Window> {
    let win_ns = win_ns.max(1);
    let mut out = Vec::new();
    let mut i = 0;
    while i < pkts.len() {
        let w = pkts[i].t_ns / win_ns;
        let mut j = i;
        while j < pkts.len() && pkts[j].t_ns / win_ns == w {
            j += 1;
        }
        let mut l: Vec<i64> = pkts[i..j].iter().map(|p| p.lat_ns).collect();
        l.sort_unstable();
        if let (Some(a), Some(b)) = (quantile(&l, 0.5), quantile(&l, 0.99)) {
            out.push((w * win_ns, a, b, *l.last().unwrap_or(&0) as f64, l.len()));
        }
        i = j;
    }
    out
}

/// One anomaly: a run of ≥ n consecutive sequence numbers with latency ≥ t.
#[derive(Debug, Clone, PartialEq)]
pub struct Anomaly {
    /// Flow.
    pub flow: u16,
    /// Transmit time of the first packet, ns since the run's start.
    pub t0_ns: u64,
    /// Arrival time of the last packet to arrive (transmit time plus
    /// latency), ns since the run's start: the anomaly lasts from the first
    /// send to the last arrival.
    pub t1_ns: u64,
    /// Packets in the run.
    pub packets: u64,
    /// Largest latency in the run.
    pub max_ns: i64,
    /// Smallest latency in the run.
    pub min_ns: i64,
}

fn arrival(p: &Pkt) -> u64 {
    (p.t_ns as i64 + p.lat_ns).max(p.t_ns as i64) as u64
}

/// Anomalies as in `docs/metrics.md`: per flow, in sequence order, maximal
/// runs of consecutive received sequence numbers with `L ≥ t`, length ≥ n.
pub fn anomalies(pkts: &[Pkt], n: u32, t_ns: u64) -> Vec<Anomaly> {
    let mut by_seq: Vec<&Pkt> = pkts.iter().collect();
    by_seq.sort_by_key(|p| (p.flow, p.seq));
    let n = n.max(1) as u64;
    let mut out = Vec::new();
    let mut cur: Option<(Anomaly, u64)> = None; // (anomaly so far, last seq)
    let close = |c: Option<(Anomaly, u64)>, out: &mut Vec<Anomaly>| {
        if let Some((a, _)) = c {
            if a.packets >= n {
                out.push(a);
            }
        }
    };
    for p in by_seq {
        let high = p.lat_ns >= t_ns as i64;
        let contiguous = matches!(&cur, Some((a, s)) if a.flow == p.flow && *s + 1 == p.seq);
        if high && contiguous {
            if let Some((a, s)) = cur.as_mut() {
                a.packets += 1;
                a.t0_ns = a.t0_ns.min(p.t_ns);
                a.t1_ns = a.t1_ns.max(arrival(p));
                a.max_ns = a.max_ns.max(p.lat_ns);
                a.min_ns = a.min_ns.min(p.lat_ns);
                *s = p.seq;
            }
            continue;
        }
        close(cur.take(), &mut out);
        if high {
            cur = Some((
                Anomaly {
                    flow: p.flow,
                    t0_ns: p.t_ns,
                    t1_ns: arrival(p),
                    packets: 1,
                    max_ns: p.lat_ns,
                    min_ns: p.lat_ns,
                },
                p.seq,
            ));
        }
    }
    close(cur, &mut out);
    out.sort_by_key(|a| a.t0_ns);
    out
}

/// Inter-packet gaps at the transmitter, ns: `tx[s+1] − tx[s]` for
/// consecutive received sequence numbers of a flow (a lost packet leaves its
/// gap out rather than doubling it).
pub fn tx_gaps(pkts: &[Pkt]) -> Vec<i64> {
    let mut by_seq: Vec<&Pkt> = pkts.iter().collect();
    by_seq.sort_by_key(|p| (p.flow, p.seq));
    by_seq
        .windows(2)
        .filter(|w| w[0].flow == w[1].flow && w[0].seq + 1 == w[1].seq)
        .map(|w| w[1].t_ns as i64 - w[0].t_ns as i64)
        .collect()
}

/// Mean and the half-width of its 95 % confidence interval (Student t) over
/// `xs`; the half-width is `None` for fewer than 2 values.
pub fn mean_ci(xs: &[f64]) -> Option<(f64, Option<f64>)> {
    let n = xs.len();
    if n == 0 {
        return None;
    }
    let m = xs.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return Some((m, None));
    }
    let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1) as f64;
    Some((m, Some(t975(n - 1) * (var / n as f64).sqrt())))
}

/// 97.5 % quantile of Student's t with `df` degrees of freedom.
pub fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::NAN,
        d if d <= 30 => T[d - 1],
        d if d <= 60 => 2.000 + (2.042 - 2.000) * (60 - d) as f64 / 30.0,
        d if d <= 120 => 1.980 + (2.000 - 1.980) * (120 - d) as f64 / 60.0,
        _ => 1.960,
    }
}

/// Parse an anomaly spec `N:T` (`2:250us`) into `(n, t_ns)`.
pub fn parse_anomaly(s: &str) -> Option<(u32, u64)> {
    let (n, t) = s.split_once(':')?;
    let n: u32 = n.trim().parse().ok()?;
    let t = t.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (v, unit) = t.split_at(split);
    let v: f64 = v.parse().ok()?;
    let mul = match unit.trim() {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    };
    Some((n, (v * mul).round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pk(t: u64, lat: i64, seq: u64) -> Pkt {
        Pkt {
            t_ns: t,
            lat_ns: lat,
            seq,
            flow: 0,
        }
    }

    #[test]
    fn nearest_rank() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.5), Some(50.0));
        assert_eq!(quantile(&v, 0.99), Some(99.0));
        assert_eq!(quantile(&v, 0.0), Some(1.0));
        assert_eq!(quantile(&v, 1.0), Some(100.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn hdr_ends_at_max_and_is_monotonic() {
        let v: Vec<i64> = (1..=1000).collect();
        let p = hdr_points(&v);
        assert_eq!(*p.last().unwrap(), (1000.0, 1000.0));
        assert!(p.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        // 1/(1-p) = 100 is p99 = 990 by nearest rank.
        let at100 = p.iter().find(|(x, _)| (*x - 100.0).abs() < 1e-9).unwrap();
        assert_eq!(at100.1, 990.0);
    }

    #[test]
    fn decimation_keeps_extremes_of_each_column() {
        // 1000 points over 1000 ns, 10 columns: column c holds t in [100c, 100c+100).
        let pts = (0..1000u64).map(|t| (t, if t == 555 { 10_000 } else { (t % 100) as i64 }));
        let c = decimate(pts, 1000, 10);
        assert_eq!(c.len(), 10);
        assert_eq!(c[5], (500.0, 600.0, 0.0, 10_000.0));
        assert_eq!(c[0].3, 99.0);
    }

    #[test]
    fn decimation_of_many_points_is_fast_enough() {
        // 2·10⁷ points: one pass. Not timed (no absolute times in tests); a
        // quadratic mistake would make this test hang instead.
        let n = 20_000_000u64;
        let c = decimate((0..n).map(|t| (t, (t % 977) as i64)), n, 800);
        assert_eq!(c.len(), 800);
        assert!(c.iter().all(|x| x.2 == 0.0 && x.3 == 976.0));
    }

    #[test]
    fn worst_are_the_highest_in_time_order() {
        let p: Vec<Pkt> = (0..100)
            .map(|i| pk(i, ((i * 37) % 100) as i64, i))
            .collect();
        let w = worst(&p, 3);
        let mut lats: Vec<i64> = w.iter().map(|x| x.lat_ns).collect();
        lats.sort();
        assert_eq!(lats, vec![97, 98, 99]);
        assert!(w.windows(2).all(|x| x[0].t_ns < x[1].t_ns));
    }

    #[test]
    fn anomalies_follow_metrics_md() {
        // seq 0..10, latencies: high at 2,3,4 (run of 3), high at 6, lost 8, high 7 and 9.
        let lat = [0, 0, 9, 9, 9, 0, 9, 9, -1, 9];
        let p: Vec<Pkt> = lat
            .iter()
            .enumerate()
            .filter(|(_, l)| **l >= 0)
            .map(|(i, l)| pk(i as u64 * 10, *l, i as u64))
            .collect();
        let a = anomalies(&p, 2, 5);
        assert_eq!(a.len(), 2, "{a:?}");
        // From the first send to the last arrival (tx 40 + latency 9).
        assert_eq!((a[0].packets, a[0].t0_ns, a[0].t1_ns), (3, 20, 49));
        assert_eq!((a[1].packets, a[1].t0_ns, a[1].t1_ns), (2, 60, 79));
        // The lost seq 8 splits 7 from 9; n = 1 counts 9 alone.
        assert_eq!(anomalies(&p, 1, 5).len(), 3);
    }

    #[test]
    fn ci_of_known_sample() {
        let (m, h) = mean_ci(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(m, 2.0);
        // s = 1, n = 3, t(2) = 4.303: h = 4.303/sqrt(3).
        assert!((h.unwrap() - 4.303 / 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(mean_ci(&[5.0]), Some((5.0, None)));
    }

    #[test]
    fn histogram_counts_everything() {
        let v: Vec<i64> = (1..=1000).collect();
        let e = log_edges(1.0, 1000.0, 10);
        let c = histogram(&v, &e);
        assert_eq!(c.iter().sum::<u64>(), 1000);
    }

    #[test]
    fn gaps_skip_losses() {
        let p = vec![pk(0, 1, 0), pk(100, 1, 1), pk(300, 1, 3), pk(400, 1, 4)];
        assert_eq!(tx_gaps(&p), vec![100, 100]);
    }

    #[test]
    fn anomaly_specs() {
        assert_eq!(parse_anomaly("2:250us"), Some((2, 250_000)));
        assert_eq!(parse_anomaly("3:1.5ms"), Some((3, 1_500_000)));
        assert_eq!(parse_anomaly("x"), None);
    }
}
