//! Round trip, truncation and corruption tests of the `.nfr` format.

use nflab_record::*;
use proptest::prelude::*;

fn meta() -> Metadata {
    let mut extra = serde_json::Map::new();
    extra.insert("host".into(), serde_json::json!("dut-1"));
    Metadata {
        run_id: "run-7".into(),
        clock: ClockInfo {
            source: "CLOCK_REALTIME".into(),
            resolution_ns: 1,
        },
        tx_timestamp: "application".into(),
        rx_timestamp: "kernel-software".into(),
        flows: vec![0, 3],
        offered: serde_json::json!({"pattern": "cbr", "rate_pps": 10000}),
        extra,
    }
}

fn trailer() -> Trailer {
    Trailer {
        sent: vec![FlowSent {
            flow: 0,
            sent: 100,
            warmup: 10,
        }],
        interrupted: true,
        extra: serde_json::Map::new(),
    }
}

fn rec(i: u64) -> Record {
    Record {
        seq: i,
        flow: (i % 3) as u16,
        tx_ns: 1000 * i,
        rx_ns: 1000 * i + 17,
        wire_len: 64,
        flags: flags::RX_TS_KERNEL,
    }
}

fn write(records: &[Record], flush_every: Option<usize>) -> Vec<u8> {
    let mut w = RecordWriter::new(Vec::new(), &meta()).expect("header");
    for (i, r) in records.iter().enumerate() {
        w.push(r).expect("push");
        if let Some(k) = flush_every {
            if (i + 1) % k == 0 {
                w.flush_block().expect("flush");
            }
        }
    }
    w.finish(&trailer()).expect("finish")
}

fn read(bytes: &[u8]) -> Result<RecordFile, RecordError> {
    RecordReader::new(bytes)?.into_record_file()
}

fn arb_record() -> impl Strategy<Value = Record> {
    (
        any::<u64>(),
        any::<u16>(),
        any::<u64>(),
        any::<u64>(),
        any::<u16>(),
        any::<u16>(),
    )
        .prop_map(|(seq, flow, tx_ns, rx_ns, wire_len, flags)| Record {
            seq,
            flow,
            tx_ns,
            rx_ns,
            wire_len,
            flags,
        })
}

// --------------------------------------------------------------------------
// Round trip
// --------------------------------------------------------------------------

#[test]
fn round_trip_at_block_boundaries() {
    for n in [0usize, 1, 4095, 4096, 4097, 2 * 4096, 2 * 4096 + 1] {
        let recs: Vec<Record> = (0..n as u64).map(rec).collect();
        let bytes = write(&recs, None);
        // Independent size check: header + ceil(n/4096) block headers + 40 bytes per record + trailer.
        let meta_len = serde_json::to_vec(&meta()).expect("json").len();
        let trailer_len = serde_json::to_vec(&trailer()).expect("json").len();
        let blocks = n.div_ceil(4096);
        assert_eq!(
            bytes.len(),
            20 + meta_len + 16 * blocks + 40 * n + 16 + trailer_len,
            "n = {n}"
        );
        let mut reader = RecordReader::new(bytes.as_slice()).expect("header");
        let mut sizes = Vec::new();
        let mut all = Vec::new();
        let mut block = Vec::new();
        while reader.next_block(&mut block).expect("read") {
            sizes.push(block.len());
            all.extend_from_slice(&block);
        }
        assert_eq!(all, recs, "n = {n}");
        assert!(sizes.iter().all(|&s| (1..=4096).contains(&s)), "{sizes:?}");
        assert_eq!(sizes.len(), blocks);
        assert_eq!(reader.tail(), &TailState::Complete);
        assert_eq!(reader.trailer(), Some(&trailer()));
        assert_eq!(reader.metadata(), &meta());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn round_trip_random_records(
        recs in prop::collection::vec(arb_record(), 0..9000),
        flush_every in prop::option::of(1usize..5000),
    ) {
        let bytes = write(&recs, flush_every);
        let f = read(&bytes).expect("read");
        prop_assert_eq!(&f.records, &recs);
        prop_assert_eq!(f.tail, TailState::Complete);
        prop_assert_eq!(f.trailer, Some(trailer()));
        prop_assert_eq!(f.meta, meta());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Any single flipped bit or truncation: never a panic, and the records
    /// returned are a prefix of the written ones.
    #[test]
    fn damage_never_returns_wrong_records(
        n in 0usize..300,
        flush_every in 1usize..50,
        pos in any::<prop::sample::Index>(),
        bit in 0u8..8,
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let recs: Vec<Record> = (0..n as u64).map(rec).collect();
        let mut bytes = write(&recs, Some(flush_every));
        if truncate {
            bytes.truncate(cut.index(bytes.len() + 1));
        } else {
            let i = pos.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        if let Ok(f) = read(&bytes) {
            prop_assert!(f.records.len() <= recs.len());
            prop_assert_eq!(&f.records[..], &recs[..f.records.len()]);
            if f.tail == TailState::Complete {
                prop_assert_eq!(f.records.len(), recs.len());
            }
        }
    }
}

#[test]
fn metadata_extra_keys_and_offered_survive() {
    let bytes = write(&[], None);
    let f = read(&bytes).expect("read");
    assert_eq!(f.meta.extra.get("host"), Some(&serde_json::json!("dut-1")));
    assert_eq!(f.meta.offered["rate_pps"], 10000);
}

#[test]
fn file_api_round_trip_and_csv() {
    let dir = std::env::temp_dir().join(format!("nflab-record-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("a.nfr");
    let recs: Vec<Record> = (0..5000).map(rec).collect();
    let mut w = RecordWriter::create(&path, &meta()).expect("create");
    for r in &recs {
        w.push(r).expect("push");
    }
    assert_eq!(w.records_written(), 4096);
    assert_eq!(w.records_pending(), 904);
    w.finish(&trailer()).expect("finish");
    let f = read_all(&path).expect("read_all");
    assert_eq!(f.records, recs);
    assert_eq!(f.tail, TailState::Complete);
    let mut csv = Vec::new();
    write_csv(&f.records[..2], &mut csv).expect("csv");
    assert_eq!(
        String::from_utf8(csv).expect("utf8"),
        "seq,flow,tx_ns,rx_ns,wire_len,flags\n0,0,0,17,64,1\n1,1,1000,1017,64,1\n"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn dropped_writer_writes_pending_block_without_trailer() {
    let dir = std::env::temp_dir().join(format!("nflab-record-drop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("b.nfr");
    {
        let mut w = RecordWriter::create(&path, &meta()).expect("create");
        for i in 0..10 {
            w.push(&rec(i)).expect("push");
        }
    }
    let f = read_all(&path).expect("read_all");
    assert_eq!(f.records.len(), 10);
    assert_eq!(f.tail, TailState::NoTrailer);
    assert_eq!(f.trailer, None);
    std::fs::remove_dir_all(&dir).ok();
}

// --------------------------------------------------------------------------
// Truncation at every byte
// --------------------------------------------------------------------------

#[test]
fn every_truncation_point_gives_every_complete_block() {
    // Blocks of 3, 3, 3, 1 records (flush every 3), then the trailer.
    let recs: Vec<Record> = (0..10).map(rec).collect();
    let bytes = write(&recs, Some(3));
    let header_len = 20 + serde_json::to_vec(&meta()).expect("json").len();
    // End offsets of each record block, computed from the documented layout.
    let mut ends = Vec::new();
    let mut off = header_len;
    for size in [3usize, 3, 3, 1] {
        off += 16 + 40 * size;
        ends.push((off, size));
    }
    let trailer_end = off + 16 + serde_json::to_vec(&trailer()).expect("json").len();
    assert_eq!(trailer_end, bytes.len());

    for len in 0..=bytes.len() {
        let cut = &bytes[..len];
        if len < header_len {
            let err = read(cut).expect_err("a truncated header is an error");
            let msg = err.to_string();
            assert!(
                msg.contains("not an nflab record file") || msg.contains("corrupt header"),
                "len {len}: {msg}"
            );
            continue;
        }
        let f = read(cut).unwrap_or_else(|e| panic!("len {len}: {e}"));
        let (boundary, n_complete) = ends
            .iter()
            .filter(|(end, _)| *end <= len)
            .fold((header_len, 0usize), |(_, n), &(end, size)| (end, n + size));
        assert_eq!(f.records, recs[..n_complete], "len {len}");
        if len == bytes.len() {
            assert_eq!(f.tail, TailState::Complete);
            assert_eq!(f.trailer, Some(trailer()));
        } else if len == boundary {
            assert_eq!(f.tail, TailState::NoTrailer, "len {len}");
            assert_eq!(f.trailer, None);
        } else {
            match &f.tail {
                TailState::Truncated {
                    discarded_bytes,
                    reason,
                } => {
                    assert_eq!(*discarded_bytes, (len - boundary) as u64, "len {len}");
                    assert!(reason.contains("ends inside"), "len {len}: {reason}");
                }
                other => panic!("len {len}: expected Truncated, got {other:?}"),
            }
            assert_eq!(f.trailer, None);
        }
    }
}

// --------------------------------------------------------------------------
// Corruption
// --------------------------------------------------------------------------

#[test]
fn flipped_payload_byte_in_middle_block_is_crc_truncation() {
    let recs: Vec<Record> = (0..9).map(rec).collect();
    let mut bytes = write(&recs, Some(3));
    let header_len = 20 + serde_json::to_vec(&meta()).expect("json").len();
    let block_len = 16 + 3 * 40;
    // A byte in the payload of block 1 (the second block).
    let pos = header_len + block_len + 16 + 45;
    bytes[pos] ^= 0x40;
    let f = read(&bytes).expect("header is fine");
    assert_eq!(f.records, recs[..3]);
    assert_eq!(f.trailer, None);
    match f.tail {
        TailState::Truncated {
            discarded_bytes,
            reason,
        } => {
            assert_eq!(
                discarded_bytes,
                (bytes.len() - header_len - block_len) as u64
            );
            assert!(reason.contains("CRC"), "{reason}");
            assert!(reason.contains("block 1"), "{reason}");
            assert!(reason.contains("middle"), "{reason}");
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
}

#[test]
fn flipped_byte_in_last_block_and_trailer() {
    let recs: Vec<Record> = (0..6).map(rec).collect();
    let clean = write(&recs, Some(3));
    let header_len = 20 + serde_json::to_vec(&meta()).expect("json").len();
    let trailer_start = header_len + 2 * (16 + 120);

    // In the trailer payload: all records, no trailer, CRC reason, "last block".
    let mut bytes = clean.clone();
    bytes[trailer_start + 16 + 2] ^= 1;
    let f = read(&bytes).expect("header is fine");
    assert_eq!(f.records, recs);
    assert_eq!(f.trailer, None);
    match &f.tail {
        TailState::Truncated { reason, .. } => {
            assert!(
                reason.contains("CRC") && reason.contains("last block"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }

    // In a block header's magic: that block and everything after are ignored.
    let mut bytes = clean.clone();
    bytes[header_len + 136] = b'X';
    let f = read(&bytes).expect("header is fine");
    assert_eq!(f.records, recs[..3]);
    assert!(matches!(&f.tail, TailState::Truncated { reason, .. } if reason.contains("magic")));

    // A count field made huge: treated as corruption, not an allocation.
    let mut bytes = clean.clone();
    bytes[header_len + 8..header_len + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    let f = read(&bytes).expect("header is fine");
    assert!(f.records.is_empty());
    assert!(
        matches!(&f.tail, TailState::Truncated { reason, .. } if reason.contains("implausible"))
    );

    // Garbage after the trailer: the trailer is kept, the tail is not Complete.
    let mut bytes = clean;
    bytes.extend_from_slice(b"junk");
    let f = read(&bytes).expect("header is fine");
    assert_eq!(f.records, recs);
    assert_eq!(f.trailer, Some(trailer()));
    assert!(matches!(
        &f.tail,
        TailState::Truncated { discarded_bytes: 4, reason } if reason.contains("after the trailer")
    ));
}

#[test]
fn bad_headers_are_errors_naming_the_problem() {
    let clean = write(&[rec(1)], None);

    let mut b = clean.clone();
    b[0] = b'X';
    let e = read(&b).expect_err("bad magic");
    assert!(matches!(e, RecordError::NotRecordFile { .. }), "{e}");
    assert!(e.to_string().contains("NFLABREC"), "{e}");

    let mut b = clean.clone();
    b[8] = 2;
    let e = read(&b).expect_err("bad version");
    assert!(
        matches!(e, RecordError::UnsupportedVersion { version: 2, .. }),
        "{e}"
    );

    let mut b = clean.clone();
    b[22] ^= 0x20; // inside the metadata JSON
    let e = read(&b).expect_err("bad metadata");
    assert!(matches!(e, RecordError::CorruptHeader { .. }), "{e}");
    assert!(e.to_string().contains("CRC32"), "{e}");

    let e = read(b"a,b,c\n1,2,3\n").expect_err("csv is not nfr");
    assert!(matches!(e, RecordError::NotRecordFile { .. }), "{e}");

    let missing = std::path::Path::new("/nonexistent/dir/x.nfr");
    let e = read_all(missing).expect_err("missing file");
    assert!(e.to_string().contains("/nonexistent/dir/x.nfr"), "{e}");
}

#[test]
fn open_names_the_file_in_header_errors() {
    let dir = std::env::temp_dir().join(format!("nflab-record-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("not-records.csv");
    std::fs::write(&path, "seq,tx_ns,rx_ns\n").expect("write");
    let e = read_all(&path).expect_err("not a record file");
    let msg = e.to_string();
    assert!(
        msg.contains("not-records.csv") && msg.contains("not an nflab record file"),
        "{msg}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
