//! `nflab capture` from the command line: bad input is one sentence and exit 2,
//! before any capture starts; a real capture with a manual trigger (SIGUSR1).

use std::process::Command;
use std::time::Duration;

#[macro_use]
mod common;
use common::{nflab, stderr, TempDir};

#[test]
fn a_filter_that_does_not_compile_is_libpcaps_message_and_exit_2() {
    let tmp = TempDir::new("cap-badfilter");
    let out = nflab()
        .args(["capture", "--iface", "lo", "--out"])
        .arg(&tmp.0)
        .args(["--trigger", "tcp port banana", "--duration", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("tcp port banana") && err.contains("does not compile"),
        "{err}"
    );
    // Nothing was captured: no capture.json.
    assert!(!tmp.0.join("capture.json").exists());
}

#[test]
fn a_missing_interface_and_a_bad_ring_are_one_sentence() {
    let tmp = TempDir::new("cap-badiface");
    for (args, want) in [
        (vec!["--iface", "nflab-no-such-if"], "nflab-no-such-if"),
        (vec!["--iface", "lo", "--ring", "lots"], "--ring lots"),
    ] {
        let out = nflab()
            .arg("capture")
            .args(&args)
            .arg("--out")
            .arg(&tmp.0)
            .args(["--duration", "0.2"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn sigusr1_triggers_a_dump_of_the_last_moments() {
    require_root!();
    let tmp = TempDir::new("cap-manual");
    let ns = format!("nflabtest-capcli-{}", std::process::id());
    struct Ns(String);
    impl Drop for Ns {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }
    assert!(Command::new("ip")
        .args(["netns", "add", &ns])
        .status()
        .unwrap()
        .success());
    let _ns = Ns(ns.clone());
    assert!(Command::new("ip")
        .args(["-n", &ns, "link", "set", "lo", "up"])
        .status()
        .unwrap()
        .success());
    let mut child = nflab()
        .args(["capture", "--netns", &ns, "--iface", "lo", "--out"])
        .arg(&tmp.0)
        .args(["--pre", "2", "--post", "0.1", "--producers", "1"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // 200 probes on the namespace's loopback.
    let gen = nflab()
        .args([
            "gen",
            "--netns",
            &ns,
            "--iface",
            "lo",
            "--dst-mac",
            "00:00:00:00:00:00",
        ])
        .args(["--rate", "2000", "--count", "200"])
        .output()
        .unwrap();
    assert!(gen.status.success(), "{}", stderr(&gen));
    // SAFETY: kill with a valid pid of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGUSR1) };
    std::thread::sleep(Duration::from_millis(800));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.0.join("capture.json")).unwrap())
            .unwrap();
    assert_eq!(json["fired_total"], 1, "{json}");
    assert!(json["fired"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("manual"));
    let dumps = json["dumps"].as_array().unwrap();
    assert_eq!(dumps.len(), 1, "{json}");
    assert!(tmp.0.join(dumps[0]["file"].as_str().unwrap()).exists());
    // Every probe (the generator's AF_PACKET send bypasses the qdisc, so taps
    // see each frame once, on receive).
    let packets = dumps[0]["packets"].as_u64().unwrap();
    assert!(packets >= 200, "{json}");
    assert_eq!(json["dumped"].as_u64(), Some(packets));
}

/// Probe (seq, stamp) of every frame in a pcapng dump.
fn dump_probes(path: &std::path::Path) -> Vec<(u64, u64)> {
    let mut r = nflab_analyze::CaptureReader::open(path).unwrap();
    let mut out = Vec::new();
    r.for_each(|p| {
        if let Ok(probe) = nflab_wire::parse_probe(p.data) {
            out.push((probe.seq, p.ts_ns));
        }
    })
    .unwrap();
    out
}

/// `nflab run` with `[capture]`: each dump holds exactly the probes that the
/// recorder stamped inside its window (the kernel stamps each frame once, so
/// the af_packet producer and the recorder see the same stamp), tshark reads
/// it, and the run loses nothing. (The xdp producer stamps earlier, in XDP:
/// its windows are checked in crates/capture/tests/veth.rs, and its run below.)
#[test]
fn a_run_with_capture_leaves_slices_holding_exactly_their_windows() {
    require_root!();
    require_tool!("tshark", "tshark");
    let tmp = TempDir::new("cap-run");
    // Two filter triggers 0.5 s apart give two slices; the anomaly trigger of
    // the second spec fires on every probe above 1 µs, which on veth is all of
    // them, so its windows keep extending into one.
    let specs = [
        (
            "slices",
            "producer = \"af_packet\"\ntrigger = [\"udp[8:2] = 0xa701 and udp[16:2] = 2000\", \"udp[8:2] = 0xa701 and udp[16:2] = 7000\"]\npre = 0.05\npost = 0.05\n",
            2,
        ),
        (
            "anomaly",
            "producer = \"af_packet\"\nanomaly = \"2:1us\"\npre = 0.05\npost = 0.05\n[analysis]\nanomalies = [\"2:1us\"]\n",
            1,
        ),
    ];
    for (name, capture, want_dumps) in specs {
        let spec = common::write_spec(
            &tmp.0,
            name,
            &format!(
                "[experiment]\nname = \"cap-{name}\"\n[dut]\nkind = \"loopback\"\n[traffic]\nrate_pps = 10000\nduration_s = 1\nwarmup_s = 0\n[capture]\n{capture}"
            ),
        );
        let (_, result, _) = common::run_ok(&spec, &tmp.0);
        let run = std::path::PathBuf::from(result["dir"].as_str().unwrap()).join("runs/000");
        let summary = common::read_json(run.join("summary.json"));
        assert_eq!(summary["packets"]["lost"], 0, "{name}: {summary}");
        let cap = common::read_json(run.join("capture/capture.json"));
        let dumps = cap["dumps"].as_array().unwrap();
        assert_eq!(dumps.len(), want_dumps, "{name}: {cap}");
        let records = nflab_record::read_all(&run.join("records.nfr"))
            .unwrap()
            .records;
        for d in dumps {
            let (from, to) = (d["from_ns"].as_u64().unwrap(), d["to_ns"].as_u64().unwrap());
            let want: Vec<(u64, u64)> = records
                .iter()
                .filter(|r| r.rx_ns >= from && r.rx_ns <= to)
                .map(|r| (r.seq, r.rx_ns))
                .collect();
            let file = run.join("capture").join(d["file"].as_str().unwrap());
            // The readiness probes sent before the measurement (seq 0 of a
            // check the recorder does not record) are in the dump too, as
            // they should be: compare from the recorder's first probe on.
            let first_rx = records.iter().map(|r| r.rx_ns).min().unwrap();
            let got: Vec<(u64, u64)> = dump_probes(&file)
                .into_iter()
                .filter(|p| p.1 >= first_rx)
                .collect();
            assert!(
                want.len() > 100,
                "{name}: {} probes in the window",
                want.len()
            );
            let first_diff = got.iter().zip(&want).position(|(a, b)| a != b);
            assert!(
                got.len() == want.len() && first_diff.is_none(),
                "{name}: {}: {} probes dumped, {} in the window, first difference at {first_diff:?}",
                file.display(),
                got.len(),
                want.len()
            );
            let t = Command::new("tshark")
                .arg("-r")
                .arg(&file)
                .args(["-T", "fields", "-e", "frame.number"])
                .output()
                .unwrap();
            assert!(t.status.success(), "{}", stderr(&t));
            assert_eq!(
                String::from_utf8_lossy(&t.stdout).lines().count() as u64,
                d["packets"].as_u64().unwrap()
            );
        }
        // The summary names the dumps.
        let notes = summary["notes"].to_string();
        assert!(notes.contains("capture/dump-000.pcapng"), "{notes}");
        // The report links the anomalies the dump covers to it, with its count.
        if name == "anomaly" {
            let exp = std::path::PathBuf::from(result["dir"].as_str().unwrap());
            let html = std::fs::read_to_string(exp.join("report.html")).unwrap();
            let link = "<a href=\"runs/000/capture/dump-000.pcapng\">";
            assert!(html.contains(link), "no link to the dump in report.html");
            let packets = dumps[0]["packets"].as_u64().unwrap();
            assert!(html.contains(&format!("</a> ({packets} packets)")));
            let csv = std::fs::read_to_string(exp.join("figures/anomalies.csv")).unwrap();
            assert!(csv.contains("runs/000/capture/dump-000.pcapng"), "{csv}");
        }
    }
}

/// `nflab run` with `[capture] producer = "xdp"` on the recorder's interface:
/// the run loses nothing, the tap lost nothing, both slices are written and
/// tshark reads them, and no XDP program is left on the interface's namespace.
#[test]
fn a_run_with_the_xdp_producer_loses_nothing_and_writes_its_slices() {
    require_root!();
    require_tool!("tshark", "tshark");
    let tmp = TempDir::new("cap-run-xdp");
    let spec = common::write_spec(
        &tmp.0,
        "xdp",
        "[experiment]\nname = \"cap-xdp\"\n[dut]\nkind = \"loopback\"\n[traffic]\nrate_pps = 10000\nduration_s = 1\nwarmup_s = 0\n[capture]\nproducer = \"xdp\"\ntrigger = [\"udp[8:2] = 0xa701 and udp[16:2] = 2000\", \"udp[8:2] = 0xa701 and udp[16:2] = 7000\"]\npre = 0.05\npost = 0.05\n",
    );
    let (_, result, _) = common::run_ok(&spec, &tmp.0);
    let run = std::path::PathBuf::from(result["dir"].as_str().unwrap()).join("runs/000");
    let summary = common::read_json(run.join("summary.json"));
    assert_eq!(summary["packets"]["lost"], 0, "{summary}");
    let cap = common::read_json(run.join("capture/capture.json"));
    assert_eq!(cap["producer"], "xdp", "{cap}");
    assert_eq!(cap["kernel_drops"], 0, "{cap}");
    let received = summary["packets"]["received"].as_u64().unwrap();
    assert!(cap["captured"].as_u64().unwrap() >= received, "{cap}");
    let dumps = cap["dumps"].as_array().unwrap();
    assert_eq!(dumps.len(), 2, "{cap}");
    for d in dumps {
        let file = run.join("capture").join(d["file"].as_str().unwrap());
        let probes = dump_probes(&file);
        // 100 ms of 10 kpps, cut by the window: about a thousand probes, in order.
        assert!(probes.len() > 500, "{}: {}", file.display(), probes.len());
        assert!(
            probes.windows(2).all(|w| w[1].0 == w[0].0 + 1),
            "{}",
            file.display()
        );
        let t = Command::new("tshark")
            .arg("-r")
            .arg(&file)
            .args(["-T", "fields", "-e", "frame.number"])
            .output()
            .unwrap();
        assert!(t.status.success(), "{}", stderr(&t));
        assert_eq!(
            String::from_utf8_lossy(&t.stdout).lines().count() as u64,
            d["packets"].as_u64().unwrap()
        );
    }
}
