//! The capture's XDP tap (`src/bpf/tap.bpf.c`): each frame received on an
//! interface is copied (its first `snaplen` bytes, its length, a stamp) into a
//! BPF ring buffer and passed on untouched. [`run`] loads and attaches the
//! program on the calling thread, drains the ring into a [`TapSink`] until
//! `stop`, detaches and returns the kernel's counters.
//!
//! The link is owned by the calling thread's stack, nothing is pinned: when the
//! process ends in any way (`kill -9` included) the kernel detaches the program
//! and frees its maps.

use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, RingBufferBuilder};
use serde::Serialize;

use crate::skel::tap::TapSkelBuilder;
use crate::{bpf_err, clock, MonitorError};

/// The longest snap length the program copies (its scratch buffer).
pub const MAX_SNAPLEN: u32 = 4096;

/// Name of the program, as `bpftool prog` and `ip link` show it.
pub const PROGRAM_NAME: &str = "nflab_tap";

/// How the tap copies.
#[derive(Debug, Clone, Copy)]
pub struct TapConfig {
    /// Bytes kept of each frame (1 ..= [`MAX_SNAPLEN`]).
    pub snaplen: u32,
    /// Size of the kernel ring buffer: a power of two, at least a page.
    pub ring_bytes: u32,
    /// The program wakes the consumer only when the ring holds this much;
    /// otherwise the consumer finds the frames at its next poll.
    pub wakeup_bytes: u64,
    /// The consumer's poll timeout (its latency when the program does not wake it).
    pub poll: Duration,
}

impl Default for TapConfig {
    /// 2048-byte snap length, a 32 MiB ring (≈ 200 ms of 64-byte frames at
    /// 1.8 Mpps), wake-up at a quarter full, 1 ms polls.
    fn default() -> TapConfig {
        TapConfig {
            snaplen: 2048,
            ring_bytes: 32 << 20,
            wakeup_bytes: 8 << 20,
            poll: Duration::from_millis(1),
        }
    }
}

/// One frame out of the ring.
#[derive(Debug, Clone, Copy)]
pub struct TapFrame<'a> {
    /// When the program saw it, CLOCK_REALTIME ns.
    pub ts_ns: u64,
    /// Its length (all of it, also beyond the snap length).
    pub wire_len: u32,
    /// The bytes kept.
    pub data: &'a [u8],
}

/// Where the consumer puts frames.
pub trait TapSink {
    /// One frame, in ring order.
    fn frame(&mut self, frame: TapFrame<'_>);
    /// Called after each drain of the ring (also when it was empty), at least
    /// every poll timeout: time-based work goes here.
    fn idle(&mut self);
}

/// The program's counters, summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TapCounters {
    /// Frames the program ran on.
    pub seen: u64,
    /// Frames not copied because the ring was full (the tap's loss).
    pub ring_full: u64,
    /// Frames whose bytes could not be read (also lost to the capture).
    pub copy_failed: u64,
}

/// Bytes of the record header in the ring: ts_ns (u64), wire_len, cap_len (u32).
const HEADER_LEN: usize = 16;

fn parse_frame(d: &[u8], offset_ns: i64) -> Option<TapFrame<'_>> {
    let ts = u64::from_ne_bytes(d.get(0..8)?.try_into().ok()?);
    let wire_len = u32::from_ne_bytes(d.get(8..12)?.try_into().ok()?);
    let cap_len = u32::from_ne_bytes(d.get(12..16)?.try_into().ok()?) as usize;
    Some(TapFrame {
        ts_ns: clock::to_realtime(ts, offset_ns),
        wire_len,
        data: d.get(HEADER_LEN..HEADER_LEN + cap_len)?,
    })
}

fn check(cfg: &TapConfig) -> Result<(), MonitorError> {
    if !(1..=MAX_SNAPLEN).contains(&cfg.snaplen) {
        return Err(MonitorError::Unsupported(format!(
            "snaplen {} is out of the XDP tap's range: use 1 to {MAX_SNAPLEN} bytes",
            cfg.snaplen
        )));
    }
    if !cfg.ring_bytes.is_power_of_two() || cfg.ring_bytes < 4096 {
        return Err(MonitorError::Unsupported(format!(
            "the XDP tap's ring of {} bytes must be a power of two of at least 4096",
            cfg.ring_bytes
        )));
    }
    Ok(())
}

/// Attach the tap to `iface` (in the calling thread's network namespace), call
/// `ready` once it is attached (or with the reason it could not be), then drain
/// into `sink` until `stop`; detach, drain what is left, return the counters.
/// `ready` returns the sink, or None to detach at once.
pub fn run<S: TapSink>(
    iface: &str,
    cfg: &TapConfig,
    stop: &AtomicBool,
    ready: impl FnOnce(Result<(), String>) -> Option<S>,
) -> Result<(S, TapCounters), MonitorError> {
    let mut ready = Some(ready);
    let mut fail = |e: MonitorError| {
        if let Some(r) = ready.take() {
            r(Err(e.to_string()));
        }
        e
    };
    check(cfg).map_err(&mut fail)?;
    let ifindex = nix::net::if_::if_nametoindex(iface)
        .map_err(|e| MonitorError::Unsupported(format!("no interface {iface} here: {e}")))
        .map_err(&mut fail)?;
    let mut obj = MaybeUninit::uninit();
    let mut open = TapSkelBuilder::default()
        .open(&mut obj)
        .map_err(bpf_err("cannot open the XDP tap's BPF object"))
        .map_err(&mut fail)?;
    open.maps
        .frames
        .set_max_entries(cfg.ring_bytes)
        .map_err(bpf_err("cannot size the XDP tap's ring"))
        .map_err(&mut fail)?;
    let rodata = open
        .maps
        .rodata_data
        .as_deref_mut()
        .expect("tap.bpf.c has read-only configuration");
    rodata.snaplen = cfg.snaplen;
    rodata.wakeup_bytes = cfg.wakeup_bytes;
    let skel = open
        .load()
        .map_err(bpf_err("the kernel refused the XDP tap"))
        .map_err(&mut fail)?;
    let link = skel
        .progs
        .nflab_tap
        .attach_xdp(ifindex as i32)
        .map_err(|e| {
            MonitorError::Bpf(format!(
                "cannot attach the XDP tap to {iface}: {e} (an interface takes one XDP program: \
                 is another attached? `ip link show {iface}`; or use the af_packet producer)"
            ))
        })
        .map_err(&mut fail)?;
    let offset_ns = clock::tai_minus_realtime_ns();
    let Some(sink) = ready.take().and_then(|r| r(Ok(()))) else {
        return Err(MonitorError::Bpf(
            "the XDP tap was abandoned before it ran".into(),
        ));
    };
    let sink = RefCell::new(sink);
    let mut rb = RingBufferBuilder::new();
    rb.add(&skel.maps.frames, |d: &[u8]| {
        if let Some(f) = parse_frame(d, offset_ns) {
            sink.borrow_mut().frame(f);
        }
        0
    })
    .map_err(bpf_err("cannot open the XDP tap's ring"))?;
    let rb = rb
        .build()
        .map_err(bpf_err("cannot open the XDP tap's ring"))?;
    let read_err = |n: i32| MonitorError::Bpf(format!("cannot read the XDP tap's ring: error {n}"));
    // Bounded drains, so the sink's time-based work runs at high rates too.
    let drain = || -> Result<(), MonitorError> {
        loop {
            let n = rb.consume_raw_n(4096);
            if n < 0 {
                return Err(read_err(n));
            }
            sink.borrow_mut().idle();
            if n < 4096 {
                return Ok(());
            }
        }
    };
    while !stop.load(Ordering::Relaxed) {
        // Returns early when the program forces a wake-up (the ring is filling).
        let n = rb.poll_raw(cfg.poll);
        if n < 0 && n != -(nix::errno::Errno::EINTR as i32) {
            return Err(read_err(n));
        }
        drain()?;
    }
    // Detach first, then take what the program wrote before it went.
    drop(link);
    drain()?;
    let counters = read_counters(&skel.maps.counters)?;
    drop(rb);
    Ok((sink.into_inner(), counters))
}

fn read_counters(map: &dyn MapCore) -> Result<TapCounters, MonitorError> {
    let mut sums = [0u64; 3];
    for (i, sum) in sums.iter_mut().enumerate() {
        let per_cpu = map
            .lookup_percpu(&(i as u32).to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf_err("cannot read the XDP tap's counters"))?
            .unwrap_or_default();
        *sum = per_cpu
            .iter()
            .filter_map(|v| v.get(..8))
            .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
            .sum();
    }
    Ok(TapCounters {
        seen: sums[0],
        ring_full: sums[1],
        copy_failed: sums[2],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_parses_into_stamp_length_and_bytes() {
        let mut d = Vec::new();
        d.extend_from_slice(&(37_000_000_123u64).to_ne_bytes());
        d.extend_from_slice(&1500u32.to_ne_bytes());
        d.extend_from_slice(&3u32.to_ne_bytes());
        d.extend_from_slice(&[7, 8, 9, 0, 0]); // the ring pads records to 8 bytes
        let f = parse_frame(&d, 37_000_000_000).unwrap();
        assert_eq!((f.ts_ns, f.wire_len, f.data), (123, 1500, &[7u8, 8, 9][..]));
        // A record shorter than it claims is refused, not read past its end.
        d.truncate(HEADER_LEN + 2);
        assert!(parse_frame(&d, 0).is_none());
    }

    #[test]
    fn bad_sizes_are_one_sentence() {
        for cfg in [
            TapConfig {
                snaplen: MAX_SNAPLEN + 1,
                ..TapConfig::default()
            },
            TapConfig {
                ring_bytes: 3 << 20,
                ..TapConfig::default()
            },
        ] {
            let e = check(&cfg).unwrap_err().to_string();
            assert!(!e.contains('\n') && e.contains("XDP tap"), "{e}");
        }
    }
}
