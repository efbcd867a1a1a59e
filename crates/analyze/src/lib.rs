//! Metrics over nflab per-packet records: loss, reordering, duplicates,
//! latency percentiles, RFC 3550 jitter, IPDV and latency anomalies.
//!
//! [`analyze`] turns the records of one run (in arrival order) plus the
//! generator's sent counts into a [`Summary`], whose JSON is the
//! `summary.json` of DESIGN §3.4. [`analyze_file`] reads an `.nfr` file,
//! [`read_csv`] a CSV of `seq,tx_ns,rx_ns`.
//!
//! Every definition, with its formula, is in `docs/metrics.md` at the
//! workspace root; the field docs here are short reminders.
//!
//! # Guarantees
//!
//! * Percentiles are **exact** (nearest rank over all values, held in
//!   memory); the summary says so in `"percentiles"`.
//! * No NaN or infinity reaches the JSON: a statistic without data is `null`.
//! * Warm-up packets (`seq < warmup` of their flow) are excluded from every
//!   figure.
//!
//! # Cost
//!
//! One pass in arrival order with a hash set per flow (duplicates,
//! reordering), one sort of the latencies, one sort by `(flow, seq)` (IPDV,
//! anomalies). Memory is about 50 bytes per received packet.
//!
//! # Limitations and caveats
//!
//! * Everything is in memory; very long runs need the HDR-histogram path of
//!   DESIGN §3.4, which this first version does not have.
//! * Latency is `rx_ns - tx_ns` of two clocks; it is only as good as their
//!   synchronisation. Negative latencies are kept and flagged in `notes`.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use nflab_record::{ClockInfo, FlowSent, Record, TailState};

mod input;
mod metrics;
mod spec;

pub use input::{analyze_file, read_csv};
pub use metrics::analyze;
pub use spec::{parse_duration_ns, AnomalySpec};

/// What to compute and the context of the run.
#[derive(Debug, Clone, Default)]
pub struct AnalysisConfig {
    /// Anomaly definitions to count; one [`AnomalyStats`] each, in this order.
    pub anomalies: Vec<AnomalySpec>,
    /// Offered rate, copied into `rate.offered_pps`.
    pub offered_pps: Option<f64>,
    /// Measured transmit rate, copied into `rate.tx_pps`.
    pub tx_pps: Option<f64>,
    /// Clock of the timestamps, copied into `clock`. [`analyze_file`] uses
    /// the file's clock when `source` is empty.
    pub clock: ClockInfo,
}

/// Packet counts, warm-up excluded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketCounts {
    /// Packets sent after warm-up (`sent - warmup`, summed over flows).
    pub sent: u64,
    /// Distinct `(flow, seq)` received.
    pub received: u64,
    /// `sent - received` per flow (never negative), summed.
    pub lost: u64,
    /// Packets arriving with a seq below the next expected one (RFC 4737 §3.3).
    pub reordered: u64,
    /// Extra copies of an already received `(flow, seq)`.
    pub duplicated: u64,
}

/// Rates, packets per second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RateStats {
    /// Offered rate from the configuration.
    pub offered_pps: Option<f64>,
    /// Transmit rate from the configuration.
    pub tx_pps: Option<f64>,
    /// `(received - 1) / (last rx - first rx)`; `null` with fewer than 2
    /// packets or a zero time span.
    pub rx_pps: Option<f64>,
}

/// One-way latency `rx_ns - tx_ns`, ns, of the first copy of each received
/// packet. All `null` when nothing was received.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    /// Smallest latency.
    pub min: Option<i64>,
    /// Arithmetic mean (not rounded).
    pub mean: Option<f64>,
    /// Population standard deviation (divides by N), not rounded.
    pub stdev: Option<f64>,
    /// Median, nearest rank.
    pub p50: Option<i64>,
    /// 90th percentile, nearest rank.
    pub p90: Option<i64>,
    /// 99th percentile, nearest rank.
    pub p99: Option<i64>,
    /// 99.9th percentile, nearest rank.
    #[serde(rename = "p99.9")]
    pub p99_9: Option<i64>,
    /// 99.99th percentile, nearest rank.
    #[serde(rename = "p99.99")]
    pub p99_99: Option<i64>,
    /// 99.999th percentile, nearest rank.
    #[serde(rename = "p99.999")]
    pub p99_999: Option<i64>,
    /// Largest latency.
    pub max: Option<i64>,
}

/// Delay variation, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct JitterStats {
    /// RFC 3550 interarrival jitter after the last packet, in arrival order
    /// (not rounded); `null` with fewer than 2 packets.
    pub rfc3550: Option<f64>,
    /// Median of |IPDV| over consecutive received sequence numbers; `null`
    /// when no two consecutive sequence numbers were received.
    pub ipdv_p50: Option<u64>,
    /// 99th percentile of |IPDV|.
    pub ipdv_p99: Option<u64>,
}

/// Result for one [`AnomalySpec`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnomalyStats {
    /// Minimum run length of the spec.
    pub n: u32,
    /// Threshold of the spec, ns.
    pub t_ns: u64,
    /// Number of anomalies (runs of length >= n), summed over flows.
    pub count: u64,
    /// Packets in those anomalies.
    pub packets: u64,
    /// Length of the longest anomaly, 0 if there is none.
    pub longest: u64,
}

/// How the percentiles were computed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PercentileMethod {
    /// `"exact"` (all values sorted in memory).
    pub method: String,
    /// The definition used.
    pub definition: String,
}

impl Default for PercentileMethod {
    fn default() -> Self {
        PercentileMethod {
            method: "exact".into(),
            definition: "nearest-rank: the value at 1-based rank ceil(p/100 * N) of the N \
                         sorted values (rank clamped to 1..N); no interpolation"
                .into(),
        }
    }
}

/// The result of an analysis; its JSON is `summary.json` (DESIGN §3.4).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Packet counts.
    pub packets: PacketCounts,
    /// `lost / sent` (0 when `sent` is 0).
    pub loss_ratio: f64,
    /// Rates.
    pub rate: RateStats,
    /// Latency statistics, ns.
    pub latency_ns: LatencyStats,
    /// Jitter statistics, ns.
    pub jitter_ns: JitterStats,
    /// One entry per configured anomaly spec.
    pub anomalies: Vec<AnomalyStats>,
    /// Clock of the timestamps.
    pub clock: ClockInfo,
    /// How percentiles were computed.
    pub percentiles: PercentileMethod,
    /// The run was interrupted; set by the caller (and by [`analyze_file`]
    /// from the trailer).
    pub interrupted: bool,
    /// Caveats found while analysing (clock problems, missing sent counts, ...).
    pub notes: Vec<String>,
}

impl Summary {
    /// The summary as pretty-printed JSON.
    pub fn to_json_pretty(&self) -> String {
        // Summary has only string map keys and serde_json writes non-finite
        // floats as null, so serialization cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| {
            serde_json::json!({ "error": format!("cannot serialize summary: {e}") }).to_string()
        })
    }
}

/// Errors of parsing analysis options and reading inputs.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// A duration did not parse. Use a number with a unit: 250us, 1.5ms, 100ns, 2s.
    #[error("invalid duration {text:?}: {reason}; write a number with a unit like 250us, 1.5ms, 100ns or 2s")]
    BadDuration {
        /// The text given.
        text: String,
        /// What is wrong.
        reason: String,
    },
    /// An anomaly spec did not parse. Use N:T, e.g. 2:250us.
    #[error("invalid anomaly spec {text:?}: {reason}; the valid form is N:T with T like 250us, 1ms, 500ns")]
    BadAnomalySpec {
        /// The text given.
        text: String,
        /// What is wrong.
        reason: String,
    },
    /// The `.nfr` file could not be read (see the inner error).
    #[error(transparent)]
    Record(#[from] nflab_record::RecordError),
    /// The CSV file could not be opened or read.
    #[error("cannot read CSV file {path}: {source}")]
    CsvIo {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The CSV header lacks a required column. The header must name seq, tx_ns and rx_ns.
    #[error("CSV file {path}: {reason}; the header must name the columns seq,tx_ns,rx_ns (optionally flow,wire_len,flags)")]
    CsvHeader {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A CSV row is malformed. Fix or delete that line.
    #[error("CSV file {path}, line {line}: {reason} in {text:?}")]
    CsvRow {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// The line as read.
        text: String,
        /// What is wrong.
        reason: String,
    },
}
