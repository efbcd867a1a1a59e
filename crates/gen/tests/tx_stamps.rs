//! Kernel TX timestamps through the generator, over a veth pair in a throwaway network
//! namespace: AF_PACKET TX ring (qdisc bypass) on one end, a TPACKET_V3 ring with kernel RX
//! stamps on the other.
//!
//! Every probe sent must come back from the generator's sink exactly once, matched to its
//! own (flow, seq), with application stamp ≤ kernel TX stamp ≤ kernel RX stamp (all
//! `CLOCK_REALTIME`); background frames in between must not shift the matching. No test
//! asserts a duration. Needs root; as another user each test prints why it skipped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nflab_gen::{
    run_threads_stamped, FlowVary, GenPlan, GenReport, Pattern, ProbeTxStamp, Rate, Role, Sizes,
    StreamPlan, StreamSpec, TxTimestamp,
};
use nflab_io::{PacketIo, TsSource};

mod common;
use common::{base, root_or_skip, Netns, SERIAL};

/// A received probe: the application stamp in its payload and the kernel RX stamp.
#[derive(Debug, Clone, Copy)]
struct Rx {
    app_tx_ns: u64,
    rx_ns: u64,
}

/// Send `plan` over a fresh veth pair with kernel TX stamps; return the generator report,
/// the stamps from the sink and the received probes by (flow, seq).
fn send(tag: &str, plan: &GenPlan) -> (GenReport, Vec<ProbeTxStamp>, HashMap<(u16, u64), Rx>) {
    let ns = Netns::new(tag);
    let (mut tx, mut rx) = ns.open();
    let stamps = Mutex::new(Vec::new());
    let sink = |b: &[ProbeTxStamp]| stamps.lock().unwrap().extend_from_slice(b);
    let stop_rx = Arc::new(AtomicBool::new(false));
    let (rep, got) = std::thread::scope(|s| {
        let stop = Arc::clone(&stop_rx);
        let r = s.spawn(move || {
            let mut got = HashMap::new();
            loop {
                let stopping = stop.load(Ordering::Acquire);
                let n = rx
                    .rx_batch(256, Duration::from_millis(10), &mut |f, m| {
                        if let Ok(p) = nflab_wire::parse_probe(f) {
                            got.insert(
                                (p.flow, p.seq),
                                Rx {
                                    app_tx_ns: p.tx_ns,
                                    rx_ns: m.ts_ns.expect("kernel RX timestamp"),
                                },
                            );
                        }
                    })
                    .expect("rx");
                if stopping && n == 0 {
                    break;
                }
            }
            got
        });
        let ios: Vec<&mut dyn PacketIo> = vec![&mut tx];
        let rep = run_threads_stamped(ios, plan, &AtomicBool::new(false), &|_| {}, Some(&sink))
            .expect("generator");
        std::thread::sleep(Duration::from_millis(100));
        stop_rx.store(true, Ordering::Release);
        (rep, r.join().expect("receiver"))
    });
    (rep, stamps.into_inner().unwrap(), got)
}

fn stream(rate: Rate, flows: u32) -> StreamSpec {
    StreamSpec {
        pattern: Pattern::Cbr,
        rate,
        sizes: Sizes::Fixed(64),
        flows,
        seed: 7,
    }
}

/// Each probe sent appears once in `stamps`, matched and well ordered against its
/// application and RX stamps; returns the number of probes.
fn check(rep: &GenReport, stamps: &[ProbeTxStamp], rx: &HashMap<(u16, u64), Rx>) -> u64 {
    let t = rep.tx_stamps.as_ref().expect("tx_stamps in the report");
    let probes: u64 = rep
        .flows
        .iter()
        .filter(|f| f.role == "probe")
        .map(|f| f.sent)
        .sum();
    assert_eq!(t.probes, probes, "{t:?}");
    assert_eq!(
        (
            t.matched,
            t.missing,
            t.unmatched,
            t.duplicates,
            t.kernel_before_app
        ),
        (probes, 0, 0, 0, 0),
        "{t:?}"
    );
    assert_eq!(t.source, "kernel-software");
    // Asked for hardware from a thread outside the namespace: the query goes through the
    // socket, and veth has none.
    assert!(
        t.notice
            .as_deref()
            .is_some_and(|n| n.starts_with("va has no hardware tx timestamping")),
        "{t:?}"
    );
    assert_eq!(rep.tx_timestamp, "kernel-software");
    assert_eq!(stamps.len() as u64, probes);
    let mut by_key: HashMap<(u16, u64), ProbeTxStamp> = HashMap::new();
    for s in stamps {
        assert!(by_key.insert((s.flow, s.seq), *s).is_none(), "twice: {s:?}");
    }
    let mut received = 0;
    for f in rep.flows.iter().filter(|f| f.role == "probe") {
        for seq in 0..f.sent {
            let s = by_key
                .get(&(f.flow, seq))
                .unwrap_or_else(|| panic!("no stamp for flow {} seq {seq}", f.flow));
            assert_eq!(s.source, TsSource::KernelSoftware);
            assert!(
                s.app_tx_ns <= s.kernel_tx_ns,
                "flow {} seq {seq}: kernel TX {} before application {}",
                f.flow,
                s.kernel_tx_ns,
                s.app_tx_ns
            );
            if let Some(r) = rx.get(&(f.flow, seq)) {
                received += 1;
                // The stamp belongs to this probe: same application stamp as its payload.
                assert_eq!(r.app_tx_ns, s.app_tx_ns, "flow {} seq {seq}", f.flow);
                assert!(
                    s.kernel_tx_ns <= r.rx_ns,
                    "flow {} seq {seq}: kernel TX {} after RX {}",
                    f.flow,
                    s.kernel_tx_ns,
                    r.rx_ns
                );
            }
        }
    }
    assert!(received > 0);
    received
}

#[test]
fn every_probe_gets_its_own_kernel_tx_stamp_with_background_in_between() {
    if !root_or_skip("every_probe_gets_its_own_kernel_tx_stamp") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let probe = StreamPlan::new(
        stream(Rate::Pps(20_000.0), 2),
        Role::Probe,
        0,
        &base(),
        FlowVary::src_port(),
    )
    .expect("probe stream");
    let background = StreamPlan::new(
        StreamSpec {
            pattern: Pattern::Poisson,
            ..stream(Rate::Pps(7_000.0), 3)
        },
        Role::Background,
        0x8000,
        &base(),
        FlowVary::src_port(),
    )
    .expect("background stream");
    let plan = GenPlan {
        streams: vec![probe, background],
        warmup_ns: 0,
        duration_ns: Some(300_000_000),
        count: None,
        batch: 32,
        tx_timestamp: TxTimestamp::Kernel,
    };
    let (rep, stamps, rx) = send("bg", &plan);
    let received = check(&rep, &stamps, &rx);
    // veth loses nothing at these rates: every probe was checked against its RX stamp.
    assert_eq!(received, 6000, "{rep:?}");
    assert!(rep.sent > 6000, "background frames were sent too");
}

#[test]
fn at_max_rate_every_probe_is_still_matched() {
    if !root_or_skip("at_max_rate_every_probe_is_still_matched") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let probe = StreamPlan::new(
        stream(Rate::Max, 1),
        Role::Probe,
        0,
        &base(),
        FlowVary::src_port(),
    )
    .expect("probe stream");
    let plan = GenPlan {
        streams: vec![probe],
        warmup_ns: 0,
        duration_ns: Some(300_000_000),
        count: Some(50_000),
        batch: 64,
        tx_timestamp: TxTimestamp::Kernel,
    };
    let (rep, stamps, rx) = send("max", &plan);
    assert!(rep.sent > 10_000 && rep.sent <= 50_000, "{rep:?}");
    // The receiver may drop at max rate; the stamps may not.
    check(&rep, &stamps, &rx);
    let t = rep.tx_stamps.as_ref().unwrap();
    assert!(
        t.drain_calls * 16 <= t.probes,
        "drained in batches, not per packet: {t:?}"
    );
}
