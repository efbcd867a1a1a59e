//! The worker on real veth interfaces in a throwaway namespace (root only;
//! skipped otherwise): it forwards, and an interface that vanishes while it
//! runs stops it with one clear error and its counters kept.

use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nflab_dataplane::sock::{RawSocket, SplitPort};
use nflab_dataplane::{Chain, L2Fwd, Port, Worker, WorkerConfig, WorkerError};
use nflab_io::{AfPacket, AfPacketConfig, PacketIo, RxRingKind};
use nflab_wire::MacAddr;

/// A namespace `nflabtest-dp-<pid>-<tag>` with veth pairs a0–b0 and a1–b1,
/// deleted on drop, even on panic.
struct Ns(String);

impl Ns {
    fn new(tag: &str) -> Option<Ns> {
        if !nflab_testkit::require_root() {
            return None;
        }
        let name = format!("nflabtest-dp-{}-{tag}", std::process::id());
        let ns = Ns(name.clone());
        let ip = |args: &[&str]| {
            let ok = Command::new("ip").args(args).status().map(|s| s.success());
            assert!(ok.unwrap_or(false), "ip {args:?}");
        };
        ip(&["netns", "add", &name]);
        // No IPv6: router solicitations would be extra frames on the links.
        ip(&[
            "netns",
            "exec",
            &name,
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ]);
        for (a, b) in [("a0", "b0"), ("a1", "b1")] {
            ip(&[
                "-n", &name, "link", "add", a, "type", "veth", "peer", "name", b,
            ]);
            ip(&["-n", &name, "link", "set", a, "up"]);
            ip(&["-n", &name, "link", "set", b, "up"]);
        }
        Some(ns)
    }

    fn enter(&self) {
        enter(&self.0);
    }
}

/// Move the calling thread into namespace `name`.
fn enter(name: &str) {
    let f = std::fs::File::open(format!("/run/netns/{name}")).unwrap();
    // SAFETY: setns on a valid namespace fd; affects only this thread.
    assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// The input port: a raw socket both ways, or (`split`) the lab's AF_PACKET port,
/// which receives through a `TPACKET_V2` ring and sends with the raw socket.
fn input_port(split: bool) -> Box<dyn PacketIo> {
    if !split {
        return Box::new(RawSocket::open("b0", true, 32).unwrap());
    }
    let ring = AfPacket::open(
        "b0",
        &AfPacketConfig {
            tx: false,
            rx_ring: RxRingKind::Frames,
            rx_block_bytes: 1 << 16,
            kernel_timestamps: false,
            ..AfPacketConfig::default()
        },
    )
    .unwrap();
    let raw = RawSocket::open("b0", false, 32).unwrap();
    Box::new(SplitPort::new(Box::new(ring), Box::new(raw)))
}

fn worker(
    ns: &Ns,
    stop: Arc<AtomicBool>,
    split: bool,
) -> std::thread::JoinHandle<(Result<(), WorkerError>, nflab_dataplane::WorkerStats)> {
    let name = ns.0.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        enter(&name);
        let input = input_port(split);
        let output = RawSocket::open("b1", false, 32).unwrap();
        let chain = Chain::new(
            vec![Box::new(L2Fwd::new(
                MacAddr([2, 0, 0, 0, 0, 0xb1]),
                MacAddr([2, 0, 0, 0, 0, 0xa1]),
            ))],
            1024,
        );
        let mut w = Worker::new(
            WorkerConfig::default(),
            chain,
            Port {
                ifname: "b0".into(),
                io: input,
            },
            Port {
                ifname: "b1".into(),
                io: Box::new(output),
            },
        );
        tx.send(()).unwrap();
        let r = w.run(&stop);
        (r, w.stats())
    });
    rx.recv().unwrap();
    h
}

fn frame(i: u32) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 0xb0]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0xa0]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]); // local experimental EtherType
    f[14..18].copy_from_slice(&i.to_be_bytes());
    f
}

#[test]
fn forwards_on_veth_and_survives_a_vanished_interface_with_counters() {
    forwards_and_survives_a_vanished_interface(false);
}

#[test]
fn the_frame_ring_port_forwards_and_notices_a_vanished_interface() {
    forwards_and_survives_a_vanished_interface(true);
}

fn forwards_and_survives_a_vanished_interface(split: bool) {
    let Some(ns) = Ns::new(if split { "fwdring" } else { "fwd" }) else {
        return;
    };
    ns.enter();
    let stop = Arc::new(AtomicBool::new(false));
    let h = worker(&ns, Arc::clone(&stop), split);
    let mut gen = RawSocket::open("a0", false, 32).unwrap();
    let mut sink = RawSocket::open("a1", true, 64).unwrap();
    let n = 500u32;
    for i in 0..n {
        gen.tx_batch(1, &mut |_, b| {
            let f = frame(i);
            b[..60].copy_from_slice(&f);
            60
        })
        .unwrap();
        gen.flush_tx().unwrap();
        if i % 50 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let mut got = Vec::new();
    let t0 = Instant::now();
    while got.len() < n as usize && t0.elapsed() < Duration::from_secs(5) {
        sink.rx_batch(64, Duration::from_millis(10), &mut |f, _| {
            if f.len() >= 18 && f[12..14] == [0x88, 0xb5] {
                got.push((
                    u32::from_be_bytes(f[14..18].try_into().unwrap()),
                    f[0..12].to_vec(),
                ));
            }
        })
        .unwrap();
    }
    assert_eq!(got.len(), n as usize);
    for (k, (i, macs)) in got.iter().enumerate() {
        assert_eq!(*i, k as u32, "in order");
        assert_eq!(&macs[..], &[2, 0, 0, 0, 0, 0xa1, 2, 0, 0, 0, 0, 0xb1]);
    }
    // Pull the input away under the running worker.
    assert!(Command::new("ip")
        .args(["-n", &ns.0, "link", "del", "a0"])
        .status()
        .unwrap()
        .success());
    let t0 = Instant::now();
    while !h.is_finished() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    let (r, stats) = h.join().unwrap();
    let e = r.expect_err("the worker must stop with an error");
    assert!(matches!(e, WorkerError::InterfaceGone { .. }), "{e}");
    assert!(
        e.to_string().contains("'b0'") && e.to_string().contains("vanished"),
        "{e}"
    );
    assert_eq!(
        stats.ports[0].rx_packets, n as u64,
        "counters of the work done are kept"
    );
    assert_eq!(stats.apps[0].packets_out, n as u64);
    assert!(stats.error.is_some());
}
