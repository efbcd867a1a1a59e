//! Bounded reductions of a run too long to hold per packet.
//!
//! A run over the exact budget ([`crate::load::EXACT_PACKETS`]) is read once,
//! block by block, into fixed-size state: an HDR histogram of latency, a
//! grid of [`TIME_SLICES`] time slices with the min and max latency of each
//! (the latency-over-time columns are assembled from them), for the first
//! run of a configuration a grid of [`WINDOW_SLICES`] slices with a small HDR
//! histogram each (p50/p99 per window), the worst packets in a heap, and the
//! anomalies and transmit gaps from a per-flow reorder ring that releases
//! packets in sequence order. Memory does not grow with the number of
//! packets.
//!
//! The grids are dyadic: a slice is `2^k` ns wide and aligned to a fixed
//! anchor, so when the run outgrows the grid, pairs of slices merge exactly
//! into slices twice as wide.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use hdrhistogram::Histogram;

use crate::lat::HdrLat;
use crate::load::Pkt;
use crate::stats::{Anomaly, Window};

/// Time slices of the latency-over-time grid of a run.
pub const TIME_SLICES: usize = 16_384;
/// Time slices of the per-window percentile grid.
pub const WINDOW_SLICES: usize = 1_024;
/// Significant digits of the per-window histograms (values within 1 %).
pub const WINDOW_DIGITS: u8 = 2;
/// Sequence numbers per flow held for duplicate detection and sequence
/// order (the default reorder window of `nflab analyze`).
pub const REORDER_WINDOW: u64 = 1 << 16;
/// Anomalies kept per definition and run (all are counted).
pub const MAX_ANOMALIES: usize = 100_000;

/// Content of one grid slice.
pub trait Slot: Default {
    /// Fold `o` (the adjacent slice) into this one.
    fn merge(&mut self, o: Self);
    /// Nothing recorded.
    fn is_empty(&self) -> bool;
}

/// How a grid's slice width grows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Widths {
    /// 1, 2, 4, 8, … ns: each step merges pairs (the grid stays ≥ half full).
    Dyadic,
    /// 1, 5, 10, 50, 100, … ns: every width divides every window width of
    /// the `windows` figure (1-2-5 × 10^k, at least 3 slices wide), so
    /// windows are exact unions of slices.
    Decimal,
}

impl Widths {
    fn next(self, w: u64) -> u64 {
        let f = match self {
            Widths::Dyadic => 2,
            Widths::Decimal if leading_digit(w) == 1 => 5,
            Widths::Decimal => 2,
        };
        w.saturating_mul(f)
    }
}

fn leading_digit(mut w: u64) -> u64 {
    while w >= 10 {
        w /= 10;
    }
    w
}

/// Slices of `width` ns from `anchor`, at most `bins.len()` of them; when
/// the data outgrow them, adjacent slices merge exactly into wider ones.
#[derive(Debug, Clone)]
pub struct Grid<B> {
    anchor: u64,
    width: u64,
    widths: Widths,
    lo: i64,
    bins: Vec<B>,
    used: Option<(i64, i64)>,
    /// The last slice hit: `[start, end)` absolute ns and its index, so
    /// packets in time order skip the division.
    cur: (u64, u64, i64),
}

impl<B: Slot> Grid<B> {
    /// `size` slices, the narrowest of the sequence that hold `span_hint`
    /// ns from `anchor` (the grid widens itself when the hint is wrong).
    pub fn new(anchor: u64, span_hint: u64, size: usize, widths: Widths) -> Grid<B> {
        let mut width = 1u64;
        while span_hint / width >= size as u64 {
            width = widths.next(width);
        }
        let mut bins = Vec::with_capacity(size);
        bins.resize_with(size, B::default);
        Grid {
            anchor,
            width,
            widths,
            lo: 0,
            bins,
            used: None,
            cur: (1, 0, 0),
        }
    }

    #[inline]
    fn index(&self, t: u64) -> i64 {
        let d = (i128::from(t) - i128::from(self.anchor)).div_euclid(i128::from(self.width));
        // A quarter of the range: index arithmetic below cannot overflow.
        d.clamp(i128::from(i64::MIN / 4), i128::from(i64::MAX / 4)) as i64
    }

    /// The slice holding time `t` (absolute ns).
    #[inline]
    pub fn at(&mut self, t: u64) -> &mut B {
        let j = if t >= self.cur.0 && t < self.cur.1 {
            self.cur.2
        } else {
            let mut j = self.index(t);
            let size = self.bins.len() as i64;
            if self.used.is_none() || j < self.lo || j >= self.lo + size {
                self.refit(j);
                j = self.index(t);
            }
            if let Some((a, b)) = &mut self.used {
                *a = (*a).min(j);
                *b = (*b).max(j);
            }
            let start = i128::from(self.anchor) + i128::from(j) * i128::from(self.width);
            let end = start + i128::from(self.width);
            self.cur = match (u64::try_from(start), u64::try_from(end)) {
                (Ok(a), Ok(b)) => (a, b, j),
                _ => (1, 0, 0),
            };
            j
        };
        &mut self.bins[(j - self.lo) as usize]
    }

    /// Make index `j` fit: widen the slices (merging neighbours) until the
    /// used range and `j` span fewer than `size` slices, then place them.
    fn refit(&mut self, j: i64) {
        let size = self.bins.len() as i64;
        let (a, b) = match self.used {
            Some((a, b)) => (a.min(j), b.max(j)),
            None => (j, j),
        };
        let mut f = 1u64;
        let mut width = self.width;
        while b.div_euclid(f as i64) - a.div_euclid(f as i64) >= size {
            let w = self.widths.next(width);
            f = f.saturating_mul(w / width.max(1));
            width = w;
        }
        let f = f as i64;
        let (na, nb) = (a.div_euclid(f), b.div_euclid(f));
        // Leave the free slices on the side the data grows towards.
        let left = self.used.is_some_and(|(ua, _)| j < ua);
        let nlo = if left { nb - size + 1 } else { na };
        let old = std::mem::take(&mut self.bins);
        let mut bins: Vec<B> = Vec::with_capacity(old.len());
        bins.resize_with(old.len(), B::default);
        for (i, bin) in old.into_iter().enumerate() {
            if !bin.is_empty() {
                let nj = (self.lo + i as i64).div_euclid(f);
                bins[(nj - nlo) as usize].merge(bin);
            }
        }
        self.bins = bins;
        self.lo = nlo;
        self.width = width;
        self.used = Some((na, nb));
        self.cur = (1, 0, 0);
    }

    /// Slice width, ns.
    pub fn width(&self) -> u64 {
        self.width
    }

    /// Non-empty slices: (start, absolute ns; slice).
    pub fn slices(&self) -> impl Iterator<Item = (i128, &B)> + '_ {
        self.bins
            .iter()
            .enumerate()
            .filter(|(_, b)| !b.is_empty())
            .map(|(i, b)| {
                (
                    i128::from(self.anchor)
                        + i128::from(self.lo + i as i64) * i128::from(self.width),
                    b,
                )
            })
    }
}

/// Min and max latency of a time slice.
#[derive(Debug, Clone, Copy)]
pub struct MinMax {
    /// Smallest latency, ns.
    pub min: i64,
    /// Largest latency, ns.
    pub max: i64,
}

impl Default for MinMax {
    fn default() -> Self {
        MinMax {
            min: i64::MAX,
            max: i64::MIN,
        }
    }
}

impl Slot for MinMax {
    fn merge(&mut self, o: Self) {
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }
    fn is_empty(&self) -> bool {
        self.min > self.max
    }
}

/// Latencies of a time slice for per-window percentiles: a small HDR
/// histogram (negative values counted as 0) and the exact maximum.
#[derive(Debug, Clone, Default)]
pub struct WinSlot {
    h: Option<Box<Histogram<u64>>>,
    n: u64,
    max: i64,
}

fn window_hist() -> Box<Histogram<u64>> {
    Box::new(Histogram::new(WINDOW_DIGITS).unwrap_or_else(|_| unreachable!("valid digits")))
}

impl WinSlot {
    #[inline]
    fn record(&mut self, v: i64) {
        let _ = self
            .h
            .get_or_insert_with(window_hist)
            .record(v.max(0) as u64);
        self.max = if self.n == 0 { v } else { self.max.max(v) };
        self.n += 1;
    }
}

impl Slot for WinSlot {
    fn merge(&mut self, o: Self) {
        if o.n == 0 {
            return;
        }
        self.max = if self.n == 0 {
            o.max
        } else {
            self.max.max(o.max)
        };
        self.n += o.n;
        match (&mut self.h, o.h) {
            (Some(h), Some(oh)) => {
                let _ = h.add(&*oh);
            }
            (None, oh) => self.h = oh,
            (_, None) => {}
        }
    }
    fn is_empty(&self) -> bool {
        self.n == 0
    }
}

/// Transmit gaps of consecutive sequence numbers, binned as the `ipg`
/// figure bins them (10 log-spaced bins per decade).
#[derive(Debug, Clone)]
pub struct Gaps {
    /// Configured gap 1/rate, ns.
    pub target_ns: f64,
    /// Gaps in bin `k`, i.e. in `[10^(k/10), 10^((k+1)/10))` ns (gaps
    /// below 1 ns in bin 0).
    pub bins: Vec<u64>,
    /// Number of gaps.
    pub total: u64,
    /// Σ (gap − target)², ns².
    pub sq_err: f64,
    /// `edges[k]`: the smallest gap with bin ≥ k (integer edges of the float
    /// bin rule, so binning costs a binary search, not a logarithm).
    edges: Vec<u64>,
    /// The last bin hit: consecutive gaps of a CBR stream mostly share it.
    last: usize,
}

/// The bin rule of the `ipg` figure: `floor(10 · log10(max(x, 1)))`.
pub fn gap_bin(x: f64) -> i64 {
    (x.max(1.0).log10() * 10.0).floor() as i64
}

impl Gaps {
    /// Empty, against the configured gap `target_ns`.
    pub fn new(target_ns: f64) -> Gaps {
        let mut edges = Vec::new();
        for k in 0..=193i64 {
            // Smallest integer x with gap_bin(x) >= k, near 10^(k/10).
            let mut x = 10f64.powf(k as f64 / 10.0).min(u64::MAX as f64) as u64;
            while x > 1 && gap_bin((x - 1) as f64) >= k {
                x -= 1;
            }
            while x < u64::MAX && gap_bin(x as f64) < k {
                x += 1;
            }
            edges.push(x);
        }
        Gaps {
            target_ns,
            bins: vec![0; edges.len()],
            total: 0,
            sq_err: 0.0,
            edges,
            last: 0,
        }
    }

    #[inline]
    fn in_bin(&self, k: usize, x: u64) -> bool {
        self.edges[k] <= x && (k + 1 == self.edges.len() || x < self.edges[k + 1])
    }

    #[inline]
    fn add(&mut self, g: i64) {
        let x = g.max(1) as u64;
        // Jittered gaps around one value mostly hit the last bin or a neighbour.
        let l = self.last;
        let k = if self.in_bin(l, x) {
            l
        } else if l + 1 < self.edges.len() && self.in_bin(l + 1, x) {
            l + 1
        } else if l > 0 && self.in_bin(l - 1, x) {
            l - 1
        } else {
            self.edges.partition_point(|&e| e <= x).saturating_sub(1)
        };
        self.last = k;
        self.bins[k] += 1;
        self.total += 1;
        let d = g as f64 - self.target_ns;
        self.sq_err += d * d;
    }
}

const EMPTY: u64 = u64::MAX;

#[derive(Debug, Clone, Copy)]
struct RingSlot {
    seq: u64,
    tx: u64,
    lat: i64,
}

const EMPTY_SLOT: RingSlot = RingSlot {
    seq: EMPTY,
    tx: 0,
    lat: 0,
};

/// What the sequence-order consumers collect across flows.
struct Sinks {
    specs: Vec<(u32, u64)>,
    found: Vec<Vec<Anomaly>>,
    dropped: Vec<u64>,
    gaps: Option<Gaps>,
}

enum Accept {
    Fresh,
    Duplicate,
    Late,
}

/// One flow: a ring of slots indexed by sequence number (duplicates are
/// the numbers already in it), released in sequence order to the anomaly
/// and gap consumers.
struct FlowState {
    flow: u16,
    base: u64,
    mask: u64,
    slots: Vec<RingSlot>,
    open: Vec<Option<(Anomaly, u64)>>,
    prev: Option<(u64, u64)>,
}

impl FlowState {
    fn new(flow: u16, base: u64, specs: usize) -> FlowState {
        FlowState {
            flow,
            base,
            mask: 1023,
            slots: vec![EMPTY_SLOT; 1024],
            open: vec![None; specs],
            prev: None,
        }
    }

    #[inline]
    fn accept(&mut self, s: u64, tx: u64, lat: i64, sinks: &mut Sinks) -> Accept {
        if s < self.base {
            return Accept::Late;
        }
        // Grow up to the reorder window before releasing anything.
        while s - self.base > self.mask && s - self.base < REORDER_WINDOW {
            let size = (self.mask + 1) * 2;
            let mut ring = vec![EMPTY_SLOT; size as usize];
            for x in self.slots.iter().filter(|x| x.seq != EMPTY) {
                ring[(x.seq & (size - 1)) as usize] = *x;
            }
            self.slots = ring;
            self.mask = size - 1;
        }
        if s - self.base > self.mask {
            self.release(s - self.mask, sinks);
        }
        let slot = &mut self.slots[(s & self.mask) as usize];
        if slot.seq == s {
            return Accept::Duplicate;
        }
        *slot = RingSlot { seq: s, tx, lat };
        Accept::Fresh
    }

    /// Release every sequence number below `to`, in order.
    fn release(&mut self, to: u64, sinks: &mut Sinks) {
        if to <= self.base {
            return;
        }
        let n = (to - self.base).min(self.mask + 1);
        for i in 0..n {
            let s = self.base + i;
            let slot = &mut self.slots[(s & self.mask) as usize];
            if slot.seq == s {
                let x = *slot;
                *slot = EMPTY_SLOT;
                self.emit(x, sinks);
            }
        }
        self.base = to;
    }

    /// One packet in sequence order: anomalies (docs/metrics.md) and gaps.
    fn emit(&mut self, p: RingSlot, sinks: &mut Sinks) {
        let arrival = (i128::from(p.tx) + i128::from(p.lat)).max(i128::from(p.tx)) as u64;
        for (i, &(n, t)) in sinks.specs.iter().enumerate() {
            let high = p.lat >= t as i64;
            let open = &mut self.open[i];
            if high {
                if let Some((a, last)) = open.as_mut().filter(|(_, l)| *l + 1 == p.seq) {
                    a.packets += 1;
                    a.t0_ns = a.t0_ns.min(p.tx);
                    a.t1_ns = a.t1_ns.max(arrival);
                    a.max_ns = a.max_ns.max(p.lat);
                    a.min_ns = a.min_ns.min(p.lat);
                    *last = p.seq;
                    continue;
                }
            }
            close(open.take(), n, &mut sinks.found[i], &mut sinks.dropped[i]);
            if high {
                *open = Some((
                    Anomaly {
                        flow: self.flow,
                        t0_ns: p.tx,
                        t1_ns: arrival,
                        packets: 1,
                        max_ns: p.lat,
                        min_ns: p.lat,
                    },
                    p.seq,
                ));
            }
        }
        if let Some(g) = &mut sinks.gaps {
            if let Some((ps, pt)) = self.prev {
                if ps + 1 == p.seq {
                    g.add(p.tx as i64 - pt as i64);
                }
            }
        }
        self.prev = Some((p.seq, p.tx));
    }

    fn finish(&mut self, sinks: &mut Sinks) {
        self.release(u64::MAX, sinks);
        for (i, &(n, _)) in sinks.specs.iter().enumerate() {
            close(
                self.open[i].take(),
                n,
                &mut sinks.found[i],
                &mut sinks.dropped[i],
            );
        }
    }
}

fn close(a: Option<(Anomaly, u64)>, n: u32, out: &mut Vec<Anomaly>, dropped: &mut u64) {
    if let Some((a, _)) = a {
        if a.packets >= u64::from(n.max(1)) {
            if out.len() < MAX_ANOMALIES {
                out.push(a);
            } else {
                *dropped += 1;
            }
        }
    }
}

/// What the streaming pass needs to know before it starts.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Anomaly definitions `(n, t_ns)` of the experiment.
    pub specs: Vec<(u32, u64)>,
    /// Configured transmit gap of a CBR run, ns: collect the gaps.
    pub target_gap_ns: Option<f64>,
    /// Keep per-window histograms (the first run of a configuration).
    pub windows: bool,
    /// Packets kept as the worst.
    pub worst_n: usize,
    /// First sequence number measured, per flow (warm-up before it).
    pub first_seq: BTreeMap<u16, u64>,
    /// First and last transmit time from the file's first and last blocks.
    pub span_hint: Option<(u64, u64)>,
}

/// Latency, then the earlier transmit time (ties keep the first), flow, seq.
type WorstKey = (i64, Reverse<u64>, u16, u64);

/// The streaming pass over one run.
pub struct Acc {
    plan: Plan,
    flows: BTreeMap<u16, FlowState>,
    sinks: Sinks,
    lat: HdrLat,
    cols: Option<Grid<MinMax>>,
    wins: Option<Grid<WinSlot>>,
    worst: BinaryHeap<Reverse<WorstKey>>,
    t_min: u64,
    t_max: u64,
    late: u64,
    dups: u64,
}

impl Acc {
    /// Ready for the first record.
    pub fn new(plan: Plan) -> Acc {
        let n = plan.specs.len();
        Acc {
            sinks: Sinks {
                specs: plan.specs.clone(),
                found: vec![Vec::new(); n],
                dropped: vec![0; n],
                gaps: plan.target_gap_ns.map(Gaps::new),
            },
            plan,
            flows: BTreeMap::new(),
            lat: HdrLat::new(),
            cols: None,
            wins: None,
            worst: BinaryHeap::new(),
            t_min: u64::MAX,
            t_max: 0,
            late: 0,
            dups: 0,
        }
    }

    /// One record, in file (arrival) order.
    #[inline]
    pub fn push(&mut self, r: &nflab_record::Record) {
        let first = self.plan.first_seq.get(&r.flow).copied().unwrap_or(0);
        if r.seq < first {
            return;
        }
        let lat = r.rx_ns as i64 - r.tx_ns as i64;
        let nspecs = self.sinks.specs.len();
        let f = self
            .flows
            .entry(r.flow)
            .or_insert_with(|| FlowState::new(r.flow, first, nspecs));
        match f.accept(r.seq, r.tx_ns, lat, &mut self.sinks) {
            Accept::Duplicate => {
                self.dups += 1;
                return;
            }
            // Too late to tell a duplicate: drawn, but not in sequence order.
            Accept::Late => self.late += 1,
            Accept::Fresh => {}
        }
        let t = r.tx_ns;
        self.lat.record(lat);
        self.t_min = self.t_min.min(t);
        self.t_max = self.t_max.max(t);
        // Anchored at the first measured packet: windows start there.
        let hint = self.plan.span_hint.map_or(0, |(a, b)| b.saturating_sub(a));
        let c = self
            .cols
            .get_or_insert_with(|| Grid::new(t, hint, TIME_SLICES, Widths::Dyadic))
            .at(t);
        c.min = c.min.min(lat);
        c.max = c.max.max(lat);
        if self.plan.windows {
            self.wins
                .get_or_insert_with(|| Grid::new(t, hint, WINDOW_SLICES, Widths::Decimal))
                .at(t)
                .record(lat);
        }
        if self.plan.worst_n > 0 {
            let key = (lat, Reverse(t), r.flow, r.seq);
            if self.worst.len() < self.plan.worst_n {
                self.worst.push(Reverse(key));
            } else if self.worst.peek().is_some_and(|Reverse(m)| key > *m) {
                self.worst.pop();
                self.worst.push(Reverse(key));
            }
        }
    }

    /// Flush the rings and return the reductions and the latency histogram.
    pub fn finish(mut self) -> (Streamed, HdrLat) {
        for f in self.flows.values_mut() {
            f.finish(&mut self.sinks);
        }
        let t0 = if self.t_min == u64::MAX {
            0
        } else {
            self.t_min
        };
        let mut worst: Vec<Pkt> = self
            .worst
            .into_iter()
            .map(|Reverse((lat, Reverse(t), flow, seq))| Pkt {
                t_ns: t - t0,
                lat_ns: lat,
                seq,
                flow,
            })
            .collect();
        worst.sort_by_key(|p| (p.t_ns, p.flow, p.seq));
        let anomalies = self
            .sinks
            .specs
            .iter()
            .zip(self.sinks.found)
            .zip(self.sinks.dropped)
            .map(|((spec, mut v), d)| {
                for a in &mut v {
                    a.t0_ns -= t0;
                    a.t1_ns = a.t1_ns.saturating_sub(t0);
                }
                v.sort_by_key(|a| a.t0_ns);
                (*spec, v, d)
            })
            .collect();
        (
            Streamed {
                t0,
                span_ns: self.t_max.saturating_sub(t0),
                cols: self.cols,
                wins: self.wins,
                worst,
                anomalies,
                gaps: self.sinks.gaps,
                late: self.late,
                duplicates: self.dups,
            },
            self.lat,
        )
    }
}

/// The reductions of a streamed run.
#[derive(Debug, Clone)]
pub struct Streamed {
    /// First measured transmit time, absolute ns.
    pub t0: u64,
    /// Last measured transmit time, ns after `t0`.
    pub span_ns: u64,
    cols: Option<Grid<MinMax>>,
    wins: Option<Grid<WinSlot>>,
    /// The worst packets, in time order.
    pub worst: Vec<Pkt>,
    /// Per anomaly definition: the anomalies in start order (at most
    /// [`MAX_ANOMALIES`]) and how many more there were.
    pub anomalies: Vec<((u32, u64), Vec<Anomaly>, u64)>,
    /// Transmit gaps, for a CBR run.
    pub gaps: Option<Gaps>,
    /// Packets more than [`REORDER_WINDOW`] sequence numbers late.
    pub late: u64,
    /// Later copies of a packet, ignored.
    pub duplicates: u64,
}

/// Midpoint of a slice, ns after `t0`, clamped to the run.
fn mid(start: i128, width: u64, t0: u64, span: u64) -> u64 {
    let m = start + i128::from(width / 2) - i128::from(t0);
    m.clamp(0, i128::from(span)) as u64
}

impl Streamed {
    /// Width of the time slices the columns are assembled from, ns.
    pub fn slice_ns(&self) -> u64 {
        self.cols.as_ref().map_or(0, Grid::width)
    }

    /// Width of the window slices, ns (0 without window histograms).
    /// Divides every window width of the figure at least 3 slices wide.
    pub fn window_slice_ns(&self) -> u64 {
        self.wins.as_ref().map_or(0, Grid::width)
    }

    /// Min/max columns like [`crate::stats::decimate`]: each slice goes to
    /// the column that holds its midpoint.
    pub fn columns(&self, span_ns: u64, cols: usize) -> Vec<(f64, f64, f64, f64)> {
        let cols = cols.max(1);
        let w = (span_ns as f64 / cols as f64).max(1.0);
        let mut mm = vec![MinMax::default(); cols];
        if let Some(g) = &self.cols {
            for (start, s) in g.slices() {
                let t = mid(start, g.width(), self.t0, self.span_ns);
                mm[((t as f64 / w) as usize).min(cols - 1)].merge(*s);
            }
        }
        mm.iter()
            .enumerate()
            .filter(|(_, e)| !e.is_empty())
            .map(|(i, e)| (i as f64 * w, (i + 1) as f64 * w, e.min as f64, e.max as f64))
            .collect()
    }

    /// Per-window `(t0_ns, p50, p99, max, count)` like
    /// [`crate::stats::windows`], from the window slices (each to the window
    /// of its start: exact when the slice width divides `win_ns` and the
    /// first packet to arrive was the first sent); `None` without window
    /// histograms.
    pub fn windows(&self, win_ns: u64) -> Option<Vec<Window>> {
        let g = self.wins.as_ref()?;
        let win_ns = win_ns.max(1);
        let mut by: BTreeMap<u64, WinSlot> = BTreeMap::new();
        for (start, s) in g.slices() {
            let w =
                (start - i128::from(self.t0)).clamp(0, i128::from(self.span_ns)) as u64 / win_ns;
            by.entry(w).or_default().merge(s.clone());
        }
        Some(
            by.into_iter()
                .filter_map(|(w, s)| {
                    let h = s.h.as_ref()?;
                    let at = |q: f64| -> f64 {
                        let rank = ((q * s.n as f64).ceil() as u64).clamp(1, s.n);
                        let mut cum = 0;
                        for it in h.iter_recorded() {
                            cum += it.count_at_value();
                            if cum >= rank {
                                let v = it.value_iterated_to().min(i64::MAX as u64) as i64;
                                return v.min(s.max) as f64;
                            }
                        }
                        s.max as f64
                    };
                    Some((w * win_ns, at(0.5), at(0.99), s.max as f64, s.n as usize))
                })
                .collect(),
        )
    }

    /// The anomalies of definition `(n, t_ns)` and how many were not kept.
    pub fn anomalies(&self, n: u32, t_ns: u64) -> Option<(&[Anomaly], u64)> {
        self.anomalies
            .iter()
            .find(|(s, _, _)| *s == (n, t_ns))
            .map(|(_, v, d)| (v.as_slice(), *d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_widens_by_merging_pairs() {
        let mut g: Grid<MinMax> = Grid::new(1_000, 0, 8, Widths::Dyadic);
        for t in 0..64u64 {
            let s = g.at(1_000 + t);
            s.min = s.min.min(t as i64);
            s.max = s.max.max(t as i64);
        }
        // 64 ns in 8 slices: 8 ns each, exact min/max per slice.
        assert_eq!(g.width(), 8);
        let v: Vec<(i128, i64, i64)> = g.slices().map(|(a, s)| (a, s.min, s.max)).collect();
        assert_eq!(v.len(), 8);
        assert_eq!(v[3], (1_024, 24, 31));
        // Earlier than the anchor: the grid extends to the left.
        let s = g.at(990);
        s.min = -1;
        s.max = -1;
        assert!(g.slices().next().unwrap().0 <= 990);
        assert_eq!(g.slices().map(|(_, s)| s.max).max(), Some(63));
    }

    #[test]
    fn decimal_widths_divide_window_widths() {
        let mut g: Grid<MinMax> = Grid::new(0, 0, 10, Widths::Decimal);
        let mut seen = vec![g.width()];
        for t in [9u64, 49, 99, 499, 999, 4_999, 9_999] {
            g.at(t);
            seen.push(g.width());
        }
        seen.dedup();
        assert_eq!(seen, vec![1, 5, 10, 50, 100, 500, 1_000]);
        // Every 1-2-5 window width at least 3 slices wide is a multiple.
        for u in [1u64, 5, 10, 50, 100, 500, 1_000, 5_000] {
            for e in 0..6 {
                for m in [10u64, 20, 25, 50] {
                    let w = m * 10u64.pow(e);
                    if w < 3 * u {
                        continue;
                    }
                    assert_eq!(w % u, 0, "slice {u} window {w}");
                }
            }
        }
    }

    #[test]
    fn gap_bins_follow_the_float_rule() {
        let g = Gaps::new(1000.0);
        for x in [
            2u64,
            9,
            10,
            11,
            99,
            100,
            101,
            794,
            795,
            999,
            1000,
            1001,
            1258,
            1259,
            10_000,
            123_456_789,
        ] {
            let k = g.edges.partition_point(|&e| e <= x) as i64 - 1;
            assert_eq!(k, gap_bin(x as f64), "{x}");
        }
    }
}
