//! Simulated runs as `.nfr` record files, and replayed inter-arrival times
//! from record files.
use std::path::Path;

use nflab_record::{ClockInfo, FlowSent, Metadata, Record, RecordWriter, Trailer};

use super::{SimConfig, SimOutput};
use crate::ModelError;

/// Write the delivered packets of a simulation (run with `keep_packets`) as
/// a record file: `tx_ns` = arrival, `rx_ns` = departure + `wire_ns`, the
/// sent counts per flow in the trailer, so `nflab analyze` derives loss.
pub fn write_nfr(path: &Path, cfg: &SimConfig, out: &SimOutput) -> Result<(), ModelError> {
    if !cfg.keep_packets {
        return Err(ModelError::Input {
            name: "--out",
            reason: "the simulation did not keep its packets; run it with keep_packets".into(),
        });
    }
    let mut extra = serde_json::Map::new();
    extra.insert("simulated".into(), serde_json::Value::Bool(true));
    extra.insert(
        "sim_config".into(),
        serde_json::to_value(cfg).unwrap_or(serde_json::Value::Null),
    );
    let meta = Metadata {
        run_id: format!("sim-seed-{}", cfg.seed),
        clock: ClockInfo {
            source: "simulated".into(),
            resolution_ns: 1,
        },
        tx_timestamp: "simulated".into(),
        rx_timestamp: "simulated".into(),
        flows: (0..cfg.flows).collect(),
        offered: serde_json::to_value(&cfg.arrivals).unwrap_or(serde_json::Value::Null),
        extra,
    };
    let mut w = RecordWriter::create(path, &meta)?;
    for d in &out.delivered {
        w.push(&Record {
            seq: d.seq,
            flow: d.flow,
            tx_ns: d.tx_ns,
            rx_ns: d.rx_ns,
            wire_len: 64,
            flags: 0,
        })?;
    }
    w.finish(&Trailer {
        sent: (0..cfg.flows)
            .map(|f| FlowSent {
                flow: f,
                sent: out.sent_per_flow[f as usize],
                warmup: out.warmup_per_flow[f as usize],
            })
            .collect(),
        interrupted: false,
        extra: serde_json::Map::new(),
    })?;
    Ok(())
}

/// Inter-arrival times (ns) of the packets in a record file, from their
/// sorted transmit times. Only received packets are in a record file, so a
/// lossy run's gaps are those of the packets that arrived.
pub fn read_gaps_ns(path: &Path) -> Result<Vec<u64>, ModelError> {
    let file = nflab_record::read_all(path)?;
    let mut tx: Vec<u64> = file.records.iter().map(|r| r.tx_ns).collect();
    tx.sort_unstable();
    let gaps: Vec<u64> = tx.windows(2).map(|w| w[1] - w[0]).collect();
    if gaps.is_empty() {
        return Err(ModelError::Input {
            name: "record file",
            reason: format!(
                "{} holds {} packet(s); inter-arrival times need at least two",
                path.display(),
                tx.len()
            ),
        });
    }
    Ok(gaps)
}
