//! Artifact files written whole: the error names the file.

use std::path::Path;

use serde::Serialize;

use crate::error::LabError;

/// Write an artifact file; the error names it.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), LabError> {
    std::fs::write(path, bytes).map_err(|e| LabError::artifact(path, e))
}

/// Write `value` as pretty JSON (one trailing newline) to an artifact file.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), LabError> {
    let mut s = serde_json::to_string_pretty(value)
        .map_err(|e| LabError::Other(format!("{}: {e}", path.display())))?;
    s.push('\n');
    write_file(path, s.as_bytes())
}
