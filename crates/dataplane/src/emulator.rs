//! # `link`: a link emulator (what `tc netem` does, in the data plane)
//!
//! The kernels nflab runs on need not have `sch_netem`; this app gives a
//! DuT the impairments of a link. Per packet, in this order:
//!
//! 1. **duplication**: with probability `duplicate` a copy is made; original
//!    and copy go through the steps below independently (netem re-enqueues
//!    its clone likewise).
//! 2. **loss**: [`LossModel::Bernoulli`] (each packet lost with probability
//!    `p`) or [`LossModel::GilbertElliott`], netem's `gemodel p r 1-h 1-k`:
//!    a good and a bad state; `p` = P(good → bad), `r` = P(bad → good) per
//!    packet, `1-h` = loss probability in the bad state, `1-k` = in the good
//!    state. A packet's fate depends on the state it finds; the state then
//!    moves on (as in the kernel's `loss_gilb_ell`).
//! 3. **rate limit**: a serializer of `rate_mbps` (frame bytes as they came
//!    in, without FCS or preamble, plus `overhead_bytes` per packet: netem's
//!    `rate RATE PACKETOVERHEAD`) with a FIFO of
//!    `queue_packets` packets that are waiting or being sent; a packet that
//!    finds it full is dropped (tail drop). Its departure is
//!    `max(arrival, previous departure) + 8·bytes / rate`.
//! 4. **delay**: departure + a draw of the [`DelaySampler`] (mean `delay_us`,
//!    standard deviation `jitter_us`, uniform/normal/exponential, or a trace
//!    of delays). Packets wait in the delayer's time-ordered buffer, so a
//!    jitter larger than the gap between packets reorders them, as netem does.
//! 5. **reordering**: with probability `reorder` a packet skips the delay of
//!    step 4 (netem's `reorder`: "sent immediately"), so it overtakes the
//!    packets delayed before it. It needs a delay to have an effect.
//!
//! The probabilities are fractions in [0, 1] (netem writes percent).
//! Correlation parameters of netem (`loss 5% 25%`) are not offered: the
//! Gilbert–Elliott model is the way to get correlated loss.

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::app::{App, Output};
use crate::delayer::{DelaySampler, Delayer};
use crate::link::Link;
use crate::packet::Packet;

/// How packets are lost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LossModel {
    /// No loss.
    None,
    /// Each packet independently with probability `p`.
    Bernoulli {
        /// Loss probability.
        p: f64,
    },
    /// Two-state Markov chain, netem's `gemodel p r 1-h 1-k`.
    GilbertElliott {
        /// P(good → bad) per packet.
        p: f64,
        /// P(bad → good) per packet.
        r: f64,
        /// Loss probability in the bad state (netem's `1-h`).
        loss_bad: f64,
        /// Loss probability in the good state (netem's `1-k`).
        loss_good: f64,
    },
}

impl LossModel {
    /// The long-run fraction of packets lost (closed form).
    pub fn stationary_loss(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Bernoulli { p } => p,
            LossModel::GilbertElliott { .. } => {
                let (pi_good, pi_bad) = self.stationary_states();
                let (lg, lb) = self.state_losses();
                pi_good * lg + pi_bad * lb
            }
        }
    }

    /// The mean number of packets in a run of consecutive losses (closed
    /// form): P(loss) / P(a loss not preceded by a loss). `None` without loss.
    pub fn mean_burst_length(&self) -> Option<f64> {
        let loss = self.stationary_loss();
        if loss <= 0.0 {
            return None;
        }
        let both = match *self {
            LossModel::None => 0.0,
            LossModel::Bernoulli { p } => p * p,
            LossModel::GilbertElliott { p, r, .. } => {
                let (pi_good, pi_bad) = self.stationary_states();
                let (lg, lb) = self.state_losses();
                pi_good * lg * ((1.0 - p) * lg + p * lb) + pi_bad * lb * (r * lg + (1.0 - r) * lb)
            }
        };
        let starts = loss - both;
        (starts > 0.0).then(|| loss / starts)
    }

    /// (π_good, π_bad): the stationary state probabilities. A chain that
    /// never leaves its state (p = r = 0) stays in the good one it starts in.
    fn stationary_states(&self) -> (f64, f64) {
        match *self {
            LossModel::GilbertElliott { p, r, .. } if p + r > 0.0 => (r / (p + r), p / (p + r)),
            _ => (1.0, 0.0),
        }
    }

    fn state_losses(&self) -> (f64, f64) {
        match *self {
            LossModel::GilbertElliott {
                loss_bad,
                loss_good,
                ..
            } => (loss_good, loss_bad),
            LossModel::Bernoulli { p } => (p, p),
            LossModel::None => (0.0, 0.0),
        }
    }
}

/// A loss model with its state and random numbers.
#[derive(Debug, Clone)]
pub struct Loss {
    model: LossModel,
    bad: bool,
    rng: ChaCha8Rng,
}

impl Loss {
    /// Starts in the good state.
    pub fn new(model: LossModel, seed: u64) -> Loss {
        Loss {
            model,
            bad: false,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// Whether the next packet is lost.
    #[inline]
    pub fn lose(&mut self) -> bool {
        match self.model {
            LossModel::None => false,
            LossModel::Bernoulli { p } => self.rng.gen::<f64>() < p,
            LossModel::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => {
                let lost = self.rng.gen::<f64>() < if self.bad { loss_bad } else { loss_good };
                let u = self.rng.gen::<f64>();
                self.bad = if self.bad { u >= r } else { u < p };
                lost
            }
        }
    }
}

/// A serializer of a given rate with a tail-drop FIFO: a token bucket of
/// one packet's depth whose queue holds `queue_packets`.
#[derive(Debug, Clone)]
pub struct RateLimiter {
    ns_per_byte: f64,
    queue_packets: usize,
    /// Departure times of the packets still waiting or being sent, oldest first.
    departures: VecDeque<u64>,
    /// Fractional ns carried from one packet to the next, so that many small
    /// packets do not lose time to rounding.
    carry_ns: f64,
}

impl RateLimiter {
    /// `rate_bps` > 0; `queue_packets` ≥ 1.
    pub fn new(rate_bps: f64, queue_packets: usize) -> RateLimiter {
        RateLimiter {
            ns_per_byte: 8e9 / rate_bps,
            queue_packets: queue_packets.max(1),
            departures: VecDeque::with_capacity(queue_packets.clamp(1, 1 << 16)),
            carry_ns: 0.0,
        }
    }

    /// When a packet of `bytes` arriving at `arrival_ns` has been sent, or
    /// `None` when the queue is full (the packet is dropped).
    pub fn admit(&mut self, arrival_ns: u64, bytes: usize) -> Option<u64> {
        while self.departures.front().is_some_and(|&d| d <= arrival_ns) {
            self.departures.pop_front();
        }
        if self.departures.len() >= self.queue_packets {
            return None;
        }
        let start = self
            .departures
            .back()
            .map_or(arrival_ns, |&d| d.max(arrival_ns));
        let exact = bytes as f64 * self.ns_per_byte + self.carry_ns;
        let whole = exact.floor();
        self.carry_ns = exact - whole;
        let done = start + whole as u64;
        self.departures.push_back(done);
        Some(done)
    }

    /// Packets waiting or being sent after the last admission.
    pub fn backlog(&self) -> usize {
        self.departures.len()
    }
}

/// One direction of an emulated link.
#[derive(Debug, Clone)]
pub struct LinkParams {
    /// Delay of every packet (after the serializer).
    pub delay: DelaySampler,
    /// Loss model.
    pub loss: LossModel,
    /// Rate limit in bit/s and queue size in packets.
    pub rate: Option<(f64, usize)>,
    /// Bytes added to (or, negative, taken from) every packet's length for the rate limit.
    pub overhead_bytes: i64,
    /// Probability that a packet is duplicated.
    pub duplicate: f64,
    /// Probability that a packet skips the delay.
    pub reorder: f64,
    /// Packets the delay line holds at most.
    pub capacity: usize,
    /// Seed of the loss, duplication and reordering draws.
    pub seed: u64,
}

/// Counters of the link emulator.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, PartialEq, Eq)]
pub struct LinkEmulatorCounters {
    /// Packets that came in.
    pub packets_in: u64,
    /// Copies made by duplication.
    pub duplicated: u64,
    /// Packets (originals or copies) lost by the loss model.
    pub lost: u64,
    /// Packets dropped because the rate limiter's queue was full.
    pub queue_drops: u64,
    /// Packets that skipped the delay.
    pub reordered: u64,
    /// Largest rate-limiter backlog seen, packets.
    pub max_queue: u64,
}

/// The `link` app.
pub struct LinkEmulator {
    delay_line: Delayer,
    sampler: DelaySampler,
    loss: Loss,
    rate: Option<RateLimiter>,
    overhead_bytes: i64,
    duplicate: f64,
    reorder: f64,
    rng: ChaCha8Rng,
    counters: LinkEmulatorCounters,
}

impl LinkEmulator {
    /// A link with `params`.
    pub fn new(params: LinkParams) -> LinkEmulator {
        // The delay line's own sampler is unused: every due time comes from here.
        let delay_line = Delayer::new(params.delay.clone(), params.capacity, false);
        LinkEmulator {
            delay_line,
            sampler: params.delay,
            loss: Loss::new(params.loss, params.seed ^ 0x6c6f_7373),
            rate: params.rate.map(|(bps, q)| RateLimiter::new(bps, q)),
            overhead_bytes: params.overhead_bytes,
            duplicate: params.duplicate,
            reorder: params.reorder,
            rng: ChaCha8Rng::seed_from_u64(params.seed),
            counters: LinkEmulatorCounters::default(),
        }
    }

    /// The counters of the link.
    pub fn link_counters(&self) -> LinkEmulatorCounters {
        self.counters
    }

    /// One packet (original or copy) through loss, rate limit and delay.
    fn impair(&mut self, p: Packet, arrival_ns: u64) {
        if self.loss.lose() {
            self.counters.lost += 1;
            return;
        }
        let departure_ns = match &mut self.rate {
            None => arrival_ns,
            Some(r) => match r.admit(
                arrival_ns,
                (p.len() as i64 + self.overhead_bytes).max(0) as usize,
            ) {
                Some(d) => {
                    self.counters.max_queue = self.counters.max_queue.max(r.backlog() as u64);
                    d
                }
                None => {
                    self.counters.queue_drops += 1;
                    return;
                }
            },
        };
        let delay_ns = if self.reorder > 0.0 && self.rng.gen::<f64>() < self.reorder {
            self.counters.reordered += 1;
            0
        } else {
            self.sampler.sample()
        };
        self.delay_line.hold(p, departure_ns + delay_ns);
    }
}

impl App for LinkEmulator {
    fn name(&self) -> &'static str {
        "link"
    }

    fn push(&mut self, input: &mut Link, out: &mut Output<'_>, now_ns: u64) {
        self.delay_line.drain(out, now_ns);
        for _ in 0..input.nreadable() {
            let Some(p) = input.receive() else { break };
            self.counters.packets_in += 1;
            let arrival = if p.rx_ns != 0 { p.rx_ns } else { now_ns };
            if self.duplicate > 0.0 && self.rng.gen::<f64>() < self.duplicate {
                self.counters.duplicated += 1;
                let mut copy = Packet::from_slice(p.data());
                copy.rx_ns = p.rx_ns;
                self.impair(copy, arrival);
            }
            self.impair(p, arrival);
        }
        self.delay_line.drain(out, now_ns);
    }

    fn held(&self) -> usize {
        self.delay_line.held()
    }

    fn pool_reserve(&self) -> usize {
        self.delay_line.pool_reserve()
    }

    fn needs_clock(&self) -> bool {
        true
    }

    fn next_deadline_ns(&self) -> Option<u64> {
        self.delay_line.next_deadline_ns()
    }

    /// The delay's least draw (the serializer only adds to it); nothing when
    /// reordering lets a packet skip the delay.
    fn min_hold_ns(&self) -> u64 {
        if self.reorder > 0.0 {
            0
        } else {
            self.sampler.min_ns()
        }
    }

    fn counters(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self.counters).unwrap_or_default();
        if let (Some(o), Ok(serde_json::Value::Object(d))) = (
            v.as_object_mut(),
            serde_json::to_value(self.delay_line.counters()),
        ) {
            o.extend(d);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delayer::Distribution;

    /// Loss fraction and mean burst length of `n` draws.
    fn simulate(model: LossModel, n: usize, seed: u64) -> (f64, f64) {
        let mut l = Loss::new(model, seed);
        let (mut lost, mut bursts, mut prev) = (0u64, 0u64, false);
        for _ in 0..n {
            let x = l.lose();
            lost += x as u64;
            bursts += (x && !prev) as u64;
            prev = x;
        }
        (lost as f64 / n as f64, lost as f64 / bursts.max(1) as f64)
    }

    #[test]
    fn bernoulli_loss_is_within_the_binomial_bound_and_bursts_are_geometric() {
        let n = 200_000;
        for p in [0.01, 0.05, 0.3] {
            let m = LossModel::Bernoulli { p };
            let (rate, burst) = simulate(m, n, 7);
            let sd = (p * (1.0 - p) / n as f64).sqrt();
            assert!((rate - p).abs() < 4.0 * sd, "p {p}: {rate}");
            // Runs of a Bernoulli(p) are geometric: mean 1 / (1 − p).
            let want = m.mean_burst_length().unwrap();
            assert!((want - 1.0 / (1.0 - p)).abs() < 1e-12);
            assert!((burst - want).abs() / want < 0.03, "p {p}: burst {burst}");
        }
    }

    #[test]
    fn gilbert_elliott_matches_its_closed_form() {
        let n = 400_000;
        // The simple Gilbert model (1-h = 1, 1-k = 0): loss p/(p+r), bursts 1/r.
        let gilbert = LossModel::GilbertElliott {
            p: 0.02,
            r: 0.25,
            loss_bad: 1.0,
            loss_good: 0.0,
        };
        assert!((gilbert.stationary_loss() - 0.02 / 0.27).abs() < 1e-12);
        assert!((gilbert.mean_burst_length().unwrap() - 4.0).abs() < 1e-12);
        // The full model, with loss in both states.
        let ge = LossModel::GilbertElliott {
            p: 0.05,
            r: 0.3,
            loss_bad: 0.7,
            loss_good: 0.01,
        };
        for m in [gilbert, ge] {
            let (rate, burst) = simulate(m, n, 11);
            let want = m.stationary_loss();
            let want_burst = m.mean_burst_length().unwrap();
            assert!(
                (rate - want).abs() / want < 0.05,
                "{m:?}: loss {rate} vs {want}"
            );
            assert!(
                (burst - want_burst).abs() / want_burst < 0.05,
                "{m:?}: burst {burst} vs {want_burst}"
            );
        }
        // The test can fail: a Bernoulli of the same mean has much shorter bursts.
        let (_, burst) = simulate(
            LossModel::Bernoulli {
                p: gilbert.stationary_loss(),
            },
            n,
            11,
        );
        assert!(burst < 1.2, "{burst}");
        assert_eq!(LossModel::None.mean_burst_length(), None);
    }

    #[test]
    fn rate_limiter_serializes_and_tail_drops() {
        // 1000-byte packets at 8 Mbit/s: 1 ms each.
        let mut r = RateLimiter::new(8e6, 3);
        assert_eq!(r.admit(0, 1000), Some(1_000_000));
        assert_eq!(r.admit(0, 1000), Some(2_000_000));
        assert_eq!(r.admit(0, 1000), Some(3_000_000));
        assert_eq!(r.admit(0, 1000), None, "queue of 3 is full");
        // At 1.5 ms the first is gone: room for one, after the third.
        assert_eq!(r.admit(1_500_000, 1000), Some(4_000_000));
        // An idle link sends at once.
        assert_eq!(r.admit(10_000_000, 500), Some(10_500_000));
        // Offered 2× the rate for 1 s: half gets through, the rate holds.
        let mut r = RateLimiter::new(10e6, 50);
        let (mut sent, mut last) = (0u64, 0u64);
        for i in 0..2_500u64 {
            if let Some(d) = r.admit(i * 400_000, 1000) {
                sent += 1;
                last = d;
            }
        }
        let rate_bps = sent as f64 * 8000.0 / (last as f64 / 1e9);
        assert!((rate_bps - 10e6).abs() / 10e6 < 0.01, "{rate_bps}");
        assert!((sent as f64 - 1250.0).abs() <= 51.0, "{sent}");
        // Small packets: no time lost to rounding (3 ns per byte → 1/3 ns rounding).
        let mut r = RateLimiter::new(8e9 / 3.0, 1 << 20);
        let mut d = 0;
        for _ in 0..30_000 {
            d = r.admit(0, 1).unwrap();
        }
        assert_eq!(d, 90_000);
    }

    fn params(delay_us: f64, reorder: f64, duplicate: f64) -> LinkParams {
        LinkParams {
            delay: DelaySampler::new(Distribution::Uniform, delay_us, 0.0, 1).unwrap(),
            loss: LossModel::None,
            rate: None,
            overhead_bytes: 0,
            duplicate,
            reorder,
            capacity: 1 << 16,
            seed: 3,
        }
    }

    /// Packets 0..n every `gap_ns` through the app on a virtual clock; the
    /// sequence numbers in the order they came out, with their exit times.
    fn through(app: &mut LinkEmulator, n: u32, gap_ns: u64, len: usize) -> Vec<(u32, u64)> {
        let (mut input, mut fwd, mut back) = (Link::new(4), Link::new(1 << 16), Link::new(1));
        let mut out = Vec::new();
        let mut next = 0u32;
        let mut now = 0u64;
        loop {
            let arrival = (next < n).then(|| next as u64 * gap_ns);
            now = match (arrival, app.next_deadline_ns()) {
                (Some(a), Some(d)) => a.min(d),
                (Some(a), None) => a,
                (None, Some(d)) => d,
                (None, None) => break,
            }
            .max(now);
            if arrival == Some(now) {
                let mut f = vec![0u8; len];
                f[..4].copy_from_slice(&next.to_be_bytes());
                let mut p = Packet::from_slice(&f);
                p.rx_ns = now;
                input.transmit(p);
                next += 1;
            }
            app.push(
                &mut input,
                &mut Output {
                    fwd: &mut fwd,
                    back: &mut back,
                },
                now,
            );
            while let Some(p) = fwd.receive() {
                out.push((u32::from_be_bytes(p.data()[..4].try_into().unwrap()), now));
            }
        }
        out
    }

    #[test]
    fn reorder_and_duplicate_fractions_are_as_configured() {
        let n = 50_000;
        // 1 ms delay, a packet every 10 µs: a packet that skips the delay
        // overtakes the 100 before it.
        let mut app = LinkEmulator::new(params(1000.0, 0.1, 0.0));
        let out = through(&mut app, n, 10_000, 64);
        assert_eq!(out.len(), n as usize);
        let fast = out.iter().filter(|(s, t)| *t == *s as u64 * 10_000).count();
        let sd = (0.1 * 0.9 / n as f64).sqrt();
        assert!((fast as f64 / n as f64 - 0.1).abs() < 4.0 * sd, "{fast}");
        assert_eq!(app.link_counters().reordered, fast as u64);
        // Every other one arrives exactly 1 ms late, and out of order behind one that skipped.
        assert!(out
            .iter()
            .all(|(s, t)| *t == *s as u64 * 10_000 || *t == *s as u64 * 10_000 + 1_000_000));
        let overtaken = out.windows(2).filter(|w| w[1].0 < w[0].0).count();
        assert!(overtaken > 0);

        let mut app = LinkEmulator::new(params(0.0, 0.0, 0.05));
        let out = through(&mut app, n, 10_000, 64);
        let extra = out.len() - n as usize;
        let sd = (0.05 * 0.95 / n as f64).sqrt();
        assert!((extra as f64 / n as f64 - 0.05).abs() < 4.0 * sd, "{extra}");
        assert_eq!(app.link_counters().duplicated, extra as u64);
        let mut seen = vec![0u8; n as usize];
        out.iter().for_each(|(s, _)| seen[*s as usize] += 1);
        assert!(seen.iter().all(|&c| c == 1 || c == 2));
    }

    #[test]
    fn rate_limit_and_delay_add_up_and_the_queue_drops_the_excess() {
        // 1250-byte frames at 10 Mbit/s = 1 ms each, offered every 0.5 ms
        // (2× the rate), queue of 10, plus a fixed 2 ms delay.
        let mut p = params(2000.0, 0.0, 0.0);
        p.rate = Some((10e6, 10));
        let mut app = LinkEmulator::new(p);
        let out = through(&mut app, 2_000, 500_000, 1250);
        let c = app.link_counters();
        assert_eq!(c.queue_drops + out.len() as u64, 2_000);
        assert!(c.queue_drops > 900, "{c:?}");
        assert_eq!(c.max_queue, 10);
        // Back-to-back departures 1 ms apart once the queue has filled.
        let gaps: Vec<u64> = out.windows(2).map(|w| w[1].1 - w[0].1).collect();
        assert!(
            gaps[20..].iter().all(|&g| g == 1_000_000),
            "{:?}",
            &gaps[..30]
        );
        // The first frame: 1 ms on the wire plus 2 ms of delay.
        assert_eq!(out[0], (0, 3_000_000));
        // A per-packet overhead counts as bytes: 250 + 1000 take 1 ms too.
        let mut p = params(0.0, 0.0, 0.0);
        p.rate = Some((10e6, 10));
        p.overhead_bytes = 1000;
        let mut app = LinkEmulator::new(p);
        let out = through(&mut app, 3, 0, 250);
        assert_eq!(
            out.iter().map(|o| o.1).collect::<Vec<_>>(),
            vec![1_000_000, 2_000_000, 3_000_000]
        );
    }

    #[test]
    fn loss_in_the_app_follows_the_model() {
        let mut p = params(0.0, 0.0, 0.0);
        p.loss = LossModel::Bernoulli { p: 0.2 };
        let mut app = LinkEmulator::new(p);
        let n = 20_000;
        let out = through(&mut app, n, 1_000, 64);
        let c = app.link_counters();
        assert_eq!(c.lost + out.len() as u64, n as u64);
        let sd = (0.2 * 0.8 / n as f64).sqrt();
        assert!((c.lost as f64 / n as f64 - 0.2).abs() < 4.0 * sd, "{c:?}");
        let json = app.counters();
        assert_eq!(json["lost"], c.lost);
        assert_eq!(json["released"], out.len() as u64);
    }
}
