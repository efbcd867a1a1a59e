//! `nflab run` with `traffic.tx_timestamp = "kernel"`: real namespaces, a linux-router DuT
//! between them, AF_PACKET sockets. Needs root; without it the test is a counted skip.

use std::collections::HashMap;
use std::path::PathBuf;

use nflab_record::flags;

#[macro_use]
mod common;
use common::{read_json as json, run_ok, TempDir};

const SPEC: &str = r#"
[experiment]
name = "txts"

[dut]
kind = "linux-router"

[traffic]
rate_pps = 10000
duration_s = 0.5
warmup_s = 0.1

[sweep]
"traffic.tx_timestamp" = ["app", "kernel"]
"#;

#[test]
fn kernel_tx_stamps_replace_the_application_ones_in_the_records() {
    require_root!();
    let tmp = TempDir::new("txts");
    let spec = tmp.0.join("txts.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let (out, result, _) = run_ok(&spec, &tmp.0);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    // veth has no hardware stamps: one notice line per end, only for the kernel run.
    let notices: Vec<&str> = err.lines().filter(|l| l.starts_with("notice:")).collect();
    assert_eq!(
        notices
            .iter()
            .filter(|l| l.contains("lg0 has no hardware tx timestamping"))
            .count(),
        1,
        "{err}"
    );
    assert_eq!(
        notices
            .iter()
            .filter(|l| l.contains("lg1 has no hardware rx timestamping"))
            .count(),
        1,
        "{err}"
    );
    let dir = PathBuf::from(result["dir"].as_str().unwrap());

    // Run 000: application stamps, as before.
    let app = dir.join("runs/000");
    assert!(!app.join("tx_stamps.nfts").exists());
    let f = nflab_record::read_all(&app.join("records.nfr")).unwrap();
    assert_eq!(f.meta.tx_timestamp, "application");
    assert!(f.records.iter().all(|r| r.flags & flags::TX_TS_KERNEL == 0));
    let s = json(app.join("summary.json"));
    assert_eq!(s["timestamps"]["tx"], "application");
    assert!(s["timestamps"].get("tx_application_fallbacks").is_none());

    // Run 001: kernel stamps.
    let rd = dir.join("runs/001");
    let stamps = nflab_record::read_tx_stamps(&rd.join("tx_stamps.nfts")).unwrap();
    assert!(stamps.tail.is_complete());
    assert_eq!(stamps.meta.tx_timestamp, "kernel-software");
    let f = nflab_record::read_all(&rd.join("records.nfr")).unwrap();
    assert!(f.tail.is_complete());
    let trailer = f.trailer.clone().unwrap();
    let sent = trailer.sent[0].sent;
    let warmup = trailer.sent[0].warmup;
    // One entry per probe sent, every one with a kernel stamp after its application stamp.
    assert_eq!(stamps.entries.len() as u64, sent);
    let mut by_seq: HashMap<(u16, u64), (u64, u64)> = HashMap::new();
    for e in &stamps.entries {
        assert_eq!(e.flags, flags::TX_TS_KERNEL, "{e:?}");
        assert!(e.app_tx_ns <= e.kernel_tx_ns, "{e:?}");
        by_seq.insert((e.flow, e.seq), (e.app_tx_ns, e.kernel_tx_ns));
    }
    assert_eq!(by_seq.len() as u64, sent, "one entry per (flow, seq)");
    assert_eq!(f.meta.tx_timestamp, "kernel-software");
    assert_eq!(f.meta.rx_timestamp, "kernel-software");
    assert_eq!(f.meta.extra["tx_stamps"]["application_fallbacks"], 0);
    assert_eq!(
        f.records.len() as u64,
        sent,
        "a router on veth loses nothing at 10 kpps"
    );
    for r in &f.records {
        let (_, k) = by_seq[&(r.flow, r.seq)];
        assert_eq!(r.tx_ns, k, "record carries the kernel stamp");
        assert_eq!(r.flags, flags::TX_TS_KERNEL | flags::RX_TS_KERNEL);
        assert!(r.tx_ns <= r.rx_ns, "{r:?}");
    }
    // The summary is computed from the kernel stamps: recompute its median independently.
    let s = json(rd.join("summary.json"));
    assert_eq!(s["timestamps"]["tx"], "kernel-software");
    assert_eq!(s["timestamps"]["rx"], "kernel-software");
    assert_eq!(s["timestamps"]["tx_application_fallbacks"], 0);
    let mut lat: Vec<i64> = f
        .records
        .iter()
        .filter(|r| r.seq >= warmup)
        .map(|r| r.rx_ns as i64 - r.tx_ns as i64)
        .collect();
    lat.sort_unstable();
    assert_eq!(s["latency_ns"]["p50"], lat[lat.len().div_ceil(2) - 1]);
    let g = json(rd.join("gen.json"));
    assert_eq!(g["tx_timestamp"], "kernel-software");
    assert_eq!(g["tx_stamps"]["matched"], sent);
    assert_eq!(g["tx_stamps"]["missing"], 0);
    let p50 = g["tx_stamps"]["kernel_minus_app_ns"]["p50"]
        .as_i64()
        .unwrap();
    assert!(p50 >= 0, "{g}");
    assert!(dir.join("report.html").is_file());
}
