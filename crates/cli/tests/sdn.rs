//! SDN end to end (docs/sdn.md): the `ovs` DuT kind under `nflab run`, and the
//! `nflab sdn` commands. Needs root and Open vSwitch (scripts/deps.sh test
//! installs openvswitch-switch).

use std::path::PathBuf;

#[macro_use]
mod common;
use common::{read_json, run_ok, TempDir};

const OVS_SPEC: &str = r#"
[experiment]
name = "e2e-ovs"

[dut]
kind = "ovs"

[traffic]
rate_pps = 5000
frame_bytes = 64
duration_s = 1
warmup_s = 0.2
"#;

fn ovs_dirs_of(pid: u32) -> Vec<String> {
    std::fs::read_dir("/run/nflab")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with(&format!("ovs-{pid}-")))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn ovs_dut_forwards_and_its_flow_counters_land_in_dut_json() {
    require_root!();
    require_tool!("ovs-vswitchd", "openvswitch-switch");
    let tmp = TempDir::new("ovs-dut");
    let spec = tmp.0.join("spec.toml");
    std::fs::write(&spec, OVS_SPEC).unwrap();
    let (_, result, pid) = run_ok(&spec, &tmp.0);
    assert!(ovs_dirs_of(pid).is_empty(), "{:?}", ovs_dirs_of(pid));
    let run = PathBuf::from(result["dir"].as_str().unwrap()).join("runs/000");
    let dut = read_json(run.join("dut.json"));
    let summary = read_json(run.join("summary.json"));
    assert_eq!(dut["kind"], "ovs");
    assert!(dut["error"].is_null(), "{}", dut["error"]);
    let received = summary["packets"]["received"].as_u64().unwrap();
    assert!(received > 1000, "only {received} probes crossed OvS");
    // The in_port=1 flow counted every probe the recorder saw (and the
    // readiness probes before them).
    let flows = dut["flows"].as_array().unwrap();
    let fwd = flows
        .iter()
        .filter_map(|f| f.as_str())
        .find(|f| f.contains("in_port=1"))
        .unwrap_or_else(|| panic!("no in_port=1 flow in {flows:?}"));
    let n: u64 = fwd
        .split("n_packets=")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    assert!(n >= received, "flow counted {n} < {received} received");
}

#[test]
fn sdn_bench_json_has_the_contract_keys_directly_and_via_proxy() {
    require_root!();
    require_tool!("ovs-vswitchd", "openvswitch-switch");
    for extra in [&[][..], &["--via-proxy"][..]] {
        let o = common::nflab()
            .args([
                "sdn",
                "bench",
                "--switches",
                "2",
                "--flowmods",
                "20",
                "--repeat",
                "2",
                "--json",
            ])
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", common::stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        for key in ["install_s", "stats_delay_ms"] {
            assert!(v[key]["mean"].as_f64().unwrap() > 0.0, "{v}");
            assert!(v[key]["ci95"].as_f64().unwrap() >= 0.0, "{v}");
        }
        // The mean is the samples' mean.
        let s: Vec<f64> = v["install_s_samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(s.len(), 2);
        assert!((v["install_s"]["mean"].as_f64().unwrap() - (s[0] + s[1]) / 2.0).abs() < 1e-12);
    }
}

/// The first python3 on this test's PATH when it imports os_ken (resolved
/// through `sys.executable`, so a pyenv shim names the real interpreter).
fn python_with_os_ken() -> Option<String> {
    let out = std::process::Command::new("python3")
        .args(["-c", "import os_ken, sys; print(sys.executable)"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let exe = String::from_utf8_lossy(&out.stdout).trim().to_string();
    exe.starts_with('/').then_some(exe)
}

#[test]
fn sdn_acl_installs_n_plus_m_flows_and_misforwards_nothing() {
    require_root!();
    require_tool!("ovs-vswitchd", "openvswitch-switch");
    let (n, m) = (7, 5);
    let mut nflab = common::nflab();
    // nflab takes the system's python3, never PATH's; the test's own (a
    // pyenv or virtualenv one, where scripts/deps.sh put os-ken) by name.
    if let Some(python) = python_with_os_ken() {
        nflab.env("NFLAB_PYTHON", python);
    }
    let child = nflab
        .args([
            "sdn",
            "acl",
            "--acl",
            "7",
            "--mac",
            "5",
            "--packets",
            "600",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["flows_per_bridge"], serde_json::json!([n, m]), "{v}");
    assert_eq!(v["packets"], 600);
    assert_eq!(v["misforwarded"], 0, "{v}");
    assert_eq!(v["lost"], 0, "{v}");
    // Independent count of what the single-table reference forwards: sources
    // 0..n+2 (every third of the first n denied, the last two unknown) ×
    // destinations 0..m+1 (the last unknown), probe i = (i mod (n+2), i div (n+2) mod (m+1)).
    let expected = (0..600)
        .filter(|i| {
            let (a, b) = (i % (n + 2), (i / (n + 2)) % (m + 1));
            a < n && a % 3 != 2 && b < m
        })
        .count();
    assert_eq!(v["expected_forwarded"], expected);
    assert_eq!(v["received"], expected, "{v}");
    assert!(ovs_dirs_of(pid).is_empty());
    assert!(common::namespaces_of(pid).is_empty());
}

#[test]
fn staged_bridges_and_flower_hops_carry_every_probe() {
    require_root!();
    require_tool!("ovs-vswitchd", "openvswitch-switch");
    let tmp = TempDir::new("ovs-staged");
    let spec = tmp.0.join("spec.toml");
    std::fs::write(
        &spec,
        "[experiment]\nname = \"e2e-ovs-staged\"\n[dut]\nkind = \"ovs\"\n\
         [traffic]\nrate_pps = 500\nframe_bytes = 64\nduration_s = 1\nwarmup_s = 0.2\n\
         [sweep]\n\"dut.bridges\" = [3]\n",
    )
    .unwrap();
    let (_, result, _) = run_ok(&spec, &tmp.0);
    let run = PathBuf::from(result["dir"].as_str().unwrap()).join("runs/000");
    let dut = read_json(run.join("dut.json"));
    let flows: Vec<&str> = dut["flows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    assert_eq!(flows.len(), 6, "{flows:?}");
    let summary = read_json(run.join("summary.json"));
    assert_eq!(summary["packets"]["lost"], 0, "{summary}");
    // Every bridge's forward flow counted the probes.
    for br in ["br0", "br1", "br2"] {
        let f = flows
            .iter()
            .find(|f| f.starts_with(br) && f.contains("in_port=1"))
            .unwrap();
        assert!(!f.contains("n_packets=0,"), "{f}");
    }

    let spec2 = tmp.0.join("hops.toml");
    std::fs::write(
        &spec2,
        "[experiment]\nname = \"e2e-ovs-hops\"\n[dut]\nkind = \"ovs\"\n\
         [traffic]\nrate_pps = 500\nframe_bytes = 64\nduration_s = 1\nwarmup_s = 0.2\n\
         [sweep]\n\"dut.hops\" = [1, 2, 3]\n",
    )
    .unwrap();
    let (_, result, _) = run_ok(&spec2, &tmp.0);
    let dir = result["dir"].as_str().unwrap().to_string();
    let o = common::nflab()
        .args(["sdn", "flower-fit", &dir, "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let points = v["points"].as_array().unwrap();
    assert_eq!(
        points
            .iter()
            .map(|p| p["hops"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
    for p in points {
        assert_eq!(p["received"], 500, "{p}");
    }
    assert!(
        v["per_hop_ns"]["slope"].is_f64() && v["per_hop_ns"]["r2"].is_f64(),
        "{v}"
    );

    // The same cycle on AF_XDP ports a PMD thread polls.
    let spec3 = tmp.0.join("afxdp.toml");
    std::fs::write(
        &spec3,
        "[experiment]\nname = \"e2e-ovs-afxdp\"\n[dut]\nkind = \"ovs\"\nport_type = \"afxdp\"\n\
         [traffic]\nrate_pps = 500\nframe_bytes = 64\nduration_s = 1\nwarmup_s = 0.2\n\
         [sweep]\n\"dut.hops\" = [2]\n",
    )
    .unwrap();
    let (_, result, _) = run_ok(&spec3, &tmp.0);
    let run = PathBuf::from(result["dir"].as_str().unwrap()).join("runs/000");
    let summary = read_json(run.join("summary.json"));
    assert_eq!(summary["packets"]["lost"], 0, "{summary}");
    assert_eq!(summary["packets"]["received"], 500, "{summary}");
    let dut = read_json(run.join("dut.json"));
    let flows = dut["flows"].to_string();
    // Both cables' return ports counted the probes.
    for port in ["in_port=11", "in_port=13"] {
        let f = dut["flows"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f.as_str())
            .find(|f| f.contains(port))
            .unwrap_or_else(|| panic!("{port} in {flows}"));
        assert!(!f.contains("n_packets=0,"), "{f}");
    }
}

#[test]
fn a_bad_proxy_config_is_one_sentence_and_exit_2() {
    let tmp = TempDir::new("proxy-bad");
    let good = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/sdn/proxy.toml"),
    )
    .unwrap();
    for (text, want) in [
        (
            good.replacen(
                "id = 2\nswitch = \"s2\"\nlocal = 1",
                "id = 3\nswitch = \"s2\"\nlocal = 1",
                1,
            ),
            "port 2 is missing",
        ),
        (
            good.replacen(
                "switch = \"s2\"\nlocal = 1",
                "switch = \"s3\"\nlocal = 1",
                1,
            ),
            "not a [[switch]]",
        ),
    ] {
        assert_ne!(text, good);
        let path = tmp.0.join("proxy.toml");
        std::fs::write(&path, &text).unwrap();
        let o = common::nflab()
            .args(["sdn", "proxy", "--config", path.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2));
        let err = common::stderr(&o);
        assert!(err.contains(want), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}
