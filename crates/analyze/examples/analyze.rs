//! The engine of `nflab analyze` without the rest of the CLI (used by
//! `bench/analyze`, which must not depend on the lab crates building):
//! `analyze FILE [--format trex|csv|nfr] [--anomaly N:T]... [--exact|--hdr]
//! [--percentile P]... [--events N] [--anomalies-only [--threads N]]` prints the
//! summary JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use nflab_analyze::{analyze_file_with, analyze_trex_anomalies_only, AnalysisConfig, Options, Pct};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut file = None;
    let mut cfg = AnalysisConfig::default();
    let mut opts = Options::default();
    let mut format = None;
    let mut anomalies_only = false;
    let mut threads = 0usize;
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_default();
        match a.as_str() {
            "--format" => format = val().parse().ok(),
            "--anomaly" => match val().parse() {
                Ok(s) => cfg.anomalies.push(s),
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            },
            "--exact" => opts.exact_limit = u64::MAX,
            "--hdr" => opts.exact_limit = 0,
            "--percentile" => opts.percentiles.extend(Pct::parse(&val())),
            "--events" => opts.anomaly_events = val().parse().unwrap_or(100),
            "--anomalies-only" => anomalies_only = true,
            // Threads of the anomalies-only pass (0: one per core); the full pass has one.
            "--threads" => threads = val().parse().unwrap_or(0),
            _ => file = Some(PathBuf::from(a)),
        }
    }
    let Some(file) = file else {
        eprintln!("usage: analyze FILE [--format F] [--anomaly N:T]... [--exact|--hdr]");
        return ExitCode::from(2);
    };
    let result = if anomalies_only {
        analyze_trex_anomalies_only(&file, &cfg, &opts, threads)
    } else {
        analyze_file_with(&file, &cfg, &opts, format)
    };
    match result {
        Ok(fa) => {
            if let Some(p) = fa.problem {
                eprintln!("warning: {p}");
            }
            println!("{}", fa.analysis.summary.to_json_pretty());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
