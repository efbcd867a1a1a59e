//! Hand-built traces with answers worked out in the comments.

use nflab_analyze::*;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn r(flow: u16, seq: u64, tx_ns: u64, rx_ns: u64) -> Record {
    Record {
        seq,
        flow,
        tx_ns,
        rx_ns,
        wire_len: 64,
        flags: 0,
    }
}

fn sent(flow: u16, sent: u64, warmup: u64) -> FlowSent {
    FlowSent { flow, sent, warmup }
}

fn spec(n: u32, t_ns: u64) -> AnomalySpec {
    AnomalySpec::new(n, t_ns)
}

fn assert_near(a: f64, b: f64, tol: f64) {
    assert!((a - b).abs() <= tol, "{a} vs {b} (tolerance {tol})");
}

/// Ten packets, seq 0..9 of flow 0, sent 10, arriving in order.
/// tx = 1000·i; latencies L = 100 300 200 500 400 100 600 700 200 900 ns.
#[test]
fn ten_packet_trace_by_hand() {
    let lat = [100u64, 300, 200, 500, 400, 100, 600, 700, 200, 900];
    let recs: Vec<Record> = (0..10u64)
        .map(|i| r(0, i, 1000 * i, 1000 * i + lat[i as usize]))
        .collect();
    let cfg = AnalysisConfig {
        anomalies: vec![
            spec(1, 400),
            spec(2, 400),
            spec(3, 400),
            spec(3, 100),
            spec(1, 1000),
        ],
        offered_pps: Some(1e6),
        tx_pps: Some(999_999.5),
        clock: ClockInfo {
            source: "CLOCK_MONOTONIC".into(),
            resolution_ns: 1,
        },
    };
    let s = analyze(&recs, &[sent(0, 10, 0)], &cfg);

    // Counts: everything arrived once, in order.
    assert_eq!(
        s.packets,
        PacketCounts {
            sent: 10,
            received: 10,
            lost: 0,
            reordered: 0,
            duplicated: 0
        }
    );
    assert_eq!(s.loss_ratio, 0.0);

    // Sorted L: 100 100 200 200 300 400 500 600 700 900; sum 4000, mean 400.
    // Deviations: -300 -300 -200 -200 -100 0 100 200 300 500;
    // squares sum to 660 000; population variance 66 000; stdev 256.9046515733026.
    // Nearest rank: p50 -> rank ceil(5) = 5 -> 300; p90 -> rank 9 -> 700;
    // p99 -> ceil(9.9) = 10 -> 900; p99.9.. -> rank 10 -> 900.
    let l = s.latency_ns;
    assert_eq!((l.min, l.max), (Some(100), Some(900)));
    assert_eq!(l.mean, Some(400.0));
    assert_near(l.stdev.expect("stdev"), 256.904_651_573_302_6, 1e-9);
    assert_eq!((l.p50, l.p90, l.p99), (Some(300), Some(700), Some(900)));
    assert_eq!(
        (l.p99_9, l.p99_99, l.p99_999),
        (Some(900), Some(900), Some(900))
    );

    // RFC 3550: |D| in arrival order = 200 100 300 100 300 500 100 500 700;
    // J: 12.5, 17.96875, 35.595703125, 39.62097..., 55.89466..., 83.65124...,
    // 84.67304..., 110.63097..., 147.46654068876524.
    assert_near(
        s.jitter_ns.rfc3550.expect("jitter"),
        147.466_540_688_765_24,
        1e-9,
    );
    // IPDV: same pairs (seq order = arrival order); sorted |IPDV| =
    // 100 100 100 200 300 300 500 500 700 (9 values): p50 rank 5 -> 300, p99 rank 9 -> 700.
    assert_eq!(s.jitter_ns.ipdv_p50, Some(300));
    assert_eq!(s.jitter_ns.ipdv_p99, Some(700));

    // rx span 100 .. 9900 ns = 9.8 µs; (10 - 1) / 9.8e-6 s = 918 367.3469... pps.
    assert_near(s.rate.rx_pps.expect("rx_pps"), 918_367.346_938_775_6, 1e-6);
    assert_eq!(s.rate.offered_pps, Some(1e6));
    assert_eq!(s.rate.tx_pps, Some(999_999.5));

    // L >= 400 at seq 3,4 | 6,7 | 9: runs of 2, 2 and 1 (the last open at the end).
    let a = &s.anomalies;
    assert_eq!((a[0].count, a[0].packets, a[0].longest), (3, 5, 2)); // n=1
    assert_eq!((a[1].count, a[1].packets, a[1].longest), (2, 4, 2)); // n=2
    assert_eq!((a[2].count, a[2].packets, a[2].longest), (0, 0, 0)); // n=3
                                                                     // Every L >= 100: one run of all 10, open at the end (seed 001 reported 0 here).
    assert_eq!((a[3].count, a[3].packets, a[3].longest), (1, 10, 10));
    assert_eq!((a[4].count, a[4].packets, a[4].longest), (0, 0, 0));
    assert_eq!((a[0].n, a[0].t_ns), (1, 400));

    assert_eq!(s.clock.source, "CLOCK_MONOTONIC");
    assert!(!s.interrupted);
    assert!(s.notes.is_empty(), "{:?}", s.notes);
}

/// Latencies 1..=100 000 arriving in a shuffled order.
#[test]
fn percentiles_of_1_to_100000() {
    let mut lats: Vec<u64> = (1..=100_000).collect();
    lats.shuffle(&mut ChaCha20Rng::seed_from_u64(7));
    let recs: Vec<Record> = lats
        .iter()
        .enumerate()
        .map(|(i, &l)| r(0, i as u64, 10_000 * i as u64, 10_000 * i as u64 + l))
        .collect();
    let s = analyze(&recs, &[sent(0, 100_000, 0)], &AnalysisConfig::default());
    let l = s.latency_ns;
    // Rank ceil(p/100 · 100 000) holds the value equal to the rank.
    assert_eq!(l.p50, Some(50_000));
    assert_eq!(l.p90, Some(90_000));
    assert_eq!(l.p99, Some(99_000));
    assert_eq!(l.p99_9, Some(99_900));
    assert_eq!(l.p99_99, Some(99_990));
    assert_eq!(l.p99_999, Some(99_999));
    assert_eq!((l.min, l.max), (Some(1), Some(100_000)));
    assert_eq!(l.mean, Some(50_000.5));
    // Population stdev of 1..N is sqrt((N² - 1) / 12).
    assert_near(
        l.stdev.expect("stdev"),
        ((1e10 - 1.0) / 12.0f64).sqrt(),
        1e-6,
    );
}

/// Arrival 0,1,3,2,2,5 of sent 6.
#[test]
fn loss_reorder_duplicate() {
    let recs: Vec<Record> = [0u64, 1, 3, 2, 2, 5]
        .iter()
        .enumerate()
        .map(|(k, &seq)| r(0, seq, 100 * seq, 100 * seq + 50 + k as u64))
        .collect();
    let s = analyze(&recs, &[sent(0, 6, 0)], &AnalysisConfig::default());
    // seq 4 never arrives; 2 arrives after 3 (next expected 4); the second 2 is a duplicate.
    assert_eq!(
        s.packets,
        PacketCounts {
            sent: 6,
            received: 5,
            lost: 1,
            reordered: 1,
            duplicated: 1
        }
    );
    assert_near(s.loss_ratio, 1.0 / 6.0, 1e-15);
    // Latency of the first copy of seq 2 (arrival k = 3) is 53, not 54.
    // First-copy latencies: 50, 51, 52 (seq 3), 53 (seq 2), 55 (seq 5).
    assert_eq!(s.latency_ns.max, Some(55));
    assert_eq!(
        s.latency_ns.mean,
        Some((50 + 51 + 52 + 53 + 55) as f64 / 5.0)
    );
    // IPDV pairs (consecutive seqs both received): (0,1) 1, (1,2) 2, (2,3) 1 -> sorted 1 1 2.
    assert_eq!(s.jitter_ns.ipdv_p50, Some(1));
    assert_eq!(s.jitter_ns.ipdv_p99, Some(2));
}

/// Warm-up seqs are excluded from every figure; flows are separate.
#[test]
fn warmup_and_two_flows() {
    let recs = vec![
        r(0, 0, 0, 1_000_000), // warm-up, huge latency: must not count
        r(0, 1, 0, 1_000_000), // warm-up
        r(1, 0, 0, 10),
        r(0, 2, 100, 110),
        r(1, 1, 100, 110),
        r(0, 4, 200, 210),
        r(0, 0, 0, 1_000_000), // a late warm-up copy: ignored, not a duplicate
        r(1, 0, 0, 10),        // duplicate of flow 1 seq 0
    ];
    let s = analyze(
        &recs,
        &[sent(0, 5, 2), sent(1, 3, 0)],
        &AnalysisConfig {
            anomalies: vec![spec(1, 0)],
            ..AnalysisConfig::default()
        },
    );
    // Flow 0 measures seqs 2,3,4 (got 2,4); flow 1 measures 0,1,2 (got 0,1).
    assert_eq!(
        s.packets,
        PacketCounts {
            sent: 6,
            received: 4,
            lost: 2,
            reordered: 0,
            duplicated: 1
        }
    );
    assert_eq!(s.latency_ns.max, Some(10));
    // Runs with L >= 0 per flow in seq order: flow 0 {2} {4} (gap at 3), flow 1 {0,1}.
    let a = s.anomalies[0];
    assert_eq!((a.count, a.packets, a.longest), (3, 4, 2));
}

/// Anomaly runs at the start, middle and end, broken by loss and by low latency.
#[test]
fn anomaly_runs_start_middle_end_and_loss() {
    // seq:   0  1  2  3  4  5  6  7  8  9 10 11 12 13 14
    // L:     9  9  9  1  9  9  -  9  9  1  1  9  9  9  9     (- = lost, t = 5)
    // runs:  [0..2]=3, [4,5]=2 (broken by loss of 6), [7,8]=2, [11..14]=4 (open at end)
    let lat: [Option<u64>; 15] = [
        Some(9),
        Some(9),
        Some(9),
        Some(1),
        Some(9),
        Some(9),
        None,
        Some(9),
        Some(9),
        Some(1),
        Some(1),
        Some(9),
        Some(9),
        Some(9),
        Some(9),
    ];
    let recs: Vec<Record> = lat
        .iter()
        .enumerate()
        .filter_map(|(i, l)| l.map(|l| r(0, i as u64, 100 * i as u64, 100 * i as u64 + l)))
        .collect();
    let cfg = AnalysisConfig {
        anomalies: vec![
            spec(1, 5),
            spec(2, 5),
            spec(3, 5),
            spec(4, 5),
            spec(5, 5),
            spec(1, 9),
            spec(1, 10),
        ],
        ..AnalysisConfig::default()
    };
    let s = analyze(&recs, &[sent(0, 15, 0)], &cfg);
    let got: Vec<(u64, u64, u64)> = s
        .anomalies
        .iter()
        .map(|a| (a.count, a.packets, a.longest))
        .collect();
    assert_eq!(
        got,
        vec![
            (4, 11, 4), // n=1: 3 + 2 + 2 + 4
            (4, 11, 4), // n=2: all four
            (2, 7, 4),  // n=3: start run (3) and end run (4)
            (1, 4, 4),  // n=4: end run only
            (0, 0, 0),  // n=5
            (4, 11, 4), // t = 9 is inclusive (>=)
            (0, 0, 0),  // t = 10: nothing
        ]
    );
    // Reordering must not change the anomaly answer: runs are in sequence order.
    let mut shuffled = recs.clone();
    shuffled.reverse();
    let s2 = analyze(&shuffled, &[sent(0, 15, 0)], &cfg);
    assert_eq!(s2.anomalies, s.anomalies);
    assert_eq!(s2.packets.reordered, 13); // every arrival after the first is below seq 14
}

#[test]
fn nothing_received_gives_nulls_not_nan() {
    let cfg = AnalysisConfig {
        anomalies: vec![spec(2, 250_000)],
        ..AnalysisConfig::default()
    };
    let s = analyze(&[], &[sent(0, 100, 10)], &cfg);
    assert_eq!(s.packets.sent, 90);
    assert_eq!(s.packets.lost, 90);
    assert_eq!(s.loss_ratio, 1.0);
    assert_eq!(s.latency_ns, LatencyStats::default());
    assert_eq!(s.jitter_ns, JitterStats::default());
    assert_eq!(s.rate.rx_pps, None);
    let json = s.to_json_pretty();
    assert!(!json.contains("NaN") && !json.contains("inf"), "{json}");
    let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert!(v["latency_ns"]["p99.9"].is_null());
    assert!(v["jitter_ns"]["rfc3550"].is_null());

    // Nothing sent at all: loss ratio 0, not NaN.
    let s = analyze(&[], &[], &cfg);
    assert_eq!(s.loss_ratio, 0.0);
    assert_eq!(s.packets, PacketCounts::default());
}

#[test]
fn negative_latency_is_kept_and_noted() {
    let recs = vec![r(0, 0, 1000, 900), r(0, 1, 2000, 2100)];
    let s = analyze(&recs, &[sent(0, 2, 0)], &AnalysisConfig::default());
    assert_eq!(s.latency_ns.min, Some(-100));
    assert_eq!(s.latency_ns.mean, Some(0.0));
    assert!(
        s.notes.iter().any(|n| n.contains("negative latency")),
        "{:?}",
        s.notes
    );
}

#[test]
fn flow_without_sent_count_is_noted() {
    let recs = vec![r(3, 0, 0, 5), r(3, 4, 0, 5)];
    let s = analyze(&recs, &[], &AnalysisConfig::default());
    assert_eq!(
        (s.packets.sent, s.packets.received, s.packets.lost),
        (5, 2, 3)
    );
    assert!(s
        .notes
        .iter()
        .any(|n| n.contains("flow 3") && n.contains("highest seq + 1")));
}

/// Every key of DESIGN §3.4, plus the additions.
#[test]
fn summary_json_has_every_design_key() {
    let recs = vec![r(0, 0, 0, 10), r(0, 1, 100, 130)];
    let cfg = AnalysisConfig {
        anomalies: vec![spec(2, 250_000)],
        ..AnalysisConfig::default()
    };
    let mut s = analyze(&recs, &[sent(0, 2, 0)], &cfg);
    s.interrupted = true;
    let v: serde_json::Value = serde_json::from_str(&s.to_json_pretty()).expect("valid JSON");
    let paths: &[&[&str]] = &[
        &["packets", "sent"],
        &["packets", "received"],
        &["packets", "lost"],
        &["packets", "reordered"],
        &["packets", "duplicated"],
        &["loss_ratio"],
        &["rate", "offered_pps"],
        &["rate", "tx_pps"],
        &["rate", "rx_pps"],
        &["latency_ns", "min"],
        &["latency_ns", "mean"],
        &["latency_ns", "stdev"],
        &["latency_ns", "p50"],
        &["latency_ns", "p90"],
        &["latency_ns", "p99"],
        &["latency_ns", "p99.9"],
        &["latency_ns", "p99.99"],
        &["latency_ns", "p99.999"],
        &["latency_ns", "max"],
        &["jitter_ns", "rfc3550"],
        &["jitter_ns", "ipdv_p50"],
        &["jitter_ns", "ipdv_p99"],
        &["clock", "source"],
        &["clock", "resolution_ns"],
        &["percentiles", "method"],
        &["percentiles", "definition"],
        &["interrupted"],
        &["notes"],
    ];
    for path in paths {
        let mut cur = &v;
        for key in *path {
            cur = cur
                .get(key)
                .unwrap_or_else(|| panic!("summary JSON lacks {}", path.join(".")));
        }
    }
    let a = &v["anomalies"][0];
    for key in ["n", "t_ns", "count", "packets", "longest"] {
        assert!(a.get(key).is_some(), "anomalies[0] lacks {key}");
    }
    assert_eq!(a["t_ns"], 250_000);
    assert_eq!(v["percentiles"]["method"], "exact");
    assert_eq!(v["interrupted"], true);
    assert_eq!(v["latency_ns"]["p99.9"], 30);
    // The JSON reads back into the same Summary.
    let back: Summary = serde_json::from_value(v).expect("deserialize");
    assert_eq!(back, s);
}

/// A relative threshold `p50*3` over latencies 1..=100 000 ns: exact mode resolves p50 to
/// 50 000 exactly and says nothing; with the HDR histogram (exact limit 1 000, 2 digits)
/// the base is a bucket's upper end, and the summary says which bucket.
#[test]
fn a_percentile_base_from_the_hdr_histogram_is_noted() {
    let recs: Vec<Record> = (1..=100_000u64)
        .map(|l| r(0, l - 1, 10_000 * l, 10_000 * l + l))
        .collect();
    let cfg = AnalysisConfig {
        anomalies: vec!["1:p50*3".parse().unwrap()],
        ..AnalysisConfig::default()
    };
    let exact = analyze(&recs, &[sent(0, 100_000, 0)], &cfg);
    assert!(
        !exact.notes.iter().any(|n| n.contains("percentile base")),
        "{:?}",
        exact.notes
    );
    let hdr = Options {
        exact_limit: 1_000,
        hdr_digits: 2,
        ..Options::default()
    };
    let s = analyze_with(&recs, &[sent(0, 100_000, 0)], &cfg, &hdr).summary;
    let note = s
        .notes
        .iter()
        .find(|n| n.contains("percentile base"))
        .unwrap_or_else(|| panic!("no note: {:?}", s.notes));
    // 2 digits: 256 sub-buckets, so values in 32 768..65 535 share buckets of 256 ns;
    // p50 = 50 000 lies in [195·256, 196·256 − 1] = [49 920, 50 175].
    assert!(note.contains("p50 in [49920, 50175] ns"), "{note}");
}
