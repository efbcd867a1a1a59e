//! The measuring half of a run, the same for a local run and a remote LoadGen's
//! (`nflab remote loadgen`): the generator and the recorder on the topology's
//! LoadGen interfaces with live progress, then the analysis of the records with
//! the notes that qualify its figures.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use nflab_analyze::{AnalysisConfig, AnomalySpec, Summary};
use nflab_record::ClockInfo;

use crate::error::LabError;
use crate::run::traffic::{run_legs, Leg, Sending, TrafficCpus, TrafficOutcome};
use crate::spec::{Direction, Spec};
use crate::topo::Topology;

/// Send `sending` and record it into `records`, with live progress for run `index`.
pub fn send_and_record(
    spec: &Spec,
    topo: &Topology,
    sending: Sending<'_>,
    index: usize,
    records: &Path,
    stop: &AtomicBool,
) -> Result<TrafficOutcome, LabError> {
    let mut each = send_and_record_each_way(
        spec,
        topo,
        Ways {
            forward: Some(sending),
            reverse: None,
        },
        index,
        records,
        stop,
    )?;
    Ok(each.remove(0).outcome)
}

/// What a run sends each way (`traffic.direction`): the forward way from the
/// generator's port, the reverse way from the recorder's.
#[derive(Clone, Copy)]
pub struct Ways<'a> {
    /// From `gen_iface` to `rec_iface`.
    pub forward: Option<Sending<'a>>,
    /// From `rec_iface` to `gen_iface`.
    pub reverse: Option<Sending<'a>>,
}

/// One direction's traffic, with where its records are.
#[derive(Debug)]
pub struct DirectionOutcome {
    /// "forward" or "reverse".
    pub direction: Direction,
    /// Its records file.
    pub records: PathBuf,
    /// What its generator and recorder did.
    pub outcome: TrafficOutcome,
}

/// The records file of `direction` beside `records` (the run's first direction's):
/// with both ways, the reverse way's records are `records-reverse.nfr`.
pub fn records_of(records: &Path, direction: Direction, first: bool) -> PathBuf {
    if first {
        records.to_path_buf()
    } else {
        records.with_file_name(format!("records-{}.nfr", direction.as_str()))
    }
}

/// Send each of `ways` at once and record each into its own file (the first way's
/// into `records`), with live progress of the first for run `index`.
pub fn send_and_record_each_way(
    spec: &Spec,
    topo: &Topology,
    ways: Ways<'_>,
    index: usize,
    records: &Path,
    stop: &AtomicBool,
) -> Result<Vec<DirectionOutcome>, LabError> {
    let cpus = TrafficCpus::from_spec(spec);
    let both = ways.forward.is_some() && ways.reverse.is_some();
    let mut legs = Vec::new();
    let mut paths = Vec::new();
    for (direction, sending) in [
        (Direction::Forward, ways.forward),
        (Direction::Reverse, ways.reverse),
    ] {
        let Some(sending) = sending else { continue };
        paths.push((direction, records_of(records, direction, legs.is_empty())));
        let (tx_iface, rx_iface) = match direction {
            Direction::Reverse => (topo.rec_iface.as_str(), topo.gen_iface.as_str()),
            _ => (topo.gen_iface.as_str(), topo.rec_iface.as_str()),
        };
        legs.push((tx_iface, rx_iface, sending, direction));
    }
    let legs: Vec<Leg<'_>> = legs
        .iter()
        .zip(&paths)
        .map(
            |(&(tx_iface, rx_iface, sending, direction), (_, path))| Leg {
                tx_iface,
                rx_iface,
                sending,
                records: path,
                // Both ways at once: each port's generator shares a CPU with the other
                // port's recorder.
                cpus: if both && direction == Direction::Reverse {
                    TrafficCpus {
                        gen: cpus.rec,
                        rec: cpus.gen,
                    }
                } else {
                    cpus
                },
            },
        )
        .collect();
    let Some(first) = legs.first() else {
        return Err(LabError::Other("a run must send at least one way".into()));
    };
    // Live progress reads the first way's interface counters while it sends.
    let mean_pps = first.sending.plan.streams[0].spec.mean_pps().unwrap_or(0.0);
    let live = crate::run::live::watch(topo, (first.tx_iface, first.rx_iface), index, mean_pps);
    let outcomes = run_legs(topo, &spec.traffic, &legs, &format!("{index:03}"), stop);
    drop(live);
    Ok(outcomes?
        .into_iter()
        .zip(paths)
        .map(|(outcome, (direction, records))| DirectionOutcome {
            direction,
            records,
            outcome,
        })
        .collect())
}

/// Analyse the records at `records` of a run that sent and recorded `traffic`; the
/// summary carries the notes that qualify its figures (an interrupted run, the
/// generator's warnings and self-check, the recorder's drops).
pub fn analyse(spec: &Spec, records: &Path, traffic: &TrafficOutcome) -> Result<Summary, LabError> {
    let (generator, recorder) = (&traffic.generator, &traffic.recorder);
    let config = AnalysisConfig {
        anomalies: spec
            .analysis
            .anomalies
            .iter()
            .filter_map(|a| a.parse::<AnomalySpec>().ok())
            .collect(),
        offered_pps: generator.offered_pps,
        tx_pps: generator.tx_pps,
        clock: ClockInfo {
            source: "CLOCK_REALTIME".into(),
            resolution_ns: nflab_io::clock::resolution_ns(libc::CLOCK_REALTIME),
        },
    };
    crate::failpoint::hit("analysis");
    let (mut summary, _tail) = nflab_analyze::analyze_file(records, &config)
        .map_err(|e| LabError::Other(e.to_string()))?;
    summary.interrupted = generator.interrupted;
    if generator.interrupted {
        summary
            .notes
            .push("the run was interrupted: statistics cover the packets sent until then".into());
    }
    // The generator's own warnings and its self-check (seed 000 §3.3) go next to the
    // figures they qualify.
    for w in generator
        .warnings
        .iter()
        .chain(generator.selfcheck.iter().flat_map(|c| c.warnings.iter()))
    {
        summary.notes.push(w.clone());
    }
    if recorder.kernel_drops > 0 {
        summary.notes.push(format!(
            "the recorder's socket dropped {} frames: those count as lost",
            recorder.kernel_drops
        ));
    }
    Ok(summary)
}
