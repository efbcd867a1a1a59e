//! Inputs: `.nfr` files and CSV.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use nflab_record::{FlowSent, Record, TailState};

use crate::{analyze, AnalysisConfig, AnalyzeError, Summary};

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

/// Read the `.nfr` file at `path` and analyse it.
///
/// Sent counts and `interrupted` come from the trailer. Without a trailer
/// (the recorder died) sent is `highest seq + 1` per flow, with no warm-up
/// exclusion, and a note says so. A truncated tail is a note, not an error;
/// the [`TailState`] is returned too. When `cfg.clock.source` is empty the
/// file's clock is used.
pub fn analyze_file(
    path: &Path,
    cfg: &AnalysisConfig,
) -> Result<(Summary, TailState), AnalyzeError> {
    let file = nflab_record::read_all(path)?;
    let mut notes = Vec::new();
    let sent = match &file.trailer {
        Some(t) => t.sent.clone(),
        None => {
            notes.push(format!(
                "{} has no trailer (the recorder did not finish): sent counts are taken as \
                 highest seq + 1 per flow, so losses at the end of the run are not seen and \
                 warm-up packets are not excluded",
                path.display()
            ));
            sent_from_highest_seq(&file.records)
        }
    };
    if let TailState::Truncated { .. } = &file.tail {
        notes.push(format!("{}: {}", path.display(), file.tail));
    }
    let mut cfg = cfg.clone();
    if cfg.clock.source.is_empty() {
        cfg.clock = file.meta.clock.clone();
    }
    let mut summary = analyze(&file.records, &sent, &cfg);
    summary.interrupted = file.trailer.as_ref().is_some_and(|t| t.interrupted);
    notes.append(&mut summary.notes);
    summary.notes = notes;
    Ok((summary, file.tail))
}

/// Read a CSV of received packets in arrival order.
///
/// The header must name `seq`, `tx_ns` and `rx_ns`; `flow`, `wire_len` and
/// `flags` are read when present (0 otherwise); other columns are ignored.
/// Blank lines are skipped. Sent counts are `highest seq + 1` per flow, no
/// warm-up. A bad row is an error naming the file, the line and its text.
pub fn read_csv(path: &Path) -> Result<(Vec<Record>, Vec<FlowSent>), AnalyzeError> {
    let io_err = |source| AnalyzeError::CsvIo {
        path: path.to_path_buf(),
        source,
    };
    let reader = BufReader::new(File::open(path).map_err(io_err)?);
    let mut lines = reader.lines();
    let header = match lines.next() {
        Some(line) => line.map_err(io_err)?,
        None => {
            return Err(AnalyzeError::CsvHeader {
                path: path.to_path_buf(),
                reason: "the file is empty".into(),
            })
        }
    };
    let names: Vec<&str> = header.split(',').map(str::trim).collect();
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
    let (c_seq, c_tx, c_rx) = (required("seq")?, required("tx_ns")?, required("rx_ns")?);
    let (c_flow, c_len, c_flags) = (
        column("flow", false)?,
        column("wire_len", false)?,
        column("flags", false)?,
    );

    let mut records = Vec::new();
    for (i, line) in lines.enumerate() {
        let line_no = i as u64 + 2;
        let text = line.map_err(io_err)?;
        if text.trim().is_empty() {
            continue;
        }
        let bad = |reason: String| AnalyzeError::CsvRow {
            path: path.to_path_buf(),
            line: line_no,
            text: text.clone(),
            reason,
        };
        let fields: Vec<&str> = text.split(',').map(str::trim).collect();
        if fields.len() != names.len() {
            return Err(bad(format!(
                "expected {} fields like the header, found {}",
                names.len(),
                fields.len()
            )));
        }
        let u64_at = |c: usize| -> Result<u64, AnalyzeError> {
            fields[c].parse::<u64>().map_err(|_| {
                bad(format!(
                    "column {} = {:?} is not a whole number >= 0",
                    names[c], fields[c]
                ))
            })
        };
        let u16_at = |c: Option<usize>| -> Result<u16, AnalyzeError> {
            match c {
                None => Ok(0),
                Some(c) => fields[c].parse::<u16>().map_err(|_| {
                    bad(format!(
                        "column {} = {:?} is not a whole number in 0..=65535",
                        names[c], fields[c]
                    ))
                }),
            }
        };
        records.push(Record {
            seq: u64_at(c_seq)?,
            tx_ns: u64_at(c_tx)?,
            rx_ns: u64_at(c_rx)?,
            flow: u16_at(c_flow)?,
            wire_len: u16_at(c_len)?,
            flags: u16_at(c_flags)?,
        });
    }
    let sent = sent_from_highest_seq(&records);
    Ok((records, sent))
}
