//! [`analyze`] and [`analyze_with`]: the metrics of `docs/metrics.md`,
//! computed by one [`Engine`] pass over records in memory; `assemble` turns
//! the state of a finished pass into a [`Summary`].

use nflab_record::{FlowSent, Record};

use crate::dist::{Distribution, Method, Pct};
use crate::engine::{standard_pcts, Engine, Options};
use crate::spec::Base;
use crate::*;

/// Compute the [`Summary`] of one run.
///
/// `records` are in arrival order (as the recorder wrote them); `sent` gives
/// the generator's counts per flow. Records of a flow without a `sent` entry
/// are analysed with `sent = highest seq + 1` and a note. Records with
/// `seq < warmup` of their flow are ignored. `interrupted` is left `false`.
/// Percentiles are exact (the records are in memory anyway).
///
/// Never panics, whatever the input; problems with the data are reported in
/// `notes`.
pub fn analyze(records: &[Record], sent: &[FlowSent], cfg: &AnalysisConfig) -> Summary {
    let opts = Options {
        exact_limit: u64::MAX,
        ..Options::default()
    };
    analyze_with(records, sent, cfg, &opts).summary
}

/// [`analyze`] with [`Options`]: extra percentiles, HDR, windows, trimming,
/// deadline, worst N, per-flow latency. Relative anomaly thresholds
/// (`2:p50*3`) take a first pass to find the reference value.
pub fn analyze_with(
    records: &[Record],
    sent: &[FlowSent],
    cfg: &AnalysisConfig,
    opts: &Options,
) -> Analysis {
    let mut opts = opts.clone();
    if opts.tx_span.is_none() && (opts.trim_start_ns > 0 || opts.trim_end_ns > 0) {
        opts.tx_span = tx_span(records);
    }
    let run = |cfg: &AnalysisConfig| {
        let mut e = Engine::new(cfg, &opts, Some(sent));
        e.reserve(records.len() as u64);
        e.push_all(records);
        Ok::<_, std::convert::Infallible>(e.finish(None))
    };
    match with_resolved_thresholds(cfg, run) {
        Ok(a) => a,
        Err(e) => match e {},
    }
}

/// First and last tx time by position (the first and last record).
pub(crate) fn tx_span(records: &[Record]) -> Option<(u64, u64)> {
    Some((records.first()?.tx_ns, records.last()?.tx_ns))
}

/// Run `pass` once, or twice when an anomaly threshold is relative: the
/// first pass (without anomalies) gives the reference latencies.
pub(crate) fn with_resolved_thresholds<E>(
    cfg: &AnalysisConfig,
    mut pass: impl FnMut(&AnalysisConfig) -> Result<Analysis, E>,
) -> Result<Analysis, E> {
    if !cfg.anomalies.iter().any(AnomalySpec::is_relative) {
        return pass(cfg);
    }
    let first_cfg = AnalysisConfig {
        anomalies: Vec::new(),
        ..cfg.clone()
    };
    let mut cfg2 = cfg.clone();
    // Percentile bases read from an HDR histogram: the bucket that holds them.
    let mut approximate = Vec::new();
    {
        // The first pass's data goes before the second pass starts (with every
        // latency held, each pass needs 8 bytes per packet).
        let mut first = pass(&first_cfg)?;
        let min = first.latency.min();
        let mean = first.latency.mean();
        for spec in &mut cfg2.anomalies {
            let lat = &mut first.latency;
            spec.resolve(|b| match b {
                Base::Min => min.map(|v| v as f64),
                Base::Mean => mean,
                Base::Pct(p) => {
                    let q = lat.quantiles(&[p])[0]?;
                    if q.lower < q.value {
                        approximate.push(format!("{} in [{}, {}] ns", p.label(), q.lower, q.value));
                    }
                    Some(q.value as f64)
                }
            });
        }
    }
    let mut analysis = pass(&cfg2)?;
    approximate.dedup();
    if !approximate.is_empty() {
        analysis.summary.notes.push(format!(
            "a relative anomaly threshold took its percentile base from the HDR histogram, \
             not exactly: the upper end of the bucket that holds it ({}); see percentiles.bound",
            approximate.join(", ")
        ));
    }
    Ok(analysis)
}

/// Value at 1-based rank `ceil(num/den * N)`, clamped to `1..=N`, of sorted
/// `values`; exact integer arithmetic. `None` for no values.
#[allow(dead_code)]
pub(crate) fn nearest_rank<T: Copy>(sorted: &[T], num: u64, den: u64) -> Option<T> {
    let n = sorted.len() as u128;
    if n == 0 || den == 0 {
        return None;
    }
    let rank = (u128::from(num) * n).div_ceil(u128::from(den)).clamp(1, n);
    sorted.get(rank as usize - 1).copied()
}

fn latency_stats(d: &mut Distribution, extra: &[Pct]) -> (LatencyStats, Vec<QuantileEntry>) {
    let mut pcts: Vec<Pct> = standard_pcts().to_vec();
    for p in extra {
        if !pcts.contains(p) {
            pcts.push(*p);
        }
    }
    let q = d.quantiles(&pcts);
    let v = |i: usize| q[i].map(|q| q.value);
    let stats = LatencyStats {
        min: d.min(),
        mean: d.mean(),
        stdev: d.stdev(),
        p50: v(0),
        p90: v(1),
        p99: v(2),
        p99_9: v(3),
        p99_99: v(4),
        p99_999: v(5),
        max: d.max(),
    };
    let entries = pcts
        .iter()
        .zip(&q)
        .filter_map(|(p, q)| {
            q.map(|q| QuantileEntry {
                p: p.as_f64(),
                ns: q.value,
                lower_ns: q.lower,
            })
        })
        .collect();
    (stats, entries)
}

/// Latency statistics, every percentile entry and the percentile method of
/// `d`; a note when latencies are negative.
pub(crate) fn latency_block(
    d: &mut Distribution,
    extra: &[Pct],
    notes: &mut Vec<String>,
) -> (LatencyStats, Vec<QuantileEntry>, PercentileMethod) {
    let (latency_ns, quantiles) = latency_stats(d, extra);
    if let Some(min) = d.min().filter(|&m| m < 0) {
        // Count the negatives: exact from the distribution.
        let neg = d
            .value_counts()
            .iter()
            .take_while(|(v, _)| *v < 0)
            .map(|(_, c)| c)
            .sum::<u64>();
        notes.push(format!(
            "{neg} packets have a negative latency (min {min} ns): the tx and rx clocks disagree, \
             so latency figures are unreliable"
        ));
    }
    let method = d.method();
    let percentiles = match method {
        Method::Exact => PercentileMethod::default(),
        Method::Hdr => PercentileMethod {
            method: "hdr".into(),
            definition: "nearest rank over an HDR histogram: the reported value is the upper end \
                         of the HDR bucket holding the value at rank ceil(p/100 * N) (clamped to \
                         min..max); min, max, mean and stdev stay exact"
                .into(),
            significant_digits: Some(d.digits()),
            bound: Some(format!(
                "relative error below {:e}: the exact nearest-rank value v satisfies \
                 lower_ns <= v <= ns, with ns - lower_ns < {:e} * ns (see latency_quantiles)",
                d.relative_error_bound(),
                d.relative_error_bound()
            )),
        },
    };
    (latency_ns, quantiles, percentiles)
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

impl Engine {
    /// End the pass and summarise it. `sent` are the counts known only at
    /// the end (the trailer); `None` keeps those given to [`Engine::new`],
    /// or derives them from the highest seq.
    pub fn finish(mut self, sent: Option<&[FlowSent]>) -> Analysis {
        let (ids, notes, series, tx_gap) = self.close(sent);
        let mut a = assemble(self, ids, notes);
        a.series = series;
        a.tx_gap = tx_gap;
        a
    }
}

/// The jitter family of `n` packets from the signed IPDV distribution, its
/// magnitudes, the consecutive-latency differences (arrival order), the
/// RFC 3550 estimate and the latency block (PDV = latency − min).
pub(crate) fn jitter_stats(
    ipdv: &mut Distribution,
    ipdv_abs: &mut Distribution,
    consec: &Distribution,
    rfc3550: f64,
    n: u64,
    latency_ns: &LatencyStats,
) -> JitterStats {
    let ipdv_q = ipdv.quantiles(&[Pct { num: 1, den: 100 }, Pct { num: 99, den: 100 }]);
    let abs_q = ipdv_abs.quantiles(&[
        Pct { num: 1, den: 2 },
        Pct { num: 99, den: 100 },
        Pct {
            num: 999,
            den: 1000,
        },
    ]);
    let pdv = |v: Option<i64>| match (v, latency_ns.min) {
        (Some(v), Some(m)) => Some(v.saturating_sub(m)),
        _ => None,
    };
    JitterStats {
        rfc3550: (n >= 2).then_some(rfc3550),
        ipdv_p50: abs_q[0].map(|q| q.value as u64),
        ipdv_p99: abs_q[1].map(|q| q.value as u64),
        ipdv_mean: ipdv.mean(),
        ipdv_min: ipdv.min(),
        ipdv_p1: ipdv_q[0].map(|q| q.value),
        ipdv_p99_signed: ipdv_q[1].map(|q| q.value),
        ipdv_max: ipdv.max(),
        ipdv_p99_9: abs_q[2].map(|q| q.value as u64),
        pdv_p50: pdv(latency_ns.p50),
        pdv_p99: pdv(latency_ns.p99),
        pdv_p99_9: pdv(latency_ns.p99_9),
        pdv_max: pdv(latency_ns.max),
        stdev: latency_ns.stdev,
        consecutive_mean: consec.mean(),
        consecutive_stdev: consec.stdev(),
        consecutive_max: consec.max(),
    }
}

/// Build the [`Analysis`] of a finished engine.
pub(crate) fn assemble(mut e: Engine, ids: Vec<u16>, mut notes: Vec<String>) -> Analysis {
    let p = e.parts();
    let cfg = p.cfg.clone();
    let opts = p.opts.clone();
    let mut counts = PacketCounts::default();
    let mut flows = Vec::new();
    let mut late_total = 0u64;
    let mut beyond_window = 0u64;
    for id in &ids {
        let Some(f) = p.flows.get_mut(usize::from(*id)).and_then(|f| f.as_mut()) else {
            continue;
        };
        let mut v = f.view();
        let measured_end = v.sent.min(v.hi_excl);
        let measured = measured_end.saturating_sub(v.lo);
        if v.beyond_sent > 0 {
            notes.push(format!(
                "flow {id}: {} received packets have seq >= the sent count {}; \
                 the sent count does not match these records",
                v.beyond_sent, v.sent
            ));
        }
        let fc = PacketCounts {
            sent: measured,
            received: v.received,
            lost: measured.saturating_sub(v.received),
            reordered: v.reordered,
            duplicated: v.duplicated,
        };
        counts.sent = counts.sent.saturating_add(fc.sent);
        counts.received = counts.received.saturating_add(fc.received);
        counts.lost = counts.lost.saturating_add(fc.lost);
        counts.reordered += fc.reordered;
        counts.duplicated += fc.duplicated;
        late_total += v.late;
        beyond_window += v.beyond_window;
        let latency_ns = v.lat.as_mut().map(|d| latency_stats(d, &[]).0);
        let _ = v.warmup;
        flows.push(FlowSummary {
            flow: *id,
            packets: fc,
            loss_ratio: ratio(fc.lost, fc.sent),
            late: opts.deadline_ns.map(|_| v.late),
            latency_ns,
        });
    }
    if beyond_window > 0 {
        notes.push(format!(
            "{beyond_window} packets arrived after {} higher sequence numbers of their flow had \
             arrived (beyond the reorder window); they count as lost (raise the reorder window)",
            opts.reorder_window
        ));
    }
    if p.clamped > 0 {
        notes.push(format!(
            "{} packets have a latency outside the i64 range and were clamped; the timestamps are garbage",
            p.clamped
        ));
    }

    let (latency_ns, quantiles, percentiles) = latency_block(p.lat, &opts.percentiles, &mut notes);

    let n = p.lat.count();
    let jitter_ns = jitter_stats(p.ipdv, p.ipdv_abs, p.consec, p.rfc3550, n, &latency_ns);

    let rx_pps = if n >= 2 && p.rx.1 > p.rx.0 {
        Some((n - 1) as f64 / ((p.rx.1 - p.rx.0) as f64 / 1e9))
    } else {
        None
    };
    let span_ns = (n > 0 && p.tx.1 >= p.tx.0).then(|| p.tx.1 - p.tx.0);

    let mut anomalies = Vec::new();
    let mut anomaly_details = Vec::new();
    for (spec, agg) in p.specs.iter().zip(p.anom.iter_mut()) {
        let d = agg.detail(spec, span_ns);
        anomalies.push(AnomalyStats::of(&d));
        anomaly_details.push(d);
    }

    let bq = p.bursts.quantiles(&[]);
    let _ = bq;
    let mut burst_lengths = p.bursts.value_counts();
    burst_lengths.truncate(64);
    let loss = LossStats {
        bursts: p.bursts.count(),
        burst_mean: p.bursts.mean(),
        burst_max: p.bursts.max(),
        burst_lengths,
        deadline_ns: opts.deadline_ns,
        late: opts.deadline_ns.map(|_| late_total),
        loss_ratio_with_deadline: opts
            .deadline_ns
            .map(|_| ratio(counts.lost + late_total, counts.sent)),
    };
    let eq = p.extent.quantiles(&[Pct { num: 99, den: 100 }]);
    let reorder = ReorderStats {
        ratio: ratio(counts.reordered, counts.received),
        extent_mean: p.extent.mean(),
        extent_p99: eq[0].map(|q| q.value),
        extent_max: p.extent.max(),
        beyond_window,
    };
    let mut worst: Vec<WorstPacket> = std::mem::take(p.worst)
        .into_iter()
        .map(|std::cmp::Reverse((lat, tx, flow, seq, rx))| WorstPacket {
            flow,
            seq,
            tx_ns: tx,
            rx_ns: rx,
            latency_ns: lat,
        })
        .collect();
    worst.sort_by(|a, b| b.latency_ns.cmp(&a.latency_ns).then(a.tx_ns.cmp(&b.tx_ns)));

    let summary = Summary {
        packets: counts,
        loss_ratio: ratio(counts.lost, counts.sent),
        rate: RateStats {
            offered_pps: cfg.offered_pps,
            tx_pps: cfg.tx_pps,
            rx_pps,
        },
        latency_ns,
        jitter_ns,
        anomalies,
        clock: cfg.clock.clone(),
        percentiles,
        interrupted: false,
        notes,
        latency_quantiles: quantiles,
        loss: Some(loss),
        reorder: Some(reorder),
        flows,
        anomaly_details,
        windows: std::mem::take(p.windows),
        worst,
        span: Some(SpanInfo {
            first_tx_ns: (n > 0).then_some(p.tx.0),
            last_tx_ns: (n > 0).then_some(p.tx.1),
            trim: p.trim,
        }),
        timestamps: None,
        directions: Default::default(),
    };
    let window_histograms = std::mem::take(p.window_hists);
    let latency = std::mem::replace(p.lat, Distribution::new(0, 1));
    let ipdv = std::mem::replace(p.ipdv, Distribution::new(0, 1));
    let origin = e.origin();
    Analysis {
        summary,
        latency,
        ipdv,
        window_histograms,
        window_ns: opts.window_ns,
        origin_ns: origin,
        series: Vec::new(),
        tx_gap: None,
    }
}
