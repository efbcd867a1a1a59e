//! `traffic.direction` on real namespaces (root): each port sends its own probe stream
//! and records the other's. Over a link DuT whose two directions differ by construction
//! (delay and loss set per direction), each way's figures are that way's; the files,
//! the flows and `results.parquet` say which way is which.
//!
//! Run: `sudo -E cargo test -p nflab-lab --test directions -- --nocapture`

use std::path::{Path, PathBuf};

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;

mod common;
use common::{json, serial, study};

fn tmp(tag: &str) -> PathBuf {
    common::tmp("dir", tag)
}

/// Column `name` of a one-row-per-run parquet file, as text.
fn column(path: &Path, name: &str) -> Vec<String> {
    let file = std::fs::File::open(path).expect("results.parquet");
    let reader = SerializedFileReader::new(file).expect("parquet");
    let i = reader
        .metadata()
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .position(|c| c.name() == name)
        .unwrap_or_else(|| panic!("no column {name}"));
    reader
        .get_row_iter(None)
        .expect("rows")
        .map(|row| {
            let row = row.expect("row");
            match row.get_column_iter().nth(i).map(|(_, f)| f.clone()) {
                Some(Field::Str(s)) => s,
                Some(Field::Double(v)) => v.to_string(),
                Some(f) => f.to_string(),
                None => String::new(),
            }
        })
        .collect()
}

/// Flow ids of the probe records in `path`.
fn flows(path: &Path) -> (u16, u16) {
    let f = nflab_record::read_all(path).expect("records");
    let lo = f.records.iter().map(|r| r.flow).min().expect("records");
    let hi = f.records.iter().map(|r| r.flow).max().expect("records");
    (lo, hi)
}

#[test]
fn both_ways_over_an_asymmetric_link_each_way_has_its_own_delay_and_loss() {
    if !nflab_testkit::require_root() {
        return;
    }
    let _one = serial();
    let dir = tmp("link");
    let (fwd_us, rev_us, rev_loss) = (1_000.0, 3_000.0, 0.1);
    let r = study(
        &dir,
        "[experiment]\nname = \"ways\"\n\
         [traffic]\ndirection = \"both\"\nrate_pps = 5000\nduration_s = 2\nwarmup_s = 0.3\n\
         [dut]\nkind = \"link\"\n[dut.link]\ndelay_us = 1000\n\
         [dut.link.reverse]\ndelay_us = 3000\nloss = { model = \"bernoulli\", p = 0.1 }\n",
    )
    .expect("the study");
    let row = &r.runs[0];
    let s = &row.summary;
    let fwd = &s.directions["forward"];
    let rev = &s.directions["reverse"];
    // The top level is the forward way's.
    assert_eq!(s.packets, fwd.packets);
    assert_eq!(s.latency_ns.p50, fwd.latency_ns.p50);
    for (way, x, delay_us) in [("forward", fwd, fwd_us), ("reverse", rev, rev_us)] {
        let p50 = x.latency_ns.p50.expect("a median") as f64 / 1e3;
        println!(
            "{way}: p50 {p50:.1} µs, loss {:.4}, {:?}",
            x.loss_ratio, x.packets
        );
        // The link's delay plus the path's own, which is far below a millisecond.
        assert!(
            p50 >= delay_us && p50 < delay_us + 500.0,
            "{way}: p50 {p50} µs for a {delay_us} µs link"
        );
        assert!(x.packets.sent > 9_000, "{way}: {:?}", x.packets);
    }
    assert_eq!(fwd.loss_ratio, 0.0, "the forward way loses nothing");
    let n = rev.packets.sent as f64;
    let se = (rev_loss * (1.0 - rev_loss) / n).sqrt();
    assert!(
        (rev.loss_ratio - rev_loss).abs() <= 3.0 * se,
        "reverse loss {} of {n}, expected {rev_loss} ± {}",
        rev.loss_ratio,
        3.0 * se
    );
    // Each way has its records, its generator's and recorder's report, its own flows.
    let run = r.dir.join("runs").join(&row.run);
    let (lo, hi) = flows(&run.join("records.nfr"));
    assert!(hi < 0x4000, "forward flows {lo}..={hi}");
    let (lo, _) = flows(&run.join("records-reverse.nfr"));
    assert!(lo >= 0x4000, "reverse flows from {lo}");
    for f in ["gen.json", "gen-reverse.json", "recorder-reverse.json"] {
        assert!(run.join(f).is_file(), "{f}");
    }
    let on_disk = json(&run.join("summary.json"));
    assert_eq!(
        on_disk["directions"]["reverse"]["packets"]["lost"],
        rev.packets.lost
    );
    let parquet = r.dir.join("results.parquet");
    assert_eq!(column(&parquet, "direction"), ["both"]);
    let lost: f64 = column(&parquet, "reverse.loss_ratio")[0]
        .parse()
        .expect("a ratio");
    assert_eq!(lost, rev.loss_ratio);
    // The report has a row per way.
    nflab_report::write_report_with(
        &r.dir,
        &nflab_report::Options {
            no_png: true,
            ..Default::default()
        },
    )
    .expect("the report");
    let html = std::fs::read_to_string(r.dir.join("report.html")).expect("report.html");
    let each_way = &html[html
        .find("id=\"directions\"")
        .expect("the Each way section")..];
    assert!(each_way.contains("→ forward") && each_way.contains("← reverse"));
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn the_reverse_way_alone_is_the_runs_only_way() {
    if !nflab_testkit::require_root() {
        return;
    }
    let _one = serial();
    let dir = tmp("reverse");
    let r = study(
        &dir,
        "[experiment]\nname = \"rev\"\n[dut]\nkind = \"linux-router\"\n\
         [traffic]\ndirection = \"reverse\"\nrate_pps = 5000\nduration_s = 1\nwarmup_s = 0.2\n",
    )
    .expect("the study");
    let s = &r.runs[0].summary;
    assert_eq!(s.directions.keys().collect::<Vec<_>>(), ["reverse"]);
    assert_eq!(s.packets, s.directions["reverse"].packets);
    assert_eq!(s.loss_ratio, 0.0);
    let run = r.dir.join("runs").join(&r.runs[0].run);
    let (lo, _) = flows(&run.join("records.nfr"));
    assert!(lo >= 0x4000, "the reverse way's flows, from {lo}");
    assert!(!run.join("records-reverse.nfr").exists());
    assert_eq!(
        column(&r.dir.join("results.parquet"), "direction"),
        ["reverse"]
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn the_nflab_data_plane_routes_each_way_on_its_own_workers() {
    if !nflab_testkit::require_root() {
        return;
    }
    let _one = serial();
    let dir = tmp("nflab");
    let r = study(
        &dir,
        "[experiment]\nname = \"nf\"\n[dut]\nkind = \"nflab\"\npipeline = [\"router\"]\nrx_mode = \"adaptive\"\n\
         [traffic]\ndirection = \"both\"\nrate_pps = 5000\nduration_s = 1\nwarmup_s = 0.2\n",
    )
    .expect("the study");
    let s = &r.runs[0].summary;
    for way in ["forward", "reverse"] {
        let x = &s.directions[way];
        assert_eq!(x.loss_ratio, 0.0, "{way}: {:?}", x.packets);
        assert!(x.packets.received > 4000, "{way}: {:?}", x.packets);
    }
    // Each way's worker counted its own frames.
    let dut = json(&r.dir.join("runs").join(&r.runs[0].run).join("dut.json"));
    for (way, stats) in [("forward", &dut), ("reverse", &dut["reverse"])] {
        let rx: u64 = stats["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .filter_map(|p| p["rx_packets"].as_u64())
            .sum();
        assert!(
            rx >= 5000,
            "{way}: the worker received {rx} frames: {stats}"
        );
    }
    std::fs::remove_dir_all(&dir).expect("clean up");
}
