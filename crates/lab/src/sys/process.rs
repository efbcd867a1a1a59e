//! Processes of this host as /proc tells them: start times tell a live owner from a
//! reused pid.

use std::path::Path;

use crate::error::LabError;

/// Where nflab keeps its owner files and journals.
pub const RUN_DIR: &str = "/run/nflab";

/// Make `dir` (normally [`RUN_DIR`]) the private directory of this user
/// (root): created 0700, narrowed to 0700 when it is ours but wider, refused
/// when it is a symlink or another user's. `gc` runs what it finds there as
/// root, so nobody else may write in it.
pub fn ensure_run_dir(dir: &Path) -> Result<(), LabError> {
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|e| LabError::artifact(parent, e))?;
    }
    nflab_io::safe_fs::ensure_private_dir(dir).map_err(|e| {
        LabError::Host(format!(
            "{} is not a directory only this user can write ({e}): nflab runs what it finds there as root, so it refuses it; remove it and run again",
            dir.display()
        ))
    })
}

/// Whether a file of `dir` may be trusted: a plain file of this user that
/// nobody else can write; Err says why not.
pub fn check_trusted_file(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).map_err(|e| e.to_string())?;
    let me = nix::unistd::geteuid().as_raw();
    if !m.file_type().is_file() {
        Err("not a plain file".into())
    } else if m.uid() != me {
        Err(format!("owned by uid {}, not {me}", m.uid()))
    } else if m.mode() & 0o022 != 0 {
        Err(format!("writable by others (mode {:o})", m.mode() & 0o7777))
    } else {
        Ok(())
    }
}

/// Start time of a process in clock ticks since boot (field 22 of stat).
pub fn process_start_time(pid: u32) -> Option<u64> {
    stat_after_comm(pid)?
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// `/proc/PID/stat` from its third field (the state) on: comm may contain
/// spaces and parentheses, so the fields start after the last ')'.
pub fn stat_after_comm(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(stat.get(stat.rfind(')')? + 2..)?.to_string())
}
