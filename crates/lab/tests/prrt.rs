//! `[app] kind = "prrt"` inside `nflab run` over the link DuT, on real namespaces (root):
//! the whole experiment path (spec, sweep, topology, link emulator, both transport ends,
//! prrt.json, prrt-packets.parquet, resume), short runs.
//!
//! Run: `sudo -E cargo test -p nflab-lab --test prrt -- --nocapture --test-threads 1`

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use nflab_analyze::prrt::read_packets;
use nflab_lab::{run_experiment, RunOptions};

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nflab-prrt-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

fn opts(out: &Path, resume: Option<PathBuf>) -> RunOptions {
    RunOptions {
        out: out.to_path_buf(),
        resume,
        progress: true,
        version: "test".into(),
        commit: "test".into(),
        after_failure: None,
        events: Default::default(),
        allow_include_outside: false,
    }
}

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("json")
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

/// One test at a time: each checks that no namespace of this process is left after its
/// run, which a test running beside it would break.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn run(dir: &Path, spec: &str) -> nflab_lab::ExperimentResult {
    let path = dir.join("spec.toml");
    std::fs::write(&path, spec).expect("spec");
    let r = run_experiment(&path, &opts(dir, None), Arc::new(AtomicBool::new(false)))
        .expect("the experiment runs");
    assert!(our_namespaces().is_empty(), "{:?}", our_namespaces());
    r
}

/// The goal is the transport's: on a shared 2-core host at load 10–20, threads woken late
/// (the link DuT's, the ends') would add loss of their own, so the run is SCHED_FIFO
/// (`knobs.sched`, inherited by every thread the run starts), as docs/transport.md advises.
const REALTIME: &str = "[knobs]\nsched = \"fifo:10\"\n";

const PROBES: &str = "[traffic]\nbackend = \"af_packet\"\npattern = \"cbr\"\nrate_pps = 100\nframe_bytes = 128\nduration_s = 1\nwarmup_s = 0.1\ndrain_ms = 100\n";

/// The goal on real namespaces: over a link with 5 % Bernoulli loss both ways and
/// a delay well under the target (2 ms against 400 ms: the link DuT's workers and the ends'
/// threads were seen stalled for up to 72 ms at load 26, which a 100 ms target does not
/// absorb), residual loss ≤ 0.1 % with redundancy ≤ 25 % of the
/// payload bytes. Every derived layer delay is non-negative and the layers add up to the
/// one-way delay.
#[test]
fn loss_goal_over_the_emulated_link_and_clock_consistent_layers() {
    if !nflab_testkit::require_root() || !nflab_testkit::require_tool("ethtool", "ethtool") {
        return;
    }
    let _one_at_a_time = serial();
    let dir = tmp("goal");
    let spec = format!(
        "[experiment]\nname = \"prrt-goal\"\n[dut]\nkind = \"link\"\n[dut.link]\ndelay_us = 2000\nloss = {{ model = \"bernoulli\", p = 0.05 }}\nseed = 7\n\
         [app]\nkind = \"prrt\"\ngap_ms = 1\npayload_bytes = 200\ntarget_delay_ms = 400\nwindow_ms = 200\nduration_s = 4\n\
         redundancy = {{ block_size = 16, proactive_share = 0.125 }}\n{PROBES}{REALTIME}"
    );
    let r = run(&dir, &spec);
    let rd = r.dir.join("runs/000");
    let prrt = json(&rd.join("prrt.json"));
    eprintln!(
        "{}",
        serde_json::to_string_pretty(&prrt).unwrap_or_default()
    );
    let dut = json(&rd.join("dut.json"));
    for (d, way) in [("pc", "reverse"), ("cp", "forward")] {
        let sent = prrt[d]["sent"].as_u64().expect("sent");
        assert!(sent >= 3900, "{d}: {sent} sent");
        let loss = prrt[d]["loss_ratio"].as_f64().expect("loss");
        let redundancy = prrt[d]["redundancy_ratio"].as_f64().expect("redundancy");
        assert!(loss <= 0.001, "{d}: residual loss {loss}");
        assert!(redundancy <= 0.25, "{d}: redundancy {redundancy}");
        // The link did drop about 5 % of that direction's frames: the goal is the transport's.
        let lost = dut[way]["apps"][0]["detail"]["lost"]
            .as_u64()
            .expect("link counters");
        assert!(
            lost as f64 >= 0.03 * sent as f64,
            "{way}: the link lost only {lost}"
        );
    }
    let packets = read_packets(&rd.join("prrt-packets.parquet")).expect("parquet");
    assert_eq!(
        packets.len() as u64,
        prrt["pc"]["sent"].as_u64().unwrap_or(0) + prrt["cp"]["sent"].as_u64().unwrap_or(0)
    );
    let delivered: Vec<_> = packets.iter().filter(|p| p.m[5].is_some()).collect();
    let complete: Vec<_> = delivered
        .iter()
        .filter(|p| p.m.iter().all(Option::is_some))
        .collect();
    // Recovered messages never crossed the link themselves: no m2..m5.
    assert!(
        complete.len() * 100 >= delivered.len() * 90,
        "{} of {}",
        complete.len(),
        delivered.len()
    );
    for p in &packets {
        for (i, l) in p.layers.iter().enumerate() {
            if let Some(v) = l {
                assert!(*v >= 0, "{} seq {}: layer {i} = {v} ns", p.dir, p.seq);
            }
        }
    }
    for p in &complete {
        let sum: i64 = p.layers[..5].iter().map(|l| l.unwrap_or(0)).sum();
        assert_eq!(Some(sum), p.layers[5]);
    }
    // The link's 2 ms is in L1→L1 (m4 − m3): its median is at least that. (Single frames
    // were seen up to 0.25 ms under it: the emulator times its delay on its own stamps.)
    let l1: Vec<f64> = complete
        .iter()
        .filter_map(|p| p.layers[2])
        .map(|v| v as f64)
        .collect();
    let q = nflab_analyze::prrt::quartiles(&l1).expect("L1→L1 values");
    eprintln!(
        "L1→L1 quartiles (ns): {q:?}, minimum {}",
        l1.iter().fold(f64::MAX, |a, b| a.min(*b))
    );
    assert!(q[1] >= 2_000_000.0, "median L1→L1 {} ns", q[1]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A target below the link's delay: every message is discarded and counted, none is
/// delivered late; an outage covers the whole run. Also a sweep with a refused point
/// (skip_refused), the artifact tree and --resume.
#[test]
fn target_below_the_link_delay_discards_everything_and_a_sweep_resumes() {
    if !nflab_testkit::require_root() || !nflab_testkit::require_tool("ethtool", "ethtool") {
        return;
    }
    let _one_at_a_time = serial();
    let dir = tmp("late");
    let spec = format!(
        "[experiment]\nname = \"prrt-late\"\nskip_refused = true\n[dut]\nkind = \"link\"\n[dut.link]\ndelay_us = 6000\n\
         [app]\nkind = \"prrt\"\ngap_ms = 5\npayload_bytes = 100\ntarget_delay_ms = 2\nwindow_ms = 1\nduration_s = 1\noutage_threshold_ms = 100\n\
         {PROBES}[sweep]\n\"app.window_ms\" = [1, 3]\n\"app.payload_bytes\" = [100, 1000]\n"
    );
    let r = run(&dir, &spec);
    // window 3 > target 2: refused twice, two runs carried out.
    assert_eq!(r.runs.len(), 2);
    let refused = json(&r.dir.join("refused.json"));
    assert_eq!(refused.as_array().map(Vec::len), Some(2));
    assert!(refused[0]["reason"]
        .as_str()
        .unwrap_or("")
        .contains("app.window_ms = 3: must not exceed app.target_delay_ms (2)"));
    for run in ["000", "001"] {
        let rd = r.dir.join("runs").join(run);
        for f in [
            "prrt.json",
            "prrt-packets.parquet",
            "prrt-stats.json",
            "summary.json",
            "records.nfr",
        ] {
            assert!(rd.join(f).is_file(), "{run}/{f}");
        }
        let prrt = json(&rd.join("prrt.json"));
        for d in ["pc", "cp"] {
            let sent = prrt[d]["sent"].as_u64().expect("sent");
            assert!(sent >= 150, "{run} {d}: {sent}");
            assert_eq!(prrt[d]["delivered"], 0, "{run} {d}");
            assert_eq!(prrt[d]["late_discarded"].as_u64(), Some(sent), "{run} {d}");
            assert_eq!(prrt[d]["loss_ratio"], 1.0);
            let outages = prrt[d]["outages"].as_array().expect("outages");
            assert_eq!(outages.len(), 1, "{run} {d}");
            assert_eq!(outages[0]["both_directions"], true);
        }
        let packets = read_packets(&rd.join("prrt-packets.parquet")).expect("parquet");
        assert!(packets.iter().all(|p| p.m[5].is_none()));
    }
    // Resume: both runs are complete and kept.
    let again = run_experiment(
        Path::new(""),
        &opts(&dir, Some(r.dir.clone())),
        Arc::new(AtomicBool::new(false)),
    )
    .expect("resume");
    assert_eq!(again.resumed_runs, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The "a peer that disappears": the plant end vanishes 1 s into a 3 s run (it
/// stops and closes its socket, as a crashed process would). The controller's sender stops
/// one `peer_timeout_ms` after its last feedback, the run ends in bounded time, `prrt.json`
/// records when each happened and an outage from the vanishing to the run's end in both
/// directions, and the counts stay consistent.
#[test]
fn a_plant_that_vanishes_mid_run_is_recorded_as_an_outage_and_nothing_hangs() {
    if !nflab_testkit::require_root() || !nflab_testkit::require_tool("ethtool", "ethtool") {
        return;
    }
    let _one_at_a_time = serial();
    let dir = tmp("vanish");
    let (gap_ms, duration_s, vanish_s, timeout_ms) = (5u64, 3u64, 1u64, 300u64);
    let spec = format!(
        "[experiment]\nname = \"prrt-vanish\"\n[dut]\nkind = \"link\"\n[dut.link]\ndelay_us = 2000\n\
         [app]\nkind = \"prrt\"\ngap_ms = {gap_ms}\npayload_bytes = 100\ntarget_delay_ms = 100\nwindow_ms = 50\n\
         duration_s = {duration_s}\noutage_threshold_ms = 200\npeer_timeout_ms = {timeout_ms}\nplant_vanishes_s = {vanish_s}\n\
         {PROBES}{REALTIME}"
    );
    let t0 = std::time::Instant::now();
    let r = run(&dir, &spec);
    let took = t0.elapsed();
    // The run's own length plus set-up, drain and teardown; a hanging end would not return.
    assert!(
        took < std::time::Duration::from_secs(duration_s + 20),
        "the run took {took:?}"
    );
    let rd = r.dir.join("runs/000");
    let prrt = json(&rd.join("prrt.json"));
    eprintln!(
        "{}",
        serde_json::to_string_pretty(&prrt).unwrap_or_default()
    );
    let ms = 1_000_000u64;
    let (vanish_ns, end_ns) = (vanish_s * 1000 * ms, duration_s * 1000 * ms);
    let u = |d: &str, k: &str| prrt[d][k].as_u64().unwrap_or_else(|| panic!("{d}.{k}"));

    // PC: the plant sent every gap until it vanished, then nothing.
    assert_eq!(u("pc", "sender_vanished_ns"), vanish_ns);
    assert_eq!(u("pc", "sent"), vanish_ns / (gap_ms * ms));
    assert!(prrt["cp"].get("sender_vanished_ns").is_none());
    // CP: the controller's sender gave up one timeout after its last feedback (which came
    // before the plant vanished), so after vanish + timeout − a stall, and well before the end.
    let lost = u("cp", "peer_lost_ns");
    assert!(
        lost > vanish_ns + timeout_ms * ms - 100 * ms && lost < vanish_ns + 1500 * ms,
        "cp.peer_lost_ns = {lost}"
    );
    assert!(
        prrt["pc"].get("peer_lost_ns").is_none(),
        "the plant's sender ran until it vanished"
    );
    // It handed messages over until it knew, and none after: one per gap up to that moment.
    let cp_sent = u("cp", "sent");
    let expected = lost.div_ceil(gap_ms * ms);
    assert!(
        cp_sent.abs_diff(expected) <= 2,
        "cp.sent = {cp_sent}, {expected} sends before {lost} ns"
    );
    for d in ["pc", "cp"] {
        let (sent, delivered) = (u(d, "sent"), u(d, "delivered"));
        assert!(delivered <= sent && u(d, "late_discarded") <= sent, "{d}");
        // Most of what was sent before the plant vanished arrived; nothing after.
        let before = vanish_ns / (gap_ms * ms);
        assert!(
            delivered <= before && delivered * 10 >= before * 8,
            "{d}: {delivered} of {before}"
        );
        let loss = prrt[d]["loss_ratio"].as_f64().expect("loss_ratio");
        assert!(
            (loss - (1.0 - delivered as f64 / sent as f64)).abs() < 1e-12,
            "{d}: {loss}"
        );
        // The outage: from the last on-time message before the plant vanished to the run's
        // end, in both directions.
        let outages = prrt[d]["outages"].as_array().expect("outages");
        let last = outages.last().expect("an outage");
        let (start, length) = (
            last["start_ns"].as_u64().unwrap_or(0),
            last["length_ns"].as_u64().unwrap_or(0),
        );
        assert!(
            start + 200 * ms >= vanish_ns && start <= vanish_ns,
            "{d}: outage starts at {start}"
        );
        assert_eq!(
            start + length,
            end_ns,
            "{d}: the outage lasts to the run's end"
        );
        assert_eq!(last["both_directions"], true);
    }
    let packets = read_packets(&rd.join("prrt-packets.parquet")).expect("parquet");
    assert_eq!(packets.len() as u64, u("pc", "sent") + cp_sent);
    // Nothing reached the plant's application after it vanished.
    assert!(packets
        .iter()
        .filter(|p| p.dir == "cp")
        .all(|p| p.m[5].is_none_or(|m6| (m6 as u64) < vanish_ns)));
    // The same figures are columns of results.parquet (docs/formats.md).
    let cols = results_row(&r.dir.join("results.parquet"));
    for d in ["pc", "cp"] {
        for k in ["sent", "delivered", "late_discarded"] {
            assert_eq!(
                cols[&format!("prrt_{d}_{k}")],
                prrt[d][k].as_f64().unwrap(),
                "{d} {k}"
            );
        }
        for k in ["loss_ratio", "redundancy_ratio"] {
            assert_eq!(
                cols[&format!("prrt_{d}_{k}")],
                prrt[d][k].as_f64().unwrap(),
                "{d} {k}"
            );
        }
        let outages = prrt[d]["outages"].as_array().unwrap();
        assert_eq!(cols[&format!("prrt_{d}_outages")], outages.len() as f64);
        let longest = outages
            .iter()
            .filter_map(|o| o["length_ns"].as_u64())
            .max()
            .unwrap_or(0);
        assert_eq!(cols[&format!("prrt_{d}_outage_longest_ns")], longest as f64);
    }
    let stats = json(&rd.join("prrt-stats.json"));
    assert_eq!(stats["app"]["plant_vanishes_s"], 1.0);
    assert_eq!(stats["app"]["peer_timeout_ms"], 300.0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The numeric columns of the first row of a Parquet file, as f64.
fn results_row(path: &Path) -> std::collections::HashMap<String, f64> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    let reader = SerializedFileReader::new(std::fs::File::open(path).expect("results.parquet"))
        .expect("parquet");
    let row = reader
        .get_row_iter(None)
        .expect("rows")
        .next()
        .expect("one row")
        .expect("row");
    row.get_column_iter()
        .filter_map(|(name, f)| {
            let v = match f {
                Field::Long(v) => *v as f64,
                Field::Double(v) => *v,
                _ => return None,
            };
            Some((name.clone(), v))
        })
        .collect()
}
