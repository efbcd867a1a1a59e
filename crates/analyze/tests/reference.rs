//! `analyze` against naive, independently written reference computations on
//! random (seeded) traces, plus "never panics" on arbitrary input.

use std::collections::{HashMap, HashSet};

use nflab_analyze::*;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

struct Trace {
    records: Vec<Record>,
    sent: Vec<FlowSent>,
}

/// A random trace: 1..=3 flows, some loss, local reordering, optionally
/// duplicates, latencies mostly positive with occasional spikes.
fn random_trace(seed: u64, with_dups: bool) -> Trace {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let n_flows = rng.gen_range(1..=3u16);
    let mut sent = Vec::new();
    let mut arrivals: Vec<(f64, Record)> = Vec::new();
    for flow in 0..n_flows {
        let total = rng.gen_range(0..80u64);
        let warmup = rng.gen_range(0..5u64).min(total);
        sent.push(FlowSent {
            flow,
            sent: total,
            warmup,
        });
        let loss_p = rng.gen_range(0.0..0.3);
        for seq in 0..total {
            if rng.gen_bool(loss_p) {
                continue;
            }
            let tx = 1_000 * seq + u64::from(flow);
            let lat: i64 = if rng.gen_bool(0.2) {
                rng.gen_range(5_000..20_000)
            } else {
                rng.gen_range(-50..3_000)
            };
            let rx = (tx as i64 + 100_000 + lat) as u64;
            let rec = Record {
                seq,
                flow,
                tx_ns: tx + 100_000,
                rx_ns: rx,
                wire_len: 64,
                flags: 0,
            };
            // Arrival key: roughly tx order, with jitter that reorders neighbours.
            let key = seq as f64 + rng.gen_range(-2.5..2.5);
            arrivals.push((key, rec));
            if with_dups && rng.gen_bool(0.1) {
                arrivals.push((key + rng.gen_range(0.0..3.0), rec));
            }
        }
    }
    arrivals.sort_by(|a, b| a.0.total_cmp(&b.0));
    Trace {
        records: arrivals.into_iter().map(|(_, r)| r).collect(),
        sent,
    }
}

fn lat(r: &Record) -> i64 {
    r.rx_ns as i64 - r.tx_ns as i64
}

/// Smallest v among `values` with #{x <= v} · den >= num · N. O(N²).
fn ref_percentile(values: &[i64], num: u64, den: u64) -> Option<i64> {
    let n = values.len() as u64;
    let mut candidates: Vec<i64> = values.to_vec();
    candidates.sort();
    candidates.dedup();
    candidates.into_iter().find(|&v| {
        let le = values.iter().filter(|&&x| x <= v).count() as u64;
        le * den >= num * n
    })
}

struct Reference {
    counts: PacketCounts,
    lats: Vec<i64>,
    rfc3550: Option<f64>,
    ipdv: Vec<i64>,
    anomalies: Vec<(u64, u64, u64)>,
}

fn reference(t: &Trace, specs: &[AnomalySpec]) -> Reference {
    let warm: HashMap<u16, u64> = t.sent.iter().map(|f| (f.flow, f.warmup)).collect();
    let measured: Vec<&Record> = t
        .records
        .iter()
        .filter(|r| r.seq >= warm[&r.flow])
        .collect();
    // First copies, by arrival index: a packet is a first copy if no earlier
    // arrival has the same (flow, seq).
    let mut firsts: Vec<&Record> = Vec::new();
    let mut reordered = 0;
    for (k, r) in measured.iter().enumerate() {
        let earlier = &measured[..k];
        if earlier.iter().any(|e| e.flow == r.flow && e.seq == r.seq) {
            continue;
        }
        if earlier.iter().any(|e| e.flow == r.flow && e.seq > r.seq) {
            reordered += 1;
        }
        firsts.push(r);
    }
    let sent_measured: u64 = t.sent.iter().map(|f| f.sent - f.warmup).sum();
    let received = firsts.len() as u64;
    let counts = PacketCounts {
        sent: sent_measured,
        received,
        lost: sent_measured - received,
        reordered,
        duplicated: measured.len() as u64 - received,
    };
    let lats: Vec<i64> = firsts.iter().map(|r| lat(r)).collect();

    // RFC 3550 directly from the timestamps.
    let rfc3550 = (firsts.len() >= 2).then(|| {
        let mut j = 0.0f64;
        for k in 1..firsts.len() {
            let (i, jj) = (firsts[k - 1], firsts[k]);
            let d = (jj.rx_ns as f64 - i.rx_ns as f64) - (jj.tx_ns as f64 - i.tx_ns as f64);
            j += (d.abs() - j) / 16.0;
        }
        j
    });

    let by_key: HashMap<(u16, u64), i64> =
        firsts.iter().map(|r| ((r.flow, r.seq), lat(r))).collect();
    let ipdv: Vec<i64> = by_key
        .iter()
        .filter_map(|(&(f, s), &l)| {
            let prev = s.checked_sub(1)?;
            by_key.get(&(f, prev)).map(|&lp| (l - lp).abs())
        })
        .collect();

    // Anomalies: find run starts, then walk forward.
    let anomalies = specs
        .iter()
        .map(|sp| {
            let hot = |f: u16, s: u64| by_key.get(&(f, s)).is_some_and(|&l| l >= sp.t_ns as i64);
            let (mut count, mut packets, mut longest) = (0, 0, 0);
            for &(f, s) in by_key.keys() {
                let starts = hot(f, s) && (s == 0 || !hot(f, s - 1));
                if !starts {
                    continue;
                }
                let mut len = 0;
                while hot(f, s + len) {
                    len += 1;
                }
                if len >= u64::from(sp.n) {
                    count += 1;
                    packets += len;
                    longest = longest.max(len);
                }
            }
            (count, packets, longest)
        })
        .collect();
    Reference {
        counts,
        lats,
        rfc3550,
        ipdv,
        anomalies,
    }
}

fn check(seed: u64, with_dups: bool) {
    let t = random_trace(seed, with_dups);
    let specs = [
        AnomalySpec::new(1, 5_000),
        AnomalySpec::new(2, 5_000),
        AnomalySpec::new(3, 1_000),
        AnomalySpec::new(1, 0),
    ];
    let cfg = AnalysisConfig {
        anomalies: specs.to_vec(),
        ..AnalysisConfig::default()
    };
    let s = analyze(&t.records, &t.sent, &cfg);
    let r = reference(&t, &specs);
    assert_eq!(s.packets, r.counts, "seed {seed}");
    if !with_dups {
        assert_eq!(s.packets.duplicated, 0);
    }
    assert_eq!(
        s.packets.received + s.packets.lost,
        s.packets.sent,
        "seed {seed}"
    );

    let l = s.latency_ns;
    for (got, num, den) in [
        (l.p50, 50, 100),
        (l.p90, 90, 100),
        (l.p99, 99, 100),
        (l.p99_9, 999, 1000),
        (l.p99_99, 9999, 10000),
        (l.p99_999, 99999, 100000),
    ] {
        assert_eq!(
            got,
            ref_percentile(&r.lats, num, den),
            "seed {seed} p{num}/{den}"
        );
    }
    assert_eq!(l.min, r.lats.iter().copied().min());
    assert_eq!(l.max, r.lats.iter().copied().max());
    if r.lats.is_empty() {
        assert_eq!(l.mean, None);
        assert_eq!(l.stdev, None);
    } else {
        let n = r.lats.len() as f64;
        let mean = r.lats.iter().map(|&x| x as f64).sum::<f64>() / n;
        // Population variance as E[x²] - E[x]², a different formula.
        let var = r.lats.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>() / n - mean * mean;
        assert!((l.mean.expect("mean") - mean).abs() < 1e-6, "seed {seed}");
        assert!(
            (l.stdev.expect("stdev") - var.max(0.0).sqrt()).abs() < 1e-3,
            "seed {seed}"
        );
    }
    match (s.jitter_ns.rfc3550, r.rfc3550) {
        (Some(a), Some(b)) => assert!((a - b).abs() < 1e-6, "seed {seed}: {a} vs {b}"),
        (a, b) => assert_eq!(a, b, "seed {seed}"),
    }
    assert_eq!(
        s.jitter_ns.ipdv_p50.map(|v| v as i64),
        ref_percentile(&r.ipdv, 50, 100),
        "seed {seed}"
    );
    assert_eq!(
        s.jitter_ns.ipdv_p99.map(|v| v as i64),
        ref_percentile(&r.ipdv, 99, 100),
        "seed {seed}"
    );
    let got: Vec<(u64, u64, u64)> = s
        .anomalies
        .iter()
        .map(|a| (a.count, a.packets, a.longest))
        .collect();
    assert_eq!(got, r.anomalies, "seed {seed}");
    if let Some(pps) = s.rate.rx_pps {
        assert!(pps.is_finite() && pps > 0.0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn matches_reference_without_duplicates(seed in any::<u64>()) {
        check(seed, false);
    }

    #[test]
    fn matches_reference_with_duplicates(seed in any::<u64>()) {
        check(seed, true);
    }

    /// Arbitrary records and sent counts: never panics, JSON always valid
    /// and free of NaN / infinity.
    #[test]
    fn never_panics_on_arbitrary_input(
        recs in prop::collection::vec(
            (0u16..4, any::<u64>(), any::<u64>(), any::<u64>(), any::<bool>()),
            0..200,
        ),
        sent in prop::collection::vec((0u16..4, any::<u64>(), any::<u64>()), 0..5),
        n in 0u32..5,
        t_ns in any::<u64>(),
    ) {
        let records: Vec<Record> = recs
            .iter()
            .map(|&(flow, seq, tx, rx, small)| Record {
                seq: if small { seq % 16 } else { seq },
                flow,
                tx_ns: tx,
                rx_ns: if small { tx.wrapping_add(rx % 1000) } else { rx },
                wire_len: 0,
                flags: 0,
            })
            .collect();
        let sent: Vec<FlowSent> = sent
            .iter()
            .map(|&(flow, s, w)| FlowSent { flow, sent: s % 64, warmup: w % 8 })
            .collect();
        let cfg = AnalysisConfig {
            anomalies: vec![AnomalySpec::new(n, t_ns)],
            ..AnalysisConfig::default()
        };
        let s = analyze(&records, &sent, &cfg);
        let json = s.to_json_pretty();
        let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
        prop_assert!(v["loss_ratio"].is_number());
        prop_assert!(s.loss_ratio.is_finite() && (0.0..=1.0).contains(&s.loss_ratio));
        prop_assert!(s.packets.lost <= s.packets.sent);
        let distinct: HashSet<(u16, u64)> = records.iter().map(|r| (r.flow, r.seq)).collect();
        prop_assert!(s.packets.received <= distinct.len() as u64);
    }
}
