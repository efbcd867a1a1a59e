//! Importers and exporters: TRex-fork files, CSV with a bad row, interval logs.

use std::io::Write;
use std::path::PathBuf;

use nflab_analyze::export::{self, Bins};
use nflab_analyze::*;

fn tmp(name: &str) -> PathBuf {
    let d = nflab_testkit::scratch_dir("analyze-importers");
    d.join(name)
}

/// Write `(tx, rx)` seconds as the TRex fork does: `ofstream::write` of a
/// `double` array, i.e. native little-endian f64 pairs, no header.
fn write_trex(path: &PathBuf, pairs: &[(f64, f64)], junk: usize) {
    let mut f = std::fs::File::create(path).unwrap();
    for (tx, rx) in pairs {
        f.write_all(&tx.to_le_bytes()).unwrap();
        f.write_all(&rx.to_le_bytes()).unwrap();
    }
    f.write_all(&vec![0xAB; junk]).unwrap();
}

#[test]
fn trex_fork_file_with_truncated_tail() {
    // 190 kpps-like spacing; latencies 20 us except a 2-packet spike of 300 us.
    let lat_us = [20.0, 20.0, 300.0, 310.0, 20.0, 21.0];
    let pairs: Vec<(f64, f64)> = lat_us
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let tx = 12.5 + i as f64 * 5.263e-6;
            (tx, tx + l * 1e-6)
        })
        .collect();
    let p = tmp("run.data");
    write_trex(&p, &pairs, 7);
    let cfg = AnalysisConfig {
        anomalies: vec!["2:250us".parse().unwrap()],
        ..AnalysisConfig::default()
    };
    let fa = analyze_file_with(&p, &cfg, &Options::default(), None).unwrap();
    let s = &fa.analysis.summary;
    assert_eq!(
        (s.packets.sent, s.packets.received, s.packets.lost),
        (6, 6, 0)
    );
    assert_eq!(
        (s.latency_ns.min, s.latency_ns.max),
        (Some(20_000), Some(310_000))
    );
    assert_eq!(s.anomalies[0].count, 1);
    assert_eq!(
        s.anomaly_details[0].events[0].start_tx_ns,
        Some(12_500_010_526)
    );
    let problem = fa.problem.expect("trailing bytes reported");
    assert!(
        problem.contains("run.data") && problem.contains("7 bytes"),
        "{problem}"
    );
    assert!(s.notes.iter().any(|n| n.contains("no sequence numbers")));
    // An empty file is an error naming it.
    let e = tmp("empty.data");
    std::fs::File::create(&e).unwrap();
    let err = analyze_file_with(&e, &cfg, &Options::default(), None)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("empty.data"), "{err}");
}

#[test]
fn csv_bad_row_keeps_rows_before() {
    let p = tmp("bad.csv");
    std::fs::write(
        &p,
        "seq,tx_ns,rx_ns\n0,100,150\n1,200,260\n2,300,x\n3,400,410\n",
    )
    .unwrap();
    let fa = analyze_file_with(&p, &AnalysisConfig::default(), &Options::default(), None).unwrap();
    let s = &fa.analysis.summary;
    assert_eq!(s.packets.received, 2);
    assert_eq!((s.latency_ns.min, s.latency_ns.max), (Some(50), Some(60)));
    let problem = fa.problem.unwrap();
    assert!(
        problem.contains("bad.csv") && problem.contains("line 4"),
        "{problem}"
    );
    // read_csv keeps its all-or-nothing contract.
    assert!(read_csv(&p).is_err());
}

#[test]
fn streaming_file_equals_in_memory() {
    let p = tmp("same.csv");
    let mut text = String::from("seq,tx_ns,rx_ns\n");
    let mut records = Vec::new();
    for i in 0..5000u64 {
        if i % 97 == 5 {
            continue;
        }
        let lat = 1000 + (i * 7919) % 5000 + if i % 500 < 3 { 300_000 } else { 0 };
        text.push_str(&format!("{i},{},{}\n", i * 1000, i * 1000 + lat));
        records.push(Record {
            seq: i,
            flow: 0,
            tx_ns: i * 1000,
            rx_ns: i * 1000 + lat,
            wire_len: 0,
            flags: 0,
        });
    }
    std::fs::write(&p, text).unwrap();
    let cfg = AnalysisConfig {
        anomalies: vec!["2:250us".parse().unwrap()],
        ..AnalysisConfig::default()
    };
    let fa = analyze_file_with(&p, &cfg, &Options::default(), None).unwrap();
    let (r, sent) = read_csv(&p).unwrap();
    assert_eq!(r, records);
    let mem = analyze(&r, &sent, &cfg);
    assert_eq!(fa.analysis.summary, mem);
}

#[test]
fn interval_log_round_trip_and_tables() {
    let records: Vec<Record> = (0..3000u64)
        .map(|i| Record {
            seq: i,
            flow: 0,
            tx_ns: i * 1_000_000,
            rx_ns: i * 1_000_000 + 10_000 + i,
            wire_len: 0,
            flags: 0,
        })
        .collect();
    let sent = [FlowSent {
        flow: 0,
        sent: 3000,
        warmup: 0,
    }];
    let opts = Options {
        window_ns: Some(1_000_000_000),
        interval_log: true,
        ..Options::default()
    };
    let mut a = analyze_with(&records, &sent, &AnalysisConfig::default(), &opts);
    assert_eq!(a.summary.windows.len(), 3);
    let p = tmp("lat.hlog");
    export::write_interval_log(&a, &p).unwrap();
    let text = std::fs::read(&p).unwrap();
    let mut total = 0;
    let mut lines = 0;
    for item in hdrhistogram::serialization::interval_log::IntervalLogIterator::new(&text) {
        if let Ok(hdrhistogram::serialization::interval_log::LogEntry::Interval(h)) = item {
            let bytes = base64_decode(h.encoded_histogram());
            let hist: hdrhistogram::Histogram<u64> =
                hdrhistogram::serialization::Deserializer::new()
                    .deserialize(&mut &bytes[..])
                    .unwrap();
            total += hist.len();
            lines += 1;
        }
    }
    assert_eq!((lines, total), (3, 3000));
    hdrh_reads_the_log(&p, &a.window_histograms);
    let cdf = export::cdf_table(&mut a.latency, 100_000);
    assert_eq!(cdf.columns[0].0, "value_ns");
    let h = export::histogram_table(&mut a.latency, Bins::Linear(1000));
    if let export::Column::I64(c) = &h.columns[2].1 {
        assert_eq!(c.iter().flatten().sum::<i64>(), 3000);
        assert_eq!(c.len(), 3);
    }
    for fmt in [
        export::TableFormat::Csv,
        export::TableFormat::Json,
        export::TableFormat::Parquet,
    ] {
        let path = export::write_table(&cdf, &tmp(""), fmt).unwrap();
        assert!(std::fs::metadata(path).unwrap().len() > 0);
    }
}

/// HdrHistogram's own Python port (`hdrhistogram` on PyPI, module `hdrh`)
/// reads the log: per interval the same count, min, max and percentiles.
fn hdrh_reads_the_log(path: &std::path::Path, windows: &[(u64, hdrhistogram::Histogram<u64>)]) {
    const READ: &str = "
import sys
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
reader = HistogramLogReader(sys.argv[1], HdrHistogram(1, 2**40, 3))
while True:
    h = reader.get_next_interval_histogram()
    if h is None:
        break
    print(h.get_total_count(), h.get_min_value(), h.get_max_value(),
          *(h.get_value_at_percentile(p) for p in (50, 90, 99, 99.9)))
";
    let out = std::process::Command::new("python3")
        .args(["-c", READ])
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "HdrHistogram's Python reader failed (install it: python3 -m pip install hdrhistogram): {err}"
    );
    let got: Vec<Vec<u64>> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            l.split_whitespace()
                .map(|v| v.parse().unwrap_or(u64::MAX))
                .collect()
        })
        .collect();
    let want: Vec<Vec<u64>> = windows
        .iter()
        .map(|(_, h)| {
            let mut v = vec![h.len(), h.min(), h.max()];
            v.extend([0.5, 0.9, 0.99, 0.999].map(|q| h.value_at_quantile(q)));
            v
        })
        .collect();
    assert_eq!(got, want, "hdrh vs the histograms nflab wrote");
}

/// Minimal standard base64 decoder (independent of the writer's encoder).
fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let b: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::new();
    for ch in b.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in ch.iter().enumerate() {
            n |= u32::from(val(c)) << (18 - 6 * i);
        }
        out.push((n >> 16) as u8);
        if ch.len() > 2 {
            out.push((n >> 8) as u8);
        }
        if ch.len() > 3 {
            out.push(n as u8);
        }
    }
    out
}
