//! `dut.kind = "external"` on real namespaces (root): boxes nflab does not set up,
//! set up by the spec's own hooks — a kernel router (measured beside nflab's own
//! `linux-router`), a router whose nftables drop a known share — the user's namespace
//! left as it was found, and the faults a user meets, each one sentence.
//!
//! Run: `sudo -E cargo test -p nflab-lab --test external -- --nocapture`

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{json, serial, study};

fn tmp(tag: &str) -> PathBuf {
    common::tmp("ext", tag)
}

/// The hook that makes the nflab-made DuT namespace a kernel router, as
/// `linux-router` would be (without its static neighbours: the box asks by ARP).
const ROUTER_SETUP: &str = r#"setup = ["sh", "-c", "ip -n $NFLAB_DUT_NETNS addr add 198.18.0.2/24 dev $NFLAB_INGRESS && ip -n $NFLAB_DUT_NETNS addr add 198.19.0.2/24 dev $NFLAB_EGRESS && ip netns exec $NFLAB_DUT_NETNS sysctl -qw net.ipv4.ip_forward=1"]"#;

const TRAFFIC: &str =
    "[traffic]\nbackend = \"af_packet\"\nrate_pps = 10000\nduration_s = 1\nwarmup_s = 0.2\n";

#[test]
fn a_router_set_up_by_its_hooks_measures_as_the_linux_router_nflab_sets_up() {
    if !nflab_testkit::require_root() {
        return;
    }
    let _one = serial();
    let dir = tmp("router");
    let r = study(
        &dir,
        &format!(
            "[experiment]\nname = \"ext\"\nrepetitions = 2\norder = \"random\"\n{TRAFFIC}\
             [sweep]\n\"dut.kind\" = [\"linux-router\", \"external\"]\n\
             [dut.external]\n{ROUTER_SETUP}\nteardown = [\"true\"]\n"
        ),
    )
    .expect("the study");
    assert_eq!(r.runs.len(), 4);
    let mut p50 = [Vec::new(), Vec::new()];
    for (i, row) in r.runs.iter().enumerate() {
        let s = &row.summary;
        let external = row.dut == "external";
        assert_eq!(s.loss_ratio, 0.0, "run {i}: loss {}", s.loss_ratio);
        assert!(s.packets.received > 9000, "run {i}: {:?}", s.packets);
        p50[external as usize].push(s.latency_ns.p50.expect("a median") as f64);
        if external {
            let run_dir = r.dir.join("runs").join(&row.run);
            let ext = json(&run_dir.join("external.json"));
            assert_eq!(ext["mode"], "l3");
            let names: Vec<&str> = ext["hooks"]
                .as_array()
                .expect("hooks")
                .iter()
                .filter_map(|h| h["name"].as_str())
                .collect();
            assert_eq!(names, ["setup", "teardown"]);
            assert!(ext["hooks"][0]["exit_code"] == 0, "{ext}");
            // The router's dut0 MAC, found by ARP.
            assert_eq!(ext["probe_dst_mac"], "02:4e:46:00:01:01", "{ext}");
        }
    }
    // Both kernels forward alike: the medians differ by less than the medians of one
    // kind differ between its own repetitions, plus a microsecond.
    let spread = |v: &[f64]| {
        v.iter().cloned().fold(f64::MIN, f64::max) - v.iter().cloned().fold(f64::MAX, f64::min)
    };
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let noise = spread(&p50[0]).max(spread(&p50[1])) + 1_000.0;
    assert!(
        (mean(&p50[0]) - mean(&p50[1])).abs() <= noise,
        "linux-router p50 {:?} ns, external {:?} ns",
        p50[0],
        p50[1]
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn a_box_that_drops_a_known_share_of_one_way_loses_that_share_that_way_only() {
    if !nflab_testkit::require_root() || !nflab_testkit::require_tool("nft", "nftables") {
        return;
    }
    let _one = serial();
    let dir = tmp("drop");
    let share = 0.2;
    // The box drops a fifth of what comes in on its egress port: the reverse way.
    let drop_rule = r#"health = ["sh", "-c", "ip netns exec $NFLAB_DUT_NETNS nft add table inet box && ip netns exec $NFLAB_DUT_NETNS nft 'add chain inet box through { type filter hook forward priority 0; }' && ip netns exec $NFLAB_DUT_NETNS nft add rule inet box through iifname $NFLAB_EGRESS numgen random mod 100 '<' 20 drop"]"#;
    let r = study(
        &dir,
        &format!(
            "[experiment]\nname = \"drop\"\n{TRAFFIC}direction = \"both\"\n[dut]\nkind = \"external\"\n[dut.external]\n{ROUTER_SETUP}\n{drop_rule}\n"
        ),
    )
    .expect("the study");
    let s = &r.runs[0].summary;
    for (way, want) in [("forward", 0.0), ("reverse", share)] {
        let x = &s.directions[way];
        let n = (x.packets.received + x.packets.lost) as f64;
        let se = (want * (1.0 - want) / n).sqrt();
        println!("{way}: loss {} of {n} probes", x.loss_ratio);
        assert!(
            (x.loss_ratio - want).abs() <= 3.0 * se,
            "{way}: loss {} of {n} probes, expected {want} ± {}",
            x.loss_ratio,
            3.0 * se
        );
    }
    // The box's MAC on each side, found by ARP.
    let ext = json(&r.dir.join("runs/000/external.json"));
    assert_eq!(ext["probe_dst_mac"], "02:4e:46:00:01:01", "{ext}");
    assert_eq!(ext["reverse_probe_dst_mac"], "02:4e:46:00:01:02", "{ext}");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn with_a_kept_topology_the_hooks_run_once_per_study() {
    if !nflab_testkit::require_root() {
        return;
    }
    let _one = serial();
    let dir = tmp("keep");
    let log = dir.join("hooks.log");
    let (setup, teardown) = (
        ROUTER_SETUP.replace(
            "sysctl -qw net.ipv4.ip_forward=1",
            &format!(
                "sysctl -qw net.ipv4.ip_forward=1 && echo setup >> {}",
                log.display()
            ),
        ),
        format!(
            "teardown = [\"sh\", \"-c\", \"echo teardown >> {}\"]",
            log.display()
        ),
    );
    for keep in [true, false] {
        let _ = std::fs::remove_file(&log);
        let r = study(
            &dir,
            &format!(
                "[experiment]\nname = \"keep\"\n{TRAFFIC}[topology]\nkeep = {keep}\n[dut]\nkind = \"external\"\n\
                 [dut.external]\n{setup}\n{teardown}\n[sweep]\n\"traffic.rate_pps\" = [5000, 10000, 20000]\n"
            ),
        )
        .expect("the study");
        assert_eq!(r.runs.len(), 3);
        for row in &r.runs {
            assert_eq!(
                row.summary.loss_ratio, 0.0,
                "keep = {keep}, run {}",
                row.run
            );
        }
        let hooks = std::fs::read_to_string(&log).expect("the hooks' log");
        let times = if keep { 1 } else { 3 };
        assert_eq!(
            hooks,
            "setup\nteardown\n".repeat(times),
            "keep = {keep}: the hooks ran so"
        );
        if keep {
            let first = json(&r.dir.join("runs/000/external.json"));
            let names: Vec<&str> = first["hooks"]
                .as_array()
                .expect("hooks")
                .iter()
                .filter_map(|h| h["name"].as_str())
                .collect();
            assert_eq!(names, ["setup", "teardown"], "{first}");
            for run in ["001", "002"] {
                let later = json(&r.dir.join("runs").join(run).join("external.json"));
                assert_eq!(later["set_up_in_run"], "000", "{later}");
                assert_eq!(later["hooks"], serde_json::json!([]), "{later}");
                assert_eq!(later["probe_dst_mac"], "02:4e:46:00:01:01", "{later}");
            }
        }
    }
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// What a namespace looks like to someone who would notice a change.
fn state_of(ns: &str) -> String {
    let mut s = String::new();
    for args in [
        vec!["ip", "-n", ns, "-d", "addr", "show"],
        vec!["ip", "-n", ns, "route", "show", "table", "all"],
        vec!["ip", "-n", ns, "-d", "link", "show"],
        vec!["ip", "netns", "exec", ns, "nft", "list", "ruleset"],
        vec![
            "ip",
            "netns",
            "exec",
            ns,
            "sysctl",
            "net.ipv4.ip_forward",
            "net.ipv4.conf.all.rp_filter",
        ],
    ] {
        let out = Command::new(args[0])
            .args(&args[1..])
            .output()
            .expect("state");
        s.push_str(&String::from_utf8_lossy(&out.stdout));
    }
    s
}

#[test]
fn a_run_without_hooks_leaves_the_users_namespace_as_it_found_it() {
    if !nflab_testkit::require_root() || !nflab_testkit::require_tool("nft", "nftables") {
        return;
    }
    let _one = serial();
    let ns = format!("nflabtest-box-{}", std::process::id());
    struct Ns(String);
    impl Drop for Ns {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }
    assert!(Command::new("ip")
        .args(["netns", "add", &ns])
        .status()
        .expect("ip")
        .success());
    let _ns = Ns(ns.clone());
    for args in [
        vec!["ip", "-n", &ns, "link", "set", "lo", "up"],
        vec![
            "ip",
            "-n",
            &ns,
            "addr",
            "add",
            "198.18.99.1/32",
            "dev",
            "lo",
        ],
        vec![
            "ip",
            "netns",
            "exec",
            &ns,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
        ],
        vec![
            "ip", "netns", "exec", &ns, "nft", "add", "table", "inet", "users",
        ],
    ] {
        assert!(Command::new(args[0])
            .args(&args[1..])
            .status()
            .expect("prepare")
            .success());
    }
    let before = state_of(&ns);
    let spec = |hooks: &str| {
        format!(
            "[experiment]\nname = \"untouched\"\n[traffic]\nbackend = \"af_packet\"\nrate_pps = 1000\nduration_s = 0.3\nwarmup_s = 0\n\
             [dut]\nkind = \"external\"\n[dut.external]\nmode = \"l2\"\nnetns = \"{ns}\"\ningress = \"in0\"\negress = \"out0\"\n{hooks}"
        )
    };
    // Without hooks nothing in the box forwards: the run is refused before it records,
    // and the namespace is as it was.
    let e = study(&tmp("untouched-bare"), &spec("")).expect_err("a box that forwards nothing");
    assert!(e.to_string().contains("forwarded none of"), "{e}");
    assert_eq!(state_of(&ns), before, "the namespace changed");
    // Hooks that bridge the ports and take the bridge down again: nothing left either.
    let dir = tmp("untouched");
    let hooks = format!(
        "setup = [\"sh\", \"-c\", \"ip -n {ns} link add nflabtest-br type bridge && ip -n {ns} link set in0 master nflabtest-br && ip -n {ns} link set out0 master nflabtest-br && ip -n {ns} link set nflabtest-br up\"]\n\
         teardown = [\"ip\", \"-n\", \"{ns}\", \"link\", \"del\", \"nflabtest-br\"]\n"
    );
    let r = study(&dir, &spec(&hooks)).expect("the study");
    assert_eq!(r.runs[0].summary.loss_ratio, 0.0);
    let ext = json(&r.dir.join("runs/000/external.json"));
    assert_eq!(ext["netns"], ns.as_str());
    assert_eq!(ext["ports"], serde_json::json!(["in0", "out0"]));
    assert_eq!(state_of(&ns), before, "the namespace changed");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn faults_are_one_sentence_and_the_hooks_that_ran_are_on_record() {
    if !nflab_testkit::require_root() {
        return;
    }
    let _one = serial();
    let dir = tmp("faults");
    let base = "[experiment]\nname = \"f\"\n[traffic]\nbackend = \"af_packet\"\nrate_pps = 1000\nduration_s = 0.2\nwarmup_s = 0\n[dut]\nkind = \"external\"\n[dut.external]\n";
    let marker = dir.join("torn-down");
    let teardown = format!("teardown = [\"touch\", \"{}\"]\n", marker.display());
    for (i, (extra, want)) in [
        // Nothing answers for the gateway.
        (
            "arp_timeout_s = 0.3\n".to_string(),
            "the gateway 198.18.0.2 did not answer ARP on lg0 within 0.3 s",
        ),
        (
            format!("setup = [\"sh\", \"-c\", \"echo boom >&2; exit 3\"]\n{teardown}"),
            "dut.external.setup (sh -c echo boom >&2; exit 3) exited with 3: boom",
        ),
        (
            "setup = { argv = [\"sleep\", \"30\"], timeout_s = 0.3 }\n".into(),
            "dut.external.setup (sleep 30) did not end within 0.3 s and was killed",
        ),
        (
            "netns = \"nflabtest-no-such-ns\"\n".into(),
            "dut.external.netns = \"nflabtest-no-such-ns\" does not exist",
        ),
        (
            "mode = \"l4\"\n".into(),
            "dut.external.mode = \"l4\" is not known",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        // A directory each: two studies of one spec in one second would share one.
        let case = dir.join(format!("case-{i}"));
        std::fs::create_dir_all(&case).expect("case dir");
        let e = study(&case, &format!("{base}{extra}"))
            .expect_err(&extra)
            .to_string();
        assert!(e.contains(want), "{extra}: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
    // The failed setup's teardown ran, and its run says what happened.
    assert!(marker.exists(), "teardown did not run after a failed setup");
    let records: Vec<PathBuf> = walk(&dir)
        .into_iter()
        .filter(|p| p.ends_with("external.json"))
        .collect();
    let failed = records
        .iter()
        .map(|p| json(p))
        .find(|e| e["hooks"][0]["exit_code"] == 3)
        .expect("the failed setup's external.json");
    assert!(failed["hooks"][0]["stderr_tail"]
        .as_str()
        .is_some_and(|t| t.contains("boom")));
    assert_eq!(failed["hooks"][1]["name"], "teardown");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Runs `args` as a command that must succeed.
fn sh(args: &[&str]) {
    let ok = Command::new(args[0])
        .args(&args[1..])
        .status()
        .expect("command")
        .success();
    assert!(ok, "{args:?} failed");
}

#[test]
fn a_box_behind_the_loadgens_own_ports_is_measured_and_the_ports_are_left_as_found() {
    if !nflab_testkit::require_root() {
        return;
    }
    let _one = serial();
    // Two "machines": the LoadGen's namespace with two ports, cabled to a router in another.
    let (lg, boxns) = (
        format!("nflabtest-lgh-{}", std::process::id()),
        format!("nflabtest-rth-{}", std::process::id()),
    );
    struct Ns(Vec<String>);
    impl Drop for Ns {
        fn drop(&mut self) {
            for ns in &self.0 {
                let _ = Command::new("ip").args(["netns", "del", ns]).status();
            }
        }
    }
    let _gone = Ns(vec![lg.clone(), boxns.clone()]);
    for ns in [&lg, &boxns] {
        sh(&["ip", "netns", "add", ns]);
        sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        sh(&[
            "ip",
            "netns",
            "exec",
            ns,
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
        ]);
    }
    for (a, b) in [("tx0", "in0"), ("rx0", "out0")] {
        sh(&[
            "ip", "-n", &lg, "link", "add", a, "type", "veth", "peer", "name", b, "netns", &boxns,
        ]);
        sh(&["ip", "-n", &lg, "link", "set", a, "up"]);
        sh(&["ip", "-n", &boxns, "link", "set", b, "up"]);
    }
    sh(&[
        "ip",
        "-n",
        &boxns,
        "addr",
        "add",
        "198.18.0.2/24",
        "dev",
        "in0",
    ]);
    sh(&[
        "ip",
        "-n",
        &boxns,
        "addr",
        "add",
        "198.19.0.2/24",
        "dev",
        "out0",
    ]);
    sh(&[
        "ip",
        "netns",
        "exec",
        &boxns,
        "sysctl",
        "-qw",
        "net.ipv4.ip_forward=1",
    ]);
    let before = state_of(&lg);
    let dir = tmp("hosts");
    let r = study(
        &dir,
        &format!(
            "[experiment]\nname = \"hosts\"\n{TRAFFIC}[topology]\nkind = \"hosts\"\n\
             [hosts.loadgen]\naddress = \"local\"\nnetns = \"{lg}\"\ntx_iface = \"tx0\"\nrx_iface = \"rx0\"\n\
             [dut]\nkind = \"external\"\n"
        ),
    )
    .expect("the study");
    let s = &r.runs[0].summary;
    assert_eq!(s.loss_ratio, 0.0);
    assert!(s.packets.received > 9000, "{:?}", s.packets);
    let ext = json(&r.dir.join("runs/000/external.json"));
    // The box's two MACs: the probes go to in0, and nothing goes the other way.
    let mac_of = |dev: &str| {
        let out = Command::new("ip")
            .args(["-n", &boxns, "-br", "link", "show", dev])
            .output()
            .expect("ip");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .nth(2)
            .expect("a MAC")
            .to_string()
    };
    assert_eq!(ext["probe_dst_mac"], mac_of("in0"), "{ext}");
    assert!(ext["reverse_probe_dst_mac"].is_null(), "{ext}");
    assert_eq!(
        ext["addresses_added"],
        serde_json::json!(["198.18.0.1/24 on tx0", "198.19.0.1/24 on rx0"])
    );
    assert!(ext["netns"].is_null(), "{ext}");
    // The addresses went again; the rest of the LoadGen's namespace is as it was.
    assert_eq!(state_of(&lg), before, "the LoadGen's namespace changed");
    // Both ways through the same box: the reverse way to out0's MAC, found by ARP.
    let both_dir = tmp("hosts-both");
    let both = study(
        &both_dir,
        &format!(
            "[experiment]\nname = \"hosts\"\n{TRAFFIC}direction = \"both\"\n[topology]\nkind = \"hosts\"\n\
             [hosts.loadgen]\naddress = \"local\"\nnetns = \"{lg}\"\ntx_iface = \"tx0\"\nrx_iface = \"rx0\"\n\
             [dut]\nkind = \"external\"\n"
        ),
    )
    .expect("the study both ways");
    for way in ["forward", "reverse"] {
        let x = &both.runs[0].summary.directions[way];
        assert_eq!(x.loss_ratio, 0.0, "{way}");
        assert!(x.packets.received > 9000, "{way}: {:?}", x.packets);
    }
    let ext = json(&both.dir.join("runs/000/external.json"));
    assert_eq!(ext["reverse_probe_dst_mac"], mac_of("out0"), "{ext}");
    assert_eq!(state_of(&lg), before, "the LoadGen's namespace changed");
    std::fs::remove_dir_all(&both_dir).expect("clean up");
    // [hosts.dut] is for a box nflab sets up.
    let e = study(
        &tmp("hosts-dut"),
        &format!(
            "[experiment]\nname = \"hosts\"\n{TRAFFIC}[topology]\nkind = \"hosts\"\n\
             [hosts.loadgen]\naddress = \"local\"\nnetns = \"{lg}\"\ntx_iface = \"tx0\"\nrx_iface = \"rx0\"\n\
             [hosts.dut]\naddress = \"root@198.18.254.2\"\n[dut]\nkind = \"external\"\n"
        ),
    )
    .expect_err("[hosts.dut] with an external box");
    assert!(
        e.to_string()
            .contains("[hosts.dut] does not apply to dut.kind = \"external\""),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// The examples' boxes as a user runs them, shortened: one rate, half a second.
#[test]
fn the_third_party_examples_forward_every_probe() {
    if !nflab_testkit::require_root()
        || !nflab_testkit::require_tool("nft", "nftables")
        || !nflab_testkit::require_tool("/usr/lib/frr/zebra", "frr")
        || !nflab_testkit::require_tool("/usr/lib/ipsec/charon", "strongswan-charon")
        || !nflab_testkit::require_tool("swanctl", "strongswan-swanctl")
    {
        return;
    }
    let _one = serial();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    for name in ["external-nat", "external-frr", "external-ipsec"] {
        let text = std::fs::read_to_string(examples.join(format!("{name}.toml"))).expect("example");
        let mut spec: toml::Table = toml::from_str(&text).expect("toml");
        let traffic = spec["traffic"].as_table_mut().expect("[traffic]");
        traffic.insert("duration_s".into(), 0.5.into());
        traffic.insert("warmup_s".into(), 0.2.into());
        // Userspace ESP carries about 20 kpps each way on a 2-vCPU host: stay well below.
        let rate = if name == "external-ipsec" {
            2500
        } else {
            10000
        };
        traffic.insert("rate_pps".into(), rate.into());
        spec.remove("sweep");
        let dir = tmp(name);
        let r = study(&dir, &toml::to_string(&spec).expect("spec"))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        // Every example sends both ways, and the box carries both.
        let s = &r.runs[0].summary;
        for way in ["forward", "reverse"] {
            let x = &s.directions[way];
            assert_eq!(x.loss_ratio, 0.0, "{name} {way}");
            assert!(
                x.packets.received as f64 > 0.4 * rate as f64,
                "{name} {way}: {:?}",
                x.packets
            );
        }
        let ext = json(&r.dir.join("runs/000/external.json"));
        for hook in ext["hooks"].as_array().expect("hooks") {
            assert_eq!(hook["exit_code"], 0, "{name}: {hook}");
        }
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
    // FRR's and strongSwan's daemons went with their teardown.
    for daemons in ["frr-nflab", "ipsec/charon"] {
        let left = Command::new("pgrep")
            .args(["-f", daemons])
            .output()
            .expect("pgrep");
        assert!(
            left.stdout.is_empty(),
            "{daemons}: {}",
            String::from_utf8_lossy(&left.stdout)
        );
    }
}

/// A box that polices at a known rate (nftables `limit`): RFC 2544's throughput search
/// finds that rate.
#[test]
fn the_throughput_of_a_box_that_polices_at_a_known_rate_is_that_rate() {
    if !nflab_testkit::require_root() || !nflab_testkit::require_tool("nft", "nftables") {
        return;
    }
    let _one = serial();
    let dir = tmp("police");
    let rate = 20_000.0;
    let police = r#"health = ["sh", "-c", "ip netns exec $NFLAB_DUT_NETNS nft add table inet box && ip netns exec $NFLAB_DUT_NETNS nft 'add chain inet box through { type filter hook forward priority 0; }' && ip netns exec $NFLAB_DUT_NETNS nft add rule inet box through limit rate over 20000/second burst 200 packets drop"]"#;
    let r = study(
        &dir,
        &format!(
            "[experiment]\nname = \"police\"\n[traffic]\nbackend = \"af_packet\"\nframe_bytes = 64\nwarmup_s = 0.2\n\
             [dut]\nkind = \"external\"\n[dut.external]\n{ROUTER_SETUP}\n{police}\n\
             [rfc2544]\nprocedure = \"throughput\"\nloss_tolerance = 0.0\nmin_rate_pps = 5000\nmax_rate_pps = 40000\nresolution_pps = 500\ntrial_s = 1\n"
        ),
    )
    .expect("the study");
    let t = r.rfc2544[0].throughput_pps.expect("a throughput");
    println!("RFC 2544 throughput {t} pps against a policer at {rate} pps");
    assert!(
        (t - rate).abs() <= 0.05 * rate,
        "throughput {t} pps against a policer at {rate} pps"
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}
