//! Artifact files written whole: the error names the file.
//!
//! Each is written beside its name, fsynced, renamed into place and its
//! directory fsynced: `--resume` trusts a run with `.complete`, and a power
//! cut must not leave one whose `summary.json` is torn or empty (a plain
//! write can be lost after the rename that follows it is not).

use std::path::Path;

use serde::Serialize;

use crate::error::LabError;

/// Write an artifact file whole and durably (the old one or the new one,
/// never part); the error names it.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), LabError> {
    nflab_io::safe_fs::replace_file(path, bytes).map_err(|e| LabError::artifact(path, e))
}

/// The user who ran nflab through `sudo` (`SUDO_UID`, `SUDO_GID`), when this
/// process is root; None otherwise.
pub fn invoking_user() -> Option<(u32, u32)> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    let id = |k: &str| std::env::var(k).ok()?.parse::<u32>().ok();
    Some((id("SUDO_UID")?, id("SUDO_GID")?))
}

/// Hand `path` and everything under it to the user who ran nflab through
/// `sudo` ([`invoking_user`]), so results made as root are theirs to move or
/// delete; nothing to do otherwise. Symlinks are changed themselves, never
/// followed.
pub fn give_to_invoking_user(path: &Path) -> Result<(), LabError> {
    let Some((uid, gid)) = invoking_user() else {
        return Ok(());
    };
    fn walk(p: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
        std::os::unix::fs::lchown(p, Some(uid), Some(gid))?;
        if std::fs::symlink_metadata(p)?.is_dir() {
            for e in std::fs::read_dir(p)? {
                walk(&e?.path(), uid, gid)?;
            }
        }
        Ok(())
    }
    walk(path, uid, gid).map_err(|e| LabError::artifact(path, e))
}

/// Write `value` as pretty JSON (one trailing newline) to an artifact file.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), LabError> {
    let mut s = serde_json::to_string_pretty(value)
        .map_err(|e| LabError::Other(format!("{}: {e}", path.display())))?;
    s.push('\n');
    write_file(path, s.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small tmpfs mounted for the test; unmounted and removed when dropped.
    struct SmallDisk(std::path::PathBuf);
    impl Drop for SmallDisk {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_file_written_on_a_full_disk_keeps_its_old_content_whole() {
        if !nflab_testkit::require_root() {
            return;
        }
        let dir = nflab_io::safe_fs::fresh_private_dir(&std::env::temp_dir(), "nflab-files-full")
            .unwrap();
        let disk = SmallDisk(dir);
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(&disk.0)
            .status()
            .unwrap();
        assert!(ok.success(), "mount tmpfs");
        let summary = disk.0.join("summary.json");
        write_json(&summary, &serde_json::json!({ "p99_ns": 1 })).unwrap();
        let before = std::fs::read(&summary).unwrap();
        // Fill the rest of the disk.
        let mut filler = std::fs::File::create(disk.0.join("filler")).unwrap();
        let block = vec![7u8; 4096];
        while std::io::Write::write_all(&mut filler, &block).is_ok() {}
        drop(filler);
        let big = serde_json::json!({ "p99_ns": "9".repeat(100_000) });
        let e = write_json(&summary, &big).unwrap_err().to_string();
        assert!(e.contains("summary.json"), "{e}");
        assert_eq!(
            std::fs::read(&summary).unwrap(),
            before,
            "torn by a failed write"
        );
        let left: Vec<_> = std::fs::read_dir(&disk.0)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 2, "a partial file was left: {left:?}");
    }
}
