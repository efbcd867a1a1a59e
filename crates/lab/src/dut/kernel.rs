//! The kernel as the DuT: IPv4 forwarding (`linux-router`), a bridge
//! (`linux-bridge`), and no DuT at all (`loopback`: lg0 cabled to lg1, the
//! measurement's own noise floor). nflab runs nothing of its own for them: the
//! set-up is the namespace's plumbing.

use nflab_monitor::stages::Stage;
use nflab_wire::MacAddr;

use super::{DutDriver, NothingRunning, RunningDut};
use crate::addresses::{DUT0_IP, DUT0_MAC, DUT1_IP, DUT1_MAC, LG0_IP, LG0_MAC, LG1_IP, LG1_MAC};
use crate::error::LabError;
use crate::hosts::remote_dut::RemoteSetup;
use crate::net::cmd::{ip, sysctl};
use crate::spec::{DutKind, DutSection, Spec};
use crate::topo::{Plumbing, Topology};

const SOFTIRQ: &str =
    "the kernel forwards in softirq context, which has no thread of nflab's to schedule";

/// `linux-router`: kernel IPv4 forwarding with static neighbours.
pub struct LinuxRouter;
/// `linux-bridge`: a kernel bridge of dut0 and dut1.
pub struct LinuxBridge;
/// `loopback`: lg0 cabled straight to lg1.
pub struct Loopback;

/// Addresses on dut0/dut1 and static neighbours both sides (no ARP on the measured
/// path); `forward` sets `ip_forward`.
pub(crate) fn plumb_router(ns: &str, forward: bool) -> Result<(), LabError> {
    let forward = if forward { "1" } else { "0" };
    sysctl(ns, &[&format!("net.ipv4.ip_forward={forward}")])?;
    for (addr, dev) in [(DUT0_IP, "dut0"), (DUT1_IP, "dut1")] {
        ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev])?;
    }
    for (addr, mac, dev) in [(LG1_IP, LG1_MAC, "dut1"), (LG0_IP, LG0_MAC, "dut0")] {
        neighbour(ns, &addr.to_string(), &mac.to_string(), dev)?;
    }
    let lg = ns.replace("-dut", "-lg");
    neighbour(&lg, &DUT0_IP.to_string(), &DUT0_MAC.to_string(), "lg0")
}

fn neighbour(ns: &str, addr: &str, mac: &str, dev: &str) -> Result<(), LabError> {
    ip(&[
        "-n",
        ns,
        "neigh",
        "replace",
        addr,
        "lladdr",
        mac,
        "dev",
        dev,
        "nud",
        "permanent",
    ])
}

impl Plumbing for LinuxRouter {
    fn plumb(&self, ns: &str) -> Result<(), LabError> {
        plumb_router(ns, true)
    }

    fn probe_dst_mac(&self) -> MacAddr {
        DUT0_MAC
    }
}

impl DutDriver for LinuxRouter {
    fn kind(&self) -> DutKind {
        DutKind::LinuxRouter
    }

    fn check(&self, _: &Spec) -> Result<(), LabError> {
        Ok(())
    }

    /// It routes untagged IPv4 only: other frames would be lost to the last one.
    fn refuses_ipv6_and_vlan(&self) -> Option<(&'static str, &'static str)> {
        Some(("routes IPv4 only", "has no VLAN interfaces"))
    }

    fn why_not_realtime(&self) -> Option<&'static str> {
        Some(SOFTIRQ)
    }

    /// dut1 routes back to lg0 (static neighbours both sides).
    fn reverse_path(&self, _: &DutSection) -> Result<MacAddr, &'static str> {
        Ok(DUT1_MAC)
    }

    fn remote_setup(&self) -> Option<RemoteSetup> {
        Some(RemoteSetup::Router)
    }

    fn stages(&self) -> Option<&'static [Stage]> {
        Some(nflab_monitor::stages::ROUTER)
    }

    fn plumbing_alone(&self) -> bool {
        true
    }

    fn start(
        &self,
        _: &Topology,
        _: &DutSection,
        _: u64,
        _: &std::path::Path,
    ) -> Result<Box<dyn RunningDut>, LabError> {
        Ok(Box::new(NothingRunning))
    }
}

impl Plumbing for LinuxBridge {
    fn plumb(&self, ns: &str) -> Result<(), LabError> {
        ip(&[
            "-n",
            ns,
            "link",
            "add",
            "br0",
            "type",
            "bridge",
            "stp_state",
            "0",
        ])?;
        for dev in ["dut0", "dut1"] {
            ip(&["-n", ns, "link", "set", dev, "master", "br0"])?;
        }
        ip(&["-n", ns, "link", "set", "br0", "up"])
    }
}

impl DutDriver for LinuxBridge {
    fn kind(&self) -> DutKind {
        DutKind::LinuxBridge
    }

    fn check(&self, _: &Spec) -> Result<(), LabError> {
        Ok(())
    }

    fn why_not_realtime(&self) -> Option<&'static str> {
        Some(SOFTIRQ)
    }

    fn reverse_path(&self, _: &DutSection) -> Result<MacAddr, &'static str> {
        Ok(LG0_MAC)
    }

    fn carries_ipv6_and_vlan(&self) -> bool {
        true
    }

    fn remote_setup(&self) -> Option<RemoteSetup> {
        Some(RemoteSetup::Bridge)
    }

    fn stages(&self) -> Option<&'static [Stage]> {
        Some(nflab_monitor::stages::BRIDGE)
    }

    fn joins_one_subnet(&self) -> bool {
        true
    }

    fn plumbing_alone(&self) -> bool {
        true
    }

    fn start(
        &self,
        _: &Topology,
        _: &DutSection,
        _: u64,
        _: &std::path::Path,
    ) -> Result<Box<dyn RunningDut>, LabError> {
        Ok(Box::new(NothingRunning))
    }
}

impl Plumbing for Loopback {
    fn has_namespace(&self) -> bool {
        false
    }
}

impl DutDriver for Loopback {
    fn kind(&self) -> DutKind {
        DutKind::Loopback
    }

    fn check(&self, _: &Spec) -> Result<(), LabError> {
        Ok(())
    }

    fn why_not_realtime(&self) -> Option<&'static str> {
        Some("there is no DuT between lg0 and lg1")
    }

    fn reverse_path(&self, _: &DutSection) -> Result<MacAddr, &'static str> {
        Ok(LG0_MAC)
    }

    fn carries_ipv6_and_vlan(&self) -> bool {
        true
    }

    fn joins_one_subnet(&self) -> bool {
        true
    }

    fn plumbing_alone(&self) -> bool {
        true
    }

    fn start(
        &self,
        _: &Topology,
        _: &DutSection,
        _: u64,
        _: &std::path::Path,
    ) -> Result<Box<dyn RunningDut>, LabError> {
        Ok(Box::new(NothingRunning))
    }
}
