//! One run, top-down: its topology, the DuT, monitor, application and capture
//! around it, the traffic and its records, the analysis and the run's files —
//! and everything torn down, whatever ended the run.
//!
//! Every run gets a fresh topology (the analogue of pos' reboot between
//! runs), unless `topology.keep` keeps it while the DuT stays the same.

pub mod capture;
pub mod failure;
pub mod live;
pub mod loadgen;
pub mod measure;
pub mod monitor;
pub mod plan;
pub mod record_segments;
pub mod recorder;
pub mod stage_breakdown;
pub mod topology;
pub mod traffic;
pub mod txstamps;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use nflab_analyze::Summary;
use nflab_capture::CaptureReport;
use nflab_gen::GenReport;
use serde::Serialize;

use crate::artifacts::files::write_json;
use crate::error::LabError;
use crate::knobs::iface::AppliedIfaceKnobs;
pub use crate::run::plan::{
    build_plan, default_probe_base, ipv6_twin, probe_base, reverse_probe_base, stream_spec,
    PROBE_DST_PORT, PROBE_FLOW, PROBE_SRC_PORT,
};
pub use crate::run::traffic::{
    open_tx, probe_selfcheck, run_traffic, Sending, TrafficCpus, TrafficOutcome,
};
use crate::spec::{Direction, RunPlan, Spec};
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
pub type KeptTopology = Option<Kept>;

/// What `topology.keep = true` keeps from one run to the next: the topology and, for
/// a DuT that lives as long as its topology (an external box's hooks run once per
/// study then), the running DuT. Fields drop in order: the DuT before its topology.
pub struct Kept {
    /// The DuT kept running, with the run that started it.
    dut: Option<(Box<dyn crate::dut::RunningDut>, usize)>,
    /// What the topology was built for.
    key: String,
    /// The topology.
    topo: Topology,
}

/// The running DuT of one run: its own, or the one `topology.keep` keeps.
enum DutOfRun<'k> {
    Own(Box<dyn crate::dut::RunningDut>),
    Kept(&'k mut dyn crate::dut::RunningDut, usize),
}

impl DutOfRun<'_> {
    fn get(&mut self) -> &mut dyn crate::dut::RunningDut {
        match self {
            DutOfRun::Own(d) => d.as_mut(),
            DutOfRun::Kept(d, _) => &mut **d,
        }
    }

    /// Stop the run's own DuT; a kept one keeps running and notes this run.
    fn stop(self, dir: &Path) -> Result<crate::dut::Stopped, LabError> {
        match self {
            DutOfRun::Own(d) => d.stop(dir),
            DutOfRun::Kept(d, started_in) => d.note_kept_run(dir, started_in),
        }
    }
}

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
    let Kept {
        dut: kept_dut,
        topo,
        ..
    } = topology_of(spec, kept)?;
    let topo = &*topo;
    write_json(&dir.join("topology.json"), topo)?;
    let mut iface_knobs = apply_iface_knobs(spec, topo)?;
    let seed = spec.experiment.seed.wrapping_add(plan.index as u64);
    let mut dut = start_dut(plan, topo, seed, dir, kept_dut)?;
    let monitor = spec.monitor.as_ref();
    let monitor = monitor
        .map(|m| monitor::start(m, topo, spec.dut.kind, seed))
        .transpose()?;
    let app = crate::app::start(spec, topo, dir, stop)?;

    let probe = dut.get().probe(probe_base(topo));
    let gen_plan = build_plan(&spec.traffic, spec.experiment.seed, &probe)?;
    let reverse = match spec.traffic.direction.has_reverse() {
        true => Some(reverse_sending(spec, topo, dut.get())?),
        false => None,
    };
    let records = dir.join("records.nfr");
    // The capture taps the recorder's interface from before the first probe.
    let capture = spec.capture.as_ref();
    let capture = capture
        .map(|c| capture::start(c, topo, &dir.join("capture")))
        .transpose()?;
    let ways = measure::Ways {
        forward: (spec.traffic.direction != Direction::Reverse).then_some(Sending {
            plan: &gen_plan,
            probe: &probe,
        }),
        reverse: reverse
            .as_ref()
            .map(|(probe, plan)| Sending { plan, probe }),
    };
    let traffic = measure::send_and_record_each_way(spec, topo, ways, plan.index, &records, stop);
    let capture = capture.map(capture::RunningCapture::stop);
    let traffic = traffic?;
    let capture = capture.transpose()?;

    let monitor = monitor.map(monitor::RunningMonitor::stop);
    // The application's periods may outlast the probes: the DuT stays up for them.
    if let Some(app) = app {
        app.finish(
            dir,
            &format!("{:03} {}", plan.index, spec.dut.kind.as_str()),
        )?;
    }
    let stopped = dut.stop(dir)?;
    if let Some(m) = monitor {
        monitor::finish(m, dir, stopped.truth.as_deref())?;
    }
    iface_knobs.revert();
    if !spec.knobs.iface.is_empty() {
        write_json(&dir.join("iface-knobs.json"), &iface_knobs.records())?;
    }
    if !spec.topology.keep {
        *kept = None;
    }

    let (mut summary, generator, recorder) = analyse_each_way(spec, dir, traffic)?;
    if let Some(c) = &capture {
        note_capture(&mut summary, c);
    }
    write_json(&dir.join("summary.json"), &summary)?;
    Ok(RunOutcome {
        summary,
        generator,
        recorder,
    })
}

/// The reverse way's probes and plan: from the recorder's port, addressed as the DuT
/// says, with flow ids of their own.
fn reverse_sending(
    spec: &Spec,
    topo: &Topology,
    dut: &mut dyn crate::dut::RunningDut,
) -> Result<(nflab_wire::ProbeSpec, nflab_gen::GenPlan), LabError> {
    let Some(base) = reverse_probe_base(topo) else {
        return Err(LabError::Unsupported(format!(
            "traffic.direction = \"{}\": the {} DuT has no reverse path",
            spec.traffic.direction.as_str(),
            topo.dut.as_str()
        )));
    };
    let probe = dut.reverse_probe(base)?;
    let plan = plan::build_plan_from(
        &spec.traffic,
        spec.experiment.seed ^ plan::REVERSE_SEED,
        &probe,
        plan::REVERSE_PROBE_FLOW,
    )?;
    Ok((probe, plan))
}

/// Analyse each way's records and write its `gen.json` and `recorder.json` (the
/// second way's as `gen-reverse.json` and `recorder-reverse.json`): the run's summary
/// is the first way's, with every way's under `directions` when the run does not
/// send forward only.
fn analyse_each_way(
    spec: &Spec,
    dir: &Path,
    traffic: Vec<measure::DirectionOutcome>,
) -> Result<(Summary, GenReport, crate::run::recorder::RecorderReport), LabError> {
    let mut first = None;
    let mut directions = std::collections::BTreeMap::new();
    for (k, way) in traffic.into_iter().enumerate() {
        let summary = measure::analyse(spec, &way.records, &way.outcome)?;
        let suffix = if k == 0 {
            String::new()
        } else {
            format!("-{}", way.direction.as_str())
        };
        write_json(
            &dir.join(format!("gen{suffix}.json")),
            &way.outcome.generator,
        )?;
        write_json(
            &dir.join(format!("recorder{suffix}.json")),
            &way.outcome.recorder,
        )?;
        if spec.traffic.direction != Direction::Forward {
            directions.insert(way.direction.as_str().to_string(), summary.clone());
        }
        if k == 0 {
            first = Some((summary, way.outcome.generator, way.outcome.recorder));
        }
    }
    let Some((mut summary, generator, recorder)) = first else {
        return Err(LabError::Other("the run sent no way".into()));
    };
    summary.directions = directions;
    Ok((summary, generator, recorder))
}

/// The run's DuT: the one kept with the topology when the driver keeps its DuT with a
/// kept topology (started by an earlier run, or now and kept), else its own.
fn start_dut<'k>(
    plan: &RunPlan,
    topo: &Topology,
    seed: u64,
    dir: &Path,
    kept: &'k mut Option<(Box<dyn crate::dut::RunningDut>, usize)>,
) -> Result<DutOfRun<'k>, LabError> {
    let spec = &plan.spec;
    let driver = crate::dut::driver(spec.dut.kind);
    let start = || match spec.traffic.direction.has_reverse() {
        true => driver.start_both_ways(topo, &spec.dut, seed, dir),
        false => driver.start(topo, &spec.dut, seed, dir),
    };
    if !(spec.topology.keep && driver.lives_with_kept_topology()) {
        return Ok(DutOfRun::Own(start()?));
    }
    if kept.is_none() {
        *kept = Some((start()?, plan.index));
    }
    let Some((dut, started_in)) = kept.as_mut() else {
        unreachable!("a DuT was just kept")
    };
    Ok(DutOfRun::Kept(dut.as_mut(), *started_in))
}

/// The run's topology: `kept` when `topology.keep` holds one built for the same
/// topology and DuT, else a fresh one (the old one goes before the new is built).
fn topology_of<'k>(spec: &Spec, kept: &'k mut KeptTopology) -> Result<&'k mut Kept, LabError> {
    let dut = crate::dut::driver(spec.dut.kind);
    let key = serde_json::json!([
        spec.topology.kind,
        spec.dut.kind,
        spec.hosts,
        topology::veth_queues(spec),
        dut.foreign_namespace(&spec.dut),
        dut.port_names(&spec.dut)
    ])
    .to_string();
    let reuse = spec.topology.keep && kept.as_ref().is_some_and(|k| k.key == key);
    if !reuse {
        *kept = None;
        *kept = Some(Kept {
            dut: None,
            key,
            topo: topology::for_spec(spec)?,
        });
    }
    let Some(k) = kept.as_mut() else {
        unreachable!("a topology was just stored")
    };
    Ok(k)
}

/// Interface knobs need the topology; they are undone before it goes.
fn apply_iface_knobs(spec: &Spec, topo: &Topology) -> Result<AppliedIfaceKnobs, LabError> {
    AppliedIfaceKnobs::apply(
        &spec.knobs.iface,
        &spec.knobs.required,
        &|role| match role {
            "lg" => Some(topo.lg_ns.clone()),
            "dut" => topo.dut_ns.clone(),
            _ => None,
        },
    )
}

/// What the capture's triggers dumped, and what it lost, beside the figures.
fn note_capture(summary: &mut Summary, c: &CaptureReport) {
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
