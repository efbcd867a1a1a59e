//! The PRRT study's per-message records (`runs/NNN/prrt-packets.parquet`, issue 18) and
//! the order statistics its figures draw.
//!
//! One row per message the sending application handed over, both directions:
//!
//! | column | type | meaning |
//! |---|---|---|
//! | `dir` | UTF-8 | `pc` (plant → controller) or `cp` |
//! | `seq` | INT64 | message sequence number, per direction, from 0 |
//! | `m1_ns` … `m6_ns` | INT64, null where missing | the six vantage points, ns since the run's start |
//! | `l7_l2_ns`, `l2_l1_ns`, `l1_l1_ns`, `l1_l2_ns`, `l2_l7_ns` | INT64, nullable | m2−m1, m3−m2, m4−m3, m5−m4, m6−m5 |
//! | `one_way_ns` | INT64, nullable | m6−m1 |
//!
//! m6 is null for a message not delivered in its window (lost or late); m2..m6 for one the
//! sender discarded; m4 and m5 for one restored from redundancy (its own datagram was lost
//! or came after the restore), so every layer delay present is one the message really took.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use parquet::basic::{ConvertedType, LogicalType, Repetition, Type as PhysicalType};
use parquet::column::writer::ColumnWriter;
use parquet::data_type::ByteArray;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;
use parquet::record::Field;
use parquet::schema::types::Type;

use crate::dist::{Distribution, Pct};
use crate::AnalyzeError;

/// The vantage-point columns, m1..m6.
pub const POINT_COLUMNS: [&str; 6] = ["m1_ns", "m2_ns", "m3_ns", "m4_ns", "m5_ns", "m6_ns"];
/// The derived columns: five layers, then the one-way delay.
pub const LAYER_COLUMNS: [&str; 6] = [
    "l7_l2_ns",
    "l2_l1_ns",
    "l1_l1_ns",
    "l1_l2_ns",
    "l2_l7_ns",
    "one_way_ns",
];

/// One message of the study.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrrtPacket {
    /// `"pc"` or `"cp"`.
    pub dir: String,
    /// Sequence number.
    pub seq: u32,
    /// m1..m6, ns since the run's start.
    pub m: [Option<i64>; 6],
    /// The five layer delays and the one-way delay, as [`LAYER_COLUMNS`].
    pub layers: [Option<i64>; 6],
}

fn input_err(path: &Path, what: String) -> AnalyzeError {
    AnalyzeError::Input {
        path: path.to_path_buf(),
        reason: what,
    }
}

/// Write the rows as `prrt-packets.parquet`.
pub fn write_packets(path: &Path, rows: &[PrrtPacket]) -> Result<(), AnalyzeError> {
    let perr =
        |e: parquet::errors::ParquetError| input_err(path, format!("cannot write Parquet: {e}"));
    let mut fields = vec![
        Type::primitive_type_builder("dir", PhysicalType::BYTE_ARRAY)
            .with_repetition(Repetition::REQUIRED)
            .with_logical_type(Some(LogicalType::String))
            .with_converted_type(ConvertedType::UTF8)
            .build()
            .map(Arc::new)
            .map_err(perr)?,
    ];
    fields.push(
        Type::primitive_type_builder("seq", PhysicalType::INT64)
            .with_repetition(Repetition::REQUIRED)
            .build()
            .map(Arc::new)
            .map_err(perr)?,
    );
    for name in POINT_COLUMNS.iter().chain(LAYER_COLUMNS.iter()) {
        fields.push(
            Type::primitive_type_builder(name, PhysicalType::INT64)
                .with_repetition(Repetition::OPTIONAL)
                .build()
                .map(Arc::new)
                .map_err(perr)?,
        );
    }
    let schema = Arc::new(
        Type::group_type_builder("prrt_packets")
            .with_fields(fields)
            .build()
            .map_err(perr)?,
    );
    // Beside its name, fsynced and renamed over it: the old file or the new one, never part.
    let file = std::io::BufWriter::new(
        nflab_io::safe_fs::ReplaceFile::create(path)
            .map_err(|e| input_err(path, format!("cannot create: {e}")))?,
    );
    let props = WriterProperties::builder()
        .set_created_by(format!("nflab {}", env!("CARGO_PKG_VERSION")))
        .build();
    let mut writer = SerializedFileWriter::new(file, schema, Arc::new(props)).map_err(perr)?;
    let mut rg = writer.next_row_group().map_err(perr)?;
    let mut col = 0usize;
    while let Some(mut cw) = rg.next_column().map_err(perr)? {
        match (cw.untyped(), col) {
            (ColumnWriter::ByteArrayColumnWriter(w), 0) => {
                let vals: Vec<ByteArray> = rows
                    .iter()
                    .map(|r| ByteArray::from(r.dir.as_str()))
                    .collect();
                w.write_batch(&vals, None, None).map_err(perr)?;
            }
            (ColumnWriter::Int64ColumnWriter(w), 1) => {
                let vals: Vec<i64> = rows.iter().map(|r| i64::from(r.seq)).collect();
                w.write_batch(&vals, None, None).map_err(perr)?;
            }
            (ColumnWriter::Int64ColumnWriter(w), c) => {
                let cell = |r: &PrrtPacket| {
                    if c < 8 {
                        r.m[c - 2]
                    } else {
                        r.layers[c - 8]
                    }
                };
                let vals: Vec<i64> = rows.iter().filter_map(cell).collect();
                let defs: Vec<i16> = rows.iter().map(|r| i16::from(cell(r).is_some())).collect();
                w.write_batch(&vals, Some(&defs), None).map_err(perr)?;
            }
            _ => return Err(input_err(path, "column type mismatch".into())),
        }
        cw.close().map_err(perr)?;
        col += 1;
    }
    rg.close().map_err(perr)?;
    writer
        .into_inner()
        .map_err(perr)?
        .into_inner()
        .map_err(|e| input_err(path, format!("cannot write: {}", e.error())))?
        .commit()
        .map_err(|e| input_err(path, format!("cannot write: {e}")))
}

/// Read a `prrt-packets.parquet` back.
pub fn read_packets(path: &Path) -> Result<Vec<PrrtPacket>, AnalyzeError> {
    let file = File::open(path).map_err(|e| AnalyzeError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    let bad = |what: String| input_err(path, what);
    let reader =
        SerializedFileReader::new(file).map_err(|e| bad(format!("not a Parquet file: {e}")))?;
    let mut out = Vec::with_capacity(
        usize::try_from(reader.metadata().file_metadata().num_rows()).unwrap_or(0),
    );
    let rows = reader
        .get_row_iter(None)
        .map_err(|e| bad(format!("cannot read rows: {e}")))?;
    for row in rows {
        let row = row.map_err(|e| bad(format!("cannot read a row: {e}")))?;
        let mut p = PrrtPacket {
            dir: String::new(),
            seq: 0,
            m: [None; 6],
            layers: [None; 6],
        };
        let mut seen = 0;
        for (name, field) in row.get_column_iter() {
            let int = match field {
                Field::Long(v) => Some(*v),
                Field::Null => None,
                Field::Str(s) if name == "dir" => {
                    p.dir = s.clone();
                    seen += 1;
                    continue;
                }
                other => return Err(bad(format!("column {name}: unexpected value {other}"))),
            };
            if name == "seq" {
                p.seq = int
                    .and_then(|v| u32::try_from(v).ok())
                    .ok_or_else(|| bad("column seq: not a sequence number".into()))?;
            } else if let Some(i) = POINT_COLUMNS.iter().position(|c| c == name) {
                p.m[i] = int;
            } else if let Some(i) = LAYER_COLUMNS.iter().position(|c| c == name) {
                p.layers[i] = int;
            } else {
                return Err(bad(format!("unknown column {name}")));
            }
            seen += 1;
        }
        if seen != 14 {
            return Err(bad(format!("a row has {seen} of the 14 columns")));
        }
        out.push(p);
    }
    Ok(out)
}

/// First quartile, median and third quartile (nearest rank, exact) of `values`, which are
/// held at a resolution of 1e-9 of their unit; None when empty or not finite.
pub fn quartiles(values: &[f64]) -> Option<[f64; 3]> {
    const SCALE: f64 = 1e9;
    let mut d = Distribution::new(u64::MAX, 3);
    for v in values {
        if !v.is_finite() {
            return None;
        }
        d.record((v * SCALE).round() as i64);
    }
    if d.count() == 0 {
        return None;
    }
    let q = d.quantiles(&[
        Pct { num: 1, den: 4 },
        Pct { num: 1, den: 2 },
        Pct { num: 3, den: 4 },
    ]);
    let at = |i: usize| q.get(i).copied().flatten().map(|q| q.value as f64 / SCALE);
    Some([at(0)?, at(1)?, at(2)?])
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn packets_round_trip_through_parquet_with_nulls() {
        let rows: Vec<PrrtPacket> = (0..1000u32)
            .map(|i| {
                let m1 = i64::from(i) * 1_000_000;
                let lost = i % 7 == 3;
                let m = [
                    Some(m1),
                    Some(m1 + 20_000),
                    Some(m1 + 25_000),
                    Some(m1 + 7_000_000),
                    Some(m1 + 7_000_000),
                    (!lost).then_some(m1 + 9_000_000),
                ];
                PrrtPacket {
                    dir: if i % 2 == 0 { "pc" } else { "cp" }.into(),
                    seq: i / 2,
                    m,
                    layers: [
                        Some(20_000),
                        Some(5_000),
                        Some(6_975_000),
                        Some(0),
                        (!lost).then_some(2_000_000),
                        (!lost).then_some(9_000_000),
                    ],
                }
            })
            .collect();
        let path =
            std::env::temp_dir().join(format!("nflab-prrt-pq-{}.parquet", std::process::id()));
        write_packets(&path, &rows).expect("write");
        let back = read_packets(&path).expect("read");
        std::fs::remove_file(&path).expect("clean up");
        assert_eq!(back, rows);
        assert_eq!(back.iter().filter(|r| r.m[5].is_none()).count(), 143);
    }

    #[test]
    fn a_file_that_is_not_parquet_is_one_sentence() {
        let path =
            std::env::temp_dir().join(format!("nflab-prrt-bad-{}.parquet", std::process::id()));
        std::fs::write(&path, b"dir,seq\npc,1\n").expect("write");
        let e = read_packets(&path)
            .expect_err("csv is not parquet")
            .to_string();
        std::fs::remove_file(&path).expect("clean up");
        assert!(e.contains("not a Parquet file"), "{e}");
    }

    #[test]
    fn quartiles_are_nearest_rank() {
        // 1..=100 / 100: nearest rank of p25 is the 25th value.
        let v: Vec<f64> = (1..=100).map(|i| f64::from(i) / 100.0).collect();
        assert_eq!(quartiles(&v), Some([0.25, 0.50, 0.75]));
        assert_eq!(quartiles(&[0.003]), Some([0.003; 3]));
        assert_eq!(quartiles(&[]), None);
        assert_eq!(quartiles(&[f64::NAN]), None);
    }
}
