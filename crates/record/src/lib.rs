//! Per-packet records of an nflab run: the `.nfr` format (DESIGN §3.3).
//!
//! The recorder writes one [`Record`] per received probe packet. Records are
//! grouped into *blocks* of at most [`BLOCK_RECORDS`] records; every block has
//! a count and a CRC32 of its payload and is handed to the operating system as
//! soon as it is complete. A recorder killed with `kill -9` therefore loses at
//! most the records of the block it had not yet written, and a reader of such
//! a file gets every complete block plus a [`TailState`] saying how the file
//! ended, instead of an error.
//!
//! The byte layout is documented in `docs/formats.md` at the workspace root.
//!
//! Beside the records, [`tx_stamps`] holds the generator's kernel TX timestamps of a run
//! (`tx_stamps.nfts`) and puts them into the records after the run.
//!
//! # Guarantees
//!
//! * [`RecordReader::next_block`] never returns a record that was not written:
//!   a block is only returned after its CRC32 has been checked.
//! * A partial or corrupt block ends the stream with [`TailState::Truncated`]
//!   and a reason; it is not an error. Everything before it is returned.
//! * A file whose *header* is wrong (not an nflab record file, unknown
//!   version, corrupt metadata) is an error ([`RecordError`]) naming the file.
//!
//! # Cost
//!
//! A record is 40 bytes on disk. Writing is one `write_all` + `flush` per
//! block (4096 records, 160 KiB). Reading allocates one payload buffer that is
//! reused across blocks.
//!
//! # Limitations and caveats
//!
//! * No resynchronisation: after a corrupt block in the middle of a file the
//!   rest is ignored (the reason says so), even if later blocks are intact.
//! * The writer does not `fsync`; a power loss can lose what the OS had not
//!   yet written back. `kill -9` of the writer loses only the unfinished block.
//! * The reader accepts blocks of at most [`MAX_BLOCK_RECORDS`] records and
//!   metadata / trailer JSON of at most [`MAX_JSON_BYTES`] bytes; larger
//!   values are treated as corruption.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::io::{self, Write};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

mod prescan;
mod reader;
pub mod tx_stamps;
mod writer;

pub use prescan::{prescan, Prescan};
pub use reader::{read_all, RecordFile, RecordReader, TailState};
pub use tx_stamps::{
    read_tx_stamps, substitute_tx, substitute_tx_from, TxStampEntry, TxStampWriter, TxStampsFile,
    TxStampsMeta, TxSubstitution,
};
pub use writer::RecordWriter;

// ---------------------------------------------------------------------------
// Format constants
// ---------------------------------------------------------------------------

/// The 8 bytes every `.nfr` file starts with.
pub const FILE_MAGIC: [u8; 8] = *b"NFLABREC";
/// The format version this crate writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// The 4 bytes every block starts with.
pub const BLOCK_MAGIC: [u8; 4] = *b"NFBK";
/// Block kind: a block of records.
pub const BLOCK_KIND_RECORDS: u8 = 1;
/// Block kind: the trailer (JSON), the last block of a complete file.
pub const BLOCK_KIND_TRAILER: u8 = 2;
/// Size of a block header in bytes: magic (4), kind (1), reserved (3),
/// count or length (4), CRC32 of the payload (4).
pub const BLOCK_HEADER_BYTES: usize = 16;
/// Size of one encoded record in bytes: 30 bytes of fields and 10 reserved
/// zero bytes, a multiple of 8 so records stay 8-byte aligned in an aligned
/// buffer (see `docs/formats.md`).
pub const RECORD_BYTES: usize = 40;
/// Records per block written by [`RecordWriter`]; a block is written and
/// flushed when this many records are buffered.
pub const BLOCK_RECORDS: usize = 4096;
/// Largest record count per block a reader accepts; a larger count is
/// treated as a corrupt block header.
pub const MAX_BLOCK_RECORDS: u32 = 65_536;
/// Largest metadata or trailer JSON a reader accepts, in bytes.
pub const MAX_JSON_BYTES: u32 = 16 * 1024 * 1024;

// ---------------------------------------------------------------------------
// Data types
// ---------------------------------------------------------------------------

/// One received probe packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Record {
    /// Sequence number, per flow, starting at 0 (warm-up packets included).
    pub seq: u64,
    /// Flow id.
    pub flow: u16,
    /// Transmit timestamp, ns, from the generator's clock.
    pub tx_ns: u64,
    /// Receive timestamp, ns, from the recorder's clock.
    pub rx_ns: u64,
    /// Frame length on the wire, bytes.
    pub wire_len: u16,
    /// Where the timestamps came from; see [`flags`].
    pub flags: u16,
}

/// Bits of [`Record::flags`]. The absence of both bits of a direction means
/// an application (user-space) timestamp.
pub mod flags {
    /// rx timestamp taken by the kernel (`SO_TIMESTAMPNS`).
    pub const RX_TS_KERNEL: u16 = 1;
    /// rx timestamp taken by the NIC.
    pub const RX_TS_HARDWARE: u16 = 2;
    /// tx timestamp taken by the kernel.
    pub const TX_TS_KERNEL: u16 = 4;
    /// tx timestamp taken by the NIC.
    pub const TX_TS_HARDWARE: u16 = 8;
}

/// The clock the timestamps were taken with.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(default)]
pub struct ClockInfo {
    /// Clock name, e.g. `"CLOCK_REALTIME"`.
    pub source: String,
    /// Resolution of the clock, ns (as reported by `clock_getres`).
    pub resolution_ns: u64,
}

/// The JSON metadata in the file header, written before the first record.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(default)]
pub struct Metadata {
    /// Identifier of the run that produced the file.
    pub run_id: String,
    /// Clock of the timestamps.
    pub clock: ClockInfo,
    /// How tx timestamps were taken: `"application"`, `"kernel-software"`, ...
    pub tx_timestamp: String,
    /// How rx timestamps were taken.
    pub rx_timestamp: String,
    /// Flow ids the generator sends.
    pub flows: Vec<u16>,
    /// The offered traffic pattern, free-form JSON.
    pub offered: serde_json::Value,
    /// Any further keys, kept as they are.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// Packets sent on one flow, from the generator.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(default)]
pub struct FlowSent {
    /// Flow id.
    pub flow: u16,
    /// Packets sent in total, warm-up included.
    pub sent: u64,
    /// Sequence numbers `0..warmup` are warm-up packets, excluded from analysis.
    pub warmup: u64,
}

/// The JSON trailer, the last block of a file whose writer finished.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(default)]
pub struct Trailer {
    /// Sent counts per flow.
    pub sent: Vec<FlowSent>,
    /// The run was stopped early (e.g. by Ctrl-C) but finished cleanly.
    pub interrupted: bool,
    /// Any further keys, kept as they are.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// Errors of reading or writing `.nfr` files.
///
/// A damaged *tail* is not an error (see [`TailState`]); these are the
/// problems a caller must act on.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The file could not be opened. Check the path and its permissions.
    #[error("cannot open record file {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The file could not be created. Check that the directory exists and is writable.
    #[error("cannot create record file {path}: {source}")]
    Create {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The input does not start like an nflab record file. Pass a `.nfr` file
    /// (CSV input is read by `nflab-analyze`).
    #[error("{name} is not an nflab record file: {reason}")]
    NotRecordFile {
        /// File name, or a description of the stream.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The file was written by a newer nflab. Read it with that version.
    #[error("{name} has record format version {version}, but this nflab reads only version {FORMAT_VERSION}; use a newer nflab")]
    UnsupportedVersion {
        /// File name, or a description of the stream.
        name: String,
        /// The version in the file.
        version: u32,
    },
    /// The header (metadata) is truncated or corrupt; the file cannot be used.
    #[error("{name} has a corrupt header: {reason}")]
    CorruptHeader {
        /// File name, or a description of the stream.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// Reading failed with an I/O error (not end of file). Check the device.
    #[error("cannot read {name} at byte {offset}: {source}")]
    Read {
        /// File name, or a description of the stream.
        name: String,
        /// Byte offset of the failed read.
        offset: u64,
        /// The OS error.
        source: io::Error,
    },
    /// Writing failed (disk full, closed pipe, ...). Free space and rerun.
    #[error("cannot write {what} to {name}: {source}")]
    Write {
        /// File name, or a description of the stream.
        name: String,
        /// What was being written, e.g. "block 3".
        what: String,
        /// The OS error.
        source: io::Error,
    },
    /// Metadata or trailer could not be encoded as JSON.
    #[error("cannot encode the {what} of {name} as JSON: {source}")]
    Encode {
        /// File name, or a description of the stream.
        name: String,
        /// "metadata" or "trailer".
        what: &'static str,
        /// The encoder error.
        source: serde_json::Error,
    },
    /// An earlier write failed, so the stream may end in a partial block;
    /// the writer refuses further writes. Records already written are readable.
    #[error("the record writer for {name} failed earlier and accepts no more writes")]
    WriterFailed {
        /// File name, or a description of the stream.
        name: String,
    },
}

// ---------------------------------------------------------------------------
// Encoding of one record
// ---------------------------------------------------------------------------

/// Append the 40-byte little-endian encoding of `r` to `out`.
pub(crate) fn encode_record(r: &Record, out: &mut Vec<u8>) {
    out.extend_from_slice(&r.seq.to_le_bytes());
    out.extend_from_slice(&r.tx_ns.to_le_bytes());
    out.extend_from_slice(&r.rx_ns.to_le_bytes());
    out.extend_from_slice(&r.flow.to_le_bytes());
    out.extend_from_slice(&r.wire_len.to_le_bytes());
    out.extend_from_slice(&r.flags.to_le_bytes());
    out.extend_from_slice(&[0u8; RECORD_BYTES - 30]);
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// Decode one record from exactly [`RECORD_BYTES`] bytes. Reserved bytes are ignored.
pub(crate) fn decode_record(b: &[u8; RECORD_BYTES]) -> Record {
    Record {
        seq: le_u64(b, 0),
        tx_ns: le_u64(b, 8),
        rx_ns: le_u64(b, 16),
        flow: le_u16(b, 24),
        wire_len: le_u16(b, 26),
        flags: le_u16(b, 28),
    }
}

// ---------------------------------------------------------------------------
// CSV export
// ---------------------------------------------------------------------------

/// Write `records` as CSV with the header `seq,flow,tx_ns,rx_ns,wire_len,flags`,
/// one row per record, in the given order. `nflab-analyze` reads this back.
pub fn write_csv(records: &[Record], w: impl Write) -> io::Result<()> {
    let mut w = io::BufWriter::new(w);
    writeln!(w, "seq,flow,tx_ns,rx_ns,wire_len,flags")?;
    for r in records {
        writeln!(
            w,
            "{},{},{},{},{},{}",
            r.seq, r.flow, r.tx_ns, r.rx_ns, r.wire_len, r.flags
        )?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_layout_is_40_bytes_little_endian() {
        let r = Record {
            seq: 0x0102_0304_0506_0708,
            flow: 0x1112,
            tx_ns: 0x2122_2324_2526_2728,
            rx_ns: 0x3132_3334_3536_3738,
            wire_len: 0x4142,
            flags: 0x5152,
        };
        let mut b = Vec::new();
        encode_record(&r, &mut b);
        let expected: Vec<u8> = [
            &[8u8, 7, 6, 5, 4, 3, 2, 1][..],
            &[0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21],
            &[0x38, 0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31],
            &[0x12, 0x11, 0x42, 0x41, 0x52, 0x51],
            &[0; 10],
        ]
        .concat();
        assert_eq!(b, expected);
        let arr: [u8; RECORD_BYTES] = b.as_slice().try_into().expect("40 bytes");
        assert_eq!(decode_record(&arr), r);
    }

    #[test]
    fn csv_has_header_and_rows() {
        let recs = [
            Record {
                seq: 1,
                flow: 2,
                tx_ns: 3,
                rx_ns: 4,
                wire_len: 5,
                flags: 6,
            },
            Record {
                seq: 7,
                flow: 8,
                tx_ns: 9,
                rx_ns: 10,
                wire_len: 11,
                flags: 12,
            },
        ];
        let mut out = Vec::new();
        write_csv(&recs, &mut out).expect("write to Vec");
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            "seq,flow,tx_ns,rx_ns,wire_len,flags\n1,2,3,4,5,6\n7,8,9,10,11,12\n"
        );
    }
}
