//! results.parquet read back with the parquet crate, one JSON object per row.

#![allow(dead_code)]

use std::path::Path;

/// Every row of a Parquet file as a JSON object (column name → value).
pub fn parquet_rows(path: &Path) -> Vec<serde_json::Value> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let reader = SerializedFileReader::new(file).unwrap();
    reader
        .get_row_iter(None)
        .unwrap()
        .map(|r| r.unwrap().to_json_value())
        .collect()
}
