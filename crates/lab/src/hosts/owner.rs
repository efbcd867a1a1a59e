//! The controller's owner tag and what it leaves on a host under it, so that `nflab
//! topo gc` can take it back after a `kill -9` (`hosts::remote_gc`): the DuT
//! host's state files, the LoadGen's scratch directories, and the knob journal
//! entry naming each host the controller touches.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::LabError;
use crate::knobs::journal::{KnobJournal, Restore, JOURNAL_DIR};
use crate::spec::hosts::HostEntry;

/// Prefix of the scratch directories (under the temp dir) of a LoadGen host's runs.
pub const SCRATCH_PREFIX: &str = "nflab-lg-";

/// Prefix of a DuT host's state files in [`JOURNAL_DIR`].
pub(crate) const DUT_STATE_PREFIX: &str = "remote-dut-";

/// This controller's tag, `<host>-<pid>-<start time>`: unique among the
/// controllers a host serves, and safe as a file-name part.
pub fn owner_tag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let host: String = host
            .trim()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .take(32)
            .collect();
        let pid = std::process::id();
        let start = crate::sys::process::process_start_time(pid).unwrap_or(0);
        format!("{host}-{pid}-{start}")
    })
}

/// A knob journal naming `host` ([`crate::knobs::journal::Restore::Remote`]),
/// written before the controller changes anything there; `finish` it once
/// the host is clean again.
pub fn journal_host(host: &HostEntry) -> Result<KnobJournal, LabError> {
    let mut journal = KnobJournal::new(Path::new(JOURNAL_DIR));
    journal.record(&Restore::Remote {
        host: Box::new(host.clone()),
        owner: owner_tag().to_string(),
    })?;
    Ok(journal)
}

/// Check a tag that arrived over SSH before it names files or processes.
pub fn check_tag(tag: &str) -> Result<(), LabError> {
    let ok = !tag.is_empty()
        && tag.len() <= 100
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(LabError::Host(format!(
            "--owner {tag:?} is not an owner tag: letters, digits, '-' and '_', at most 100"
        )))
    }
}

/// Where the DuT host keeps the state of `tag`'s set-up on `ingress`.
///
/// Hosts that are network namespaces of one machine share `/run`: two DuTs
/// of one controller with the same ingress name would write (and `gc` would
/// undo) one file, so the name carries this thread's network namespace.
pub fn dut_state_path(tag: &str, ingress: &str) -> PathBuf {
    state_path_in(nflab_io::iface::this_netns_inode(), tag, ingress)
}

pub(crate) fn state_path_in(netns: u64, tag: &str, ingress: &str) -> PathBuf {
    Path::new(JOURNAL_DIR).join(format!("{}{ingress}.json", states_prefix(netns, tag)))
}

/// File-name prefix of `tag`'s DuT states in the namespace `netns`.
pub(crate) fn states_prefix(netns: u64, tag: &str) -> String {
    format!("{DUT_STATE_PREFIX}{tag}-{netns}-")
}

/// Write the DuT's state (fsynced) so that a gc can undo it.
pub fn save_dut_state<T: serde::Serialize>(path: &Path, st: &T) -> Result<(), LabError> {
    use std::io::Write;
    let err = |e: std::io::Error| {
        LabError::Host(format!(
            "cannot write the DuT state {}: {e}; nflab changes nothing it could not undo after a crash",
            path.display()
        ))
    };
    crate::sys::process::ensure_run_dir(Path::new(JOURNAL_DIR))?;
    let tmp = path.with_extension("tmp");
    let text = serde_json::to_vec(st).map_err(|e| LabError::Other(e.to_string()))?;
    let mut f = std::fs::File::create(&tmp).map_err(err)?;
    f.write_all(&text).and_then(|_| f.sync_all()).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_that_could_name_other_files_are_refused() {
        assert!(check_tag(owner_tag()).is_ok(), "{}", owner_tag());
        for bad in ["", "a/b", "../x", "a b", "a;rm", &"x".repeat(101), "a.b"] {
            assert!(check_tag(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_state_file_is_named_by_tag_namespace_and_ingress() {
        let p = state_path_in(4026531840, "h-1-2", "eth1");
        assert_eq!(
            p,
            Path::new("/run/nflab/remote-dut-h-1-2-4026531840-eth1.json")
        );
        assert!(nflab_io::iface::this_netns_inode() > 0);
        let here = dut_state_path("h-1-2", "eth1");
        // A thread of its own in a new namespace (the suite runs as root).
        let other = std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
                .expect("unshare(CLONE_NEWNET) needs root");
            dut_state_path("h-1-2", "eth1")
        })
        .join()
        .unwrap();
        assert_ne!(here, other, "two namespaces, one file");
    }
}
