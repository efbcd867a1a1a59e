//! `nflab-prrt` end to end: a short run and a two-point grid across two real namespaces,
//! and its one-sentence refusals.

use std::path::PathBuf;
use std::process::Command;

const SPEC: &str = r#"
[app]
kind = "prrt"
gap_ms = 5
payload_bytes = 100
target_delay_ms = 40
window_ms = 20
duration_s = 0.5
outage_threshold_ms = 200
redundancy = { block_size = 4, proactive_share = 0.25 }
"#;

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("nflabtest-prrt-cli-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("tmp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn prrt(args: &[&str]) -> std::process::Output {
    prrt_with_pid(args).1
}

/// Run nflab-prrt; also return its pid, which names its namespaces.
fn prrt_with_pid(args: &[&str]) -> (u32, std::process::Output) {
    let child = Command::new(env!("CARGO_BIN_EXE_nflab-prrt"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run nflab-prrt");
    let pid = child.id();
    (pid, child.wait_with_output().expect("wait for nflab-prrt"))
}

#[test]
fn bad_input_is_one_sentence_with_the_key() {
    let tmp = TempDir::new("bad");
    let spec = tmp.0.join("spec.toml");
    std::fs::write(&spec, SPEC).expect("spec");
    let spec = spec.to_str().expect("utf-8");
    let out = tmp.0.join("out");
    let out = out.to_str().expect("utf-8");
    for (set, key) in [
        (
            "app.window_ms=50",
            "app.window_ms = 50: must not exceed app.target_delay_ms (40)",
        ),
        (
            "app.payload_bytes=9000",
            "app.payload_bytes = 9000: must be at most 1422",
        ),
        (
            "app.target_delay_ms=-2",
            "app.target_delay_ms = -2: must be above zero",
        ),
    ] {
        let o = prrt(&["run", spec, "--out", out, "--set", set]);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(key), "{set}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
}

#[test]
fn a_run_and_a_grid_write_their_files() {
    if !nflab_testkit::require_root() {
        return;
    }
    let tmp = TempDir::new("grid");
    let spec_path = tmp.0.join("spec.toml");
    // The second point's window exceeds the target: refused, the grid goes on.
    std::fs::write(
        &spec_path,
        format!("{SPEC}\n[sweep]\n\"app.window_ms\" = [20, 50]\n"),
    )
    .expect("spec");
    let out = tmp.0.join("out");
    let (pid, o) = prrt_with_pid(&[
        "grid",
        spec_path.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(out.join("plan.json"))
            .unwrap()
            .trim(),
        "{\"runs\": 2}"
    );
    let error = std::fs::read_to_string(out.join("runs/001/error.txt")).expect("error.txt");
    assert!(error.starts_with("app.window_ms = 50"), "{error}");
    let results = std::fs::read_to_string(out.join("results.csv")).expect("results.csv");
    assert_eq!(results.lines().count(), 3);

    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("runs/000/prrt.json")).unwrap())
            .unwrap();
    let packets = std::fs::read_to_string(out.join("runs/000/packets.csv")).expect("packets.csv");
    for dir in ["pc", "cp"] {
        // 0.5 s at one message per 5 ms.
        assert_eq!(run[dir]["sent"], 100, "{run}");
        let delivered = run[dir]["delivered"].as_u64().unwrap();
        assert!(delivered > 50, "{run}");
        let rows: Vec<&str> = packets.lines().filter(|l| l.starts_with(dir)).collect();
        assert_eq!(rows.len(), 100);
        // packets.csv agrees with prrt.json: m6 for each delivered message, within the
        // target of its m1.
        let fields: Vec<Vec<Option<i64>>> = rows
            .iter()
            .map(|l| l.split(',').skip(2).map(|f| f.parse().ok()).collect())
            .collect();
        assert!(fields.iter().all(|f| f.len() == 12));
        let with_m6: Vec<&Vec<Option<i64>>> = fields.iter().filter(|f| f[5].is_some()).collect();
        assert_eq!(with_m6.len() as u64, delivered);
        for f in &with_m6 {
            let (m1, m6) = (f[0].unwrap(), f[5].unwrap());
            assert!(m6 >= m1 && m6 - m1 <= 40_000_000, "{m1} {m6}");
        }
        // The vantage points m2..m5 (AF_PACKET taps, socket TX/RX stamps) are there for
        // nearly every message sent, and every derived layer delay is non-negative and the
        // layers add up to the one-way delay.
        let complete: Vec<&&Vec<Option<i64>>> = with_m6
            .iter()
            .filter(|f| f[..6].iter().all(Option::is_some))
            .collect();
        assert!(
            complete.len() as u64 >= delivered * 9 / 10,
            "{} of {delivered}",
            complete.len()
        );
        for f in complete {
            let m: Vec<i64> = f[..6].iter().map(|x| x.unwrap()).collect();
            let layers: Vec<i64> = f[6..11].iter().map(|x| x.unwrap()).collect();
            assert_eq!(
                layers,
                m.windows(2).map(|w| w[1] - w[0]).collect::<Vec<_>>()
            );
            assert!(layers.iter().all(|&d| d >= 0), "{dir}: {f:?}");
            assert_eq!(layers.iter().sum::<i64>(), f[11].unwrap());
        }
    }
    let leftover = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let leftover = String::from_utf8_lossy(&leftover.stdout);
    let mine = format!("nflab-prrt-{pid}-");
    assert!(!leftover.contains(&mine), "namespaces left: {leftover}");
}

#[test]
fn sigterm_ends_a_run_and_removes_its_namespaces() {
    if !nflab_testkit::require_root() {
        return;
    }
    let tmp = TempDir::new("term");
    let spec = tmp.0.join("spec.toml");
    std::fs::write(&spec, SPEC.replace("duration_s = 0.5", "duration_s = 20")).expect("spec");
    let child = Command::new(env!("CARGO_BIN_EXE_nflab-prrt"))
        .args([
            "run",
            spec.to_str().unwrap(),
            "--out",
            tmp.0.join("out").to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mine = format!("nflab-prrt-{}-", child.id());
    let namespaces = || {
        let out = Command::new("ip")
            .args(["netns", "list"])
            .output()
            .expect("ip");
        String::from_utf8_lossy(&out.stdout)
            .matches(mine.as_str())
            .count()
    };
    // Wait (bounded) until the run has built its two namespaces.
    let mut tries = 0;
    while namespaces() < 2 {
        tries += 1;
        assert!(tries < 100, "the run never built its namespaces");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("kill");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("interrupted"), "{err}");
    assert_eq!(namespaces(), 0, "namespaces left behind");
}
