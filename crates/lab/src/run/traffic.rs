//! One traffic pass over a topology: the generator's TX threads and the
//! recorder on their own pinned CPUs, the probe self-check, and the wait
//! until the DuT forwards (used by each run and by `nflab gen`).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nflab_gen::{GenPlan, GenReport, Role, SelfCheck};
use nflab_io::{AfPacket, AfPacketConfig, PacketIo};
use nflab_record::{ClockInfo, FlowSent, Metadata, Record, RecordWriter, Trailer};
use nflab_wire::{ProbeSpec, ProbeTemplate};

use crate::error::LabError;
use crate::run::plan::{PROBE_DST_PORT, PROBE_SRC_PORT};
use crate::run::recorder::{recorder_ring, READY_FLOW};
use crate::spec::{Backend, TrafficSection};
use crate::sys::cpu::pin_thread;
use crate::topo::Topology;

/// How often the recorder hands a block to the OS.
const FLUSH_EVERY_NS: u64 = 100_000_000;

/// The self-check compares at most this many probe packets with the schedule
/// (8 bytes of schedule each).
pub const SELFCHECK_MAX_PACKETS: usize = 20_000_000;

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
    pub recorder: crate::run::recorder::RecorderReport,
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

/// What a run sends: the generator's plan, and the probes' addressing it was built
/// from (the readiness probes before it go the same way).
#[derive(Clone, Copy)]
pub struct Sending<'a> {
    /// The generator's plan.
    pub plan: &'a GenPlan,
    /// The probe stream's frame fields before per-stream settings.
    pub probe: &'a ProbeSpec,
}

/// One direction of a run's traffic: the port it leaves from, the port it is
/// recorded on, what is sent, where its records go and on which CPUs.
#[derive(Clone, Copy)]
pub struct Leg<'a> {
    /// The generator's interface (in the LoadGen's namespace).
    pub tx_iface: &'a str,
    /// The recorder's interface.
    pub rx_iface: &'a str,
    /// What is sent.
    pub sending: Sending<'a>,
    /// The records file.
    pub records: &'a Path,
    /// The generator's and the recorder's CPUs.
    pub cpus: TrafficCpus,
}

/// Send `plan` from the topology's generator interface and record its probe stream
/// on the recorder interface into `records_path`; the report carries the self-check.
pub fn run_traffic(
    topo: &Topology,
    traffic: &TrafficSection,
    sending: Sending<'_>,
    run_id: &str,
    records_path: &Path,
    cpus: TrafficCpus,
    stop: &AtomicBool,
) -> Result<TrafficOutcome, LabError> {
    let leg = Leg {
        tx_iface: &topo.gen_iface,
        rx_iface: &topo.rec_iface,
        sending,
        records: records_path,
        cpus,
    };
    let mut outcomes = run_legs(topo, traffic, &[leg], run_id, stop)?;
    Ok(outcomes.remove(0))
}

/// A leg's sockets, opened in the LoadGen's namespace.
struct OpenLeg {
    txs: Vec<Box<dyn PacketIo>>,
    rx: AfPacket,
    tx_source: Option<String>,
    rx_timestamp: &'static str,
}

/// Send and record every leg at once (one leg per direction), each into its own
/// records file; the outcomes come back in the legs' order.
pub fn run_legs(
    topo: &Topology,
    traffic: &TrafficSection,
    legs: &[Leg<'_>],
    run_id: &str,
    stop: &AtomicBool,
) -> Result<Vec<TrafficOutcome>, LabError> {
    let live = traffic.backend == Backend::XdpLive;
    if live && traffic.tx_threads != 1 {
        return Err(LabError::Unsupported(
            "traffic.backend = \"xdp_live\" sends from one thread: set tx_threads = 1".into(),
        ));
    }
    for leg in legs.iter().filter(|_| live) {
        if let Some(why) = nflab_gen::live::unsupported(leg.sending.plan) {
            return Err(LabError::Unsupported(why));
        }
    }
    let mut open = Vec::with_capacity(legs.len());
    for leg in legs {
        open.push(open_leg(topo, traffic, leg)?);
    }
    if live {
        topo.accept_xdp_frames_at_gen_peer()?;
    }
    for (leg, o) in legs.iter().zip(open.iter_mut()) {
        wait_until_forwarding(
            o.txs[0].as_mut(),
            &mut o.rx,
            leg.sending.probe,
            topo.dut.as_str(),
            stop,
        )?;
    }
    let mut writers = Vec::with_capacity(legs.len());
    let mut sidecars = Vec::with_capacity(legs.len());
    for (leg, o) in legs.iter().zip(open.iter()) {
        let meta = metadata(traffic, leg.sending.plan, o, run_id, live);
        writers.push(RecordWriter::create(leg.records, &meta)?);
        sidecars.push(match &o.tx_source {
            Some(src) => Some(crate::run::txstamps::Sidecar::create_at(
                &leg.records
                    .with_file_name(nflab_record::tx_stamps::TX_STAMPS_FILE),
                run_id,
                src,
            )?),
            None => None,
        });
    }
    // The recorders read their rings while the generators write their sockets.
    let (mut rxs, mut txs): (Vec<AfPacket>, Vec<Vec<Box<dyn PacketIo>>>) =
        open.into_iter().map(|o| (o.rx, o.txs)).unzip();
    let rec_stop = AtomicBool::new(false);
    let drain = Duration::from_millis(traffic.drain_ms);
    crate::failpoint::hit_after(
        "generator",
        Duration::from_secs_f64((traffic.warmup_s + traffic.duration_s / 2.0).max(0.0)),
    );
    let results = std::thread::scope(|s| {
        let recorders: Vec<_> = rxs
            .iter_mut()
            .zip(writers)
            .zip(legs)
            .map(|((rx, mut writer), leg)| {
                let rec_stop = &rec_stop;
                s.spawn(move || {
                    pin_thread(leg.cpus.rec);
                    let r = crate::run::recorder::record(rx, &mut writer, rec_stop, FLUSH_EVERY_NS);
                    (r, writer)
                })
            })
            .collect();
        let senders: Vec<_> = txs
            .iter_mut()
            .zip(legs)
            .zip(&sidecars)
            .map(|((txs, leg), sidecar)| {
                s.spawn(move || send(topo, traffic, leg, txs, sidecar.as_ref(), live, stop))
            })
            .collect();
        let gen_results: Vec<_> = senders
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(nflab_gen::GenError::Config("a TX thread panicked".into()))
                })
            })
            .collect();
        // Let in-flight packets arrive; a second signal cuts this short.
        let deadline = std::time::Instant::now() + drain;
        while std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        rec_stop.store(true, Ordering::Release);
        let rec_results: Vec<_> = recorders.into_iter().map(|h| h.join()).collect();
        gen_results.into_iter().zip(rec_results).collect::<Vec<_>>()
    });
    let mut outcomes = Vec::with_capacity(legs.len());
    for (((gen_result, rec_result), leg), sidecar) in results.into_iter().zip(legs).zip(&sidecars) {
        let gen_report = gen_result.map_err(|e| LabError::Other(e.to_string()))?;
        let (rec_report, writer) = match rec_result {
            Ok((r, w)) => (r?, w),
            Err(_) => return Err(LabError::Other("the recorder thread panicked".into())),
        };
        outcomes.push(finish_leg(
            topo,
            leg,
            gen_report,
            rec_report,
            writer,
            sidecar.as_ref(),
        )?);
    }
    Ok(outcomes)
}

/// Open `leg`'s recorder ring and TX backends in the LoadGen's namespace (sockets
/// belong to the namespace they are created in).
fn open_leg(topo: &Topology, traffic: &TrafficSection, leg: &Leg<'_>) -> Result<OpenLeg, LabError> {
    let kernel_tx = leg.sending.plan.tx_timestamp == nflab_gen::TxTimestamp::Kernel;
    let _in_lg = topo.enter_lg()?;
    // With kernel TX stamps, hardware stamps are asked for on both ends too.
    let rx = AfPacket::open(
        leg.rx_iface,
        &AfPacketConfig {
            hardware_timestamps: kernel_tx,
            ..recorder_ring()
        },
    )?;
    if let Some(n) = rx.hardware().and_then(|h| h.notice.as_deref()) {
        eprintln!("notice: {n}");
    }
    let mut txs = open_tx(traffic.backend, leg.tx_iface, traffic.tx_threads)?;
    let tx_source = if kernel_tx {
        Some(crate::run::txstamps::enable(&mut txs)?)
    } else {
        None
    };
    let rx_timestamp = if rx.hardware().is_some_and(|h| h.rx) {
        "hardware"
    } else {
        "kernel-software"
    };
    Ok(OpenLeg {
        txs,
        rx,
        tx_source,
        rx_timestamp,
    })
}

/// The records' metadata of one leg.
fn metadata(
    traffic: &TrafficSection,
    plan: &GenPlan,
    o: &OpenLeg,
    run_id: &str,
    live: bool,
) -> Metadata {
    let clock = ClockInfo {
        source: "CLOCK_REALTIME".into(),
        resolution_ns: nflab_io::clock::resolution_ns(libc::CLOCK_REALTIME),
    };
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
    Metadata {
        run_id: run_id.to_string(),
        clock,
        tx_timestamp: if live { "kernel-xdp" } else { "application" }.into(),
        rx_timestamp: o.rx_timestamp.into(),
        flows: plan.streams[0].flow_ids().collect(),
        offered: serde_json::json!({
            "pattern": traffic.pattern.as_str(),
            "rate_pps": plan.streams[0].spec.mean_pps(),
            "frame_bytes": traffic.frame_bytes,
            "duration_s": traffic.duration_s,
            "warmup_s": traffic.warmup_s,
            "backend": if live { "xdp_live" } else { o.txs[0].name() },
            "tx_threads": o.txs.len(),
            "streams": streams,
        }),
        extra: Default::default(),
    }
}

/// The generator of one leg, on its TX threads.
fn send(
    topo: &Topology,
    traffic: &TrafficSection,
    leg: &Leg<'_>,
    txs: &mut [Box<dyn PacketIo>],
    sidecar: Option<&crate::run::txstamps::Sidecar>,
    live: bool,
    stop: &AtomicBool,
) -> Result<GenReport, nflab_gen::GenError> {
    let plan = leg.sending.plan;
    let push = |b: &[nflab_gen::ProbeTxStamp]| {
        if let Some(sc) = sidecar {
            sc.push(b);
        }
    };
    let sink: Option<nflab_gen::StampSink<'_>> = sidecar.map(|_| &push as _);
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let realtime = traffic.tx_realtime;
    let gen_cpu = leg.cpus.gen;
    let pin = |k: usize| {
        pin_thread((gen_cpu + k) % ncpu);
        if realtime {
            if let Err(e) = nflab_io::clock::set_realtime(50) {
                eprintln!("warning: cannot run the TX thread under SCHED_FIFO: {e}");
            }
        }
    };
    if live {
        // Live frames leave from the calling thread's namespace.
        pin(0);
        return match topo.enter_lg() {
            Ok(_in_lg) => nflab_gen::live::run_live(leg.tx_iface, plan, stop),
            Err(e) => Err(nflab_gen::GenError::Config(e.to_string())),
        };
    }
    let ios: Vec<&mut dyn PacketIo> = txs
        .iter_mut()
        .map(|b| -> &mut dyn PacketIo { b.as_mut() })
        .collect();
    nflab_gen::run_threads_stamped(ios, plan, stop, &pin, sink)
}

/// Close one leg's records (trailer, kernel TX stamps) and check its probe stream
/// against the schedule.
fn finish_leg<W: std::io::Write>(
    topo: &Topology,
    leg: &Leg<'_>,
    mut gen_report: GenReport,
    rec_report: crate::run::recorder::RecorderReport,
    writer: RecordWriter<W>,
    sidecar: Option<&crate::run::txstamps::Sidecar>,
) -> Result<TrafficOutcome, LabError> {
    let plan = leg.sending.plan;
    let records_path = leg.records;
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
    if let Some(sc) = sidecar {
        sc.finish()?;
        substituted = Some(crate::run::txstamps::apply(
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
    probe: &ProbeSpec,
    dut: &str,
    stop: &AtomicBool,
) -> Result<(), LabError> {
    // The measured probes' way (MACs and addresses), as the plainest frame: untagged
    // IPv4, 64 bytes.
    let template = ProbeTemplate::new(&ProbeSpec {
        src_mac: probe.src_mac,
        dst_mac: probe.dst_mac,
        vlan: None,
        src_ip: probe.src_ip,
        dst_ip: probe.dst_ip,
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
        "the {dut} DuT forwarded none of {seq} probe frames within {} s: check `nflab doctor` and the DuT's set-up",
        READY_TIMEOUT.as_secs()
    )))
}
