//! Kernel TX timestamps against real kernel objects: veth pairs in throwaway network
//! namespaces, AF_PACKET's TX ring (with `PACKET_QDISC_BYPASS`) and UDP sockets.
//!
//! Each test checks that every sent frame gets exactly one stamp, that the id of a stamp is
//! the frame's position in the send order (against the frame copy the kernel returns when
//! `OPT_TSONLY` is off), and that each stamp lies between the frame's application stamp
//! (taken while writing it) and its kernel RX stamp at the peer. All three are
//! `CLOCK_REALTIME`; no absolute duration is asserted.
//!
//! Needs root; as another user each test prints why it skipped and passes. Every namespace
//! is removed by a guard's Drop, also when a test panics.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use nflab_io::clock::realtime_ns;
use nflab_io::timestamping::{self, TxStampOptions};
use nflab_io::{iface, AfPacket, AfPacketConfig, PacketIo, TsSource, UdpIo};

mod common;
use common::*;

/// The tests share two cores with builds: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// A stamp as read back: id, ns, source, and the sequence number found in the frame copy.
#[derive(Debug, Clone, Copy)]
struct Got {
    id: u64,
    ns: u64,
    source: TsSource,
    copy_seq: Option<u64>,
}

/// Drain `io` until `n` stamps arrived or 5 s passed.
fn drain_all(
    io: &mut dyn PacketIo,
    n: usize,
    got: &mut Vec<Got>,
    copy: &dyn Fn(&[u8]) -> Option<u64>,
) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < n && Instant::now() < deadline {
        io.wait_tx_stamps(Duration::from_millis(20)).expect("poll");
        drain_some(io, 1024, got, copy);
    }
}

/// Take up to `max` stamps that are ready from `io`, without waiting.
fn drain_some(
    io: &mut dyn PacketIo,
    max: usize,
    got: &mut Vec<Got>,
    copy: &dyn Fn(&[u8]) -> Option<u64>,
) {
    io.drain_tx_stamps(max, &mut |s, f| {
        got.push(Got {
            id: s.id,
            ns: s.ns,
            source: s.source,
            copy_seq: copy(f),
        })
    })
    .expect("drain");
}

/// Check: one stamp per id 0..n, software, app[id] <= stamp <= rx[id], and (when the
/// kernel returned frame copies) the copy of id is the frame sent as the id-th.
fn check_stamps(got: &[Got], app: &[u64], rx: &[Option<u64>], copies: bool) {
    let n = app.len();
    assert_eq!(got.len(), n, "one stamp per frame");
    let mut seen = vec![false; n];
    for g in got {
        let i = g.id as usize;
        assert!(i < n, "id {} beyond the {n} frames sent", g.id);
        assert!(!seen[i], "two stamps for id {i}");
        seen[i] = true;
        assert_eq!(g.source, TsSource::KernelSoftware);
        if copies {
            assert_eq!(g.copy_seq, Some(g.id), "the frame copy of id {i}");
        } else {
            assert_eq!(g.copy_seq, None, "OPT_TSONLY returns no frame");
        }
        assert!(
            app[i] <= g.ns,
            "id {i}: kernel TX stamp {} before the application stamp {}",
            g.ns,
            app[i]
        );
        let r = rx[i].unwrap_or_else(|| panic!("frame {i} was not received"));
        assert!(
            g.ns <= r,
            "id {i}: kernel TX stamp {} after the RX stamp {r}",
            g.ns
        );
    }
}

#[test]
fn veth_has_software_timestamping_only_as_ethtool_says_and_hardware_falls_back() {
    if !root_or_skip("veth_has_software_timestamping_only_as_ethtool_says_and_hardware_falls_back")
    {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let ns = Netns::with_veth("caps");
    // ethtool -T is the independent reading of the same driver callback.
    let ethtool = ns.exec(&["ethtool", "-T", "va"]);
    ns.enter(|| {
        let info = timestamping::ts_info("va").expect("ETHTOOL_GET_TS_INFO on veth");
        assert_eq!(
            info.software_tx(),
            ethtool.contains("software-transmit"),
            "{info:?} vs\n{ethtool}"
        );
        assert!(info.software_tx(), "veth stamps in software: {ethtool}");
        assert_eq!(info.phc_index, -1);
        assert!(ethtool.contains("PTP Hardware Clock: none"), "{ethtool}");
        assert!(!info.hardware_tx() && !info.hardware_rx(), "{info:?}");
        assert!(!ethtool.contains("hardware-transmit"), "{ethtool}");

        // The hardware request falls back with one line naming the interface.
        let st = timestamping::enable_hardware("va", true, true);
        assert!(!st.tx && !st.rx);
        let notice = st.notice.expect("a notice");
        assert!(
            notice.contains("va has no hardware tx/rx timestamping")
                && notice.contains("software tx+rx, no hardware")
                && !notice.contains('\n'),
            "{notice}"
        );

        // The same through the backend: TX stamps still switch on, in software.
        let mut tx = AfPacket::open(
            "va",
            &AfPacketConfig {
                rx: false,
                hardware_timestamps: true,
                ..AfPacketConfig::default()
            },
        )
        .expect("open va");
        assert!(tx.hardware().is_some_and(|h| !h.tx && h.notice.is_some()));
        assert_eq!(tx.tx_stamp_next_id(), None);
        let st = tx
            .enable_tx_timestamps(&TxStampOptions::default())
            .expect("software TX stamps on veth");
        assert_eq!(st.source, TsSource::KernelSoftware);
        assert!(
            st.notice.as_deref().is_some_and(|n| n.starts_with("va ")),
            "{st:?}"
        );
        assert_eq!(tx.tx_stamp_next_id(), Some(0));
        // Enabling twice changes nothing.
        assert_eq!(
            tx.enable_tx_timestamps(&TxStampOptions::default()).ok(),
            Some(st)
        );
    });
}

/// Send `n` frames va -> vb through the TX ring in batches of 64 (draining the error
/// queue between batches) and receive them on vb with kernel RX stamps.
fn af_packet_round(n: usize, tsonly: bool) {
    let ns = Netns::with_veth(if tsonly { "afp-tsonly" } else { "afp-copy" });
    ns.enter(|| {
        let mut tx = AfPacket::open(
            "va",
            &AfPacketConfig {
                rx: false,
                ..AfPacketConfig::default()
            },
        )
        .expect("open TX on va");
        let mut rx = AfPacket::open(
            "vb",
            &AfPacketConfig {
                tx: false,
                ..AfPacketConfig::default()
            },
        )
        .expect("open RX on vb");
        let (src, dst) = (iface::mac("va").unwrap(), iface::mac("vb").unwrap());
        let opts = TxStampOptions {
            hardware: false,
            tsonly,
        };
        let st = tx.enable_tx_timestamps(&opts).expect("enable");
        assert_eq!(st.notice, None, "no hardware asked for, no notice");
        let mut app = vec![0u64; n];
        let mut rxs: Vec<Option<u64>> = vec![None; n];
        let mut got = Vec::new();
        let copy = |f: &[u8]| parse_frame(f);
        let mut sent = 0;
        let deadline = Instant::now() + Duration::from_secs(20);
        while sent < n {
            assert!(Instant::now() < deadline, "TX stalled at {sent}");
            let want = (n - sent).min(64);
            let q = tx
                .tx_batch(want, &mut |i, buf| {
                    let seq = sent + i;
                    app[seq] = realtime_ns();
                    build_frame(buf, dst, src, seq as u64)
                })
                .expect("tx_batch");
            tx.flush_tx().expect("flush");
            sent += q;
            drain_some(&mut tx, 256, &mut got, &copy);
            rx.rx_batch(1024, Duration::ZERO, &mut |f, m| {
                if let Some(seq) = parse_frame(f) {
                    rxs[seq as usize] = m.ts_ns;
                }
            })
            .expect("rx");
        }
        assert_eq!(tx.tx_stamp_next_id(), Some(n as u64));
        drain_all(&mut tx, n, &mut got, &copy);
        let deadline = Instant::now() + Duration::from_secs(5);
        while rxs.iter().any(|r| r.is_none()) && Instant::now() < deadline {
            rx.rx_batch(1024, Duration::from_millis(20), &mut |f, m| {
                if let Some(seq) = parse_frame(f) {
                    rxs[seq as usize] = m.ts_ns;
                }
            })
            .expect("rx");
        }
        check_stamps(&got, &app, &rxs, !tsonly);
    });
}

#[test]
fn af_packet_tx_ring_with_qdisc_bypass_stamps_every_frame_by_id() {
    if !root_or_skip("af_packet_tx_ring_with_qdisc_bypass_stamps_every_frame_by_id") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // Frame copies first: they prove id n is the n-th frame; then the production mode.
    af_packet_round(3000, false);
    af_packet_round(3000, true);
}

/// Two namespaces joined by a veth pair: a (va, 198.18.0.1/24) and b (vb, 198.18.0.2/24),
/// with static neighbours so no frame waits for ARP.
fn veth_between_two() -> (Netns, Netns) {
    let a = Netns::new("udp-a");
    let b = Netns::new("udp-b");
    a.ip(&format!(
        "link add va type veth peer name vb netns {}",
        b.name
    ));
    a.ip("addr add 198.18.0.1/24 dev va");
    b.ip("addr add 198.18.0.2/24 dev vb");
    a.ip("link set va up");
    b.ip("link set vb up");
    let mac = |ns: &Netns, dev: &str| -> String {
        let out = run("ip", &["-n", &ns.name, "-o", "link", "show", dev]);
        out.split("link/ether ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .expect("mac")
            .to_string()
    };
    let (ma, mb) = (mac(&a, "va"), mac(&b, "vb"));
    a.ip(&format!(
        "neigh replace 198.18.0.2 lladdr {mb} dev va nud permanent"
    ));
    b.ip(&format!(
        "neigh replace 198.18.0.1 lladdr {ma} dev vb nud permanent"
    ));
    (a, b)
}

/// The UDP payload: magic and sequence number, 32 bytes.
fn udp_payload(buf: &mut [u8], seq: u64) -> usize {
    buf[..32].fill(0);
    buf[0..4].copy_from_slice(MAGIC);
    buf[4..12].copy_from_slice(&seq.to_be_bytes());
    32
}

fn parse_udp_payload(p: &[u8]) -> Option<u64> {
    (p.len() >= 12 && &p[0..4] == MAGIC).then(|| u64::from_be_bytes(p[4..12].try_into().unwrap()))
}

#[test]
fn udp_socket_stamps_every_datagram_by_id() {
    if !root_or_skip("udp_socket_stamps_every_datagram_by_id") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    const N: usize = 2000;
    let (a, b) = veth_between_two();
    for tsonly in [false, true] {
        let mut rx =
            b.enter(|| UdpIo::open("198.18.0.2:9".parse().unwrap(), None).expect("bind b"));
        let mut tx = a.enter(|| {
            UdpIo::open(
                "198.18.0.1:0".parse().unwrap(),
                Some("198.18.0.2:9".parse().unwrap()),
            )
            .expect("bind a")
        });
        let st = tx
            .enable_tx_timestamps(&TxStampOptions {
                hardware: true,
                tsonly,
            })
            .expect("enable");
        assert_eq!(st.source, TsSource::KernelSoftware);
        assert!(
            st.notice.is_some(),
            "UDP says it asks for no hardware stamps"
        );
        let mut app = vec![0u64; N];
        let mut rxs: Vec<Option<u64>> = vec![None; N];
        let mut got = Vec::new();
        // Without OPT_TSONLY the copy is the whole packet as the driver saw it (Ethernet,
        // IP and UDP headers first): the payload is its last 32 bytes.
        let copy = |f: &[u8]| {
            (f.len() >= 32)
                .then(|| parse_udp_payload(&f[f.len() - 32..]))
                .flatten()
        };
        let mut sent = 0;
        let deadline = Instant::now() + Duration::from_secs(20);
        while sent < N {
            assert!(Instant::now() < deadline, "TX stalled at {sent}");
            let want = (N - sent).min(32);
            sent += tx
                .tx_batch(want, &mut |i, buf| {
                    app[sent + i] = realtime_ns();
                    udp_payload(buf, (sent + i) as u64)
                })
                .expect("sendmmsg");
            drain_some(&mut tx, 256, &mut got, &copy);
            rx.rx_batch(256, Duration::ZERO, &mut |p, m| {
                if let Some(seq) = parse_udp_payload(p) {
                    assert_eq!(m.ts_source, TsSource::KernelSoftware);
                    rxs[seq as usize] = m.ts_ns;
                }
            })
            .expect("recvmmsg");
        }
        drain_all(&mut tx, N, &mut got, &copy);
        let deadline = Instant::now() + Duration::from_secs(5);
        while rxs.iter().any(|r| r.is_none()) && Instant::now() < deadline {
            rx.rx_batch(256, Duration::from_millis(20), &mut |p, m| {
                if let Some(seq) = parse_udp_payload(p) {
                    rxs[seq as usize] = m.ts_ns;
                }
            })
            .expect("recvmmsg");
        }
        check_stamps(&got, &app, &rxs, !tsonly);
    }
}
