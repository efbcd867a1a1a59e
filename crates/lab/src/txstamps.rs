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

/// Put the kernel stamps of `stamps` into the records at `records` and record in `report`
/// the spread of kernel − application stamp over the stamped probes.
pub fn apply(
    records: &Path,
    stamps: &Path,
    report: &mut GenReport,
) -> Result<TxSubstitution, LabError> {
    let sub = nflab_record::substitute_tx(records, stamps)?;
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
    Ok(sub)
}
