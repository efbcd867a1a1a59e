//! DuT kind `testpmd` end to end: `nflab run` drives DPDK's dpdk-testpmd
//! (Debian package dpdk-dev) with the same generator and recorder as every
//! other DuT. Needs root and dpdk-testpmd (scripts/deps.sh test installs
//! dpdk-dev); without dpdk-testpmd the test fails naming the package. The
//! missing-binary message is checked where it is not installed (nflab never
//! searches PATH for it), a wrong `NFLAB_TESTPMD` everywhere.

use std::path::PathBuf;

#[macro_use]
mod common;
use common::{nflab, read_json, run_ok, stderr, TempDir};

const SPEC: &str = r#"
[experiment]
name = "e2e-testpmd"

[dut]
kind = "testpmd"

[traffic]
rate_pps = 20000
frame_bytes = 64
duration_s = 1
warmup_s = 0.2

[sweep]
"dut.io" = ["af_xdp", "af_packet"]
"#;

#[test]
fn testpmd_forwards_and_its_counters_land_in_dut_json() {
    require_root!();
    require_tool!("dpdk-testpmd", "dpdk-dev");
    let tmp = TempDir::new("testpmd");
    let spec = tmp.0.join("spec.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let (_, result, pid) = run_ok(&spec, &tmp.0);
    // EAL's run-time files of this run's testpmd are gone too.
    let left: Vec<_> = std::fs::read_dir("/var/run/dpdk")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with(&format!("nflab-{pid}-")))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");

    let dir = PathBuf::from(result["dir"].as_str().unwrap());
    for (run, io) in [("000", "af_xdp"), ("001", "af_packet")] {
        let r = dir.join("runs").join(run);
        let dut = read_json(r.join("dut.json"));
        let summary = read_json(r.join("summary.json"));
        assert_eq!(dut["kind"], "testpmd");
        assert_eq!(dut["settings"]["io"], io);
        assert!(dut["error"].is_null(), "{}", dut["error"]);
        let received = summary["packets"]["received"].as_u64().unwrap();
        assert!(received > 0, "{io}: nothing forwarded");
        // testpmd sent every probe the recorder saw (and the readiness probes).
        let tx = dut["ports"][1]["tx_packets"].as_u64().unwrap();
        assert!(
            tx >= received,
            "{io}: testpmd sent {tx} < {received} received"
        );
        assert_eq!(dut["total"]["tx_packets"], dut["ports"][1]["tx_packets"]);
        let cpp = dut["worker"]["cycles_per_packet"].as_f64().unwrap();
        assert!(cpp > 0.0, "{io}: cycles/packet {cpp}");
        assert_eq!(
            dut["worker"]["packets"].as_u64(),
            dut["total"]["rx_packets"].as_u64()
        );
        let log = std::fs::read_to_string(r.join("testpmd.log")).unwrap();
        assert!(log.contains("CPU cycles/packet="), "{io}: {log}");
    }
}

#[test]
fn a_missing_testpmd_is_one_sentence_naming_the_package() {
    let tmp = TempDir::new("testpmd-missing");
    let spec = tmp.0.join("spec.toml");
    std::fs::write(&spec, SPEC).unwrap();
    // Not in the system's directories (PATH is never searched): the package
    // to install. Only where it is not installed.
    let installed = [
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
        "/usr/local/sbin",
        "/usr/local/bin",
    ]
    .iter()
    .any(|d| std::path::Path::new(d).join("dpdk-testpmd").exists());
    let missing = (
        vec![("PATH", "/nonexistent"), ("NFLAB_TESTPMD", "")],
        "apt-get install dpdk-dev",
    );
    // A wrong override: the variable to fix.
    let wrong = (
        vec![("NFLAB_TESTPMD", "/nonexistent/dpdk-testpmd")],
        "NFLAB_TESTPMD",
    );
    for (env, want) in (!installed).then_some(missing).into_iter().chain([wrong]) {
        let out = nflab()
            .args(["run", spec.to_str().unwrap(), "--out"])
            .arg(&tmp.0)
            .envs(env)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "one line expected: {err}");
        assert!(err.contains(want), "'{want}' not in: {err}");
    }
}
