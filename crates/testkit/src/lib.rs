//! What a test needs from the host, asked in one place, so that no test
//! passes by returning early.
//!
//! A test that cannot check what it is about must not report `ok`. So a
//! missing tool fails the test, naming the package that provides it. Skipping
//! is possible only when the developer opts out: by not being root (the
//! namespace tests) or with `NFLAB_ALLOW_SKIP=1` (missing tools). Every skip
//! is said on stderr and appended to the file named by `NFLAB_SKIP_LOG`, which
//! `scripts/test.sh` counts in its last lines. With `CI` set, a skip fails.

use std::io::Write;
use std::path::Path;

/// True when the test may go on as root. Otherwise the test is skipped
/// (recorded) and the caller returns; under `CI` it fails instead.
pub fn require_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    skip(
        "needs root (network namespaces, raw sockets): run scripts/test.sh as root",
        true,
    );
    false
}

/// True when `bin` is on PATH (or is an existing absolute path). Otherwise the
/// test fails naming `package`, unless `NFLAB_ALLOW_SKIP=1` (and no `CI`).
pub fn require_tool(bin: &str, package: &str) -> bool {
    if have(bin) {
        return true;
    }
    let why = format!(
        "needs {bin}, which is not installed: apt-get install {package} (scripts/deps.sh test installs every test dependency)"
    );
    skip(&why, opted_out());
    false
}

/// Whether `bin` names an executable on PATH or an existing absolute path.
pub fn have(bin: &str) -> bool {
    if bin.starts_with('/') {
        return Path::new(bin).exists();
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(bin).is_file()))
}

fn opted_out() -> bool {
    std::env::var("NFLAB_ALLOW_SKIP").is_ok_and(|v| !v.is_empty() && v != "0")
}

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// The running test's name: libtest runs each test on a thread named after it.
fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_string()
}

/// Record a skip, or panic when skipping is not allowed here.
fn skip(why: &str, allowed: bool) {
    let test = test_name();
    if under_ci() {
        panic!("{test}: {why} (CI is set, where no test may be skipped)");
    }
    if !allowed {
        panic!("{test}: {why} (set NFLAB_ALLOW_SKIP=1 to skip it instead)");
    }
    eprintln!("skipped: {test}: {why}");
    if let Some(log) = std::env::var_os("NFLAB_SKIP_LOG") {
        let line = format!("{test}: {why}\n");
        // Appends of one short line are atomic enough for parallel test threads.
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// A directory `nflab-<tag>-<pid>` in the temp directory for the files of one
/// test binary, removed when the binary exits (the harness ends with `exit`,
/// which runs `atexit` handlers), so tests that share it need not agree who
/// goes last. Only a killed test binary leaves it.
pub fn scratch_dir(tag: &str) -> std::path::PathBuf {
    use std::sync::Mutex;
    static DIRS: Mutex<Vec<std::path::PathBuf>> = Mutex::new(Vec::new());
    extern "C" fn remove_all() {
        if let Ok(dirs) = DIRS.lock() {
            for d in dirs.iter() {
                let _ = std::fs::remove_dir_all(d);
            }
        }
    }
    let dir = std::env::temp_dir().join(format!("nflab-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut dirs = DIRS.lock().unwrap_or_else(|e| e.into_inner());
    if !dirs.contains(&dir) {
        if dirs.is_empty() {
            // SAFETY: `remove_all` is an `extern "C" fn()` that never unwinds
            // out (every error is ignored) and touches only the static above.
            unsafe { libc::atexit(remove_all) };
        }
        dirs.push(dir.clone());
    }
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_tool_on_path_and_an_absolute_path() {
        assert!(have("sh"));
        assert!(have("/"));
        assert!(!have("nflab-no-such-tool-anywhere"));
        assert!(!have("/nonexistent/nflab"));
    }

    #[test]
    fn a_present_tool_is_not_a_skip() {
        assert!(require_tool("sh", "dash"));
    }

    #[test]
    fn a_scratch_dir_is_made_once_and_named_by_tag_and_pid() {
        let a = super::scratch_dir("testkit-self");
        let b = super::scratch_dir("testkit-self");
        assert_eq!(a, b);
        assert!(a.is_dir());
        assert!(a
            .to_string_lossy()
            .ends_with(&format!("nflab-testkit-self-{}", std::process::id())));
    }
}
