//! The results of an experiment: one row per run, as a terminal table and
//! as `results.parquet` (polars, pandas and DuckDB read it directly); and the
//! writers of every artifact file of the tree.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use nflab_analyze::Summary;
use parquet::basic::{Compression, Repetition, Type as PhysicalType};
use parquet::basic::{ConvertedType, LogicalType};
use parquet::column::writer::ColumnWriter;
use parquet::data_type::ByteArray;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use serde::Serialize;

use crate::app::results::{AppColumns, AppValue};
use crate::artifacts::files::write_json;
use crate::artifacts::snapshot::Snapshot;
use crate::error::LabError;
use crate::spec::RunPlan;

/// One run's parameters and results, flat.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    /// Run directory name (`000`).
    pub run: String,
    /// Repetition index.
    pub repetition: u32,
    /// Swept values as written (`{"traffic.rate_pps": "10000"}`).
    pub params: BTreeMap<String, String>,
    /// DuT kind.
    pub dut: String,
    /// Frame size including FCS.
    pub frame_bytes: u64,
    /// The run's summary.
    pub summary: Summary,
    /// The application's figures (`prrt.json`, `ncs.json`), [`crate::app::results`].
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "crate::app::results::serialize_columns"
    )]
    pub app: AppColumns,
    /// The `[[pair]]` that ran it, when the spec has pairs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pair: Option<String>,
}

impl RunRow {
    /// Build from a plan and its summary.
    pub fn new(plan: &RunPlan, summary: &Summary) -> RunRow {
        RunRow {
            run: format!("{:03}", plan.index),
            repetition: plan.repetition,
            params: plan
                .params
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string().trim_matches('"').to_string()))
                .collect(),
            dut: plan.spec.dut.kind.as_str().to_string(),
            frame_bytes: plan.spec.traffic.frame_bytes,
            summary: summary.clone(),
            app: Vec::new(),
            pair: None,
        }
    }

    /// With the application columns of the run in `run_dir`.
    pub fn with_app(mut self, run_dir: &Path) -> RunRow {
        self.app = crate::app::results::read_app_columns(run_dir);
        self
    }

    /// The same row, run on `pair`.
    pub fn with_pair(mut self, pair: Option<String>) -> RunRow {
        self.pair = pair;
        self
    }
}

/// Nanoseconds as a short human figure ("12.3 µs").
pub fn human_ns(ns: Option<f64>) -> String {
    match ns {
        None => "—".into(),
        Some(v) if v.abs() < 1_000.0 => format!("{v:.0} ns"),
        Some(v) if v.abs() < 1_000_000.0 => format!("{:.1} µs", v / 1e3),
        Some(v) if v.abs() < 1e9 => format!("{:.2} ms", v / 1e6),
        Some(v) => format!("{:.2} s", v / 1e9),
    }
}

/// A threshold as written in specs ("250us", "1ms", "1500ns").
pub fn short_ns(ns: u64) -> String {
    match ns {
        0 => "0".into(),
        n if n % 1_000_000_000 == 0 => format!("{}s", n / 1_000_000_000),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

/// A rate as a short human figure ("50.0 kpps").
pub fn human_pps(pps: Option<f64>) -> String {
    match pps {
        None => "max".into(),
        Some(v) if v < 1e3 => format!("{v:.0} pps"),
        Some(v) if v < 1e6 => format!("{:.1} kpps", v / 1e3),
        Some(v) => format!("{:.2} Mpps", v / 1e6),
    }
}

/// The results table of DESIGN's quickstart: one line per run.
pub fn format_table(rows: &[RunRow]) -> String {
    let anomaly_header = rows
        .first()
        .map(|r| {
            r.summary
                .anomalies
                .iter()
                .map(|a| format!("anom {}:{}", a.n, short_ns(a.t_ns)))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let mut header: Vec<String> = [
        "run", "DuT", "offered", "received", "loss", "p50", "p99", "p99.9", "max",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    header.extend(anomaly_header);
    // Swept parameters other than the DuT and the rate get a column each.
    let mut extra: Vec<&String> = rows
        .iter()
        .flat_map(|r| r.params.keys())
        .filter(|k| *k != "dut.kind" && *k != "traffic.rate_pps")
        .collect();
    extra.sort();
    extra.dedup();
    header.extend(
        extra
            .iter()
            .map(|k| k.rsplit('.').next().unwrap_or(k).to_string()),
    );
    let mut lines: Vec<Vec<String>> = vec![header];
    for r in rows {
        // A run that sent the reverse way gets a line per way, its run marked → or ←.
        let ways: Vec<(String, &Summary)> = match directions_sent(&r.summary) {
            "forward" => vec![(r.run.clone(), &r.summary)],
            _ => r
                .summary
                .directions
                .iter()
                .map(|(way, s)| {
                    let arrow = if way == "reverse" { "←" } else { "→" };
                    (format!("{} {arrow}", r.run), s)
                })
                .collect(),
        };
        for (label, s) in ways {
            let l = &s.latency_ns;
            let mut line = vec![
                label,
                r.dut.clone(),
                human_pps(s.rate.offered_pps),
                human_pps(s.rate.rx_pps).replace("max", "—"),
                format!("{:.2e}", s.loss_ratio).replace("0.00e0", "0"),
                human_ns(l.p50.map(|v| v as f64)),
                human_ns(l.p99.map(|v| v as f64)),
                human_ns(l.p99_9.map(|v| v as f64)),
                human_ns(l.max.map(|v| v as f64)),
            ];
            line.extend(s.anomalies.iter().map(|a| a.count.to_string()));
            line.extend(
                extra
                    .iter()
                    .map(|k| r.params.get(*k).cloned().unwrap_or_default()),
            );
            if r.summary.interrupted {
                line[0].push('*');
            }
            lines.push(line);
        }
    }
    let cols = lines.iter().map(|l| l.len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            lines
                .iter()
                .filter_map(|l| l.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        let cells: Vec<String> = l
            .iter()
            .enumerate()
            .map(|(c, s)| {
                let pad = widths[c] - s.chars().count();
                if c < 2 {
                    format!("{s}{}", " ".repeat(pad))
                } else {
                    format!("{}{s}", " ".repeat(pad))
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
        if i == 0 {
            out.push_str(&"─".repeat(widths.iter().sum::<usize>() + 2 * (cols.max(1) - 1)));
            out.push('\n');
        }
    }
    if rows.iter().any(|r| r.summary.interrupted) {
        out.push_str("* interrupted run: figures cover what was sent before the signal\n");
    }
    if rows.iter().any(|r| !r.summary.directions.is_empty()) {
        out.push_str(
            "→ forward: the generator's port to the recorder's; ← reverse: the other way\n",
        );
    }
    out
}

enum Column {
    Str(String, Vec<Option<String>>),
    I64(String, Vec<Option<i64>>),
    F64(String, Vec<Option<f64>>),
    Bool(String, Vec<Option<bool>>),
}

impl Column {
    fn name(&self) -> &str {
        match self {
            Column::Str(n, _) | Column::Bool(n, _) | Column::I64(n, _) | Column::F64(n, _) => n,
        }
    }
}

fn columns(rows: &[RunRow]) -> Vec<Column> {
    let get = |f: &dyn Fn(&RunRow) -> Option<i64>| rows.iter().map(f).collect::<Vec<_>>();
    let mut cols = vec![
        Column::Str(
            "run".into(),
            rows.iter().map(|r| Some(r.run.clone())).collect(),
        ),
        Column::I64("repetition".into(), get(&|r| Some(r.repetition as i64))),
        Column::Str(
            "dut".into(),
            rows.iter().map(|r| Some(r.dut.clone())).collect(),
        ),
        Column::I64("frame_bytes".into(), get(&|r| Some(r.frame_bytes as i64))),
    ];
    if rows.iter().any(|r| r.pair.is_some()) {
        cols.push(Column::Str(
            "pair".into(),
            rows.iter().map(|r| r.pair.clone()).collect(),
        ));
    }
    let mut keys: Vec<&String> = rows.iter().flat_map(|r| r.params.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        let vals: Vec<Option<String>> = rows.iter().map(|r| r.params.get(k).cloned()).collect();
        // A swept key becomes a number column when every value is a number.
        let nums: Option<Vec<Option<f64>>> = vals
            .iter()
            .map(|v| match v {
                None => Some(None),
                Some(s) => s.parse::<f64>().ok().map(Some),
            })
            .collect();
        cols.push(match nums {
            Some(n) => Column::F64(format!("param.{k}"), n),
            None => Column::Str(format!("param.{k}"), vals),
        });
    }
    cols.extend(summary_columns(rows, "", &|r| Some(&r.summary)));
    // Runs that sent the reverse way say which ways they sent; with both ways the
    // columns above are the forward way's and the reverse way's follow.
    if rows.iter().any(|r| !r.summary.directions.is_empty()) {
        cols.push(Column::Str(
            "direction".into(),
            rows.iter()
                .map(|r| Some(directions_sent(&r.summary).to_string()))
                .collect(),
        ));
    }
    if rows.iter().any(|r| directions_sent(&r.summary) == "both") {
        cols.extend(summary_columns(rows, "reverse.", &|r| {
            r.summary.directions.get("reverse")
        }));
    }
    cols.extend(app_columns(rows));
    cols.push(Column::Bool(
        "interrupted".into(),
        rows.iter().map(|r| Some(r.summary.interrupted)).collect(),
    ));
    cols
}

/// Which ways a run sent: "forward", "reverse" or "both".
pub fn directions_sent(s: &Summary) -> &'static str {
    match (
        s.directions.contains_key("forward"),
        s.directions.contains_key("reverse"),
    ) {
        (true, true) => "both",
        (false, true) => "reverse",
        _ => "forward",
    }
}

/// The figures of one summary per row (`pick`; none where a row has none), each
/// column's name after `prefix`.
fn summary_columns(
    rows: &[RunRow],
    prefix: &str,
    pick: &dyn Fn(&RunRow) -> Option<&Summary>,
) -> Vec<Column> {
    let get = |f: &dyn Fn(&Summary) -> Option<i64>| {
        rows.iter().map(|r| pick(r).and_then(f)).collect::<Vec<_>>()
    };
    let getf = |f: &dyn Fn(&Summary) -> Option<f64>| {
        rows.iter().map(|r| pick(r).and_then(f)).collect::<Vec<_>>()
    };
    let mut cols = Vec::new();
    cols.push(Column::I64(
        format!("{prefix}sent"),
        get(&|s| Some(s.packets.sent as i64)),
    ));
    cols.push(Column::I64(
        format!("{prefix}received"),
        get(&|s| Some(s.packets.received as i64)),
    ));
    cols.push(Column::I64(
        format!("{prefix}lost"),
        get(&|s| Some(s.packets.lost as i64)),
    ));
    cols.push(Column::I64(
        format!("{prefix}reordered"),
        get(&|s| Some(s.packets.reordered as i64)),
    ));
    cols.push(Column::I64(
        format!("{prefix}duplicated"),
        get(&|s| Some(s.packets.duplicated as i64)),
    ));
    cols.push(Column::F64(
        format!("{prefix}loss_ratio"),
        getf(&|s| Some(s.loss_ratio)),
    ));
    cols.push(Column::F64(
        format!("{prefix}offered_pps"),
        getf(&|s| s.rate.offered_pps),
    ));
    cols.push(Column::F64(
        format!("{prefix}tx_pps"),
        getf(&|s| s.rate.tx_pps),
    ));
    cols.push(Column::F64(
        format!("{prefix}rx_pps"),
        getf(&|s| s.rate.rx_pps),
    ));
    cols.push(Column::I64(
        format!("{prefix}latency_min_ns"),
        get(&|s| s.latency_ns.min),
    ));
    cols.push(Column::F64(
        format!("{prefix}latency_mean_ns"),
        getf(&|s| s.latency_ns.mean),
    ));
    cols.push(Column::F64(
        format!("{prefix}latency_stdev_ns"),
        getf(&|s| s.latency_ns.stdev),
    ));
    cols.push(Column::I64(
        format!("{prefix}latency_p50_ns"),
        get(&|s| s.latency_ns.p50),
    ));
    cols.push(Column::I64(
        format!("{prefix}latency_p90_ns"),
        get(&|s| s.latency_ns.p90),
    ));
    cols.push(Column::I64(
        format!("{prefix}latency_p99_ns"),
        get(&|s| s.latency_ns.p99),
    ));
    cols.push(Column::I64(
        format!("{prefix}latency_p99.9_ns"),
        get(&|s| s.latency_ns.p99_9),
    ));
    cols.push(Column::I64(
        format!("{prefix}latency_p99.99_ns"),
        get(&|s| s.latency_ns.p99_99),
    ));
    cols.push(Column::I64(
        format!("{prefix}latency_p99.999_ns"),
        get(&|s| s.latency_ns.p99_999),
    ));
    cols.push(Column::I64(
        format!("{prefix}latency_max_ns"),
        get(&|s| s.latency_ns.max),
    ));
    cols.push(Column::F64(
        format!("{prefix}jitter_rfc3550_ns"),
        getf(&|s| s.jitter_ns.rfc3550),
    ));
    cols.push(Column::I64(
        format!("{prefix}ipdv_p50_ns"),
        get(&|s| s.jitter_ns.ipdv_p50.map(|v| v as i64)),
    ));
    cols.push(Column::I64(
        format!("{prefix}ipdv_p99_ns"),
        get(&|s| s.jitter_ns.ipdv_p99.map(|v| v as i64)),
    ));
    if let Some(first) = rows.iter().find_map(pick) {
        for (i, a) in first.anomalies.iter().enumerate() {
            let name = format!("{prefix}anomalies_{}_{}ns", a.n, a.t_ns);
            cols.push(Column::I64(
                name,
                get(&|s| s.anomalies.get(i).map(|a| a.count as i64)),
            ));
        }
    }
    cols
}

/// The application's columns: floats if any value is one, else booleans or counts.
fn app_columns(rows: &[RunRow]) -> Vec<Column> {
    let names = crate::app::results::column_names(rows.iter().map(|r| &r.app));
    names
        .into_iter()
        .map(|name| {
            let vals: Vec<Option<AppValue>> = rows
                .iter()
                .map(|r| crate::app::results::get(&r.app, &name))
                .collect();
            let any = |f: fn(&AppValue) -> bool| vals.iter().flatten().any(f);
            if any(|v| matches!(v, AppValue::Float(_))) {
                Column::F64(name, vals.iter().map(|v| v.map(AppValue::as_f64)).collect())
            } else if any(|v| matches!(v, AppValue::Bool(_))) {
                let b = |v: &Option<AppValue>| match v {
                    Some(AppValue::Bool(b)) => Some(*b),
                    _ => None,
                };
                Column::Bool(name, vals.iter().map(b).collect())
            } else {
                let i = |v: &Option<AppValue>| match v {
                    Some(AppValue::Int(i)) => Some(*i),
                    _ => None,
                };
                Column::I64(name, vals.iter().map(i).collect())
            }
        })
        .collect()
}

/// Write one row per run to a Parquet file.
pub fn write_parquet(path: &Path, rows: &[RunRow]) -> Result<(), LabError> {
    let err =
        |e: parquet::errors::ParquetError| LabError::Other(format!("{}: {e}", path.display()));
    let cols = columns(rows);
    let fields = cols
        .iter()
        .map(|c| {
            let (pt, logical) = match c {
                Column::Str(..) => (PhysicalType::BYTE_ARRAY, Some(LogicalType::String)),
                Column::I64(..) => (PhysicalType::INT64, None),
                Column::F64(..) => (PhysicalType::DOUBLE, None),
                Column::Bool(..) => (PhysicalType::BOOLEAN, None),
            };
            let mut b =
                Type::primitive_type_builder(c.name(), pt).with_repetition(Repetition::OPTIONAL);
            if let Some(l) = logical {
                b = b
                    .with_logical_type(Some(l))
                    .with_converted_type(ConvertedType::UTF8);
            }
            b.build().map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    let schema = Arc::new(
        Type::group_type_builder("nflab_results")
            .with_fields(fields)
            .build()
            .map_err(err)?,
    );
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::UNCOMPRESSED)
            .set_created_by(format!("nflab {}", env!("CARGO_PKG_VERSION")))
            .build(),
    );
    // Written beside, fsynced and renamed over: a kill mid-write (found by the
    // crash matrix) or a power cut leaves the previous results.parquet (or
    // none), never a torn one.
    let mut file =
        nflab_io::safe_fs::ReplaceFile::create(path).map_err(|e| LabError::artifact(path, e))?;
    let mut writer = SerializedFileWriter::new(&mut file, schema, props).map_err(err)?;
    let mut group = writer.next_row_group().map_err(err)?;
    let mut i = 0;
    while let Some(mut col) = group.next_column().map_err(err)? {
        let c = &cols[i];
        i += 1;
        match (col.untyped(), c) {
            (ColumnWriter::ByteArrayColumnWriter(w), Column::Str(_, v)) => {
                let (vals, defs) = split(v, |s| ByteArray::from(s.as_bytes().to_vec()));
                w.write_batch(&vals, Some(&defs), None).map_err(err)?;
            }
            (ColumnWriter::Int64ColumnWriter(w), Column::I64(_, v)) => {
                let (vals, defs) = split(v, |x| *x);
                w.write_batch(&vals, Some(&defs), None).map_err(err)?;
            }
            (ColumnWriter::DoubleColumnWriter(w), Column::F64(_, v)) => {
                let (vals, defs) = split(v, |x| *x);
                w.write_batch(&vals, Some(&defs), None).map_err(err)?;
            }
            (ColumnWriter::BoolColumnWriter(w), Column::Bool(_, v)) => {
                let (vals, defs) = split(v, |x| *x);
                w.write_batch(&vals, Some(&defs), None).map_err(err)?;
            }
            _ => {
                return Err(LabError::Other(
                    "results.parquet: column type mismatch".into(),
                ))
            }
        }
        col.close().map_err(err)?;
    }
    group.close().map_err(err)?;
    crate::failpoint::hit("results");
    writer.close().map_err(err)?;
    file.commit().map_err(|e| LabError::artifact(path, e))
}

/// Values present, and definition levels (1 = present, 0 = null).
fn split<T, U>(v: &[Option<T>], f: impl Fn(&T) -> U) -> (Vec<U>, Vec<i16>) {
    let vals = v.iter().flatten().map(&f).collect();
    let defs = v.iter().map(|x| x.is_some() as i16).collect();
    (vals, defs)
}

/// Write `system.json` of a run: before, after and delta.
pub fn write_snapshot(dir: &Path, before: &Snapshot, after: &Snapshot) -> Result<(), LabError> {
    write_json(
        &dir.join("system.json"),
        &serde_json::json!({ "before": before, "after": after, "delta": before.delta(after) }),
    )
}
