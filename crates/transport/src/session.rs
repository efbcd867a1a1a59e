//! One run of the seed's study (§6.3) on this host: two ends, "plant" and "controller",
//! each in a network namespace of its own, send `payload_bytes` every `gap_ms` to each
//! other (PC and CP) for `duration_s` from the same instant, then keep receiving for the
//! target delay plus 200 ms. A tap per end gives m2/m5, the sockets' kernel stamps m3/m4.
//!
//! The namespaces and links are the caller's: `nflab-prrt` joins two namespaces by a
//! veth, `nflab run` (`[app] kind = "prrt"`) puts the ends on both sides of its DuT.

use std::io;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;

use crate::app::AppSpec;
use crate::study::{detect_outages, layer_delays, mark_overlaps, DirectionSummary, LayerDelays};
use crate::study::{PrrtRun, TrafficDirection};
use crate::udp::{now_ns, Received, UdpDriver};
use crate::vantage::{Stamps, Tap};
use crate::{ReceiverStats, SenderState, SenderStats};

/// Both ends start sending together this long after the threads are started.
const START_DELAY_NS: u64 = 100_000_000;
/// How long the ends keep receiving after the last send, on top of the target delay.
const DRAIN_NS: u64 = 200_000_000;

/// One end of the run.
#[derive(Debug, Clone)]
pub struct EndPoint {
    /// Network namespace (`/run/netns/NAME`) the end's threads enter.
    pub netns: String,
    /// Its UDP address.
    pub addr: SocketAddrV4,
    /// The interface its tap watches (None: every interface of the namespace).
    pub tap_iface: Option<String>,
    /// The end vanishes this long after the run's start (ns): it stops sending and
    /// receiving and closes its socket, as a crashed peer would. None: it runs to the end.
    pub vanish_after_ns: Option<u64>,
}

/// Called with each end's socket before it is used (e.g. to switch UDP checksums off
/// where a DuT re-sends frames as read).
pub type SocketSetup = fn(&UdpSocket) -> io::Result<()>;

/// A failed run, one sentence.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SessionError(pub String);

fn fail(what: &str) -> impl Fn(io::Error) -> SessionError + '_ {
    move |e| SessionError(format!("{what}: {e}"))
}

/// One message's row: the six vantage points, ns since the run's start (None where
/// missing; m4 and m5 also for a message restored from redundancy), and the layer delays
/// derived from them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PacketRow {
    /// Plant → controller or back.
    pub dir: TrafficDirection,
    /// Message sequence number (per direction, from 0).
    pub seq: u32,
    /// m1..m6.
    pub m: [Option<i64>; 6],
    /// m2−m1 … m6−m5, m6−m1.
    pub layers: LayerDelays,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct SessionOutcome {
    /// `prrt.json`.
    pub run: PrrtRun,
    /// One row per message sent, PC first.
    pub packets: Vec<PacketRow>,
    /// Both ends' full counters: `{"pc": {"sender", "receiver"}, "cp": ...}`.
    pub stats: serde_json::Value,
    /// The run's time zero, realtime ns (both ends' first send).
    pub start_ns: u64,
    /// The stop flag ended it early.
    pub interrupted: bool,
}

struct Side {
    state: SenderState,
    /// When the end vanished (realtime ns), if it did.
    vanished_ns: Option<u64>,
    sender: SenderStats,
    receiver: ReceiverStats,
    sent_m1: Vec<u64>,
    received: Vec<Received>,
    m3: Stamps,
    m4: Stamps,
}

fn enter(ns: &str) -> Result<(), SessionError> {
    let file = std::fs::File::open(format!("/run/netns/{ns}"))
        .map_err(|e| SessionError(format!("network namespace {ns}: {e}")))?;
    nix::sched::setns(file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| SessionError(format!("cannot enter network namespace {ns}: {e}")))
}

fn tap(end: &EndPoint, port: u16, stop: &AtomicBool) -> Result<Tap, SessionError> {
    enter(&end.netns)?;
    let mut tap = Tap::open_on(end.tap_iface.as_deref()).map_err(fail("AF_PACKET tap"))?;
    let local = *end.addr.ip();
    while !stop.load(Ordering::Relaxed) {
        tap.poll(local, port, Duration::from_millis(20))
            .map_err(fail("tap"))?;
    }
    tap.poll(local, port, Duration::ZERO).map_err(fail("tap"))?;
    Ok(tap)
}

fn endpoint(
    end: &EndPoint,
    peer: SocketAddrV4,
    spec: &AppSpec,
    setup: Option<SocketSetup>,
    start_ns: u64,
    stop: &AtomicBool,
) -> Result<Side, SessionError> {
    enter(&end.netns)?;
    let socket = UdpSocket::bind(end.addr).map_err(fail("bind"))?;
    if let Some(setup) = setup {
        setup(&socket).map_err(fail("socket set-up"))?;
    }
    let mut driver = UdpDriver::new(
        socket,
        SocketAddr::V4(peer),
        spec.config(),
        spec.window_ns(),
    )
    .map_err(|e| SessionError(e.to_string()))?;
    driver.enable_vantage().map_err(fail("SO_TIMESTAMPING"))?;
    let end_ns = start_ns + spec.duration_ns();
    let drain_ns = spec.config().target_delay_ns + DRAIN_NS;
    let payload = vec![0xa5u8; spec.payload_bytes];
    let (mut received, mut sent_m1) = (Vec::new(), Vec::new());
    let mut next = start_ns;
    let io = fail("the transport's socket");
    // A vanishing end stops at that instant, sending, receiving and draining alike.
    let vanish_ns = end
        .vanish_after_ns
        .map(|v| start_ns.saturating_add(v))
        .filter(|&v| v < end_ns + drain_ns);
    if let Some(v) = vanish_ns {
        driver.vanish_at(v);
    }
    let send_end = vanish_ns.map_or(end_ns, |v| v.min(end_ns));
    while next < send_end && !stop.load(Ordering::Relaxed) {
        driver.run_until(next, &mut received).map_err(&io)?;
        let m1 = now_ns();
        if driver.vanished(m1) {
            break;
        }
        if driver.endpoint.sender.state() == SenderState::Running {
            // A full queue is counted by the sender; a lost peer ends sending.
            let _ = driver.endpoint.sender.send(&payload, m1);
            sent_m1.push(m1);
        }
        next += spec.gap_ns();
    }
    if !stop.load(Ordering::Relaxed) {
        driver
            .run_until(vanish_ns.unwrap_or(end_ns + drain_ns), &mut received)
            .map_err(&io)?;
    }
    let v = driver
        .vantage()
        .ok_or_else(|| SessionError("vantage points off".into()))?;
    Ok(Side {
        state: driver.endpoint.sender.state(),
        vanished_ns: vanish_ns.filter(|_| !stop.load(Ordering::Relaxed)),
        sender: driver.endpoint.sender.stats().clone(),
        receiver: driver.endpoint.receiver.stats().clone(),
        sent_m1,
        received,
        m3: v.m3.clone(),
        m4: v.m4.clone(),
    })
}

/// Run both ends until the run is over (or `stop` is set), then derive `prrt.json`'s
/// figures and the per-message rows.
pub fn run(
    spec: &AppSpec,
    plant: &EndPoint,
    controller: &EndPoint,
    setup: Option<SocketSetup>,
    stop: &AtomicBool,
) -> Result<SessionOutcome, SessionError> {
    let start_ns = now_ns() + START_DELAY_NS;
    let taps_stop = AtomicBool::new(false);
    let port = plant.addr.port();
    let (p, c, p_tap, c_tap) = std::thread::scope(|s| {
        let p_tap = s.spawn(|| tap(plant, port, &taps_stop));
        let c_tap = s.spawn(|| tap(controller, controller.addr.port(), &taps_stop));
        let p = s.spawn(|| endpoint(plant, controller.addr, spec, setup, start_ns, stop));
        let c = s.spawn(|| endpoint(controller, plant.addr, spec, setup, start_ns, stop));
        let (p, c) = (p.join(), c.join());
        taps_stop.store(true, Ordering::Relaxed);
        (p, c, p_tap.join(), c_tap.join())
    });
    let panicked = |what: &str| SessionError(format!("the {what} thread panicked"));
    let p = p.map_err(|_| panicked("plant endpoint"))??;
    let c = c.map_err(|_| panicked("controller endpoint"))??;
    let p_tap = p_tap.map_err(|_| panicked("plant tap"))??;
    let c_tap = c_tap.map_err(|_| panicked("controller tap"))??;
    let end_ns = start_ns + spec.duration_ns();
    let threshold_ns = (spec.outage_threshold_ms * 1e6) as u64;
    let on_time = |to: &Side| -> Vec<u64> {
        to.received
            .iter()
            .map(|r| r.delivery.app_send_ns.saturating_sub(start_ns))
            .collect()
    };
    let mut pc_out = detect_outages(&on_time(&c), 0, end_ns - start_ns, threshold_ns);
    let mut cp_out = detect_outages(&on_time(&p), 0, end_ns - start_ns, threshold_ns);
    mark_overlaps(&mut pc_out, &mut cp_out);
    let peer_lost = |side: &Side| match side.state {
        SenderState::PeerLost { detected_ns, .. } => Some(detected_ns.saturating_sub(start_ns)),
        SenderState::Running => None,
    };
    let vanished = |side: &Side| side.vanished_ns.map(|t| t.saturating_sub(start_ns));
    let run = PrrtRun {
        pc: DirectionSummary {
            peer_lost_ns: peer_lost(&p),
            sender_vanished_ns: vanished(&p),
            ..DirectionSummary::new(&p.sender, &c.receiver, pc_out)
        },
        cp: DirectionSummary {
            peer_lost_ns: peer_lost(&c),
            sender_vanished_ns: vanished(&c),
            ..DirectionSummary::new(&c.sender, &p.receiver, cp_out)
        },
    };
    let mut packets = rows(TrafficDirection::Pc, start_ns, &p, &c, &p_tap, &c_tap);
    packets.extend(rows(TrafficDirection::Cp, start_ns, &c, &p, &c_tap, &p_tap));
    let stats = serde_json::json!({
        "pc": {"sender": p.sender, "receiver": c.receiver},
        "cp": {"sender": c.sender, "receiver": p.receiver},
    });
    Ok(SessionOutcome {
        run,
        packets,
        stats,
        start_ns,
        interrupted: stop.load(Ordering::Relaxed),
    })
}

fn rows(
    dir: TrafficDirection,
    start_ns: u64,
    from: &Side,
    to: &Side,
    from_tap: &Tap,
    to_tap: &Tap,
) -> Vec<PacketRow> {
    // (m6, restored from redundancy) per message.
    let mut m6 = vec![(None, false); from.sent_m1.len()];
    for r in &to.received {
        if let Some(slot) = m6.get_mut(r.delivery.seq as usize) {
            *slot = (Some(r.app_recv_ns), r.delivery.recovered);
        }
    }
    from.sent_m1
        .iter()
        .zip(m6)
        .enumerate()
        .map(|(seq, (&m1, (m6, recovered)))| {
            let seq = seq as u32;
            // A restored message did not arrive in its own datagram: that one was lost, or
            // came after the restore (its m4/m5 would then follow m6). No receive points.
            let arrived = |t: Option<u64>| t.filter(|_| !recovered);
            let m = [
                Some(m1),
                from_tap.sent.get(seq),
                from.m3.get(seq),
                arrived(to.m4.get(seq)),
                arrived(to_tap.received.get(seq)),
                m6,
            ];
            PacketRow {
                dir,
                seq,
                m: m.map(|t| t.map(|t| t as i64 - start_ns as i64)),
                layers: layer_delays(m),
            }
        })
        .collect()
}

/// `packets.csv`: `dir,seq,m1_ns..m6_ns,l7_l2_ns,l2_l1_ns,l1_l1_ns,l1_l2_ns,l2_l7_ns,one_way_ns`,
/// an empty cell where a value is missing.
pub fn packets_csv(rows: &[PacketRow]) -> String {
    use std::fmt::Write as _;
    let mut text = String::from(
        "dir,seq,m1_ns,m2_ns,m3_ns,m4_ns,m5_ns,m6_ns,l7_l2_ns,l2_l1_ns,l1_l1_ns,l1_l2_ns,l2_l7_ns,one_way_ns\n",
    );
    let cell = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
    for r in rows {
        let l = &r.layers;
        let _ = write!(text, "{},{}", r.dir.as_str(), r.seq);
        for v in r.m.iter().copied().chain([
            l.l7_l2_ns,
            l.l2_l1_ns,
            l.l1_l1_ns,
            l.l1_l2_ns,
            l.l2_l7_ns,
            l.one_way_ns,
        ]) {
            let _ = write!(text, ",{}", cell(v));
        }
        text.push('\n');
    }
    text
}
