//! Helpers shared by the lab's end-to-end tests: temporary directories, a study run
//! as a library caller runs it, leftover-namespace checks, one study at a time, JSON.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use nflab_lab::{run_experiment, ExperimentResult, LabError, RunOptions};

/// A fresh directory for test `suite`'s case `tag`.
pub fn tmp(suite: &str, tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nflab-{suite}-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

/// The namespaces this test process has made and not removed.
pub fn our_namespaces() -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    let me = format!("nflab-{}-", std::process::id());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(&me))
        .map(str::to_string)
        .collect()
}

/// One study at a time: each checks that no namespace of this process is left after
/// it, which a study running beside it would break.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// What `nflab run` passes, writing under `out` (or finishing `resume`).
pub fn options(out: &Path, resume: Option<PathBuf>) -> RunOptions {
    RunOptions {
        out: out.to_path_buf(),
        resume,
        progress: false,
        version: "test".into(),
        commit: "test".into(),
        after_failure: None,
        events: Default::default(),
        allow_include_outside: false,
    }
}

/// The study of `spec` (written to `dir/spec.toml`) into `dir`; no namespace of this
/// process may be left after it, however it ended.
pub fn study(dir: &Path, spec: &str) -> Result<ExperimentResult, LabError> {
    let path = dir.join("spec.toml");
    std::fs::write(&path, spec).expect("spec");
    let r = run_experiment(&path, &options(dir, None), Arc::new(AtomicBool::new(false)));
    assert!(our_namespaces().is_empty(), "{:?}", our_namespaces());
    r
}

/// A JSON file, read.
pub fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("json")
}
