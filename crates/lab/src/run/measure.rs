//! The measuring half of a run, the same for a local run and a remote LoadGen's
//! (`nflab remote loadgen`): the generator and the recorder on the topology's
//! LoadGen interfaces with live progress, then the analysis of the records with
//! the notes that qualify its figures.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use nflab_analyze::{AnalysisConfig, AnomalySpec, Summary};
use nflab_record::ClockInfo;

use crate::error::LabError;
use crate::run::traffic::{run_traffic, Sending, TrafficCpus, TrafficOutcome};
use crate::spec::Spec;
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
    // Live progress reads this run's interface counters while it sends.
    let mean_pps = sending.plan.streams[0].spec.mean_pps().unwrap_or(0.0);
    let live = crate::run::live::watch(topo, index, mean_pps);
    let traffic = run_traffic(
        topo,
        &spec.traffic,
        sending,
        &format!("{index:03}"),
        records,
        TrafficCpus::from_spec(spec),
        stop,
    );
    drop(live);
    traffic
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
