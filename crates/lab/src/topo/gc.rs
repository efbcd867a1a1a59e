//! `nflab topo gc`: what dead runs left on this host — their helper commands,
//! namespaces, Open vSwitch instances, pinned SSH keys, SSH masters — removed,
//! and the knobs of their journals put back.

use crate::error::LabError;
use crate::net::namespaces::{list_namespaces, remove_namespace, NS_PREFIX, OWNER_DIR};
use crate::net::netns::check_root;

/// Remove namespaces whose owner is gone, and Open vSwitch instances whose
/// owner is gone (their daemons killed, their run directories removed);
/// then put back the knobs of dead owners' journals (`knob_journal`);
/// returns what it removed, one line each.
pub fn gc() -> Result<Vec<String>, LabError> {
    gc_of(None)
}

/// [`gc`], limited to the namespaces of topology `id` (`<pid>-<n>`) when given: what a
/// killed run left, without touching other runs' leftovers (nor Open vSwitch instances).
pub fn gc_of(id: Option<&str>) -> Result<Vec<String>, LabError> {
    check_root()?;
    // Everything below acts as root on what /run/nflab holds: only when root alone can write it.
    if std::path::Path::new(OWNER_DIR).exists() {
        crate::sys::process::ensure_run_dir(std::path::Path::new(OWNER_DIR))?;
    }
    let whole_host = id.is_none();
    if whole_host {
        // First the dead owners' helper commands, which could still add a namespace.
        crate::sys::orphans::kill_helpers_of_dead_owners();
    }
    let mut removed = if whole_host {
        let mut r = nflab_sdn::ovs::gc();
        r.extend(crate::hosts::ssh_args::remove_dead_pinned_keys());
        r.extend(crate::hosts::ssh_mux::stop_dead_masters());
        r
    } else {
        Vec::new()
    };
    let prefix = id.map(|id| format!("{NS_PREFIX}{id}-"));
    for ns in list_namespaces() {
        let ours = prefix.as_deref().is_none_or(|p| ns.name.starts_with(p));
        if ours && !ns.owner_alive && !ns.kept {
            remove_namespace(&ns.name)?;
            removed.push(ns.name);
        }
    }
    if whole_host {
        removed.extend(crate::net::namespaces::remove_stale_owner_files());
    }
    // After the namespaces: knobs inside a removed one went with it. Journals are the
    // whole host's business: a gc limited to one topology leaves them.
    let journals = if whole_host {
        crate::knobs::journal::replay_dead(std::path::Path::new(OWNER_DIR))
    } else {
        Vec::new()
    };
    if whole_host {
        crate::knobs::journal::remove_stale_lock(std::path::Path::new(OWNER_DIR));
    }
    for r in journals {
        for e in &r.failed {
            eprintln!("warning: knob journal {}: {e}", r.journal.display());
        }
        removed.push(format!(
            "knob journal {} of pid {} ({} original values restored{}{})",
            r.journal.display(),
            r.owner_pid,
            r.restored,
            if r.skipped > 0 {
                format!(", {} gone with their namespace", r.skipped)
            } else {
                String::new()
            },
            if r.failed.is_empty() {
                String::new()
            } else {
                format!(", {} failed: journal kept", r.failed.len())
            }
        ));
    }
    Ok(removed)
}
