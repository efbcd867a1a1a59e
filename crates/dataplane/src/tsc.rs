//! The time-stamp counter: cheap cycle counts for per-packet cost figures
//! (seed 000's `c_IO + c_task`) and for `sheep`'s calibrated busy-wait.
//!
//! On x86_64 this is `RDTSC`, which on every CPU of the last decade ticks at
//! a constant rate (the nominal frequency) whatever the current clock, so a
//! "cycle" here is a TSC tick. Elsewhere it falls back to nanoseconds of
//! `CLOCK_MONOTONIC` and [`tsc_hz`] reports 1e9.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The current TSC value.
#[inline]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC only reads a counter; it has no memory effects and is
        // available on every x86_64 CPU.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        nflab_io::clock::monotonic_ns()
    }
}

/// TSC ticks per second, measured once per process against the monotonic
/// clock over 20 ms (good to about 0.1 %).
pub fn tsc_hz() -> f64 {
    static HZ: OnceLock<f64> = OnceLock::new();
    *HZ.get_or_init(|| {
        if cfg!(not(target_arch = "x86_64")) {
            return 1e9;
        }
        let (t0, c0) = (Instant::now(), rdtsc());
        std::thread::sleep(Duration::from_millis(20));
        let (t1, c1) = (Instant::now(), rdtsc());
        (c1.wrapping_sub(c0)) as f64 / (t1 - t0).as_secs_f64()
    })
}

/// Spin until `cycles` TSC ticks have passed (SHEEP's `wait_cycles`).
#[inline]
pub fn spin_cycles(cycles: u64) {
    if cycles == 0 {
        return;
    }
    let start = rdtsc();
    while rdtsc().wrapping_sub(start) < cycles {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_waits_at_least_the_asked_ticks() {
        for cycles in [0u64, 1_000, 100_000] {
            let a = rdtsc();
            spin_cycles(cycles);
            assert!(rdtsc().wrapping_sub(a) >= cycles);
        }
        assert!(tsc_hz() > 1e6);
    }
}
