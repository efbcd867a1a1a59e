//! [`RecordWriter`]: header, record blocks, trailer.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::{
    encode_record, Metadata, Record, RecordError, Trailer, BLOCK_HEADER_BYTES, BLOCK_KIND_RECORDS,
    BLOCK_KIND_TRAILER, BLOCK_MAGIC, BLOCK_RECORDS, FILE_MAGIC, FORMAT_VERSION, RECORD_BYTES,
};

/// Writes an `.nfr` stream: the header at construction, then blocks of
/// records, then (on [`finish`](Self::finish)) a trailer block.
///
/// Every block is written with a single `write_all` and then flushed to the
/// OS, so a writer killed with `kill -9` leaves a file that ends on a block
/// boundary or inside the block being written, never with a damaged earlier
/// block.
///
/// Dropping a writer without calling `finish` writes the buffered records as
/// a last block (best effort, errors ignored) but no trailer; readers then
/// report [`TailState::NoTrailer`](crate::TailState::NoTrailer).
pub struct RecordWriter<W: Write> {
    inner: Option<W>,
    name: String,
    /// Block header placeholder followed by the encoded pending records.
    buf: Vec<u8>,
    pending: usize,
    written: u64,
    blocks: u64,
    failed: bool,
}

impl RecordWriter<BufWriter<File>> {
    /// Create (truncate) the file at `path` and write the header.
    pub fn create(path: &Path, meta: &Metadata) -> Result<Self, RecordError> {
        let file = File::create(path).map_err(|source| RecordError::Create {
            path: path.to_path_buf(),
            source,
        })?;
        Self::with_name(BufWriter::new(file), meta, path.display().to_string())
    }
}

impl<W: Write> RecordWriter<W> {
    /// Wrap `w` and write the header (magic, version, metadata, CRC) to it immediately.
    pub fn new(w: W, meta: &Metadata) -> Result<Self, RecordError> {
        Self::with_name(w, meta, "the record stream".to_string())
    }

    /// Like [`new`](Self::new), with `name` (e.g. a path) used in error messages.
    pub fn with_name(mut w: W, meta: &Metadata, name: String) -> Result<Self, RecordError> {
        let json = serde_json::to_vec(meta).map_err(|source| RecordError::Encode {
            name: name.clone(),
            what: "metadata",
            source,
        })?;
        write_file_header(&mut w, &FILE_MAGIC, FORMAT_VERSION, &json, &name)?;
        let mut buf = Vec::with_capacity(BLOCK_HEADER_BYTES + BLOCK_RECORDS * RECORD_BYTES);
        buf.resize(BLOCK_HEADER_BYTES, 0);
        Ok(Self {
            inner: Some(w),
            name,
            buf,
            pending: 0,
            written: 0,
            blocks: 0,
            failed: false,
        })
    }

    /// Buffer one record; when [`BLOCK_RECORDS`] are buffered, write them as a
    /// block and flush it to the OS.
    pub fn push(&mut self, r: &Record) -> Result<(), RecordError> {
        if self.failed {
            return Err(RecordError::WriterFailed {
                name: self.name.clone(),
            });
        }
        encode_record(r, &mut self.buf);
        self.pending += 1;
        if self.pending >= BLOCK_RECORDS {
            self.flush_block()?;
        }
        Ok(())
    }

    /// Write the buffered records now as a (possibly short) block and flush
    /// it to the OS. Does nothing when no record is buffered. The recorder
    /// calls this periodically (e.g. every 100 ms) to bound what a crash loses.
    pub fn flush_block(&mut self) -> Result<(), RecordError> {
        if self.failed {
            return Err(RecordError::WriterFailed {
                name: self.name.clone(),
            });
        }
        if self.pending == 0 {
            return Ok(());
        }
        // pending <= BLOCK_RECORDS, far below u32::MAX.
        let count = self.pending as u32;
        let crc = crc32fast::hash(&self.buf[BLOCK_HEADER_BYTES..]);
        fill_block_header(&mut self.buf, BLOCK_KIND_RECORDS, count, crc);
        let what = format!("block {}", self.blocks);
        self.write_raw(&what, true)?;
        self.written += self.pending as u64;
        self.pending = 0;
        self.blocks += 1;
        self.buf.truncate(BLOCK_HEADER_BYTES);
        Ok(())
    }

    /// Records written to the stream in complete blocks so far (not counting
    /// the ones still buffered; see [`records_pending`](Self::records_pending)).
    pub fn records_written(&self) -> u64 {
        self.written
    }

    /// Records pushed but not yet written as a block.
    pub fn records_pending(&self) -> u64 {
        self.pending as u64
    }

    /// Write the buffered records, then the trailer block, flush, and return
    /// the underlying writer.
    pub fn finish(mut self, trailer: &Trailer) -> Result<W, RecordError> {
        self.flush_block()?;
        let json = serde_json::to_vec(trailer).map_err(|source| RecordError::Encode {
            name: self.name.clone(),
            what: "trailer",
            source,
        })?;
        let len = u32::try_from(json.len())
            .ok()
            .filter(|&n| n <= crate::MAX_JSON_BYTES)
            .ok_or_else(|| RecordError::Write {
                name: self.name.clone(),
                what: "the trailer".into(),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("trailer JSON is {} bytes, too large", json.len()),
                ),
            })?;
        self.buf.truncate(BLOCK_HEADER_BYTES);
        self.buf.extend_from_slice(&json);
        fill_block_header(
            &mut self.buf,
            BLOCK_KIND_TRAILER,
            len,
            crc32fast::hash(&json),
        );
        self.write_raw("the trailer", true)?;
        self.buf.truncate(BLOCK_HEADER_BYTES);
        // Some(..) unless a previous write failed, which write_raw reported.
        self.inner.take().ok_or(RecordError::WriterFailed {
            name: self.name.clone(),
        })
    }

    fn write_raw(&mut self, what: &str, flush: bool) -> Result<(), RecordError> {
        let Some(w) = self.inner.as_mut() else {
            return Err(RecordError::WriterFailed {
                name: self.name.clone(),
            });
        };
        let res = w
            .write_all(&self.buf)
            .and_then(|()| if flush { w.flush() } else { Ok(()) });
        res.map_err(|source| {
            self.failed = true;
            RecordError::Write {
                name: self.name.clone(),
                what: what.to_string(),
                source,
            }
        })
    }
}

impl<W: Write> Drop for RecordWriter<W> {
    fn drop(&mut self) {
        if self.inner.is_some() && !self.failed && self.pending > 0 {
            let _ = self.flush_block();
        }
    }
}

pub(crate) fn fill_block_header(buf: &mut [u8], kind: u8, count_or_len: u32, crc: u32) {
    buf[0..4].copy_from_slice(&BLOCK_MAGIC);
    buf[4] = kind;
    buf[5..8].copy_from_slice(&[0, 0, 0]);
    buf[8..12].copy_from_slice(&count_or_len.to_le_bytes());
    buf[12..16].copy_from_slice(&crc.to_le_bytes());
}

/// Write a file header — magic, version, metadata length, the metadata JSON
/// and its CRC-32 — and flush it (records and TX stamps files share it).
pub(crate) fn write_file_header<W: Write>(
    w: &mut W,
    magic: &[u8; 8],
    version: u32,
    json: &[u8],
    name: &str,
) -> Result<(), RecordError> {
    // The readers refuse longer metadata: refuse to write it.
    let json_len = u32::try_from(json.len())
        .ok()
        .filter(|&n| n <= crate::MAX_JSON_BYTES)
        .ok_or_else(|| RecordError::Write {
            name: name.to_string(),
            what: "the header".into(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "metadata JSON is {} bytes, more than the limit of {} bytes",
                    json.len(),
                    crate::MAX_JSON_BYTES
                ),
            ),
        })?;
    let mut header = Vec::with_capacity(20 + json.len());
    header.extend_from_slice(magic);
    header.extend_from_slice(&version.to_le_bytes());
    header.extend_from_slice(&json_len.to_le_bytes());
    header.extend_from_slice(json);
    header.extend_from_slice(&crc32fast::hash(json).to_le_bytes());
    w.write_all(&header)
        .and_then(|()| w.flush())
        .map_err(|source| RecordError::Write {
            name: name.to_string(),
            what: "the header".into(),
            source,
        })
}
