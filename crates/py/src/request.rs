//! The options of `nflab analyze`, as the Python API takes them (keyword
//! arguments, passed here as one JSON object), turned into the engine's
//! [`AnalysisConfig`] and [`Options`] exactly as the CLI turns its flags
//! (`crates/cli/src/commands/analyze.rs`); the tests in `python/tests` check
//! that both print the same JSON.

use nflab_analyze::crossrun::{parse_sla, sla_percentiles, SlaClause};
use nflab_analyze::export::{Bins, TableFormat};
use nflab_analyze::{parse_duration_ns, AnalysisConfig, AnomalySpec, Format, Options, Pct};
use serde::Deserialize;

/// The anomaly definitions of `nflab analyze` without `--anomaly`.
pub const DEFAULT_ANOMALIES: [&str; 2] = ["2:250us", "2:750us"];

/// One request; each field is the CLI flag of the same name (`-` → `_`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Request {
    /// `--anomaly N:T[:OPTIONS]`, repeatable; empty = [`DEFAULT_ANOMALIES`].
    pub anomalies: Vec<String>,
    /// `--no-anomalies`: no definition at all.
    pub no_anomalies: bool,
    /// `--format`: nfr, csv, trex or pcap (default: from the file name).
    pub format: Option<String>,
    /// `--percentile P`, repeatable.
    pub percentiles: Vec<String>,
    /// `--hdr-digits`.
    pub hdr_digits: u8,
    /// `--exact-limit`.
    pub exact_limit: Option<u64>,
    /// `--exact`.
    pub exact: bool,
    /// `--hdr`.
    pub hdr: bool,
    /// `--window DUR`.
    pub window: Option<String>,
    /// `--trim DUR[,DUR]`.
    pub trim: Option<String>,
    /// `--deadline DUR`.
    pub deadline: Option<String>,
    /// `--worst N`.
    pub worst: usize,
    /// `--per-flow`.
    pub per_flow: bool,
    /// `--reorder-window`.
    pub reorder_window: u64,
    /// `--anomaly-events`.
    pub anomaly_events: usize,
    /// `--sla EXPR`.
    pub sla: Option<String>,
    /// `--anomalies-only`.
    pub anomalies_only: bool,
    /// `--threads` (of `--anomalies-only`).
    pub threads: usize,
    /// `--confidence`.
    pub confidence: f64,
    /// `--export DIR`: tables, summary.json and latency.hlog per input
    /// (`DIR/NNN/` when there are several).
    pub export: Option<String>,
    /// `--export-format`: csv, json or parquet.
    pub export_format: String,
    /// `--bins`: log:K or linear:WIDTH.
    pub bins: String,
    /// Not a CLI flag: min/max latency per slice of this much tx time
    /// (`Analysis::series`, the latency-over-time figure). Leaves the summary alone.
    pub series_ns: Option<u64>,
    /// Not a CLI flag: keep the tx gaps (`Analysis::tx_gap`, the generator
    /// self-check figure). Leaves the summary alone.
    pub tx_gaps: bool,
}

impl Default for Request {
    fn default() -> Self {
        Request {
            anomalies: Vec::new(),
            no_anomalies: false,
            format: None,
            percentiles: Vec::new(),
            hdr_digits: 3,
            exact_limit: None,
            exact: false,
            hdr: false,
            window: None,
            trim: None,
            deadline: None,
            worst: 0,
            per_flow: false,
            reorder_window: 65_536,
            anomaly_events: 100,
            sla: None,
            anomalies_only: false,
            threads: 0,
            confidence: 0.95,
            export: None,
            export_format: "csv".into(),
            bins: "log:20".into(),
            series_ns: None,
            tx_gaps: false,
        }
    }
}

/// Where the records come from, by `format` (or the file names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// Record files of one format, or guessed per file.
    Files(Option<Format>),
    /// PRE POST capture pairs.
    PcapPairs,
}

/// A request resolved into what the engine takes.
pub struct Resolved {
    /// Anomaly specs and context.
    pub cfg: AnalysisConfig,
    /// Options.
    pub opts: Options,
    /// The SLA clauses, if any.
    pub sla: Option<Vec<SlaClause>>,
    /// Where and how `--export` writes, if asked.
    pub export: Option<(std::path::PathBuf, TableFormat, Bins)>,
}

fn dur(key: &str, s: &str) -> Result<u64, String> {
    parse_duration_ns(s).map_err(|e| format!("{key}={s:?}: {e}"))
}

impl Request {
    /// Parse the JSON object of keyword arguments; an unknown key or a bad
    /// value is one sentence naming it.
    pub fn from_json(text: &str) -> Result<Request, String> {
        serde_json::from_str(text).map_err(|e| {
            format!(
                "analysis options: {e}; valid keys are the long flags of `nflab analyze` \
                 with _ for - (anomalies, no_anomalies, format, percentiles, hdr_digits, exact_limit, exact, \
                 hdr, window, trim, deadline, worst, per_flow, reorder_window, anomaly_events, \
                 sla, anomalies_only, threads, confidence, export, export_format, bins) plus series_ns \
                 and tx_gaps"
            )
        })
    }

    /// How the inputs are read, as the CLI decides it.
    pub fn input(&self, files: &[String]) -> Result<Input, String> {
        match self.format.as_deref() {
            Some("pcap" | "pcapng") => Ok(Input::PcapPairs),
            Some(other) => other.parse().map(|f| Input::Files(Some(f))).map_err(|_| {
                format!("format={other:?} is not an input format; use nfr, csv, trex or pcap")
            }),
            None if !files.is_empty() && files.iter().all(|f| is_capture_name(f)) => {
                Ok(Input::PcapPairs)
            }
            None => Ok(Input::Files(None)),
        }
    }

    /// The engine's configuration and options: the CLI's mapping of its flags.
    pub fn resolve(&self) -> Result<Resolved, String> {
        if self.no_anomalies && !self.anomalies.is_empty() {
            return Err("no_anomalies=True cannot be combined with anomalies".into());
        }
        let specs: Vec<&str> = if self.no_anomalies {
            Vec::new()
        } else if self.anomalies.is_empty() {
            DEFAULT_ANOMALIES.to_vec()
        } else {
            self.anomalies.iter().map(String::as_str).collect()
        };
        let anomalies = specs
            .iter()
            .map(|s| {
                s.parse::<AnomalySpec>()
                    .map_err(|e| format!("anomalies: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let sla = self
            .sla
            .as_deref()
            .map(|s| parse_sla(s).map_err(|e| format!("sla={s:?}: {e}")))
            .transpose()?;
        let mut percentiles = Vec::new();
        for p in &self.percentiles {
            percentiles.push(Pct::parse(p).ok_or_else(|| {
                format!("percentiles: {p:?} is not a percentile in (0, 100]; write e.g. 99.999")
            })?);
        }
        if let Some(s) = &sla {
            percentiles.extend(sla_percentiles(s));
        }
        if !(1..=5).contains(&self.hdr_digits) {
            return Err(format!("hdr_digits={} is outside 1..=5", self.hdr_digits));
        }
        if self.exact && (self.hdr || self.exact_limit.is_some()) {
            return Err("exact=True cannot be combined with hdr or exact_limit".into());
        }
        if self.hdr && self.exact_limit.is_some() {
            return Err("hdr=True cannot be combined with exact_limit".into());
        }
        if self.anomalies_only && self.exact {
            return Err("anomalies_only=True cannot be combined with exact".into());
        }
        if self.threads != 0 && !self.anomalies_only {
            return Err("threads is an option of anomalies_only=True".into());
        }
        let (trim_start_ns, trim_end_ns) = match self.trim.as_deref() {
            None => (0, 0),
            Some(t) => match t.split_once(',') {
                Some((a, b)) => (dur("trim", a)?, dur("trim", b)?),
                None => (dur("trim", t)?, 0),
            },
        };
        let window_ns = self
            .window
            .as_deref()
            .map(|w| dur("window", w))
            .transpose()?;
        if window_ns == Some(0) {
            return Err("window must be longer than 0".into());
        }
        let opts = Options {
            percentiles,
            exact_limit: if self.exact {
                u64::MAX
            } else if self.hdr {
                0
            } else {
                self.exact_limit
                    .unwrap_or(nflab_analyze::dist::DEFAULT_EXACT_LIMIT)
            },
            hdr_digits: self.hdr_digits,
            worst_n: self.worst,
            window_ns,
            trim_start_ns,
            trim_end_ns,
            tx_span: None,
            deadline_ns: self
                .deadline
                .as_deref()
                .map(|d| dur("deadline", d))
                .transpose()?,
            reorder_window: self.reorder_window,
            anomaly_events: self.anomaly_events,
            per_flow_latency: self.per_flow,
            series_ns: self.series_ns,
            tx_gaps: self.tx_gaps,
            // The anomalies-only pass keeps no windows; its export has no interval log.
            interval_log: self.export.is_some() && !self.anomalies_only,
        };
        let export = match &self.export {
            None => None,
            Some(dir) => Some((
                std::path::PathBuf::from(dir),
                self.export_format
                    .parse::<TableFormat>()
                    .map_err(|e| format!("export_format: {e}"))?,
                Bins::parse(&self.bins).map_err(|e| e.replacen("--bins", "bins", 1))?,
            )),
        };
        let cfg = AnalysisConfig {
            anomalies,
            ..AnalysisConfig::default()
        };
        Ok(Resolved {
            cfg,
            opts,
            sla,
            export,
        })
    }
}

/// A capture file, by its extension (as the CLI).
pub fn is_capture_name(p: &str) -> bool {
    std::path::Path::new(p)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .is_some_and(|e| matches!(e.as_str(), "pcap" | "pcapng" | "cap"))
}
