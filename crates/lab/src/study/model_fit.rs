//! `[model]` of a spec, at the end of a study: the batch-polling model of
//! `nflab-model` fitted to the finished experiment, its predictions written to
//! `model.json` for the report — by `nflab run` and `run_experiment` alike, and by
//! `nflab model fit DIR` with its flags.

use std::path::{Path, PathBuf};

use nflab_analyze::dist::{Distribution, Pct, DEFAULT_EXACT_LIMIT, DEFAULT_HDR_DIGITS};
use nflab_model::fit::{self, FitConfig, RunObservation};
use nflab_model::resource::{CacheLevels, InterruptLoad};
use serde::Serialize;

use crate::artifacts::files::write_json;
use crate::error::LabError;
use crate::spec::Spec;

/// What the fit at the end of a study gave: where the predictions are, and how they
/// were made.
#[derive(Debug, Clone, Serialize)]
pub struct ModelFit {
    /// `DIR/model.json`.
    pub path: PathBuf,
    /// The fit's method.
    pub method: String,
}

/// Who asked, as `model.json` names it.
const SOURCE: &str = "nflab run ([model] of the spec)";

/// With a `[model]` section in `spec` (and `fit` not false): fit the models to the
/// finished experiment in `dir` and write `DIR/model.json` for the report. A failed
/// fit does not fail the study: model.json then holds the reason, which the report
/// shows, and stderr says it once.
pub fn write_model(dir: &Path, spec: &Spec) -> Option<ModelFit> {
    let m = spec.model.as_ref().filter(|m| m.fit)?;
    match fit_and_write(dir, &FitSettings::from_spec(m), SOURCE) {
        Ok((r, path)) => Some(ModelFit {
            path,
            method: r.method,
        }),
        Err(e) => {
            eprintln!("note: [model]: no predictions ({e}); the report has no model overlay");
            let json = serde_json::json!({"source": SOURCE, "error": e.to_string()});
            if let Err(w) = write_json(&dir.join("model.json"), &json) {
                eprintln!("warning: {w}");
            }
            None
        }
    }
}

/// Settings of a fit: the flags of `nflab model fit`, or `[model]` of a spec.
#[derive(Debug, Clone)]
pub struct FitSettings {
    /// Core clock of the DuT, Hz.
    pub cpu_hz: Option<f64>,
    /// Cores of the DuT.
    pub cores: f64,
    /// Framework I/O cycles per packet.
    pub c_io: f64,
    /// Baseline median latency, ns (default: the loopback runs').
    pub baseline_median_ns: Option<f64>,
    /// Poller batch size (default: dut.batch, else 32).
    pub batch: Option<usize>,
    /// Queue capacity (default: dut.queue, else 4096).
    pub queue: Option<usize>,
    /// Interrupt sources of the DuT core.
    pub interrupts: Vec<InterruptLoad>,
    /// Packets simulated per run, at most.
    pub sim_packets: u64,
}

impl FitSettings {
    /// The settings of a spec's `[model]` section.
    pub fn from_spec(m: &crate::spec::model::ModelSection) -> FitSettings {
        FitSettings {
            cpu_hz: m.cpu_hz,
            cores: m.cores,
            c_io: m.c_io,
            baseline_median_ns: m.baseline_median_ns,
            batch: m.batch.map(|b| b as usize),
            queue: m.queue.map(|q| q as usize),
            // Validated when the spec was parsed.
            interrupts: m
                .interrupts
                .iter()
                .filter_map(|s| crate::spec::model::parse_interrupt(s).ok())
                .map(|(rate_hz, duration_ns)| InterruptLoad {
                    rate_hz,
                    duration_ns,
                })
                .collect(),
            sim_packets: m.sim_packets,
        }
    }
}

/// Fit the models to the experiment in `dir` and write `dir/model.json`, the
/// predictions the report lays over the measurements (docs/report.md);
/// `source` names who asked, for the file.
pub fn fit_and_write(
    dir: &Path,
    s: &FitSettings,
    source: &str,
) -> Result<(fit::FitReport, PathBuf), LabError> {
    let runs_dir = dir.join("runs");
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&runs_dir)
        .map_err(|e| {
            LabError::Other(format!(
                "cannot list {}: give the directory `nflab run` wrote (it holds runs/NNN/): {e}",
                runs_dir.display()
            ))
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("params.json").exists() && p.join("summary.json").exists())
        .collect();
    entries.sort();
    let mut runs = Vec::new();
    // Medians of the loopback runs, whose mean is the baseline.
    let mut baselines = Distribution::new(DEFAULT_EXACT_LIMIT, DEFAULT_HDR_DIGITS);
    let mut batch_from_spec = None;
    let mut queue_from_spec = None;
    for dir in &entries {
        let params = read_json(&dir.join("params.json"))?;
        let summary = read_json(&dir.join("summary.json"))?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut latency = measured_latency(&dir.join("records.nfr"));
        let kind = params["dut"]["kind"].as_str().unwrap_or("");
        if kind == "loopback" {
            if let Some(Some(m)) = latency.quantiles(&[pct("50")]).first() {
                baselines.record(m.value);
            }
            continue;
        }
        let offered = params["traffic"]["rate_pps"]
            .as_f64()
            .or_else(|| summary["rate"]["offered_pps"].as_f64());
        let Some(offered) = offered else {
            eprintln!("note: run {name} has no numeric traffic.rate_pps; skipped");
            continue;
        };
        // sheep: TSC cycles of calculation plus `accesses` random reads into
        // a table of `table_bytes`, costed with the cache levels of seed 000.
        let sh = &params["dut"]["sheep"];
        let sheep = sh["cycles_per_packet"]
            .as_f64()
            .or_else(|| sh["cycles"].as_f64())
            .or_else(|| params["dut"]["cycles_per_packet"].as_f64())
            .map(|c| {
                let accesses = sh["accesses"].as_f64().unwrap_or(0.0);
                let table = sh["table_bytes"].as_f64().unwrap_or(0.0);
                c + accesses * CacheLevels::SANDY_BRIDGE.access_cycles(table)
            });
        if batch_from_spec.is_none() {
            batch_from_spec = params["dut"]["batch"].as_u64().map(|b| b as usize);
        }
        if queue_from_spec.is_none() {
            queue_from_spec = params["dut"]["queue"].as_u64().map(|b| b as usize);
        }
        runs.push(RunObservation {
            name,
            offered_pps: offered,
            carried_pps: summary["rate"]["rx_pps"].as_f64().unwrap_or(0.0),
            loss_ratio: summary["loss_ratio"].as_f64().unwrap_or(0.0),
            latency_ns: latency,
            sheep_cycles: sheep,
            poisson: params["traffic"]["pattern"].as_str() == Some("poisson"),
            sent: summary["packets"]["sent"].as_u64(),
        });
    }
    let baseline = s.baseline_median_ns.or_else(|| baselines.mean());
    let r = fit::fit(
        &mut runs,
        &FitConfig {
            cpu_hz: s.cpu_hz,
            cores: s.cores,
            c_io: s.c_io,
            baseline_ns: baseline,
            batch: s.batch.or(batch_from_spec).unwrap_or(32),
            queue_capacity: s.queue.or(queue_from_spec).unwrap_or(4096),
            interrupts: s.interrupts.clone(),
            sim_packets: s.sim_packets,
            seed: 1,
        },
    )
    .map_err(|e| LabError::Other(e.to_string()))?;
    // The report lays these predictions over the measurements (docs/report.md).
    let overlay = serde_json::json!({
        "source": source,
        "method": r.method,
        "predictions": r.runs.iter().map(|x| serde_json::json!({
            "run": x.name,
            "p50_ns": x.predicted_p50_ns,
            "mean_ns": x.predicted_mean_ns,
        })).collect::<Vec<_>>(),
    });
    let model_json = dir.join("model.json");
    write_json(&model_json, &overlay)?;
    Ok((r, model_json))
}

fn read_json(path: &Path) -> Result<serde_json::Value, LabError> {
    let text = std::fs::read_to_string(path).map_err(|e| LabError::artifact(path, e))?;
    serde_json::from_str(&text)
        .map_err(|e| LabError::Other(format!("{} is not valid JSON: {e}", path.display())))
}

fn pct(p: &str) -> Pct {
    Pct::parse(p).unwrap_or_else(|| unreachable!("{p} is a percentile"))
}

/// The latencies of a run's measured packets (warm-up, second copies and
/// packets beyond the reorder window left out) as the engine's
/// distribution: the one behind the run's summary.json, so the fit's
/// measured median is the summary's p50. Empty when the run kept no records.
fn measured_latency(records: &Path) -> Distribution {
    use nflab_analyze::{analyze_file_with, AnalysisConfig, Format, Options};
    match analyze_file_with(
        records,
        &AnalysisConfig::default(),
        &Options::default(),
        Some(Format::Nfr),
    ) {
        Ok(fa) => fa.analysis.latency,
        Err(_) => Distribution::new(DEFAULT_EXACT_LIMIT, DEFAULT_HDR_DIGITS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nflab_record::{FlowSent, Metadata, Record, RecordWriter, Trailer};
    use serde_json::json;
    use std::path::PathBuf;

    /// A finished two-run tree: loopback (20 µs) and linux-router (50 µs) at 10 kpps.
    fn tree(name: &str, model: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("nflab-run-model-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let spec = format!("[experiment]\nname = \"m\"\n[traffic]\nrate_pps = 10000\n{model}");
        Spec::parse(&spec, "test").unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("spec.toml"), spec).unwrap();
        for (run, dut, lat) in [
            ("000", "loopback", 20_000u64),
            ("001", "linux-router", 50_000),
        ] {
            let rd = dir.join("runs").join(run);
            std::fs::create_dir_all(&rd).unwrap();
            let params = json!({"run": run, "dut": {"kind": dut},
                                "traffic": {"rate_pps": 10000, "pattern": "cbr"}});
            std::fs::write(rd.join("params.json"), params.to_string()).unwrap();
            let summary = json!({"packets": {"sent": 1000, "received": 1000}, "loss_ratio": 0.0,
                                 "rate": {"offered_pps": 10000.0, "rx_pps": 10000.0},
                                 "latency_ns": {"p50": lat, "mean": lat}});
            std::fs::write(rd.join("summary.json"), summary.to_string()).unwrap();
            let mut w =
                RecordWriter::create(&rd.join("records.nfr"), &Metadata::default()).unwrap();
            for seq in 0..1000u64 {
                let tx = 1_000_000_000 + seq * 100_000;
                let rx = tx + lat + seq % 7;
                w.push(&Record {
                    seq,
                    tx_ns: tx,
                    rx_ns: rx,
                    ..Default::default()
                })
                .unwrap();
            }
            w.finish(&Trailer {
                sent: vec![FlowSent {
                    flow: 0,
                    sent: 1000,
                    warmup: 0,
                }],
                ..Default::default()
            })
            .unwrap();
        }
        dir
    }

    /// What the end of `run_experiment` does with the tree's stored spec.
    fn fit(dir: &Path) -> Option<ModelFit> {
        let (spec, _) = Spec::from_file(&dir.join("spec.toml")).unwrap();
        write_model(dir, &spec)
    }

    #[test]
    fn a_model_section_writes_predictions_for_the_report() {
        let dir = tree("ok", "[model]\nsim_packets = 2000\n");
        let ModelFit { path, method } = fit(&dir).expect("predictions");
        assert_eq!(path, dir.join("model.json"));
        assert!(method.contains("median"), "{method}");
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(m["source"], "nflab run ([model] of the spec)");
        let p = &m["predictions"][0];
        // Calibrated at the lowest rate: t_CPU = 50 µs − 20 µs baseline, so the
        // predicted median of the one linux-router run is near its 50 µs.
        assert_eq!(p["run"], "001");
        let p50 = p["p50_ns"].as_f64().unwrap();
        assert!((p50 - 50_000.0).abs() < 2_000.0, "{p50}");
        // The report draws the overlay from it.
        let w = nflab_report::write_report_with(
            &dir,
            &nflab_report::Options {
                no_png: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(w.figures.iter().any(|f| f == "model"), "{:?}", w.figures);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn without_a_model_section_or_with_fit_false_nothing_is_written() {
        for (name, model) in [("none", ""), ("off", "[model]\nfit = false\n")] {
            let dir = tree(name, model);
            assert!(fit(&dir).is_none());
            assert!(!dir.join("model.json").exists());
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    #[test]
    fn a_failed_fit_leaves_its_reason_for_the_report() {
        let dir = tree("fail", "[model]\n");
        // No non-loopback run left to fit.
        std::fs::remove_dir_all(dir.join("runs/001")).unwrap();
        assert!(fit(&dir).is_none());
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("model.json")).unwrap())
                .unwrap();
        let why = m["error"].as_str().unwrap().to_string();
        assert!(!why.is_empty());
        nflab_report::write_report_with(
            &dir,
            &nflab_report::Options {
                no_png: true,
                ..Default::default()
            },
        )
        .unwrap();
        let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
        assert!(html.contains("model fit of the spec"), "reason not shown");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
