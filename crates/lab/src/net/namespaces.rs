//! The namespaces nflab makes: their names, owner files and removal. Every
//! namespace gets an owner file in `/run/nflab/` with the pid and start time of
//! the process that made it, so `nflab topo gc` can tell leftovers of dead runs
//! from namespaces in use.

use std::path::PathBuf;

use serde::Serialize;

use super::cmd::ip;
use crate::error::LabError;
use crate::sys::process::process_start_time;

/// Directory of owner files.
pub const OWNER_DIR: &str = crate::sys::process::RUN_DIR;
/// Prefix of every namespace nflab creates.
pub const NS_PREFIX: &str = "nflab-";

/// Remove one namespace and its owner file; a namespace already gone is fine.
/// The owner file goes last: while the namespace exists, it says whose it is.
pub fn remove_namespace(ns: &str) -> Result<(), LabError> {
    // A testpmd DuT whose owner was killed leaves EAL's run-time files behind.
    if let Some(id) = ns.strip_suffix("-dut") {
        let _ = std::fs::remove_dir_all(std::path::Path::new("/var/run/dpdk").join(id));
    }
    if std::path::Path::new("/run/netns").join(ns).exists() {
        ip(&["netns", "del", ns])?;
    }
    let _ = std::fs::remove_file(owner_path(ns));
    Ok(())
}

/// The owner file of namespace `ns`.
pub fn owner_path(ns: &str) -> PathBuf {
    PathBuf::from(OWNER_DIR).join(format!("{ns}.owner"))
}

/// Write `ns`'s owner file: this process's pid and start time.
pub fn write_owner(ns: &str) -> Result<(), LabError> {
    crate::sys::process::ensure_run_dir(std::path::Path::new(OWNER_DIR))?;
    let pid = std::process::id();
    let start = process_start_time(pid).unwrap_or(0);
    // Written aside and renamed into place: another run's gc that reads the file
    // while it is being written would see no owner and remove the namespace.
    let path = owner_path(ns);
    let partial = path.with_extension(format!("owner.partial-{pid}"));
    std::fs::write(&partial, format!("{pid} {start}\n"))
        .and_then(|()| std::fs::rename(&partial, &path))
        .map_err(|e| LabError::Topology(format!("cannot write owner file for {ns}: {e}")))
}

/// Remove the owner files of namespaces that do not exist, whose owner is
/// gone (killed between writing the file and adding the namespace); their names.
pub fn remove_stale_owner_files() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(OWNER_DIR) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let ns = name.strip_suffix(".owner")?;
            let exists = std::path::Path::new("/run/netns").join(ns).exists();
            let text = std::fs::read_to_string(e.path()).ok()?;
            let mut it = text.split_whitespace();
            let pid = it.next()?.parse::<u32>().ok()?;
            let start = it.next()?.parse::<u64>().ok()?;
            let dead = process_start_time(pid) != Some(start);
            (ns.starts_with(NS_PREFIX) && !exists && dead && std::fs::remove_file(e.path()).is_ok())
                .then(|| format!("{OWNER_DIR}/{name} (no namespace)"))
        })
        .collect()
}

/// A namespace made by nflab and who owns it.
#[derive(Debug, Clone, Serialize)]
pub struct NamespaceInfo {
    /// Namespace name.
    pub name: String,
    /// Owner pid, if known.
    pub owner_pid: Option<u32>,
    /// Whether the owner is still running.
    pub owner_alive: bool,
    /// Made by `nflab topo up` to stay until `nflab topo down`.
    pub kept: bool,
}

/// Every nflab namespace on this host.
pub fn list_namespaces() -> Vec<NamespaceInfo> {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return Vec::new();
    };
    let mut out: Vec<NamespaceInfo> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(NS_PREFIX))
        .map(|name| {
            let owner = std::fs::read_to_string(owner_path(&name)).ok();
            let kept = owner.as_deref().map(str::trim) == Some("kept");
            let (pid, start) = match owner.as_deref().map(|s| {
                let mut it = s.split_whitespace();
                (
                    it.next().and_then(|p| p.parse::<u32>().ok()),
                    it.next().and_then(|p| p.parse::<u64>().ok()),
                )
            }) {
                Some((p, s)) => (p, s),
                // No owner file: the pid is the first part of the id.
                None => (
                    name.trim_start_matches(NS_PREFIX)
                        .split('-')
                        .next()
                        .and_then(|p| p.parse().ok()),
                    None,
                ),
            };
            let owner_alive = match (pid, start) {
                (Some(p), Some(s)) => process_start_time(p) == Some(s),
                (Some(p), None) => process_start_time(p).is_some(),
                _ => false,
            };
            NamespaceInfo {
                name,
                owner_pid: pid.filter(|_| !kept),
                owner_alive: owner_alive && !kept,
                kept,
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}
