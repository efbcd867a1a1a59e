//! Faults of the disk (#21 item 3): a full disk while recording, and an
//! output directory on a read-only file system. Real tmpfs mounts, real runs.

#[macro_use]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use common::*;

/// The tests mount and fill file systems: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// A tmpfs mounted at `path` for the test's lifetime.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(path: &Path, options: &str) -> Tmpfs {
        std::fs::create_dir_all(path).unwrap();
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                options,
                "tmpfs",
                path.to_str().unwrap(),
            ])
            .status()
            .unwrap()
            .success();
        assert!(
            ok,
            "cannot mount a tmpfs on {path:?} (root and tmpfs needed)"
        );
        Tmpfs(path.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Something still holds it open: detach it now, it goes when released.
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

fn experiment_dir(out: &Path) -> PathBuf {
    std::fs::read_dir(out)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .unwrap_or_else(|| panic!("no experiment directory in {out:?}"))
}

/// Run 000 (100 records) fits on a 400 KiB disk, run 001 (40 000) fills it,
/// run 002 (100 again) comes after.
fn full_disk_study(tmp: &Path, on_failure: &str) -> (std::process::Output, PathBuf, u32) {
    let mnt = tmp.join("disk");
    let _disk = Tmpfs::mount(&mnt, "size=400k");
    let spec = write_spec(
        tmp,
        &format!("full-{on_failure}"),
        &format!(
            "[experiment]\nname = \"full\"\non_run_failure = \"{on_failure}\"\n[dut]\nkind = \"loopback\"\n\
             [traffic]\nduration_s = 1\nwarmup_s = 0\n[sweep]\n\"traffic.rate_pps\" = [100, 40000, 101]\n"
        ),
    );
    let child = nflab()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--out",
            mnt.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    // Copy the tree off the disk before it goes.
    let exp = experiment_dir(&mnt);
    let kept = tmp.join(format!("kept-{on_failure}"));
    let ok = Command::new("cp")
        .args(["-a", exp.to_str().unwrap(), kept.to_str().unwrap()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    (out, kept, pid)
}

/// What a full disk leaves of run 000 (whole) and run 001 (failed, readable).
fn check_full_disk_runs(exp: &Path) {
    // Nothing recorded before is lost: run 000 is whole.
    assert!(exp.join("runs/000/.complete").exists());
    let r0 = nflab_record::read_all(&exp.join("runs/000/records.nfr")).unwrap();
    assert_eq!(r0.records.len(), 100);
    assert!(r0.tail.is_complete());
    // Run 001: marked failed in one sentence naming the file and the cause.
    assert!(!exp.join("runs/001/.complete").exists());
    let failed = read_json(exp.join("runs/001/failed.json"));
    let sentence = failed["error"].as_str().unwrap();
    assert_eq!(failed["run"], "001");
    assert!(
        sentence.contains("runs/001/records.nfr") && sentence.contains("No space left on device"),
        "{sentence}"
    );
    assert!(!sentence.contains('\n'));
    // Its records are readable up to the last complete block: the blocks before the
    // failure are intact, in order, and nothing after the torn one is made up.
    let r1 = nflab_record::read_all(&exp.join("runs/001/records.nfr")).unwrap();
    assert!(!r1.tail.is_complete(), "{:?}", r1.tail);
    assert!(!r1.records.is_empty() && r1.records.len() < 40_000);
    // Loopback keeps the order: seq counts up from the first recorded probe, no gaps.
    let first = r1.records[0].seq;
    for (i, r) in r1.records.iter().enumerate() {
        assert_eq!(r.seq, first + i as u64, "record {i}");
    }
}

#[test]
fn a_full_disk_marks_the_run_failed_and_the_study_stops_or_goes_on_as_configured() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("faults-full");

    // on_run_failure = "stop" (the default): exit 2, one sentence, run 002 never starts.
    let (out, exp, pid) = full_disk_study(&tmp.0, "stop");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("runs/001/records.nfr") && err.contains("No space left on device"),
        "{err}"
    );
    assert!(namespaces_of(pid).is_empty());
    check_full_disk_runs(&exp);
    assert!(!exp.join("runs/002").exists());
    // The completed run is in results.parquet (the reserve left room for it).
    let parquet = std::fs::read(exp.join("results.parquet")).unwrap();
    assert_eq!(&parquet[parquet.len() - 4..], b"PAR1");

    // "continue": run 001 is marked failed and run 002 is tried; exit 1 names the failure.
    let (out, exp, pid) = full_disk_study(&tmp.0, "continue");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.lines().any(|l| l.starts_with("failed: run 001: ")
            && l.contains("records.nfr")
            && l.contains("No space left on device")),
        "{err}"
    );
    assert!(namespaces_of(pid).is_empty());
    check_full_disk_runs(&exp);
    assert!(exp.join("runs/002").is_dir(), "run 002 was not tried");
}

#[test]
fn a_read_only_output_directory_is_one_sentence_before_anything_starts() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("faults-ro");
    let ro = tmp.0.join("ro");
    let _disk = Tmpfs::mount(&ro, "size=64k,ro");
    let knob = "/proc/sys/kernel/printk_ratelimit_burst";
    let before = std::fs::read_to_string(knob).unwrap();
    let value: i64 = before.trim().parse::<i64>().unwrap() + 5;
    let spec = write_spec(
        &tmp.0,
        "ro",
        &format!(
            "[experiment]\nname = \"ro\"\n[dut]\nkind = \"loopback\"\n[traffic]\nduration_s = 0.2\nwarmup_s = 0\n\
             [knobs]\nsysctl = {{ \"kernel.printk_ratelimit_burst\" = {value} }}\n"
        ),
    );
    let out_dir = ro.join("results");
    let child = nflab()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(out_dir.to_str().unwrap()) && err.contains("Read-only file system"),
        "{err}"
    );
    assert!(namespaces_of(pid).is_empty());
    assert_eq!(std::fs::read_to_string(knob).unwrap(), before);
    assert!(!std::path::Path::new("/run/nflab")
        .join(format!("knobs-{pid}-0.journal"))
        .exists());

    // --resume into an experiment directory that became read-only: the same.
    let rw = tmp.0.join("rw");
    let disk = Tmpfs::mount(&rw, "size=64k");
    let exp = rw.join("20260101T000000Z-ro");
    std::fs::create_dir_all(exp.join("runs")).unwrap();
    std::fs::copy(&spec, exp.join("spec.toml")).unwrap();
    let ok = Command::new("mount")
        .args(["-o", "remount,ro", rw.to_str().unwrap()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let out = nflab()
        .args(["run", "--resume", exp.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("experiment directory") && err.contains(exp.to_str().unwrap()),
        "{err}"
    );
    drop(disk);
}

#[test]
fn a_bad_on_run_failure_is_one_sentence_naming_the_key() {
    let tmp = TempDir::new("faults-key");
    let spec = write_spec(
        &tmp.0,
        "bad",
        "[experiment]\nname = \"bad\"\non_run_failure = \"sometimes\"\n[dut]\nkind = \"loopback\"\n",
    );
    let out = nflab()
        .args(["run", spec.to_str().unwrap(), "--dry-run"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("on_run_failure")
            && err.contains("sometimes")
            && err.contains("stop")
            && err.contains("continue"),
        "{err}"
    );
}
