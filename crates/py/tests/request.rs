//! The request mapping and the CLI-shaped JSON on inputs with known answers
//! (the byte-for-byte comparison with the `nflab` binary is in python/tests).

use nflab_py::cli_json::{analyse, analyze_json, sla_failed};
use nflab_py::request::Request;

fn csv(dir: &std::path::Path, name: &str, lats: &[u64]) -> String {
    let mut s = String::from("seq,tx_ns,rx_ns\n");
    for (i, l) in lats.iter().enumerate() {
        let tx = i as u64 * 1000;
        s.push_str(&format!("{i},{tx},{}\n", tx + l));
    }
    let p = dir.join(name);
    std::fs::write(&p, s).unwrap();
    p.display().to_string()
}

fn tmp(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("nflab-py-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn defaults_are_the_clis() {
    let r = Request::from_json("{}").unwrap().resolve().unwrap();
    assert_eq!(r.opts.exact_limit, nflab_analyze::dist::DEFAULT_EXACT_LIMIT);
    assert_eq!(r.opts.reorder_window, 65_536);
    assert_eq!(r.opts.anomaly_events, 100);
    let specs: Vec<String> = r.cfg.anomalies.iter().map(|a| a.to_string()).collect();
    assert_eq!(specs, ["2:250000ns", "2:750000ns"]);
    let h = Request::from_json(r#"{"hdr": true}"#)
        .unwrap()
        .resolve()
        .unwrap();
    assert_eq!(h.opts.exact_limit, 0);
    let e = Request::from_json(r#"{"exact": true}"#)
        .unwrap()
        .resolve()
        .unwrap();
    assert_eq!(e.opts.exact_limit, u64::MAX);
}

#[test]
fn bad_options_name_the_key() {
    let e = Request::from_json(r#"{"windw": "1s"}"#).unwrap_err();
    assert!(e.contains("windw"), "{e}");
    let e = Request::from_json(r#"{"window": "0s"}"#)
        .unwrap()
        .resolve()
        .err()
        .unwrap();
    assert!(e.contains("window"), "{e}");
    let e = Request::from_json(r#"{"trim": "1x"}"#)
        .unwrap()
        .resolve()
        .err()
        .unwrap();
    assert!(e.starts_with("trim="), "{e}");
}

#[test]
fn known_latencies_give_known_percentiles_and_across_runs() {
    let d = tmp("known");
    // Latencies 100..=1099 ns: nearest-rank p50 = 599, p99 = 1089.
    let lats: Vec<u64> = (100..1100).collect();
    let a = csv(&d, "a.csv", &lats);
    let req = Request::from_json(r#"{"sla": "p99<=1000ns"}"#).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&analyze_json(std::slice::from_ref(&a), &req).unwrap()).unwrap();
    assert_eq!(v["latency_ns"]["p50"], 599);
    assert_eq!(v["latency_ns"]["p99"], 1089);
    assert_eq!(v["sla"][0]["pass"], false);
    assert!(sla_failed(&analyse(std::slice::from_ref(&a), &req).unwrap(), &req).unwrap());
    let b = csv(
        &d,
        "b.csv",
        &lats.iter().map(|l| l + 10).collect::<Vec<_>>(),
    );
    let m: serde_json::Value =
        serde_json::from_str(&analyze_json(&[a.clone(), b.clone()], &Request::default()).unwrap())
            .unwrap();
    assert_eq!(m[&a]["latency_ns"]["p50"], 599);
    assert_eq!(m[&b]["latency_ns"]["p50"], 609);
    assert_eq!(m["_across_runs"]["p50"]["n"], 2);
    assert_eq!(m["_across_runs"]["p50"]["mean"], 604.0);
    std::fs::remove_dir_all(&d).unwrap();
}
