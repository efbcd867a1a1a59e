//! Synthetic artifact trees for the report tests: no root, no network
//! namespaces, known latencies.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use nflab_record::{ClockInfo, FlowSent, Metadata, Record, RecordWriter, Trailer};
use serde_json::json;

/// A fresh empty directory under the test target's tmp dir.
pub fn tmpdir(name: &str) -> PathBuf {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nflab-report-tests");
    let d = base.join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Deterministic pseudo-random numbers (xorshift64*).
pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD9D)
    }
    /// Uniform in [0, 1).
    pub fn f(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// How one synthetic run looks.
#[derive(Clone)]
pub struct RunSpec {
    pub dut: &'static str,
    pub rate_pps: u64,
    pub repetition: u64,
    pub packets: u64,
    pub warmup: u64,
    /// Latency of packet i (seq), ns; `None` = lost.
    pub latency: fn(u64, &mut Rng) -> Option<u64>,
    /// Write summary.json.
    pub summary: bool,
    /// Finish the record file with a trailer (else: cut off like a kill -9).
    pub finished: bool,
}

/// Base latency a few µs with an exponential tail, plus a 5-packet burst of
/// 900 µs at seq 2000 (an anomaly for 2:250us and 2:750us).
pub fn typical(seq: u64, r: &mut Rng) -> Option<u64> {
    if (2000..2005).contains(&seq) {
        return Some(900_000);
    }
    let u = r.f().max(1e-12);
    Some(3_000 + (-u.ln() * 2_000.0) as u64)
}

/// Nothing arrives.
pub fn all_lost(_: u64, _: &mut Rng) -> Option<u64> {
    None
}

pub const SPEC: &str = r#"[experiment]
name = "synthetic"
description = "a synthetic experiment for the report tests"
repetitions = 2
order = "sequential"
seed = 1

[topology]
kind = "netns"

[dut]
kind = "linux-router"

[traffic]
backend = "af_packet"
pattern = "cbr"
rate_pps = 10000
frame_bytes = 64
duration_s = 1
warmup_s = 0.1

[analysis]
anomalies = ["2:250us", "2:750us"]

[sweep]
"dut.kind" = ["loopback", "linux-router"]
"traffic.rate_pps" = [10000, 20000]
"#;

/// Write one run directory.
pub fn write_run(dir: &Path, name: &str, s: &RunSpec, seed: u64) -> Vec<u64> {
    let rd = dir.join("runs").join(name);
    std::fs::create_dir_all(&rd).unwrap();
    let params = json!({
        "run": name, "repetition": s.repetition, "seed": seed,
        "dut": {"kind": s.dut},
        "traffic": {"pattern": "cbr", "rate_pps": s.rate_pps, "frame_bytes": 64, "backend": "af_packet"},
        "analysis": {"anomalies": ["2:250us", "2:750us"]},
        "sweep": {"dut.kind": s.dut, "traffic.rate_pps": s.rate_pps},
    });
    std::fs::write(
        rd.join("params.json"),
        serde_json::to_string_pretty(&params).unwrap(),
    )
    .unwrap();
    let meta = Metadata {
        run_id: name.into(),
        clock: ClockInfo {
            source: "CLOCK_REALTIME".into(),
            resolution_ns: 1,
        },
        tx_timestamp: "application".into(),
        rx_timestamp: "kernel-software".into(),
        flows: vec![0],
        ..Default::default()
    };
    let mut w = RecordWriter::create(&rd.join("records.nfr"), &meta).unwrap();
    let mut rng = Rng::new(seed);
    let gap = 1_000_000_000 / s.rate_pps;
    let t0 = 1_700_000_000_000_000_000u64;
    let mut lats = Vec::new();
    for seq in 0..s.packets {
        let tx = t0 + seq * gap + rng.next() % 200;
        if let Some(l) = (s.latency)(seq, &mut rng) {
            if seq >= s.warmup {
                lats.push(l);
            }
            w.push(&Record {
                seq,
                flow: 0,
                tx_ns: tx,
                rx_ns: tx + l,
                wire_len: 64,
                flags: 1,
            })
            .unwrap();
        }
    }
    if s.finished {
        w.finish(&Trailer {
            sent: vec![FlowSent {
                flow: 0,
                sent: s.packets,
                warmup: s.warmup,
            }],
            interrupted: false,
            ..Default::default()
        })
        .unwrap();
    } else {
        drop(w); // no trailer, like a writer that was killed between blocks
    }
    if s.summary {
        let mut sorted = lats.clone();
        sorted.sort_unstable();
        let q = |p: f64| -> serde_json::Value {
            if sorted.is_empty() {
                return serde_json::Value::Null;
            }
            let n = sorted.len();
            json!(sorted[((p * n as f64).ceil() as usize).clamp(1, n) - 1])
        };
        let sent = s.packets - s.warmup;
        let recv = lats.len() as u64;
        let summary = json!({
            "packets": {"sent": sent, "received": recv, "lost": sent - recv, "reordered": 0, "duplicated": 0},
            "loss_ratio": (sent - recv) as f64 / sent as f64,
            "rate": {"offered_pps": s.rate_pps as f64, "tx_pps": s.rate_pps as f64,
                     "rx_pps": if recv > 1 { serde_json::json!(s.rate_pps as f64) } else { serde_json::Value::Null }},
            "latency_ns": {"min": q(0.0), "mean": null, "stdev": null, "p50": q(0.5), "p90": q(0.9), "p99": q(0.99),
                           "p99.9": q(0.999), "p99.99": q(0.9999), "p99.999": q(0.99999), "max": q(1.0)},
            "jitter_ns": {"rfc3550": 100.0, "ipdv_p50": 50, "ipdv_p99": 500},
            "anomalies": [{"n": 2, "t_ns": 250000, "count": 1, "packets": 5, "longest": 5},
                          {"n": 2, "t_ns": 750000, "count": 1, "packets": 5, "longest": 5}],
            "clock": {"source": "CLOCK_REALTIME", "resolution_ns": 1},
            "interrupted": false,
            "notes": [],
        });
        std::fs::write(
            rd.join("summary.json"),
            serde_json::to_string_pretty(&summary).unwrap(),
        )
        .unwrap();
    }
    std::fs::write(
        rd.join("gen.json"),
        json!({"sent": s.packets, "warmup": s.warmup, "offered_pps": s.rate_pps as f64})
            .to_string(),
    )
    .unwrap();
    lats
}

/// A complete synthetic experiment: 2 DuT kinds × 2 rates × 2 repetitions.
pub fn experiment(dir: &Path) -> PathBuf {
    let e = dir.join("20260101T000000Z-synthetic");
    std::fs::create_dir_all(&e).unwrap();
    std::fs::write(e.join("spec.toml"), SPEC).unwrap();
    std::fs::write(
        e.join("env.json"),
        json!({"hostname": "test", "kernel": "6.x", "cpu_model": "synthetic CPU", "cpus": 2,
               "clock_source": "CLOCK_REALTIME", "clock_resolution_ns": 1, "kernel_clocksource": "tsc",
               "nflab_version": "0.1.0", "nflab_commit": "test", "started_utc": "2026-01-01T00:00:00Z"})
        .to_string(),
    )
    .unwrap();
    let mut i = 0;
    for dut in ["loopback", "linux-router"] {
        for rate in [10_000u64, 20_000] {
            for rep in 0..2 {
                let s = RunSpec {
                    dut,
                    rate_pps: rate,
                    repetition: rep,
                    packets: rate / 2,
                    warmup: 500,
                    latency: typical,
                    summary: true,
                    finished: true,
                };
                write_run(&e, &format!("{i:03}"), &s, 7 + i as u64);
                i += 1;
            }
        }
    }
    e
}
