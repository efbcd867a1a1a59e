//! Network namespaces of the SDN set-ups: one private namespace per run, and
//! entering it on the current thread to open sockets there (a socket stays in
//! the namespace it was created in).

use std::fs::File;
use std::os::fd::AsFd;
use std::process::Command;

use nix::sched::{setns, CloneFlags};

use crate::error::SdnError;

/// Directory of nflab's owner files (shared with `nflab topo gc`).
pub const OWNER_DIR: &str = "/run/nflab";

/// While alive, the current thread is in another network namespace.
pub struct NetnsGuard {
    original: File,
}

impl NetnsGuard {
    /// Move the current thread into `/run/netns/NAME`.
    pub fn enter(name: &str) -> Result<NetnsGuard, SdnError> {
        let original = File::open("/proc/thread-self/ns/net")
            .map_err(|e| SdnError::io("cannot open this thread's network namespace", e))?;
        let target = File::open(format!("/run/netns/{name}"))
            .map_err(|e| SdnError::io(format!("network namespace '{name}' does not exist"), e))?;
        setns(target.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|e| {
            SdnError::Host(format!(
                "cannot enter network namespace '{name}': {e}; nflab needs root"
            ))
        })?;
        Ok(NetnsGuard { original })
    }

    /// Run `f` inside the named namespace (or here, for `None`) and come back.
    pub fn run<T>(name: Option<&str>, f: impl FnOnce() -> T) -> Result<T, SdnError> {
        let _guard = match name {
            Some(n) => Some(NetnsGuard::enter(n)?),
            None => None,
        };
        Ok(f())
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        if let Err(e) = setns(self.original.as_fd(), CloneFlags::CLONE_NEWNET) {
            eprintln!("warning: could not return to the original network namespace: {e}");
        }
    }
}

/// Make [`OWNER_DIR`] root's alone (0700; another owner or a symlink refused):
/// `nflab topo gc` acts as root on what it finds there.
pub fn ensure_owner_dir() -> Result<(), SdnError> {
    let dir = std::path::Path::new(OWNER_DIR);
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| SdnError::io(format!("cannot create {}", parent.display()), e))?;
    }
    nflab_io::safe_fs::ensure_private_dir(dir).map_err(|e| {
        SdnError::Host(format!(
            "{OWNER_DIR} is not a directory only root can write ({e}): remove it and run again"
        ))
    })
}

/// Start time of a process in clock ticks since boot (field 22 of stat).
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// "PID START" of this process, the content of an owner file.
pub fn owner_line() -> String {
    let pid = std::process::id();
    format!("{pid} {}\n", process_start_time(pid).unwrap_or(0))
}

/// Whether the owner written by [`owner_line`] is still running.
pub fn owner_alive(line: &str) -> bool {
    let mut it = line.split_whitespace();
    let pid = it.next().and_then(|p| p.parse::<u32>().ok());
    let start = it.next().and_then(|p| p.parse::<u64>().ok());
    match (pid, start) {
        (Some(p), Some(s)) => process_start_time(p) == Some(s),
        _ => false,
    }
}

/// A private namespace `nflab-<pid>-<tag><n>` with loopback up, owned by this
/// process (owner file in [`OWNER_DIR`], so `nflab topo gc` removes it after a
/// crash); deleted on drop.
pub struct PrivateNetns {
    name: String,
}

impl PrivateNetns {
    /// Create it.
    pub fn create(tag: &str) -> Result<PrivateNetns, SdnError> {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("nflab-{}-{tag}{n}", std::process::id());
        ensure_owner_dir()?;
        // The owner file before the namespace: `nflab topo gc` knows the helpers
        // of a dead run's namespace by it.
        let owner = format!("{OWNER_DIR}/{name}.owner");
        std::fs::write(&owner, owner_line())
            .map_err(|e| SdnError::io(format!("cannot write the owner file of {name}"), e))?;
        if let Err(e) = run("ip", &["netns", "add", &name]) {
            let _ = std::fs::remove_file(&owner);
            return Err(e);
        }
        let ns = PrivateNetns { name };
        run("ip", &["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn owner_path(&self) -> String {
        format!("{OWNER_DIR}/{}.owner", self.name)
    }
}

impl Drop for PrivateNetns {
    fn drop(&mut self) {
        match run("ip", &["netns", "del", &self.name]) {
            Ok(_) => {
                let _ = std::fs::remove_file(self.owner_path());
            }
            Err(e) => eprintln!("warning: {e}"),
        }
    }
}

/// Run a host command, the program from the system's directories (never
/// PATH, `nflab_io::process::system_tool`); its stdout, or one sentence with its stderr.
pub fn run(prog: &str, args: &[&str]) -> Result<String, SdnError> {
    let out = Command::new(nflab_io::process::system_tool(prog))
        .args(args)
        .output()
        .map_err(|e| SdnError::Host(format!("cannot run '{prog}': {e}; is it installed?")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(SdnError::Host(format!(
            "'{prog} {}' failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}
