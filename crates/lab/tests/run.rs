//! One run and a study as a library caller sees them, on real namespaces (root): the
//! model fit of `[model]` written by `run_experiment` itself, and a DuT that a run
//! drops early (an error elsewhere) gone with its threads.
//!
//! Run: `sudo -E cargo test -p nflab-lab --test run -- --nocapture`

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use nflab_lab::dut::driver;
use nflab_lab::spec::{DutKind, DutSection};
use nflab_lab::{run_experiment, RunOptions};

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nflab-run-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

fn our_namespaces() -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    let me = format!("nflab-{}-", std::process::id());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(&me))
        .map(str::to_string)
        .collect()
}

/// One test at a time: each counts this process's namespaces and threads.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Threads of this process named `name`.
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(Result::ok)
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name))
        .count()
}

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("json")
}

#[test]
fn run_experiment_as_a_library_writes_the_model_predictions_as_nflab_run_does() {
    if !nflab_testkit::require_root() {
        return;
    }
    let _one = serial();
    let dir = tmp("model");
    let spec = dir.join("spec.toml");
    std::fs::write(
        &spec,
        "[experiment]\nname = \"model\"\n\
         [traffic]\nbackend = \"af_packet\"\nrate_pps = 2000\nduration_s = 0.5\nwarmup_s = 0.1\n\
         [sweep]\n\"dut.kind\" = [\"loopback\", \"linux-router\"]\n\
         [model]\nsim_packets = 2000\n",
    )
    .expect("spec");
    let opts = RunOptions {
        out: dir.clone(),
        resume: None,
        progress: false,
        version: "test".into(),
        commit: "test".into(),
        after_failure: None,
        events: Default::default(),
        allow_include_outside: false,
    };
    let r = run_experiment(&spec, &opts, Arc::new(AtomicBool::new(false))).expect("the study");
    assert!(our_namespaces().is_empty(), "{:?}", our_namespaces());
    let fit = r.model.expect("a fit of [model]");
    assert_eq!(fit.path, r.dir.join("model.json"));
    let m = json(&fit.path);
    assert_eq!(m["source"], "nflab run ([model] of the spec)");
    assert_eq!(m["method"], fit.method.as_str());
    // The loopback run is the baseline; the router's run gets the prediction.
    let predicted: Vec<&str> = m["predictions"]
        .as_array()
        .expect("predictions")
        .iter()
        .filter_map(|p| p["run"].as_str())
        .collect();
    assert_eq!(predicted, ["001"], "{m}");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn a_running_dut_dropped_before_its_stop_takes_its_threads_with_it() {
    if !nflab_testkit::require_root() {
        return;
    }
    let _one = serial();
    let topo = nflab_lab::dut::topology(DutKind::UdpRelay, 1).expect("topology");
    let section = DutSection {
        kind: DutKind::UdpRelay,
        ..DutSection::default()
    };
    let before = threads_named("nflab-relay");
    let dut = driver(DutKind::UdpRelay)
        .start(&topo, &section, 1)
        .expect("the relay starts");
    assert_eq!(threads_named("nflab-relay"), before + 1);
    // What an early `?` in a run does: no stop, no dut.json, no thread left.
    drop(dut);
    assert_eq!(threads_named("nflab-relay"), before);
    drop(topo);
    assert!(our_namespaces().is_empty(), "{:?}", our_namespaces());
}
