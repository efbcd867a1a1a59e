//! [`Engine`]: the single streaming pass behind every analysis.
//!
//! Records arrive in arrival order ([`Engine::push`]). Arrival-order metrics
//! (latency distribution, RFC 3550 jitter, consecutive-latency differences,
//! worst N, reordering per RFC 4737, duplicates) are updated at once. Each
//! flow also has a ring of `reorder_window` slots indexed by sequence number;
//! a packet leaves the ring in **sequence order** once the window has moved
//! past it, and the sequence-order metrics (IPDV, loss bursts, anomalies,
//! time windows) consume that ordered stream of "present" and "missing"
//! sequence numbers. Memory is bounded by the ring (24 bytes per slot per
//! flow), the [`Distribution`]s and the capped lists, never by the number of
//! records.
//!
//! A packet reordered by more than `reorder_window` sequence numbers arrives
//! after its number was already released as missing: it counts as lost
//! everywhere ("late equals lost" with the window as deadline), and a note
//! says how often this happened.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use nflab_record::{FlowSent, Record};

use crate::dist::{Distribution, Pct, DEFAULT_EXACT_LIMIT, DEFAULT_HDR_DIGITS};
use crate::spec::{AnomalySpec, LostMode};
use crate::*;

/// Analysis options beyond [`AnalysisConfig`] (kept apart so that code
/// building an `AnalysisConfig` literal keeps compiling).
#[derive(Debug, Clone)]
pub struct Options {
    /// Percentiles to report besides the standard set (p50 … p99.999).
    pub percentiles: Vec<Pct>,
    /// Values held exactly before a distribution switches to HDR
    /// (`u64::MAX`: always exact; 0: always HDR).
    pub exact_limit: u64,
    /// HDR significant digits, 1..=5.
    pub hdr_digits: u8,
    /// Keep the N packets with the highest latency (seed 000's worst-5,000).
    pub worst_n: usize,
    /// Per-window time series with windows of this length (by tx time).
    pub window_ns: Option<u64>,
    /// Drop packets sent in the first `trim_start_ns` of the run.
    pub trim_start_ns: u64,
    /// Drop packets sent in the last `trim_end_ns` of the run.
    pub trim_end_ns: u64,
    /// First and last tx time of the run (needed for trimming; [`analyze`]
    /// and the file readers fill it in).
    pub tx_span: Option<(u64, u64)>,
    /// A packet later than this counts as lost too ("late equals lost").
    pub deadline_ns: Option<u64>,
    /// Reorder window, sequence numbers per flow (rounded up to a power of 2).
    pub reorder_window: u64,
    /// Anomaly events listed per spec (all are counted).
    pub anomaly_events: usize,
    /// Latency percentiles per flow (HDR) in `flows`.
    pub per_flow_latency: bool,
    /// Keep one HDR histogram per window for an interval-log export.
    pub interval_log: bool,
    /// Smallest and largest latency per slice of this much tx time
    /// ([`Analysis::series`]): the latency-over-time figure, whatever N.
    pub series_ns: Option<u64>,
    /// Keep the distribution of tx gaps between consecutive received
    /// sequence numbers ([`Analysis::tx_gap`]): the generator self-check.
    pub tx_gaps: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            percentiles: Vec::new(),
            exact_limit: DEFAULT_EXACT_LIMIT,
            hdr_digits: DEFAULT_HDR_DIGITS,
            worst_n: 0,
            window_ns: None,
            trim_start_ns: 0,
            trim_end_ns: 0,
            tx_span: None,
            deadline_ns: None,
            reorder_window: 1 << 16,
            anomaly_events: 100,
            per_flow_latency: false,
            interval_log: false,
            series_ns: None,
            tx_gaps: false,
        }
    }
}

/// Slices kept in [`Analysis::series`] at most; a slice index beyond (a tx
/// time far past the span the caller sized the slices for) is not drawn.
pub const MAX_SERIES_SLICES: usize = 1 << 20;

/// The standard percentiles of `latency_ns`.
pub(crate) fn standard_pcts() -> [Pct; 6] {
    [
        Pct { num: 1, den: 2 },
        Pct { num: 9, den: 10 },
        Pct { num: 99, den: 100 },
        Pct {
            num: 999,
            den: 1000,
        },
        Pct {
            num: 9_999,
            den: 10_000,
        },
        Pct {
            num: 99_999,
            den: 100_000,
        },
    ]
}

/// `(latency, tx, flow, seq, rx)` of a worst-N candidate.
type WorstKey = (i64, u64, u16, u64, u64);

const EMPTY: u64 = u64::MAX;
/// Exact limit of the IPDV and consecutive-difference distributions when the
/// latency limit is finite (`analyze` on records in memory keeps all exact).
const SECONDARY_EXACT: u64 = 1 << 20;
const EMPTY_SLOT: Slot = Slot {
    seq: EMPTY,
    lat: 0,
    tx: 0,
};

#[derive(Debug, Clone, Copy)]
struct Slot {
    seq: u64,
    lat: i64,
    tx: u64,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Run {
    pub(crate) len: u64,
    pub(crate) lost: u64,
    pub(crate) start_seq: u64,
    pub(crate) first_tx: Option<u64>,
    pub(crate) last_tx: Option<u64>,
    pub(crate) peak: Option<i64>,
    pub(crate) peak_tx: Option<u64>,
    pub(crate) prev_start: Option<u64>,
}

#[derive(Debug)]
pub(crate) struct FlowState {
    id: u16,
    sent: Option<u64>,
    warmup: u64,
    lo: u64,
    hi_excl: u64,
    ring: Vec<Slot>,
    mask: u64,
    base: u64,
    highest: Option<u64>,
    max_seq_any: Option<u64>,
    received: u64,
    duplicated: u64,
    reordered: u64,
    beyond_window: u64,
    beyond_sent: u64,
    late: u64,
    arrivals: u64,
    breakpoints: VecDeque<(u64, u64)>,
    prev: Option<(u64, i64, u64)>,
    last_released_tx: Option<u64>,
    burst: u64,
    runs: Vec<Run>,
    lat: Option<Distribution>,
}

/// Per-spec aggregate of anomalies.
#[derive(Debug, Clone)]
pub(crate) struct AnomAgg {
    count: u64,
    packets: u64,
    longest: u64,
    lost: u64,
    durations: Distribution,
    inter: Distribution,
    hourly: BTreeMap<u64, u64>,
    events: Vec<AnomalyEvent>,
    truncated: bool,
}

/// One open time window.
#[derive(Debug, Clone)]
struct Win {
    lat: Distribution,
    lost: u64,
}

/// The streaming analysis; see the module docs.
pub struct Engine {
    cfg: AnalysisConfig,
    opts: Options,
    specs: Vec<AnomalySpec>,
    window_mask: u64,
    flows: Vec<Option<Box<FlowState>>>,
    flow_ids: Vec<u16>,
    sent_given: bool,
    trim: Option<(u64, u64)>,
    origin: Option<u64>,
    lat: Distribution,
    ipdv: Distribution,
    ipdv_abs: Distribution,
    consec: Distribution,
    extent: Distribution,
    bursts: Distribution,
    rfc3550: f64,
    prev_lat: Option<i64>,
    rx_min: u64,
    rx_max: u64,
    tx_min: u64,
    tx_max: u64,
    worst: BinaryHeap<Reverse<WorstKey>>,
    anom: Vec<AnomAgg>,
    windows: BTreeMap<u64, Win>,
    closed_windows: Vec<WindowStats>,
    window_hists: Vec<(u64, hdrhistogram::Histogram<u64>)>,
    clamped: u64,
    pushes: u64,
    /// `(min, max)` latency per series slice (`i64::MAX, i64::MIN` when empty).
    series: Vec<(i64, i64)>,
    tx_gap: Option<Distribution>,
}

fn lat_of(r: &Record) -> (i64, bool) {
    latency(r.tx_ns, r.rx_ns)
}

/// `rx - tx` as i64, clamped to the i64 range; `true` when it was clamped.
#[inline]
pub(crate) fn latency(tx_ns: u64, rx_ns: u64) -> (i64, bool) {
    let lat = i128::from(rx_ns) - i128::from(tx_ns);
    match i64::try_from(lat) {
        Ok(v) => (v, false),
        Err(_) => (if lat < 0 { i64::MIN } else { i64::MAX }, true),
    }
}

impl Engine {
    /// A new pass. `sent` are the generator's counts when known before the
    /// records (warm-up is only excluded when they are).
    pub fn new(cfg: &AnalysisConfig, opts: &Options, sent: Option<&[FlowSent]>) -> Engine {
        let w = opts.reorder_window.clamp(2, 1 << 26).next_power_of_two();
        let trim = opts.tx_span.and_then(|(a, b)| {
            if opts.trim_start_ns == 0 && opts.trim_end_ns == 0 {
                None
            } else {
                Some((
                    a.saturating_add(opts.trim_start_ns),
                    b.saturating_sub(opts.trim_end_ns),
                ))
            }
        });
        let mut e = Engine {
            cfg: cfg.clone(),
            opts: opts.clone(),
            specs: cfg.anomalies.clone(),
            window_mask: w - 1,
            flows: Vec::new(),
            flow_ids: Vec::new(),
            sent_given: sent.is_some(),
            trim,
            origin: trim.map(|t| t.0),
            lat: Distribution::new(opts.exact_limit, opts.hdr_digits),
            // Secondary distributions stay exact up to 2^20 values (8 MiB each).
            ipdv: Distribution::new(secondary_limit(opts.exact_limit), opts.hdr_digits),
            ipdv_abs: Distribution::new(secondary_limit(opts.exact_limit), opts.hdr_digits),
            consec: Distribution::new(secondary_limit(opts.exact_limit), opts.hdr_digits),
            extent: Distribution::new(1 << 16, opts.hdr_digits),
            bursts: Distribution::new(1 << 16, opts.hdr_digits),
            rfc3550: 0.0,
            prev_lat: None,
            rx_min: u64::MAX,
            rx_max: 0,
            tx_min: u64::MAX,
            tx_max: 0,
            worst: BinaryHeap::new(),
            anom: Vec::new(),
            windows: BTreeMap::new(),
            closed_windows: Vec::new(),
            window_hists: Vec::new(),
            clamped: 0,
            pushes: 0,
            series: Vec::new(),
            // Exact up to 2^20 gaps whatever the latency's limit: the self-check
            // bins them by value, and a gap is about the same everywhere.
            tx_gap: opts
                .tx_gaps
                .then(|| Distribution::new(SECONDARY_EXACT, opts.hdr_digits)),
        };
        e.anom = e
            .specs
            .iter()
            .map(|_| AnomAgg::new(opts.hdr_digits))
            .collect();
        if let Some(sent) = sent {
            for fs in sent {
                let f = e.flow_mut(fs.flow);
                if f.sent.is_none() {
                    f.sent = Some(fs.sent);
                    f.warmup = fs.warmup;
                    f.lo = fs.warmup;
                    f.base = fs.warmup;
                }
            }
        }
        e
    }

    /// Reserve room for `n` records in the exact latency store.
    pub fn reserve(&mut self, n: u64) {
        self.lat.reserve(n);
    }

    fn flow_mut(&mut self, id: u16) -> &mut FlowState {
        let i = usize::from(id);
        if self.flows.len() <= i {
            self.flows.resize_with(i + 1, || None);
        }
        if self.flows[i].is_none() {
            self.flow_ids.push(id);
            let per_flow = self.opts.per_flow_latency;
            let (limit, digits) = (0, self.opts.hdr_digits);
            self.flows[i] = Some(Box::new(FlowState {
                id,
                sent: None,
                warmup: 0,
                lo: 0,
                hi_excl: u64::MAX,
                ring: Vec::new(),
                mask: self.window_mask,
                base: 0,
                highest: None,
                max_seq_any: None,
                received: 0,
                duplicated: 0,
                reordered: 0,
                beyond_window: 0,
                beyond_sent: 0,
                late: 0,
                arrivals: 0,
                breakpoints: VecDeque::new(),
                prev: None,
                last_released_tx: None,
                burst: 0,
                runs: vec![Run::default(); self.specs.len()],
                lat: per_flow.then(|| Distribution::new(limit, digits)),
            }));
        }
        self.flows[i].as_mut().unwrap_or_else(|| unreachable!())
    }

    /// Feed a block of records in arrival order.
    pub fn push_all(&mut self, records: &[Record]) {
        for r in records {
            self.push(r);
        }
    }

    /// Feed one record (arrival order). Returns whether it is measured: not
    /// warm-up, not trimmed, not a duplicate copy, not later than the
    /// reorder window (see [`crate::record_table`]).
    pub fn push(&mut self, r: &Record) -> bool {
        self.pushes += 1;
        if self.pushes & 0xfff == 0 && self.opts.window_ns.is_some() {
            self.close_windows(false);
        }
        let (lat, clamped) = lat_of(r);
        let trim = self.trim;
        let deadline = self.opts.deadline_ns;
        let idx = usize::from(r.flow);
        if self.flows.get(idx).is_none_or(|f| f.is_none()) {
            self.flow_mut(r.flow);
        }
        let mut f = self.flows[idx].take().unwrap_or_else(|| unreachable!());
        f.max_seq_any = Some(f.max_seq_any.map_or(r.seq, |m| m.max(r.seq)));
        let accepted = self.accept(&mut f, r, lat, trim);
        if accepted {
            if clamped {
                self.clamped += 1;
            }
            if let Some(d) = deadline {
                if i128::from(lat) > i128::from(d) {
                    f.late += 1;
                }
            }
            if let Some(l) = &mut f.lat {
                l.record(lat);
            }
        }
        self.flows[idx] = Some(f);
        if !accepted {
            return false;
        }
        // ---- arrival-order metrics ----
        self.lat.record(lat);
        if let Some(p) = self.prev_lat {
            let d = (i128::from(lat) - i128::from(p)).unsigned_abs();
            let d = u64::try_from(d).unwrap_or(u64::MAX);
            // RFC 3550 §6.4.1: J += (|D| - J) / 16
            self.rfc3550 += (d as f64 - self.rfc3550) / 16.0;
            self.consec.record(d.min(i64::MAX as u64) as i64);
        }
        self.prev_lat = Some(lat);
        self.rx_min = self.rx_min.min(r.rx_ns);
        self.rx_max = self.rx_max.max(r.rx_ns);
        self.tx_min = self.tx_min.min(r.tx_ns);
        self.tx_max = self.tx_max.max(r.tx_ns);
        if self.origin.is_none() {
            self.origin = Some(r.tx_ns);
        }
        if self.opts.worst_n > 0 {
            let key = (lat, r.tx_ns, r.flow, r.seq, r.rx_ns);
            if self.worst.len() < self.opts.worst_n {
                self.worst.push(Reverse(key));
            } else if self.worst.peek().is_some_and(|Reverse(m)| key.0 > m.0) {
                self.worst.pop();
                self.worst.push(Reverse(key));
            }
        }
        true
    }

    /// Per-flow bookkeeping of one record; `true` if it is a measured first copy.
    fn accept(
        &mut self,
        f: &mut FlowState,
        r: &Record,
        lat: i64,
        trim: Option<(u64, u64)>,
    ) -> bool {
        let s = r.seq;
        if s < f.lo || s >= f.hi_excl {
            return false;
        }
        if let Some((start, end)) = trim {
            if r.tx_ns < start {
                // tx grows with seq within a flow: every seq <= s is before the start.
                f.lo = f.lo.max(s.saturating_add(1));
                if f.base < f.lo {
                    f.base = f.lo;
                }
                return false;
            }
            if r.tx_ns > end {
                f.hi_excl = f.hi_excl.min(s);
                return false;
            }
        }
        if let Some(sent) = f.sent {
            if s >= sent {
                f.beyond_sent += 1;
            }
        }
        if f.ring.is_empty() {
            // Start small and grow up to the reorder window: most flows of a
            // short trace never need the whole window.
            f.mask = self.window_mask.min(1023);
            f.ring = vec![EMPTY_SLOT; (f.mask + 1) as usize];
        }
        // Grow only when the number fits in the full window; a jump beyond
        // it releases everything anyway.
        while s >= f.base && s - f.base > f.mask && s - f.base <= self.window_mask {
            let size = (f.mask + 1) * 2;
            let mut ring = vec![EMPTY_SLOT; size as usize];
            for slot in f.ring.iter().filter(|x| x.seq != EMPTY) {
                ring[(slot.seq & (size - 1)) as usize] = *slot;
            }
            f.ring = ring;
            f.mask = size - 1;
        }
        if s < f.base {
            // Later than the reorder window: its number was already released
            // as missing, so it counts as lost (late equals lost), like a
            // packet past a deadline. It may also be a duplicate; we cannot
            // tell any more.
            f.beyond_window += 1;
            return false;
        }
        if s - f.base > f.mask {
            let to = s - f.mask;
            self.release(f, to);
        }
        let slot = &mut f.ring[(s & f.mask) as usize];
        if slot.seq == s {
            f.duplicated += 1;
            return false;
        }
        *slot = Slot {
            seq: s,
            lat,
            tx: r.tx_ns,
        };
        f.received += 1;
        f.arrivals += 1;
        let pos = f.arrivals;
        match f.highest {
            Some(h) if s < h => {
                f.reordered += 1;
                // RFC 4737 §4.2.2: extent = i - j, j the earliest arrival of
                // a packet with a higher seq = the arrival that first raised
                // the highest seq above s.
                let k = f.breakpoints.partition_point(|b| b.0 <= s);
                if let Some(&(_, j)) = f.breakpoints.get(k) {
                    self.extent.record((pos - j) as i64);
                }
            }
            _ => {
                f.highest = Some(s);
                f.breakpoints.push_back((s, pos));
                while f.breakpoints.len() > 1 && f.breakpoints.front().is_some_and(|b| b.0 < f.base)
                {
                    f.breakpoints.pop_front();
                }
            }
        }
        true
    }

    /// Release every sequence number below `to` from the ring, in order.
    fn release(&mut self, f: &mut FlowState, to: u64) {
        while f.base < to {
            let b = f.base;
            if f.highest.is_none_or(|h| b > h) {
                self.missing(f, b, to - b);
                f.base = to;
                break;
            }
            let i = (b & f.mask) as usize;
            let slot = f.ring[i];
            if slot.seq == b {
                f.ring[i].seq = EMPTY;
                self.present(f, slot);
                f.base += 1;
            } else {
                // Coalesce a gap of missing numbers. Stored numbers lie in
                // base..=base+mask, so the scan stops there at the latest.
                let h = f.highest.unwrap_or(b);
                let limit = to
                    .min(b.saturating_add(f.mask + 1))
                    .min(h.saturating_add(1));
                let mut end = b + 1;
                while end < limit && f.ring[(end & f.mask) as usize].seq != end {
                    end += 1;
                }
                if end == limit
                    && limit < to
                    && (limit > h || limit == b.saturating_add(f.mask + 1))
                {
                    end = to;
                }
                self.missing(f, b, end - b);
                f.base = end;
            }
        }
    }

    fn window_of(&self, tx: u64) -> Option<u64> {
        let w = self.opts.window_ns?;
        let origin = self.origin.unwrap_or(tx);
        Some(tx.saturating_sub(origin) / w.max(1))
    }

    fn win(&mut self, idx: u64) -> &mut Win {
        let (limit, digits) = (self.opts.exact_limit.min(1 << 20), self.opts.hdr_digits);
        self.windows.entry(idx).or_insert_with(|| Win {
            lat: Distribution::new(limit, digits),
            lost: 0,
        })
    }

    fn present(&mut self, f: &mut FlowState, s: Slot) {
        if let Some((ps, pl, _)) = f.prev {
            if ps.checked_add(1) == Some(s.seq) {
                let d = i128::from(s.lat) - i128::from(pl);
                let d = d.clamp(i128::from(i64::MIN + 1), i128::from(i64::MAX)) as i64;
                self.ipdv.record(d);
                self.ipdv_abs.record(d.abs());
                if let Some(g) = &mut self.tx_gap {
                    g.record((i128::from(s.tx) - i128::from(f.prev.map_or(0, |p| p.2))) as i64);
                }
            }
        }
        if f.burst > 0 {
            self.bursts.record(f.burst as i64);
            f.burst = 0;
        }
        for k in 0..self.specs.len() {
            let spec = self.specs[k];
            if spec.above(s.lat) {
                let run = &mut f.runs[k];
                if run.len == 0 {
                    run.start_seq = s.seq;
                    run.first_tx = Some(s.tx);
                } else if run.first_tx.is_none() {
                    run.first_tx = f.prev.map(|p| p.2).or(Some(s.tx));
                }
                run.len += 1;
                run.last_tx = Some(s.tx);
                if run.peak.is_none_or(|p| s.lat > p) {
                    run.peak = Some(s.lat);
                    run.peak_tx = Some(s.tx);
                }
            } else {
                self.close_run(f.id, &mut f.runs[k], k);
            }
        }
        if let Some(w) = self.window_of(s.tx) {
            self.win(w).lat.record(s.lat);
        }
        if let Some(slice_ns) = self.opts.series_ns {
            self.series_record(s.tx, s.lat, slice_ns);
        }
        f.prev = Some((s.seq, s.lat, s.tx));
        f.last_released_tx = Some(s.tx);
    }

    fn series_record(&mut self, tx: u64, lat: i64, slice_ns: u64) {
        let origin = self.origin.unwrap_or(tx);
        let Ok(i) = usize::try_from(tx.saturating_sub(origin) / slice_ns.max(1)) else {
            return;
        };
        if i >= MAX_SERIES_SLICES {
            return;
        }
        if i >= self.series.len() {
            self.series.resize(i + 1, (i64::MAX, i64::MIN));
        }
        let m = &mut self.series[i];
        m.0 = m.0.min(lat);
        m.1 = m.1.max(lat);
    }

    /// The non-empty series slices, in time order.
    fn take_series(&mut self) -> Vec<LatencySlice> {
        let (Some(w), Some(origin)) = (self.opts.series_ns, self.origin) else {
            return Vec::new();
        };
        std::mem::take(&mut self.series)
            .into_iter()
            .enumerate()
            .filter(|(_, m)| m.0 <= m.1)
            .map(|(i, m)| LatencySlice {
                start_ns: origin.saturating_add((i as u64).saturating_mul(w)),
                min_ns: m.0,
                max_ns: m.1,
            })
            .collect()
    }

    fn missing(&mut self, f: &mut FlowState, first: u64, count: u64) {
        // Numbers at or beyond the measured end are not losses.
        let end = first
            .saturating_add(count)
            .min(f.hi_excl)
            .min(f.sent.unwrap_or(u64::MAX));
        if end <= first {
            return;
        }
        let count = end - first;
        f.burst += count;
        let prev_tx = f.prev.map(|p| p.2);
        for k in 0..self.specs.len() {
            match self.specs[k].lost {
                LostMode::Break => self.close_run(f.id, &mut f.runs[k], k),
                LostMode::Skip => {}
                LostMode::Inf => {
                    let run = &mut f.runs[k];
                    if run.len == 0 {
                        run.start_seq = first;
                        run.first_tx = prev_tx;
                    }
                    run.len += count;
                    run.lost += count;
                }
            }
        }
        if let Some(tx) = prev_tx.or(self.origin) {
            if let Some(w) = self.window_of(tx) {
                self.win(w).lost += count;
            }
        }
    }

    fn close_run(&mut self, flow: u16, run: &mut Run, k: usize) {
        if run.len == 0 {
            return;
        }
        let origin = self.origin.unwrap_or(0);
        let n = self.specs[k].n;
        let events = self.opts.anomaly_events;
        self.anom[k].add(flow, run, n, origin, events);
        let prev_start = run.prev_start;
        *run = Run {
            prev_start,
            ..Run::default()
        };
    }

    /// Close windows every flow's ordered stream has passed (all at `finish`).
    fn close_windows(&mut self, all: bool) {
        let Some(w) = self.opts.window_ns else { return };
        let limit = if all {
            u64::MAX
        } else {
            let mut min_tx: Option<u64> = None;
            for f in self.flows.iter().flatten() {
                if let Some(t) = f.last_released_tx {
                    min_tx = Some(min_tx.map_or(t, |m| m.min(t)));
                } else {
                    return;
                }
            }
            match (min_tx, self.window_of(min_tx.unwrap_or(0))) {
                (Some(_), Some(i)) => i,
                _ => return,
            }
        };
        while let Some((&idx, _)) = self.windows.first_key_value() {
            if idx >= limit {
                break;
            }
            let Some((idx, mut win)) = self.windows.pop_first() else {
                break;
            };
            let q = win
                .lat
                .quantiles(&[Pct { num: 1, den: 2 }, Pct { num: 99, den: 100 }]);
            let packets = win.lat.count();
            let start = self
                .origin
                .unwrap_or(0)
                .saturating_add(idx.saturating_mul(w));
            self.closed_windows.push(WindowStats {
                index: idx,
                start_ns: start,
                end_ns: start.saturating_add(w),
                packets,
                lost: win.lost,
                loss_ratio: if packets + win.lost == 0 {
                    0.0
                } else {
                    win.lost as f64 / (packets + win.lost) as f64
                },
                min_ns: win.lat.min(),
                mean_ns: win.lat.mean(),
                p50_ns: q[0].map(|q| q.value),
                p99_ns: q[1].map(|q| q.value),
                max_ns: win.lat.max(),
            });
            if self.opts.interval_log {
                self.window_hists.push((idx, win.lat.to_hdr()));
            }
        }
    }

    /// End the pass: release what the reorder rings hold, close every open
    /// run and window. `sent` as in [`Engine::finish`] (which then builds the
    /// summary, in `metrics`). Returns the flow ids, the notes so far, the
    /// series and the tx gaps.
    pub(crate) fn close(
        &mut self,
        sent: Option<&[FlowSent]>,
    ) -> (
        Vec<u16>,
        Vec<String>,
        Vec<LatencySlice>,
        Option<Distribution>,
    ) {
        let mut notes = Vec::new();
        if let Some(sent) = sent {
            if !self.sent_given {
                let mut seen = std::collections::HashSet::new();
                for fs in sent {
                    if !seen.insert(fs.flow) {
                        notes.push(format!(
                            "flow {} has more than one sent count; the first one is used",
                            fs.flow
                        ));
                        continue;
                    }
                    let f = self.flow_mut(fs.flow);
                    f.sent = Some(fs.sent);
                }
            }
        }
        if !self.sent_given {
            // Duplicate flow entries in the sent list given to new().
        }
        let mut ids = self.flow_ids.clone();
        ids.sort_unstable();
        // Release everything, then the trailing losses.
        for &id in &ids {
            let mut f = self.flows[usize::from(id)]
                .take()
                .unwrap_or_else(|| unreachable!());
            let sent_total = match f.sent {
                Some(s) => s,
                None => {
                    let s = f.max_seq_any.map_or(0, |m| m.saturating_add(1));
                    if f.max_seq_any.is_some() {
                        notes.push(format!(
                            "flow {id} has records but no sent count; sent is taken as highest seq + 1 = {s}"
                        ));
                    }
                    f.sent = Some(s);
                    s
                }
            };
            if f.warmup > sent_total {
                notes.push(format!(
                    "flow {id}: warm-up {} is larger than the sent count {sent_total}; no packet of it is measured",
                    f.warmup
                ));
            }
            let top = f.highest.map_or(f.base, |h| h.saturating_add(1));
            self.release(&mut f, top);
            let end = sent_total.min(f.hi_excl);
            if end > f.base {
                let b = f.base;
                self.missing(&mut f, b, end - b);
                f.base = end;
            }
            if f.burst > 0 {
                self.bursts.record(f.burst as i64);
                f.burst = 0;
            }
            let mut runs = std::mem::take(&mut f.runs);
            for (k, run) in runs.iter_mut().enumerate() {
                self.close_run(id, run, k);
            }
            self.flows[usize::from(id)] = Some(f);
        }
        self.close_windows(true);
        (ids, notes, self.take_series(), self.tx_gap.take())
    }

    // ---- accessors for assemble() ----
    pub(crate) fn parts(&mut self) -> EngineParts<'_> {
        EngineParts {
            cfg: &self.cfg,
            opts: &self.opts,
            specs: &self.specs,
            flows: &mut self.flows,
            lat: &mut self.lat,
            ipdv: &mut self.ipdv,
            ipdv_abs: &mut self.ipdv_abs,
            consec: &mut self.consec,
            extent: &mut self.extent,
            bursts: &mut self.bursts,
            rfc3550: self.rfc3550,
            rx: (self.rx_min, self.rx_max),
            tx: (self.tx_min, self.tx_max),
            trim: self.trim,
            worst: &mut self.worst,
            anom: &mut self.anom,
            windows: &mut self.closed_windows,
            window_hists: &mut self.window_hists,
            clamped: self.clamped,
        }
    }
}

pub(crate) struct EngineParts<'a> {
    pub cfg: &'a AnalysisConfig,
    pub opts: &'a Options,
    pub specs: &'a [AnomalySpec],
    pub flows: &'a mut Vec<Option<Box<FlowState>>>,
    pub lat: &'a mut Distribution,
    pub ipdv: &'a mut Distribution,
    pub ipdv_abs: &'a mut Distribution,
    pub consec: &'a mut Distribution,
    pub extent: &'a mut Distribution,
    pub bursts: &'a mut Distribution,
    pub rfc3550: f64,
    pub rx: (u64, u64),
    pub tx: (u64, u64),
    pub trim: Option<(u64, u64)>,
    pub worst: &'a mut BinaryHeap<Reverse<WorstKey>>,
    pub anom: &'a mut Vec<AnomAgg>,
    pub windows: &'a mut Vec<WindowStats>,
    pub window_hists: &'a mut Vec<(u64, hdrhistogram::Histogram<u64>)>,
    pub clamped: u64,
}

/// Read-only view of a flow for `assemble`.
pub(crate) struct FlowView {
    pub sent: u64,
    pub warmup: u64,
    pub lo: u64,
    pub hi_excl: u64,
    pub received: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub beyond_window: u64,
    pub beyond_sent: u64,
    pub late: u64,
    pub lat: Option<Distribution>,
}

impl FlowState {
    pub(crate) fn view(&mut self) -> FlowView {
        FlowView {
            sent: self.sent.unwrap_or(0),
            warmup: self.warmup,
            lo: self.lo,
            hi_excl: self.hi_excl,
            received: self.received,
            duplicated: self.duplicated,
            reordered: self.reordered,
            beyond_window: self.beyond_window,
            beyond_sent: self.beyond_sent,
            late: self.late,
            lat: self.lat.take(),
        }
    }
}

impl AnomAgg {
    /// No anomalies yet.
    pub(crate) fn new(hdr_digits: u8) -> AnomAgg {
        AnomAgg {
            count: 0,
            packets: 0,
            longest: 0,
            lost: 0,
            durations: Distribution::new(1 << 16, hdr_digits),
            inter: Distribution::new(1 << 16, hdr_digits),
            hourly: BTreeMap::new(),
            events: Vec::new(),
            truncated: false,
        }
    }

    /// Count the finished run `run` of `flow` if it is at least `n` long
    /// (`origin`: start of hour 0; `events`: how many events to list).
    /// Updates `run.prev_start` for the inter-anomaly time.
    pub(crate) fn add(&mut self, flow: u16, run: &mut Run, n: u32, origin: u64, events: usize) {
        if run.len < u64::from(n.max(1)) {
            return;
        }
        self.count += 1;
        self.packets += run.len;
        self.lost += run.lost;
        self.longest = self.longest.max(run.len);
        let duration = match (run.first_tx, run.last_tx) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        self.durations.record(duration.min(i64::MAX as u64) as i64);
        if let Some(start) = run.first_tx {
            if let Some(p) = run.prev_start {
                self.inter
                    .record(start.saturating_sub(p).min(i64::MAX as u64) as i64);
            }
            run.prev_start = Some(start);
            *self
                .hourly
                .entry(start.saturating_sub(origin) / 3_600_000_000_000)
                .or_default() += 1;
        }
        if self.events.len() < events {
            self.events.push(AnomalyEvent {
                flow,
                start_seq: run.start_seq,
                start_tx_ns: run.first_tx,
                packets: run.len,
                lost: run.lost,
                duration_ns: duration,
                peak_ns: run.peak,
                peak_tx_ns: run.peak_tx,
            });
        } else {
            self.truncated = true;
        }
    }

    pub(crate) fn detail(&mut self, spec: &AnomalySpec, span_ns: Option<u64>) -> AnomalyDetail {
        let pcts = [
            Pct { num: 1, den: 2 },
            Pct { num: 9, den: 10 },
            Pct { num: 99, den: 100 },
        ];
        let q = self.inter.quantiles(&pcts);
        let hours = span_ns.map(|s| s as f64 / 3.6e12).filter(|h| *h > 0.0);
        let n_hours = self.hourly.keys().next_back().map_or(0, |h| h + 1);
        // A dense list for spans up to ~1 year; garbage timestamps give none.
        let mut hourly = vec![
            0u64;
            if n_hours <= 10_000 {
                n_hours as usize
            } else {
                0
            }
        ];
        for (&h, &c) in &self.hourly {
            if let Some(x) = hourly.get_mut(h as usize) {
                *x = c;
            }
        }
        AnomalyDetail {
            spec: spec.to_string(),
            n: spec.n,
            t_ns: spec.t_ns,
            cmp: spec.cmp,
            lost_mode: spec.lost,
            count: self.count,
            packets: self.packets,
            lost_packets: self.lost,
            longest: self.longest,
            per_hour: hours.map(|h| self.count as f64 / h),
            hourly,
            duration_ns: StatSummary::of(&mut self.durations),
            inter_anomaly_ns: InterStats {
                count: self.inter.count(),
                min: self.inter.min(),
                mean: self.inter.mean(),
                p50: q[0].map(|q| q.value),
                p90: q[1].map(|q| q.value),
                p99: q[2].map(|q| q.value),
                max: self.inter.max(),
            },
            events: std::mem::take(&mut self.events),
            events_truncated: self.truncated,
        }
    }
}

impl Engine {
    /// Start of window 0 (tx clock), ns.
    pub(crate) fn origin(&self) -> Option<u64> {
        self.origin
    }
}

impl Engine {
    /// Sent counts `highest seq + 1` per flow seen so far (inputs without
    /// sent counts, like CSV).
    pub fn sent_from_highest_seq(&self) -> Vec<FlowSent> {
        self.flows
            .iter()
            .flatten()
            .filter_map(|f| {
                f.max_seq_any.map(|m| FlowSent {
                    flow: f.id,
                    sent: m.saturating_add(1),
                    warmup: 0,
                })
            })
            .collect()
    }
}

pub(crate) fn secondary_limit(exact_limit: u64) -> u64 {
    if exact_limit == u64::MAX {
        u64::MAX
    } else {
        exact_limit.min(SECONDARY_EXACT)
    }
}
