//! Hosts for real on one machine: network namespaces that each run their own
//! OpenSSH server, joined to a controller namespace by a management bridge,
//! and LoadGen/DuT pairs joined by veth data links (as on a testbed). Like
//! `two_hosts.rs`, with pinned throwaway host keys. Each host's sshd has a
//! home of its own (an empty tmpfs on /root in a mount namespace of its own),
//! as a separate machine would: sshd runs every command through root's login
//! shell, and Debian's bash then sources ~/.bashrc — this machine's (`pyenv
//! init`, 0.17 s of CPU per remote call on the reference VM) would otherwise
//! be timed as nflab's orchestration. Everything goes on drop.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Run a command quietly; whether it succeeded.
pub fn sh(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// `ip ARGS`, which must succeed.
pub fn ip(args: &[&str]) {
    let mut v = vec!["ip"];
    v.extend_from_slice(args);
    assert!(sh(&v), "ip {} failed", args.join(" "));
}

/// `ssh-keygen` of a throwaway ed25519 key at `path` (and `path.pub`).
pub fn keygen(path: &Path) {
    assert!(sh(&[
        "ssh-keygen",
        "-q",
        "-t",
        "ed25519",
        "-N",
        "",
        "-f",
        path.to_str().unwrap()
    ]));
}

/// Output of a command inside a namespace.
pub fn ns_read(ns: &str, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// One SSH host: a namespace with sshd on `addr`:2222.
pub struct Host {
    pub ns: String,
    pub addr: String,
}

/// The controller namespace, the hosts, their sshds and the key files.
pub struct SshLab {
    pub ctl: String,
    pub dir: PathBuf,
    pub hosts: Vec<Host>,
    sshd: Vec<Child>,
}

impl Drop for SshLab {
    fn drop(&mut self) {
        for c in &mut self.sshd {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in self
            .hosts
            .iter()
            .map(|h| h.ns.clone())
            .chain([self.ctl.clone()])
        {
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl SshLab {
    /// `pairs` LoadGen/DuT pairs: hosts `<tag>-<pid>-lgK` and `-dutK`, data links
    /// lgK eth1 → dutK p1, dutK p2 → lgK eth2, all on the management bridge.
    pub fn pairs(tag: &str, pairs: usize) -> SshLab {
        let pid = std::process::id();
        let dir = std::env::temp_dir().join(format!("nflab-sshlab-{tag}-{pid}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut lab = SshLab {
            ctl: format!("nflabtest-{tag}-{pid}-ctl"),
            dir,
            hosts: Vec::new(),
            sshd: Vec::new(),
        };
        let ctl = lab.ctl.clone();
        ip(&["netns", "add", &ctl]);
        ip(&["-n", &ctl, "link", "add", "mgmt", "type", "bridge"]);
        ip(&["-n", &ctl, "link", "set", "lo", "up"]);
        ip(&["-n", &ctl, "link", "set", "mgmt", "up"]);
        ip(&["-n", &ctl, "addr", "add", "198.18.254.1/24", "dev", "mgmt"]);
        let mut n = 0;
        for k in 0..pairs {
            let lg = format!("nflabtest-{tag}-{pid}-lg{k}");
            let dut = format!("nflabtest-{tag}-{pid}-dut{k}");
            for ns in [&lg, &dut] {
                ip(&["netns", "add", ns]);
                // Pushed now, so a failing step below still removes it.
                n += 1;
                lab.hosts.push(Host {
                    ns: ns.clone(),
                    addr: format!("198.18.254.{}", 10 + n),
                });
                assert!(sh(&[
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    "sysctl",
                    "-qw",
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1"
                ]));
                let port = format!("m{n}");
                ip(&[
                    "-n", &ctl, "link", "add", &port, "type", "veth", "peer", "name", "mgmt",
                    "netns", ns,
                ]);
                ip(&["-n", &ctl, "link", "set", &port, "master", "mgmt"]);
                ip(&["-n", &ctl, "link", "set", &port, "up"]);
                ip(&["-n", ns, "link", "set", "lo", "up"]);
                ip(&["-n", ns, "link", "set", "mgmt", "up"]);
                let a = format!("198.18.254.{}/24", 10 + n);
                ip(&["-n", ns, "addr", "add", &a, "dev", "mgmt"]);
            }
            ip(&[
                "-n", &lg, "link", "add", "eth1", "type", "veth", "peer", "name", "p1", "netns",
                &dut,
            ]);
            ip(&[
                "-n", &lg, "link", "add", "eth2", "type", "veth", "peer", "name", "p2", "netns",
                &dut,
            ]);
            for (ns, devs) in [(&lg, ["eth1", "eth2"]), (&dut, ["p1", "p2"])] {
                for d in devs {
                    ip(&["-n", ns, "link", "set", d, "up"]);
                }
            }
        }
        lab.start_sshd();
        lab
    }

    fn start_sshd(&mut self) {
        let (host_key, client_key) = (self.dir.join("host_key"), self.dir.join("client_key"));
        keygen(&host_key);
        keygen(&client_key);
        std::fs::copy(
            self.dir.join("client_key.pub"),
            self.dir.join("authorized_keys"),
        )
        .unwrap();
        let config = self.dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port 2222\nListenAddress 0.0.0.0\nHostKey {}\nAuthorizedKeysFile {}\nPermitRootLogin yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nStrictModes no\nUsePAM no\nPidFile none\nMaxStartups 100\nMaxSessions 100\n",
                host_key.display(),
                self.dir.join("authorized_keys").display(),
            ),
        )
        .unwrap();
        std::fs::create_dir_all("/run/sshd").unwrap();
        for h in &self.hosts {
            // `ip netns exec`, `unshare` (no --fork) and `exec` keep one pid: the child is sshd.
            self.sshd.push(
                Command::new("ip")
                    .args(["netns", "exec", &h.ns, "unshare", "--mount"])
                    .args(["--propagation", "private", "sh", "-c"])
                    .arg("mount -t tmpfs -o mode=0700 nflab-host-home /root && exec /usr/sbin/sshd -D -e -f \"$0\"")
                    .arg(&config)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            );
        }
        for h in &self.hosts {
            let start = Instant::now();
            while !self.ssh_ok(&h.addr, "true") {
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "sshd on {} did not come up",
                    h.addr
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            assert!(
                self.ssh_ok(&h.addr, "test -z \"$(ls -A /root)\""),
                "the home of host {} is not its own",
                h.addr
            );
        }
    }

    /// Whether `command` succeeds on the host at `addr`.
    fn ssh_ok(&self, addr: &str, command: &str) -> bool {
        let kh = self.dir.join("known_hosts");
        std::fs::write(&kh, format!("[{addr}]:2222 {}", self.host_key())).unwrap();
        sh(&[
            "ip",
            "netns",
            "exec",
            &self.ctl,
            "ssh",
            "-p",
            "2222",
            "-i",
            self.dir.join("client_key").to_str().unwrap(),
            "-o",
            &format!("UserKnownHostsFile={}", kh.display()),
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "LogLevel=ERROR",
            &format!("root@{addr}"),
            command,
        ])
    }

    /// The hosts' public key ("ssh-ed25519 AAAA… comment").
    pub fn host_key(&self) -> String {
        std::fs::read_to_string(self.dir.join("host_key.pub"))
            .unwrap()
            .trim()
            .to_string()
    }

    /// A `[pair.<role>]` body for host `i`: address, port, pinned key, client key, binary.
    pub fn host_entry(&self, i: usize, host_key: &str) -> String {
        format!(
            "address = \"root@{}\"\nport = 2222\nhost_key = \"{host_key}\"\nssh_options = [\"-i\", \"{}\", \"-o\", \"LogLevel=ERROR\"]\nnflab = \"{}\"\n",
            self.hosts[i].addr,
            self.dir.join("client_key").display(),
            env!("CARGO_BIN_EXE_nflab"),
        )
    }

    /// `[[pair]]` sections for the first `n` pairs (named a, b, …).
    pub fn pairs_toml(&self, n: usize) -> String {
        let key = self.host_key();
        (0..n)
            .map(|k| {
                format!(
                    "[[pair]]\nname = \"{}\"\n[pair.loadgen]\n{}tx_iface = \"eth1\"\nrx_iface = \"eth2\"\n[pair.dut]\n{}ingress_iface = \"p1\"\negress_iface = \"p2\"\n",
                    (b'a' + k as u8) as char,
                    self.host_entry(2 * k, &key),
                    self.host_entry(2 * k + 1, &key),
                )
            })
            .collect()
    }

    /// `nflab ARGS` in the controller namespace.
    pub fn nflab(&self) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ctl, env!("CARGO_BIN_EXE_nflab")]);
        c
    }
}
