//! Open vSwitch started by nflab, on real namespaces: frames cross a netdev
//! bridge, and nothing of it outlives its owner, `kill -9` included.

use std::process::Command;
use std::time::{Duration, Instant};

use std::net::UdpSocket;

use nflab_sdn::netns::{run, NetnsGuard, PrivateNetns};
use nflab_sdn::ovs::{self, BridgeOptions, Ovs};

fn ready() -> bool {
    nflab_testkit::require_root()
        && nflab_testkit::require_tool("ovs-vswitchd", "openvswitch-switch")
        && nflab_testkit::require_tool("setpriv", "util-linux")
        && nflab_testkit::require_tool("ethtool", "ethtool")
}

/// A namespace `host` cabled by a veth (`port` on the switch side) into `sw`.
fn cable(sw: &PrivateNetns, host: &PrivateNetns, port: &str, addr: &str) {
    run(
        "ip",
        &[
            "-n",
            sw.name(),
            "link",
            "add",
            port,
            "type",
            "veth",
            "peer",
            "name",
            "h0",
            "netns",
            host.name(),
        ],
    )
    .unwrap();
    run("ip", &["-n", sw.name(), "link", "set", port, "up"]).unwrap();
    run("ip", &["-n", host.name(), "addr", "add", addr, "dev", "h0"]).unwrap();
    run("ip", &["-n", host.name(), "link", "set", "h0", "up"]).unwrap();
    // The userspace datapath forwards frames as read from the socket: a
    // veth's "offloaded" UDP checksum would arrive unfilled and be dropped.
    run(
        "ip",
        &[
            "netns",
            "exec",
            host.name(),
            "ethtool",
            "-K",
            "h0",
            "tx",
            "off",
        ],
    )
    .unwrap();
}

#[test]
fn frames_cross_a_netdev_bridge_with_flows_from_ofctl() {
    if !ready() {
        return;
    }
    let sw = PrivateNetns::create("sdnt-sw").unwrap();
    let a = PrivateNetns::create("sdnt-a").unwrap();
    let b = PrivateNetns::create("sdnt-b").unwrap();
    cable(&sw, &a, "s1", "198.18.7.1/24");
    cable(&sw, &b, "s2", "198.18.7.2/24");
    let ovs = Ovs::start(Some(sw.name())).unwrap();
    assert!(ovs.dir().join("conf.db").exists());
    ovs.add_bridge("br0", &BridgeOptions::default()).unwrap();
    ovs.add_port("br0", "s1", 1).unwrap();
    ovs.add_port("br0", "s2", 2).unwrap();
    let dp = ovs
        .vsctl(&["get", "bridge", "br0", "datapath_type"])
        .unwrap();
    assert_eq!(dp.trim(), "netdev");
    // fail_mode=secure: no flows, so nothing crosses yet.
    assert!(ovs.dump_flows("br0").unwrap().is_empty());
    // UDP from a to b through the bridge (the kernel resolves b's MAC by ARP,
    // which must cross the bridge too).
    let rx = NetnsGuard::run(Some(b.name()), || UdpSocket::bind("198.18.7.2:7000"))
        .unwrap()
        .unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let tx = NetnsGuard::run(Some(a.name()), || UdpSocket::bind("198.18.7.1:0"))
        .unwrap()
        .unwrap();
    let ping = || {
        let mut buf = [0u8; 16];
        for _ in 0..10 {
            let _ = tx.send_to(b"probe", "198.18.7.2:7000");
            if matches!(rx.recv_from(&mut buf), Ok((5, _))) {
                return true;
            }
        }
        false
    };
    assert!(!ping(), "a bridge without flows forwarded");
    ovs.ofctl(&["add-flow", "br0", "in_port=1,actions=output:2"])
        .unwrap();
    ovs.ofctl(&["add-flow", "br0", "in_port=2,actions=output:1"])
        .unwrap();
    assert_eq!(ovs.dump_flows("br0").unwrap().len(), 2);
    assert!(ping(), "no datagram crossed the bridge");
    let pids = ovs.pids();
    assert_eq!(pids.len(), 2);
    let dir = ovs.dir().to_path_buf();
    ovs.stop();
    assert!(!dir.exists());
    for pid in pids {
        assert!(gone(pid), "daemon {pid} outlived stop()");
    }
}

fn gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        // A zombie (reaped by no one yet) counts as gone.
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let alive = state
            .rfind(')')
            .is_some_and(|i| !state[i + 2..].starts_with('Z'));
        if !alive {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Run by the next test in a child process: start OvS, say where, wait to be killed.
#[test]
#[ignore = "helper: runs only as the child of kill_9_of_the_owner_leaves_nothing"]
fn helper_start_ovs_and_wait() {
    if std::env::var("NFLAB_SDN_HELPER").is_err() {
        return;
    }
    let ovs = Ovs::start(None).unwrap();
    println!("DIR {}", ovs.dir().display());
    println!("PIDS {:?}", ovs.pids());
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn kill_9_of_the_owner_leaves_nothing() {
    if !ready() {
        return;
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "helper_start_ovs_and_wait",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("NFLAB_SDN_HELPER", "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::BufRead;
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut dir = None;
    let mut pids: Vec<u32> = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some((_, d)) = line.split_once("DIR ") {
            dir = Some(std::path::PathBuf::from(d));
        }
        if let Some((_, p)) = line.split_once("PIDS ") {
            pids = p
                .trim_matches(|c| c == '[' || c == ']')
                .split(", ")
                .filter_map(|x| x.parse().ok())
                .collect();
            break;
        }
    }
    let dir = dir.expect("the helper printed no run directory");
    assert_eq!(pids.len(), 2, "{pids:?}");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    for pid in &pids {
        assert!(gone(*pid), "OvS daemon {pid} outlived its owner's kill -9");
    }
    // The run directory is left; gc sees its owner is dead and removes it.
    assert!(dir.exists());
    let removed = ovs::gc();
    assert!(removed.contains(&dir.display().to_string()), "{removed:?}");
    assert!(!dir.exists());
}

/// The walk `nflab_sdn::poll_order` predicts is the order in which the
/// running ovs-vswitchd's main thread calls `recvmmsg` on the ports' packet
/// sockets, as strace sees it (fd → socket inode → `/proc/net/packet`'s
/// interface index → name).
#[test]
fn the_main_thread_polls_the_ports_in_the_predicted_walk() {
    if !ready() || !nflab_testkit::require_tool("strace", "strace") {
        return;
    }
    let sw = PrivateNetns::create("sdnt-walk").unwrap();
    let ovs = Ovs::start(Some(sw.name())).unwrap();
    ovs.add_bridge("br0", &BridgeOptions::default()).unwrap();
    for i in 0..10u16 {
        let (a, b) = (format!("w{i}a"), format!("w{i}b"));
        run(
            "ip",
            &[
                "-n",
                sw.name(),
                "link",
                "add",
                &a,
                "type",
                "veth",
                "peer",
                "name",
                &b,
            ],
        )
        .unwrap();
        for end in [&a, &b] {
            run("ip", &["-n", sw.name(), "link", "set", end, "up"]).unwrap();
        }
        ovs.add_port("br0", &a, 10 + 2 * i).unwrap();
        ovs.add_port("br0", &b, 11 + 2 * i).unwrap();
    }
    let ports = ovs.datapath_ports().unwrap();
    let mut numbers: Vec<u32> = ports.iter().map(|(n, _)| *n).collect();
    numbers.sort_unstable();
    let predicted: Vec<String> = nflab_sdn::poll_order::walk(&numbers)
        .into_iter()
        .filter_map(|n| {
            ports
                .iter()
                .find(|(no, _)| *no == n)
                .map(|(_, name)| name.clone())
        })
        .filter(|name| name.starts_with('w'))
        .collect();
    assert_eq!(predicted.len(), 20);

    let pid = std::fs::read_to_string(ovs.dir().join("ovs-vswitchd.pid")).unwrap();
    let pid = pid.trim();
    let trace = ovs.dir().join("strace.txt");
    // The main thread goes round at least every half second when idle.
    let st = Command::new("timeout")
        .args(["2", "strace", "-q", "-e", "trace=recvmmsg", "-o"])
        .arg(&trace)
        .args(["-p", pid])
        .status()
        .unwrap();
    assert!(st.code() == Some(124) || st.success(), "strace: {st}");
    let name_of_fd = fd_names(pid, sw.name());
    let seen: Vec<String> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .filter_map(|l| {
            l.split("recvmmsg(")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u32>()
                .ok()
        })
        .filter_map(|fd| name_of_fd.get(&fd).cloned())
        .collect();
    let start = seen
        .iter()
        .position(|n| *n == predicted[0])
        .unwrap_or_else(|| panic!("{} never polled in {seen:?}", predicted[0]));
    assert!(seen.len() >= start + 20, "no whole round traced: {seen:?}");
    assert_eq!(seen[start..start + 20], predicted[..]);
    ovs.stop();
}

/// fd number → interface name of every packet socket of `pid`.
fn fd_names(pid: &str, ns: &str) -> std::collections::HashMap<u32, String> {
    let inode_of_fd: Vec<(u32, String)> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let target = std::fs::read_link(e.path()).ok()?.display().to_string();
            let inode = target
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .to_string();
            Some((e.file_name().to_str()?.parse().ok()?, inode))
        })
        .collect();
    // /proc/net/packet: sk RefCnt Type Proto Iface R Rmem User Inode
    let packet = run("ip", &["netns", "exec", ns, "cat", "/proc/net/packet"]).unwrap();
    let links = run("ip", &["-n", ns, "-o", "link"]).unwrap();
    let name_of_index = |index: &str| {
        links.lines().find_map(|l| {
            let (i, rest) = l.split_once(": ")?;
            (i == index).then(|| rest.split(['@', ':']).next().unwrap_or("").to_string())
        })
    };
    inode_of_fd
        .into_iter()
        .filter_map(|(fd, inode)| {
            let line = packet
                .lines()
                .find(|l| l.split_whitespace().nth(8) == Some(inode.as_str()))?;
            let index = line.split_whitespace().nth(4)?;
            Some((fd, name_of_index(index)?))
        })
        .collect()
}
