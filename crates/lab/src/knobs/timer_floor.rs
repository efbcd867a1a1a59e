//! The host's timer floor: how late a thread wakes that holds something for
//! a set time, as the link emulator's workers hold each frame for its delay.
//!
//! A link DuT with a delay releases every frame from a timed wake-up; on a
//! VM the whole guest is sometimes held off its CPUs for milliseconds, and a
//! frame whose release falls into such a stall leaves when the stall ends.
//! The path's noise floor with no delay configured does not show this: its
//! intervals are a tenth of a millisecond long, a held frame's are the delay
//! long. This module measures the hold alone, with no network: a thread
//! under the link workers' conditions (pinned to the DuT's CPU, `SCHED_FIFO`
//! at their priority, timer slack 1 ns, optionally every CPU kept from
//! halting as `knobs.background_load` with policy "idle" does) wakes once per
//! period and then holds twice, as a sensor message and its actuation cross
//! the link once each way. Per period it records each hold's lateness
//! (wake-up − deadline) and half their sum — what two timed crossings add to
//! half a round trip, the quantity NCSbench's d_N is made of.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nflab_analyze::dist::Tail;
use nflab_io::clock::{monotonic_ns, sleep_until_monotonic_ns};
use serde::Serialize;

use crate::knobs::host::{BackgroundLoad, LoadThreads};

/// What to measure.
#[derive(Debug, Clone)]
pub struct TimerFloorConfig {
    /// Length of one hold (the link's one-way delay), ns.
    pub hold_ns: u64,
    /// One wake-up and two holds per period, ns (at least two holds long).
    pub period_ns: u64,
    /// How long to measure (ends earlier when `stop` is set).
    pub duration: Duration,
    /// CPU the holding thread is pinned to.
    pub cpu: usize,
    /// Run the holding thread under `SCHED_FIFO`.
    pub realtime: bool,
    /// A `SCHED_IDLE` spinner on every CPU while measuring.
    pub keep_awake: bool,
}

/// The measured floor.
#[derive(Debug, Clone, Serialize)]
pub struct TimerFloor {
    /// One hold, µs.
    pub hold_us: f64,
    /// Period, ms.
    pub period_ms: f64,
    /// Periods measured.
    pub periods: u64,
    /// CPU of the holding thread.
    pub cpu: usize,
    /// Whether it ran under `SCHED_FIFO` (asked for and granted).
    pub realtime: bool,
    /// Whether every CPU was kept from halting.
    pub keep_awake: bool,
    /// How the holds were timed.
    pub clock: &'static str,
    /// Lateness of each hold (both of every period), ns.
    pub lateness_ns: Tail,
    /// Half the two holds' lateness per period, ns.
    pub two_hold_half_excess_ns: Tail,
    /// The per-period half excess, ns, in period order (for composing
    /// floors; `nflab doctor` writes it to `--timer-out` only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub half_excess_ns: Vec<i64>,
}

impl TimerFloorConfig {
    /// Whether a period fits a wake-up and two holds; the error says what would.
    pub fn check(&self) -> Result<(), String> {
        if self.hold_ns == 0 || self.period_ns < 2 * self.hold_ns {
            return Err(format!(
                "a timer floor needs a hold above 0 and a period of at least two holds, so at least {} ms (hold {} µs, period {} ms)",
                (2 * self.hold_ns) as f64 / 1e6,
                self.hold_ns as f64 / 1e3,
                self.period_ns as f64 / 1e6
            ));
        }
        Ok(())
    }
}

/// Measure for `cfg.duration` or until `stop`; the holding thread is a thread
/// of its own, so the caller's scheduling is left alone.
pub fn measure(cfg: &TimerFloorConfig, stop: &AtomicBool) -> Result<TimerFloor, String> {
    cfg.check()?;
    let mut spinners = cfg.keep_awake.then(|| {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        LoadThreads::start(&BackgroundLoad {
            cpus: (0..cpus).collect(),
            duty: 1.0,
            period_ms: 10,
            policy: Some("idle".into()),
        })
    });
    let result = std::thread::scope(|s| {
        s.spawn(|| hold_periodically(cfg, stop))
            .join()
            .map_err(|_| "the timer floor's thread panicked".to_string())
    });
    if let Some(l) = spinners.as_mut() {
        l.stop();
    }
    let (lateness, half_excess, realtime) = result?;
    Ok(TimerFloor {
        hold_us: cfg.hold_ns as f64 / 1e3,
        period_ms: cfg.period_ns as f64 / 1e6,
        periods: half_excess.len() as u64,
        cpu: cfg.cpu,
        realtime,
        keep_awake: cfg.keep_awake,
        clock: "CLOCK_MONOTONIC; absolute clock_nanosleep, timer slack 1 ns",
        lateness_ns: Tail::of(&lateness),
        two_hold_half_excess_ns: Tail::of(&half_excess),
        half_excess_ns: half_excess,
    })
}

/// The holding thread: per period a wake-up, then two holds.
fn hold_periodically(cfg: &TimerFloorConfig, stop: &AtomicBool) -> (Vec<i64>, Vec<i64>, bool) {
    crate::sys::cpu::pin_thread(cfg.cpu);
    let realtime =
        cfg.realtime && nflab_io::clock::set_realtime(crate::sys::cpu::DUT_PRIORITY).is_ok();
    let _ = nflab_io::clock::set_timer_slack_ns(1);
    let (mut lateness, mut half_excess) = (Vec::new(), Vec::new());
    let start = monotonic_ns() + cfg.period_ns;
    let end = start + cfg.duration.as_nanos() as u64;
    let mut period_start = start;
    while period_start + cfg.period_ns <= end && !stop.load(Ordering::Relaxed) {
        sleep_until_monotonic_ns(period_start);
        let mut t = monotonic_ns();
        let mut late = [0i64; 2];
        for l in &mut late {
            let due = t + cfg.hold_ns;
            sleep_until_monotonic_ns(due);
            t = monotonic_ns();
            *l = t as i64 - due as i64;
        }
        lateness.extend_from_slice(&late);
        half_excess.push((late[0] + late[1]) / 2);
        // A period overrun by a stall starts the next one on time, not at once.
        period_start += cfg.period_ns;
        while period_start < t {
            period_start += cfg.period_ns;
        }
    }
    (lateness, half_excess, realtime)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real sleeps: every hold ends at or after its deadline, one value per
    /// period, and a bad shape is refused before anything runs.
    #[test]
    fn holds_are_never_early_and_bad_shapes_are_refused() {
        let cfg = TimerFloorConfig {
            hold_ns: 1_000_000,
            period_ns: 5_000_000,
            duration: Duration::from_millis(200),
            cpu: 0,
            realtime: false,
            keep_awake: false,
        };
        let f = measure(&cfg, &AtomicBool::new(false)).unwrap();
        assert!(f.periods >= 10 && f.periods <= 40, "{} periods", f.periods);
        assert_eq!(f.lateness_ns.count, 2 * f.periods);
        assert!(f.half_excess_ns.iter().all(|&v| v >= 0));
        assert!(f.lateness_ns.p50.unwrap() >= 0);
        let bad = TimerFloorConfig {
            period_ns: 1_500_000,
            ..cfg
        };
        let e = measure(&bad, &AtomicBool::new(false)).unwrap_err();
        assert!(e.contains("at least two holds"), "{e}");
    }
}
