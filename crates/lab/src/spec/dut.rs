//! `[dut]` of the spec: which device under test, and every kind's keys. Which key
//! belongs to which kind, and what runs the kind, is the kind's driver's (`dut`).

use serde::{Deserialize, Serialize};

use crate::error::LabError;

/// `[dut]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DutSection {
    /// Which device under test.
    #[serde(default)]
    pub kind: DutKind,
    /// nflab data plane: functions in order.
    #[serde(default)]
    pub pipeline: Option<Vec<String>>,
    /// nflab data plane: batch size.
    #[serde(default)]
    pub batch: Option<u32>,
    /// nflab data plane: receive mode.
    #[serde(default)]
    pub rx_mode: Option<String>,
    /// nflab data plane: drain timer in µs.
    #[serde(default)]
    pub drain_us: Option<u64>,
    /// nflab data plane: how long before a delay line's release a sleeping
    /// worker wakes to poll, in µs (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_early_us: Option<u64>,
    /// Reserved: refused for every kind (an external DuT is set up by `[dut.external]`
    /// hooks).
    #[serde(default)]
    pub command: Option<String>,
    /// nflab data plane: capacity of every link in packets (default 1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_capacity: Option<usize>,
    /// nflab data plane: CPU of the worker (default: the last CPU); worker *i* of
    /// several runs on `cpu + i` (modulo the CPUs). ovs: the CPU every thread
    /// of ovs-vswitchd is pinned to (default: not pinned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    /// nflab data plane, link, udp-relay and ovs: run the workers under SCHED_FIFO, so a
    /// busy host does not hold frames up (default false; refused for other kinds,
    /// `dut_realtime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub realtime: Option<bool>,
    /// nflab data plane: number of workers (default 1). Worker *i* owns queue *i* of
    /// both ports (an AF_XDP socket each) and is instance *i* of `extern-dispatch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
    /// nflab data plane: port backend, "auto" (default), "af_packet" or "af_xdp".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<String>,
    /// testpmd: "io" (default, frames unchanged) or "mac" (MACs rewritten).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_mode: Option<String>,
    /// nflab data plane: `[dut.l2fwd]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2fwd: Option<nflab_dataplane::config::L2fwdConfig>,
    /// nflab data plane: `[dut.router]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router: Option<nflab_dataplane::config::RouterConfig>,
    /// nflab data plane: `[dut.sheep]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sheep: Option<nflab_dataplane::config::SheepConfig>,
    /// nflab data plane: `[dut.delayer]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delayer: Option<nflab_dataplane::config::DelayerConfig>,
    /// nflab data plane: `[dut.reorder]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder: Option<nflab_dataplane::config::ReorderConfig>,
    /// nflab data plane: `[dut.extern_dispatch]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extern_dispatch: Option<nflab_dataplane::config::DispatchConfig>,
    /// link emulator (`dut.kind = "link"`, or the `link` function of a pipeline):
    /// `[dut.link]`, with `[dut.link.reverse]` for the other direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<nflab_dataplane::config::LinkConfig>,
    /// ovs (FLOWer): each frame crosses this many veth cables looped on the
    /// bridge before it leaves (docs/sdn.md); absent: dut0 → dut1 directly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hops: Option<u32>,
    /// ovs (FLOWer): veth cables looped on the bridge (default `hops`); the
    /// frame uses the first `hops` of them. A fixed number keeps the cost of
    /// one polling round of ovs-vswitchd the same for every `hops`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop_cables: Option<u32>,
    /// ovs (FLOWer), system ports: how the cycle visits the cables. "poll"
    /// (default): against the order ovs-vswitchd's main thread polls the
    /// ports in, so every hop waits one polling round (linear in hops);
    /// "ports": in port-number order (a hop costs wherever its ports sit
    /// in that order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop_order: Option<String>,
    /// ovs, a single bridge: the OvS interface type of dut0, dut1 and the hop
    /// cables: "system" (default; packet sockets polled by ovs-vswitchd's main
    /// thread) or "afxdp" (AF_XDP sockets busy-polled by a PMD thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_type: Option<String>,
    /// ovs: a staged pipeline of this many bridges joined by patch ports
    /// (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridges: Option<u32>,
    /// ovs: how the bridges are cabled, "bidirectional" (default),
    /// "unidirectional" or "staged" (docs/sdn.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
    /// ovs, staged: how many stages a frame visits (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    /// ovs: who installs the flows, "ofctl" (default) or "proxy" (nflab's
    /// controller through the TableVisor-class proxy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
    /// ovs: rate of dut1's egress (OvS `linux-htb` QoS), bits/s: the
    /// bottleneck where realtime and background frames queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_rate_bps: Option<u64>,
    /// ovs, with `egress_rate_bps`: frames with this DSCP go to a priority
    /// queue served before the others (docs/sdn.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_dscp: Option<u8>,
    /// udp-relay: `[dut.relay]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<nflab_apps::relay::RelayConfig>,
    /// external: `[dut.external]`, a device nflab does not set up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<super::external::ExternalSection>,
}

impl DutSection {
    /// The per-function sub-tables, for the data plane.
    pub fn functions(&self) -> nflab_dataplane::config::FunctionConfigs {
        nflab_dataplane::config::FunctionConfigs {
            l2fwd: self.l2fwd.clone(),
            router: self.router.clone(),
            sheep: self.sheep.clone(),
            delayer: self.delayer.clone(),
            reorder: self.reorder.clone(),
            extern_dispatch: self.extern_dispatch.clone(),
            link: self.link.clone(),
        }
    }
}

impl DutSection {
    /// The CPU of the DuT's (first) worker: `dut.cpu`, by default the host's last CPU;
    /// an error when this host has no such CPU.
    pub fn dut_cpu(&self) -> Result<usize, LabError> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        match self.cpu {
            None => Ok(cpus - 1),
            Some(c) if c < cpus => Ok(c),
            Some(c) => Err(LabError::Unsupported(format!(
                "dut.cpu = {c} does not exist on this host: use 0 to {}",
                cpus - 1
            ))),
        }
    }

    /// `dut.io` is a port kind of the software DuTs; `valid` says which this DuT takes.
    pub(crate) fn check_io(&self, valid: &str) -> Result<(), LabError> {
        match self.io.as_deref() {
            None | Some("auto") | Some("af_xdp") | Some("af_packet") => Ok(()),
            Some(o) => Err(LabError::Unsupported(format!(
                "dut.io = \"{o}\" is not known: {valid}"
            ))),
        }
    }
}

/// Kind of device under test (DESIGN §1).
#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, Hash, PartialOrd, Ord,
)]
#[serde(rename_all = "kebab-case")]
pub enum DutKind {
    /// Kernel IPv4 forwarding with static neighbours.
    #[default]
    LinuxRouter,
    /// Kernel bridge.
    LinuxBridge,
    /// lg0 cabled straight to lg1: the measurement's own noise floor.
    Loopback,
    /// The nflab data plane.
    Nflab,
    /// An emulated link (loss, rate, delay, duplication, reordering) both ways:
    /// the data plane's `link` function, dut0 → dut1 and dut1 → dut0.
    Link,
    /// DPDK's dpdk-testpmd between two AF_XDP (or AF_PACKET) vdevs.
    Testpmd,
    /// Open vSwitch (userspace datapath) cabling dut0 and dut1 (`dut_ovs`).
    Ovs,
    /// Seed 003's UDP relay VNF in the DuT namespace (`[dut.relay]`).
    UdpRelay,
    /// A user command or a real device.
    External,
}

impl DutKind {
    /// Name as written in the spec.
    pub fn as_str(&self) -> &'static str {
        match self {
            DutKind::LinuxRouter => "linux-router",
            DutKind::LinuxBridge => "linux-bridge",
            DutKind::Loopback => "loopback",
            DutKind::Nflab => "nflab",
            DutKind::Link => "link",
            DutKind::Testpmd => "testpmd",
            DutKind::Ovs => "ovs",
            DutKind::UdpRelay => "udp-relay",
            DutKind::External => "external",
        }
    }
}
