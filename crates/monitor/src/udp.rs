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
    fn mode(&self) -> u32 {
        match self {
            Sample::Off => 0,
            Sample::Windows { .. } => 1,
            Sample::All => 2,
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

/// The calling thread's namespace's UDP sockets (its `/proc/net/udp`).
const UDP_TABLE: &str = "/proc/thread-self/net/udp";

/// This namespace's `/proc/net/udp`, opened once and read with one `pread`
/// per sample.
///
/// Every `read` of the file walks the whole UDP hash table (16 384 slots here,
/// shared by all namespaces) up to where the last one stopped, and
/// `read_to_string` makes at least three (a 32-byte probe, the rest, the end):
/// ≈ 175 µs a sample against ≈ 50 µs for one read into a buffer that holds
/// every line (`os.read` timed in Python on the reference VM).
struct UdpTable {
    file: std::fs::File,
    buf: Vec<u8>,
}

impl UdpTable {
    /// The table of the calling thread's namespace (fixed at open).
    fn open() -> Option<UdpTable> {
        UdpTable::with_buffer(64 << 10)
    }

    fn with_buffer(bytes: usize) -> Option<UdpTable> {
        let file = std::fs::File::open(UDP_TABLE).ok()?;
        Some(UdpTable {
            file,
            buf: vec![0; bytes],
        })
    }

    /// `rx_queue` and `drops` of the socket bound to `port`.
    fn fill(&mut self, port: u16) -> Option<(u64, u64)> {
        use std::io::Read;
        use std::os::unix::fs::FileExt;
        let n = self.file.read_at(&mut self.buf, 0).ok()?;
        let found = std::str::from_utf8(&self.buf[..n])
            .ok()
            .and_then(|t| udp_socket_fill(t, port));
        if found.is_some() || n < self.buf.len() {
            return found;
        }
        // More sockets than the buffer holds: the whole file, the slow way.
        let mut all = String::new();
        std::fs::File::open(UDP_TABLE)
            .ok()?
            .read_to_string(&mut all)
            .ok()?;
        udp_socket_fill(&all, port)
    }
}

/// `rx_queue` and `drops` of the socket bound to `port` in a `/proc/net/udp` text.
pub fn udp_socket_fill(table: &str, port: u16) -> Option<(u64, u64)> {
    let want = format!("{port:04X}");
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let local_port = f.get(1)?.split(':').nth(1)?;
        if local_port != want {
            return None;
        }
        let rx = u64::from_str_radix(f.get(4)?.split(':').nth(1)?, 16).ok()?;
        let drops = f.last()?.parse().ok()?;
        Some((rx, drops))
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
    let mut table = UdpTable::open();
    let real_now = || {
        let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME)
            .expect("CLOCK_REALTIME exists");
        t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
    };
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if let Some(sample) = switch.try_iter().last() {
            cfg.sample = sample;
            config[4..8].copy_from_slice(&sample.mode().to_ne_bytes());
            skel.maps
                .config
                .update(&zero, &config, MapFlags::ANY)
                .map_err(bpf_err("cannot switch the UDP monitor's sampling"))?;
            next_sample = now;
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
        let due = match cfg.sample {
            Sample::Windows { .. } => next_buffer.min(next_sample),
            _ => next_buffer,
        };
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_read_in_one_pread_finds_a_socket_and_its_queue() {
        let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = sink.local_addr().unwrap().port();
        let src = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..3 {
            src.send_to(&[7u8; 100], ("127.0.0.1", port)).unwrap();
        }
        let mut table = UdpTable::open().unwrap();
        let mut fill = || table.fill(port).expect("the socket's line");
        let start = Instant::now();
        let (mut rx, mut drops) = fill();
        while rx < 300 && start.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(10));
            (rx, drops) = fill();
        }
        assert!(rx >= 300, "rx_queue {rx}");
        assert_eq!(drops, 0);
        // Read again from the start (pread at 0), after draining one datagram.
        let mut buf = [0u8; 200];
        sink.recv(&mut buf).unwrap();
        let (rx2, _) = fill();
        assert!(rx2 < rx, "{rx2} after {rx}");
        // A buffer too small for the line: the whole file is read instead.
        let (rx3, _) = UdpTable::with_buffer(64).unwrap().fill(port).unwrap();
        assert_eq!(rx3, rx2);
        assert_eq!(UdpTable::open().unwrap().fill(0), None);
    }

    #[test]
    fn finds_the_ports_queue_in_proc_net_udp() {
        let table = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
  1: 00000000:0009 00000000:0000 07 00000000:00000A00 00:00000000 00000000     0        0 123 2 0000000000000000 17\n";
        assert_eq!(udp_socket_fill(table, 9), Some((0xA00, 17)));
        assert_eq!(udp_socket_fill(table, 10), None);
    }
}
