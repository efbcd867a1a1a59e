//! results.parquet read back with the parquet crate, one JSON object per row.

#![allow(dead_code)]

use std::path::Path;

/// Every row of a Parquet file as a JSON object (column name → value; the
/// column types results.parquet uses).
pub fn parquet_rows(path: &Path) -> Vec<serde_json::Value> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let reader = SerializedFileReader::new(file).unwrap();
    reader
        .get_row_iter(None)
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            let mut m = serde_json::Map::new();
            for (name, f) in r.get_column_iter() {
                let v = match f {
                    Field::Null => serde_json::Value::Null,
                    Field::Bool(b) => (*b).into(),
                    Field::Long(x) => (*x).into(),
                    Field::Int(x) => (*x).into(),
                    Field::Double(x) => (*x).into(),
                    Field::Str(s) => s.clone().into(),
                    other => other.to_string().into(),
                };
                m.insert(name.clone(), v);
            }
            serde_json::Value::Object(m)
        })
        .collect()
}
