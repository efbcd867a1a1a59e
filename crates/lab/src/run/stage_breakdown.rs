//! The stage breakdown of one run: the monitor's per-packet stage times joined
//! with the records' send and receive times, split into segments (generator →
//! first stage, stage → stage, last stage → recorder) whose per-packet sum is the
//! end-to-end latency. Every distribution is nflab-analyze's.

use std::collections::HashMap;
use std::path::Path;

use nflab_analyze::dist::{Distribution, Pct};
use nflab_monitor::stages::StagesResult;
use serde::Serialize;

use crate::error::LabError;

/// One segment's distribution.
#[derive(Debug, Clone, Serialize)]
pub struct Segment {
    /// `"tx→ingress"`, `"ingress→route"`, …, `"egress→rx"`.
    pub name: String,
    /// Packets.
    pub n: u64,
    /// Mean in ns.
    pub mean_ns: f64,
    /// Standard deviation in ns.
    pub stdev_ns: f64,
    /// Median in ns.
    pub p50_ns: i64,
    /// 99th percentile in ns.
    pub p99_ns: i64,
    /// Maximum in ns.
    pub max_ns: i64,
}

/// The breakdown of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Breakdown {
    /// Segments in path order.
    pub segments: Vec<Segment>,
    /// Received probes after the warm-up with every stage time (the segments'
    /// population).
    pub complete: u64,
    /// Received probes the monitor missed at some stage.
    pub incomplete: u64,
    /// Complete probes whose times are not in path order (tx ≤ stages ≤ rx).
    pub out_of_order: u64,
    /// Mean end-to-end latency (rx − tx) of the complete probes, ns.
    pub e2e_mean_ns: f64,
}

/// Join `stages` with the run's `records.nfr`.
pub fn breakdown(stages: &StagesResult, records: &Path) -> Result<Breakdown, LabError> {
    let file = nflab_record::read_all(records)?;
    let by_key: HashMap<(u16, u64), &Vec<Option<u64>>> = stages
        .rows
        .iter()
        .map(|r| ((r.flow, r.seq), &r.t_ns))
        .collect();
    let mut names = vec![format!(
        "tx→{}",
        stages.stages.first().copied().unwrap_or("rx")
    )];
    for w in stages.stages.windows(2) {
        names.push(format!("{}→{}", w[0], w[1]));
    }
    if let Some(last) = stages.stages.last() {
        names.push(format!("{last}→rx"));
    }
    let mut dists: Vec<Distribution> = names
        .iter()
        .map(|_| Distribution::new(10_000_000, 3))
        .collect();
    let mut e2e = Distribution::new(0, 3);
    let (mut complete, mut incomplete, mut out_of_order) = (0, 0, 0);
    // Warm-up packets are left out, as nflab-analyze leaves them out of summary.json.
    let warmup: HashMap<u16, u64> = file
        .trailer
        .iter()
        .flat_map(|t| t.sent.iter().map(|f| (f.flow, f.warmup)))
        .collect();
    for r in &file.records {
        if r.seq < warmup.get(&r.flow).copied().unwrap_or(0) {
            continue;
        }
        let Some(times) = by_key.get(&(r.flow, r.seq)) else {
            incomplete += 1;
            continue;
        };
        let Some(mid): Option<Vec<u64>> = times.iter().copied().collect() else {
            incomplete += 1;
            continue;
        };
        let path: Vec<i64> = std::iter::once(r.tx_ns)
            .chain(mid)
            .chain(std::iter::once(r.rx_ns))
            .map(|t| t as i64)
            .collect();
        complete += 1;
        if path.windows(2).any(|w| w[1] < w[0]) {
            out_of_order += 1;
        }
        for (d, w) in dists.iter_mut().zip(path.windows(2)) {
            d.record(w[1] - w[0]);
        }
        e2e.record(r.rx_ns as i64 - r.tx_ns as i64);
    }
    let pcts = [
        Pct::parse("50").expect("p50"),
        Pct::parse("99").expect("p99"),
    ];
    let segments = names
        .into_iter()
        .zip(dists.iter_mut())
        .map(|(name, d)| {
            let q = d.quantiles(&pcts);
            Segment {
                name,
                n: d.count(),
                mean_ns: d.mean().unwrap_or(0.0),
                stdev_ns: d.stdev().unwrap_or(0.0),
                p50_ns: q[0].map_or(0, |q| q.value),
                p99_ns: q[1].map_or(0, |q| q.value),
                max_ns: d.max().unwrap_or(0),
            }
        })
        .collect();
    Ok(Breakdown {
        segments,
        complete,
        incomplete,
        out_of_order,
        e2e_mean_ns: e2e.mean().unwrap_or(0.0),
    })
}
