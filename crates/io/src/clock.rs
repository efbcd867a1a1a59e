//! The clocks nflab stamps packets with.
//!
//! Timestamps are `CLOCK_REALTIME` nanoseconds because that is the clock the kernel
//! stamps received packets with (`skb->tstamp`), so application TX stamps and kernel RX
//! stamps taken on one host subtract directly. `CLOCK_MONOTONIC` is for measuring
//! durations inside one process (pacing, timeouts), where NTP steps must not matter.

use libc::clockid_t;

fn read(clock: clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to; clock ids used here always exist on Linux.
    unsafe {
        libc::clock_gettime(clock, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `CLOCK_REALTIME` now, nanoseconds since the Unix epoch.
pub fn realtime_ns() -> u64 {
    read(libc::CLOCK_REALTIME)
}

/// `CLOCK_MONOTONIC` now, nanoseconds since an arbitrary start.
pub fn monotonic_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_REALTIME − CLOCK_MONOTONIC` now, ns: what moves a stamp between the two.
/// The real-time read is taken between two monotonic ones and set against their
/// midpoint, so the offset is off by at most half a clock read.
pub fn realtime_minus_monotonic_ns() -> i64 {
    let m0 = monotonic_ns();
    let real = realtime_ns();
    let m1 = monotonic_ns();
    real as i64 - (m0 + (m1 - m0) / 2) as i64
}

/// The resolution the kernel reports for `clock` (`clock_getres`), in ns; 0 if unknown.
pub fn resolution_ns(clock: clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to.
    let rc = unsafe { libc::clock_getres(clock, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Run the calling thread under `SCHED_FIFO` at `priority` (1..=99), so a busy-waiting
/// pacer is not preempted by ordinary work on a shared host. The kernel's RT throttling
/// (`sched_rt_runtime_us`, 95 % by default) still leaves the CPU some time for others.
/// Needs CAP_SYS_NICE.
pub fn set_realtime(priority: i32) -> std::io::Result<()> {
    let p = libc::sched_param {
        sched_priority: priority.clamp(1, 99),
    };
    // SAFETY: `p` is a valid sched_param for the call; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Let the calling thread's timed sleeps (`ppoll`, `nanosleep`) end within `ns` of their
/// deadline. Ordinary threads get 50 µs of slack, which the kernel uses to batch timer
/// wake-ups; a data-plane worker sleeping until a delayer's next release must not be
/// woken up to 50 µs late. `SCHED_FIFO` threads have no slack anyway.
pub fn set_timer_slack_ns(ns: u64) -> std::io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long and touches no memory.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns.max(1) as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Sleep until `CLOCK_MONOTONIC` reads `deadline_ns` (an absolute
/// `clock_nanosleep`, resumed after a signal), so a periodic loop does not
/// drift by its own run time.
pub fn sleep_until_monotonic_ns(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec; the remainder pointer may be null with TIMER_ABSTIME.
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
}

/// Reads taken by [`observed_granularity_ns`].
pub const GRANULARITY_READS: usize = 10_000;

/// The granularity actually observed: the smallest non-zero difference between successive
/// reads of `clock` over [`GRANULARITY_READS`] reads, in ns. This is an upper bound on the
/// real step (back-to-back reads also include the cost of a read), and what a report
/// should show next to `resolution_ns`, which is often a nominal 1 ns. Returns 0 if the
/// clock never advanced.
pub fn observed_granularity_ns(clock: clockid_t) -> u64 {
    let mut prev = read(clock);
    let mut best = u64::MAX;
    for _ in 0..GRANULARITY_READS {
        let now = read(clock);
        let d = now.saturating_sub(prev);
        if d > 0 && d < best {
            best = d;
        }
        prev = now;
    }
    if best == u64::MAX {
        0
    } else {
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realtime_is_after_2020_and_close_to_std() {
        let std_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let ns = realtime_ns();
        assert!(ns > 1_577_836_800_000_000_000, "{ns}");
        assert!(ns.abs_diff(std_ns) < 1_000_000_000, "{ns} vs {std_ns}");
    }

    #[test]
    fn monotonic_does_not_go_back() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a);
    }

    #[test]
    fn granularity_is_positive_and_below_a_millisecond() {
        let g = observed_granularity_ns(libc::CLOCK_MONOTONIC);
        assert!(g > 0 && g < 1_000_000, "{g}");
        let r = resolution_ns(libc::CLOCK_REALTIME);
        assert!(r > 0 && r <= 1_000_000, "{r}");
    }

    #[test]
    fn coarse_clock_granularity_matches_its_resolution() {
        // CLOCK_REALTIME_COARSE advances once per tick: observed steps are at least its
        // reported resolution (an independent check of the measurement).
        let r = resolution_ns(libc::CLOCK_REALTIME_COARSE);
        let g = observed_granularity_ns(libc::CLOCK_REALTIME_COARSE);
        assert!(r >= 1_000, "coarse resolution {r}");
        // 10k reads may all fall inside one tick on a fast machine: then 0.
        assert!(g == 0 || g >= r / 2, "granularity {g} vs resolution {r}");
    }
}
