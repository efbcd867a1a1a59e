//! The monitor's thread works inside the DuT's network namespace: the interface
//! indexes it filters on, and the sockets table it samples, are that namespace's.

use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;

use nix::sched::{setns, CloneFlags};

use crate::MonitorError;

/// Move this thread into `/run/netns/NAME` for good (the thread is the monitor's
/// own) and return the namespace's inode number, which the programs compare with
/// `net->ns.inum`.
pub fn enter(name: &str) -> Result<u32, MonitorError> {
    let path = format!("/run/netns/{name}");
    let f = File::open(&path).map_err(|e| {
        MonitorError::Unsupported(format!("network namespace '{name}' does not exist ({e})"))
    })?;
    let ino = f
        .metadata()
        .map_err(|e| MonitorError::Bpf(format!("cannot stat {path}: {e}")))?
        .ino();
    setns(f.as_fd(), CloneFlags::CLONE_NEWNET)
        .map_err(|e| MonitorError::Bpf(format!("cannot enter network namespace '{name}': {e}")))?;
    Ok(ino as u32)
}

/// The index of interface `dev` in this thread's namespace.
pub fn ifindex(dev: &str) -> Result<u32, MonitorError> {
    nix::net::if_::if_nametoindex(dev)
        .map_err(|e| MonitorError::Bpf(format!("no interface {dev} in the DuT's namespace: {e}")))
}
