//! Simulator tests: closed forms (M/M/1, M/D/1), the interrupt-aliasing
//! pattern of seed 000, multi-core RSS, interrupt mode, drain timer, records.
//!
//! Statistical tolerances come from batch means: the run is cut into 20
//! consecutive batches, the standard error of the overall mean is the spread
//! of the batch means over √20, and a check fails when the simulated value is
//! more than 5 standard errors (plus the histogram's resolution where one is
//! used) from the closed form. Seeds are fixed, so the tests are repeatable;
//! a 5σ band makes a false alarm on a new seed improbable (< 1e-6), while a
//! model error of a few percent fails (the standard errors are ≈ 0.5–1 %).
//! `batch_means` is these tests' own oracle for the standard error, written
//! out independently of the metrics engine on purpose; the simulator's own
//! figures are the engine's (see `sojourn_statistics_are_the_engines`).
use super::*;
use crate::closed;

/// Mean and its batch-means standard error.
fn batch_means(x: &[f64]) -> (f64, f64) {
    let k = 20;
    let n = x.len() / k;
    let means: Vec<f64> = (0..k)
        .map(|b| x[b * n..(b + 1) * n].iter().sum::<f64>() / n as f64)
        .collect();
    let m = means.iter().sum::<f64>() / k as f64;
    let var = means.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (k - 1) as f64;
    (m, (var / k as f64).sqrt())
}

fn single_server(rate_pps: f64, service_ns: f64, dist: ServiceDist, seed: u64) -> SimConfig {
    SimConfig {
        arrivals: Arrivals::Poisson { rate_pps },
        packets: 400_000,
        warmup_packets: 2_000,
        queue_capacity: 1 << 20,
        batch: 1,
        service: Service {
            mean: ServiceMean::Linear {
                fixed_ns: 0.0,
                per_packet_ns: service_ns,
            },
            dist,
        },
        seed,
        keep_packets: true,
        ..SimConfig::default()
    }
}

fn sojourns(out: &SimOutput, warmup: u64) -> Vec<f64> {
    out.delivered
        .iter()
        .filter(|d| d.seq >= warmup)
        .map(|d| (d.rx_ns - d.tx_ns) as f64)
        .collect()
}

#[test]
fn mm1_mean_and_distribution() {
    for (rho, seed) in [(0.5, 11), (0.8, 12)] {
        let cfg = single_server(rho * 1e6, 1000.0, ServiceDist::Exponential, seed);
        let out = simulate(&cfg).unwrap();
        let t = sojourns(&out, cfg.warmup_packets);
        let want = closed::mm1(rho * 1e6, 1000.0).unwrap();
        let (m, se) = batch_means(&t);
        assert!(
            (m - want.mean_sojourn_ns).abs() < 5.0 * se,
            "ρ={rho}: {m} vs {} (se {se})",
            want.mean_sojourn_ns
        );
        assert!(se / m < 0.03, "the test must be sharp: se {se}");
        assert!(out.stats.dropped == 0);
        // Distribution: P(T > k·E[T]) = e^{−k}, checked at k = 0.5 … 4.
        for k in [0.5, 1.0, 2.0, 4.0] {
            let thr = k * want.mean_sojourn_ns;
            let ind: Vec<f64> = t.iter().map(|v| (*v > thr) as u8 as f64).collect();
            let (p, se) = batch_means(&ind);
            let exact = closed::mm1_sojourn_ccdf(rho * 1e6, 1000.0, thr).unwrap();
            assert!(
                (p - exact).abs() < 5.0 * se + 1e-4,
                "ρ={rho} k={k}: {p} vs {exact} (se {se})"
            );
        }
        // The engine's mean is exact, its quantiles exact nearest rank.
        assert!((out.stats.mean_sojourn_ns - m).abs() < 1e-6 * m);
        let p50 = out.stats.sojourn_quantiles_ns[0];
        let exact_p50 = want.mean_sojourn_ns * std::f64::consts::LN_2;
        assert!(
            (p50 - exact_p50).abs() / exact_p50 < 0.03,
            "{p50} {exact_p50}"
        );
    }
}

#[test]
fn md1_pollaczek_khinchine() {
    for (rho, seed) in [(0.5, 21), (0.9, 22)] {
        let cfg = single_server(rho * 1e6, 1000.0, ServiceDist::Deterministic, seed);
        let out = simulate(&cfg).unwrap();
        let (m, se) = batch_means(&sojourns(&out, cfg.warmup_packets));
        let want = closed::md1(rho * 1e6, 1000.0).unwrap().mean_sojourn_ns;
        assert!(
            (m - want).abs() < 5.0 * se,
            "ρ={rho}: {m} vs {want} (se {se})"
        );
        // And it is not the M/M/1 value: the check can tell the two apart.
        let mm1 = closed::mm1(rho * 1e6, 1000.0).unwrap().mean_sojourn_ns;
        assert!((m - mm1).abs() > 10.0 * se);
    }
}

#[test]
fn overload_is_simulated_not_refused() {
    // ρ = 1.25 with L = 100: the closed form refuses, the simulator loses
    // the excess, 1 − 1/ρ = 20 %.
    let mut cfg = single_server(1.25e6, 1000.0, ServiceDist::Deterministic, 3);
    cfg.queue_capacity = 100;
    cfg.keep_packets = false;
    assert!(closed::md1(1.25e6, 1000.0).is_err());
    let out = simulate(&cfg).unwrap();
    assert!(
        (out.stats.loss_probability - 0.2).abs() < 0.005,
        "{}",
        out.stats.loss_probability
    );
    assert!((out.stats.throughput_pps - 1e6).abs() / 1e6 < 0.005);
}

#[test]
fn grid_jump_equals_explicit_polls() {
    let irqs = [Interruption {
        rate_hz: 20_000.0,
        durations_ns: vec![700, 1300],
        phase_ns: 333,
    }];
    let mut rng = Rng::new(5);
    for _ in 0..2000 {
        let mut a = IrqSchedule::new(&irqs);
        let mut b = IrqSchedule::new(&irqs);
        let start = a.free_at(rng.next_u64() % 1_000_000);
        b.free_at(start);
        let target = start + 1 + rng.next_u64() % 300_000;
        let b0 = 1 + rng.next_u64() % 500;
        let (t1, polls) = grid_jump(&mut a, start, target, b0);
        // Explicit: poll, work b0, repeat until the poll instant ≥ target.
        let (mut t, mut n) = (start, 0);
        while t < target {
            t = b.advance(t, b0);
            n += 1;
        }
        assert_eq!((t1, polls), (t, n), "start {start} target {target} b0 {b0}");
    }
}

fn aliasing_cfg(rate_pps: f64, durations_ns: Vec<u64>, packets: u64) -> SimConfig {
    SimConfig {
        arrivals: Arrivals::Cbr { rate_pps },
        packets,
        batch: 32,
        service: Service {
            mean: ServiceMean::Linear {
                fixed_ns: 0.0,
                per_packet_ns: 400.0,
            },
            dist: ServiceDist::Deterministic,
        },
        interruptions: vec![Interruption {
            rate_hz: 250.0,
            durations_ns,
            phase_ns: 1_000,
        }],
        keep_packets: true,
        ..SimConfig::default()
    }
}

#[test]
fn interrupt_aliasing_beat_pattern() {
    // 10,010 pps sampling a 250 Hz interrupt: the nearest harmonic is
    // 40 · 250 = 10,000 Hz, the beat |10,010 − 10,000| = 10 Hz, so the excess
    // delay pattern repeats every 100 ms = 1001 packets.
    let cfg = aliasing_cfg(10_010.0, vec![13_600], 20_020);
    let out = simulate(&cfg).unwrap();
    let excess: Vec<f64> = out
        .delivered
        .iter()
        .map(|d| (d.rx_ns - d.tx_ns - 400) as f64)
        .collect();
    // Every delayed packet arrived inside an interruption and waited for its
    // end: excess = end − arrival, computed here from the schedule alone.
    for d in &out.delivered {
        let k = (d.tx_ns.saturating_sub(1_000)) / 4_000_000;
        let s = 1_000 + k * 4_000_000;
        let want = if d.tx_ns >= s && d.tx_ns < s + 13_600 {
            s + 13_600 - d.tx_ns
        } else {
            0
        };
        assert_eq!(d.rx_ns - d.tx_ns - 400, want, "packet {}", d.seq);
    }
    let hits = excess.iter().filter(|e| **e > 0.0).count();
    assert!(hits > 50, "{hits}");
    let acf = |lag: usize| {
        let n = excess.len() - lag;
        let m = excess.iter().sum::<f64>() / excess.len() as f64;
        let v: f64 = excess.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / excess.len() as f64;
        (0..n)
            .map(|i| (excess[i] - m) * (excess[i + lag] - m))
            .sum::<f64>()
            / n as f64
            / v
    };
    assert!(acf(1001) > 0.95, "{}", acf(1001));
    assert!(acf(500).abs() < 0.2, "{}", acf(500));
    // The lines: consecutive hits of one pass through the interrupt are 40
    // packets (one interrupt period) apart, and the 40th packet comes
    // 4 ms − 40 · 99.9 µs = 4 µs earlier relative to the interrupt, so its
    // excess rises by 4 µs per interrupt: the diagonal lines of Fig. 5.13.
    let hit_idx: Vec<usize> = (0..excess.len()).filter(|i| excess[*i] > 0.0).collect();
    let mut diagonal = 0;
    for w in hit_idx.windows(2) {
        if w[1] - w[0] == 40 {
            let slope = excess[w[1]] - excess[w[0]];
            assert!((slope - 3_996.0).abs() < 2.0, "{slope}");
            diagonal += 1;
        }
    }
    assert!(diagonal > 20, "{diagonal}");
}

#[test]
fn interrupt_aliasing_seed_000_parameters() {
    // interrupt-sim.py: ≈ 10,052 pps, 250 Hz, 10.9 µs twice then 13.6 µs.
    let cfg = aliasing_cfg(10_052.0, vec![10_900, 10_900, 13_600], 100_520);
    let out = simulate(&cfg).unwrap();
    let excess: Vec<u64> = out
        .delivered
        .iter()
        .map(|d| d.rx_ns - d.tx_ns - 400)
        .collect();
    let hits = excess.iter().filter(|e| **e > 0).count() as f64;
    // Share of time interrupted: 250 · 11.8 µs = 0.295 %; 10 s of CBR samples
    // it 100,520 times at phases spread by the 52 Hz beat.
    let want = 100_520.0 * 250.0 * 11_800e-9;
    assert!((hits - want).abs() / want < 0.05, "{hits} vs {want}");
    assert!(*excess.iter().max().unwrap() <= 13_600);
    assert!(*excess.iter().max().unwrap() > 13_000);
}

#[test]
fn rss_spreads_flows_over_cores() {
    // Each core serves 1 packet per µs at most (β = 1, 1 µs per packet).
    let base = SimConfig {
        arrivals: Arrivals::Cbr { rate_pps: 1.6e6 },
        packets: 160_000,
        flows: 4,
        queue_capacity: 64,
        batch: 1,
        service: Service {
            mean: ServiceMean::Linear {
                fixed_ns: 0.0,
                per_packet_ns: 1000.0,
            },
            dist: ServiceDist::Deterministic,
        },
        keep_packets: true,
        ..SimConfig::default()
    };
    let one = simulate(&base).unwrap();
    assert!((one.stats.loss_probability - 0.375).abs() < 0.01);
    let two = simulate(&SimConfig {
        cores: 2,
        ..base.clone()
    })
    .unwrap();
    assert_eq!(two.stats.dropped, 0);
    // Departures are merged in time order, every flow present.
    assert!(two.delivered.windows(2).all(|w| w[0].rx_ns <= w[1].rx_ns));
    assert_eq!(two.sent_per_flow, vec![40_000; 4]);
    assert_eq!(two.delivered.len(), 160_000);
}

#[test]
fn interrupt_mode_and_moderation() {
    let base = SimConfig {
        arrivals: Arrivals::Cbr {
            rate_pps: 100_000.0,
        }, // every 10 µs
        packets: 1_000,
        batch: 32,
        mode: PollMode::Interrupt {
            moderation_ns: 0,
            wake_ns: 2_000,
        },
        service: Service {
            mean: ServiceMean::Linear {
                fixed_ns: 100.0,
                per_packet_ns: 500.0,
            },
            dist: ServiceDist::Deterministic,
        },
        ..SimConfig::default()
    };
    // Asleep at each arrival: wake 2 µs, batch of one 600 ns.
    let out = simulate(&base).unwrap();
    assert_eq!(out.stats.min_max_sojourn_ns, [2_600, 2_600]);
    // After each batch an empty poll re-arms the interrupt (the run ends
    // before the last one).
    assert_eq!(out.stats.batch_histogram[0], 999);
    // Moderation of 25 µs: interrupts at most every 25 µs, so packets wait
    // for the next permitted interrupt and batches of 2–3 form.
    let m = simulate(&SimConfig {
        mode: PollMode::Interrupt {
            moderation_ns: 25_000,
            wake_ns: 2_000,
        },
        ..base.clone()
    })
    .unwrap();
    assert!(
        m.stats.mean_nonempty_batch_size > 2.0,
        "{}",
        m.stats.mean_nonempty_batch_size
    );
    assert!(
        m.stats.mean_sojourn_ns > 8_000.0,
        "{}",
        m.stats.mean_sojourn_ns
    );
}

#[test]
fn drain_timer_accumulates_batches() {
    let cfg = SimConfig {
        arrivals: Arrivals::Cbr { rate_pps: 1e6 }, // every 1 µs
        packets: 10_000,
        batch: 32,
        drain_ns: 10_000,
        service: Service {
            mean: ServiceMean::Linear {
                fixed_ns: 50.0,
                per_packet_ns: 10.0,
            },
            dist: ServiceDist::Deterministic,
        },
        ..SimConfig::default()
    };
    let out = simulate(&cfg).unwrap();
    // The oldest packet waits 10 µs (to the 50 ns poll grid): 11 queued.
    assert!(
        (out.stats.mean_nonempty_batch_size - 11.0).abs() < 0.1,
        "{}",
        out.stats.mean_nonempty_batch_size
    );
    let max = out.stats.min_max_sojourn_ns[1];
    assert!((10_000..10_300).contains(&max), "{max}");
    // Without the timer every packet goes alone.
    let none = simulate(&SimConfig { drain_ns: 0, ..cfg }).unwrap();
    assert!((none.stats.mean_nonempty_batch_size - 1.0).abs() < 1e-9);
}

#[test]
fn records_round_trip() {
    let dir = std::env::temp_dir().join(format!("nflab-model-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sim.nfr");
    let cfg = SimConfig {
        arrivals: Arrivals::Poisson { rate_pps: 10e6 },
        packets: 5_000,
        warmup_packets: 100,
        flows: 2,
        queue_capacity: 8,
        batch: 4,
        keep_packets: true,
        wire_ns: 1_000,
        ..SimConfig::default()
    };
    let out = simulate(&cfg).unwrap();
    assert!(out.stats.dropped > 0);
    write_nfr(&path, &cfg, &out).unwrap();
    let file = nflab_record::read_all(&path).unwrap();
    assert_eq!(file.records.len(), out.delivered.len());
    let t = file.trailer.unwrap();
    assert_eq!(t.sent.iter().map(|s| s.sent).sum::<u64>(), 5_000);
    assert_eq!(t.sent.iter().map(|s| s.warmup).sum::<u64>(), 100);
    assert!(file.records.iter().all(|r| r.rx_ns >= r.tx_ns + 1_000));
    // Replay: the gaps of the received packets.
    let gaps = read_gaps_ns(&path).unwrap();
    assert_eq!(gaps.len(), file.records.len() - 1);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_input_is_a_sentence() {
    let e = simulate(&SimConfig {
        batch: 64,
        queue_capacity: 32,
        ..SimConfig::default()
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("--batch") && e.contains("capacity"), "{e}");
    let e = simulate(&SimConfig {
        arrivals: Arrivals::Cbr { rate_pps: -1.0 },
        ..SimConfig::default()
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("--rate-pps = -1"), "{e}");
    let e = simulate(&SimConfig {
        arrivals: Arrivals::Replay { gaps_ns: vec![] },
        ..SimConfig::default()
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("--replay"), "{e}");
}

/// The simulator's sojourn figures are the metrics engine's: `nflab analyze`
/// on the simulated run's records (latency = sojourn + wire_ns) reports the
/// very same percentiles, min, max, stdev and mean, with two cores whose
/// distributions are pooled and warm-up left out on both sides.
#[test]
fn sojourn_statistics_are_the_engines() {
    let dir = std::env::temp_dir().join(format!("nflab-model-engine-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sim.nfr");
    let wire = 1_000;
    let cfg = SimConfig {
        arrivals: Arrivals::Poisson { rate_pps: 1.5e6 },
        packets: 40_000,
        warmup_packets: 1_000,
        flows: 4,
        cores: 2,
        queue_capacity: 64,
        batch: 8,
        keep_packets: true,
        wire_ns: wire,
        seed: 5,
        ..SimConfig::default()
    };
    let out = simulate(&cfg).unwrap();
    write_nfr(&path, &cfg, &out).unwrap();
    let (sum, _) =
        nflab_analyze::analyze_file(&path, &nflab_analyze::AnalysisConfig::default()).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let s = &out.stats;
    let l = &sum.latency_ns;
    assert_eq!(sum.packets.received, s.delivered);
    assert_eq!(sum.percentiles.method, "exact");
    let want = [l.p50, l.p90, l.p99, l.p99_9, l.p99_99].map(|v| v.unwrap() - wire as i64);
    assert_eq!(s.sojourn_quantiles_ns.map(|v| v as i64), want);
    assert_eq!(
        s.min_max_sojourn_ns.map(|v| v as i64),
        [l.min.unwrap(), l.max.unwrap()].map(|v| v - wire as i64)
    );
    assert_eq!(s.stdev_sojourn_ns, l.stdev.unwrap());
    let mean = l.mean.unwrap() - wire as f64;
    assert!(
        (s.mean_sojourn_ns - mean).abs() < 1e-9 * mean,
        "{} vs {mean}",
        s.mean_sojourn_ns
    );
    // Distinct percentiles, so the check tells the ranks apart.
    assert!(want.windows(2).all(|w| w[0] < w[1]), "{want:?}");
}
