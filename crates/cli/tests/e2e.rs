//! End-to-end tests of the `nflab` binary: real namespaces, veth pairs,
//! AF_PACKET sockets and files. They need root; without it they print why
//! and pass, so `cargo test` works for anyone (CI runs them as root).
//!
//! They run one at a time (a shared lock): two experiments at once on a
//! 2-core machine would measure each other.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

#[macro_use]
mod common;
use common::{namespaces_of, nflab, read_json, run_first, stderr, write_spec, TempDir};

const TWO_DUTS: &str = r#"
[experiment]
name = "e2e"

[traffic]
rate_pps = 10000
frame_bytes = 64
duration_s = 1
warmup_s = 0.2

[analysis]
anomalies = ["2:250us"]

[sweep]
"dut.kind" = ["loopback", "linux-router"]
"#;

#[test]
fn run_writes_the_artifact_tree_and_measures_linux_router() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("run");
    let spec = write_spec(&tmp.0, "two", TWO_DUTS);
    let child = nflab()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--out",
            tmp.0.to_str().unwrap(),
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "nflab run failed: {}", stderr(&out));
    assert!(
        namespaces_of(pid).is_empty(),
        "namespaces left: {:?}",
        namespaces_of(pid)
    );

    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let dir = PathBuf::from(result["dir"].as_str().unwrap());
    assert!(dir.file_name().unwrap().to_str().unwrap().ends_with("-e2e"));
    assert_eq!(
        std::fs::read_to_string(dir.join("spec.toml")).unwrap(),
        TWO_DUTS
    );
    let env: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("env.json")).unwrap()).unwrap();
    for key in [
        "kernel",
        "kernel_cmdline",
        "cpu_model",
        "cpu_governor",
        "smt",
        "nflab_version",
        "nflab_commit",
    ] {
        assert!(env.get(key).is_some(), "env.json lacks {key}");
    }
    let parquet = std::fs::read(dir.join("results.parquet")).unwrap();
    assert_eq!(&parquet[..4], b"PAR1");
    assert_eq!(&parquet[parquet.len() - 4..], b"PAR1");
    assert!(dir.join("report.html").is_file());

    for (run, dut) in [("000", "loopback"), ("001", "linux-router")] {
        let rd = dir.join("runs").join(run);
        let params: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(rd.join("params.json")).unwrap())
                .unwrap();
        assert_eq!(params["dut"]["kind"], dut);
        // Every run measures the generator's own precision where the packets arrive.
        let gen: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(rd.join("gen.json")).unwrap()).unwrap();
        let sc = &gen["selfcheck"];
        assert!(sc["packets"].as_u64().unwrap() > 100, "{sc}");
        let acc = sc["rate_accuracy"].as_f64().unwrap();
        assert!((0.9..1.1).contains(&acc), "rate accuracy {acc}");
        assert!(sc["ipg_mse_ns2"].as_f64().unwrap() >= 0.0, "{sc}");
        assert!(!sc["histogram"].as_array().unwrap().is_empty(), "{sc}");
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(rd.join("summary.json")).unwrap())
                .unwrap();
        for path in [
            "/packets/sent",
            "/packets/received",
            "/packets/lost",
            "/packets/reordered",
            "/packets/duplicated",
            "/loss_ratio",
            "/rate/offered_pps",
            "/rate/tx_pps",
            "/rate/rx_pps",
            "/latency_ns/min",
            "/latency_ns/mean",
            "/latency_ns/stdev",
            "/latency_ns/p50",
            "/latency_ns/p90",
            "/latency_ns/p99",
            "/latency_ns/p99.9",
            "/latency_ns/p99.99",
            "/latency_ns/p99.999",
            "/latency_ns/max",
            "/jitter_ns/rfc3550",
            "/jitter_ns/ipdv_p50",
            "/jitter_ns/ipdv_p99",
            "/anomalies/0/n",
            "/anomalies/0/t_ns",
            "/anomalies/0/count",
            "/anomalies/0/packets",
            "/anomalies/0/longest",
            "/clock/source",
            "/clock/resolution_ns",
        ] {
            // JSON pointers treat '.' as an ordinary character.
            assert!(
                summary.pointer(path).is_some(),
                "{run}: summary.json lacks {path}"
            );
        }
        // 10 kpps for 1 s after warm-up: exactly 10 000 measured packets.
        assert_eq!(summary["packets"]["sent"], 10_000, "{run}");
        assert_eq!(summary["packets"]["lost"], 0, "{run}: {summary}");
        assert_eq!(summary["loss_ratio"], 0.0);

        // Independent check of the pipeline: read the raw records and
        // recompute received and the median from them.
        let file = nflab_record::read_all(&rd.join("records.nfr")).unwrap();
        assert!(file.tail.is_complete());
        let trailer = file.trailer.unwrap();
        let warmup = trailer.sent[0].warmup;
        assert_eq!(trailer.sent[0].sent - warmup, 10_000);
        let mut lat: Vec<i64> = file
            .records
            .iter()
            .filter(|r| r.seq >= warmup)
            .map(|r| r.rx_ns as i64 - r.tx_ns as i64)
            .collect();
        assert_eq!(summary["packets"]["received"], lat.len() as u64);
        lat.sort_unstable();
        let median = lat[lat.len().div_ceil(2) - 1];
        assert_eq!(summary["latency_ns"]["p50"], median);
        assert!(lat[0] > 0, "latency must be positive on one clock");
        assert!(file.records.iter().all(|r| r.wire_len == 64));
        assert_eq!(file.meta.clock.source, "CLOCK_REALTIME");
    }
}

#[test]
fn a_model_section_puts_predictions_in_the_report() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("model-section");
    // Baseline 0: t_CPU is the router run's median, so the fit cannot fail
    // on a noisy host where loopback happens to be slower than the router.
    let body = format!("{TWO_DUTS}\n[model]\nbaseline_median_ns = 0\nsim_packets = 20000\n");
    let spec = write_spec(&tmp.0, "model", &body);
    let child = nflab()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--out",
            tmp.0.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(namespaces_of(pid).is_empty(), "namespaces left");
    assert!(out.status.success(), "nflab run failed: {}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("artifacts:"))
        .unwrap_or_else(|| panic!("no artifacts line: {stdout}"));
    let dir = PathBuf::from(line.trim_start_matches("artifacts:").trim());
    assert!(stdout.contains("model:"), "{stdout}\n{}", stderr(&out));
    // Written by `nflab run` itself, before the report that draws it.
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("model.json")).unwrap()).unwrap();
    assert_eq!(m["predictions"][0]["run"], "001", "{m}");
    assert!(m["predictions"][0]["p50_ns"].as_f64().unwrap() > 0.0);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        html.contains("id=\"fig-model\""),
        "no model figure in the report"
    );
    assert!(dir.join("figures/model.csv").is_file());
}

#[test]
fn table_is_printed_on_the_terminal_path() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("table");
    let spec = write_spec(
        &tmp.0,
        "t",
        "[experiment]\nname = \"t\"\n[dut]\nkind = \"linux-bridge\"\n[traffic]\nrate_pps = 5000\nduration_s = 0.5\nwarmup_s = 0.1\n",
    );
    let out = nflab()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--out",
            tmp.0.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let header = stdout.lines().next().unwrap();
    for col in [
        "run", "DuT", "offered", "received", "loss", "p50", "p99", "p99.9", "max", "anom",
    ] {
        assert!(header.contains(col), "table header lacks {col}: {header}");
    }
    assert!(stdout.contains("linux-bridge"), "{stdout}");
    assert!(stdout.contains("report:"), "{stdout}");
}

fn interrupt_run(signal: i32) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new(&format!("sig{signal}"));
    let spec = write_spec(
        &tmp.0,
        "long",
        "[experiment]\nname = \"long\"\n[dut]\nkind = \"linux-router\"\n[traffic]\nrate_pps = 10000\nduration_s = 60\nwarmup_s = 0\n[sweep]\n\"traffic.frame_bytes\" = [64, 128]\n",
    );
    let child = nflab()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--out",
            tmp.0.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until records are being written, then let it run a little.
    let start = Instant::now();
    let records = loop {
        let found = std::fs::read_dir(&tmp.0)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("runs/000/records.nfr"))
            .find(|p| p.exists());
        if let Some(p) = found {
            break p;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no records after 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill with a valid pid of our own child.
    unsafe { libc::kill(pid as i32, signal) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "stderr: {}", stderr(&out));
    assert!(
        namespaces_of(pid).is_empty(),
        "namespaces left: {:?}",
        namespaces_of(pid)
    );

    let run = records.parent().unwrap();
    let file = nflab_record::read_all(&records).unwrap();
    assert!(
        file.tail.is_complete(),
        "interrupted run must still finish its file"
    );
    assert!(file.trailer.as_ref().unwrap().interrupted);
    assert!(
        file.records.len() > 1000,
        "only {} records kept",
        file.records.len()
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["interrupted"], true);
    assert!(summary["packets"]["received"].as_u64().unwrap() > 1000);
    // The second run was never started.
    assert!(!run.parent().unwrap().join("001").exists());
    assert!(run
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("results.parquet")
        .exists());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("000*"),
        "table marks the interrupted run"
    );
    // The report says what is missing: the cut run and the run never started.
    let exp = run.parent().unwrap().parent().unwrap();
    let html = std::fs::read_to_string(exp.join("report.html")).unwrap();
    assert!(
        html.contains("the run was interrupted"),
        "report: no interrupted note"
    );
    assert!(
        html.contains("the spec plans 2 runs and 1 are here"),
        "report: no missing-run note"
    );
}

#[test]
fn ctrl_c_keeps_records_and_removes_namespaces() {
    require_root!();
    interrupt_run(libc::SIGINT);
}

#[test]
fn sigterm_keeps_records_and_removes_namespaces() {
    require_root!();
    interrupt_run(libc::SIGTERM);
}

fn expect_one_line_error(args: &[&str], must_contain: &[&str]) {
    let child = nflab()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "{args:?} should fail");
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "one line expected: {err}");
    assert!(!err.contains("panicked"), "{err}");
    for m in must_contain {
        assert!(err.contains(m), "{args:?}: '{m}' not in: {err}");
    }
    assert!(namespaces_of(pid).is_empty());
}

#[test]
fn bad_specs_get_one_sentence_naming_key_and_line() {
    let tmp = TempDir::new("bad");
    let cases: [(&str, &[&str]); 5] = [
        (
            "[experiment]\nname = \"x\"\n[traffic]\nrate_ps = 5\n",
            &["rate_ps", "line 4"],
        ),
        (
            "[experiment]\nname = \"x\"\n[traffic]\nrate_pps = 0\n",
            &["rate_pps", "line 4", "positive"],
        ),
        (
            "[experiment]\nname = \"x\"\n[traffic]\nframe_bytes = 40\n",
            &["frame_bytes", "64", "1518"],
        ),
        (
            "[experiment]\nname = \"x\"\n[traffic]\nframe_bytes = 9000\n",
            &["frame_bytes", "1518"],
        ),
        (
            "[experiment]\nname = \"x\"\n[dut]\nkind = \"linux-routr\"\n",
            &["linux-routr", "linux-router"],
        ),
    ];
    for (i, (body, needles)) in cases.iter().enumerate() {
        let spec = write_spec(&tmp.0, &format!("bad{i}"), body);
        expect_one_line_error(
            &[
                "run",
                spec.to_str().unwrap(),
                "--out",
                tmp.0.to_str().unwrap(),
            ],
            needles,
        );
    }
    expect_one_line_error(
        &["run", "/nonexistent/spec.toml"],
        &["/nonexistent/spec.toml"],
    );
    // Nothing was created for a spec that did not parse.
    assert_eq!(
        std::fs::read_dir(&tmp.0)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().is_dir())
            .count(),
        0
    );
}

#[test]
fn gen_rejects_bad_input_in_one_sentence() {
    require_root!();
    expect_one_line_error(
        &["gen", "--iface", "nflabnoif0", "--count", "1"],
        &["nflabnoif0"],
    );
    expect_one_line_error(
        &["gen", "--iface", "lo", "--rate", "0"],
        &["--rate 0", "positive"],
    );
    expect_one_line_error(
        &["gen", "--iface", "lo", "--dst-ip", "192.0.2.1"],
        &["192.0.2.1", "198.18.0.0/15"],
    );
    expect_one_line_error(
        &[
            "gen",
            "--iface",
            "lo",
            "--frame-bytes",
            "40",
            "--count",
            "1",
        ],
        &["40", "64"],
    );
    expect_one_line_error(
        &[
            "gen",
            "--iface",
            "lo",
            "--frame-bytes",
            "70000",
            "--count",
            "1",
        ],
        &["70000", "MTU"],
    );
    expect_one_line_error(
        &["gen", "--iface", "lo", "--rate=-5", "--count", "1"],
        &["--rate -5", "positive"],
    );
    expect_one_line_error(
        &["gen", "--iface", "lo", "--pattern", "burst", "--burst", "0"],
        &["burst = 0"],
    );
    let tmp = TempDir::new("badtrace");
    let text = tmp.0.join("notes.txt");
    std::fs::write(&text, "hello\n").unwrap();
    // A classic pcap header announcing a 60-byte packet, cut off 2 bytes into it.
    let mut cut = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    cut.extend([0; 8]);
    cut.extend([0xff, 0xff, 0, 0, 1, 0, 0, 0]);
    cut.extend([1, 0, 0, 0, 0, 0, 0, 0, 60, 0, 0, 0, 60, 0, 0, 0, 1, 2]);
    let truncated = tmp.0.join("cut.pcap");
    std::fs::write(&truncated, cut).unwrap();
    for (trace, says) in [
        (&text, &["notes.txt", "not a pcap"][..]),
        (&truncated, &["cut.pcap", "truncated at byte 42"][..]),
    ] {
        let t = trace.to_str().unwrap();
        expect_one_line_error(
            &["gen", "--iface", "lo", "--pattern", "replay", "--trace", t],
            says,
        );
    }
}

/// `nflab gen --selfcheck` with every pattern, as a user runs it: all frames sent reach
/// the recorder, and the mean rate at the receiver is the configured one.
#[test]
fn gen_selfcheck_runs_every_pattern_from_the_command_line() {
    require_root!();
    let tmp = TempDir::new("patterns");
    // A classic pcap of 50 60-byte frames 1 ms apart: replayed at 1000 pps.
    let mut pcap = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    pcap.extend([0; 8]);
    pcap.extend([0xff, 0xff, 0, 0, 1, 0, 0, 0]);
    for i in 0..50u32 {
        pcap.extend(0u32.to_le_bytes());
        pcap.extend((i * 1000).to_le_bytes());
        pcap.extend(60u32.to_le_bytes());
        pcap.extend(60u32.to_le_bytes());
        pcap.extend([0u8; 60]);
    }
    let trace = tmp.0.join("t.pcap");
    std::fs::write(&trace, pcap).unwrap();
    let trace = trace.to_str().unwrap();
    let cases: [(&str, &[&str], f64); 6] = [
        ("cbr", &["--rate", "5000"], 5000.0),
        ("poisson", &["--rate", "5000"], 5000.0),
        ("burst", &["--rate", "5000", "--burst", "8"], 5000.0),
        (
            "onoff",
            &["--rate", "5000", "--on-ms", "20", "--off-ms", "20"],
            2500.0,
        ),
        (
            "periodic",
            &["--frequency-hz", "1000", "--per-cycle", "4"],
            4000.0,
        ),
        ("replay", &["--trace", trace, "--speed", "1"], 1000.0),
    ];
    for (pattern, flags, mean_pps) in cases {
        let out = nflab()
            .args(["gen", "--selfcheck", "--json", "--pattern", pattern])
            .args(["--duration", "1", "--warmup", "0"])
            .args(flags)
            .output()
            .unwrap();
        assert!(out.status.success(), "{pattern}: {}", stderr(&out));
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let sc = &r["selfcheck"];
        let sent = r["sent"].as_u64().unwrap();
        assert!(sent >= 40, "{pattern}: sent {sent}");
        assert_eq!(sc["packets"].as_u64(), Some(sent), "{pattern}: {sc}");
        // The rate of the whole run, from the receive stamps of the first and last probe.
        let achieved = sc["achieved_pps"].as_f64().unwrap();
        assert!(
            (achieved / mean_pps - 1.0).abs() < 0.25,
            "{pattern}: {achieved} pps at the receiver, {mean_pps} configured on average"
        );
    }
}

#[test]
fn without_root_run_says_so() {
    require_root!();
    require_tool!("setpriv", "util-linux");
    // Drop privileges with setpriv. The build tree may sit under a directory
    // that user nobody cannot enter (/root), so run a copy from a 0755 dir.
    let tmp = TempDir::new("noroot");
    let shared = tmp.0.join("bin");
    std::fs::create_dir_all(&shared).unwrap();
    let copy = shared.join("nflab");
    std::fs::copy(env!("CARGO_BIN_EXE_nflab"), &copy).unwrap();
    for dir in [&tmp.0, &shared] {
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let bin = copy.to_str().unwrap();
    let probe = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            bin,
            "--version",
        ])
        .output()
        .unwrap();
    assert!(
        probe.status.success(),
        "user nobody cannot run {bin}: {}",
        stderr(&probe)
    );
    let spec = write_spec(&tmp.0, "s", "[experiment]\nname = \"x\"\n");
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            bin,
            "run",
            spec.to_str().unwrap(),
            "--out",
            "/tmp",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("root") && err.lines().count() == 1, "{err}");

    // AF_XDP not permitted: one sentence, no fallback to another backend.
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", bin])
        .args([
            "gen",
            "--iface",
            "lo",
            "--backend",
            "af-xdp",
            "--count",
            "1",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("AF_XDP") && err.contains("run as root"),
        "{err}"
    );
}

#[test]
fn topo_up_status_down_and_gc_of_dead_owners() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let up = nflab()
        .args(["topo", "up", "--dut", "linux-router"])
        .output()
        .unwrap();
    assert!(up.status.success(), "{}", stderr(&up));
    let text = String::from_utf8_lossy(&up.stdout).to_string();
    let id = text
        .lines()
        .next()
        .unwrap()
        .strip_prefix("id ")
        .unwrap()
        .to_string();
    let lg = format!("nflab-{id}-lg");
    let dut = format!("nflab-{id}-dut");

    // An orphan: a namespace named for a pid that cannot exist.
    let orphan = "nflab-4194999-0-lg";
    assert!(Command::new("ip")
        .args(["netns", "add", orphan])
        .status()
        .unwrap()
        .success());

    let status = nflab().args(["topo", "status"]).output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(status.contains(&lg) && status.contains("kept"), "{status}");
    assert!(
        status.contains(orphan) && status.contains("gone"),
        "{status}"
    );

    let gc = nflab().args(["topo", "gc"]).output().unwrap();
    let gc_out = String::from_utf8_lossy(&gc.stdout).to_string();
    let list = String::from_utf8_lossy(
        &Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .to_string();
    // Clean up before asserting, so a failure leaves nothing behind.
    let down = nflab().args(["topo", "down", &id]).output().unwrap();
    let _ = Command::new("ip").args(["netns", "del", orphan]).status();
    assert!(gc_out.contains(orphan), "gc: {gc_out}");
    assert!(
        list.contains(&lg) && list.contains(&dut),
        "gc removed a kept topology: {list}"
    );
    assert!(!list.contains(orphan));
    assert!(down.status.success(), "{}", stderr(&down));
    let after = String::from_utf8_lossy(
        &Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .to_string();
    assert!(!after.contains(&lg) && !after.contains(&dut), "{after}");
}

#[test]
fn analyze_csv_known_answer() {
    let tmp = TempDir::new("csv");
    let csv = tmp.0.join("t.csv");
    // Latencies 1..=10 µs for seq 0..9, seq 4 lost, seq 7 before 6.
    let mut body = String::from("seq,tx_ns,rx_ns\n");
    for seq in [0u64, 1, 2, 3, 5, 7, 6, 8, 9] {
        let tx = 1_000_000 * seq;
        body.push_str(&format!("{seq},{tx},{}\n", tx + 1_000 * (seq + 1)));
    }
    std::fs::write(&csv, body).unwrap();
    let out = nflab()
        .args([
            "analyze",
            csv.to_str().unwrap(),
            "--json",
            "--anomaly",
            "2:7us",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["packets"]["sent"], 10);
    assert_eq!(s["packets"]["received"], 9);
    assert_eq!(s["packets"]["lost"], 1);
    assert_eq!(s["packets"]["reordered"], 1);
    assert_eq!(s["latency_ns"]["min"], 1_000);
    assert_eq!(s["latency_ns"]["max"], 10_000);
    // Nearest rank: p50 of 9 values is the 5th smallest: 1,2,3,4,6,7,8,9,10 -> 6 µs.
    assert_eq!(s["latency_ns"]["p50"], 6_000);
    // Latency >= 7 µs at seq 6,7,8,9 (consecutive): one anomaly of 4 packets.
    assert_eq!(s["anomalies"][0]["count"], 1);
    assert_eq!(s["anomalies"][0]["longest"], 4);
}

#[test]
fn analyze_anomalies_only_known_answer_and_bad_input() {
    let tmp = TempDir::new("trex");
    let data = tmp.0.join("t.data");
    // 1 µs apart, latency 10 µs except 300 µs at positions 5..8 and 20..21
    // and 400 µs at 30 (too short for n = 2).
    let mut bytes = Vec::new();
    for i in 0..40u32 {
        let tx = 2.0 + f64::from(i) * 1e-6;
        let lat = match i {
            5..=7 | 20..=21 => 300e-6,
            30 => 400e-6,
            _ => 10e-6,
        };
        bytes.extend(tx.to_le_bytes());
        bytes.extend((tx + lat).to_le_bytes());
    }
    std::fs::write(&data, bytes).unwrap();
    let out = nflab()
        .args([
            "analyze",
            data.to_str().unwrap(),
            "--json",
            "--anomalies-only",
        ])
        .args(["--threads", "2", "--anomaly", "2:250us"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["packets"]["received"], 40);
    assert_eq!(s["latency_ns"]["min"], 10_000);
    assert_eq!(s["latency_ns"]["max"], 400_000);
    assert_eq!(s["anomalies"][0]["count"], 2);
    assert_eq!(s["anomalies"][0]["packets"], 5);
    let ev = &s["anomaly_details"][0]["events"];
    assert_eq!(
        (ev[0]["start_seq"].as_u64(), ev[0]["packets"].as_u64()),
        (Some(5), Some(3))
    );
    assert_eq!(
        (ev[1]["start_seq"].as_u64(), ev[1]["packets"].as_u64()),
        (Some(20), Some(2))
    );
    assert!(
        s["jitter_ns"]["rfc3550"].is_null(),
        "not computed must be null"
    );
    // The same bytes on standard input through the full pass.
    let mut child = nflab()
        .args([
            "analyze",
            "-",
            "--format",
            "trex",
            "--json",
            "--anomaly",
            "2:250us",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let bytes = std::fs::read(&data).unwrap();
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let full: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(full["anomaly_details"][0]["events"], *ev);
    assert_eq!(full["packets"]["received"], 40);
    assert!(!full["jitter_ns"]["rfc3550"].is_null());
    let nfr = tmp.0.join("r.nfr");
    std::fs::write(&nfr, b"x").unwrap();
    expect_one_line_error(
        &["analyze", nfr.to_str().unwrap(), "--anomalies-only"],
        &["--anomalies-only reads TRex-fork files", "r.nfr"],
    );
    expect_one_line_error(
        &[
            "analyze",
            data.to_str().unwrap(),
            "--anomalies-only",
            "--worst",
            "5",
        ],
        &["cannot honour --worst"],
    );
}

#[test]
fn model_resource_json_contract() {
    let out = nflab()
        .args([
            "model",
            "resource",
            "--cpu-hz",
            "3.3e9",
            "--cores",
            "1",
            "--cycles-per-packet",
            "450",
            "--link-bps",
            "10e9",
            "--frame-bytes",
            "64",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = v["t_max_pps"].as_f64().unwrap();
    assert!((t - 7.333e6).abs() < 1e4, "{t}");
    assert_eq!(v["bound"], "cpu");
}

#[test]
fn doctor_reports_capabilities_and_noise_floor() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("doctor");
    let timer_out = tmp.0.join("timer-floor.json");
    let child = nflab()
        .args([
            "doctor",
            "--json",
            "--noise-seconds",
            "1",
            "--timer-seconds",
            "0.5",
        ])
        .arg("--timer-out")
        .arg(&timer_out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(namespaces_of(pid).is_empty());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let checks = v["checks"].as_array().unwrap();
    let ok = |name: &str| {
        checks
            .iter()
            .find(|c| c["name"] == name)
            .map(|c| c["ok"].as_bool().unwrap())
    };
    assert_eq!(ok("root"), Some(true));
    assert_eq!(ok("af_packet"), Some(true));
    assert!(ok("netem").is_some() && ok("xdp_on_veth").is_some() && ok("af_xdp").is_some());
    let nf = &v["noise_floor"];
    assert!(nf["received"].as_u64().unwrap() > 5_000, "{nf}");
    let (p50, p99, max) = (
        nf["p50_ns"].as_i64().unwrap(),
        nf["p99_ns"].as_i64().unwrap(),
        nf["max_ns"].as_i64().unwrap(),
    );
    assert!(0 < p50 && p50 <= p99 && p99 <= max, "{nf}");
    // The timer floor: 1-ms holds every 5 ms for 0.5 s, never early; the
    // per-period values only in the file.
    let tf = &v["timer_floor"];
    let periods = tf["periods"].as_u64().unwrap();
    assert!((50..=100).contains(&periods), "{tf}");
    assert_eq!(
        tf["lateness_ns"]["count"].as_u64(),
        Some(2 * periods),
        "{tf}"
    );
    assert!(tf["lateness_ns"]["p50"].as_i64().unwrap() >= 0, "{tf}");
    assert!(tf.get("half_excess_ns").is_none(), "{tf}");
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&timer_out).unwrap()).unwrap();
    assert_eq!(
        file["half_excess_ns"].as_array().map(Vec::len),
        Some(periods as usize)
    );
    assert_eq!(file["hold_us"], 1000.0);
    // Flags that do not fit are one sentence and exit 2, before anything runs.
    let bad = nflab()
        .args([
            "doctor",
            "--timer-hold-us",
            "3000",
            "--timer-period-ms",
            "5",
        ])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    let msg = stderr(&bad);
    assert!(
        msg.contains("--timer-period-ms 5")
            && msg.contains("at least 6 ms")
            && msg.lines().count() == 1,
        "{msg}"
    );
}

#[test]
fn kill_9_then_resume_completes_with_the_same_table_shape() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("resume");
    let spec = write_spec(
        &tmp.0,
        "r",
        "[experiment]\nname = \"r\"\n[dut]\nkind = \"loopback\"\n[traffic]\nduration_s = 1.5\nwarmup_s = 0\n[sweep]\n\"traffic.rate_pps\" = [2000, 4000, 6000]\n",
    );
    let mut child = nflab()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--out",
            tmp.0.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Kill it hard while run 001 is recording (000 is complete by then).
    let start = Instant::now();
    let exp = loop {
        let found = std::fs::read_dir(&tmp.0)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| p.join("runs/001/records.nfr").exists());
        if let Some(p) = found {
            break p;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "run 001 never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(exp.join("runs/000/.complete").exists());
    assert!(!exp.join("runs/001/.complete").exists());
    let kept_summary = std::fs::read_to_string(exp.join("runs/000/summary.json")).unwrap();

    // The killed run left its namespaces; resume removes them and finishes.
    let out = nflab()
        .args(["run", "--resume", exp.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(namespaces_of(pid).is_empty(), "{:?}", namespaces_of(pid));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["resumed_runs"], 1);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for (i, rate) in [2000.0, 4000.0, 6000.0].iter().enumerate() {
        assert_eq!(runs[i]["run"], format!("{i:03}"));
        assert_eq!(runs[i]["summary"]["rate"]["offered_pps"], *rate);
        assert!(exp.join(format!("runs/{i:03}/.complete")).exists());
    }
    // The complete run was kept as it was, not redone.
    assert_eq!(
        std::fs::read_to_string(exp.join("runs/000/summary.json")).unwrap(),
        kept_summary
    );
    // Redone run 001 is whole: exactly rate × duration measured packets.
    let s1: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(exp.join("runs/001/summary.json")).unwrap())
            .unwrap();
    assert_eq!(s1["packets"]["sent"], 6000);
    assert_eq!(s1["interrupted"], false);
    assert!(exp.join("env-resume-1.json").exists());
}

#[test]
fn knobs_are_applied_recorded_reverted_and_replications_compare() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("knobs");
    let knob = "/proc/sys/net/core/busy_read";
    let original = std::fs::read_to_string(knob).unwrap().trim().to_string();
    let target = if original == "37" { "38" } else { "37" };
    let spec = write_spec(
        &tmp.0,
        "k",
        &format!(
            "[experiment]\nname = \"k\"\n[dut]\nkind = \"loopback\"\n[traffic]\nrate_pps = 5000\nduration_s = 0.4\nwarmup_s = 0\n[knobs]\nsysctl = {{ \"net.core.busy_read\" = {target}, \"net.core.nflab_no_such_knob\" = 1 }}\n[sweep]\n\"traffic.frame_bytes\" = [64, 128]\n"
        ),
    );
    let mut dirs = Vec::new();
    for _ in 0..2 {
        let out = nflab()
            .args([
                "run",
                spec.to_str().unwrap(),
                "--out",
                tmp.0.to_str().unwrap(),
                "--json",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        dirs.push(PathBuf::from(v["dir"].as_str().unwrap()));
        // Distinct timestamped directories even when runs are quick.
        std::thread::sleep(Duration::from_millis(1100));
    }
    assert_eq!(
        std::fs::read_to_string(knob).unwrap().trim(),
        original,
        "knob not reverted"
    );
    let records: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dirs[0].join("runs/000/knobs.json")).unwrap(),
    )
    .unwrap();
    let busy = records
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "net.core.busy_read")
        .unwrap();
    assert_eq!(busy["status"], "applied");
    assert_eq!(busy["applied"], target);
    assert_eq!(busy["reverted"], original);
    let missing = records
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "net.core.nflab_no_such_knob")
        .unwrap();
    assert_eq!(missing["status"], "unsupported");
    let system: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dirs[0].join("runs/000/system.json")).unwrap(),
    )
    .unwrap();
    assert!(system["delta"]["seconds"].as_f64().unwrap() > 0.3);

    let out = nflab()
        .args([
            "compare",
            dirs[0].to_str().unwrap(),
            dirs[1].to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = c.as_array().unwrap();
    assert_eq!(c.len(), 2, "one comparison per frame size");
    for x in c {
        assert_eq!(x["a"]["samples"], 2000);
        let p = x["ks_p"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&p));
        let q = &x["a"]["quantiles"][0];
        assert!(
            q["low"].as_i64() <= q["value"].as_i64() && q["value"].as_i64() <= q["high"].as_i64()
        );
    }
}

#[test]
fn topology_is_rebuilt_per_run_unless_kept() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("keep");
    let ids = |keep: bool| -> Vec<String> {
        let spec = write_spec(
            &tmp.0,
            &format!("keep{keep}"),
            &format!(
                "[experiment]\nname = \"keep{keep}\"\nrepetitions = 2\n[topology]\nkeep = {keep}\n[dut]\nkind = \"linux-router\"\n[traffic]\nrate_pps = 2000\nduration_s = 0.3\nwarmup_s = 0\n[sweep]\n\"dut.kind\" = [\"linux-router\", \"linux-bridge\"]\n"
            ),
        );
        let child = nflab()
            .args([
                "run",
                spec.to_str().unwrap(),
                "--out",
                tmp.0.to_str().unwrap(),
                "--json",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            namespaces_of(pid).is_empty(),
            "kept topology not removed at the end"
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let dir = PathBuf::from(v["dir"].as_str().unwrap());
        (0..4)
            .map(|i| {
                let t: serde_json::Value = serde_json::from_str(
                    &std::fs::read_to_string(dir.join(format!("runs/{i:03}/topology.json")))
                        .unwrap(),
                )
                .unwrap();
                assert_eq!(v["runs"][i]["summary"]["packets"]["lost"], 0);
                t["id"].as_str().unwrap().to_string()
            })
            .collect()
    };
    let fresh = ids(false);
    assert_eq!(
        fresh
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        4,
        "{fresh:?}"
    );
    // Kept: the two repetitions of each DuT share one topology; a new DuT gets a new one.
    let kept = ids(true);
    assert_eq!(kept[0], kept[1], "{kept:?}");
    assert_eq!(kept[2], kept[3], "{kept:?}");
    assert_ne!(kept[1], kept[2], "{kept:?}");
}

#[test]
fn model_batch_and_sim_contracts_and_bad_input() {
    let tmp = TempDir::new("model");
    // DESIGN §3.6: the batch model's JSON carries these keys, all finite.
    let out = nflab().args(["model", "batch", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in ["loss_probability", "mean_batch_size", "mean_sojourn_ns"] {
        let x = v[key].as_f64().unwrap_or(f64::NAN);
        assert!(x.is_finite() && x >= 0.0, "{key} = {}", v[key]);
    }
    assert!(v["loss_probability"].as_f64().unwrap() <= 1.0);

    // The simulator writes records that `nflab analyze` reads like measured ones.
    let nfr = tmp.0.join("sim.nfr");
    let out = nflab()
        .args([
            "model",
            "sim",
            "--arrivals",
            "poisson",
            "--rate-pps",
            "200000",
            "--packets",
            "20000",
            "--out",
            nfr.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let out = nflab()
        .args(["analyze", nfr.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["packets"]["sent"], 20_000);
    assert!(s["latency_ns"]["p50"].as_i64().unwrap() > 0);

    // Bad input: one sentence naming the flag, non-zero exit, never NaN.
    for args in [
        &["model", "batch", "--rate-pps", "-5"][..],
        &["model", "sim", "--rate-pps", "0"][..],
        &[
            "model",
            "resource",
            "--cycles-per-packet",
            "450",
            "--cores",
            "0",
        ][..],
    ] {
        let out = nflab().args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} should fail");
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("NaN"));
    }
}

#[test]
fn a_full_disk_is_one_sentence_and_keeps_completed_runs() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("full");
    let mnt = tmp.0.join("disk");
    std::fs::create_dir_all(&mnt).unwrap();
    // A 300 KiB disk: run 000 (100 records) fits, run 001 (20 000) does not.
    if !Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            "size=300k",
            "tmpfs",
            mnt.to_str().unwrap(),
        ])
        .status()
        .unwrap()
        .success()
    {
        panic!("cannot mount a tmpfs on {mnt:?} (this test needs root and tmpfs)");
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.clone());
    let knob = "/proc/sys/net/core/busy_read";
    let original = std::fs::read_to_string(knob).unwrap();
    let spec = write_spec(
        &tmp.0,
        "full",
        "[experiment]\nname = \"full\"\n[dut]\nkind = \"loopback\"\n[traffic]\nduration_s = 1\nwarmup_s = 0\n[knobs]\nsysctl = { \"net.core.busy_read\" = 9 }\n[sweep]\n\"traffic.rate_pps\" = [100, 20000]\n",
    );
    let child = nflab()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--out",
            mnt.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("No space left on device") && err.contains("runs/001"),
        "{err}"
    );
    assert!(namespaces_of(pid).is_empty());
    assert_eq!(
        std::fs::read_to_string(knob).unwrap(),
        original,
        "knob not reverted"
    );
    let exp = std::fs::read_dir(&mnt)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .unwrap();
    assert!(exp.join("runs/000/.complete").exists());
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(exp.join("runs/000/summary.json")).unwrap())
            .unwrap();
    assert_eq!(s["packets"]["received"], 100);
}

#[test]
fn run_with_xdp_live_frames_records_kernel_stamped_probes() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("live");
    let spec = write_spec(
        &tmp.0,
        "live",
        "[experiment]\nname = \"live\"\n[dut]\nkind = \"linux-router\"\n[traffic]\n\
         backend = \"xdp_live\"\nrate_pps = \"max\"\nduration_s = 1\nwarmup_s = 0.2\n",
    );
    let run = run_first(&spec, &tmp.0);
    let gen = read_json(run.join("gen.json"));
    assert_eq!(gen["backend"], "xdp_live");
    assert_eq!(gen["tx_timestamp"], "kernel-xdp");
    let summary = read_json(run.join("summary.json"));
    // At the maximum rate the router and the recorder drop some; what arrives
    // is counted against what was sent, and carries kernel stamps.
    let p = &summary["packets"];
    let received = p["received"].as_u64().unwrap();
    assert!(received > 10_000, "{summary}");
    assert_eq!(
        p["received"].as_u64().unwrap() + p["lost"].as_u64().unwrap(),
        p["sent"].as_u64().unwrap()
    );
    assert!(summary["latency_ns"]["min"].as_i64().unwrap() > 0);

    // Socket TX stamps on top of the program's own, a paced pattern, or more than one
    // flow: each refused in one sentence.
    for (name, traffic, want) in [
        (
            "live3",
            "tx_timestamp = \"kernel\"\nrate_pps = \"max\"",
            ["xdp_live", "tx_timestamp"],
        ),
        ("live1", "rate_pps = 1000", ["xdp_live", "rate = \"max\""]),
        (
            "live2",
            "flows = 4\nrate_pps = \"max\"",
            ["xdp_live", "one flow"],
        ),
    ] {
        let spec = write_spec(
            &tmp.0,
            name,
            &format!(
                "[experiment]\nname = \"{name}\"\n[traffic]\nbackend = \"xdp_live\"\n\
                 {traffic}\nduration_s = 1\n"
            ),
        );
        expect_one_line_error(
            &[
                "run",
                spec.to_str().unwrap(),
                "--out",
                tmp.0.to_str().unwrap(),
            ],
            &want,
        );
    }
}

#[test]
fn nflab_data_plane_forwards_with_each_port_kind_and_under_live_frames() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("dp");
    // (io, generator backend line, expected port backend in dut.json)
    let cases = [
        ("auto", "", "af_xdp"),
        ("af_packet", "", "af_packet"),
        // Live frames into an AF_XDP DuT: dut0 already carries the DuT's program.
        (
            "af_xdp",
            "backend = \"xdp_live\"\nrate_pps = \"max\"\n",
            "af_xdp",
        ),
    ];
    for (k, (io, gen, backend)) in cases.iter().enumerate() {
        let rate = if gen.is_empty() {
            "rate_pps = 5000\n"
        } else {
            ""
        };
        let spec = write_spec(
            &tmp.0,
            &format!("dp{k}"),
            &format!(
                "[experiment]\nname = \"dp{k}\"\n[dut]\nkind = \"nflab\"\npipeline = [\"l2fwd\"]\n\
                 io = \"{io}\"\n[traffic]\n{gen}{rate}duration_s = 1\nwarmup_s = 0.2\n"
            ),
        );
        let run = run_first(&spec, &tmp.0);
        let dut = read_json(run.join("dut.json"));
        for p in dut["ports"].as_array().unwrap() {
            assert_eq!(p["backend"], *backend, "{io}: {dut}");
        }
        let s = read_json(run.join("summary.json"));
        let p = &s["packets"];
        let (sent, received) = (p["sent"].as_u64().unwrap(), p["received"].as_u64().unwrap());
        if gen.is_empty() {
            // 5 kpps through an idle l2fwd: everything arrives.
            assert_eq!(received, sent, "{io}: {s}");
        } else {
            // Saturated: the DuT forwards what it can, all of it counted.
            assert!(received > 1_000, "{io}: {s}");
            assert_eq!(received + p["lost"].as_u64().unwrap(), sent, "{io}: {s}");
        }
        assert_eq!(
            dut["worker"]["pool_allocations"], 0,
            "{io}: the packet pool was big enough"
        );
    }
}

#[test]
fn two_data_plane_workers_each_own_a_queue() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("dpw");
    // Two AF_XDP generator threads send on queues 0 and 1 of lg0; on veth a frame
    // arrives on the peer's queue of the same number, where worker 0 or 1 waits.
    let spec = write_spec(
        &tmp.0,
        "dpw",
        "[experiment]\nname = \"dpw\"\n[dut]\nkind = \"nflab\"\n\
         pipeline = [\"extern-dispatch\", \"l2fwd\"]\nworkers = 2\n\
         [dut.extern_dispatch]\nmode = \"roundtrip\"\nbase_vid = 20\nmask = 0xffc\n\
         [traffic]\nbackend = \"af_xdp\"\ntx_threads = 2\nrate_pps = 4000\n\
         duration_s = 1\nwarmup_s = 0.2\n",
    );
    let run = run_first(&spec, &tmp.0);
    let dut = read_json(run.join("dut.json"));
    let s = read_json(run.join("summary.json"));
    let p = &s["packets"];
    assert_eq!(p["received"], p["sent"], "{s}");
    let workers = dut["per_worker"].as_array().expect("per-worker counters");
    assert_eq!(workers.len(), 2);
    let rx: Vec<u64> = workers
        .iter()
        .map(|w| w["ports"][0]["rx_packets"].as_u64().unwrap())
        .collect();
    assert!(rx.iter().all(|&n| n > 0), "both workers received: {rx:?}");
    assert_eq!(
        dut["ports"][0]["rx_packets"].as_u64().unwrap(),
        rx[0] + rx[1]
    );
    // Worker i is extern instance i: what it received for other instances is counted
    // as such, and the merged per-instance counts add up to everything received.
    for (i, w) in workers.iter().enumerate() {
        let d = &w["apps"][0]["detail"];
        let mine = d["per_instance"][i].as_u64().unwrap();
        assert_eq!(d["other_instance"].as_u64().unwrap(), rx[i] - mine, "{d}");
    }
    let per_instance: u64 = dut["apps"][0]["detail"]["per_instance"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(per_instance, rx[0] + rx[1]);
}

#[test]
fn report_numbers_are_nflab_analyze_json_field_by_field() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("engine");
    // The quickstart's six runs, shorter.
    let quickstart = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/quickstart.toml"),
    )
    .unwrap();
    let body = quickstart.replace("duration_s = 3", "duration_s = 1");
    assert_ne!(body, quickstart, "the quickstart's duration line changed");
    let spec = write_spec(&tmp.0, "quickstart", &body);
    let out = nflab()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--out",
            tmp.0.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "nflab run failed: {}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("artifacts:"))
        .unwrap_or_else(|| panic!("no artifacts line: {stdout}"));
    let dir = PathBuf::from(line.trim_start_matches("artifacts:").trim());
    let analysis = read_json(dir.join("figures/analysis.json"));
    let command = analysis["command"].as_str().unwrap();
    let runs = analysis["runs"].as_object().unwrap();
    assert_eq!(runs.len(), 6, "{:?}", runs.keys());
    for (name, report) in runs {
        let records = dir.join("runs").join(name).join("records.nfr");
        let words: Vec<&str> = command.split_whitespace().collect();
        assert_eq!(words[..2], ["nflab", "analyze"]);
        let out = nflab().args(&words[1..]).arg(&records).output().unwrap();
        assert!(
            out.status.success(),
            "{command} {}: {}",
            records.display(),
            stderr(&out)
        );
        let cli: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let cli = cli.as_object().unwrap();
        for (k, v) in cli {
            assert_eq!(&report[k], v, "run {name}: field {k}");
        }
        assert_eq!(report.as_object().unwrap().len(), cli.len(), "run {name}");
    }
}
