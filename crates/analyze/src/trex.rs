//! Seed 001's TRex-fork files: 16-byte records of two little-endian f64
//! seconds, `(tx, rx)`, no header and no sequence numbers (seq = position).
//! The conversion to integer ns shared by the engine's reader
//! ([`crate::input`]) and the split passes ([`crate::fast`]), the record
//! count, and the notes every pass over such a file adds.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::dist::F64Index;
use crate::{Analysis, AnalyzeError, FileAnalysis, TailState};

/// The path that means standard input (read as a TRex-fork stream).
pub const STDIN_PATH: &str = "-";

pub(crate) fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == STDIN_PATH
}

/// Bytes of one TRex-fork record.
pub const TREX_RECORD_BYTES: usize = 16;

/// Seconds (f64) to ns, rounded half away from zero (numpy's rint agrees
/// except on exact ties); negative or NaN values become 0, values beyond
/// `u64::MAX` saturate.
///
/// Equal to `(s * 1e9).round() as u64` but without the call to libm's
/// `round` (x86-64's baseline has no rounding instruction): truncate, then
/// add one when the fraction is at least a half. `v - trunc(v)` is exact for
/// every `v` below 2^53, and above it every f64 is already an integer.
#[inline]
pub(crate) fn secs_to_ns(s: f64) -> u64 {
    scaled_to_ns(s * 1e9)
}

/// [`secs_to_ns`] after the multiplication: `v` in ns, rounded.
#[inline]
pub(crate) fn scaled_to_ns(v: f64) -> u64 {
    /// 2^63 as f64: below it the signed conversions (one instruction each
    /// way, unlike u64's) are exact.
    const I64_LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if v < 0.5 || v.is_nan() {
        return 0;
    }
    if v < I64_LIMIT {
        let t = v as i64;
        return (t + i64::from(v - t as f64 >= 0.5)) as u64;
    }
    // At and above 2^63 every f64 is an integer; beyond u64 it saturates.
    v as u64
}

/// 2^52 as f64: in [2^52, 2^53) the f64 spacing is 1.
pub(crate) const TWO52: f64 = 4_503_599_627_370_496.0;

/// What [`trex_latencies`] learnt besides the latencies, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TrexBlock {
    pub tx: (u64, u64),
    pub rx: (u64, u64),
    pub lat: (i64, i64),
}

/// The latencies `rx_ns - tx_ns` of whole TRex records, each timestamp
/// converted exactly as [`secs_to_ns`] does, written to `lat`, and for
/// latencies >= 0 their HDR bucket index (see [`F64Index`]) to `idx`; with
/// the min/max of tx, rx and latency. `None` (and `lat` unspecified) unless
/// every timestamp converts to [0, 2^52) ns (52 days): then the caller must
/// take the scalar path.
///
/// Why: in that range rounding needs no branch and no f64→int instruction
/// (x86-64's baseline has no vector one). `s = v + 2^52` rounds v to an
/// integer (ties to even) whose value is `bits(s) − bits(2^52)`; a tie is
/// moved up (half away from zero) by adding 1 when `v − (s − 2^52) == 0.5`,
/// which is exact. Out-of-range inputs (negative, NaN, ≥ 2^52, infinite)
/// all give an integer outside [0, 2^52), so one OR over the results checks
/// them. So the loop vectorises; latencies stay within ±2^52, no clamping.
pub(crate) fn trex_latencies(
    bytes: &[u8],
    lat: &mut Vec<i64>,
    hdr: F64Index,
    idx: &mut Vec<u32>,
) -> Option<TrexBlock> {
    let n = bytes.len() / TREX_RECORD_BYTES;
    // Every slot is written below: no clearing.
    lat.resize(n, 0);
    idx.resize(n, 0);
    if n == 0 {
        return None;
    }
    let mut acc = Lanes::new(hdr);
    let whole = n / GROUP * GROUP;
    let (head, tail) = bytes[..n * TREX_RECORD_BYTES].split_at(whole * TREX_RECORD_BYTES);
    for (c, out) in head
        .chunks_exact(GROUP * TREX_RECORD_BYTES)
        .zip(lat.chunks_exact_mut(GROUP).zip(idx.chunks_exact_mut(GROUP)))
    {
        acc.group(c, out.0, out.1);
    }
    if !tail.is_empty() {
        // Pad with copies of the last record: min, max and the range check
        // are unchanged.
        let mut c = [0u8; GROUP * TREX_RECORD_BYTES];
        let last = &tail[tail.len() - TREX_RECORD_BYTES..];
        for (k, r) in c.chunks_exact_mut(TREX_RECORD_BYTES).enumerate() {
            r.copy_from_slice(
                tail.get(k * TREX_RECORD_BYTES..(k + 1) * TREX_RECORD_BYTES)
                    .unwrap_or(last),
            );
        }
        let (mut out, mut out_idx) = ([0i64; GROUP], [0u32; GROUP]);
        acc.group(&c, &mut out, &mut out_idx);
        lat[whole..].copy_from_slice(&out[..n - whole]);
        idx[whole..].copy_from_slice(&out_idx[..n - whole]);
    }
    acc.finish()
}

/// Records per step of [`trex_latencies`]: 16 timestamps, so each lane-wise
/// operation is a few 2-wide vector instructions.
const GROUP: usize = 8;

/// Running state of [`trex_latencies`] per lane (even: tx, odd: rx): the
/// smallest and largest rounded `s`, the OR of `bits(s) − bits(2^52)`, and
/// the latency range (two lanes); and how to find HDR bucket indices. Each
/// group is reduced to two lanes first (a tree, so no long dependency
/// chain) and only then merged, which keeps the state in a few registers.
/// Plain compares, not `f64::min`, so they vectorise (a NaN is caught by
/// `any`).
struct Lanes {
    lo: [f64; 2],
    hi: [f64; 2],
    any: [u64; 2],
    lat_lo: [f64; 2],
    lat_hi: [f64; 2],
    hdr: F64Index,
}

#[inline(always)]
fn min(a: f64, b: f64) -> f64 {
    if b < a {
        b
    } else {
        a
    }
}

#[inline(always)]
fn max(a: f64, b: f64) -> f64 {
    if b > a {
        b
    } else {
        a
    }
}

/// `a` folded pairwise with `f` down to its first two elements, keeping
/// even and odd positions apart (`N` a power of two, at least 2).
#[inline(always)]
fn tree<T: Copy, const N: usize>(mut a: [T; N], f: impl Fn(T, T) -> T) -> [T; 2] {
    let mut w = N;
    while w > 2 {
        w /= 2;
        for k in 0..w {
            a[k] = f(a[k], a[k + w]);
        }
    }
    [a[0], a[1]]
}

impl Lanes {
    fn new(hdr: F64Index) -> Lanes {
        Lanes {
            lo: [f64::INFINITY; 2],
            hi: [f64::NEG_INFINITY; 2],
            any: [0; 2],
            lat_lo: [f64::INFINITY; 2],
            lat_hi: [f64::NEG_INFINITY; 2],
            hdr,
        }
    }

    #[inline(always)]
    fn group(&mut self, c: &[u8], out: &mut [i64], idx: &mut [u32]) {
        let base = TWO52.to_bits();
        let mut s = [0f64; 2 * GROUP];
        let mut any = [0u64; 2 * GROUP];
        for (k, (s, any)) in s.iter_mut().zip(&mut any).enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(&c[8 * k..8 * k + 8]);
            *s = round_scaled(f64::from_le_bytes(b) * 1e9);
            *any = s.to_bits().wrapping_sub(base);
        }
        let mut lat = [0f64; GROUP];
        for j in 0..GROUP {
            out[j] = (s[2 * j + 1].to_bits() as i64).wrapping_sub(s[2 * j].to_bits() as i64);
            // Exact: both in [2^52, 2^53].
            lat[j] = s[2 * j + 1] - s[2 * j];
            // Meaningful for latencies >= 0 only (the caller checks).
            idx[j] = self.hdr.of(lat[j], out[j]) as u32;
        }
        let (lo, hi, any) = (tree(s, min), tree(s, max), tree(any, |a, b| a | b));
        let (lat_lo, lat_hi) = (tree(lat, min), tree(lat, max));
        for k in 0..2 {
            self.lo[k] = min(self.lo[k], lo[k]);
            self.hi[k] = max(self.hi[k], hi[k]);
            self.any[k] |= any[k];
            self.lat_lo[k] = min(self.lat_lo[k], lat_lo[k]);
            self.lat_hi[k] = max(self.lat_hi[k], lat_hi[k]);
        }
    }

    fn finish(&self) -> Option<TrexBlock> {
        if self.any[0] | self.any[1] >= 1 << 52 {
            return None;
        }
        let ns = |s: f64| s.to_bits() - TWO52.to_bits();
        Some(TrexBlock {
            tx: (ns(self.lo[0]), ns(self.hi[0])),
            rx: (ns(self.lo[1]), ns(self.hi[1])),
            lat: (
                min(self.lat_lo[0], self.lat_lo[1]) as i64,
                max(self.lat_hi[0], self.lat_hi[1]) as i64,
            ),
        })
    }
}

/// `v` (≥ 0, below 2^52) rounded half up, plus 2^52: see [`trex_latencies`].
/// Other inputs give a result whose bits lie outside
/// `bits(2^52) .. bits(2^52) + 2^52`.
#[inline(always)]
pub(crate) fn round_scaled(v: f64) -> f64 {
    let r = v + TWO52;
    r + if v - (r - TWO52) == 0.5 { 1.0 } else { 0.0 }
}

/// Where a TRex-fork input's bytes are: a file, or bytes already in
/// memory, named in messages as if they were that file (the fuzz targets
/// and callers that hold the bytes need no scratch file).
#[derive(Debug, Clone, Copy)]
pub(crate) enum TrexInput<'a> {
    File(&'a Path),
    Bytes { name: &'a Path, bytes: &'a [u8] },
}

impl<'a> TrexInput<'a> {
    /// The name messages use: the file's path.
    pub(crate) fn name(self) -> &'a Path {
        match self {
            TrexInput::File(path) | TrexInput::Bytes { name: path, .. } => path,
        }
    }

    /// Whole records and leftover bytes; an error naming the input when it
    /// holds less than one record.
    pub(crate) fn records(self) -> Result<(u64, u64), AnalyzeError> {
        let path = self.name();
        let len = match self {
            TrexInput::File(path) => std::fs::metadata(path)
                .map_err(|source| AnalyzeError::Io {
                    path: path.to_path_buf(),
                    source,
                })?
                .len(),
            TrexInput::Bytes { bytes, .. } => bytes.len() as u64,
        };
        if len < TREX_RECORD_BYTES as u64 {
            return Err(AnalyzeError::Input {
                path: path.to_path_buf(),
                reason: format!(
                    "the file has {len} bytes, less than one 16-byte (tx, rx) record of a \
                     TRex-fork file"
                ),
            });
        }
        let rec = TREX_RECORD_BYTES as u64;
        Ok((len / rec, len % rec))
    }

    /// The first and the last record's tx time, ns.
    pub(crate) fn span(self) -> Option<(u64, u64)> {
        match self {
            TrexInput::File(path) => trex_span(path),
            TrexInput::Bytes { bytes, .. } => {
                let n = bytes.len() / TREX_RECORD_BYTES;
                let tx = |i: usize| {
                    let at = i * TREX_RECORD_BYTES;
                    let b: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
                    Some(secs_to_ns(f64::from_le_bytes(b)))
                };
                Some((tx(0)?, tx(n.checked_sub(1)?)?))
            }
        }
    }
}

/// What a TRex-fork file cannot show.
pub(crate) fn trex_note(path: &Path) -> String {
    let name = if is_stdin(path) {
        "standard input".to_string()
    } else {
        path.display().to_string()
    };
    format!(
        "{} is a TRex-fork file: it holds no sequence numbers (seq = position in the \
         file) and only packets TRex received in order, so loss, reordering and \
         duplicates are not visible",
        name
    )
}

/// The sentence for a TRex-fork file that ends mid-record.
pub(crate) fn trex_leftover_problem(path: &Path, leftover: u64, n: u64) -> String {
    format!(
        "{} ends with {leftover} bytes that are not a whole 16-byte record (the writer \
         was probably stopped mid-record); the {n} whole records before them were analysed",
        path.display()
    )
}

fn trex_span(path: &Path) -> Option<(u64, u64)> {
    let mut f = File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let n = len / TREX_RECORD_BYTES as u64;
    if n == 0 {
        return None;
    }
    let mut b = [0u8; 8];
    f.read_exact(&mut b).ok()?;
    let first = secs_to_ns(f64::from_le_bytes(b));
    f.seek(SeekFrom::Start((n - 1) * TREX_RECORD_BYTES as u64))
        .ok()?;
    f.read_exact(&mut b).ok()?;
    Some((first, secs_to_ns(f64::from_le_bytes(b))))
}

/// The [`FileAnalysis`] of a TRex-fork input of `n` whole records followed by
/// `leftover` bytes (a note and a problem when there are any).
pub(crate) fn trex_outcome(
    path: &Path,
    mut analysis: Analysis,
    leftover: u64,
    n: u64,
) -> FileAnalysis {
    let problem = (leftover > 0).then(|| {
        let msg = trex_leftover_problem(path, leftover, n);
        analysis.summary.notes.push(msg.clone());
        msg
    });
    FileAnalysis {
        analysis,
        tail: match &problem {
            Some(p) => TailState::Truncated {
                discarded_bytes: leftover,
                reason: p.clone(),
            },
            None => TailState::Complete,
        },
        problem,
    }
}
