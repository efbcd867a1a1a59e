//! Artifact files written whole: the error names the file.
//!
//! Each is written beside its name, fsynced, renamed into place and its
//! directory fsynced: `--resume` trusts a run with `.complete`, and a power
//! cut must not leave one whose `summary.json` is torn or empty (a plain
//! write can be lost after the rename that follows it is not).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::LabError;

/// Write an artifact file whole and durably (the old one or the new one,
/// never part); the error names it.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), LabError> {
    nflab_io::safe_fs::replace_file(path, bytes).map_err(|e| LabError::artifact(path, e))
}

/// The user who ran nflab through `sudo` (`SUDO_UID`, `SUDO_GID`), when this
/// process is root; None otherwise.
pub fn invoking_user() -> Option<(u32, u32)> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    let id = |k: &str| std::env::var(k).ok()?.parse::<u32>().ok();
    Some((id("SUDO_UID")?, id("SUDO_GID")?))
}

/// Hand `path` and everything under it that root made to the user who ran
/// nflab through `sudo` ([`invoking_user`]), so results made as root are
/// theirs to move or delete; nothing to do otherwise.
///
/// The walk goes by file descriptors, each entry opened by its name in the
/// directory already open (`O_PATH | O_NOFOLLOW`), checked and changed
/// through that descriptor: a directory swapped for a symlink while the walk
/// runs is a symlink changed itself, never followed, and the walk never
/// leaves the tree. Only what root owns changes hands (what a `--resume`d
/// tree of another user holds stays theirs), and of files only those with one
/// link (a hard link into the tree to a file elsewhere stays as it is).
pub fn give_to_invoking_user(path: &Path) -> Result<(), LabError> {
    let Some((uid, gid)) = invoking_user() else {
        return Ok(());
    };
    hand_over::tree(path, uid, gid).map_err(|e| LabError::artifact(path, e))
}

/// Hand what was written at `paths` (each under `root`: a file, or a
/// directory itself, not what is in it) to the user who ran nflab through
/// `sudo`, as [`give_to_invoking_user`] does each entry: `nflab report`
/// hands back `report.html` and `figures/` with what it wrote there, and
/// nothing else of a tree that may be another user's. A path not under
/// `root`, or one that is gone, is passed over.
pub fn give_written_to_invoking_user(root: &Path, paths: &[PathBuf]) -> Result<(), LabError> {
    let Some((uid, gid)) = invoking_user() else {
        return Ok(());
    };
    give_written(root, paths, uid, gid)
}

fn give_written(root: &Path, paths: &[PathBuf], uid: u32, gid: u32) -> Result<(), LabError> {
    for p in paths {
        let Ok(rel) = p.strip_prefix(root) else {
            continue;
        };
        hand_over::one(root, rel, uid, gid).map_err(|e| LabError::artifact(p, e))?;
    }
    Ok(())
}

/// The descriptor walk of [`give_to_invoking_user`].
mod hand_over {
    use std::ffi::{CStr, CString};
    use std::os::fd::{AsRawFd, RawFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Component, Path};

    use nix::errno::Errno;
    use nix::fcntl::{openat, AtFlags, OFlag};
    use nix::sys::stat::{fstat, Mode, SFlag};
    use nix::unistd::{fchownat, Gid, Uid};

    fn io(e: Errno) -> std::io::Error {
        std::io::Error::from_raw_os_error(e as i32)
    }

    /// A descriptor closed when dropped (nix 0.29's `openat` gives a bare one).
    pub(super) struct OwnedFd(RawFd);

    impl AsRawFd for OwnedFd {
        fn as_raw_fd(&self) -> RawFd {
            self.0
        }
    }

    impl Drop for OwnedFd {
        fn drop(&mut self) {
            let _ = nix::unistd::close(self.0);
        }
    }

    /// `name` in the directory `dir` (None: the current directory, for a
    /// path), opened as itself: a symlink is the link, never its target.
    fn open_entry<P: ?Sized + nix::NixPath>(
        dir: Option<&OwnedFd>,
        name: &P,
    ) -> nix::Result<OwnedFd> {
        let fd = openat(
            dir.map(|d| d.as_raw_fd()),
            name,
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        Ok(OwnedFd(fd))
    }

    /// Give the entry open as `fd` away when root made it; whether it is a
    /// directory.
    fn give(fd: &OwnedFd, uid: u32, gid: u32) -> nix::Result<bool> {
        let st = fstat(fd.as_raw_fd())?;
        let is_dir = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR;
        if st.st_uid == 0 && (is_dir || st.st_nlink == 1) {
            fchownat(
                Some(fd.as_raw_fd()),
                c"",
                Some(Uid::from_raw(uid)),
                Some(Gid::from_raw(gid)),
                AtFlags::AT_EMPTY_PATH,
            )?;
        }
        Ok(is_dir)
    }

    /// The names in the directory open as `fd` (`.` and `..` left out).
    fn names(fd: &OwnedFd) -> nix::Result<Vec<CString>> {
        // "." of the directory itself: no name is looked up again.
        let mut dir = nix::dir::Dir::openat(
            Some(fd.as_raw_fd()),
            c".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let mut v = Vec::new();
        for e in dir.iter() {
            let e = e?;
            let n = e.file_name();
            if n != c"." && n != c".." {
                v.push(n.to_owned());
            }
        }
        Ok(v)
    }

    fn walk(fd: &OwnedFd, uid: u32, gid: u32) -> nix::Result<()> {
        if !give(fd, uid, gid)? {
            return Ok(());
        }
        for name in names(fd)? {
            match open_entry(Some(fd), name.as_c_str()) {
                Ok(child) => walk(&child, uid, gid)?,
                // Gone since the listing.
                Err(Errno::ENOENT) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// [`super::give_to_invoking_user`].
    pub(super) fn tree(path: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
        let top = open_entry(None, path).map_err(io)?;
        walk(&top, uid, gid).map_err(io)
    }

    /// [`super::give_written_to_invoking_user`] of one path, `rel` under `root`.
    pub(super) fn one(root: &Path, rel: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
        // The root as the user named it (a symlink to a tree, too); below it
        // nothing is followed.
        let root = match openat(
            None,
            root,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => OwnedFd(fd),
            Err(Errno::ENOENT) => return Ok(()),
            Err(e) => return Err(io(e)),
        };
        let mut at = root;
        for c in rel.components() {
            let Component::Normal(name) = c else {
                // `..` or an absolute part: not under root.
                return Ok(());
            };
            let name = CString::new(name.as_bytes())
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
            at = match open_entry(Some(&at), name.as_c_str() as &CStr) {
                Ok(fd) => fd,
                // Gone, or below a symlink (a link is no directory here):
                // nothing of ours.
                Err(Errno::ENOENT | Errno::ENOTDIR) => return Ok(()),
                Err(e) => return Err(io(e)),
            };
        }
        give(&at, uid, gid).map(|_| ()).map_err(io)
    }
}

/// Write `value` as pretty JSON (one trailing newline) to an artifact file.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), LabError> {
    let mut s = serde_json::to_string_pretty(value)
        .map_err(|e| LabError::Other(format!("{}: {e}", path.display())))?;
    s.push('\n');
    write_file(path, s.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small tmpfs mounted for the test; unmounted and removed when dropped.
    struct SmallDisk(std::path::PathBuf);
    impl Drop for SmallDisk {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn owner(p: &Path) -> (u32, u32) {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(p).unwrap();
        (m.uid(), m.gid())
    }

    /// A tree with a file and a symlink to a file outside it, handed back:
    /// the tree changes hands, the symlink itself too, its target not.
    #[test]
    fn a_symlink_in_the_tree_is_changed_itself_never_what_it_points_to() {
        if !nflab_testkit::require_root() {
            return;
        }
        let base =
            nflab_io::safe_fs::fresh_private_dir(&std::env::temp_dir(), "nflab-give").unwrap();
        let _gone = Gone(base.clone());
        let outside = base.join("outside");
        std::fs::write(&outside, "host").unwrap();
        let tree = base.join("tree");
        std::fs::create_dir_all(tree.join("runs/000")).unwrap();
        std::fs::write(tree.join("runs/000/summary.json"), "{}").unwrap();
        std::os::unix::fs::symlink(&outside, tree.join("runs/000/link")).unwrap();
        std::os::unix::fs::symlink(&base, tree.join("up")).unwrap();
        // Another user's file in the tree stays theirs.
        std::fs::write(tree.join("theirs"), "").unwrap();
        std::os::unix::fs::chown(tree.join("theirs"), Some(4000), Some(4000)).unwrap();
        hand_over::tree(&tree, 4242, 4243).unwrap();
        for p in [
            "",
            "runs",
            "runs/000",
            "runs/000/summary.json",
            "runs/000/link",
            "up",
        ] {
            assert_eq!(owner(&tree.join(p)), (4242, 4243), "{p}");
        }
        assert_eq!(owner(&tree.join("theirs")), (4000, 4000));
        assert_eq!(owner(&outside), (0, 0), "the symlink was followed");
        assert_eq!(owner(&base), (0, 0), "the walk left the tree");
    }

    /// A directory of the tree swapped for a symlink to a directory outside
    /// it, and back, again and again while the tree is handed back: what is
    /// outside never changes hands (a walk by names that checks a path and
    /// then reads it again loses this race).
    #[test]
    fn a_directory_swapped_for_a_symlink_during_the_walk_never_leads_outside() {
        if !nflab_testkit::require_root() {
            return;
        }
        let base =
            nflab_io::safe_fs::fresh_private_dir(&std::env::temp_dir(), "nflab-give-race").unwrap();
        let _gone = Gone(base.clone());
        let outside = base.join("outside");
        std::fs::create_dir(&outside).unwrap();
        let tree = base.join("tree");
        std::fs::create_dir_all(tree.join("sub")).unwrap();
        let names: Vec<String> = (0..64).map(|i| format!("f{i:02}")).collect();
        for n in &names {
            std::fs::write(outside.join(n), "host").unwrap();
            std::fs::write(tree.join("sub").join(n), "").unwrap();
        }
        // tree/swap: the symlink that trades places with tree/sub.
        std::os::unix::fs::symlink(&outside, tree.join("swap")).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let racer = {
            let (stop, tree) = (stop.clone(), tree.clone());
            std::thread::spawn(move || {
                let (a, b) = (tree.join("sub"), tree.join("swap"));
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = nix::fcntl::renameat2(
                        None,
                        &a,
                        None,
                        &b,
                        nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                    );
                }
            })
        };
        let started = std::time::Instant::now();
        let changed = |names: &[String]| names.iter().any(|n| owner(&outside.join(n)) != (0, 0));
        while started.elapsed() < std::time::Duration::from_secs(2) && !changed(&names) {
            let _ = hand_over::tree(&tree, 4242, 4243);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        racer.join().unwrap();
        assert!(
            !changed(&names),
            "the walk followed the swapped symlink outside the tree"
        );
        assert_eq!(owner(&outside), (0, 0));
    }

    /// What `nflab report` wrote, handed back alone: the rest of the tree
    /// keeps its owner, a path below a symlink is passed over.
    #[test]
    fn only_the_written_paths_change_hands() {
        if !nflab_testkit::require_root() {
            return;
        }
        let base =
            nflab_io::safe_fs::fresh_private_dir(&std::env::temp_dir(), "nflab-give-some").unwrap();
        let _gone = Gone(base.clone());
        let tree = base.join("tree");
        std::fs::create_dir_all(tree.join("figures")).unwrap();
        std::fs::create_dir_all(tree.join("runs/000")).unwrap();
        for p in ["report.html", "figures/hdr.svg", "runs/000/summary.json"] {
            std::fs::write(tree.join(p), "").unwrap();
        }
        let outside = base.join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("x.svg"), "").unwrap();
        std::os::unix::fs::symlink(&outside, tree.join("elsewhere")).unwrap();
        let written: Vec<PathBuf> = [
            "report.html",
            "figures",
            "figures/hdr.svg",
            "elsewhere/x.svg",
        ]
        .iter()
        .map(|p| tree.join(p))
        .chain([base.join("not-under-the-tree")])
        .collect();
        give_written(&tree, &written, 4242, 4243).unwrap();
        for p in ["report.html", "figures", "figures/hdr.svg"] {
            assert_eq!(owner(&tree.join(p)), (4242, 4243), "{p}");
        }
        for p in ["", "runs", "runs/000", "runs/000/summary.json", "elsewhere"] {
            assert_eq!(owner(&tree.join(p)), (0, 0), "{p}");
        }
        assert_eq!(owner(&outside.join("x.svg")), (0, 0));
    }

    struct Gone(PathBuf);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_file_written_on_a_full_disk_keeps_its_old_content_whole() {
        if !nflab_testkit::require_root() {
            return;
        }
        let dir = nflab_io::safe_fs::fresh_private_dir(&std::env::temp_dir(), "nflab-files-full")
            .unwrap();
        let disk = SmallDisk(dir);
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(&disk.0)
            .status()
            .unwrap();
        assert!(ok.success(), "mount tmpfs");
        let summary = disk.0.join("summary.json");
        write_json(&summary, &serde_json::json!({ "p99_ns": 1 })).unwrap();
        let before = std::fs::read(&summary).unwrap();
        // Fill the rest of the disk.
        let mut filler = std::fs::File::create(disk.0.join("filler")).unwrap();
        let block = vec![7u8; 4096];
        while std::io::Write::write_all(&mut filler, &block).is_ok() {}
        drop(filler);
        let big = serde_json::json!({ "p99_ns": "9".repeat(100_000) });
        let e = write_json(&summary, &big).unwrap_err().to_string();
        assert!(e.contains("summary.json"), "{e}");
        assert_eq!(
            std::fs::read(&summary).unwrap(),
            before,
            "torn by a failed write"
        );
        let left: Vec<_> = std::fs::read_dir(&disk.0)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 2, "a partial file was left: {left:?}");
    }
}
