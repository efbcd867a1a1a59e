//! Discrete-event simulation of a packet-processing pipeline.
//!
//! ```text
//!  arrivals ──RSS (flow mod cores)──► queue (capacity L) ──► poller ──► departures
//!  CBR, Poisson, bursts,              one per core            batch ≤ β, drain timer,
//!  slotted distributions, replay                              busy-poll | interrupt + moderation,
//!                                                             service B_i per batch size i,
//!                                                             periodic OS interruptions
//! ```
//!
//! A poll at instant `t` takes the packets that arrived at or before `t`
//! (at most β), then the core works `B_i` for a batch of `i`; all packets of
//! the batch leave at the end of that work (a vector is released as a
//! whole, as in VPP and Snort-DPDK). An empty poll costs `B_0`. Arrivals
//! that find `L` packets queued are dropped. With a drain timer the poller
//! leaves a batch of fewer than β packets queued until its oldest packet has
//! waited `drain_ns`. In interrupt mode the core sleeps after an empty poll;
//! the next arrival raises an interrupt no sooner than `moderation_ns` after
//! the previous one, and polling resumes `wake_ns` later (NAPI). An OS
//! interruption stops the core: work in flight finishes later by its length.
//!
//! Cores share nothing, so each core's events are processed in time order on
//! their own and the departures are merged by time; the result is the same
//! as one global event list, at a fraction of the cost. Idle busy polling
//! with a deterministic `B_0` is skipped arithmetically (the polls still
//! count in the batch-size histogram), so a lightly loaded poller does not
//! cost one event per poll.
use serde::Serialize;
use std::collections::VecDeque;

use nflab_analyze::dist::{Distribution, Pct, DEFAULT_EXACT_LIMIT, DEFAULT_HDR_DIGITS};

use crate::dist::SlotDist;
use crate::rng::Rng;
use crate::{non_negative, positive, ModelError};

mod irq;
mod records;

pub use irq::Interruption;
use irq::IrqSchedule;
pub use records::{read_gaps_ns, write_nfr};

/// The arrival process (all cores together).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Arrivals {
    /// Constant bit rate: one packet every `1/rate_pps`.
    Cbr {
        /// Packets per second.
        rate_pps: f64,
    },
    /// Poisson: exponential inter-arrival times.
    Poisson {
        /// Packets per second.
        rate_pps: f64,
    },
    /// Bursts of `burst` packets `gap_ns` apart, bursts spaced so that the
    /// mean rate is `rate_pps`.
    Bursts {
        /// Mean packets per second.
        rate_pps: f64,
        /// Packets per burst.
        burst: u32,
        /// Gap between the packets of a burst, ns (67.2 for 64 B at 10G).
        gap_ns: f64,
    },
    /// Inter-arrival times drawn from a distribution on a grid of `dt_ns`
    /// (the inputs of the batch model: deterministic, Poisson, geometric,
    /// negative binomial, empirical).
    Slots {
        /// Inter-arrival time in slots.
        dist: SlotDist,
        /// Slot length, ns.
        dt_ns: u64,
    },
    /// Replay of inter-arrival times, cycled (from a record file's tx times).
    Replay {
        /// Gaps between consecutive packets, ns.
        #[serde(skip)]
        gaps_ns: Vec<u64>,
    },
}

impl Arrivals {
    /// Mean arrival rate, packets per second.
    pub fn rate_pps(&self) -> f64 {
        match self {
            Arrivals::Cbr { rate_pps }
            | Arrivals::Poisson { rate_pps }
            | Arrivals::Bursts { rate_pps, .. } => *rate_pps,
            Arrivals::Slots { dist, dt_ns } => 1e9 / (dist.mean() * *dt_ns as f64),
            Arrivals::Replay { gaps_ns } => {
                1e9 * gaps_ns.len() as f64 / gaps_ns.iter().sum::<u64>() as f64
            }
        }
    }

    fn check(&self) -> Result<(), ModelError> {
        match self {
            Arrivals::Cbr { rate_pps } | Arrivals::Poisson { rate_pps } => {
                positive("--rate-pps", *rate_pps)
            }
            Arrivals::Bursts {
                rate_pps,
                burst,
                gap_ns,
            } => {
                positive("--rate-pps", *rate_pps)?;
                positive("--burst", *burst as f64)?;
                non_negative("--burst-gap-ns", *gap_ns)?;
                if (*burst as f64 - 1.0) * gap_ns >= *burst as f64 * 1e9 / rate_pps {
                    return Err(ModelError::Input {
                        name: "--burst",
                        reason: format!(
                            "bursts of {burst} packets {gap_ns} ns apart do not fit into the \
                             period of {:.0} ns that --rate-pps {rate_pps} leaves; lower the rate \
                             or the burst",
                            *burst as f64 * 1e9 / rate_pps
                        ),
                    });
                }
                Ok(())
            }
            Arrivals::Slots { dist, dt_ns } => {
                positive("--dt-ns", *dt_ns as f64)?;
                if dist.mean() <= 0.0 {
                    return Err(ModelError::Input {
                        name: "inter-arrival distribution",
                        reason: "its mean is 0 slots: every packet would arrive at once; give a \
                                 positive mean"
                            .into(),
                    });
                }
                Ok(())
            }
            Arrivals::Replay { gaps_ns } => {
                if gaps_ns.is_empty() || gaps_ns.iter().all(|g| *g == 0) {
                    return Err(ModelError::Input {
                        name: "--replay",
                        reason: "the record file gives no inter-arrival times (it needs at least \
                                 two packets with different tx times)"
                            .into(),
                    });
                }
                Ok(())
            }
        }
    }
}

/// Mean service time of a batch as a function of its size.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ServiceMean {
    /// E[B_i] = fixed_ns + per_packet_ns · i (seed 003's global linear fit).
    Linear {
        /// Cost of a poll, empty or not, ns.
        fixed_ns: f64,
        /// Cost per packet, ns.
        per_packet_ns: f64,
    },
    /// E[B_i] from a table indexed by batch size i = 0, 1, …; sizes beyond the
    /// table continue the line through its last two entries.
    Table {
        /// Mean service time per batch size, ns.
        mean_ns: Vec<f64>,
    },
}

impl ServiceMean {
    /// E[B_i], ns.
    pub fn mean_ns(&self, i: usize) -> f64 {
        match self {
            ServiceMean::Linear {
                fixed_ns,
                per_packet_ns,
            } => fixed_ns + per_packet_ns * i as f64,
            ServiceMean::Table { mean_ns } => match mean_ns.get(i) {
                Some(v) => *v,
                None => {
                    let n = mean_ns.len();
                    let last = mean_ns[n - 1];
                    let slope = if n >= 2 { last - mean_ns[n - 2] } else { 0.0 };
                    last + slope * (i + 1 - n) as f64
                }
            },
        }
    }
}

/// The distribution of a batch's service time around its mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ServiceDist {
    /// Exactly the mean (rounded to ns).
    Deterministic,
    /// Exponential with the mean (M/M/1 when β = 1).
    Exponential,
    /// Poisson in slots of `dt_ns` with mean E[B_i]/Δt (seed 003's choice).
    PoissonSlots {
        /// Slot length, ns.
        dt_ns: u64,
    },
}

/// Batch service times.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Service {
    /// Mean per batch size.
    pub mean: ServiceMean,
    /// Distribution around the mean.
    pub dist: ServiceDist,
}

/// How the poller waits for packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PollMode {
    /// Poll continuously; an empty poll costs B_0.
    BusyPoll,
    /// Sleep when the queue is empty; wake on an interrupt.
    Interrupt {
        /// Minimum time between two interrupts (NIC interrupt throttling), ns.
        moderation_ns: u64,
        /// From the interrupt to the first poll, ns.
        wake_ns: u64,
    },
}

/// The whole simulated system.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimConfig {
    /// Arrival process.
    pub arrivals: Arrivals,
    /// Packets to generate.
    pub packets: u64,
    /// The first packets (arrival order) and the polls before the first
    /// counted arrival are left out of the statistics.
    pub warmup_packets: u64,
    /// Flows; packet k belongs to flow k mod flows.
    pub flows: u16,
    /// Cores behind RSS (flow mod cores).
    pub cores: u16,
    /// Queue capacity L per core.
    pub queue_capacity: usize,
    /// Maximum batch size β.
    pub batch: usize,
    /// Drain timer: a batch below β waits until its oldest packet is this
    /// old; 0 = take what is there.
    pub drain_ns: u64,
    /// Busy-poll or interrupt mode.
    pub mode: PollMode,
    /// Batch service times.
    pub service: Service,
    /// Periodic OS interruptions of every core.
    pub interruptions: Vec<Interruption>,
    /// Constant added to every departure time (wire and recorder), ns.
    pub wire_ns: u64,
    /// Seed of every random draw.
    pub seed: u64,
    /// Keep every delivered packet (needed for records and distributions).
    pub keep_packets: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            arrivals: Arrivals::Poisson { rate_pps: 1e6 },
            packets: 100_000,
            warmup_packets: 0,
            flows: 1,
            cores: 1,
            queue_capacity: 4096,
            batch: 32,
            drain_ns: 0,
            mode: PollMode::BusyPoll,
            service: Service {
                mean: ServiceMean::Linear {
                    fixed_ns: 50.0,
                    per_packet_ns: 100.0,
                },
                dist: ServiceDist::Deterministic,
            },
            interruptions: Vec::new(),
            wire_ns: 0,
            seed: 1,
            keep_packets: false,
        }
    }
}

/// One delivered packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    /// Flow.
    pub flow: u16,
    /// Sequence number within the flow (from 0, warm-up included).
    pub seq: u64,
    /// Arrival, ns.
    pub tx_ns: u64,
    /// Departure (plus `wire_ns`), ns.
    pub rx_ns: u64,
}

/// Statistics of a simulation, warm-up excluded.
#[derive(Debug, Clone, Serialize)]
pub struct SimStats {
    /// Packets generated after the warm-up.
    pub arrived: u64,
    /// Of them dropped at a full queue.
    pub dropped: u64,
    /// Of them delivered.
    pub delivered: u64,
    /// dropped / arrived.
    pub loss_probability: f64,
    /// Mean batch size over all polls, empty polls included (E[V] of seed 003).
    pub mean_batch_size: f64,
    /// Mean batch size over non-empty polls.
    pub mean_nonempty_batch_size: f64,
    /// Polls per batch size 0..=β.
    pub batch_histogram: Vec<u64>,
    /// Mean sojourn time (arrival to departure), ns.
    pub mean_sojourn_ns: f64,
    /// Population standard deviation of the sojourn time (÷N), ns.
    pub stdev_sojourn_ns: f64,
    /// Sojourn quantiles p50, p90, p99, p99.9, p99.99, ns: the engine's
    /// nearest rank ([`Distribution`]), exact up to [`DEFAULT_EXACT_LIMIT`]
    /// counted packets, beyond that the upper end of the HDR bucket
    /// ([`DEFAULT_HDR_DIGITS`] digits, ≤ 0.1 % above the exact value).
    pub sojourn_quantiles_ns: [f64; 5],
    /// Minimum and maximum sojourn, ns.
    pub min_max_sojourn_ns: [u64; 2],
    /// Carried packets per second over the counted period.
    pub throughput_pps: f64,
    /// Offered packets per second (mean of the arrival process).
    pub offered_pps: f64,
    /// Events processed: arrivals, polls simulated one by one, departures.
    pub events: u64,
    /// Simulated time, ns.
    pub sim_time_ns: u64,
}

/// Result of [`simulate`].
#[derive(Debug, Clone)]
pub struct SimOutput {
    /// Statistics.
    pub stats: SimStats,
    /// Sojourn times (warm-up excluded), in the metrics engine's
    /// distribution: the one `nflab analyze` computes percentiles with.
    pub sojourn: Distribution,
    /// Delivered packets in departure order, when `keep_packets` is set
    /// (warm-up included).
    pub delivered: Vec<Delivered>,
    /// Generated packets per flow.
    pub sent_per_flow: Vec<u64>,
    /// Warm-up packets per flow (seq below this are warm-up).
    pub warmup_per_flow: Vec<u64>,
}

/// Per-batch-size service time sampler.
enum Sampler {
    Fixed(u64),
    Exp(f64),
    Slots(SlotDist, u64),
}

impl Sampler {
    #[inline]
    fn draw(&self, rng: &mut Rng) -> u64 {
        match self {
            Sampler::Fixed(v) => *v,
            Sampler::Exp(m) => rng.exp(*m).round() as u64,
            Sampler::Slots(d, dt) => d.sample(rng) * dt,
        }
    }
}

fn samplers(cfg: &SimConfig) -> Result<Vec<Sampler>, ModelError> {
    (0..=cfg.batch)
        .map(|i| {
            let m = cfg.service.mean.mean_ns(i);
            if !(m.is_finite() && m >= 0.0) {
                return Err(ModelError::Input {
                    name: "service time",
                    reason: format!(
                        "the mean service time of a batch of {i} is {m} ns; give non-negative \
                         times for every batch size up to --batch"
                    ),
                });
            }
            Ok(match cfg.service.dist {
                ServiceDist::Deterministic => Sampler::Fixed(m.round() as u64),
                ServiceDist::Exponential if m == 0.0 => Sampler::Fixed(0),
                ServiceDist::Exponential => Sampler::Exp(m),
                ServiceDist::PoissonSlots { dt_ns } => {
                    positive("--dt-ns", dt_ns as f64)?;
                    let d = SlotDist::poisson(m / dt_ns as f64)?;
                    if d.pmf.len() == 1 {
                        Sampler::Fixed(d.offset * dt_ns)
                    } else {
                        Sampler::Slots(d, dt_ns)
                    }
                }
            })
        })
        .collect()
}

/// Check a configuration; every error names the flag.
pub fn check(cfg: &SimConfig) -> Result<(), ModelError> {
    cfg.arrivals.check()?;
    positive("--packets", cfg.packets as f64)?;
    positive("--flows", cfg.flows as f64)?;
    positive("--cores", cfg.cores as f64)?;
    positive("--batch", cfg.batch as f64)?;
    positive("--queue", cfg.queue_capacity as f64)?;
    if cfg.batch > cfg.queue_capacity {
        return Err(ModelError::Input {
            name: "--batch",
            reason: format!(
                "a batch of {} is above the queue capacity --queue {}; use a batch ≤ the capacity",
                cfg.batch, cfg.queue_capacity
            ),
        });
    }
    if cfg.warmup_packets >= cfg.packets {
        return Err(ModelError::Input {
            name: "--warmup-packets",
            reason: format!(
                "{} warm-up packets leave none of the {} to measure",
                cfg.warmup_packets, cfg.packets
            ),
        });
    }
    for i in &cfg.interruptions {
        non_negative("--interrupt rate (Hz)", i.rate_hz)?;
        if i.durations_ns.is_empty() {
            return Err(ModelError::Input {
                name: "--interrupt",
                reason: "give at least one duration".into(),
            });
        }
        let mean = i.durations_ns.iter().sum::<u64>() as f64 / i.durations_ns.len() as f64;
        if i.rate_hz * mean >= 1e9 {
            return Err(ModelError::Input {
                name: "--interrupt",
                reason: format!(
                    "{} Hz × {mean} ns keeps the core interrupted all the time",
                    i.rate_hz
                ),
            });
        }
    }
    if let Arrivals::Replay { .. } | Arrivals::Slots { .. } = cfg.arrivals {
        // checked above
    }
    if let ServiceMean::Table { mean_ns } = &cfg.service.mean {
        if mean_ns.is_empty() {
            return Err(ModelError::Input {
                name: "--service-table",
                reason: "the table is empty; give the mean service time of batch sizes 0, 1, …"
                    .into(),
            });
        }
    }
    if cfg.service.mean.mean_ns(0) == 0.0
        && cfg.mode == PollMode::BusyPoll
        && cfg.drain_ns > 0
        && !matches!(cfg.service.dist, ServiceDist::Deterministic)
    {
        return Err(ModelError::Input {
            name: "--drain-ns",
            reason: "a drain timer with a free empty poll needs deterministic service times".into(),
        });
    }
    Ok(())
}

/// Generate the arrival times and split them by core: (time, global index).
fn generate(cfg: &SimConfig) -> Vec<Vec<(u64, u64)>> {
    let mut rng = Rng::new(cfg.seed);
    let cores = cfg.cores as usize;
    let flows = cfg.flows as u64;
    let per = (cfg.packets as usize) / cores + 1;
    let mut out: Vec<Vec<(u64, u64)>> = (0..cores).map(|_| Vec::with_capacity(per)).collect();
    let mut t = 0.0f64;
    let mut tu = 0u64;
    for g in 0..cfg.packets {
        let at = match &cfg.arrivals {
            Arrivals::Cbr { rate_pps } => (g as f64 * 1e9 / rate_pps).round() as u64,
            Arrivals::Poisson { rate_pps } => {
                if g > 0 {
                    t += rng.exp(1e9 / rate_pps);
                }
                t.round() as u64
            }
            Arrivals::Bursts {
                rate_pps,
                burst,
                gap_ns,
            } => {
                let b = *burst as u64;
                let period = b as f64 * 1e9 / rate_pps;
                ((g / b) as f64 * period + (g % b) as f64 * gap_ns).round() as u64
            }
            Arrivals::Slots { dist, dt_ns } => {
                if g > 0 {
                    tu += dist.sample(&mut rng) * dt_ns;
                }
                tu
            }
            Arrivals::Replay { gaps_ns } => {
                if g > 0 {
                    tu += gaps_ns[((g - 1) as usize) % gaps_ns.len()];
                }
                tu
            }
        };
        // RSS: flow = g mod flows, core = flow mod cores (no division in
        // the common single-flow or single-core case).
        let core = if cores == 1 || flows == 1 {
            0
        } else {
            ((g % flows) % cores as u64) as usize
        };
        out[core].push((at, g));
    }
    out
}

struct CoreResult {
    delivered: Vec<Delivered>,
    sojourn: Distribution,
    batch_hist: Vec<u64>,
    arrived: u64,
    dropped: u64,
    events: u64,
    end_ns: u64,
}

/// Polls from the free instant `t` every `b0` until the first poll instant
/// at or after `target`: (that instant, polls started before it).
fn grid_jump(irq: &mut IrqSchedule, mut t: u64, target: u64, b0: u64) -> (u64, u64) {
    if b0 == 0 {
        return (irq.free_at(target.max(t)), 0);
    }
    let mut polls = 0;
    loop {
        if t >= target {
            return (t, polls);
        }
        let k = (target - t).div_ceil(b0);
        let cand = t + k * b0;
        let s = irq.next_start(t);
        if cand <= s {
            return (cand, polls + k);
        }
        let j = (s - t) / b0;
        polls += j + 1;
        t = irq.advance(t + j * b0, b0);
    }
}

fn run_core(
    cfg: &SimConfig,
    core: usize,
    arr: &[(u64, u64)],
    warm_t: u64,
    svc: &[Sampler],
) -> CoreResult {
    let mut rng = Rng::new(cfg.seed ^ (0xA5A5_5A5A_0000_0001u64.wrapping_mul(core as u64 + 1)));
    let mut irq = IrqSchedule::new(&cfg.interruptions);
    let beta = cfg.batch;
    let cap = cfg.queue_capacity;
    let flows = cfg.flows as u64;
    let mut q: VecDeque<(u64, u64)> = VecDeque::with_capacity(cap.min(1 << 16));
    let mut res = CoreResult {
        delivered: Vec::new(),
        // Each core keeps its share of the exact limit, so the pooled
        // distribution is exact whenever the cores' values fit it together.
        sojourn: Distribution::new(
            DEFAULT_EXACT_LIMIT / cfg.cores.max(1) as u64,
            DEFAULT_HDR_DIGITS,
        ),
        batch_hist: vec![0; beta + 1],
        arrived: 0,
        dropped: 0,
        events: 0,
        end_ns: 0,
    };
    let b0_fixed = match svc[0] {
        Sampler::Fixed(v) => Some(v),
        _ => None,
    };
    let (irq_mode, moderation, wake) = match cfg.mode {
        PollMode::BusyPoll => (false, 0, 0),
        PollMode::Interrupt {
            moderation_ns,
            wake_ns,
        } => (true, moderation_ns, wake_ns),
    };
    let n = arr.len();
    let mut next = 0usize;
    let mut sleeping = irq_mode;
    let mut last_irq: Option<u64> = None;
    let mut t = irq.free_at(arr.first().map_or(0, |a| a.0));
    loop {
        if sleeping {
            if next >= n {
                break;
            }
            let mut it = arr[next].0.max(t);
            if let Some(l) = last_irq {
                it = it.max(l + moderation);
            }
            last_irq = Some(it);
            t = irq.free_at(it + wake);
            sleeping = false;
        }
        // Admit everything that arrived by the poll instant; the queue only
        // grows between polls, so admission order decides the drops exactly.
        while next < n && arr[next].0 <= t {
            let (at, g) = arr[next];
            let counted = g >= cfg.warmup_packets;
            res.arrived += counted as u64;
            if q.len() < cap {
                q.push_back((at, g));
            } else {
                res.dropped += counted as u64;
            }
            next += 1;
        }
        res.events += 1; // the poll
        let avail = q.len();
        let ready = avail >= beta
            || (avail > 0
                && (cfg.drain_ns == 0
                    || t.saturating_sub(q.front().map_or(t, |f| f.0)) >= cfg.drain_ns));
        let count_poll = t >= warm_t;
        if !ready {
            if avail == 0 && next >= n {
                break;
            }
            if irq_mode && avail == 0 {
                // The empty poll that re-enables the interrupt.
                res.batch_hist[0] += count_poll as u64;
                t = irq.advance(t, svc[0].draw(&mut rng));
                sleeping = true;
                continue;
            }
            match b0_fixed {
                Some(b0) => {
                    // Skip the idle polls up to the instant the queue is ready.
                    let mut target = if avail == 0 {
                        arr[next].0
                    } else {
                        let front = q.front().map_or(t, |f| f.0) + cfg.drain_ns;
                        match arr.get(next + (beta - avail) - 1) {
                            Some(a) => front.min(a.0),
                            None => front,
                        }
                    };
                    if target <= t {
                        target = t + 1;
                    }
                    let t0 = t;
                    let (t1, polls) = grid_jump(&mut irq, t, target, b0);
                    if t0 >= warm_t {
                        res.batch_hist[0] += polls;
                    } else if t1 > warm_t && b0 > 0 {
                        res.batch_hist[0] += (t1 - warm_t) / b0;
                    }
                    t = t1;
                }
                None => {
                    res.batch_hist[0] += count_poll as u64;
                    t = irq.advance(t, svc[0].draw(&mut rng));
                }
            }
            continue;
        }
        let take = avail.min(beta);
        res.batch_hist[take] += count_poll as u64;
        let end = irq.advance(t, svc[take].draw(&mut rng));
        for _ in 0..take {
            let (at, g) = q.pop_front().expect("queue holds take packets");
            res.events += 1; // the departure
            if g >= cfg.warmup_packets {
                res.sojourn
                    .record(i64::try_from(end - at).unwrap_or(i64::MAX));
            }
            if cfg.keep_packets {
                let flow = g % flows;
                res.delivered.push(Delivered {
                    flow: flow as u16,
                    seq: g / flows,
                    tx_ns: at,
                    rx_ns: end + cfg.wire_ns,
                });
            }
        }
        t = end;
    }
    res.events += n as u64; // the arrivals
    res.end_ns = t;
    res
}

/// Run a simulation.
pub fn simulate(cfg: &SimConfig) -> Result<SimOutput, ModelError> {
    check(cfg)?;
    let svc = samplers(cfg)?;
    let per_core = generate(cfg);
    // Start of the counted period: arrival of the first counted packet.
    let warm_t = per_core
        .iter()
        .flat_map(|v| v.iter())
        .filter(|(_, g)| *g == cfg.warmup_packets)
        .map(|(t, _)| *t)
        .next()
        .unwrap_or(0);
    let last_arrival = per_core
        .iter()
        .filter_map(|v| v.last().map(|a| a.0))
        .max()
        .unwrap_or(0);
    let results: Vec<CoreResult> = per_core
        .iter()
        .enumerate()
        .map(|(c, arr)| run_core(cfg, c, arr, warm_t, &svc))
        .collect();

    let mut sojourn = Distribution::new(DEFAULT_EXACT_LIMIT, DEFAULT_HDR_DIGITS);
    let mut batch_hist = vec![0u64; cfg.batch + 1];
    let (mut arrived, mut dropped, mut events, mut end) = (0, 0, 0, 0);
    for r in &results {
        sojourn.merge(&r.sojourn);
        for (a, b) in batch_hist.iter_mut().zip(&r.batch_hist) {
            *a += b;
        }
        arrived += r.arrived;
        dropped += r.dropped;
        events += r.events;
        end = end.max(r.end_ns);
    }
    let delivered_n = sojourn.count();
    let polls: u64 = batch_hist.iter().sum();
    let nonempty: u64 = batch_hist.iter().skip(1).sum();
    let pkts_in_batches: u64 = batch_hist
        .iter()
        .enumerate()
        .map(|(i, c)| i as u64 * c)
        .sum();
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let pcts = ["50", "90", "99", "99.9", "99.99"]
        .map(|p| Pct::parse(p).unwrap_or_else(|| unreachable!("{p} is a percentile")));
    let qv = sojourn.quantiles(&pcts);
    let q: [f64; 5] = std::array::from_fn(|i| qv[i].map_or(0.0, |q| q.value as f64));
    let span = last_arrival.saturating_sub(warm_t);
    let stats = SimStats {
        arrived,
        dropped,
        delivered: delivered_n,
        loss_probability: ratio(dropped as f64, arrived as f64),
        mean_batch_size: ratio(pkts_in_batches as f64, polls as f64),
        mean_nonempty_batch_size: ratio(pkts_in_batches as f64, nonempty as f64),
        batch_histogram: batch_hist,
        mean_sojourn_ns: sojourn.mean().unwrap_or(0.0),
        stdev_sojourn_ns: sojourn.stdev().unwrap_or(0.0),
        sojourn_quantiles_ns: q,
        min_max_sojourn_ns: [sojourn.min(), sojourn.max()].map(|v| v.map_or(0, |v| v as u64)),
        throughput_pps: ratio(delivered_n as f64 * 1e9, span as f64),
        offered_pps: cfg.arrivals.rate_pps(),
        events,
        sim_time_ns: end,
    };
    let mut delivered = Vec::new();
    if cfg.keep_packets {
        delivered = merge_by_rx(results.into_iter().map(|r| r.delivered).collect());
    }
    let flows = cfg.flows as u64;
    let per_flow = |n: u64| -> Vec<u64> {
        (0..flows)
            .map(|f| if n > f { (n - f).div_ceil(flows) } else { 0 })
            .collect()
    };
    Ok(SimOutput {
        stats,
        sojourn,
        delivered,
        sent_per_flow: per_flow(cfg.packets),
        warmup_per_flow: per_flow(cfg.warmup_packets),
    })
}

fn merge_by_rx(mut lists: Vec<Vec<Delivered>>) -> Vec<Delivered> {
    if lists.len() == 1 {
        return lists.pop().unwrap_or_default();
    }
    let total = lists.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(total);
    let mut heap = std::collections::BinaryHeap::new();
    for (i, l) in lists.iter().enumerate() {
        if let Some(d) = l.first() {
            heap.push(std::cmp::Reverse((d.rx_ns, i, 0usize)));
        }
    }
    while let Some(std::cmp::Reverse((_, i, j))) = heap.pop() {
        out.push(lists[i][j]);
        if let Some(d) = lists[i].get(j + 1) {
            heap.push(std::cmp::Reverse((d.rx_ns, i, j + 1)));
        }
    }
    out
}

#[cfg(test)]
mod tests;
