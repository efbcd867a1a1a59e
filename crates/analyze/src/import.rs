//! Importers: seed 001's TRex-fork files, pcap/pcapng captures.
//!
//! # Pcap pairs (seed 000's hardware timestamper)
//!
//! One capture is taken before the device under test (PRE) and one after it
//! (POST). Each packet's latency is `POST timestamp − PRE timestamp`, the
//! packets being matched by the nflab probe header's `(flow, seq)`, or, when
//! the PRE capture holds no probe at all, by a 64-bit FNV-1a hash of the
//! packet's payload (the UDP payload, else the IP payload, else the frame
//! after the link header) and its occurrence count.
//!
//! [`read_pcap_pair`] gives the records in POST arrival order with
//! `tx_ns` = PRE timestamp and `rx_ns` = POST timestamp, and one
//! [`FlowSent`] per flow = the number of distinct probes in PRE, so a
//! packet in PRE but not in POST is lost. A record's `seq` is the position of
//! its probe among the flow's distinct probes in PRE (0, 1, 2, ...), because
//! the analysis engine expects sequence numbers `0..sent`; PRE order is the
//! order the device under test received them in, so reordering is measured
//! against it. [`analyze_pcap_pair`] runs the analysis.
//!
//! The capture reader handles classic pcap (both byte orders, micro- and
//! nanosecond magic) and pcapng (SHB, IDB with `if_tsresol` and
//! `if_tsoffset`, EPB, the obsolete PB, SPB; both byte orders, several
//! sections). Simple packet blocks carry no timestamp and are counted and
//! skipped. Link types: Ethernet (1, with any number of 802.1Q/802.1ad tags),
//! raw IP (12, 14, 101), IPv4 (228), IPv6 (229), Linux cooked SLL (113) and
//! SLL2 (276). It reads block by block into one reused buffer and never
//! panics: a file that does not start like a capture is an error naming the
//! file and byte offset; a truncated or corrupt block later on ends reading
//! with a warning naming the file and the offset, and the packets before it
//! are used.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use nflab_record::{FlowSent, Record, TailState};

use crate::engine::{Engine, Options};
use crate::metrics::with_resolved_thresholds;
use crate::FileAnalysis;
use crate::{Analysis, AnalysisConfig, AnalyzeError};

/// Largest block or record accepted; a length beyond it is corruption.
const MAX_BLOCK: usize = 64 << 20;
const PCAPNG_SHB: u32 = 0x0a0d_0d0a;
const PCAPNG_BOM: u32 = 0x1a2b_3c4d;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endian {
    Little,
    Big,
}

impl Endian {
    fn u16(self, b: &[u8], at: usize) -> u16 {
        let mut a = [0u8; 2];
        if let Some(s) = b.get(at..at.saturating_add(2)) {
            a.copy_from_slice(s);
        }
        match self {
            Endian::Little => u16::from_le_bytes(a),
            Endian::Big => u16::from_be_bytes(a),
        }
    }

    fn u32(self, b: &[u8], at: usize) -> u32 {
        let mut a = [0u8; 4];
        if let Some(s) = b.get(at..at.saturating_add(4)) {
            a.copy_from_slice(s);
        }
        match self {
            Endian::Little => u32::from_le_bytes(a),
            Endian::Big => u32::from_be_bytes(a),
        }
    }

    fn u64(self, b: &[u8], at: usize) -> u64 {
        let mut a = [0u8; 8];
        if let Some(s) = b.get(at..at.saturating_add(8)) {
            a.copy_from_slice(s);
        }
        match self {
            Endian::Little => u64::from_le_bytes(a),
            Endian::Big => u64::from_be_bytes(a),
        }
    }
}

/// A pcapng interface.
#[derive(Debug, Clone, Copy)]
struct Iface {
    linktype: u32,
    /// `if_tsresol`: bit 7 clear = 10^-n s, set = 2^-n s.
    tsresol: u8,
    /// `if_tsoffset`, seconds.
    offset_s: i64,
}

/// A pcapng timestamp in units of `tsresol`, plus `offset_s`, as ns
/// (clamped to `0..=u64::MAX`).
fn pcapng_ts_ns(ts: u64, tsresol: u8, offset_s: i64) -> u64 {
    let e = u32::from(tsresol & 0x7f);
    let ns: u128 = if tsresol & 0x80 == 0 {
        if e <= 9 {
            u128::from(ts) * 10u128.pow(9 - e)
        } else {
            10u128.checked_pow(e - 9).map_or(0, |d| u128::from(ts) / d)
        }
    } else {
        (u128::from(ts) * 1_000_000_000) >> e
    };
    let ns = ns as i128 + i128::from(offset_s) * 1_000_000_000;
    ns.clamp(0, i128::from(u64::MAX)) as u64
}

enum Kind {
    Pcap {
        endian: Endian,
        nanos: bool,
        linktype: u32,
    },
    Pcapng {
        endian: Endian,
        ifaces: Vec<Iface>,
        /// The first SHB's type was consumed by `open`.
        pending_shb: bool,
    },
}

/// One packet of a capture, as handed to [`CaptureReader::for_each`].
#[derive(Debug, Clone, Copy)]
pub struct CapturedPacket<'a> {
    /// Timestamp, ns since the Unix epoch (as the capture says).
    pub ts_ns: u64,
    /// Link type (LINKTYPE_* value).
    pub linktype: u32,
    /// Length of the packet on the wire.
    pub orig_len: u32,
    /// The captured bytes.
    pub data: &'a [u8],
}

/// A streaming pcap/pcapng reader. See the [module docs](self).
/// [`CaptureReader::open`] reads a file; [`CaptureReader::from_reader`]
/// any [`Read`], a byte slice included.
pub struct CaptureReader<R = BufReader<File>> {
    path: PathBuf,
    r: R,
    pos: u64,
    kind: Kind,
    buf: Vec<u8>,
    packets: u64,
    /// Why reading stopped before the end of the file (truncated or corrupt
    /// block), one sentence naming the file and the byte offset.
    pub problem: Option<String>,
    /// Packets skipped: simple packet blocks (no timestamp) and packets of an
    /// undeclared interface.
    pub skipped: u64,
}

fn read_into(r: &mut impl Read, out: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < out.len() {
        match r.read(&mut out[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Why a block could not be read.
enum Stop {
    /// Clean end of file.
    End,
    /// Truncated or corrupt at this offset: the message.
    Bad(String),
}

impl CaptureReader {
    /// Open a capture and read its file header. An unreadable file, or one
    /// that does not start with a pcap or pcapng header, is an error naming
    /// the file and the byte offset.
    pub fn open(path: &Path) -> Result<CaptureReader, AnalyzeError> {
        let file = File::open(path).map_err(|source| AnalyzeError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        CaptureReader::from_reader(BufReader::with_capacity(1 << 20, file), path)
    }
}

impl<R: Read> CaptureReader<R> {
    /// Read a capture's file header from `r`, whose bytes are the file at
    /// `path` (named in messages; `r` may be a byte slice). Errors as
    /// [`CaptureReader::open`]'s.
    pub fn from_reader(mut r: R, path: &Path) -> Result<CaptureReader<R>, AnalyzeError> {
        let io = |source| AnalyzeError::Io {
            path: path.to_path_buf(),
            source,
        };
        let not_capture = |reason: String| AnalyzeError::Input {
            path: path.to_path_buf(),
            reason,
        };
        let mut magic = [0u8; 4];
        let got = read_into(&mut r, &mut magic).map_err(io)?;
        if got < 4 {
            return Err(not_capture(format!(
                "byte 0: not a pcap or pcapng capture: the file has only {got} bytes"
            )));
        }
        let le = u32::from_le_bytes(magic);
        let pcap = match le {
            0xa1b2_c3d4 => Some((Endian::Little, false)),
            0xa1b2_3c4d => Some((Endian::Little, true)),
            0xd4c3_b2a1 => Some((Endian::Big, false)),
            0x4d3c_b2a1 => Some((Endian::Big, true)),
            _ => None,
        };
        let kind = if let Some((endian, nanos)) = pcap {
            let mut h = [0u8; 20];
            let got = read_into(&mut r, &mut h).map_err(io)?;
            if got < 20 {
                return Err(not_capture(format!(
                    "byte {}: truncated pcap file header (24 bytes needed, the file has {})",
                    4 + got,
                    4 + got
                )));
            }
            // version(4) thiszone(4) sigfigs(4) snaplen(4) network(4);
            // the low 16 bits of network are the link type (the upper ones
            // carry FCS information).
            Kind::Pcap {
                endian,
                nanos,
                linktype: endian.u32(&h, 16) & 0xffff,
            }
        } else if le == PCAPNG_SHB {
            Kind::Pcapng {
                endian: Endian::Little,
                ifaces: Vec::new(),
                pending_shb: true,
            }
        } else {
            return Err(not_capture(format!(
                "byte 0: not a pcap or pcapng capture (starts with {:02x} {:02x} {:02x} {:02x}; \
                 pcap starts with a1 b2 c3 d4 or a1 b2 3c 4d in either byte order, pcapng with \
                 0a 0d 0d 0a)",
                magic[0], magic[1], magic[2], magic[3]
            )));
        };
        let pos = if matches!(kind, Kind::Pcap { .. }) {
            24
        } else {
            4
        };
        Ok(CaptureReader {
            path: path.to_path_buf(),
            r,
            pos,
            kind,
            buf: Vec::new(),
            packets: 0,
            problem: None,
            skipped: 0,
        })
    }

    /// Read `n` bytes into `self.buf[..n]`; a short read is truncation.
    fn fill(&mut self, n: usize, start: u64, what: &str) -> Result<Result<(), Stop>, AnalyzeError> {
        // Grow with what the file really holds: a corrupt length field claiming
        // 64 MiB must not cost a 64 MiB zeroed buffer before the read finds
        // the file ends (the fuzzer's capture_import spent 40 % of its time so).
        self.buf.clear();
        let got = std::io::Read::read_to_end(
            &mut std::io::Read::take(&mut self.r, n as u64),
            &mut self.buf,
        )
        .map_err(|source| AnalyzeError::Io {
            path: self.path.clone(),
            source,
        })?;
        self.pos += got as u64;
        if got < n {
            return Ok(Err(self.truncated(start, what, n, got)));
        }
        Ok(Ok(()))
    }

    fn truncated(&self, start: u64, what: &str, need: usize, got: usize) -> Stop {
        Stop::Bad(format!(
            "{}: truncated at byte {start}: the {what} there is {need} bytes long but the file \
             ends after {got} of them",
            self.path.display()
        ))
    }

    fn corrupt(&self, start: u64, what: String) -> Stop {
        Stop::Bad(format!(
            "{}: corrupt capture at byte {start}: {what}",
            self.path.display()
        ))
    }

    /// Call `f` for every timestamped packet, in file order. Reading stops
    /// at the end of the file or at a truncated or corrupt block; then
    /// [`CaptureReader::problem`] says where.
    pub fn for_each(&mut self, mut f: impl FnMut(CapturedPacket<'_>)) -> Result<(), AnalyzeError> {
        loop {
            let step = match self.kind {
                Kind::Pcap { .. } => self.pcap_record(&mut f)?,
                Kind::Pcapng { .. } => self.pcapng_block(&mut f)?,
            };
            match step {
                Ok(()) => {}
                Err(Stop::End) => return Ok(()),
                Err(Stop::Bad(msg)) => {
                    self.problem = Some(format!(
                        "{msg}; the {} packets before it were used",
                        self.packets
                    ));
                    return Ok(());
                }
            }
        }
    }

    fn pcap_record(
        &mut self,
        f: &mut impl FnMut(CapturedPacket<'_>),
    ) -> Result<Result<(), Stop>, AnalyzeError> {
        let Kind::Pcap {
            endian,
            nanos,
            linktype,
        } = self.kind
        else {
            return Ok(Err(Stop::End));
        };
        let start = self.pos;
        let mut h = [0u8; 16];
        let got = read_into(&mut self.r, &mut h).map_err(|source| AnalyzeError::Io {
            path: self.path.clone(),
            source,
        })?;
        self.pos += got as u64;
        if got == 0 {
            return Ok(Err(Stop::End));
        }
        if got < 16 {
            return Ok(Err(self.truncated(start, "packet record header", 16, got)));
        }
        let sec = u64::from(endian.u32(&h, 0));
        let frac = u64::from(endian.u32(&h, 4));
        let incl = endian.u32(&h, 8) as usize;
        let orig = endian.u32(&h, 12);
        if incl > MAX_BLOCK {
            return Ok(Err(self.corrupt(
                start,
                format!("a packet record says it holds {incl} bytes"),
            )));
        }
        if let Err(s) = self.fill(incl, start, "packet data")? {
            return Ok(Err(s));
        }
        let ts_ns = sec * 1_000_000_000 + if nanos { frac } else { frac * 1000 };
        self.packets += 1;
        f(CapturedPacket {
            ts_ns,
            linktype,
            orig_len: orig,
            data: &self.buf[..incl],
        });
        Ok(Ok(()))
    }

    fn pcapng_block(
        &mut self,
        f: &mut impl FnMut(CapturedPacket<'_>),
    ) -> Result<Result<(), Stop>, AnalyzeError> {
        let Kind::Pcapng {
            endian,
            pending_shb,
            ..
        } = self.kind
        else {
            return Ok(Err(Stop::End));
        };
        let io = |path: &Path, source| AnalyzeError::Io {
            path: path.to_path_buf(),
            source,
        };
        let start = if pending_shb { 0 } else { self.pos };
        let btype = if pending_shb {
            PCAPNG_SHB
        } else {
            let mut t = [0u8; 4];
            let got = read_into(&mut self.r, &mut t).map_err(|e| io(&self.path, e))?;
            self.pos += got as u64;
            if got == 0 {
                return Ok(Err(Stop::End));
            }
            if got < 4 {
                return Ok(Err(self.truncated(start, "block header", 4, got)));
            }
            endian.u32(&t, 0)
        };
        if btype == PCAPNG_SHB {
            let mut h = [0u8; 8];
            let got = read_into(&mut self.r, &mut h).map_err(|e| io(&self.path, e))?;
            self.pos += got as u64;
            if got < 8 {
                let s = self.truncated(start, "section header block", 8, got);
                return self.first_block_fatal(start, s);
            }
            let endian = if u32::from_le_bytes([h[4], h[5], h[6], h[7]]) == PCAPNG_BOM {
                Endian::Little
            } else if u32::from_be_bytes([h[4], h[5], h[6], h[7]]) == PCAPNG_BOM {
                Endian::Big
            } else {
                let s = self.corrupt(
                    start + 8,
                    "the section header's byte-order magic is not 1a2b3c4d".into(),
                );
                return self.first_block_fatal(start, s);
            };
            let len = endian.u32(&h, 0) as usize;
            if len < 28 || !len.is_multiple_of(4) || len > MAX_BLOCK {
                let s = self.corrupt(start, format!("section header block length {len}"));
                return self.first_block_fatal(start, s);
            }
            if let Err(s) = self.fill(len - 12, start, "section header block")? {
                return self.first_block_fatal(start, s);
            }
            self.kind = Kind::Pcapng {
                endian,
                ifaces: Vec::new(),
                pending_shb: false,
            };
            return Ok(Ok(()));
        }
        let mut l = [0u8; 4];
        let got = read_into(&mut self.r, &mut l).map_err(|e| io(&self.path, e))?;
        self.pos += got as u64;
        if got < 4 {
            return Ok(Err(self.truncated(start, "block header", 8, got + 4)));
        }
        let len = endian.u32(&l, 0) as usize;
        if len < 12 || !len.is_multiple_of(4) || len > MAX_BLOCK {
            return Ok(Err(self.corrupt(
                start,
                format!("block of type {btype:#x} has length {len}"),
            )));
        }
        if let Err(s) = self.fill(len - 8, start, "block")? {
            return Ok(Err(s));
        }
        let body_len = len - 12;
        if endian.u32(&self.buf, body_len) as usize != len {
            return Ok(Err(self.corrupt(
                start,
                format!("block of type {btype:#x}: the trailing length differs from {len}"),
            )));
        }
        let Kind::Pcapng { ifaces, .. } = &mut self.kind else {
            return Ok(Err(Stop::End));
        };
        let body = &self.buf[..body_len];
        match btype {
            // Interface description block.
            1 => {
                let mut iface = Iface {
                    linktype: u32::from(endian.u16(body, 0)),
                    tsresol: 6,
                    offset_s: 0,
                };
                let mut p = 8;
                while p + 4 <= body.len() {
                    let code = endian.u16(body, p);
                    let olen = usize::from(endian.u16(body, p + 2));
                    let Some(val) = body.get(p + 4..p + 4 + olen) else {
                        break;
                    };
                    match code {
                        0 => break,
                        9 if olen >= 1 => iface.tsresol = val[0],
                        14 if olen >= 8 => iface.offset_s = endian.u64(val, 0) as i64,
                        _ => {}
                    }
                    p += 4 + olen.div_ceil(4) * 4;
                }
                ifaces.push(iface);
            }
            // Enhanced packet block, obsolete packet block.
            6 | 2 => {
                let (id, hi, lo, cap, orig) = if btype == 6 {
                    (
                        endian.u32(body, 0) as usize,
                        endian.u32(body, 4),
                        endian.u32(body, 8),
                        endian.u32(body, 12) as usize,
                        endian.u32(body, 16),
                    )
                } else {
                    (
                        usize::from(endian.u16(body, 0)),
                        endian.u32(body, 4),
                        endian.u32(body, 8),
                        endian.u32(body, 12) as usize,
                        endian.u32(body, 16),
                    )
                };
                let Some(data) = body.get(20..20usize.saturating_add(cap)) else {
                    return Ok(Err(self.corrupt(
                        start,
                        format!("packet block says it holds {cap} bytes, more than the block"),
                    )));
                };
                let Some(iface) = ifaces.get(id) else {
                    self.skipped += 1;
                    return Ok(Ok(()));
                };
                let ts = (u64::from(hi) << 32) | u64::from(lo);
                self.packets += 1;
                f(CapturedPacket {
                    ts_ns: pcapng_ts_ns(ts, iface.tsresol, iface.offset_s),
                    linktype: iface.linktype,
                    orig_len: orig,
                    data,
                });
            }
            // Simple packet block: no timestamp, unusable for latency.
            3 => self.skipped += 1,
            _ => {}
        }
        Ok(Ok(()))
    }

    /// A bad section header at the start of the file means it is not a
    /// capture: an error. Later, it ends reading with a warning.
    fn first_block_fatal(&self, start: u64, s: Stop) -> Result<Result<(), Stop>, AnalyzeError> {
        match s {
            Stop::Bad(msg) if start == 0 => Err(AnalyzeError::Input {
                path: self.path.clone(),
                reason: format!("not a usable pcapng capture: {msg}"),
            }),
            s => Ok(Err(s)),
        }
    }
}

// ---------------------------------------------------------------------------
// Frames
// ---------------------------------------------------------------------------

/// What identifies a packet across the two captures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Probe { flow: u16, seq: u64 },
    Hash(u64),
}

fn fnv1a(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= u64::from(x);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn be16(b: &[u8], at: usize) -> Option<usize> {
    b.get(at..at + 2)
        .map(|s| usize::from(u16::from_be_bytes([s[0], s[1]])))
}

/// L4 payload: the probe in a UDP payload, else a hash of it.
fn l4_key(proto: u8, l4: &[u8]) -> Key {
    if proto == 17 && l4.len() >= 8 {
        let ulen = be16(l4, 4).unwrap_or(0);
        let end = if ulen >= 8 {
            ulen.min(l4.len())
        } else {
            l4.len()
        };
        let payload = &l4[8..end];
        return match nflab_wire::parse_probe_payload(payload) {
            Ok(p) => Key::Probe {
                flow: p.flow,
                seq: p.seq,
            },
            Err(_) => Key::Hash(fnv1a(payload)),
        };
    }
    Key::Hash(fnv1a(l4))
}

/// Lenient IP parse (no checksum check: captures often hold frames with
/// offloaded, not yet computed checksums).
fn ip_key(ethertype: usize, l3: &[u8]) -> Key {
    match ethertype {
        0x0800 if l3.len() >= 20 && l3[0] >> 4 == 4 => {
            let ihl = usize::from(l3[0] & 0x0f) * 4;
            let total = be16(l3, 2).unwrap_or(0).min(l3.len());
            let frag = be16(l3, 6).unwrap_or(0);
            if ihl < 20 || total < ihl {
                return Key::Hash(fnv1a(l3));
            }
            let l4 = &l3[ihl..total];
            if frag & 0x3fff != 0 {
                return Key::Hash(fnv1a(l4));
            }
            l4_key(l3[9], l4)
        }
        0x86dd if l3.len() >= 40 && l3[0] >> 4 == 6 => {
            let plen = be16(l3, 4).unwrap_or(0);
            let end = (40 + plen).min(l3.len());
            let mut next = l3[6];
            let mut l4 = &l3[40..end];
            for _ in 0..8 {
                match next {
                    0 | 43 | 60 if l4.len() >= 8 => {
                        let n = (usize::from(l4[1]) + 1) * 8;
                        next = l4[0];
                        l4 = l4.get(n..).unwrap_or(&[]);
                    }
                    44 => return Key::Hash(fnv1a(l4)),
                    _ => break,
                }
            }
            l4_key(next, l4)
        }
        _ => Key::Hash(fnv1a(l3)),
    }
}

/// The key of one captured frame; `None` for a link type not understood.
fn frame_key(linktype: u32, frame: &[u8]) -> Option<Key> {
    match linktype {
        1 => {
            if let Ok(p) = nflab_wire::parse_probe(frame) {
                return Some(Key::Probe {
                    flow: p.flow,
                    seq: p.seq,
                });
            }
            let mut et = be16(frame, 12)?;
            let mut at = 14;
            while matches!(et, 0x8100 | 0x88a8 | 0x9100) {
                et = be16(frame, at + 2)?;
                at += 4;
            }
            Some(ip_key(et, frame.get(at..)?))
        }
        12 | 14 | 101 | 228 | 229 => {
            let et = match frame.first()? >> 4 {
                4 => 0x0800,
                6 => 0x86dd,
                _ => 0,
            };
            Some(ip_key(et, frame))
        }
        113 => Some(ip_key(be16(frame, 14)?, frame.get(16..)?)),
        276 => Some(ip_key(be16(frame, 0)?, frame.get(20..)?)),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// Pairs
// ---------------------------------------------------------------------------

/// The records of a PRE/POST capture pair.
#[derive(Debug, Clone, Default)]
pub struct PcapPair {
    /// One record per matched POST packet, in POST order: `tx_ns` = PRE
    /// timestamp, `rx_ns` = POST timestamp, `seq` = position of the probe
    /// among its flow's distinct probes in PRE.
    pub records: Vec<Record>,
    /// Per flow: distinct probes in PRE.
    pub sent: Vec<FlowSent>,
    /// Matched by payload hash (no probe header in PRE) instead of `(flow, seq)`.
    pub by_hash: bool,
    /// Caveats (unmatched packets, skipped blocks, renumbering).
    pub notes: Vec<String>,
    /// Truncated or corrupt tails of either capture, `"; "`-joined: one
    /// sentence per file naming it and the byte offset.
    pub problem: Option<String>,
    /// Earliest and latest PRE timestamp of a packet counted as sent.
    pub tx_span: Option<(u64, u64)>,
}

/// Read a PRE and a POST capture and match their packets. See the
/// [module docs](self).
///
/// Errors: either file unreadable or not a capture (naming it and the byte
/// offset); PRE without any usable packet; POST without a probe packet
/// (when PRE has probes) or without any packet matching PRE (hash mode).
pub fn read_pcap_pair(pre: &Path, post: &Path) -> Result<PcapPair, AnalyzeError> {
    let mut out = PcapPair::default();
    let mut problems = Vec::new();

    // PRE: first occurrence of each key, with its position per flow.
    let mut rd = CaptureReader::open(pre)?;
    let mut probes: HashMap<(u16, u64), (u64, u64)> = HashMap::new();
    let mut per_flow: HashMap<u16, u64> = HashMap::new();
    let mut hashes: HashMap<(u64, u32), (u64, u64)> = HashMap::new();
    let mut hash_count: HashMap<u64, u32> = HashMap::new();
    let (mut pre_packets, mut pre_other_link, mut pre_dup) = (0u64, 0u64, 0u64);
    let mut span: Option<(u64, u64)> = None;
    rd.for_each(|p| {
        pre_packets += 1;
        match frame_key(p.linktype, p.data) {
            None => pre_other_link += 1,
            Some(Key::Probe { flow, seq }) => {
                let n = per_flow.entry(flow).or_insert(0);
                if let std::collections::hash_map::Entry::Vacant(v) = probes.entry((flow, seq)) {
                    v.insert((*n, p.ts_ns));
                    *n += 1;
                } else {
                    pre_dup += 1;
                }
            }
            Some(Key::Hash(h)) => {
                let c = hash_count.entry(h).or_insert(0);
                let rank = hashes.len() as u64;
                hashes.insert((h, *c), (rank, p.ts_ns));
                *c += 1;
            }
        }
    })?;
    if let Some(p) = rd.problem.take() {
        problems.push(p);
    }
    let pre_skipped = rd.skipped;
    let by_hash = probes.is_empty();
    out.by_hash = by_hash;
    if by_hash && hashes.is_empty() {
        return Err(AnalyzeError::Input {
            path: pre.to_path_buf(),
            reason: format!(
                "the capture has no usable packet ({pre_packets} timestamped packets read, \
                 {pre_other_link} of an unsupported link type{}); a PRE capture needs nflab \
                 probes or IP packets",
                problems.first().map_or(String::new(), |p| format!("; {p}"))
            ),
        });
    }
    for &(_, ts) in probes.values().chain(hashes.values()) {
        span = Some(span.map_or((ts, ts), |(a, b)| (a.min(ts), b.max(ts))));
    }
    if by_hash {
        out.sent = vec![FlowSent {
            flow: 0,
            sent: hashes.len() as u64,
            warmup: 0,
        }];
        out.notes.push(format!(
            "{} holds no nflab probe: packets are matched by a hash of their payload (UDP \
             payload, else IP payload) and occurrence, all in flow 0, seq = position in PRE",
            pre.display()
        ));
    } else {
        let mut sent: Vec<FlowSent> = per_flow
            .iter()
            .map(|(&flow, &n)| FlowSent {
                flow,
                sent: n,
                warmup: 0,
            })
            .collect();
        sent.sort_by_key(|s| s.flow);
        out.sent = sent;
        hashes.clear();
        hash_count.clear();
        out.notes.push(format!(
            "pcap pair: latency = timestamp in {} − timestamp in {}, matched by probe (flow, \
             seq); record seq = position of the probe among its flow's probes in PRE",
            post.display(),
            pre.display()
        ));
    }
    out.tx_span = span;

    // POST, in arrival order.
    let mut rd = CaptureReader::open(post)?;
    let mut post_count: HashMap<u64, u32> = HashMap::new();
    let (mut post_packets, mut post_probes, mut unmatched, mut ignored) = (0u64, 0u64, 0u64, 0u64);
    let records = &mut out.records;
    rd.for_each(|p| {
        post_packets += 1;
        let key = frame_key(p.linktype, p.data);
        let hit = match key {
            Some(Key::Probe { flow, seq }) => {
                post_probes += 1;
                if by_hash {
                    ignored += 1;
                    None
                } else {
                    probes.get(&(flow, seq)).map(|&(rank, ts)| (flow, rank, ts))
                }
            }
            Some(Key::Hash(h)) if by_hash => {
                let k = post_count.entry(h).or_insert(0);
                let n_pre = hash_count.get(&h).copied().unwrap_or(0);
                let occ = (*k).min(n_pre.saturating_sub(1));
                *k = k.saturating_add(1);
                if n_pre == 0 {
                    None
                } else {
                    hashes.get(&(h, occ)).map(|&(rank, ts)| (0, rank, ts))
                }
            }
            _ => {
                ignored += 1;
                None
            }
        };
        match hit {
            Some((flow, seq, tx)) => records.push(Record {
                seq,
                flow,
                tx_ns: tx,
                rx_ns: p.ts_ns,
                wire_len: p.orig_len.min(u32::from(u16::MAX)) as u16,
                flags: 0,
            }),
            None if matches!(key, Some(Key::Probe { .. })) || by_hash && key.is_some() => {
                unmatched += 1
            }
            None => {}
        }
    })?;
    let post_problem = rd.problem.take();
    let post_skipped = rd.skipped;
    if !by_hash && post_probes == 0 {
        return Err(AnalyzeError::Input {
            path: post.to_path_buf(),
            reason: format!(
                "the POST capture has no nflab probe packet ({post_packets} timestamped packets \
                 read{}) while the PRE capture {} has {} probes; is it the right file?",
                post_problem
                    .as_ref()
                    .map_or(String::new(), |p| format!("; {p}")),
                pre.display(),
                probes.len()
            ),
        });
    }
    if by_hash && out.records.is_empty() {
        return Err(AnalyzeError::Input {
            path: post.to_path_buf(),
            reason: format!(
                "no packet of the POST capture ({post_packets} timestamped packets read) matches \
                 a packet of the PRE capture {} by payload, and neither holds nflab probes",
                pre.display()
            ),
        });
    }
    if let Some(p) = post_problem {
        problems.push(p);
    }
    if unmatched > 0 {
        out.notes.push(format!(
            "{unmatched} packets of {} have no counterpart in {} and were left out",
            post.display(),
            pre.display()
        ));
    }
    if ignored > 0 && !by_hash {
        out.notes.push(format!(
            "{ignored} packets of {} without an nflab probe were ignored",
            post.display()
        ));
    }
    if pre_dup > 0 {
        out.notes.push(format!(
            "{pre_dup} duplicate probes in {} were ignored (the first copy is the tx time)",
            pre.display()
        ));
    }
    for (f, n) in [(pre, pre_skipped), (post, post_skipped)] {
        if n > 0 {
            out.notes.push(format!(
                "{n} packets of {} without a timestamp (simple packet blocks) or of an \
                 undeclared interface were skipped",
                f.display()
            ));
        }
    }
    if !problems.is_empty() {
        out.problem = Some(problems.join("; "));
    }
    Ok(out)
}

/// Analyse a PRE/POST capture pair ([`read_pcap_pair`]) with [`Options`].
/// Truncated tails end up in [`FileAnalysis::problem`] and the notes; the
/// packets before them are analysed.
pub fn analyze_pcap_pair(
    pre: &Path,
    post: &Path,
    cfg: &AnalysisConfig,
    opts: &Options,
) -> Result<FileAnalysis, AnalyzeError> {
    let pair = read_pcap_pair(pre, post)?;
    let mut opts = opts.clone();
    if opts.tx_span.is_none() {
        opts.tx_span = pair.tx_span;
    }
    let pass = |cfg: &AnalysisConfig| -> Result<Analysis, AnalyzeError> {
        let mut e = Engine::new(cfg, &opts, Some(&pair.sent));
        e.reserve(pair.records.len() as u64);
        e.push_all(&pair.records);
        Ok(e.finish(None))
    };
    let mut analysis = with_resolved_thresholds(cfg, pass)?;
    let mut notes = pair.notes.clone();
    if let Some(p) = &pair.problem {
        notes.push(p.clone());
    }
    notes.append(&mut analysis.summary.notes);
    analysis.summary.notes = notes;
    let tail = match &pair.problem {
        Some(p) => TailState::Truncated {
            discarded_bytes: 0,
            reason: p.clone(),
        },
        None => TailState::Complete,
    };
    Ok(FileAnalysis {
        analysis,
        tail,
        problem: pair.problem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A capture whose only record header claims `claim` bytes, padded
    /// with zeros to 100 bytes.
    fn claiming(pcapng: bool, claim: u32) -> Vec<u8> {
        let mut b = Vec::new();
        if pcapng {
            // Section header block (28 bytes), then an enhanced packet block's header.
            b.extend_from_slice(&PCAPNG_SHB.to_le_bytes());
            b.extend_from_slice(&28u32.to_le_bytes());
            b.extend_from_slice(&PCAPNG_BOM.to_le_bytes());
            b.extend_from_slice(&[1, 0, 0, 0]);
            b.extend_from_slice(&u64::MAX.to_le_bytes());
            b.extend_from_slice(&28u32.to_le_bytes());
            b.extend_from_slice(&6u32.to_le_bytes());
            b.extend_from_slice(&claim.to_le_bytes());
        } else {
            b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
            b.extend_from_slice(&[2, 0, 4, 0]);
            b.extend_from_slice(&[0; 8]);
            b.extend_from_slice(&65_535u32.to_le_bytes());
            b.extend_from_slice(&1u32.to_le_bytes());
            b.extend_from_slice(&[0; 8]);
            b.extend_from_slice(&claim.to_le_bytes());
            b.extend_from_slice(&claim.to_le_bytes());
        }
        b.resize(100, 0);
        b
    }

    /// Reads `r` to its end: no packet, the problem, and the buffer's capacity.
    fn read_all<R: Read>(mut r: CaptureReader<R>) -> (u64, String, usize) {
        let mut packets = 0;
        r.for_each(|_| packets += 1).unwrap();
        (packets, r.problem.unwrap_or_default(), r.buf.capacity())
    }

    /// Regression (fuzzing, issue #21): a record or block header claiming
    /// 64 MiB in a 100-byte file made the reader allocate and zero 64 MiB
    /// before its read found the file's end. It must end with the
    /// truncation named, having allocated no more than the file holds
    /// (well, a few KiB), from a file and from a byte slice alike.
    #[test]
    fn a_64_mib_claim_in_a_100_byte_file_is_refused_without_allocating_it() {
        let dir = std::env::temp_dir().join(format!("nflab-claim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (pcapng, at, kind) in [(false, 24, "packet data"), (true, 28, "block")] {
            let bytes = claiming(pcapng, MAX_BLOCK as u32);
            assert_eq!(bytes.len(), 100);
            let path = dir.join(if pcapng { "c.pcapng" } else { "c.pcap" });
            std::fs::write(&path, &bytes).unwrap();
            for (packets, problem, cap) in [
                read_all(CaptureReader::open(&path).unwrap()),
                read_all(CaptureReader::from_reader(bytes.as_slice(), &path).unwrap()),
            ] {
                assert_eq!(packets, 0);
                let want = format!(
                    "{}: truncated at byte {at}: the {kind} there is {} bytes long but the file \
                     ends after",
                    path.display(),
                    if pcapng { MAX_BLOCK - 8 } else { MAX_BLOCK }
                );
                assert!(problem.starts_with(&want), "{problem}\nwant {want}");
                assert!(cap <= 4096, "{cap} bytes allocated for a 100-byte file");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A claim beyond the largest block is corruption, named with its length.
    #[test]
    fn a_claim_beyond_64_mib_is_corruption() {
        for pcapng in [false, true] {
            let bytes = claiming(pcapng, MAX_BLOCK as u32 + 4);
            let r = CaptureReader::from_reader(bytes.as_slice(), Path::new("x")).unwrap();
            let (packets, problem, cap) = read_all(r);
            assert_eq!(packets, 0);
            assert!(
                problem.starts_with("x: corrupt capture at byte"),
                "{problem}"
            );
            assert!(problem.contains(&(MAX_BLOCK + 4).to_string()), "{problem}");
            // At most the section header's body (pcapng).
            assert!(cap <= 4096, "{cap} bytes allocated for a 100-byte file");
        }
    }
}
