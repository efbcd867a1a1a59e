//! The UDP monitor on real namespaces (root): a UDP echo "VNF" in a namespace of
//! the test's own, datagrams from a peer namespace over a veth; the sampling mode is
//! switched through the map while the programs stay attached.
//!
//! Run: `sudo -E cargo test -p nflab-monitor --test switch -- --nocapture`

use std::net::UdpSocket;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nflab_monitor::matcher::MatchMode;
use nflab_monitor::udp::{Sample, UdpMonitor, UdpMonitorConfig};

/// Two namespaces of the test's own and a veth between them, deleted on drop.
struct Pair {
    vnf: String,
    peer: String,
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in [&self.vnf, &self.peer] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn ip(args: &[&str]) {
    let ok = Command::new("ip").args(args).status().map(|s| s.success());
    assert!(ok.unwrap_or(false), "ip {args:?}");
}

fn pair() -> Pair {
    let id = std::process::id();
    let p = Pair {
        vnf: format!("nflabmon-{id}-vnf"),
        peer: format!("nflabmon-{id}-peer"),
    };
    ip(&["netns", "add", &p.vnf]);
    ip(&["netns", "add", &p.peer]);
    ip(&[
        "-n", &p.peer, "link", "add", "p0", "type", "veth", "peer", "name", "v0", "netns", &p.vnf,
    ]);
    ip(&["-n", &p.peer, "addr", "add", "198.18.0.1/24", "dev", "p0"]);
    ip(&["-n", &p.vnf, "addr", "add", "198.18.0.2/24", "dev", "v0"]);
    for (ns, dev) in [
        (&p.peer, "p0"),
        (&p.vnf, "v0"),
        (&p.peer, "lo"),
        (&p.vnf, "lo"),
    ] {
        ip(&["-n", ns, "link", "set", dev, "up"]);
    }
    p
}

/// A socket bound in namespace `ns` (the thread comes back to its own).
fn socket_in(ns: &str, addr: &str) -> UdpSocket {
    use std::os::fd::AsFd;
    let here = std::fs::File::open("/proc/thread-self/ns/net").expect("own netns");
    let there = std::fs::File::open(format!("/run/netns/{ns}")).expect("netns");
    nix::sched::setns(there.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
    let s = UdpSocket::bind(addr).expect("bind");
    nix::sched::setns(here.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).expect("setns back");
    s
}

#[test]
fn sampling_switches_through_the_map_without_reloading() {
    nflab_testkit::require_root();
    let p = pair();
    let vnf = socket_in(&p.vnf, "0.0.0.0:9");
    vnf.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let peer = socket_in(&p.peer, "198.18.0.1:9");
    peer.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let echo = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                if let Ok((n, from)) = vnf.recv_from(&mut buf) {
                    vnf.send_to(&buf[..n], from).unwrap();
                }
            }
        })
    };
    let mon = UdpMonitor::start(UdpMonitorConfig {
        netns: p.vnf.clone(),
        port: 9,
        egress_dev: "v0".into(),
        sample: Sample::All,
        matching: MatchMode::Fifo,
        seed: 1,
        rotation: None,
    })
    .expect("monitor attached");
    let mut seq = 0u64;
    let mut burst = |n: u64| {
        for _ in 0..n {
            let mut probe = [0u8; 64];
            write_probe(&mut probe, seq);
            peer.send_to(&probe, "198.18.0.2:9").unwrap();
            let mut back = [0u8; 128];
            assert_eq!(peer.recv(&mut back).expect("echo"), 64);
            seq += 1;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    burst(20); // all: 20 pairs
    mon.set_sample(Sample::Off);
    std::thread::sleep(Duration::from_millis(100));
    burst(20); // off: none
    mon.set_sample(Sample::Windows {
        packets: 3,
        mean_interval_s: 3600.0,
    });
    std::thread::sleep(Duration::from_millis(100));
    burst(20); // one sample of 3 (the next is an hour away on average)
    let r = mon.stop().expect("results");
    stop.store(true, Ordering::Relaxed);
    echo.join().unwrap();
    let seqs: Vec<u64> = r.matching.pairs.iter().filter_map(|m| m.seq).collect();
    println!("pairs by seq: {seqs:?}; counters {:?}", r.counters);
    let expected: Vec<u64> = (0..20).chain(40..43).collect();
    assert_eq!(seqs, expected);
    assert_eq!(r.unmatched, 0);
    assert_eq!(
        r.counters.ingress, 40,
        "the hooks see every datagram while not off"
    );
    assert!(r.matching.pairs.iter().all(|m| m.t_out_ns > m.t_in_ns));
}

/// Writes an nflab probe header (magic, version, flow 1, seq, a tx_ns) into `buf`.
fn write_probe(buf: &mut [u8], seq: u64) {
    buf[0] = 0xa7;
    buf[1] = 1;
    buf[2..4].copy_from_slice(&1u16.to_be_bytes());
    buf[4..10].copy_from_slice(&seq.to_be_bytes()[2..]);
    buf[10..18].copy_from_slice(&seq.wrapping_mul(7919).to_be_bytes());
}
