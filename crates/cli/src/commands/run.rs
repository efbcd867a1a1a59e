//! `nflab run SPEC.toml`

use std::io::IsTerminal;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use nflab_lab::{study::results, RunOptions};

/// Arguments of `nflab run`.
#[derive(clap::Args)]
pub struct Args {
    /// Experiment spec (TOML, DESIGN §3.5).
    #[arg(required_unless_present = "resume")]
    spec: Option<PathBuf>,
    /// Finish an interrupted experiment: keep its complete runs, redo the rest.
    #[arg(long, value_name = "DIR", conflicts_with = "spec")]
    resume: Option<PathBuf>,
    /// Parent directory of the experiment's artifact tree.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Print the results as JSON on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// List the runs the spec expands to, and do nothing.
    #[arg(long)]
    dry_run: bool,
    /// Stream the study's events as JSON lines to FILE (`jsonl` or - for stdout): study
    /// start, run start/end, progress samples, study end (docs/experiments.md).
    #[arg(long, value_name = "FILE|-")]
    events: Option<PathBuf>,
    /// Draw the report's figures as SVG only, without the PNG copies (faster;
    /// the PNGs are for documents that cannot embed SVG).
    #[arg(long)]
    no_png: bool,
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    if args.dry_run {
        let path = match (&args.spec, &args.resume) {
            (Some(p), _) => p.clone(),
            (None, Some(dir)) => dir.join("spec.toml"),
            (None, None) => unreachable!("clap requires a spec or --resume"),
        };
        let (spec, text) = nflab_lab::Spec::from_file(&path)?;
        let plans = spec.expand(&text)?;
        for p in &plans {
            let params: Vec<String> = p.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!(
                "{:03}  rep {}  {}  {}",
                p.index,
                p.repetition,
                p.spec.dut.kind.as_str(),
                params.join(" ")
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.json
        && args
            .events
            .as_deref()
            .is_some_and(super::progress::events_to_stdout)
    {
        anyhow::bail!(
            "--events jsonl (or -) and --json both write to stdout: give --events a file name, or drop --json"
        );
    }
    let stop = super::stop_flag()?;
    let (version, commit) = super::version();
    // On a terminal the bar shows what the progress lines would.
    let terminal = std::io::stderr().is_terminal();
    let opts = RunOptions {
        out: args.out.clone(),
        resume: args.resume.clone(),
        progress: false,
        version,
        commit,
        after_failure: Some(if args.no_png {
            |d: &std::path::Path| report_after_failure(d, true)
        } else {
            |d: &std::path::Path| report_after_failure(d, false)
        }),
        events: super::progress::observers(terminal, args.events.as_deref())?,
    };
    let spec_path = args.spec.clone().unwrap_or_default();
    let result = nflab_lab::run_experiment(&spec_path, &opts, stop)?;
    let model = if result.interrupted {
        None
    } else {
        write_model(&result.dir)
    };
    nflab_lab::failpoint::hit("report");
    let report = report_of(&result.dir, args.no_png)
        .with_context(|| format!("writing the report of {}", result.dir.display()));
    let report = match report {
        Ok(r) => r,
        // The runs' failures (a full disk, say) are the news, not the report they also stopped.
        Err(e) if !result.failed_runs.is_empty() => {
            for f in &result.failed_runs {
                eprintln!("failed: run {}: {}", f.run, f.error);
            }
            eprintln!("note: no report: {e:#}");
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        // JSON lines on stdout stay parseable: the table then goes to stderr.
        let events_on_stdout = args
            .events
            .as_deref()
            .is_some_and(super::progress::events_to_stdout);
        let mut out: Box<dyn std::io::Write> = if events_on_stdout {
            Box::new(std::io::stderr())
        } else {
            Box::new(std::io::stdout())
        };
        write!(out, "{}", results::format_table(&result.runs))?;
        if !result.rfc2544.is_empty() {
            writeln!(out)?;
            write!(
                out,
                "{}",
                nflab_lab::study::rfc2544::format_verdicts(&result.rfc2544)
            )?;
        }
        writeln!(out, "\n{}", latency_line(&result.runs))?;
        if result.resumed_runs > 0 {
            writeln!(
                out,
                "resumed: {} runs were complete already and kept",
                result.resumed_runs
            )?;
        }
        writeln!(out, "artifacts: {}", result.dir.display())?;
        if let Some((path, method)) = &model {
            writeln!(out, "model:     {} ({method})", path.display())?;
        }
        writeln!(out, "report:    {}", report.display())?;
    }
    if !result.failed_runs.is_empty() {
        // experiment.on_run_failure = "continue": the study went on; each failure said once.
        for f in &result.failed_runs {
            eprintln!("failed: run {}: {}", f.run, f.error);
        }
        return Ok(ExitCode::from(1));
    }
    if result.interrupted {
        eprintln!(
            "interrupted: the completed runs and the records of the interrupted one are kept"
        );
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

/// What the latency column subtracts, from the runs' timestamp sources (the records'
/// metadata, via summary.json → timestamps).
fn latency_line(runs: &[results::RunRow]) -> String {
    let label = |s: &str| match s {
        "kernel-xdp" => "kernel timestamp of the XDP program that sent it".to_string(),
        other => format!("{} timestamp", other.replace('-', " ")),
    };
    let mut tx = std::collections::BTreeSet::new();
    let mut rx = std::collections::BTreeSet::new();
    for r in runs {
        match &r.summary.timestamps {
            Some(t) => {
                tx.insert(label(&t.tx));
                rx.insert(label(&t.rx));
            }
            None => {
                tx.insert(label("application"));
                rx.insert(label("kernel-software"));
            }
        }
    }
    let join =
        |s: &std::collections::BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(" / ");
    let hw = tx.iter().chain(rx.iter()).any(|s| s.contains("hardware"));
    format!(
        "latency: one-way, rx ({}) − tx ({}), {}",
        join(&rx),
        join(&tx),
        if hw {
            "hardware stamps in NIC (PHC) time"
        } else {
            "CLOCK_REALTIME"
        }
    )
}

/// With a `[model]` section (and `fit` not false): fit the models to the
/// finished experiment and write `DIR/model.json` for the report. A failed
/// fit does not fail the run: model.json then holds the reason, which the
/// report shows, and stderr says it once.
fn write_model(dir: &Path) -> Option<(PathBuf, String)> {
    let (spec, _) = nflab_lab::Spec::from_file(&dir.join("spec.toml")).ok()?;
    let m = spec.model.filter(|m| m.fit)?;
    let settings = super::model::FitSettings::from_spec(&m);
    match super::model::fit_and_write(dir, &settings, "nflab run ([model] of the spec)") {
        Ok((r, path)) => Some((path, r.method)),
        Err(e) => {
            let reason = format!("{e:#}");
            eprintln!("note: [model]: no predictions ({reason}); the report has no model overlay");
            let json =
                serde_json::json!({"source": "nflab run ([model] of the spec)", "error": reason});
            let _ = std::fs::write(dir.join("model.json"), json.to_string() + "\n");
            None
        }
    }
}

/// Write the experiment's report; the path of its page.
fn report_of(
    dir: &std::path::Path,
    no_png: bool,
) -> Result<std::path::PathBuf, nflab_report::ReportError> {
    let opts = nflab_report::Options {
        no_png,
        ..Default::default()
    };
    let w = nflab_report::write_report_with(dir, &opts)?;
    Ok(w.report.unwrap_or_else(|| dir.join("report.html")))
}

/// The report of what a failed experiment left (its completed runs). The failure is
/// what the user must read, so a report that cannot be written (a full disk) adds nothing.
fn report_after_failure(dir: &std::path::Path, no_png: bool) {
    if let Ok(path) = report_of(dir, no_png) {
        eprintln!("report of the completed runs: {}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nflab_record::{FlowSent, Metadata, Record, RecordWriter, Trailer};
    use serde_json::json;

    /// A finished two-run tree: loopback (20 µs) and linux-router (50 µs) at 10 kpps.
    fn tree(name: &str, model: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("nflab-run-model-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let spec = format!("[experiment]\nname = \"m\"\n[traffic]\nrate_pps = 10000\n{model}");
        nflab_lab::Spec::parse(&spec, "test").unwrap();
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

    #[test]
    fn a_model_section_writes_predictions_for_the_report() {
        let dir = tree("ok", "[model]\nsim_packets = 2000\n");
        let (path, method) = write_model(&dir).expect("predictions");
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
            assert!(write_model(&dir).is_none());
            assert!(!dir.join("model.json").exists());
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    #[test]
    fn a_failed_fit_leaves_its_reason_for_the_report() {
        let dir = tree("fail", "[model]\n");
        // No non-loopback run left to fit.
        std::fs::remove_dir_all(dir.join("runs/001")).unwrap();
        assert!(write_model(&dir).is_none());
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
