//! The in-stack UDP monitor (`[monitor] kind = "udp"`): see `src/bpf/udp.bpf.c`
//! for the hooks and docs/monitor.md for what the interval includes.
//!
//! One thread owns everything: it enters the DuT's namespace, loads and attaches
//! the programs (ingress on the VNF's own socket, [`crate::vnf_socket`]), refills the
//! sample budget at exponentially distributed instants, drains the ring buffer,
//! samples the VNF socket's receive-queue fill from `/proc/thread-self/net/udp`
//! (not `SO_MEMINFO`: UDP returns a read datagram's memory to the socket lazily, so
//! its `rmem_alloc` stays high while the queue is not empty), and on stop detaches
//! (dropping the links and the socket copies) and returns what it saw.

use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, RingBufferBuilder};
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::matcher::{pair, Event, MatchMode, Matching};
use crate::proc_udp::UdpTable;
use crate::skel::udp::UdpSkelBuilder;
use crate::vnf_socket::VnfSocket;
use crate::{bpf_err, clock, netns, MonitorError};

/// What to sample: every datagram, or `packets` consecutive ones at exponentially
/// distributed intervals with mean `mean_interval_s` (seed 003: 10 and 0.2 s).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Sample {
    /// Every datagram.
    All,
    /// N consecutive datagrams per sampling instant.
    Windows {
        /// Datagrams per sample.
        packets: u32,
        /// Mean time between samples.
        mean_interval_s: f64,
    },
    /// Attached but taking nothing (the overhead of the hooks alone).
    Off,
}

impl Sample {
    /// The value of the `config` map's mode: 0 off, 1 sampling, 2 all.
    pub fn mode(&self) -> u32 {
        match self {
            Sample::Off => 0,
            Sample::Windows { .. } => 1,
            Sample::All => 2,
        }
    }

    /// Its name in `[monitor] rotate`.
    pub fn name(&self) -> &'static str {
        match self {
            Sample::Off => "off",
            Sample::Windows { .. } => "sampling",
            Sample::All => "all",
        }
    }
}

/// Where and how to monitor.
#[derive(Debug, Clone)]
pub struct UdpMonitorConfig {
    /// The DuT's namespace (`/run/netns/NAME`).
    pub netns: String,
    /// The VNF's UDP port.
    pub port: u16,
    /// The interface the VNF sends on.
    pub egress_dev: String,
    /// Sampling.
    pub sample: Sample,
    /// Matching rule.
    pub matching: MatchMode,
    /// Seed of the sampling instants.
    pub seed: u64,
    /// Modes taking turns during the run (overhead in one run), or `None`.
    pub rotation: Option<Rotation>,
}

/// Modes taking turns in blocks of time: the monitor rewrites the mode in its
/// `config` map at each block's start and records when it did
/// ([`UdpMonitorResult::blocks`]).
#[derive(Debug, Clone)]
pub struct Rotation {
    /// The modes.
    pub modes: Vec<Sample>,
    /// Length of a block.
    pub block: Duration,
    /// Index into `modes` of each block in turn (randomised complete blocks,
    /// chosen by the caller); started over when the run outlasts it.
    pub order: Vec<usize>,
}

/// One block of a rotation, on CLOCK_REALTIME. The mode was in effect from
/// `t_start_ns` (read just after the map was rewritten) to `t_end_ns` (read just
/// before the next rewrite); between blocks lies the rewrite itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ModeBlock {
    /// Start, ns.
    pub t_start_ns: u64,
    /// End, ns.
    pub t_end_ns: u64,
    /// Index into [`Rotation::modes`].
    pub mode: usize,
}

/// One sample of the VNF socket's receive queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BufferSample {
    /// When (CLOCK_REALTIME).
    pub t_ns: u64,
    /// Bytes queued (`rx_queue` of /proc/net/udp).
    pub rx_queue_bytes: u64,
    /// The socket's drop counter.
    pub drops: u64,
}

/// Kernel-side counters.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counters {
    /// Datagrams to the port seen at ingress.
    pub ingress: u64,
    /// Of those, taken by the sampler.
    pub sampled: u64,
    /// Events lost to a full ring buffer.
    pub ringbuf_full: u64,
    /// Datagrams sent by the VNF whose key was not in flight (not sampled, or
    /// changed by the VNF).
    pub egress_not_in_flight: u64,
}

/// What a monitor run produced.
#[derive(Debug, Clone, Default, Serialize)]
pub struct UdpMonitorResult {
    /// Pairs and unmatched counts.
    pub matching: Matching,
    /// All unmatched datagrams (`matching`'s two counts summed).
    pub unmatched: u64,
    /// Kernel counters.
    pub counters: Counters,
    /// Sampling instants that opened a sample.
    pub samples_opened: u64,
    /// Receive-queue fill over time.
    #[serde(skip)]
    pub buffer: Vec<BufferSample>,
    /// The rotation's blocks, in time order (empty without a rotation).
    #[serde(skip)]
    pub blocks: Vec<ModeBlock>,
    /// The rotation's modes, which the blocks' `mode` indexes.
    #[serde(skip)]
    pub rotation_modes: Vec<Sample>,
}

/// A running monitor.
pub struct UdpMonitor {
    switch: mpsc::Sender<Sample>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<UdpMonitorResult, MonitorError>>,
}

const EVENT_LEN: usize = 32;
const BUFFER_PERIOD: Duration = Duration::from_millis(10);

fn parse_event(d: &[u8], offset_ns: i64) -> Option<Event> {
    if d.len() < EVENT_LEN {
        return None;
    }
    let u64_at = |i: usize| u64::from_ne_bytes(d[i..i + 8].try_into().expect("8 bytes"));
    let flow = u16::from_ne_bytes([d[24], d[25]]);
    Some(Event {
        t_ns: clock::to_realtime(u64_at(0), offset_ns),
        hash: u64_at(8),
        probe: (d[27] != 0).then_some((flow, u64_at(16))),
        ingress: d[26] == 0,
    })
}

impl UdpMonitor {
    /// Start monitoring; returns once the programs are attached.
    pub fn start(cfg: UdpMonitorConfig) -> Result<UdpMonitor, MonitorError> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel();
        let stop_t = Arc::clone(&stop);
        let (switch, switch_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("nflab-monitor".into())
            .spawn(move || run(cfg, &stop_t, ready_tx, switch_rx))
            .map_err(|e| MonitorError::Bpf(format!("cannot start the monitor thread: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(UdpMonitor {
                switch,
                stop,
                thread,
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(thread
                .join()
                .map_err(|_| MonitorError::Bpf("the monitor thread panicked".into()))?
                .err()
                .unwrap_or_else(|| MonitorError::Bpf("the monitor thread ended early".into()))),
        }
    }

    /// Switch the sampling while running: the mode is rewritten in the `config`
    /// map, the programs stay loaded and attached.
    pub fn set_sample(&self, sample: Sample) {
        let _ = self.switch.send(sample);
    }

    /// Detach everything and return the results.
    pub fn stop(self) -> Result<UdpMonitorResult, MonitorError> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| MonitorError::Bpf("the monitor thread panicked".into()))?
    }
}

fn run(
    mut cfg: UdpMonitorConfig,
    stop: &AtomicBool,
    ready: mpsc::Sender<Result<(), MonitorError>>,
    switch: mpsc::Receiver<Sample>,
) -> Result<UdpMonitorResult, MonitorError> {
    let fail = |e: MonitorError| {
        let _ = ready.send(Err(MonitorError::Bpf(e.to_string())));
        e
    };
    let ns_ino = netns::enter(&cfg.netns).map_err(fail)?;
    let egress = netns::ifindex(&cfg.egress_dev).map_err(fail)?;
    let mut obj = MaybeUninit::uninit();
    let open = UdpSkelBuilder::default()
        .open(&mut obj)
        .map_err(bpf_err("cannot open the UDP monitor's BPF object"))
        .map_err(fail)?;
    let skel = open
        .load()
        .map_err(bpf_err("the kernel refused the UDP monitor's programs"))
        .map_err(fail)?;
    // The VNF's socket(s): the ingress program is attached there.
    let mut sockets = VnfSocket::find(cfg.port).map_err(fail)?;
    let mut config = Vec::with_capacity(12);
    for v in [ns_ino, cfg.sample.mode(), egress] {
        config.extend_from_slice(&v.to_ne_bytes());
    }
    let zero = 0u32.to_ne_bytes();
    let mut attach = || -> Result<Vec<libbpf_rs::Link>, MonitorError> {
        skel.maps
            .config
            .update(&zero, &config, MapFlags::ANY)
            .map_err(bpf_err("cannot configure the UDP monitor"))?;
        for s in sockets.iter_mut() {
            s.attach(&skel.progs.udp_ingress)?;
        }
        let a = bpf_err("cannot attach the UDP monitor");
        Ok(vec![skel.progs.udp_egress.attach().map_err(&a)?])
    };
    let links = attach().map_err(fail)?;
    let offset_ns = clock::tai_minus_realtime_ns();
    let events: RefCell<Vec<Event>> = RefCell::new(Vec::new());
    let mut rb = RingBufferBuilder::new();
    rb.add(&skel.maps.events, |d: &[u8]| {
        if let Some(e) = parse_event(d, offset_ns) {
            events.borrow_mut().push(e);
        }
        0
    })
    .map_err(bpf_err("cannot open the UDP monitor's ring buffer"))?;
    let rb = rb
        .build()
        .map_err(bpf_err("cannot open the UDP monitor's ring buffer"))?;
    let _ = ready.send(Ok(()));

    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(cfg.seed);
    let mut next_sample = Instant::now();
    let mut next_buffer = Instant::now();
    let mut samples_opened = 0u64;
    let mut buffer = Vec::new();
    // The table the VNF's socket is listed in (udp, or udp6 for an IPv6 socket).
    let mut table = UdpTable::open_for(cfg.port);
    let real_now = || {
        let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME)
            .expect("CLOCK_REALTIME exists");
        t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
    };
    let mut blocks: Vec<ModeBlock> = Vec::new();
    let mut next_block = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let mut switched = switch.try_iter().last();
        if let Some(rot) = cfg.rotation.as_ref().filter(|_| now >= next_block) {
            let mode = rot
                .order
                .get(blocks.len() % rot.order.len().max(1))
                .copied();
            let mode = mode.filter(|&m| m < rot.modes.len()).unwrap_or(0);
            switched = rot.modes.get(mode).copied();
            if let Some(last) = blocks.last_mut() {
                last.t_end_ns = real_now();
            }
            blocks.push(ModeBlock {
                t_start_ns: 0,
                t_end_ns: 0,
                mode,
            });
            next_block = now + rot.block;
        }
        if let Some(sample) = switched {
            cfg.sample = sample;
            config[4..8].copy_from_slice(&sample.mode().to_ne_bytes());
            skel.maps
                .config
                .update(&zero, &config, MapFlags::ANY)
                .map_err(bpf_err("cannot switch the UDP monitor's sampling"))?;
            next_sample = now;
            if let Some(b) = blocks.last_mut().filter(|b| b.t_start_ns == 0) {
                b.t_start_ns = real_now();
            }
        }
        if let Sample::Windows {
            packets,
            mean_interval_s,
        } = cfg.sample
        {
            if now >= next_sample {
                skel.maps
                    .budget
                    .update(&zero, &i64::from(packets).to_ne_bytes(), MapFlags::ANY)
                    .map_err(bpf_err("cannot open a sample"))?;
                samples_opened += 1;
                let gap_s = -mean_interval_s * (1.0 - rng.gen::<f64>()).ln();
                next_sample = now + Duration::from_secs_f64(gap_s);
            }
        }
        if now >= next_buffer {
            if let Some((rx, drops)) = table.as_mut().and_then(|t| t.fill(cfg.port)) {
                buffer.push(BufferSample {
                    t_ns: real_now(),
                    rx_queue_bytes: rx,
                    drops,
                });
            }
            next_buffer = now + BUFFER_PERIOD;
        }
        // Sleep until the next thing to do: events need no polling (the programs
        // wake this thread when the ring is a quarter full, and what is left is
        // drained at the end), so a wake-up every 2 ms only cost CPU (on the
        // reference VM the thread's time fell from 15–17 to 12–14 ticks in 10 s).
        let mut due = match cfg.sample {
            Sample::Windows { .. } => next_buffer.min(next_sample),
            _ => next_buffer,
        };
        if cfg.rotation.is_some() {
            due = due.min(next_block);
        }
        // Whole milliseconds, rounded up: the wait is epoll's, in ms, and a
        // shorter one would be 0 — a spin until `due`.
        let wait_ms = due
            .saturating_duration_since(Instant::now())
            .as_nanos()
            .div_ceil(1_000_000);
        match rb.poll(Duration::from_millis(wait_ms as u64)) {
            // A signal (nflab's SIGINT/SIGTERM handlers) ended the wait: go on.
            Err(e) if e.kind() == libbpf_rs::ErrorKind::Interrupted => {}
            r => r.map_err(bpf_err("cannot read the UDP monitor's ring buffer"))?,
        }
    }
    if let Some(last) = blocks.last_mut() {
        last.t_end_ns = real_now();
    }
    // Detach first (ingress before egress, so that what is in flight can still
    // leave), then drain what is left.
    drop(sockets);
    drop(links);
    rb.consume()
        .map_err(bpf_err("cannot read the UDP monitor's ring buffer"))?;
    let mut counters = Counters::default();
    for (i, slot) in [
        &mut counters.ringbuf_full,
        &mut counters.ingress,
        &mut counters.sampled,
        &mut counters.egress_not_in_flight,
    ]
    .into_iter()
    .enumerate()
    {
        let v = skel
            .maps
            .counters
            .lookup(&(i as u32).to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf_err("cannot read the UDP monitor's counters"))?;
        *slot = v
            .and_then(|b| {
                b.get(..8)
                    .map(|s| u64::from_ne_bytes(s.try_into().expect("8")))
            })
            .unwrap_or(0);
    }
    let events = events.take();
    let matching = pair(&events, cfg.matching);
    Ok(UdpMonitorResult {
        unmatched: matching.unmatched(),
        matching,
        counters,
        samples_opened,
        buffer,
        blocks,
        rotation_modes: cfg.rotation.map(|r| r.modes).unwrap_or_default(),
    })
}
