//! Exports of an [`Analysis`]: tables as CSV, JSON or Parquet, the latency
//! CDF / CCDF and histograms, and an HdrHistogram interval log (V2, DEFLATE
//! compressed, base64) that HdrHistogram's own log readers decode.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;

use nflab_io::safe_fs::ReplaceFile;

use crate::dist::{percentile_ladder, Distribution};
use crate::{Analysis, AnalyzeError};

/// One column of a table.
#[derive(Debug, Clone)]
pub enum Column {
    /// Integers (nullable).
    I64(Vec<Option<i64>>),
    /// Floats (nullable).
    F64(Vec<Option<f64>>),
}

/// A named table.
#[derive(Debug, Clone)]
pub struct Table {
    /// Table name (file stem).
    pub name: String,
    /// `(column name, values)`.
    pub columns: Vec<(String, Column)>,
}

impl Table {
    fn rows(&self) -> usize {
        self.columns.first().map_or(0, |(_, c)| match c {
            Column::I64(v) => v.len(),
            Column::F64(v) => v.len(),
        })
    }
}

/// Bin layout of a histogram.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bins {
    /// Bins of this width, ns, from the minimum.
    Linear(u64),
    /// This many bins per decade, from the minimum (values <= 0 in bin 0).
    Log(u32),
}

impl Bins {
    /// `log:K` (K bins per decade) or `linear:WIDTH` (e.g. `linear:1us`), as
    /// `nflab analyze --bins` takes it; an error names what is wrong.
    pub fn parse(s: &str) -> Result<Bins, String> {
        match s.split_once(':') {
            Some(("log", k)) => k
                .parse()
                .map(Bins::Log)
                .map_err(|_| format!("--bins {s:?}: {k:?} is not a whole number")),
            Some(("linear", w)) => crate::parse_duration_ns(w)
                .map(Bins::Linear)
                .map_err(|e| format!("--bins {s:?}: {e}")),
            _ => Err(format!(
                "--bins {s:?}: write log:K (bins per decade) or linear:WIDTH (e.g. linear:1us)"
            )),
        }
    }
}

/// `nflab analyze --export DIR` for one analysis: `summary.json`, the
/// latency CDF and histogram tables, the summary's tables (windows,
/// anomalies, worst, …) in `fmt`, and `latency.hlog` (HdrHistogram interval
/// log) — what the CLI and the Python package write alike.
pub fn write_exports(
    dir: &Path,
    a: &mut Analysis,
    fmt: TableFormat,
    bins: Bins,
) -> Result<(), AnalyzeError> {
    std::fs::create_dir_all(dir).map_err(|e| AnalyzeError::Input {
        path: dir.to_path_buf(),
        reason: format!("cannot create the export directory: {e}"),
    })?;
    let summary = dir.join("summary.json");
    std::fs::write(&summary, a.summary.to_json_pretty()).map_err(io_err(&summary))?;
    let mut tables = vec![
        cdf_table(&mut a.latency, 100_000),
        histogram_table(&mut a.latency, bins),
    ];
    tables.extend(summary_tables(a));
    for t in &tables {
        write_table(t, dir, fmt)?;
    }
    write_interval_log(a, &dir.join("latency.hlog"))
}

/// CDF at distinct values (exact mode, when there are at most `max_points`
/// of them) or on the HDR percentile ladder: columns `value_ns`, `count`
/// (cumulative), `p` (fraction <= value), `ccdf` (1 − p), `inv_ccdf`
/// (1/(1 − p), the x axis of an "HDR plot"; null at p = 1).
pub fn cdf_table(d: &mut Distribution, max_points: usize) -> Table {
    let n = d.count();
    let mut vals = Vec::new();
    let mut cum = Vec::new();
    let vc = d.value_counts();
    if vc.len() <= max_points {
        let mut c = 0u64;
        for (v, k) in vc {
            c += k;
            vals.push(v);
            cum.push(c);
        }
    } else {
        let ladder = percentile_ladder(n, 5);
        let ranks: Vec<u64> = ladder
            .iter()
            .map(|p| ((p / 100.0 * n as f64).ceil() as u64).clamp(1, n))
            .collect();
        let q = d.values_at_ranks(&ranks);
        for (r, q) in ranks.iter().zip(q) {
            if vals.last() == Some(&q.value) {
                continue;
            }
            vals.push(q.value);
            cum.push(*r);
        }
    }
    let p: Vec<Option<f64>> = cum
        .iter()
        .map(|&c| Some(c as f64 / n.max(1) as f64))
        .collect();
    Table {
        name: "latency_cdf".into(),
        columns: vec![
            (
                "value_ns".into(),
                Column::I64(vals.iter().map(|&v| Some(v)).collect()),
            ),
            (
                "count".into(),
                Column::I64(cum.iter().map(|&c| Some(c as i64)).collect()),
            ),
            (
                "ccdf".into(),
                Column::F64(p.iter().map(|x| x.map(|x| 1.0 - x)).collect()),
            ),
            (
                "inv_ccdf".into(),
                Column::F64(
                    p.iter()
                        .map(|x| x.filter(|x| *x < 1.0).map(|x| 1.0 / (1.0 - x)))
                        .collect(),
                ),
            ),
            ("p".into(), Column::F64(p)),
        ],
    }
}

/// Histogram with the given bins: columns `lo_ns` (inclusive), `hi_ns`
/// (exclusive), `count`. In HDR mode each HDR bucket is counted in the bin
/// holding its upper end.
pub fn histogram_table(d: &mut Distribution, bins: Bins) -> Table {
    let vc = d.value_counts();
    let (mut lo, mut hi, mut cnt): (Vec<i64>, Vec<i64>, Vec<u64>) = (vec![], vec![], vec![]);
    if let (Some(min), Some(max)) = (d.min(), d.max()) {
        match bins {
            Bins::Linear(w) => {
                let w = w.max(1) as i128;
                let nb = ((i128::from(max) - i128::from(min)) / w + 1).min(1_000_000) as usize;
                cnt = vec![0; nb];
                for (v, c) in &vc {
                    let i = (((i128::from(*v) - i128::from(min)) / w) as usize).min(nb - 1);
                    cnt[i] += c;
                }
                for i in 0..nb {
                    let a = i128::from(min) + i as i128 * w;
                    lo.push(a as i64);
                    hi.push((a + w).min(i128::from(i64::MAX)) as i64);
                }
            }
            Bins::Log(per_decade) => {
                let k = f64::from(per_decade.max(1));
                let start = (min.max(1) as f64).log10();
                let edge = |i: usize| 10f64.powf(start + i as f64 / k).floor() as i64;
                let nb = (((max.max(1) as f64).log10() - start) * k).floor() as usize + 1;
                cnt = vec![0; nb];
                for (v, c) in &vc {
                    let i = if *v <= 0 {
                        0
                    } else {
                        (((*v as f64).log10() - start) * k).floor().max(0.0) as usize
                    };
                    cnt[i.min(nb - 1)] += c;
                }
                for i in 0..nb {
                    lo.push(if i == 0 { min } else { edge(i) });
                    hi.push(edge(i + 1).max(edge(i) + 1));
                }
            }
        }
    }
    Table {
        name: "latency_histogram".into(),
        columns: vec![
            (
                "lo_ns".into(),
                Column::I64(lo.into_iter().map(Some).collect()),
            ),
            (
                "hi_ns".into(),
                Column::I64(hi.into_iter().map(Some).collect()),
            ),
            (
                "count".into(),
                Column::I64(cnt.into_iter().map(|c| Some(c as i64)).collect()),
            ),
        ],
    }
}

/// The tables of an analysis: windows, anomalies (events of every spec),
/// worst packets, flows.
pub fn summary_tables(a: &Analysis) -> Vec<Table> {
    let s = &a.summary;
    let w = &s.windows;
    let windows = Table {
        name: "windows".into(),
        columns: vec![
            (
                "index".into(),
                Column::I64(w.iter().map(|x| Some(x.index as i64)).collect()),
            ),
            (
                "start_ns".into(),
                Column::I64(w.iter().map(|x| Some(x.start_ns as i64)).collect()),
            ),
            (
                "packets".into(),
                Column::I64(w.iter().map(|x| Some(x.packets as i64)).collect()),
            ),
            (
                "lost".into(),
                Column::I64(w.iter().map(|x| Some(x.lost as i64)).collect()),
            ),
            (
                "loss_ratio".into(),
                Column::F64(w.iter().map(|x| Some(x.loss_ratio)).collect()),
            ),
            (
                "min_ns".into(),
                Column::I64(w.iter().map(|x| x.min_ns).collect()),
            ),
            (
                "p50_ns".into(),
                Column::I64(w.iter().map(|x| x.p50_ns).collect()),
            ),
            (
                "p99_ns".into(),
                Column::I64(w.iter().map(|x| x.p99_ns).collect()),
            ),
            (
                "max_ns".into(),
                Column::I64(w.iter().map(|x| x.max_ns).collect()),
            ),
        ],
    };
    let mut ev = Vec::new();
    for (k, d) in s.anomaly_details.iter().enumerate() {
        for e in &d.events {
            ev.push((k, e));
        }
    }
    let anomalies = Table {
        name: "anomalies".into(),
        columns: vec![
            (
                "spec_index".into(),
                Column::I64(ev.iter().map(|(k, _)| Some(*k as i64)).collect()),
            ),
            (
                "flow".into(),
                Column::I64(ev.iter().map(|(_, e)| Some(i64::from(e.flow))).collect()),
            ),
            (
                "start_seq".into(),
                Column::I64(ev.iter().map(|(_, e)| Some(e.start_seq as i64)).collect()),
            ),
            (
                "start_tx_ns".into(),
                Column::I64(
                    ev.iter()
                        .map(|(_, e)| e.start_tx_ns.map(|v| v as i64))
                        .collect(),
                ),
            ),
            (
                "packets".into(),
                Column::I64(ev.iter().map(|(_, e)| Some(e.packets as i64)).collect()),
            ),
            (
                "lost".into(),
                Column::I64(ev.iter().map(|(_, e)| Some(e.lost as i64)).collect()),
            ),
            (
                "duration_ns".into(),
                Column::I64(ev.iter().map(|(_, e)| Some(e.duration_ns as i64)).collect()),
            ),
            (
                "peak_ns".into(),
                Column::I64(ev.iter().map(|(_, e)| e.peak_ns).collect()),
            ),
        ],
    };
    let wp = &s.worst;
    let worst = Table {
        name: "worst".into(),
        columns: vec![
            (
                "flow".into(),
                Column::I64(wp.iter().map(|x| Some(i64::from(x.flow))).collect()),
            ),
            (
                "seq".into(),
                Column::I64(wp.iter().map(|x| Some(x.seq as i64)).collect()),
            ),
            (
                "tx_ns".into(),
                Column::I64(wp.iter().map(|x| Some(x.tx_ns as i64)).collect()),
            ),
            (
                "rx_ns".into(),
                Column::I64(wp.iter().map(|x| Some(x.rx_ns as i64)).collect()),
            ),
            (
                "latency_ns".into(),
                Column::I64(wp.iter().map(|x| Some(x.latency_ns)).collect()),
            ),
        ],
    };
    vec![windows, anomalies, worst]
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> AnalyzeError + '_ {
    move |source| AnalyzeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Every table file is written beside its name, fsynced and renamed over it
/// ([`ReplaceFile`]): a failure or a kill mid-write (a full disk) leaves the
/// old file whole (or none), which `--resume` and the report trust.
fn replace(path: &Path) -> Result<BufWriter<ReplaceFile>, AnalyzeError> {
    Ok(BufWriter::new(
        ReplaceFile::create(path).map_err(io_err(path))?,
    ))
}

/// Flush what [`replace`] buffered and move the file into place.
fn commit(w: BufWriter<ReplaceFile>, path: &Path) -> Result<(), AnalyzeError> {
    w.into_inner()
        .map_err(|e| io_err(path)(e.into_error()))?
        .commit()
        .map_err(io_err(path))
}

/// Write a table as CSV (header row, empty cell for null).
pub fn write_csv(t: &Table, path: &Path) -> Result<(), AnalyzeError> {
    let mut w = replace(path)?;
    let names: Vec<&str> = t.columns.iter().map(|(n, _)| n.as_str()).collect();
    writeln!(w, "{}", names.join(",")).map_err(io_err(path))?;
    for i in 0..t.rows() {
        let cells: Vec<String> = t
            .columns
            .iter()
            .map(|(_, c)| match c {
                Column::I64(v) => v[i].map_or(String::new(), |x| x.to_string()),
                Column::F64(v) => v[i].map_or(String::new(), |x| format!("{x}")),
            })
            .collect();
        writeln!(w, "{}", cells.join(",")).map_err(io_err(path))?;
    }
    commit(w, path)
}

/// Write a table as a JSON array of row objects.
pub fn write_json(t: &Table, path: &Path) -> Result<(), AnalyzeError> {
    let rows: Vec<serde_json::Value> = (0..t.rows())
        .map(|i| {
            let m: serde_json::Map<String, serde_json::Value> = t
                .columns
                .iter()
                .map(|(n, c)| {
                    let v = match c {
                        Column::I64(v) => v[i].map_or(serde_json::Value::Null, |x| x.into()),
                        Column::F64(v) => v[i].map_or(serde_json::Value::Null, |x| x.into()),
                    };
                    (n.clone(), v)
                })
                .collect();
            serde_json::Value::Object(m)
        })
        .collect();
    let text =
        serde_json::to_string_pretty(&rows).map_err(|e| AnalyzeError::Invalid(e.to_string()))?;
    nflab_io::safe_fs::replace_file(path, text.as_bytes()).map_err(io_err(path))
}

/// Write a table as Parquet (INT64 / DOUBLE columns, optional, uncompressed).
pub fn write_parquet(t: &Table, path: &Path) -> Result<(), AnalyzeError> {
    use parquet::basic::{Repetition, Type as PhysicalType};
    use parquet::column::writer::ColumnWriter;
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::types::Type;
    let perr = |e: parquet::errors::ParquetError| AnalyzeError::Input {
        path: path.to_path_buf(),
        reason: format!("cannot write Parquet: {e}"),
    };
    let fields = t
        .columns
        .iter()
        .map(|(n, c)| {
            let ty = match c {
                Column::I64(_) => PhysicalType::INT64,
                Column::F64(_) => PhysicalType::DOUBLE,
            };
            Type::primitive_type_builder(n, ty)
                .with_repetition(Repetition::OPTIONAL)
                .build()
                .map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(perr)?;
    let schema = Arc::new(
        Type::group_type_builder("schema")
            .with_fields(fields)
            .build()
            .map_err(perr)?,
    );
    let file = replace(path)?;
    let mut writer =
        SerializedFileWriter::new(file, schema, Arc::new(WriterProperties::builder().build()))
            .map_err(perr)?;
    let mut rg = writer.next_row_group().map_err(perr)?;
    for (_, c) in &t.columns {
        let Some(mut cw) = rg.next_column().map_err(perr)? else {
            break;
        };
        match (cw.untyped(), c) {
            (ColumnWriter::Int64ColumnWriter(w), Column::I64(v)) => {
                let vals: Vec<i64> = v.iter().flatten().copied().collect();
                let defs: Vec<i16> = v.iter().map(|x| i16::from(x.is_some())).collect();
                w.write_batch(&vals, Some(&defs), None).map_err(perr)?;
            }
            (ColumnWriter::DoubleColumnWriter(w), Column::F64(v)) => {
                let vals: Vec<f64> = v.iter().flatten().copied().collect();
                let defs: Vec<i16> = v.iter().map(|x| i16::from(x.is_some())).collect();
                w.write_batch(&vals, Some(&defs), None).map_err(perr)?;
            }
            _ => {}
        }
        cw.close().map_err(perr)?;
    }
    rg.close().map_err(perr)?;
    // The footer written, then the whole file moved into place.
    commit(writer.into_inner().map_err(perr)?, path)
}

/// Table file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    /// CSV.
    Csv,
    /// JSON array of objects.
    Json,
    /// Parquet.
    Parquet,
}

impl std::str::FromStr for TableFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "csv" => Ok(TableFormat::Csv),
            "json" => Ok(TableFormat::Json),
            "parquet" => Ok(TableFormat::Parquet),
            o => Err(format!(
                "unknown export format {o:?}; use csv, json or parquet"
            )),
        }
    }
}

/// Write `t` into `dir` as `<name>.<ext>`; returns the path.
pub fn write_table(t: &Table, dir: &Path, fmt: TableFormat) -> Result<PathBuf, AnalyzeError> {
    let ext = match fmt {
        TableFormat::Csv => "csv",
        TableFormat::Json => "json",
        TableFormat::Parquet => "parquet",
    };
    let path = dir.join(format!("{}.{ext}", t.name));
    match fmt {
        TableFormat::Csv => write_csv(t, &path)?,
        TableFormat::Json => write_json(t, &path)?,
        TableFormat::Parquet => write_parquet(t, &path)?,
    }
    Ok(path)
}

/// Write the per-window HDR histograms as an HdrHistogram interval log
/// (timestamps in seconds from the first window, values in ns; one line per
/// window, tag `latency`). Whole-run histogram when there are no windows.
pub fn write_interval_log(a: &Analysis, path: &Path) -> Result<(), AnalyzeError> {
    let mut out = replace(path)?;
    let mut ser = V2DeflateSerializer::new();
    let hist_err = |e: String| AnalyzeError::Input {
        path: path.to_path_buf(),
        reason: format!("cannot write the interval log: {e}"),
    };
    {
        let mut w = IntervalLogWriterBuilder::new()
            .add_comment("nflab latency, values in ns")
            .with_base_time(std::time::UNIX_EPOCH)
            .begin_log_with(&mut out, &mut ser)
            .map_err(io_err(path))?;
        let tag = Tag::new("latency");
        if a.window_histograms.is_empty() {
            let h = a.latency.to_hdr();
            w.write_histogram(
                &h,
                std::time::Duration::ZERO,
                std::time::Duration::from_secs(1),
                tag,
            )
            .map_err(|e| hist_err(format!("{e:?}")))?;
        } else {
            let wn = a.window_ns.unwrap_or(1_000_000_000);
            for (idx, h) in &a.window_histograms {
                let start = std::time::Duration::from_nanos(idx.saturating_mul(wn));
                w.write_histogram(h, start, std::time::Duration::from_nanos(wn), tag)
                    .map_err(|e| hist_err(format!("{e:?}")))?;
            }
        }
    }
    commit(out, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small tmpfs mounted for the test; unmounted and removed when dropped.
    struct SmallDisk(PathBuf);
    impl Drop for SmallDisk {
        fn drop(&mut self) {
            let _ = std::process::Command::new(nflab_io::process::system_tool("umount"))
                .arg(&self.0)
                .status();
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn table(rows: usize) -> Table {
        Table {
            name: "windows".into(),
            columns: vec![
                (
                    "t_ns".into(),
                    Column::I64((0..rows as i64).map(Some).collect()),
                ),
                (
                    "p99_ns".into(),
                    Column::F64((0..rows).map(|i| Some(i as f64 * 1.5)).collect()),
                ),
            ],
        }
    }

    /// A per-run Parquet file rewritten on a disk that fills up: the old file
    /// stays whole (the same bytes), no partial file is left, and so for CSV.
    #[test]
    fn a_table_written_on_a_full_disk_keeps_its_old_file_whole() {
        if !nflab_testkit::require_root() {
            return;
        }
        let dir = nflab_io::safe_fs::fresh_private_dir(&std::env::temp_dir(), "nflab-export-full")
            .unwrap();
        let disk = SmallDisk(dir);
        let ok = std::process::Command::new(nflab_io::process::system_tool("mount"))
            .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
            .arg(&disk.0)
            .status()
            .unwrap();
        assert!(ok.success(), "mount tmpfs");
        let small = table(10);
        let mut before = Vec::new();
        for fmt in [TableFormat::Parquet, TableFormat::Csv] {
            let p = write_table(&small, &disk.0, fmt).unwrap();
            before.push((p.clone(), std::fs::read(&p).unwrap()));
        }
        // Fill the rest of the disk.
        let mut filler = std::fs::File::create(disk.0.join("filler")).unwrap();
        let block = vec![7u8; 4096];
        while filler.write_all(&block).is_ok() {}
        drop(filler);
        let big = table(200_000);
        for (fmt, (path, old)) in [TableFormat::Parquet, TableFormat::Csv]
            .into_iter()
            .zip(&before)
        {
            let e = write_table(&big, &disk.0, fmt).unwrap_err().to_string();
            assert!(e.contains("windows."), "{e}");
            let kept = std::fs::read(path).unwrap() == *old;
            assert!(kept, "{} torn by a failed write", path.display());
        }
        let left: Vec<_> = std::fs::read_dir(&disk.0)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 3, "a partial file was left: {left:?}");
    }
}
