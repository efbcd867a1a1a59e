//! What a controller leaves on its hosts when it is killed, and how `nflab
//! topo gc` takes it back.
//!
//! Every `nflab remote` call that changes a host carries the controller's
//! owner tag (`--owner`, [`owner_tag`]). On the DuT host `dut-up` keeps its
//! state in `/run/nflab/remote-dut-<tag>-<netns>-<ingress>.json` (`<netns>`:
//! the inode of its network namespace, so hosts that are namespaces of one
//! machine keep apart), rewritten after each change; on the LoadGen host a
//! run's scratch directory and its `nflab remote loadgen` process carry the
//! tag. Before the controller touches a host it writes a
//! [`crate::knobs::journal::Restore::Remote`] entry into its own knob journal,
//! and removes the journal once the host is clean again. After a `kill -9`
//! the journal outlives its owner, and `topo gc` asks each host it names to
//! run `nflab remote gc --owner TAG` ([`gc_owned`]),
//! which stops that controller's LoadGen processes, deletes its scratch
//! directories and undoes its DuT set-ups.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::error::LabError;
use crate::hosts::remote_dut::DutState;
use crate::knobs::journal::{KnobJournal, Restore, JOURNAL_DIR};
use crate::run::loadgen::SCRATCH_PREFIX;
use crate::spec::hosts::HostEntry;
use crate::sys::orphans::{processes_whose_args, wait_until_gone};

/// Prefix of a DuT host's state files in [`JOURNAL_DIR`].
const DUT_STATE_PREFIX: &str = "remote-dut-";

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

fn state_path_in(netns: u64, tag: &str, ingress: &str) -> PathBuf {
    Path::new(JOURNAL_DIR).join(format!("{}{ingress}.json", states_prefix(netns, tag)))
}

/// File-name prefix of `tag`'s DuT states in the namespace `netns`.
fn states_prefix(netns: u64, tag: &str) -> String {
    format!("{DUT_STATE_PREFIX}{tag}-{netns}-")
}

/// Write the DuT's state (fsynced) so that a gc can undo it.
pub fn save_dut_state(path: &Path, st: &DutState) -> Result<(), LabError> {
    use std::io::Write;
    let err = |e: std::io::Error| {
        LabError::Host(format!(
            "cannot write the DuT state {}: {e}; nflab changes nothing it could not undo after a crash",
            path.display()
        ))
    };
    std::fs::create_dir_all(JOURNAL_DIR).map_err(err)?;
    let tmp = path.with_extension("tmp");
    let text = serde_json::to_vec(st).map_err(|e| LabError::Other(e.to_string()))?;
    let mut f = std::fs::File::create(&tmp).map_err(err)?;
    f.write_all(&text).and_then(|_| f.sync_all()).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

/// What `nflab remote gc --owner TAG` did on this host.
#[derive(Debug, Default, serde::Serialize)]
pub struct OwnedGc {
    /// `nflab remote loadgen` processes of the owner, stopped.
    pub stopped: Vec<u32>,
    /// Scratch directories of the owner, removed.
    pub scratch_removed: Vec<String>,
    /// DuT set-ups of the owner, undone.
    pub duts_undone: Vec<String>,
    /// What could not be undone.
    pub problems: Vec<String>,
}

/// Undo on this host everything of the controller `tag`.
pub fn gc_owned(tag: &str) -> Result<OwnedGc, LabError> {
    check_tag(tag)?;
    let mut out = OwnedGc {
        stopped: stop_processes_of(tag),
        ..OwnedGc::default()
    };
    let tmp = std::env::temp_dir();
    let scratch = format!("{SCRATCH_PREFIX}{tag}-");
    for e in std::fs::read_dir(&tmp).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with(&scratch) {
            match std::fs::remove_dir_all(e.path()) {
                Ok(()) => out.scratch_removed.push(name),
                Err(err) => out.problems.push(format!("{}: {err}", e.path().display())),
            }
        }
    }
    // Only this namespace's set-ups: another's interfaces are not here.
    let states = states_prefix(nflab_io::iface::this_netns_inode(), tag);
    for e in std::fs::read_dir(JOURNAL_DIR)
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().to_string();
        if !(name.starts_with(&states) && name.ends_with(".json")) {
            continue;
        }
        let st = std::fs::read(e.path())
            .ok()
            .and_then(|b| serde_json::from_slice::<DutState>(&b).ok());
        let Some(st) = st else {
            out.problems.push(format!("{name} does not parse: kept"));
            continue;
        };
        let problems = crate::hosts::remote_dut::dut_down(&st);
        if problems.is_empty() {
            let _ = std::fs::remove_file(e.path());
            out.duts_undone
                .push(format!("{} on {}", st.kind, st.ingress));
        } else {
            out.problems.extend(problems);
        }
    }
    Ok(out)
}

/// SIGTERM, then after 2 s SIGKILL, every process whose command line has
/// `--owner TAG` (the `nflab remote` calls of that controller), not this one.
fn stop_processes_of(tag: &str) -> Vec<u32> {
    let owned = processes_whose_args(|args| {
        args.windows(2)
            .any(|w| w[0] == b"--owner" && w[1] == tag.as_bytes())
            && !args.contains(&&b"gc"[..])
    });
    let signal = |sig: Signal| {
        for &pid in &owned {
            let _ = kill(Pid::from_raw(pid as i32), sig);
        }
    };
    signal(Signal::SIGTERM);
    wait_until_gone(&owned, Duration::from_secs(2));
    signal(Signal::SIGKILL);
    owned
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
