//! One SSH connection per host for the whole study (OpenSSH multiplexing).
//!
//! Every `nflab remote` call used to pay a full handshake: ≈ 0.38 s on the
//! 2-vCPU reference VM, 0.13 s of it client CPU for the post-quantum key
//! exchange, and a run on a pair makes three (DuT up, LoadGen, DuT down).
//! With `ControlMaster=auto` the first call to a host leaves a master
//! connection behind (`ControlPersist`) and later calls open a session on it.
//!
//! The masters are this process's helpers, so they follow the rules of every
//! helper: [`stop_masters`] ends them when the command ends; a master outlives
//! its last session by at most [`PERSIST_S`] seconds by itself; and after a
//! `kill -9`, `nflab topo gc` finds the socket directory of a dead pid
//! (`nflab-ssh-<pid>` in the temp directory, named on the command line of
//! each master and client) and ends its masters ([`stop_dead_masters`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::sys::orphans::{processes_whose_args, wait_until_gone};

/// Idle seconds after which a master ends by itself: a backstop, long enough
/// to span the gap between a pair's runs.
const PERSIST_S: u32 = 60;

/// Prefix of a controller's socket directory in the temp directory.
const DIR_PREFIX: &str = "nflab-ssh-";

/// Longest socket path a `sockaddr_un` takes (108 bytes with the NUL).
const SUN_PATH_MAX: usize = 107;

fn dir_of(pid: u32) -> PathBuf {
    std::env::temp_dir().join(format!("{DIR_PREFIX}{pid}"))
}

/// The ssh options that share one connection per host, or none when the
/// socket directory cannot be made (then each call connects on its own).
pub fn options() -> Vec<String> {
    let dir = dir_of(std::process::id());
    // %C: a 40-hex-digit hash of local host, remote host, port and user.
    let path = dir.join("%C");
    if path.as_os_str().len() - 2 + 40 > SUN_PATH_MAX || make_private_dir(&dir).is_err() {
        return Vec::new();
    }
    vec![
        "-o".into(),
        "ControlMaster=auto".into(),
        "-o".into(),
        format!("ControlPath={}", path.display()),
        "-o".into(),
        format!("ControlPersist={PERSIST_S}"),
    ]
}

/// The directory, root's only (the sockets give a shell on every host): made
/// now, or made earlier by this process and still private.
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    match nflab_io::safe_fs::create_private_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            nflab_io::safe_fs::check_private_dir(dir)
        }
        r => r,
    }
}

/// End the masters of the controller `pid` and remove its socket directory;
/// the pids of the masters ended.
fn stop_masters_of(pid: u32) -> Vec<u32> {
    let dir = dir_of(pid);
    // A master rewrites its command line to `ssh: DIR/<hash> [mux]`; its
    // clients keep `ControlPath=DIR/%C`. Both name the directory.
    let needle = format!("{}/", dir.display());
    // Only ssh itself (`ssh: …` is a master's rewritten name): another program
    // naming the directory is not ours to end.
    let masters = processes_whose_args(|args| {
        let ssh = args.first().is_some_and(|a0| {
            let base = a0.rsplit(|b| *b == b'/').next().unwrap_or(a0);
            base == b"ssh" || a0.starts_with(b"ssh: ")
        });
        ssh && args
            .iter()
            .any(|a| a.windows(needle.len()).any(|w| w == needle.as_bytes()))
    });
    let ended: Vec<u32> = masters
        .into_iter()
        .filter(|&p| kill(Pid::from_raw(p as i32), Signal::SIGTERM).is_ok())
        .collect();
    wait_until_gone(&ended, Duration::from_secs(2));
    let _ = std::fs::remove_dir_all(&dir);
    ended
}

/// End this process's masters: when a command that talked to hosts ends.
pub fn stop_masters() {
    if dir_of(std::process::id()).exists() {
        stop_masters_of(std::process::id());
    }
}

/// For `topo gc`: the masters of controllers that are gone (killed before
/// they could end them); one line per directory removed.
pub fn stop_dead_masters() -> Vec<String> {
    crate::sys::orphans::temp_entries_of_dead_pids(DIR_PREFIX)
        .into_iter()
        .map(|(name, pid)| {
            let n = stop_masters_of(pid).len();
            format!("{name} ({n} SSH master connection(s))")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_path_fits_a_unix_socket_address() {
        let opts = options();
        let path = opts
            .iter()
            .find_map(|o| o.strip_prefix("ControlPath="))
            .expect("a control path in the temp directory");
        assert!(path.len() - 2 + 40 <= SUN_PATH_MAX, "{path}");
        let dir = Path::new(path).parent().unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
        stop_masters();
        assert!(!dir.exists());
    }
}
