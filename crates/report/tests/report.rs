//! The report and its figure files on synthetic trees with known answers,
//! and on bad input.

mod common;

use common::{all_lost, typical, RunSpec};
use nflab_report::{write_report_with, Options, ReportError};

/// The report without PNG rendering (fast); `pngs_next_to_svgs` covers PNG.
fn write_report(dir: &std::path::Path) -> Result<std::path::PathBuf, ReportError> {
    let w = write_report_with(
        dir,
        &Options {
            only_figure: None,
            no_png: true,
            ..Default::default()
        },
    )?;
    Ok(w.report.unwrap())
}

fn csv(dir: &std::path::Path, id: &str) -> Vec<Vec<String>> {
    let s = std::fs::read_to_string(dir.join("figures").join(format!("{id}.csv")))
        .unwrap_or_else(|e| panic!("figures/{id}.csv: {e}"));
    s.lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

fn col(rows: &[Vec<String>], name: &str) -> usize {
    rows[0]
        .iter()
        .position(|c| c == name)
        .unwrap_or_else(|| panic!("no column {name} in {:?}", rows[0]))
}

#[test]
fn every_figure_has_svg_csv_and_a_redraw_command() {
    let base = common::tmpdir("files");
    let exp = common::experiment(&base);
    let report = write_report(&exp).unwrap();
    let html = std::fs::read_to_string(&report).unwrap();
    let readme = std::fs::read_to_string(exp.join("figures/README.md")).unwrap();
    for id in [
        "hdr",
        "cdf",
        "ccdf",
        "histogram",
        "timeseries",
        "windows",
        "anomalies",
        "sweep",
        "throughput",
        "ipg",
    ] {
        let svg = std::fs::read_to_string(exp.join(format!("figures/{id}.svg"))).unwrap();
        assert!(
            svg.contains("<svg") && svg.trim_end().ends_with("</svg>"),
            "{id}.svg"
        );
        assert!(csv(&exp, id).len() > 1, "{id}.csv has no data rows");
        assert!(
            readme.contains(&format!("--figure {id}`")),
            "README lacks {id}"
        );
        assert!(
            html.contains(&format!("id=\"fig-{id}\"")),
            "report lacks {id}"
        );
    }
    // Self-contained: no external fetches.
    for bad in ["src=\"http", "href=\"http", "@import", "<link "] {
        assert!(!html.contains(bad), "report references the network: {bad}");
    }
    // Captions say how it was measured.
    assert!(html.contains("CLOCK_REALTIME (resolution 1 ns)"));
    // No model.json here: the overlay is listed as not applicable.
    assert!(html.contains("data-skip=\"model\""));
}

#[test]
fn hdr_data_is_nearest_rank_of_the_records() {
    let base = common::tmpdir("hdr");
    let exp = base.join("x");
    std::fs::create_dir_all(&exp).unwrap();
    std::fs::write(exp.join("spec.toml"), "[experiment]\nname = \"x\"\n").unwrap();
    // Latency of seq s is (s*7919 mod 1000 + 1) µs: a permutation of 1..=1000 µs.
    fn perm(seq: u64, _: &mut common::Rng) -> Option<u64> {
        Some(((seq * 7919) % 1000 + 1) * 1000)
    }
    let s = RunSpec {
        dut: "linux-router",
        rate_pps: 1000,
        repetition: 0,
        packets: 1000,
        warmup: 0,
        latency: perm,
        summary: false,
        finished: true,
    };
    common::write_run(&exp, "000", &s, 1);
    write_report(&exp).unwrap();
    let rows = csv(&exp, "hdr");
    let (inv, lat) = (col(&rows, "inv_1_minus_p"), col(&rows, "latency_ns"));
    let at = |x: f64| -> f64 {
        rows[1..]
            .iter()
            .find(|r| (r[inv].parse::<f64>().unwrap() - x).abs() < 1e-6)
            .map(|r| r[lat].parse().unwrap())
            .unwrap_or_else(|| panic!("no point at 1/(1-p) = {x}"))
    };
    assert_eq!(at(1.0), 1_000.0); // p0 = min
    assert_eq!(at(10.0), 900_000.0); // p90: rank 900
    assert_eq!(at(100.0), 990_000.0); // p99: rank 990
    assert_eq!(at(1000.0), 1_000_000.0); // the max, at 1/(1-p) = N
                                         // No summary.json: the report says so and still draws.
    let html = std::fs::read_to_string(exp.join("report.html")).unwrap();
    assert!(html.contains("summary.json is missing"));
}

#[test]
fn timeseries_keeps_the_spike_and_marks_the_worst() {
    let base = common::tmpdir("ts");
    let exp = common::experiment(&base);
    write_report(&exp).unwrap();
    let rows = csv(&exp, "timeseries");
    let (run, kind, max) = (col(&rows, "run"), col(&rows, "kind"), col(&rows, "max_ns"));
    let col_max = rows[1..]
        .iter()
        .filter(|r| r[run] == "000" && r[kind] == "column")
        .map(|r| r[max].parse::<f64>().unwrap())
        .fold(0.0, f64::max);
    assert_eq!(col_max, 900_000.0, "decimation lost the spike");
    let worst: Vec<f64> = rows[1..]
        .iter()
        .filter(|r| r[run] == "000" && r[kind] == "worst")
        .map(|r| r[max].parse().unwrap())
        .collect();
    assert_eq!(worst.iter().filter(|&&v| v == 900_000.0).count(), 5);
    // Decimated: far fewer columns than packets (4500 measured packets).
    let cols = rows[1..]
        .iter()
        .filter(|r| r[run] == "000" && r[kind] == "column")
        .count();
    assert!(cols <= 1300, "{cols} columns");
}

#[test]
fn anomalies_have_start_and_duration() {
    let base = common::tmpdir("anom");
    let exp = common::experiment(&base);
    write_report(&exp).unwrap();
    let rows = csv(&exp, "anomalies");
    let (run, spec, pk, dur) = (
        col(&rows, "run"),
        col(&rows, "spec"),
        col(&rows, "packets"),
        col(&rows, "duration_ns"),
    );
    let r0: Vec<&Vec<String>> = rows[1..].iter().filter(|r| r[run] == "000").collect();
    // seq 2000..2005 at 900 µs: one 5-packet anomaly for each spec.
    assert_eq!(r0.len(), 2, "{r0:?}");
    for r in r0 {
        assert_eq!(r[pk], "5");
        // First send to last send (the engine's duration): 4 gaps of 100 µs
        // at 10 kpps, ± the 200 ns tx jitter of the fixture.
        let d: f64 = r[dur].parse().unwrap();
        assert!((d - 400_000.0).abs() < 400.0, "{d} for {}", r[spec]);
    }
}

#[test]
fn sweep_ci_over_repetitions() {
    let base = common::tmpdir("sweep");
    let exp = common::experiment(&base);
    write_report(&exp).unwrap();
    let rows = csv(&exp, "sweep");
    let (reps, lo, hi, mean) = (
        col(&rows, "repetitions"),
        col(&rows, "ci95_lo_ns"),
        col(&rows, "ci95_hi_ns"),
        col(&rows, "mean_ns"),
    );
    assert_eq!(rows.len(), 1 + 2 * 2 * 2); // 2 groups × 2 rates × (p50, p99)
    for r in &rows[1..] {
        assert_eq!(r[reps], "2");
        let (l, m, h): (f64, f64, f64) = (
            r[lo].parse().unwrap(),
            r[mean].parse().unwrap(),
            r[hi].parse().unwrap(),
        );
        assert!(l <= m && m <= h, "{r:?}");
    }
    let t = csv(&exp, "throughput");
    assert_eq!(t.len(), 1 + 4);
}

#[test]
fn not_an_experiment_is_one_sentence() {
    let base = common::tmpdir("notexp");
    let e = write_report(&base).unwrap_err();
    assert!(matches!(e, ReportError::NotAnExperiment(_)));
    assert!(
        e.to_string().contains("not an nflab experiment directory"),
        "{e}"
    );
    assert!(write_report(&base.join("does-not-exist")).is_err());
    assert!(!base.join("report.html").exists());
}

#[test]
fn a_run_with_no_packets_and_an_interrupted_run_still_render() {
    let base = common::tmpdir("bad");
    let exp = common::experiment(&base);
    // 100 % loss: records file with only a header and a trailer.
    let lost = RunSpec {
        dut: "linux-router",
        rate_pps: 30_000,
        repetition: 0,
        packets: 3000,
        warmup: 0,
        latency: all_lost,
        summary: true,
        finished: true,
    };
    common::write_run(&exp, "008", &lost, 1);
    // Interrupted halfway: no trailer, no summary.json.
    let cut = RunSpec {
        dut: "linux-router",
        rate_pps: 40_000,
        repetition: 0,
        packets: 9000,
        warmup: 500,
        latency: typical,
        summary: false,
        finished: false,
    };
    common::write_run(&exp, "009", &cut, 2);
    // Killed in the middle of a block: the file ends inside a payload.
    common::write_run(&exp, "011", &cut, 3);
    let f = exp.join("runs/011/records.nfr");
    let bytes = std::fs::read(&f).unwrap();
    std::fs::write(&f, &bytes[..bytes.len() - 1000]).unwrap();
    // And a run directory with nothing in it.
    std::fs::create_dir_all(exp.join("runs/010")).unwrap();

    let report = write_report(&exp).unwrap();
    let html = std::fs::read_to_string(report).unwrap();
    assert!(html.contains("What is missing"));
    assert!(
        html.contains("run 008: no packet was received"),
        "100 % loss not described"
    );
    assert!(
        html.contains("run 009: summary.json is missing"),
        "interrupted run not described"
    );
    assert!(
        html.contains("run 009: records.nfr has no trailer"),
        "cut record file not described"
    );
    assert!(html.contains("run 010: the run directory is empty"));
    assert!(
        html.contains("run 011: records.nfr is cut off"),
        "mid-block cut not described"
    );
    // The interrupted run's packets are still drawn.
    let rows = csv(&exp, "timeseries");
    assert!(rows[1..].iter().any(|r| r[0] == "009"));
    assert!(!rows[1..].iter().any(|r| r[0] == "008"));
    // Throughput includes the 100 % loss point.
    let t = csv(&exp, "throughput");
    let loss = col(&t, "loss_ratio_mean");
    assert!(t[1..].iter().any(|r| r[loss] == "1"), "{t:?}");
}

#[test]
fn a_tree_without_runs_renders_and_lists_what_is_missing() {
    let base = common::tmpdir("empty");
    std::fs::write(base.join("spec.toml"), common::SPEC).unwrap();
    let report = write_report(&base).unwrap();
    let html = std::fs::read_to_string(report).unwrap();
    assert!(html.contains("runs/ is missing or empty"));
    assert!(html.contains("env.json is missing"));
    assert!(html.contains("data-skip=\"hdr\""));
    assert!(!html.contains("<section class=\"fig\""));
}

#[test]
fn one_figure_can_be_redrawn_alone() {
    let base = common::tmpdir("one");
    let exp = common::experiment(&base);
    let w = write_report_with(
        &exp,
        &Options {
            only_figure: Some("cdf".into()),
            no_png: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(w.report.is_none());
    assert!(exp.join("figures/cdf.svg").exists() && exp.join("figures/cdf.csv").exists());
    assert!(!exp.join("figures/hdr.svg").exists());
    assert!(!exp.join("report.html").exists());
    let e = write_report_with(
        &exp,
        &Options {
            only_figure: Some("nope".into()),
            no_png: true,
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("no figure `nope`") && e.contains("hdr"), "{e}");
}

#[test]
fn pngs_next_to_svgs() {
    let base = common::tmpdir("png");
    let exp = common::experiment(&base);
    let w = nflab_report::write_report(&exp).unwrap();
    assert!(w.ends_with("report.html"));
    if cfg!(feature = "png") {
        for id in ["hdr", "timeseries", "sweep"] {
            match std::fs::read(exp.join(format!("figures/{id}.png"))) {
                Ok(png) => assert!(
                    png.starts_with(b"\x89PNG") && png.len() > 10_000,
                    "{id}.png"
                ),
                // Only a host without any font may skip PNGs, and the report says why.
                Err(_) => assert!(std::fs::read_to_string(exp.join("report.html"))
                    .unwrap()
                    .contains("no system font")),
            }
        }
    }
}

#[test]
fn only_the_first_copy_of_a_duplicate_counts() {
    use nflab_record::{FlowSent, Metadata, Record, RecordWriter, Trailer};
    let base = common::tmpdir("dup");
    let exp = base.join("x");
    std::fs::create_dir_all(exp.join("runs/000")).unwrap();
    std::fs::write(exp.join("spec.toml"), "[experiment]\nname = \"x\"\n").unwrap();
    let mut w =
        RecordWriter::create(&exp.join("runs/000/records.nfr"), &Metadata::default()).unwrap();
    for seq in 0..100u64 {
        let tx = 1_000_000 + seq * 10_000;
        w.push(&Record {
            seq,
            tx_ns: tx,
            rx_ns: tx + 1_000 + seq,
            ..Default::default()
        })
        .unwrap();
        if seq == 50 {
            // A late duplicate copy with a huge latency: must not be drawn.
            w.push(&Record {
                seq,
                tx_ns: tx,
                rx_ns: tx + 5_000_000,
                ..Default::default()
            })
            .unwrap();
        }
    }
    w.finish(&Trailer {
        sent: vec![FlowSent {
            flow: 0,
            sent: 100,
            warmup: 10,
        }],
        ..Default::default()
    })
    .unwrap();
    write_report(&exp).unwrap();
    let rows = csv(&exp, "hdr");
    let lat = col(&rows, "latency_ns");
    let max = rows[1..]
        .iter()
        .map(|r| r[lat].parse::<f64>().unwrap())
        .fold(0.0, f64::max);
    assert_eq!(max, 1_099.0); // seq 99; the duplicate's 5 ms is ignored
    let min = rows[1..]
        .iter()
        .map(|r| r[lat].parse::<f64>().unwrap())
        .fold(f64::MAX, f64::min);
    assert_eq!(min, 1_010.0); // seq 10: warm-up 0..10 excluded
}

#[test]
fn generator_selfcheck_and_model_overlay_are_read_from_the_tree() {
    let base = common::tmpdir("gen");
    let exp = common::experiment(&base);
    let sc = serde_json::json!({"sent": 5000, "selfcheck": {
        "measured_on": "receive side, kernel-software", "configured_ipg_ns": 100000.0,
        "ipg_mse_ns2": 2.5e7, "histogram_width_ns": 1000,
        "histogram": [{"lo_ns": 99000, "count": 10}, {"lo_ns": 100000, "count": 80}, {"lo_ns": 101000, "count": 10}],
        "warnings": ["the generator turned bursty"]}});
    std::fs::write(exp.join("runs/000/gen.json"), sc.to_string()).unwrap();
    std::fs::write(
        exp.join("model.json"),
        r#"{"predictions":[{"run":"004","p50_ns":4000,"p99_ns":12000}]}"#,
    )
    .unwrap();
    let report = write_report(&exp).unwrap();
    let rows = csv(&exp, "ipg");
    let (src, cnt, mse) = (
        col(&rows, "source"),
        col(&rows, "count"),
        col(&rows, "mse_ns2"),
    );
    let from_gen: Vec<&Vec<String>> = rows[1..]
        .iter()
        .filter(|r| r[src].starts_with("gen.json"))
        .collect();
    // Buckets with midpoints 99.5, 100.5 and 101.5 µs, re-binned into log
    // bins [79.4, 100) and [100, 125.9) µs.
    assert_eq!(from_gen.len(), 2);
    assert_eq!(
        (from_gen[0][cnt].as_str(), from_gen[1][cnt].as_str()),
        ("10", "90")
    );
    assert_eq!(from_gen[1][mse], "25000000");
    // The other configurations fall back to the records' transmit gaps (CBR, 10 or 20 kpps).
    assert!(rows[1..].iter().any(|r| r[src].starts_with("transmit")));
    let html = std::fs::read_to_string(report).unwrap();
    assert!(html.contains("the generator turned bursty"));
    let m = csv(&exp, "model");
    let (metric, meas, pred) = (
        col(&m, "metric"),
        col(&m, "measured_ns"),
        col(&m, "predicted_ns"),
    );
    let p99 = m[1..].iter().find(|r| r[metric] == "p99_ns").unwrap();
    assert_eq!(p99[pred], "12000");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(exp.join("runs/004/summary.json")).unwrap())
            .unwrap();
    assert_eq!(p99[meas], summary["latency_ns"]["p99"].to_string());
    // The predictions are also laid over the sweep, at run 004's configuration.
    let sw = csv(&exp, "sweep");
    let (metric, mean) = (col(&sw, "metric"), col(&sw, "mean_ns"));
    let model: Vec<(&str, &str)> = sw[1..]
        .iter()
        .filter(|r| r[metric].ends_with("(model)"))
        .map(|r| (r[metric].as_str(), r[mean].as_str()))
        .collect();
    assert_eq!(model, [("p99 (model)", "12000"), ("p50 (model)", "4000")]);
    assert!(html.contains("the model's prediction of the same percentile"));
}

fn write_streamed(dir: &std::path::Path) {
    // No packet held one by one: every run takes the bounded streaming path.
    write_report_with(
        dir,
        &Options {
            no_png: true,
            exact_packets: Some(0),
            ..Default::default()
        },
    )
    .unwrap();
}

fn num(s: &str) -> f64 {
    s.parse().unwrap_or_else(|_| panic!("not a number: {s}"))
}

#[test]
fn streamed_runs_draw_what_exact_runs_draw_within_the_stated_bounds() {
    let base = common::tmpdir("stream");
    let exact = common::experiment(&base.join("exact"));
    let streamed = common::experiment(&base.join("streamed"));
    write_report(&exact).unwrap();
    write_streamed(&streamed);

    // Distributions: same points, values within the HDR bound (0.1 %), the
    // maximum exact.
    for id in ["hdr", "cdf", "ccdf"] {
        let (a, b) = (csv(&exact, id), csv(&streamed, id));
        assert_eq!(a.len(), b.len(), "{id}");
        let lat = col(&a, "latency_ns");
        for (x, y) in a[1..].iter().zip(&b[1..]) {
            let (x, y) = (num(&x[lat]), num(&y[lat]));
            assert!((y - x).abs() <= x * 1e-3 + 1.0, "{id}: {y} vs {x}");
        }
    }
    let (a, b) = (csv(&exact, "hdr"), csv(&streamed, "hdr"));
    assert_eq!(a.last(), b.last(), "the maximum is exact");
    let (ha, hb) = (csv(&exact, "histogram"), csv(&streamed, "histogram"));
    let count = col(&ha, "count");
    let total = |t: &[Vec<String>]| t[1..].iter().map(|r| num(&r[count])).sum::<f64>();
    assert_eq!(total(&ha), total(&hb));

    // Anomalies and the generator gaps come from the sequence-ordered stream: identical.
    assert_eq!(csv(&exact, "anomalies"), csv(&streamed, "anomalies"));
    let (ia, ib) = (csv(&exact, "ipg"), csv(&streamed, "ipg"));
    let mse = col(&ia, "mse_ns2");
    for (x, y) in ia.iter().zip(&ib) {
        for c in 0..x.len() {
            if c == mse && x[c] != "mse_ns2" && !x[c].is_empty() {
                assert!((num(&x[c]) - num(&y[c])).abs() <= num(&x[c]) * 1e-9);
            } else {
                assert_eq!(x[c], y[c]);
            }
        }
    }

    // Windows: exact packet counts and maxima (slices divide the window),
    // p50/p99 within the 1 % of the window histograms.
    let (wa, wb) = (csv(&exact, "windows"), csv(&streamed, "windows"));
    assert_eq!(wa.len(), wb.len());
    let (pk, mx, p99) = (col(&wa, "packets"), col(&wa, "max_ns"), col(&wa, "p99_ns"));
    for (x, y) in wa[1..].iter().zip(&wb[1..]) {
        assert_eq!((&x[..4], &x[pk], &x[mx]), (&y[..4], &y[pk], &y[mx]));
        let (x, y) = (num(&x[p99]), num(&y[p99]));
        assert!(y >= x && y <= x * 1.01 + 1.0, "p99 {y} vs {x}");
    }

    // Latency over time: the worst packets are the same latencies, the
    // spike survives, the columns stay decimated.
    let (ta, tb) = (csv(&exact, "timeseries"), csv(&streamed, "timeseries"));
    let (run, kind, max) = (col(&ta, "run"), col(&ta, "kind"), col(&ta, "max_ns"));
    for r in ["000", "004"] {
        let worst = |t: &[Vec<String>]| {
            let mut v: Vec<f64> = t[1..]
                .iter()
                .filter(|x| x[run] == r && x[kind] == "worst")
                .map(|x| num(&x[max]))
                .collect();
            v.sort_by(f64::total_cmp);
            v
        };
        assert_eq!(worst(&ta), worst(&tb), "run {r}");
        let cols = |t: &[Vec<String>]| {
            t[1..]
                .iter()
                .filter(|x| x[run] == r && x[kind] == "column")
                .map(|x| num(&x[max]))
                .collect::<Vec<f64>>()
        };
        let (ca, cb) = (cols(&ta), cols(&tb));
        assert!(
            cb.len() <= 1300 && cb.len() + 20 >= ca.len(),
            "{} vs {}",
            cb.len(),
            ca.len()
        );
        assert_eq!(cb.iter().copied().fold(0.0, f64::max), 900_000.0);
    }

    // The captions say which method was used and its bound.
    let html = std::fs::read_to_string(streamed.join("report.html")).unwrap();
    assert!(html.contains("HDR histogram with 3 significant digits"));
    assert!(html.contains("read in one pass"));
    let html = std::fs::read_to_string(exact.join("report.html")).unwrap();
    assert!(!html.contains("HDR histogram with"));
}

#[test]
fn streamed_runs_drop_warmup_and_duplicates() {
    use nflab_record::{FlowSent, Metadata, Record, RecordWriter, Trailer};
    let base = common::tmpdir("streamdup");
    let exp = base.join("x");
    std::fs::create_dir_all(exp.join("runs/000")).unwrap();
    std::fs::write(exp.join("spec.toml"), "[experiment]\nname = \"x\"\n").unwrap();
    let mut w =
        RecordWriter::create(&exp.join("runs/000/records.nfr"), &Metadata::default()).unwrap();
    for seq in 0..100u64 {
        let tx = 1_000_000 + seq * 10_000;
        let r = Record {
            seq,
            tx_ns: tx,
            rx_ns: tx + 1_000 + seq,
            ..Default::default()
        };
        w.push(&r).unwrap();
        if seq == 50 {
            // A late copy with a huge latency.
            w.push(&Record {
                rx_ns: tx + 5_000_000,
                ..r
            })
            .unwrap();
        }
    }
    w.finish(&Trailer {
        sent: vec![FlowSent {
            flow: 0,
            sent: 100,
            warmup: 10,
        }],
        ..Default::default()
    })
    .unwrap();
    write_streamed(&exp);
    let rows = csv(&exp, "hdr");
    let lat = col(&rows, "latency_ns");
    let v: Vec<f64> = rows[1..].iter().map(|r| num(&r[lat])).collect();
    assert_eq!(v.iter().copied().fold(0.0, f64::max), 1_099.0);
    assert_eq!(v.iter().copied().fold(f64::MAX, f64::min), 1_010.0);
    let html = std::fs::read_to_string(exp.join("report.html")).unwrap();
    assert!(
        html.contains("90 packets"),
        "warm-up or the duplicate was counted"
    );
}

#[test]
fn streamed_bad_input_still_renders() {
    let base = common::tmpdir("streambad");
    let exp = common::experiment(&base);
    let lost = RunSpec {
        dut: "linux-router",
        rate_pps: 30_000,
        repetition: 0,
        packets: 3000,
        warmup: 0,
        latency: all_lost,
        summary: true,
        finished: true,
    };
    common::write_run(&exp, "008", &lost, 1);
    let cut = RunSpec {
        dut: "linux-router",
        rate_pps: 40_000,
        repetition: 0,
        packets: 9000,
        warmup: 500,
        latency: typical,
        summary: false,
        finished: false,
    };
    common::write_run(&exp, "011", &cut, 3);
    let f = exp.join("runs/011/records.nfr");
    let bytes = std::fs::read(&f).unwrap();
    std::fs::write(&f, &bytes[..bytes.len() - 1000]).unwrap();
    write_streamed(&exp);
    let html = std::fs::read_to_string(exp.join("report.html")).unwrap();
    assert!(html.contains("run 008: no packet was received"));
    assert!(html.contains("run 011: records.nfr is cut off"));
    let rows = csv(&exp, "timeseries");
    assert!(rows[1..].iter().any(|r| r[0] == "011"));
    assert!(!rows[1..].iter().any(|r| r[0] == "008"));
}

/// The options of the `nflab analyze` command that `figures/analysis.json`
/// names, parsed from its flags (so a test that reads them cannot share a
/// mistake with the report's own option builder).
fn options_of(command: &str) -> (nflab_analyze::AnalysisConfig, nflab_analyze::Options) {
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(&words[..3], ["nflab", "analyze", "--json"], "{command}");
    let mut cfg = nflab_analyze::AnalysisConfig::default();
    let mut opts = nflab_analyze::Options::default();
    let mut it = words[3..].iter();
    while let Some(flag) = it.next() {
        if *flag == "--no-anomalies" {
            // The one flag without a value.
            assert!(cfg.anomalies.is_empty() && !command.contains("--anomaly "));
            continue;
        }
        let v = it.next().unwrap_or_else(|| panic!("{flag} has no value"));
        match *flag {
            "--worst" => opts.worst_n = v.parse().unwrap(),
            "--window" => opts.window_ns = Some(nflab_analyze::parse_duration_ns(v).unwrap()),
            "--anomaly-events" => opts.anomaly_events = v.parse().unwrap(),
            "--anomaly" => cfg.anomalies.push(v.parse().unwrap()),
            other => panic!("unexpected flag {other} in {command}"),
        }
    }
    (cfg, opts)
}

/// Runs analysed without any anomaly definition: `analysis.json` has no
/// anomaly, and its `command` says so (`--no-anomalies`), not the CLI's
/// default definitions, so running it prints the same summaries.
#[test]
fn without_anomaly_definitions_the_command_says_no_anomalies() {
    let base = common::tmpdir("no-anomalies");
    let exp = common::experiment(&base);
    for run in std::fs::read_dir(exp.join("runs")).unwrap() {
        let p = run.unwrap().path().join("params.json");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        v["analysis"].as_object_mut().unwrap().remove("anomalies");
        std::fs::write(&p, v.to_string()).unwrap();
    }
    write_report(&exp).unwrap();
    let a: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(exp.join("figures/analysis.json")).unwrap())
            .unwrap();
    let command = a["command"].as_str().unwrap();
    assert!(command.ends_with(" --no-anomalies"), "{command}");
    let (cfg, opts) = options_of(command);
    assert!(cfg.anomalies.is_empty());
    let runs = a["runs"].as_object().unwrap();
    assert!(!runs.is_empty());
    for (name, got) in runs {
        assert_eq!(got["anomalies"], serde_json::json!([]), "run {name}");
        let records = exp.join("runs").join(name).join("records.nfr");
        let want = nflab_analyze::analyze_file_with(&records, &cfg, &opts, None).unwrap();
        assert_eq!(got, &serde_json::to_value(&want.analysis.summary).unwrap());
    }
}

#[test]
fn every_number_is_the_engines_analysis_of_the_records() {
    let base = common::tmpdir("engine");
    let exp = common::experiment(&base);
    write_report(&exp).unwrap();
    let a: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(exp.join("figures/analysis.json")).unwrap())
            .unwrap();
    let (cfg, opts) = options_of(a["command"].as_str().unwrap());
    assert!(!cfg.anomalies.is_empty() && opts.window_ns.is_some());
    let runs = a["runs"].as_object().unwrap();
    assert_eq!(runs.len(), 8);
    for (name, got) in runs {
        let records = exp.join("runs").join(name).join("records.nfr");
        let want = nflab_analyze::analyze_file_with(&records, &cfg, &opts, None).unwrap();
        // Field by field: the whole summary, windows, events and worst included.
        let want = serde_json::to_value(&want.analysis.summary).unwrap();
        for (k, v) in want.as_object().unwrap() {
            assert_eq!(&got[k], v, "run {name}: field {k}");
        }
        assert_eq!(got, &want, "run {name}");
    }
    // The sweep's p99 points are means over repetitions of those summaries.
    let rows = csv(&exp, "sweep");
    let (metric, mean, reps) = (
        col(&rows, "metric"),
        col(&rows, "mean_ns"),
        col(&rows, "repetitions"),
    );
    let p99: Vec<f64> = runs
        .values()
        .map(|s| s["latency_ns"]["p99"].as_f64().unwrap())
        .collect();
    // Runs 000..007: (loopback, linux-router) × (10, 20 kpps) × 2 repetitions.
    for (k, pair) in p99.chunks(2).enumerate() {
        let m = (pair[0] + pair[1]) / 2.0;
        let row = rows[1..]
            .iter()
            .filter(|r| r[metric].ends_with("p99") && r[reps] == "2")
            .nth(k)
            .unwrap_or_else(|| panic!("no sweep row {k}"));
        // The CSV prints a few significant digits.
        assert!(
            (num(&row[mean]) - m).abs() <= m * 1e-3,
            "config {k}: {} vs {m}",
            row[mean]
        );
    }
}
