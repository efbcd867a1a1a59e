//! NCSbench through `nflab run` (root, real namespaces): a short challenge
//! search over the link DuT — 1 ms, where the plant stays up, and 9 ms, where
//! the round trip misses the (5× time-scaled) deadline and it falls — with two
//! repetitions each. Checks the runs' files, `ncs-challenge.json`'s
//! fractions and bracket, and the report's NCSbench section.

use std::path::PathBuf;
use std::sync::Mutex;

#[macro_use]
mod common;
use common::{read_json, run_ok, write_spec, TempDir};

static SERIAL: Mutex<()> = Mutex::new(());

const SPEC: &str = r#"
[experiment]
name = "ncs-e2e"
repetitions = 2

[dut]
kind = "link"
realtime = true

[dut.link]
delay_us = 1000

[app]
kind = "ncsbench"
periods = 150
# Deadline 29 ms / 5 = 5.8 ms: a 1 ms link makes it, a 9 ms one cannot.
time_scale = 5

[traffic]
backend = "af_packet"
rate_pps = 100
frame_bytes = 128
duration_s = 1
warmup_s = 0.1

[sweep]
"dut.link.delay_us" = [1000, 9000]
"#;

#[test]
fn a_short_challenge_search_brackets_the_failure_and_lands_in_the_report() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("ncs");
    let spec = write_spec(&tmp.0, "ncs", SPEC);
    let (_, result, _) = run_ok(&spec, &tmp.0);
    let dir = PathBuf::from(result["dir"].as_str().unwrap());
    let mut fell = Vec::new();
    for i in 0..4 {
        let rd = dir.join(format!("runs/{i:03}"));
        let ncs = read_json(rd.join("ncs.json"));
        let delay = read_json(rd.join("params.json"))["sweep"]["dut.link.delay_us"]
            .as_u64()
            .unwrap();
        fell.push((delay, ncs["fell"].as_bool().unwrap()));
        let csv = std::fs::read_to_string(rd.join("ncs-periods.csv")).unwrap();
        assert!(csv
            .lines()
            .next()
            .unwrap()
            .ends_with(",d_PC_ns,d_PS_ns,d_N_ns,d_PA_ns,period_ns"));
        if delay == 1000 {
            assert_eq!(ncs["periods_completed"], 150, "{ncs}");
            // The first sensor message is no longer dropped by the plant
            // interface's not yet activated qdisc.
            let first = csv.lines().nth(1).unwrap();
            println!("run {i:03} first period: {first}");
            assert!(
                first.starts_with("0,") && first.contains(",false,"),
                "{first}"
            );
        }
    }
    println!("(delay, fell): {fell:?}");
    assert!(fell.iter().all(|&(d, f)| f == (d == 9000)), "{fell:?}");

    let ch = read_json(dir.join("ncs-challenge.json"));
    println!("{}", serde_json::to_string_pretty(&ch).unwrap());
    assert_eq!(
        (ch["runs"].as_u64(), ch["stayed_up"].as_u64()),
        (Some(4), Some(2))
    );
    assert_eq!(ch["bracket"]["key"], "dut.link.delay_us");
    assert_eq!(ch["bracket"]["largest_all_up"], 1000.0);
    assert_eq!(ch["bracket"]["smallest_any_down"], 9000.0);
    let c0 = &ch["configurations"][0]["stayed_up"];
    assert_eq!(
        (c0["successes"].as_u64(), c0["n"].as_u64()),
        (Some(2), Some(2))
    );
    // 2 of 2: the lower bound is 0.025^(1/2).
    assert!((c0["lo"].as_f64().unwrap() - 0.025f64.sqrt()).abs() < 1e-9);

    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<h2 id=\"ncs\">"));
    assert!(html.contains("<b>2 of 4 runs</b>"));
    for id in [
        "ncs-delays",
        "ncs-delay-histograms",
        "ncs-plant",
        "ncs-survival",
    ] {
        assert!(dir.join(format!("figures/{id}.svg")).is_file(), "{id}");
    }
}
