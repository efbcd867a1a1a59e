//! The generator's kernel TX timestamps of a run (`tx_stamps.nfts`), and their
//! substitution into the recorder's records.
//!
//! The recorder writes records on the receive side, with the application TX stamp it finds
//! in each probe. The kernel's TX stamp of a probe is known only to the generator, after
//! the send; it writes one [`TxStampEntry`] per probe it sent (flow, seq, the application
//! stamp it put into the probe, the kernel's stamp or 0 when none arrived) into this
//! sidecar. After the run, [`substitute_tx`] rewrites the records file with the kernel
//! stamp as `tx_ns` wherever one exists, sets the record flag of its source, keeps the
//! application stamp (and no tx flag) where none exists, and says so in the metadata. The
//! sidecar stays beside the records, so the application stamps remain available.
//!
//! # Layout (all integers little-endian)
//!
//! ```text
//! file   = header block*
//! header = "NFLABTXS" version:u32=1 meta_len:u32 metadata(JSON) meta_crc:u32
//! block  = "NFBK" kind:u8=3 reserved:[u8;3] count:u32 crc:u32 payload(count × 32 bytes)
//! entry  = seq:u64 app_tx_ns:u64 kernel_tx_ns:u64 flow:u16 flags:u16 reserved:u32
//! ```
//!
//! The block header is the `.nfr` one with kind 3; CRC32 (IEEE) of the payload. There is no
//! trailer: a file that ends exactly after a block is complete; a partial or corrupt last
//! block is reported as [`TailState::Truncated`] and its entries are not returned.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{
    flags, ClockInfo, Metadata, RecordError, RecordFile, RecordWriter, TailState,
    BLOCK_HEADER_BYTES, BLOCK_MAGIC,
};

/// The 8 bytes a TX stamps file starts with.
pub const TX_STAMPS_MAGIC: [u8; 8] = *b"NFLABTXS";
/// The TX stamps format version this crate writes and reads.
pub const TX_STAMPS_VERSION: u32 = 1;
/// Block kind of TX stamp entries.
pub const BLOCK_KIND_TX_STAMPS: u8 = 3;
/// Size of one encoded entry in bytes.
pub const TX_STAMP_BYTES: usize = 32;
/// Entries per block written by [`TxStampWriter`].
pub const TX_STAMP_BLOCK: usize = 4096;
/// Largest entry count per block a reader accepts.
const MAX_BLOCK_ENTRIES: u32 = 65_536;
/// Name of the sidecar in a run directory.
pub const TX_STAMPS_FILE: &str = "tx_stamps.nfts";

/// The kernel TX timestamp of one probe the generator sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxStampEntry {
    /// Sequence number in the flow.
    pub seq: u64,
    /// Flow id.
    pub flow: u16,
    /// The application TX stamp the probe carries, ns.
    pub app_tx_ns: u64,
    /// The kernel's TX stamp, ns; 0 when none arrived.
    pub kernel_tx_ns: u64,
    /// [`flags::TX_TS_KERNEL`] or [`flags::TX_TS_HARDWARE`]; 0 when there is no stamp.
    pub flags: u16,
}

/// The JSON metadata of a TX stamps file.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(default)]
pub struct TxStampsMeta {
    /// Identifier of the run.
    pub run_id: String,
    /// Clock of the application stamps and of software kernel stamps.
    pub clock: ClockInfo,
    /// What the sockets were asked to use: "kernel-software" or "hardware".
    pub tx_timestamp: String,
    /// Any further keys, kept as they are.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

fn encode(e: &TxStampEntry, out: &mut Vec<u8>) {
    out.extend_from_slice(&e.seq.to_le_bytes());
    out.extend_from_slice(&e.app_tx_ns.to_le_bytes());
    out.extend_from_slice(&e.kernel_tx_ns.to_le_bytes());
    out.extend_from_slice(&e.flow.to_le_bytes());
    out.extend_from_slice(&e.flags.to_le_bytes());
    out.extend_from_slice(&[0u8; 4]);
}

fn decode(b: &[u8]) -> TxStampEntry {
    let u64_at = |i: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[i..i + 8]);
        u64::from_le_bytes(a)
    };
    TxStampEntry {
        seq: u64_at(0),
        app_tx_ns: u64_at(8),
        kernel_tx_ns: u64_at(16),
        flow: u16::from_le_bytes([b[24], b[25]]),
        flags: u16::from_le_bytes([b[26], b[27]]),
    }
}

/// Writes a TX stamps file: the header at construction, then blocks of entries, each
/// written with one `write_all` and flushed, so a killed writer loses at most the
/// unfinished block.
pub struct TxStampWriter<W: Write> {
    inner: W,
    name: String,
    buf: Vec<u8>,
    pending: usize,
    written: u64,
    /// A write failed: the file may end inside a block, so nothing more is written.
    failed: bool,
}

impl TxStampWriter<BufWriter<File>> {
    /// Create (truncate) the file at `path` and write the header.
    pub fn create(path: &Path, meta: &TxStampsMeta) -> Result<Self, RecordError> {
        let file = File::create(path).map_err(|source| RecordError::Create {
            path: path.to_path_buf(),
            source,
        })?;
        Self::with_name(BufWriter::new(file), meta, path.display().to_string())
    }
}

impl<W: Write> TxStampWriter<W> {
    /// Wrap `w` and write the header; `name` appears in error messages.
    pub fn with_name(mut w: W, meta: &TxStampsMeta, name: String) -> Result<Self, RecordError> {
        let json = serde_json::to_vec(meta).map_err(|source| RecordError::Encode {
            name: name.clone(),
            what: "metadata",
            source,
        })?;
        crate::writer::write_file_header(
            &mut w,
            &TX_STAMPS_MAGIC,
            TX_STAMPS_VERSION,
            &json,
            &name,
        )?;
        let mut buf = Vec::with_capacity(BLOCK_HEADER_BYTES + TX_STAMP_BLOCK * TX_STAMP_BYTES);
        buf.resize(BLOCK_HEADER_BYTES, 0);
        Ok(TxStampWriter {
            inner: w,
            name,
            buf,
            pending: 0,
            written: 0,
            failed: false,
        })
    }

    /// Buffer one entry; a full block is written and flushed.
    pub fn push(&mut self, e: &TxStampEntry) -> Result<(), RecordError> {
        self.check()?;
        encode(e, &mut self.buf);
        self.pending += 1;
        if self.pending >= TX_STAMP_BLOCK {
            self.flush_block()?;
        }
        Ok(())
    }

    /// Write the buffered entries as a (possibly short) block now.
    pub fn flush_block(&mut self) -> Result<(), RecordError> {
        self.check()?;
        if self.pending == 0 {
            return Ok(());
        }
        let crc = crc32fast::hash(&self.buf[BLOCK_HEADER_BYTES..]);
        crate::writer::fill_block_header(
            &mut self.buf,
            BLOCK_KIND_TX_STAMPS,
            self.pending as u32,
            crc,
        );
        if let Err(source) = self
            .inner
            .write_all(&self.buf)
            .and_then(|()| self.inner.flush())
        {
            // Part of the block may be on disk: writing it again would
            // corrupt the file, so the writer stops here (as RecordWriter does).
            self.failed = true;
            return Err(RecordError::Write {
                name: self.name.clone(),
                what: format!("TX stamps after entry {}", self.written),
                source,
            });
        }
        self.written += self.pending as u64;
        self.pending = 0;
        self.buf.truncate(BLOCK_HEADER_BYTES);
        Ok(())
    }

    fn check(&self) -> Result<(), RecordError> {
        if self.failed {
            return Err(RecordError::WriterFailed {
                name: self.name.clone(),
            });
        }
        Ok(())
    }

    /// Entries written so far, buffered ones included.
    pub fn entries(&self) -> u64 {
        self.written + self.pending as u64
    }

    /// Write what is buffered and return the underlying writer.
    pub fn finish(mut self) -> Result<W, RecordError> {
        self.flush_block()?;
        Ok(self.inner)
    }
}

/// A TX stamps file read back.
#[derive(Debug, Clone)]
pub struct TxStampsFile {
    /// Its metadata.
    pub meta: TxStampsMeta,
    /// Every entry of the intact blocks, in file order.
    pub entries: Vec<TxStampEntry>,
    /// `Complete` when the file ends after a whole block (or after the header),
    /// `Truncated` when the last block is partial or corrupt.
    pub tail: TailState,
}

/// Read the TX stamps file at `path`. A wrong magic, version or header is an error naming
/// the file; a damaged tail is not (see [`TxStampsFile::tail`]).
pub fn read_tx_stamps(path: &Path) -> Result<TxStampsFile, RecordError> {
    let name = path.display().to_string();
    let f = File::open(path).map_err(|source| RecordError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let mut r = BufReader::with_capacity(1 << 17, f);
    let (meta, mut offset): (TxStampsMeta, u64) =
        crate::reader::read_file_header(&mut r, &name, &TX_STAMPS_MAGIC, TX_STAMPS_VERSION)?;
    let mut entries = Vec::new();
    let mut payload = Vec::new();
    let mut block = 0u64;
    let tail = loop {
        let mut bh = [0u8; BLOCK_HEADER_BYTES];
        let n = crate::reader::read_full(&mut r, &mut bh, &name, offset)?;
        if n == 0 {
            break TailState::Complete;
        }
        let count = u32::from_le_bytes([bh[8], bh[9], bh[10], bh[11]]);
        let bad = if n < BLOCK_HEADER_BYTES {
            Some("the file ends inside a block header".to_string())
        } else if bh[0..4] != BLOCK_MAGIC || bh[4] != BLOCK_KIND_TX_STAMPS {
            Some("bad block magic or kind".to_string())
        } else if count > MAX_BLOCK_ENTRIES {
            Some(format!("implausible entry count {count}"))
        } else {
            payload.resize(count as usize * TX_STAMP_BYTES, 0);
            let got = crate::reader::read_full(&mut r, &mut payload, &name, offset + n as u64)?;
            if got < payload.len() {
                Some("the file ends inside a block".to_string())
            } else if crc32fast::hash(&payload).to_le_bytes() != bh[12..16] {
                Some("CRC mismatch".to_string())
            } else {
                None
            }
        };
        if let Some(why) = bad {
            let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(offset);
            break TailState::Truncated {
                discarded_bytes: len.saturating_sub(offset),
                reason: format!("block {block} at byte {offset}: {why}"),
            };
        }
        entries.extend(payload.chunks_exact(TX_STAMP_BYTES).map(decode));
        offset += (BLOCK_HEADER_BYTES + payload.len()) as u64;
        block += 1;
    };
    Ok(TxStampsFile {
        meta,
        entries,
        tail,
    })
}

/// What [`substitute_tx`] did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TxSubstitution {
    /// Records in the records file.
    pub records: u64,
    /// Records whose `tx_ns` is now the kernel's stamp.
    pub substituted: u64,
    /// Of those, NIC hardware stamps.
    pub hardware: u64,
    /// Records that kept the application stamp: their probe got no kernel stamp.
    pub application_fallbacks: u64,
    /// Entries in the TX stamps file (one per probe sent).
    pub stamps: u64,
    /// Entries with a kernel stamp.
    pub stamped: u64,
    /// Records whose application stamp differs from the one the generator wrote for
    /// that (flow, seq): not substituted (should be 0; a foreign or corrupt probe).
    pub app_mismatch: u64,
    /// How the TX stamps file ended.
    #[serde(skip)]
    pub stamps_tail: Option<TailState>,
    /// The source written to the records' metadata `tx_timestamp`.
    pub tx_timestamp: String,
}

/// Rewrite the records file at `records` with the kernel TX stamps of `stamps`: `tx_ns` of a
/// record becomes the kernel stamp of its (flow, seq) and its flags gain
/// [`flags::TX_TS_KERNEL`] or [`flags::TX_TS_HARDWARE`]; records without a kernel stamp keep
/// the application stamp and no tx flag. The metadata's `tx_timestamp` names the source
/// and a `tx_stamps` object gives the counts; the trailer is kept. The file is replaced
/// atomically (written beside it, then renamed). Memory: the records, and 24 bytes per
/// probe sent.
pub fn substitute_tx(records: &Path, stamps: &Path) -> Result<TxSubstitution, RecordError> {
    let st = read_tx_stamps(stamps)?;
    substitute_tx_from(records, st, stamps).map(|(sub, _)| sub)
}

/// [`substitute_tx`] with the TX stamps already read (from `stamps_path`, named in the
/// metadata); also returns the rewritten records, so the caller need not read them again.
pub fn substitute_tx_from(
    records: &Path,
    st: TxStampsFile,
    stamps_path: &Path,
) -> Result<(TxSubstitution, RecordFile), RecordError> {
    // Per flow, by seq: kernel stamp (0 = none), its flags, and the application stamp.
    let mut by_flow: HashMap<u16, Vec<(u64, u64, u16)>> = HashMap::new();
    let mut out = TxSubstitution {
        stamps: st.entries.len() as u64,
        stamps_tail: Some(st.tail.clone()),
        ..TxSubstitution::default()
    };
    for e in &st.entries {
        let v = by_flow.entry(e.flow).or_default();
        let i = e.seq as usize;
        if i >= v.len() {
            v.resize(i + 1, (0, 0, 0));
        }
        v[i] = (e.kernel_tx_ns, e.app_tx_ns, e.flags);
        if e.kernel_tx_ns != 0 {
            out.stamped += 1;
        }
    }
    drop(st);
    let file = crate::read_all(records)?;
    let mut recs = file.records;
    for r in &mut recs {
        out.records += 1;
        let hit = by_flow
            .get(&r.flow)
            .and_then(|v| v.get(r.seq as usize))
            .copied();
        match hit {
            Some((k, app, f)) if k != 0 && app == r.tx_ns => {
                r.tx_ns = k;
                r.flags &= !(flags::TX_TS_KERNEL | flags::TX_TS_HARDWARE);
                r.flags |= f & (flags::TX_TS_KERNEL | flags::TX_TS_HARDWARE);
                out.substituted += 1;
                if f & flags::TX_TS_HARDWARE != 0 {
                    out.hardware += 1;
                }
            }
            Some((k, app, _)) if k != 0 && app != r.tx_ns => {
                out.app_mismatch += 1;
                out.application_fallbacks += 1;
            }
            _ => out.application_fallbacks += 1,
        }
    }
    out.tx_timestamp = match (out.substituted, out.hardware) {
        (0, _) => "application".to_string(),
        (s, h) if h == s => "hardware".to_string(),
        (_, 0) => "kernel-software".to_string(),
        _ => "hardware+kernel-software".to_string(),
    };
    let mut meta: Metadata = file.meta;
    meta.tx_timestamp.clone_from(&out.tx_timestamp);
    let (trailer, tail) = (file.trailer, file.tail);
    meta.extra.insert(
        "tx_stamps".into(),
        serde_json::json!({
            "requested": "kernel",
            "file": stamps_path.file_name().map(|n| n.to_string_lossy().into_owned()),
            "substituted": out.substituted,
            "hardware": out.hardware,
            "application_fallbacks": out.application_fallbacks,
        }),
    );
    let tmp = records.with_extension("nfr.tmp");
    {
        let mut w = RecordWriter::create(&tmp, &meta)?;
        for r in &recs {
            w.push(r)?;
        }
        match &trailer {
            Some(t) => {
                w.finish(t)?;
            }
            None => w.flush_block()?,
        }
    }
    std::fs::rename(&tmp, records).map_err(|source| RecordError::Write {
        name: records.display().to_string(),
        what: "the records with kernel TX stamps (rename)".into(),
        source,
    })?;
    let file = RecordFile {
        meta,
        records: recs,
        trailer,
        tail,
    };
    Ok((out, file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{read_all, FlowSent, Record, Trailer};

    fn dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("nflab-txs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn entry(flow: u16, seq: u64, app: u64, kernel: u64, f: u16) -> TxStampEntry {
        TxStampEntry {
            seq,
            flow,
            app_tx_ns: app,
            kernel_tx_ns: kernel,
            flags: f,
        }
    }

    #[test]
    fn layout_is_32_bytes_little_endian() {
        let mut b = Vec::new();
        encode(&entry(0x0102, 0x1112_1314_1516_1718, 7, 9, 4), &mut b);
        assert_eq!(b.len(), TX_STAMP_BYTES);
        assert_eq!(&b[0..8], &[0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11]);
        assert_eq!(&b[8..16], &[7, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[16..24], &[9, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[24..32], &[0x02, 0x01, 4, 0, 0, 0, 0, 0]);
        assert_eq!(decode(&b), entry(0x0102, 0x1112_1314_1516_1718, 7, 9, 4));
    }

    #[test]
    fn round_trip_over_several_blocks_and_a_cut_tail() {
        let d = dir("rt");
        let p = d.join("s.nfts");
        let meta = TxStampsMeta {
            run_id: "r1".into(),
            tx_timestamp: "kernel-software".into(),
            ..TxStampsMeta::default()
        };
        let mut w = TxStampWriter::create(&p, &meta).unwrap();
        let n = TX_STAMP_BLOCK as u64 * 2 + 5;
        for i in 0..n {
            w.push(&entry((i % 3) as u16, i / 3, 1000 + i, 2000 + i, 4))
                .unwrap();
        }
        assert_eq!(w.entries(), n);
        w.finish().unwrap();
        let f = read_tx_stamps(&p).unwrap();
        assert_eq!(f.meta, meta);
        assert_eq!(f.tail, TailState::Complete);
        assert_eq!(f.entries.len() as u64, n);
        assert_eq!(f.entries[4100], entry(2, 1366, 5100, 6100, 4));
        // Cut inside the last block: the two full blocks survive.
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 7]).unwrap();
        let f = read_tx_stamps(&p).unwrap();
        assert_eq!(f.entries.len(), 2 * TX_STAMP_BLOCK);
        assert!(
            matches!(&f.tail, TailState::Truncated { reason, .. } if reason.contains("block 2")),
            "{:?}",
            f.tail
        );
        // A records file is not a TX stamps file.
        std::fs::write(&p, b"NFLABREC\x01\0\0\0").unwrap();
        let e = read_tx_stamps(&p).unwrap_err().to_string();
        assert!(e.contains("NFLABTXS"), "{e}");
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn substitution_replaces_matched_stamps_and_keeps_the_rest() {
        let d = dir("sub");
        let recs_path = d.join("records.nfr");
        let stamps_path = d.join(TX_STAMPS_FILE);
        let meta = Metadata {
            run_id: "r".into(),
            tx_timestamp: "application".into(),
            rx_timestamp: "kernel-software".into(),
            flows: vec![0, 1],
            ..Metadata::default()
        };
        let rec = |flow, seq, tx, rx| Record {
            seq,
            flow,
            tx_ns: tx,
            rx_ns: rx,
            wire_len: 64,
            flags: flags::RX_TS_KERNEL,
        };
        // Received: flow 0 seq 0..4 except 2 (lost), flow 1 seq 0..2; flow 1 seq 1 carries
        // a different application stamp than the generator wrote (a foreign probe).
        let received = vec![
            rec(0, 0, 100, 500),
            rec(1, 0, 110, 510),
            rec(0, 1, 200, 600),
            rec(1, 1, 999, 610),
            rec(0, 3, 400, 800),
        ];
        let trailer = Trailer {
            sent: vec![
                FlowSent {
                    flow: 0,
                    sent: 4,
                    warmup: 0,
                },
                FlowSent {
                    flow: 1,
                    sent: 2,
                    warmup: 0,
                },
            ],
            interrupted: false,
            extra: Default::default(),
        };
        let mut w = RecordWriter::create(&recs_path, &meta).unwrap();
        for r in &received {
            w.push(r).unwrap();
        }
        w.finish(&trailer).unwrap();
        let mut sw = TxStampWriter::create(&stamps_path, &TxStampsMeta::default()).unwrap();
        for e in [
            entry(0, 0, 100, 150, flags::TX_TS_KERNEL),
            entry(0, 1, 200, 0, 0), // no kernel stamp arrived
            entry(0, 2, 300, 350, flags::TX_TS_KERNEL),
            entry(0, 3, 400, 450, flags::TX_TS_HARDWARE),
            entry(1, 0, 110, 160, flags::TX_TS_KERNEL),
            entry(1, 1, 210, 260, flags::TX_TS_KERNEL),
        ] {
            sw.push(&e).unwrap();
        }
        sw.finish().unwrap();

        let s = substitute_tx(&recs_path, &stamps_path).unwrap();
        assert_eq!(
            (
                s.records,
                s.substituted,
                s.hardware,
                s.application_fallbacks,
                s.app_mismatch
            ),
            (5, 3, 1, 2, 1)
        );
        assert_eq!((s.stamps, s.stamped), (6, 5));
        assert_eq!(s.tx_timestamp, "hardware+kernel-software");
        let f = read_all(&recs_path).unwrap();
        assert!(f.tail.is_complete());
        assert_eq!(f.trailer.as_ref(), Some(&trailer));
        assert_eq!(f.meta.tx_timestamp, "hardware+kernel-software");
        assert_eq!(f.meta.extra["tx_stamps"]["application_fallbacks"], 2);
        assert_eq!(f.meta.extra["tx_stamps"]["file"], TX_STAMPS_FILE);
        let got: Vec<(u16, u64, u64, u64, u16)> = f
            .records
            .iter()
            .map(|r| (r.flow, r.seq, r.tx_ns, r.rx_ns, r.flags))
            .collect();
        let k = flags::RX_TS_KERNEL;
        assert_eq!(
            got,
            [
                (0, 0, 150, 500, k | flags::TX_TS_KERNEL),
                (1, 0, 160, 510, k | flags::TX_TS_KERNEL),
                (0, 1, 200, 600, k),
                (1, 1, 999, 610, k),
                (0, 3, 450, 800, k | flags::TX_TS_HARDWARE),
            ]
        );
        assert!(!d.join("records.nfr.tmp").exists());
        std::fs::remove_dir_all(d).unwrap();
    }
}
