//! The PRRT figures' inputs on a hand-built artifact tree with known answers: which run
//! the time series shows, the loss quartiles per target × window and per payload, the
//! 802.11g model values and what the emulator "yields" from per-message records.

use std::path::{Path, PathBuf};

use nflab_analyze::prrt::{write_packets, PrrtPacket};
use nflab_report::figures::Figure;
use nflab_report::prrt::{bordim_us, pick_run, study_runs, DATA_FRAME_OVERHEAD};

const DELAY_US: i64 = 7610;

fn tmp() -> PathBuf {
    let d = std::env::temp_dir().join(format!("nflab-report-prrt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("runs")).expect("tmp");
    d
}

/// Per-frame time the fake emulator "adds" for a payload, µs.
fn frame_us(payload: u64) -> i64 {
    ((payload as f64 + DATA_FRAME_OVERHEAD + 1480.0) * 8.0 / 53.3).round() as i64
}

struct FakeRun {
    gap: f64,
    payload: u64,
    target: f64,
    window: f64,
    loss: [f64; 2],
    outage_ms: u64,
}

fn write_run(dir: &Path, i: usize, r: &FakeRun) {
    let rd = dir.join("runs").join(format!("{i:03}"));
    std::fs::create_dir_all(&rd).expect("run dir");
    let side = |loss: f64| {
        serde_json::json!({
            "sent": 1000, "delivered": ((1.0 - loss) * 1000.0).round() as u64,
            "late_discarded": 0, "loss_ratio": loss, "redundancy_ratio": 0.2,
            "outages": if r.outage_ms > 0 {
                serde_json::json!([{"start_ns": 500_000_000u64, "length_ns": r.outage_ms * 1_000_000, "both_directions": false}])
            } else { serde_json::json!([]) },
        })
    };
    let prrt = serde_json::json!({"pc": side(r.loss[0]), "cp": side(r.loss[1])});
    std::fs::write(rd.join("prrt.json"), prrt.to_string()).expect("prrt.json");
    let stats = serde_json::json!({"app": {
        "kind": "prrt", "gap_ms": r.gap, "payload_bytes": r.payload, "target_delay_ms": r.target,
        "window_ms": r.window, "duration_s": 2.0, "outage_threshold_ms": 100.0,
    }});
    std::fs::write(rd.join("prrt-stats.json"), stats.to_string()).expect("stats");
    // 100 messages per direction: L1→L1 = delay + frame time + k µs for k in 0..100, so the
    // median minus the delay is frame time + 49 (nearest rank of 50 of 100 is the 50th).
    let mut rows = Vec::new();
    for dir in ["pc", "cp"] {
        for k in 0..100i64 {
            let m1 = k * 2_000_000;
            let l = [
                10_000,
                5_000,
                (DELAY_US + frame_us(r.payload) + k) * 1000,
                0,
                1_000_000,
            ];
            let mut m = [Some(m1); 6];
            for j in 0..5 {
                m[j + 1] = m[j].map(|v| v + l[j]);
            }
            rows.push(PrrtPacket {
                dir: dir.into(),
                seq: k as u32,
                m,
                layers: [
                    Some(l[0]),
                    Some(l[1]),
                    Some(l[2]),
                    Some(l[3]),
                    Some(l[4]),
                    Some(l.iter().sum()),
                ],
            });
        }
    }
    write_packets(&rd.join("prrt-packets.parquet"), &rows).expect("parquet");
}

fn fig<'a>(figs: &'a [Figure], id: &str) -> &'a Figure {
    figs.iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no figure {id}"))
}

#[test]
fn prrt_figures_draw_the_known_answers() {
    let dir = tmp();
    std::fs::write(
        dir.join("spec.toml"),
        "[experiment]\nname = \"prrt\"\n[dut]\nkind = \"link\"\n[dut.link]\ndelay_us = 7610\nrate_mbps = 53.3\noverhead_bytes = 1480\n[app]\nkind = \"prrt\"\ngap_ms = 1\npayload_bytes = 20\ntarget_delay_ms = 10\nwindow_ms = 2\nduration_s = 2\n",
    )
    .expect("spec");
    // Target 10 × window 2: losses 0.1, 0.3, 0.2 (pc); 0.0, 0.5, 0.4 (cp), three payloads.
    // Target 5 × window 2: one run. Gap 10 for all but one, so the model uses gap 10 runs.
    let runs = [
        FakeRun {
            gap: 10.0,
            payload: 20,
            target: 10.0,
            window: 2.0,
            loss: [0.1, 0.0],
            outage_ms: 0,
        },
        FakeRun {
            gap: 10.0,
            payload: 710,
            target: 10.0,
            window: 2.0,
            loss: [0.3, 0.5],
            outage_ms: 300,
        },
        FakeRun {
            gap: 10.0,
            payload: 1400,
            target: 10.0,
            window: 2.0,
            loss: [0.2, 0.4],
            outage_ms: 200,
        },
        FakeRun {
            gap: 10.0,
            payload: 20,
            target: 5.0,
            window: 2.0,
            loss: [0.9, 0.9],
            outage_ms: 1500,
        },
        FakeRun {
            gap: 1.0,
            payload: 20,
            target: 5.0,
            window: 1.0,
            loss: [0.05, 0.05],
            outage_ms: 0,
        },
    ];
    for (i, r) in runs.iter().enumerate() {
        write_run(&dir, i, r);
    }
    let study = study_runs(&dir);
    assert_eq!(study.len(), 5);
    // The most outage among runs delivering at least half both ways: run 001 (run 003 has
    // more, but lost 90 %).
    assert_eq!(pick_run(&study).map(|r| r.name.as_str()), Some("001"));

    let e = nflab_report::load::load(&dir);
    let figs = nflab_report::prrt::figures(&e);
    let ids: Vec<&str> = figs.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "prrt-delay",
            "prrt-layers",
            "prrt-loss-target-window",
            "prrt-loss-payload",
            "prrt-wlan-model"
        ]
    );
    // Time series: 200 messages of run 001, all delivered, one-way 7.61 ms + frame + k µs + 1.015 ms.
    let d = fig(&figs, "prrt-delay");
    assert_eq!(d.data.rows.len(), 200);
    assert!(d.caption.contains("run 001"), "{}", d.caption);
    assert!(d.svg.contains("outage: 300 ms"), "the outage is shaded");

    // Loss per target × window: nearest-rank quartiles of {0.1, 0.3, 0.2} are 0.1, 0.2, 0.3.
    let tw = fig(&figs, "prrt-loss-target-window");
    let row = |dir: &str, target: &str, window: &str| -> Vec<String> {
        tw.data
            .rows
            .iter()
            .find(|r| r[0] == dir && r[1] == target && r[2] == window)
            .unwrap_or_else(|| panic!("{dir} {target} {window}: {:?}", tw.data.rows))
            .clone()
    };
    assert_eq!(row("pc", "10", "2")[3..], ["3", "0.1", "0.2", "0.3"]);
    assert_eq!(row("cp", "10", "2")[3..], ["3", "0", "0.4", "0.5"]);
    assert_eq!(row("pc", "5", "1")[3..], ["1", "0.05", "0.05", "0.05"]);

    // Loss per payload 20: pc {0.1, 0.9, 0.05} → 0.05, 0.1, 0.9.
    let lp = fig(&figs, "prrt-loss-payload");
    let r20 = lp
        .data
        .rows
        .iter()
        .find(|r| r[0] == "pc" && r[1] == "20")
        .expect("payload 20");
    assert_eq!(r20[2..], ["3", "0.05", "0.1", "0.9"]);

    // The WLAN model: Bordim's 0.15 · 1500 + 162.43 = 387.43 µs; the emulator's yield per
    // payload from the gap-10 runs: frame time + 49 µs (median of k = 0..99), i.e. the
    // profile's line plus the 49 µs of "processing" the fake records carry.
    assert!((bordim_us(1500.0) - 387.43).abs() < 1e-9);
    let w = fig(&figs, "prrt-wlan-model");
    for payload in [20u64, 710, 1400] {
        let x = payload as f64 + DATA_FRAME_OVERHEAD;
        let got = w
            .data
            .rows
            .iter()
            .find(|r| r[0] == "measured pc" && r[1].parse::<f64>().ok() == Some(x))
            .unwrap_or_else(|| panic!("payload {payload}: {:?}", w.data.rows));
        let us: f64 = got[2].parse().expect("number");
        assert_eq!(us, (frame_us(payload) + 49) as f64, "payload {payload}");
        // 300 messages: the gap-10 runs with this payload (two for payload 20), 100 each.
        let n: usize = got[4].parse().expect("n");
        assert_eq!(n, if payload == 20 { 200 } else { 100 });
    }
    let bordim_1500 = w
        .data
        .rows
        .iter()
        .find(|r| r[0].starts_with("Bordim") && r[1] == "1500")
        .expect("model row");
    assert_eq!(bordim_1500[2], "387.43");
    let _ = std::fs::remove_dir_all(&dir);
}
