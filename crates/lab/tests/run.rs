//! One run and a study as a library caller sees them, on real namespaces (root): the
//! model fit of `[model]` written by `run_experiment` itself, and a DuT that a run
//! drops early (an error elsewhere) gone with its threads.
//!
//! Run: `sudo -E cargo test -p nflab-lab --test run -- --nocapture`

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use nflab_lab::dut::driver;
use nflab_lab::run_experiment;
use nflab_lab::spec::{DutKind, DutSection};

mod common;
use common::{json, options, our_namespaces, serial};

fn tmp(tag: &str) -> PathBuf {
    common::tmp("run", tag)
}

/// Threads of this process named `name`.
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(Result::ok)
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name))
        .count()
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
    let opts = options(&dir, None);
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
    let dir = tmp("relay");
    let dut = driver(DutKind::UdpRelay)
        .start(&topo, &section, 1, &dir)
        .expect("the relay starts");
    assert_eq!(threads_named("nflab-relay"), before + 1);
    // What an early `?` in a run does: no stop, no dut.json, no thread left.
    drop(dut);
    assert_eq!(threads_named("nflab-relay"), before);
    drop(topo);
    assert!(our_namespaces().is_empty(), "{:?}", our_namespaces());
    std::fs::remove_dir_all(&dir).expect("clean up");
}
