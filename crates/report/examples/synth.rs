//! A synthetic artifact tree for measuring the report on large runs:
//! `cargo run --release -p nflab-report --example synth -- DIR PACKETS [RATE_PPS]`.
//!
//! One CBR run (`runs/000`) of PACKETS received packets at RATE_PPS (default
//! 1 Mpps): latency 20 µs plus an exponential tail, a 5-packet 900 µs burst
//! every 10⁷ packets, one packet in 10⁵ lost and every 10⁶th pair swapped.
//! Then `nflab report DIR`. Nothing here is committed data.
use std::path::PathBuf;

use nflab_record::{ClockInfo, FlowSent, Metadata, Record, RecordWriter, Trailer};
use serde_json::json;

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(n)) = (args.next(), args.next()) else {
        eprintln!("usage: synth DIR PACKETS [RATE_PPS]");
        std::process::exit(2);
    };
    let dir = PathBuf::from(dir);
    let n: u64 = n.parse().expect("PACKETS is a number");
    let rate: u64 = args
        .next()
        .map_or(1_000_000, |r| r.parse().expect("RATE_PPS"));
    let warmup = rate / 10;
    let rd = dir.join("runs/000");
    std::fs::create_dir_all(&rd).expect("create DIR/runs/000");
    let spec = format!(
        "[experiment]\nname = \"synth\"\ndescription = \"synthetic run of {n} packets\"\n\n\
         [dut]\nkind = \"linux-router\"\n\n[traffic]\npattern = \"cbr\"\nrate_pps = {rate}\n\n\
         [analysis]\nanomalies = [\"2:250us\"]\n"
    );
    std::fs::write(dir.join("spec.toml"), spec).expect("spec.toml");
    std::fs::write(
        dir.join("env.json"),
        json!({"hostname": "synth", "clock_source": "CLOCK_REALTIME", "clock_resolution_ns": 1})
            .to_string(),
    )
    .expect("env.json");
    std::fs::write(
        rd.join("params.json"),
        json!({"run": "000", "repetition": 0, "dut": {"kind": "linux-router"},
               "traffic": {"pattern": "cbr", "rate_pps": rate},
               "analysis": {"anomalies": ["2:250us"]}, "sweep": {}})
        .to_string(),
    )
    .expect("params.json");
    let meta = Metadata {
        run_id: "000".into(),
        clock: ClockInfo {
            source: "CLOCK_REALTIME".into(),
            resolution_ns: 1,
        },
        tx_timestamp: "application".into(),
        rx_timestamp: "kernel-software".into(),
        flows: vec![0],
        ..Default::default()
    };
    let mut w = RecordWriter::create(&rd.join("records.nfr"), &meta).expect("records.nfr");
    let gap = 1_000_000_000 / rate;
    let t0 = 1_700_000_000_000_000_000u64;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let rec = |seq: u64, x: &mut u64| {
        *x ^= *x >> 12;
        *x ^= *x << 25;
        *x ^= *x >> 27;
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD9D);
        let u = ((r >> 11) as f64 / (1u64 << 53) as f64).max(1e-12);
        let lat = if seq % 10_000_000 < 5 && seq >= warmup {
            900_000
        } else {
            20_000 + (-u.ln() * 3_000.0) as u64
        };
        let tx = t0 + seq * gap + (r & 127);
        Record {
            seq,
            flow: 0,
            tx_ns: tx,
            rx_ns: tx + lat,
            wire_len: 64,
            flags: 1,
        }
    };
    let total = n + warmup;
    let mut seq = 0;
    let mut received = 0u64;
    while received < total {
        if seq % 100_000 == 99_999 {
            seq += 1; // lost
            continue;
        }
        if seq % 1_000_000 == 500_000 {
            // Reordered: seq + 1 arrives first.
            let a = rec(seq, &mut x);
            let b = rec(seq + 1, &mut x);
            w.push(&b).expect("write");
            w.push(&a).expect("write");
            seq += 2;
            received += 2;
            continue;
        }
        w.push(&rec(seq, &mut x)).expect("write");
        seq += 1;
        received += 1;
    }
    w.finish(&Trailer {
        sent: vec![FlowSent {
            flow: 0,
            sent: seq,
            warmup,
        }],
        ..Default::default()
    })
    .expect("trailer");
    std::fs::write(
        rd.join("gen.json"),
        json!({"sent": seq, "warmup": warmup, "offered_pps": rate as f64}).to_string(),
    )
    .expect("gen.json");
    println!("{}", dir.display());
}
