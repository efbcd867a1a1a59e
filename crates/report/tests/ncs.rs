//! The NCSbench part of the report on a hand-built artifact tree: a delay
//! sweep of 2 values × 2 repetitions whose periods have known delays. The
//! runs' files are written by nflab-apps (the code `nflab run` uses), and
//! every table cell, histogram count and bracket is checked against the
//! known answer.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use nflab_apps::ncs::challenge::{summarize, RunOutcome};
use nflab_apps::ncs::kpi::{periods_csv, report, NcsReport};
use nflab_apps::ncs::session::{NcsConfig, PeriodRecord};
use serde_json::json;

const MS: u64 = 1_000_000;
const PERIODS: u64 = 40;

/// Period k of a run over a link of `delay_ms`: sensors read at 35k ms, sent
/// 1 ms later; the controller answers 0.5 ms after the message arrives; the
/// one-way delay is `delay_ms` + (k mod 4) × 0.1 ms; the motors are written
/// at 29 ms. `lose(k)`: the actuation of period k did not come.
fn periods(delay_ms: u64, lose: impl Fn(u64) -> bool) -> Vec<PeriodRecord> {
    (0..PERIODS)
        .map(|k| {
            let t0 = 5_000 * MS + 35 * MS * k;
            let one_way = delay_ms * MS + (k % 4) * MS / 10;
            let lost = lose(k);
            PeriodRecord {
                seq: k as u32,
                t_read_ns: t0,
                t_sensor_send_ns: t0 + MS,
                t_ctrl_recv_ns: (!lost).then_some(t0 + MS + one_way),
                t_ctrl_send_ns: (!lost).then_some(t0 + MS + one_way + MS / 2),
                t_act_recv_ns: (!lost).then_some(t0 + MS + 2 * one_way + MS / 2),
                t_write_ns: t0 + 29 * MS,
                pitch_rad: 0.01 * (k as f64 * 0.3).sin(),
                wheel_rad: 0.002 * k as f64,
                voltage_at_sample_v: 0.5,
                voltage_v: if lost { 0.0 } else { 0.5 },
                lost,
            }
        })
        .collect()
}

const SPEC: &str = r#"[experiment]
name = "ncs-synthetic"
repetitions = 2

[dut]
kind = "link"

[dut.link]
delay_us = 2000

[app]
kind = "ncsbench"
periods = 40

[traffic]
rate_pps = 100
duration_s = 2

[sweep]
"dut.link.delay_us" = [2000, 14000]
"#;

/// The tree; returns each run's report.
fn tree(dir: &Path) -> Vec<NcsReport> {
    std::fs::write(dir.join("spec.toml"), SPEC).unwrap();
    let cfg = NcsConfig {
        periods: PERIODS as u32,
        ..NcsConfig::default()
    };
    let mut reports = Vec::new();
    let mut outcomes = Vec::new();
    for (i, (delay_ms, rep)) in [(2u64, 0u64), (2, 1), (14, 0), (14, 1)].iter().enumerate() {
        let name = format!("{i:03}");
        let rd = dir.join("runs").join(&name);
        std::fs::create_dir_all(&rd).unwrap();
        let combination = usize::from(*delay_ms == 14);
        let sweep = json!({"dut.link.delay_us": delay_ms * 1000});
        std::fs::write(
            rd.join("params.json"),
            json!({"run": name, "repetition": rep, "combination": combination, "sweep": sweep,
                   "dut": {"kind": "link"}, "traffic": {"rate_pps": 100}})
            .to_string(),
        )
        .unwrap();
        // At 14 ms the round trip misses the deadline in every other period of
        // the second repetition, and that run "falls" after 30 periods.
        let lossy = *delay_ms == 14 && *rep == 1;
        let mut recs = periods(*delay_ms, |k| lossy && k % 2 == 1);
        if lossy {
            recs.truncate(30);
        }
        let r = report(&recs, lossy, &cfg);
        std::fs::write(
            rd.join("ncs.json"),
            serde_json::to_string_pretty(&r).unwrap(),
        )
        .unwrap();
        std::fs::write(rd.join("ncs-periods.csv"), periods_csv(&recs)).unwrap();
        std::fs::write(
            rd.join("ncs-scenario.json"),
            json!({"application": "NCSbench test plant", "stack": "UDP", "topology": "two namespaces",
                   "environment": {"dut": "link"}, "interference": "none", "hardware": {"cpu": "test"}})
            .to_string(),
        )
        .unwrap();
        outcomes.push(RunOutcome {
            run: name,
            combination,
            sweep: [("dut.link.delay_us".to_string(), json!(delay_ms * 1000))].into(),
            fell: r.fell,
            losses: r.losses,
            periods_completed: u64::from(r.periods_completed),
            periods: u64::from(r.periods),
            d_n_median_ms: r.delays_ms.get("d_N").map(|d| d.median),
            d_n_ns: Vec::new(),
        });
        reports.push(r);
    }
    std::fs::write(
        dir.join("ncs-challenge.json"),
        serde_json::to_string_pretty(&summarize(&outcomes, None)).unwrap(),
    )
    .unwrap();
    reports
}

fn csv(dir: &Path, id: &str) -> Vec<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(dir.join("figures").join(format!("{id}.csv"))).unwrap();
    let mut lines = text.lines();
    let head: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    lines
        .map(|l| {
            head.iter()
                .cloned()
                .zip(l.split(',').map(String::from))
                .collect()
        })
        .collect()
}

#[test]
fn tables_and_figures_carry_the_runs_numbers() {
    let dir = common::tmpdir("ncs").join("20260101T000000Z-ncs-synthetic");
    std::fs::create_dir_all(&dir).unwrap();
    let reports = tree(&dir);
    let w = nflab_report::write_report_with(
        &dir,
        &nflab_report::Options {
            no_png: true,
            ..Default::default()
        },
    )
    .unwrap();
    for id in [
        "ncs-delays",
        "ncs-delay-histograms",
        "ncs-plant",
        "ncs-survival",
    ] {
        assert!(w.figures.iter().any(|f| f == id), "{id} in {:?}", w.figures);
        assert!(dir.join("figures").join(format!("{id}.svg")).is_file());
    }
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();

    // Table 6.3: run 000 over 2 ms. One-way delays 2.0, 2.1, 2.2, 2.3 ms in
    // turn: d_N = one-way + 0.25 ms, nearest-rank median of 40 values (rank 20)
    // = 2.1 + 0.25; d_PC 0.5, d_PS 1, period 35.
    let d = |r: &NcsReport, k: &str| r.delays_ms[k];
    assert_eq!(d(&reports[0], "d_N").median, 2.35);
    assert_eq!(d(&reports[0], "d_PC").median, 0.5);
    assert_eq!(d(&reports[0], "period").median, 35.0);
    for (key, want) in [
        (
            "d_N",
            format!(
                "{:.2}±{:.3}; {:.2}; {:.2}; {:.2}",
                2.35,
                d(&reports[0], "d_N").ci95,
                2.25,
                2.45,
                2.55
            ),
        ),
        ("d_PC", "0.50±0.000; 0.50; 0.50; 0.50".to_string()),
        ("d_PS", "1.00±0.000; 1.00; 1.00; 1.00".to_string()),
        ("period", "35.00±0.000; 35.00; 35.00; 35.00".to_string()),
    ] {
        let cell = format!("<td data-key=\"{key}\">{want}</td>");
        assert!(
            html.contains(&cell),
            "{cell} in the Table 6.3 row of run 000"
        );
    }
    // Table 6.4: IAEs, losses and the fall of run 003 (15 of 30 periods lost).
    let r3 = &reports[3];
    assert_eq!((r3.losses, r3.fell, r3.periods_completed), (15, true, 30));
    let row = format!(
        "<td>{:.2}</td><td>{:.0}</td><td>{:.1}</td><td>15</td><td class=\"warn\">fell</td><td>30 of 40</td>",
        r3.iae.theta, r3.iae.phi, r3.iae.nu
    );
    assert!(html.contains(&row), "{row}");
    assert!(html.contains("<h2 id=\"ncs\">") && html.contains("href=\"#ncs\""));
    assert!(html.contains("NCSbench test plant"), "the scenario");

    // The summary: 3 of 4 up; at 14 ms 1 of 2 with the Clopper–Pearson
    // interval [0.0126, 0.9874] (1 − 0.975^(1/2)·… : both tails 2.5 %).
    assert!(html.contains("<b>3 of 4 runs</b>"), "summary sentence");
    assert!(
        html.contains("0.500 <span class=\"ci\">[0.013, 0.987]</span>"),
        "14 ms row"
    );
    assert!(
        html.contains("every run stayed up at dut.link.delay_us = 2000 and a run did not at 14000")
    );

    // Time series: every period's d_N of run 000, exactly.
    let ts = csv(&dir, "ncs-delays");
    let dn: Vec<i64> = ts
        .iter()
        .filter(|r| r["run"] == "000" && r["delay"] == "d_N")
        .map(|r| r["delay_ns"].parse().unwrap())
        .collect();
    let want: Vec<i64> = (0..PERIODS)
        .map(|k| (2 * MS + (k % 4) * MS / 10 + MS / 4) as i64)
        .collect();
    assert_eq!(dn, want);
    // Lost periods of run 003 have no d_N point.
    assert_eq!(
        ts.iter()
            .filter(|r| r["run"] == "003" && r["delay"] == "d_N")
            .count(),
        15
    );

    // Histogram of run 000's d_N: the four values 2.25 … 2.55 ms, 10 times
    // each, counted into 40 equal bins between the smallest and the largest
    // value drawn (runs 000, 002, 001, 003: 2.25 to 14.55 ms).
    let hist = csv(&dir, "ncs-delay-histograms");
    let bins: Vec<&BTreeMap<String, String>> = hist
        .iter()
        .filter(|r| r["run"] == "000" && r["delay"] == "d_N")
        .collect();
    assert_eq!(bins.len(), 40);
    let total: u64 = bins
        .iter()
        .map(|r| r["count"].parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, 40);
    let (lo, hi) = (2.25e6f64, 14.55e6f64);
    let width = (hi - lo) / 40.0;
    for v in [2.25e6, 2.35e6, 2.45e6, 2.55e6] {
        let b = (((v - lo) / width).floor() as usize).min(39);
        let lo_b: f64 = bins[b]["bin_lo_ns"].parse().unwrap();
        assert!(
            (lo_b - (lo + width * b as f64)).abs() < 1.0,
            "bin {b} edge {lo_b}"
        );
    }
    // By hand: bin 0 is [2.25, 2.5575) ms and holds all four values.
    assert_eq!(bins[0]["count"], "40");

    // Plant traces: pitch in degrees of every period.
    let plant = csv(&dir, "ncs-plant");
    let p0: Vec<f64> = plant
        .iter()
        .filter(|r| r["run"] == "002")
        .map(|r| r["pitch_deg"].parse().unwrap())
        .collect();
    assert_eq!(p0.len(), 40);
    for (k, p) in p0.iter().enumerate() {
        let want = (0.01 * (k as f64 * 0.3).sin()).to_degrees();
        // The CSV has 7 significant digits.
        assert!(
            (p - want).abs() <= want.abs() * 1e-6 + 1e-12,
            "period {k}: {p} vs {want}"
        );
    }

    // Survival along the sweep: the fractions and intervals of ncs-challenge.json.
    let s = csv(&dir, "ncs-survival");
    assert_eq!(s.len(), 2);
    assert_eq!(
        (
            s[0]["dut.link.delay_us"].as_str(),
            s[0]["fraction"].as_str()
        ),
        ("2000", "1")
    );
    assert_eq!(
        (s[1]["stayed_up"].as_str(), s[1]["runs"].as_str()),
        ("1", "2")
    );
    let lo: f64 = s[1]["ci95_lo"].parse().unwrap();
    assert!((lo - 0.012_579).abs() < 1e-5, "{lo}");
}

#[test]
fn an_experiment_without_ncsbench_has_no_ncs_section_and_old_csvs_are_named() {
    let base = common::tmpdir("ncs-none");
    let e = common::experiment(&base);
    nflab_report::write_report_with(
        &e,
        &nflab_report::Options {
            no_png: true,
            ..Default::default()
        },
    )
    .unwrap();
    let html = std::fs::read_to_string(e.join("report.html")).unwrap();
    assert!(!html.contains("id=\"ncs\""));
    assert!(!e.join("figures/ncs-delays.svg").exists());

    // A tree whose CSV predates the delay columns: tables, plant traces, and
    // a sentence on what is not drawn.
    let dir = common::tmpdir("ncs-old").join("20260101T000000Z-ncs-old");
    std::fs::create_dir_all(&dir).unwrap();
    tree(&dir);
    std::fs::remove_file(dir.join("ncs-challenge.json")).unwrap();
    for i in 0..4 {
        let p = dir.join(format!("runs/{i:03}/ncs-periods.csv"));
        let text = std::fs::read_to_string(&p).unwrap();
        let old: String = text
            .lines()
            .map(|l| l.split(',').take(12).collect::<Vec<_>>().join(",") + "\n")
            .collect();
        std::fs::write(&p, old).unwrap();
    }
    let w = nflab_report::write_report_with(
        &dir,
        &nflab_report::Options {
            no_png: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(w.figures.iter().any(|f| f == "ncs-plant"));
    assert!(!w
        .figures
        .iter()
        .any(|f| f == "ncs-delays" || f == "ncs-survival"));
    assert!(w
        .problems
        .iter()
        .any(|p| p.contains("run 001: ncs-periods.csv has no delay columns")));
    assert!(w
        .problems
        .iter()
        .any(|p| p.contains("no ncs-challenge.json")));
}
