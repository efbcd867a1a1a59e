//! `nflab analyze RECORDS...`

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use nflab_analyze::crossrun::{evaluate_sla, parse_sla, sla_percentiles};
use nflab_analyze::export::{self, Bins, TableFormat};
use nflab_analyze::{
    parse_duration_ns, AnalysisConfig, AnomalySpec, FileAnalysis, Format, Options, Pct, Summary,
};

/// Exit code when an `--sla` clause fails.
const EXIT_SLA_FAILED: u8 = 3;

/// Arguments of `nflab analyze`.
#[derive(clap::Args)]
pub struct Args {
    /// Record files (.nfr, CSV with header seq,tx_ns,rx_ns, TRex-fork .data), or experiment
    /// directories (every runs/*/records.nfr is re-analysed with these options); `-` reads a
    /// TRex-fork stream from standard input (with --format trex). With
    /// --format pcap (or when every file ends in .pcap/.pcapng): pairs PRE POST of captures
    /// taken before and after the device under test; latency = POST − PRE timestamp, matched
    /// by probe (flow, seq), or by payload hash when PRE holds no nflab probe.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Anomaly definition N:T[:OPTIONS] (N consecutive packets with latency ≥ T), repeatable.
    /// T: 250us, p50*3, min+100us, mean*1.03; OPTIONS: gt, lost=break|inf|skip.
    #[arg(long = "anomaly", value_name = "N:T")]
    anomalies: Vec<AnomalySpec>,
    /// No anomaly definition at all (without it and without --anomaly: 2:250us and 2:750us).
    #[arg(long, conflicts_with = "anomalies")]
    no_anomalies: bool,
    /// Print the summary.json object(s) on stdout.
    #[arg(long)]
    json: bool,
    /// Input format: nfr, csv, trex, pcap (default: from the file name; .data = trex,
    /// .pcap/.pcapng = pcap). pcap reads the files as PRE POST capture pairs.
    #[arg(long, value_name = "FMT")]
    format: Option<InputFormat>,
    /// Extra latency percentile to report, in (0, 100], repeatable (e.g. 99.9999).
    #[arg(long = "percentile", value_name = "P")]
    percentiles: Vec<String>,
    /// HDR significant digits (1..=5) once percentiles leave exact mode.
    #[arg(long, default_value_t = 3, value_name = "D")]
    hdr_digits: u8,
    /// Latencies kept exactly before switching to an HDR histogram (default 16777216).
    #[arg(long, value_name = "N")]
    exact_limit: Option<u64>,
    /// Keep every latency in memory: exact percentiles whatever the size.
    #[arg(long, conflicts_with_all = ["hdr", "exact_limit"])]
    exact: bool,
    /// Use the HDR histogram from the first packet (bounded memory).
    #[arg(long, conflicts_with = "exact_limit")]
    hdr: bool,
    /// Per-window time series (p50/p99/max/loss) with windows of this length, e.g. 1s.
    #[arg(long, value_name = "DUR")]
    window: Option<String>,
    /// Trim by tx time: START[,END], e.g. 1s or 1s,1s (warm-up and cool-down).
    #[arg(long, value_name = "DUR[,DUR]")]
    trim: Option<String>,
    /// Late equals lost: packets later than this count as lost too (loss_ratio_with_deadline).
    #[arg(long, value_name = "DUR")]
    deadline: Option<String>,
    /// List the N packets with the highest latency.
    #[arg(long, default_value_t = 0, value_name = "N")]
    worst: usize,
    /// Latency percentiles per flow.
    #[arg(long)]
    per_flow: bool,
    /// Reorder window, sequence numbers per flow.
    #[arg(long, default_value_t = 65_536, value_name = "N")]
    reorder_window: u64,
    /// Anomaly events listed per spec (all are counted).
    #[arg(long, default_value_t = 100, value_name = "N")]
    anomaly_events: usize,
    /// SLA, e.g. 'p99.999<=350us,loss<=1e-5': prints verdicts; exit code 3 if one fails.
    #[arg(long, value_name = "EXPR")]
    sla: Option<String>,
    /// Write tables (latency CDF, histogram, windows, anomalies, worst), summary.json and
    /// latency.hlog (HdrHistogram interval log) into this directory.
    #[arg(long, value_name = "DIR")]
    export: Option<PathBuf>,
    /// Table format of --export: csv, json or parquet.
    #[arg(long, default_value = "csv", value_name = "FMT")]
    export_format: String,
    /// Histogram bins of --export: log:K (K bins per decade) or linear:WIDTH (e.g. linear:1us).
    #[arg(long, default_value = "log:20", value_name = "BINS")]
    bins: String,
    /// Fast path for seed 001's question on TRex-fork files: only counts, min/mean/stdev/max,
    /// HDR percentiles and anomalies, with the file split across cores.
    #[arg(long, conflicts_with = "exact")]
    anomalies_only: bool,
    /// Threads of --anomalies-only (default 0: one per core).
    #[arg(
        long,
        default_value_t = 0,
        value_name = "N",
        requires = "anomalies_only"
    )]
    threads: usize,
    /// Confidence level of the across-run intervals.
    #[arg(long, default_value_t = 0.95, value_name = "LEVEL")]
    confidence: f64,
}

/// `--format`: a record-file format, or capture pairs.
#[derive(Clone, Copy)]
enum InputFormat {
    File(Format),
    Pcap,
}

impl std::str::FromStr for InputFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pcap" | "pcapng" => Ok(InputFormat::Pcap),
            other => other
                .parse()
                .map(InputFormat::File)
                .map_err(|_| format!("unknown input format {other:?}; use nfr, csv, trex or pcap")),
        }
    }
}

fn is_capture_name(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .is_some_and(|e| matches!(e.as_str(), "pcap" | "pcapng" | "cap"))
}

fn dur(flag: &str, s: &str) -> anyhow::Result<u64> {
    parse_duration_ns(s).with_context(|| format!("--{flag} {s:?}"))
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let anomalies = if args.no_anomalies {
        Vec::new()
    } else if args.anomalies.is_empty() {
        vec!["2:250us".parse()?, "2:750us".parse()?]
    } else {
        args.anomalies.clone()
    };
    let sla = args.sla.as_deref().map(parse_sla).transpose()?;
    let mut percentiles = Vec::new();
    for p in &args.percentiles {
        percentiles.push(Pct::parse(p).with_context(|| {
            format!("--percentile {p:?} is not a percentile in (0, 100]; write e.g. 99.999")
        })?);
    }
    if let Some(s) = &sla {
        percentiles.extend(sla_percentiles(s));
    }
    if !(1..=5).contains(&args.hdr_digits) {
        bail!("--hdr-digits {} is outside 1..=5", args.hdr_digits);
    }
    let (trim_start_ns, trim_end_ns) = match args.trim.as_deref() {
        None => (0, 0),
        Some(t) => match t.split_once(',') {
            Some((a, b)) => (dur("trim", a)?, dur("trim", b)?),
            None => (dur("trim", t)?, 0),
        },
    };
    let window_ns = args
        .window
        .as_deref()
        .map(|w| dur("window", w))
        .transpose()?;
    if window_ns == Some(0) {
        bail!("--window must be longer than 0");
    }
    let export_format: TableFormat = args.export_format.parse().map_err(anyhow::Error::msg)?;
    let bins = Bins::parse(&args.bins).map_err(anyhow::Error::msg)?;
    let opts = Options {
        percentiles,
        exact_limit: if args.exact {
            u64::MAX
        } else if args.hdr {
            0
        } else {
            args.exact_limit
                .unwrap_or(nflab_analyze::dist::DEFAULT_EXACT_LIMIT)
        },
        hdr_digits: args.hdr_digits,
        worst_n: args.worst,
        window_ns,
        trim_start_ns,
        trim_end_ns,
        tx_span: None,
        deadline_ns: args
            .deadline
            .as_deref()
            .map(|d| dur("deadline", d))
            .transpose()?,
        reorder_window: args.reorder_window,
        anomaly_events: args.anomaly_events,
        per_flow_latency: args.per_flow,
        // The anomalies-only pass keeps no windows; its export has no interval log.
        interval_log: args.export.is_some() && !args.anomalies_only,
        ..Options::default()
    };
    let cfg = AnalysisConfig {
        anomalies,
        ..AnalysisConfig::default()
    };
    let pcap = match args.format {
        Some(InputFormat::Pcap) => true,
        Some(InputFormat::File(_)) => false,
        None => args.files.iter().all(|f| is_capture_name(f)),
    };
    let file_format = match args.format {
        Some(InputFormat::File(f)) => Some(f),
        _ => None,
    };
    // Capture pairs: one "file" per PRE POST pair, labelled "PRE -> POST".
    let pairs: Vec<(PathBuf, PathBuf)> = if pcap {
        if !args.files.len().is_multiple_of(2) {
            bail!(
                "pcap input takes pairs PRE POST (capture before and after the device under \
                 test); {} files were given",
                args.files.len()
            );
        }
        args.files
            .chunks_exact(2)
            .map(|c| (c[0].clone(), c[1].clone()))
            .collect()
    } else {
        Vec::new()
    };
    let files = if pcap {
        pairs
            .iter()
            .map(|(a, b)| PathBuf::from(format!("{} -> {}", a.display(), b.display())))
            .collect()
    } else {
        nflab_analyze::expand_inputs(&args.files).map_err(anyhow::Error::msg)?
    };
    let mut out: Vec<(PathBuf, Summary)> = Vec::new();
    let mut sla_failed = false;
    let mut verdicts_all = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let FileAnalysis {
            mut analysis,
            problem,
            ..
        } = match pairs.get(i) {
            Some((pre, post)) => nflab_analyze::analyze_pcap_pair(pre, post, &cfg, &opts),
            None if args.anomalies_only => {
                let f = file_format.unwrap_or_else(|| Format::guess(file));
                if f != Format::Trex {
                    bail!(
                        "--anomalies-only reads TRex-fork files (.data or --format trex); {} is \
                         read as {f:?}: drop --anomalies-only for it",
                        file.display()
                    );
                }
                nflab_analyze::analyze_trex_anomalies_only(file, &cfg, &opts, args.threads)
            }
            None => nflab_analyze::analyze_file_with(file, &cfg, &opts, file_format),
        }
        .with_context(|| format!("analysing {}", file.display()))?;
        if let Some(p) = problem {
            eprintln!("warning: {p}");
        }
        if let Some(dir) = &args.export {
            let dir = if files.len() > 1 {
                dir.join(format!("{i:03}"))
            } else {
                dir.clone()
            };
            export::write_exports(&dir, &mut analysis, export_format, bins)?;
        }
        if let Some(s) = &sla {
            let v = evaluate_sla(s, &analysis.summary);
            sla_failed |= v.iter().any(|v| !v.pass);
            verdicts_all.push(v);
        }
        out.push((file.clone(), analysis.summary));
    }
    let across = (out.len() > 1).then(|| across_runs(&out, args.confidence));
    if args.json {
        let mut values: Vec<serde_json::Value> = Vec::new();
        for (k, (_, s)) in out.iter().enumerate() {
            let mut v = serde_json::to_value(s)?;
            if let (Some(vs), serde_json::Value::Object(m)) = (verdicts_all.get(k), &mut v) {
                m.insert("sla".into(), serde_json::to_value(vs)?);
            }
            values.push(v);
        }
        if out.len() == 1 {
            println!("{}", serde_json::to_string_pretty(&values[0])?);
        } else {
            let mut m: serde_json::Map<String, serde_json::Value> = out
                .iter()
                .zip(values)
                .map(|((f, _), v)| (f.display().to_string(), v))
                .collect();
            if let Some(a) = across {
                m.insert("_across_runs".into(), a);
            }
            println!("{}", serde_json::to_string_pretty(&m)?);
        }
    } else {
        for (k, (f, s)) in out.iter().enumerate() {
            println!("{}", f.display());
            print_human(s);
            if let Some(vs) = verdicts_all.get(k) {
                for v in vs {
                    println!(
                        "  sla       {:<24} {}  (measured {})",
                        v.clause,
                        if v.pass { "PASS" } else { "FAIL" },
                        v.value.map_or("none".into(), |x| format!("{x}"))
                    );
                }
            }
        }
        if let Some(serde_json::Value::Object(m)) = across {
            println!(
                "across {} runs (mean [t-CI] [bootstrap CI], {:.0}%):",
                out.len(),
                args.confidence * 100.0
            );
            for (k, v) in m {
                println!("  {k:<12} {v}");
            }
        }
    }
    Ok(if sla_failed {
        ExitCode::from(EXIT_SLA_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

fn across_runs(out: &[(PathBuf, Summary)], level: f64) -> serde_json::Value {
    nflab_analyze::across::across_runs(out.iter().map(|(_, s)| s), level)
}

fn print_human(s: &Summary) {
    use nflab_lab::study::results::human_ns;
    let p = &s.packets;
    println!(
        "  packets   sent {}  received {}  lost {} ({:.3e})  reordered {}  duplicated {}",
        p.sent, p.received, p.lost, s.loss_ratio, p.reordered, p.duplicated
    );
    let l = &s.latency_ns;
    let h = |v: Option<i64>| human_ns(v.map(|x| x as f64));
    println!(
        "  latency   min {}  mean {}  stdev {}  max {}   [{}]",
        h(l.min),
        human_ns(l.mean),
        human_ns(l.stdev),
        h(l.max),
        s.percentiles.method
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
    for q in s.latency_quantiles.iter().skip(6) {
        println!("            p{} {}", q.p, h(Some(q.ns)));
    }
    let j = &s.jitter_ns;
    println!(
        "  jitter    rfc3550 {}  |ipdv| p50 {}  p99 {}  pdv p99 {}  |ΔL| mean {}",
        human_ns(j.rfc3550),
        h(j.ipdv_p50.map(|v| v as i64)),
        h(j.ipdv_p99.map(|v| v as i64)),
        h(j.pdv_p99),
        human_ns(j.consecutive_mean),
    );
    if let Some(loss) = &s.loss {
        if loss.bursts > 0 || loss.late.is_some() {
            println!(
                "  loss      bursts {} (mean {}, max {}){}",
                loss.bursts,
                loss.burst_mean.map_or("-".into(), |m| format!("{m:.2}")),
                loss.burst_max.unwrap_or(0),
                loss.loss_ratio_with_deadline
                    .map_or(String::new(), |r| format!(
                        "  late {} → ratio with deadline {r:.3e}",
                        loss.late.unwrap_or(0)
                    ))
            );
        }
    }
    for (a, d) in s.anomalies.iter().zip(
        s.anomaly_details
            .iter()
            .map(Some)
            .chain(std::iter::repeat(None)),
    ) {
        println!(
            "  anomalies {}: {} ({} packets, longest {}){}",
            d.map_or(
                format!("n={} t={}", a.n, human_ns(Some(a.t_ns as f64))),
                |d| d.spec.clone()
            ),
            a.count,
            a.packets,
            a.longest,
            d.and_then(|d| d.per_hour)
                .map_or(String::new(), |r| format!(", {r:.1}/h"))
        );
    }
    for w in s.windows.iter().take(1000) {
        println!(
            "  window {:>5}  packets {:>8}  lost {:>6}  p50 {}  p99 {}  max {}",
            w.index,
            w.packets,
            w.lost,
            h(w.p50_ns),
            h(w.p99_ns),
            h(w.max_ns)
        );
    }
    for n in &s.notes {
        println!("  note: {n}");
    }
}
