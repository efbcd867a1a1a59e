//! Helpers shared by the fuzz targets.
//!
//! The importers of `nflab-analyze` read paths, not byte slices (they stream
//! files of many GB), so a target writes its input to a scratch file first.
//! One file per process and extension, overwritten on every input: the
//! directory is `$TMPDIR`, which `scripts/fuzz.sh` points at a directory it
//! removes afterwards.

use std::path::PathBuf;

/// Write `data` to this process's scratch file ending in `.{ext}` and return its path.
pub fn scratch_file(ext: &str, data: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("nflab-fuzz-{}.{ext}", std::process::id()));
    if let Err(e) = std::fs::write(&path, data) {
        panic!("cannot write the scratch file {}: {e}", path.display());
    }
    path
}
