//! Traffic patterns: when each packet of a stream is due, and which flow and size it has.
//!
//! A [`StreamSchedule`] turns a [`StreamSpec`] into a deterministic sequence of
//! [`Slot`]s: deadline (ns after the generator's start), flow index, size index and the
//! per-flow sequence number. It is the *offered* pattern, known to the packet before the
//! run starts: the pacer only tries to meet it, the self-check compares the receive side
//! against it, and the tests check it exactly.
//!
//! # The cost clock
//!
//! Every packet has a *cost*: `1e9 / rate_pps` ns for a packet rate, or
//! `(frame + overhead) * 8 * 1e9 / rate_bps` ns for a bit rate, where the overhead is the
//! 20 B of preamble, SFD and inter-frame gap for L1 accounting and 0 for L2 (frame sizes
//! include the 4-byte FCS, RFC 2544). Patterns place packets on this clock:
//!
//! - **CBR**: packet *i* at the sum of the costs before it (`i / rate` for a packet rate,
//!   computed by multiplication so that no rounding accumulates).
//! - **Poisson**: the gaps are the costs times independent Exp(1) draws from a ChaCha20
//!   generator seeded with the stream's seed, so the inter-arrival times are exponential
//!   with mean `1 / rate`.
//! - **Burst**: `burst` packets share one deadline (back to back); the next burst starts
//!   after the summed cost of this one, so the average rate is the configured one
//!   (seed 000 §3.2: bursts change a DuT's latency up to 2x at the same average rate).
//! - **On/off**: CBR at `rate` during `on_ns`, then silence for `off_ns`. The average
//!   rate is `rate * on / (on + off)`; `rate` is the peak.
//! - **Periodic**: `per_cycle` packets back to back at the start of every cycle of
//!   `frequency_hz` (cyclic real-time control traffic, e.g. 1–8 kHz). The rate follows.
//! - **Replay**: the timestamps and frame lengths of a pcap/pcapng trace, relative to its
//!   first packet and divided by `speed` (2.0 = twice as fast).
//!
//! Flows are taken round robin; sizes come from a [`Sizes`] choice.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::Serialize;

use crate::trace::TracePacket;

/// Bytes of preamble (7), SFD (1) and minimum inter-frame gap (12) that every Ethernet
/// frame occupies on the wire besides its own bytes.
pub const L1_OVERHEAD_BYTES: u64 = 20;

/// How bits per second are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Accounting {
    /// Frame bytes plus 20 B preamble + SFD + IFG: what a link of that speed carries.
    #[default]
    L1,
    /// Frame bytes (with FCS) only.
    L2,
}

impl Accounting {
    /// Bytes counted per frame besides the frame itself.
    pub fn overhead_bytes(&self) -> u64 {
        match self {
            Accounting::L1 => L1_OVERHEAD_BYTES,
            Accounting::L2 => 0,
        }
    }
}

/// A stream's rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rate {
    /// Packets per second.
    Pps(f64),
    /// Bits per second, counted as stated.
    Bps {
        /// Bits per second.
        bps: f64,
        /// What a frame's bits include.
        accounting: Accounting,
    },
    /// As fast as the backend sends (CBR only): no pacing.
    Max,
}

impl Rate {
    /// Cost of one frame of `frame_bytes` on the cost clock, ns (0 for `Max`).
    pub fn cost_ns(&self, frame_bytes: u64) -> f64 {
        match *self {
            Rate::Pps(r) => 1e9 / r,
            Rate::Bps { bps, accounting } => {
                (frame_bytes + accounting.overhead_bytes()) as f64 * 8.0 * 1e9 / bps
            }
            Rate::Max => 0.0,
        }
    }

    fn check(&self) -> Result<(), String> {
        let v = match *self {
            Rate::Pps(r) => r,
            Rate::Bps { bps, .. } => bps,
            Rate::Max => return Ok(()),
        };
        if v.is_finite() && v > 0.0 {
            Ok(())
        } else {
            Err(format!(
                "rate {v} is not valid: use a positive number of packets or bits per second"
            ))
        }
    }
}

/// Frame sizes of a stream (bytes including the FCS).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sizes {
    /// Every frame this size.
    Fixed(u64),
    /// The sizes in turn, round robin (a sweep inside one run).
    Cycle(Vec<u64>),
    /// Sizes drawn at random with the given weights, from the stream's seed.
    Weighted(Vec<(u64, f64)>),
}

impl Sizes {
    /// Simple IMIX: 64, 594 and 1518 B in the ratio 7:4:1 (mean 361.8 B).
    pub fn imix() -> Sizes {
        Sizes::Weighted(vec![(64, 7.0), (594, 4.0), (1518, 1.0)])
    }

    /// A sweep from `from` to `to` in steps of `step`, cycled packet by packet.
    pub fn sweep(from: u64, to: u64, step: u64) -> Result<Sizes, String> {
        if step == 0 || from > to {
            return Err(format!(
                "size sweep {from}..{to} step {step} is not valid: use from <= to and a step above 0"
            ));
        }
        Ok(Sizes::Cycle((from..=to).step_by(step as usize).collect()))
    }

    /// The distinct sizes, in the order size indices refer to.
    pub fn values(&self) -> Vec<u64> {
        match self {
            Sizes::Fixed(s) => vec![*s],
            Sizes::Cycle(v) => v.clone(),
            Sizes::Weighted(v) => v.iter().map(|(s, _)| *s).collect(),
        }
    }

    /// Mean frame size in bytes (the weighted mean for `Weighted`).
    pub fn mean_bytes(&self) -> f64 {
        match self {
            Sizes::Fixed(s) => *s as f64,
            Sizes::Cycle(v) => v.iter().sum::<u64>() as f64 / v.len().max(1) as f64,
            Sizes::Weighted(v) => {
                let w: f64 = v.iter().map(|(_, w)| w).sum();
                v.iter().map(|(s, x)| *s as f64 * x).sum::<f64>() / w
            }
        }
    }

    fn check(&self) -> Result<(), String> {
        match self {
            Sizes::Fixed(_) => Ok(()),
            Sizes::Cycle(v) if v.is_empty() => Err("a size list must not be empty".into()),
            Sizes::Cycle(_) => Ok(()),
            Sizes::Weighted(v) => {
                if v.is_empty() {
                    return Err("a size distribution must not be empty".into());
                }
                if v.iter().any(|(_, w)| !(w.is_finite() && *w >= 0.0)) {
                    return Err("size weights must be finite and not negative".into());
                }
                if v.iter().map(|(_, w)| w).sum::<f64>() <= 0.0 {
                    return Err("size weights must not all be zero".into());
                }
                Ok(())
            }
        }
    }
}

/// The timing pattern of a stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Pattern {
    /// Constant gaps.
    Cbr,
    /// Exponential gaps (Poisson arrivals).
    Poisson,
    /// `size` packets back to back per burst, bursts spaced for the average rate.
    Burst {
        /// Packets per burst, at least 1.
        size: u32,
    },
    /// CBR at the stream's rate while on, nothing while off.
    OnOff {
        /// Length of an on period, ns.
        on_ns: u64,
        /// Length of an off period, ns.
        off_ns: u64,
    },
    /// `per_cycle` packets back to back at the start of each cycle.
    Periodic {
        /// Cycles per second.
        frequency_hz: f64,
        /// Packets per cycle, at least 1.
        per_cycle: u32,
    },
    /// The timing and sizes of a trace.
    Replay {
        /// The trace (relative times in ns, frame lengths with FCS).
        #[serde(skip)]
        trace: Arc<Vec<TracePacket>>,
        /// Speed-up factor: times are divided by it.
        speed: f64,
    },
}

impl Pattern {
    /// The name used in specs and reports.
    pub fn name(&self) -> &'static str {
        match self {
            Pattern::Cbr => "cbr",
            Pattern::Poisson => "poisson",
            Pattern::Burst { .. } => "burst",
            Pattern::OnOff { .. } => "onoff",
            Pattern::Periodic { .. } => "periodic",
            Pattern::Replay { .. } => "replay",
        }
    }
}

/// One stream: a pattern, a rate, sizes and a number of flows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamSpec {
    /// When packets are due.
    pub pattern: Pattern,
    /// The rate (ignored by periodic and replay, which carry their own timing).
    pub rate: Rate,
    /// Frame sizes (ignored by replay, which takes the trace's).
    pub sizes: Sizes,
    /// Number of flows, taken round robin, at least 1.
    pub flows: u32,
    /// Seed of the Poisson gaps and weighted sizes.
    pub seed: u64,
}

impl StreamSpec {
    /// Check every parameter; the message is one sentence naming the parameter.
    pub fn check(&self) -> Result<(), String> {
        if self.flows == 0 {
            return Err("flows = 0 is not valid: use 1 or more".into());
        }
        match &self.pattern {
            Pattern::Cbr => {}
            Pattern::Periodic {
                frequency_hz,
                per_cycle,
            } => {
                if !(frequency_hz.is_finite() && *frequency_hz > 0.0) {
                    return Err(format!(
                        "frequency_hz = {frequency_hz} is not valid: use a positive number of cycles per second"
                    ));
                }
                if *per_cycle == 0 {
                    return Err(
                        "per_cycle = 0 is not valid: send at least 1 packet per cycle".into(),
                    );
                }
                return self.sizes.check();
            }
            Pattern::Replay { trace, speed } => {
                if !(speed.is_finite() && *speed > 0.0) {
                    return Err(format!(
                        "speed = {speed} is not valid: use a positive factor (1 = original timing)"
                    ));
                }
                if trace.is_empty() {
                    return Err("the trace holds no packets".into());
                }
                return Ok(());
            }
            _ if self.rate == Rate::Max => {
                return Err(format!(
                    "rate \"max\" works with the cbr pattern only, not {}",
                    self.pattern.name()
                ))
            }
            Pattern::Poisson => {}
            Pattern::Burst { size } => {
                if *size == 0 {
                    return Err("burst = 0 is not valid: a burst has at least 1 packet".into());
                }
            }
            Pattern::OnOff { on_ns, .. } => {
                if *on_ns == 0 {
                    return Err("on period 0 is not valid: use a positive on time".into());
                }
            }
        }
        self.rate.check()?;
        self.sizes.check()
    }

    /// Mean offered packet rate, when the pattern has one (None at max rate).
    pub fn mean_pps(&self) -> Option<f64> {
        let peak = |s: &StreamSpec| match s.rate {
            Rate::Pps(r) => Some(r),
            Rate::Bps { bps, accounting } => {
                Some(bps / ((s.sizes.mean_bytes() + accounting.overhead_bytes() as f64) * 8.0))
            }
            Rate::Max => None,
        };
        match &self.pattern {
            Pattern::Cbr | Pattern::Poisson | Pattern::Burst { .. } => peak(self),
            Pattern::OnOff { on_ns, off_ns } => {
                peak(self).map(|r| r * *on_ns as f64 / (*on_ns + *off_ns) as f64)
            }
            Pattern::Periodic {
                frequency_hz,
                per_cycle,
            } => Some(frequency_hz * *per_cycle as f64),
            Pattern::Replay { trace, speed } => {
                let span = trace.last()?.t_ns.saturating_sub(trace.first()?.t_ns);
                (trace.len() >= 2 && span > 0)
                    .then(|| (trace.len() - 1) as f64 * 1e9 * speed / span as f64)
            }
        }
    }

    /// Mean size of the frames the stream sends, bytes with FCS.
    pub fn mean_frame_bytes(&self) -> f64 {
        match &self.pattern {
            Pattern::Replay { trace, .. } => {
                let mut m = nflab_analyze::dist::Moments::new();
                trace.iter().for_each(|p| m.record(p.len as i64));
                m.mean().unwrap_or(0.0)
            }
            _ => self.sizes.mean_bytes(),
        }
    }

    /// The sizes a template is needed for, in the order of [`Slot::size`].
    pub fn size_values(&self) -> Vec<u64> {
        match &self.pattern {
            Pattern::Replay { trace, .. } => {
                let mut v: Vec<u64> = trace.iter().map(|p| p.len).collect();
                v.sort_unstable();
                v.dedup();
                v
            }
            _ => self.sizes.values(),
        }
    }
}

/// One packet of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Deadline, ns after the generator's start.
    pub t_ns: u64,
    /// Flow index within the stream.
    pub flow: u32,
    /// Index into the stream's [`StreamSpec::size_values`].
    pub size: u32,
    /// Sequence number within the flow, from 0.
    pub seq: u64,
}

/// The deterministic sequence of a stream's packets (see the module docs).
pub struct StreamSchedule {
    spec: StreamSpec,
    sizes: Vec<u64>,
    /// Cumulative weights for `Sizes::Weighted`.
    cdf: Vec<f64>,
    rng: ChaCha20Rng,
    /// Packets produced so far.
    n: u64,
    /// Cost-clock time of the next packet, ns.
    clock_ns: f64,
    /// Deadline shared by the current burst / cycle.
    group_t_ns: f64,
    /// Sequence numbers per flow.
    seqs: Vec<u64>,
    /// Replay: offset of the current loop and index of the size of each trace packet.
    replay_size_idx: Vec<u32>,
}

impl StreamSchedule {
    /// A schedule for `spec`; call [`StreamSpec::check`] first (invalid specs give a
    /// schedule, but not a meaningful one).
    pub fn new(spec: &StreamSpec) -> StreamSchedule {
        let sizes = spec.size_values();
        let cdf = match &spec.sizes {
            Sizes::Weighted(v) => {
                let total: f64 = v.iter().map(|(_, w)| w).sum();
                let mut acc = 0.0;
                v.iter()
                    .map(|(_, w)| {
                        acc += w / total;
                        acc
                    })
                    .collect()
            }
            _ => Vec::new(),
        };
        let replay_size_idx = match &spec.pattern {
            Pattern::Replay { trace, .. } => trace
                .iter()
                .map(|p| sizes.binary_search(&p.len).unwrap_or(0) as u32)
                .collect(),
            _ => Vec::new(),
        };
        StreamSchedule {
            sizes,
            cdf,
            rng: ChaCha20Rng::seed_from_u64(spec.seed),
            n: 0,
            clock_ns: 0.0,
            group_t_ns: 0.0,
            seqs: vec![0; spec.flows.max(1) as usize],
            replay_size_idx,
            spec: spec.clone(),
        }
    }

    fn pick_size(&mut self) -> u32 {
        match &self.spec.sizes {
            Sizes::Fixed(_) => 0,
            Sizes::Cycle(v) => (self.n % v.len() as u64) as u32,
            Sizes::Weighted(_) => {
                let u: f64 = self.rng.gen();
                self.cdf
                    .iter()
                    .position(|&c| u < c)
                    .unwrap_or(self.cdf.len() - 1) as u32
            }
        }
    }

    /// The next packet; None when a replayed trace has ended (other patterns never end:
    /// the caller stops at its duration).
    pub fn next_slot(&mut self) -> Option<Slot> {
        let n = self.n;
        let flow = (n % self.seqs.len() as u64) as u32;
        let replay = matches!(self.spec.pattern, Pattern::Replay { .. });
        let size = if replay {
            *self.replay_size_idx.get(n as usize)?
        } else {
            self.pick_size()
        };
        let cost = self.spec.rate.cost_ns(self.sizes[size as usize]);
        let t = match &self.spec.pattern {
            Pattern::Replay { trace, speed } => {
                (trace[n as usize].t_ns - trace[0].t_ns) as f64 / speed
            }
            Pattern::Periodic {
                frequency_hz,
                per_cycle,
            } => (n / *per_cycle as u64) as f64 * 1e9 / frequency_hz,
            Pattern::Cbr => {
                let t = match self.spec.rate {
                    // By multiplication: no rounding error accumulates over a long run.
                    Rate::Pps(_) => n as f64 * cost,
                    _ => self.clock_ns,
                };
                self.clock_ns += cost;
                t
            }
            Pattern::Poisson => {
                let t = self.clock_ns;
                // Exp(1) by inversion; 1 - u lies in (0, 1], so ln never sees 0.
                let u: f64 = self.rng.gen();
                self.clock_ns += cost * -(1.0 - u).ln();
                t
            }
            Pattern::Burst { size: b } => {
                if n.is_multiple_of(*b as u64) {
                    self.group_t_ns = self.clock_ns;
                }
                self.clock_ns += cost;
                self.group_t_ns
            }
            Pattern::OnOff { on_ns, off_ns } => {
                // Map the cost clock onto on periods: every on_ns of it is followed by
                // off_ns of silence.
                let periods = (self.clock_ns / *on_ns as f64).floor();
                let t = self.clock_ns + periods * *off_ns as f64;
                self.clock_ns += cost;
                t
            }
        };
        self.n += 1;
        let seq = self.seqs[flow as usize];
        self.seqs[flow as usize] += 1;
        Some(Slot {
            t_ns: t.round() as u64,
            flow,
            size,
            seq,
        })
    }

    /// Packets produced so far.
    pub fn produced(&self) -> u64 {
        self.n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pattern: Pattern, rate: Rate) -> StreamSpec {
        StreamSpec {
            pattern,
            rate,
            sizes: Sizes::Fixed(64),
            flows: 1,
            seed: 7,
        }
    }

    fn times(s: &StreamSpec, n: usize) -> Vec<u64> {
        let mut sch = StreamSchedule::new(s);
        (0..n).map(|_| sch.next_slot().unwrap().t_ns).collect()
    }

    #[test]
    fn cbr_pps_is_exactly_i_over_rate() {
        let t = times(&spec(Pattern::Cbr, Rate::Pps(100_000.0)), 1000);
        for (i, t) in t.iter().enumerate() {
            assert_eq!(*t, i as u64 * 10_000);
        }
        // 3 pps: gaps of 333333333.33 ns round to the nearest ns, without drift.
        let t = times(&spec(Pattern::Cbr, Rate::Pps(3.0)), 301);
        assert_eq!(t[300], 100_000_000_000);
    }

    #[test]
    fn cbr_bps_counts_l1_and_l2() {
        // 64 B at 1 Gbit/s L1: 84 B * 8 = 672 ns per frame; L2: 512 ns.
        let l1 = Rate::Bps {
            bps: 1e9,
            accounting: Accounting::L1,
        };
        assert_eq!(times(&spec(Pattern::Cbr, l1), 3), [0, 672, 1344]);
        let l2 = Rate::Bps {
            bps: 1e9,
            accounting: Accounting::L2,
        };
        assert_eq!(times(&spec(Pattern::Cbr, l2), 3), [0, 512, 1024]);
        let s = StreamSpec {
            sizes: Sizes::Cycle(vec![64, 1518]),
            ..spec(Pattern::Cbr, l1)
        };
        // 64 B then 1518 B (1538 B on the wire = 12304 ns), then 64 B again.
        assert_eq!(times(&s, 3), [0, 672, 672 + 12_304]);
        assert!((s.mean_pps().unwrap() - 1e9 / ((791.0 + 20.0) * 8.0)).abs() < 1e-6);
    }

    #[test]
    fn burst_shares_deadlines_and_keeps_the_average_rate() {
        let t = times(&spec(Pattern::Burst { size: 4 }, Rate::Pps(1000.0)), 12);
        assert_eq!(
            t,
            [
                0, 0, 0, 0, 4_000_000, 4_000_000, 4_000_000, 4_000_000, 8_000_000, 8_000_000,
                8_000_000, 8_000_000
            ]
        );
    }

    #[test]
    fn onoff_skips_the_off_periods() {
        // 1 kpps peak, 3 ms on, 2 ms off: packets at 0,1,2 ms, then 5,6,7 ms, then 10 ms.
        let s = spec(
            Pattern::OnOff {
                on_ns: 3_000_000,
                off_ns: 2_000_000,
            },
            Rate::Pps(1000.0),
        );
        let t = times(&s, 7);
        let ms: Vec<u64> = t.iter().map(|t| t / 1_000_000).collect();
        assert_eq!(ms, [0, 1, 2, 5, 6, 7, 10]);
        assert!((s.mean_pps().unwrap() - 600.0).abs() < 1e-9);
    }

    #[test]
    fn periodic_sends_per_cycle_back_to_back() {
        let s = spec(
            Pattern::Periodic {
                frequency_hz: 8000.0,
                per_cycle: 2,
            },
            Rate::Max,
        );
        assert!(s.check().is_ok());
        assert_eq!(times(&s, 6), [0, 0, 125_000, 125_000, 250_000, 250_000]);
        assert_eq!(s.mean_pps(), Some(16_000.0));
    }

    #[test]
    fn poisson_is_seeded_and_exponential() {
        let s = spec(Pattern::Poisson, Rate::Pps(10_000.0));
        let a = times(&s, 20_000);
        assert_eq!(a, times(&s, 20_000), "same seed, same schedule");
        let other = StreamSpec {
            seed: 8,
            ..s.clone()
        };
        assert_ne!(a[..100], times(&other, 100)[..]);
        let gaps: Vec<f64> = a.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        // Mean 100 µs; the standard error of 20k exponential gaps is 0.7 %.
        assert!((mean - 100_000.0).abs() < 3_000.0, "mean {mean}");
        let p = crate::selfcheck::exponential_ks_pvalue(&gaps, 1.0 / 100_000.0);
        assert!(p > 0.01, "KS p-value {p}");
        // A CBR schedule is not exponential.
        let c: Vec<f64> = vec![100_000.0; 1000];
        assert!(crate::selfcheck::exponential_ks_pvalue(&c, 1.0 / 100_000.0) < 1e-6);
    }

    #[test]
    fn flows_round_robin_with_their_own_sequence_numbers() {
        let s = StreamSpec {
            flows: 3,
            ..spec(Pattern::Cbr, Rate::Pps(1000.0))
        };
        let mut sch = StreamSchedule::new(&s);
        let v: Vec<(u32, u64)> = (0..7)
            .map(|_| {
                let x = sch.next_slot().unwrap();
                (x.flow, x.seq)
            })
            .collect();
        assert_eq!(v, [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1), (0, 2)]);
    }

    #[test]
    fn weighted_sizes_follow_their_weights() {
        let s = StreamSpec {
            sizes: Sizes::imix(),
            ..spec(Pattern::Cbr, Rate::Pps(1000.0))
        };
        let mut sch = StreamSchedule::new(&s);
        let mut counts = [0u64; 3];
        for _ in 0..12_000 {
            counts[sch.next_slot().unwrap().size as usize] += 1;
        }
        // Expected 7000 / 4000 / 1000; binomial sd ≤ 55, allow ~5 sd.
        assert!((counts[0] as i64 - 7000).abs() < 300, "{counts:?}");
        assert!((counts[1] as i64 - 4000).abs() < 300, "{counts:?}");
        assert!((counts[2] as i64 - 1000).abs() < 200, "{counts:?}");
        assert!((Sizes::imix().mean_bytes() - 361.833).abs() < 0.01);
    }

    #[test]
    fn replay_scales_the_trace() {
        let trace = Arc::new(vec![
            TracePacket {
                t_ns: 1_000,
                len: 100,
            },
            TracePacket {
                t_ns: 3_000,
                len: 64,
            },
            TracePacket {
                t_ns: 11_000,
                len: 100,
            },
        ]);
        let s = spec(Pattern::Replay { trace, speed: 2.0 }, Rate::Max);
        assert!(s.check().is_ok());
        let mut sch = StreamSchedule::new(&s);
        let v: Vec<(u64, u32)> =
            std::iter::from_fn(|| sch.next_slot().map(|x| (x.t_ns, x.size))).collect();
        assert_eq!(v, [(0, 1), (1_000, 0), (5_000, 1)]);
        assert_eq!(s.size_values(), [64, 100]);
        assert_eq!(s.mean_pps(), Some(2.0 * 1e9 / 5_000.0));
    }

    #[test]
    fn bad_parameters_are_one_sentence_each() {
        let e = spec(Pattern::Cbr, Rate::Pps(0.0)).check().unwrap_err();
        assert!(e.contains("rate 0"), "{e}");
        let e = spec(Pattern::Cbr, Rate::Pps(-5.0)).check().unwrap_err();
        assert!(e.contains("positive"), "{e}");
        let e = spec(Pattern::Burst { size: 0 }, Rate::Pps(10.0))
            .check()
            .unwrap_err();
        assert!(e.contains("burst = 0"), "{e}");
        let e = spec(Pattern::Poisson, Rate::Max).check().unwrap_err();
        assert!(e.contains("cbr pattern only"), "{e}");
        let e = spec(
            Pattern::Periodic {
                frequency_hz: 0.0,
                per_cycle: 1,
            },
            Rate::Max,
        )
        .check()
        .unwrap_err();
        assert!(e.contains("frequency_hz"), "{e}");
        assert!(Sizes::sweep(128, 64, 1).is_err());
        assert_eq!(
            Sizes::sweep(64, 128, 32).unwrap(),
            Sizes::Cycle(vec![64, 96, 128])
        );
    }
}
