//! FLOWer (seed 000 §3.4): latency against the number of port hops a frame
//! makes inside Open vSwitch (`dut.kind = "ovs"`, `dut.hops = k`), and the
//! per-hop cost as the slope of a least-squares line with its 95 % CI and
//! R² (`nflab_analyze::linfit`). Reads an experiment directory whose runs
//! sweep `dut.hops` (examples/sdn/flower.toml).
//!
//! Three lines: through the runs' mean latency (the contract's
//! `per_hop_ns`), their median (`per_hop_p50_ns`) and their minimum
//! (`per_hop_min_ns`). On a loaded host a few probes wait for ovs-vswitchd
//! to be scheduled for milliseconds; they move a run's mean but hardly its
//! median, so the median's fit is the one that shows the per-hop cost when
//! the host is not quiet. Repetitions add points (one per run).

use std::path::Path;

use nflab_analyze::linfit::{linear_fit, LinearFit};
use serde::Serialize;

use crate::error::LabError;

/// One run's point.
#[derive(Debug, Clone, Serialize)]
pub struct FlowerPoint {
    /// Port hops.
    pub hops: u32,
    /// Mean one-way latency, ns.
    pub latency_ns: f64,
    /// Median one-way latency, ns.
    pub latency_p50_ns: f64,
    /// Least one-way latency, ns.
    pub latency_min_ns: f64,
    /// RFC 3550 jitter, ns.
    pub jitter_ns: f64,
    /// Probes received.
    pub received: u64,
}

/// `nflab sdn flower-fit --json`.
#[derive(Debug, Clone, Serialize)]
pub struct FlowerFit {
    /// Every run.
    pub points: Vec<FlowerPoint>,
    /// Mean latency against hops.
    pub per_hop_ns: LinearFit,
    /// Median latency against hops.
    pub per_hop_p50_ns: LinearFit,
    /// Least latency against hops.
    pub per_hop_min_ns: LinearFit,
    /// RFC 3550 jitter against hops.
    pub jitter_per_hop_ns: LinearFit,
}

/// Fit the runs of `dir`.
pub fn fit(dir: &Path) -> Result<FlowerFit, LabError> {
    let runs = dir.join("runs");
    let entries = std::fs::read_dir(&runs).map_err(|e| {
        LabError::Other(format!("{} has no runs/ ({e}): pass an experiment directory of `nflab run examples/sdn/flower.toml`", dir.display()))
    })?;
    let mut points = Vec::new();
    for e in entries.filter_map(Result::ok) {
        let read = |name: &str| -> Option<serde_json::Value> {
            serde_json::from_str(&std::fs::read_to_string(e.path().join(name)).ok()?).ok()
        };
        let (Some(params), Some(summary)) = (read("params.json"), read("summary.json")) else {
            continue;
        };
        let Some(hops) = params["dut"]["hops"].as_u64() else {
            return Err(LabError::Other(format!(
                "run {} has no dut.hops: FLOWer needs runs with dut.kind = \"ovs\" sweeping dut.hops",
                e.path().display()
            )));
        };
        points.push(FlowerPoint {
            hops: hops as u32,
            latency_ns: summary["latency_ns"]["mean"].as_f64().unwrap_or(f64::NAN),
            latency_p50_ns: summary["latency_ns"]["p50"].as_f64().unwrap_or(f64::NAN),
            latency_min_ns: summary["latency_ns"]["min"].as_f64().unwrap_or(f64::NAN),
            jitter_ns: summary["jitter_ns"]["rfc3550"].as_f64().unwrap_or(f64::NAN),
            received: summary["packets"]["received"].as_u64().unwrap_or(0),
        });
    }
    points.sort_by_key(|p| p.hops);
    let xs: Vec<f64> = points.iter().map(|p| p.hops as f64).collect();
    let line = |ys: Vec<f64>| {
        linear_fit(&xs, &ys, 0.95).ok_or_else(|| {
            LabError::Other(format!(
                "{}: a fit needs runs at three or more points and at least two different dut.hops",
                dir.display()
            ))
        })
    };
    Ok(FlowerFit {
        per_hop_ns: line(points.iter().map(|p| p.latency_ns).collect())?,
        per_hop_p50_ns: line(points.iter().map(|p| p.latency_p50_ns).collect())?,
        per_hop_min_ns: line(points.iter().map(|p| p.latency_min_ns).collect())?,
        jitter_per_hop_ns: line(points.iter().map(|p| p.jitter_ns).collect())?,
        points,
    })
}
