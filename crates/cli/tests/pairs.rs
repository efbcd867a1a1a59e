//! A study over several LoadGen/DuT host pairs, pos-style: every host is a
//! namespace with its own sshd (pinned host key), the LoadGen is remote too,
//! and `nflab run` drives them from a controller namespace. Also: a wrong host
//! key is refused, and hostile spec strings never reach a shell unquoted.
//! Root, OpenSSH client and server needed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Mutex;
use std::time::Instant;

static SERIAL: Mutex<()> = Mutex::new(());

#[macro_use]
mod common;
use common::sshlab::{ns_read, SshLab};
use common::{read_json, stderr};

fn study(pairs: &str, runs: usize) -> String {
    let rates: Vec<String> = (0..runs).map(|i| (2000 + 500 * i).to_string()).collect();
    format!(
        "[experiment]\nname = \"pairs\"\n[topology]\nkind = \"hosts\"\n[dut]\nkind = \"linux-router\"\n\
         [traffic]\nframe_bytes = 64\nduration_s = 1\nwarmup_s = 0.2\n\
         [sweep]\n\"traffic.rate_pps\" = [{}]\n{pairs}",
        rates.join(", ")
    )
}

fn run(lab: &SshLab, spec: &Path, extra: &[&str]) -> Output {
    let mut c = lab.nflab();
    c.args([
        "run",
        spec.to_str().unwrap(),
        "--out",
        lab.dir.to_str().unwrap(),
        "--json",
    ]);
    c.args(extra);
    c.output().unwrap()
}

fn scratch_dirs() -> BTreeSet<String> {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| {
            n.starts_with("nflab-lg-")
                || n.starts_with("nflab-known-")
                || n.starts_with("nflab-ssh-")
        })
        .collect()
}

#[test]
fn runs_spread_over_two_remote_pairs_merge_into_one_table_and_resume() {
    require_root!();
    require_tool!("ssh", "openssh-client");
    require_tool!("/usr/sbin/sshd", "openssh-server");
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = scratch_dirs();
    let lab = SshLab::pairs("pr", 2);
    let spec = lab.dir.join("two.toml");
    std::fs::write(&spec, study(&lab.pairs_toml(2), 4)).unwrap();
    let forward_before = ns_read(&lab.hosts[1].ns, &["cat", "/proc/sys/net/ipv4/ip_forward"]);
    let events = lab.dir.join("events.jsonl");
    let o = run(&lab, &spec, &["--events", events.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let dir = PathBuf::from(v["dir"].as_str().unwrap());
    // The study's SSH connections ended with it (not 60 s later by themselves).
    let left = masters_of_dead_controllers();
    assert!(left.is_empty(), "SSH masters left: {left:?}");

    // One table, a pair per run, both pairs used; every run measured for real.
    let rows = common::table::parquet_rows(&dir.join("results.parquet"));
    assert_eq!(rows.len(), 4);
    let mut used = BTreeSet::new();
    for row in &rows {
        let run = row["run"].as_str().unwrap();
        let pair = row["pair"].as_str().unwrap().to_string();
        let rd = dir.join("runs").join(run);
        assert_eq!(read_json(rd.join("pair.json"))["pair"], pair.as_str());
        let rate = 2000 + 500 * run.parse::<u64>().unwrap();
        assert_eq!(row["sent"].as_i64().unwrap() as u64, rate, "{row}");
        assert_eq!(row["lost"], 0, "{row}");
        // The records came back whole: the local analysis of the fetched file agrees.
        let again = common::nflab()
            .args([
                "analyze",
                rd.join("records.nfr").to_str().unwrap(),
                "--json",
            ])
            .output()
            .unwrap();
        let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
        assert_eq!(
            again["packets"]["received"].as_i64(),
            row["received"].as_i64()
        );
        assert!(rd.join(".complete").exists() && rd.join("gen.json").exists());
        used.insert(pair);
    }
    assert_eq!(used.len(), 2, "{used:?}");
    let env = read_json(dir.join("env.json"));
    for role in ["a.loadgen", "a.dut", "b.loadgen", "b.dut"] {
        assert_eq!(
            env["hosts"][role]["clock_source"], "CLOCK_REALTIME",
            "{role}"
        );
    }
    // Runs overlapped: some run started before another ended.
    let ev = common::json_lines(&events);
    let mut open = 0;
    let mut most = 0;
    for e in &ev {
        match e["event"].as_str().unwrap() {
            "run_start" => open += 1,
            "run_end" => open -= 1,
            _ => {}
        }
        most = most.max(open);
    }
    assert_eq!(most, 2, "the two pairs never ran at once");
    // Live progress came back from the remote LoadGens, for runs of the study.
    let progress: Vec<&serde_json::Value> =
        ev.iter().filter(|e| e["event"] == "progress").collect();
    let sampled: BTreeSet<&str> = progress
        .iter()
        .map(|e| e["run"].as_str().unwrap())
        .collect();
    assert!(sampled.len() >= 2, "{sampled:?}");
    assert!(sampled
        .iter()
        .all(|r| ["000", "001", "002", "003"].contains(r)));
    assert!(progress
        .iter()
        .any(|e| e["rx_packets"].as_u64().unwrap() > 0));
    // Each DuT host is as it was, and no LoadGen scratch copy is left.
    assert_eq!(
        ns_read(&lab.hosts[1].ns, &["cat", "/proc/sys/net/ipv4/ip_forward"]),
        forward_before
    );
    let addrs = ns_read(&lab.hosts[3].ns, &["ip", "-4", "addr", "show", "dev", "p1"]);
    assert!(!addrs.contains("198.18.0.2"), "{addrs}");
    assert_eq!(scratch_dirs(), before);

    // Resume after losing two runs: only those are redone, the table is whole again.
    std::fs::remove_file(dir.join("runs/001/.complete")).unwrap();
    std::fs::remove_dir_all(dir.join("runs/003")).unwrap();
    let o = lab
        .nflab()
        .args(["run", "--resume", dir.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["resumed_runs"], 2);
    let rows = common::table::parquet_rows(&dir.join("results.parquet"));
    let runs: Vec<&str> = rows.iter().map(|r| r["run"].as_str().unwrap()).collect();
    assert_eq!(runs, ["000", "001", "002", "003"]);
    assert!(rows.iter().all(|r| r["pair"].is_string() && r["lost"] == 0));
}

/// The knob journals of the controller `pid` in /run/nflab.
fn journals_of(pid: u32) -> Vec<PathBuf> {
    std::fs::read_dir("/run/nflab")
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    let n = p.file_name().unwrap().to_string_lossy();
                    n.starts_with(&format!("knobs-{pid}-"))
                        || (n.starts_with("remote-dut-") && n.contains(&format!("-{pid}-")))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Pids of `nflab remote … loadgen` processes.
fn remote_loadgens() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
            args.contains(&&b"remote"[..]) && args.contains(&&b"loadgen"[..])
        })
        .collect()
}

/// Pids and command lines (NULs as spaces) of the processes that name `needle`.
fn processes_naming(needle: &str) -> Vec<(u32, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| {
            let c = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            c.contains(needle).then_some((p, c))
        })
        .collect()
}

/// ssh processes on the connection sockets of controller `pid`: clients
/// (`ControlPath=…`) and masters, which retitle themselves `ssh: DIR/<hash> [mux]`.
fn ssh_masters_of(pid: u32) -> Vec<u32> {
    let dir = format!("{}/nflab-ssh-{pid}/", std::env::temp_dir().display());
    processes_naming(&dir).into_iter().map(|(p, _)| p).collect()
}

/// Command lines of ssh processes on the sockets of controllers that have exited.
fn masters_of_dead_controllers() -> Vec<String> {
    let prefix = format!("{}/nflab-ssh-", std::env::temp_dir().display());
    processes_naming(&prefix)
        .into_iter()
        .filter(|(_, c)| {
            let owner = c.split(&prefix).nth(1).and_then(|r| r.split('/').next());
            owner.is_some_and(|o| !Path::new(&format!("/proc/{o}")).exists())
        })
        .map(|(_, c)| c)
        .collect()
}

/// A controller killed with SIGKILL in the middle of a run leaves the DuT set
/// up and the LoadGen sending on their hosts; `nflab topo gc` finds them in
/// its journal and undoes both over SSH.
#[test]
fn a_controller_killed_mid_run_leaves_nothing_on_its_hosts_after_gc() {
    require_root!();
    require_tool!("ssh", "openssh-client");
    require_tool!("/usr/sbin/sshd", "openssh-server");
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = scratch_dirs();
    let lab = SshLab::pairs("kill", 1);
    let dut_ns = lab.hosts[1].ns.clone();
    let forward_before = ns_read(&dut_ns, &["cat", "/proc/sys/net/ipv4/ip_forward"]);
    let spec = lab.dir.join("long.toml");
    let text = study(&lab.pairs_toml(1), 1).replace("duration_s = 1\n", "duration_s = 30\n");
    std::fs::write(&spec, text).unwrap();
    let mut controller = lab
        .nflab()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--out",
            lab.dir.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = controller.id();
    let dut_addr = || ns_read(&dut_ns, &["ip", "-4", "addr", "show", "dev", "p1"]);
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    while !(dut_addr().contains("198.18.0.2")
        && !remote_loadgens().is_empty()
        && scratch_dirs() != before)
    {
        assert!(Instant::now() < deadline, "the run never got going");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    controller.kill().unwrap(); // SIGKILL
    let _ = controller.wait();
    // Left behind: the DuT's address and forwarding, the LoadGen's run and its scratch copy.
    assert!(dut_addr().contains("198.18.0.2"));
    assert_eq!(
        ns_read(&dut_ns, &["cat", "/proc/sys/net/ipv4/ip_forward"]).trim(),
        "1"
    );
    assert!(!remote_loadgens().is_empty());
    assert!(!journals_of(pid).is_empty());
    assert!(
        !ssh_masters_of(pid).is_empty(),
        "no SSH master connection of the study"
    );

    let o = lab.nflab().args(["topo", "gc"]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let left = journals_of(pid);
    // Whatever happened, no journal of this test may outlive it.
    for j in &left {
        let _ = std::fs::remove_file(j);
    }
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(left.is_empty(), "{left:?}");
    assert!(out.contains(&format!("of pid {pid}")), "{out}");
    assert!(!dut_addr().contains("198.18.0.2"), "{}", dut_addr());
    assert_eq!(
        ns_read(&dut_ns, &["cat", "/proc/sys/net/ipv4/ip_forward"]),
        forward_before
    );
    assert!(remote_loadgens().is_empty(), "{:?}", remote_loadgens());
    assert!(ssh_masters_of(pid).is_empty(), "{:?}", ssh_masters_of(pid));
    // Nothing new; gc may also have removed older leftovers of dead pids.
    let after = scratch_dirs();
    assert!(
        after.is_subset(&before),
        "{after:?} after, {before:?} before"
    );
}

#[test]
fn a_host_with_another_key_is_refused_in_one_sentence() {
    require_root!();
    require_tool!("ssh", "openssh-client");
    require_tool!("/usr/sbin/sshd", "openssh-server");
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = SshLab::pairs("key", 1);
    common::sshlab::keygen(&lab.dir.join("other"));
    let other = std::fs::read_to_string(lab.dir.join("other.pub")).unwrap();
    let pairs = lab.pairs_toml(1).replace(&lab.host_key(), other.trim());
    let spec = lab.dir.join("wrong.toml");
    std::fs::write(&spec, study(&pairs, 1)).unwrap();
    let o = run(&lab, &spec, &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("pinned host_key")
            && err.contains("refused")
            && err.trim().lines().count() == 1,
        "{err}"
    );
}

#[test]
fn hostile_spec_strings_never_run_on_a_host() {
    require_root!();
    require_tool!("ssh", "openssh-client");
    require_tool!("/usr/sbin/sshd", "openssh-server");
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = SshLab::pairs("evil", 1);
    let mark = |i: usize| lab.dir.join(format!("pwned-{i}")).display().to_string();
    let good = lab.pairs_toml(1);
    // (what to replace, with what; TOML basic strings: \n is a newline, \" a quote),
    // and whether the study still runs.
    let variants: Vec<(Vec<(String, String)>, bool)> = vec![
        // The LoadGen's interfaces (`nflab remote lg-macs`).
        (
            vec![
                (
                    "tx_iface = \"eth1\"".into(),
                    format!("tx_iface = \"$(touch {})\"", mark(0)),
                ),
                (
                    "rx_iface = \"eth2\"".into(),
                    format!("rx_iface = \"eth2; touch {}; '\"", mark(1)),
                ),
            ],
            false,
        ),
        // The DuT's interfaces (`nflab remote dut-up`).
        (
            vec![
                (
                    "ingress_iface = \"p1\"".into(),
                    format!("ingress_iface = \"p1'\\ntouch {}\\n'\"", mark(2)),
                ),
                (
                    "egress_iface = \"p2\"".into(),
                    format!(
                        "egress_iface = \"`touch {}`\\\"; rm -rf /nonexistent\"",
                        mark(3)
                    ),
                ),
            ],
            false,
        ),
        // The LoadGen's namespace.
        (
            vec![(
                "[pair.dut]".into(),
                format!("netns = \"x'$(touch {})'\"\n[pair.dut]", mark(4)),
            )],
            false,
        ),
        // Keys a host does not use travel inside the run's spec (`nflab remote
        // loadgen --spec-json`): the study runs, and nothing else does.
        (
            vec![(
                "[pair.dut]".into(),
                format!(
                    "ingress_iface = \"'; touch {m}; '\\n$(touch {m})\\\"`touch {m}`\"\n[pair.dut]",
                    m = mark(5)
                ),
            )],
            true,
        ),
    ];
    let spec = lab.dir.join("evil.toml");
    for (i, (edits, runs)) in variants.iter().enumerate() {
        let mut pairs = good.clone();
        for (from, to) in edits {
            assert!(pairs.contains(from.as_str()), "{from}");
            pairs = pairs.replacen(from.as_str(), to, 1);
        }
        std::fs::write(&spec, study(&pairs, 1)).unwrap();
        let o = run(&lab, &spec, &[]);
        let err = stderr(&o);
        if *runs {
            assert!(o.status.success(), "variant {i}: {err}");
        } else {
            assert_eq!(o.status.code(), Some(2), "variant {i}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "variant {i}: {err}");
        }
    }
    // The DuT address itself cannot smuggle an ssh option.
    let evil_addr = good.replacen(
        "address = \"root@",
        &format!("address = \"-oProxyCommand=touch {} root@", mark(6)),
        1,
    );
    std::fs::write(&spec, study(&evil_addr, 1)).unwrap();
    let o = run(&lab, &spec, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not an SSH destination"),
        "{}",
        stderr(&o)
    );
    for i in 0..7 {
        assert!(!Path::new(&mark(i)).exists(), "hostile string {i} ran");
    }
}

/// Done-when of issue 21: a study over several host pairs with live progress
/// on a terminal. Both pairs' runs show on the bar at once, each with the
/// figures its remote LoadGen streams back.
#[test]
fn a_study_over_two_pairs_shows_live_progress_of_both_in_tmux() {
    require_root!();
    require_tool!("ssh", "openssh-client");
    require_tool!("/usr/sbin/sshd", "openssh-server");
    require_tool!("tmux", "tmux");
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = SshLab::pairs("tmux", 2);
    let spec = lab.dir.join("live.toml");
    let text = study(&lab.pairs_toml(2), 4).replace("duration_s = 1\n", "duration_s = 2\n");
    std::fs::write(&spec, text).unwrap();
    let cmd = format!(
        "ip netns exec {} {} run {} --out {}; echo nflab exited $?; sleep 60",
        lab.ctl,
        env!("CARGO_BIN_EXE_nflab"),
        spec.display(),
        lab.dir.display()
    );
    let term = common::tmux::Tmux::start(&lab.dir, "pairs", &cmd);
    let mut both_live = String::new();
    let bar_of = |screen: &str| {
        screen
            .lines()
            .find(|l| l.contains("ETA"))
            .unwrap_or_default()
            .to_string()
    };
    let screen = term.watch(
        std::time::Duration::from_secs(120),
        |s| {
            let bar = bar_of(s);
            if bar.contains("on a: offered")
                && bar.contains("on b: offered")
                && bar.contains("received")
            {
                both_live = bar;
            }
        },
        // Not at "artifacts:": nflab still ends its SSH connections after that,
        // and killing the terminal then would cut that short.
        |s| s.contains("nflab exited"),
    );
    assert!(
        !both_live.is_empty(),
        "never saw both pairs' runs live on the bar; last screen:\n{screen}"
    );
    assert!(
        screen.contains("artifacts:"),
        "the study did not finish:\n{screen}"
    );
    for pair in ["(a)", "(b)"] {
        assert!(
            screen.contains(pair),
            "no run line of pair {pair}:\n{screen}"
        );
    }
    println!("bar with both pairs live: {both_live}");
}

/// Where a study's wall time went, from its event stream: before the study
/// began (environment, host queries), before the first run, in runs (first
/// start to last end), and after the last run (report).
fn phases(events: &Path, start: f64, end: f64) -> String {
    let ev = common::json_lines(events);
    let at = |kind: &str, pick: fn(f64, f64) -> f64| {
        ev.iter()
            .filter(|e| e["event"] == kind)
            .filter_map(|e| e["unix_s"].as_f64())
            .fold(f64::NAN, |a, b| if a.is_nan() { b } else { pick(a, b) })
    };
    let study = at("study_start", f64::min);
    let first = at("run_start", f64::min);
    let last = at("run_end", f64::max);
    // A run from its start to its end, as the controller saw it.
    let time_of = |kind: &str, run: &serde_json::Value| {
        ev.iter()
            .find(|e| e["event"] == kind && &e["run"] == run)
            .and_then(|e| e["unix_s"].as_f64())
    };
    let lengths: Vec<f64> = ev
        .iter()
        .filter(|e| e["event"] == "run_start")
        .filter_map(|e| Some(time_of("run_end", &e["run"])? - e["unix_s"].as_f64()?))
        .collect();
    format!(
        "to study_start {:.1} s, to first run {:.1} s, runs {:.1} s (each {:.2} s on average), after last run {:.1} s",
        study - start,
        first - study,
        last - first,
        lengths.iter().sum::<f64>() / lengths.len() as f64,
        end - last
    )
}

/// Busy time of all cores since boot from `/proc/stat` (everything but idle
/// and iowait), in seconds: who contends with the pairs, not only nflab.
fn busy_cpu_s() -> f64 {
    let ticks = nflab_lab::artifacts::snapshot::parse_cpu_ticks(
        &std::fs::read_to_string("/proc/stat").unwrap(),
    );
    let busy: u64 = ticks
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "idle" | "iowait" | "guest" | "guest_nice"))
        .map(|(_, v)| v)
        .sum();
    busy as f64 / 100.0 // USER_HZ
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The orchestration goal: the same study on two pairs vs one (print only; run with
/// `cargo test -p nflab --test pairs -- --ignored --nocapture`).
#[test]
#[ignore]
fn bench_two_pairs_against_one() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lab = SshLab::pairs("bench", 2);
    let runs = 6;
    // The DuT set up per run (the default), and kept across a pair's runs.
    for keep in [false, true] {
        let mut wall = Vec::new();
        for n in [1, 2, 1, 2] {
            let spec = lab.dir.join(format!("bench{n}.toml"));
            let mut text = study(&lab.pairs_toml(n), runs);
            if keep {
                text = text.replace("kind = \"hosts\"\n", "kind = \"hosts\"\nkeep = true\n");
            }
            std::fs::write(&spec, text).unwrap();
            let events = lab.dir.join(format!("bench{n}.jsonl"));
            let t = Instant::now();
            let start = nflab_lab::artifacts::events::unix_s();
            let busy_before = busy_cpu_s();
            let o = run(&lab, &spec, &["--events", events.to_str().unwrap()]);
            assert!(o.status.success(), "{}", stderr(&o));
            let secs = t.elapsed().as_secs_f64();
            wall.push((n, secs));
            let busy = busy_cpu_s() - busy_before;
            println!(
                "  {n} pair(s): {}; CPU busy {busy:.1} s of {:.1} ({:.0} % of the cores)",
                phases(&events, start, nflab_lab::artifacts::events::unix_s()),
                secs * cores() as f64,
                100.0 * busy / (secs * cores() as f64),
            );
        }
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let one: f64 = wall.iter().filter(|w| w.0 == 1).map(|w| w.1).sum::<f64>() / 2.0;
        let two: f64 = wall.iter().filter(|w| w.0 == 2).map(|w| w.1).sum::<f64>() / 2.0;
        println!(
            "keep={keep}: {runs} runs of 1 s: one pair {one:.1} s, two pairs {two:.1} s, ratio {:.2} (each the mean of 2; {wall:?}); loadavg {}",
            two / one,
            load.trim()
        );
    }
}
