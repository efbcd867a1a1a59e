//! Two hosts for real: a LoadGen namespace and a DuT namespace with its own
//! SSH server. nflab runs in the LoadGen namespace with `topology.kind =
//! "hosts"` and sets the DuT up over SSH with the same binary, records each
//! host's clock state, measures, and reverts the DuT host afterwards.
//!
//! Needs root and OpenSSH (client and server); without them the tests fail
//! naming the packages (scripts/deps.sh test installs them).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::sshlab::{ip, keygen, ns_read, sh};

/// Namespaces, sshd and files of the test; all removed on drop.
struct Lab {
    lg: String,
    dut: String,
    dir: PathBuf,
    sshd: Option<Child>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut c) = self.sshd.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in [&self.lg, &self.dut] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn linux_router_on_a_remote_host_over_ssh() {
    if !nflab_testkit::require_root()
        || !nflab_testkit::require_tool("ssh", "openssh-client")
        || !nflab_testkit::require_tool("/usr/sbin/sshd", "openssh-server")
    {
        return;
    }
    let sshd_bin = "/usr/sbin/sshd";
    let pid = std::process::id();
    let lab = Lab {
        lg: format!("nflabtest-2h-{pid}-lg"),
        dut: format!("nflabtest-2h-{pid}-dut"),
        dir: std::env::temp_dir().join(format!("nflab-2h-{pid}")),
        sshd: None,
    };
    let mut lab = lab;
    std::fs::create_dir_all(&lab.dir).unwrap();
    let (lg, dut) = (lab.lg.clone(), lab.dut.clone());
    ip(&["netns", "add", &lg]);
    ip(&["netns", "add", &dut]);
    // Data links as on a real testbed, plus a management link for SSH.
    ip(&[
        "-n", &lg, "link", "add", "eth1", "type", "veth", "peer", "name", "p1", "netns", &dut,
    ]);
    ip(&[
        "-n", &lg, "link", "add", "eth2", "type", "veth", "peer", "name", "p2", "netns", &dut,
    ]);
    ip(&[
        "-n", &lg, "link", "add", "mgmt", "type", "veth", "peer", "name", "mgmt", "netns", &dut,
    ]);
    for (ns, devs) in [
        (&lg, ["lo", "eth1", "eth2", "mgmt"]),
        (&dut, ["lo", "p1", "p2", "mgmt"]),
    ] {
        assert!(sh(&[
            "ip",
            "netns",
            "exec",
            ns,
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1"
        ]));
        for d in devs {
            ip(&["-n", ns, "link", "set", d, "up"]);
        }
    }
    ip(&["-n", &lg, "addr", "add", "198.18.255.1/30", "dev", "mgmt"]);
    ip(&["-n", &dut, "addr", "add", "198.18.255.2/30", "dev", "mgmt"]);

    // An SSH server in the DuT namespace with throwaway keys.
    let (host_key, client_key) = (lab.dir.join("host_key"), lab.dir.join("client_key"));
    keygen(&host_key);
    keygen(&client_key);
    std::fs::copy(
        lab.dir.join("client_key.pub"),
        lab.dir.join("authorized_keys"),
    )
    .unwrap();
    let config = lab.dir.join("sshd_config");
    std::fs::write(
        &config,
        format!(
            "Port 2222\nListenAddress 198.18.255.2\nHostKey {}\nAuthorizedKeysFile {}\nPermitRootLogin yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nStrictModes no\nUsePAM no\nPidFile {}\n",
            host_key.display(),
            lab.dir.join("authorized_keys").display(),
            lab.dir.join("sshd.pid").display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all("/run/sshd").unwrap();
    lab.sshd = Some(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &dut,
                sshd_bin,
                "-D",
                "-e",
                "-f",
                config.to_str().unwrap(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let bin = env!("CARGO_BIN_EXE_nflab");
    let ssh_opts = format!(
        "[\"-i\", \"{}\", \"-o\", \"LogLevel=ERROR\"]",
        client_key.display()
    );
    // nflab checks host keys: this one is pinned in the spec.
    let pinned = std::fs::read_to_string(lab.dir.join("host_key.pub")).unwrap();
    let pinned = pinned.trim();
    // Wait for sshd to accept.
    let start = Instant::now();
    loop {
        let ok = Command::new("ip")
            .args([
                "netns",
                "exec",
                &lg,
                "ssh",
                "-p",
                "2222",
                "-i",
                client_key.to_str().unwrap(),
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
                "-o",
                "BatchMode=yes",
                "-o",
                "LogLevel=ERROR",
                "root@198.18.255.2",
                "true",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if ok {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "sshd did not come up"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let spec = lab.dir.join("hosts.toml");
    std::fs::write(
        &spec,
        format!(
            "[experiment]\nname = \"two-hosts\"\n[topology]\nkind = \"hosts\"\n[dut]\nkind = \"linux-router\"\n[traffic]\nrate_pps = 5000\nduration_s = 1\nwarmup_s = 0.2\n\
             [hosts.loadgen]\naddress = \"local\"\ntx_iface = \"eth1\"\nrx_iface = \"eth2\"\n\
             [hosts.dut]\naddress = \"root@198.18.255.2\"\nport = 2222\nhost_key = \"{pinned}\"\nssh_options = {ssh_opts}\nnflab = \"{bin}\"\ningress_iface = \"p1\"\negress_iface = \"p2\"\n"
        ),
    )
    .unwrap();
    let forward_before = ns_read(&dut, &["cat", "/proc/sys/net/ipv4/ip_forward"]);
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lg,
            bin,
            "run",
            spec.to_str().unwrap(),
            "--out",
            lab.dir.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &v["runs"][0]["summary"];
    assert_eq!(s["packets"]["sent"], 5000);
    assert_eq!(s["packets"]["lost"], 0, "{s}");
    assert!(s["latency_ns"]["p50"].as_i64().unwrap() > 0);

    // Same artifact tree, with each host's clock state.
    let dir = PathBuf::from(v["dir"].as_str().unwrap());
    let env: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("env.json")).unwrap()).unwrap();
    for role in ["loadgen", "dut"] {
        assert_eq!(
            env["hosts"][role]["clock_source"], "CLOCK_REALTIME",
            "{role}"
        );
        assert!(env["hosts"][role]["sync"].is_string());
    }
    assert!(dir.join("runs/000/records.nfr").exists() && dir.join("results.parquet").exists());

    // The DuT host is as it was.
    assert_eq!(
        ns_read(&dut, &["cat", "/proc/sys/net/ipv4/ip_forward"]),
        forward_before
    );
    let addrs = ns_read(&dut, &["ip", "-4", "addr", "show", "dev", "p1"]);
    assert!(!addrs.contains("198.18.0.2"), "{addrs}");
    let neigh = ns_read(&dut, &["ip", "neigh", "show", "dev", "p2"]);
    assert!(!neigh.contains("198.19.0.1"), "{neigh}");
}

#[test]
fn unreachable_dut_host_is_one_sentence_and_leaves_nothing() {
    if !nflab_testkit::require_root() || !nflab_testkit::require_tool("ssh", "openssh-client") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("nflab-2h-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("bad.toml");
    // Loopback port 1: refused at once, nothing leaves the machine.
    std::fs::write(
        &spec,
        "[experiment]\nname = \"bad\"\n[topology]\nkind = \"hosts\"\n[hosts.loadgen]\naddress = \"local\"\ntx_iface = \"lo\"\nrx_iface = \"lo\"\n[hosts.dut]\naddress = \"root@127.0.0.1\"\nport = 1\ningress_iface = \"a\"\negress_iface = \"b\"\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nflab"))
        .args([
            "run",
            spec.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("root@127.0.0.1") && err.trim().lines().count() == 1,
        "{err}"
    );
}
