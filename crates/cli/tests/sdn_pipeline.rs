//! Pipelines of Open vSwitch bridges and priority queues under `nflab run`
//! (docs/sdn.md): staged, unidirectional, unidirectional behind the proxy,
//! and realtime probes against background traffic with and without a
//! priority queue. Needs root and Open vSwitch.

use std::path::PathBuf;

#[macro_use]
mod common;
use common::{read_json, run_ok, TempDir};

/// The two tests each run Open vSwitch, a generator and a recorder: one at a
/// time, so neither measures the other's load.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Flows of a run's `dut.json` as text.
fn flows_of(run: &std::path::Path) -> Vec<String> {
    read_json(run.join("dut.json"))["flows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str().map(String::from))
        .collect()
}

fn n_packets(flow: &str) -> u64 {
    let i = flow.find("n_packets=").unwrap() + "n_packets=".len();
    flow[i..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn every_pipeline_shape_carries_every_probe_through_the_stages_it_should() {
    require_root!();
    require_tool!("ovs-vswitchd", "openvswitch-switch");
    let tmp = TempDir::new("ovs-shapes");
    let _one_at_a_time = ONE_AT_A_TIME.lock();
    // Three runs: staged (3 stages, 2 deep), unidirectional, and
    // unidirectional behind the proxy with nflab's controller.
    let cases = [
        ("shape = \"staged\"\ndepth = 2", "staged"),
        ("shape = \"unidirectional\"", "uni"),
        (
            "shape = \"unidirectional\"\ncontroller = \"proxy\"",
            "proxy",
        ),
    ];
    for (keys, tag) in cases {
        let spec = common::write_spec(
            &tmp.0,
            tag,
            &format!(
                "[experiment]\nname = \"e2e-ovs-{tag}\"\n[dut]\nkind = \"ovs\"\nbridges = 3\n{keys}\n\
                 [traffic]\nrate_pps = 500\nframe_bytes = 64\nduration_s = 1\nwarmup_s = 0.2\n"
            ),
        );
        let (_, result, pid) = run_ok(&spec, &tmp.0);
        assert!(common::namespaces_of(pid).is_empty());
        let run = PathBuf::from(result["dir"].as_str().unwrap()).join("runs/000");
        let dut = read_json(run.join("dut.json"));
        assert!(dut["error"].is_null(), "{tag}: {}", dut["error"]);
        let summary = read_json(run.join("summary.json"));
        assert_eq!(summary["packets"]["received"], 500, "{tag}: {summary}");
        assert_eq!(summary["packets"]["duplicated"], 0, "{tag}");
        let flows = flows_of(&run);
        let on = |br: &str| -> Vec<&String> {
            flows
                .iter()
                .filter(|f| f.starts_with(&format!("{br}: ")))
                .collect()
        };
        match tag {
            "staged" => {
                // br0 out to stage 2 and back; br1 turns frames round; br2 is unused.
                let down = on("br0")
                    .into_iter()
                    .find(|f| f.contains("in_port=1"))
                    .unwrap();
                let back = on("br1")
                    .into_iter()
                    .find(|f| f.contains("actions=IN_PORT"))
                    .unwrap_or_else(|| panic!("{flows:?}"));
                assert!(
                    n_packets(down) >= 500 && n_packets(back) >= 500,
                    "{flows:?}"
                );
                assert!(on("br2").is_empty(), "{flows:?}");
            }
            "uni" => {
                for br in ["br0", "br1", "br2"] {
                    let f = on(br);
                    assert_eq!(f.len(), 1, "{br}: no reverse flow expected: {f:?}");
                    assert!(n_packets(f[0]) >= 500, "{f:?}");
                }
            }
            _ => {
                // The controller's three flows, one per stage, plus the proxy's
                // entry rules (cookie 0x6e666c61625f7078) on stages 2 and 3.
                for br in ["br0", "br1", "br2"] {
                    let f = on(br);
                    let entry = f
                        .iter()
                        .filter(|f| f.contains("0x6e666c61625f7078"))
                        .count();
                    assert_eq!(entry, usize::from(br != "br0"), "{br}: {f:?}");
                    assert!(f.iter().all(|f| n_packets(f) >= 500), "{br}: {f:?}");
                }
            }
        }
    }
}

#[test]
fn a_priority_queue_keeps_realtime_probes_ahead_of_background_traffic() {
    require_root!();
    require_tool!("ovs-vswitchd", "openvswitch-switch");
    require_tool!("tc", "iproute2");
    let tmp = TempDir::new("ovs-qos");
    // dut1 sends at 5 Mbit/s; the background offers 8 Mbit/s of 1500-byte
    // frames (little work for ovs-vswitchd, so its input is not the
    // bottleneck), and a queue builds at dut1. Probes carry DSCP 46.
    let _one_at_a_time = ONE_AT_A_TIME.lock();
    let mut median = Vec::new();
    for prio in [false, true] {
        let spec = common::write_spec(
            &tmp.0,
            &format!("qos-{prio}"),
            &format!(
                "[experiment]\nname = \"e2e-ovs-qos\"\n[dut]\nkind = \"ovs\"\negress_rate_bps = 5000000\n{}\
                 [traffic]\nrate_pps = 200\nframe_bytes = 64\ndscp = 46\nduration_s = 2\nwarmup_s = 0.5\n\
                 [[traffic.background]]\nrate_bps = 8e6\nframe_bytes = 1500\n",
                if prio { "priority_dscp = 46\n" } else { "" }
            ),
        );
        let (_, result, _) = run_ok(&spec, &tmp.0);
        let run = PathBuf::from(result["dir"].as_str().unwrap()).join("runs/000");
        let dut = read_json(run.join("dut.json"));
        let summary = read_json(run.join("summary.json"));
        let received = summary["packets"]["received"].as_u64().unwrap();
        let queues = dut["queues"].as_array().unwrap_or_else(|| panic!("{dut}"));
        let sent = |q: u64| {
            queues
                .iter()
                .find(|e| e[0] == q)
                .map_or(0, |e| e[1].as_u64().unwrap())
        };
        if prio {
            // The filter put every probe into queue 1 (plus readiness probes).
            assert!(sent(1) >= received && received > 0, "{dut}");
        } else {
            assert_eq!(queues.len(), 1, "{dut}");
        }
        assert!(sent(0) > 500, "background through queue 0: {dut}");
        median.push(summary["latency_ns"]["p50"].as_f64().unwrap());
    }
    // Behind 8 Mbit/s offered to a 5 Mbit/s port the FIFO (64 frames) holds
    // probes for about 150 ms; the priority queue serves them at once.
    assert!(
        median[0] > 5.0 * median[1],
        "p50 FIFO {} ns vs priority {} ns",
        median[0],
        median[1]
    );
}
