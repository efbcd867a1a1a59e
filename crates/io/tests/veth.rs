//! Backends against real kernel objects: a network namespace with a veth pair per test.
//!
//! Needs root (namespaces, raw sockets, bpf); as another user each test prints why it
//! skipped and passes. Every namespace is removed by a guard's Drop, also when a test panics.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nflab_io::clock::realtime_ns;
use nflab_io::probe_caps::{self, XdpAttach};
use nflab_io::{iface, AfPacket, AfPacketConfig, IoError, PacketIo, RxRingKind, TsSource, UdpIo};

mod common;
use common::*;

fn tx_only() -> AfPacketConfig {
    AfPacketConfig {
        rx: false,
        ..AfPacketConfig::default()
    }
}

fn rx_only() -> AfPacketConfig {
    AfPacketConfig {
        tx: false,
        ..AfPacketConfig::default()
    }
}

fn rx_only_ring(kind: RxRingKind) -> AfPacketConfig {
    AfPacketConfig {
        rx_ring: kind,
        ..rx_only()
    }
}

#[test]
fn af_packet_moves_10k_frames_in_order_with_kernel_timestamps() {
    if !root_or_skip("af_packet_moves_10k_frames_in_order_with_kernel_timestamps") {
        return;
    }
    moves_10k_frames(RxRingKind::Blocks);
}

#[test]
fn af_packet_frame_ring_moves_10k_frames_in_order_with_kernel_timestamps() {
    if !root_or_skip("af_packet_frame_ring_moves_10k_frames_in_order_with_kernel_timestamps") {
        return;
    }
    moves_10k_frames(RxRingKind::Frames);
}

#[test]
fn af_packet_puts_the_vlan_tag_back_with_either_ring() {
    if !root_or_skip("af_packet_puts_the_vlan_tag_back_with_either_ring") {
        return;
    }
    for kind in [RxRingKind::Blocks, RxRingKind::Frames] {
        let ns = Netns::with_veth("afpvlan");
        ns.enter(|| {
            let mut tx = AfPacket::open("va", &tx_only()).unwrap();
            let mut rx = AfPacket::open("vb", &rx_only_ring(kind)).unwrap();
            let (src, dst) = (iface::mac("va").unwrap(), iface::mac("vb").unwrap());
            // An untagged test frame with an 802.1Q tag (VID 100, PCP 5) inserted.
            let mut plain = [0u8; FRAME_BYTES];
            build_frame(&mut plain, dst, src, 7);
            let mut tagged = plain[..12].to_vec();
            tagged.extend_from_slice(&[0x81, 0x00, 0xa0, 100]);
            tagged.extend_from_slice(&plain[12..]);
            let sent = tx
                .tx_batch(1, &mut |_, buf| {
                    buf[..tagged.len()].copy_from_slice(&tagged);
                    tagged.len()
                })
                .unwrap();
            assert_eq!(sent, 1);
            tx.flush_tx().unwrap();
            let mut got = None;
            let deadline = Instant::now() + Duration::from_secs(5);
            while got.is_none() && Instant::now() < deadline {
                rx.rx_batch(16, Duration::from_millis(50), &mut |f, m| {
                    if f.len() >= 16 && f[..12] == tagged[..12] && f[12..14] == [0x81, 0x00] {
                        got = Some((f.to_vec(), m.wire_len));
                    }
                })
                .unwrap();
            }
            let (frame, wire_len) = got.unwrap_or_else(|| panic!("{kind:?}: tagged frame lost"));
            assert_eq!(frame, tagged, "{kind:?}");
            assert_eq!(wire_len, tagged.len(), "{kind:?}");
        });
    }
}

fn moves_10k_frames(kind: RxRingKind) {
    const N: u64 = 10_000;
    // Tests run in parallel: each needs a namespace of its own name.
    let ns = Netns::with_veth(match kind {
        RxRingKind::Blocks => "afp",
        RxRingKind::Frames => "afpv2",
    });
    ns.enter(|| {
        probe_caps::af_packet().expect("AF_PACKET as root");
        let mut tx = AfPacket::open("va", &tx_only()).expect("open TX on va");
        let mut rx = AfPacket::open("vb", &rx_only_ring(kind)).expect("open RX on vb");
        let (src, dst) = (iface::mac("va").unwrap(), iface::mac("vb").unwrap());
        assert_ne!(src, [0; 6]);
        assert_eq!(tx.max_frame_len(), 1500 + 14 + 4);
        let done_sending = AtomicBool::new(false);

        let t_start = realtime_ns();
        let t0 = Instant::now();
        let (seqs, ts, others, rx_stats) = std::thread::scope(|s| {
            let receiver = s.spawn(|| {
                let (mut seqs, mut ts, mut others) = (Vec::new(), Vec::new(), 0u64);
                let deadline = Instant::now() + Duration::from_secs(20);
                while (seqs.len() as u64) < N && Instant::now() < deadline {
                    rx.rx_batch(256, Duration::from_millis(50), &mut |f, m| {
                        let now = realtime_ns();
                        match parse_frame(f) {
                            Some(seq) => {
                                assert_eq!(m.wire_len, FRAME_BYTES);
                                assert_eq!(m.ts_source, TsSource::KernelSoftware);
                                let t = m.ts_ns.expect("kernel timestamp");
                                assert!(t <= now, "stamp {t} after delivery {now}");
                                seqs.push(seq);
                                ts.push(t);
                            }
                            None => others += 1,
                        }
                    })
                    .expect("rx_batch");
                }
                (seqs, ts, others, rx.stats())
            });
            let mut sent = 0u64;
            let deadline = Instant::now() + Duration::from_secs(20);
            while sent < N {
                assert!(Instant::now() < deadline, "TX stalled at {sent}");
                let want = (N - sent).min(64) as usize;
                let q = tx
                    .tx_batch(want, &mut |i, buf| build_frame(buf, dst, src, sent + i as u64))
                    .expect("tx_batch");
                sent += q as u64;
                tx.flush_tx().expect("flush_tx");
                if q < want {
                    std::thread::yield_now();
                }
            }
            while tx.tx_outstanding() > 0 {
                assert!(Instant::now() < deadline, "TX ring never drained");
                tx.flush_tx().expect("flush_tx");
                std::thread::yield_now();
            }
            done_sending.store(true, Ordering::Relaxed);
            receiver.join().unwrap()
        });
        let elapsed = t0.elapsed();
        let t_end = realtime_ns();

        assert_eq!(seqs.len() as u64, N, "received {} of {N}", seqs.len());
        assert!(seqs.iter().copied().eq(0..N), "frames out of order");
        assert!(ts.windows(2).all(|w| w[0] <= w[1]), "timestamps decrease");
        assert!(ts[0] >= t_start && ts[ts.len() - 1] <= t_end);
        let tx_stats = tx.stats();
        assert_eq!(tx_stats.tx_packets, N);
        assert_eq!(rx_stats.rx_packets, N + others);
        assert_eq!(rx_stats.rx_kernel_drops, 0);
        println!(
            "af_packet veth: {N} frames of {FRAME_BYTES} B in {:.1} ms = {:.0} frames/s (debug build), \
             stamps span {:.1} ms, TX ring full {} times, {others} other frames",
            elapsed.as_secs_f64() * 1e3,
            N as f64 / elapsed.as_secs_f64(),
            (ts[ts.len() - 1] - ts[0]) as f64 / 1e6,
            tx_stats.tx_ring_full
        );
    });
}

#[test]
fn af_packet_stamps_at_receive_not_at_read() {
    if !root_or_skip("af_packet_stamps_at_receive_not_at_read") {
        return;
    }
    let ns = Netns::with_veth("stamp");
    ns.enter(|| {
        let mut tx = AfPacket::open("va", &tx_only()).unwrap();
        let mut rx = AfPacket::open("vb", &rx_only()).unwrap();
        let (src, dst) = (iface::mac("va").unwrap(), iface::mac("vb").unwrap());
        let t_send = realtime_ns();
        assert_eq!(
            tx.tx_batch(1, &mut |_, b| build_frame(b, dst, src, 7))
                .unwrap(),
            1
        );
        tx.flush_tx().unwrap();
        let t_sent = realtime_ns();
        // Read 100 ms later: an application stamp would be >= 100 ms after the send.
        std::thread::sleep(Duration::from_millis(100));
        let mut stamp = None;
        rx.rx_batch(8, Duration::from_secs(2), &mut |f, m| {
            if parse_frame(f) == Some(7) {
                stamp = m.ts_ns;
            }
        })
        .unwrap();
        let t = stamp.expect("frame 7 received");
        assert!(
            t >= t_send && t <= t_sent,
            "stamp {t} not within send [{t_send}, {t_sent}]"
        );
    });
}

#[test]
fn af_packet_rejects_frames_the_kernel_would_drop_and_unused_directions() {
    if !root_or_skip("af_packet_rejects_frames_the_kernel_would_drop_and_unused_directions") {
        return;
    }
    let ns = Netns::with_veth("len");
    ns.enter(|| {
        let mut tx = AfPacket::open("va", &tx_only()).unwrap();
        let mut rx = AfPacket::open("vb", &rx_only()).unwrap();
        // Untagged: at most MTU + 14.
        let e = tx.tx_batch(1, &mut |_, b| {
            b[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            1515
        });
        match e {
            Err(IoError::FrameTooLong {
                len: 1515,
                max: 1514,
                ..
            }) => {}
            other => panic!("expected FrameTooLong, got {other:?}"),
        }
        assert!(matches!(
            tx.tx_batch(1, &mut |_, _| 13),
            Err(IoError::FrameTooShort { .. })
        ));
        // 802.1Q tagged: MTU + 18 is allowed and arrives whole.
        let tagged = tx.tx_batch(1, &mut |_, b| {
            b[..1518].fill(0xab);
            b[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
            1518
        });
        assert_eq!(tagged.unwrap(), 1);
        tx.flush_tx().unwrap();
        // The receiving stack moves the tag into metadata; the backend puts it back, so
        // the frame reads exactly as sent.
        let mut expect = vec![0xabu8; 1518];
        expect[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        let mut got = Vec::new();
        rx.rx_batch(4, Duration::from_secs(2), &mut |f, m| {
            got.push((f.to_vec(), m.wire_len))
        })
        .unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1, 1518);
        assert!(got[0].0 == expect, "tagged frame changed on the way");
        // Directions that were not opened say so.
        let e = rx.tx_batch(1, &mut |_, _| 60).unwrap_err();
        assert!(e.to_string().contains("opened without tx"), "{e}");
        assert!(tx.rx_batch(1, Duration::ZERO, &mut |_, _| {}).is_err());
        // Nothing was queued by the rejected calls: only the tagged frame went out.
        assert_eq!(tx.stats().tx_packets, 1);
    });
}

#[test]
fn af_packet_small_rx_batches_keep_position_inside_a_block() {
    if !root_or_skip("af_packet_small_rx_batches_keep_position_inside_a_block") {
        return;
    }
    let ns = Netns::with_veth("small");
    ns.enter(|| {
        let mut tx = AfPacket::open("va", &tx_only()).unwrap();
        let cfg = AfPacketConfig {
            rx_block_bytes: 1 << 16,
            rx_blocks: 4,
            ..rx_only()
        };
        let mut rx = AfPacket::open("vb", &cfg).unwrap();
        let (src, dst) = (iface::mac("va").unwrap(), iface::mac("vb").unwrap());
        // 1000 frames over 64 KiB blocks: several blocks, each read 3 frames at a time.
        const N: u64 = 1000;
        let mut sent = 0;
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while (got.len() as u64) < N {
            assert!(Instant::now() < deadline, "stalled at {}", got.len());
            if got.len() as u64 == sent {
                let q = tx
                    .tx_batch(((N - sent) as usize).min(100), &mut |i, b| {
                        build_frame(b, dst, src, sent + i as u64)
                    })
                    .unwrap();
                sent += q as u64;
                tx.flush_tx().unwrap();
            }
            let n = rx
                .rx_batch(3, Duration::from_millis(10), &mut |f, _| {
                    if let Some(s) = parse_frame(f) {
                        got.push(s)
                    }
                })
                .unwrap();
            assert!(n <= 3);
        }
        assert!(got.iter().copied().eq(0..N));
        assert_eq!(rx.stats().rx_kernel_drops, 0);
    });
}

#[test]
fn udp_over_loopback_with_kernel_timestamps() {
    if !root_or_skip("udp_over_loopback_with_kernel_timestamps") {
        return;
    }
    const N: u32 = 2_000;
    let ns = Netns::new("udp");
    ns.ip("link set lo up");
    ns.enter(|| {
        let lo = "127.0.0.1:0".parse().unwrap();
        let mut b = UdpIo::open(lo, None).expect("bind receiver");
        let mut a = UdpIo::open(lo, Some(b.local_addr())).expect("bind sender");
        assert_ne!(b.local_addr().port(), 0);
        assert_eq!((a.name(), a.layer()), ("udp", nflab_io::Layer::UdpPayload));
        let t_start = realtime_ns();
        let mut got: Vec<(u32, u64, usize)> = Vec::new();
        let mut sent = 0u32;
        let deadline = Instant::now() + Duration::from_secs(20);
        while (got.len() as u32) < N {
            assert!(Instant::now() < deadline, "stalled at {}", got.len());
            if sent < N {
                let want = (N - sent).min(100) as usize;
                let q = a
                    .tx_batch(want, &mut |i, buf| {
                        buf[..4].copy_from_slice(&(sent + i as u32).to_be_bytes());
                        buf[4..100].fill(0x5a);
                        100
                    })
                    .unwrap();
                a.flush_tx().unwrap();
                sent += q as u32;
            }
            b.rx_batch(64, Duration::from_millis(10), &mut |f, m| {
                assert_eq!(m.ts_source, TsSource::KernelSoftware);
                assert_eq!((f.len(), m.wire_len), (100, 100));
                got.push((
                    u32::from_be_bytes(f[..4].try_into().unwrap()),
                    m.ts_ns.unwrap(),
                    f.len(),
                ));
            })
            .unwrap();
        }
        let t_end = realtime_ns();
        // Loopback may reorder when the sender migrates between CPUs mid-batch
        // (each CPU has its own backlog), so check the set, not the order.
        let mut ids: Vec<u32> = got.iter().map(|g| g.0).collect();
        ids.sort_unstable();
        assert!(ids.iter().copied().eq(0..N), "datagrams lost or duplicated");
        assert!(
            got.iter().all(|g| g.1 >= t_start && g.1 <= t_end),
            "stamp outside the send window"
        );
        let (sa, sb) = (a.stats(), b.stats());
        assert_eq!(
            (sa.tx_packets, sb.rx_packets, sb.rx_kernel_drops),
            (N as u64, N as u64, 0)
        );
        // A receive with nothing pending times out with 0.
        assert_eq!(
            b.rx_batch(1, Duration::from_millis(5), &mut |_, _| {})
                .unwrap(),
            0
        );
        // The receiver has no peer.
        assert!(matches!(
            b.tx_batch(1, &mut |_, _| 1),
            Err(IoError::NoPeer { .. })
        ));
    });
}

fn assert_no_xdp(ns: &Netns, dev: &str) {
    // Closing the last BPF link detaches in deferred kernel work: allow it a
    // moment on a loaded host before calling the program left behind.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let out = ns.ip_output(&format!("-d link show dev {dev}"));
        assert!(out.contains(dev), "ip link show gave: {out}");
        if !out.contains("xdp") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "an XDP program stayed attached: {out}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn xdp_probe_attaches_and_leaves_nothing_behind() {
    if !root_or_skip("xdp_probe_attaches_and_leaves_nothing_behind") {
        return;
    }
    let ns = Netns::with_veth("xdp");
    ns.enter(|| {
        probe_caps::af_xdp().expect("AF_XDP socket as root");
        probe_caps::xdp_on("va").expect("XDP on veth");
        assert_no_xdp(&ns, "va");
        probe_caps::xdp_on_with("va", XdpAttach::Link).expect("XDP via BPF link");
        assert_no_xdp(&ns, "va");
        probe_caps::xdp_on_with("va", XdpAttach::Netlink).expect("XDP via netlink");
        assert_no_xdp(&ns, "va");
        assert!(matches!(
            probe_caps::xdp_on("nope0"),
            Err(IoError::NoSuchInterface { .. })
        ));
    });
}

#[test]
fn af_packet_counts_kernel_drops_when_the_rx_ring_overflows() {
    if !root_or_skip("af_packet_counts_kernel_drops_when_the_rx_ring_overflows") {
        return;
    }
    // Each ring kind answers PACKET_STATISTICS with its own struct.
    for (kind, tag) in [(RxRingKind::Blocks, "drop"), (RxRingKind::Frames, "dropv2")] {
        overflow_counts_drops(kind, tag);
    }
}

fn overflow_counts_drops(kind: RxRingKind, tag: &str) {
    let ns = Netns::with_veth(tag);
    ns.enter(|| {
        let mut tx = AfPacket::open("va", &tx_only()).unwrap();
        // 2 x 64 KiB blocks hold well under 1000 small frames (64 frames of 2 KiB each
        // in a frame ring).
        let cfg = AfPacketConfig {
            rx_block_bytes: 1 << 16,
            rx_blocks: 2,
            ..rx_only_ring(kind)
        };
        let mut rx = AfPacket::open("vb", &cfg).unwrap();
        let (src, dst) = (iface::mac("va").unwrap(), iface::mac("vb").unwrap());
        const N: u64 = 3000;
        let mut sent = 0;
        let deadline = Instant::now() + Duration::from_secs(20);
        while sent < N || tx.tx_outstanding() > 0 {
            assert!(Instant::now() < deadline, "TX stalled at {sent}");
            let q = tx
                .tx_batch(((N - sent) as usize).min(256), &mut |i, b| {
                    build_frame(b, dst, src, sent + i as u64)
                })
                .unwrap();
            sent += q as u64;
            tx.flush_tx().unwrap();
        }
        // Only now read: whatever did not fit was dropped by the kernel.
        let mut got = Vec::new();
        while rx
            .rx_batch(1024, Duration::from_millis(20), &mut |f, _| {
                got.push(parse_frame(f).expect("only test frames"))
            })
            .unwrap()
            > 0
        {}
        let s = rx.stats();
        assert!(
            s.rx_kernel_drops > 0,
            "a 128 KiB ring cannot hold {N} frames"
        );
        assert_eq!(
            got.len() as u64 + s.rx_kernel_drops,
            N,
            "received + dropped != sent"
        );
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "survivors out of order"
        );
        assert_eq!(got[0], 0, "the first frames fit and are kept");
        // The counter accumulates: PACKET_STATISTICS resets on read, stats() must not.
        assert_eq!(rx.stats().rx_kernel_drops, s.rx_kernel_drops);
    });
}

/// Send `n` test frames with `tx` and collect the sequence numbers `rx` delivers.
fn exchange(tx: &mut dyn PacketIo, rx: &mut dyn PacketIo, n: u64) -> Vec<u64> {
    let (src, dst) = (iface::mac("va").unwrap(), iface::mac("vb").unwrap());
    let mut got = Vec::new();
    let mut sent = 0u64;
    let deadline = Instant::now() + Duration::from_secs(20);
    while (got.len() as u64) < n && Instant::now() < deadline {
        if sent < n {
            let want = (n - sent).min(64) as usize;
            let q = tx
                .tx_batch(want, &mut |i, buf| {
                    build_frame(buf, dst, src, sent + i as u64)
                })
                .expect("tx_batch");
            tx.flush_tx().expect("flush");
            sent += q as u64;
        }
        rx.rx_batch(256, Duration::from_millis(1), &mut |f, _| {
            if let Some(s) = parse_frame(f) {
                got.push(s);
            }
        })
        .expect("rx_batch");
    }
    got
}

#[test]
fn af_xdp_tx_reaches_af_packet_in_order() {
    if !root_or_skip("af_xdp_tx_reaches_af_packet_in_order") {
        return;
    }
    let ns = Netns::with_veth("xdptx");
    ns.enter(|| {
        let mut tx = nflab_io::AfXdp::open(
            "va",
            &nflab_io::AfXdpConfig {
                rx: false,
                ..nflab_io::AfXdpConfig::default()
            },
        )
        .expect("AF_XDP TX on veth (copy mode)");
        assert!(!tx.zero_copy(), "veth has no zero-copy AF_XDP");
        assert_eq!(tx.name(), "af_xdp");
        let mut rx = AfPacket::open("vb", &rx_only()).expect("rx");
        let got = exchange(&mut tx, &mut rx, 20_000);
        assert_eq!(got, (0..20_000).collect::<Vec<_>>());
        assert_eq!(tx.tx_outstanding(), 0, "every chunk completed");
        assert_eq!(tx.stats().tx_packets, 20_000);
    });
}

#[test]
fn af_xdp_rx_gets_frames_through_the_redirect_program_and_detaches_it() {
    if !root_or_skip("af_xdp_rx_gets_frames_through_the_redirect_program_and_detaches_it") {
        return;
    }
    let ns = Netns::with_veth("xdprx");
    ns.enter(|| {
        let mut tx = AfPacket::open("va", &tx_only()).expect("tx");
        let mut rx = nflab_io::AfXdp::open(
            "vb",
            &nflab_io::AfXdpConfig {
                tx: false,
                ..nflab_io::AfXdpConfig::default()
            },
        )
        .expect("AF_XDP RX on veth");
        // More frames than the fill ring holds: chunks must be recycled.
        let got = exchange(&mut tx, &mut rx, 10_000);
        assert_eq!(got, (0..10_000).collect::<Vec<_>>());
        // A second socket on the same queue is refused with a sentence naming it.
        let e = nflab_io::AfXdp::open("vb", &nflab_io::AfXdpConfig::default())
            .err()
            .expect("second socket on queue 0");
        assert!(e.to_string().contains("queue"), "{e}");
    });
    assert_no_xdp(&ns, "vb");
}

/// A frame for the probe filter: `kind` 0 = IPv4 UDP, 1 = IPv6 UDP, 2 = IPv4
/// UDP in an 802.1Q tag; the UDP payload starts with `first`, then `seq`.
fn udp_frame(buf: &mut [u8], dst: [u8; 6], src: [u8; 6], kind: u64, first: u8, seq: u64) -> usize {
    buf[..128].fill(0);
    buf[0..6].copy_from_slice(&dst);
    buf[6..12].copy_from_slice(&src);
    let mut l3 = 12;
    if kind == 2 {
        buf[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        buf[14..16].copy_from_slice(&5u16.to_be_bytes());
        l3 = 16;
    }
    let payload = if kind == 1 {
        buf[l3..l3 + 2].copy_from_slice(&0x86ddu16.to_be_bytes());
        let ip = l3 + 2;
        buf[ip] = 0x60;
        buf[ip + 6] = 17;
        buf[ip + 7] = 64;
        ip + 40 + 8
    } else {
        buf[l3..l3 + 2].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip = l3 + 2;
        buf[ip] = 0x45;
        buf[ip + 8] = 64;
        buf[ip + 9] = 17;
        ip + 20 + 8
    };
    buf[payload] = first;
    buf[payload + 1..payload + 9].copy_from_slice(&seq.to_be_bytes());
    payload + 9 + 16
}

#[test]
fn af_xdp_probe_filter_steers_only_probes_to_the_socket() {
    if !root_or_skip("af_xdp_probe_filter_steers_only_probes_to_the_socket") {
        return;
    }
    const PROBE: u8 = 0xa7;
    let ns = Netns::with_veth("xdpsteer");
    ns.enter(|| {
        let (src, dst) = (iface::mac("va").unwrap(), iface::mac("vb").unwrap());
        let mut tx = AfPacket::open("va", &tx_only()).expect("tx");
        let mut xsk = nflab_io::AfXdp::open(
            "vb",
            &nflab_io::AfXdpConfig {
                tx: false,
                steer: nflab_io::Steer::UdpFirstByte(PROBE),
                ..nflab_io::AfXdpConfig::default()
            },
        )
        .expect("AF_XDP RX with the probe filter");
        // A tap on the same interface sees what XDP passed to the stack.
        let mut tap = AfPacket::open("vb", &rx_only()).expect("tap");
        // seq i: kind i % 3, a probe when i % 2 == 0, else another first byte;
        // every 7th frame is the non-IP test frame.
        const N: u64 = 600;
        let mut sent = 0;
        while sent < N {
            let q = tx
                .tx_batch(64.min((N - sent) as usize), &mut |i, buf| {
                    let seq = sent + i as u64;
                    if seq % 7 == 0 {
                        build_frame(buf, dst, src, seq)
                    } else {
                        let first = if seq % 2 == 0 { PROBE } else { 0x11 };
                        udp_frame(buf, dst, src, seq % 3, first, seq)
                    }
                })
                .expect("tx_batch");
            tx.flush_tx().expect("flush");
            sent += q as u64;
        }
        let seq_of = |f: &[u8]| -> Option<u64> {
            if let Some(s) = parse_frame(f) {
                return Some(s);
            }
            let pos = [12usize, 16].iter().find_map(|&o| {
                let et = u16::from_be_bytes([f[o], f[o + 1]]);
                match et {
                    0x0800 => Some(o + 2 + 28),
                    0x86dd => Some(o + 2 + 48),
                    _ => None,
                }
            })?;
            Some(u64::from_be_bytes(f[pos + 1..pos + 9].try_into().ok()?))
        };
        let (mut to_socket, mut to_stack) = (Vec::new(), Vec::new());
        let deadline = Instant::now() + Duration::from_secs(10);
        while (to_socket.len() + to_stack.len()) < N as usize && Instant::now() < deadline {
            xsk.rx_batch(256, Duration::from_millis(1), &mut |f, _| {
                to_socket.extend(seq_of(f));
            })
            .expect("xsk rx");
            tap.rx_batch(256, Duration::from_millis(1), &mut |f, _| {
                to_stack.extend(seq_of(f));
            })
            .expect("tap rx");
        }
        to_socket.sort_unstable();
        to_stack.sort_unstable();
        let probe = |s: &u64| s % 7 != 0 && s % 2 == 0;
        let want_socket: Vec<u64> = (0..N).filter(probe).collect();
        let want_stack: Vec<u64> = (0..N).filter(|s| !probe(s)).collect();
        assert_eq!(
            to_socket, want_socket,
            "probes (IPv4, IPv6, VLAN) go to the socket"
        );
        assert_eq!(to_stack, want_stack, "everything else passes to the stack");
    });
    assert_no_xdp(&ns, "vb");
}

#[test]
fn af_xdp_tx_on_each_queue_of_a_multi_queue_veth() {
    if !root_or_skip("af_xdp_tx_on_each_queue_of_a_multi_queue_veth") {
        return;
    }
    let ns = Netns::new("xdpmq");
    ns.ip("link add va numtxqueues 2 numrxqueues 2 type veth peer name vb numtxqueues 2 numrxqueues 2");
    ns.ip("link set va up");
    ns.ip("link set vb up");
    ns.enter(|| {
        let open = |queue| {
            nflab_io::AfXdp::open(
                "va",
                &nflab_io::AfXdpConfig {
                    queue,
                    rx: false,
                    ..nflab_io::AfXdpConfig::default()
                },
            )
        };
        let (mut q0, mut q1) = (open(0).expect("queue 0"), open(1).expect("queue 1"));
        assert!(open(2).is_err(), "a veth of two queues has no queue 2");
        let mut rx = AfPacket::open("vb", &rx_only()).expect("rx");
        assert_eq!(
            exchange(&mut q0, &mut rx, 3_000),
            (0..3_000).collect::<Vec<_>>()
        );
        assert_eq!(
            exchange(&mut q1, &mut rx, 3_000),
            (0..3_000).collect::<Vec<_>>()
        );
    });
}

#[test]
fn xdp_live_frames_carry_consecutive_seqs_and_realtime_stamps() {
    if !root_or_skip("xdp_live_frames_carry_consecutive_seqs_and_realtime_stamps") {
        return;
    }
    const N: u64 = 50_000;
    const SEQ_AT: usize = 14 + 20 + 8 + 4; // after magic, version, flow
    let ns = Netns::with_veth("xdplive");
    // The peer takes ndo_xdp_xmit frames only with NAPI on: GRO (or an XDP program).
    ns.exec(&["ethtool", "-K", "vb", "gro", "on"]);
    ns.enter(|| {
        let (src, dst) = (iface::mac("va").unwrap(), iface::mac("vb").unwrap());
        let mut frame = vec![0u8; 128];
        udp_frame(&mut frame, dst, src, 0, 0xa7, 0);
        frame.truncate(60);
        frame[SEQ_AT - 3] = 1; // probe version
        let mut live = nflab_io::xdp_live::XdpLive::open("va", &frame, SEQ_AT, 0)
            .expect("XDP live frames on veth");
        let mut rx = AfPacket::open("vb", &rx_only()).expect("rx");
        let t0 = realtime_ns();
        let mut got: Vec<(u64, u64)> = Vec::new();
        let mut sent = 0;
        let deadline = Instant::now() + Duration::from_secs(20);
        while (got.len() as u64) < N && Instant::now() < deadline {
            if sent < N {
                sent += u64::from(live.send(1_000).expect("send"));
            }
            rx.rx_batch(4096, Duration::from_millis(1), &mut |f, _| {
                if f.len() >= SEQ_AT + 14 && f[SEQ_AT - 4] == 0xa7 {
                    let mut seq = [0u8; 8];
                    seq[2..].copy_from_slice(&f[SEQ_AT..SEQ_AT + 6]);
                    let tx = u64::from_be_bytes(f[SEQ_AT + 6..SEQ_AT + 14].try_into().unwrap());
                    got.push((u64::from_be_bytes(seq), tx));
                }
            })
            .expect("rx_batch");
        }
        let t1 = realtime_ns();
        assert_eq!(live.next_seq().unwrap(), N);
        let seqs: Vec<u64> = got.iter().map(|g| g.0).collect();
        assert_eq!(seqs, (0..N).collect::<Vec<_>>(), "every frame, in order");
        assert!(
            got.windows(2).all(|w| w[0].1 <= w[1].1),
            "tx stamps never go back"
        );
        // The stamps are on the realtime clock: inside the sending window.
        let slack = 10_000_000;
        assert!(got[0].1 + slack >= t0 && got[got.len() - 1].1 <= t1 + slack);
    });
}
