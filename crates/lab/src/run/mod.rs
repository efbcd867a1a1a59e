//! Carrying out an experiment: one topology per run, generator and recorder
//! on their own pinned threads, records to disk, analysis, artifacts.
//!
//! Every run gets a fresh topology (the analogue of pos' reboot between
//! runs), and the topology is removed when the run ends in any way.

pub mod capture;
pub mod failure;
pub mod live;
pub mod loadgen;
pub mod monitor;
pub mod plan;
pub mod record_segments;
pub mod recorder;
pub mod stage_breakdown;
pub mod traffic;
pub mod txstamps;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use nflab_analyze::{AnalysisConfig, AnomalySpec, Summary};

use nflab_gen::GenReport;
use nflab_record::ClockInfo;
use serde::Serialize;

use crate::artifacts::files::{write_file, write_json};
use crate::error::LabError;
pub use crate::run::plan::{
    build_plan, default_probe_base, ipv6_twin, probe_base, stream_spec, PROBE_DST_PORT, PROBE_FLOW,
    PROBE_SRC_PORT,
};
pub use crate::run::traffic::{open_tx, probe_selfcheck, run_traffic, TrafficCpus, TrafficOutcome};
use crate::spec::RunPlan;
use crate::topo::Topology;

/// Everything one run produced.
#[derive(Debug, Serialize)]
pub struct RunOutcome {
    /// The analysis.
    pub summary: Summary,
    /// What the generator did.
    pub generator: GenReport,
    /// What the recorder saw.
    pub recorder: crate::run::recorder::RecorderReport,
}

/// One run: topology up, generator and recorder, analysis, topology down.
pub fn run_one(plan: &RunPlan, dir: &Path, stop: &Arc<AtomicBool>) -> Result<RunOutcome, LabError> {
    run_one_with(plan, dir, stop, &mut None)
}

/// A topology kept between runs (`topology.keep = true`), with what it was built for.
pub type KeptTopology = Option<(String, Topology)>;

/// One run, reusing `kept` when the spec says `topology.keep = true` and the
/// previous run needed the same topology; otherwise a fresh one (the
/// default: pos' reboot between runs).
pub fn run_one_with(
    plan: &RunPlan,
    dir: &Path,
    stop: &Arc<AtomicBool>,
    kept: &mut KeptTopology,
) -> Result<RunOutcome, LabError> {
    let spec = &plan.spec;
    let key = serde_json::json!([
        spec.topology.kind,
        spec.dut.kind,
        spec.hosts,
        crate::topo::veth_queues(spec)
    ])
    .to_string();
    let reuse = spec.topology.keep && kept.as_ref().is_some_and(|(k, _)| *k == key);
    if !reuse {
        // The old topology goes before the new one is built.
        *kept = None;
        *kept = Some((key, Topology::for_spec(spec)?));
    }
    let Some((_, topo)) = kept.as_ref() else {
        unreachable!("a topology was just stored")
    };
    write_json(&dir.join("topology.json"), &topo)?;
    // Interface knobs need the topology; they are undone before it goes.
    let mut iface_knobs = crate::knobs::iface::AppliedIfaceKnobs::apply(
        &spec.knobs.iface,
        &spec.knobs.required,
        &|role| match role {
            "lg" => Some(topo.lg_ns.clone()),
            "dut" => topo.dut_ns.clone(),
            _ => None,
        },
    )?;
    // nflab DuT: the data plane runs from here until the recorder is done.
    let nflab_dut = match spec.dut.kind {
        crate::spec::DutKind::Nflab => Some(crate::dut::nflab::start(topo, &spec.dut)?),
        _ => None,
    };
    // link DuT: both directions from here until the recorder is done.
    let link_dut = match spec.dut.kind {
        crate::spec::DutKind::Link => Some(crate::dut::link::start(topo, &spec.dut)?),
        _ => None,
    };
    // testpmd DuT: forwarding from here until the recorder is done.
    let testpmd_dut = match spec.dut.kind {
        crate::spec::DutKind::Testpmd => Some(crate::dut::testpmd::start(topo, &spec.dut)?),
        _ => None,
    };
    // ovs DuT: Open vSwitch from here until the recorder is done.
    let ovs_dut = match spec.dut.kind {
        crate::spec::DutKind::Ovs => Some(crate::dut::ovs::start(topo, &spec.dut)?),
        _ => None,
    };
    // udp-relay DuT and the eBPF monitor: from here until the recorder is done.
    let run_seed = spec.experiment.seed.wrapping_add(plan.index as u64);
    let relay_dut = match spec.dut.kind {
        crate::spec::DutKind::UdpRelay => {
            Some(crate::dut::relay::start(topo, &spec.dut, run_seed)?)
        }
        _ => None,
    };
    let monitor = spec
        .monitor
        .as_ref()
        .map(|m| crate::run::monitor::start(m, topo, spec.dut.kind, run_seed))
        .transpose()?;

    // NCSbench: plant and controller across the DuT while the probes run.
    let ncs = match &spec.app {
        Some(crate::spec::AppSection::Ncsbench(cfg)) => {
            let scenario = crate::app::ncs::scenario(spec, topo, cfg);
            write_json(&dir.join("ncs-scenario.json"), &scenario)?;
            Some(crate::app::ncs::start(topo, cfg)?)
        }
        _ => None,
    };
    // PRRT study: both ends across the DuT while the probes run.
    let prrt = match &spec.app {
        Some(crate::spec::AppSection::Prrt(cfg)) => Some(crate::app::prrt::start(topo, cfg, stop)?),
        _ => None,
    };

    let gen_plan = build_plan(&spec.traffic, spec.experiment.seed, &probe_base(topo))?;
    let records_path = dir.join("records.nfr");
    let clock = ClockInfo {
        source: "CLOCK_REALTIME".into(),
        resolution_ns: nflab_io::clock::resolution_ns(libc::CLOCK_REALTIME),
    };
    // The capture taps the recorder's interface from before the first probe.
    let capture = spec
        .capture
        .as_ref()
        .map(|c| crate::run::capture::start(c, topo, &dir.join("capture")))
        .transpose()?;
    // Live progress reads this run's interface counters while it sends.
    let live = crate::run::live::watch(
        topo,
        plan.index,
        gen_plan.streams[0].spec.mean_pps().unwrap_or(0.0),
    );
    let traffic = run_traffic(
        topo,
        &spec.traffic,
        &gen_plan,
        &format!("{:03}", plan.index),
        &records_path,
        TrafficCpus::from_spec(spec),
        stop,
    );
    drop(live);
    let capture = capture.map(crate::run::capture::RunningCapture::stop);
    let TrafficOutcome {
        generator: gen_report,
        recorder: rec_report,
    } = traffic?;
    let capture = capture.transpose()?;
    crate::run::monitor::stop_relay_and_monitor(relay_dut, monitor, dir)?;
    if let Some(d) = nflab_dut.map(crate::dut::nflab::NflabDut::stop) {
        write_json(&dir.join("dut.json"), &d)?;
        if let Some(e) = d.error {
            return Err(LabError::Other(e));
        }
    }
    // The benchmark's periods may outlast the probes: the DuT stays up for them.
    if let Some(run) = ncs {
        run.finish(
            dir,
            &format!("{:03} {}", plan.index, spec.dut.kind.as_str()),
        )?;
    }
    if let Some(run) = prrt {
        run.finish(dir)?;
    }
    if let Some(d) = link_dut.map(crate::dut::link::LinkDut::stop) {
        write_json(&dir.join("dut.json"), &d)?;
        if let Some(e) = d.error() {
            return Err(LabError::Other(e));
        }
    }
    if let Some((d, log)) = testpmd_dut.map(crate::dut::testpmd::TestpmdDut::stop) {
        write_file(&dir.join("testpmd.log"), log.as_bytes())?;
        write_json(&dir.join("dut.json"), &d)?;
        if let Some(e) = d.error {
            return Err(LabError::Other(e));
        }
    }
    if let Some(d) = ovs_dut.map(crate::dut::ovs::OvsDut::stop) {
        write_json(&dir.join("dut.json"), &d)?;
        if let Some(e) = d.error {
            return Err(LabError::Other(e));
        }
    }
    let interrupted = gen_report.interrupted;
    iface_knobs.revert();
    if !spec.knobs.iface.is_empty() {
        write_json(&dir.join("iface-knobs.json"), &iface_knobs.records())?;
    }
    if !spec.topology.keep {
        *kept = None;
    }

    let anomalies: Vec<AnomalySpec> = spec
        .analysis
        .anomalies
        .iter()
        .filter_map(|a| a.parse().ok())
        .collect();
    let acfg = AnalysisConfig {
        anomalies,
        offered_pps: gen_report.offered_pps,
        tx_pps: gen_report.tx_pps,
        clock,
    };
    crate::failpoint::hit("analysis");
    let (mut summary, _tail) = nflab_analyze::analyze_file(&records_path, &acfg)
        .map_err(|e| LabError::Other(e.to_string()))?;
    summary.interrupted = interrupted;
    if interrupted {
        summary
            .notes
            .push("the run was interrupted: statistics cover the packets sent until then".into());
    }
    // The generator's own warnings and its self-check (seed 000 §3.3) go next to the
    // figures they qualify.
    for w in gen_report
        .warnings
        .iter()
        .chain(gen_report.selfcheck.iter().flat_map(|c| c.warnings.iter()))
    {
        summary.notes.push(w.clone());
    }
    if rec_report.kernel_drops > 0 {
        summary.notes.push(format!(
            "the recorder's socket dropped {} frames: those count as lost",
            rec_report.kernel_drops
        ));
    }
    if let Some(c) = &capture {
        let dumped: Vec<String> = c
            .dumps
            .iter()
            .map(|d| format!("capture/{} ({} packets)", d.file, d.packets))
            .collect();
        if !dumped.is_empty() {
            summary.notes.push(format!(
                "the capture's triggers fired {} time(s); dumps: {}",
                c.fired_total,
                dumped.join(", ")
            ));
        }
        if c.kernel_drops > 0 || c.discarded > 0 {
            summary.notes.push(format!(
                "the capture lost {} frames in its kernel rings and discarded {} from its full ring: its dumps may miss packets the recorder has",
                c.kernel_drops, c.discarded
            ));
        }
    }
    write_json(&dir.join("summary.json"), &summary)?;
    write_json(&dir.join("gen.json"), &gen_report)?;
    write_json(&dir.join("recorder.json"), &rec_report)?;
    Ok(RunOutcome {
        summary,
        generator: gen_report,
        recorder: rec_report,
    })
}
