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

use nflab_analyze::{Distribution, Pct};
use nflab_io::clock::{monotonic_ns, sleep_until_monotonic_ns};
use serde::Serialize;

use crate::knobs::{BackgroundLoad, LoadThreads};

/// `SCHED_FIFO` priority of the link's workers (`dut.realtime`), used here too.
pub const REALTIME_PRIORITY: i32 = 50;

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

/// Nearest-rank percentiles of one sample, ns.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Tail {
    /// Values in the sample.
    pub count: u64,
    /// Median.
    pub p50: Option<i64>,
    /// 99th percentile.
    pub p99: Option<i64>,
    /// 99.9th percentile.
    pub p99_9: Option<i64>,
    /// Largest value.
    pub max: Option<i64>,
}

impl Tail {
    /// The percentiles of `values` (exact: the sample is kept whole).
    pub fn of(values: &[i64]) -> Tail {
        let mut d = Distribution::new(u64::MAX, 3);
        values.iter().for_each(|&v| d.record(v));
        let pcts = ["50", "99", "99.9"].map(|p| Pct::parse(p).expect("valid percentile"));
        let q = d.quantiles(&pcts);
        let at = |i: usize| q[i].map(|q| q.value);
        Tail {
            count: d.count(),
            p50: at(0),
            p99: at(1),
            p99_9: at(2),
            max: d.max(),
        }
    }
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

/// Measure for `cfg.duration` or until `stop`; the holding thread is a thread
/// of its own, so the caller's scheduling is left alone.
pub fn measure(cfg: &TimerFloorConfig, stop: &AtomicBool) -> Result<TimerFloor, String> {
    if cfg.hold_ns == 0 || cfg.period_ns < 2 * cfg.hold_ns {
        return Err(format!(
            "a timer floor needs a hold above 0 and a period of at least two holds (hold {} µs, period {} ms)",
            cfg.hold_ns as f64 / 1e3,
            cfg.period_ns as f64 / 1e6
        ));
    }
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
    crate::cpu::pin_thread(cfg.cpu);
    let realtime = cfg.realtime && nflab_io::clock::set_realtime(REALTIME_PRIORITY).is_ok();
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

    #[test]
    fn percentiles_of_a_known_sample() {
        let v: Vec<i64> = (1..=1000).rev().collect();
        let t = Tail::of(&v);
        assert_eq!(
            (t.count, t.p50, t.p99, t.p99_9, t.max),
            (1000, Some(500), Some(990), Some(999), Some(1000))
        );
        assert_eq!(Tail::of(&[]).p50, None);
    }

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
