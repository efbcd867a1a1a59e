//! The generator on XDP live frames (`backend = "xdp_live"`, see
//! [`nflab_io::xdp_live`]): the kernel stamps and transmits every frame.
//!
//! Maximum rate only. Each `BPF_PROG_TEST_RUN` call sets up and tears down a
//! page pool, and the teardown waits for an RCU grace period: ~26 ms per call
//! on the development VM, whatever the number of frames. A pacer that made one
//! call per due packet would therefore send bursts every few tens of ms, not
//! its pattern, so paced patterns are refused in one sentence (use `af_xdp`
//! for them). At `rate = max` the calls are long (up to [`MAX_FRAMES_PER_CALL`]
//! frames), sized from the rate the previous call achieved so the run ends
//! within a few ms of its duration. Every frame comes from one template: one
//! flow, one frame size, IPv4.

use std::sync::atomic::{AtomicBool, Ordering};

use nflab_io::clock;
use nflab_io::xdp_live::XdpLive;

use crate::{FlowReport, GenError, GenPlan, GenReport};

/// Most frames per call: ~0.3 s at this VM's 3.5 Mpps, the longest a Ctrl-C waits.
pub const MAX_FRAMES_PER_CALL: u32 = 1 << 20;
/// Fewest frames per call (the grace period makes smaller calls pointless).
const MIN_FRAMES_PER_CALL: u64 = 1 << 12;

/// Why `plan` cannot go out as live frames, if it cannot.
pub fn unsupported(plan: &GenPlan) -> Option<String> {
    let s = plan.streams.first()?;
    if plan.tx_timestamp == crate::TxTimestamp::Kernel {
        return Some(
            "backend xdp_live stamps every frame in the kernel already (its XDP program's \
             clock read); the socket TX stamps of tx_timestamp = \"kernel\" do not exist for \
             it: leave tx_timestamp at \"app\""
                .into(),
        );
    }
    let why = if !plan.unpaced() {
        "rate = \"max\" (each kernel call waits for an RCU grace period, ~25 ms, so it \
         cannot pace a pattern)"
    } else if plan.streams.len() > 1 {
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

    let end_ns = plan.duration_ns.map(|d| plan.warmup_ns + d);
    let limit = plan.count.unwrap_or(u64::MAX);
    let t0 = clock::monotonic_ns();
    let warmup_end = t0 + plan.warmup_ns;
    let mut report = GenReport {
        backend: "xdp_live".into(),
        threads: 1,
        offered_pps: None,
        tx_timestamp: "kernel-xdp".into(),
        ..GenReport::default()
    };
    let (mut sent, mut warmup) = (0u64, 0u64);
    let mut first_measured = None;
    let mut last_tx = 0u64;
    // Frames per ns the last call achieved; none before the first call, which
    // sends the fewest frames to measure it. A guess (1 Mpps once) made the
    // first call fill the whole warm-up: on a host whose cores another
    // generator saturated, that call took longer than the run and no frame
    // counted as measured.
    let mut rate: Option<f64> = None;
    loop {
        if stop.load(Ordering::Relaxed) {
            report.interrupted = true;
            break;
        }
        let now = clock::monotonic_ns();
        if end_ns.is_some_and(|e| now >= t0 + e) || sent >= limit {
            break;
        }
        // Fill the time to the next boundary (warm-up end, run end), within bounds.
        let boundary = if now < warmup_end {
            warmup_end
        } else {
            end_ns.map_or(u64::MAX, |e| t0 + e)
        };
        let fit = rate.map_or(0, |r| ((boundary - now) as f64 * r) as u64);
        let n = fit
            .clamp(MIN_FRAMES_PER_CALL, u64::from(MAX_FRAMES_PER_CALL))
            .min(limit - sent);
        let before = clock::realtime_ns();
        let t_call = clock::monotonic_ns();
        // Fewer than n when a signal (Ctrl-C) cut the call short.
        let n = u64::from(live.send(n as u32)?);
        let took = clock::monotonic_ns().saturating_sub(t_call).max(1);
        if n > 0 {
            rate = Some(n as f64 / took as f64);
        }
        sent += n;
        if now < warmup_end {
            warmup += n;
        } else if first_measured.is_none() {
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
