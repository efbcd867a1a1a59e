//! Processes of this host as /proc tells them: start times tell a live owner from a
//! reused pid.

/// Where nflab keeps its owner files and journals.
pub const RUN_DIR: &str = "/run/nflab";

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
