//! Every record of an `.nfr` file as columns, each marked with whether the
//! engine measures it — for the Python package's record frames, so that the
//! warm-up, duplicate and reorder-window rules exist only in the engine.
//!
//! A record is measured when [`Engine::push`] accepts it: not a warm-up
//! packet (`seq < warmup` of its flow, from the trailer), not a second copy
//! of a sequence number, not later than the reorder window (such a packet
//! counts as lost). The file is read as [`crate::analyze_file_with`] reads
//! it: the sent counts from the trailer up front when the block chain
//! reaches it, a damaged tail ending the records early.

use std::path::Path;

use nflab_record::{Metadata, Record, RecordReader, TailState, Trailer};

use crate::{AnalysisConfig, AnalyzeError, Engine, Options};

/// The records of one `.nfr` file, in file (arrival) order.
#[derive(Debug, Clone)]
pub struct RecordTable {
    /// The header's metadata.
    pub meta: Metadata,
    /// The trailer, when the file has an intact one.
    pub trailer: Option<Trailer>,
    /// How the file ended.
    pub tail: TailState,
    /// Every record of the intact blocks.
    pub records: Vec<Record>,
    /// `measured[i]`: the engine counts `records[i]` as a measured packet.
    pub measured: Vec<bool>,
}

/// Read the `.nfr` file at `path` with the engine's reorder window of
/// `reorder_window` sequence numbers per flow ([`Options::reorder_window`]).
pub fn read_record_table(path: &Path, reorder_window: u64) -> Result<RecordTable, AnalyzeError> {
    let upfront = nflab_record::prescan(path).and_then(|p| p.trailer);
    let mut reader = RecordReader::open(path)?;
    let meta = reader.metadata().clone();
    // The cheapest engine that still decides: no anomaly, HDR latencies.
    let opts = Options {
        reorder_window,
        exact_limit: 0,
        ..Options::default()
    };
    let cfg = AnalysisConfig::default();
    let mut engine = Engine::new(&cfg, &opts, upfront.as_ref().map(|t| t.sent.as_slice()));
    let (mut records, mut measured) = (Vec::new(), Vec::new());
    let mut block = Vec::with_capacity(1 << 16);
    while reader.next_block(&mut block)? {
        measured.extend(block.iter().map(|r| engine.push(r)));
        records.extend_from_slice(&block);
    }
    Ok(RecordTable {
        meta,
        trailer: reader.trailer().cloned(),
        tail: reader.tail().clone(),
        records,
        measured,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nflab_record::{FlowSent, RecordWriter};

    fn rec(seq: u64, flow: u16, tx: u64) -> Record {
        Record {
            seq,
            flow,
            tx_ns: tx,
            rx_ns: tx + 1_000,
            wire_len: 64,
            flags: 0,
        }
    }

    #[test]
    fn warmup_duplicates_and_late_packets_are_not_measured() {
        let dir = std::env::temp_dir().join(format!("nflab-table-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.nfr");
        // Flow 0: warm-up 2; seq 5 twice; seq 3 arrives after seq 20 (beyond a window of 8).
        // Flow 1: no warm-up.
        let recs = [
            rec(0, 0, 0),
            rec(1, 0, 10),
            rec(2, 0, 20),
            rec(0, 1, 25),
            rec(4, 0, 40),
            rec(5, 0, 50),
            rec(5, 0, 50),
            rec(20, 0, 200),
            rec(3, 0, 30),
            rec(1, 1, 35),
        ];
        let want = [
            false, false, true, true, true, true, false, true, false, true,
        ];
        let mut w = RecordWriter::create(&path, &Metadata::default()).unwrap();
        for r in &recs {
            w.push(r).unwrap();
        }
        w.finish(&Trailer {
            sent: vec![
                FlowSent {
                    flow: 0,
                    sent: 21,
                    warmup: 2,
                },
                FlowSent {
                    flow: 1,
                    sent: 2,
                    warmup: 0,
                },
            ],
            ..Trailer::default()
        })
        .unwrap();
        let t = read_record_table(&path, 8).unwrap();
        assert_eq!(t.records, recs);
        assert_eq!(t.measured, want);
        assert_eq!(t.tail, TailState::Complete);
        // The engine's own count of measured packets agrees.
        let a = crate::analyze_file_with(
            &path,
            &AnalysisConfig::default(),
            &Options {
                reorder_window: 8,
                ..Options::default()
            },
            None,
        )
        .unwrap();
        let n = want.iter().filter(|m| **m).count() as u64;
        assert_eq!(a.analysis.summary.packets.received, n);
        std::fs::remove_dir_all(dir).ok();
    }
}
