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

use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::error::LabError;
use crate::hosts::owner::{check_tag, states_prefix, SCRATCH_PREFIX};
use crate::hosts::remote_dut::DutState;
use crate::knobs::journal::JOURNAL_DIR;
use crate::sys::orphans::{processes_whose_args, wait_until_gone};

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
        // Only directories of ours: another user's entry of that name is theirs.
        let ours = std::fs::symlink_metadata(e.path()).is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            m.is_dir() && m.uid() == nix::unistd::geteuid().as_raw()
        });
        if name.starts_with(&scratch) && ours {
            match std::fs::remove_dir_all(e.path()) {
                Ok(()) => out.scratch_removed.push(name),
                Err(err) => out.problems.push(format!("{}: {err}", e.path().display())),
            }
        }
    }
    // Only this namespace's set-ups: another's interfaces are not here.
    let states = states_prefix(nflab_io::iface::this_netns_inode(), tag);
    let run_dir = std::path::Path::new(JOURNAL_DIR);
    if run_dir.exists() {
        if let Err(e) = crate::sys::process::ensure_run_dir(run_dir) {
            out.problems.push(e.to_string());
            return Ok(out);
        }
    }
    for e in std::fs::read_dir(JOURNAL_DIR)
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().to_string();
        if !(name.starts_with(&states) && name.ends_with(".json")) {
            continue;
        }
        // Its undo runs as root: only a state file this user wrote.
        if let Err(why) = crate::sys::process::check_trusted_file(&e.path()) {
            out.problems.push(format!("{name} not undone: {why}"));
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
