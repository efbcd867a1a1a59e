//! The built-in two-node topology (DESIGN §1): a LoadGen namespace and a DuT
//! namespace joined by two veth pairs.
//!
//! ```text
//!   nflab-<id>-lg                          nflab-<id>-dut
//!   gen ──► lg0 ═══════ veth ═══════► dut0 ─┐
//!                                           │ the DuT kind's plumbing (dut::)
//!   rec ◄── lg1 ◄══════ veth ════════ dut1 ◄┘
//! ```
//!
//! What differs between DuT kinds — whether there is a DuT namespace at all
//! (`loopback` cables lg0 straight to lg1), what is set up inside it, where
//! the generator addresses its frames — each kind says through [`Plumbing`];
//! this module builds the rest the same way for all. `Topology` removes what it
//! created when it is dropped, whatever ended the run.

pub mod gc;

use std::sync::atomic::{AtomicU32, Ordering};

use nflab_wire::MacAddr;
use serde::Serialize;

pub use crate::addresses::{
    DUT0_IP, DUT0_MAC, DUT1_IP, DUT1_MAC, LG0_IP, LG0_MAC, LG1_IP, LG1_MAC,
};
use crate::error::LabError;
use crate::hosts::remote_dut::{RemoteDut, RemoteSetup};
use crate::net::cmd::{checksums_in_software, ip};
pub use crate::net::namespaces::{
    list_namespaces, remove_namespace, NamespaceInfo, NS_PREFIX, OWNER_DIR,
};
use crate::net::namespaces::{owner_path, write_owner};
pub use crate::net::netns::check_root;
use crate::spec::hosts::HostEntry;
use crate::spec::{DutKind, DutSection};

static NEXT_ID: AtomicU32 = AtomicU32::new(0);

/// What a DuT kind asks of the netns topology; every kind's driver answers it.
pub trait Plumbing {
    /// Whether the DuT gets a namespace of its own (`loopback` has none: lg0 is
    /// cabled straight to lg1).
    fn has_namespace(&self) -> bool {
        true
    }

    /// An existing namespace of the user's to cable the DuT's ports into, instead of
    /// one nflab makes (and removes): nflab then leaves it otherwise alone.
    fn foreign_namespace(&self, _dut: &DutSection) -> Option<String> {
        None
    }

    /// Names of the DuT's ports: (facing the generator, facing the recorder).
    fn port_names(&self, _dut: &DutSection) -> (String, String) {
        ("dut0".into(), "dut1".into())
    }

    /// Whether lg0 and lg1 compute transmit checksums in software: a DuT that
    /// passes frames as read from dut0/dut1 hands a veth's unfilled checksums on,
    /// and the kernel's own UDP and TCP packets would be dropped at the receiver.
    fn software_checksums_at_loadgen(&self) -> bool {
        false
    }

    /// Set up the DuT namespace `ns` once dut0 and dut1 are in it, before they go up.
    fn plumb(&self, _ns: &str) -> Result<(), LabError> {
        Ok(())
    }

    /// Where the generator addresses its frames.
    fn probe_dst_mac(&self) -> MacAddr {
        LG1_MAC
    }
}

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
    /// The DuT's ports in `dut_ns`: (facing the generator, facing the recorder).
    #[serde(skip)]
    pub dut_ports: (String, String),
    /// `dut_ns` is the user's: cabled into, never made or removed.
    #[serde(skip)]
    dut_ns_foreign: bool,
    /// The DuT on a remote host (`topology.kind = "hosts"`), torn down on drop.
    #[serde(skip)]
    pub remote: Option<RemoteDut>,
    /// Where the generator addresses its frames.
    #[serde(skip)]
    probe_dst: MacAddr,
    /// Where frames sent the reverse way (from `rec_iface`) are addressed, where the
    /// DuT has a reverse path (`traffic.direction`).
    #[serde(skip)]
    pub reverse_dst: Option<MacAddr>,
    #[serde(skip)]
    removed: bool,
}

impl Topology {
    /// Create namespaces and links on this host, with `queues` TX and RX queues on
    /// every veth (one per AF_XDP TX thread or data-plane worker), and let `dut`
    /// plumb its namespace.
    pub fn create(
        section: &DutSection,
        dut: &dyn Plumbing,
        queues: u32,
    ) -> Result<Topology, LabError> {
        check_root()?;
        let id = format!(
            "{}-{}",
            std::process::id(),
            NEXT_ID.fetch_add(1, Ordering::Relaxed)
        );
        let foreign = dut.foreign_namespace(section);
        if let Some(ns) = &foreign {
            if !std::path::Path::new("/run/netns").join(ns).exists() {
                return Err(LabError::Topology(format!(
                    "dut.external.netns = {ns:?} does not exist: create it first (ip netns add {ns}), or leave the key out and nflab makes the DuT's namespace"
                )));
            }
        }
        let mut topo = Topology {
            lg_ns: format!("{NS_PREFIX}{id}-lg"),
            dut_ns: match &foreign {
                Some(ns) => Some(ns.clone()),
                None => dut.has_namespace().then(|| format!("{NS_PREFIX}{id}-dut")),
            },
            dut_ports: dut.port_names(section),
            dut_ns_foreign: foreign.is_some(),
            id,
            dut: section.kind,
            gen_iface: "lg0".into(),
            rec_iface: "lg1".into(),
            remote: None,
            probe_dst: dut.probe_dst_mac(),
            reverse_dst: None,
            removed: false,
        };
        // On any error below, drop() removes what was made so far.
        topo.build(queues.max(1), dut)?;
        Ok(topo)
    }

    /// The LoadGen's interfaces on this host (`[hosts.loadgen]`, in its `netns` when
    /// given) and the DuT host set up as `setup`: nothing here is nflab's to remove
    /// but the DuT host's set-up, which goes on drop.
    pub fn on_hosts(
        kind: DutKind,
        setup: RemoteSetup,
        lg: &HostEntry,
        dut_host: &HostEntry,
    ) -> Result<Topology, LabError> {
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
        let remote = RemoteDut::up(dut_host, setup, &tx_mac.to_string(), &rx_mac.to_string())?;
        let dst = remote.probe_dst(rx_mac)?;
        Ok(Topology {
            id: format!("{}-hosts", std::process::id()),
            lg_ns: lg.netns.clone().unwrap_or_default(),
            dut_ns: None,
            dut: kind,
            dut_ports: Default::default(),
            dut_ns_foreign: false,
            gen_iface: tx,
            rec_iface: rx,
            remote: Some(remote),
            probe_dst: dst,
            reverse_dst: None,
            // The user's namespaces and interfaces are not ours to remove.
            removed: true,
        })
    }

    /// The LoadGen side of a host pair (`nflab remote loadgen`): the user's
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
            dut_ports: Default::default(),
            dut_ns_foreign: false,
            gen_iface: tx,
            rec_iface: rx,
            remote: None,
            probe_dst: dst,
            reverse_dst: None,
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
        self.probe_dst
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
            Some(dut) => (dut.as_str(), self.dut_ports.0.as_str()),
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

    /// Namespaces nflab made for this topology (not a user's it cables into).
    pub fn namespaces(&self) -> Vec<String> {
        if self.remote.is_some() {
            return Vec::new();
        }
        let mut v = vec![self.lg_ns.clone()];
        v.extend(self.dut_ns.clone().filter(|_| !self.dut_ns_foreign));
        v
    }

    fn build(&mut self, queues: u32, dut: &dyn Plumbing) -> Result<(), LabError> {
        let lg = self.lg_ns.clone();
        crate::sys::process::ensure_run_dir(std::path::Path::new(OWNER_DIR))?;
        for ns in self.namespaces() {
            // The owner first: gc knows a helper of this namespace by it.
            write_owner(&ns)?;
            ip(&["netns", "add", &ns])?;
            // No IPv6 on the benchmark links: router solicitations and DAD
            // would otherwise show up as foreign frames at the recorder.
            crate::net::cmd::sysctl(
                &ns,
                &[
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ],
            )?;
        }
        self.cable(queues)?;
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
        if dut.software_checksums_at_loadgen() {
            let who = format!("dut.kind = \"{}\"", self.dut.as_str());
            checksums_in_software(&lg, &["lg0", "lg1"], &who)?;
        }
        if let Some(ns) = self.dut_ns.clone() {
            dut.plumb(&ns)?;
            let (a, b) = &self.dut_ports;
            let devs = if self.dut_ns_foreign {
                vec![a.as_str(), b.as_str()]
            } else {
                vec!["lo", a.as_str(), b.as_str()]
            };
            for dev in devs {
                ip(&["-n", &ns, "link", "set", dev, "up"])?;
            }
        }
        // A run's first frames must not meet a link still on `noop`.
        for ns in self.namespaces() {
            crate::net::link_ready::wait_until_transmitting(&ns, None)?;
        }
        if let (Some(ns), true) = (&self.dut_ns, self.dut_ns_foreign) {
            for dev in [&self.dut_ports.0, &self.dut_ports.1] {
                crate::net::link_ready::wait_until_transmitting(ns, Some(dev))?;
            }
        }
        Ok(())
    }

    /// The veth pairs: lg0–dut0 and lg1–dut1, or lg0–lg1 without a DuT namespace.
    fn cable(&self, queues: u32) -> Result<(), LabError> {
        let lg = self.lg_ns.as_str();
        let q = queues.to_string();
        let qs = ["numtxqueues", q.as_str(), "numrxqueues", q.as_str()];
        let veth = |a: &str, ma: MacAddr, b: &str, mb: MacAddr, peer_ns: Option<&str>| {
            let (ma, mb) = (ma.to_string(), mb.to_string());
            let mut args = vec!["-n", lg, "link", "add", a, "address", &ma];
            args.extend(qs);
            args.extend(["type", "veth", "peer", "name", b, "address", &mb]);
            args.extend(qs);
            if let Some(ns) = peer_ns {
                args.extend(["netns", ns]);
            }
            ip(&args)
        };
        let (a, b) = &self.dut_ports;
        match &self.dut_ns {
            None => veth("lg0", LG0_MAC, "lg1", LG1_MAC, None),
            Some(dut) => {
                veth("lg0", LG0_MAC, a, DUT0_MAC, Some(dut))?;
                veth("lg1", LG1_MAC, b, DUT1_MAC, Some(dut))
            }
        }
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
        // The ports nflab cabled into a user's namespace go at once (with the lg
        // namespace they would go a little later, and the next run's would collide).
        if let (Some(ns), true) = (&self.dut_ns, self.dut_ns_foreign) {
            for port in [&self.dut_ports.0, &self.dut_ports.1] {
                let _ = ip(&["-n", ns, "link", "del", port]);
            }
        }
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
