//! The anomalies-only pass over a TRex-fork file (seed 001's format), split
//! across cores.
//!
//! Seed 001 runs its anomaly detector over files of hundreds of GB. The full
//! [`Engine`](crate::Engine) keeps a dozen streaming metrics per packet in
//! sequence order; this pass keeps only what the anomaly question needs —
//! count, exact min / mean / stdev / max, an HDR latency histogram (or, with
//! `--exact`, every latency, which the threads write straight into one vector
//! for exact percentiles) and the runs above each threshold. The file is cut into contiguous parts (about
//! 8 per thread) that the threads take in turn, each read with `pread` into
//! the thread's own buffer. A run that touches the end of a part is handed
//! on and joined with the run at the start of the next part, so the anomaly
//! list (order, start, length, duration, peak) is the full pass's (checked
//! in the tests below).
//!
//! A TRex-fork file has no sequence numbers and no lost packets (seq = the
//! position in the file), which is what makes the split exact.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use hdrhistogram::Histogram;

use crate::dist::{Distribution, HdrCounts, Moments};
use crate::engine::{AnomAgg, Run};
use crate::metrics::{latency_block, with_resolved_thresholds};
use crate::trex::{secs_to_ns, TrexInput, TREX_RECORD_BYTES};
use crate::*;

/// Bytes read per `pread`: large enough that the syscall cost vanishes
/// (4096 records), small enough that the block and its latencies, buckets
/// and differences stay in L2 (1 MiB blocks cost the default pass 20 % more).
const BLOCK_BYTES: usize = 1 << 16;

/// Bytes mapped at a time ([`nflab_io::FileWindow`]): mapping saves the
/// copy `pread` makes (a quarter of the anomalies-only pass's CPU time);
/// 16 MiB windows keep the resident set small and the mmap calls few
/// (two blocks in the tests, so their files cross window borders).
const WINDOW_BYTES: usize = if cfg!(test) { 2 } else { 256 } * BLOCK_BYTES;

/// The options of [`Options`] this pass cannot honour, by flag name.
fn unsupported(opts: &Options) -> Vec<&'static str> {
    let mut out = Vec::new();
    if opts.window_ns.is_some() {
        out.push("--window");
    }
    if opts.trim_start_ns > 0 || opts.trim_end_ns > 0 {
        out.push("--trim");
    }
    if opts.deadline_ns.is_some() {
        out.push("--deadline");
    }
    if opts.worst_n > 0 {
        out.push("--worst");
    }
    if opts.per_flow_latency {
        out.push("--per-flow");
    }
    if opts.interval_log {
        out.push("--export (interval log)");
    }
    out
}

/// A maximal run above one threshold inside one part.
#[derive(Debug, Clone, Copy)]
struct Frag {
    start_seq: u64,
    len: u64,
    first_tx: u64,
    last_tx: u64,
    peak: i64,
    peak_tx: u64,
    /// Starts at the part's first record: may continue a run of the part before.
    open_start: bool,
    /// Still open at the part's last record: may continue into the next part.
    open_end: bool,
}

impl Frag {
    /// `self` followed by `next` as one run (the first highest peak wins, as
    /// in the full pass).
    fn join(self, next: Frag) -> Frag {
        let later_peak = next.peak > self.peak;
        Frag {
            len: self.len + next.len,
            last_tx: next.last_tx,
            peak: if later_peak { next.peak } else { self.peak },
            peak_tx: if later_peak {
                next.peak_tx
            } else {
                self.peak_tx
            },
            open_end: next.open_end,
            ..self
        }
    }
}

/// What a thread learns from one part of the file (order matters: parts
/// are joined in file order).
struct Part {
    records: u64,
    /// tx of the part's first record.
    first_tx: Option<u64>,
    moments: Moments,
    tx: (u64, u64),
    rx: (u64, u64),
    clamped: u64,
    /// Per spec: runs that are long enough or touch an end of the part.
    frags: Vec<Vec<Frag>>,
    /// Per spec: the run being built (`len == 0`: none).
    open: Vec<Frag>,
    /// The full pass's differences of consecutive latencies (`None`: anomalies only).
    jitter: Option<JitterPart>,
}

/// Differences of consecutive latencies inside one part (IPDV, and for a
/// TRex file, where arrival order is sequence order, also the consecutive
/// differences); the difference across a part border is added when the
/// parts are joined.
struct JitterPart {
    first_lat: Option<i64>,
    last_lat: Option<i64>,
    signed: Moments,
    abs: Moments,
    /// Every difference, in order, while the whole file's fit the exact limit.
    exact: Option<Vec<i64>>,
    /// RFC 3550 estimate over the part's differences, started from 0, and
    /// how many differences it took: the estimate from a start `j` is
    /// `j·(15/16)^m + rfc_from_zero`.
    rfc_from_zero: f64,
    m: u64,
}

impl JitterPart {
    fn new(exact: bool) -> JitterPart {
        JitterPart {
            first_lat: None,
            last_lat: None,
            signed: Moments::new(),
            abs: Moments::new(),
            exact: exact.then(Vec::new),
            rfc_from_zero: 0.0,
            m: 0,
        }
    }

    /// The differences of `lat` (following the part's records so far);
    /// `bounds`: the smallest and largest of `lat` when known.
    fn scan(&mut self, lat: &[i64], bounds: Option<(i64, i64)>, sc: &mut JitterScratch) {
        let Some(&first) = lat.first() else { return };
        let small = |a: i64, b: i64| b.checked_sub(a).is_some_and(|d| d.unsigned_abs() < 1 << 31);
        let fits = bounds.is_some_and(|(lo, hi)| small(lo, hi))
            && self.last_lat.is_none_or(|p| small(p, first));
        if fits && self.exact.is_none() {
            self.scan_steps(lat, bounds.map_or(0, |(lo, hi)| hi - lo), sc);
        } else {
            self.scan_any(lat, sc);
        }
    }

    /// [`scan`](Self::scan) when every difference, the one across the
    /// previous block's border included, fits an `i32` and goes to the
    /// histograms: in steps of [`diffs::step`], each a few tight loops over
    /// buffers in L1.
    fn scan_steps(&mut self, lat: &[i64], range: i64, sc: &mut JitterScratch) {
        let first = lat[0];
        self.first_lat.get_or_insert(first);
        let mut bound = range as u64;
        // The difference across the border goes first, in a window of its
        // own of the same length as the others' (so RFC 3550 groups the
        // differences as over the whole block).
        let mut border = [0i64; 5];
        let (head, rest) = match self.last_lat {
            Some(p) => {
                bound = bound.max((first - p).unsigned_abs());
                let k = lat.len().min(4);
                border[0] = p;
                border[1..=k].copy_from_slice(&lat[..k]);
                (Some(&border[..=k]), &lat[k - 1..])
            }
            None => (None, lat),
        };
        self.last_lat = lat.last().copied();
        let step = crate::diffs::step_len(bound);
        let windows = (0..rest.len().saturating_sub(1))
            .step_by(step)
            .map(|s| &rest[s..(s + step + 1).min(rest.len())]);
        for win in head.into_iter().chain(windows) {
            let sums = crate::diffs::step(win, sc.hdr, &mut sc.mags, &mut sc.idx);
            let n = sums.count as usize;
            let (signed, abs) = sums.moments();
            self.signed.merge(&signed);
            self.abs.merge(&abs);
            self.rfc_from_zero = rfc3550_chain(self.rfc_from_zero, &sc.mags[..n]);
            self.m += sums.count;
            sc.signed.record(&sc.dpos, &sums, &sc.idx[..n]);
        }
    }

    /// [`scan`](Self::scan) for any block.
    fn scan_any(&mut self, lat: &[i64], sc: &mut JitterScratch) {
        let first = lat[0];
        if self.first_lat.is_none() {
            self.first_lat = Some(first);
        }
        let d = &mut sc.diff;
        d.clear();
        if let Some(p) = self.last_lat {
            d.push(ipdv(p, first));
        }
        d.extend(lat.windows(2).map(|w| ipdv(w[0], w[1])));
        self.last_lat = lat.last().copied();
        if d.is_empty() {
            return;
        }
        let a = &mut sc.abs;
        a.clear();
        a.extend(d.iter().map(|x| x.abs()));
        self.signed.merge(&Moments::of_block(d));
        self.abs.merge(&Moments::of_block(a));
        sc.mags.clear();
        sc.mags.extend(a.iter().map(|&x| x as f64));
        self.rfc_from_zero = rfc3550_chain(self.rfc_from_zero, &sc.mags);
        self.m += d.len() as u64;
        match &mut self.exact {
            Some(v) => v.extend_from_slice(d),
            None => {
                // Split into values >= 0 and magnitudes of negative ones
                // without a branch (the sign of a difference is a coin flip).
                let (p, q) = (&mut sc.nonneg, &mut sc.negmag);
                p.resize(d.len(), 0);
                q.resize(d.len(), 0);
                let (mut i, mut j) = (0, 0);
                for &x in d.iter() {
                    p[i] = x;
                    q[j] = x.wrapping_neg();
                    let neg = usize::from(x < 0);
                    i += 1 - neg;
                    j += neg;
                }
                for (h, v) in [(&mut sc.dpos, &p[..i]), (&mut sc.dneg, &q[..j])] {
                    let (lo, hi) = v
                        .iter()
                        .fold((i64::MAX, i64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
                    h.record_nonneg(v, lo, hi);
                }
            }
        }
    }
}

/// RFC 3550 §6.4.1, `J += (|D| − J)/16` for each magnitude of `mags`, from
/// `j`. The recurrence is `J' = c·J + |D|/16` with `c = 15/16`, so four
/// steps are one: `J4 = c⁴·J + (c³|D₁| + c²|D₂| + c|D₃| + |D₄|)/16`, whose
/// bracket does not wait for `J`: a quarter of the dependent chain, equal to
/// the step-by-step value to within a few ulps.
fn rfc3550_chain(mut j: f64, mags: &[f64]) -> f64 {
    const C: f64 = 15.0 / 16.0;
    const C2: f64 = C * C;
    const C3: f64 = C2 * C;
    const C4: f64 = C2 * C2;
    let mut quads = mags.chunks_exact(4);
    for q in &mut quads {
        let b = C3 * q[0] + C2 * q[1] + C * q[2] + q[3];
        j = C4 * j + b / 16.0;
    }
    for &x in quads.remainder() {
        j += (x - j) / 16.0;
    }
    j
}

/// The signed difference of consecutive latencies, as the engine clamps it.
#[inline(always)]
fn ipdv(prev: i64, next: i64) -> i64 {
    next.saturating_sub(prev).max(i64::MIN + 1)
}

/// What a thread keeps across its parts (order does not matter): the
/// latency histograms and reused buffers.
struct Scratch {
    /// Latencies >= 0 and magnitudes of the negative ones.
    pos: HdrCounts,
    neg: HdrCounts,
    /// The block read, its latencies and their HDR bucket indices.
    buf: Vec<u8>,
    lat: Vec<i64>,
    idx: Vec<u32>,
    /// Count latencies into the histograms (not when every latency is kept).
    histogram: bool,
    /// The full pass's differences of consecutive latencies.
    jit: JitterScratch,
}

/// A thread's counts of latency differences (order does not matter) and
/// reused buffers.
struct JitterScratch {
    /// Differences >= 0 and magnitudes of the negative ones.
    dpos: HdrCounts,
    dneg: HdrCounts,
    /// The block's differences and their magnitudes, and the differences
    /// split by sign.
    diff: Vec<i64>,
    abs: Vec<i64>,
    nonneg: Vec<i64>,
    negmag: Vec<i64>,
    /// The steps' counts by sign (folded into `dpos`/`dneg` at the end),
    /// the magnitudes as f64 and their buckets, and how to find those.
    signed: crate::diffs::SignedCounts,
    mags: Vec<f64>,
    idx: Vec<u32>,
    hdr: crate::dist::F64Index,
}

impl Scratch {
    fn new(digits: u8, histogram: bool) -> Scratch {
        Scratch {
            histogram,
            pos: HdrCounts::new(digits),
            neg: HdrCounts::new(digits),
            // Sized on first use: bytes in memory and mapped files never need it.
            buf: Vec::new(),
            lat: Vec::with_capacity(BLOCK_BYTES / TREX_RECORD_BYTES),
            idx: Vec::with_capacity(BLOCK_BYTES / TREX_RECORD_BYTES),
            jit: JitterScratch {
                dpos: HdrCounts::new(digits),
                dneg: HdrCounts::new(digits),
                diff: Vec::new(),
                abs: Vec::new(),
                nonneg: Vec::new(),
                negmag: Vec::new(),
                signed: crate::diffs::SignedCounts::new(),
                mags: Vec::new(),
                idx: Vec::new(),
                hdr: HdrCounts::new(digits).f64_index(),
            },
        }
    }
}

/// Position of the first of `vals` that is >= `low` (>= 0). `small`: every
/// value lies within ±2^53 (a block of the vectorised conversion); then 16
/// values at a time are tested without branches, by the sign of
/// `low − 1 − v`, which vectorises.
fn first_at_least(vals: &[i64], low: i64, small: bool) -> Option<usize> {
    const N: usize = 16;
    if !small {
        return vals.iter().position(|&l| l >= low);
    }
    // Same answer for values below 2^53, and no overflow.
    let low = low.min(1 << 53);
    let mut chunks = vals.chunks_exact(N);
    for (k, c) in (&mut chunks).enumerate() {
        if c.iter().fold(0, |a, &l| a | (low - 1 - l)) < 0 {
            return c.iter().position(|&l| l >= low).map(|d| k * N + d);
        }
    }
    let done = vals.len() - chunks.remainder().len();
    chunks
        .remainder()
        .iter()
        .position(|&l| l >= low)
        .map(|d| done + d)
}

/// tx (ns) of record `i` of `bytes`.
fn tx_at(bytes: &[u8], i: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[i * TREX_RECORD_BYTES..i * TREX_RECORD_BYTES + 8]);
    secs_to_ns(f64::from_le_bytes(b))
}

impl Part {
    fn new(n_specs: usize, jitter: Option<JitterPart>) -> Part {
        let none = Frag {
            start_seq: 0,
            len: 0,
            first_tx: 0,
            last_tx: 0,
            peak: 0,
            peak_tx: 0,
            open_start: false,
            open_end: false,
        };
        Part {
            records: 0,
            first_tx: None,
            moments: Moments::new(),
            tx: (u64::MAX, 0),
            rx: (u64::MAX, 0),
            clamped: 0,
            frags: vec![Vec::new(); n_specs],
            open: vec![none; n_specs],
            jitter,
        }
    }

    /// Feed whole 16-byte records, the first being number `seq` of the
    /// file. Works in stages over the block (convert, moments, histogram,
    /// runs): each stage is a tight loop, the first two vectorise, and the
    /// run stage skips below-threshold stretches with one compare per
    /// packet.
    fn scan(
        &mut self,
        sc: &mut Scratch,
        bytes: &[u8],
        seq: u64,
        specs: &[AnomalySpec],
        lows: &[Option<i64>],
    ) {
        let part_start = seq - self.records;
        if self.records == 0 && bytes.len() >= TREX_RECORD_BYTES {
            self.first_tx = Some(tx_at(bytes, 0));
        }
        let lat = &mut sc.lat;
        let hdr = sc.pos.f64_index();
        let mut indexed = false;
        let (lat_lo, lat_hi) = match crate::trex::trex_latencies(bytes, lat, hdr, &mut sc.idx) {
            Some(b) => {
                indexed = true;
                self.tx = (self.tx.0.min(b.tx.0), self.tx.1.max(b.tx.1));
                self.rx = (self.rx.0.min(b.rx.0), self.rx.1.max(b.rx.1));
                b.lat
            }
            None => {
                // Timestamps outside 0.5 ns .. 52 days: one by one.
                lat.clear();
                let (mut tx_lo, mut tx_hi) = self.tx;
                let (mut rx_lo, mut rx_hi) = self.rx;
                for c in bytes.chunks_exact(TREX_RECORD_BYTES) {
                    let (t, r) = c.split_at(8);
                    let t = secs_to_ns(f64::from_le_bytes(t.try_into().unwrap_or([0; 8])));
                    let r = secs_to_ns(f64::from_le_bytes(r.try_into().unwrap_or([0; 8])));
                    let (l, clamped) = crate::engine::latency(t, r);
                    self.clamped += u64::from(clamped);
                    (tx_lo, tx_hi) = (tx_lo.min(t), tx_hi.max(t));
                    (rx_lo, rx_hi) = (rx_lo.min(r), rx_hi.max(r));
                    lat.push(l);
                }
                self.tx = (tx_lo, tx_hi);
                self.rx = (rx_lo, rx_hi);
                lat.iter()
                    .fold((i64::MAX, i64::MIN), |(lo, hi), &l| (lo.min(l), hi.max(l)))
            }
        };
        if lat.is_empty() {
            return;
        }
        self.moments
            .merge(&Moments::of_block_within(lat, lat_lo, lat_hi));
        if let Some(j) = &mut self.jitter {
            j.scan(lat, indexed.then_some((lat_lo, lat_hi)), &mut sc.jit);
        }
        if !sc.histogram {
            // --exact: the latencies go to the exact vector instead (scan_part).
        } else if lat_lo >= 0 && indexed {
            sc.pos.record_indexed(&sc.idx, lat, lat_lo, lat_hi);
        } else if lat_lo >= 0 {
            sc.pos.record_nonneg(lat, lat_lo, lat_hi);
        } else {
            for &l in lat.iter() {
                match u64::try_from(l) {
                    Ok(v) => sc.pos.record(v),
                    Err(_) => sc.neg.record(l.unsigned_abs()),
                }
            }
        }
        for (k, (spec, &low)) in specs.iter().zip(lows).enumerate() {
            let Some(low) = low else { continue };
            let run = &mut self.open[k];
            if run.len == 0 && lat_hi < low {
                continue;
            }
            let mut i = 0;
            while i < lat.len() {
                if run.len == 0 {
                    // Skip to the next packet above the threshold.
                    match first_at_least(&lat[i..], low, indexed) {
                        Some(d) => i += d,
                        None => break,
                    }
                    let s = seq + i as u64;
                    let t = tx_at(bytes, i);
                    *run = Frag {
                        start_seq: s,
                        len: 0,
                        first_tx: t,
                        last_tx: t,
                        peak: lat[i],
                        peak_tx: t,
                        open_start: s == part_start,
                        open_end: false,
                    };
                }
                let l = lat[i];
                if l >= low {
                    let t = tx_at(bytes, i);
                    run.len += 1;
                    run.last_tx = t;
                    if l > run.peak {
                        run.peak = l;
                        run.peak_tx = t;
                    }
                } else {
                    if run.open_start || run.len >= u64::from(spec.n.max(1)) {
                        self.frags[k].push(*run);
                    }
                    run.len = 0;
                }
                i += 1;
            }
        }
        self.records += lat.len() as u64;
    }

    /// End of the part: runs still open are handed on.
    fn close(&mut self) {
        for (k, run) in self.open.iter_mut().enumerate() {
            if run.len > 0 {
                run.open_end = true;
                self.frags[k].push(*run);
                run.len = 0;
            }
        }
    }
}

/// How the full pass keeps the differences of consecutive latencies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Jitter {
    /// Every one (the file's fit the engine's exact limit of them).
    Exact,
    /// In HDR histograms.
    Hdr,
}

/// The bytes of a TRex-fork input: an open file, or bytes in memory.
enum Data<'a> {
    File(File),
    Bytes(&'a [u8]),
}

/// Read records `first..first + count` of `data` (named `path`) into a
/// [`Part`], and their latencies into `exact` (one slot per record) when given.
fn scan_part(
    (data, path): (&Data<'_>, &Path),
    (first, count): (u64, u64),
    specs: &[AnomalySpec],
    lows: &[Option<i64>],
    sc: &mut Scratch,
    mut exact: Option<&mut [i64]>,
    jitter: Option<Jitter>,
) -> Result<Part, AnalyzeError> {
    let jitter = jitter.map(|j| JitterPart::new(j == Jitter::Exact));
    let mut part = Part::new(specs.len(), jitter);
    let mut buf = std::mem::take(&mut sc.buf);
    let io_err = |source| AnalyzeError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut done = 0u64;
    while done < count {
        // A window of the file mapped (no copy), or read into `buf` where
        // the file cannot be mapped.
        let want = ((count - done) as usize * TREX_RECORD_BYTES).min(WINDOW_BYTES);
        let offset = (first + done) * TREX_RECORD_BYTES as u64;
        let window = match data {
            Data::File(file) => nflab_io::FileWindow::map(file, offset, want).ok(),
            Data::Bytes(_) => None,
        };
        let mut at = 0;
        while at < want {
            let len = (want - at).min(BLOCK_BYTES);
            let block = match (&window, data) {
                (Some(w), _) => &w.bytes()[at..at + len],
                (None, Data::Bytes(bytes)) => {
                    let from = offset as usize + at;
                    &bytes[from..from + len]
                }
                (None, Data::File(file)) => {
                    if buf.len() < len {
                        buf.resize(BLOCK_BYTES, 0);
                    }
                    file.read_exact_at(&mut buf[..len], offset + at as u64)
                        .map_err(io_err)?;
                    &buf[..len]
                }
            };
            part.scan(sc, block, first + done, specs, lows);
            let m = len / TREX_RECORD_BYTES;
            if let Some(out) = exact.as_deref_mut() {
                // The block's latencies, kept at their records' places in the part.
                out[done as usize..done as usize + m].copy_from_slice(&sc.lat[..m]);
            }
            done += m as u64;
            at += len;
        }
        // Truncated under the window: what was read is not the file's.
        if window.as_ref().is_some_and(|w| !w.intact()) {
            return Err(io_err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the file was truncated while it was read",
            )));
        }
    }
    sc.buf = buf;
    part.close();
    Ok(part)
}

/// Analyse the TRex-fork file at `path` for anomalies only, on `threads`
/// threads (0: one per available core). Computes packet counts, exact
/// min / mean / stdev / max, HDR percentiles (`opts.hdr_digits`; exact ones when
/// `opts.exact_limit` holds every record) and every anomaly detail of the full pass;
/// the IPDV, RFC 3550, consecutive-difference and window figures stay
/// `null`, and a note says so. Relative thresholds take a first pass (a
/// percentile base is then resolved from the HDR histogram).
///
/// Options this pass cannot honour (windows, trimming, deadline, worst N,
/// per-flow, interval log) are an [`AnalyzeError::Invalid`] naming them.
pub fn analyze_trex_anomalies_only(
    path: &Path,
    cfg: &AnalysisConfig,
    opts: &Options,
    threads: usize,
) -> Result<FileAnalysis, AnalyzeError> {
    anomalies_only(TrexInput::File(path), cfg, opts, threads, MIN_PART)
}

/// Parts of at least 2^16 records (1 MiB): tiny files are not worth a thread.
const MIN_PART: u64 = 1 << 16;

/// Every statistic of the full pass over a TRex-fork file, split across
/// `threads` threads (0: one per core), when `opts` asks for nothing the
/// split cannot give (see [`full_pass_supports`]); `None` otherwise. Equal
/// to the [`Engine`](crate::Engine)'s pass field for field, except the
/// RFC 3550 estimate, whose recurrence is joined across parts in closed
/// form (`J·(15/16)^m + J₀`): equal to within a few ulps.
pub(crate) fn analyze_trex_full(
    input: TrexInput<'_>,
    cfg: &AnalysisConfig,
    opts: &Options,
    threads: usize,
) -> Option<Result<FileAnalysis, AnalyzeError>> {
    full_pass_supports(opts).then(|| parallel(input, cfg, opts, threads, MIN_PART, true))
}

/// Whether the split pass computes everything `opts` asks for: no windows,
/// trimming, deadline, worst N, per-flow latency or interval log (those
/// need the engine's sequence-ordered stream).
pub(crate) fn full_pass_supports(opts: &Options) -> bool {
    unsupported(opts).is_empty() && opts.series_ns.is_none() && !opts.tx_gaps
}

/// [`analyze_trex_anomalies_only`] with parts of at least `min_part` records.
fn anomalies_only(
    input: TrexInput<'_>,
    cfg: &AnalysisConfig,
    opts: &Options,
    threads: usize,
    min_part: u64,
) -> Result<FileAnalysis, AnalyzeError> {
    parallel(input, cfg, opts, threads, min_part, false)
}

/// The split pass; `full`: every statistic, else anomalies only.
fn parallel(
    input: TrexInput<'_>,
    cfg: &AnalysisConfig,
    opts: &Options,
    threads: usize,
    min_part: u64,
    full: bool,
) -> Result<FileAnalysis, AnalyzeError> {
    let bad = unsupported(opts);
    if !bad.is_empty() {
        return Err(AnalyzeError::Invalid(format!(
            "--anomalies-only computes counts, min/mean/stdev/max, percentiles (HDR, or exact with \
             --exact) and anomalies only; it cannot honour {} (drop {} or --anomalies-only)",
            bad.join(", "),
            if bad.len() == 1 { "it" } else { "them" }
        )));
    }
    let path = input.name();
    let (n, leftover) = input.records()?;
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, |t| t.get()),
        t => t,
    };
    let threads = (threads as u64).clamp(1, n.div_ceil(min_part.max(1)).max(1));
    let pass = |cfg: &AnalysisConfig| -> Result<Analysis, AnalyzeError> {
        let data = match input {
            TrexInput::File(path) => {
                Data::File(File::open(path).map_err(|source| AnalyzeError::Io {
                    path: path.to_path_buf(),
                    source,
                })?)
            }
            TrexInput::Bytes { bytes, .. } => Data::Bytes(bytes),
        };
        let specs = cfg.anomalies.as_slice();
        let digits = opts.hdr_digits;
        // The lowest latency above each threshold: one `>=` per packet.
        // `None`: no i64 latency is above it.
        let lows: Vec<Option<i64>> = specs.iter().map(AnomalySpec::lowest_above).collect();
        // About 8 parts per thread, taken in turn: a thread that shares its
        // core with another process does fewer.
        let part_len = n.div_ceil(threads * 8).max(min_part).max(1);
        let n_parts = n.div_ceil(part_len);
        let next = AtomicU64::new(0);
        // --exact: every latency, written by the threads straight into one vector
        // (record i at index i), which becomes the exact distribution.
        let keep_all = opts.exact_limit >= n;
        let mut all: Vec<i64> = if keep_all {
            vec![0; n as usize]
        } else {
            Vec::new()
        };
        let slot_vec: Vec<std::sync::Mutex<Option<&mut [i64]>>> = if keep_all {
            all.chunks_mut(part_len as usize)
                .map(|c| std::sync::Mutex::new(Some(c)))
                .collect()
        } else {
            Vec::new()
        };
        let jitter = full.then(|| {
            let limit = crate::engine::secondary_limit(opts.exact_limit);
            // As the engine's Distribution: exact only when its limit allows
            // any value at all, and only while the values fit.
            if limit > 0 && n.saturating_sub(1) <= limit {
                Jitter::Exact
            } else {
                Jitter::Hdr
            }
        });
        let (data, lows, next, slots) = (&data, lows.as_slice(), &next, slot_vec.as_slice());
        let worker = move || {
            let mut sc = Scratch::new(digits, !keep_all);
            let mut parts = Vec::new();
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= n_parts {
                    break;
                }
                let (a, b) = (k * part_len, ((k + 1) * part_len).min(n));
                let out = slots
                    .get(k as usize)
                    .and_then(|m| m.lock().unwrap_or_else(|p| p.into_inner()).take());
                parts.push((
                    k,
                    scan_part((data, path), (a, b - a), specs, lows, &mut sc, out, jitter)?,
                ));
            }
            Ok::<_, AnalyzeError>((parts, sc))
        };
        // One thread (a small input): no thread to start.
        let done: Vec<(Vec<(u64, Part)>, Scratch)> = if threads == 1 {
            vec![worker()?]
        } else {
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads).map(|_| s.spawn(worker)).collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                    .collect::<Result<Vec<_>, AnalyzeError>>()
            })?
        };
        let mut parts = Vec::with_capacity(n_parts as usize);
        let mut hists = Vec::with_capacity(done.len());
        let mut diff_hists = Vec::with_capacity(done.len());
        for (p, sc) in done {
            parts.extend(p);
            hists.push((sc.pos, sc.neg));
            let mut jit = sc.jit;
            jit.signed.fold_into(&mut jit.dpos, &mut jit.dneg);
            diff_hists.push((jit.dpos, jit.dneg));
        }
        parts.sort_unstable_by_key(|(k, _)| *k);
        let parts = parts.into_iter().map(|(_, p)| p).collect();
        drop(slot_vec);
        let mut parts: Vec<Part> = parts;
        let parts_jitter: Vec<JitterPart> =
            parts.iter_mut().filter_map(|p| p.jitter.take()).collect();
        let mut a = assemble(parts, &hists, keep_all.then_some(all), cfg, opts);
        if full {
            full_summary(&mut a, &parts_jitter, &diff_hists, opts);
        }
        Ok(a)
    };
    let mut analysis = with_resolved_thresholds(cfg, pass)?;
    let notes = &mut analysis.summary.notes;
    notes.push(crate::trex::trex_note(path));
    Ok(crate::trex::trex_outcome(path, analysis, leftover, n))
}

/// Join the parts (in file order) and the threads' histograms into an
/// [`Analysis`].
fn assemble(
    parts: Vec<Part>,
    hists: &[(HdrCounts, HdrCounts)],
    exact: Option<Vec<i64>>,
    cfg: &AnalysisConfig,
    opts: &Options,
) -> Analysis {
    let mut moments = Moments::new();
    let mut pos = crate::dist::new_histogram(opts.hdr_digits);
    let mut neg: Option<Histogram<u64>> = None;
    let (mut tx, mut rx) = ((u64::MAX, 0), (u64::MAX, 0));
    let (mut n, mut clamped) = (0u64, 0u64);
    for p in &parts {
        n += p.records;
        clamped += p.clamped;
        moments.merge(&p.moments);
        tx = (tx.0.min(p.tx.0), tx.1.max(p.tx.1));
        rx = (rx.0.min(p.rx.0), rx.1.max(p.rx.1));
    }
    for (p, q) in hists {
        // Auto-resizing histograms of equal precision always add.
        let _ = pos.add(p.to_histogram());
        if q.len() > 0 {
            let _ = neg
                .get_or_insert_with(|| crate::dist::new_histogram(opts.hdr_digits))
                .add(q.to_histogram());
        }
    }
    // Hour 0 starts at the first packet's tx, as in the full pass.
    let origin = parts.iter().find_map(|p| p.first_tx);
    let span_ns = (n > 0 && tx.1 >= tx.0).then(|| tx.1 - tx.0);

    let mut anomalies = Vec::new();
    let mut anomaly_details = Vec::new();
    for (k, spec) in cfg.anomalies.iter().enumerate() {
        let mut agg = AnomAgg::new(opts.hdr_digits);
        let mut prev_start = None;
        let mut emit = |f: Frag| {
            let mut run = Run {
                len: f.len,
                lost: 0,
                start_seq: f.start_seq,
                first_tx: Some(f.first_tx),
                last_tx: Some(f.last_tx),
                peak: Some(f.peak),
                peak_tx: Some(f.peak_tx),
                prev_start,
            };
            agg.add(
                0,
                &mut run,
                spec.n,
                origin.unwrap_or(0),
                opts.anomaly_events,
            );
            prev_start = run.prev_start;
        };
        let mut pending: Option<Frag> = None;
        for p in &parts {
            let frags = &p.frags[k];
            if !frags.first().is_some_and(|f| f.open_start) {
                // The part starts below the threshold: a handed-on run ends.
                if let Some(done) = pending.take() {
                    emit(done);
                }
            }
            for &f in frags {
                let f = match (f.open_start, pending.take()) {
                    (true, Some(before)) => before.join(f),
                    (_, Some(before)) => {
                        emit(before);
                        f
                    }
                    (_, None) => f,
                };
                if f.open_end {
                    pending = Some(f);
                } else {
                    emit(f);
                }
            }
        }
        if let Some(done) = pending {
            emit(done);
        }
        let d = agg.detail(spec, span_ns);
        anomalies.push(AnomalyStats::of(&d));
        anomaly_details.push(d);
    }

    let mut notes = vec![
        "anomalies-only pass: IPDV, RFC 3550 jitter, consecutive differences, loss bursts and \
         reordering were not computed (run without --anomalies-only for them)"
            .to_string(),
    ];
    if clamped > 0 {
        notes.push(format!(
            "{clamped} packets have a latency outside the i64 range and were clamped; the timestamps are garbage"
        ));
    }
    let mut latency = match exact {
        Some(all) => Distribution::from_exact(moments, all, opts.hdr_digits),
        None => Distribution::from_hdr(moments, Some(pos), neg, opts.hdr_digits),
    };
    let (latency_ns, latency_quantiles, percentiles) =
        latency_block(&mut latency, &opts.percentiles, &mut notes);
    let summary = Summary {
        packets: PacketCounts {
            sent: n,
            received: n,
            ..PacketCounts::default()
        },
        loss_ratio: 0.0,
        rate: RateStats {
            offered_pps: cfg.offered_pps,
            tx_pps: cfg.tx_pps,
            rx_pps: (n >= 2 && rx.1 > rx.0).then(|| (n - 1) as f64 / ((rx.1 - rx.0) as f64 / 1e9)),
        },
        latency_ns,
        jitter_ns: JitterStats {
            stdev: latency_ns.stdev,
            ..JitterStats::default()
        },
        anomalies,
        clock: cfg.clock.clone(),
        percentiles,
        interrupted: false,
        notes,
        latency_quantiles,
        loss: None,
        reorder: None,
        flows: Vec::new(),
        anomaly_details,
        windows: Vec::new(),
        worst: Vec::new(),
        span: Some(SpanInfo {
            first_tx_ns: (n > 0).then_some(tx.0),
            last_tx_ns: (n > 0).then_some(tx.1),
            trim: None,
        }),
        timestamps: None,
        directions: Default::default(),
    };
    Analysis {
        summary,
        latency,
        ipdv: Distribution::new(0, 1),
        window_histograms: Vec::new(),
        window_ns: None,
        origin_ns: origin,
        series: Vec::new(),
        tx_gap: None,
    }
}

/// The full pass's statistics besides the anomalies-only ones: the IPDV
/// and consecutive-difference distributions and the RFC 3550 estimate,
/// joined across the parts (in file order) and the threads' histograms, and
/// the loss, reordering and flow blocks of a file that has no loss and no
/// reordering (seq = position).
fn full_summary(
    a: &mut Analysis,
    parts: &[JitterPart],
    hists: &[(HdrCounts, HdrCounts)],
    opts: &Options,
) {
    let digits = opts.hdr_digits;
    // No part (one record or none: no difference at all) decides nothing: the
    // engine's empty distribution is exact exactly when its limit allows any.
    let exact = if parts.is_empty() {
        crate::engine::secondary_limit(opts.exact_limit) > 0
    } else {
        parts.iter().all(|p| p.exact.is_some())
    };
    let (mut signed, mut abs) = (Moments::new(), Moments::new());
    let mut vals: Vec<i64> = Vec::new();
    let mut pos = crate::dist::new_histogram(digits);
    let mut neg: Option<Histogram<u64>> = None;
    for (p, q) in hists {
        // Auto-resizing histograms of equal precision always add.
        let _ = pos.add(p.to_histogram());
        if q.len() > 0 {
            let _ = neg
                .get_or_insert_with(|| crate::dist::new_histogram(digits))
                .add(q.to_histogram());
        }
    }
    let mut rfc = 0.0f64;
    let mut prev_last: Option<i64> = None;
    for p in parts {
        if let (Some(l), Some(f)) = (prev_last, p.first_lat) {
            // The difference across the border, in its place in the chain.
            let d = ipdv(l, f);
            signed.record(d);
            abs.record(d.abs());
            rfc += (d.abs() as f64 - rfc) / 16.0;
            if exact {
                vals.push(d);
            } else {
                let _ = match u64::try_from(d) {
                    Ok(v) => pos.record(v),
                    Err(_) => neg
                        .get_or_insert_with(|| crate::dist::new_histogram(digits))
                        .record(d.unsigned_abs()),
                };
            }
        }
        let decay = match i32::try_from(p.m) {
            Ok(m) => (15.0f64 / 16.0).powi(m),
            Err(_) => (15.0f64 / 16.0).powf(p.m as f64),
        };
        rfc = rfc * decay + p.rfc_from_zero;
        signed.merge(&p.signed);
        abs.merge(&p.abs);
        if let Some(v) = &p.exact {
            vals.extend_from_slice(v);
        }
        prev_last = p.last_lat.or(prev_last);
    }
    let (mut ipdv_d, mut abs_d) = if exact {
        let mags = vals.iter().map(|x| x.abs()).collect();
        (
            Distribution::from_exact(signed, vals, digits),
            Distribution::from_exact(abs, mags, digits),
        )
    } else {
        let mut mags = pos.clone();
        if let Some(h) = &neg {
            let _ = mags.add(h);
        }
        (
            Distribution::from_hdr(signed, Some(pos), neg, digits),
            Distribution::from_hdr(abs, Some(mags), None, digits),
        )
    };
    // Arrival order is sequence order: the consecutive differences are the
    // IPDV magnitudes (only their moments are reported).
    let consec = Distribution::from_hdr(abs, None, None, digits);
    let n = a.latency.count();
    let s = &mut a.summary;
    s.jitter_ns =
        crate::metrics::jitter_stats(&mut ipdv_d, &mut abs_d, &consec, rfc, n, &s.latency_ns);
    s.loss = Some(LossStats {
        bursts: 0,
        burst_mean: None,
        burst_max: None,
        burst_lengths: Vec::new(),
        deadline_ns: None,
        late: None,
        loss_ratio_with_deadline: None,
    });
    s.reorder = Some(ReorderStats {
        ratio: 0.0,
        extent_mean: None,
        extent_p99: None,
        extent_max: None,
        beyond_window: 0,
    });
    s.flows = vec![FlowSummary {
        flow: 0,
        packets: s.packets,
        loss_ratio: 0.0,
        late: None,
        latency_ns: None,
    }];
    s.notes.retain(|x| !x.starts_with("anomalies-only pass"));
    a.ipdv = ipdv_d;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn write_trex(name: &str, pairs: &[(f64, f64)]) -> std::path::PathBuf {
        let dir = nflab_testkit::scratch_dir("fast");
        let path = dir.join(name);
        let bytes: Vec<u8> = pairs
            .iter()
            .flat_map(|(t, r)| t.to_le_bytes().into_iter().chain(r.to_le_bytes()))
            .collect();
        std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        path
    }

    fn specs() -> Vec<AnomalySpec> {
        [
            "1:30us",
            "2:30us",
            "3:30us:gt",
            "5:25us",
            "2:min+20us",
            "2:p50*2",
        ]
        .iter()
        .map(|s| s.parse().unwrap_or_else(|e| panic!("{s}: {e}")))
        .collect()
    }

    /// Latency (µs) of record i: 10 µs with bursts of `burst_len` packets at
    /// 20..40 µs from record `burst_at` on, every `period`.
    fn trace(n: usize, period: usize, burst_len: usize, seed: u64) -> Vec<(f64, f64)> {
        (0..n)
            .map(|i| {
                let tx = 1.7e9 + i as f64 * 1e-5;
                let x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed;
                let lat_us = if i % period < burst_len {
                    20.0 + (x % 20) as f64
                } else {
                    10.0 + (x % 7) as f64 * 0.5
                };
                (tx, tx + lat_us * 1e-6)
            })
            .collect()
    }

    /// The anomalies-only pass against the full pass (HDR mode, so even the
    /// percentiles must agree) for every split into 1..=7 parts.
    fn check_equal(path: &Path, events: usize) {
        check_equal_with(path, events, 0);
    }

    /// [`check_equal`] holding `exact_limit` values exactly (`u64::MAX`: --exact).
    fn check_equal_with(path: &Path, events: usize, exact_limit: u64) {
        let cfg = AnalysisConfig {
            anomalies: specs(),
            ..Default::default()
        };
        let opts = Options {
            exact_limit,
            anomaly_events: events,
            percentiles: vec![Pct::parse("0.1").unwrap(), Pct::parse("33.3").unwrap()],
            ..Options::default()
        };
        let mut full = crate::input::trex_engine_pass(TrexInput::File(path), &cfg, &opts)
            .unwrap_or_else(|e| panic!("{e}"))
            .analysis;
        check_full_split_equal(path, &cfg, &opts, &full);
        // Every HDR bucket (negative latencies too), not just the percentiles.
        let full_buckets = full.latency.value_counts();
        let full = full.summary;
        for threads in 1..=7 {
            let mut fast = anomalies_only(TrexInput::File(path), &cfg, &opts, threads, 1)
                .unwrap_or_else(|e| panic!("{e}"))
                .analysis;
            assert_eq!(fast.latency.value_counts(), full_buckets, "{threads} parts");
            let fast = fast.summary;
            assert_eq!(
                fast.anomaly_details, full.anomaly_details,
                "{threads} parts"
            );
            assert_eq!(fast.anomalies, full.anomalies, "{threads} parts");
            assert_eq!(fast.latency_ns, full.latency_ns, "{threads} parts");
            assert_eq!(fast.latency_quantiles, full.latency_quantiles);
            assert_eq!(fast.packets, full.packets);
            assert_eq!(fast.rate, full.rate);
            assert_eq!(fast.span, full.span);
            assert_eq!(fast.percentiles, full.percentiles);
        }
    }

    /// The split full pass against the engine's, field for field (the
    /// RFC 3550 estimate to 1e-12 relative), and the IPDV distribution
    /// bucket for bucket, split into 1, 2 and 5 parts; read from the file
    /// and from its bytes in memory.
    fn check_full_split_equal(
        path: &Path,
        cfg: &AnalysisConfig,
        opts: &Options,
        engine: &Analysis,
    ) {
        let mut want = serde_json::to_value(&engine.summary).unwrap();
        let want_rfc = want["jitter_ns"]["rfc3550"].take();
        let mut engine_ipdv = engine.ipdv.clone();
        let bytes = std::fs::read(path).unwrap();
        let inputs = [
            TrexInput::File(path),
            TrexInput::Bytes {
                name: path,
                bytes: &bytes,
            },
        ];
        for (threads, input) in [1, 2, 5].into_iter().flat_map(|t| inputs.map(|i| (t, i))) {
            let mut split = parallel(input, cfg, opts, threads, 1, true)
                .unwrap_or_else(|e| panic!("{e}"))
                .analysis;
            assert_eq!(
                split.ipdv.value_counts(),
                engine_ipdv.value_counts(),
                "{threads} parts"
            );
            assert_eq!(split.ipdv.method(), engine_ipdv.method());
            let mut got = serde_json::to_value(&split.summary).unwrap();
            let got_rfc = got["jitter_ns"]["rfc3550"].take();
            match (got_rfc.as_f64(), want_rfc.as_f64()) {
                (Some(g), Some(w)) => {
                    assert!(
                        (g - w).abs() <= w.abs() * 1e-12 + 1e-9,
                        "rfc3550 {g} vs {w}"
                    )
                }
                (g, w) => assert_eq!(g, w),
            }
            assert_eq!(got, want, "{threads} parts");
        }
    }

    #[test]
    fn exact_percentiles_equal_the_full_pass_in_exact_mode() {
        let path = write_trex("exact", &trace(20_000, 997, 5, 3));
        check_equal_with(&path, 1_000, u64::MAX);
        let fast = anomalies_only(
            TrexInput::File(&path),
            &AnalysisConfig::default(),
            &Options {
                exact_limit: u64::MAX,
                ..Options::default()
            },
            2,
            1,
        )
        .unwrap();
        assert_eq!(fast.analysis.latency.method(), crate::dist::Method::Exact);
        std::fs::remove_file(path).ok();
    }

    #[test]
    fn equals_full_pass_on_bursty_trace() {
        // Bursts straddle the part borders of every split; a burst is open
        // at the end of the file and one starts at the first record.
        let p = write_trex("bursty.data", &trace(1_003, 37, 6, 7));
        check_equal(&p, 100);
        check_equal(&p, 3); // event list truncated
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn fast_and_scalar_blocks_mix() {
        // Five blocks with small timestamps (the vectorised
        // conversion): block 1 also has negative and zero latencies, block 2
        // a timestamp in epoch seconds (the scalar path, with a huge negative
        // latency); a burst straddles the border of blocks 1 and 2, another
        // ends right at the end of block 2, block 3 is all below every
        // threshold and block 4 starts with a burst.
        let per_block = BLOCK_BYTES / TREX_RECORD_BYTES;
        let mut pairs = trace(4 * per_block + 123, 41, 7, 5);
        for (i, p) in pairs.iter_mut().enumerate() {
            let tx = 1.0 + i as f64 * 1e-5;
            let lat = if (3 * per_block..4 * per_block).contains(&i) {
                10e-6
            } else {
                p.1 - p.0
            };
            *p = (tx, tx + lat);
        }
        // A run open at the end of block 2 ends in block 3, whatever block 4
        // starts with.
        for r in [
            2 * per_block - 3..2 * per_block + 3,
            3 * per_block - 3..3 * per_block,
            4 * per_block..4 * per_block + 2,
        ] {
            for p in &mut pairs[r] {
                p.1 = p.0 + 39e-6;
            }
        }
        pairs[per_block + 10].1 = pairs[per_block + 10].0 - 3e-6;
        pairs[per_block + 11].1 = pairs[per_block + 11].0;
        pairs[2 * per_block + 500].0 = 1.7e9;
        pairs[2 * per_block + 501].1 = -1.0;
        let p = write_trex("mixed.data", &pairs);
        check_equal(&p, 100);
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn latency_jumps_of_seconds_equal_the_engine() {
        // Small timestamps (the vectorised conversion and the difference
        // steps), with differences of every size: µs, 1.5 s (steps of a few
        // differences), 3 s (beyond i32: the block's general path), negative
        // latencies, and a jump right at a block border.
        let per_block = BLOCK_BYTES / TREX_RECORD_BYTES;
        let pairs: Vec<(f64, f64)> = trace(3 * per_block + 77, 37, 5, 9)
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let tx = 1.0 + i as f64 * 1e-5;
                let lat = match i {
                    _ if i % 500 == 3 || i == per_block => 1.5,
                    _ if i % 1700 == 5 || i == 2 * per_block - 1 => 3.0,
                    _ if i % 97 == 0 => -5e-6,
                    _ => p.1 - p.0,
                };
                (tx, tx + lat)
            })
            .collect();
        let p = write_trex("jumps.data", &pairs);
        check_equal(&p, 20);
        let _ = std::fs::remove_file(p);
    }

    /// Runs placed by hand on the borders of the parts of a two-thread
    /// split (16 parts of 1343 records) and of the mapped windows: the split
    /// pass's list equals the sequential engine's and a list worked out by
    /// hand.
    #[test]
    fn runs_across_part_and_window_borders_equal_the_sequential_pass() {
        let per_block = BLOCK_BYTES / TREX_RECORD_BYTES;
        let n = 5 * per_block + 1000;
        let part = n.div_ceil(16); // anomalies_only(.., threads = 2, min_part = 1)
        let window = WINDOW_BYTES / TREX_RECORD_BYTES;
        // (first record, length) of each run at 50 µs; everything else at 10 µs.
        let runs = [
            (0, 3),                       // opens the file
            (part - 1, 1),                // ends a part: 1 + 1 joined, length 2
            (part, 1),                    // starts the next
            (2 * part - 2, 4),            // crosses a border
            (3 * part - 1, 2 * part + 2), // longer than a whole part
            (6 * part, 1),                // alone at a part's start: too short
            (window - 3, 5),              // crosses the first window border
            (2 * window - 2, 2),          // ends at a window border
            (n - 4, 4),                   // still open at the end of the file
        ];
        let mut lat_us = vec![10.0; n];
        for &(a, len) in &runs {
            lat_us[a..a + len].iter_mut().for_each(|l| *l = 50.0);
        }
        let pairs: Vec<(f64, f64)> = lat_us
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let tx = 1.0 + i as f64 * 1e-5;
                (tx, tx + l * 1e-6)
            })
            .collect();
        let path = write_trex("borders.data", &pairs);
        // By hand: the runs of at least 2 packets, with 1 + 1 at the first border joined.
        let want: Vec<(u64, u64)> = [(0, 3), (part - 1, 2), (2 * part - 2, 4)]
            .into_iter()
            .chain([(3 * part - 1, 2 * part + 2), (window - 3, 5)])
            .chain([(2 * window - 2, 2), (n - 4, 4)])
            .map(|(a, len)| (a as u64, len as u64))
            .collect();
        let cfg = AnalysisConfig {
            anomalies: vec!["2:30us".parse().unwrap()],
            ..Default::default()
        };
        let opts = Options {
            anomaly_events: 100,
            ..Options::default()
        };
        let seq = crate::input::trex_engine_pass(TrexInput::File(&path), &cfg, &opts)
            .unwrap_or_else(|e| panic!("{e}"))
            .analysis
            .summary;
        let split = anomalies_only(TrexInput::File(&path), &cfg, &opts, 2, 1)
            .unwrap_or_else(|e| panic!("{e}"))
            .analysis
            .summary;
        let got: Vec<(u64, u64)> = split.anomaly_details[0]
            .events
            .iter()
            .map(|e| (e.start_seq, e.packets))
            .collect();
        assert_eq!(got, want);
        assert_eq!(split.anomaly_details, seq.anomaly_details);
        assert_eq!(split.latency_ns, seq.latency_ns);
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn whole_file_one_anomaly_and_no_anomaly() {
        let all: Vec<_> = trace(50, 1, 1, 1);
        let p = write_trex("all-high.data", &all);
        check_equal(&p, 100);
        let none: Vec<_> = trace(50, 1_000_000, 0, 2);
        let q = write_trex("none.data", &none);
        check_equal(&q, 100);
        let _ = (std::fs::remove_file(p), std::fs::remove_file(q));
    }

    #[test]
    fn options_it_cannot_honour_are_named() {
        let p = write_trex("opts.data", &trace(10, 5, 1, 3));
        let opts = Options {
            worst_n: 5,
            window_ns: Some(1_000),
            ..Options::default()
        };
        let e = analyze_trex_anomalies_only(&p, &AnalysisConfig::default(), &opts, 2)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("--window, --worst") && e.contains("--anomalies-only"),
            "{e}"
        );
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn truncated_file_is_analysed_up_to_the_last_whole_record() {
        let p = write_trex("cut.data", &trace(100, 10, 3, 4));
        let mut bytes = std::fs::read(&p).unwrap_or_default();
        bytes.truncate(bytes.len() - 5);
        std::fs::write(&p, bytes).unwrap_or_else(|e| panic!("{e}"));
        let fa =
            analyze_trex_anomalies_only(&p, &AnalysisConfig::default(), &Options::default(), 2)
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(fa.analysis.summary.packets.received, 99);
        assert!(fa.problem.is_some_and(|m| m.contains("11 bytes")));
        let _ = std::fs::remove_file(p);
    }

    proptest! {
        /// The chunked search equals `position`.
        #[test]
        fn first_at_least_equals_position(
            vals in proptest::prop_oneof![
                proptest::collection::vec(-(1i64 << 53) + 1..1 << 53, 0..100),
                proptest::collection::vec(-5i64..100, 0..100),
            ],
            low in proptest::prop_oneof![0i64..1 << 54, 0i64..120, Just(i64::MAX)],
        ) {
            let want = vals.iter().position(|&l| l >= low);
            prop_assert_eq!(first_at_least(&vals, low, true), want);
            prop_assert_eq!(first_at_least(&vals, low, false), want);
        }

        /// The libm-free rounding equals `round()` for every finite input.
        #[test]
        fn secs_to_ns_equals_round(s in proptest::num::f64::ANY) {
            let v = (s * 1e9).round();
            let want = if v.is_nan() || v <= 0.0 { 0 } else { v as u64 };
            prop_assert_eq!(secs_to_ns(s), want);
        }

        /// Random latency sequences with random thresholds near the data:
        /// the anomalies-only pass equals the full pass for any split.
        #[test]
        fn random_traces_equal_full_pass(
            lat in proptest::collection::vec(0u32..60, 1..400),
            seed in 0u64..1000,
        ) {
            let pairs: Vec<_> = lat
                .iter()
                .enumerate()
                .map(|(i, &l)| {
                    let tx = 100.0 + i as f64 * 1e-6;
                    (tx, tx + f64::from(l) * 1e-6)
                })
                .collect();
            let p = write_trex(&format!("prop-{seed}.data"), &pairs);
            check_equal(&p, 20);
            let _ = std::fs::remove_file(p);
        }
    }
}
