//! Files and directories a root process can trust: made fresh where others
//! can write (the temp directory), and replaced whole where a crash must not
//! leave half a file.
//!
//! Why: a name in /tmp that another user can guess can be made first by them —
//! a directory that `create_dir_all` accepts, or a symlink that a plain
//! `File::create` follows (a planted `records.nfr -> /etc/shadow` truncated by
//! root). And a file renamed into place without an fsync can be empty after a
//! power cut while its name says it is complete.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Effective uid of this process.
fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Eight random hex digits, so names in a shared directory cannot be guessed.
fn random_suffix() -> io::Result<String> {
    let mut b = [0u8; 4];
    File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Create `dir` exclusively, mode 0700: an existing entry of that name (a
/// directory or symlink someone made first) is an error, never reused.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().mode(0o700).create(dir)?;
    check_private_dir(dir)
}

/// A fresh private directory `parent/<stem>-<random>` (see [`create_private_dir`]).
pub fn fresh_private_dir(parent: &Path, stem: &str) -> io::Result<PathBuf> {
    let mut last = None;
    for _ in 0..16 {
        let dir = parent.join(format!("{stem}-{}", random_suffix()?));
        match create_private_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no fresh name")))
}

/// Ok when `dir` is a directory (not a symlink to one) owned by this
/// process's user that nobody else can read or write.
pub fn check_private_dir(dir: &Path) -> io::Result<()> {
    let m = std::fs::symlink_metadata(dir)?;
    if !m.file_type().is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory (a symlink or a file)",
            dir.display()
        )));
    }
    if m.uid() != euid() {
        return Err(io::Error::other(format!(
            "{} belongs to uid {}, not to uid {}",
            dir.display(),
            m.uid(),
            euid()
        )));
    }
    if m.mode() & 0o077 != 0 {
        return Err(io::Error::other(format!(
            "{} has mode {:o}; only its owner may use it (0700)",
            dir.display(),
            m.mode() & 0o7777
        )));
    }
    Ok(())
}

/// Make `dir` (its parent must exist) a private directory of this user: made
/// 0700 when missing, narrowed to 0700 when it is ours but wider (made by an
/// older version under another umask); anything else — a symlink, a file,
/// another owner — is an error that says which.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    match DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let m = std::fs::symlink_metadata(dir)?;
            if m.file_type().is_dir() && m.uid() == euid() && m.mode() & 0o077 != 0 {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
            }
        }
        Err(e) => return Err(e),
    }
    check_private_dir(dir)
}

/// Create `path` for writing, exclusively (`O_EXCL`, `O_NOFOLLOW`) with
/// `mode`: an existing file or symlink of that name is an error.
pub fn create_exclusive(path: &Path, mode: u32) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// A fresh file `parent/<stem>-<random>` made exclusively with `mode` (see
/// [`create_exclusive`]): its path and the file open for writing.
pub fn create_fresh_file(parent: &Path, stem: &str, mode: u32) -> io::Result<(PathBuf, File)> {
    let mut last = None;
    for _ in 0..16 {
        let path = parent.join(format!("{stem}-{}", random_suffix()?));
        match create_exclusive(&path, mode) {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no fresh name")))
}

/// fsync a directory: a rename or a new entry in it survives a power cut.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A file written beside its final name and moved there whole by
/// [`ReplaceFile::commit`]: a reader (or a power cut) sees the old file or
/// the complete new one. Dropped without a commit, the partial file goes.
pub struct ReplaceFile {
    file: Option<File>,
    tmp: PathBuf,
    path: PathBuf,
}

impl ReplaceFile {
    /// Start writing what will become `path`.
    pub fn create(path: &Path) -> io::Result<ReplaceFile> {
        let name = path
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".partial-{}", std::process::id()));
        let tmp = path.with_file_name(tmp_name);
        // A partial file of an earlier crash of a process with this pid.
        let _ = std::fs::remove_file(&tmp);
        let file = create_exclusive(&tmp, 0o644)?;
        Ok(ReplaceFile {
            file: Some(file),
            tmp,
            path: path.to_path_buf(),
        })
    }

    /// The file being written.
    pub fn file(&mut self) -> &mut File {
        self.file
            .as_mut()
            .expect("a ReplaceFile is open until commit")
    }

    /// fsync the file, rename it into place, fsync the directory.
    pub fn commit(mut self) -> io::Result<()> {
        let f = self.file.take().expect("committed once");
        f.sync_all()?;
        drop(f);
        std::fs::rename(&self.tmp, &self.path)?;
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        sync_dir(dir)
    }
}

impl Write for ReplaceFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file().write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file().flush()
    }
}

impl Drop for ReplaceFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Replace `path` with `bytes` durably ([`ReplaceFile`]).
pub fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = ReplaceFile::create(path)?;
    f.write_all(bytes)?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    struct Scratch(PathBuf);
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn scratch(tag: &str) -> Scratch {
        let d = fresh_private_dir(&std::env::temp_dir(), &format!("nflab-io-safe-{tag}")).unwrap();
        Scratch(d)
    }

    #[test]
    fn a_planted_directory_or_symlink_is_never_reused() {
        let s = scratch("planted");
        let planted = s.0.join("planted");
        std::fs::create_dir(&planted).unwrap();
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = create_private_dir(&planted).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        let victim = s.0.join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let link = s.0.join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(create_private_dir(&link).is_err());
        assert!(create_exclusive(&link, 0o600).is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        // A symlink to a directory of ours is not a directory of ours.
        let dir_link = s.0.join("dir-link");
        std::os::unix::fs::symlink(&s.0, &dir_link).unwrap();
        assert!(check_private_dir(&dir_link).is_err());
        assert!(ensure_private_dir(&dir_link).is_err());
    }

    #[test]
    fn fresh_directories_are_private_and_differ() {
        let s = scratch("fresh");
        let a = fresh_private_dir(&s.0, "x").unwrap();
        let b = fresh_private_dir(&s.0, "x").unwrap();
        assert_ne!(a, b);
        let mode = std::fs::metadata(&a).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let f = create_exclusive(&a.join("k"), 0o600).unwrap();
        assert_eq!(f.metadata().unwrap().permissions().mode() & 0o777, 0o600);
        assert!(create_exclusive(&a.join("k"), 0o600).is_err());
    }

    #[test]
    fn ensure_narrows_our_wide_directory_and_refuses_another_owners() {
        let s = scratch("ensure");
        let d = s.0.join("run");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&d).unwrap();
        let mode = std::fs::metadata(&d).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn a_directory_of_another_user_is_refused() {
        if !nflab_testkit::require_root() {
            return;
        }
        let s = scratch("other");
        let d = s.0.join("run");
        std::fs::create_dir(&d).unwrap();
        std::os::unix::fs::chown(&d, Some(65534), None).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        let e = ensure_private_dir(&d).unwrap_err().to_string();
        assert!(e.contains("uid 65534"), "{e}");
        assert!(check_private_dir(&d).is_err());
    }

    #[test]
    fn a_replaced_file_is_whole_and_an_uncommitted_one_leaves_nothing() {
        let s = scratch("replace");
        let p = s.0.join("summary.json");
        std::fs::write(&p, b"old").unwrap();
        let mut f = ReplaceFile::create(&p).unwrap();
        f.write_all(b"new, half").unwrap();
        drop(f);
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(
            std::fs::read_dir(&s.0).unwrap().count(),
            1,
            "partial file left"
        );
        replace_file(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(&s.0).unwrap().count(), 1);
    }
}
