//! The worker: one thread, one chain, two ports (DESIGN §4).
//!
//! Each loop iteration (a "breath"):
//!
//! 1. **Receive** at most `batch` frames from the input port into the
//!    chain's input link. How it waits is the receive mode: `busy-poll`
//!    never sleeps, `blocking` sleeps in the kernel until a frame or the next
//!    deadline, `adaptive` busy-polls while frames keep coming and blocks
//!    after `adaptive_spin_us` without any.
//! 2. **Push** the chain: every app handles what is readable.
//! 3. **Transmit** the chain's output the way DPDK's `l2fwd` does (seed 002):
//!    full batches of `batch` leave at once; a partial batch waits for the
//!    periodic drain timer (`drain_us`), which fires every `drain_us` whether
//!    or not anything waits. At a rate far below the batch rate every flush
//!    is a timer flush, so each packet waits a uniform 0..`drain_us` — which
//!    is what explains the 56 µs mean that seed 002 measured behind a
//!    "batch of 32". `drain_us = 0` sends every packet in the breath it came.
//!
//! **Sleeping through arrivals.** A waiting worker normally sleeps in the
//! port (`ppoll`), so that a new frame wakes it. A worker that holds frames
//! in a delay line needs no such wake-up before the chain's
//! [minimum hold](crate::app::Chain::min_hold_ns) has passed: a frame that
//! comes now cannot be due sooner. If the input port stamps frames in the
//! kernel (an AF_PACKET ring), the worker then sleeps in an absolute
//! `clock_nanosleep` instead — to its next deadline or, if that is further,
//! to the hold's end less a margin — and the frames that came meanwhile keep
//! their kernel receive time. Both matter on a VM: the wake
//! from `ppoll` on a socket was ≈ 10 µs later than from `clock_nanosleep`
//! (`bench/link`), and a frame stamped when it is read rather than when it
//! came carries the worker's wake-up lateness into its due time.
//!
//! Counters: polls that delivered frames (busy) and those that did not
//! (idle), a histogram of receive batch sizes, flushes by size and by timer,
//! and TSC cycles spent in busy breaths, so `cycles_busy / tx_packets` is the
//! per-packet cost `c_IO + c_task` of seed 000's model when the worker is
//! CPU-bound.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nflab_io::{IoError, IoStats, PacketIo, TsSource};
use serde::{Deserialize, Serialize};

use crate::app::{AppStats, Chain, LinkStats};
use crate::link::Link;
use crate::packet::{self, Packet};
use crate::tsc;

/// Longest a blocking receive sleeps before it looks at the stop flag again.
const MAX_BLOCK: Duration = Duration::from_millis(10);

/// Longest a worker sleeps through arrivals without reading its input: an
/// AF_PACKET ring of 2048 frames (`nflab-lab`'s port) that a veth fills at
/// ≈ 2 Mpps would overflow after ≈ 1 ms.
const MAX_BLIND_NS: u64 = 1_000_000;

/// How much sooner than the chain's minimum hold a worker sleeping through
/// arrivals wakes: the kernel stamps a frame when it is received (`netif_rx`)
/// and puts it into the ring later, in a softirq, so a frame stamped just
/// before the worker looked at the ring may not be in it yet.
const HELD_MARGIN_NS: u64 = 50_000;

/// A kernel stamp older than this when read is not believed (the real-time
/// clock was set between the stamp and the read); the read time is used.
const MAX_STAMP_AGE_NS: u64 = 1_000_000_000;

/// Default of [`WorkerConfig::wake_early_ns`]: off. On the 2-vCPU VM this was
/// built on, 100 µs trimmed the link emulator's median by 30 µs, but runs with
/// it lost frames to generator stalls of seconds that runs without it did not
/// show (docs/dataplane.md); until that is understood it is opt-in.
pub const DEFAULT_WAKE_EARLY_NS: u64 = 0;

/// How the worker waits for frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum RxMode {
    /// Poll without sleeping: lowest latency, one core at 100 %.
    #[default]
    BusyPoll,
    /// Sleep in `poll(2)` until a frame arrives or a deadline is due.
    Blocking,
    /// Busy-poll while frames come; block after `adaptive_spin_us` idle.
    Adaptive,
}

impl RxMode {
    /// Name as written in configs.
    pub fn as_str(&self) -> &'static str {
        match self {
            RxMode::BusyPoll => "busy-poll",
            RxMode::Blocking => "blocking",
            RxMode::Adaptive => "adaptive",
        }
    }

    /// Parse a config value; the error names the valid ones.
    pub fn parse(s: &str) -> Result<RxMode, String> {
        match s {
            "busy-poll" => Ok(RxMode::BusyPoll),
            "blocking" => Ok(RxMode::Blocking),
            "adaptive" => Ok(RxMode::Adaptive),
            other => Err(format!(
                "rx_mode \"{other}\" is not known: use busy-poll, blocking or adaptive"
            )),
        }
    }
}

/// Settings of a worker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkerConfig {
    /// Largest receive batch and the size of a full transmit batch.
    pub batch: usize,
    /// How to wait for frames.
    pub rx_mode: RxMode,
    /// Drain timer period in ns; 0 sends partial batches at once.
    pub drain_ns: u64,
    /// Capacity of every link in packets.
    pub link_capacity: usize,
    /// Adaptive mode: idle time before blocking.
    pub adaptive_spin_ns: u64,
    /// Blocking and adaptive modes: how long before a timed app's deadline
    /// (a delay line's next release) a sleeping worker wakes, to poll until
    /// the deadline is due. A thread woken by a timer on a VM runs tens of
    /// µs late, and by how much varies; spinning the last stretch turns that
    /// lateness into a little CPU. 0 sleeps right up to the deadline.
    pub wake_early_ns: u64,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            batch: 32,
            rx_mode: RxMode::BusyPoll,
            drain_ns: 0,
            link_capacity: 1024,
            adaptive_spin_ns: 50_000,
            wake_early_ns: DEFAULT_WAKE_EARLY_NS,
        }
    }
}

/// Why a worker stopped before it was asked to.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// An interface went away (deleted, moved or set down) while running.
    #[error("interface '{ifname}' vanished or went down while the data plane was running ({source}); the counters up to then are kept")]
    InterfaceGone {
        /// The interface.
        ifname: String,
        /// The OS error.
        source: IoError,
    },
    /// Any other I/O failure.
    #[error("data plane I/O on '{ifname}' failed: {source}")]
    Io {
        /// The interface.
        ifname: String,
        /// The error.
        source: IoError,
    },
}

/// One port of a worker: a backend and the interface name it is bound to.
pub struct Port {
    /// Interface name (for counters and errors).
    pub ifname: String,
    /// The backend.
    pub io: Box<dyn PacketIo>,
}

/// Counters of one port.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PortStats {
    /// Interface.
    pub ifname: String,
    /// Backend name.
    pub backend: String,
    /// Frames received.
    pub rx_packets: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Frames the kernel dropped before the worker saw them.
    pub rx_kernel_drops: u64,
    /// Transmit calls that queued fewer frames than asked.
    pub tx_ring_full: u64,
}

impl PortStats {
    fn new(p: &Port) -> PortStats {
        let s: IoStats = p.io.stats();
        PortStats {
            ifname: p.ifname.clone(),
            backend: p.io.name().to_string(),
            rx_packets: s.rx_packets,
            tx_packets: s.tx_packets,
            rx_kernel_drops: s.rx_kernel_drops,
            tx_ring_full: s.tx_ring_full,
        }
    }
}

/// Counters of the worker loop.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct LoopStats {
    /// Batch size setting.
    pub batch: usize,
    /// Receive mode setting.
    pub rx_mode: String,
    /// Drain timer setting in µs.
    pub drain_us: f64,
    /// Loop iterations.
    pub iterations: u64,
    /// Receive polls that delivered at least one frame.
    pub busy_polls: u64,
    /// Receive polls that delivered nothing.
    pub idle_polls: u64,
    /// Receive batch size → number of polls (busy polls only).
    pub rx_batch_hist: BTreeMap<usize, u64>,
    /// Mean receive batch size over busy polls.
    pub rx_batch_mean: f64,
    /// Transmissions of a full batch.
    pub flush_by_size: u64,
    /// Transmissions of a partial batch when the drain timer fired.
    pub flush_by_timer: u64,
    /// Transmissions of a partial batch at once (`drain_us = 0`).
    pub flush_immediate: u64,
    /// Frames received that were longer than a packet buffer and cut.
    pub rx_truncated: u64,
    /// Frames received while the input link was full, dropped.
    pub rx_link_full: u64,
    /// TSC cycles of iterations that moved packets.
    pub cycles_busy: u64,
    /// TSC cycles of all iterations.
    pub cycles_total: u64,
    /// TSC ticks per second (calibrated).
    pub tsc_hz: f64,
    /// `cycles_busy / packets sent`, the per-packet cost when CPU-bound.
    pub cycles_per_packet: f64,
    /// Wall-clock time of `run`, ns.
    pub wall_ns: u64,
    /// CPU time of the worker thread during `run`, ns.
    pub cpu_ns: u64,
    /// Frames whose receive stamp is the kernel's (the rest: the worker's
    /// clock when it read them).
    pub kernel_stamped: u64,
    /// Sleeps through arrivals (`clock_nanosleep` while frames were held).
    pub held_sleeps: u64,
    /// Packet buffers allocated after start-up (should stay 0).
    pub pool_allocations: u64,
}

/// Everything a worker counted: what `nflab dut --stats` prints and what a
/// run stores as `dut.json`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WorkerStats {
    /// CPU the worker was pinned to, if any.
    pub cpu: Option<usize>,
    /// Functions in order.
    pub pipeline: Vec<String>,
    /// The loop.
    pub worker: LoopStats,
    /// Input then output port.
    pub ports: Vec<PortStats>,
    /// Every link of the chain.
    pub links: Vec<LinkStats>,
    /// Every app of the chain.
    pub apps: Vec<AppStats>,
    /// Why the worker stopped early, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With several workers: each one's own counters (the fields above are their sum,
    /// see [`WorkerStats::merged`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_worker: Vec<WorkerStats>,
}

impl WorkerStats {
    /// The counters of the workers of one data plane as one. Counts are summed: the
    /// loop's, the ports', links' and apps' position by position (every worker runs
    /// the same chain on queues of the same two ports), and the numbers inside app
    /// details key by key and element by element (so `extern-dispatch`'s
    /// `per_instance` becomes the count per instance over all workers). Settings,
    /// `cpu` and `tsc_hz` come from the first worker, `wall_ns` is the longest,
    /// `rx_batch_mean` and `cycles_per_packet` are recomputed from the sums, and
    /// `error` is the first worker's that has one. A single worker is returned as is.
    pub fn merged(mut parts: Vec<WorkerStats>) -> Option<WorkerStats> {
        if parts.len() <= 1 {
            return parts.pop();
        }
        let mut total = parts[0].clone();
        for p in &parts[1..] {
            total.add(p);
        }
        total.derive();
        total.per_worker = parts;
        Some(total)
    }

    /// Set the figures derived from the counts: `rx_batch_mean` from the batch
    /// histogram, `cycles_per_packet` from the busy cycles and the frames both ports sent.
    fn derive(&mut self) {
        let w = &mut self.worker;
        let polls: u64 = w.rx_batch_hist.values().sum();
        let frames: u64 = w.rx_batch_hist.iter().map(|(k, v)| *k as u64 * v).sum();
        w.rx_batch_mean = if polls > 0 {
            frames as f64 / polls as f64
        } else {
            0.0
        };
        let sent: u64 = self.ports.iter().map(|p| p.tx_packets).sum();
        w.cycles_per_packet = if sent > 0 {
            w.cycles_busy as f64 / sent as f64
        } else {
            0.0
        };
    }

    fn add(&mut self, o: &WorkerStats) {
        let (w, x) = (&mut self.worker, &o.worker);
        for (a, b) in [
            (&mut w.iterations, x.iterations),
            (&mut w.busy_polls, x.busy_polls),
            (&mut w.idle_polls, x.idle_polls),
            (&mut w.flush_by_size, x.flush_by_size),
            (&mut w.flush_by_timer, x.flush_by_timer),
            (&mut w.flush_immediate, x.flush_immediate),
            (&mut w.rx_truncated, x.rx_truncated),
            (&mut w.rx_link_full, x.rx_link_full),
            (&mut w.cycles_busy, x.cycles_busy),
            (&mut w.cycles_total, x.cycles_total),
            (&mut w.cpu_ns, x.cpu_ns),
            (&mut w.kernel_stamped, x.kernel_stamped),
            (&mut w.held_sleeps, x.held_sleeps),
            (&mut w.pool_allocations, x.pool_allocations),
        ] {
            *a += b;
        }
        w.wall_ns = w.wall_ns.max(x.wall_ns);
        for (k, v) in &x.rx_batch_hist {
            *w.rx_batch_hist.entry(*k).or_default() += v;
        }
        for (a, b) in self.ports.iter_mut().zip(&o.ports) {
            a.rx_packets += b.rx_packets;
            a.tx_packets += b.tx_packets;
            a.rx_kernel_drops += b.rx_kernel_drops;
            a.tx_ring_full += b.tx_ring_full;
        }
        for (a, b) in self.links.iter_mut().zip(&o.links) {
            a.counters.tx_packets += b.counters.tx_packets;
            a.counters.tx_bytes += b.counters.tx_bytes;
            a.counters.tx_drops += b.counters.tx_drops;
            a.counters.rx_packets += b.counters.rx_packets;
        }
        for (a, b) in self.apps.iter_mut().zip(&o.apps) {
            a.packets_in += b.packets_in;
            a.packets_out += b.packets_out;
            a.drops += b.drops;
            a.held += b.held;
            add_json(&mut a.detail, &b.detail);
        }
        if self.error.is_none() {
            self.error.clone_from(&o.error);
        }
    }
}

/// `a += b` for the numbers in two JSON values of the same shape: objects key by key,
/// arrays element by element (the longer one's tail kept); anything else stays `a`.
fn add_json(a: &mut serde_json::Value, b: &serde_json::Value) {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let sum = match (x.as_u64(), y.as_u64()) {
                (Some(p), Some(q)) => Value::from(p.saturating_add(q)),
                _ => Value::from(x.as_f64().unwrap_or(0.0) + y.as_f64().unwrap_or(0.0)),
            };
            *x = match sum {
                Value::Number(n) => n,
                _ => return,
            };
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, v) in y.iter().enumerate() {
                match x.get_mut(i) {
                    Some(e) => add_json(e, v),
                    None => x.push(v.clone()),
                }
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in y {
                match x.get_mut(k) {
                    Some(e) => add_json(e, v),
                    None => {
                        x.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (a @ Value::Null, b) => *a = b.clone(),
        _ => {}
    }
}

/// One worker: input port → chain → output port.
pub struct Worker {
    cfg: WorkerConfig,
    chain: Chain,
    input: Port,
    output: Port,
    stats: LoopStats,
    hist: Vec<u64>,
    cpu: Option<usize>,
    error: Option<String>,
    /// Whether the clock is read at all (see `run_loop`).
    clocked: bool,
    /// Whether the last frame received carried a kernel stamp.
    input_stamped: bool,
}

fn is_gone(e: &IoError) -> bool {
    match e {
        IoError::Syscall { source, .. } => matches!(
            source.raw_os_error(),
            Some(libc::ENETDOWN) | Some(libc::ENXIO) | Some(libc::ENODEV)
        ),
        IoError::NoSuchInterface { .. } | IoError::InterfaceDown { .. } => true,
        _ => false,
    }
}

fn classify(ifname: &str, e: IoError) -> WorkerError {
    if is_gone(&e) {
        WorkerError::InterfaceGone {
            ifname: ifname.to_string(),
            source: e,
        }
    } else {
        WorkerError::Io {
            ifname: ifname.to_string(),
            source: e,
        }
    }
}

fn read_clock(clocked: bool) -> u64 {
    if clocked {
        nflab_io::clock::monotonic_ns()
    } else {
        0
    }
}

/// A kernel receive stamp (real time) on the worker's monotonic clock, given
/// the clocks' `offset` ([`nflab_io::clock::realtime_minus_monotonic_ns`]) and
/// the time the batch was `read`. Later than `read` is right for a frame that
/// came while the batch was read; more than [`MAX_STAMP_AGE_NS`] earlier, the
/// real-time clock was set in between, and the read time is used.
fn kernel_stamp_on_monotonic(real: u64, offset: i64, read: u64) -> u64 {
    let stamp = real.saturating_add_signed(-offset);
    if read.saturating_sub(stamp) > MAX_STAMP_AGE_NS {
        read
    } else {
        stamp
    }
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid local `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Send up to `n` packets of `link` through `port`; returns how many left.
fn send(port: &mut Port, link: &mut Link, n: usize) -> Result<usize, WorkerError> {
    let n = n.min(link.nreadable());
    if n == 0 {
        return Ok(0);
    }
    let sent = port
        .io
        .tx_batch(n, &mut |_, buf| match link.receive() {
            Some(p) => {
                let len = p.len().min(buf.len());
                buf[..len].copy_from_slice(&p.data()[..len]);
                len
            }
            None => 0,
        })
        .map_err(|e| classify(&port.ifname, e))?;
    port.io.flush_tx().map_err(|e| classify(&port.ifname, e))?;
    Ok(sent)
}

impl Worker {
    /// A worker over `chain`, receiving on `input` and sending on `output`
    /// (and `back` traffic on `input`). Fills this thread's packet pool, so
    /// build the worker on the thread that runs it.
    pub fn new(cfg: WorkerConfig, chain: Chain, input: Port, output: Port) -> Worker {
        let cfg = WorkerConfig {
            batch: cfg.batch.max(1),
            link_capacity: cfg.link_capacity.max(cfg.batch),
            ..cfg
        };
        // Every link full plus a batch in flight, some slack, and what the
        // apps' buffers want (a delay line's typical occupancy).
        packet::preallocate((cfg.link_capacity * 4).max(4096) + chain.pool_reserve());
        let stats = LoopStats {
            batch: cfg.batch,
            rx_mode: cfg.rx_mode.as_str().into(),
            drain_us: cfg.drain_ns as f64 / 1e3,
            tsc_hz: tsc::tsc_hz(),
            pool_allocations: packet::pool_allocations(),
            ..LoopStats::default()
        };
        Worker {
            hist: vec![0; cfg.batch + 1],
            cfg,
            chain,
            input,
            output,
            stats,
            cpu: None,
            error: None,
            clocked: false,
            input_stamped: false,
        }
    }

    /// Record the CPU this worker's thread is pinned to (for the counters).
    pub fn set_cpu(&mut self, cpu: Option<usize>) {
        self.cpu = cpu;
    }

    /// The chain, e.g. to feed it in tests.
    pub fn chain(&mut self) -> &mut Chain {
        &mut self.chain
    }

    /// Run until `stop` is set or a port fails. On failure the counters up
    /// to then stay available through [`Worker::stats`].
    pub fn run(&mut self, stop: &AtomicBool) -> Result<(), WorkerError> {
        // Blocking waits end on the delayer's and the drain timer's deadlines, not up to
        // 50 µs later; failure only costs precision.
        let _ = nflab_io::clock::set_timer_slack_ns(1);
        let pool0 = packet::pool_allocations();
        let wall0 = nflab_io::clock::monotonic_ns();
        let cpu0 = thread_cpu_ns();
        let r = self.run_loop(stop);
        // Whatever is left in the output goes out, unless the port is gone.
        if r.is_ok() {
            let _ = self.flush_all();
        }
        self.stats.wall_ns += nflab_io::clock::monotonic_ns() - wall0;
        self.stats.cpu_ns += thread_cpu_ns().saturating_sub(cpu0);
        self.stats.pool_allocations += packet::pool_allocations() - pool0;
        if let Err(e) = &r {
            self.error = Some(e.to_string());
        }
        r
    }

    fn flush_all(&mut self) -> Result<(), WorkerError> {
        for _ in 0..64 {
            let out = self.chain.output().nreadable();
            let back = self.chain.back().nreadable();
            if out + back == 0 {
                break;
            }
            send(&mut self.output, self.chain.output(), out)?;
            send(&mut self.input, self.chain.back(), back)?;
        }
        Ok(())
    }

    fn block_timeout(&mut self, now: u64, last_drain: u64) -> Duration {
        let mut deadline = now + MAX_BLOCK.as_nanos() as u64;
        if self.cfg.drain_ns > 0 && !self.chain.output().is_empty() {
            deadline = deadline.min(last_drain + self.cfg.drain_ns);
        }
        if let Some(d) = self.chain.next_deadline_ns() {
            deadline = deadline.min(d.saturating_sub(self.cfg.wake_early_ns));
        }
        Duration::from_nanos(deadline.saturating_sub(now))
    }

    /// `CLOCK_MONOTONIC` if this worker reads the clock at all, else 0.
    fn clock(&self) -> u64 {
        read_clock(self.clocked)
    }

    /// When to wake if the worker may sleep through arrivals rather than wait
    /// on its input for `timeout` (the module's "sleeping through arrivals"):
    /// it holds frames, the frames bring their own (kernel) receive stamps,
    /// and it sleeps no longer than any new frame will be held, less
    /// [`HELD_MARGIN_NS`], nor than [`MAX_BLIND_NS`].
    fn held_wake(&self, now: u64, timeout: Duration) -> Option<u64> {
        let wait = timeout.as_nanos() as u64;
        // The cheap tests first: a polling worker asks this every breath.
        if wait == 0 || !self.input_stamped || self.chain.next_deadline_ns().is_none() {
            return None;
        }
        let blind = self.chain.min_hold_ns().saturating_sub(HELD_MARGIN_NS);
        (blind > 0).then(|| now + wait.min(blind).min(MAX_BLIND_NS))
    }

    /// Read at most `max` frames into the chain's input, waiting up to
    /// `timeout` for the first; returns how many and when they were read.
    ///
    /// A frame's receive stamp is the kernel's when the port has one, else
    /// the time the batch was read (one clock read per batch), never the
    /// loop's `now`: after a blocking wait `now` is from before it, and a
    /// worker descheduled between reading the clock and the ring (a busy VM
    /// stalls one for milliseconds) would stamp frames that came in meanwhile
    /// too early — a delay line would release them before their time.
    fn receive(
        &mut self,
        max: usize,
        timeout: Duration,
    ) -> Result<(usize, Option<u64>), WorkerError> {
        let clocked = self.clocked;
        let (stats, chain) = (&mut self.stats, &mut self.chain);
        let mut read_ns = None;
        let mut realtime_offset = None;
        let mut stamped = self.input_stamped;
        let n = self
            .input
            .io
            .rx_batch(max, timeout, &mut |frame, meta| {
                let mut p = Packet::from_slice(frame);
                let read = *read_ns.get_or_insert_with(|| read_clock(clocked));
                p.rx_ns = match meta.ts_ns {
                    Some(real) if clocked && meta.ts_source == TsSource::KernelSoftware => {
                        stamped = true;
                        stats.kernel_stamped += 1;
                        let offset = *realtime_offset
                            .get_or_insert_with(nflab_io::clock::realtime_minus_monotonic_ns);
                        kernel_stamp_on_monotonic(real, offset, read)
                    }
                    _ => {
                        stamped = false;
                        read
                    }
                };
                stats.rx_truncated += (frame.len() > p.len()) as u64;
                if !chain.input().transmit(p) {
                    stats.rx_link_full += 1;
                }
            })
            .map_err(|e| classify(&self.input.ifname, e))?;
        self.input_stamped = stamped;
        Ok((n, read_ns))
    }

    fn run_loop(&mut self, stop: &AtomicBool) -> Result<(), WorkerError> {
        let batch = self.cfg.batch;
        // Time matters to timed apps, the drain timer and the waiting receive modes;
        // a busy-polling l2fwd or router chain runs without reading the clock.
        self.clocked = self.chain.needs_clock()
            || self.cfg.drain_ns > 0
            || self.cfg.rx_mode != RxMode::BusyPoll;
        let mut last_drain = self.clock();
        let mut last_busy = last_drain;
        while !stop.load(Ordering::Relaxed) {
            let c0 = tsc::rdtsc();
            let now = self.clock();
            self.stats.iterations += 1;

            // 1. Receive.
            let timeout = match self.cfg.rx_mode {
                RxMode::BusyPoll => Duration::ZERO,
                RxMode::Blocking => self.block_timeout(now, last_drain),
                RxMode::Adaptive if now - last_busy >= self.cfg.adaptive_spin_ns => {
                    self.block_timeout(now, last_drain)
                }
                RxMode::Adaptive => Duration::ZERO,
            };
            let room = self.chain.input().room().min(batch);
            // Sleeping through arrivals: a look at the input first, so that every frame
            // left unread has come after `now`, then the sleep instead of the wait.
            let held_wake = self.held_wake(now, timeout);
            let wait = if held_wake.is_some() {
                Duration::ZERO
            } else {
                timeout
            };
            let (n, read_ns) = self.receive(room.max(1), wait)?;
            // The time the batch was read, if a frame came; after a wait or sleep, now.
            let now = match (read_ns, held_wake) {
                (Some(t), _) => t,
                (None, Some(wake)) => {
                    nflab_io::clock::sleep_until_monotonic_ns(wake);
                    self.stats.held_sleeps += 1;
                    self.clock()
                }
                (None, None) if timeout.is_zero() => now,
                (None, None) => self.clock(),
            };
            if n > 0 {
                self.stats.busy_polls += 1;
                self.hist[n.min(batch)] += 1;
                last_busy = now;
            } else {
                self.stats.idle_polls += 1;
            }

            // 2. Push.
            let held_before = self.chain.in_flight();
            self.chain.breathe(now);

            // 3. Transmit: full batches now, the rest on the drain timer.
            let mut sent = 0;
            while self.chain.output().nreadable() >= batch {
                let k = send(&mut self.output, self.chain.output(), batch)?;
                sent += k;
                self.stats.flush_by_size += 1;
                if k < batch {
                    break;
                }
            }
            let left = self.chain.output().nreadable();
            if self.cfg.drain_ns == 0 {
                if left > 0 {
                    sent += send(&mut self.output, self.chain.output(), left)?;
                    self.stats.flush_immediate += 1;
                }
            } else if now - last_drain >= self.cfg.drain_ns {
                // Periodic, as l2fwd's `BURST_TX_DRAIN_US` check.
                if left > 0 {
                    sent += send(&mut self.output, self.chain.output(), left)?;
                    self.stats.flush_by_timer += 1;
                }
                last_drain = now;
            }
            let back = self.chain.back().nreadable();
            if back > 0 {
                sent += send(&mut self.input, self.chain.back(), back)?;
            }
            let cycles = tsc::rdtsc().wrapping_sub(c0);
            self.stats.cycles_total += cycles;
            if n > 0 || sent > 0 || held_before > 0 {
                self.stats.cycles_busy += cycles;
            }
        }
        Ok(())
    }

    /// A snapshot of every counter.
    pub fn stats(&self) -> WorkerStats {
        let mut w = self.stats.clone();
        w.rx_batch_hist = self
            .hist
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (i, c))
            .collect();
        let mut stats = WorkerStats {
            cpu: self.cpu,
            pipeline: self.chain.names().iter().map(|s| s.to_string()).collect(),
            worker: w,
            ports: vec![PortStats::new(&self.input), PortStats::new(&self.output)],
            links: self.chain.link_stats(),
            apps: self.chain.app_stats(),
            error: self.error.clone(),
            per_worker: Vec::new(),
        };
        stats.derive();
        stats
    }
}

/// Pin the calling thread to `cpu`; the error says why not.
pub fn pin_current_thread(cpu: usize) -> Result<(), String> {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write inside it, and
    // sched_setaffinity reads exactly size_of::<cpu_set_t>() bytes of it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return Err(format!("CPU {cpu} is out of range"));
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "cannot pin the data plane to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::App;
    use crate::l2fwd::L2Fwd;
    use crate::link::Link;
    use nflab_io::MemIo;
    use nflab_wire::MacAddr;
    use std::sync::Arc;

    fn frame(i: u32) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[12] = 0x08;
        f[56..60].copy_from_slice(&i.to_be_bytes());
        f
    }

    /// gen ⇄ (a | worker | b) ⇄ sink over MemIo; returns the frames that came out.
    fn run_worker(cfg: WorkerConfig, frames: usize) -> (Vec<Vec<u8>>, WorkerStats) {
        let (mut gen, a) = MemIo::pair(4096);
        let (b, mut sink) = MemIo::pair(4096);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let h = std::thread::spawn(move || {
            let chain = Chain::new(
                vec![Box::new(L2Fwd::new(
                    MacAddr([2, 0, 0, 0, 0, 1]),
                    MacAddr([2, 0, 0, 0, 0, 2]),
                ))],
                cfg.link_capacity,
            );
            let mut w = Worker::new(
                cfg,
                chain,
                Port {
                    ifname: "a".into(),
                    io: Box::new(a),
                },
                Port {
                    ifname: "b".into(),
                    io: Box::new(b),
                },
            );
            w.run(&stop2).unwrap();
            w.stats()
        });
        let mut sent = 0;
        while sent < frames {
            let k = (frames - sent).min(7);
            sent += gen
                .tx_batch(k, &mut |i, buf| {
                    let f = frame((sent + i) as u32);
                    buf[..60].copy_from_slice(&f);
                    60
                })
                .unwrap();
        }
        let mut out = Vec::new();
        let t0 = std::time::Instant::now();
        while out.len() < frames && t0.elapsed() < Duration::from_secs(10) {
            sink.rx_batch(64, Duration::from_millis(10), &mut |f, _| {
                out.push(f.to_vec())
            })
            .unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        let stats = h.join().unwrap();
        (out, stats)
    }

    /// An app that is always due at one fixed time.
    struct DueAt(u64);

    impl crate::app::App for DueAt {
        fn name(&self) -> &'static str {
            "due-at"
        }
        fn push(&mut self, _: &mut Link, _: &mut crate::app::Output<'_>, _: u64) {}
        fn next_deadline_ns(&self) -> Option<u64> {
            Some(self.0)
        }
    }

    fn sleep_before(wake_early_ns: u64, due: u64, now: u64) -> Duration {
        let cfg = WorkerConfig {
            rx_mode: RxMode::Blocking,
            wake_early_ns,
            ..WorkerConfig::default()
        };
        let (a, b) = (MemIo::pair(8).1, MemIo::pair(8).1);
        let port = |io: MemIo| Port {
            ifname: "m".into(),
            io: Box::new(io),
        };
        let chain = Chain::new(vec![Box::new(DueAt(due))], 8);
        Worker::new(cfg, chain, port(a), port(b)).block_timeout(now, now)
    }

    /// A sleeping worker wakes `wake_early_ns` before a timed app is due
    /// (and then polls), never sleeps past it, and still caps its sleep.
    #[test]
    fn a_blocking_worker_wakes_early_for_a_deadline_and_then_polls() {
        let now = 1_000_000_000;
        let due = now + 3_000_000;
        assert_eq!(sleep_before(0, due, now), Duration::from_nanos(3_000_000));
        assert_eq!(
            sleep_before(100_000, due, now),
            Duration::from_nanos(2_900_000)
        );
        // Inside the early stretch: poll without sleeping until due.
        assert_eq!(sleep_before(100_000, due, due - 50_000), Duration::ZERO);
        assert_eq!(sleep_before(100_000, due, due + 1), Duration::ZERO);
        // A deadline far away: the stop flag is still looked at every MAX_BLOCK.
        assert_eq!(sleep_before(100_000, now + 60_000_000_000, now), MAX_BLOCK);
    }

    fn delayer(delay_us: f64, jitter_us: f64, dist: crate::delayer::Distribution) -> Box<dyn App> {
        let sampler = crate::delayer::DelaySampler::new(dist, delay_us, jitter_us, 1).unwrap();
        Box::new(crate::delayer::Delayer::new(sampler, 64, false))
    }

    /// A blocking worker over `apps`.
    fn blocking_worker(apps: Vec<Box<dyn App>>) -> Worker {
        let cfg = WorkerConfig {
            rx_mode: RxMode::Blocking,
            ..WorkerConfig::default()
        };
        let (a, b) = (MemIo::pair(8).1, MemIo::pair(8).1);
        let port = |io: MemIo| Port {
            ifname: "m".into(),
            io: Box::new(io),
        };
        Worker::new(cfg, Chain::new(apps, 8), port(a), port(b))
    }

    /// A frame received at `now` goes into the chain.
    fn hold_one(w: &mut Worker, now: u64) {
        let mut p = Packet::from_slice(&frame(0));
        p.rx_ns = now;
        assert!(w.chain.input().transmit(p));
        w.chain.breathe(now);
        assert_eq!(w.chain.in_flight(), 1);
    }

    /// The worker sleeps through arrivals only while it holds frames with
    /// kernel stamps, and never longer than a new frame would be held.
    #[test]
    fn a_worker_sleeps_through_arrivals_only_within_the_chains_minimum_hold() {
        use crate::delayer::Distribution::{Normal, Uniform};
        let now = 1_000_000_000;
        let us = Duration::from_micros;
        let mut w = blocking_worker(vec![delayer(5_000.0, 0.0, Normal)]);
        assert_eq!(w.chain.min_hold_ns(), 5_000_000);
        w.input_stamped = true;
        // Nothing held: only a new frame can give it work, so it must wake for one.
        assert_eq!(w.held_wake(now, us(700)), None);
        hold_one(&mut w, now);
        // Frames stamped by the worker itself: its wake-up would be in their stamps.
        w.input_stamped = false;
        assert_eq!(w.held_wake(now, us(700)), None);
        w.input_stamped = true;
        // Due within the hold: sleep to it, in slices of at most MAX_BLIND_NS.
        assert_eq!(w.held_wake(now, us(700)), Some(now + 700_000));
        assert_eq!(w.held_wake(now, us(3_000)), Some(now + MAX_BLIND_NS));
        // Polling: nothing to sleep through.
        assert_eq!(w.held_wake(now, Duration::ZERO), None);
        // A short hold: sleep to its end less the margin, then look again.
        let mut short = blocking_worker(vec![delayer(400.0, 0.0, Normal)]);
        short.input_stamped = true;
        hold_one(&mut short, now);
        assert_eq!(
            short.held_wake(now, us(400)),
            Some(now + 400_000 - HELD_MARGIN_NS)
        );
        // A normal jitter can draw 0: no frame is sure to be held at all.
        let mut j = blocking_worker(vec![delayer(5_000.0, 300.0, Normal)]);
        j.input_stamped = true;
        hold_one(&mut j, now);
        assert_eq!(j.chain.min_hold_ns(), 0);
        assert_eq!(j.held_wake(now, us(10)), None);
        // A uniform one holds at least mean − √3·sd.
        let u = blocking_worker(vec![delayer(5_000.0, 1_000.0, Uniform)]);
        assert_eq!(u.chain.min_hold_ns(), 3_267_949);
    }

    /// The chain's hold is its first app's: an app in front that acts at once
    /// makes it 0, and two delay lines (each counting from the receive stamp)
    /// do not add up.
    #[test]
    fn a_chains_minimum_hold_is_its_first_apps() {
        use crate::delayer::Distribution::Normal;
        let log = || Box::new(ReleaseLog(Arc::default())) as Box<dyn App>;
        let chain = |apps| Chain::new(apps, 8);
        assert_eq!(chain(vec![]).min_hold_ns(), 0);
        assert_eq!(
            chain(vec![log(), delayer(5_000.0, 0.0, Normal)]).min_hold_ns(),
            0
        );
        let two = vec![delayer(5_000.0, 0.0, Normal), delayer(3_000.0, 0.0, Normal)];
        assert_eq!(chain(two).min_hold_ns(), 5_000_000);
        assert_eq!(
            chain(vec![delayer(5_000.0, 0.0, Normal), log()]).min_hold_ns(),
            5_000_000
        );
    }

    /// An in-memory port with a worse or a better reader: it is descheduled
    /// for `stall` inside every receive (as a worker on a busy VM is between
    /// reading the clock and the ring), and with `kernel_shift_ns` its frames
    /// carry a kernel stamp that says they came that long before they were
    /// sent into the pair (after, if < 0).
    struct TestPort {
        io: MemIo,
        stall: Duration,
        kernel_shift_ns: Option<i64>,
    }

    impl PacketIo for TestPort {
        fn name(&self) -> &'static str {
            "test-port"
        }
        fn layer(&self) -> nflab_io::Layer {
            self.io.layer()
        }
        fn max_frame_len(&self) -> usize {
            self.io.max_frame_len()
        }
        fn tx_batch(
            &mut self,
            n: usize,
            fill: &mut dyn FnMut(usize, &mut [u8]) -> usize,
        ) -> Result<usize, IoError> {
            self.io.tx_batch(n, fill)
        }
        fn flush_tx(&mut self) -> Result<(), IoError> {
            self.io.flush_tx()
        }
        fn rx_batch(
            &mut self,
            max: usize,
            timeout: Duration,
            sink: &mut dyn FnMut(&[u8], nflab_io::RxMeta),
        ) -> Result<usize, IoError> {
            std::thread::sleep(self.stall);
            let Some(shift) = self.kernel_shift_ns else {
                return self.io.rx_batch(max, timeout, sink);
            };
            self.io.rx_batch(max, timeout, &mut |frame, meta| {
                let meta = nflab_io::RxMeta {
                    ts_ns: meta.ts_ns.map(|t| t.saturating_add_signed(-shift)),
                    ts_source: TsSource::KernelSoftware,
                    ..meta
                };
                sink(frame, meta)
            })
        }
        fn stats(&self) -> nflab_io::IoStats {
            self.io.stats()
        }
    }

    /// Passes packets on and records each one's receive stamp and the time
    /// it passed.
    struct ReleaseLog(Arc<std::sync::Mutex<Vec<(u64, u64)>>>);

    impl App for ReleaseLog {
        fn name(&self) -> &'static str {
            "release-log"
        }
        fn needs_clock(&self) -> bool {
            true
        }
        fn push(&mut self, input: &mut Link, out: &mut crate::app::Output<'_>, now: u64) {
            while let Some(p) = input.receive() {
                self.0.lock().unwrap().push((p.rx_ns, now));
                out.fwd.transmit(p);
            }
        }
    }

    /// Frames sent `gaps` apart into a blocking worker over the apps `apps`
    /// makes (on the worker's thread: apps need not be `Send`) behind a
    /// port whose kernel stamps are `shift_ns` before the send; returns each
    /// frame's (receive stamp, release time) as logged by `log`, the
    /// monotonic send times and the worker's counters.
    fn through_kernel_stamped(
        apps: impl FnOnce() -> Vec<Box<dyn App>> + Send + 'static,
        log: &Arc<std::sync::Mutex<Vec<(u64, u64)>>>,
        shift_ns: i64,
        gaps: &[Duration],
    ) -> (Vec<(u64, u64)>, Vec<u64>, WorkerStats) {
        let (mut gen, a) = MemIo::pair(16);
        let (b, _sink) = MemIo::pair(16);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let h = std::thread::spawn(move || {
            let input = Port {
                ifname: "a".into(),
                io: Box::new(TestPort {
                    io: a,
                    stall: Duration::ZERO,
                    kernel_shift_ns: Some(shift_ns),
                }),
            };
            let mut w = blocking_worker(apps());
            w.input = input;
            w.output.io = Box::new(b);
            w.run(&stop2).unwrap();
            w.stats()
        });
        let mut sent = Vec::new();
        for gap in gaps {
            std::thread::sleep(*gap);
            sent.push(nflab_io::clock::monotonic_ns());
            gen.tx_batch(1, &mut |_, buf| {
                buf[..60].copy_from_slice(&frame(0));
                60
            })
            .unwrap();
        }
        let t0 = std::time::Instant::now();
        while log.lock().unwrap().len() < gaps.len() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, Ordering::Relaxed);
        let stats = h.join().unwrap();
        let got = log.lock().unwrap().clone();
        assert_eq!(got.len(), gaps.len());
        (got, sent, stats)
    }

    /// A kernel stamp (real time) becomes the frame's receive time on the
    /// worker's monotonic clock — earlier than the worker read the frame, or
    /// later (a frame that came while a batch was read) — unless it is too old
    /// to believe.
    #[test]
    fn a_kernel_stamp_is_the_frames_receive_time_on_the_monotonic_clock() {
        let ms = Duration::from_millis;
        for (shift_ns, want_ns) in [
            (3_000_000, 3_000_000),
            (-2_000_000, -2_000_000),
            (5_000_000_000, 0),
        ] {
            let log = Arc::default();
            let app_log = Arc::clone(&log);
            let apps = move || vec![Box::new(ReleaseLog(app_log)) as Box<dyn App>];
            let (got, sent, stats) = through_kernel_stamped(apps, &log, shift_ns, &[ms(20)]);
            assert_eq!(stats.worker.kernel_stamped, 1);
            // The clocks' offset is exact to well under the millisecond allowed here.
            let before_send = sent[0] as i64 - got[0].0 as i64;
            assert!(
                (before_send - want_ns).abs() <= 1_000_000,
                "stamped {before_send} ns before the send; want {want_ns} (the port's shift {shift_ns})"
            );
        }
    }

    /// Held frames leave when due and not before, and the worker slept
    /// through the arrival of the second (it came while the first was held).
    #[test]
    fn a_worker_sleeping_through_arrivals_releases_nothing_early() {
        use crate::delayer::Distribution::Normal;
        let log = Arc::default();
        let app_log = Arc::clone(&log);
        let apps = move || {
            vec![
                delayer(20_000.0, 0.0, Normal),
                Box::new(ReleaseLog(app_log)) as Box<dyn App>,
            ]
        };
        let ms = Duration::from_millis;
        let (got, _, stats) = through_kernel_stamped(apps, &log, 0, &[ms(20), ms(5), ms(1)]);
        for (stamp, released) in &got {
            assert!(
                *released >= stamp + 20_000_000,
                "released {} ns early",
                stamp + 20_000_000 - released
            );
        }
        assert_eq!(stats.worker.kernel_stamped, 3);
        assert!(stats.worker.held_sleeps > 0, "{:?}", stats.worker);
    }

    #[test]
    fn forwards_everything_in_order_and_counts() {
        for mode in [RxMode::BusyPoll, RxMode::Blocking, RxMode::Adaptive] {
            let cfg = WorkerConfig {
                batch: 8,
                rx_mode: mode,
                drain_ns: 50_000,
                ..WorkerConfig::default()
            };
            let (out, s) = run_worker(cfg, 1000);
            assert_eq!(out.len(), 1000, "{mode:?}");
            for (i, f) in out.iter().enumerate() {
                assert_eq!(&f[56..60], &(i as u32).to_be_bytes());
                assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 2]);
            }
            assert_eq!(s.ports[0].rx_packets, 1000);
            assert_eq!(s.ports[1].tx_packets, 1000);
            assert_eq!(s.apps[0].packets_in, 1000);
            assert_eq!(s.apps[0].packets_out, 1000);
            let polled: u64 = s
                .worker
                .rx_batch_hist
                .iter()
                .map(|(k, v)| *k as u64 * v)
                .sum();
            assert_eq!(polled, 1000);
            assert!(s.worker.rx_batch_hist.keys().all(|&k| (1..=8).contains(&k)));
            assert_eq!(s.worker.pool_allocations, 0, "{mode:?}");
            let json = serde_json::to_value(&s).unwrap();
            assert_eq!(json["links"][1]["tx_packets"], 1000);
        }
    }

    /// The pool a worker fills on its own thread covers the links and what
    /// its apps ask for (a delay line), so a delayed burst needs no fresh
    /// buffers; the pool goes with the thread.
    #[test]
    fn a_worker_fills_its_pool_for_the_links_and_the_apps_buffers() {
        let h = std::thread::spawn(|| {
            let s = crate::delayer::DelaySampler::new(
                crate::delayer::Distribution::Uniform,
                1e6,
                0.0,
                1,
            )
            .unwrap();
            let delayer = crate::delayer::Delayer::new(s, 20_000, false);
            assert_eq!(
                packet::pool_free(),
                0,
                "building the app allocates no buffers"
            );
            let cfg = WorkerConfig::default();
            let chain = Chain::new(vec![Box::new(delayer)], cfg.link_capacity);
            let (a, _) = MemIo::pair(16);
            let (b, _) = MemIo::pair(16);
            let port = |n: &str, io: MemIo| Port {
                ifname: n.into(),
                io: Box::new(io),
            };
            let mut w = Worker::new(cfg, chain, port("a", a), port("b", b));
            let free = packet::pool_free();
            assert!(
                free >= (cfg.link_capacity * 4).max(4096) + 20_000,
                "pool {free}"
            );
            // 20,000 packets held by the delay line take no fresh buffer.
            let fresh0 = packet::pool_allocations();
            for i in 0..20_000u32 {
                let mut p = Packet::from_slice(&frame(i));
                p.rx_ns = 1;
                w.chain().input().transmit(p);
                if w.chain().input().is_full() {
                    w.chain().breathe(1);
                }
            }
            w.chain().breathe(1);
            assert_eq!(w.chain().in_flight(), 20_000);
            assert_eq!(packet::pool_allocations(), fresh0);
        });
        h.join().unwrap();
    }

    /// The stamp a worker in `mode` gives one frame sent while it waits (or
    /// stalls, with `stall`), and the time the frame was sent.
    fn stamp_of_a_frame_sent_meanwhile(mode: RxMode, stall: bool) -> (u64, u64) {
        let (mut gen, a) = MemIo::pair(16);
        let (b, _sink) = MemIo::pair(16);
        let stamps = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = ReleaseLog(Arc::clone(&stamps));
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let h = std::thread::spawn(move || {
            let cfg = WorkerConfig {
                batch: 1,
                rx_mode: mode,
                ..WorkerConfig::default()
            };
            let input: Box<dyn PacketIo> = if stall {
                Box::new(TestPort {
                    io: a,
                    stall: Duration::from_millis(5),
                    kernel_shift_ns: None,
                })
            } else {
                Box::new(a)
            };
            let input = Port {
                ifname: "a".into(),
                io: input,
            };
            let output = Port {
                ifname: "b".into(),
                io: Box::new(b),
            };
            let chain = Chain::new(vec![Box::new(log)], cfg.link_capacity);
            let mut w = Worker::new(cfg, chain, input, output);
            w.run(&stop2).unwrap();
        });
        std::thread::sleep(Duration::from_millis(50));
        let sent_ns = nflab_io::clock::monotonic_ns();
        gen.tx_batch(1, &mut |_, buf| {
            buf[..60].copy_from_slice(&frame(0));
            60
        })
        .unwrap();
        let t0 = std::time::Instant::now();
        while stamps.lock().unwrap().is_empty() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
        let got = stamps.lock().unwrap().clone();
        assert_eq!(got.len(), 1);
        (got[0].0, sent_ns)
    }

    #[test]
    fn a_frame_that_ends_a_blocking_wait_is_stamped_after_it_was_sent() {
        // The worker blocks in receive; the frame comes while it waits. A stamp taken
        // before the wait (what the loop's `now` is) would precede the send, and a
        // delayer would release the packet early by the time the worker waited.
        let (stamp, sent) = stamp_of_a_frame_sent_meanwhile(RxMode::Blocking, false);
        assert!(
            stamp >= sent,
            "stamped {} ns before it was sent",
            sent - stamp
        );
    }

    #[test]
    fn a_frame_that_comes_while_a_polling_worker_stalls_is_stamped_after_it_was_sent() {
        // Polling without a wait, the loop's `now` is read before the ring; a worker
        // descheduled in between (5 ms here, milliseconds on a loaded VM) must not
        // stamp what came meanwhile with it: a link emulator released such frames
        // 1.15 ms before their configured delay.
        for mode in [RxMode::BusyPoll, RxMode::Adaptive] {
            let (stamp, sent) = stamp_of_a_frame_sent_meanwhile(mode, true);
            assert!(
                stamp >= sent,
                "{mode:?}: stamped {} ns before it was sent",
                sent - stamp
            );
        }
    }

    #[test]
    fn merged_counters_are_the_sums_of_the_workers() {
        let cfg = WorkerConfig {
            batch: 8,
            ..WorkerConfig::default()
        };
        let (_, a) = run_worker(cfg, 300);
        let (_, b) = run_worker(cfg, 500);
        // One worker's derived figures: 300 frames over its busy polls and its sends.
        let polls: u64 = a.worker.rx_batch_hist.values().sum();
        assert_eq!(a.worker.rx_batch_mean, 300.0 / polls as f64);
        assert_eq!(
            a.worker.cycles_per_packet,
            a.worker.cycles_busy as f64 / 300.0
        );
        let mut a2 = a.clone();
        let mut b2 = b.clone();
        a2.apps[0].detail = serde_json::json!({"n": 1, "per": [1, 2], "name": "x"});
        b2.apps[0].detail = serde_json::json!({"n": 2, "per": [10, 20, 30], "f": 0.5});
        let m = WorkerStats::merged(vec![a2, b2]).unwrap();
        assert_eq!(m.ports[0].rx_packets, 800);
        assert_eq!(m.ports[1].tx_packets, 800);
        assert_eq!(m.apps[0].packets_in, 800);
        assert_eq!(m.links[0].counters.tx_packets, 800);
        assert_eq!(
            m.worker.cycles_busy,
            a.worker.cycles_busy + b.worker.cycles_busy
        );
        assert_eq!(
            m.worker.cycles_per_packet,
            m.worker.cycles_busy as f64 / 800.0
        );
        let frames: u64 = m
            .worker
            .rx_batch_hist
            .iter()
            .map(|(k, v)| *k as u64 * v)
            .sum();
        assert_eq!(frames, 800);
        assert_eq!(
            m.apps[0].detail,
            serde_json::json!({"n": 3, "per": [11, 22, 30], "name": "x", "f": 0.5})
        );
        assert_eq!(m.per_worker.len(), 2);
        assert_eq!(m.per_worker[1].ports[0].rx_packets, 500);
        // One worker is its own total, without a per-worker list.
        let one = WorkerStats::merged(vec![a.clone()]).unwrap();
        assert_eq!(one, a);
        assert!(WorkerStats::merged(vec![]).is_none());
    }

    #[test]
    fn partial_batches_wait_for_the_drain_timer() {
        // One frame, batch 32: it may only leave on a timer flush.
        let cfg = WorkerConfig {
            batch: 32,
            drain_ns: 1_000_000,
            ..WorkerConfig::default()
        };
        let (out, s) = run_worker(cfg, 1);
        assert_eq!(out.len(), 1);
        assert_eq!(s.worker.flush_by_timer, 1);
        assert_eq!(s.worker.flush_by_size, 0);
        // Batch 1: the frame is a full batch and leaves at once.
        let cfg = WorkerConfig {
            batch: 1,
            drain_ns: 1_000_000_000,
            ..WorkerConfig::default()
        };
        let (out, s) = run_worker(cfg, 3);
        assert_eq!(out.len(), 3);
        assert_eq!((s.worker.flush_by_size, s.worker.flush_by_timer), (3, 0));
    }
}
