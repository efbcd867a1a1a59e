//! The built-in two-node topology (DESIGN §1): a LoadGen namespace and a DuT
//! namespace joined by two veth pairs.
//!
//! ```text
//!   nflab-<id>-lg                          nflab-<id>-dut
//!   gen ──► lg0 ═══════ veth ═══════► dut0 ─┐
//!                                           │ linux-router | linux-bridge | nflab | link | testpmd
//!   rec ◄── lg1 ◄══════ veth ════════ dut1 ◄┘
//! ```
//!
//! `loopback` cables lg0 straight to lg1 and has no DuT namespace. Every
//! namespace gets an owner file in `/run/nflab/` with the pid and start time
//! of the process that made it, so `nflab topo gc` can tell leftovers of dead
//! runs from namespaces in use. `Topology` removes what it created when it is
//! dropped, whatever ended the run.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use nflab_wire::MacAddr;
use serde::Serialize;

use crate::error::LabError;
pub use crate::net::addresses::{
    DUT0_IP, DUT0_MAC, DUT1_IP, DUT1_MAC, LG0_IP, LG0_MAC, LG1_IP, LG1_MAC,
};
pub use crate::net::netns::check_root;
use crate::spec::DutKind;

/// Directory of owner files.
pub const OWNER_DIR: &str = "/run/nflab";
/// Prefix of every namespace nflab creates.
pub const NS_PREFIX: &str = "nflab-";

static NEXT_ID: AtomicU32 = AtomicU32::new(0);

/// A live topology; removed on drop.
#[derive(Debug, Serialize)]
pub struct Topology {
    /// `<pid>-<n>`: unique among live processes.
    pub id: String,
    /// LoadGen namespace.
    pub lg_ns: String,
    /// DuT namespace, absent for `loopback`.
    pub dut_ns: Option<String>,
    /// Which DuT was set up.
    pub dut: DutKind,
    /// Generator interface (in `lg_ns`).
    pub gen_iface: String,
    /// Recorder interface (in `lg_ns`).
    pub rec_iface: String,
    /// The DuT on a remote host (`topology.kind = "hosts"`), torn down on drop.
    #[serde(skip)]
    pub remote: Option<crate::hosts::remote_dut::RemoteDut>,
    /// Where frames go when it is not one of the built-in MACs.
    #[serde(skip)]
    pub dst_mac_override: Option<MacAddr>,
    #[serde(skip)]
    removed: bool,
}

/// Queues per veth the generator of `traffic` needs: one per AF_XDP TX thread (an
/// AF_XDP socket binds one queue), else one.
pub fn generator_queues(traffic: &crate::spec::TrafficSection) -> u32 {
    if traffic.backend == crate::spec::Backend::AfXdp {
        u32::try_from(traffic.tx_threads).unwrap_or(1).max(1)
    } else {
        1
    }
}

/// Queues per veth for `spec`: the generator's ([`generator_queues`]) or one per nflab
/// data-plane worker, whichever is more.
pub fn veth_queues(spec: &crate::spec::Spec) -> u32 {
    let gen = generator_queues(&spec.traffic);
    let dut = match spec.dut.kind {
        DutKind::Nflab => spec.dut.workers.unwrap_or(1),
        _ => 1,
    };
    gen.max(dut).max(1)
}

impl Topology {
    /// Create namespaces, links, addresses and the DuT of `dut`.
    pub fn create(dut: DutKind) -> Result<Topology, LabError> {
        Topology::create_with_queues(dut, 1)
    }

    /// [`Topology::create`] with `queues` TX and RX queues on every veth, so
    /// that each of several AF_XDP TX threads gets a queue of its own.
    pub fn create_with_queues(dut: DutKind, queues: u32) -> Result<Topology, LabError> {
        check_root()?;
        let id = format!(
            "{}-{}",
            std::process::id(),
            NEXT_ID.fetch_add(1, Ordering::Relaxed)
        );
        let lg_ns = format!("{NS_PREFIX}{id}-lg");
        let dut_ns = match dut {
            DutKind::Loopback => None,
            DutKind::LinuxRouter
            | DutKind::LinuxBridge
            | DutKind::Nflab
            | DutKind::Link
            | DutKind::UdpRelay
            | DutKind::Testpmd
            | DutKind::Ovs => Some(format!("{NS_PREFIX}{id}-dut")),
            other => {
                return Err(LabError::Unsupported(format!(
                    "dut.kind = \"{}\" cannot be built by the netns topology of this version",
                    other.as_str()
                )))
            }
        };
        let mut topo = Topology {
            id,
            lg_ns,
            dut_ns,
            dut,
            gen_iface: "lg0".into(),
            rec_iface: "lg1".into(),
            remote: None,
            dst_mac_override: None,
            removed: false,
        };
        // On any error below, drop() removes what was made so far.
        topo.build(queues.max(1))?;
        Ok(topo)
    }

    /// The topology a spec asks for: namespaces on this host, or real hosts.
    pub fn for_spec(spec: &crate::spec::Spec) -> Result<Topology, LabError> {
        if spec.topology.kind != crate::spec::TopologyKind::Hosts {
            return Topology::create_with_queues(spec.dut.kind, veth_queues(spec));
        }
        crate::hosts::remote_dut::validate(&spec.hosts, spec.dut.kind).map_err(LabError::Host)?;
        let lg = &spec.hosts["loadgen"];
        let (tx, rx) = (
            lg.tx_iface.clone().unwrap_or_default(),
            lg.rx_iface.clone().unwrap_or_default(),
        );
        let macs = || -> Result<(MacAddr, MacAddr), LabError> {
            Ok((
                MacAddr(nflab_io::iface::mac(&tx)?),
                MacAddr(nflab_io::iface::mac(&rx)?),
            ))
        };
        let (tx_mac, rx_mac) = match &lg.netns {
            Some(ns) => crate::net::netns::NetnsGuard::run(ns, macs)??,
            None => macs()?,
        };
        let remote = crate::hosts::remote_dut::RemoteDut::up(
            &spec.hosts["dut"],
            spec.dut.kind,
            &tx_mac.to_string(),
            &rx_mac.to_string(),
        )?;
        let dst = match spec.dut.kind {
            DutKind::LinuxRouter => remote.ingress_mac().parse().map_err(|_| {
                LabError::Host(format!(
                    "the DuT host reported a bad MAC {}",
                    remote.ingress_mac()
                ))
            })?,
            _ => rx_mac,
        };
        Ok(Topology {
            id: format!("{}-hosts", std::process::id()),
            lg_ns: lg.netns.clone().unwrap_or_default(),
            dut_ns: None,
            dut: spec.dut.kind,
            gen_iface: tx,
            rec_iface: rx,
            remote: Some(remote),
            dst_mac_override: Some(dst),
            // The user's namespaces and interfaces are not ours to remove.
            removed: true,
        })
    }

    /// The LoadGen side of a host pair ([`crate::run::loadgen`]): the user's
    /// interfaces (in `netns` when given), a DuT set up by the controller, frames
    /// addressed to `dst`. Nothing here is nflab's to remove.
    pub fn for_loadgen_host(
        netns: Option<String>,
        tx: String,
        rx: String,
        dut: DutKind,
        dst: MacAddr,
    ) -> Topology {
        Topology {
            id: format!("{}-pair", std::process::id()),
            lg_ns: netns.unwrap_or_default(),
            dut_ns: None,
            dut,
            gen_iface: tx,
            rec_iface: rx,
            remote: None,
            dst_mac_override: Some(dst),
            removed: true,
        }
    }

    /// Enter the LoadGen namespace, if the topology has one.
    pub fn enter_lg(&self) -> Result<Option<crate::net::netns::NetnsGuard>, LabError> {
        if self.lg_ns.is_empty() {
            Ok(None)
        } else {
            crate::net::netns::NetnsGuard::enter(&self.lg_ns).map(Some)
        }
    }

    /// Where the generator addresses its frames.
    pub fn probe_dst_mac(&self) -> MacAddr {
        if let Some(m) = self.dst_mac_override {
            return m;
        }
        match self.dut {
            // The nflab data plane rewrites the destination to lg1's MAC.
            DutKind::LinuxRouter | DutKind::Nflab | DutKind::UdpRelay => DUT0_MAC,
            _ => LG1_MAC,
        }
    }

    /// Let the generator interface's veth peer take XDP frames, for the
    /// `xdp_live` backend: a veth receives `ndo_xdp_xmit` frames only while it
    /// has an XDP program, so an `XDP_PASS` one goes on; it goes with the
    /// namespace, unless the DuT attached its own (AF_XDP ports). (GRO alone also
    /// enables the receive ring, but then the ring is drained only when other
    /// traffic wakes it.) Real hosts' NICs take them natively.
    pub fn accept_xdp_frames_at_gen_peer(&self) -> Result<(), LabError> {
        if self.remote.is_some() {
            return Ok(());
        }
        let (ns, peer) = match &self.dut_ns {
            Some(dut) => (dut.as_str(), "dut0"),
            None => (self.lg_ns.as_str(), "lg1"),
        };
        match crate::net::netns::NetnsGuard::run(ns, || {
            nflab_io::probe_caps::attach_xdp_pass(peer)
        })? {
            // The DuT's own program (an AF_XDP data plane's redirect) is there already,
            // and any program makes the veth take XDP frames.
            Ok(()) | Err(nflab_io::IoError::XdpBusy { .. }) => Ok(()),
            Err(e) => Err(LabError::Topology(format!(
                "traffic.backend = \"xdp_live\" needs an XDP program on {peer} to receive \
                 XDP frames: {e}"
            ))),
        }
    }

    /// Namespaces of this topology.
    pub fn namespaces(&self) -> Vec<String> {
        if self.remote.is_some() {
            return Vec::new();
        }
        let mut v = vec![self.lg_ns.clone()];
        v.extend(self.dut_ns.clone());
        v
    }

    fn build(&mut self, queues: u32) -> Result<(), LabError> {
        let lg = self.lg_ns.clone();
        std::fs::create_dir_all(OWNER_DIR)
            .map_err(|e| LabError::Topology(format!("cannot create {OWNER_DIR}: {e}")))?;
        for ns in self.namespaces() {
            ip(&["netns", "add", &ns])?;
            write_owner(&ns)?;
            // No IPv6 on the benchmark links: router solicitations and DAD
            // would otherwise show up as foreign frames at the recorder.
            sysctl(
                &ns,
                &[
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ],
            )?;
        }
        let (m0, m1, d0, d1) = (
            LG0_MAC.to_string(),
            LG1_MAC.to_string(),
            DUT0_MAC.to_string(),
            DUT1_MAC.to_string(),
        );
        let q = queues.to_string();
        let qs = ["numtxqueues", q.as_str(), "numrxqueues", q.as_str()];
        let veth = |a: &str, ma: &str, b: &str, mb: &str, peer_ns: Option<&str>| {
            let mut args = vec!["-n", &lg, "link", "add", a, "address", ma];
            args.extend(qs);
            args.extend(["type", "veth", "peer", "name", b, "address", mb]);
            args.extend(qs);
            if let Some(ns) = peer_ns {
                args.extend(["netns", ns]);
            }
            ip(&args)
        };
        match &self.dut_ns {
            None => veth("lg0", &m0, "lg1", &m1, None)?,
            Some(dut) => {
                veth("lg0", &m0, "dut0", &d0, Some(dut))?;
                veth("lg1", &m1, "dut1", &d1, Some(dut))?;
            }
        }
        crate::failpoint::hit("topology");
        ip(&[
            "-n",
            &lg,
            "addr",
            "add",
            &format!("{LG0_IP}/24"),
            "dev",
            "lg0",
        ])?;
        if self.dut_ns.is_some() {
            ip(&[
                "-n",
                &lg,
                "addr",
                "add",
                &format!("{LG1_IP}/24"),
                "dev",
                "lg1",
            ])?;
        }
        for dev in ["lo", "lg0", "lg1"] {
            ip(&["-n", &lg, "link", "set", dev, "up"])?;
        }
        if matches!(self.dut, DutKind::Link | DutKind::Ovs) {
            // A link passes frames as they are read from dut0/dut1, and a veth
            // leaves the checksums of the kernel's own UDP and TCP packets to
            // "hardware" that is not there: the receiver would drop them.
            for dev in ["lg0", "lg1"] {
                checksums_in_software(&lg, dev)?;
            }
        }
        if let Some(dut) = self.dut_ns.clone() {
            match self.dut {
                DutKind::LinuxRouter | DutKind::UdpRelay => {
                    let forward = if self.dut == DutKind::UdpRelay {
                        "0"
                    } else {
                        "1"
                    };
                    sysctl(&dut, &[&format!("net.ipv4.ip_forward={forward}")])?;
                    if self.dut == DutKind::UdpRelay {
                        crate::dut::relay::deliver_locally(&dut, &|a| ip(a))?;
                        // The relay's datagrams must reach the recorder with their
                        // UDP checksum filled in, not left to veth "hardware".
                        checksums_in_software(&dut, "dut1")?;
                    }
                    ip(&[
                        "-n",
                        &dut,
                        "addr",
                        "add",
                        &format!("{DUT0_IP}/24"),
                        "dev",
                        "dut0",
                    ])?;
                    ip(&[
                        "-n",
                        &dut,
                        "addr",
                        "add",
                        &format!("{DUT1_IP}/24"),
                        "dev",
                        "dut1",
                    ])?;
                    // Static neighbours: no ARP on the measured path.
                    ip(&[
                        "-n",
                        &dut,
                        "neigh",
                        "replace",
                        &LG1_IP.to_string(),
                        "lladdr",
                        &m1,
                        "dev",
                        "dut1",
                        "nud",
                        "permanent",
                    ])?;
                    ip(&[
                        "-n",
                        &dut,
                        "neigh",
                        "replace",
                        &LG0_IP.to_string(),
                        "lladdr",
                        &m0,
                        "dev",
                        "dut0",
                        "nud",
                        "permanent",
                    ])?;
                    ip(&[
                        "-n",
                        &lg,
                        "neigh",
                        "replace",
                        &DUT0_IP.to_string(),
                        "lladdr",
                        &d0,
                        "dev",
                        "lg0",
                        "nud",
                        "permanent",
                    ])?;
                }
                DutKind::LinuxBridge => {
                    ip(&[
                        "-n",
                        &dut,
                        "link",
                        "add",
                        "br0",
                        "type",
                        "bridge",
                        "stp_state",
                        "0",
                    ])?;
                    ip(&["-n", &dut, "link", "set", "dut0", "master", "br0"])?;
                    ip(&["-n", &dut, "link", "set", "dut1", "master", "br0"])?;
                    ip(&["-n", &dut, "link", "set", "br0", "up"])?;
                }
                DutKind::Nflab | DutKind::Link | DutKind::Testpmd | DutKind::Ovs => {
                    // The data plane (or testpmd) owns dut0/dut1; the kernel
                    // must not forward a copy of what it sees there.
                    sysctl(&dut, &["net.ipv4.ip_forward=0"])?;
                }
                _ => {}
            }
            for dev in ["lo", "dut0", "dut1"] {
                ip(&["-n", &dut, "link", "set", dev, "up"])?;
            }
        }
        // A run's first frames must not meet a link still on `noop`.
        for ns in self.namespaces() {
            crate::net::link_ready::wait_until_transmitting(&ns, None)?;
        }
        Ok(())
    }

    /// Leave the topology in place after this process exits (`nflab topo up`):
    /// its owner files say "kept", so `gc` spares it and `topo down` removes it.
    pub fn keep(mut self) -> Result<(), LabError> {
        for ns in self.namespaces() {
            std::fs::write(owner_path(&ns), "kept\n").map_err(|e| {
                LabError::Topology(format!("cannot write owner file for {ns}: {e}"))
            })?;
        }
        self.removed = true;
        Ok(())
    }

    /// Remove the namespaces (their links go with them) and owner files.
    pub fn remove(&mut self) -> Result<(), LabError> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        let mut first_err = None;
        for ns in self.namespaces() {
            if let Err(e) = remove_namespace(&ns) {
                first_err.get_or_insert(e);
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            eprintln!("warning: {e}");
        }
    }
}

/// Remove one namespace and its owner file; a namespace already gone is fine.
pub fn remove_namespace(ns: &str) -> Result<(), LabError> {
    let _ = std::fs::remove_file(owner_path(ns));
    // A testpmd DuT whose owner was killed leaves EAL's run-time files behind.
    if let Some(id) = ns.strip_suffix("-dut") {
        let _ = std::fs::remove_dir_all(std::path::Path::new("/var/run/dpdk").join(id));
    }
    if !std::path::Path::new("/run/netns").join(ns).exists() {
        return Ok(());
    }
    ip(&["netns", "del", ns])
}

fn owner_path(ns: &str) -> PathBuf {
    PathBuf::from(OWNER_DIR).join(format!("{ns}.owner"))
}

use crate::sys::process::process_start_time;

/// Write `ns`'s owner file: this process's pid and start time.
pub(crate) fn write_owner(ns: &str) -> Result<(), LabError> {
    std::fs::create_dir_all(OWNER_DIR)
        .map_err(|e| LabError::Topology(format!("cannot create {OWNER_DIR}: {e}")))?;
    let pid = std::process::id();
    let start = process_start_time(pid).unwrap_or(0);
    std::fs::write(owner_path(ns), format!("{pid} {start}\n"))
        .map_err(|e| LabError::Topology(format!("cannot write owner file for {ns}: {e}")))
}

/// A namespace made by nflab and who owns it.
#[derive(Debug, Clone, Serialize)]
pub struct NamespaceInfo {
    /// Namespace name.
    pub name: String,
    /// Owner pid, if known.
    pub owner_pid: Option<u32>,
    /// Whether the owner is still running.
    pub owner_alive: bool,
    /// Made by `nflab topo up` to stay until `nflab topo down`.
    pub kept: bool,
}

/// Every nflab namespace on this host.
pub fn list_namespaces() -> Vec<NamespaceInfo> {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return Vec::new();
    };
    let mut out: Vec<NamespaceInfo> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(NS_PREFIX))
        .map(|name| {
            let owner = std::fs::read_to_string(owner_path(&name)).ok();
            let kept = owner.as_deref().map(str::trim) == Some("kept");
            let (pid, start) = match owner.as_deref().map(|s| {
                let mut it = s.split_whitespace();
                (
                    it.next().and_then(|p| p.parse::<u32>().ok()),
                    it.next().and_then(|p| p.parse::<u64>().ok()),
                )
            }) {
                Some((p, s)) => (p, s),
                // No owner file: the pid is the first part of the id.
                None => (
                    name.trim_start_matches(NS_PREFIX)
                        .split('-')
                        .next()
                        .and_then(|p| p.parse().ok()),
                    None,
                ),
            };
            let owner_alive = match (pid, start) {
                (Some(p), Some(s)) => process_start_time(p) == Some(s),
                (Some(p), None) => process_start_time(p).is_some(),
                _ => false,
            };
            NamespaceInfo {
                name,
                owner_pid: pid.filter(|_| !kept),
                owner_alive: owner_alive && !kept,
                kept,
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Remove namespaces whose owner is gone, and Open vSwitch instances whose
/// owner is gone (their daemons killed, their run directories removed);
/// then put back the knobs of dead owners' journals (`knob_journal`);
/// returns what it removed, one line each.
pub fn gc() -> Result<Vec<String>, LabError> {
    gc_of(None)
}

/// [`gc`], limited to the namespaces of topology `id` (`<pid>-<n>`) when given: what a
/// killed run left, without touching other runs' leftovers (nor Open vSwitch instances).
pub fn gc_of(id: Option<&str>) -> Result<Vec<String>, LabError> {
    check_root()?;
    let whole_host = id.is_none();
    if whole_host {
        // First the dead owners' helper commands, which could still add a namespace.
        crate::sys::orphans::kill_helpers_of_dead_owners();
    }
    let mut removed = if whole_host {
        let mut r = nflab_sdn::ovs::gc();
        r.extend(crate::hosts::ssh_args::remove_dead_pinned_keys());
        r.extend(crate::hosts::ssh_mux::stop_dead_masters());
        r
    } else {
        Vec::new()
    };
    let prefix = id.map(|id| format!("{NS_PREFIX}{id}-"));
    for ns in list_namespaces() {
        let ours = prefix.as_deref().is_none_or(|p| ns.name.starts_with(p));
        if ours && !ns.owner_alive && !ns.kept {
            remove_namespace(&ns.name)?;
            removed.push(ns.name);
        }
    }
    // After the namespaces: knobs inside a removed one went with it. Journals are the
    // whole host's business: a gc limited to one topology leaves them.
    let journals = if whole_host {
        crate::knobs::journal::replay_dead(std::path::Path::new(OWNER_DIR))
    } else {
        Vec::new()
    };
    for r in journals {
        for e in &r.failed {
            eprintln!("warning: knob journal {}: {e}", r.journal.display());
        }
        removed.push(format!(
            "knob journal {} of pid {} ({} original values restored{}{})",
            r.journal.display(),
            r.owner_pid,
            r.restored,
            if r.skipped > 0 {
                format!(", {} gone with their namespace", r.skipped)
            } else {
                String::new()
            },
            if r.failed.is_empty() {
                String::new()
            } else {
                format!(", {} failed: journal kept", r.failed.len())
            }
        ));
    }
    Ok(removed)
}

/// Run `ip ARGS`; a failure is one sentence with the command and its stderr.
pub(crate) fn ip(args: &[&str]) -> Result<(), LabError> {
    run("ip", args)
}

/// `ethtool -K DEV tx off` in `ns`: the kernel computes transmit checksums itself.
fn checksums_in_software(ns: &str, dev: &str) -> Result<(), LabError> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ethtool", "-K", dev, "tx", "off"])
        .output()
        .map_err(|e| {
            LabError::Host(format!("cannot run 'ip netns exec': {e}; install iproute2"))
        })?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Err(LabError::Topology(
        if err.contains("ethtool") && err.contains("No such file") {
            "dut.kind = \"link\" and \"ovs\" need ethtool to have the kernel compute checksums on lg0 and lg1: install ethtool".into()
        } else {
            format!("'ethtool -K {dev} tx off' failed: {}", err.trim())
        },
    ))
}

fn sysctl(ns: &str, settings: &[&str]) -> Result<(), LabError> {
    let mut args = vec!["netns", "exec", ns, "sysctl", "-qw"];
    args.extend_from_slice(settings);
    run("ip", &args)
}

fn run(prog: &str, args: &[&str]) -> Result<(), LabError> {
    let out = Command::new(prog)
        .args(args)
        .output()
        .map_err(|e| LabError::Host(format!("cannot run '{prog}': {e}; install iproute2")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(LabError::Topology(format!(
            "'{prog} {}' failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}
