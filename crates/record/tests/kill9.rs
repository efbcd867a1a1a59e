//! kill -9 of a writer mid-stream leaves a readable prefix.
//!
//! The test re-executes its own binary with `--exact child_writer` and the
//! environment variable `NFLAB_KILL9_CHILD=<path>`; in that process the
//! `child_writer` test writes records forever. Without the variable
//! `child_writer` does nothing.
#![cfg(unix)]

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nflab_record::*;

const CHILD_ENV: &str = "NFLAB_KILL9_CHILD";
/// The child calls `flush_block` every this many records, like the recorder's
/// periodic flush; so blocks are 4096, 4096, 1808, 4096, 4096, 1808, ...
const FLUSH_EVERY: u64 = 10_000;

fn expected(i: u64) -> Record {
    Record {
        seq: i,
        flow: 1,
        tx_ns: 1000 * i,
        rx_ns: 1000 * i + 250 + i % 7,
        wire_len: 64,
        flags: flags::RX_TS_KERNEL,
    }
}

fn ready_path(path: &Path) -> PathBuf {
    path.with_extension("ready")
}

#[test]
fn child_writer() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return; // Not the child: nothing to do.
    };
    let path = PathBuf::from(path);
    let meta = Metadata {
        run_id: "kill9".into(),
        ..Metadata::default()
    };
    let mut w = RecordWriter::create(&path, &meta).expect("child: create");
    let started = Instant::now();
    let mut signalled = false;
    for i in 0u64.. {
        w.push(&expected(i)).expect("child: push");
        if (i + 1) % FLUSH_EVERY == 0 {
            w.flush_block().expect("child: flush");
        }
        if !signalled && w.records_written() >= 3 * BLOCK_RECORDS as u64 {
            std::fs::write(ready_path(&path), b"ready").expect("child: ready file");
            signalled = true;
        }
        if i % 512 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        if started.elapsed() > Duration::from_secs(60) {
            // Never killed: leave without a trailer so the parent notices.
            std::process::exit(3);
        }
    }
}

#[test]
fn kill9_leaves_exact_prefix_and_no_trailer() {
    let dir = std::env::temp_dir().join(format!("nflab-kill9-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("records.nfr");
    let exe = std::env::current_exe().expect("current exe");
    let mut child = Command::new(exe)
        .args(["--exact", "child_writer", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &path)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");

    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready_path(&path).exists() {
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("child exited before writing 3 blocks: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "child did not write 3 blocks in 60 s"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(37));
    child.kill().expect("SIGKILL"); // Child::kill sends SIGKILL on Unix.
    let status = child.wait().expect("wait");
    assert_eq!(status.signal(), Some(9), "child status {status}");

    let f = read_all(&path).expect("a killed writer's file is readable");
    let n = f.records.len() as u64;
    assert!(n >= 3 * BLOCK_RECORDS as u64, "only {n} records");
    for (i, r) in f.records.iter().enumerate() {
        assert_eq!(*r, expected(i as u64), "record {i}");
    }
    // The file ends on one of the child's block boundaries.
    let b = BLOCK_RECORDS as u64;
    assert!(
        [0, b, 2 * b].contains(&(n % FLUSH_EVERY)),
        "{n} records is not a block boundary of the child"
    );
    assert!(
        matches!(f.tail, TailState::NoTrailer | TailState::Truncated { .. }),
        "tail {:?}",
        f.tail
    );
    assert_eq!(f.trailer, None);
    assert_eq!(f.meta.run_id, "kill9");
    std::fs::remove_dir_all(&dir).ok();
}
