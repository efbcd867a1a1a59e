//! The generator on XDP live frames (`backend = "xdp_live"`, see
//! [`nflab_io::xdp_live`]): the kernel stamps and transmits every frame, the
//! pacer only decides how many are due.
//!
//! The pacer walks the same [`StreamSchedule`] as the socket path; whenever
//! packets are due it hands their number to one `BPF_PROG_TEST_RUN` call,
//! which sends them back to back with consecutive sequence numbers (at most
//! [`BURST_PER_CALL`] per call at `rate = max`). A due group therefore leaves
//! as a burst at the driver's speed: exact for `max`, bursts and on/off, and
//! for CBR and Poisson as precise as the pacer's wake-ups, which the
//! self-check measures as for every backend. Every frame of the run is the
//! same template, so this path sends one flow of one frame size (the probe
//! stream alone); the plan is refused in one sentence otherwise.

use std::sync::atomic::{AtomicBool, Ordering};

use nflab_io::clock;
use nflab_io::xdp_live::XdpLive;

use crate::{FlowReport, GenError, GenPlan, GenReport, StreamSchedule};

/// Frames per call at `rate = max`: long enough to amortise the syscall,
/// short enough to notice Ctrl-C and the end of the run within a millisecond.
pub const BURST_PER_CALL: u32 = 1 << 12;

/// Why `plan` cannot go out as live frames, if it cannot.
pub fn unsupported(plan: &GenPlan) -> Option<String> {
    let s = plan.streams.first()?;
    let why = if plan.streams.len() > 1 {
        "one stream (no background streams)"
    } else if s.spec.flows != 1 {
        "one flow (flows = 1)"
    } else if s.templates.len() != 1 {
        "one frame size"
    } else if s.templates[0].is_ipv6() {
        "IPv4 (its UDP checksum is 0; an IPv6 one would need updating per frame)"
    } else {
        return None;
    };
    Some(format!(
        "backend xdp_live sends every frame from one template, so it needs {why}: use \
         af_xdp or af_packet for this traffic"
    ))
}

/// Send `plan` on `ifname` as live frames until it ends or `stop` is set. Runs
/// on the calling thread, which must be in the interface's network namespace.
pub fn run_live(ifname: &str, plan: &GenPlan, stop: &AtomicBool) -> Result<GenReport, GenError> {
    plan.check()?;
    if let Some(why) = unsupported(plan) {
        return Err(GenError::Config(why));
    }
    let stream = &plan.streams[0];
    let template = &stream.templates[0];
    let mut frame = vec![0u8; template.len()];
    template.write(&mut frame, 0, 0);
    // magic, version and flow precede the seq field.
    let seq_at = template.payload_offset() + 4;
    let mut live = XdpLive::open(ifname, &frame, seq_at, 0)?;

    let unpaced = plan.unpaced();
    let mut sched = StreamSchedule::new(&stream.spec);
    let end_ns = plan.duration_ns.map(|d| plan.warmup_ns + d);
    let limit = plan.count.unwrap_or(u64::MAX);
    let t0 = clock::monotonic_ns();
    let warmup_end = t0 + plan.warmup_ns;
    let mut report = GenReport {
        backend: "xdp_live".into(),
        threads: 1,
        offered_pps: stream.spec.mean_pps(),
        tx_timestamp: "kernel-xdp".into(),
        ..GenReport::default()
    };
    let (mut sent, mut warmup) = (0u64, 0u64);
    let mut first_measured = None;
    let mut last_tx = 0u64;
    let mut next = sched.next_slot();
    loop {
        if stop.load(Ordering::Relaxed) {
            report.interrupted = true;
            break;
        }
        let now = clock::monotonic_ns();
        let (due, due_warm) = if unpaced {
            if end_ns.is_some_and(|e| now >= t0 + e) || sent >= limit {
                break;
            }
            let due = u64::from(BURST_PER_CALL).min(limit - sent);
            (due, if now < warmup_end { due } else { 0 })
        } else {
            let (mut due, mut due_warm) = (0u64, 0u64);
            let mut lateness = 0;
            while let Some(slot) = next {
                if end_ns.is_some_and(|e| slot.t_ns >= e) || sent + due >= limit {
                    next = None;
                    break;
                }
                if t0 + slot.t_ns > now || due >= u64::from(BURST_PER_CALL) {
                    break;
                }
                lateness = lateness.max(now - (t0 + slot.t_ns));
                due += 1;
                // Packets due before the warm-up's end are warm-up, as on the socket path.
                due_warm += u64::from(slot.t_ns < plan.warmup_ns);
                next = sched.next_slot();
            }
            if due == 0 {
                if next.is_none() {
                    break;
                }
                std::hint::spin_loop();
                continue;
            }
            report.max_lateness_ns = report.max_lateness_ns.max(lateness);
            (due, due_warm)
        };
        let before = clock::realtime_ns();
        live.send(due as u32)?;
        sent += due;
        warmup += due_warm;
        if due > due_warm && first_measured.is_none() {
            first_measured = Some(before);
        }
        last_tx = clock::realtime_ns();
    }
    report.sent = sent;
    report.warmup = warmup;
    report.first_tx_ns = first_measured;
    report.last_tx_ns = (sent > 0).then_some(last_tx);
    let measured = sent - warmup;
    if let (Some(a), true) = (first_measured, measured > 1) {
        if last_tx > a {
            report.tx_pps = Some((measured - 1) as f64 / ((last_tx - a) as f64 / 1e9));
        }
    }
    report.flows = vec![FlowReport {
        flow: stream.flow_base,
        stream: 0,
        role: crate::role_name(stream.role).into(),
        sent,
        warmup,
    }];
    report.streams = vec![crate::stream_report(stream, sent)];
    Ok(report)
}
