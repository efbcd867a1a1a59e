//! Capture with time travel, after FlowScope (seed 000, §3.5).
//!
//! ```text
//!  RX queue 0 ─► producer 0 ─┐ inner queues, handed over       ┌─► analyzer: triggers ─► plan
//!  RX queue 1 ─► producer 1 ─┼─ by size or age ─► outer ring ──┤
//!        …          …        ┘ (memory budget, oldest out)     └─► dumper: window ─► dump-NNN.pcapng
//! ```
//!
//! - [`qq`]: the queue of queues.
//! - producers, chosen by [`ProducerKind`]: [`producer_xdp`], an XDP program that copies each received frame into a BPF ring buffer and
//!   passes it, drained by one thread; or [`producer`] (the default), one AF_PACKET
//!   `TPACKET_V3` ring per RX queue, joined in a fanout group. Both take a copy
//!   and let the frame go on, so the capture is a tap: the recorder, the DuT or
//!   the stack see every frame as without it. [`filler`] is their common side
//!   of QQ.
//! - [`trigger`]: libpcap filters, the latency anomaly (n, t), loss bursts, manual.
//! - [`dump`]: windows around triggers, written as pcapng (ns timestamps).
//!
//! [`run`] wires them for `nflab capture` and for runs with a `[capture]` section.

pub mod dump;
mod filler;
pub mod producer;
pub mod producer_xdp;
pub mod qq;
pub mod trigger;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

pub use trigger::{Fired, TriggerSpec};

/// Errors of a capture; each is one sentence naming what to fix.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("the filter \"{expression}\" does not compile: {message}")]
    Filter { expression: String, message: String },
    #[error("{0}")]
    Config(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Packet(#[from] nflab_io::IoError),
}

impl CaptureError {
    fn io(path: &Path, source: std::io::Error) -> CaptureError {
        CaptureError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Where the frames come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProducerKind {
    /// An XDP program copying each received frame into a BPF ring buffer.
    Xdp,
    /// AF_PACKET `TPACKET_V3` rings in a fanout group, one per RX queue.
    AfPacket,
}

impl ProducerKind {
    /// The default: the cheaper of the two in `bench/capture/run.sh`
    /// (docs/benchmarks.md § Capture).
    pub const DEFAULT: ProducerKind = ProducerKind::AfPacket;

    /// The name in `capture.json`, the spec and the CLI.
    pub fn name(self) -> &'static str {
        match self {
            ProducerKind::Xdp => "xdp",
            ProducerKind::AfPacket => "af_packet",
        }
    }
}

impl std::str::FromStr for ProducerKind {
    type Err = String;

    /// `xdp` or `af_packet` (`af-packet` too, as the CLI spells its flags).
    fn from_str(s: &str) -> Result<ProducerKind, String> {
        match s {
            "xdp" => Ok(ProducerKind::Xdp),
            "af_packet" | "af-packet" => Ok(ProducerKind::AfPacket),
            _ => Err(format!(
                "producer {s:?} is not known: use \"xdp\" or \"af_packet\""
            )),
        }
    }
}

/// What to capture, how much to keep, and when to dump.
#[derive(Debug, Clone)]
pub struct CaptureConfig {
    /// Interface to tap (in the caller's network namespace).
    pub iface: String,
    /// Where the frames come from.
    pub producer: ProducerKind,
    /// Directory for `capture.json` and the dumps.
    pub out_dir: PathBuf,
    /// Memory budget of the ring, bytes.
    pub ring_bytes: usize,
    /// Keep this much before a trigger, ns.
    pub pre_ns: u64,
    /// And this much after, ns.
    pub post_ns: u64,
    pub triggers: Vec<TriggerSpec>,
    /// Only packets matching this libpcap filter go into dumps.
    pub dump_filter: Option<String>,
    /// Producers (sockets in one fanout group); None: one per RX queue of the interface.
    pub producers: Option<usize>,
    /// An inner queue is handed over at this many bytes of frames…
    pub inner_bytes: usize,
    /// …or when its first frame is this old, ns.
    pub handover_timeout_ns: u64,
    /// Bytes kept of each frame.
    pub snaplen: u32,
}

impl CaptureConfig {
    /// Defaults for `iface` writing into `out_dir`: 1 GiB ring, 5 s before and
    /// after, producers per RX queue, 1 MiB inner queues handed over after 50 ms.
    pub fn new(iface: &str, out_dir: &Path) -> CaptureConfig {
        CaptureConfig {
            iface: iface.to_string(),
            producer: ProducerKind::DEFAULT,
            out_dir: out_dir.to_path_buf(),
            ring_bytes: 1 << 30,
            pre_ns: 5_000_000_000,
            post_ns: 5_000_000_000,
            triggers: Vec::new(),
            dump_filter: None,
            producers: None,
            inner_bytes: 1 << 20,
            handover_timeout_ns: 50_000_000,
            snaplen: 2048,
        }
    }

    fn check(&self) -> Result<(), CaptureError> {
        let bad = |s: String| Err(CaptureError::Config(s));
        if self.ring_bytes < self.inner_bytes.max(1 << 16) {
            return bad(format!(
                "ring = {} bytes is too small: it must hold at least one inner queue of {} bytes",
                self.ring_bytes, self.inner_bytes
            ));
        }
        if self.producers == Some(0) {
            return bad("producers = 0: a capture needs at least one producer".into());
        }
        if self.producer == ProducerKind::Xdp && self.producers.is_some_and(|n| n != 1) {
            return bad(format!(
                "producers = {} applies to the af_packet producer: the xdp producer has one consumer for all RX queues (use producers = 1 or producer = \"af_packet\")",
                self.producers.unwrap_or(1)
            ));
        }
        if self.snaplen < 64 {
            return bad(format!(
                "snaplen = {} is too short: at least 64 bytes",
                self.snaplen
            ));
        }
        Ok(())
    }
}

/// Counters of one producer, as in `capture.json`'s `producers`.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ProducerCounters {
    pub id: usize,
    /// Frames copied out of the kernel ring.
    pub captured: u64,
    /// Frames in queues handed to the outer ring.
    pub handed_over: u64,
    /// Frames discarded because the outer ring was full.
    pub discarded: u64,
    /// Frames of it written to dumps.
    pub dumped: u64,
    /// Frames the kernel dropped before the producer read them (capture loss).
    pub kernel_drops: u64,
}

/// `capture.json`.
#[derive(Debug, Clone, Serialize)]
pub struct CaptureReport {
    pub iface: String,
    /// `xdp` or `af_packet`.
    pub producer: &'static str,
    pub ring_bytes: usize,
    pub pre_s: f64,
    pub post_s: f64,
    pub snaplen: u32,
    pub started_ns: u64,
    pub ended_ns: u64,
    pub captured: u64,
    pub handed_over: u64,
    pub discarded: u64,
    pub discarded_queues: u64,
    pub dumped: u64,
    pub kernel_drops: u64,
    pub peak_ring_bytes: usize,
    pub producers: Vec<ProducerCounters>,
    pub triggers: Vec<TriggerInfo>,
    /// Triggers that fired, with their moments (at most [`MAX_FIRED_LISTED`]).
    pub fired: Vec<Fired>,
    pub fired_total: u64,
    pub dumps: Vec<dump::DumpInfo>,
    pub clock: ClockNote,
}

/// A configured trigger.
#[derive(Debug, Clone, Serialize)]
pub struct TriggerInfo {
    pub trigger: String,
}

/// Where the timestamps come from.
#[derive(Debug, Clone, Serialize)]
pub struct ClockNote {
    pub source: &'static str,
    pub resolution_ns: u64,
}

/// `capture.json` lists at most this many fired triggers (all are counted).
pub const MAX_FIRED_LISTED: usize = 10_000;

/// How the caller steers a running capture.
#[derive(Debug, Clone, Default)]
pub struct Control {
    /// Set to end the capture (SIGINT, SIGTERM, the end of a run).
    pub stop: Arc<AtomicBool>,
    /// Set to fire a manual trigger (SIGUSR1); the capture clears it.
    pub manual: Arc<AtomicBool>,
}

/// A capture whose filters are compiled and whose producers are open (sockets
/// bound, or the XDP program attached and draining): from here on no frame of
/// the interface is missed.
pub struct Capture {
    cfg: CaptureConfig,
    analyzer: trigger::Analyzer,
    producers: Producers,
    ring: Arc<qq::OuterRing>,
    to_analyzer: mpsc::Sender<Arc<qq::InnerQueue>>,
    from_producers: mpsc::Receiver<Arc<qq::InnerQueue>>,
}

enum Producers {
    AfPacket(Vec<nflab_io::AfPacket>),
    Xdp(producer_xdp::XdpProducer),
}

impl Capture {
    /// Check `cfg`, compile every filter (a bad one is an error now, before
    /// any packet) and open the producers' sockets. Call it in the
    /// interface's network namespace.
    pub fn open(cfg: &CaptureConfig) -> Result<Capture, CaptureError> {
        cfg.check()?;
        let analyzer = trigger::Analyzer::new(&cfg.triggers, cfg.post_ns)?;
        if let Some(f) = &cfg.dump_filter {
            trigger::Filter::compile(f)?;
        }
        std::fs::create_dir_all(&cfg.out_dir).map_err(|e| CaptureError::io(&cfg.out_dir, e))?;
        // Also the check that the interface exists and is up.
        let rx_queues = producer::rx_queues(&cfg.iface)?;
        let (to_analyzer, from_producers) = mpsc::channel();
        let (ring, producers) = match cfg.producer {
            ProducerKind::AfPacket => {
                let n = cfg.producers.unwrap_or(rx_queues);
                let ring = Arc::new(qq::OuterRing::new(cfg.ring_bytes, n));
                (
                    ring,
                    Producers::AfPacket(producer::open_all(&cfg.iface, n)?),
                )
            }
            ProducerKind::Xdp => {
                let ring = Arc::new(qq::OuterRing::new(cfg.ring_bytes, 1));
                let filler = filler::Filler::new(0, cfg, Arc::clone(&ring), to_analyzer.clone());
                let p = producer_xdp::XdpProducer::start(cfg, filler)?;
                (ring, Producers::Xdp(p))
            }
        };
        Ok(Capture {
            cfg: cfg.clone(),
            analyzer,
            producers,
            ring,
            to_analyzer,
            from_producers,
        })
    }

    /// Capture until `ctl.stop` is set or `duration` has passed; write the
    /// dumps and `capture.json` into the output directory.
    pub fn run(
        self,
        ctl: &Control,
        duration: Option<Duration>,
    ) -> Result<CaptureReport, CaptureError> {
        let Capture {
            cfg,
            analyzer,
            producers,
            ring,
            to_analyzer: tx,
            from_producers: rx,
        } = self;
        let cfg = &cfg;
        let started_ns = nflab_io::clock::realtime_ns();
        let mut report = std::thread::scope(|s| -> Result<CaptureReport, CaptureError> {
            let mut handles = Vec::new();
            let mut xdp = None;
            match producers {
                Producers::AfPacket(sockets) => {
                    for (id, sock) in sockets.into_iter().enumerate() {
                        let filler = filler::Filler::new(id, cfg, Arc::clone(&ring), tx.clone());
                        let stop = Arc::clone(&ctl.stop);
                        let p = producer::Producer::new(id, sock);
                        handles.push(s.spawn(move || p.run(filler, &stop)));
                    }
                }
                Producers::Xdp(p) => xdp = Some(p),
            }
            drop(tx);
            let analysis = {
                let (ring, manual) = (Arc::clone(&ring), Arc::clone(&ctl.manual));
                // Ends when the last producer has gone and its queues are scanned.
                s.spawn(move || analyze_and_dump(cfg, analyzer, &ring, rx, &manual))
            };
            let t0 = Instant::now();
            while !ctl.stop.load(Ordering::Relaxed) {
                if duration.is_some_and(|d| t0.elapsed() >= d) {
                    ctl.stop.store(true, Ordering::Relaxed);
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let mut counters = Vec::new();
            for h in handles {
                counters.push(h.join().expect("producer thread panicked")?);
            }
            if let Some(p) = xdp {
                counters.push(p.stop()?);
            }
            let (dumps, fired, fired_total) = analysis.join().expect("analyzer thread panicked")?;
            Ok(assemble(
                cfg,
                started_ns,
                counters,
                &ring,
                dumps,
                fired,
                fired_total,
            ))
        })?;
        report.ended_ns = nflab_io::clock::realtime_ns();
        let path = cfg.out_dir.join("capture.json");
        let json = serde_json::to_string_pretty(&report).expect("report serializes");
        std::fs::write(&path, json + "\n").map_err(|e| CaptureError::io(&path, e))?;
        Ok(report)
    }
}

/// [`Capture::open`] then [`Capture::run`].
pub fn run(
    cfg: &CaptureConfig,
    ctl: &Control,
    duration: Option<Duration>,
) -> Result<CaptureReport, CaptureError> {
    Capture::open(cfg)?.run(ctl, duration)
}

type Analysis = (Vec<dump::DumpInfo>, Vec<Fired>, u64);

/// The analyzer and dumper thread: scan every queue handed over, plan windows,
/// write those that are complete.
fn analyze_and_dump(
    cfg: &CaptureConfig,
    mut analyzer: trigger::Analyzer,
    ring: &qq::OuterRing,
    rx: mpsc::Receiver<Arc<qq::InnerQueue>>,
    manual: &AtomicBool,
) -> Result<Analysis, CaptureError> {
    let dump_filter = cfg
        .dump_filter
        .as_deref()
        .map(trigger::Filter::compile)
        .transpose()?;
    let ctx = dump::DumpContext {
        dir: &cfg.out_dir,
        iface: &cfg.iface,
        snaplen: cfg.snaplen,
        producers: ring.stats().handed_over.len(),
        filter: dump_filter.as_ref(),
    };
    let mut plan = dump::DumpPlan::new(cfg.pre_ns, cfg.post_ns);
    let mut dumps = Vec::new();
    let mut listed = Vec::new();
    let mut total = 0u64;
    let mut fired = Vec::new();
    let mut record = |f: Fired, plan: &mut dump::DumpPlan| {
        total += 1;
        if listed.len() < MAX_FIRED_LISTED {
            listed.push(f.clone());
        }
        plan.add(f);
    };
    loop {
        match rx.recv_timeout(Duration::from_millis(10)) {
            Ok(q) => {
                for frame in q.frames() {
                    analyzer.scan(&frame, &mut fired);
                }
                for f in fired.drain(..) {
                    record(f, &mut plan);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if manual.swap(false, Ordering::Relaxed) {
            let f = analyzer.fire_manual(nflab_io::clock::realtime_ns(), "signal");
            record(f, &mut plan);
        }
        // A window is complete once every queue that can hold its packets was
        // handed over: its end plus the hand-over timeout (and a margin for
        // the block timer of the kernel ring).
        let settled = nflab_io::clock::realtime_ns()
            .saturating_sub(cfg.handover_timeout_ns + producer::RING_TIMEOUT_NS * 4);
        for w in plan.due(settled) {
            dumps.push(dump::write(
                &ctx,
                &w,
                &ring.overlapping(w.from_ns, w.to_ns),
            )?);
        }
    }
    if manual.swap(false, Ordering::Relaxed) {
        let f = analyzer.fire_manual(nflab_io::clock::realtime_ns(), "signal");
        record(f, &mut plan);
    }
    for w in plan.rest() {
        dumps.push(dump::write(
            &ctx,
            &w,
            &ring.overlapping(w.from_ns, w.to_ns),
        )?);
    }
    Ok((dumps, listed, total))
}

fn assemble(
    cfg: &CaptureConfig,
    started_ns: u64,
    mut counters: Vec<ProducerCounters>,
    ring: &qq::OuterRing,
    dumps: Vec<dump::DumpInfo>,
    fired: Vec<Fired>,
    fired_total: u64,
) -> CaptureReport {
    let rs = ring.stats();
    for c in &mut counters {
        c.handed_over = rs.handed_over[c.id];
        c.discarded = rs.discarded[c.id];
        c.dumped = dumps.iter().map(|d| d.per_producer[c.id]).sum();
    }
    let sum = |f: fn(&ProducerCounters) -> u64| counters.iter().map(f).sum::<u64>();
    CaptureReport {
        iface: cfg.iface.clone(),
        producer: cfg.producer.name(),
        ring_bytes: cfg.ring_bytes,
        pre_s: cfg.pre_ns as f64 / 1e9,
        post_s: cfg.post_ns as f64 / 1e9,
        snaplen: cfg.snaplen,
        started_ns,
        ended_ns: 0,
        captured: sum(|c| c.captured),
        handed_over: sum(|c| c.handed_over),
        discarded: sum(|c| c.discarded),
        discarded_queues: rs.discarded_queues,
        dumped: sum(|c| c.dumped),
        kernel_drops: sum(|c| c.kernel_drops),
        peak_ring_bytes: rs.peak_bytes,
        producers: counters,
        triggers: cfg
            .triggers
            .iter()
            .map(|t| TriggerInfo {
                trigger: t.describe(),
            })
            .collect(),
        fired,
        fired_total,
        dumps,
        clock: ClockNote {
            source: match cfg.producer {
                ProducerKind::AfPacket => {
                    "CLOCK_REALTIME (kernel receive stamp of the AF_PACKET ring)"
                }
                ProducerKind::Xdp => producer_xdp::CLOCK_SOURCE,
            },
            resolution_ns: nflab_io::clock::resolution_ns(libc::CLOCK_REALTIME),
        },
    }
}

/// Parse a size such as `1GiB`, `512MiB`, `64k`, `1000000`.
pub fn parse_size_bytes(s: &str) -> Option<usize> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" => 1024.0 * 1024.0,
        "g" | "gb" => 1e9,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let v = n * mult;
    (v.is_finite() && v >= 1.0).then_some(v as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_size_bytes("1GiB"), Some(1 << 30));
        assert_eq!(parse_size_bytes("64 MiB"), Some(64 << 20));
        assert_eq!(parse_size_bytes("1.5k"), Some(1500));
        assert_eq!(parse_size_bytes("4096"), Some(4096));
        assert_eq!(parse_size_bytes("lots"), None);
        assert_eq!(parse_size_bytes("1 parsec"), None);
    }

    #[test]
    fn a_ring_smaller_than_one_queue_is_refused() {
        let mut c = CaptureConfig::new("lo", Path::new("/tmp"));
        c.ring_bytes = 1000;
        let e = c.check().unwrap_err().to_string();
        assert!(e.contains("ring") && !e.contains('\n'), "{e}");
    }
}
