//! The eBPF monitors on real namespaces (root), through whole `nflab run`
//! experiments: the in-stack UDP monitor against the udp-relay's own times
//! (seed 003's accuracy goal), and the stage breakdown of a linux-router against
//! the recorder's end-to-end latency.
//!
//! Run: `sudo -E cargo test -p nflab-lab --test monitor -- --nocapture --test-threads 1`
//! (each test prints what it measured).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use nflab_lab::experiment::{run_experiment, RunOptions};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::RowAccessor;

/// A directory of the test's own under the target dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let p =
            std::env::temp_dir().join(format!("nflab-monitor-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("scratch dir");
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run(spec: &str, scratch: &Scratch) -> PathBuf {
    let path = scratch.0.join("spec.toml");
    std::fs::write(&path, spec).expect("write spec");
    let opts = RunOptions {
        out: scratch.0.join("out"),
        resume: None,
        progress: false,
        version: "test".into(),
        commit: "test".into(),
        after_failure: None,
        events: Default::default(),
    };
    run_experiment(&path, &opts, Arc::new(AtomicBool::new(false)))
        .expect("the experiment runs")
        .dir
}

/// Every column of a parquet file as i64 (nulls as None), by name.
fn columns(path: &Path) -> HashMap<String, Vec<Option<i64>>> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader = SerializedFileReader::new(file).expect("parquet");
    let names: Vec<String> = reader
        .metadata()
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    let mut out: HashMap<String, Vec<Option<i64>>> =
        names.iter().map(|n| (n.clone(), Vec::new())).collect();
    for row in reader.get_row_iter(None).expect("rows") {
        let row = row.expect("row");
        for (i, n) in names.iter().enumerate() {
            out.get_mut(n).expect("column").push(row.get_long(i).ok());
        }
    }
    out
}

fn mean_cv(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, if mean > 0.0 { var.sqrt() / mean } else { 0.0 })
}

/// Monitor sojourn times and relay truth of one run, in ns, matched packets only.
/// Checks on the way that, packet by packet (joined by seq), the monitor's interval
/// contains the relay's own: t_out − t_in ≥ processing_ns. This holds on any host,
/// loaded or not.
fn monitor_and_truth(run: &Path) -> (Vec<f64>, Vec<f64>, u64) {
    let m = columns(&run.join("monitor.parquet"));
    let t = columns(&run.join("relay_truth.parquet"));
    // The readiness probes (another flow) reuse small seqs: join unique seqs only.
    let mut seen: HashMap<i64, usize> = HashMap::new();
    for s in t["seq"].iter().chain(&m["seq"]).flatten() {
        *seen.entry(*s).or_default() += 1;
    }
    let truth_by_seq: HashMap<i64, i64> = t["seq"]
        .iter()
        .zip(&t["processing_ns"])
        .filter_map(|(s, p)| Some(((*s)?, (*p)?)))
        .filter(|(s, _)| seen[s] == 2)
        .collect();
    let mut joined = 0;
    for ((s, a), b) in m["seq"].iter().zip(&m["t_in_ns"]).zip(&m["t_out_ns"]) {
        if let (Some(s), Some(a), Some(b)) = (s, a, b) {
            if let Some(p) = truth_by_seq.get(s) {
                joined += 1;
                assert!(
                    b - a >= *p,
                    "seq {s}: monitor {} ns < relay's own {p} ns",
                    b - a
                );
            }
        }
    }
    assert!(
        joined * 10 >= m["seq"].len() * 9,
        "{joined} of {} pairs joined by seq",
        m["seq"].len()
    );
    let mon: Vec<f64> = m["t_in_ns"]
        .iter()
        .zip(&m["t_out_ns"])
        .map(|(a, b)| (b.expect("t_out") - a.expect("t_in")) as f64)
        .collect();
    let truth: Vec<f64> = t["processing_ns"]
        .iter()
        .map(|x| x.expect("ns") as f64)
        .collect();
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("monitor.json")).expect("monitor.json"),
    )
    .expect("json");
    let unmatched = json["udp"]["unmatched"].as_u64().expect("unmatched");
    (mon, truth, unmatched)
}

const RELAY_SPEC: &str = r#"
[experiment]
name = "monitor-accuracy"
seed = 3
[topology]
kind = "netns"
[dut]
kind = "udp-relay"
realtime = true
cpu = 0
[knobs]
background_load = { cpus = [0, 1], duty = 1.0, policy = "idle" }
[traffic]
backend = "af_packet"
pattern = "cbr"
rate_pps = 1000
frame_bytes = 128
duration_s = 3
warmup_s = 0.5
[monitor]
kind = "udp"
sample = "all"
"#;

/// Seed 003's accuracy experiment on real namespaces. Asserted (holds on any
/// host): every probe is monitored and matched, and per packet the monitor's
/// interval contains the relay's own processing time. Measured and printed, not
/// asserted: the goal (the offset from the constant-delay run, subtracted from
/// every other distribution's monitor times, leaves their mean within 1 µs of the
/// relay's own and their cv within 0.05) — not met on the shared 2-core VM
/// (docs/benchmarks.md § eBPF monitor), so asserting it would fail on every
/// loaded host; the figures are printed with `--nocapture`.
#[test]
fn udp_monitor_contains_the_relays_own_times_and_reports_the_accuracy_goal() {
    nflab_testkit::require_root();
    let scratch = Scratch::new("accuracy");
    let mut spec = RELAY_SPEC.to_string();
    spec.push_str("[sweep]\n\"dut.relay\" = [\n");
    let dists = [
        ("constant", None),
        ("exponential", None),
        ("uniform", None),
        ("normal", Some(1.0)),
        ("normal", Some(0.2)),
    ];
    for mu in [50, 100] {
        for (d, cv) in dists {
            let cv = cv.map(|c| format!(", cv = {c}")).unwrap_or_default();
            spec.push_str(&format!(
                "  {{ distribution = \"{d}\", mean_us = {mu}{cv} }},\n"
            ));
        }
    }
    spec.push_str("]\n");
    let dir = run(&spec, &scratch);
    let mut failures = Vec::new();
    for (block, mu) in [(0, 50), (1, 100)] {
        let run_dir = |i: usize| dir.join(format!("runs/{:03}", block * dists.len() + i));
        let (mon, truth, unmatched) = monitor_and_truth(&run_dir(0));
        assert_eq!(unmatched, 0, "a FIFO relay leaves nothing unmatched");
        assert!(mon.len() >= 2900, "every probe is monitored: {}", mon.len());
        let offset = mean_cv(&mon).0 - mean_cv(&truth).0;
        println!(
            "mu = {mu} µs: offset from the constant run {:.2} µs",
            offset / 1e3
        );
        for (i, (d, cv)) in dists.iter().enumerate().skip(1) {
            let (mon, truth, unmatched) = monitor_and_truth(&run_dir(i));
            assert_eq!(unmatched, 0);
            let corrected: Vec<f64> = mon.iter().map(|m| m - offset).collect();
            let (mm, mcv) = mean_cv(&corrected);
            let (tm, tcv) = mean_cv(&truth);
            println!(
                "  {d}{}: truth mean {:.2} µs cv {:.3} | monitor - offset mean {:.2} µs cv {:.3} (n = {}, {})",
                cv.map(|c| format!(" cv={c}")).unwrap_or_default(),
                tm / 1e3,
                tcv,
                mm / 1e3,
                mcv,
                mon.len(),
                truth.len()
            );
            if (mm - tm).abs() > 1_000.0 || (mcv - tcv).abs() > 0.05 {
                failures.push(format!(
                    "mu = {mu} {d} {cv:?}: mean {mm:.0} vs {tm:.0} ns, cv {mcv:.3} vs {tcv:.3}"
                ));
            }
        }
    }
    if failures.is_empty() {
        println!("accuracy goal met for every distribution (all packets)");
    } else {
        println!("accuracy goal NOT met (all packets; measured, not asserted): {failures:#?}");
    }
    // monitor-accuracy.json (nflab-analyze's komon, steady state: warm-up left out,
    // packets joined by seq): printed as the table, checked against this test's own
    // pass over the same files (means and cvs of the joined packets, computed here).
    let acc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("monitor-accuracy.json")).expect("monitor-accuracy.json"),
    )
    .expect("json");
    let rows = acc["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2 * dists.len(), "one row per run");
    println!("monitor-accuracy.json (steady state; µs):");
    println!("  run  distribution      μ   truth mean/cv    monitor−offset mean/cv   error mean/cv   goal");
    for r in rows {
        let f = |p: &str| r.pointer(p).and_then(serde_json::Value::as_f64);
        println!(
            "  {}  {:<16} {:>4}  {:>8.2} / {:.3}   {:>8.2} / {:.3}         {:>7.2} / {:.3}   {}",
            r["run"].as_str().unwrap_or(""),
            format!(
                "{}{}",
                r["relay"]["distribution"].as_str().unwrap_or(""),
                r["relay"]["cv"]
                    .as_f64()
                    .map(|c| format!(" cv={c}"))
                    .unwrap_or_default()
            ),
            f("/relay/mean_us").unwrap_or(0.0),
            f("/truth/mean_ns").unwrap_or(0.0) / 1e3,
            f("/truth/cv").unwrap_or(0.0),
            f("/corrected/mean_ns").unwrap_or(0.0) / 1e3,
            f("/corrected/cv").unwrap_or(0.0),
            f("/mean_error_ns").unwrap_or(0.0) / 1e3,
            f("/cv_error").unwrap_or(0.0),
            r["goal_met"]
        );
        let run_dir = dir.join("runs").join(r["run"].as_str().expect("run"));
        let (mon, truth) = steady_state_pairs(&run_dir, 500_000_000);
        let ((mm, mcv), (tm, tcv)) = (mean_cv_pop(&mon), mean_cv_pop(&truth));
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * b.abs().max(1.0);
        assert!(
            close(f("/monitor/mean_ns").unwrap(), mm),
            "{r}: monitor mean {mm}"
        );
        assert!(
            close(f("/truth/mean_ns").unwrap(), tm),
            "{r}: truth mean {tm}"
        );
        assert!(
            close(f("/monitor/cv").unwrap(), mcv),
            "{r}: monitor cv {mcv}"
        );
        assert!(close(f("/truth/cv").unwrap(), tcv), "{r}: truth cv {tcv}");
    }
    println!(
        "accuracy goal (steady state, |mean error| <= 1 µs and |cv error| <= 0.05, μ = 50/100 µs): {}",
        match acc["goal_met"].as_bool() {
            Some(true) => "met",
            Some(false) => "NOT met (measured, not asserted: see docs/monitor.md)",
            None => "not judged",
        }
    );
}

/// Population mean and cv (the accuracy table's definition).
fn mean_cv_pop(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    (mean, if mean > 0.0 { var.sqrt() / mean } else { 0.0 })
}

/// Monitor sojourn and relay truth joined by unique seq, ingress at least
/// `warmup_ns` after the first monitored ingress: this test's own pass.
fn steady_state_pairs(run: &Path, warmup_ns: i64) -> (Vec<f64>, Vec<f64>) {
    let m = columns(&run.join("monitor.parquet"));
    let t = columns(&run.join("relay_truth.parquet"));
    let mut n_m: HashMap<i64, usize> = HashMap::new();
    let mut n_t: HashMap<i64, usize> = HashMap::new();
    for s in m["seq"].iter().flatten() {
        *n_m.entry(*s).or_default() += 1;
    }
    for s in t["seq"].iter().flatten() {
        *n_t.entry(*s).or_default() += 1;
    }
    let truth: HashMap<i64, i64> = t["seq"]
        .iter()
        .zip(&t["processing_ns"])
        .filter_map(|(s, p)| Some(((*s)?, (*p)?)))
        .filter(|(s, _)| n_t[s] == 1)
        .collect();
    let t0 = m["t_in_ns"].iter().flatten().min().copied().unwrap_or(0);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for ((s, i), o) in m["seq"].iter().zip(&m["t_in_ns"]).zip(&m["t_out_ns"]) {
        if let (Some(s), Some(i), Some(o)) = (s, i, o) {
            if *i >= t0 + warmup_ns && n_m[s] == 1 {
                if let Some(p) = truth.get(s) {
                    a.push((o - i) as f64);
                    b.push(*p as f64);
                }
            }
        }
    }
    (a, b)
}

/// The stage breakdown of a linux-router: every received probe has every stage,
/// in path order (tx ≤ ingress ≤ route ≤ queue ≤ egress ≤ rx, on one clock), and the
/// segments' means add up to the end-to-end mean of summary.json (nflab-analyze
/// over records.nfr, an independent pass).
#[test]
fn linux_router_stages_add_up_to_the_end_to_end_latency() {
    nflab_testkit::require_root();
    let scratch = Scratch::new("stages");
    let spec = r#"
[experiment]
name = "monitor-stages"
seed = 1
[topology]
kind = "netns"
[dut]
kind = "linux-router"
[traffic]
backend = "af_packet"
pattern = "cbr"
rate_pps = 2000
frame_bytes = 128
duration_s = 2
warmup_s = 0.5
[monitor]
kind = "stages"
"#;
    let dir = run(spec, &scratch);
    let run_dir = dir.join("runs/000");
    let read = |f: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(run_dir.join(f)).expect(f)).expect("json")
    };
    let (monitor, summary) = (read("monitor.json"), read("summary.json"));
    let b = &monitor["breakdown"];
    let received = summary["packets"]["received"].as_u64().expect("received");
    println!("{}", serde_json::to_string_pretty(b).expect("json"));
    assert_eq!(
        monitor["stages"]["stages"],
        serde_json::json!(["ingress", "route", "queue", "egress"])
    );
    assert_eq!(
        b["complete"].as_u64(),
        Some(received),
        "every received probe has all stages"
    );
    assert_eq!(
        b["out_of_order"].as_u64(),
        Some(0),
        "stage times follow the path"
    );
    let sum: f64 = b["segments"]
        .as_array()
        .expect("segments")
        .iter()
        .map(|s| s["mean_ns"].as_f64().expect("mean"))
        .sum();
    let e2e = summary["latency_ns"]["mean"].as_f64().expect("mean");
    // The same packets, two computations: equal up to float rounding.
    assert!(
        (sum - e2e).abs() < 1e-6 * e2e,
        "segments {sum} ns vs end-to-end {e2e} ns"
    );
    // stages.parquet: one row per probe the monitor saw (warm-up and readiness
    // probes too), columns in path order, every stage present.
    let cols = columns(&run_dir.join("stages.parquet"));
    let rows = cols["seq"].len();
    assert!(rows as u64 >= received, "{rows} rows for {received} probes");
    for c in ["t_ingress_ns", "t_route_ns", "t_queue_ns", "t_egress_ns"] {
        assert_eq!(cols[c].len(), rows, "{c}");
        assert!(cols[c].iter().all(Option::is_some), "{c} has every probe");
    }
}
