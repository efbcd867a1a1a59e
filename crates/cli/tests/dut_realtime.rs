//! `dut.realtime` per DuT kind through `nflab run` (root, real namespaces): the udp
//! relay's thread runs under SCHED_FIFO (read from /proc while it runs, and recorded in
//! dut.json), and a kind where nflab runs no thread of the DuT's refuses the key in one
//! sentence with exit 2, before anything is created.

use std::process::Stdio;
use std::time::{Duration, Instant};

#[macro_use]
mod common;
use common::{namespaces_of, nflab, read_json, stderr, write_spec, TempDir};

const RELAY: &str = r#"
[experiment]
name = "relay-rt"
[dut]
kind = "udp-relay"
realtime = true
[traffic]
backend = "af_packet"
rate_pps = 500
frame_bytes = 128
duration_s = 2
warmup_s = 0.1
"#;

/// Scheduling policy (stat field 41: 1 = SCHED_FIFO) of the thread of `pid` named `comm`.
fn policy_of_thread(pid: u32, comm: &str) -> Option<u32> {
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let dir = task.path();
        let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if name.trim() != comm {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        // Fields after the command's closing parenthesis start at field 3.
        let rest = &stat[stat.rfind(')')? + 2..];
        return rest.split_whitespace().nth(41 - 3)?.parse().ok();
    }
    None
}

#[test]
fn the_udp_relay_runs_under_sched_fifo_and_a_kernel_dut_refuses_the_key() {
    require_root!();
    let tmp = TempDir::new("dut-rt");
    let spec = write_spec(&tmp.0, "relay", RELAY);
    let mut child = nflab()
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
    let start = Instant::now();
    let mut policy = None;
    while policy.is_none() && start.elapsed() < Duration::from_secs(60) {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        policy = policy_of_thread(pid, "nflab-relay");
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(namespaces_of(pid).is_empty());
    assert_eq!(
        policy,
        Some(1),
        "the relay thread's policy (1 = SCHED_FIFO)"
    );
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let dir = std::path::PathBuf::from(result["dir"].as_str().unwrap());
    let dut = read_json(dir.join("runs/000/dut.json"));
    assert_eq!(dut["realtime"], true, "{dut}");

    // A kernel DuT: one sentence naming the key and the kind, exit 2, nothing created.
    let bad = write_spec(
        &tmp.0,
        "router",
        &RELAY
            .replace("udp-relay", "linux-router")
            .replace("relay-rt", "router-rt"),
    );
    let out = nflab()
        .args([
            "run",
            bad.to_str().unwrap(),
            "--out",
            tmp.0.join("bad").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("dut.realtime = true does not apply to dut.kind = \"linux-router\""),
        "{err}"
    );
    assert!(
        !tmp.0.join("bad").exists() || std::fs::read_dir(tmp.0.join("bad")).unwrap().count() == 0
    );
}
