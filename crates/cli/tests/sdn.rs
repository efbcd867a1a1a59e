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
