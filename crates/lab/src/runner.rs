//! Carrying out an experiment: one topology per run, generator and recorder
//! on their own pinned threads, records to disk, analysis, artifacts.
//!
//! Every run gets a fresh topology (the analogue of pos' reboot between
//! runs), and the topology is removed when the run ends in any way.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nflab_analyze::{AnalysisConfig, AnomalySpec, Summary};
use std::net::IpAddr;

use nflab_gen::{
    Accounting, FlowVary, GenPlan, GenReport, Pattern as GenPattern, Rate as GenRate, Role,
    SelfCheck, Sizes, StreamPlan, StreamSpec,
};
use nflab_io::{AfPacket, AfPacketConfig, PacketIo};
use nflab_record::{ClockInfo, FlowSent, Metadata, Record, RecordWriter, Trailer};
use nflab_wire::{ProbeSpec, ProbeTemplate};
use serde::Serialize;

use crate::cpu::pin_thread;
use crate::error::LabError;
use crate::recorder::{recorder_ring, BACKGROUND_FLOW_BASE, BACKGROUND_FLOW_SPAN, READY_FLOW};
use crate::results::{write_file, write_json};
use crate::spec::{
    Backend, Pattern as SpecPattern, Rate as SpecRate, RateAccounting, RunPlan, StreamKeys,
    TrafficSection,
};
use crate::topology::{Topology, LG0_IP, LG0_MAC, LG1_IP};

/// UDP ports of the probe stream.
pub const PROBE_SRC_PORT: u16 = 49_152;
/// Destination port: discard (RFC 863), so a stray probe is harmless.
pub const PROBE_DST_PORT: u16 = 9;
/// Flow id of the probe stream.
pub const PROBE_FLOW: u16 = 0;
/// How often the recorder hands a block to the OS.
const FLUSH_EVERY_NS: u64 = 100_000_000;

/// Everything one run produced.
#[derive(Debug, Serialize)]
pub struct RunOutcome {
    /// The analysis.
    pub summary: Summary,
    /// What the generator did.
    pub generator: GenReport,
    /// What the recorder saw.
    pub recorder: crate::recorder::RecorderReport,
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
        crate::topology::veth_queues(spec)
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
    let mut iface_knobs = crate::iface_knobs::AppliedIfaceKnobs::apply(
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
        crate::spec::DutKind::Nflab => Some(crate::dut_nflab::start(topo, &spec.dut)?),
        _ => None,
    };
    // link DuT: both directions from here until the recorder is done.
    let link_dut = match spec.dut.kind {
        crate::spec::DutKind::Link => Some(crate::dut_link::start(topo, &spec.dut)?),
        _ => None,
    };
    // testpmd DuT: forwarding from here until the recorder is done.
    let testpmd_dut = match spec.dut.kind {
        crate::spec::DutKind::Testpmd => Some(crate::dut_testpmd::start(topo, &spec.dut)?),
        _ => None,
    };
    // udp-relay DuT and the eBPF monitor: from here until the recorder is done.
    let run_seed = spec.experiment.seed.wrapping_add(plan.index as u64);
    let relay_dut = match spec.dut.kind {
        crate::spec::DutKind::UdpRelay => Some(crate::dut_relay::start(topo, &spec.dut, run_seed)?),
        _ => None,
    };
    let monitor = spec
        .monitor
        .as_ref()
        .map(|m| crate::monitor_run::start(m, topo, spec.dut.kind, run_seed))
        .transpose()?;

    // NCSbench: plant and controller across the DuT while the probes run.
    let ncs = match &spec.app {
        Some(crate::spec::AppSection::Ncsbench(cfg)) => {
            let scenario = crate::app_ncs::scenario(spec, topo, cfg);
            write_json(&dir.join("ncs-scenario.json"), &scenario)?;
            Some(crate::app_ncs::start(topo, cfg)?)
        }
        None => None,
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
        .map(|c| crate::capture_run::start(c, topo, &dir.join("capture")))
        .transpose()?;
    let traffic = run_traffic(
        topo,
        &spec.traffic,
        &gen_plan,
        &format!("{:03}", plan.index),
        &records_path,
        TrafficCpus::from_spec(spec),
        stop,
    );
    let capture = capture.map(crate::capture_run::RunningCapture::stop);
    let TrafficOutcome {
        generator: gen_report,
        recorder: rec_report,
    } = traffic?;
    let capture = capture.transpose()?;
    crate::monitor_run::stop_relay_and_monitor(relay_dut, monitor, dir)?;
    if let Some(d) = nflab_dut.map(crate::dut_nflab::NflabDut::stop) {
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
    if let Some(d) = link_dut.map(crate::dut_link::LinkDut::stop) {
        write_json(&dir.join("dut.json"), &d)?;
        if let Some(e) = d.error() {
            return Err(LabError::Other(e));
        }
    }
    if let Some((d, log)) = testpmd_dut.map(crate::dut_testpmd::TestpmdDut::stop) {
        write_file(&dir.join("testpmd.log"), log.as_bytes())?;
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

// ---------------------------------------------------------------------------
// Traffic: from the spec's [traffic] to a generator plan, and one generator +
// recorder pass over a topology.
// ---------------------------------------------------------------------------

/// The self-check compares at most this many probe packets with the schedule
/// (8 bytes of schedule each).
pub const SELFCHECK_MAX_PACKETS: usize = 20_000_000;

/// The probe frame's fixed fields in the built-in topology (flow, size, DSCP and VLAN
/// are set per stream).
pub fn probe_base(topo: &Topology) -> ProbeSpec {
    ProbeSpec {
        dst_mac: topo.probe_dst_mac(),
        ..default_probe_base()
    }
}

/// [`probe_base`] without a topology (destination MAC of the loopback cable).
pub fn default_probe_base() -> ProbeSpec {
    ProbeSpec {
        src_mac: LG0_MAC,
        dst_mac: crate::topology::LG1_MAC,
        vlan: None,
        src_ip: LG0_IP.into(),
        dst_ip: LG1_IP.into(),
        src_port: PROBE_SRC_PORT,
        dst_port: PROBE_DST_PORT,
        dscp: 0,
        ttl: 64,
        flow: PROBE_FLOW,
        frame_bytes: 64,
        mtu: 1500,
    }
}

/// The IPv6 twin of a benchmarking IPv4 address: `2001:2::` + its 32 bits (RFC 5180).
pub fn ipv6_twin(v4: std::net::Ipv4Addr) -> std::net::Ipv6Addr {
    let o = v4.octets();
    std::net::Ipv6Addr::new(
        0x2001,
        2,
        0,
        0,
        0,
        0,
        u16::from_be_bytes([o[0], o[1]]),
        u16::from_be_bytes([o[2], o[3]]),
    )
}

fn traffic_err(message: String) -> LabError {
    LabError::Spec {
        file: "spec".into(),
        message,
    }
}

/// One stream of the spec as the generator's [`StreamSpec`] and flow variation.
/// `what` names the table in messages ("traffic", "traffic.background[0]").
#[allow(clippy::too_many_arguments)]
pub fn stream_spec(
    what: &str,
    pattern: SpecPattern,
    rate: SpecRate,
    rate_bps: Option<f64>,
    accounting: RateAccounting,
    frame_bytes: u64,
    k: &StreamKeys,
    seed: u64,
) -> Result<(StreamSpec, FlowVary), LabError> {
    let rate = match rate_bps {
        Some(b) if b.is_finite() && b > 0.0 => GenRate::Bps {
            bps: b,
            accounting: match accounting {
                RateAccounting::L1 => Accounting::L1,
                RateAccounting::L2 => Accounting::L2,
            },
        },
        Some(b) => {
            return Err(traffic_err(format!(
                "{what}.rate_bps = {b} is not valid: use a positive number of bits per second"
            )))
        }
        None => match rate {
            SpecRate::Pps(p) => GenRate::Pps(p),
            SpecRate::Max => GenRate::Max,
        },
    };
    let ms = |key: &str, v: f64, zero_ok: bool| -> Result<u64, LabError> {
        if v.is_finite() && (v > 0.0 || (zero_ok && v == 0.0)) && v <= 3.6e6 {
            Ok((v * 1e6).round() as u64)
        } else {
            Err(traffic_err(format!(
                "{what}.{key} = {v} is not valid: use a number of milliseconds {} and at most 3600000",
                if zero_ok { "of 0 or more" } else { "above 0" }
            )))
        }
    };
    let pattern = match pattern {
        SpecPattern::Cbr => GenPattern::Cbr,
        SpecPattern::Poisson => GenPattern::Poisson,
        SpecPattern::Burst => GenPattern::Burst { size: k.burst },
        SpecPattern::Onoff => GenPattern::OnOff {
            on_ns: ms("on_ms", k.on_ms, false)?,
            off_ns: ms("off_ms", k.off_ms, true)?,
        },
        SpecPattern::Periodic => GenPattern::Periodic {
            frequency_hz: k.frequency_hz.ok_or_else(|| {
                traffic_err(format!(
                    "{what}: pattern \"periodic\" needs frequency_hz, e.g. frequency_hz = 1000"
                ))
            })?,
            per_cycle: k.per_cycle,
        },
        SpecPattern::Replay => {
            let path = k.trace.as_deref().ok_or_else(|| {
                traffic_err(format!(
                    "{what}: pattern \"replay\" needs trace = \"FILE.pcap\""
                ))
            })?;
            let trace = nflab_gen::trace::load(Path::new(path))
                .map_err(|e| traffic_err(format!("{what}.trace: {e}")))?;
            GenPattern::Replay {
                trace: Arc::new(trace),
                speed: k.speed,
            }
        }
    };
    let given = [
        k.size_mix.is_some(),
        k.size_sweep.is_some(),
        k.sizes.is_some(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    if given > 1 {
        return Err(traffic_err(format!(
            "{what}: give only one of sizes, size_mix and size_sweep"
        )));
    }
    let sizes = if let Some(m) = &k.size_mix {
        match m.as_str() {
            "imix" => Sizes::imix(),
            other => {
                return Err(traffic_err(format!(
                    "{what}.size_mix = \"{other}\" is not known: use \"imix\" (64/594/1518 B, 7:4:1) or sizes with size_weights"
                )))
            }
        }
    } else if let Some([from, to, step]) = k.size_sweep {
        Sizes::sweep(from, to, step).map_err(|e| traffic_err(format!("{what}.{e}")))?
    } else if let Some(v) = &k.sizes {
        match &k.size_weights {
            Some(w) if w.len() != v.len() => {
                return Err(traffic_err(format!(
                    "{what}.size_weights has {} entries for {} sizes: give one weight per size",
                    w.len(),
                    v.len()
                )))
            }
            Some(w) => Sizes::Weighted(v.iter().copied().zip(w.iter().copied()).collect()),
            None => Sizes::Cycle(v.clone()),
        }
    } else {
        if k.size_weights.is_some() {
            return Err(traffic_err(format!(
                "{what}.size_weights needs sizes = [...] to weigh"
            )));
        }
        Sizes::Fixed(frame_bytes)
    };
    let mut vary = FlowVary::default();
    for v in &k.vary {
        match v.as_str() {
            "src_ip" => vary.src_ip = true,
            "dst_ip" => vary.dst_ip = true,
            "src_port" => vary.src_port = true,
            "dst_port" => vary.dst_port = true,
            other => {
                return Err(traffic_err(format!(
                "{what}.vary: \"{other}\" is not a field: use src_ip, dst_ip, src_port or dst_port"
            )))
            }
        }
    }
    let spec = StreamSpec {
        pattern,
        rate,
        sizes,
        flows: k.flows,
        seed,
    };
    spec.check()
        .map_err(|e| traffic_err(format!("{what}: {e}")))?;
    Ok((spec, vary))
}

/// The generator plan of a `[traffic]` section: the probe stream (flows from
/// [`PROBE_FLOW`]) and each background stream (flows from [`BACKGROUND_FLOW_BASE`]).
pub fn build_plan(t: &TrafficSection, seed: u64, base: &ProbeSpec) -> Result<GenPlan, LabError> {
    if t.ip_version != 4 && t.ip_version != 6 {
        return Err(traffic_err(format!(
            "traffic.ip_version = {} is not valid: use 4 or 6",
            t.ip_version
        )));
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if t.tx_threads == 0 || t.tx_threads > cpus.max(64) {
        return Err(traffic_err(format!(
            "traffic.tx_threads = {} is not valid: use 1 to {}",
            t.tx_threads,
            cpus.max(64)
        )));
    }
    if !(1..=1024).contains(&t.batch) {
        return Err(traffic_err(format!(
            "traffic.batch = {} is not valid: use 1 to 1024",
            t.batch
        )));
    }
    let mut base = *base;
    if t.ip_version == 6 {
        if let (IpAddr::V4(s), IpAddr::V4(d)) = (base.src_ip, base.dst_ip) {
            base.src_ip = ipv6_twin(s).into();
            base.dst_ip = ipv6_twin(d).into();
        }
    }
    let stream_base = |k: &StreamKeys| ProbeSpec {
        dscp: k.dscp,
        vlan: t.vlan.map(|vid| nflab_wire::VlanTag { vid, pcp: k.pcp }),
        ..base
    };
    let mut streams = Vec::new();
    let k = t.keys();
    let (spec, vary) = stream_spec(
        "traffic",
        t.pattern,
        t.rate_pps,
        t.rate_bps,
        t.rate_accounting,
        t.frame_bytes,
        &k,
        seed,
    )?;
    if k.flows as u64 > BACKGROUND_FLOW_BASE as u64 {
        return Err(traffic_err(format!(
            "traffic.flows = {} is too many: the probe stream has at most {BACKGROUND_FLOW_BASE} flows",
            k.flows
        )));
    }
    streams.push(
        StreamPlan::new(spec, Role::Probe, PROBE_FLOW, &stream_base(&k), vary)
            .map_err(|e| traffic_err(format!("traffic: {}", strip_gen(&e))))?,
    );
    for (i, b) in t.background.iter().enumerate() {
        let what = format!("traffic.background[{i}]");
        let k = b.keys();
        let (spec, vary) = stream_spec(
            &what,
            b.pattern,
            b.rate_pps,
            b.rate_bps,
            b.rate_accounting,
            b.frame_bytes,
            &k,
            seed.wrapping_add(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i as u64 + 1)),
        )?;
        let flow_base = (i as u64 * BACKGROUND_FLOW_SPAN as u64 + BACKGROUND_FLOW_BASE as u64)
            .try_into()
            .ok()
            .filter(|f: &u16| *f < u16::MAX - BACKGROUND_FLOW_SPAN)
            .ok_or_else(|| {
                traffic_err("traffic.background: at most 15 background streams".into())
            })?;
        if k.flows > BACKGROUND_FLOW_SPAN as u32 {
            return Err(traffic_err(format!(
                "{what}.flows = {} is too many: a background stream has at most {BACKGROUND_FLOW_SPAN} flows",
                k.flows
            )));
        }
        streams.push(
            StreamPlan::new(spec, Role::Background, flow_base, &stream_base(&k), vary)
                .map_err(|e| traffic_err(format!("{what}: {}", strip_gen(&e))))?,
        );
    }
    Ok(GenPlan {
        streams,
        warmup_ns: (t.warmup_s * 1e9) as u64,
        duration_ns: Some((t.duration_s * 1e9) as u64),
        count: None,
        batch: t.batch,
        tx_timestamp: match t.tx_timestamp {
            crate::spec::TxTimestampMode::App => nflab_gen::TxTimestamp::App,
            crate::spec::TxTimestampMode::Kernel => nflab_gen::TxTimestamp::Kernel,
        },
    })
}

fn strip_gen(e: &nflab_gen::GenError) -> String {
    let s = e.to_string();
    s.strip_prefix("generator: ").unwrap_or(&s).to_string()
}

/// CPUs of the generator's TX threads and of the recorder.
#[derive(Debug, Clone, Copy)]
pub struct TrafficCpus {
    /// First TX thread's CPU; thread k runs on (gen + k) mod CPUs.
    pub gen: usize,
    /// The recorder's CPU.
    pub rec: usize,
}

impl TrafficCpus {
    /// From `[topology]`: generator on CPU 0, recorder on the last CPU by default.
    pub fn from_spec(spec: &crate::spec::Spec) -> TrafficCpus {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        TrafficCpus {
            gen: spec.topology.gen_cpu.unwrap_or(0),
            rec: spec.topology.rec_cpu.unwrap_or(cpus - 1),
        }
    }
}

/// What one generator + recorder pass produced.
#[derive(Debug)]
pub struct TrafficOutcome {
    /// The generator's report, with the self-check.
    pub generator: GenReport,
    /// The recorder's report.
    pub recorder: crate::recorder::RecorderReport,
}

/// Open `n` TX backends on `iface` (in the current namespace). AF_XDP falls back to
/// AF_PACKET with a one-line notice on stderr when this host cannot do it.
pub fn open_tx(
    backend: Backend,
    iface: &str,
    n: usize,
) -> Result<Vec<Box<dyn PacketIo>>, LabError> {
    let af_packet = || -> Result<Box<dyn PacketIo>, LabError> {
        Ok(Box::new(AfPacket::open(
            iface,
            &AfPacketConfig {
                rx: false,
                tx: true,
                ..AfPacketConfig::default()
            },
        )?))
    };
    let mut v: Vec<Box<dyn PacketIo>> = Vec::with_capacity(n);
    match backend {
        Backend::AfXdp => {
            for q in 0..n {
                match nflab_io::AfXdp::open(
                    iface,
                    &nflab_io::AfXdpConfig {
                        queue: q as u32,
                        rx: false,
                        ..nflab_io::AfXdpConfig::default()
                    },
                ) {
                    Ok(x) => v.push(Box::new(x)),
                    // A wrong name or missing privilege is the user's to fix, not a
                    // reason to send through another backend.
                    Err(
                        e @ (nflab_io::IoError::NoSuchInterface { .. }
                        | nflab_io::IoError::NeedCapNetRaw { .. }
                        | nflab_io::IoError::NeedCapBpf { .. }),
                    ) => return Err(e.into()),
                    Err(e) => {
                        eprintln!("notice: AF_XDP is not available on {iface} ({e}); using AF_PACKET");
                        v.clear();
                        for _ in 0..n {
                            v.push(af_packet()?);
                        }
                        break;
                    }
                }
            }
        }
        // Live frames are sent by `nflab_gen::live`; the socket here only
        // carries the readiness probes.
        Backend::AfPacket | Backend::XdpLive => {
            for _ in 0..n {
                v.push(af_packet()?);
            }
        }
        Backend::Udp => {
            return Err(LabError::Unsupported(
                "traffic.backend = \"udp\" is not available in `nflab run` yet; valid now: af_packet, af_xdp".into(),
            ))
        }
    }
    Ok(v)
}

/// The self-check of the probe stream (`plan.streams[0]`) from its records.
pub fn probe_selfcheck<'a>(
    plan: &GenPlan,
    records: impl Iterator<Item = &'a Record>,
    measured_on: &str,
) -> SelfCheck {
    let s = &plan.streams[0];
    let flows = s.spec.flows as u64;
    let sched = plan.schedule_of(0, SELFCHECK_MAX_PACKETS);
    // Deadlines never decrease, so the warm-up is a prefix.
    let warm = sched.partition_point(|&t| t < plan.warmup_ns) as u64;
    let base = s.flow_base;
    let rx: Vec<(u64, u64)> = records
        .filter(|r| r.flow >= base && ((r.flow - base) as u64) < flows)
        .map(|r| (r.seq * flows + (r.flow - base) as u64, r.rx_ns))
        .filter(|(n, _)| *n >= warm)
        .collect();
    nflab_gen::selfcheck::check(&rx, &sched, measured_on)
}

/// Send `plan` from the topology's generator interface and record its probe stream
/// on the recorder interface into `records_path`; the report carries the self-check.
pub fn run_traffic(
    topo: &Topology,
    traffic: &TrafficSection,
    plan: &GenPlan,
    run_id: &str,
    records_path: &Path,
    cpus: TrafficCpus,
    stop: &AtomicBool,
) -> Result<TrafficOutcome, LabError> {
    let kernel_tx = plan.tx_timestamp == nflab_gen::TxTimestamp::Kernel;
    let live = traffic.backend == Backend::XdpLive;
    if live {
        if traffic.tx_threads != 1 {
            return Err(LabError::Unsupported(
                "traffic.backend = \"xdp_live\" sends from one thread: set tx_threads = 1".into(),
            ));
        }
        if let Some(why) = nflab_gen::live::unsupported(plan) {
            return Err(LabError::Unsupported(why));
        }
    }
    // Sockets belong to the namespace they are created in.
    let (mut txs, mut rx, tx_source) = {
        let _in_lg = topo.enter_lg()?;
        // With kernel TX stamps, hardware stamps are asked for on both ends too.
        let rx = AfPacket::open(
            &topo.rec_iface,
            &AfPacketConfig {
                hardware_timestamps: kernel_tx,
                ..recorder_ring()
            },
        )?;
        if let Some(n) = rx.hardware().and_then(|h| h.notice.as_deref()) {
            eprintln!("notice: {n}");
        }
        let mut txs = open_tx(traffic.backend, &topo.gen_iface, traffic.tx_threads)?;
        let tx_source = if kernel_tx {
            Some(crate::txstamps::enable(&mut txs)?)
        } else {
            None
        };
        (txs, rx, tx_source)
    };
    let rx_timestamp = if rx.hardware().is_some_and(|h| h.rx) {
        "hardware"
    } else {
        "kernel-software"
    };
    if live {
        topo.accept_xdp_frames_at_gen_peer()?;
    }
    wait_until_forwarding(txs[0].as_mut(), &mut rx, topo, stop)?;

    let clock = ClockInfo {
        source: "CLOCK_REALTIME".into(),
        resolution_ns: nflab_io::clock::resolution_ns(libc::CLOCK_REALTIME),
    };
    let probe_flows: Vec<u16> = plan.streams[0].flow_ids().collect();
    let streams: Vec<serde_json::Value> = plan
        .streams
        .iter()
        .map(|s| {
            serde_json::json!({
                "role": if s.role == Role::Probe { "probe" } else { "background" },
                "pattern": s.spec.pattern.name(),
                "offered_pps": s.spec.mean_pps(),
                "mean_frame_bytes": s.spec.mean_frame_bytes(),
                "flows": s.spec.flows,
                "flow_base": s.flow_base,
                "spec": &s.spec,
            })
        })
        .collect();
    let meta = Metadata {
        run_id: run_id.to_string(),
        clock,
        tx_timestamp: if live { "kernel-xdp" } else { "application" }.into(),
        rx_timestamp: rx_timestamp.into(),
        flows: probe_flows.clone(),
        offered: serde_json::json!({
            "pattern": traffic.pattern.as_str(),
            "rate_pps": plan.streams[0].spec.mean_pps(),
            "frame_bytes": traffic.frame_bytes,
            "duration_s": traffic.duration_s,
            "warmup_s": traffic.warmup_s,
            "backend": if live { "xdp_live" } else { txs[0].name() },
            "tx_threads": txs.len(),
            "streams": streams,
        }),
        extra: Default::default(),
    };
    let mut writer = RecordWriter::create(records_path, &meta)?;
    let sidecar = match &tx_source {
        Some(src) => Some(crate::txstamps::Sidecar::create_at(
            &records_path.with_file_name(nflab_record::tx_stamps::TX_STAMPS_FILE),
            run_id,
            src,
        )?),
        None => None,
    };
    let push = |b: &[nflab_gen::ProbeTxStamp]| {
        if let Some(sc) = &sidecar {
            sc.push(b);
        }
    };
    let sink: Option<nflab_gen::StampSink<'_>> = sidecar.as_ref().map(|_| &push as _);
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rec_stop = AtomicBool::new(false);
    let drain = Duration::from_millis(traffic.drain_ms);
    let (gen_result, rec_result) = std::thread::scope(|s| {
        let recorder = s.spawn(|| {
            pin_thread(cpus.rec);
            let r = crate::recorder::record(&mut rx, &mut writer, &rec_stop, FLUSH_EVERY_NS);
            (r, writer)
        });
        let ios: Vec<&mut dyn PacketIo> = txs
            .iter_mut()
            .map(|b| -> &mut dyn PacketIo { b.as_mut() })
            .collect();
        let realtime = traffic.tx_realtime;
        let pin = |k: usize| {
            pin_thread((cpus.gen + k) % ncpu);
            if realtime {
                if let Err(e) = nflab_io::clock::set_realtime(50) {
                    eprintln!("warning: cannot run the TX thread under SCHED_FIFO: {e}");
                }
            }
        };
        let gen_result = if live {
            // Live frames leave from the calling thread's namespace.
            pin(0);
            match topo.enter_lg() {
                Ok(_in_lg) => nflab_gen::live::run_live(&topo.gen_iface, plan, stop),
                Err(e) => Err(nflab_gen::GenError::Config(e.to_string())),
            }
        } else {
            nflab_gen::run_threads_stamped(ios, plan, stop, &pin, sink)
        };
        // Let in-flight packets arrive; a second signal cuts this short.
        let deadline = std::time::Instant::now() + drain;
        while std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        rec_stop.store(true, Ordering::Release);
        (gen_result, recorder.join())
    });
    let mut gen_report = gen_result.map_err(|e| LabError::Other(e.to_string()))?;
    let (rec_report, writer) = match rec_result {
        Ok((r, w)) => (r?, w),
        Err(_) => return Err(LabError::Other("the recorder thread panicked".into())),
    };
    let mut extra = serde_json::Map::new();
    let background: Vec<serde_json::Value> = gen_report
        .flows
        .iter()
        .filter(|f| f.role == "background")
        .map(|f| serde_json::json!({"flow": f.flow, "sent": f.sent}))
        .collect();
    if !background.is_empty() {
        extra.insert("background_sent".into(), background.into());
    }
    writer.finish(&Trailer {
        sent: gen_report
            .flows
            .iter()
            .filter(|f| f.role == "probe")
            .map(|f| FlowSent {
                flow: f.flow,
                sent: f.sent,
                warmup: f.warmup,
            })
            .collect(),
        interrupted: gen_report.interrupted,
        extra,
    })?;
    let mut substituted = None;
    if let Some(sc) = &sidecar {
        sc.finish()?;
        substituted = Some(crate::txstamps::apply(
            records_path,
            sc.path(),
            &mut gen_report,
        )?);
        if let Some(t) = &gen_report.tx_stamps {
            if t.unmatched + t.duplicates + t.kernel_before_app > 0 {
                gen_report.warnings.push(format!(
                    "kernel TX timestamps did not match the frames sent one to one ({} with an unknown id, {} twice, {} before their application stamp): the kernel stamps may belong to other probes",
                    t.unmatched, t.duplicates, t.kernel_before_app
                ));
            }
        }
    }
    let file = match substituted {
        Some(f) => f,
        None => nflab_record::read_all(records_path)?,
    };
    let measured_on = format!(
        "receive side of {} ({} rx timestamps)",
        topo.dut.as_str(),
        rec_report.rx_timestamp
    );
    gen_report.selfcheck = Some(probe_selfcheck(plan, file.records.iter(), &measured_on));
    Ok(TrafficOutcome {
        generator: gen_report,
        recorder: rec_report,
    })
}

/// How long a fresh topology may take to forward its first frame.
const READY_TIMEOUT: Duration = Duration::from_secs(5);

/// Send readiness probes until one comes back through the DuT, so that no
/// measured packet is lost to a link or bridge port still coming up (a
/// fresh kernel bridge drops frames for a few hundred ms on this host).
fn wait_until_forwarding(
    tx: &mut dyn PacketIo,
    rx: &mut AfPacket,
    topo: &Topology,
    stop: &AtomicBool,
) -> Result<(), LabError> {
    let template = ProbeTemplate::new(&ProbeSpec {
        src_mac: LG0_MAC,
        dst_mac: topo.probe_dst_mac(),
        vlan: None,
        src_ip: LG0_IP.into(),
        dst_ip: LG1_IP.into(),
        src_port: PROBE_SRC_PORT,
        dst_port: PROBE_DST_PORT,
        dscp: 0,
        ttl: 64,
        flow: READY_FLOW,
        frame_bytes: 64,
        mtu: 1500,
    })?;
    let start = std::time::Instant::now();
    let mut seq = 0;
    while start.elapsed() < READY_TIMEOUT && !stop.load(Ordering::Relaxed) {
        tx.tx_batch(1, &mut |_, buf| {
            template.write(buf, seq, nflab_io::clock::realtime_ns())
        })?;
        tx.flush_tx()?;
        seq += 1;
        let mut ready = false;
        rx.rx_batch(64, Duration::from_millis(10), &mut |f, _| {
            ready |= nflab_wire::parse_probe(f).is_ok_and(|p| p.flow == READY_FLOW);
        })?;
        if ready {
            // Let stragglers of the readiness probes arrive before measuring.
            std::thread::sleep(Duration::from_millis(20));
            while rx.rx_batch(256, Duration::from_millis(1), &mut |_, _| {})? > 0 {}
            return Ok(());
        }
    }
    if stop.load(Ordering::Relaxed) {
        return Ok(());
    }
    Err(LabError::Topology(format!(
        "the {} DuT forwarded none of {seq} probe frames within {} s: check `nflab doctor` and the DuT's set-up",
        topo.dut.as_str(),
        READY_TIMEOUT.as_secs()
    )))
}

#[cfg(test)]
mod traffic_tests {
    use super::*;
    use crate::spec::Spec;

    #[test]
    fn pattern_examples_build_plans() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).expect("examples") {
            let p = e.expect("entry").path();
            let name = p.file_name().and_then(|s| s.to_str()).unwrap_or_default();
            if !name.starts_with("patterns-") {
                continue;
            }
            let (spec, text) = Spec::from_file(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
            for plan in spec.expand(&text).expect("expand") {
                plan.spec
                    .check_supported()
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            n += 1;
        }
        assert!(n >= 3, "{n} pattern examples");
    }

    fn traffic(extra: &str) -> Result<GenPlan, LabError> {
        let text = format!("[experiment]\nname = \"x\"\n[traffic]\n{extra}\n");
        let spec = Spec::parse(&text, "t.toml")?;
        build_plan(&spec.traffic, 1, &default_probe_base())
    }

    #[test]
    fn bad_pattern_parameters_are_one_sentence_each() {
        let e = traffic("pattern = \"burst\"\nburst = 0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("burst = 0 is not valid"), "{e}");
        let e = traffic("pattern = \"periodic\"").unwrap_err().to_string();
        assert!(e.contains("needs frequency_hz"), "{e}");
        let e = traffic("pattern = \"replay\"\ntrace = \"/nonexistent.pcap\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read trace"), "{e}");
        let e = traffic("frame_bytes = 64\nip_version = 6")
            .unwrap_err()
            .to_string();
        assert!(e.contains("below the minimum of 84 B"), "{e}");
        let e = traffic("rate_bps = -1.0").unwrap_err().to_string();
        assert!(e.contains("rate_bps = -1"), "{e}");
        let e = traffic("pattern = \"poisson\"\nrate_pps = \"max\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cbr pattern only"), "{e}");
        let e = traffic("vary = [\"ttl\"]").unwrap_err().to_string();
        assert!(e.contains("not a field"), "{e}");
        // A file that is not a capture, and a truncated one.
        let dir = std::env::temp_dir().join(format!("nflab-gen-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp");
        let bad = dir.join("bad.pcap");
        std::fs::write(&bad, b"not a capture at all").expect("write");
        let e = traffic(&format!(
            "pattern = \"replay\"\ntrace = \"{}\"",
            bad.display()
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("is not a pcap or pcapng file"), "{e}");
        let good = nflab_gen::trace::write_pcap_ns(&[
            nflab_gen::trace::TracePacket { t_ns: 0, len: 64 },
            nflab_gen::trace::TracePacket {
                t_ns: 1000,
                len: 64,
            },
        ]);
        let cut = dir.join("cut.pcap");
        std::fs::write(&cut, &good[..good.len() - 3]).expect("write");
        let e = traffic(&format!(
            "pattern = \"replay\"\ntrace = \"{}\"",
            cut.display()
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("truncated"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn background_streams_get_their_own_flow_ids() {
        let p = traffic(
            "rate_pps = 1000\nflows = 4\n[[traffic.background]]\npattern = \"poisson\"\nrate_pps = 5000\nflows = 3\n[[traffic.background]]\nrate_bps = 1e8\nsize_mix = \"imix\"",
        )
        .expect("plan");
        assert_eq!(p.streams.len(), 3);
        assert_eq!(p.streams[0].flow_ids().collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert_eq!(p.streams[1].flow_base, BACKGROUND_FLOW_BASE);
        assert_eq!(
            p.streams[2].flow_base,
            BACKGROUND_FLOW_BASE + BACKGROUND_FLOW_SPAN
        );
        assert_eq!(p.streams[1].role, Role::Background);
        // 100 Mbit/s L1 of IMIX (361.8 B + 20 B) = 32 745 pps.
        let pps = p.streams[2].spec.mean_pps().unwrap();
        assert!((pps - 1e8 / (381.833_333 * 8.0)).abs() < 1.0, "{pps}");
    }
}
