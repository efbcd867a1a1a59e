//! Carrying out an experiment: one topology per run, generator and recorder
//! on their own pinned threads, records to disk, analysis, artifacts.
//!
//! Every run gets a fresh topology (the analogue of pos' reboot between
//! runs), and the topology is removed when the run ends in any way.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nflab_analyze::{AnalysisConfig, AnomalySpec, Summary};
use nflab_gen::{CbrConfig, GenReport};
use nflab_io::{AfPacket, AfPacketConfig};
use nflab_record::{ClockInfo, FlowSent, Metadata, RecordWriter, Trailer};
use nflab_wire::{ProbeSpec, ProbeTemplate};
use serde::Serialize;

use crate::error::LabError;
use crate::spec::RunPlan;
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
    let spec = &plan.spec;
    let topo = Topology::for_spec(spec)?;
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

    let frame_bytes = spec.traffic.frame_bytes as usize;
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
        flow: PROBE_FLOW,
        frame_bytes,
        mtu: 1500,
    })?;

    // Sockets belong to the namespace they are created in.
    let (mut tx, mut rx) = {
        let _in_lg = topo.enter_lg()?;
        let tx = AfPacket::open(
            &topo.gen_iface,
            &AfPacketConfig {
                rx: false,
                tx: true,
                ..AfPacketConfig::default()
            },
        )?;
        let rx = AfPacket::open(&topo.rec_iface, &recorder_ring())?;
        (tx, rx)
    };

    wait_until_forwarding(&mut tx, &mut rx, &topo, stop)?;

    let clock = ClockInfo {
        source: "CLOCK_REALTIME".into(),
        resolution_ns: nflab_io::clock::resolution_ns(libc::CLOCK_REALTIME),
    };
    let meta = Metadata {
        run_id: format!("{:03}", plan.index),
        clock: clock.clone(),
        tx_timestamp: "application".into(),
        rx_timestamp: "kernel-software".into(),
        flows: vec![PROBE_FLOW],
        offered: serde_json::json!({
            "pattern": spec.traffic.pattern.as_str(),
            "rate_pps": spec.traffic.rate_pps.pps(),
            "frame_bytes": frame_bytes,
            "duration_s": spec.traffic.duration_s,
            "warmup_s": spec.traffic.warmup_s,
        }),
        extra: Default::default(),
    };
    let records_path = dir.join("records.nfr");
    let mut writer = RecordWriter::create(&records_path, &meta)?;

    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let gen_cpu = spec.topology.gen_cpu.unwrap_or(0);
    let rec_cpu = spec.topology.rec_cpu.unwrap_or(cpus - 1);
    let cfg = CbrConfig {
        rate_pps: spec.traffic.rate_pps.pps(),
        duration_ns: Some((spec.traffic.duration_s * 1e9) as u64),
        count: None,
        warmup_ns: (spec.traffic.warmup_s * 1e9) as u64,
        batch: 32,
    };
    let rec_stop = AtomicBool::new(false);
    let drain = Duration::from_millis(spec.traffic.drain_ms);

    let (gen_result, rec_result) = std::thread::scope(|s| {
        let recorder = s.spawn(|| {
            pin_thread(rec_cpu);
            let r = crate::recorder::record(&mut rx, &mut writer, &rec_stop, FLUSH_EVERY_NS);
            (r, writer)
        });
        let generator = s.spawn(|| {
            pin_thread(gen_cpu);
            nflab_gen::run_cbr(&mut tx, &template, &cfg, stop)
        });
        let gen_result = generator.join();
        // Let in-flight packets arrive; a second signal cuts this short.
        let deadline = std::time::Instant::now() + drain;
        while std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        rec_stop.store(true, Ordering::Release);
        let rec_result = recorder.join();
        (gen_result, rec_result)
    });
    let gen_report = match gen_result {
        Ok(r) => r.map_err(|e| LabError::Other(e.to_string()))?,
        Err(_) => return Err(LabError::Other("the generator thread panicked".into())),
    };
    let (rec_report, writer) = match rec_result {
        Ok((r, w)) => (r?, w),
        Err(_) => return Err(LabError::Other("the recorder thread panicked".into())),
    };
    let interrupted = gen_report.interrupted;
    writer.finish(&Trailer {
        sent: vec![FlowSent {
            flow: PROBE_FLOW,
            sent: gen_report.sent,
            warmup: gen_report.warmup,
        }],
        interrupted,
        extra: Default::default(),
    })?;
    iface_knobs.revert();
    if !spec.knobs.iface.is_empty() {
        write_json(&dir.join("iface-knobs.json"), &iface_knobs.records())?;
    }
    drop(topo);

    let anomalies: Vec<AnomalySpec> = spec
        .analysis
        .anomalies
        .iter()
        .filter_map(|a| a.parse().ok())
        .collect();
    let acfg = AnalysisConfig {
        anomalies,
        offered_pps: spec.traffic.rate_pps.pps(),
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
    let measured = gen_report.sent - gen_report.warmup;
    if measured > 0 && gen_report.late_packets * 1000 > measured {
        summary.notes.push(format!(
            "the generator fell behind: {} of {} packets left more than one gap after their deadline (max {} ns late)",
            gen_report.late_packets, gen_report.sent, gen_report.max_lateness_ns
        ));
    }
    if rec_report.kernel_drops > 0 {
        summary.notes.push(format!(
            "the recorder's socket dropped {} frames: those count as lost",
            rec_report.kernel_drops
        ));
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

/// Flow id of the readiness probes sent before a run; never recorded.
pub const READY_FLOW: u16 = u16::MAX;
/// How long a fresh topology may take to forward its first frame.
const READY_TIMEOUT: Duration = Duration::from_secs(5);

/// Send readiness probes until one comes back through the DuT, so that no
/// measured packet is lost to a link or bridge port still coming up (a
/// fresh kernel bridge drops frames for a few hundred ms on this host).
fn wait_until_forwarding(
    tx: &mut AfPacket,
    rx: &mut AfPacket,
    topo: &Topology,
    stop: &AtomicBool,
) -> Result<(), LabError> {
    use nflab_io::PacketIo;
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

/// The recorder's ring. A TPACKET_V3 block is handed to user space when it
/// is full or after its retire timeout, so at low rates each block carries
/// few frames: the ring must have many blocks to ride out a recorder that is
/// descheduled for a while (256 × 256 KiB ≈ 1 s at 10 kpps even with 4 ms
/// blocks, and far more at high rates). The timeout only delays delivery to
/// the recorder; the timestamps are taken by the kernel at reception.
pub fn recorder_ring() -> AfPacketConfig {
    AfPacketConfig {
        rx: true,
        tx: false,
        rx_block_bytes: 256 << 10,
        rx_blocks: 256,
        rx_block_timeout_ms: 4,
        ..AfPacketConfig::default()
    }
}

/// Pin the calling thread; an impossible pin is reported, not fatal.
pub fn pin_thread(cpu: usize) {
    let mut set = nix::sched::CpuSet::new();
    if set.set(cpu).is_ok() {
        if let Err(e) = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set) {
            eprintln!("warning: cannot pin a thread to CPU {cpu}: {e}");
        }
    }
}

pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), LabError> {
    std::fs::write(path, bytes).map_err(|e| LabError::artifact(path, e))
}

pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), LabError> {
    let mut s = serde_json::to_string_pretty(value)
        .map_err(|e| LabError::Other(format!("{}: {e}", path.display())))?;
    s.push('\n');
    write_file(path, s.as_bytes())
}

/// True when progress lines are wanted by default.
pub fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}
