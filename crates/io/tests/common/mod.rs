//! Helpers shared by the io crate's tests against real kernel objects: a
//! network namespace that exists exactly as long as its guard, a veth pair in
//! it, and the test frames.

#![allow(dead_code)]

use std::os::fd::AsRawFd;
use std::process::Command;

/// IEEE 802 "local experimental ethertype 1": nothing else on the veth uses it.
pub const ETHERTYPE_TEST: u16 = 0x88B5;
pub const MAGIC: &[u8; 4] = b"NFLB";
pub const FRAME_BYTES: usize = 60;

/// True as root; otherwise the test is skipped (counted; an error under CI).
pub fn root_or_skip(_test: &str) -> bool {
    nflab_testkit::require_root()
}

pub fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace that exists exactly as long as this value.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(tag: &str) -> Netns {
        let name = format!("nflabtest-io-{}-{tag}", std::process::id());
        // A leftover of a crashed run with the same pid would make `add` fail.
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        run("ip", &["netns", "add", &name]);
        let ns = Netns { name };
        // No IPv6 autoconfiguration chatter (DAD, RS, MLD) on the test links.
        ns.exec(&["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
        ns.exec(&["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"]);
        ns
    }

    /// `ip netns exec NAME args...`
    pub fn exec(&self, args: &[&str]) -> String {
        let mut a = vec!["netns", "exec", &self.name];
        a.extend_from_slice(args);
        run("ip", &a)
    }

    /// `ip -n NAME args...`
    pub fn ip(&self, args: &str) {
        let mut a = vec!["-n", &self.name];
        a.extend(args.split_whitespace());
        run("ip", &a);
    }

    pub fn ip_output(&self, args: &str) -> String {
        let mut a = vec!["-n", self.name.as_str()];
        a.extend(args.split_whitespace());
        let out = Command::new("ip").args(&a).output().expect("ip");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A veth pair va <-> vb, both up.
    pub fn with_veth(tag: &str) -> Netns {
        let ns = Netns::new(tag);
        ns.ip("link add va type veth peer name vb");
        ns.ip("link set va up");
        ns.ip("link set vb up");
        ns
    }

    /// Run `f` on a fresh thread that has entered this namespace (setns is per thread).
    pub fn enter<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.name);
        std::thread::scope(|s| {
            s.spawn(|| {
                let file = std::fs::File::open(&path).expect("open netns file");
                // SAFETY: a valid namespace fd; CLONE_NEWNET switches only this thread.
                let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let ok = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            eprintln!("warning: could not delete network namespace {}", self.name);
        }
    }
}

/// Write test frame `seq` (dst, src, ethertype, magic, seq) and return its length.
pub fn build_frame(buf: &mut [u8], dst: [u8; 6], src: [u8; 6], seq: u64) -> usize {
    buf[..FRAME_BYTES].fill(0);
    buf[0..6].copy_from_slice(&dst);
    buf[6..12].copy_from_slice(&src);
    buf[12..14].copy_from_slice(&ETHERTYPE_TEST.to_be_bytes());
    buf[14..18].copy_from_slice(MAGIC);
    buf[18..26].copy_from_slice(&seq.to_be_bytes());
    FRAME_BYTES
}

pub fn parse_frame(f: &[u8]) -> Option<u64> {
    if f.len() >= 26 && f[12..14] == ETHERTYPE_TEST.to_be_bytes() && &f[14..18] == MAGIC {
        Some(u64::from_be_bytes(f[18..26].try_into().ok()?))
    } else {
        None
    }
}
