//! [`RecordReader`]: header check, blocks, tail state.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use crate::{
    decode_record, Metadata, Record, RecordError, Trailer, BLOCK_HEADER_BYTES, BLOCK_KIND_RECORDS,
    BLOCK_KIND_TRAILER, BLOCK_MAGIC, FILE_MAGIC, FORMAT_VERSION, MAX_BLOCK_RECORDS, MAX_JSON_BYTES,
    RECORD_BYTES,
};

/// How a record stream ended. Valid once [`RecordReader::next_block`] has
/// returned `Ok(false)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailState {
    /// The trailer was read and nothing follows it: the writer finished.
    Complete,
    /// The stream ended on a block boundary without a trailer: the writer
    /// died (or was dropped) between blocks. Sent counts are unknown.
    NoTrailer,
    /// The stream ended in a partial or corrupt block, or has unexpected
    /// bytes after the trailer. Everything before is intact.
    Truncated {
        /// Bytes ignored, from the start of the bad block to the end of the stream.
        discarded_bytes: u64,
        /// Which block, at which byte offset, and what was wrong.
        reason: String,
    },
}

impl TailState {
    /// `true` for [`TailState::Complete`].
    pub fn is_complete(&self) -> bool {
        matches!(self, TailState::Complete)
    }
}

impl std::fmt::Display for TailState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TailState::Complete => f.write_str("complete"),
            TailState::NoTrailer => f.write_str("no trailer (the writer did not finish)"),
            TailState::Truncated {
                discarded_bytes,
                reason,
            } => write!(f, "truncated, {discarded_bytes} bytes ignored: {reason}"),
        }
    }
}

/// Reads an `.nfr` stream block by block.
pub struct RecordReader<R: Read> {
    inner: R,
    name: String,
    meta: Metadata,
    /// Bytes consumed so far.
    offset: u64,
    /// Index of the next block (records and trailer blocks, 0-based).
    block: u64,
    done: bool,
    trailer: Option<Trailer>,
    tail: TailState,
    payload: Vec<u8>,
}

impl RecordReader<BufReader<File>> {
    /// Open the file at `path` and read its header.
    pub fn open(path: &Path) -> Result<Self, RecordError> {
        let file = File::open(path).map_err(|source| RecordError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        Self::with_name(
            BufReader::with_capacity(1 << 17, file),
            path.display().to_string(),
        )
    }
}

impl<R: Read> RecordReader<R> {
    /// Read the header from `r`.
    pub fn new(r: R) -> Result<Self, RecordError> {
        Self::with_name(r, "the record stream".to_string())
    }

    /// Like [`new`](Self::new), with `name` (e.g. a path) used in error messages.
    pub fn with_name(mut r: R, name: String) -> Result<Self, RecordError> {
        let (meta, offset) = read_file_header(&mut r, &name, &FILE_MAGIC, FORMAT_VERSION)?;
        Ok(Self {
            inner: r,
            name,
            meta,
            offset,
            block: 0,
            done: false,
            trailer: None,
            tail: TailState::NoTrailer,
            payload: Vec::new(),
        })
    }

    /// The metadata from the header.
    pub fn metadata(&self) -> &Metadata {
        &self.meta
    }

    /// The trailer, if the stream had a valid one. Meaningful once
    /// [`next_block`](Self::next_block) returned `Ok(false)`.
    pub fn trailer(&self) -> Option<&Trailer> {
        self.trailer.as_ref()
    }

    /// How the stream ended. Meaningful once [`next_block`](Self::next_block)
    /// returned `Ok(false)`; before that it is [`TailState::NoTrailer`].
    pub fn tail(&self) -> &TailState {
        &self.tail
    }

    /// `true` once [`next_block`](Self::next_block) has returned `Ok(false)`.
    pub fn is_finished(&self) -> bool {
        self.done
    }

    /// Read the next block of records into `out` (cleared first).
    ///
    /// Returns `Ok(true)` with at least one record, or `Ok(false)` at the end
    /// of the stream, after which [`trailer`](Self::trailer) and
    /// [`tail`](Self::tail) are valid. A partial or corrupt block is not an
    /// error: it ends the stream with [`TailState::Truncated`], and the
    /// reason says whether more data followed it (corruption in the middle).
    /// Only an I/O error of the underlying reader is an `Err`.
    pub fn next_block(&mut self, out: &mut Vec<Record>) -> Result<bool, RecordError> {
        out.clear();
        loop {
            if self.done {
                return Ok(false);
            }
            let start = self.offset;
            let idx = self.block;
            let mut hdr = [0u8; BLOCK_HEADER_BYTES];
            let n = self.read(&mut hdr)?;
            if n == 0 {
                self.end(TailState::NoTrailer);
                return Ok(false);
            }
            if n < BLOCK_HEADER_BYTES {
                self.end(TailState::Truncated {
                    discarded_bytes: n as u64,
                    reason: format!(
                        "block {idx} at byte {start}: the stream ends inside the block header \
                         ({n} of {BLOCK_HEADER_BYTES} bytes); the writer was probably killed"
                    ),
                });
                return Ok(false);
            }
            if hdr[0..4] != BLOCK_MAGIC {
                self.corrupt(
                    n as u64,
                    format!(
                        "block {idx} at byte {start}: bad block magic {:02x?} (expected \"NFBK\")",
                        &hdr[0..4]
                    ),
                )?;
                return Ok(false);
            }
            let kind = hdr[4];
            let count = u32::from_le_bytes([hdr[8], hdr[9], hdr[10], hdr[11]]);
            let stored_crc = u32::from_le_bytes([hdr[12], hdr[13], hdr[14], hdr[15]]);
            let len = match kind {
                BLOCK_KIND_RECORDS if count <= MAX_BLOCK_RECORDS => count as usize * RECORD_BYTES,
                BLOCK_KIND_TRAILER if count <= MAX_JSON_BYTES => count as usize,
                BLOCK_KIND_RECORDS | BLOCK_KIND_TRAILER => {
                    self.corrupt(n as u64,
                        format!(
                            "block {idx} at byte {start}: implausible count/length {count} in the block header"
                        ),
                    )?;
                    return Ok(false);
                }
                other => {
                    self.corrupt(
                        n as u64,
                        format!("block {idx} at byte {start}: unknown block kind {other}"),
                    )?;
                    return Ok(false);
                }
            };
            let mut payload = std::mem::take(&mut self.payload);
            payload.resize(len, 0);
            let got = self.read(&mut payload)?;
            if got < len {
                self.payload = payload;
                self.end(TailState::Truncated {
                    discarded_bytes: (n + got) as u64,
                    reason: format!(
                        "block {idx} at byte {start}: the stream ends inside the block payload \
                         ({got} of {len} bytes); the writer was probably killed"
                    ),
                });
                return Ok(false);
            }
            let crc = crc32fast::hash(&payload);
            if crc != stored_crc {
                self.payload = payload;
                self.corrupt(
                    (n + len) as u64,
                    format!(
                        "block {idx} at byte {start} failed its CRC check \
                         (computed {crc:#010x}, stored {stored_crc:#010x})"
                    ),
                )?;
                return Ok(false);
            }
            self.block += 1;
            if kind == BLOCK_KIND_TRAILER {
                let parsed = serde_json::from_slice::<Trailer>(&payload);
                self.payload = payload;
                match parsed {
                    Ok(t) => {
                        self.trailer = Some(t);
                        let rest = self.drain()?;
                        if rest == 0 {
                            self.end(TailState::Complete);
                        } else {
                            self.end(TailState::Truncated {
                                discarded_bytes: rest,
                                reason: format!(
                                    "{rest} unexpected bytes after the trailer block (block {idx} at byte {start})"
                                ),
                            });
                        }
                    }
                    Err(e) => {
                        self.corrupt((n + len) as u64,
                            format!("block {idx} at byte {start}: the trailer is not valid trailer JSON: {e}"),
                        )?;
                    }
                }
                return Ok(false);
            }
            out.extend(payload.chunks_exact(RECORD_BYTES).map(|c| {
                let mut a = [0u8; RECORD_BYTES];
                a.copy_from_slice(c);
                decode_record(&a)
            }));
            self.payload = payload;
            if !out.is_empty() {
                return Ok(true);
            }
            // An empty block: skip it.
        }
    }

    /// Read all remaining blocks into a [`RecordFile`].
    pub fn into_record_file(self) -> Result<RecordFile, RecordError> {
        read_all_from(self)
    }

    fn end(&mut self, tail: TailState) {
        self.tail = tail;
        self.done = true;
    }

    /// End the stream at a bad block of which `consumed` bytes were read; count the bytes that follow.
    fn corrupt(&mut self, consumed: u64, what: String) -> Result<(), RecordError> {
        let rest = self.drain()?;
        let reason = if rest > 0 {
            format!(
                "{what}; {rest} more bytes follow, so this is corruption in the middle of the \
                 file: this block and everything after it are ignored"
            )
        } else {
            format!("{what}; it is the last block and is ignored")
        };
        self.end(TailState::Truncated {
            discarded_bytes: consumed + rest,
            reason,
        });
        Ok(())
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, RecordError> {
        let n = read_full(&mut self.inner, buf, &self.name, self.offset)?;
        self.offset += n as u64;
        Ok(n)
    }

    fn drain(&mut self) -> Result<u64, RecordError> {
        let n = io::copy(&mut self.inner, &mut io::sink()).map_err(|source| RecordError::Read {
            name: self.name.clone(),
            offset: self.offset,
            source,
        })?;
        self.offset += n;
        Ok(n)
    }
}

/// Read until `buf` is full or the stream ends; return the bytes read.
pub(crate) fn read_full<R: Read>(
    r: &mut R,
    buf: &mut [u8],
    name: &str,
    offset: u64,
) -> Result<usize, RecordError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(RecordError::Read {
                    name: name.to_string(),
                    offset: offset + got as u64,
                    source,
                })
            }
        }
    }
    Ok(got)
}

/// A whole `.nfr` file in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordFile {
    /// Header metadata.
    pub meta: Metadata,
    /// All records of all intact blocks, in file (arrival) order.
    pub records: Vec<Record>,
    /// The trailer, if present and valid.
    pub trailer: Option<Trailer>,
    /// How the file ended.
    pub tail: TailState,
}

/// Read a file header as [`crate::writer`]'s `write_file_header` writes it: `magic`,
/// `version` (u32 LE), the metadata length (u32 LE), the metadata JSON and its CRC32.
/// Returns the metadata and the offset of the first block. A wrong magic is
/// [`RecordError::NotRecordFile`], another version [`RecordError::UnsupportedVersion`],
/// anything else wrong [`RecordError::CorruptHeader`]; each names `name`.
pub(crate) fn read_file_header<R: Read, M: serde::de::DeserializeOwned>(
    r: &mut R,
    name: &str,
    magic: &[u8; 8],
    version: u32,
) -> Result<(M, u64), RecordError> {
    let name = name.to_string();
    let mut offset = 0u64;
    let mut head = [0u8; 8];
    let n = read_full(r, &mut head, &name, offset)?;
    offset += n as u64;
    if n < head.len() {
        return Err(RecordError::NotRecordFile {
            name,
            reason: format!("it is only {n} bytes long, shorter than the 8-byte magic"),
        });
    }
    if &head != magic {
        return Err(RecordError::NotRecordFile {
            name,
            reason: format!(
                "it starts with {:?} instead of the magic {:?}",
                String::from_utf8_lossy(&head),
                String::from_utf8_lossy(magic)
            ),
        });
    }
    let mut fixed = [0u8; 8];
    let n = read_full(r, &mut fixed, &name, offset)?;
    offset += n as u64;
    if n < fixed.len() {
        return Err(RecordError::CorruptHeader {
            name,
            reason: format!("the file ends at byte {offset}, inside the version/length fields"),
        });
    }
    let found = u32::from_le_bytes([fixed[0], fixed[1], fixed[2], fixed[3]]);
    if found != version {
        return Err(RecordError::UnsupportedVersion {
            name,
            version: found,
        });
    }
    let meta_len = u32::from_le_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);
    if meta_len > MAX_JSON_BYTES {
        return Err(RecordError::CorruptHeader {
            name,
            reason: format!(
                "the metadata length field says {meta_len} bytes, more than the limit of {MAX_JSON_BYTES}"
            ),
        });
    }
    let mut json = vec![0u8; meta_len as usize + 4];
    let n = read_full(r, &mut json, &name, offset)?;
    offset += n as u64;
    if n < json.len() {
        return Err(RecordError::CorruptHeader {
            name,
            reason: format!(
                "the file ends at byte {offset}, inside the {meta_len}-byte metadata or its CRC"
            ),
        });
    }
    let crc_bytes = json.split_off(meta_len as usize);
    let stored = u32::from_le_bytes([crc_bytes[0], crc_bytes[1], crc_bytes[2], crc_bytes[3]]);
    let computed = crc32fast::hash(&json);
    if stored != computed {
        return Err(RecordError::CorruptHeader {
            name,
            reason: format!(
                "the metadata CRC32 is {computed:#010x} but the header says {stored:#010x}"
            ),
        });
    }
    let meta = serde_json::from_slice(&json).map_err(|e| RecordError::CorruptHeader {
        reason: format!("the metadata is not valid metadata JSON: {e}"),
        name: name.clone(),
    })?;
    Ok((meta, offset))
}

/// Read the whole file at `path`.
pub fn read_all(path: &Path) -> Result<RecordFile, RecordError> {
    read_all_from(RecordReader::open(path)?)
}

/// Read a whole stream from an opened reader; see [`RecordReader::into_record_file`].
fn read_all_from<R: Read>(mut reader: RecordReader<R>) -> Result<RecordFile, RecordError> {
    let mut records = Vec::new();
    let mut block = Vec::new();
    while reader.next_block(&mut block)? {
        records.append(&mut block);
    }
    Ok(RecordFile {
        meta: reader.meta,
        records,
        trailer: reader.trailer,
        tail: reader.tail,
    })
}
