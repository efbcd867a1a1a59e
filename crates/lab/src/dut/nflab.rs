//! DuT kind `nflab`: the data plane of `nflab-dataplane` as the device
//! under test, on one pinned worker thread inside the DuT namespace.
//!
//! The worker receives on dut0 and sends on dut1 (and ICMP errors back on
//! dut0). Its counters — per app, per link, per port, batch sizes, busy and
//! idle polls, cycles — are what [`NflabDut::stop`] returns and the runner
//! stores as `dut.json` next to the run's records.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use nflab_dataplane::config::{build_chain, BuildContext};
use nflab_dataplane::sock::RawSocket;
use nflab_dataplane::{Chain, Port, RxMode, Worker, WorkerConfig, WorkerStats};

use crate::dut::alone::{Counters, Standalone, StandaloneConfig};
use crate::dut::{write_dut_json, DutDriver, RunningDut, Stopped};
use crate::error::LabError;
use crate::net::netns::NetnsGuard;
use crate::spec::{DutKind, DutSection};
use crate::topo::Plumbing;
use crate::topo::{Topology, DUT0_IP, DUT0_MAC, DUT1_IP, DUT1_MAC, LG0_MAC, LG1_MAC};

/// Interface the data plane receives on.
pub const INPUT_IFACE: &str = "dut0";
/// Interface the data plane sends on.
pub const OUTPUT_IFACE: &str = "dut1";

/// A running nflab DuT: one thread per worker.
pub struct NflabDut {
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<WorkerStats>>,
}

/// The engine settings of a `[dut]` section, with their defaults.
pub fn worker_config(dut: &DutSection) -> Result<WorkerConfig, LabError> {
    let d = WorkerConfig::default();
    Ok(WorkerConfig {
        batch: dut.batch.map_or(d.batch, |b| b as usize),
        rx_mode: match &dut.rx_mode {
            Some(m) => RxMode::parse(m).map_err(|e| LabError::Unsupported(format!("dut.{e}")))?,
            None => d.rx_mode,
        },
        drain_ns: dut.drain_us.unwrap_or(0) * 1_000,
        wake_early_ns: dut.wake_early_us.map_or(d.wake_early_ns, |us| us * 1_000),
        link_capacity: dut.link_capacity.unwrap_or(d.link_capacity),
        ..d
    })
}

/// What the data plane in the lab topology knows about its surroundings.
pub fn lab_context() -> BuildContext {
    BuildContext {
        in_mac: DUT0_MAC,
        out_mac: DUT1_MAC,
        next_hop_mac: LG1_MAC,
        icmp_source: DUT0_IP,
        default_routes: vec![
            format!("198.19.0.0/24 out {LG1_MAC}"),
            format!("198.18.0.0/24 in {LG0_MAC}"),
        ],
        base_dir: ".".into(),
        instance: 0,
    }
}

/// [`lab_context`] mirrored, for the reverse way's worker (dut1 → dut0): its input is
/// dut1, its next hop lg0, and the default routes name the ports the other way round.
pub fn reverse_lab_context() -> BuildContext {
    BuildContext {
        in_mac: DUT1_MAC,
        out_mac: DUT0_MAC,
        next_hop_mac: LG0_MAC,
        icmp_source: DUT1_IP,
        default_routes: vec![
            format!("198.18.0.0/24 out {LG0_MAC}"),
            format!("198.19.0.0/24 in {LG1_MAC}"),
        ],
        ..lab_context()
    }
}

/// What a worker does with a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortRole {
    /// Receive (and send `back` traffic). `kernel_stamps`: AF_PACKET stamps
    /// each frame in the kernel, for a chain that holds frames (the worker's
    /// "sleeping through arrivals"); AF_XDP has no receive stamps.
    Input {
        /// Ask for kernel receive stamps.
        kernel_stamps: bool,
    },
    /// Send only.
    Output,
}

/// Open a port: `af_xdp` (`nflab-io`'s AF_XDP socket, copy mode on veth),
/// `af_packet` (receive through a `TPACKET_V2` frame ring, send with the data
/// plane's `sendmmsg` socket: see [`nflab_dataplane::sock::SplitPort`]), or
/// `auto`: AF_XDP, and AF_PACKET where AF_XDP cannot open (docs/dataplane.md
/// has the measurements behind that order). `queue` is the worker's queue of
/// `queues`; AF_PACKET has no queues, so with several it is not a fallback.
pub fn open_port(
    io: Option<&str>,
    ifname: &str,
    role: PortRole,
    batch: usize,
    (queue, queues): (u32, u32),
) -> Result<Port, LabError> {
    let (rx, kernel_stamps) = match role {
        PortRole::Input { kernel_stamps } => (true, kernel_stamps),
        PortRole::Output => (false, false),
    };
    let port = |io: Box<dyn nflab_io::PacketIo>| Port {
        ifname: ifname.to_string(),
        io,
    };
    match io.unwrap_or("auto") {
        "auto" if queues > 1 => Ok(port(open_af_xdp(ifname, rx, queue)?)),
        "auto" => match open_af_xdp(ifname, rx, queue) {
            Ok(io) => Ok(port(io)),
            Err(e) => {
                eprintln!("notice: {ifname}: AF_XDP is not available ({e}); the data plane uses AF_PACKET");
                Ok(port(open_af_packet(ifname, rx, kernel_stamps, batch)?))
            }
        },
        "af_packet" => Ok(port(open_af_packet(ifname, rx, kernel_stamps, batch)?)),
        "af_xdp" => Ok(port(open_af_xdp(ifname, rx, queue)?)),
        other => Err(LabError::Unsupported(format!(
            "dut.io = \"{other}\" is not known: use auto, af_packet or af_xdp"
        ))),
    }
}

fn open_af_xdp(
    ifname: &str,
    rx: bool,
    queue: u32,
) -> Result<Box<dyn nflab_io::PacketIo>, LabError> {
    let cfg = nflab_io::AfXdpConfig {
        queue,
        rx,
        tx: true,
        // The worker stamps packets itself, with its own clock, when it needs to.
        rx_timestamps: false,
        ..nflab_io::AfXdpConfig::default()
    };
    Ok(Box::new(nflab_io::AfXdp::open(ifname, &cfg)?))
}

fn open_af_packet(
    ifname: &str,
    rx: bool,
    kernel_stamps: bool,
    batch: usize,
) -> Result<Box<dyn nflab_io::PacketIo>, LabError> {
    let tx = Box::new(RawSocket::open(ifname, false, batch)?);
    if !rx {
        return Ok(tx);
    }
    let ring = nflab_io::AfPacket::open(
        ifname,
        &nflab_io::AfPacketConfig {
            rx: true,
            tx: false,
            rx_ring: nflab_io::RxRingKind::Frames,
            rx_block_bytes: 1 << 16,
            rx_blocks: 64,
            kernel_timestamps: kernel_stamps,
            ..nflab_io::AfPacketConfig::default()
        },
    )?;
    Ok(Box::new(nflab_dataplane::sock::SplitPort::new(
        Box::new(ring),
        tx,
    )))
}

/// Start the data plane of `dut` in the DuT namespace of `topo`. Returns
/// once the ports are open and the chain is built, or with the reason why not.
pub fn start(topo: &Topology, dut: &DutSection) -> Result<NflabDut, LabError> {
    let ns = crate::dut::dut_namespace(topo, "nflab")?;
    spawn(
        Some(ns),
        INPUT_IFACE,
        OUTPUT_IFACE,
        dut,
        Some(lab_context()),
    )
}

/// Start a worker on `input` → `output` (in namespace `ns`, if given).
/// Without `ctx`, the ports' MACs are read from the interfaces and the rest
/// of the lab defaults apply.
pub fn spawn(
    ns: Option<String>,
    input: &str,
    output: &str,
    dut: &DutSection,
    ctx: Option<BuildContext>,
) -> Result<NflabDut, LabError> {
    dut.check_nflab()?;
    let cfg = worker_config(dut)?;
    let pipeline = dut.pipeline.clone().unwrap_or_default();
    let functions = dut.functions();
    let io = dut.io.clone();
    let (input, output) = (input.to_string(), output.to_string());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpu = dut.dut_cpu()?;
    let workers = dut.workers.unwrap_or(1).max(1);
    let realtime = dut.realtime == Some(true);
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), LabError>>();
    let mut handles = Vec::new();
    for i in 0..workers {
        let (ns, ctx, io, pipeline, functions) = (
            ns.clone(),
            ctx.clone(),
            io.clone(),
            pipeline.clone(),
            functions.clone(),
        );
        let (input, output) = (input.clone(), output.clone());
        let (stop_w, ready_tx) = (Arc::clone(&stop), ready_tx.clone());
        let cpu = (cpu + i as usize) % cpus;
        let spawned = std::thread::Builder::new()
            .name(if workers == 1 {
                "nflab-dut".into()
            } else {
                format!("nflab-dut{i}")
            })
            .spawn(move || {
                let setup = || -> Result<Worker, LabError> {
                    let _in_ns = match &ns {
                        Some(ns) => Some(NetnsGuard::enter(ns)?),
                        None => None,
                    };
                    let ctx = match ctx {
                        Some(c) => c,
                        None => BuildContext {
                            in_mac: nflab_wire::MacAddr(nflab_io::iface::mac(&input)?),
                            out_mac: nflab_wire::MacAddr(nflab_io::iface::mac(&output)?),
                            ..lab_context()
                        },
                    };
                    // Worker i is instance i of an extern (extern-dispatch's VID).
                    let ctx = BuildContext {
                        instance: i as u16,
                        ..ctx
                    };
                    let q = (i, workers);
                    let apps = build_chain(&pipeline, &functions, &ctx)
                        .map_err(|e| LabError::Unsupported(e.0))?;
                    let chain = Chain::new(apps, cfg.link_capacity);
                    let input_role = PortRole::Input {
                        kernel_stamps: chain.min_hold_ns() > 0,
                    };
                    let inp = open_port(io.as_deref(), &input, input_role, cfg.batch, q)?;
                    let out = open_port(io.as_deref(), &output, PortRole::Output, cfg.batch, q)?;
                    let mut w = Worker::new(cfg, chain, inp, out);
                    w.set_cpu(Some(cpu));
                    Ok(w)
                };
                if let Err(e) = nflab_dataplane::engine::pin_current_thread(cpu) {
                    eprintln!("warning: {e}");
                }
                if realtime {
                    if let Err(e) = nflab_io::clock::set_realtime(crate::sys::cpu::DUT_PRIORITY) {
                        eprintln!("warning: dut.realtime: cannot run the data plane under SCHED_FIFO: {e}");
                    }
                }
                let mut worker = match setup() {
                    Ok(w) => {
                        let _ = ready_tx.send(Ok(()));
                        w
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return empty_stats();
                    }
                };
                // The error is kept in the counters (`error`); the caller reports it.
                let _ = worker.run(&stop_w);
                worker.stats()
            });
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                handles.into_iter().for_each(|h| drop(h.join()));
                return Err(LabError::Host(format!(
                    "cannot start the data plane thread: {e}"
                )));
            }
        }
    }
    let dut = NflabDut { stop, handles };
    for _ in 0..workers {
        match ready_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                dut.stop();
                return Err(e);
            }
            Err(_) => {
                dut.stop();
                return Err(LabError::Other(
                    "the nflab data plane did not come up within 30 s".into(),
                ));
            }
        }
    }
    Ok(dut)
}

/// `nflab dut`: run the data plane of `config` until `stop` is set or
/// `duration` has passed; the counters come back even when a port failed
/// (then with `error` set).
pub fn run_standalone(
    config: &StandaloneConfig,
    duration: Option<Duration>,
    stop: &AtomicBool,
) -> Result<WorkerStats, LabError> {
    let p = &config.ports;
    // One sentence: the io error already says everything, without its chain.
    let dut = spawn(p.netns.clone(), &p.input, &p.output, &config.dut, None)
        .map_err(|e| LabError::Other(e.to_string()))?;
    let t0 = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed)
        && !dut.has_stopped()
        && duration.is_none_or(|d| t0.elapsed() < d)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(dut.stop())
}

fn empty_stats() -> WorkerStats {
    WorkerStats {
        cpu: None,
        pipeline: vec![],
        worker: Default::default(),
        ports: vec![],
        links: vec![],
        apps: vec![],
        error: None,
        per_worker: vec![],
    }
}

impl NflabDut {
    /// Whether a worker has stopped on its own (a port failed).
    pub fn has_stopped(&self) -> bool {
        self.handles.iter().any(|h| h.is_finished())
    }

    /// Stop the workers and return their counters, merged when there are several
    /// ([`WorkerStats::merged`]); `error` says if one had stopped early (e.g. an
    /// interface vanished).
    pub fn stop(mut self) -> WorkerStats {
        self.stop.store(true, Ordering::Relaxed);
        let parts: Vec<WorkerStats> = self
            .handles
            .drain(..)
            .map(|h| {
                h.join().unwrap_or_else(|_| WorkerStats {
                    error: Some("the data plane thread panicked".into()),
                    ..empty_stats()
                })
            })
            .collect();
        WorkerStats::merged(parts).unwrap_or_else(empty_stats)
    }
}

impl Drop for NflabDut {
    /// A run that ends early (an error elsewhere) still stops the workers.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

impl DutSection {
    /// Check an nflab DuT section: pipeline, engine settings and every
    /// function's sub-table; the error names the key and what is valid.
    pub fn check_nflab(&self) -> Result<(), LabError> {
        let bad = |m: String| Err(LabError::Unsupported(m));
        let Some(pipeline) = &self.pipeline else {
            return bad(format!(
                "dut.kind = \"nflab\" needs dut.pipeline, a list of functions from {}",
                nflab_dataplane::config::FUNCTIONS.join(", ")
            ));
        };
        if pipeline.is_empty() {
            return bad("dut.pipeline is empty: name at least one function".into());
        }
        if self.forward_mode.is_some() {
            return bad("dut.forward_mode applies to dut.kind = \"testpmd\" only".into());
        }
        if let Some(b) = self.batch {
            if !(1..=1024).contains(&b) {
                return bad(format!("dut.batch = {b} is out of range: use 1 to 1024"));
            }
        }
        if let Some(m) = &self.rx_mode {
            nflab_dataplane::RxMode::parse(m)
                .map_err(|e| LabError::Unsupported(format!("dut.{e}")))?;
        }
        if let Some(d) = self.drain_us {
            if d > 1_000_000 {
                return bad(format!("dut.drain_us = {d} is above 1 s: use 0 to 1000000"));
            }
        }
        if let Some(w) = self.wake_early_us {
            if w > 10_000 {
                return bad(format!(
                    "dut.wake_early_us = {w} is above 10 ms: use 0 to 10000"
                ));
            }
        }
        if let Some(c) = self.link_capacity {
            if !(1..=1 << 20).contains(&c) {
                return bad(format!(
                    "dut.link_capacity = {c} is out of range: use 1 to 1048576"
                ));
            }
        }
        let workers = self.workers.unwrap_or(1);
        if !(1..=64).contains(&workers) {
            return bad(format!(
                "dut.workers = {workers} is out of range: use 1 to 64"
            ));
        }
        if workers > 1 && self.io.as_deref() == Some("af_packet") {
            return bad(format!(
                "dut.workers = {workers} needs a port per queue, which AF_PACKET has not: set dut.io = \"af_xdp\" (or \"auto\")"
            ));
        }
        self.check_io("use auto (default), af_xdp or af_packet")?;
        self.dut_cpu()?;
        nflab_dataplane::config::validate(
            pipeline,
            &self.functions(),
            std::path::Path::new("."),
            &lab_context().default_routes,
        )
        .map_err(|e| LabError::Unsupported(e.0))
    }
}

/// `nflab`: the nflab data plane between dut0 and dut1.
pub struct NflabDriver;

impl Plumbing for NflabDriver {
    fn plumb(&self, ns: &str) -> Result<(), LabError> {
        crate::dut::kernel_forwarding_off(ns)
    }

    /// The data plane rewrites the destination to lg1's MAC.
    fn probe_dst_mac(&self) -> nflab_wire::MacAddr {
        DUT0_MAC
    }
}

impl DutDriver for NflabDriver {
    fn kind(&self) -> DutKind {
        DutKind::Nflab
    }

    fn check(&self, spec: &crate::spec::Spec) -> Result<(), LabError> {
        spec.dut.check_nflab()
    }

    fn why_not_realtime(&self) -> Option<&'static str> {
        None
    }

    /// A second worker set carries dut1 → dut0 with the same pipeline, its ports and
    /// default routes mirrored; routes of the spec's own name one way only.
    fn reverse_path(&self, dut: &DutSection) -> Result<nflab_wire::MacAddr, &'static str> {
        let own_routes = dut
            .router
            .as_ref()
            .is_some_and(|r| !r.routes.is_empty() || r.routes_file.is_some());
        if own_routes {
            return Err("has routes of the spec's own in [dut.router], which name the ports of one way: leave them out (the default routes serve both ways)");
        }
        Ok(DUT1_MAC)
    }

    fn queues(&self, dut: &DutSection) -> u32 {
        dut.workers.unwrap_or(1)
    }

    fn standalone(&self) -> Option<&dyn Standalone> {
        Some(self)
    }

    fn carries_ipv6_and_vlan(&self) -> bool {
        true
    }

    fn start(
        &self,
        topo: &Topology,
        dut: &DutSection,
        _seed: u64,
        _dir: &std::path::Path,
    ) -> Result<Box<dyn RunningDut>, LabError> {
        Ok(Box::new(start(topo, dut)?))
    }

    fn start_both_ways(
        &self,
        topo: &Topology,
        dut: &DutSection,
        _seed: u64,
        _dir: &std::path::Path,
    ) -> Result<Box<dyn RunningDut>, LabError> {
        let forward = start(topo, dut)?;
        let ns = crate::dut::dut_namespace(topo, "nflab")?;
        // The reverse way's workers on the CPUs after the forward way's.
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cpu = (dut.dut_cpu()? + dut.workers.unwrap_or(1) as usize) % cpus;
        let reverse = spawn(
            Some(ns),
            OUTPUT_IFACE,
            INPUT_IFACE,
            &DutSection {
                cpu: Some(cpu),
                ..dut.clone()
            },
            Some(reverse_lab_context()),
        )?;
        Ok(Box::new(BothWays { forward, reverse }))
    }
}

/// An nflab DuT forwarding both ways, each on its own workers.
struct BothWays {
    forward: NflabDut,
    reverse: NflabDut,
}

/// `dut.json` of a DuT forwarding both ways: the forward way's counters as for one
/// way, the reverse way's under `reverse`.
#[derive(serde::Serialize)]
struct BothWaysStats {
    #[serde(flatten)]
    forward: WorkerStats,
    reverse: WorkerStats,
}

impl RunningDut for BothWays {
    fn stop(self: Box<Self>, dir: &std::path::Path) -> Result<Stopped, LabError> {
        let BothWays { forward, reverse } = *self;
        let stats = BothWaysStats {
            forward: forward.stop(),
            reverse: reverse.stop(),
        };
        let error = stats.forward.error.clone().or(stats.reverse.error.clone());
        write_dut_json(dir, &stats, error)
    }
}

impl Standalone for NflabDriver {
    fn check(&self, dut: &DutSection) -> Result<(), LabError> {
        dut.check_nflab()
    }

    fn run(
        &self,
        config: &StandaloneConfig,
        duration: Option<Duration>,
        stop: &AtomicBool,
    ) -> Result<Counters, LabError> {
        let stats = run_standalone(config, duration, stop)?;
        let error = stats.error.clone();
        Counters::of(&stats, error)
    }
}

impl RunningDut for NflabDut {
    fn stop(self: Box<Self>, dir: &std::path::Path) -> Result<Stopped, LabError> {
        let stats = NflabDut::stop(*self);
        let error = stats.error.clone();
        write_dut_json(dir, &stats, error)
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::{DutKind, DutSection};

    #[test]
    fn dut_workers_are_checked_in_one_sentence() {
        let nflab = |workers: u32, io: Option<&str>| DutSection {
            kind: DutKind::Nflab,
            pipeline: Some(vec!["l2fwd".into()]),
            workers: Some(workers),
            io: io.map(String::from),
            ..DutSection::default()
        };
        nflab(2, None)
            .check_nflab()
            .expect("two workers on auto ports");
        nflab(64, Some("af_xdp")).check_nflab().expect("64 workers");
        let e = nflab(0, None).check_nflab().unwrap_err().to_string();
        assert!(
            e.contains("dut.workers = 0") && e.contains("1 to 64"),
            "{e}"
        );
        let e = nflab(2, Some("af_packet"))
            .check_nflab()
            .unwrap_err()
            .to_string();
        assert!(e.contains("dut.workers = 2") && e.contains("af_xdp"), "{e}");
    }
}
