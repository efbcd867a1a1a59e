//! Kernel TX timestamps of a run (`traffic.tx_timestamp = "kernel"`): switching them on,
//! writing the generator's matched stamps to `tx_stamps.nfts`, and putting them into
//! `records.nfr` after the run.
//!
//! The recorder keeps writing what it sees on the receive side (the application stamp in
//! each probe), so a run that dies before the end leaves records that say "application".
//! After the generator and recorder have finished, [`apply`] rewrites the records with the
//! kernel stamps (`nflab_record::substitute_tx`): each record's flags name the source of its
//! tx stamp, the metadata names the source of each side and counts the probes that kept
//! the application stamp, and `summary.json` → `timestamps` repeats both.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nflab_gen::{GenReport, ProbeTxStamp};
use nflab_io::{PacketIo, TsSource, TxStampOptions};
use nflab_record::tx_stamps::TX_STAMPS_FILE;
use nflab_record::{
    flags, ClockInfo, RecordError, TxStampEntry, TxStampWriter, TxStampsMeta, TxSubstitution,
};

use crate::error::LabError;

/// Switch kernel TX timestamps on for every TX backend (hardware where the interface has
/// it) and print each distinct fallback notice once, as one line on stderr. Call it from a
/// thread in the backends' namespace, right after opening them.
pub fn enable(txs: &mut [Box<dyn PacketIo>]) -> Result<String, LabError> {
    let mut notices = BTreeSet::new();
    let mut source = String::new();
    for io in txs.iter_mut() {
        let st = io.enable_tx_timestamps(&TxStampOptions::default())?;
        source = st.source.as_str().to_string();
        if let Some(n) = st.notice {
            notices.insert(n);
        }
    }
    for n in notices {
        eprintln!("notice: {n}");
    }
    Ok(source)
}

/// The generator's sink for matched stamps: writes `tx_stamps.nfts` beside the records.
pub struct Sidecar {
    path: PathBuf,
    writer: Mutex<Option<TxStampWriter<BufWriter<File>>>>,
    error: Mutex<Option<RecordError>>,
}

impl Sidecar {
    /// Create `tx_stamps.nfts` in `dir`.
    pub fn create(dir: &Path, run_id: &str, source: &str) -> Result<Sidecar, LabError> {
        Sidecar::create_at(&dir.join(TX_STAMPS_FILE), run_id, source)
    }

    /// Create the TX stamps file at `path`.
    pub fn create_at(path: &Path, run_id: &str, source: &str) -> Result<Sidecar, LabError> {
        let meta = TxStampsMeta {
            run_id: run_id.to_string(),
            clock: ClockInfo {
                source: "CLOCK_REALTIME".into(),
                resolution_ns: nflab_io::clock::resolution_ns(libc::CLOCK_REALTIME),
            },
            tx_timestamp: source.to_string(),
            extra: Default::default(),
        };
        Ok(Sidecar {
            path: path.to_path_buf(),
            writer: Mutex::new(Some(TxStampWriter::create(path, &meta)?)),
            error: Mutex::new(None),
        })
    }

    /// Where the stamps go.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write one batch from a TX thread. A write error is kept for [`finish`](Self::finish)
    /// rather than stopping the generator mid-run.
    pub fn push(&self, batch: &[ProbeTxStamp]) {
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let Some(w) = w.as_mut() else {
            return;
        };
        for p in batch {
            let f = match p.source {
                TsSource::Hardware => flags::TX_TS_HARDWARE,
                TsSource::KernelSoftware => flags::TX_TS_KERNEL,
                _ => 0,
            };
            let e = TxStampEntry {
                seq: p.seq,
                flow: p.flow,
                app_tx_ns: p.app_tx_ns,
                kernel_tx_ns: p.kernel_tx_ns,
                flags: f,
            };
            if let Err(e) = w.push(&e) {
                self.error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(e);
                return;
            }
        }
    }

    /// Write the last block; the first write error of the run, if any.
    pub fn finish(&self) -> Result<(), LabError> {
        let w = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(e) = self.error.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(e.into());
        }
        if let Some(w) = w {
            w.finish()?;
        }
        Ok(())
    }
}

/// Put the kernel stamps of `stamps` into the records at `records`, record in `report`
/// the spread of kernel − application stamp over the stamped probes, and warn there when
/// the stamps file was cut off or a record's probe did not match its stamp. Returns the
/// rewritten records (each file is read once).
pub fn apply(
    records: &Path,
    stamps: &Path,
    report: &mut GenReport,
) -> Result<nflab_record::RecordFile, LabError> {
    let st = nflab_record::read_tx_stamps(stamps)?;
    let mut d: Vec<i64> = st
        .entries
        .iter()
        .filter(|e| e.kernel_tx_ns != 0 && e.flags & flags::TX_TS_KERNEL != 0)
        .map(|e| e.kernel_tx_ns as i64 - e.app_tx_ns as i64)
        .collect();
    if let Some(t) = report.tx_stamps.as_mut() {
        t.kernel_minus_app_ns = nflab_gen::txstamps::spread(&mut d);
    }
    drop(d);
    let (sub, file) = nflab_record::substitute_tx_from(records, st, stamps)?;
    report.warnings.extend(substitution_warnings(&sub));
    Ok(file)
}

/// What a user must know about a substitution: a cut-off stamps file, foreign probes.
fn substitution_warnings(sub: &TxSubstitution) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(nflab_record::TailState::Truncated { reason, .. }) = &sub.stamps_tail {
        out.push(format!(
            "{TX_STAMPS_FILE} is cut off ({reason}): the {} records left without a kernel stamp keep their application TX stamp",
            sub.application_fallbacks
        ));
    }
    if sub.app_mismatch > 0 {
        out.push(format!(
            "{} records carry an application TX stamp other than the one the generator sent for their (flow, seq): they keep it, and may not be this run's probes",
            sub.app_mismatch
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_substitution_says_nothing_and_a_cut_or_foreign_one_says_why() {
        let clean = TxSubstitution {
            stamps_tail: Some(nflab_record::TailState::Complete),
            ..TxSubstitution::default()
        };
        assert!(substitution_warnings(&clean).is_empty());
        let cut = TxSubstitution {
            application_fallbacks: 7,
            app_mismatch: 2,
            stamps_tail: Some(nflab_record::TailState::Truncated {
                discarded_bytes: 100,
                reason: "block 3 at byte 4096 is partial".into(),
            }),
            ..TxSubstitution::default()
        };
        let w = substitution_warnings(&cut);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("cut off (block 3 at byte 4096 is partial)")
                && w[0].contains("7 records"),
            "{w:?}"
        );
        assert!(w[1].starts_with("2 records"), "{w:?}");
    }
}
