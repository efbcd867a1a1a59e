//! The statistics added with the streaming engine, against hand-computed
//! answers and independent reference implementations.

use nflab_analyze::crossrun::{bootstrap_mean_ci, evaluate_sla, mean_t_ci, parse_sla};
use nflab_analyze::*;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn rec(seq: u64, tx_ns: u64, lat: u64) -> Record {
    Record {
        seq,
        flow: 0,
        tx_ns,
        rx_ns: tx_ns + lat,
        wire_len: 64,
        flags: 0,
    }
}

/// Packets `seq` with tx = 1000·seq and the given latency; `None` = lost.
fn trace(lats: &[Option<u64>]) -> (Vec<Record>, Vec<FlowSent>) {
    let records = lats
        .iter()
        .enumerate()
        .filter_map(|(i, l)| l.map(|l| rec(i as u64, 1000 * i as u64, l)))
        .collect();
    let sent = vec![FlowSent {
        flow: 0,
        sent: lats.len() as u64,
        warmup: 0,
    }];
    (records, sent)
}

fn run(lats: &[Option<u64>], specs: &[&str], opts: &Options) -> Summary {
    let (r, s) = trace(lats);
    let cfg = AnalysisConfig {
        anomalies: specs.iter().map(|x| x.parse().expect(x)).collect(),
        ..AnalysisConfig::default()
    };
    analyze_with(&r, &s, &cfg, opts).summary
}

fn exact() -> Options {
    Options {
        exact_limit: u64::MAX,
        ..Options::default()
    }
}

#[test]
fn jitter_definitions_by_hand() {
    let l = [100, 300, 200, 600, 600, 100].map(Some);
    let s = run(&l, &[], &exact());
    let j = s.jitter_ns;
    // IPDV = L_i − L_{i−1}: 200, −100, 400, 0, −500
    assert_eq!((j.ipdv_min, j.ipdv_max), (Some(-500), Some(400)));
    assert_eq!(j.ipdv_mean, Some(0.0));
    // |IPDV| sorted 0,100,200,400,500: p50 = rank 3 = 200, p99 = rank 5 = 500
    assert_eq!((j.ipdv_p50, j.ipdv_p99), (Some(200), Some(500)));
    // PDV = L − min(L) = L − 100; sorted L 100,100,200,300,600,600
    assert_eq!(
        (j.pdv_p50, j.pdv_p99, j.pdv_max),
        (Some(100), Some(500), Some(500))
    );
    // |L_i − L_{i−1}| in arrival order: mean 240, max 500
    assert_eq!(j.consecutive_mean, Some(240.0));
    assert_eq!(j.consecutive_max, Some(500));
    let mut jj = 0.0f64;
    for d in [200.0, 100.0, 400.0, 0.0, 500.0] {
        jj += (d - jj) / 16.0;
    }
    assert!((j.rfc3550.unwrap() - jj).abs() < 1e-12);
    // A lost packet removes the IPDV pairs around it but not the |ΔL| of arrivals.
    let s = run(
        &[Some(100), Some(300), None, Some(600), Some(600)],
        &[],
        &exact(),
    );
    assert_eq!(
        (s.jitter_ns.ipdv_min, s.jitter_ns.ipdv_max),
        (Some(0), Some(200))
    );
    assert_eq!(s.jitter_ns.consecutive_max, Some(300));
}

#[test]
fn anomaly_edges_ge_gt_end_of_file() {
    // 250 exactly: counts with >=, not with >. The run at the end counts.
    let l = [10, 250, 250, 10, 300, 300].map(Some);
    let s = run(&l, &["2:250ns", "2:250ns:gt"], &exact());
    assert_eq!((s.anomalies[0].count, s.anomalies[0].packets), (2, 4));
    assert_eq!((s.anomalies[1].count, s.anomalies[1].packets), (1, 2));
    let e = s.anomaly_details[1].events[0];
    assert_eq!((e.start_seq, e.start_tx_ns, e.packets), (4, Some(4000), 2));
    assert_eq!(
        (e.duration_ns, e.peak_ns, e.peak_tx_ns),
        (1000, Some(300), Some(4000))
    );
}

#[test]
fn anomaly_lost_packet_modes() {
    // seqs 2,3 and 5,6 high, 4 lost.
    let h = Some(500);
    let lo = Some(10);
    let l = [lo, lo, h, h, None, h, h, lo, lo, lo];
    let s = run(
        &l,
        &[
            "2:100ns",
            "2:100ns:lost=inf",
            "2:100ns:lost=skip",
            "5:100ns:lost=inf",
        ],
        &exact(),
    );
    let a: Vec<(u64, u64, u64)> = s
        .anomalies
        .iter()
        .map(|a| (a.count, a.packets, a.longest))
        .collect();
    assert_eq!(a, vec![(2, 4, 2), (1, 5, 5), (1, 4, 4), (1, 5, 5)]);
    assert_eq!(s.anomaly_details[1].lost_packets, 1);
    let e = s.anomaly_details[1].events[0];
    assert_eq!(
        (e.start_seq, e.lost, e.duration_ns, e.peak_ns),
        (2, 1, 4000, Some(500))
    );
    // Trailing losses with lost=inf extend the last run to the sent count.
    let s = run(
        &[lo, h, None, None],
        &["3:100ns:lost=inf", "3:100ns"],
        &exact(),
    );
    assert_eq!((s.anomalies[0].count, s.anomalies[0].packets), (1, 3));
    assert_eq!(s.anomalies[1].count, 0);
}

#[test]
fn anomaly_relative_thresholds() {
    let l = [10, 10, 10, 10, 10, 10, 50, 50, 10, 30].map(Some);
    // p50 = 10: p50*2 = 20 → runs {6,7} and {9}; n=2 → 1 anomaly.
    // min+30 = 40 → {6,7}; mean = 20 → mean*1 = 20 like p50*2.
    let s = run(
        &l,
        &["2:p50*2", "1:p50*2", "1:min+30ns", "1:mean"],
        &exact(),
    );
    let got: Vec<(u64, u64)> = s.anomalies.iter().map(|a| (a.t_ns, a.count)).collect();
    assert_eq!(got, vec![(20, 1), (20, 2), (40, 1), (20, 2)]);
    assert_eq!(s.anomaly_details[0].spec, "2:p50*2");
}

#[test]
fn anomaly_rates_and_inter_anomaly_times() {
    // One packet per 10 min for 6 hours (36 + 1 packets): anomalies at
    // seq 3, 9 and 30 (n = 1).
    let mut l = vec![Some(10u64); 37];
    for i in [3, 9, 30] {
        l[i] = Some(1_000);
    }
    let records: Vec<Record> = l
        .iter()
        .enumerate()
        .map(|(i, x)| rec(i as u64, 600_000_000_000 * i as u64, x.unwrap_or(0)))
        .collect();
    let sent = [FlowSent {
        flow: 0,
        sent: 37,
        warmup: 0,
    }];
    let cfg = AnalysisConfig {
        anomalies: vec!["1:100ns".parse().unwrap()],
        ..AnalysisConfig::default()
    };
    let s = analyze_with(&records, &sent, &cfg, &exact()).summary;
    let d = &s.anomaly_details[0];
    assert_eq!(d.count, 3);
    assert!(
        (d.per_hour.unwrap() - 0.5).abs() < 1e-12,
        "{:?}",
        d.per_hour
    );
    assert_eq!(d.hourly, vec![1, 1, 0, 0, 0, 1]);
    let gap = 600_000_000_000i64;
    assert_eq!(
        (d.inter_anomaly_ns.min, d.inter_anomaly_ns.max),
        (Some(6 * gap), Some(21 * gap))
    );
    assert_eq!(d.inter_anomaly_ns.mean, Some(13.5 * gap as f64));
}

/// Seed 001's algorithm, transcribed from `data-postprocessor` validate mode
/// (>=, consecutive records, the run open at the end is dropped).
fn seed001(lats: &[i64], n: usize, t: i64) -> Vec<(usize, usize, i64)> {
    let mut out = Vec::new();
    let mut buf: Vec<(usize, i64)> = Vec::new();
    for (i, &l) in lats.iter().enumerate() {
        if l >= t {
            buf.push((i, l));
            continue;
        }
        if buf.is_empty() {
            continue;
        }
        if buf.len() >= n {
            out.push((buf[0].0, buf.len(), buf.iter().map(|x| x.1).max().unwrap()));
        }
        buf.clear();
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Our anomaly events equal seed 001's on traces without losses, except
    /// that we also count the run still open at the end.
    #[test]
    fn anomalies_match_seed001(seed in any::<u64>(), n in 1usize..4) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let len = rng.gen_range(0..400usize);
        let lats: Vec<i64> = (0..len)
            .map(|_| if rng.gen_bool(0.3) { rng.gen_range(240..400) } else { rng.gen_range(0..260) })
            .collect();
        let l: Vec<Option<u64>> = lats.iter().map(|&x| Some(x as u64)).collect();
        let spec = format!("{n}:250ns");
        let s = run(&l, &[&spec, &format!("{spec}:lost=skip")], &Options { anomaly_events: 10_000, ..exact() });
        let ours: Vec<(usize, usize, i64)> = s.anomaly_details[0]
            .events
            .iter()
            .map(|e| (e.start_seq as usize, e.packets as usize, e.peak_ns.unwrap()))
            .collect();
        let mut want = seed001(&lats, n, 250);
        let tail = lats.iter().rev().take_while(|&&x| x >= 250).count();
        if tail >= n {
            want.push((len - tail, tail, *lats[len - tail..].iter().max().unwrap()));
        }
        prop_assert_eq!(&ours, &want);
        prop_assert_eq!(s.anomalies[0], s.anomalies[1]);
    }

    /// HDR percentiles bracket the exact nearest-rank value within the
    /// relative bound; min, max, mean and stdev stay exact.
    #[test]
    fn hdr_brackets_exact(seed in any::<u64>(), digits in 2u8..4, limit in prop::sample::select(vec![0u64, 50])) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let l: Vec<Option<u64>> = (0..rng.gen_range(1..2000))
            .map(|_| Some(10u64.pow(rng.gen_range(1..7)) + rng.gen_range(0..1_000_000)))
            .collect();
        let pcts = ["25", "75", "99.95"].map(|p| Pct::parse(p).unwrap()).to_vec();
        let ex = run(&l, &[], &Options { percentiles: pcts.clone(), ..exact() });
        let hd = run(&l, &[], &Options { percentiles: pcts, exact_limit: limit, hdr_digits: digits, ..Options::default() });
        prop_assert_eq!(hd.percentiles.method.as_str(), if l.len() as u64 > limit { "hdr" } else { "exact" });
        prop_assert_eq!((ex.latency_ns.min, ex.latency_ns.max), (hd.latency_ns.min, hd.latency_ns.max));
        prop_assert_eq!(ex.latency_ns.mean, hd.latency_ns.mean);
        prop_assert_eq!(ex.latency_ns.stdev, hd.latency_ns.stdev);
        let bound = 10f64.powi(-i32::from(digits));
        for (e, h) in ex.latency_quantiles.iter().zip(&hd.latency_quantiles) {
            prop_assert_eq!(e.p, h.p);
            prop_assert!(h.lower_ns <= e.ns && e.ns <= h.ns, "{:?} vs {:?}", e, h);
            prop_assert!((h.ns - h.lower_ns) as f64 <= bound * h.ns as f64, "{:?}", h);
        }
    }
}

#[test]
fn stdev_is_exact_for_large_offsets() {
    // Values near 10^15 with spread 1: naive sum-of-squares (seed 001) fails here.
    let base = 1_000_000_000_000_000u64;
    let l: Vec<Option<u64>> = (0..1000).map(|i| Some(base + (i % 2))).collect();
    let s = run(&l, &[], &Options::default());
    assert_eq!(s.latency_ns.stdev, Some(0.5));
    assert_eq!(s.latency_ns.mean, Some(base as f64 + 0.5));
}

#[test]
fn loss_bursts_and_deadline() {
    let mut l: Vec<Option<u64>> = vec![Some(100); 20];
    for i in [3, 4, 5, 10, 18, 19] {
        l[i] = None;
    }
    l[0] = Some(5_000);
    let s = run(
        &l,
        &[],
        &Options {
            deadline_ns: Some(1_000),
            ..exact()
        },
    );
    let loss = s.loss.unwrap();
    assert_eq!(
        (loss.bursts, loss.burst_max, loss.burst_mean),
        (3, Some(3), Some(2.0))
    );
    assert_eq!(loss.burst_lengths, vec![(1, 1), (2, 1), (3, 1)]);
    assert_eq!(loss.late, Some(1));
    assert_eq!(loss.loss_ratio_with_deadline, Some(7.0 / 20.0));
    assert_eq!(s.packets.lost, 6);
}

#[test]
fn reordering_extent_rfc4737() {
    // RFC 4737 §4.2.2 style: arrivals 0 1 2 5 3 4 6 → 3 arrives at position 5,
    // the first packet with a higher seq (5) at position 4: extent 1; 4 at
    // position 6: extent 2.
    let records: Vec<Record> = [0u64, 1, 2, 5, 3, 4, 6]
        .iter()
        .map(|&q| rec(q, 1000 * q, 10))
        .collect();
    let sent = [FlowSent {
        flow: 0,
        sent: 7,
        warmup: 0,
    }];
    let s = analyze_with(&records, &sent, &AnalysisConfig::default(), &exact()).summary;
    let r = s.reorder.unwrap();
    assert_eq!(s.packets.reordered, 2);
    assert_eq!((r.extent_max, r.extent_mean), (Some(2), Some(1.5)));
    assert!((r.ratio - 2.0 / 7.0).abs() < 1e-15);
    // IPDV is taken in sequence order, regardless of arrival order.
    assert_eq!(s.jitter_ns.ipdv_max, Some(0));
}

#[test]
fn beyond_reorder_window_counts_as_lost() {
    // Window 4: seq 0 arriving after seq 9 is too late.
    let records: Vec<Record> = [1u64, 2, 3, 4, 5, 6, 7, 8, 9, 0]
        .iter()
        .map(|&q| rec(q, 1000 * q, 10))
        .collect();
    let sent = [FlowSent {
        flow: 0,
        sent: 10,
        warmup: 0,
    }];
    let o = Options {
        reorder_window: 4,
        ..exact()
    };
    let s = analyze_with(&records, &sent, &AnalysisConfig::default(), &o).summary;
    assert_eq!((s.packets.received, s.packets.lost), (9, 1));
    assert_eq!(s.reorder.unwrap().beyond_window, 1);
}

#[test]
fn windows_and_trim() {
    // tx = 1000·seq; windows of 5000 ns: seqs 0-4, 5-9, 10-11.
    let mut l: Vec<Option<u64>> = (0..12).map(|i| Some(100 + i)).collect();
    l[6] = None;
    l[7] = None;
    let s = run(
        &l,
        &[],
        &Options {
            window_ns: Some(5000),
            ..exact()
        },
    );
    let w: Vec<(u64, u64, Option<i64>, Option<i64>)> = s
        .windows
        .iter()
        .map(|w| (w.packets, w.lost, w.p50_ns, w.max_ns))
        .collect();
    assert_eq!(
        w,
        vec![
            (5, 0, Some(102), Some(104)),
            (3, 2, Some(108), Some(109)),
            (2, 0, Some(110), Some(111))
        ]
    );
    // Trim 2500 ns at the start and 3000 at the end: tx in [2500, 8000] → seqs 3..=8.
    let s = run(
        &l,
        &[],
        &Options {
            trim_start_ns: 2500,
            trim_end_ns: 3000,
            ..exact()
        },
    );
    assert_eq!(
        (s.packets.sent, s.packets.received, s.packets.lost),
        (6, 4, 2)
    );
    assert_eq!((s.latency_ns.min, s.latency_ns.max), (Some(103), Some(108)));
}

#[test]
fn worst_packets_with_their_time() {
    let l: Vec<Option<u64>> = [5, 9, 1, 7, 9, 3].iter().map(|&x| Some(x)).collect();
    let s = run(
        &l,
        &[],
        &Options {
            worst_n: 3,
            ..exact()
        },
    );
    let w: Vec<(u64, i64)> = s.worst.iter().map(|w| (w.tx_ns, w.latency_ns)).collect();
    assert_eq!(w, vec![(1000, 9), (4000, 9), (3000, 7)]);
}

#[test]
fn extra_percentiles_and_bad_percentile() {
    let l: Vec<Option<u64>> = (1..=1000).map(Some).collect();
    let o = Options {
        percentiles: vec![Pct::parse("12.5").unwrap(), Pct::parse("99.95").unwrap()],
        ..exact()
    };
    let s = run(&l, &[], &o);
    let q: Vec<(f64, i64)> = s
        .latency_quantiles
        .iter()
        .skip(6)
        .map(|q| (q.p, q.ns))
        .collect();
    assert_eq!(q, vec![(12.5, 125), (99.95, 1000)]);
    for bad in ["0", "100.0001", "-5", "p", "nan"] {
        assert!(Pct::parse(bad).is_none(), "{bad}");
    }
}

#[test]
fn sla_verdicts_and_errors() {
    let l: Vec<Option<u64>> = (1..=1000).map(|i| Some(i * 1000)).collect();
    let mut l2 = l.clone();
    l2[5] = None;
    let s = run(&l2, &["2:900us"], &exact());
    let c = parse_sla("p99<=1ms, loss<=1e-2, max<1ms, anomalies>=1").unwrap();
    let v = evaluate_sla(&c, &s);
    let pass: Vec<bool> = v.iter().map(|v| v.pass).collect();
    assert_eq!(pass, vec![true, true, false, true]);
    for bad in ["p99<=", "p101<=1ms", "loss~1", "wat<=1", "p99<=5parsecs"] {
        let e = parse_sla(bad).expect_err(bad).to_string();
        assert!(e.contains(&format!("{bad:?}")), "{e}");
    }
}

#[test]
fn confidence_intervals() {
    let v = [1.0, 2.0, 3.0, 4.0, 5.0];
    let ci = mean_t_ci(&v, 0.95).unwrap();
    // t(0.975, 4) = 2.7764, s = sqrt(2.5)
    let half = 2.776_445 * (2.5f64).sqrt() / 5f64.sqrt();
    assert!((ci.mean - 3.0).abs() < 1e-12);
    assert!((ci.hi - 3.0 - half).abs() < 1e-4, "{ci:?}");
    let b = bootstrap_mean_ci(&v, 0.95, 2000, 7).unwrap();
    assert!(
        b.lo >= 1.0 && b.lo < 3.0 && b.hi > 3.0 && b.hi <= 5.0,
        "{b:?}"
    );
    assert_eq!(b, bootstrap_mean_ci(&v, 0.95, 2000, 7).unwrap());
    assert!(mean_t_ci(&[1.0], 0.95).is_none());
}

#[test]
fn series_slices_and_tx_gaps_by_hand() {
    // tx = 1000·seq; slices of 2500 ns hold seqs {0,1,2}, {3,4}, {5,6,7}, ...
    let l = [
        Some(5),
        Some(9),
        Some(1),
        None,
        Some(7),
        Some(2),
        Some(8),
        Some(4),
    ];
    let (r, s) = trace(&l);
    let opts = Options {
        series_ns: Some(2500),
        tx_gaps: true,
        ..exact()
    };
    let mut a = analyze_with(&r, &s, &AnalysisConfig::default(), &opts);
    let got: Vec<(u64, i64, i64)> = a
        .series
        .iter()
        .map(|x| (x.start_ns, x.min_ns, x.max_ns))
        .collect();
    // Slice 1 (2500..5000) holds seq 4 only (seq 3 lost).
    assert_eq!(got, vec![(0, 1, 9), (2500, 7, 7), (5000, 2, 8)]);
    // Gaps between consecutive received seqs: 0-1, 1-2, 4-5, 5-6, 6-7 (the
    // pair around the lost seq 3 is left out), each 1000 ns.
    let g = a.tx_gap.as_mut().expect("tx gaps kept");
    assert_eq!(g.count(), 5);
    assert_eq!(g.value_counts(), vec![(1000, 5)]);
    // Not asked for: nothing kept.
    let b = analyze_with(&r, &s, &AnalysisConfig::default(), &exact());
    assert!(b.series.is_empty() && b.tx_gap.is_none());
}

#[test]
fn merged_distributions_equal_one_recorded_whole() {
    let a: Vec<i64> = (0..500).map(|i| (i * 7919) % 1000 - 100).collect();
    let b: Vec<i64> = (0..700).map(|i| (i * 104_729) % 5000).collect();
    for (limit_a, limit_b) in [
        (u64::MAX, u64::MAX),
        (1000, u64::MAX),
        (0, 0),
        (u64::MAX, 0),
    ] {
        let mut whole = Distribution::new(limit_a.min(limit_b), 3);
        let (mut da, mut db) = (Distribution::new(limit_a, 3), Distribution::new(limit_b, 3));
        a.iter().for_each(|&v| {
            da.record(v);
            whole.record(v);
        });
        b.iter().for_each(|&v| {
            db.record(v);
            whole.record(v);
        });
        da.merge(&db);
        assert_eq!(da.count(), 1200);
        assert_eq!((da.min(), da.max()), (whole.min(), whole.max()));
        assert_eq!(da.mean(), whole.mean());
        let ranks = [1, 2, 600, 1188, 1200];
        let qa: Vec<i64> = da.values_at_ranks(&ranks).iter().map(|q| q.value).collect();
        let qw: Vec<i64> = whole
            .values_at_ranks(&ranks)
            .iter()
            .map(|q| q.value)
            .collect();
        assert_eq!(qa, qw, "limits {limit_a} {limit_b}");
    }
}

/// The live rule a capture trigger uses fires once per anomaly the engine's
/// pass counts, for every lost-packet mode, on random traces with losses.
#[test]
fn live_runs_fire_once_per_anomaly_the_engine_counts() {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    for mode in [LostMode::Break, LostMode::Inf, LostMode::Skip] {
        for _ in 0..50 {
            let lats: Vec<Option<u64>> = (0..300)
                .map(|_| match rng.gen_range(0..10) {
                    0 => None,
                    1..=4 => Some(300),
                    _ => Some(100),
                })
                .collect();
            let spec = AnomalySpec {
                lost: mode,
                ..AnomalySpec::new(2, 250)
            };
            let (records, sent) = trace(&lats);
            let cfg = AnalysisConfig {
                anomalies: vec![spec],
                ..AnalysisConfig::default()
            };
            let want = analyze(&records, &sent, &cfg).anomalies[0].count;
            let (mut live, mut fired, mut missing) = (LiveRun::default(), 0, 0u64);
            for l in &lats {
                match l {
                    None => missing += 1,
                    Some(l) => {
                        if missing > 0 && live.lost(&spec, missing) {
                            fired += 1;
                        }
                        missing = 0;
                        if live.observe(&spec, *l as i64) {
                            fired += 1;
                        }
                    }
                }
            }
            if missing > 0 && live.lost(&spec, missing) {
                fired += 1;
            }
            assert_eq!(fired, want, "{mode:?}: {lats:?}");
        }
    }
}
