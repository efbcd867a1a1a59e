//! Traffic patterns and the pacer.
//!
//! A run sends one or more *streams* ([`StreamPlan`]): the *probe* stream, whose every
//! packet the recorder keeps (sequence number and tx timestamp in the probe header), and
//! any number of *background* streams with their own pattern, rate, sizes and flows, which
//! the recorder only counts — the TRex latency-stream-over-load setup of seed 001.
//!
//! Each stream's packets come from a deterministic schedule ([`pattern`]): CBR, Poisson,
//! bursts, on/off, periodic cycles or a replayed trace, at a rate in packets or bits per
//! second (L1 or L2 accounting), with fixed sizes, a size sweep, IMIX or a user
//! distribution, over many flows (varied addresses and ports), IPv4 or IPv6, with VLAN
//! PCP and DSCP. The streams are merged by deadline into one sequence.
//!
//! # The pacer
//!
//! [`run`] busy-waits on `CLOCK_MONOTONIC` for each packet's deadline `t0 + t_i`, where
//! `t_i` comes from the schedule, not from the previous send, so an occasional late send
//! does not shift later packets: the offered pattern stays the one requested and
//! lateness is counted instead. Packets that are due together (a burst, a periodic
//! cycle, or a backlog after the thread was preempted) go to the backend in one batch of
//! at most `batch`. Each frame is stamped with `CLOCK_REALTIME` as it is written into the
//! ring — the clock of the kernel's receive timestamps, so one-way latency is `rx − tx`.
//!
//! # Kernel TX timestamps
//!
//! With [`GenPlan::tx_timestamp`] = [`TxTimestamp::Kernel`] the pacer also asks the
//! backend for the kernel's stamp of every frame (`SO_TIMESTAMPING`, see
//! [`nflab_io::timestamping`]), drains the socket's error queue between TX batches and
//! matches each stamp by its id to the probe (flow, seq) sent as that frame
//! ([`txstamps`]). Matched stamps go to the caller's sink ([`run_threads_stamped`]); the
//! probe keeps its application stamp, which the caller may replace with the kernel's
//! after the run (`nflab run` does).
//!
//! # Several TX threads
//!
//! [`run_threads`] runs one pacer per backend, all from one common `t0`; thread `k` of
//! `n` sends the packets `k, k + n, k + 2n, …` of the merged schedule. The union is
//! exactly the requested pattern as long as every thread keeps up, and each thread's
//! lateness is counted, so a host that cannot keep up is reported, not hidden.
//!
//! # Self-check
//!
//! [`selfcheck`] compares the receive times of the probe stream with its schedule:
//! rate accuracy and the inter-packet-gap histogram and MSE of seed 000 §3.3.
//!
//! Limitations: `rate = max` paces nothing and needs a single CBR stream; replay sends
//! probe frames with the trace's timing and sizes, not the trace's bytes.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};

use nflab_io::{clock, IoError, Layer, PacketIo, TxStampOptions};
use nflab_wire::{BuildError, ProbeSpec, ProbeTemplate};
use serde::Serialize;

pub mod live;
pub mod pattern;
pub mod selfcheck;
pub mod trace;
pub mod txstamps;

pub use pattern::{Accounting, Pattern, Rate, Sizes, Slot, StreamSchedule, StreamSpec};
pub use selfcheck::SelfCheck;
pub use txstamps::{ProbeTxStamp, Spread, StampSink, TxStampReport};

/// Largest number of frame templates (flows × sizes) a stream may need; each is a
/// prebuilt frame of up to an MTU, so this bounds the memory at about 100 MB.
pub const MAX_TEMPLATES: usize = 65_536;

/// Whether a stream is recorded per packet or only counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Every packet is recorded (seq + tx timestamp).
    Probe,
    /// Packets are counted at the receiver, not recorded.
    Background,
}

/// Which header fields differ between the flows of a stream: flow `i` adds `i` to each
/// selected field (addresses in their last bits, ports modulo 2^16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct FlowVary {
    /// Vary the source address.
    pub src_ip: bool,
    /// Vary the destination address.
    pub dst_ip: bool,
    /// Vary the UDP source port.
    pub src_port: bool,
    /// Vary the UDP destination port.
    pub dst_port: bool,
}

impl FlowVary {
    /// Vary the UDP source port only (the default: same path, different 5-tuples).
    pub fn src_port() -> FlowVary {
        FlowVary {
            src_port: true,
            ..FlowVary::default()
        }
    }
}

fn add_ip(ip: IpAddr, i: u32) -> IpAddr {
    match ip {
        IpAddr::V4(a) => IpAddr::V4(u32::from(a).wrapping_add(i).into()),
        IpAddr::V6(a) => IpAddr::V6(u128::from(a).wrapping_add(i as u128).into()),
    }
}

/// A stream ready to send: its schedule spec, role, flow ids and prebuilt frames.
#[derive(Debug, Clone)]
pub struct StreamPlan {
    /// Pattern, rate, sizes, flows.
    pub spec: StreamSpec,
    /// Probe or background.
    pub role: Role,
    /// Flow id of the stream's first flow; flow `i` has id `flow_base + i`.
    pub flow_base: u16,
    /// The frame sizes, index = [`Slot::size`].
    pub sizes: Vec<u64>,
    /// Frames, index `flow * sizes.len() + size`.
    templates: Vec<ProbeTemplate>,
    /// Replayed frames resized to fit the probe and the MTU.
    pub clamped_sizes: u64,
}

impl StreamPlan {
    /// Check `spec` and build the frames of every flow and size from `base` (whose
    /// `flow` and `frame_bytes` are replaced). Replayed sizes outside what a probe frame
    /// can be are clamped to the nearest valid size and counted; other sizes must fit.
    pub fn new(
        spec: StreamSpec,
        role: Role,
        flow_base: u16,
        base: &ProbeSpec,
        vary: FlowVary,
    ) -> Result<StreamPlan, GenError> {
        spec.check().map_err(GenError::Config)?;
        if flow_base as u64 + spec.flows as u64 > u16::MAX as u64 {
            return Err(GenError::Config(format!(
                "{} flows from flow id {flow_base} run past the largest flow id 65534: use fewer flows",
                spec.flows
            )));
        }
        let mut sizes = spec.size_values();
        let mut clamped_sizes = 0;
        if let Pattern::Replay { trace, .. } = &spec.pattern {
            let (lo, hi) = (base.min_frame_bytes() as u64, base.max_frame_bytes() as u64);
            clamped_sizes = trace.iter().filter(|p| p.len < lo || p.len > hi).count() as u64;
            // Keep indices stable: clamp values in place (duplicates are harmless).
            for s in &mut sizes {
                *s = (*s).clamp(lo, hi);
            }
        }
        let n = sizes.len() * spec.flows as usize;
        if n > MAX_TEMPLATES {
            return Err(GenError::Config(format!(
                "{} flows x {} sizes need {n} frame templates, more than {MAX_TEMPLATES}: use fewer flows or sizes",
                spec.flows,
                sizes.len()
            )));
        }
        let mut templates = Vec::with_capacity(n);
        for f in 0..spec.flows {
            for &s in &sizes {
                let p = ProbeSpec {
                    flow: flow_base + f as u16,
                    frame_bytes: s as usize,
                    src_ip: if vary.src_ip {
                        add_ip(base.src_ip, f)
                    } else {
                        base.src_ip
                    },
                    dst_ip: if vary.dst_ip {
                        add_ip(base.dst_ip, f)
                    } else {
                        base.dst_ip
                    },
                    src_port: if vary.src_port {
                        base.src_port.wrapping_add(f as u16)
                    } else {
                        base.src_port
                    },
                    dst_port: if vary.dst_port {
                        base.dst_port.wrapping_add(f as u16)
                    } else {
                        base.dst_port
                    },
                    ..*base
                };
                templates.push(ProbeTemplate::new(&p)?);
            }
        }
        Ok(StreamPlan {
            spec,
            role,
            flow_base,
            sizes,
            templates,
            clamped_sizes,
        })
    }

    /// The frame of `slot`.
    pub fn template(&self, slot: &Slot) -> &ProbeTemplate {
        &self.templates[slot.flow as usize * self.sizes.len() + slot.size as usize]
    }

    /// Flow ids of this stream.
    pub fn flow_ids(&self) -> impl Iterator<Item = u16> + '_ {
        (0..self.spec.flows).map(move |f| self.flow_base + f as u16)
    }
}

/// Which TX timestamp a run reports for its probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TxTimestamp {
    /// `CLOCK_REALTIME` read by the generator while it writes the frame (the stamp in the
    /// probe header).
    #[default]
    App,
    /// The kernel's stamp of the frame's hand-over to the device (the NIC's, where it
    /// stamps in hardware), read back from the socket's error queue.
    Kernel,
}

/// Everything a generator run sends.
#[derive(Debug, Clone)]
pub struct GenPlan {
    /// Streams; the first is normally the probe stream.
    pub streams: Vec<StreamPlan>,
    /// Warm-up, ns: packets due before it are warm-up (sent, excluded from analysis).
    pub warmup_ns: u64,
    /// Measured part after warm-up, ns (None: until the count or the trace ends).
    pub duration_ns: Option<u64>,
    /// At most this many packets per stream, warm-up included (None: no limit).
    pub count: Option<u64>,
    /// Largest number of frames handed to the backend in one call.
    pub batch: usize,
    /// Application or kernel TX timestamps.
    pub tx_timestamp: TxTimestamp,
}

impl GenPlan {
    /// True when the plan is one unpaced (`rate = max`) stream.
    pub fn unpaced(&self) -> bool {
        self.streams
            .iter()
            .any(|s| s.spec.rate == Rate::Max && s.spec.pattern == Pattern::Cbr)
    }

    fn check(&self) -> Result<(), GenError> {
        if self.streams.is_empty() {
            return Err(GenError::Config("no stream to send".into()));
        }
        if self.unpaced() && self.streams.len() > 1 {
            return Err(GenError::Config(
                "rate \"max\" cannot be combined with other streams: give every stream a rate"
                    .into(),
            ));
        }
        if self.count.is_none() && self.duration_ns.is_none() {
            let replay_only = self
                .streams
                .iter()
                .all(|s| matches!(s.spec.pattern, Pattern::Replay { .. }));
            if !replay_only {
                return Err(GenError::Config("give a packet count or a duration".into()));
            }
        }
        let mut ids: Vec<u16> = self.streams.iter().flat_map(|s| s.flow_ids()).collect();
        ids.sort_unstable();
        if ids.windows(2).any(|w| w[0] == w[1]) {
            return Err(GenError::Config(
                "two streams share a flow id: give each stream its own flow_base".into(),
            ));
        }
        Ok(())
    }

    /// End of the schedule, ns after t0, for paced plans.
    fn end_ns(&self) -> Option<u64> {
        self.duration_ns.map(|d| self.warmup_ns + d)
    }

    /// The first `limit` deadlines of stream `s` within the plan's end and count, as the
    /// pacer offers them (for the self-check).
    pub fn schedule_of(&self, s: usize, limit: usize) -> Vec<u64> {
        let mut sch = StreamSchedule::new(&self.streams[s].spec);
        let end = self.end_ns();
        let max = self.count.map_or(limit, |c| (c as usize).min(limit));
        let mut v = Vec::new();
        while v.len() < max {
            match sch.next_slot() {
                Some(x) if end.is_none_or(|e| x.t_ns < e) => v.push(x.t_ns),
                _ => break,
            }
        }
        v
    }
}

/// Packets of one flow.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct FlowReport {
    /// Flow id.
    pub flow: u16,
    /// Index of its stream in the plan.
    pub stream: usize,
    /// Probe or background.
    pub role: String,
    /// Packets sent, warm-up included.
    pub sent: u64,
    /// Sequence numbers `0..warmup` were warm-up.
    pub warmup: u64,
}

/// One stream as offered and sent.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct StreamReport {
    /// Pattern name.
    pub pattern: String,
    /// Probe or background.
    pub role: String,
    /// The pattern's parameters, rate and sizes, as given.
    pub spec: serde_json::Value,
    /// Mean offered packet rate (None at max rate).
    pub offered_pps: Option<f64>,
    /// Mean offered bit rate counting 20 B preamble + IFG per frame (L1).
    pub offered_bps_l1: Option<f64>,
    /// Mean offered bit rate of the frames alone, FCS included (L2).
    pub offered_bps_l2: Option<f64>,
    /// Mean frame size, bytes with FCS.
    pub mean_frame_bytes: f64,
    /// Number of flows.
    pub flows: u32,
    /// Packets sent.
    pub sent: u64,
    /// Replayed frames resized to fit the probe and the MTU.
    pub clamped_sizes: u64,
}

/// What the generator did (`gen.json`).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct GenReport {
    /// Backend the frames left through.
    pub backend: String,
    /// Its mode where it has several: AF_XDP's "zero-copy" or "copy".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_mode: Option<String>,
    /// TX threads.
    pub threads: usize,
    /// Frames handed to the backend, all streams, warm-up included.
    pub sent: u64,
    /// Warm-up frames among them.
    pub warmup: u64,
    /// Mean offered rate of the probe stream (None = max).
    pub offered_pps: Option<f64>,
    /// Measured probe frames / measured send time (first to last measured probe frame).
    pub tx_pps: Option<f64>,
    /// tx timestamp of the first measured probe frame (CLOCK_REALTIME ns).
    pub first_tx_ns: Option<u64>,
    /// tx timestamp of the last probe frame.
    pub last_tx_ns: Option<u64>,
    /// Frames sent more than one mean gap (at least 1 µs) after their deadline.
    pub late_packets: u64,
    /// Largest delay of a send behind its deadline, ns.
    pub max_lateness_ns: u64,
    /// Times the TX ring was full and the pacer had to retry.
    pub ring_full_retries: u64,
    /// Stopped early by a signal.
    pub interrupted: bool,
    /// Where the tx timestamps come from.
    pub tx_timestamp: String,
    /// The streams.
    pub streams: Vec<StreamReport>,
    /// Per-flow counts (the record trailer's `sent`).
    pub flows: Vec<FlowReport>,
    /// The receive-side self-check of the probe stream, when one was made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selfcheck: Option<SelfCheck>,
    /// Kernel TX timestamping, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_stamps: Option<TxStampReport>,
    /// Problems: the host did not keep up, the generator turned bursty, ...
    pub warnings: Vec<String>,
}

impl GenReport {
    /// Ratio of achieved to configured rate (1.0 = exact), when both exist.
    pub fn rate_accuracy(&self) -> Option<f64> {
        Some(self.tx_pps? / self.offered_pps?)
    }

    /// Counts of one flow.
    pub fn flow(&self, id: u16) -> Option<&FlowReport> {
        self.flows.iter().find(|f| f.flow == id)
    }
}

/// Errors of the generator.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    /// The backend failed.
    #[error("generator: {0}")]
    Io(#[from] IoError),
    /// A frame cannot be built (too small for the probe, above the MTU, bad VLAN/DSCP).
    #[error("generator: {0}")]
    Frame(#[from] BuildError),
    /// The configuration cannot be sent.
    #[error("generator: {0}")]
    Config(String),
    /// A trace could not be read.
    #[error("generator: {0}")]
    Trace(#[from] trace::TraceError),
}

/// A pacer whose next deadline is further away than this sleeps instead of spinning.
/// A thread that spins without pause under `SCHED_FIFO` uses up the kernel's real-time
/// budget (`sched_rt_runtime_us`, 950 ms of every second by default) and is then stopped
/// for the remaining 50 ms, so a paced run at a few kpps lost the CPU for 50 ms every
/// second. Sleeping through long gaps returns that budget.
const SLEEP_ABOVE_NS: u64 = 300_000;

/// How long before its deadline a sleeping pacer wakes to spin the rest of the way: the
/// wake-up latency of a timer on a loaded VM is tens of µs, so 150 µs leaves room.
const SPIN_BEFORE_NS: u64 = 150_000;

/// The merged schedule of all streams, thinned to one thread's share.
struct Merged<'a> {
    plan: &'a GenPlan,
    scheds: Vec<StreamSchedule>,
    heads: Vec<Option<Slot>>,
    end_ns: Option<u64>,
    /// Global index of the next merged packet.
    index: u64,
    part: (u64, u64),
}

impl<'a> Merged<'a> {
    fn new(plan: &'a GenPlan, part: (usize, usize)) -> Merged<'a> {
        let mut scheds: Vec<StreamSchedule> = plan
            .streams
            .iter()
            .map(|s| StreamSchedule::new(&s.spec))
            .collect();
        let heads = scheds.iter_mut().map(|s| s.next_slot()).collect();
        let mut m = Merged {
            plan,
            scheds,
            heads,
            end_ns: if plan.unpaced() { None } else { plan.end_ns() },
            index: 0,
            part: (part.0 as u64, part.1.max(1) as u64),
        };
        for s in 0..m.heads.len() {
            m.trim(s);
        }
        m
    }

    /// Drop stream `s`'s head when it is past the end or the count.
    fn trim(&mut self, s: usize) {
        if let Some(h) = self.heads[s] {
            let past_end = self.end_ns.is_some_and(|e| h.t_ns >= e);
            let past_count = self
                .plan
                .count
                .is_some_and(|c| self.scheds[s].produced() > c);
            if past_end || past_count {
                self.heads[s] = None;
            }
        }
    }

    /// The next packet of this thread: (stream, slot). Ties go to the lower stream index.
    fn next(&mut self) -> Option<(usize, Slot)> {
        loop {
            let mut best: Option<usize> = None;
            for (i, h) in self.heads.iter().enumerate() {
                if let Some(h) = h {
                    if best.is_none_or(|b| h.t_ns < self.heads[b].map_or(u64::MAX, |x| x.t_ns)) {
                        best = Some(i);
                    }
                }
            }
            let s = best?;
            let slot = self.heads[s].take()?;
            self.heads[s] = self.scheds[s].next_slot();
            self.trim(s);
            let mine = self.index % self.part.1 == self.part.0;
            self.index += 1;
            if mine {
                return Some((s, slot));
            }
        }
    }
}

/// How one pacer thread runs.
#[derive(Debug, Clone, Copy)]
pub struct ThreadOpts {
    /// This thread's index.
    pub index: usize,
    /// Number of threads.
    pub of: usize,
    /// Common start, `CLOCK_MONOTONIC` ns (None: now).
    pub t0_ns: Option<u64>,
}

impl Default for ThreadOpts {
    fn default() -> Self {
        ThreadOpts {
            index: 0,
            of: 1,
            t0_ns: None,
        }
    }
}

/// Send `plan` on `io` until it ends or `stop` is set (one thread; see [`run_threads`]).
pub fn run(
    io: &mut dyn PacketIo,
    plan: &GenPlan,
    stop: &AtomicBool,
) -> Result<GenReport, GenError> {
    run_part(io, plan, stop, ThreadOpts::default())
}

/// One thread's share of `plan` (see the crate docs).
pub fn run_part(
    io: &mut dyn PacketIo,
    plan: &GenPlan,
    stop: &AtomicBool,
    opts: ThreadOpts,
) -> Result<GenReport, GenError> {
    run_part_stamped(io, plan, stop, opts, None)
}

/// [`run_part`], handing matched kernel TX stamps to `sink` when the plan asks for them.
pub fn run_part_stamped(
    io: &mut dyn PacketIo,
    plan: &GenPlan,
    stop: &AtomicBool,
    opts: ThreadOpts,
    sink: Option<StampSink<'_>>,
) -> Result<GenReport, GenError> {
    plan.check()?;
    let batch = plan.batch.clamp(1, 1024);
    let payload_only = io.layer() == Layer::UdpPayload;
    for s in &plan.streams {
        for t in &s.templates {
            let len = if payload_only {
                t.payload().len()
            } else {
                t.len()
            };
            if len > io.max_frame_len() {
                return Err(GenError::Config(format!(
                    "a {} B frame does not fit the backend's {} B maximum: lower the frame size or raise the MTU",
                    t.frame_bytes(),
                    io.max_frame_len()
                )));
            }
        }
    }
    let unpaced = plan.unpaced();
    // Lateness threshold: one mean gap of all streams together, at least 1 µs.
    let total_pps: f64 = plan.streams.iter().filter_map(|s| s.spec.mean_pps()).sum();
    let late_threshold_ns = if total_pps > 0.0 {
        ((1e9 / total_pps) as u64).max(1_000)
    } else {
        u64::MAX
    };

    // Per-flow counters, indexed by stream offset + flow index.
    let offsets: Vec<usize> = plan
        .streams
        .iter()
        .scan(0usize, |acc, s| {
            let o = *acc;
            *acc += s.spec.flows as usize;
            Some(o)
        })
        .collect();
    let nflows: usize = plan.streams.iter().map(|s| s.spec.flows as usize).sum();
    let mut flow_sent = vec![0u64; nflows];
    let mut flow_warm = vec![0u64; nflows];
    let mut stream_sent = vec![0u64; plan.streams.len()];
    let mut report = GenReport {
        backend: io.name().to_string(),
        backend_mode: io.mode().map(str::to_string),
        threads: opts.of,
        offered_pps: plan.streams[0].spec.mean_pps(),
        tx_timestamp: "application".into(),
        ..GenReport::default()
    };

    // Kernel TX stamps: ids count from the backend's next frame, whatever it sent before
    // (readiness probes).
    let mut stamps = match plan.tx_timestamp {
        TxTimestamp::App => None,
        TxTimestamp::Kernel => {
            let st = io.enable_tx_timestamps(&TxStampOptions::default())?;
            report.tx_timestamp = st.source.as_str().to_string();
            let first = io.tx_stamp_next_id().unwrap_or(0);
            Some(txstamps::StampWindow::new(first, &st, sink))
        }
    };
    // Application stamps of the frames of the current batch, for the stamp window.
    let mut app_ns = vec![0u64; batch];

    let mut merged = Merged::new(plan, (opts.index, opts.of));
    let t0 = opts.t0_ns.unwrap_or_else(clock::monotonic_ns);
    let warmup_end = t0 + plan.warmup_ns;
    let wall_end = plan.duration_ns.filter(|_| unpaced).map(|d| warmup_end + d);
    // Slots taken from the schedule but not yet queued (a full ring leaves some).
    let mut pending: Vec<(usize, Slot)> = Vec::with_capacity(batch);
    let mut next = merged.next();
    let mut first_probe_tx = None;
    let mut last_probe_tx = 0u64;
    let mut probe_measured = 0u64;
    let mut polls: u32 = 0;
    let probe_stream = plan.streams.iter().position(|s| s.role == Role::Probe);

    loop {
        // One atomic load per loop is cheap next to the send syscall.
        if stop.load(Ordering::Relaxed) {
            report.interrupted = true;
            break;
        }
        let now = clock::monotonic_ns();
        if unpaced && wall_end.is_some_and(|e| now >= e) {
            break;
        }
        // Move every due packet into the batch.
        while pending.len() < batch {
            match next {
                Some((s, slot)) if unpaced || t0 + slot.t_ns <= now => {
                    pending.push((s, slot));
                    next = merged.next();
                }
                _ => break,
            }
        }
        if pending.is_empty() {
            let Some((_, due)) = next else {
                break;
            };
            if let Some(w) = stamps.as_mut() {
                if w.idle_drain_due(now, (t0 + due.t_ns).saturating_sub(now)) {
                    w.drain(io, now)?;
                    continue;
                }
            }
            let wait = (t0 + due.t_ns).saturating_sub(now);
            if wait > SLEEP_ABOVE_NS {
                std::thread::sleep(std::time::Duration::from_nanos(wait - SPIN_BEFORE_NS));
            } else {
                std::hint::spin_loop();
            }
            continue;
        }
        let in_warmup = if unpaced { now < warmup_end } else { false };
        let pend = &pending;
        let app = &mut app_ns;
        let queued = io.tx_batch(pend.len(), &mut |i, buf| {
            let (s, slot) = pend[i];
            let tx_ns = clock::realtime_ns();
            app[i] = tx_ns;
            let t = plan.streams[s].template(&slot);
            if payload_only {
                t.write_payload(buf, slot.seq, tx_ns)
            } else {
                t.write(buf, slot.seq, tx_ns)
            }
        })?;
        io.flush_tx()?;
        if queued == 0 {
            report.ring_full_retries += 1;
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(1024) {
                std::thread::yield_now();
            }
            continue;
        }
        for (i, &(s, slot)) in pending[..queued].iter().enumerate() {
            let fi = offsets[s] + slot.flow as usize;
            flow_sent[fi] += 1;
            stream_sent[s] += 1;
            let warm = if unpaced {
                in_warmup
            } else {
                slot.t_ns < plan.warmup_ns
            };
            if Some(s) == probe_stream {
                last_probe_tx = app_ns[i];
            }
            if warm {
                flow_warm[fi] = flow_warm[fi].max(slot.seq + 1);
            } else if Some(s) == probe_stream {
                probe_measured += 1;
                first_probe_tx.get_or_insert(app_ns[i]);
            }
            if !unpaced {
                let late = now.saturating_sub(t0 + slot.t_ns);
                report.max_lateness_ns = report.max_lateness_ns.max(late);
                if late > late_threshold_ns {
                    report.late_packets += 1;
                }
            }
        }
        if let Some(w) = stamps.as_mut() {
            // Queue order is the order the kernel numbers the frames in.
            for (i, &(s, slot)) in pending[..queued].iter().enumerate() {
                if Some(s) == probe_stream {
                    w.push_probe(
                        plan.streams[s].flow_base + slot.flow as u16,
                        slot.seq,
                        app_ns[i],
                    );
                } else {
                    w.push_other();
                }
            }
            if w.waiting() >= txstamps::DRAIN_AT {
                w.drain(io, now)?;
            }
        }
        pending.drain(..queued);
    }
    // The last frames may still sit in the ring when the kernel was busy.
    let flush_deadline = clock::monotonic_ns() + 100_000_000;
    while io.tx_outstanding() > 0 && clock::monotonic_ns() < flush_deadline {
        io.flush_tx()?;
        std::hint::spin_loop();
    }
    if let Some(w) = stamps {
        // Software stamps are queued during the send itself; hardware ones come a little
        // later from the NIC.
        report.tx_stamps = Some(w.finish(io, 100_000_000)?);
    }

    report.sent = flow_sent.iter().sum();
    for (s, sp) in plan.streams.iter().enumerate() {
        for f in 0..sp.spec.flows as usize {
            let fi = offsets[s] + f;
            report.flows.push(FlowReport {
                flow: sp.flow_base + f as u16,
                stream: s,
                role: role_name(sp.role).into(),
                sent: flow_sent[fi],
                warmup: flow_warm[fi],
            });
        }
        report.streams.push(stream_report(sp, stream_sent[s]));
    }
    report.warmup = report.flows.iter().map(|f| f.warmup.min(f.sent)).sum();
    report.first_tx_ns = first_probe_tx;
    report.last_tx_ns = (last_probe_tx > 0).then_some(last_probe_tx);
    if let (Some(a), Some(b)) = (report.first_tx_ns, report.last_tx_ns) {
        if probe_measured >= 2 && b > a {
            // n packets span n−1 gaps.
            report.tx_pps = Some((probe_measured - 1) as f64 * 1e9 / (b - a) as f64);
        }
    }
    Ok(report)
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Probe => "probe",
        Role::Background => "background",
    }
}

fn stream_report(sp: &StreamPlan, sent: u64) -> StreamReport {
    let pps = sp.spec.mean_pps();
    let mean = sp.spec.mean_frame_bytes();
    StreamReport {
        pattern: sp.spec.pattern.name().into(),
        role: role_name(sp.role).into(),
        spec: serde_json::to_value(&sp.spec).unwrap_or_default(),
        offered_pps: pps,
        offered_bps_l1: pps.map(|p| p * (mean + pattern::L1_OVERHEAD_BYTES as f64) * 8.0),
        offered_bps_l2: pps.map(|p| p * mean * 8.0),
        mean_frame_bytes: mean,
        flows: sp.spec.flows,
        sent,
        clamped_sizes: sp.clamped_sizes,
    }
}

/// Run `plan` on several backends at once, one pinned thread each (`cpus[k]` for thread
/// `k` when given), all from one common start; the reports are merged and a warning is
/// added when the host did not achieve the requested rate.
pub fn run_threads(
    ios: Vec<&mut dyn PacketIo>,
    plan: &GenPlan,
    stop: &AtomicBool,
    pin: &(dyn Fn(usize) + Sync),
) -> Result<GenReport, GenError> {
    run_threads_stamped(ios, plan, stop, pin, None)
}

/// [`run_threads`], handing every thread's matched kernel TX stamps to `sink` (called from
/// the TX threads, a batch at a time) when the plan asks for kernel TX timestamps.
pub fn run_threads_stamped(
    ios: Vec<&mut dyn PacketIo>,
    plan: &GenPlan,
    stop: &AtomicBool,
    pin: &(dyn Fn(usize) + Sync),
    sink: Option<StampSink<'_>>,
) -> Result<GenReport, GenError> {
    let n = ios.len().max(1);
    // Start a little in the future so every thread is spinning before the first deadline.
    let t0 = clock::monotonic_ns() + 5_000_000;
    let results: Vec<Result<GenReport, GenError>> = std::thread::scope(|s| {
        let handles: Vec<_> = ios
            .into_iter()
            .enumerate()
            .map(|(k, io)| {
                s.spawn(move || {
                    pin(k);
                    run_part_stamped(
                        io,
                        plan,
                        stop,
                        ThreadOpts {
                            index: k,
                            of: n,
                            t0_ns: Some(t0),
                        },
                        sink,
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(GenError::Config("a TX thread panicked".into())))
            })
            .collect()
    });
    let mut reports = Vec::new();
    for r in results {
        reports.push(r?);
    }
    let mut m = merge(reports);
    add_rate_warnings(&mut m, plan);
    Ok(m)
}

/// Merge the reports of the threads of one run.
pub fn merge(reports: Vec<GenReport>) -> GenReport {
    let mut it = reports.into_iter();
    let Some(mut m) = it.next() else {
        return GenReport::default();
    };
    for r in it {
        m.sent += r.sent;
        m.late_packets += r.late_packets;
        m.max_lateness_ns = m.max_lateness_ns.max(r.max_lateness_ns);
        m.ring_full_retries += r.ring_full_retries;
        m.interrupted |= r.interrupted;
        m.first_tx_ns = match (m.first_tx_ns, r.first_tx_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        m.last_tx_ns = m.last_tx_ns.max(r.last_tx_ns);
        for (a, b) in m.flows.iter_mut().zip(&r.flows) {
            a.sent += b.sent;
            a.warmup = a.warmup.max(b.warmup);
        }
        for (a, b) in m.streams.iter_mut().zip(&r.streams) {
            a.sent += b.sent;
        }
        if let (Some(a), Some(b)) = (m.tx_stamps.as_mut(), r.tx_stamps.as_ref()) {
            a.add(b);
        }
        // tx_pps over all threads: measured probe frames over the union's span.
    }
    m.warmup = m.flows.iter().map(|f| f.warmup.min(f.sent)).sum();
    if m.threads > 1 {
        let probe: Option<usize> = m.streams.iter().position(|s| s.role == "probe");
        if let (Some(p), Some(a), Some(b)) = (probe, m.first_tx_ns, m.last_tx_ns) {
            let measured: u64 = m
                .flows
                .iter()
                .filter(|f| f.stream == p)
                .map(|f| f.sent - f.warmup.min(f.sent))
                .sum();
            m.tx_pps =
                (measured >= 2 && b > a).then(|| (measured - 1) as f64 * 1e9 / (b - a) as f64);
        }
    }
    m
}

/// Add the "host did not keep up" warnings a report calls for.
pub fn add_rate_warnings(r: &mut GenReport, plan: &GenPlan) {
    let measured = r.sent - r.warmup;
    if measured > 0 && r.late_packets * 1000 > measured {
        r.warnings.push(format!(
            "the host did not keep up with the requested pattern: {} of {} packets left more than one mean gap after their deadline (max {} ns late)",
            r.late_packets, r.sent, r.max_lateness_ns
        ));
    }
    let constant = matches!(plan.streams[0].spec.pattern, Pattern::Cbr);
    if let (Some(acc), true, false) = (r.rate_accuracy(), constant, r.interrupted) {
        if acc < 1.0 - selfcheck::ACCURACY_BOUND {
            r.warnings.push(format!(
                "the requested rate is above what this host achieved: {:.0} of {:.0} pps ({:.2} %); use more TX threads, a faster backend or a lower rate",
                r.tx_pps.unwrap_or(0.0),
                r.offered_pps.unwrap_or(0.0),
                acc * 100.0
            ));
        }
    }
}

// ---------------------------------------------------------------------------
// The first version's API: one CBR probe flow.
// ---------------------------------------------------------------------------

/// What to send with [`run_cbr`].
#[derive(Debug, Clone)]
pub struct CbrConfig {
    /// Packets per second; `None` sends as fast as the backend accepts.
    pub rate_pps: Option<f64>,
    /// Measured part, after warm-up, in ns. With a rate this becomes an exact
    /// packet count; at max rate it is a time limit.
    pub duration_ns: Option<u64>,
    /// Exact number of measured packets (overrides `duration_ns`).
    pub count: Option<u64>,
    /// Warm-up before the measured part, in ns (packets sent, later ignored).
    pub warmup_ns: u64,
    /// Largest number of frames handed to the backend in one call.
    pub batch: usize,
}

impl Default for CbrConfig {
    fn default() -> Self {
        CbrConfig {
            rate_pps: Some(10_000.0),
            duration_ns: Some(1_000_000_000),
            count: None,
            warmup_ns: 0,
            batch: 32,
        }
    }
}

/// Send a CBR probe stream of `template` on `io` (a one-stream [`run`]).
pub fn run_cbr(
    io: &mut dyn PacketIo,
    template: &ProbeTemplate,
    cfg: &CbrConfig,
    stop: &AtomicBool,
) -> Result<GenReport, GenError> {
    let spec = StreamSpec {
        pattern: Pattern::Cbr,
        rate: cfg.rate_pps.map_or(Rate::Max, Rate::Pps),
        sizes: Sizes::Fixed(template.frame_bytes() as u64),
        flows: 1,
        seed: 0,
    };
    let base = template.spec();
    let stream = StreamPlan::new(spec, Role::Probe, base.flow, base, FlowVary::default())?;
    // A count is of measured packets: the warm-up comes on top.
    let warm = cfg
        .rate_pps
        .map_or(0, |r| (cfg.warmup_ns as f64 * r / 1e9).ceil() as u64);
    let plan = GenPlan {
        streams: vec![stream],
        warmup_ns: cfg.warmup_ns,
        duration_ns: if cfg.count.is_some() && cfg.rate_pps.is_some() {
            None
        } else {
            cfg.duration_ns
        },
        count: cfg.count.map(|c| c + warm),
        batch: cfg.batch,
        tx_timestamp: TxTimestamp::App,
    };
    let mut r = run(io, &plan, stop)?;
    add_rate_warnings(&mut r, &plan);
    Ok(r)
}

#[cfg(test)]
mod tests;
