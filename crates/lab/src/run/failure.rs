//! When a run fails (a full disk while recording, a DuT that died): the run
//! is marked failed in one sentence, and the study stops or goes on as
//! `experiment.on_run_failure` says. And before a study starts: its output
//! directory must be writable, or nothing starts.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::LabError;

/// File in a run directory that marks the run failed.
pub const FAILED_MARKER: &str = "failed.json";
/// Space held free in the experiment directory for the marks of a failure.
pub const RESERVE_BYTES: usize = 64 << 10;

/// A run that failed, and why.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FailedRun {
    /// Run number ("001").
    pub run: String,
    /// One sentence: what failed, where, and why.
    pub error: String,
}

/// One sentence, before anything starts, when `dir` cannot take files.
pub fn check_writable(dir: &Path, what: &str) -> Result<(), LabError> {
    let refuse = |cause: String| {
        LabError::Host(format!(
            "{what} {} is not writable ({cause}): choose a directory on a writable file system",
            dir.display()
        ))
    };
    // Probe the directory, or the nearest ancestor that exists, where it is still to be
    // made: a check that refuses must leave nothing behind, not even an empty directory.
    let existing = dir
        .ancestors()
        .find(|a| a.exists() || a.as_os_str().is_empty())
        .filter(|a| !a.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !existing.is_dir() {
        return Err(refuse(format!("{} is not a directory", existing.display())));
    }
    // A fresh name made exclusively: the output directory may be one others write to.
    let probe = nflab_io::safe_fs::create_fresh_file(existing, ".nflab-write-check", 0o600);
    let written = probe.and_then(|(path, mut f)| {
        let w = f.write_all(b"ok");
        let _ = std::fs::remove_file(&path);
        w
    });
    written.map_err(|e| refuse(e.to_string()))
}

/// A file that holds [`RESERVE_BYTES`] of the experiment's file system, let
/// go when a run fails so that the failure's marks and `results.parquet`
/// still fit on a disk the run filled. Made exclusively (`O_EXCL`,
/// `O_NOFOLLOW`), after a stale one is unlinked: a `--resume`d tree may be
/// another user's, and a `.disk-reserve` planted there as a symlink is
/// removed, never followed.
#[derive(Debug)]
pub struct DiskReserve {
    path: PathBuf,
}

impl DiskReserve {
    /// Take the reserve in `dir` (best effort: a disk already too full has none).
    pub fn take(dir: &Path) -> DiskReserve {
        let path = dir.join(".disk-reserve");
        // unlink removes a symlink itself, never what it points to.
        let _ = std::fs::remove_file(&path);
        // Made again between the unlink and the open: no reserve, and nothing of
        // ours to remove.
        if let Ok(mut f) = nflab_io::safe_fs::create_exclusive(&path, 0o600) {
            let ok = f
                .write_all(&vec![0u8; RESERVE_BYTES])
                .and_then(|_| f.sync_all());
            if ok.is_err() {
                let _ = std::fs::remove_file(&path);
            }
        }
        DiskReserve { path }
    }

    /// Free the space.
    pub fn release(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for DiskReserve {
    fn drop(&mut self) {
        self.release();
    }
}

/// Mark run `index` in `run_dir` failed with `error`; returns the record.
/// Writing the mark is best effort: the sentence also goes to stderr and
/// into the experiment's result.
pub fn mark_failed(run_dir: &Path, index: usize, error: &LabError) -> FailedRun {
    let f = FailedRun {
        run: format!("{index:03}"),
        error: error.to_string().replace('\n', " "),
    };
    let text = serde_json::to_string_pretty(&f).unwrap_or_default() + "\n";
    // Whole or not at all, and a symlink of that name replaced, never followed.
    if let Err(e) =
        crate::artifacts::files::write_file(&run_dir.join(FAILED_MARKER), text.as_bytes())
    {
        eprintln!("warning: could not write {e}");
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_directory_is_checked_without_being_made_and_a_file_in_the_way_refused() {
        let base = std::env::temp_dir().join(format!("nflab-writable-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        check_writable(&base.join("a/b"), "the output directory").unwrap();
        // Nothing left behind: neither the directory nor the probe.
        assert!(!base.join("a").exists());
        assert_eq!(std::fs::read_dir(&base).unwrap().count(), 0);
        std::fs::write(base.join("file"), "x").unwrap();
        let e = check_writable(&base.join("file/sub"), "the output directory")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("the output directory ") && e.contains("file/sub") && !e.contains('\n'),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_planted_reserve_symlink_is_removed_never_followed() {
        let base =
            nflab_io::safe_fs::fresh_private_dir(&std::env::temp_dir(), "nflab-reserve-link")
                .unwrap();
        let victim = base.join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let p = base.join(".disk-reserve");
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        let r = DiskReserve::take(&base);
        let kept = std::fs::read(&victim).unwrap() == b"keep";
        assert!(kept, "the reserve was written through the symlink");
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert!(m.is_file(), "{m:?}");
        assert_eq!(m.len(), RESERVE_BYTES as u64);
        r.release();
        assert!(std::fs::symlink_metadata(&p).is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_failure_marker_replaces_a_planted_symlink_and_is_whole() {
        let base =
            nflab_io::safe_fs::fresh_private_dir(&std::env::temp_dir(), "nflab-marker").unwrap();
        let victim = base.join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let marker = base.join(FAILED_MARKER);
        std::os::unix::fs::symlink(&victim, &marker).unwrap();
        let f = mark_failed(&base, 3, &LabError::Other("the DuT died".into()));
        assert_eq!(f.run, "003");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep", "followed");
        assert!(std::fs::symlink_metadata(&marker).unwrap().is_file());
        let back: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&marker).unwrap()).unwrap();
        assert_eq!(back["error"], "the DuT died");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn the_reserve_holds_space_until_released() {
        let base = std::env::temp_dir().join(format!("nflab-reserve-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let r = DiskReserve::take(&base);
        let p = base.join(".disk-reserve");
        assert_eq!(std::fs::metadata(&p).unwrap().len(), RESERVE_BYTES as u64);
        r.release();
        assert!(!p.exists());
        let _ = std::fs::remove_dir_all(&base);
    }
}
