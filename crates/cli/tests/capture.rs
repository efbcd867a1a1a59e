//! `nflab capture` from the command line: bad input is one sentence and exit 2,
//! before any capture starts; a real capture with a manual trigger (SIGUSR1).

use std::process::Command;
use std::time::Duration;

#[macro_use]
mod common;
use common::{nflab, stderr, TempDir};

#[test]
fn a_filter_that_does_not_compile_is_libpcaps_message_and_exit_2() {
    let tmp = TempDir::new("cap-badfilter");
    let out = nflab()
        .args(["capture", "--iface", "lo", "--out"])
        .arg(&tmp.0)
        .args(["--trigger", "tcp port banana", "--duration", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("tcp port banana") && err.contains("does not compile"),
        "{err}"
    );
    // Nothing was captured: no capture.json.
    assert!(!tmp.0.join("capture.json").exists());
}

#[test]
fn a_missing_interface_and_a_bad_ring_are_one_sentence() {
    let tmp = TempDir::new("cap-badiface");
    for (args, want) in [
        (vec!["--iface", "nflab-no-such-if"], "nflab-no-such-if"),
        (vec!["--iface", "lo", "--ring", "lots"], "--ring lots"),
    ] {
        let out = nflab()
            .arg("capture")
            .args(&args)
            .arg("--out")
            .arg(&tmp.0)
            .args(["--duration", "0.2"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn sigusr1_triggers_a_dump_of_the_last_moments() {
    require_root!();
    let tmp = TempDir::new("cap-manual");
    let ns = format!("nflabtest-capcli-{}", std::process::id());
    struct Ns(String);
    impl Drop for Ns {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }
    assert!(Command::new("ip")
        .args(["netns", "add", &ns])
        .status()
        .unwrap()
        .success());
    let _ns = Ns(ns.clone());
    assert!(Command::new("ip")
        .args(["-n", &ns, "link", "set", "lo", "up"])
        .status()
        .unwrap()
        .success());
    let mut child = nflab()
        .args(["capture", "--netns", &ns, "--iface", "lo", "--out"])
        .arg(&tmp.0)
        .args(["--pre", "2", "--post", "0.1", "--producers", "1"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // 200 probes on the namespace's loopback.
    let gen = nflab()
        .args([
            "gen",
            "--netns",
            &ns,
            "--iface",
            "lo",
            "--dst-mac",
            "00:00:00:00:00:00",
        ])
        .args(["--rate", "2000", "--count", "200"])
        .output()
        .unwrap();
    assert!(gen.status.success(), "{}", stderr(&gen));
    // SAFETY: kill with a valid pid of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGUSR1) };
    std::thread::sleep(Duration::from_millis(800));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.0.join("capture.json")).unwrap())
            .unwrap();
    assert_eq!(json["fired_total"], 1, "{json}");
    assert!(json["fired"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("manual"));
    let dumps = json["dumps"].as_array().unwrap();
    assert_eq!(dumps.len(), 1, "{json}");
    assert!(tmp.0.join(dumps[0]["file"].as_str().unwrap()).exists());
    // Every probe (the generator's AF_PACKET send bypasses the qdisc, so taps
    // see each frame once, on receive).
    let packets = dumps[0]["packets"].as_u64().unwrap();
    assert!(packets >= 200, "{json}");
    assert_eq!(json["dumped"].as_u64(), Some(packets));
}
