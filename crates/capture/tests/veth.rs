//! The capture on a real veth pair in a namespace of its own: probes with
//! known sequence numbers go va -> vb while the capture taps vb and an
//! independent recorder (a plain AF_PACKET ring) records every probe with its
//! kernel receive stamp — the same stamp the capture sees, since the kernel
//! takes it once per frame. A filter trigger on one sequence number must give
//! one dump with exactly the probes whose stamps lie in its window (none
//! missing, none extra), tshark must read it, and the recorder must still get
//! every probe: the capture is a tap, never a sink.
//!
//! Both producers run the same checks. The AF_PACKET producer reads the very
//! stamp the recorder reads, so its window is checked to the nanosecond. The
//! XDP producer stamps the frame when XDP runs, a little before the stack
//! stamps it for the recorder: its dump must be a contiguous run of the
//! recorder's probes, hold every probe the recorder stamped inside the window
//! later than the tolerance after its start, none stamped outside the window
//! widened by it, and each of its stamps must precede the recorder's by at
//! most the tolerance. Its program must be gone when the capture ends, and
//! when the capturing process is killed with SIGKILL.

use std::collections::BTreeSet;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nflab_capture::{CaptureConfig, Control, ProducerKind, TriggerSpec};
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

/// The dump (seq, stamp) against the recorder's (seq, stamp) for the window
/// `[from, to]`: with `tol_ns` = 0 exactly the recorder's probes stamped
/// inside it, in order, with the recorder's stamps; else the checks in this
/// file's header.
fn check_window(recorded: &[(u64, u64)], dump: &[(u64, u64)], (from, to): (u64, u64), tol_ns: u64) {
    let got: Vec<u64> = dump.iter().map(|p| p.0).collect();
    let sure: Vec<u64> = recorded
        .iter()
        .filter(|r| r.1 >= from.saturating_add(tol_ns) && r.1 <= to)
        .map(|r| r.0)
        .collect();
    assert!(
        sure.len() > 100,
        "the window should hold hundreds of probes: {}",
        sure.len()
    );
    // A contiguous run of the recorder's probes, in its order: none missing inside.
    let first = recorded.iter().position(|r| Some(&r.0) == got.first());
    let first = first.expect("the dump's first probe was recorded");
    let run: Vec<u64> = recorded[first..first + got.len()]
        .iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(
        got, run,
        "the dump must be the recorder's probes, in order, none missing"
    );
    for s in &sure {
        assert!(
            got.contains(s),
            "probe {s} was stamped inside the window but is not in the dump"
        );
    }
    let mut worst = 0;
    for (seq, ts) in dump {
        assert!(
            *ts >= from && *ts <= to,
            "seq {seq} stamped {ts} outside the window"
        );
        let r = recorded.iter().find(|r| r.0 == *seq).unwrap();
        // Stamps survive at nanosecond resolution (tolerance 0: the same stamp).
        assert!(
            *ts <= r.1 && r.1 - ts <= tol_ns,
            "seq {seq}: dump stamp {ts}, recorder stamp {}",
            r.1
        );
        worst = worst.max(r.1 - ts);
    }
    if tol_ns == 0 {
        let want: Vec<u64> = recorded
            .iter()
            .filter(|r| r.1 >= from && r.1 <= to)
            .map(|r| r.0)
            .collect();
        assert_eq!(
            got, want,
            "the dump must hold exactly the window's probes, in order"
        );
    } else {
        eprintln!(
            "{} probes dumped; the capture's stamp preceded the recorder's by at most {worst} ns",
            got.len()
        );
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

/// How far the XDP producer's stamp may precede the recorder's: XDP runs in
/// veth's NAPI poll, the stack stamps the frame after the poll's batch has
/// gone through XDP (tens of µs), or later when the VM's vCPU is preempted.
const XDP_STAMP_TOLERANCE_NS: u64 = 2_000_000;

#[test]
fn a_dump_holds_exactly_the_window_and_the_recorder_misses_nothing() {
    if !nflab_testkit::require_root() || !nflab_testkit::require_tool("tshark", "tshark") {
        return;
    }
    window_test(ProducerKind::AfPacket, 0, "window");
}

#[test]
fn the_xdp_producers_dump_holds_the_window_and_its_program_is_gone_after() {
    if !nflab_testkit::require_root() || !nflab_testkit::require_tool("tshark", "tshark") {
        return;
    }
    window_test(ProducerKind::Xdp, XDP_STAMP_TOLERANCE_NS, "xdpwin");
}

/// The XDP program attached to `dev` in the namespace, if any (`ip -d -j link`).
fn xdp_prog_id(ns: &Netns, dev: &str) -> Option<u64> {
    let out = Command::new("ip")
        .args(["-n", &ns.0, "-d", "-j", "link", "show", "dev", dev])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v[0]["xdp"]["prog"]["id"].as_u64()
}

/// Whether the kernel still has a BPF program with this id.
fn prog_exists(id: u64) -> bool {
    libbpf_rs::query::ProgInfoIter::default().any(|p| u64::from(p.id) == id)
}

/// The capture's program while it runs: attached to vb, and named as the tap.
fn attached_tap(ns: &Netns) -> u64 {
    let id = xdp_prog_id(ns, "vb").expect("the XDP tap is attached to vb while capturing");
    let info = libbpf_rs::query::ProgInfoIter::default()
        .find(|p| u64::from(p.id) == id)
        .expect("the attached program exists");
    assert_eq!(
        info.name.to_string_lossy(),
        nflab_monitor::tap::PROGRAM_NAME
    );
    id
}

fn window_test(producer: ProducerKind, tol_ns: u64, tag: &str) {
    let ns = Netns::new(tag);
    let out = std::env::temp_dir().join(format!("nflab-cap-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let mut cfg = CaptureConfig::new("vb", &out);
    cfg.producer = producer;
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
    let prog = (producer == ProducerKind::Xdp).then(|| attached_tap(&ns));
    ns.spawn(send_probes).join().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    ctl.stop.store(true, Ordering::Relaxed);
    rec_stop.store(true, Ordering::Relaxed);
    let report = capture.join().unwrap().expect("capture");
    let recorded = recorder.join().unwrap();
    if let Some(id) = prog {
        assert_eq!(xdp_prog_id(&ns, "vb"), None, "the tap is detached");
        assert!(!prog_exists(id), "the tap's program {id} is gone");
        assert_eq!(report.producer, "xdp");
    }

    // A tap, never a sink: the recorder got every probe.
    let seqs: BTreeSet<u64> = recorded.iter().map(|r| r.0).collect();
    assert_eq!(seqs.len() as u64, PROBES, "the recorder missed probes");
    assert!(report.captured >= PROBES, "{report:?}");
    assert_eq!((report.discarded, report.kernel_drops), (0, 0));

    assert_eq!(report.dumps.len(), 1, "{:?}", report.dumps);
    let d = &report.dumps[0];
    let marker_ts = recorded.iter().find(|r| r.0 == MARKER_SEQ).unwrap().1;
    let fired_ns = report.fired[0].at_ns;
    assert!(
        fired_ns <= marker_ts && marker_ts - fired_ns <= tol_ns,
        "fired at {fired_ns}, the recorder stamped the marker at {marker_ts}"
    );
    assert_eq!(
        (d.from_ns, d.to_ns),
        (fired_ns - cfg.pre_ns, fired_ns + cfg.post_ns)
    );
    let dump = dumped_seqs(&out.join(&d.file));
    check_window(&recorded, &dump, (d.from_ns, d.to_ns), tol_ns);
    // Non-probe frames of the window (IPv6 neighbour discovery, say) are in it too.
    assert!(d.packets >= dump.len() as u64);

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
    budget_test(ProducerKind::AfPacket, "budget");
    budget_test(ProducerKind::Xdp, "xdpbudget");
}

fn budget_test(producer: ProducerKind, tag: &str) {
    let ns = Netns::new(tag);
    let out = std::env::temp_dir().join(format!("nflab-cap-{tag}-{}", std::process::id()));
    let mut cfg = CaptureConfig::new("vb", &out);
    cfg.producer = producer;
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
    assert_eq!(r.kernel_drops, 0, "{r:?}");
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

/// The child of the SIGKILL test: a capture with the XDP producer on vb of the
/// namespace named in `NFLAB_CAP_KILL_NS`, running until it is killed. It says
/// "attached" on stdout once the program is on the interface.
#[test]
#[ignore = "run by xdp_program_goes_with_a_killed_process as its child"]
fn kill_test_child() {
    let Ok(ns) = std::env::var("NFLAB_CAP_KILL_NS") else {
        return;
    };
    let out = std::env::temp_dir().join(format!("nflab-cap-kill-{}", std::process::id()));
    let mut cfg = CaptureConfig::new("vb", &out);
    cfg.producer = ProducerKind::Xdp;
    let file = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
    // SAFETY: a valid namespace fd; CLONE_NEWNET switches only this thread.
    assert_eq!(
        unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) },
        0
    );
    let capture = nflab_capture::Capture::open(&cfg).expect("capture opens");
    println!("attached");
    let _ = capture.run(&Control::default(), None);
}

/// `kill -9` of the capturing process: the kernel detaches the program and
/// frees it, since only the process held its link.
#[test]
fn xdp_program_goes_with_a_killed_process() {
    if !nflab_testkit::require_root() {
        return;
    }
    use std::io::BufRead;
    let ns = Netns::new("kill");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["kill_test_child", "--exact", "--ignored", "--nocapture"])
        .env("NFLAB_CAP_KILL_NS", &ns.0)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let attached = lines.any(|l| l.is_ok_and(|l| l.trim() == "attached"));
    assert!(attached, "the child capture did not attach");
    let id = attached_tap(&ns);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // The kernel releases the link when the last fd goes; give it a moment.
    let mut gone = false;
    for _ in 0..100 {
        if xdp_prog_id(&ns, "vb").is_none() && !prog_exists(id) {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(gone, "program {id} outlived its SIGKILLed process");
    let _ = std::fs::remove_dir_all(
        std::env::temp_dir().join(format!("nflab-cap-kill-{}", child.id())),
    );
}
