//! The FlowMod/FlowStats benchmark on real Open vSwitch bridges, directly and
//! through the proxy: every repetition's flow statistics must list exactly
//! the FlowMods installed (checked inside `bench::run`), and nothing is left.

use nflab_sdn::bench::{run, BenchOptions};

fn ready() -> bool {
    nflab_testkit::require_root()
        && nflab_testkit::require_tool("ovs-vswitchd", "openvswitch-switch")
        && nflab_testkit::require_tool("setpriv", "util-linux")
}

fn ours() -> Vec<String> {
    let pid = std::process::id();
    let mut v: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.extend(
        std::fs::read_dir("/run/nflab")
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default(),
    );
    v.retain(|n| n.contains(&format!("-{pid}-")) || n.starts_with(&format!("nflab-{pid}-")));
    v
}

#[test]
fn flowmods_install_and_are_listed_directly_and_through_the_proxy() {
    if !ready() {
        return;
    }
    for via_proxy in [false, true] {
        let r = run(&BenchOptions {
            switches: 3,
            flowmods: 50,
            via_proxy,
            repeat: 3,
        })
        .unwrap_or_else(|e| panic!("via_proxy={via_proxy}: {e}"));
        assert_eq!(r.install_s_samples.len(), 3);
        assert_eq!(r.stats_delay_ms_samples.len(), 3);
        for s in r.install_s_samples.iter().chain(&r.stats_delay_ms_samples) {
            assert!(s.is_finite() && *s > 0.0, "{s}");
        }
        // The summary is the samples' mean (and a CI from analyze).
        let mean = r.install_s_samples.iter().sum::<f64>() / 3.0;
        assert!((r.install_s.mean - mean).abs() < 1e-12);
        assert!(r.install_s.ci95.unwrap() >= 0.0);
    }
    assert!(ours().is_empty(), "left behind: {:?}", ours());
}

#[test]
fn bad_options_are_one_sentence() {
    let e = run(&BenchOptions {
        switches: 0,
        flowmods: 5,
        via_proxy: false,
        repeat: 1,
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("--switches"), "{e}");
}
