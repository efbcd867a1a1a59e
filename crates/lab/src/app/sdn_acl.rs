//! The ACL use case of the TableVisor-class proxy (docs/sdn.md): an
//! unmodified os-ken app (`examples/sdn/acl_app.py`) programs a two-table
//! switch — N ACL rules in table 0, M MAC rules in table 1 — and the proxy
//! places the tables on two single-table Open vSwitch bridges joined by a
//! patch cable, so N×M combined rules become N + M flows. Generator frames
//! then cross the emulated switch and each one is checked, by sequence
//! number, against the single-table reference: the N×M cross product of
//! allowed sources and known destinations.
//!
//! ```text
//!  nflab-<pid>-acllg            nflab-<pid>-aclsw
//!  lg0 ══ veth ══ a1 ─ s1 [table 0: ACL] ─patch─ s2 [table 1: MAC] ─ b1 ══ veth ══ lg1
//!                      └──────── proxy (127.0.0.1:6653) ── os-ken app (127.0.0.1:6633)
//! ```

use std::collections::{BTreeMap, HashSet};
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nflab_io::{AfPacket, AfPacketConfig, PacketIo};
use nflab_sdn::netns::{run as host, PrivateNetns};
use nflab_sdn::ovs::{BridgeOptions, Ovs};
use nflab_sdn::proxy::config::{
    LinkEntry, PortEntry, ProxyConfig, ProxySection, SwitchEntry, TableEntry,
};
use nflab_sdn::proxy::translate::PROXY_COOKIE;
use serde::Serialize;

use crate::error::LabError;
use crate::net::netns::NetnsGuard;

/// The os-ken app, shipped inside the binary.
pub const APP: &str = include_str!("../../../../examples/sdn/acl_app.py");
const MAGIC: &[u8; 6] = b"NFACL\0";
const SRC_MAC: [u8; 6] = [0x02, 0x4e, 0x46, 0x00, 0x00, 0x01];
/// A destination no MAC rule knows.
const UNKNOWN_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0xff, 0xff, 0xff];

/// `nflab sdn acl --json`.
#[derive(Debug, Clone, Serialize)]
pub struct AclReport {
    /// The controller's flows on each bridge (`ovs-ofctl dump-flows`), s1 then s2.
    pub flows_per_bridge: Vec<usize>,
    /// Flows the proxy added itself (entry rules of cross-device GOTOs).
    pub proxy_flows_per_bridge: Vec<usize>,
    /// Probe packets sent.
    pub packets: usize,
    /// Packets forwarded where the reference drops them, duplicated, or
    /// changed on the way.
    pub misforwarded: usize,
    /// Packets the reference forwards that did not arrive (a wrong drop, or
    /// the userspace datapath dropping under load: the two look the same).
    pub lost: usize,
    /// Packets the reference forwards.
    pub expected_forwarded: usize,
    /// Packets that arrived.
    pub received: usize,
    /// ACL and MAC rules.
    pub acl: usize,
    /// MAC rules.
    pub mac: usize,
}

/// The ACL's verdict for source `i` (as in acl_app.py: every third source is denied).
pub fn allowed(i: usize) -> bool {
    i % 3 != 2
}

fn mac(j: usize) -> [u8; 6] {
    [0x02, 0, 0, 0, (j >> 8) as u8, j as u8]
}

/// Source and destination of probe `seq`: two sources no ACL rule knows
/// and one destination no MAC rule knows among the known ones.
fn probe(seq: usize, n: usize, m: usize) -> (usize, [u8; 6]) {
    let a = seq % (n + 2);
    let b = (seq / (n + 2)) % (m + 1);
    (a, if b < m { mac(b) } else { UNKNOWN_MAC })
}

fn frame(seq: u64, src: usize, dst: [u8; 6]) -> Vec<u8> {
    let mut f = Vec::with_capacity(64);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&SRC_MAC);
    f.extend_from_slice(&[0x08, 0x00]);
    let payload_len = MAGIC.len() + 8;
    let ip_len = 20 + 8 + payload_len;
    let mut ip = vec![
        0x45,
        0,
        (ip_len >> 8) as u8,
        ip_len as u8,
        0,
        0,
        0x40,
        0,
        64,
        17,
        0,
        0,
    ];
    ip.extend_from_slice(&[198, 18, 1, src as u8, 198, 19, 0, 1]);
    let sum = nflab_wire::checksum::internet_checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    let udp_len = 8 + payload_len;
    f.extend_from_slice(&[
        0x04,
        0xd2,
        0x16,
        0x2e,
        (udp_len >> 8) as u8,
        udp_len as u8,
        0,
        0,
    ]);
    f.extend_from_slice(MAGIC);
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(64, 0);
    f
}

fn err(e: impl std::fmt::Display) -> LabError {
    LabError::Other(format!("sdn acl: {e}"))
}

/// Environment variable naming the Python that runs the os-ken app (a
/// virtualenv's, say): an absolute path to an executable file.
pub const PYTHON_ENV: &str = "NFLAB_PYTHON";

/// The Python of the os-ken app: `$NFLAB_PYTHON`, else `python3` from the
/// system's directories — never one found on PATH, as this runs as root.
fn python() -> Result<std::path::PathBuf, LabError> {
    use std::os::unix::fs::PermissionsExt;
    let Some(p) = std::env::var_os(PYTHON_ENV).filter(|p| !p.is_empty()) else {
        return Ok(nflab_io::process::system_tool("python3"));
    };
    let p = std::path::PathBuf::from(p);
    let executable = p
        .metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if p.is_absolute() && executable {
        Ok(p)
    } else {
        Err(LabError::Host(format!(
            "{PYTHON_ENV} = {} is not the absolute path of an executable file: point it at a Python that has os-ken or unset it",
            p.display()
        )))
    }
}

/// Set up, program, send `packets` probes, check each, tear down.
pub fn run(n: usize, m: usize, packets: usize) -> Result<AclReport, LabError> {
    if n == 0 || n > 250 {
        return Err(LabError::Unsupported(format!(
            "--acl {n}: the ACL has 1 to 250 rules (sources 198.18.1.0-249)"
        )));
    }
    if m == 0 || m > 4096 {
        return Err(LabError::Unsupported(format!(
            "--mac {m}: the MAC table has 1 to 4096 rules"
        )));
    }
    if packets == 0 {
        return Err(LabError::Unsupported("--packets must be at least 1".into()));
    }
    let python = python()?;
    let ok = Command::new(&python)
        .args(["-c", "import os_ken"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return Err(LabError::Host(format!(
            "the ACL use case runs an os-ken app with {}, which has no os_ken: pip install os-ken for it (scripts/deps.sh test), or name a Python that has it in {PYTHON_ENV}",
            python.display()
        )));
    }
    let sw = PrivateNetns::create("aclsw").map_err(err)?;
    let lg = PrivateNetns::create("acllg").map_err(err)?;
    for (l, s) in [("lg0", "a1"), ("lg1", "b1")] {
        host(
            "ip",
            &[
                "-n",
                lg.name(),
                "link",
                "add",
                l,
                "type",
                "veth",
                "peer",
                "name",
                s,
                "netns",
                sw.name(),
            ],
        )
        .map_err(err)?;
        host("ip", &["-n", lg.name(), "link", "set", l, "up"]).map_err(err)?;
        host("ip", &["-n", sw.name(), "link", "set", s, "up"]).map_err(err)?;
    }
    host(
        "ip",
        &[
            "-n",
            lg.name(),
            "link",
            "set",
            "lg0",
            "address",
            "02:4e:46:00:00:01",
        ],
    )
    .map_err(err)?;
    host(
        "ip",
        &[
            "netns",
            "exec",
            lg.name(),
            &nflab_io::process::system_tool("sysctl").to_string_lossy(),
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
        ],
    )
    .map_err(err)?;
    let ovs = Ovs::start(Some(sw.name())).map_err(err)?;
    let work = ovs.dir().join("acl");
    std::fs::create_dir_all(&work)
        .map_err(|e| err(format!("cannot create {}: {e}", work.display())))?;
    let app = work.join("acl_app.py");
    std::fs::write(&app, APP).map_err(|e| err(format!("cannot write {}: {e}", app.display())))?;
    let mut osken = Command::new(nflab_io::process::system_tool("ip"))
        .args(["netns", "exec", sw.name()])
        .arg(nflab_io::process::system_tool("setpriv"))
        .args(["--pdeathsig", "KILL"])
        .arg(&python)
        .arg(&app)
        .args([
            "--ofp-listen-host",
            "127.0.0.1",
            "--ofp-tcp-listen-port",
            "6633",
        ])
        .env("NFLAB_ACL_N", n.to_string())
        .env("NFLAB_ACL_M", m.to_string())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(work.join("osken.log")).map_err(err)?)
        .spawn()
        .map_err(|e| err(format!("cannot start the os-ken app: {e}")))?;
    let result = (|| {
        let cfg = ProxyConfig {
            proxy: ProxySection {
                listen: "127.0.0.1:6653".into(),
                controller: "127.0.0.1:6633".into(),
                datapath_id: 0xac1,
                apps: vec!["log".into(), "multi-switch".into()],
                log: Some(work.join("control.log").display().to_string()),
                connect_timeout_s: 60.0,
                allow_remote_switches: false,
            },
            switches: vec![
                SwitchEntry {
                    name: "s1".into(),
                    datapath_id: 0xa1,
                },
                SwitchEntry {
                    name: "s2".into(),
                    datapath_id: 0xa2,
                },
            ],
            tables: vec![
                TableEntry {
                    id: 0,
                    switch: "s1".into(),
                    local: 0,
                },
                TableEntry {
                    id: 1,
                    switch: "s2".into(),
                    local: 1,
                },
            ],
            ports: vec![
                PortEntry {
                    id: 1,
                    switch: "s1".into(),
                    local: 1,
                },
                PortEntry {
                    id: 2,
                    switch: "s2".into(),
                    local: 1,
                },
            ],
            links: vec![LinkEntry {
                from: "s1".into(),
                from_port: 10,
                to: "s2".into(),
                to_port: 10,
            }],
        };
        let proxy = NetnsGuard::run(sw.name(), || nflab_sdn::proxy::start(cfg))?.map_err(err)?;
        for (br, dpid, port, patch, peer) in [
            ("s1", 0xa1, "a1", "p12", "p21"),
            ("s2", 0xa2, "b1", "p21", "p12"),
        ] {
            ovs.add_bridge(
                br,
                &BridgeOptions {
                    controller: Some("tcp:127.0.0.1:6653".into()),
                    datapath_id: Some(dpid),
                    protocols: None,
                },
            )
            .map_err(err)?;
            ovs.add_port(br, port, 1).map_err(err)?;
            ovs.add_patch(br, patch, peer, 10).map_err(err)?;
        }
        // The app says when its barrier came back (through the proxy's fan-in).
        let stdout = osken.stdout.take().ok_or_else(|| err("no os-ken output"))?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(l) if l.starts_with("installed") => break,
                Ok(l) if l.starts_with("error") => {
                    return Err(err(format!("the proxy refused a rule of the app: {l}")))
                }
                Ok(_) => {}
                Err(_) => {
                    return Err(err(format!(
                        "the os-ken app did not install its rules within 90 s; its log: {}",
                        std::fs::read_to_string(work.join("osken.log"))
                            .unwrap_or_default()
                            .lines()
                            .rev()
                            .take(3)
                            .collect::<Vec<_>>()
                            .join(" | ")
                    )))
                }
            }
        }
        let mut flows = Vec::new();
        let mut proxy_flows = Vec::new();
        let cookie = format!("cookie={PROXY_COOKIE:#x}");
        for br in ["s1", "s2"] {
            let all = ovs.dump_flows(br).map_err(err)?;
            let own = all.iter().filter(|f| f.contains(&cookie)).count();
            flows.push(all.len() - own);
            proxy_flows.push(own);
        }
        let (received, misforwarded, lost, expected) = send_and_check(lg.name(), n, m, packets)?;
        proxy.stop().map_err(err)?;
        Ok(AclReport {
            flows_per_bridge: flows,
            proxy_flows_per_bridge: proxy_flows,
            packets,
            misforwarded,
            lost,
            expected_forwarded: expected,
            received,
            acl: n,
            mac: m,
        })
    })();
    let _ = osken.kill();
    let _ = osken.wait();
    ovs.stop();
    drop((sw, lg));
    result
}

/// Send the probes from lg0, read lg1, and compare with the single-table
/// reference: (received, misforwarded, lost, expected forwarded).
fn send_and_check(
    ns: &str,
    n: usize,
    m: usize,
    packets: usize,
) -> Result<(usize, usize, usize, usize), LabError> {
    // The reference: one table of N×M rules (allowed source, known destination).
    let reference: HashSet<(usize, [u8; 6])> = (0..n)
        .filter(|a| allowed(*a))
        .flat_map(|a| (0..m).map(move |b| (a, mac(b))))
        .collect();
    let (mut tx, mut rx) = NetnsGuard::run(ns, || -> Result<_, LabError> {
        let tx = AfPacket::open(
            "lg0",
            &AfPacketConfig {
                rx: false,
                ..AfPacketConfig::default()
            },
        )?;
        let rx = AfPacket::open(
            "lg1",
            &AfPacketConfig {
                tx: false,
                ..AfPacketConfig::default()
            },
        )?;
        Ok((tx, rx))
    })??;
    let receiver = std::thread::spawn(move || {
        let mut got: BTreeMap<u64, Vec<Vec<u8>>> = BTreeMap::new();
        let mut idle_since = Instant::now();
        let start = Instant::now();
        loop {
            let k = rx
                .rx_batch(64, Duration::from_millis(50), &mut |f, _| {
                    if let Some(pos) = f.windows(MAGIC.len()).position(|w| w == MAGIC) {
                        if let Some(s) = f.get(pos + MAGIC.len()..pos + MAGIC.len() + 8) {
                            let seq = u64::from_be_bytes(s.try_into().unwrap_or([0; 8]));
                            got.entry(seq).or_default().push(f.to_vec());
                        }
                    }
                })
                .unwrap_or(0);
            if k > 0 {
                idle_since = Instant::now();
            }
            // The sender sets no flag: stop 1.5 s after the last frame (or 60 s in all).
            if (idle_since.elapsed() > Duration::from_millis(1500)
                && start.elapsed() > Duration::from_secs(2))
                || start.elapsed() > Duration::from_secs(60)
            {
                return got;
            }
        }
    });
    for seq in 0..packets {
        let (a, dst) = probe(seq, n, m);
        let f = frame(seq as u64, a, dst);
        let mut sent = 0;
        while sent == 0 {
            sent = tx.tx_batch(1, &mut |_, buf| {
                buf[..f.len()].copy_from_slice(&f);
                f.len()
            })?;
            tx.flush_tx()?;
        }
        // At most 1 000 frames/s: most probes are a new flow for OvS's slow path.
        std::thread::sleep(Duration::from_millis(1));
    }
    while tx.tx_outstanding() > 0 {
        tx.flush_tx()?;
        std::thread::sleep(Duration::from_millis(1));
    }
    let got = receiver.join().map_err(|_| err("the receiver panicked"))?;
    let mut mis = 0;
    let mut lost = 0;
    let mut expected = 0;
    for seq in 0..packets {
        let (a, dst) = probe(seq, n, m);
        let want = a < n && reference.contains(&(a, dst));
        expected += usize::from(want);
        match got.get(&(seq as u64)) {
            None => lost += usize::from(want),
            Some(frames) => {
                // Forwarded: once, unchanged (the VLAN tag that carried the metadata is gone).
                let same = frames.len() == 1 && frames[0][..64] == frame(seq as u64, a, dst)[..];
                mis += usize::from(!want || !same);
            }
        }
    }
    let received = got.values().map(Vec::len).sum();
    // Frames with a sequence number never sent are misforwarded too.
    mis += got.keys().filter(|s| **s as usize >= packets).count();
    Ok((received, mis, lost, expected))
}
