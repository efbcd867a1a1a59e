//! A quick look at a record file that skips the record payloads: the
//! analysis needs the tx span before its pass (for trimming) and the report
//! needs the record count (to choose exact or streamed figures).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::{
    Trailer, BLOCK_KIND_RECORDS, BLOCK_KIND_TRAILER, BLOCK_MAGIC, FILE_MAGIC, MAX_JSON_BYTES,
    RECORD_BYTES,
};

/// What the block headers of a record file say, read without its records:
/// how many records there are, the trailer, and the transmit times of the
/// first and the last record.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Prescan {
    /// Records in the intact blocks.
    pub records: u64,
    /// The trailer, when the block chain reaches it intact.
    pub trailer: Option<Trailer>,
    /// tx_ns of the first and of the last record.
    pub span: Option<(u64, u64)>,
}

/// Walk the block headers (one seek and 16 bytes per block of 4096 records);
/// stops where a header is not one, as the reader will.
/// `None` when the file cannot be read or does not start with the file magic.
pub fn prescan(path: &Path) -> Option<Prescan> {
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let mut hdr = [0u8; 16];
    f.read_exact(&mut hdr).ok()?;
    if hdr[0..8] != FILE_MAGIC {
        return None;
    }
    let meta_len = u64::from(u32::from_le_bytes([hdr[12], hdr[13], hdr[14], hdr[15]]));
    let mut pos = 16 + meta_len + 4;
    let mut out = Prescan::default();
    let (mut first, mut last_at) = (None, None);
    let tx_at = |f: &mut std::fs::File, at: u64| -> Option<u64> {
        let mut r = [0u8; 8];
        f.seek(SeekFrom::Start(at + 8)).ok()?;
        f.read_exact(&mut r).ok()?;
        Some(u64::from_le_bytes(r))
    };
    while pos + 16 <= len {
        f.seek(SeekFrom::Start(pos)).ok()?;
        let mut b = [0u8; 16];
        f.read_exact(&mut b).ok()?;
        if b[0..4] != BLOCK_MAGIC {
            break;
        }
        let count = u64::from(u32::from_le_bytes([b[8], b[9], b[10], b[11]]));
        match b[4] {
            BLOCK_KIND_RECORDS => {
                let plen = count * RECORD_BYTES as u64;
                if pos + 16 + plen > len {
                    break;
                }
                if count > 0 {
                    if first.is_none() {
                        first = tx_at(&mut f, pos + 16);
                    }
                    last_at = Some(pos + 16 + plen - RECORD_BYTES as u64);
                }
                out.records += count;
                pos += 16 + plen;
            }
            BLOCK_KIND_TRAILER => {
                if count > u64::from(MAX_JSON_BYTES) || pos + 16 + count > len {
                    break;
                }
                let mut j = vec![0u8; count as usize];
                f.read_exact(&mut j).ok()?;
                out.trailer = serde_json::from_slice(&j).ok();
                break;
            }
            _ => break,
        }
    }
    if let (Some(a), Some(at)) = (first, last_at) {
        out.span = tx_at(&mut f, at).map(|b| (a, b));
    }
    Some(out)
}
