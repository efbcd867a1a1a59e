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

/// A mode of a rotation: the programs detached (no monitor at all), or attached
/// and sampling as given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RotationMode {
    /// Neither program attached.
    Detached,
    /// Both attached, taking datagrams as the sample says.
    Attached(Sample),
}

impl RotationMode {
    /// Its name in `[monitor] rotate`.
    pub fn name(&self) -> &'static str {
        match self {
            RotationMode::Detached => "detached",
            RotationMode::Attached(s) => s.name(),
        }
    }

    /// Its value in `monitor_modes.parquet`: −1 detached, else the `config` map's
    /// mode (0 off, 1 sampling, 2 all).
    pub fn value(&self) -> i64 {
        match self {
            RotationMode::Detached => -1,
            RotationMode::Attached(s) => i64::from(s.mode()),
        }
    }
}

/// Modes taking turns in blocks of time: at each block's start the monitor
/// attaches or detaches its programs and rewrites the mode in its `config` map,
/// and records when it did ([`UdpMonitorResult::blocks`]).
#[derive(Debug, Clone)]
pub struct Rotation {
    /// The modes.
    pub modes: Vec<RotationMode>,
    /// Length of a block.
    pub block: Duration,
    /// Index into `modes` of each block in turn (randomised complete blocks,
    /// chosen by the caller: whole rounds); started over when the run outlasts it.
    pub order: Vec<usize>,
}

impl Rotation {
    /// One sentence when the order cannot be followed.
    fn check(&self) -> Result<(), MonitorError> {
        let k = self.modes.len();
        if k == 0 || self.order.is_empty() || !self.order.len().is_multiple_of(k) {
            return Err(MonitorError::Bpf(format!(
                "a rotation needs at least one mode and an order of whole rounds ({} modes, {} blocks)",
                k,
                self.order.len()
            )));
        }
        if let Some(i) = self.order.iter().find(|&&i| i >= k) {
            return Err(MonitorError::Bpf(format!(
                "a rotation's order names mode {i} of {k}"
            )));
        }
        Ok(())
    }
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
    /// The VNF socket's drop counter read at the switch that opened the block
    /// (`None`: the socket's line could not be read).
    pub drops_start: Option<u64>,
    /// The same at the switch that closed it.
    pub drops_end: Option<u64>,
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
    /// Times the count of taken datagrams in flight was set back to zero because
    /// the socket had dropped since the last sample opened, [`STALE_AFTER`] ago
    /// (see there).
    pub flying_resets: u64,
}

/// How long after a sample opened its datagrams still counted in flight are taken
/// for dropped, when the VNF's socket has dropped datagrams since. A taken datagram
/// the socket drops never reaches egress: without this, `flying` would stay above
/// zero and the egress program would take its exact path for every frame of the
/// host until the run ends (sampling's cost under overload would become every
/// frame's). A datagram genuinely held longer than this by a VNF whose socket is
/// dropping loses its pair (counted as unmatched), never gets a wrong one.
pub const STALE_AFTER: Duration = Duration::from_millis(20);

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
    pub rotation_modes: Vec<RotationMode>,
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
        if let Some(r) = &cfg.rotation {
            r.check()?;
        }
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
    /// map, the programs stay loaded and attached. Ignored during a rotation
    /// (the rotation sets the mode).
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

/// Set the `flying` count to zero if it is above; whether it was.
fn reset_if_flying(flying: &impl MapCore) -> Result<bool, MonitorError> {
    let zero = 0u32.to_ne_bytes();
    let now = flying
        .lookup(&zero, MapFlags::ANY)
        .map_err(bpf_err("cannot read the UDP monitor's flying count"))?
        .and_then(|b| Some(i64::from_ne_bytes(b.get(..8)?.try_into().ok()?)))
        .unwrap_or(0);
    if now <= 0 {
        return Ok(false);
    }
    flying
        .update(&zero, &0i64.to_ne_bytes(), MapFlags::ANY)
        .map_err(bpf_err("cannot reset the UDP monitor's flying count"))?;
    Ok(true)
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
    skel.maps
        .config
        .update(&zero, &config, MapFlags::ANY)
        .map_err(bpf_err("cannot configure the UDP monitor"))
        .map_err(fail)?;
    // Ingress on the VNF's socket(s), egress on the tracepoint.
    let attach = |sockets: &mut [VnfSocket]| -> Result<Vec<libbpf_rs::Link>, MonitorError> {
        for s in sockets.iter_mut() {
            s.attach(&skel.progs.udp_ingress)?;
        }
        let a = bpf_err("cannot attach the UDP monitor");
        Ok(vec![skel.progs.udp_egress.attach().map_err(&a)?])
    };
    let mut links = attach(&mut sockets).map_err(fail)?;
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

    // Not the run's seed itself: the relay draws its delays from that stream.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x004b_4f4d_6f6e);
    let mut next_sample = Instant::now();
    let mut next_buffer = Instant::now();
    let mut samples_opened = 0u64;
    // The last sample's opening and the socket's drop counter then.
    let mut last_sample: Option<(Instant, Option<u64>)> = None;
    let mut flying_resets = 0u64;
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
    let set_mode = |config: &mut Vec<u8>, sample: Sample| {
        config[4..8].copy_from_slice(&sample.mode().to_ne_bytes());
        skel.maps
            .config
            .update(&zero, config, MapFlags::ANY)
            .map_err(bpf_err("cannot switch the UDP monitor's sampling"))
    };
    let exp_gap = |rng: &mut rand_chacha::ChaCha8Rng, mean_s: f64| {
        Duration::from_secs_f64(-mean_s * (1.0 - rng.gen::<f64>()).ln())
    };
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        // During a rotation the rotation sets the mode: a switch asked is ignored.
        let switched = switch.try_iter().last().filter(|_| cfg.rotation.is_none());
        if let Some(sample) = switched {
            cfg.sample = sample;
            set_mode(&mut config, sample)?;
            next_sample = now;
        }
        if let Some(rot) = cfg.rotation.as_ref().filter(|_| now >= next_block) {
            let drops = table
                .as_mut()
                .and_then(|t| t.fill(cfg.port))
                .map(|(_, d)| d);
            if let Some(last) = blocks.last_mut() {
                last.t_end_ns = real_now();
                last.drops_end = drops;
            }
            let mode = rot.order[blocks.len() % rot.order.len()];
            match rot.modes[mode] {
                RotationMode::Detached => {
                    for s in sockets.iter_mut() {
                        s.detach();
                    }
                    links.clear();
                    cfg.sample = Sample::Off;
                }
                RotationMode::Attached(sample) => {
                    cfg.sample = sample;
                    set_mode(&mut config, sample)?;
                    // What an earlier block left: taken datagrams the socket
                    // dropped would keep `flying` above zero and the egress
                    // program on its exact path in every later block; a sample's
                    // unused budget would open this block.
                    for (map, what) in
                        [(&skel.maps.flying, "flying"), (&skel.maps.budget, "budget")]
                    {
                        map.update(&zero, &0i64.to_ne_bytes(), MapFlags::ANY)
                            .map_err(bpf_err(&format!("cannot reset the UDP monitor's {what}")))?;
                    }
                    if links.is_empty() {
                        links = attach(&mut sockets)?;
                    }
                    // The block's first sample at an exponential gap, as every other.
                    if let Sample::Windows {
                        mean_interval_s, ..
                    } = sample
                    {
                        next_sample = now + exp_gap(&mut rng, mean_interval_s);
                    }
                }
            }
            blocks.push(ModeBlock {
                t_start_ns: real_now(),
                t_end_ns: 0,
                mode,
                drops_start: drops,
                drops_end: None,
            });
            next_block = now + rot.block;
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
                next_sample = now + exp_gap(&mut rng, mean_interval_s);
                last_sample = Some((now, buffer.last().map(|b: &BufferSample| b.drops)));
            }
        }
        if now >= next_buffer {
            if let Some((rx, drops)) = table.as_mut().and_then(|t| t.fill(cfg.port)) {
                buffer.push(BufferSample {
                    t_ns: real_now(),
                    rx_queue_bytes: rx,
                    drops,
                });
                let stale = matches!(cfg.sample, Sample::Windows { .. })
                    && last_sample.is_some_and(|(at, before)| {
                        now.duration_since(at) >= STALE_AFTER && before.is_none_or(|b| drops > b)
                    });
                if stale && reset_if_flying(&skel.maps.flying)? {
                    flying_resets += 1;
                    last_sample = None;
                }
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
        last.drops_end = table
            .as_mut()
            .and_then(|t| t.fill(cfg.port))
            .map(|(_, d)| d);
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
    counters.flying_resets = flying_resets;
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
