//! `nflab analyze RECORDS...`

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use nflab_analyze::{AnalysisConfig, AnomalySpec, Summary};

/// Arguments of `nflab analyze`.
#[derive(clap::Args)]
pub struct Args {
    /// Record files: .nfr, or CSV with header seq,tx_ns,rx_ns.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Anomaly definition N:T (N consecutive packets with latency ≥ T), repeatable.
    #[arg(long = "anomaly", value_name = "N:T")]
    anomalies: Vec<AnomalySpec>,
    /// Print the summary.json object(s) on stdout.
    #[arg(long)]
    json: bool,
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let anomalies = if args.anomalies.is_empty() {
        vec!["2:250us".parse()?, "2:750us".parse()?]
    } else {
        args.anomalies.clone()
    };
    let mut out = Vec::new();
    for file in &args.files {
        let cfg = AnalysisConfig {
            anomalies: anomalies.clone(),
            ..AnalysisConfig::default()
        };
        let is_csv = file
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
        let summary = if is_csv {
            let (records, sent) = nflab_analyze::read_csv(file)?;
            nflab_analyze::analyze(&records, &sent, &cfg)
        } else {
            let (s, tail) = nflab_analyze::analyze_file(file, &cfg)
                .with_context(|| format!("analysing {}", file.display()))?;
            if let nflab_record::TailState::Truncated {
                discarded_bytes,
                reason,
            } = tail
            {
                eprintln!(
                    "warning: {}: truncated tail ({discarded_bytes} bytes discarded: {reason}); analysed every complete block",
                    file.display()
                );
            }
            s
        };
        out.push((file.clone(), summary));
    }
    if args.json {
        if out.len() == 1 {
            println!("{}", out[0].1.to_json_pretty());
        } else {
            let v: serde_json::Map<String, serde_json::Value> = out
                .iter()
                .map(|(f, s)| {
                    (
                        f.display().to_string(),
                        serde_json::to_value(s).unwrap_or_default(),
                    )
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
    } else {
        for (f, s) in &out {
            println!("{}", f.display());
            print_human(s);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_human(s: &Summary) {
    use nflab_lab::results::human_ns;
    let p = &s.packets;
    println!(
        "  packets   sent {}  received {}  lost {} ({:.3e})  reordered {}  duplicated {}",
        p.sent, p.received, p.lost, s.loss_ratio, p.reordered, p.duplicated
    );
    let l = &s.latency_ns;
    let h = |v: Option<i64>| human_ns(v.map(|x| x as f64));
    println!(
        "  latency   min {}  mean {}  stdev {}  max {}",
        h(l.min),
        human_ns(l.mean),
        human_ns(l.stdev),
        h(l.max)
    );
    println!(
        "            p50 {}  p90 {}  p99 {}  p99.9 {}  p99.99 {}  p99.999 {}",
        h(l.p50),
        h(l.p90),
        h(l.p99),
        h(l.p99_9),
        h(l.p99_99),
        h(l.p99_999)
    );
    let j = &s.jitter_ns;
    println!(
        "  jitter    rfc3550 {}  |ipdv| p50 {}  p99 {}",
        human_ns(j.rfc3550),
        h(j.ipdv_p50.map(|v| v as i64)),
        h(j.ipdv_p99.map(|v| v as i64))
    );
    for a in &s.anomalies {
        println!(
            "  anomalies n={} t={}: {} ({} packets, longest {})",
            a.n,
            human_ns(Some(a.t_ns as f64)),
            a.count,
            a.packets,
            a.longest
        );
    }
    for n in &s.notes {
        println!("  note: {n}");
    }
}
