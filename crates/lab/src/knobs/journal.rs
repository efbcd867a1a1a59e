//! The knob journal: the original value of every kernel knob nflab changes
//! outside a namespace it deletes anyway, written down (and fsynced) before
//! the change, so that `nflab topo gc` can put the host back after a
//! `kill -9`, a power loss or a panic that skipped the `Drop` guards.
//!
//! One journal per guard that changes knobs, `/run/nflab/knobs-<pid>-<n>.journal`:
//! the first line is `owner <pid> <start time>` (as in the namespaces' owner
//! files, so a recycled pid is not taken for the owner), then one JSON line
//! per change. Normal teardown restores the values and removes the file;
//! [`replay_dead`] restores, newest first, the values of every journal whose
//! owner is gone and removes it. A torn last line is a change that never
//! happened (the entry is written before the change), so it is ignored.
//!
//! The same journal names the remote hosts a study touches (`Restore::Remote`):
//! gc asks each to undo what the dead controller left there
//! (`hosts::remote_gc`).
//!
//! Not journaled, because they end with the process: the PM QoS request (an
//! open file), thread scheduling policies and the background load threads;
//! and everything inside the namespaces a topology creates, which go with
//! them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use nflab_io::process::system_tool;
use std::sync::atomic::{AtomicU32, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::LabError;

/// Directory of the journals (and the namespaces' owner files).
pub const JOURNAL_DIR: &str = crate::sys::process::RUN_DIR;

static NEXT_JOURNAL: AtomicU32 = AtomicU32::new(0);

/// How to put one knob back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "restore", rename_all = "snake_case")]
pub enum Restore {
    /// Write `value` to the file `path` (a sysctl, sysfs or procfs file), in
    /// the namespace `ns` ("" = the host's, where nflab runs).
    File {
        /// Network namespace, "" for the current one.
        ns: String,
        /// File to write.
        path: String,
        /// The original value.
        value: String,
    },
    /// Run `argv` in the namespace `ns` ("" = the host's): an ethtool or tc
    /// command that sets the original value again.
    Command {
        /// Network namespace, "" for the current one.
        ns: String,
        /// The command and its arguments.
        argv: Vec<String>,
    },
    /// Run an external DuT's `teardown` hook (`dut.external.teardown`) with the
    /// environment it runs with in the run, for at most `timeout_s`.
    Hook {
        /// The command and its arguments.
        argv: Vec<String>,
        /// The variables nflab gives its hooks (`NFLAB_DUT_NETNS`, …).
        env: Vec<(String, String)>,
        /// Longest time it may take, s.
        timeout_s: f64,
    },
    /// Ask a host of a hosts topology or a pair to undo what the controller
    /// `owner` left there: `nflab remote gc --owner OWNER` over SSH
    /// (`hosts::remote_gc`).
    Remote {
        /// The host, as the spec declared it.
        host: Box<crate::spec::hosts::HostEntry>,
        /// The controller's owner tag.
        owner: String,
    },
}

impl Restore {
    /// The namespace it acts in ("" = the host's).
    pub(crate) fn ns(&self) -> &str {
        match self {
            Restore::File { ns, .. } | Restore::Command { ns, .. } => ns,
            // A teardown for a namespace nflab made is moot once gc removed it.
            Restore::Hook { env, .. } => env
                .iter()
                .find(|(k, v)| k == "NFLAB_DUT_NETNS" && v.starts_with("nflab-"))
                .map_or("", |(_, v)| v.as_str()),
            Restore::Remote { .. } => "",
        }
    }

    /// Put the original value back.
    pub fn apply(&self) -> Result<(), String> {
        match self {
            Restore::File { ns, path, value } if ns.is_empty() => std::fs::write(path, value)
                .map_err(|e| format!("cannot restore {path} to {value}: {e}")),
            Restore::File { ns, path, value } => ns_write(ns, path, value)
                .map_err(|e| format!("cannot restore {path} in netns {ns} to {value}: {e}")),
            Restore::Command { ns, argv } => {
                let args: Vec<&str> = argv.iter().map(String::as_str).collect();
                ns_run(ns, &args)
                    .map(|_| ())
                    .map_err(|e| format!("cannot run '{}': {e}", argv.join(" ")))
            }
            Restore::Hook {
                argv,
                env,
                timeout_s,
            } => {
                let env: Vec<(&str, String)> =
                    env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
                let timeout = std::time::Duration::from_secs_f64(*timeout_s);
                let run = crate::sys::command::run(argv, &env, timeout);
                if run.succeeded() {
                    Ok(())
                } else {
                    Err(format!(
                        "the teardown hook ({}) {}",
                        crate::sys::command::one_line(argv),
                        match (&run.spawn_error, run.timed_out) {
                            (Some(e), _) => e.clone(),
                            (None, true) => format!("did not end within {timeout_s} s"),
                            (None, false) => format!("failed: {}", run.last_line()),
                        }
                    ))
                }
            }
            Restore::Remote { host, owner } => {
                let v = host
                    .remote(&["gc", "--owner", owner])
                    .map_err(|e| e.to_string())?;
                match v["problems"].as_array() {
                    Some(p) if !p.is_empty() => Err(format!(
                        "host {} could not undo everything of {owner}: {}",
                        host.address,
                        serde_json::Value::Array(p.clone())
                    )),
                    _ => Ok(()),
                }
            }
        }
    }
}

/// Runs a command inside a namespace ("" = this one); stdout on success.
pub(crate) fn ns_run(ns: &str, args: &[&str]) -> Result<String, String> {
    // The program from the system's directories, inside a namespace too
    // (`ip netns exec` would search PATH for it).
    let prog = system_tool(args[0]);
    let mut c = if ns.is_empty() {
        Command::new(&prog)
    } else {
        let mut c = Command::new(system_tool("ip"));
        c.args(["netns", "exec", ns]).arg(&prog);
        c
    };
    c.args(&args[1..]);
    match c.output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).to_string()),
        Ok(o) => Err(String::from_utf8_lossy(&o.stderr).trim().to_string()),
        Err(e) => Err(format!("cannot run {}: {e}", args[0])),
    }
}

/// Write `value` and a newline to the file `path` inside the namespace `ns`
/// (where /sys shows that namespace's devices), with no shell: `tee` takes
/// the value on stdin, so no part of it is ever parsed as a command.
pub(crate) fn ns_write(ns: &str, path: &str, value: &str) -> Result<(), String> {
    use std::process::Stdio;
    let mut child = Command::new(system_tool("ip"))
        .args(["netns", "exec", ns])
        .arg(system_tool("tee"))
        .args(["--", path])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run ip netns exec: {e}"))?;
    let wrote = child
        .stdin
        .take()
        .map(|mut i| i.write_all(format!("{value}\n").as_bytes()));
    let out = child
        .wait_with_output()
        .map_err(|e| format!("cannot run ip netns exec: {e}"))?;
    match wrote {
        Some(Ok(())) | None if out.status.success() => Ok(()),
        Some(Err(e)) => Err(e.to_string()),
        _ => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
    }
}

/// Whether `ns` is a namespace of an nflab topology (it has an owner file):
/// its knobs go with it, so they need no journal.
pub(crate) fn deleted_with_topology(ns: &str) -> bool {
    ns.starts_with("nflab-") && Path::new(JOURNAL_DIR).join(format!("{ns}.owner")).exists()
}

/// The journal of one guard; the file exists from the first change until
/// [`KnobJournal::finish`].
#[derive(Debug)]
pub struct KnobJournal {
    dir: PathBuf,
    path: Option<PathBuf>,
    file: Option<std::fs::File>,
    /// Bytes of the file that hold complete entries.
    len: u64,
    /// Where the newest entry starts, until it is kept or cancelled.
    last_start: Option<u64>,
}

impl KnobJournal {
    /// A journal in `dir` (normally [`JOURNAL_DIR`]); no file until the first entry.
    pub fn new(dir: &Path) -> KnobJournal {
        KnobJournal {
            dir: dir.to_path_buf(),
            path: None,
            file: None,
            len: 0,
            last_start: None,
        }
    }

    /// Where the journal is (None before the first entry and after `finish`).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Append how to restore one knob and fsync it: call before changing it.
    pub fn record(&mut self, entry: &Restore) -> Result<(), LabError> {
        let err = |p: &Path, e: std::io::Error| {
            LabError::Host(format!(
                "cannot write the knob journal {}: {e}; nflab changes no knob it could not restore after a crash",
                p.display()
            ))
        };
        if self.file.is_none() {
            crate::sys::process::ensure_run_dir(&self.dir)
                .map_err(|e| err(&self.dir, std::io::Error::other(e.to_string())))?;
            let pid = std::process::id();
            let path = self.dir.join(format!(
                "knobs-{pid}-{}.journal",
                NEXT_JOURNAL.fetch_add(1, Ordering::Relaxed)
            ));
            let mut f = {
                use std::os::unix::fs::OpenOptionsExt;
                std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(true)
                    .write(true)
                    .mode(0o600)
                    .open(&path)
                    .map_err(|e| err(&path, e))?
            };
            let start = crate::sys::process::process_start_time(pid).unwrap_or(0);
            let owner = format!("owner {pid} {start}\n");
            f.write_all(owner.as_bytes())
                .and_then(|_| f.sync_all())
                .map_err(|e| err(&path, e))?;
            self.len = owner.len() as u64;
            // The new name must survive too, not only its contents.
            if let Ok(d) = std::fs::File::open(&self.dir) {
                let _ = d.sync_all();
            }
            self.path = Some(path);
            self.file = Some(f);
        }
        let (Some(f), Some(path)) = (self.file.as_mut(), self.path.as_ref()) else {
            unreachable!("the journal was just opened")
        };
        let mut line = serde_json::to_string(entry)
            .map_err(|e| LabError::Other(format!("knob journal entry: {e}")))?;
        line.push('\n');
        self.last_start = Some(self.len);
        f.write_all(line.as_bytes())
            .and_then(|_| f.sync_data())
            .map_err(|e| err(path, e))?;
        self.len += line.len() as u64;
        Ok(())
    }

    /// The next change is not journaled: [`KnobJournal::cancel_last`] must
    /// then leave the entries alone.
    pub fn skip_next(&mut self) {
        self.last_start = None;
    }

    /// The change of the newest entry did not happen (the kernel refused
    /// it): drop the entry, so that gc does not try to undo it.
    pub fn cancel_last(&mut self) {
        use std::io::{Seek, SeekFrom};
        let (Some(f), Some(start)) = (self.file.as_mut(), self.last_start.take()) else {
            return;
        };
        let cut = f
            .set_len(start)
            .and_then(|_| f.seek(SeekFrom::Start(start)))
            .and_then(|_| f.sync_data());
        match cut {
            Ok(_) => self.len = start,
            Err(e) => eprintln!("warning: could not drop an entry of the knob journal: {e}"),
        }
    }

    /// The knobs are restored: remove the journal.
    pub fn finish(&mut self) {
        self.file = None;
        if let Some(p) = self.path.take() {
            if let Err(e) = std::fs::remove_file(&p) {
                eprintln!(
                    "warning: could not remove the knob journal {}: {e}",
                    p.display()
                );
            }
        }
    }
}

/// Name of the lock file in the journal directory.
pub const LOCK_FILE: &str = "knobs.lock";

/// The host's knobs, held by one nflab process at a time: two runs that set
/// the same knob would each restore the other's value, leaving the host
/// changed. An `flock` on [`LOCK_FILE`], released when dropped or when the
/// process dies (so a crash never leaves it held). The holder removes the
/// file before it lets go, and a taker checks that the file it locked is
/// still the one of that name, so a removed file is never held by two.
#[derive(Debug)]
pub struct KnobLock {
    file: Option<nix::fcntl::Flock<std::fs::File>>,
    path: PathBuf,
}

impl Drop for KnobLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        self.file = None;
    }
}

/// For gc: remove the lock file a killed run left (the kernel let its lock go).
pub fn remove_stale_lock(dir: &Path) {
    if dir.join(LOCK_FILE).exists() {
        drop(KnobLock::take(dir, None));
    }
}

impl KnobLock {
    /// Take the lock in `dir`; when another process holds it, wait while
    /// `wait` is given and not set (saying so once on stderr), else refuse.
    pub fn take(
        dir: &Path,
        wait: Option<&std::sync::atomic::AtomicBool>,
    ) -> Result<KnobLock, LabError> {
        use nix::fcntl::{Flock, FlockArg};
        let path = dir.join(LOCK_FILE);
        let err = |e: std::io::Error| {
            LabError::Host(format!(
                "cannot take the knob journal's lock {}: {e}; nflab changes no host knob another run could change too",
                path.display()
            ))
        };
        crate::sys::process::ensure_run_dir(dir)
            .map_err(|e| err(std::io::Error::other(e.to_string())))?;
        let mut said = false;
        loop {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(err)?;
            match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
                Ok(mut held) => {
                    use std::os::unix::fs::MetadataExt;
                    // Removed (or replaced) by the holder we waited for: take the new one.
                    let same = match (held.metadata(), std::fs::metadata(&path)) {
                        (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
                        _ => false,
                    };
                    if !same {
                        continue;
                    }
                    // Who holds it, for the sentence another run prints.
                    let _ = held.set_len(0);
                    let _ = held.write_all(format!("{}\n", std::process::id()).as_bytes());
                    return Ok(KnobLock {
                        file: Some(held),
                        path: path.clone(),
                    });
                }
                Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                    let holder = std::fs::read_to_string(&path).unwrap_or_default();
                    let holder = holder.trim();
                    let stopped = wait.is_none_or(|s| s.load(Ordering::Relaxed));
                    if stopped {
                        return Err(LabError::Host(format!(
                            "nflab pid {holder} has host knobs set ({}): two runs that set host knobs cannot overlap, as each would restore the other's values; wait for it to end or drop [knobs]",
                            path.display()
                        )));
                    }
                    if !said {
                        eprintln!(
                            "waiting: nflab pid {holder} has host knobs set ({}); this run's knobs follow when its run ends",
                            path.display()
                        );
                        said = true;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err((_, e)) => return Err(err(std::io::Error::from(e))),
            }
        }
    }
}

/// What [`replay_dead`] did with one journal.
#[derive(Debug, Clone, Serialize)]
pub struct Replayed {
    /// The journal file.
    pub journal: PathBuf,
    /// Owner pid.
    pub owner_pid: u32,
    /// Original values written back.
    pub restored: usize,
    /// Entries for a namespace that is gone (its knobs went with it).
    pub skipped: usize,
    /// Restores that failed; the journal is kept when there are any.
    pub failed: Vec<String>,
}

/// The owner line and entries of a journal; a torn last line is dropped.
pub fn read_journal(path: &Path) -> Option<((u32, u64), Vec<Restore>)> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut lines = text.lines();
    let mut owner = lines.next()?.split_whitespace();
    if owner.next() != Some("owner") {
        return None;
    }
    let pid = owner.next()?.parse().ok()?;
    let start = owner.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let entries = lines.filter_map(|l| serde_json::from_str(l).ok()).collect();
    Some(((pid, start), entries))
}

fn owner_alive(pid: u32, start: u64) -> bool {
    match crate::sys::process::process_start_time(pid) {
        Some(s) => start == 0 || s == start,
        None => false,
    }
}

/// Restore the knobs of every journal in `dir` whose owner is gone, newest
/// entry first, and remove the journals that were fully restored.
///
/// A journal's entries run as root: only a journal this user wrote, in a
/// directory only this user can write, is replayed. Any other is refused and
/// kept, with the reason in `failed`.
pub fn replay_dead(dir: &Path) -> Vec<Replayed> {
    if !dir.exists() {
        return Vec::new();
    }
    if let Err(e) = crate::sys::process::ensure_run_dir(dir) {
        return vec![Replayed {
            journal: dir.to_path_buf(),
            owner_pid: 0,
            restored: 0,
            skipped: 0,
            failed: vec![format!("not replayed: {e}")],
        }];
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut journals: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("knobs-") && n.ends_with(".journal"))
        })
        .collect();
    journals.sort();
    let mut out = Vec::new();
    for path in journals {
        if let Err(why) = crate::sys::process::check_trusted_file(&path) {
            out.push(Replayed {
                journal: path.clone(),
                owner_pid: 0,
                restored: 0,
                skipped: 0,
                failed: vec![format!(
                    "not replayed: {why}; nflab runs a journal's entries as root, so it replays only its own"
                )],
            });
            continue;
        }
        let Some(((pid, start), entries)) = read_journal(&path) else {
            // Torn before its owner line was complete: no knob was changed
            // yet. Its name carries the pid, and a live owner may be writing it.
            let named_pid = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.trim_start_matches("knobs-").split('-').next())
                .and_then(|p| p.parse::<u32>().ok());
            if named_pid.is_none_or(|p| crate::sys::process::process_start_time(p).is_none()) {
                let _ = std::fs::remove_file(&path);
            }
            continue;
        };
        if owner_alive(pid, start) {
            continue;
        }
        let mut r = Replayed {
            journal: path.clone(),
            owner_pid: pid,
            restored: 0,
            skipped: 0,
            failed: Vec::new(),
        };
        for entry in entries.iter().rev() {
            let ns = entry.ns();
            if !ns.is_empty() && !Path::new("/run/netns").join(ns).exists() {
                r.skipped += 1;
                continue;
            }
            match entry.apply() {
                Ok(()) => r.restored += 1,
                Err(e) => r.failed.push(e),
            }
        }
        if r.failed.is_empty() {
            let _ = std::fs::remove_file(&path);
        }
        out.push(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("nflab-journal-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn entries_are_on_disk_before_finish_and_gone_after() {
        let d = tmp("life");
        let knob = d.join("knob");
        let mut j = KnobJournal::new(&d);
        assert!(j.path().is_none());
        let e = Restore::File {
            ns: String::new(),
            path: knob.display().to_string(),
            value: "7".into(),
        };
        j.record(&e).unwrap();
        let p = j.path().unwrap().to_path_buf();
        let ((pid, start), entries) = read_journal(&p).unwrap();
        assert_eq!(pid, std::process::id());
        assert_eq!(Some(start), crate::sys::process::process_start_time(pid));
        assert_eq!(entries, vec![e.clone()]);
        // Its owner (this process) lives: gc leaves it alone.
        assert!(replay_dead(&d).is_empty());
        assert!(p.exists());
        // A change that did not happen leaves no entry; the next one follows.
        let second = Restore::Command {
            ns: String::new(),
            argv: vec!["true".into()],
        };
        j.record(&second).unwrap();
        j.cancel_last();
        j.record(&second).unwrap();
        assert_eq!(read_journal(&p).unwrap().1, vec![e, second]);
        j.finish();
        assert!(!p.exists());
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn an_external_duts_teardown_hook_runs_with_its_environment_when_its_owner_died() {
        let d = tmp("hook");
        let marker = d.join("torn-down");
        let dead_pid = u32::MAX - 2;
        let hook = |netns: &str| Restore::Hook {
            argv: ["sh", "-c", "echo $NFLAB_DUT_NETNS >> \"$MARKER\""]
                .map(String::from)
                .to_vec(),
            env: vec![
                ("NFLAB_DUT_NETNS".into(), netns.into()),
                ("MARKER".into(), marker.display().to_string()),
            ],
            timeout_s: 10.0,
        };
        // A user's namespace (still there) and one nflab made (gone with gc).
        for (n, netns) in ["users-box", "nflab-1-0-dut"].iter().enumerate() {
            std::fs::write(
                d.join(format!("knobs-{dead_pid}-{n}.journal")),
                format!(
                    "owner {dead_pid} 1\n{}\n",
                    serde_json::to_string(&hook(netns)).unwrap()
                ),
            )
            .unwrap();
        }
        let mut r = replay_dead(&d);
        r.sort_by(|a, b| a.journal.cmp(&b.journal));
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(
            (r[0].restored, r[0].skipped, r[0].failed.len()),
            (1, 0, 0),
            "{r:?}"
        );
        assert_eq!((r[1].restored, r[1].skipped), (0, 1), "{r:?}");
        assert_eq!(std::fs::read_to_string(&marker).unwrap(), "users-box\n");
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn dead_owner_is_replayed_newest_first_and_a_torn_line_ignored() {
        let d = tmp("dead");
        let knob = d.join("knob");
        std::fs::write(&knob, "changed").unwrap();
        let entry = |v: &str| {
            serde_json::to_string(&Restore::File {
                ns: String::new(),
                path: knob.display().to_string(),
                value: v.into(),
            })
            .unwrap()
        };
        // The same knob changed twice: the oldest original must win.
        let dead_pid = u32::MAX - 1;
        std::fs::write(
            d.join(format!("knobs-{dead_pid}-0.journal")),
            format!(
                "owner {dead_pid} 1\n{}\n{}\n{{\"restore\":\"file\",\"ns\":\"\",\"pa",
                entry("original"),
                entry("second")
            ),
        )
        .unwrap();
        // A journal torn inside its owner line: no knob changed, removed.
        std::fs::write(d.join(format!("knobs-{dead_pid}-9.journal")), "own").unwrap();
        // An entry in a namespace that is gone is skipped.
        std::fs::write(
            d.join(format!("knobs-{dead_pid}-1.journal")),
            format!(
                "owner {dead_pid} 1\n{}\n",
                serde_json::to_string(&Restore::Command {
                    ns: "nflab-no-such-namespace".into(),
                    argv: vec!["false".into()],
                })
                .unwrap()
            ),
        )
        .unwrap();
        let r = replay_dead(&d);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!((r[0].restored, r[0].skipped), (2, 0));
        assert_eq!((r[1].restored, r[1].skipped), (0, 1));
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "original");
        let left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("knob")]);
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn the_journal_directory_and_files_are_roots_alone() {
        use std::os::unix::fs::PermissionsExt;
        let d = tmp("private");
        let run = d.join("run");
        let mut j = KnobJournal::new(&run);
        j.record(&Restore::Command {
            ns: String::new(),
            argv: vec!["true".into()],
        })
        .unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&run), 0o700);
        assert_eq!(mode(j.path().unwrap()), 0o600);
        j.finish();
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn a_journal_root_did_not_write_is_never_replayed() {
        use std::os::unix::fs::PermissionsExt;
        if !nflab_testkit::require_root() {
            return;
        }
        let d = tmp("foreign");
        let knob = d.join("knob");
        std::fs::write(&knob, "changed").unwrap();
        let dead_pid = u32::MAX - 1;
        let journal = |n: u32| d.join(format!("knobs-{dead_pid}-{n}.journal"));
        let text = format!(
            "owner {dead_pid} 1\n{}\n",
            serde_json::to_string(&Restore::File {
                ns: String::new(),
                path: knob.display().to_string(),
                value: "planted".into(),
            })
            .unwrap()
        );
        // Another user's journal, and root's but writable by others.
        std::fs::write(journal(0), &text).unwrap();
        std::os::unix::fs::chown(journal(0), Some(65534), Some(65534)).unwrap();
        std::fs::write(journal(1), &text).unwrap();
        std::fs::set_permissions(journal(1), std::fs::Permissions::from_mode(0o666)).unwrap();
        let r = replay_dead(&d);
        assert_eq!(r.len(), 2, "{r:?}");
        for (r, why) in r.iter().zip(["uid 65534", "writable by others"]) {
            assert_eq!(r.restored, 0);
            assert!(
                r.failed[0].contains("not replayed") && r.failed[0].contains(why),
                "{r:?}"
            );
        }
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "changed");
        assert!(
            journal(0).exists() && journal(1).exists(),
            "refused journals are kept"
        );
        // A directory another user owns: nothing in it is replayed.
        std::fs::remove_file(journal(1)).unwrap();
        std::os::unix::fs::chown(journal(0), Some(0), Some(0)).unwrap();
        std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
        let r = replay_dead(&d);
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].failed[0].contains("uid 65534"), "{r:?}");
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "changed");
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn a_failed_restore_keeps_the_journal() {
        let d = tmp("fail");
        let p = d.join(format!("knobs-{}-0.journal", u32::MAX - 1));
        std::fs::write(
            &p,
            format!(
                "owner {} 1\n{}\n",
                u32::MAX - 1,
                serde_json::to_string(&Restore::File {
                    ns: String::new(),
                    path: d.join("no/such/dir/knob").display().to_string(),
                    value: "1".into(),
                })
                .unwrap()
            ),
        )
        .unwrap();
        let r = replay_dead(&d);
        assert_eq!(r[0].failed.len(), 1, "{r:?}");
        assert!(r[0].failed[0].contains("no/such/dir/knob"), "{r:?}");
        assert!(p.exists());
        std::fs::remove_dir_all(d).unwrap();
    }
}
