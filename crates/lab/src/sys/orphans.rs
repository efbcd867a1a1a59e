//! Helper commands left by a dead nflab process. `ip netns add`, `ip -n NS
//! …` and `ip netns exec NS ethtool …` are child processes: a SIGKILL of
//! nflab does not end them, and one still running can create a namespace
//! right after `gc` removed the others (found by the crash matrix: a random
//! kill during topology set-up). `gc` kills them first. Every such command
//! names its namespace, `nflab-<owner pid>-…`, on its command line.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::sys::process::{process_start_time, stat_after_comm, RUN_DIR};

/// The owner pid of an nflab namespace name (`nflab-<pid>-<n>-lg`).
fn owner_of(arg: &str) -> Option<u32> {
    arg.strip_prefix("nflab-")?.split('-').next()?.parse().ok()
}

/// Kill (SIGKILL) every process whose command line names a namespace of a
/// dead owner (not a kept one, `nflab topo up`), and wait up to 2 s for them
/// to end; returns their pids.
pub fn kill_helpers_of_dead_owners() -> Vec<u32> {
    let me = std::process::id();
    let orphans = processes_whose_args(|args| {
        args.iter().any(|arg| {
            let arg = String::from_utf8_lossy(arg);
            let kept = std::fs::read_to_string(Path::new(RUN_DIR).join(format!("{arg}.owner")))
                .is_ok_and(|s| s.trim() == "kept");
            owner_of(&arg).is_some_and(|owner| owner != me && process_start_time(owner).is_none())
                && !kept
        })
    });
    let killed: Vec<u32> = orphans
        .into_iter()
        .filter(|&pid| kill(Pid::from_raw(pid as i32), Signal::SIGKILL).is_ok())
        .collect();
    wait_until_gone(&killed, Duration::from_secs(2));
    killed
}

/// Entries of the temp directory named `<prefix><pid>` or `<prefix><pid>-…`
/// whose pid is no longer a process (a controller killed before it could
/// remove them): their names and those pids.
pub(crate) fn temp_entries_of_dead_pids(prefix: &str) -> Vec<(String, u32)> {
    std::fs::read_dir(std::env::temp_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let pid = name
                .strip_prefix(prefix)?
                .split('-')
                .next()?
                .parse::<u32>()
                .ok()?;
            (!Path::new(&format!("/proc/{pid}")).exists()).then_some((name, pid))
        })
        .collect()
}

/// Pids of the processes (not this one) whose command-line arguments
/// satisfy `matches`.
pub(crate) fn processes_whose_args(matches: impl Fn(&[&[u8]]) -> bool) -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
            matches(&args)
        })
        .collect()
}

/// Wait until none of `pids` exists any more, or `within` has passed.
pub(crate) fn wait_until_gone(pids: &[u32], within: Duration) {
    let deadline = Instant::now() + within;
    while pids.iter().any(|&p| !has_exited(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// True when `pid` is no process or a zombie: it has exited, and only its
/// parent's `wait` is missing. A daemonised helper (an SSH master) is reaped
/// by init, which may take its time (a container's init: up to a second).
fn has_exited(pid: u32) -> bool {
    stat_after_comm(pid).is_none_or(|rest| rest.starts_with('Z') || rest.starts_with('X'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zombie_counts_as_exited_and_a_running_process_does_not() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(!has_exited(pid));
        child.kill().unwrap();
        // Not reaped yet: /proc/<pid> stays until `wait`.
        wait_until_gone(&[pid], Duration::from_secs(10));
        assert!(has_exited(pid));
        assert!(
            Path::new(&format!("/proc/{pid}")).exists(),
            "reaped too early"
        );
        child.wait().unwrap();
        assert!(has_exited(pid));
    }

    #[test]
    fn names_give_their_owner() {
        assert_eq!(owner_of("nflab-123-0-lg"), Some(123));
        assert_eq!(owner_of("nflab-x-lg"), None);
        assert_eq!(owner_of("lg0"), None);
    }

    #[test]
    fn a_helper_naming_a_dead_owners_namespace_is_killed_and_others_are_not() {
        use std::os::unix::process::ExitStatusExt;
        // pid 4294967294 never runs (above pid_max): a dead owner. "; :"
        // keeps the shell from exec-ing sleep, which would drop the name from
        // its command line; the wait covers the moment between fork and exec,
        // when the child's command line is still this test's (CI found both).
        let spawn_naming = |name: &str| {
            let child = std::process::Command::new("sh")
                .args(["-c", "sleep 30; :", name])
                .spawn()
                .unwrap();
            let cmdline = format!("/proc/{}/cmdline", child.id());
            let deadline = Instant::now() + Duration::from_secs(10);
            while !std::fs::read(&cmdline).is_ok_and(|c| String::from_utf8_lossy(&c).contains(name))
            {
                assert!(
                    Instant::now() < deadline,
                    "{name} never showed in {cmdline}"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            child
        };
        let mut orphan = spawn_naming("nflab-4294967294-0-lg");
        let alive_owner = format!("nflab-{}-0-lg", std::process::id());
        let mut ours = spawn_naming(&alive_owner);
        let killed = kill_helpers_of_dead_owners();
        assert!(killed.contains(&orphan.id()), "{killed:?}");
        assert!(!killed.contains(&ours.id()), "{killed:?}");
        assert_eq!(orphan.wait().unwrap().signal(), Some(9));
        assert!(ours.try_wait().unwrap().is_none());
        ours.kill().unwrap();
        ours.wait().unwrap();
    }
}
