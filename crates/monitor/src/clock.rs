//! From the BPF programs' clock to the recorder's.
//!
//! The programs stamp with `bpf_ktime_get_tai_ns` (CLOCK_TAI); the recorder and the
//! generator use CLOCK_REALTIME. The kernel keeps TAI = REALTIME + a whole number of
//! seconds (the TAI offset, 0 until someone sets it), both from one timekeeper, so
//! the conversion is exact: read both clocks once, round the difference to whole
//! seconds. (CLOCK_MONOTONIC, `bpf_ktime_get_ns`, would drift from REALTIME by every
//! clock step since boot.)

use nix::time::{clock_gettime, ClockId};

/// TAI − REALTIME in ns (a multiple of 10⁹).
pub fn tai_minus_realtime_ns() -> i64 {
    let ns = |c| {
        let t = clock_gettime(c).expect("CLOCK_TAI and CLOCK_REALTIME exist on Linux");
        t.tv_sec() as i128 * 1_000_000_000 + t.tv_nsec() as i128
    };
    let diff = ns(ClockId::CLOCK_TAI) - ns(ClockId::CLOCK_REALTIME);
    let secs = (diff as f64 / 1e9).round() as i64;
    secs * 1_000_000_000
}

/// A BPF timestamp on CLOCK_REALTIME.
pub fn to_realtime(tai_ns: u64, offset_ns: i64) -> u64 {
    (tai_ns as i64 - offset_ns) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_is_whole_seconds_and_maps_tai_onto_realtime() {
        let off = tai_minus_realtime_ns();
        assert_eq!(off % 1_000_000_000, 0);
        let tai = clock_gettime(ClockId::CLOCK_TAI).unwrap();
        let real = clock_gettime(ClockId::CLOCK_REALTIME).unwrap();
        let tai_ns = tai.tv_sec() as u64 * 1_000_000_000 + tai.tv_nsec() as u64;
        let real_ns = real.tv_sec() as u64 * 1_000_000_000 + real.tv_nsec() as u64;
        let mapped = to_realtime(tai_ns, off);
        // The two reads are a few µs apart, far below a second.
        assert!(real_ns >= mapped && real_ns - mapped < 1_000_000_000 / 10);
    }
}
