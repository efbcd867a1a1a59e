//! Entering a network namespace from one thread.
//!
//! A socket belongs to the namespace it was created in, wherever the thread
//! that uses it runs later. So the lab enters the LoadGen namespace on the
//! current thread only for as long as it takes to open the sockets, then
//! returns to where it was (`NetnsGuard` restores on drop).

use std::fs::File;
use std::os::fd::AsFd;

use nix::sched::{setns, CloneFlags};

use crate::error::LabError;

/// While alive, the current thread is in another network namespace.
pub struct NetnsGuard {
    original: File,
}

impl NetnsGuard {
    /// Move the current thread into the named namespace (`/run/netns/NAME`).
    pub fn enter(name: &str) -> Result<NetnsGuard, LabError> {
        let original = File::open("/proc/thread-self/ns/net").map_err(|e| {
            LabError::Topology(format!("cannot open this thread's network namespace: {e}"))
        })?;
        let target = File::open(format!("/run/netns/{name}")).map_err(|e| {
            LabError::Topology(format!("network namespace '{name}' does not exist ({e})"))
        })?;
        setns(target.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|e| {
            LabError::Host(format!(
                "cannot enter network namespace '{name}': {e}; nflab needs root (CAP_SYS_ADMIN)"
            ))
        })?;
        Ok(NetnsGuard { original })
    }

    /// Run `f` inside the named namespace and come back.
    pub fn run<T>(name: &str, f: impl FnOnce() -> T) -> Result<T, LabError> {
        let _guard = NetnsGuard::enter(name)?;
        Ok(f())
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        // Failing to return would leave this thread in a namespace that is
        // about to be deleted; there is nothing better to do than report it.
        if let Err(e) = setns(self.original.as_fd(), CloneFlags::CLONE_NEWNET) {
            eprintln!("warning: could not return to the original network namespace: {e}");
        }
    }
}

/// Fail early, with the fix, when not root.
pub fn check_root() -> Result<(), LabError> {
    if nix::unistd::geteuid().is_root() {
        Ok(())
    } else {
        Err(LabError::Host(
            "this needs root (network namespaces and raw sockets): run it with sudo".into(),
        ))
    }
}
