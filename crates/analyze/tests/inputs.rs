//! `read_csv` and `analyze_file`.

use std::path::PathBuf;

use nflab_analyze::*;
use nflab_record::{Metadata, RecordWriter, Trailer};

struct TmpDir(PathBuf);

impl TmpDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("nflab-analyze-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&p).expect("tmp dir");
        TmpDir(p)
    }
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).expect("write tmp file");
        p
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

#[test]
fn csv_minimal_and_extra_columns() {
    let d = TmpDir::new("csv-ok");
    let p = d.file(
        "a.csv",
        "seq,tx_ns,rx_ns\n0,100,150\n2,300,390\r\n\n1,200,260\n",
    );
    let (recs, sent) = read_csv(&p).expect("read");
    assert_eq!(recs.len(), 3);
    assert_eq!(
        (recs[1].seq, recs[1].tx_ns, recs[1].rx_ns, recs[1].flow),
        (2, 300, 390, 0)
    );
    assert_eq!(
        sent,
        vec![FlowSent {
            flow: 0,
            sent: 3,
            warmup: 0
        }]
    );

    // Columns in another order, with flow and an unknown column.
    let p = d.file(
        "b.csv",
        "rx_ns, note ,flow,seq,tx_ns,wire_len\n150,x,7,4,100,64\n",
    );
    let (recs, sent) = read_csv(&p).expect("read");
    assert_eq!(
        recs,
        vec![Record {
            seq: 4,
            flow: 7,
            tx_ns: 100,
            rx_ns: 150,
            wire_len: 64,
            flags: 0
        }]
    );
    assert_eq!(
        sent,
        vec![FlowSent {
            flow: 7,
            sent: 5,
            warmup: 0
        }]
    );
}

#[test]
fn csv_bad_row_names_file_line_and_text() {
    let d = TmpDir::new("csv-bad");
    let p = d.file("bad.csv", "seq,tx_ns,rx_ns\n0,100,150\n1,2OO,260\n");
    let e = read_csv(&p).expect_err("bad row");
    let msg = e.to_string();
    assert!(matches!(e, AnalyzeError::CsvRow { line: 3, .. }), "{msg}");
    assert!(msg.contains("bad.csv"), "{msg}");
    assert!(msg.contains("line 3"), "{msg}");
    assert!(msg.contains("1,2OO,260"), "{msg}");
    assert!(msg.contains("tx_ns"), "{msg}");

    let p = d.file("short.csv", "seq,tx_ns,rx_ns\n0,100\n");
    let msg = read_csv(&p).expect_err("short row").to_string();
    assert!(
        msg.contains("line 2") && msg.contains("expected 3 fields"),
        "{msg}"
    );

    let p = d.file("hdr.csv", "seq,tx,rx_ns\n0,100,150\n");
    let msg = read_csv(&p).expect_err("header").to_string();
    assert!(
        msg.contains("hdr.csv") && msg.contains("\"tx_ns\""),
        "{msg}"
    );

    let p = d.file("empty.csv", "");
    assert!(read_csv(&p)
        .expect_err("empty")
        .to_string()
        .contains("empty"));

    let msg = read_csv(&d.0.join("missing.csv"))
        .expect_err("missing")
        .to_string();
    assert!(msg.contains("missing.csv"), "{msg}");
}

#[test]
fn csv_written_by_record_crate_reads_back() {
    let d = TmpDir::new("csv-rt");
    let recs: Vec<Record> = (0..50u64)
        .map(|i| Record {
            seq: i,
            flow: (i % 2) as u16,
            tx_ns: 10 * i,
            rx_ns: 10 * i + 3,
            wire_len: 60,
            flags: nflab_record::flags::RX_TS_KERNEL,
        })
        .collect();
    let mut buf = Vec::new();
    nflab_record::write_csv(&recs, &mut buf).expect("csv");
    let p = d.0.join("rt.csv");
    std::fs::write(&p, buf).expect("write");
    let (back, sent) = read_csv(&p).expect("read");
    assert_eq!(back, recs);
    assert_eq!(
        sent,
        vec![
            FlowSent {
                flow: 0,
                sent: 49,
                warmup: 0
            },
            FlowSent {
                flow: 1,
                sent: 50,
                warmup: 0
            }
        ]
    );
}

fn meta() -> Metadata {
    Metadata {
        run_id: "r1".into(),
        clock: ClockInfo {
            source: "CLOCK_REALTIME".into(),
            resolution_ns: 1,
        },
        flows: vec![0],
        ..Metadata::default()
    }
}

#[test]
fn analyze_file_with_trailer_uses_sent_counts_and_warmup() {
    let d = TmpDir::new("nfr-ok");
    let p = d.0.join("run.nfr");
    let mut w = RecordWriter::create(&p, &meta()).expect("create");
    // Sent 10 with warm-up 2; seq 5 and 9 lost.
    for seq in [0u64, 1, 2, 3, 4, 6, 7, 8] {
        w.push(&Record {
            seq,
            tx_ns: 1000 * seq,
            rx_ns: 1000 * seq + 40,
            ..Record::default()
        })
        .expect("push");
    }
    w.finish(&Trailer {
        sent: vec![FlowSent {
            flow: 0,
            sent: 10,
            warmup: 2,
        }],
        interrupted: true,
        ..Trailer::default()
    })
    .expect("finish");
    let (s, tail) = analyze_file(&p, &AnalysisConfig::default()).expect("analyze");
    assert_eq!(tail, TailState::Complete);
    assert_eq!(
        (s.packets.sent, s.packets.received, s.packets.lost),
        (8, 6, 2)
    );
    assert_eq!(s.loss_ratio, 0.25);
    assert!(s.interrupted);
    assert_eq!(s.clock.source, "CLOCK_REALTIME"); // from the file
    assert!(s.notes.is_empty(), "{:?}", s.notes);

    // A clock in the config wins.
    let cfg = AnalysisConfig {
        clock: ClockInfo {
            source: "CLOCK_TAI".into(),
            resolution_ns: 2,
        },
        ..AnalysisConfig::default()
    };
    let (s, _) = analyze_file(&p, &cfg).expect("analyze");
    assert_eq!(s.clock.source, "CLOCK_TAI");
}

#[test]
fn analyze_file_without_trailer_estimates_and_notes() {
    let d = TmpDir::new("nfr-cut");
    let p = d.0.join("cut.nfr");
    {
        let mut w = RecordWriter::create(&p, &meta()).expect("create");
        for seq in [0u64, 1, 3] {
            w.push(&Record {
                seq,
                tx_ns: 0,
                rx_ns: 5,
                ..Record::default()
            })
            .expect("push");
        }
        // Dropped without finish: the block is written, no trailer.
    }
    let (s, tail) = analyze_file(&p, &AnalysisConfig::default()).expect("analyze");
    assert_eq!(tail, TailState::NoTrailer);
    assert_eq!(
        (s.packets.sent, s.packets.received, s.packets.lost),
        (4, 3, 1)
    );
    assert!(!s.interrupted);
    assert!(
        s.notes.iter().any(|n| n.contains("no trailer")),
        "{:?}",
        s.notes
    );

    // A partial block appended: still analysed, and the truncation is a note.
    let mut bytes = std::fs::read(&p).expect("read");
    bytes.extend_from_slice(b"NFBK\x01\0\0\0");
    std::fs::write(&p, bytes).expect("write");
    let (s, tail) = analyze_file(&p, &AnalysisConfig::default()).expect("analyze");
    assert!(
        matches!(
            tail,
            TailState::Truncated {
                discarded_bytes: 8,
                ..
            }
        ),
        "{tail:?}"
    );
    assert_eq!(s.packets.received, 3);
    assert!(
        s.notes.iter().any(|n| n.contains("truncated")),
        "{:?}",
        s.notes
    );

    // Not a record file: an error naming it.
    let q = d.file("x.nfr", "seq,tx_ns,rx_ns\n");
    let msg = analyze_file(&q, &AnalysisConfig::default())
        .expect_err("not nfr")
        .to_string();
    assert!(
        msg.contains("x.nfr") && msg.contains("not an nflab record file"),
        "{msg}"
    );
}

#[test]
fn timestamp_sources_come_from_the_metadata_with_a_fallback_note() {
    let d = TmpDir::new("nfr-ts");
    let p = d.0.join("run.nfr");
    let mut m = meta();
    m.tx_timestamp = "kernel-software".into();
    m.rx_timestamp = "kernel-software".into();
    m.extra.insert(
        "tx_stamps".into(),
        serde_json::json!({"requested": "kernel", "application_fallbacks": 3}),
    );
    let mut w = RecordWriter::create(&p, &m).expect("create");
    w.push(&Record {
        tx_ns: 10,
        rx_ns: 50,
        ..Record::default()
    })
    .expect("push");
    w.finish(&Trailer::default()).expect("finish");
    let (s, _) = analyze_file(&p, &AnalysisConfig::default()).expect("analyze");
    assert_eq!(
        s.timestamps,
        Some(TimestampSources {
            tx: "kernel-software".into(),
            rx: "kernel-software".into(),
            tx_application_fallbacks: Some(3),
        })
    );
    assert!(
        s.notes
            .iter()
            .any(|n| n.starts_with("3 received probes got no kernel TX timestamp")),
        "{:?}",
        s.notes
    );
    let j = serde_json::to_value(&s).expect("json");
    assert_eq!(j["timestamps"]["tx"], "kernel-software");

    // Without kernel stamps: the sources, no count, no note.
    let (s, _) = analyze_file(
        &{
            let q = d.0.join("app.nfr");
            let mut m = meta();
            m.tx_timestamp = "application".into();
            m.rx_timestamp = "kernel-software".into();
            RecordWriter::create(&q, &m)
                .expect("create")
                .finish(&Trailer::default())
                .expect("finish");
            q
        },
        &AnalysisConfig::default(),
    )
    .expect("analyze");
    let t = s.timestamps.expect("sources");
    assert_eq!(
        (t.tx.as_str(), t.tx_application_fallbacks),
        ("application", None)
    );
}
