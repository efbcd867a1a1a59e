//! Helpers shared by the generator's veth tests: root check, a throwaway
//! namespace with a veth pair, the probe base.

#![allow(dead_code)]

use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::Mutex;

use nflab_io::{AfPacket, AfPacketConfig};
use nflab_wire::{MacAddr, ProbeSpec};

pub static SERIAL: Mutex<()> = Mutex::new(());

/// True as root; otherwise the test is skipped (counted; an error under CI).
pub fn root_or_skip(_test: &str) -> bool {
    nflab_testkit::require_root()
}

pub fn run_cmd(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A namespace with a veth pair va <-> vb, deleted on drop (also on panic).
pub struct Netns {
    name: String,
}

impl Netns {
    pub fn new(tag: &str) -> Netns {
        let name = format!("nflabtest-gen-{}-{tag}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        run_cmd(&["netns", "add", &name]);
        let ns = Netns { name };
        for c in [
            "link add va type veth peer name vb",
            "link set va up",
            "link set vb up",
        ] {
            let mut a = vec!["-n", ns.name.as_str()];
            a.extend(c.split_whitespace());
            run_cmd(&a);
        }
        ns
    }

    /// Open TX on va and a recorder ring on vb from a thread inside the namespace.
    pub fn open(&self) -> (AfPacket, AfPacket) {
        let path = format!("/run/netns/{}", self.name);
        std::thread::scope(|s| {
            s.spawn(|| {
                let f = std::fs::File::open(&path).expect("netns file");
                // SAFETY: a valid namespace fd; CLONE_NEWNET switches only this thread.
                let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0);
                let tx = AfPacket::open(
                    "va",
                    &AfPacketConfig {
                        rx: false,
                        ..AfPacketConfig::default()
                    },
                )
                .expect("tx");
                let rx = AfPacket::open(
                    "vb",
                    &AfPacketConfig {
                        tx: false,
                        rx_block_bytes: 256 << 10,
                        rx_blocks: 256,
                        rx_block_timeout_ms: 4,
                        ..AfPacketConfig::default()
                    },
                )
                .expect("rx");
                (tx, rx)
            })
            .join()
            .expect("open thread")
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Probe addresses of the tests.
pub fn base() -> ProbeSpec {
    ProbeSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        ..ProbeSpec::default()
    }
}
