//! Live progress of `nflab run`: the `--events` JSON lines tell a consistent
//! story that matches results.parquet, the progress bar appears on a terminal
//! (a pseudo-terminal from `script`, and tmux) and nothing of it on a pipe.
//! Real namespaces and runs; root needed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

#[macro_use]
mod common;
use common::{nflab, read_json, stderr, write_spec, TempDir};

/// Three loopback runs of 1.5 s: long enough for several progress samples.
const THREE_RUNS: &str = r#"
[experiment]
name = "progress"

[dut]
kind = "loopback"

[traffic]
frame_bytes = 64
duration_s = 1.5
warmup_s = 0.2

[sweep]
"traffic.rate_pps" = [2000, 4000, 6000]
"#;

/// The story the events tell: study start first and end last, each planned run
/// started once and ended once, progress samples only inside their run.
fn check_story(ev: &[serde_json::Value], runs: usize) -> BTreeMap<String, serde_json::Value> {
    assert_eq!(ev[0]["event"], "study_start", "{:?}", ev[0]);
    assert_eq!(ev[0]["runs"], runs);
    let last = &ev[ev.len() - 1];
    assert_eq!(last["event"], "study_end", "{last}");
    assert_eq!(last["completed"], runs, "{last}");
    let mut open: Option<String> = None;
    let mut started = BTreeMap::new();
    let mut ended = BTreeMap::new();
    for e in &ev[1..ev.len() - 1] {
        let run = e["run"].as_str().unwrap().to_string();
        match e["event"].as_str().unwrap() {
            "run_start" => {
                assert!(open.is_none(), "run {run} started inside {open:?}");
                assert!(
                    started.insert(run.clone(), e.clone()).is_none(),
                    "{run} twice"
                );
                open = Some(run);
            }
            "progress" => {
                assert_eq!(
                    open.as_deref(),
                    Some(run.as_str()),
                    "sample outside its run"
                );
                let (tx, rx) = (
                    e["tx_packets"].as_u64().unwrap(),
                    e["rx_packets"].as_u64().unwrap(),
                );
                assert!(rx <= tx + 100, "{e}");
            }
            "run_end" => {
                assert_eq!(open.take().as_deref(), Some(run.as_str()));
                assert!(ended.insert(run, e.clone()).is_none());
            }
            other => panic!("unexpected event {other} in the middle"),
        }
    }
    assert_eq!(started.len(), runs);
    assert_eq!(ended.len(), runs);
    ended
}

#[test]
fn events_tell_the_study_and_match_results_parquet() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("events");
    let spec = write_spec(&tmp.0, "three", THREE_RUNS);
    let events = tmp.0.join("events.jsonl");
    let o = nflab()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--out",
            tmp.0.to_str().unwrap(),
            "--json",
        ])
        .arg("--events")
        .arg(&events)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // Not a terminal: no bar, no escape sequences.
    let err = stderr(&o);
    assert!(!err.contains("ETA") && !err.contains('\x1b'), "{err}");
    let result: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let dir = PathBuf::from(result["dir"].as_str().unwrap());
    let ev = common::json_lines(&events);
    let ended = check_story(&ev, 3);
    assert_eq!(ev[0]["dir"], dir.to_str().unwrap());

    // Every run's end carries its summary's figures, which results.parquet holds too.
    let rows = common::table::parquet_rows(&dir.join("results.parquet"));
    assert_eq!(rows.len(), 3);
    for row in &rows {
        let run = row["run"].as_str().unwrap();
        let end = &ended[run];
        assert_eq!(end["status"], "complete");
        let summary = read_json(dir.join("runs").join(run).join("summary.json"));
        for (k, col) in [("sent", "sent"), ("received", "received"), ("lost", "lost")] {
            assert_eq!(end[k], summary["packets"][k], "{run} {k}");
            assert_eq!(end[k], row[col], "{run} {k} vs parquet {row}");
        }
        assert_eq!(end["latency_p50_ns"], summary["latency_ns"]["p50"]);
    }
    // Rates: the offered rate of each run is its swept value, and the live samples
    // of the 6000 pps run see that rate at the generator's interface.
    let starts: Vec<&serde_json::Value> = ev.iter().filter(|e| e["event"] == "run_start").collect();
    let offered: Vec<f64> = starts
        .iter()
        .map(|e| e["offered_pps"].as_f64().unwrap())
        .collect();
    assert_eq!(offered, [2000.0, 4000.0, 6000.0]);
    let last_run = starts[2]["run"].as_str().unwrap();
    let samples: Vec<&serde_json::Value> = ev
        .iter()
        .filter(|e| e["event"] == "progress" && e["run"] == last_run)
        .collect();
    assert!(samples.len() >= 3, "{} samples in 1.5 s", samples.len());
    // At its end, the counters hold at least the probes the summary counts as sent.
    let top = samples
        .iter()
        .map(|e| e["tx_packets"].as_u64().unwrap())
        .max()
        .unwrap();
    let sent = ended[last_run]["sent"].as_u64().unwrap();
    assert!(
        top >= sent * 8 / 10,
        "interface counted {top}, summary sent {sent}"
    );

    // Resume of the finished study: every run is kept, and says so.
    let events2 = tmp.0.join("events2.jsonl");
    let o = nflab()
        .args([
            "run",
            "--resume",
            dir.to_str().unwrap(),
            "--json",
            "--events",
        ])
        .arg(&events2)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let ev2 = common::json_lines(&events2);
    let ended2 = check_story(&ev2, 3);
    assert!(
        ended2.values().all(|e| e["status"] == "resumed"),
        "{ended2:?}"
    );
    assert_eq!(ev2[ev2.len() - 1]["resumed"], 3);
}

#[test]
fn events_to_stdout_and_json_together_are_refused() {
    // `--events jsonl` (the issue's spelling) and `--events -` both mean stdout.
    for dest in ["-", "jsonl"] {
        let o = nflab()
            .args(["run", "x.toml", "--json", "--events", dest])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{dest}");
        let err = stderr(&o);
        assert!(
            err.contains("--events") && err.trim().lines().count() == 1,
            "{err}"
        );
    }
}

/// A two-run study for the terminal tests (the bar's line needs time to show).
const TWO_RUNS: &str = r#"
[experiment]
name = "tty"

[dut]
kind = "loopback"

[traffic]
rate_pps = 3000
duration_s = 2
warmup_s = 0.2

[sweep]
"traffic.frame_bytes" = [64, 128]
"#;

#[test]
fn the_bar_shows_on_a_pseudo_terminal_and_not_on_a_pipe() {
    require_root!();
    require_tool!("script", "bsdutils");
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("tty");
    let spec = write_spec(&tmp.0, "two", TWO_RUNS);
    let cmd = format!(
        "{} run {} --out {}",
        env!("CARGO_BIN_EXE_nflab"),
        spec.display(),
        tmp.0.display()
    );
    // script runs the command on a pseudo-terminal and copies what it shows.
    let o = Command::new("script")
        .args(["-q", "-e", "-c", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let screen = String::from_utf8_lossy(&o.stdout);
    assert!(
        screen.contains("ETA"),
        "no progress bar on the terminal: {screen}"
    );
    assert!(
        screen.contains("run 1/2") || screen.contains("run 0/2"),
        "{screen}"
    );
    assert!(
        screen.contains("received") && screen.contains("loss"),
        "{screen}"
    );

    // The same on pipes: the table, and nothing of the bar.
    let o = nflab()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--out",
            tmp.0.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        !err.contains("ETA") && !err.contains('\r') && !err.contains('\x1b'),
        "{err}"
    );
}

#[test]
fn the_bar_shows_in_tmux() {
    require_root!();
    require_tool!("tmux", "tmux");
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("tmux");
    let spec = write_spec(&tmp.0, "two", TWO_RUNS);
    let cmd = format!(
        "{} run {} --out {}; sleep 30",
        env!("CARGO_BIN_EXE_nflab"),
        spec.display(),
        tmp.0.display()
    );
    let term = common::tmux::Tmux::start(&tmp.0, "progress", &cmd);
    let mut seen_bar = false;
    let screen = term.watch(
        Duration::from_secs(60),
        |s| seen_bar |= s.contains("ETA") && s.contains("received"),
        |s| s.contains("artifacts:"),
    );
    assert!(
        seen_bar,
        "no live progress line seen in tmux; last screen:\n{screen}"
    );
    assert!(
        screen.contains("artifacts:"),
        "the run did not finish:\n{screen}"
    );
    // The bar is cleared at the end: the finished screen holds run lines and the table.
    assert!(
        screen.contains("run 000") && screen.contains("run 001"),
        "{screen}"
    );
}
