//! At the end of an experiment with `[monitor] kind = "udp"` over a udp-relay: seed
//! 003's accuracy table across the runs (`DIR/monitor-accuracy.json`, computed by
//! [`nflab_analyze::komon`]) and, with `monitor.subtract_offset = true`, each run's
//! sojourn times with the calibration offset subtracted.

use std::path::{Path, PathBuf};

use nflab_analyze::export::{write_parquet, Column, Table};
use nflab_analyze::komon::{
    self, accuracy_table, mean_cv, AccuracyRow, AccuracyRun, RelaySettings,
};
use serde::Serialize;

use crate::error::LabError;

/// `monitor-accuracy.json`.
#[derive(Debug, Serialize)]
pub struct AccuracyFile {
    /// The goal: |mean(monitor − offset) − mean(truth)| ≤ this, ns …
    pub goal_mean_ns: f64,
    /// … and |cv(monitor − offset) − cv(truth)| ≤ this …
    pub goal_cv: f64,
    /// … for these mean delays, µs.
    pub goal_means_us: Vec<f64>,
    /// Whether every judged run met it (None when no run was judged).
    pub goal_met: Option<bool>,
    /// Whether the runs' files carry the corrected times (`subtract_offset`).
    pub offset_subtracted: bool,
    /// One row per run with monitor and truth.
    pub rows: Vec<AccuracyRow>,
}

fn read_json(p: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
}

fn run_dirs(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(dir.join("runs"))
        .map(|rd| {
            rd.filter_map(|e| {
                let e = e.ok()?;
                Some((e.file_name().into_string().ok()?, e.path()))
            })
            .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// `traffic.warmup_s` of a run, in ns.
fn warmup_ns(rd: &Path) -> i64 {
    read_json(&rd.join("params.json"))
        .and_then(|p| p.pointer("/traffic/warmup_s")?.as_f64())
        .map_or(0, |s| (s * 1e9) as i64)
}

/// The runs of `dir` with a udp monitor over a (non-flood) udp-relay.
pub fn accuracy_runs(dir: &Path) -> Result<Vec<AccuracyRun>, LabError> {
    let mut runs = Vec::new();
    for (name, rd) in run_dirs(dir) {
        let (mon, truth) = (rd.join("monitor.parquet"), rd.join("relay_truth.parquet"));
        let Some(relay) = read_json(&rd.join("params.json"))
            .as_ref()
            .and_then(RelaySettings::from_params)
        else {
            continue;
        };
        if !mon.is_file() || !truth.is_file() {
            continue;
        }
        let err = |e: nflab_analyze::AnalyzeError| LabError::Other(e.to_string());
        let (monitor_ns, truth_ns) =
            komon::read_steady_state(&mon, &truth, warmup_ns(&rd)).map_err(err)?;
        runs.push(AccuracyRun {
            run: name,
            relay,
            monitor_ns,
            truth_ns,
        });
    }
    Ok(runs)
}

/// Write `dir/monitor-accuracy.json`; with `subtract`, also each calibrated run's
/// `monitor_corrected.parquet` (`seq`, `sojourn_ns` = t_out − t_in − offset) and
/// `offset_subtracted` in its `monitor.json`. `None` when no run qualifies.
pub fn write(dir: &Path, subtract: bool) -> Result<Option<AccuracyFile>, LabError> {
    let runs = accuracy_runs(dir)?;
    if runs.is_empty() {
        return Ok(None);
    }
    let rows = accuracy_table(&runs);
    if subtract {
        for row in &rows {
            if let Some(offset) = row.offset_ns {
                subtract_in_run(&dir.join("runs").join(&row.run), row, offset)?;
            }
        }
    }
    let judged: Vec<bool> = rows.iter().filter_map(|r| r.goal_met).collect();
    let file = AccuracyFile {
        goal_mean_ns: komon::GOAL_MEAN_NS,
        goal_cv: komon::GOAL_CV,
        goal_means_us: komon::GOAL_MEANS_US.to_vec(),
        goal_met: (!judged.is_empty()).then(|| judged.iter().all(|g| *g)),
        offset_subtracted: subtract,
        rows,
    };
    crate::results::write_json(&dir.join("monitor-accuracy.json"), &file)?;
    Ok(Some(file))
}

fn subtract_in_run(rd: &Path, row: &AccuracyRow, offset: f64) -> Result<(), LabError> {
    let err = |e: nflab_analyze::AnalyzeError| LabError::Other(e.to_string());
    let c = komon::read_i64_columns(&rd.join("monitor.parquet"), &["seq", "t_in_ns", "t_out_ns"])
        .map_err(err)?;
    let offset_ns = offset.round() as i64;
    let corrected: Vec<Option<i64>> = c[1]
        .iter()
        .zip(&c[2])
        .map(|(a, b)| Some((*b)? - (*a)? - offset_ns))
        .collect();
    write_parquet(
        &Table {
            name: "monitor_corrected".into(),
            columns: vec![
                ("seq".into(), Column::I64(c[0].clone())),
                ("sojourn_ns".into(), Column::I64(corrected.clone())),
            ],
        },
        &rd.join("monitor_corrected.parquet"),
    )
    .map_err(err)?;
    let values: Vec<i64> = corrected.into_iter().flatten().collect();
    let path = rd.join("monitor.json");
    let mut json = read_json(&path).unwrap_or_else(|| serde_json::json!({}));
    json["offset_subtracted"] = serde_json::json!({
        "offset_ns": offset_ns,
        "calibration_run": row.calibration_run,
        "sojourn": mean_cv(&values),
        "p95_ns": komon::p95(&values),
    });
    crate::results::write_json(&path, &json)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parquet(path: &Path, cols: Vec<(&str, Vec<i64>)>) {
        write_parquet(
            &Table {
                name: "t".into(),
                columns: cols
                    .into_iter()
                    .map(|(n, v)| {
                        (
                            n.to_string(),
                            Column::I64(v.into_iter().map(Some).collect()),
                        )
                    })
                    .collect(),
            },
            path,
        )
        .unwrap();
    }

    fn run(dir: &Path, name: &str, relay: serde_json::Value, truth: &[i64], extra_ns: i64) {
        let rd = dir.join("runs").join(name);
        std::fs::create_dir_all(&rd).unwrap();
        std::fs::write(
            rd.join("params.json"),
            serde_json::json!({ "dut": { "kind": "udp-relay", "relay": relay } }).to_string(),
        )
        .unwrap();
        std::fs::write(rd.join("monitor.json"), "{\"kind\": \"udp\"}").unwrap();
        let t_in: Vec<i64> = (0..truth.len() as i64).map(|i| 1_000_000 * i).collect();
        let t_out: Vec<i64> = t_in
            .iter()
            .zip(truth)
            .map(|(a, t)| a + t + extra_ns)
            .collect();
        let seq: Vec<i64> = (0..truth.len() as i64).collect();
        parquet(
            &rd.join("monitor.parquet"),
            vec![("seq", seq.clone()), ("t_in_ns", t_in), ("t_out_ns", t_out)],
        );
        parquet(
            &rd.join("relay_truth.parquet"),
            vec![("seq", seq), ("processing_ns", truth.to_vec())],
        );
    }

    /// Known answer: the constant run's monitor is its truth + 20 µs, the uniform
    /// run's + 20.5 µs: subtracted, the uniform run's sojourns are truth + 500 ns.
    #[test]
    fn subtract_offset_writes_the_corrected_sojourns() {
        let dir = std::env::temp_dir().join(format!("nflab-accuracy-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        run(
            &dir,
            "000",
            serde_json::json!({ "distribution": "constant", "mean_us": 50.0 }),
            &[50_000; 50],
            20_000,
        );
        let uniform: Vec<i64> = (0..50).map(|i| 2_000 * i).collect();
        run(
            &dir,
            "001",
            serde_json::json!({ "distribution": "uniform", "mean_us": 50.0 }),
            &uniform,
            20_500,
        );
        let file = write(&dir, true).unwrap().expect("two runs qualify");
        assert!(file.offset_subtracted);
        assert_eq!(file.rows[1].offset_ns, Some(20_000.0));
        assert_eq!(file.goal_met, Some(true));
        let c = komon::read_i64_columns(
            &dir.join("runs/001/monitor_corrected.parquet"),
            &["sojourn_ns"],
        )
        .unwrap();
        let want: Vec<Option<i64>> = uniform.iter().map(|t| Some(t + 500)).collect();
        assert_eq!(c[0], want);
        let m = read_json(&dir.join("runs/001/monitor.json")).unwrap();
        assert_eq!(m["kind"], "udp", "the run's own keys stay");
        assert_eq!(m["offset_subtracted"]["offset_ns"], 20_000);
        assert_eq!(m["offset_subtracted"]["calibration_run"], "000");
        // Without subtract_offset the table is written, the runs are left alone.
        std::fs::remove_file(dir.join("runs/001/monitor_corrected.parquet")).unwrap();
        let file = write(&dir, false).unwrap().unwrap();
        assert!(!file.offset_subtracted);
        assert!(!dir.join("runs/001/monitor_corrected.parquet").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
