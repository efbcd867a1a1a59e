//! The capture on a real veth pair in a namespace of its own: probes with
//! known sequence numbers go va -> vb while the capture taps vb and an
//! independent recorder (a plain AF_PACKET ring) records every probe with its
//! kernel receive stamp — the same stamp the capture sees, since the kernel
//! takes it once per frame. A filter trigger on one sequence number must give
//! one dump with exactly the probes whose stamps lie in its window (none
//! missing, none extra), tshark must read it, and the recorder must still get
//! every probe: the capture is a tap, never a sink.

use std::collections::BTreeSet;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nflab_capture::{CaptureConfig, Control, TriggerSpec};
use nflab_io::{AfPacket, AfPacketConfig, PacketIo};
use nflab_wire::{parse_probe, MacAddr, ProbeSpec, ProbeTemplate};

const PROBES: u64 = 6000;
const MARKER_SEQ: u64 = 3000;

struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("nflabtest-cap-{}-{tag}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        let ns = Netns(name);
        for args in [
            vec!["netns", "add", &ns.0],
            vec![
                "-n", &ns.0, "link", "add", "va", "type", "veth", "peer", "name", "vb",
            ],
            vec!["-n", &ns.0, "link", "set", "va", "up"],
            vec!["-n", &ns.0, "link", "set", "vb", "up"],
        ] {
            let ok = Command::new("ip").args(&args).status().unwrap().success();
            assert!(ok, "ip {args:?}");
        }
        ns
    }

    /// Run `f` on a thread inside the namespace.
    fn spawn<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let path = format!("/run/netns/{}", self.0);
        std::thread::spawn(move || {
            let file = std::fs::File::open(&path).unwrap();
            // SAFETY: a valid namespace fd; CLONE_NEWNET switches only this thread.
            assert_eq!(
                unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) },
                0
            );
            f()
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn template() -> ProbeTemplate {
    ProbeTemplate::new(&ProbeSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        ..ProbeSpec::default()
    })
    .unwrap()
}

/// (seq, kernel receive stamp) of every probe the plain recorder saw.
fn record(stop: Arc<AtomicBool>) -> Vec<(u64, u64)> {
    let mut rx = AfPacket::open(
        "vb",
        &AfPacketConfig {
            tx: false,
            ..AfPacketConfig::default()
        },
    )
    .unwrap();
    let mut got = Vec::new();
    let mut idle = 0;
    while idle < 50 {
        let n = rx
            .rx_batch(256, Duration::from_millis(10), &mut |f, meta| {
                if let Ok(p) = parse_probe(f) {
                    got.push((p.seq, meta.ts_ns.unwrap()));
                }
            })
            .unwrap();
        if n == 0 && stop.load(Ordering::Relaxed) {
            idle += 1;
        }
    }
    got
}

fn send_probes() {
    let t = template();
    let mut tx = AfPacket::open(
        "va",
        &AfPacketConfig {
            rx: false,
            ..AfPacketConfig::default()
        },
    )
    .unwrap();
    let mut seq = 0u64;
    // About 20 kpps in batches of 20, so windows of tens of ms hold hundreds.
    while seq < PROBES {
        let sent = tx
            .tx_batch(20, &mut |i, buf| {
                t.write(buf, seq + i as u64, nflab_io::clock::realtime_ns())
            })
            .unwrap();
        seq += sent as u64;
        tx.flush_tx().unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn dumped_seqs(path: &Path) -> Vec<(u64, u64)> {
    let mut r = nflab_analyze::CaptureReader::open(path).unwrap();
    let mut out = Vec::new();
    r.for_each(|p| {
        if let Ok(probe) = parse_probe(p.data) {
            out.push((probe.seq, p.ts_ns));
        }
    })
    .unwrap();
    out
}

#[test]
fn a_dump_holds_exactly_the_window_and_the_recorder_misses_nothing() {
    if !nflab_testkit::require_root() || !nflab_testkit::require_tool("tshark", "tshark") {
        return;
    }
    let ns = Netns::new("window");
    let out = std::env::temp_dir().join(format!("nflab-cap-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let mut cfg = CaptureConfig::new("vb", &out);
    cfg.ring_bytes = 64 << 20;
    cfg.pre_ns = 40_000_000;
    cfg.post_ns = 30_000_000;
    cfg.inner_bytes = 64 << 10;
    // The marker: probe magic and version, then the low 16 bits of the 48-bit seq.
    cfg.triggers = vec![TriggerSpec::Filter(format!(
        "udp[8:2] = 0xa701 and udp[16:2] = {MARKER_SEQ}"
    ))];
    let ctl = Control::default();
    let rec_stop = Arc::new(AtomicBool::new(false));
    let recorder = {
        let stop = Arc::clone(&rec_stop);
        ns.spawn(move || record(stop))
    };
    let capture = {
        let (cfg, ctl) = (cfg.clone(), ctl.clone());
        ns.spawn(move || nflab_capture::run(&cfg, &ctl, None))
    };
    std::thread::sleep(Duration::from_millis(300));
    ns.spawn(send_probes).join().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    ctl.stop.store(true, Ordering::Relaxed);
    rec_stop.store(true, Ordering::Relaxed);
    let report = capture.join().unwrap().expect("capture");
    let recorded = recorder.join().unwrap();

    // A tap, never a sink: the recorder got every probe.
    let seqs: BTreeSet<u64> = recorded.iter().map(|r| r.0).collect();
    assert_eq!(seqs.len() as u64, PROBES, "the recorder missed probes");
    assert!(report.captured >= PROBES, "{report:?}");
    assert_eq!((report.discarded, report.kernel_drops), (0, 0));

    assert_eq!(report.dumps.len(), 1, "{:?}", report.dumps);
    let d = &report.dumps[0];
    let marker_ts = recorded.iter().find(|r| r.0 == MARKER_SEQ).unwrap().1;
    assert_eq!(report.fired[0].at_ns, marker_ts);
    assert_eq!(
        (d.from_ns, d.to_ns),
        (marker_ts - cfg.pre_ns, marker_ts + cfg.post_ns)
    );

    let want: Vec<u64> = recorded
        .iter()
        .filter(|r| r.1 >= d.from_ns && r.1 <= d.to_ns)
        .map(|r| r.0)
        .collect();
    let dump = dumped_seqs(&out.join(&d.file));
    let got: Vec<u64> = dump.iter().map(|p| p.0).collect();
    assert!(
        want.len() > 100,
        "the window should hold hundreds of probes: {}",
        want.len()
    );
    assert_eq!(
        got, want,
        "the dump must hold exactly the window's probes, in order"
    );
    // Non-probe frames of the window (IPv6 neighbour discovery, say) are in it too.
    assert!(d.packets >= got.len() as u64);
    // Stamps survive at nanosecond resolution.
    for (seq, ts) in &dump {
        let r = recorded.iter().find(|r| r.0 == *seq).unwrap();
        assert_eq!(*ts, r.1, "seq {seq}");
    }

    // tshark reads it, with the trigger in the section comment.
    let t = Command::new("tshark")
        .args(["-r"])
        .arg(out.join(&d.file))
        .args(["-T", "fields", "-e", "frame.number"])
        .output()
        .unwrap();
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
    assert_eq!(
        String::from_utf8_lossy(&t.stdout).lines().count() as u64,
        d.packets
    );
    let info = Command::new("capinfos")
        .arg(out.join(&d.file))
        .output()
        .unwrap();
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(
        info.contains("trigger at") && info.contains("nanoseconds"),
        "{info}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("capture.json")).unwrap()).unwrap();
    assert_eq!(json["dumped"], d.packets);
    assert_eq!(
        json["producers"][0]["captured"].as_u64(),
        Some(report.producers[0].captured)
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_ring_smaller_than_the_traffic_discards_oldest_queues_and_stays_in_budget() {
    if !nflab_testkit::require_root() {
        return;
    }
    let ns = Netns::new("budget");
    let out = std::env::temp_dir().join(format!("nflab-cap-budget-{}", std::process::id()));
    let mut cfg = CaptureConfig::new("vb", &out);
    // 6000 probes of 60 B in 16 KiB queues: well over what 64 KiB holds.
    cfg.ring_bytes = 1 << 16;
    cfg.inner_bytes = 16 << 10;
    cfg.producers = Some(1);
    let ctl = Control::default();
    let capture = {
        let (cfg, ctl) = (cfg.clone(), ctl.clone());
        ns.spawn(move || nflab_capture::run(&cfg, &ctl, None))
    };
    std::thread::sleep(Duration::from_millis(300));
    ns.spawn(send_probes).join().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    ctl.stop.store(true, Ordering::Relaxed);
    let r = capture.join().unwrap().expect("capture");
    assert!(r.captured >= PROBES, "{r:?}");
    assert!(r.discarded > 0 && r.discarded_queues > 0, "{r:?}");
    assert!(r.peak_ring_bytes <= cfg.ring_bytes, "{r:?}");
    assert_eq!(r.handed_over, r.captured);
    let _ = std::fs::remove_dir_all(&out);
}

/// A disk that fills while dumping: the dump is cut back to its last complete
/// packet, readable, and the error says so.
#[test]
fn a_full_disk_leaves_a_valid_dump_and_says_so() {
    if !nflab_testkit::require_root() {
        return;
    }
    use nflab_capture::dump::{self, DumpContext, Window};
    use nflab_capture::qq::{InnerQueue, OuterRing};
    let dir = std::env::temp_dir().join(format!("nflab-cap-full-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            // A child another test thread forks at the wrong moment can keep
            // the mount busy for an instant: then detach it lazily, so nothing
            // stays mounted after the test.
            let ok = Command::new("umount").arg(&self.0).status();
            if !ok.is_ok_and(|s| s.success()) {
                let _ = Command::new("umount").arg("-l").arg(&self.0).status();
            }
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "cannot mount a tmpfs on {dir:?}");
    let _unmount = Unmount(dir.clone());
    // 20 000 probes of 60 bytes: about 1.6 MB of pcapng, far over 64 KiB.
    let t = template();
    let ring = OuterRing::new(64 << 20, 1);
    let mut q = InnerQueue::with_capacity(0, 2 << 20);
    let mut buf = vec![0u8; t.len()];
    for seq in 0..20_000u64 {
        t.write(&mut buf, seq, seq);
        q.push(1_000 + seq, 64, &buf);
    }
    ring.hand_over(q);
    let window = Window {
        id: 0,
        from_ns: 0,
        to_ns: u64::MAX,
        reasons: vec![],
    };
    let ctx = DumpContext {
        dir: &dir,
        iface: "vb",
        snaplen: 2048,
        producers: 1,
        filter: None,
    };
    let info = dump::write(&ctx, &window, &ring.overlapping(0, u64::MAX)).unwrap();
    let err = info.error.expect("the disk filled");
    assert!(
        err.contains("valid pcapng up to its last complete packet"),
        "{err}"
    );
    assert!(!err.contains('\n'));
    let got = dumped_seqs(&dir.join(&info.file));
    assert!(!got.is_empty() && got.len() < 20_000, "{}", got.len());
    assert_eq!(
        info.packets,
        got.len() as u64,
        "dumped counts only what is on disk"
    );
    // What is there is the first packets, in order, none damaged.
    for (i, (seq, ts)) in got.iter().enumerate() {
        assert_eq!((*seq, *ts), (i as u64, 1_000 + i as u64));
    }
}
