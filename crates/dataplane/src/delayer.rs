//! # `delayer`: delay and jitter (seed 004's Delayer extern)
//!
//! Each packet gets a send time `arrival + d`, with `d` drawn from a
//! distribution whose **mean is `delay_us` and whose standard deviation is
//! `jitter_us`**, whatever the distribution (seed 004 defines jitter as the
//! standard deviation; NetEm's ± bound is a different thing):
//!
//! | distribution | d |
//! |---|---|
//! | `uniform` | U[mean − √3·sd, mean + √3·sd] (seed 004); needs mean ≥ √3·sd |
//! | `normal` | N(mean, sd²), values below 0 clamped to 0 (negligible for mean ≥ 3 sd) |
//! | `exponential` | (mean − sd) + Exp(1/sd): shifted so mean and sd both hold; needs sd ≤ mean |
//! | `trace` | the delays of a file, one per line in µs, in order, cycling |
//!
//! Packets wait in a min-heap by send time (later packets may overtake
//! earlier ones, as in seed 004), bounded by `capacity` (seed 004: 2¹⁸);
//! a packet arriving at a full buffer is dropped and counted.
//!
//! One push, as in seed 004's activity diagram: (1) send every packet that
//! is due while the output has room; (2) with TimeDrop on, drop the packets
//! that are due but could not be sent because the output was full, instead
//! of sending them late; (3) take in the new packets; (4) send again, so a
//! zero delay leaves in the same breath.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::app::{App, Output};
use crate::link::Link;
use crate::packet::Packet;

/// Default buffer capacity (seed 004: 262,144 packets).
pub const DEFAULT_CAPACITY: usize = 1 << 18;

/// A delay distribution.
#[derive(Debug, Clone, PartialEq)]
pub enum Distribution {
    /// Uniform with the given mean and standard deviation.
    Uniform,
    /// Normal, clamped at 0.
    Normal,
    /// Shifted exponential.
    Exponential,
    /// Replay of delays in ns.
    Trace(Vec<u64>),
}

/// A distribution with negative or impossible parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct DelayError(pub String);

/// Draws delays in ns.
#[derive(Debug, Clone)]
pub struct DelaySampler {
    dist: Distribution,
    mean_ns: f64,
    sd_ns: f64,
    rng: ChaCha8Rng,
    pos: usize,
}

impl DelaySampler {
    /// A sampler; the error says which parameter is wrong and what is valid.
    pub fn new(
        dist: Distribution,
        mean_us: f64,
        sd_us: f64,
        seed: u64,
    ) -> Result<DelaySampler, DelayError> {
        if !(mean_us.is_finite() && mean_us >= 0.0) {
            return Err(DelayError(format!(
                "delay_us = {mean_us} is not valid: use a mean delay of 0 µs or more"
            )));
        }
        if !(sd_us.is_finite() && sd_us >= 0.0) {
            return Err(DelayError(format!(
                "jitter_us = {sd_us} is not valid: use a standard deviation of 0 µs or more"
            )));
        }
        match &dist {
            Distribution::Uniform if mean_us < 3f64.sqrt() * sd_us => {
                return Err(DelayError(format!(
                    "a uniform delay with mean {mean_us} µs and standard deviation {sd_us} µs would go below 0: \
                     jitter_us may be at most delay_us / √3 = {:.3}",
                    mean_us / 3f64.sqrt()
                )))
            }
            Distribution::Exponential if sd_us > mean_us => {
                return Err(DelayError(format!(
                    "an exponential delay with mean {mean_us} µs cannot have standard deviation {sd_us} µs: jitter_us may be at most delay_us"
                )))
            }
            Distribution::Trace(t) if t.is_empty() => {
                return Err(DelayError("the delay trace has no values: give at least one delay in µs".into()))
            }
            _ => {}
        }
        Ok(DelaySampler {
            dist,
            mean_ns: mean_us * 1e3,
            sd_ns: sd_us * 1e3,
            rng: ChaCha8Rng::seed_from_u64(seed),
            pos: 0,
        })
    }

    /// Parse a trace: one delay in µs per line, `#` comments.
    pub fn parse_trace(text: &str, origin: &str) -> Result<Vec<u64>, DelayError> {
        let mut v = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let l = line.split('#').next().unwrap_or("").trim();
            if l.is_empty() {
                continue;
            }
            match l.parse::<f64>() {
                Ok(us) if us.is_finite() && us >= 0.0 => v.push((us * 1e3).round() as u64),
                _ => {
                    return Err(DelayError(format!(
                        "{origin} line {}: \"{l}\" is not a delay: write one number of µs (0 or more) per line",
                        i + 1
                    )))
                }
            }
        }
        Ok(v)
    }

    /// The least delay [`sample`](Self::sample) can draw, ns (floored, so it
    /// never exceeds a draw): a normal distribution with a spread reaches 0.
    pub fn min_ns(&self) -> u64 {
        let least = match &self.dist {
            Distribution::Uniform => self.mean_ns - 3f64.sqrt() * self.sd_ns,
            Distribution::Normal if self.sd_ns > 0.0 => 0.0,
            Distribution::Normal => self.mean_ns,
            Distribution::Exponential => self.mean_ns - self.sd_ns,
            Distribution::Trace(t) => return t.iter().copied().min().unwrap_or(0),
        };
        least.max(0.0).floor() as u64
    }

    /// One delay in ns.
    #[inline]
    pub fn sample(&mut self) -> u64 {
        let d = match &self.dist {
            Distribution::Uniform => {
                let half = 3f64.sqrt() * self.sd_ns;
                self.mean_ns - half + 2.0 * half * self.rng.gen::<f64>()
            }
            Distribution::Normal => {
                // Box–Muller; u1 in (0, 1] so ln is finite.
                let u1 = 1.0 - self.rng.gen::<f64>();
                let u2 = self.rng.gen::<f64>();
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                self.mean_ns + self.sd_ns * z
            }
            Distribution::Exponential => {
                let u = 1.0 - self.rng.gen::<f64>();
                (self.mean_ns - self.sd_ns) - self.sd_ns * u.ln()
            }
            Distribution::Trace(t) => {
                let d = t[self.pos % t.len()];
                self.pos += 1;
                return d;
            }
        };
        d.max(0.0).round() as u64
    }
}

struct Entry {
    due_ns: u64,
    /// Arrival order: equal send times leave first in, first out.
    order: u64,
    packet: Packet,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.due_ns, self.order) == (o.due_ns, o.order)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.due_ns, self.order).cmp(&(o.due_ns, o.order))
    }
}

/// Counters of the delayer.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, PartialEq, Eq)]
pub struct DelayerCounters {
    /// Packets taken into the buffer.
    pub delayed: u64,
    /// Packets sent on.
    pub released: u64,
    /// Dropped because the buffer was full.
    pub buffer_full: u64,
    /// Dropped by TimeDrop: due, but the output was full.
    pub time_dropped: u64,
    /// Most packets held at once.
    pub max_held: u64,
    /// Sum of (send time − due time) over released packets, ns: how late the
    /// worker let them go (poll granularity, a full output).
    pub lateness_ns_sum: u64,
    /// Largest lateness, ns.
    pub lateness_ns_max: u64,
}

/// The `delayer` app.
pub struct Delayer {
    sampler: DelaySampler,
    heap: BinaryHeap<Reverse<Entry>>,
    capacity: usize,
    time_drop: bool,
    order: u64,
    counters: DelayerCounters,
}

impl Delayer {
    /// A delayer holding at most `capacity` packets.
    pub fn new(sampler: DelaySampler, capacity: usize, time_drop: bool) -> Delayer {
        let capacity = capacity.max(1);
        Delayer {
            sampler,
            heap: BinaryHeap::with_capacity(capacity),
            capacity,
            time_drop,
            order: 0,
            counters: DelayerCounters::default(),
        }
    }

    /// The counters.
    pub fn counters(&self) -> DelayerCounters {
        self.counters
    }

    /// Free buffers the worker's pool should hold for this buffer: its
    /// capacity, up to a typical occupancy of 2¹⁶ packets.
    pub fn pool_reserve(&self) -> usize {
        self.capacity.min(1 << 16)
    }

    /// Keep `packet` until `due_ns`; a full buffer drops it and counts it
    /// (`buffer_full`). The link emulator's delay line is this buffer.
    pub(crate) fn hold(&mut self, packet: Packet, due_ns: u64) {
        if self.heap.len() >= self.capacity {
            self.counters.buffer_full += 1;
            return;
        }
        self.order += 1;
        self.heap.push(Reverse(Entry {
            due_ns,
            order: self.order,
            packet,
        }));
        self.counters.delayed += 1;
        self.counters.max_held = self.counters.max_held.max(self.heap.len() as u64);
    }

    /// Send every held packet that is due (and, with TimeDrop, drop those
    /// that are due but find the output full).
    pub(crate) fn drain(&mut self, out: &mut Output<'_>, now_ns: u64) {
        while let Some(Reverse(top)) = self.heap.peek() {
            if top.due_ns > now_ns || out.fwd.is_full() {
                break;
            }
            let Some(Reverse(e)) = self.heap.pop() else {
                break;
            };
            let late = now_ns - e.due_ns;
            self.counters.lateness_ns_sum += late;
            self.counters.lateness_ns_max = self.counters.lateness_ns_max.max(late);
            self.counters.released += 1;
            out.fwd.transmit(e.packet);
        }
        if self.time_drop && out.fwd.is_full() {
            while self
                .heap
                .peek()
                .is_some_and(|Reverse(t)| t.due_ns <= now_ns)
            {
                self.heap.pop();
                self.counters.time_dropped += 1;
            }
        }
    }
}

impl App for Delayer {
    fn name(&self) -> &'static str {
        "delayer"
    }

    fn push(&mut self, input: &mut Link, out: &mut Output<'_>, now_ns: u64) {
        self.drain(out, now_ns);
        for _ in 0..input.nreadable() {
            let Some(p) = input.receive() else { break };
            let arrival = if p.rx_ns != 0 { p.rx_ns } else { now_ns };
            let due_ns = arrival + self.sampler.sample();
            self.hold(p, due_ns);
        }
        self.drain(out, now_ns);
    }

    fn held(&self) -> usize {
        self.heap.len()
    }

    fn pool_reserve(&self) -> usize {
        self.pool_reserve()
    }

    fn needs_clock(&self) -> bool {
        true
    }

    fn next_deadline_ns(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse(e)| e.due_ns)
    }

    fn min_hold_ns(&self) -> u64 {
        self.sampler.min_ns()
    }

    fn counters(&self) -> serde_json::Value {
        serde_json::to_value(self.counters).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7).
    fn erf(x: f64) -> f64 {
        let s = x.signum();
        let x = x.abs();
        let t = 1.0 / (1.0 + 0.327_591_1 * x);
        let y = 1.0
            - (((((1.061_405_429 * t - 1.453_152_027) * t) + 1.421_413_741) * t - 0.284_496_736)
                * t
                + 0.254_829_592)
                * t
                * (-x * x).exp();
        s * y
    }

    fn cdf(dist: &Distribution, mean: f64, sd: f64, x: f64) -> f64 {
        match dist {
            Distribution::Uniform => {
                let h = 3f64.sqrt() * sd;
                ((x - (mean - h)) / (2.0 * h)).clamp(0.0, 1.0)
            }
            Distribution::Normal => 0.5 * (1.0 + erf((x - mean) / (sd * 2f64.sqrt()))),
            Distribution::Exponential => {
                let shift = mean - sd;
                if x < shift {
                    0.0
                } else {
                    1.0 - (-(x - shift) / sd).exp()
                }
            }
            Distribution::Trace(_) => unreachable!(),
        }
    }

    /// Kolmogorov–Smirnov statistic of `xs` (sorted here) against `f`: this
    /// test's own oracle, written out independently of the engine's
    /// `nflab_analyze::ks::ks_one_sample` on purpose (and dataplane does not
    /// depend on analyze).
    fn ks(xs: &mut [f64], f: impl Fn(f64) -> f64) -> f64 {
        xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let n = xs.len() as f64;
        xs.iter()
            .enumerate()
            .map(|(i, &x)| {
                let fx = f(x);
                (fx - i as f64 / n)
                    .abs()
                    .max(((i + 1) as f64 / n - fx).abs())
            })
            .fold(0.0, f64::max)
    }

    /// Run the app on a virtual clock: arrivals every 700 ns, the clock jumps
    /// to the next arrival or the next due time, whichever is first. Returns
    /// each packet's delay (exit time − arrival) in ns.
    fn delays_through_app(dist: Distribution, mean_us: f64, sd_us: f64, n: usize) -> Vec<f64> {
        let s = DelaySampler::new(dist, mean_us, sd_us, 42).unwrap();
        let mut d = Delayer::new(s, n, false);
        let (mut input, mut fwd, mut back) = (Link::new(n), Link::new(n), Link::new(1));
        let mut arrivals = vec![0u64; n];
        let mut delays = Vec::with_capacity(n);
        let mut next = 0usize;
        let mut now = 1_000u64;
        while delays.len() < n {
            let next_arrival = (next < n).then(|| 1_000 + next as u64 * 700);
            now = match (next_arrival, d.next_deadline_ns()) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) => a,
                (None, Some(b)) => b,
                (None, None) => break,
            }
            .max(now);
            if next_arrival == Some(now) {
                let mut p = Packet::from_slice(&(next as u32).to_be_bytes());
                p.rx_ns = now;
                arrivals[next] = now;
                input.transmit(p);
                next += 1;
            }
            d.push(
                &mut input,
                &mut Output {
                    fwd: &mut fwd,
                    back: &mut back,
                },
                now,
            );
            while let Some(p) = fwd.receive() {
                let i = u32::from_be_bytes(p.data()[..4].try_into().unwrap()) as usize;
                delays.push((now - arrivals[i]) as f64);
            }
        }
        assert_eq!(
            d.counters().lateness_ns_max,
            0,
            "virtual clock: no packet late"
        );
        delays
    }

    #[test]
    fn delays_fit_their_distribution_and_the_seed_004_accuracy() {
        let n = 20_000;
        // KS critical value at α = 0.001: 1.95 / √n.
        let crit = 1.95 / (n as f64).sqrt();
        for dist in [
            Distribution::Uniform,
            Distribution::Normal,
            Distribution::Exponential,
        ] {
            let (mean_us, sd_us) = (500.0, 50.0);
            let mut xs = delays_through_app(dist.clone(), mean_us, sd_us, n);
            let m = xs.iter().sum::<f64>() / n as f64;
            let sd = (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
            assert!(
                (m / 1e3 - mean_us).abs() / mean_us < 0.006,
                "{dist:?} mean {m}"
            );
            assert!((sd / 1e3 - sd_us).abs() / sd_us < 0.04, "{dist:?} sd {sd}");
            let d = ks(&mut xs, |x| cdf(&dist, mean_us * 1e3, sd_us * 1e3, x));
            assert!(d < crit, "{dist:?}: KS D = {d} >= {crit}");
        }
        // The test has power: uniform delays are rejected as normal.
        let mut xs = delays_through_app(Distribution::Uniform, 500.0, 50.0, n);
        let d = ks(&mut xs, |x| cdf(&Distribution::Normal, 500e3, 50e3, x));
        assert!(d > crit, "KS should reject: D = {d}");
    }

    /// `min_ns` bounds every draw from below, and tightly where the
    /// distribution has a floor.
    #[test]
    fn the_least_delay_bounds_every_draw() {
        for (dist, mean, sd, tight) in [
            (Distribution::Uniform, 100.0, 20.0, true),
            (Distribution::Exponential, 100.0, 40.0, true),
            (Distribution::Normal, 100.0, 0.0, true),
            (Distribution::Normal, 100.0, 5.0, false),
            (
                Distribution::Trace(vec![7_000, 3_000, 9_000]),
                0.0,
                0.0,
                true,
            ),
        ] {
            let mut s = DelaySampler::new(dist.clone(), mean, sd, 3).unwrap();
            let least = s.min_ns();
            let drawn = (0..20_000).map(|_| s.sample()).min().unwrap();
            assert!(drawn >= least, "{dist:?}: drew {drawn} below {least}");
            if tight {
                assert!(drawn - least < 1_000, "{dist:?}: {least} vs {drawn}");
            } else {
                assert_eq!(least, 0, "{dist:?}");
            }
        }
    }

    #[test]
    fn trace_replays_in_order_and_bad_parameters_are_refused() {
        let t = DelaySampler::parse_trace("# d\n10\n20.5\n\n0\n", "t").unwrap();
        assert_eq!(t, vec![10_000, 20_500, 0]);
        let mut s = DelaySampler::new(Distribution::Trace(t), 0.0, 0.0, 1).unwrap();
        let v: Vec<u64> = (0..4).map(|_| s.sample()).collect();
        assert_eq!(v, vec![10_000, 20_500, 0, 10_000]);
        assert!(DelaySampler::parse_trace("5\n-1\n", "t")
            .unwrap_err()
            .0
            .contains("t line 2"));
        for (dist, m, sd) in [
            (Distribution::Uniform, -1.0, 0.0),
            (Distribution::Normal, 10.0, -2.0),
            (Distribution::Uniform, 10.0, 6.0),
            (Distribution::Exponential, 10.0, 11.0),
            (Distribution::Trace(vec![]), 0.0, 0.0),
        ] {
            assert!(DelaySampler::new(dist, m, sd, 1).is_err());
        }
    }

    #[test]
    fn full_buffer_drops_and_time_drop_discards_overdue() {
        let s = DelaySampler::new(Distribution::Uniform, 10.0, 0.0, 1).unwrap();
        let mut d = Delayer::new(s, 3, true);
        let (mut input, mut fwd, mut back) = (Link::new(16), Link::new(2), Link::new(1));
        for _ in 0..5 {
            input.transmit(Packet::from_slice(&[0; 60]));
        }
        d.push(
            &mut input,
            &mut Output {
                fwd: &mut fwd,
                back: &mut back,
            },
            1_000,
        );
        assert_eq!((d.counters().delayed, d.counters().buffer_full), (3, 2));
        // All three due; the output holds two: the third is time-dropped.
        d.push(
            &mut input,
            &mut Output {
                fwd: &mut fwd,
                back: &mut back,
            },
            20_000,
        );
        let c = d.counters();
        assert_eq!((c.released, c.time_dropped, d.held()), (2, 1, 0));
    }
}
