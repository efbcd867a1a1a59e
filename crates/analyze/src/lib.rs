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

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use nflab_record::{ClockInfo, FlowSent, Record, TailState};

pub mod acf;
pub mod across;
pub mod bootstrap;
pub mod correlation;
pub mod crossrun;
pub mod curves;
pub mod design;
mod diffs;
pub mod dist;
pub mod divergence;
mod engine;
pub mod export;
mod fast;
pub mod import;
mod input;
pub mod komon;
pub mod ks;
pub mod linfit;
mod metrics;
pub mod order_ci;
pub mod proportion;
pub mod prrt;
pub mod record_table;
pub mod rotation;
mod spec;
pub mod sum_quantile;
mod trex;

pub use dist::{Distribution, Method, Pct};
pub use engine::{Engine, Options, MAX_SERIES_SLICES};
pub use fast::analyze_trex_anomalies_only;
pub use import::{analyze_pcap_pair, read_pcap_pair, CaptureReader, CapturedPacket, PcapPair};
pub use input::{
    analyze_csv_bytes, analyze_file, analyze_file_with, analyze_trex_bytes, expand_inputs,
    read_csv, read_csv_from, Format,
};
pub use metrics::{analyze, analyze_with};
pub use spec::{parse_duration_ns, AnomalySpec, Base, Cmp, LiveRun, LostMode, Threshold};

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
    /// Signed IPDV distribution: mean (RFC 5481 §4.1; near 0 by construction).
    #[serde(default)]
    pub ipdv_mean: Option<f64>,
    /// Signed IPDV: smallest (most negative) value.
    #[serde(default)]
    pub ipdv_min: Option<i64>,
    /// Signed IPDV: 1st percentile.
    #[serde(default)]
    pub ipdv_p1: Option<i64>,
    /// Signed IPDV: 99th percentile.
    #[serde(default)]
    pub ipdv_p99_signed: Option<i64>,
    /// Signed IPDV: largest value.
    #[serde(default)]
    pub ipdv_max: Option<i64>,
    /// 99.9th percentile of |IPDV|.
    #[serde(default)]
    pub ipdv_p99_9: Option<u64>,
    /// PDV (RFC 5481 §4.2) = latency − min latency: median.
    #[serde(default)]
    pub pdv_p50: Option<i64>,
    /// PDV 99th percentile.
    #[serde(default)]
    pub pdv_p99: Option<i64>,
    /// PDV 99.9th percentile.
    #[serde(default)]
    pub pdv_p99_9: Option<i64>,
    /// PDV maximum = max − min latency.
    #[serde(default)]
    pub pdv_max: Option<i64>,
    /// Standard deviation of latency (the "jitter" of some tools), ns.
    #[serde(default)]
    pub stdev: Option<f64>,
    /// |L_i − L_{i−1}| over consecutive arrivals (seed 002, RFC 4689 style): mean.
    #[serde(default)]
    pub consecutive_mean: Option<f64>,
    /// |L_i − L_{i−1}|: population standard deviation.
    #[serde(default)]
    pub consecutive_stdev: Option<f64>,
    /// |L_i − L_{i−1}|: maximum.
    #[serde(default)]
    pub consecutive_max: Option<i64>,
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

impl AnomalyStats {
    /// The short form of `d`.
    pub fn of(d: &AnomalyDetail) -> AnomalyStats {
        AnomalyStats {
            n: d.n,
            t_ns: d.t_ns,
            count: d.count,
            packets: d.packets,
            longest: d.longest,
        }
    }
}

/// How the percentiles were computed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PercentileMethod {
    /// `"exact"` (all values sorted in memory).
    pub method: String,
    /// The definition used.
    pub definition: String,
    /// HDR significant digits (HDR method only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub significant_digits: Option<u8>,
    /// The error bound of the reported percentiles (HDR method only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<String>,
}

impl Default for PercentileMethod {
    fn default() -> Self {
        PercentileMethod {
            method: "exact".into(),
            definition: "nearest-rank: the value at 1-based rank ceil(p/100 * N) of the N \
                         sorted values (rank clamped to 1..N); no interpolation"
                .into(),
            significant_digits: None,
            bound: None,
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
    /// Every reported latency percentile with its error interval
    /// (standard set plus those asked for).
    #[serde(default)]
    pub latency_quantiles: Vec<QuantileEntry>,
    /// Loss bursts and late-equals-lost.
    #[serde(default)]
    pub loss: Option<LossStats>,
    /// Reordering per RFC 4737.
    #[serde(default)]
    pub reorder: Option<ReorderStats>,
    /// Per-flow figures.
    #[serde(default)]
    pub flows: Vec<FlowSummary>,
    /// Details per anomaly spec, in the order of `anomalies`.
    #[serde(default)]
    pub anomaly_details: Vec<AnomalyDetail>,
    /// Per-window time series (when a window length was given).
    #[serde(default)]
    pub windows: Vec<WindowStats>,
    /// The packets with the highest latency, highest first (when asked for).
    #[serde(default)]
    pub worst: Vec<WorstPacket>,
    /// The measured span and the trimming applied.
    #[serde(default)]
    pub span: Option<SpanInfo>,
    /// Who took the tx and rx timestamps, from the records' metadata (`.nfr` input only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamps: Option<TimestampSources>,
    /// Each way's figures when the run sent in the reverse direction or both ways
    /// (`traffic.direction`): "forward" and "reverse", each with the fields above; the
    /// top level is then the first way's ("forward" unless only "reverse" was sent).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub directions: BTreeMap<String, Summary>,
}

/// Who took each side's timestamps (`summary.json` → `timestamps`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimestampSources {
    /// "application", "kernel-software", "hardware" or "hardware+kernel-software".
    pub tx: String,
    /// Same names, for the receive side.
    pub rx: String,
    /// With kernel TX stamps: received probes whose record kept the application TX stamp
    /// because no kernel stamp arrived for them (record flags say which stamp each has).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_application_fallbacks: Option<u64>,
}

/// One latency percentile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct QuantileEntry {
    /// The percentile, e.g. 99.9.
    pub p: f64,
    /// The reported value, ns.
    pub ns: i64,
    /// The exact nearest-rank value lies in `[lower_ns, ns]` (equal when exact).
    pub lower_ns: i64,
}

/// Loss in detail.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LossStats {
    /// Number of loss bursts (maximal runs of consecutive lost sequence numbers).
    pub bursts: u64,
    /// Mean burst length, packets.
    pub burst_mean: Option<f64>,
    /// Longest burst, packets.
    pub burst_max: Option<i64>,
    /// `(length, count)` of bursts, shortest first (at most 64 entries;
    /// HDR-bucketed lengths beyond 65 536 bursts).
    pub burst_lengths: Vec<(i64, u64)>,
    /// The deadline of late-equals-lost, ns.
    pub deadline_ns: Option<u64>,
    /// Received packets later than the deadline.
    pub late: Option<u64>,
    /// `(lost + late) / sent`.
    pub loss_ratio_with_deadline: Option<f64>,
}

/// Reordering, RFC 4737.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReorderStats {
    /// `reordered / received` (RFC 4737 §4.1.3 reordered ratio).
    pub ratio: f64,
    /// Reordering extent (RFC 4737 §4.2.2), packets: mean.
    pub extent_mean: Option<f64>,
    /// Extent: 99th percentile.
    pub extent_p99: Option<i64>,
    /// Extent: maximum.
    pub extent_max: Option<i64>,
    /// Packets reordered by more than the reorder window (their seq-order
    /// metrics saw them as lost).
    pub beyond_window: u64,
}

/// Figures of one flow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowSummary {
    /// Flow id.
    pub flow: u16,
    /// Counts, as in `packets`.
    pub packets: PacketCounts,
    /// `lost / sent`.
    pub loss_ratio: f64,
    /// Received packets later than the deadline.
    pub late: Option<u64>,
    /// Latency of the flow (with `per_flow_latency`; HDR percentiles).
    pub latency_ns: Option<LatencyStats>,
}

/// Min/mean/max of a quantity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StatSummary {
    /// Smallest.
    pub min: Option<i64>,
    /// Mean.
    pub mean: Option<f64>,
    /// Largest.
    pub max: Option<i64>,
}

impl StatSummary {
    pub(crate) fn of(d: &mut Distribution) -> StatSummary {
        StatSummary {
            min: d.min(),
            mean: d.mean(),
            max: d.max(),
        }
    }
}

/// Distribution of the time between the starts of consecutive anomalies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct InterStats {
    /// Number of gaps.
    pub count: u64,
    /// Smallest gap, ns.
    pub min: Option<i64>,
    /// Mean gap, ns.
    pub mean: Option<f64>,
    /// Median gap, ns.
    pub p50: Option<i64>,
    /// 90th percentile, ns.
    pub p90: Option<i64>,
    /// 99th percentile, ns.
    pub p99: Option<i64>,
    /// Largest gap, ns.
    pub max: Option<i64>,
}

/// One anomaly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct AnomalyEvent {
    /// Flow.
    pub flow: u16,
    /// Sequence number of its first packet.
    pub start_seq: u64,
    /// tx time of its first received packet, ns (for a run that starts with
    /// lost packets: of the last received packet before it).
    pub start_tx_ns: Option<u64>,
    /// Length, packets (lost ones included with `lost=inf`).
    pub packets: u64,
    /// Lost packets in it (`lost=inf` only).
    pub lost: u64,
    /// tx of its last received packet − tx of its first, ns.
    pub duration_ns: u64,
    /// Highest latency in it, ns (`null` if all its packets were lost).
    pub peak_ns: Option<i64>,
    /// tx time of the peak packet, ns.
    pub peak_tx_ns: Option<u64>,
}

/// Everything about one anomaly spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AnomalyDetail {
    /// The spec, normalised (`2:250000ns`, `2:p50*3:gt`).
    pub spec: String,
    /// Minimum run length.
    pub n: u32,
    /// The threshold used, ns (relative thresholds resolved).
    pub t_ns: u64,
    /// `ge` or `gt`.
    pub cmp: Cmp,
    /// `break`, `inf` or `skip`.
    pub lost_mode: LostMode,
    /// Number of anomalies.
    pub count: u64,
    /// Packets in anomalies.
    pub packets: u64,
    /// Lost packets in anomalies (`lost=inf`).
    pub lost_packets: u64,
    /// Longest anomaly, packets.
    pub longest: u64,
    /// Anomalies per hour of measured time.
    pub per_hour: Option<f64>,
    /// Anomalies starting in each hour since the start of the measurement.
    pub hourly: Vec<u64>,
    /// Duration of anomalies, ns.
    pub duration_ns: StatSummary,
    /// Time between the starts of consecutive anomalies (per flow), ns.
    pub inter_anomaly_ns: InterStats,
    /// The first anomalies, in the order they ended.
    pub events: Vec<AnomalyEvent>,
    /// More anomalies exist than are listed in `events`.
    pub events_truncated: bool,
}

/// One time window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowStats {
    /// Window index from the start of the measurement.
    pub index: u64,
    /// Start (tx clock), ns.
    pub start_ns: u64,
    /// End (exclusive), ns.
    pub end_ns: u64,
    /// Packets received that were sent in the window.
    pub packets: u64,
    /// Packets lost (attributed to the window of the last received packet before them).
    pub lost: u64,
    /// `lost / (packets + lost)`.
    pub loss_ratio: f64,
    /// Smallest latency, ns.
    pub min_ns: Option<i64>,
    /// Mean latency, ns.
    pub mean_ns: Option<f64>,
    /// Median latency, ns.
    pub p50_ns: Option<i64>,
    /// 99th percentile latency, ns.
    pub p99_ns: Option<i64>,
    /// Largest latency, ns.
    pub max_ns: Option<i64>,
}

/// Smallest and largest latency of the packets sent in one slice of time
/// (`Options::series_ns`), for drawing latency over time at any N.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySlice {
    /// Start of the slice (tx clock), ns.
    pub start_ns: u64,
    /// Smallest latency in it, ns.
    pub min_ns: i64,
    /// Largest latency in it, ns.
    pub max_ns: i64,
}

/// The outcome of analysing one file.
pub struct FileAnalysis {
    /// The analysis.
    pub analysis: Analysis,
    /// How an `.nfr` file ended ([`TailState::Complete`] for other formats
    /// unless they were cut short).
    pub tail: TailState,
    /// A problem that ended reading early (truncated file, bad CSV row): one
    /// sentence naming the file and the place; everything before it was analysed.
    pub problem: Option<String>,
}

/// One of the worst packets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct WorstPacket {
    /// Flow.
    pub flow: u16,
    /// Sequence number.
    pub seq: u64,
    /// Transmit time, ns.
    pub tx_ns: u64,
    /// Receive time, ns.
    pub rx_ns: u64,
    /// Latency, ns.
    pub latency_ns: i64,
}

/// The measured span.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SpanInfo {
    /// Earliest tx of a measured packet, ns.
    pub first_tx_ns: Option<u64>,
    /// Latest tx of a measured packet, ns.
    pub last_tx_ns: Option<u64>,
    /// Trimming window by tx time `[start, end]`, when trimming was asked for.
    pub trim: Option<(u64, u64)>,
}

/// The result of [`analyze_with`] / [`Engine::finish`]: the summary plus the
/// distributions behind it (for CDF, histogram and interval-log exports).
#[derive(Debug)]
pub struct Analysis {
    /// The summary.
    pub summary: Summary,
    /// The latency distribution of the measured packets.
    pub latency: Distribution,
    /// Signed IPDV distribution.
    pub ipdv: Distribution,
    /// One HDR histogram per closed window `(index, histogram)`, when
    /// `Options::interval_log` was set.
    pub window_histograms: Vec<(u64, hdrhistogram::Histogram<u64>)>,
    /// Window length, ns (for the interval log).
    pub window_ns: Option<u64>,
    /// Start of window 0 (tx clock), ns.
    pub origin_ns: Option<u64>,
    /// Min/max latency per slice of `Options::series_ns` (empty without it).
    pub series: Vec<LatencySlice>,
    /// Gaps between the tx times of consecutive received sequence numbers of
    /// a flow, ns (when `Options::tx_gaps`).
    pub tx_gap: Option<Distribution>,
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
    #[error("invalid anomaly spec {text:?}: {reason}; the valid form is N:T[:OPTIONS] with T like 250us, 1ms, 500ns, p50*3 or min+100us and OPTIONS like gt,lost=inf")]
    BadAnomalySpec {
        /// The text given.
        text: String,
        /// What is wrong.
        reason: String,
    },
    /// The `.nfr` file could not be read (see the inner error).
    #[error(transparent)]
    Record(#[from] nflab_record::RecordError),
    /// A file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file is not usable as the input it was given as (see the reason).
    #[error("{path}: {reason}")]
    Input {
        /// The file.
        path: PathBuf,
        /// What is wrong, and what to do.
        reason: String,
    },
    /// An option value is invalid (see the reason).
    #[error("{0}")]
    Invalid(String),
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
