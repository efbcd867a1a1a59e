//! Helpers shared by the CLI's end-to-end tests: the binary, the root check,
//! temporary directories, leftover-namespace checks, JSON files.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `nflab` binary of this build.
pub fn nflab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nflab"))
}

/// Return from the test unless it runs as root (a counted skip; an error under CI).
#[allow(unused_macros)]
macro_rules! require_root {
    () => {
        if !nflab_testkit::require_root() {
            return;
        }
    };
}

/// Return from the test unless `bin` is installed; absent, the test fails
/// naming `package` (a counted skip only with NFLAB_ALLOW_SKIP=1).
#[allow(unused_macros)]
macro_rules! require_tool {
    ($bin:expr, $package:expr) => {
        if !nflab_testkit::require_tool($bin, $package) {
            return;
        }
    };
}

/// A directory removed on drop (also on panic).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("nflab-e2e-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// nflab namespaces whose name carries this pid.
pub fn namespaces_of(pid: u32) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("nflab-{pid}-")))
        .map(String::from)
        .collect()
}

pub fn write_spec(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, body).unwrap();
    p
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// The JSON file at `p`.
pub fn read_json(p: PathBuf) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}")))
        .unwrap()
}

/// `nflab run SPEC --out OUT --json`, which must succeed and leave no namespace of
/// its own behind. Returns its output (stderr holds the notices), the parsed JSON
/// result and its pid.
pub fn run_ok(spec: &Path, out: &Path) -> (Output, serde_json::Value, u32) {
    let child = nflab()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "nflab run failed: {}", stderr(&o));
    assert!(namespaces_of(pid).is_empty(), "{:?}", namespaces_of(pid));
    let result = serde_json::from_slice(&o.stdout).unwrap();
    (o, result, pid)
}

/// [`run_ok`], returning the first run's directory (`runs/000` of the experiment).
pub fn run_first(spec: &Path, out: &Path) -> PathBuf {
    let (_, result, _) = run_ok(spec, out);
    PathBuf::from(result["dir"].as_str().unwrap()).join("runs/000")
}
pub mod sshlab;
pub mod table;
pub mod tmux;

/// A JSON-lines file (`--events`), one value per line.
pub fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}
