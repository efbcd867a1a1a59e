//! Process-wide settings a command-line tool needs.

/// Let SIGPIPE end the process quietly, as it does for C tools, so
/// `nflab … | head` stops without an error when `head` has read enough.
/// Rust programs ignore SIGPIPE by default and then panic on the next print.
pub fn restore_default_sigpipe() {
    // SAFETY: setting a signal disposition to SIG_DFL installs no handler
    // code and has no memory-safety preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Scheduling policy of the calling thread: "other", "fifo:<prio>", "rr:<prio>".
pub fn thread_sched() -> String {
    // SAFETY: sched_getscheduler/sched_getparam on pid 0 (this thread) only
    // read into a local, zero-initialised struct.
    unsafe {
        let policy = libc::sched_getscheduler(0);
        let mut p: libc::sched_param = std::mem::zeroed();
        libc::sched_getparam(0, &mut p);
        match policy {
            libc::SCHED_FIFO => format!("fifo:{}", p.sched_priority),
            libc::SCHED_RR => format!("rr:{}", p.sched_priority),
            libc::SCHED_BATCH => "batch".into(),
            libc::SCHED_IDLE => "idle".into(),
            _ => "other".into(),
        }
    }
}

/// Set the calling thread's policy ("other", "fifo:N", "rr:N", N in 1..=99).
/// Threads it starts afterwards inherit it.
pub fn set_thread_sched(spec: &str) -> Result<(), String> {
    let (policy, prio) = parse_sched(spec)?;
    // SAFETY: sched_setscheduler on pid 0 (this thread) with a valid
    // sched_param; the kernel validates the values.
    let rc = unsafe {
        let p = libc::sched_param {
            sched_priority: prio,
        };
        libc::sched_setscheduler(0, policy, &p)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

/// Parse "other", "batch", "idle", "fifo:N" or "rr:N".
pub fn parse_sched(spec: &str) -> Result<(i32, i32), String> {
    let bad = || {
        format!("scheduling policy \"{spec}\" is not valid: use other, batch, idle, fifo:N or rr:N with N from 1 to 99")
    };
    let (name, prio) = match spec.split_once(':') {
        Some((n, p)) => (n, p.parse::<i32>().map_err(|_| bad())?),
        None => (spec, 0),
    };
    let policy = match name {
        "other" => libc::SCHED_OTHER,
        "batch" => libc::SCHED_BATCH,
        "idle" => libc::SCHED_IDLE,
        "fifo" => libc::SCHED_FIFO,
        "rr" => libc::SCHED_RR,
        _ => return Err(bad()),
    };
    let realtime = policy == libc::SCHED_FIFO || policy == libc::SCHED_RR;
    if realtime != (1..=99).contains(&prio) || (!realtime && prio != 0) {
        return Err(bad());
    }
    Ok((policy, prio))
}

/// Where system tools are taken from, in this order: directories only root
/// can write. Never `PATH`: a root process started through `sudo` with the
/// caller's PATH (`$HOME/.cargo/bin` first, say) would otherwise run whatever
/// `ip` or `ssh` the caller put there.
pub const SYSTEM_DIRS: [&str; 6] = [
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
    "/usr/local/sbin",
    "/usr/local/bin",
];

/// The absolute path of the system tool `name` (`ip`, `tc`, `ssh`, `ethtool`,
/// `sh`, …), the first of [`SYSTEM_DIRS`] that has it as an executable file.
/// When none has it, the path in the first directory: running it then fails
/// with "No such file or directory", naming the tool.
pub fn system_tool(name: &str) -> std::path::PathBuf {
    find_system_tool(name).unwrap_or_else(|| std::path::Path::new(SYSTEM_DIRS[0]).join(name))
}

/// The absolute path of the system tool `name`, the first of [`SYSTEM_DIRS`]
/// that has it as an executable file; None when none has it (not installed).
/// A `name` with a `/` is never looked up: None.
pub fn find_system_tool(name: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if name.is_empty() || name.contains('/') {
        return None;
    }
    SYSTEM_DIRS
        .iter()
        .map(|d| std::path::Path::new(d).join(name))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// [`SYSTEM_DIRS`] as a `PATH` value, for the commands nflab runs that look
/// programs up themselves (a hook's `sh -c "ip …"`, `ip netns exec`).
pub fn system_path() -> String {
    SYSTEM_DIRS.join(":")
}

#[cfg(test)]
mod system_tool_tests {
    use super::*;

    #[test]
    fn system_tools_come_from_system_directories_only() {
        let ip = system_tool("ip");
        assert!(ip.is_absolute(), "{}", ip.display());
        assert!(
            SYSTEM_DIRS.iter().any(|d| ip.starts_with(d)),
            "{}",
            ip.display()
        );
        let missing = system_tool("nflab-no-such-tool");
        assert_eq!(
            missing,
            std::path::Path::new("/usr/sbin/nflab-no-such-tool")
        );
        assert_eq!(find_system_tool("nflab-no-such-tool"), None);
        assert_eq!(find_system_tool("../bin/sh"), None);
        assert_eq!(
            find_system_tool("sh").as_deref(),
            Some(system_tool("sh").as_path())
        );
        assert!(system_path().split(':').all(|d| SYSTEM_DIRS.contains(&d)));
    }
}
