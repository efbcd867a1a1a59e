//! Inputs: `.nfr` files, CSV, seed 001's TRex-fork files and pcap pairs,
//! each read as a stream of record blocks and fed to one [`Engine`] pass.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use nflab_record::{FlowSent, Record, RecordReader, TailState, Trailer};

use crate::engine::{Engine, Options};
use crate::metrics::with_resolved_thresholds;
use crate::trex::{is_stdin, secs_to_ns, trex_note, trex_outcome, TrexInput, TREX_RECORD_BYTES};
use crate::{Analysis, AnalysisConfig, AnalyzeError, AnomalySpec, FileAnalysis, Summary};

/// Sent counts derived from the records alone: `highest seq + 1` per flow,
/// no warm-up.
pub(crate) fn sent_from_highest_seq(records: &[Record]) -> Vec<FlowSent> {
    let mut highest: BTreeMap<u16, u64> = BTreeMap::new();
    for r in records {
        let h = highest.entry(r.flow).or_insert(r.seq);
        *h = (*h).max(r.seq);
    }
    highest
        .into_iter()
        .map(|(flow, h)| FlowSent {
            flow,
            sent: h.saturating_add(1),
            warmup: 0,
        })
        .collect()
}

/// The input formats `nflab analyze` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// nflab `.nfr` records.
    Nfr,
    /// CSV with a header naming `seq`, `tx_ns`, `rx_ns`.
    Csv,
    /// Seed 001's TRex fork: headerless little-endian f64 `(tx, rx)` seconds.
    Trex,
}

impl Format {
    /// Guess from the file name: `.csv`, `.data` (TRex fork), else `.nfr`.
    pub fn guess(path: &Path) -> Format {
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("csv") => Format::Csv,
            Some("data") | Some("trex") => Format::Trex,
            _ => Format::Nfr,
        }
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "nfr" => Ok(Format::Nfr),
            "csv" => Ok(Format::Csv),
            "trex" => Ok(Format::Trex),
            other => Err(format!(
                "unknown input format {other:?}; use nfr, csv, trex or pcap (pcap takes PRE POST pairs)"
            )),
        }
    }
}

/// A stream of record blocks.
trait Source {
    /// Next block into `out` (cleared); `false` at the end.
    fn next_block(&mut self, out: &mut Vec<Record>) -> Result<bool, AnalyzeError>;
}

// ---------------------------------------------------------------------------
// .nfr
// ---------------------------------------------------------------------------

struct NfrSource {
    reader: RecordReader<BufReader<File>>,
}

impl Source for NfrSource {
    fn next_block(&mut self, out: &mut Vec<Record>) -> Result<bool, AnalyzeError> {
        Ok(self.reader.next_block(out)?)
    }
}

// ---------------------------------------------------------------------------
// CSV
// ---------------------------------------------------------------------------

struct CsvColumns {
    names: Vec<String>,
    seq: usize,
    tx: usize,
    rx: usize,
    flow: Option<usize>,
    len: Option<usize>,
    flags: Option<usize>,
}

fn csv_columns(path: &Path, header: &str) -> Result<CsvColumns, AnalyzeError> {
    let names: Vec<String> = header.split(',').map(|s| s.trim().to_string()).collect();
    let column = |name: &str, required: bool| -> Result<Option<usize>, AnalyzeError> {
        let found: Vec<usize> = (0..names.len()).filter(|&i| names[i] == name).collect();
        match found.as_slice() {
            [] if required => Err(AnalyzeError::CsvHeader {
                path: path.to_path_buf(),
                reason: format!("the header {header:?} (line 1) has no column {name:?}"),
            }),
            [] => Ok(None),
            [i] => Ok(Some(*i)),
            _ => Err(AnalyzeError::CsvHeader {
                path: path.to_path_buf(),
                reason: format!("the header {header:?} (line 1) names {name:?} more than once"),
            }),
        }
    };
    let required = |name: &str| column(name, true).map(|c| c.unwrap_or(0));
    Ok(CsvColumns {
        seq: required("seq")?,
        tx: required("tx_ns")?,
        rx: required("rx_ns")?,
        flow: column("flow", false)?,
        len: column("wire_len", false)?,
        flags: column("flags", false)?,
        names,
    })
}

fn csv_row(
    path: &Path,
    cols: &CsvColumns,
    line_no: u64,
    text: &str,
) -> Result<Record, AnalyzeError> {
    let bad = |reason: String| AnalyzeError::CsvRow {
        path: path.to_path_buf(),
        line: line_no,
        text: text.to_string(),
        reason,
    };
    let fields: Vec<&str> = text.split(',').map(str::trim).collect();
    if fields.len() != cols.names.len() {
        return Err(bad(format!(
            "expected {} fields like the header, found {}",
            cols.names.len(),
            fields.len()
        )));
    }
    let u64_at = |c: usize| -> Result<u64, AnalyzeError> {
        fields[c].parse::<u64>().map_err(|_| {
            bad(format!(
                "column {} = {:?} is not a whole number >= 0",
                cols.names[c], fields[c]
            ))
        })
    };
    let u16_at = |c: Option<usize>| -> Result<u16, AnalyzeError> {
        match c {
            None => Ok(0),
            Some(c) => fields[c].parse::<u16>().map_err(|_| {
                bad(format!(
                    "column {} = {:?} is not a whole number in 0..=65535",
                    cols.names[c], fields[c]
                ))
            }),
        }
    };
    Ok(Record {
        seq: u64_at(cols.seq)?,
        tx_ns: u64_at(cols.tx)?,
        rx_ns: u64_at(cols.rx)?,
        flow: u16_at(cols.flow)?,
        wire_len: u16_at(cols.len)?,
        flags: u16_at(cols.flags)?,
    })
}

struct CsvSource<R> {
    path: PathBuf,
    reader: R,
    cols: CsvColumns,
    line_no: u64,
    line: String,
    /// A bad row ends the stream; everything before it is analysed.
    problem: Option<AnalyzeError>,
}

impl CsvSource<BufReader<File>> {
    fn open(path: &Path) -> Result<Self, AnalyzeError> {
        let file = File::open(path).map_err(|source| AnalyzeError::CsvIo {
            path: path.to_path_buf(),
            source,
        })?;
        CsvSource::new(path, BufReader::with_capacity(1 << 20, file))
    }
}

impl<R: BufRead> CsvSource<R> {
    /// Read the header from `reader`, whose text is the file at `path`.
    fn new(path: &Path, mut reader: R) -> Result<Self, AnalyzeError> {
        let io_err = |source| AnalyzeError::CsvIo {
            path: path.to_path_buf(),
            source,
        };
        let mut header = String::new();
        if reader.read_line(&mut header).map_err(io_err)? == 0 {
            return Err(AnalyzeError::CsvHeader {
                path: path.to_path_buf(),
                reason: "the file is empty".into(),
            });
        }
        let cols = csv_columns(path, header.trim_end_matches(['\n', '\r']))?;
        Ok(CsvSource {
            path: path.to_path_buf(),
            reader,
            cols,
            line_no: 1,
            line: String::new(),
            problem: None,
        })
    }
}

impl<R: BufRead> Source for CsvSource<R> {
    fn next_block(&mut self, out: &mut Vec<Record>) -> Result<bool, AnalyzeError> {
        out.clear();
        if self.problem.is_some() {
            return Ok(false);
        }
        while out.len() < 4096 {
            self.line.clear();
            let n =
                self.reader
                    .read_line(&mut self.line)
                    .map_err(|source| AnalyzeError::CsvIo {
                        path: self.path.clone(),
                        source,
                    })?;
            if n == 0 {
                break;
            }
            self.line_no += 1;
            let text = self.line.trim_end_matches(['\n', '\r']);
            if text.trim().is_empty() {
                continue;
            }
            match csv_row(&self.path, &self.cols, self.line_no, text) {
                Ok(r) => out.push(r),
                Err(e) => {
                    self.problem = Some(e);
                    break;
                }
            }
        }
        Ok(!out.is_empty())
    }
}

/// Read a CSV of received packets in arrival order.
///
/// The header must name `seq`, `tx_ns` and `rx_ns`; `flow`, `wire_len` and
/// `flags` are read when present (0 otherwise); other columns are ignored.
/// Blank lines are skipped. Sent counts are `highest seq + 1` per flow, no
/// warm-up. A bad row is an error naming the file, the line and its text.
pub fn read_csv(path: &Path) -> Result<(Vec<Record>, Vec<FlowSent>), AnalyzeError> {
    csv_records(CsvSource::open(path)?)
}

/// [`read_csv`] of text already open or in memory (`&[u8]` is a
/// [`BufRead`]); `path` names it in messages.
pub fn read_csv_from(
    path: &Path,
    reader: impl BufRead,
) -> Result<(Vec<Record>, Vec<FlowSent>), AnalyzeError> {
    csv_records(CsvSource::new(path, reader)?)
}

fn csv_records(
    mut src: CsvSource<impl BufRead>,
) -> Result<(Vec<Record>, Vec<FlowSent>), AnalyzeError> {
    let mut records = Vec::new();
    let mut block = Vec::new();
    while src.next_block(&mut block)? {
        records.extend_from_slice(&block);
    }
    if let Some(e) = src.problem {
        return Err(e);
    }
    let sent = sent_from_highest_seq(&records);
    Ok((records, sent))
}

// ---------------------------------------------------------------------------
// TRex fork (seed 001)
// ---------------------------------------------------------------------------

/// Seed 001's TRex-fork file: 16-byte records of two little-endian f64,
/// `tx` and `rx` in seconds, no header, no sequence numbers. Records get
/// `seq` = their index in the file, flow 0, and ns timestamps rounded to the
/// nearest ns.
pub(crate) struct TrexSource<'a> {
    path: PathBuf,
    file: Box<dyn Read + 'a>,
    buf: Vec<u8>,
    next_seq: u64,
    /// Bytes after the last whole record (known at the end).
    leftover: u64,
}

impl<'a> TrexSource<'a> {
    /// Open `input` (a path of `-` is standard input). `records`: how many
    /// the input holds, when known: the buffer is no larger than they need.
    pub(crate) fn open(input: TrexInput<'a>, records: Option<u64>) -> Result<Self, AnalyzeError> {
        let path = input.name();
        let file: Box<dyn Read + 'a> = match input {
            TrexInput::File(path) if is_stdin(path) => Box::new(std::io::stdin().lock()),
            TrexInput::File(path) => {
                Box::new(File::open(path).map_err(|source| AnalyzeError::Io {
                    path: path.to_path_buf(),
                    source,
                })?)
            }
            TrexInput::Bytes { bytes, .. } => Box::new(bytes),
        };
        // A whole record more than the input holds, so the last read sees
        // its leftover bytes.
        let cap = records.map_or(1 << 20, |n| {
            ((n as usize + 1) * TREX_RECORD_BYTES).min(1 << 20)
        });
        Ok(TrexSource {
            path: path.to_path_buf(),
            file,
            buf: vec![0u8; cap],
            next_seq: 0,
            leftover: 0,
        })
    }

    fn fill(&mut self) -> std::io::Result<usize> {
        let mut got = 0;
        while got < self.buf.len() {
            match self.file.read(&mut self.buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(got)
    }
}

impl Source for TrexSource<'_> {
    fn next_block(&mut self, out: &mut Vec<Record>) -> Result<bool, AnalyzeError> {
        out.clear();
        let got = self.fill().map_err(|source| AnalyzeError::Io {
            path: self.path.clone(),
            source,
        })?;
        let whole = got / TREX_RECORD_BYTES * TREX_RECORD_BYTES;
        if got < self.buf.len() {
            self.leftover = (got - whole) as u64;
        }
        out.extend(self.buf[..whole].chunks_exact(TREX_RECORD_BYTES).map(|c| {
            let tx = f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            let rx = f64::from_le_bytes([c[8], c[9], c[10], c[11], c[12], c[13], c[14], c[15]]);
            let seq = self.next_seq;
            self.next_seq += 1;
            Record {
                seq,
                flow: 0,
                tx_ns: secs_to_ns(tx),
                rx_ns: secs_to_ns(rx),
                wire_len: 0,
                flags: 0,
            }
        }));
        Ok(!out.is_empty())
    }
}

// ---------------------------------------------------------------------------
// Driving a pass over a file
// ---------------------------------------------------------------------------

fn run_source(
    src: &mut dyn Source,
    cfg: &AnalysisConfig,
    opts: &Options,
    sent: Option<&[FlowSent]>,
    reserve: u64,
) -> Result<Engine, AnalyzeError> {
    let mut e = Engine::new(cfg, opts, sent);
    e.reserve(reserve);
    let mut block = Vec::with_capacity(1 << 16);
    while src.next_block(&mut block)? {
        e.push_all(&block);
    }
    Ok(e)
}

/// Analyse the file at `path` in one streaming pass (two for relative
/// anomaly thresholds), with [`Options`]. `format` defaults to a guess from
/// the file name ([`Format::guess`]).
///
/// A truncated `.nfr` tail, a TRex file whose size is not a multiple of 16
/// bytes and a bad CSV row end reading early: everything before is analysed
/// and [`FileAnalysis::problem`] says what and where. An unreadable or empty
/// file, or an `.nfr` with a bad header, is an error naming the file.
pub fn analyze_file_with(
    path: &Path,
    cfg: &AnalysisConfig,
    opts: &Options,
    format: Option<Format>,
) -> Result<FileAnalysis, AnalyzeError> {
    let format = format.unwrap_or_else(|| Format::guess(path));
    if is_stdin(path) && format != Format::Trex {
        return Err(AnalyzeError::Invalid(
            "standard input (-) is read as a TRex-fork stream only: add --format trex, or \
             give the file's path"
                .into(),
        ));
    }
    let mut opts = opts.clone();
    match format {
        Format::Nfr => {
            let nflab_record::Prescan {
                trailer: pre_trailer,
                span,
                ..
            } = nflab_record::prescan(path).unwrap_or_default();
            if opts.tx_span.is_none() {
                opts.tx_span = span;
            }
            let mut out: Option<(TailState, Option<Trailer>, nflab_record::Metadata)> = None;
            let pass = |cfg: &AnalysisConfig| -> Result<Analysis, AnalyzeError> {
                let reader = RecordReader::open(path)?;
                let meta = reader.metadata().clone();
                let mut cfg = cfg.clone();
                if cfg.clock.source.is_empty() {
                    cfg.clock = meta.clock.clone();
                }
                let mut src = NfrSource { reader };
                let upfront = pre_trailer.as_ref().map(|t| t.sent.as_slice());
                let e = run_source(&mut src, &cfg, &opts, upfront, 0)?;
                let trailer = src.reader.trailer().cloned();
                let tail = src.reader.tail().clone();
                let a = e.finish(if upfront.is_some() {
                    None
                } else {
                    trailer.as_ref().map(|t| t.sent.as_slice())
                });
                out = Some((tail, trailer, meta));
                Ok(a)
            };
            let mut analysis = with_resolved_thresholds(cfg, pass)?;
            let (tail, trailer, meta) =
                out.unwrap_or((TailState::NoTrailer, None, Default::default()));
            let mut notes = Vec::new();
            let ts = timestamp_sources(&meta);
            if let Some(n) = ts.tx_application_fallbacks.filter(|n| *n > 0) {
                notes.push(format!(
                    "{n} received probes got no kernel TX timestamp and keep the application \
                     one (record flags say which stamp each record carries)"
                ));
            }
            if ts.tx.contains("hardware") || ts.rx.contains("hardware") {
                notes.push(format!(
                    "timestamps are tx: {}, rx: {}; hardware stamps are the NIC clock's (PHC) \
                     time: latency mixing them with another clock is only meaningful when that \
                     PHC is synchronised to it",
                    ts.tx, ts.rx
                ));
            }
            if trailer.is_none() && pre_trailer.is_none() {
                notes.push(format!(
                    "{} has no trailer (the recorder did not finish): sent counts are taken as \
                     highest seq + 1 per flow, so losses at the end of the run are not seen and \
                     warm-up packets are not excluded",
                    path.display()
                ));
            }
            let problem = if let TailState::Truncated { .. } = &tail {
                let msg = format!("{}: {}", path.display(), tail);
                notes.push(msg.clone());
                if pre_trailer.is_some() {
                    notes.push(
                        "sent counts come from the trailer although a block before it is \
                         corrupt: the corrupt block's packets count as lost"
                            .into(),
                    );
                }
                Some(msg)
            } else {
                None
            };
            let s = &mut analysis.summary;
            s.interrupted = trailer
                .as_ref()
                .or(pre_trailer.as_ref())
                .is_some_and(|t| t.interrupted);
            notes.append(&mut s.notes);
            s.notes = notes;
            s.timestamps = Some(ts);
            Ok(FileAnalysis {
                analysis,
                tail,
                problem,
            })
        }
        Format::Csv => csv_analysis(|| CsvSource::open(path), cfg, opts),
        Format::Trex if is_stdin(path) => trex_stream(path, cfg, &opts),
        Format::Trex => trex_analysis(TrexInput::File(path), cfg, &opts),
    }
}

/// [`analyze_file_with`] of a CSV file's text held in memory; `name` names
/// it in messages. The same pass as for a file, without one.
pub fn analyze_csv_bytes(
    name: &Path,
    text: &[u8],
    cfg: &AnalysisConfig,
    opts: &Options,
) -> Result<FileAnalysis, AnalyzeError> {
    csv_analysis(|| CsvSource::new(name, text), cfg, opts.clone())
}

/// [`analyze_file_with`] of a TRex-fork file's bytes held in memory; `name`
/// names them in messages. The same passes as for a file, without one.
pub fn analyze_trex_bytes(
    name: &Path,
    bytes: &[u8],
    cfg: &AnalysisConfig,
    opts: &Options,
) -> Result<FileAnalysis, AnalyzeError> {
    trex_analysis(TrexInput::Bytes { name, bytes }, cfg, opts)
}

/// Both cores: the input split into parts, every statistic merged; the
/// engine's pass when the options ask for what the split cannot give.
fn trex_analysis(
    input: TrexInput<'_>,
    cfg: &AnalysisConfig,
    opts: &Options,
) -> Result<FileAnalysis, AnalyzeError> {
    crate::fast::analyze_trex_full(input, cfg, opts, 0)
        .unwrap_or_else(|| trex_engine_pass(input, cfg, opts))
}

/// The CSV pass(es) over the text `open` reads (once per pass).
fn csv_analysis<R: BufRead>(
    open: impl Fn() -> Result<CsvSource<R>, AnalyzeError>,
    cfg: &AnalysisConfig,
    mut opts: Options,
) -> Result<FileAnalysis, AnalyzeError> {
    if opts.tx_span.is_none() && (opts.trim_start_ns > 0 || opts.trim_end_ns > 0) {
        // CSV cannot seek to its last row: a quick first pass.
        let mut src = open()?;
        let mut block = Vec::new();
        let (mut first, mut last) = (None, None);
        while src.next_block(&mut block)? {
            first = first.or(block.first().map(|r| r.tx_ns));
            last = block.last().map(|r| r.tx_ns).or(last);
        }
        opts.tx_span = first.zip(last);
    }
    let mut problem = None;
    let pass = |cfg: &AnalysisConfig| -> Result<Analysis, AnalyzeError> {
        let mut src = open()?;
        let e = run_source(&mut src, cfg, &opts, None, 0)?;
        problem = src.problem.take();
        let sent = e.sent_from_highest_seq();
        Ok(e.finish(Some(&sent)))
    };
    let mut analysis = with_resolved_thresholds(cfg, pass)?;
    let problem = problem.map(|e| {
        let msg = format!("{e}; the rows before it were analysed");
        analysis.summary.notes.push(msg.clone());
        msg
    });
    let tail = if problem.is_some() {
        TailState::Truncated {
            discarded_bytes: 0,
            reason: problem.clone().unwrap_or_default(),
        }
    } else {
        TailState::Complete
    };
    Ok(FileAnalysis {
        analysis,
        tail,
        problem,
    })
}

/// A TRex-fork file through the [`Engine`] (one core): for the options the
/// split pass cannot honour (windows, trimming, deadline, worst N, …).
pub(crate) fn trex_engine_pass(
    input: TrexInput<'_>,
    cfg: &AnalysisConfig,
    opts: &Options,
) -> Result<FileAnalysis, AnalyzeError> {
    let path = input.name();
    let mut opts = opts.clone();
    let (n, leftover) = input.records()?;
    if opts.tx_span.is_none() {
        opts.tx_span = input.span();
    }
    let pass = |cfg: &AnalysisConfig| -> Result<Analysis, AnalyzeError> {
        let mut src = TrexSource::open(input, Some(n))?;
        let sent = [FlowSent {
            flow: 0,
            sent: n,
            warmup: 0,
        }];
        let e = run_source(&mut src, cfg, &opts, Some(&sent), n)?;
        Ok(e.finish(None))
    };
    let mut analysis = with_resolved_thresholds(cfg, pass)?;
    analysis.summary.notes.push(trex_note(path));
    Ok(trex_outcome(path, analysis, leftover, n))
}

/// A TRex-fork stream on standard input: one pass, so no relative
/// thresholds and no trimming; the record count is known only at the end.
fn trex_stream(
    path: &Path,
    cfg: &AnalysisConfig,
    opts: &Options,
) -> Result<FileAnalysis, AnalyzeError> {
    if cfg.anomalies.iter().any(AnomalySpec::is_relative) {
        return Err(AnalyzeError::Invalid(
            "standard input can be read only once, and a relative anomaly threshold needs two \
             passes: give the threshold in time units (e.g. 250us) or read a file"
                .into(),
        ));
    }
    if opts.trim_start_ns > 0 || opts.trim_end_ns > 0 {
        return Err(AnalyzeError::Invalid(
            "--trim needs the last record's time before the pass; standard input cannot seek: \
             read a file instead"
                .into(),
        ));
    }
    let mut src = TrexSource::open(TrexInput::File(path), None)?;
    let e = run_source(&mut src, cfg, opts, None, 0)?;
    let sent = e.sent_from_highest_seq();
    let n = sent.first().map_or(0, |s| s.sent);
    if n == 0 {
        return Err(AnalyzeError::Input {
            path: path.to_path_buf(),
            reason: "standard input held less than one 16-byte (tx, rx) record of a TRex-fork file"
                .into(),
        });
    }
    let mut analysis = e.finish(Some(&sent));
    analysis.summary.notes.push(trex_note(path));
    Ok(trex_outcome(path, analysis, src.leftover, n))
}

/// The timestamp sources a records file's metadata names.
fn timestamp_sources(meta: &nflab_record::Metadata) -> crate::TimestampSources {
    crate::TimestampSources {
        tx: meta.tx_timestamp.clone(),
        rx: meta.rx_timestamp.clone(),
        tx_application_fallbacks: meta
            .extra
            .get("tx_stamps")
            .and_then(|t| t.get("application_fallbacks"))
            .and_then(|v| v.as_u64()),
    }
}

/// Read the `.nfr` file at `path` and analyse it.
///
/// Sent counts and `interrupted` come from the trailer. Without a trailer
/// (the recorder died) sent is `highest seq + 1` per flow, with no warm-up
/// exclusion, and a note says so. A truncated tail is a note, not an error;
/// the [`TailState`] is returned too. When `cfg.clock.source` is empty the
/// file's clock is used. Streams the file: percentiles are exact up to
/// [`crate::dist::DEFAULT_EXACT_LIMIT`] packets and HDR beyond.
pub fn analyze_file(
    path: &Path,
    cfg: &AnalysisConfig,
) -> Result<(Summary, TailState), AnalyzeError> {
    let fa = analyze_file_with(path, cfg, &Options::default(), Some(Format::Nfr))?;
    Ok((fa.analysis.summary, fa.tail))
}

/// The record files behind `nflab analyze`'s inputs: an experiment directory
/// stands for its runs' `runs/*/records.nfr` (sorted), anything else for itself.
/// The CLI and the Python API both expand their inputs here.
pub fn expand_inputs(files: &[std::path::PathBuf]) -> Result<Vec<std::path::PathBuf>, String> {
    let mut out = Vec::new();
    for f in files {
        if !f.is_dir() {
            out.push(f.clone());
            continue;
        }
        let runs = f.join("runs");
        let mut found: Vec<std::path::PathBuf> = std::fs::read_dir(&runs)
            .map_err(|e| {
                format!(
                    "{} is a directory without runs/: give record files or an experiment directory ({e})",
                    f.display()
                )
            })?
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("records.nfr"))
            .filter(|p| p.is_file())
            .collect();
        found.sort();
        if found.is_empty() {
            return Err(format!(
                "{} has no runs/*/records.nfr to re-analyse",
                runs.display()
            ));
        }
        out.extend(found);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trex::{round_scaled, scaled_to_ns, trex_latencies, TWO52};
    use proptest::prelude::*;

    /// Scaled timestamps (ns as f64) that probe the fast conversion: exact
    /// ties, the ends of its range, and anything at all.
    fn scaled() -> impl Strategy<Value = f64> {
        prop_oneof![
            (0u64..1 << 52).prop_map(|k| k as f64 + 0.5),
            (0u64..1 << 52).prop_map(|k| k as f64),
            (0u64..1 << 20).prop_map(|k| (1u64 << 52) as f64 - k as f64 * 0.5),
            (0u64..1 << 20).prop_map(|k| (1u64 << 52) as f64 + k as f64),
            -2.0f64..2.0,
            0.0f64..1e12,
            proptest::num::f64::ANY,
        ]
    }

    proptest! {
        /// `round_scaled` is either exactly `scaled_to_ns` or out of range,
        /// and in range for every v in [0, 2^52 − 1].
        #[test]
        fn round_scaled_is_exact_or_rejected(v in scaled()) {
            let got = round_scaled(v).to_bits().wrapping_sub(TWO52.to_bits());
            if got < 1 << 52 {
                prop_assert_eq!(got, scaled_to_ns(v), "v = {}", v);
            }
            if (0.0..=TWO52 - 1.0).contains(&v) {
                prop_assert!(got < 1 << 52, "v = {} rejected", v);
            }
        }

        /// `trex_latencies` equals converting record by record with
        /// `secs_to_ns` (bucket indices: hdrhistogram's), or declines; it accepts every block whose scaled
        /// timestamps lie in [0, 2^52 − 1].
        #[test]
        fn trex_latencies_equal_record_by_record(
            pairs in proptest::collection::vec(
                prop_oneof![
                    3 => (0.0f64..4e6, 0.0f64..1e-2).prop_map(|(t, d)| (t, t + d)),
                    1 => (scaled(), scaled()).prop_map(|(t, r)| (t / 1e9, r / 1e9)),
                ],
                0..40,
            ),
            digits in 1u8..=5,
        ) {
            let bytes: Vec<u8> = pairs
                .iter()
                .flat_map(|(t, r)| t.to_le_bytes().into_iter().chain(r.to_le_bytes()))
                .collect();
            let hdr = crate::dist::HdrCounts::new(digits);
            let (mut lat, mut idx) = (vec![7; 3], vec![9; 50]);
            let got = trex_latencies(&bytes, &mut lat, hdr.f64_index(), &mut idx);
            let ns: Vec<(u64, u64)> =
                pairs.iter().map(|&(t, r)| (secs_to_ns(t), secs_to_ns(r))).collect();
            let in_range = |s: f64| (0.0..=TWO52 - 1.0).contains(&(s * 1e9));
            match got {
                Some(b) => {
                    let want: Vec<i64> = ns
                        .iter()
                        .map(|&(t, r)| crate::engine::latency(t, r))
                        .map(|(l, clamped)| {
                            assert!(!clamped);
                            l
                        })
                        .collect();
                    prop_assert_eq!(&lat, &want);
                    for (&l, &i) in want.iter().zip(&idx) {
                        if let Ok(v) = u64::try_from(l) {
                            prop_assert_eq!(i as usize, hdr.index(v));
                        }
                    }
                    prop_assert_eq!(idx.len(), want.len());
                    let range = |v: &mut dyn Iterator<Item = u64>| {
                        v.fold((u64::MAX, 0), |(lo, hi), x| (lo.min(x), hi.max(x)))
                    };
                    prop_assert_eq!(b.tx, range(&mut ns.iter().map(|p| p.0)));
                    prop_assert_eq!(b.rx, range(&mut ns.iter().map(|p| p.1)));
                    let lo = want.iter().copied().min().unwrap_or_default();
                    let hi = want.iter().copied().max().unwrap_or_default();
                    prop_assert_eq!(b.lat, (lo, hi));
                }
                None => prop_assert!(
                    pairs.is_empty() || !pairs.iter().all(|&(t, r)| in_range(t) && in_range(r))
                ),
            }
        }
    }
}
