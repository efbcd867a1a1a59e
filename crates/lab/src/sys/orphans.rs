//! Helper commands left by a dead nflab process. `ip netns add`, `ip -n NS
//! …` and `ip netns exec NS ethtool …` are child processes: a SIGKILL of
//! nflab does not end them, and one still running can create a namespace
//! right after `gc` removed the others (found by the crash matrix: a random
//! kill during topology set-up). `gc` kills them first.
//!
//! Only nflab's own shapes count: an `ip` command naming, where `ip` takes a
//! namespace, the full name of a namespace whose owner file nflab wrote (it
//! writes it before `ip netns add`) and whose owner is gone. Any other process
//! — `vim nflab-2024-notes.md` — is not nflab's, whatever its arguments.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::sys::process::{process_start_time, stat_after_comm, RUN_DIR};

/// Prefix of every namespace nflab creates.
const NS_PREFIX: &str = "nflab-";

/// Whether `name` is a namespace nflab recorded (`RUN_DIR/<name>.owner`) for
/// an owner that is gone (not this process, not a kept topology).
fn recorded_with_dead_owner(name: &[u8]) -> bool {
    let Ok(name) = std::str::from_utf8(name) else {
        return false;
    };
    let plain = name.starts_with(NS_PREFIX)
        && !name.contains('/')
        && name.len() < 200
        && name.bytes().all(|b| b.is_ascii_graphic());
    if !plain {
        return false;
    }
    let Ok(owner) = std::fs::read_to_string(Path::new(RUN_DIR).join(format!("{name}.owner")))
    else {
        return false;
    };
    let mut it = owner.split_whitespace();
    let (Some(pid), start) = (
        it.next().and_then(|p| p.parse::<u32>().ok()),
        it.next().and_then(|s| s.parse::<u64>().ok()),
    ) else {
        return false; // "kept", or not an owner line
    };
    if pid == std::process::id() {
        return false;
    }
    match (process_start_time(pid), start) {
        (None, _) => true,
        (Some(now), Some(then)) => now != then,
        (Some(_), None) => false,
    }
}

/// Whether `args` is one of nflab's helper commands for a namespace that
/// [`recorded_with_dead_owner`]: `ip -n NS …`, `ip netns add|del|exec NS …`,
/// `ip … netns NS` (a link moved into it).
fn is_helper_of_dead_owner(args: &[&[u8]]) -> bool {
    let is_ip = args
        .first()
        .is_some_and(|a0| a0.rsplit(|b| *b == b'/').next() == Some(&b"ip"[..]));
    if !is_ip {
        return false;
    }
    let named_after = |w: &[&[u8]]| match w {
        [b"netns", b"add" | b"del" | b"delete" | b"exec", ns, ..] => recorded_with_dead_owner(ns),
        [b"-n" | b"-netns" | b"netns", ns, ..] => recorded_with_dead_owner(ns),
        _ => false,
    };
    (1..args.len()).any(|i| named_after(&args[i..]))
}

/// Kill (SIGKILL) every nflab helper command of a namespace of a dead owner
/// ([`is_helper_of_dead_owner`]), and wait up to 2 s for them to end;
/// returns their pids.
pub fn kill_helpers_of_dead_owners() -> Vec<u32> {
    let orphans = processes_whose_args(is_helper_of_dead_owner);
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

    /// A namespace recorded as nflab's, with an owner that is gone; removed
    /// with its owner file when the test ends, also when it fails.
    struct DeadOwnersNs(String);
    impl DeadOwnersNs {
        fn create(tag: &str) -> DeadOwnersNs {
            // pid 4294967294 never runs (above pid_max): a dead owner.
            let ns = DeadOwnersNs(format!("nflab-4294967294-{}-{tag}", std::process::id()));
            nflab_io::safe_fs::ensure_private_dir(Path::new(RUN_DIR)).unwrap();
            std::fs::write(ns.owner(), "4294967294 1\n").unwrap();
            let ok = std::process::Command::new("ip")
                .args(["netns", "add", &ns.0])
                .status()
                .unwrap();
            assert!(ok.success());
            ns
        }
        fn owner(&self) -> std::path::PathBuf {
            Path::new(RUN_DIR).join(format!("{}.owner", self.0))
        }
    }
    impl Drop for DeadOwnersNs {
        fn drop(&mut self) {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", &self.0])
                .status();
            let _ = std::fs::remove_file(self.owner());
        }
    }

    /// A child that shows `shows` on its command line; killed when dropped.
    struct Shown(std::process::Child);
    impl Drop for Shown {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    fn spawn_showing(program: &str, args: &[&str], shows: &str) -> Shown {
        let child = Shown(
            std::process::Command::new(program)
                .args(args)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        // The wait covers the moment between fork and exec, when the child's
        // command line is still this test's.
        let cmdline = format!("/proc/{}/cmdline", child.0.id());
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::fs::read(&cmdline).is_ok_and(|c| String::from_utf8_lossy(&c).contains(shows)) {
            assert!(
                Instant::now() < deadline,
                "{shows} never showed in {cmdline}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        child
    }

    #[test]
    fn only_nflabs_helpers_of_a_recorded_dead_namespace_are_killed() {
        use std::os::unix::process::ExitStatusExt;
        if !nflab_testkit::require_root() {
            return;
        }
        let dead = DeadOwnersNs::create("gc");
        // nflab's helper shape: `ip -n NS …`, still running for a dead owner.
        let mut helper = spawn_showing("ip", &["-n", &dead.0, "monitor", "link"], &dead.0);
        // Someone else's processes: an argument shaped like a namespace of a
        // dead pid ("; :" keeps sh from exec-ing sleep, which would drop it),
        // and the full recorded name, but not in an ip command.
        // (4294967293: a pid that never runs, as 2024 in `vim nflab-2024-notes.md` may not.)
        let notes = spawn_showing(
            "sh",
            &["-c", "sleep 30; :", "nflab-4294967293-notes.md"],
            "notes",
        );
        let other = spawn_showing("sh", &["-c", "sleep 30; :", &dead.0], &dead.0);
        let killed = kill_helpers_of_dead_owners();
        assert!(killed.contains(&helper.0.id()), "{killed:?}");
        for survivor in [&notes, &other] {
            assert!(!killed.contains(&survivor.0.id()), "{killed:?}");
        }
        assert_eq!(helper.0.wait().unwrap().signal(), Some(9));
        let mut notes = notes;
        assert!(notes.0.try_wait().unwrap().is_none());
        // An ip command naming a namespace nflab never recorded is not a helper.
        let unrecorded = format!("nflab-4294967294-{}-never", std::process::id());
        let args: Vec<&[u8]> = vec![b"ip", b"-n", unrecorded.as_bytes(), b"monitor"];
        assert!(!is_helper_of_dead_owner(&args));
    }

    #[test]
    fn a_helper_of_a_live_or_kept_owner_is_spared() {
        if !nflab_testkit::require_root() {
            return;
        }
        let ns = DeadOwnersNs::create("alive");
        let helper = spawn_showing("ip", &["-n", &ns.0, "monitor", "link"], &ns.0);
        let cmd = std::fs::read(format!("/proc/{}/cmdline", helper.0.id())).unwrap();
        let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
        let me = std::process::id();
        let start = process_start_time(me).unwrap();
        // Judged on its real command line, not killed here (another test kills).
        std::fs::write(ns.owner(), format!("{me} {start}\n")).unwrap();
        assert!(!is_helper_of_dead_owner(&args));
        std::fs::write(ns.owner(), "kept\n").unwrap();
        assert!(!is_helper_of_dead_owner(&args));
        // A reused pid (a live process, another start time): the owner is gone.
        let other = helper.0.id();
        let other_start = process_start_time(other).unwrap();
        std::fs::write(ns.owner(), format!("{other} {}\n", other_start + 1)).unwrap();
        assert!(is_helper_of_dead_owner(&args));
        let args: Vec<&[u8]> = vec![b"/usr/sbin/ip", b"netns", b"exec", ns.0.as_bytes(), b"x"];
        assert!(is_helper_of_dead_owner(&args));
        let args: Vec<&[u8]> = vec![b"vim", b"-n", ns.0.as_bytes()];
        assert!(!is_helper_of_dead_owner(&args));
    }
}
