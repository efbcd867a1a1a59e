//! The experiment spec (DESIGN §3.5): parsing, validation, and expansion of
//! `[sweep]` into concrete runs.
//!
//! A sweep is applied to the *TOML document* before it is deserialized, so a
//! swept key is checked by exactly the same rules as a key written by hand:
//! an unknown key or a bad value is an error naming the key.

use std::collections::BTreeMap;
use std::path::Path;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::error::LabError;

/// The most runs one spec may declare (sweep combinations × repetitions).
pub const MAX_RUNS: u64 = 100_000;

/// A whole experiment as declared in one TOML file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Name, repetitions, order and seed.
    pub experiment: ExperimentSection,
    /// Where the LoadGen and DuT live.
    #[serde(default)]
    pub topology: TopologySection,
    /// The device under test.
    #[serde(default)]
    pub dut: DutSection,
    /// What the generator sends.
    #[serde(default)]
    pub traffic: TrafficSection,
    /// Which statistics to compute.
    #[serde(default)]
    pub analysis: AnalysisSection,
    /// Loop variables: dotted key -> list of values (kept as written).
    #[serde(default)]
    pub sweep: toml::Table,
    /// Host settings applied for each run, read back, recorded and reverted.
    #[serde(default, skip_serializing_if = "crate::knobs::KnobsSection::is_empty")]
    pub knobs: crate::knobs::KnobsSection,
    /// Real hosts by role ("loadgen", "dut") for `topology.kind = "hosts"`.
    #[serde(default, skip_serializing_if = "crate::inventory::Inventory::is_empty")]
    pub hosts: crate::inventory::Inventory,
    /// An RFC 2544 procedure instead of fixed-rate runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rfc2544: Option<crate::rfc2544_section::Rfc2544Section>,
    /// Model predictions written as `model.json` before the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<crate::model::ModelSection>,
    /// An application run over the DuT next to the probe traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<AppSection>,
    /// A capture with time travel during each run (`runs/NNN/capture/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<crate::capture_section::CaptureSection>,
    /// An eBPF monitor inside the DuT (`runs/NNN/monitor.parquet`, `stages.parquet`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<crate::monitor_run::MonitorSection>,
    /// `[[pair]]`: LoadGen/DuT host pairs the runs are spread over (crate::pairs_section).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pair: Vec<crate::pairs_section::PairEntry>,
}

/// `[app]`: an application over the topology, by `kind`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum AppSection {
    /// Seed 000's NCSbench: a simulated inverted pendulum and its controller
    /// (`period_ms`, `deadline_ms`, `periods`, `backups`,
    /// `max_consecutive_losses`, `time_scale`, `seed`).
    Ncsbench(nflab_apps::ncs::session::NcsConfig),
    /// Seed 000's wireless PRRT study over the deadline-aware transport
    /// (`gap_ms`, `payload_bytes`, `target_delay_ms`, `window_ms`, `duration_s`,
    /// `outage_threshold_ms`, `redundancy`; crate::app_prrt).
    Prrt(crate::app_prrt::PrrtSection),
}

/// `[experiment]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExperimentSection {
    /// Name used in the artifact directory.
    pub name: String,
    /// Free text for the report.
    #[serde(default)]
    pub description: Option<String>,
    /// Spec fragments merged in first (paths relative to this file); this
    /// file's own values override theirs. Resolved before the run, so the
    /// stored spec.toml is self-contained.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    /// How often each parameter combination runs.
    #[serde(default = "one")]
    pub repetitions: u32,
    /// Run order.
    #[serde(default)]
    pub order: Order,
    /// Seed of the shuffled order (and of any other randomness).
    #[serde(default = "one_u64")]
    pub seed: u64,
    /// Leave out the sweep's combinations that a rule refuses (listed with the
    /// sentence in `refused.json`) instead of refusing the whole spec.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_refused: bool,
    /// What a failed run (a full disk while recording, a DuT that died) does
    /// to the study: `stop` it (the default) or `continue` with the next run.
    #[serde(default, skip_serializing_if = "OnRunFailure::is_stop")]
    pub on_run_failure: OnRunFailure,
}

/// `experiment.on_run_failure`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum OnRunFailure {
    /// The study ends with the run's error (completed runs are kept).
    #[default]
    Stop,
    /// The run is marked failed (`runs/NNN/failed.json`) and the study goes on.
    Continue,
}

impl OnRunFailure {
    fn is_stop(&self) -> bool {
        *self == OnRunFailure::Stop
    }
}

/// Order of the runs.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    /// Cross product in the order written, repetitions innermost.
    #[default]
    Sequential,
    /// The same list, shuffled with `experiment.seed` (seed 001's regret: no randomised order).
    Random,
}

/// `[topology]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct TopologySection {
    /// Built-in two-namespace topology, or real hosts.
    #[serde(default)]
    pub kind: TopologyKind,
    /// CPU the generator thread is pinned to (default 0).
    #[serde(default)]
    pub gen_cpu: Option<usize>,
    /// CPU the recorder thread is pinned to (default: the last CPU).
    #[serde(default)]
    pub rec_cpu: Option<usize>,
    /// Keep the topology (namespaces, links, DuT set-up) from one run to the
    /// next while the DuT stays the same, instead of rebuilding it per run.
    #[serde(default)]
    pub keep: bool,
}

/// Kind of topology.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum TopologyKind {
    /// Network namespaces and veth pairs on this host (DESIGN §1).
    #[default]
    Netns,
    /// Real machines over SSH (DESIGN §5).
    Hosts,
}

/// `[dut]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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
    /// external: command that sets the DuT up.
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
}

impl Default for DutSection {
    fn default() -> Self {
        DutSection {
            kind: DutKind::LinuxRouter,
            pipeline: None,
            batch: None,
            rx_mode: None,
            drain_us: None,
            wake_early_us: None,
            command: None,
            link_capacity: None,
            cpu: None,
            realtime: None,
            workers: None,
            io: None,
            forward_mode: None,
            l2fwd: None,
            router: None,
            sheep: None,
            delayer: None,
            reorder: None,
            extern_dispatch: None,
            link: None,
            hops: None,
            hop_cables: None,
            hop_order: None,
            port_type: None,
            bridges: None,
            shape: None,
            depth: None,
            controller: None,
            egress_rate_bps: None,
            priority_dscp: None,
            relay: None,
        }
    }
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

    /// Check a testpmd DuT section: its keys and their ranges.
    pub fn check_testpmd(&self) -> Result<(), LabError> {
        let bad = |m: String| Err(LabError::Unsupported(m));
        for (key, set) in [
            ("pipeline", self.pipeline.is_some()),
            ("rx_mode", self.rx_mode.is_some()),
            ("drain_us", self.drain_us.is_some()),
            ("wake_early_us", self.wake_early_us.is_some()),
            ("link_capacity", self.link_capacity.is_some()),
            ("workers", self.workers.is_some()),
            ("command", self.command.is_some()),
        ] {
            if set {
                return bad(format!(
                    "dut.{key} does not apply to dut.kind = \"testpmd\": it takes cpu, io, batch and forward_mode"
                ));
            }
        }
        if let Some(b) = self.batch {
            // testpmd's MAX_PKT_BURST.
            if !(1..=512).contains(&b) {
                return bad(format!(
                    "dut.batch = {b} is out of range for testpmd: use 1 to 512"
                ));
            }
        }
        self.dut_cpu()?;
        self.check_io("use af_xdp (default) or af_packet")?;
        match self.forward_mode.as_deref() {
            None | Some("io") | Some("mac") => Ok(()),
            Some(m) => bad(format!(
                "dut.forward_mode = \"{m}\" is not known: use io (default) or mac"
            )),
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

/// `[traffic]`: the probe stream (recorded per packet) and its background streams
/// (`[[traffic.background]]`, counted only). Pattern parameters are documented in
/// `docs/generator.md`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TrafficSection {
    /// I/O backend of the generator (the recorder always reads an AF_PACKET ring, for
    /// kernel RX timestamps).
    #[serde(default)]
    pub backend: Backend,
    /// Traffic pattern.
    #[serde(default)]
    pub pattern: Pattern,
    /// Packets per second, or "max".
    #[serde(default)]
    pub rate_pps: Rate,
    /// Bits per second instead of `rate_pps`, counted as `rate_accounting` says.
    #[serde(default)]
    pub rate_bps: Option<f64>,
    /// "l1" (frame + 20 B preamble/SFD/IFG, the default) or "l2" (frame with FCS).
    #[serde(default)]
    pub rate_accounting: RateAccounting,
    /// Ethernet frame size including the 4-byte FCS (RFC 2544 convention).
    #[serde(default = "default_frame_bytes")]
    pub frame_bytes: u64,
    /// Measured duration in seconds (after warm-up).
    #[serde(default = "default_duration_s")]
    pub duration_s: f64,
    /// Warm-up in seconds: sent, but excluded from the analysis.
    #[serde(default = "default_warmup_s")]
    pub warmup_s: f64,
    /// How long the recorder keeps listening after the last packet, in ms.
    #[serde(default = "default_drain_ms")]
    pub drain_ms: u64,
    /// burst: packets back to back per burst.
    #[serde(default = "default_burst")]
    pub burst: u32,
    /// onoff: length of an on period, ms.
    #[serde(default = "default_on_off_ms")]
    pub on_ms: f64,
    /// onoff: length of an off period, ms.
    #[serde(default = "default_on_off_ms")]
    pub off_ms: f64,
    /// periodic: cycles per second.
    #[serde(default)]
    pub frequency_hz: Option<f64>,
    /// periodic: packets per cycle.
    #[serde(default = "default_one_u32")]
    pub per_cycle: u32,
    /// replay: pcap or pcapng file (relative to the working directory).
    #[serde(default)]
    pub trace: Option<String>,
    /// replay: speed-up factor (2 = twice as fast).
    #[serde(default = "default_speed")]
    pub speed: f64,
    /// Frame sizes sent in turn (a sweep within the run), instead of `frame_bytes`.
    #[serde(default)]
    pub sizes: Option<Vec<u64>>,
    /// Weights for `sizes`: sizes are then drawn at random with these weights.
    #[serde(default)]
    pub size_weights: Option<Vec<f64>>,
    /// "imix": 64, 594 and 1518 B in the ratio 7:4:1.
    #[serde(default)]
    pub size_mix: Option<String>,
    /// A sweep `[from, to, step]`, sent in turn.
    #[serde(default)]
    pub size_sweep: Option<[u64; 3]>,
    /// Number of flows, taken round robin.
    #[serde(default = "default_one_u32")]
    pub flows: u32,
    /// Fields that differ per flow: any of src_ip, dst_ip, src_port, dst_port.
    #[serde(default = "default_vary")]
    pub vary: Vec<String>,
    /// DSCP (0..63).
    #[serde(default)]
    pub dscp: u8,
    /// 802.1Q priority code point (0..7), with `traffic.vlan`.
    #[serde(default)]
    pub pcp: u8,
    /// IP version of every stream: 4 or 6.
    #[serde(default = "default_ip_version")]
    pub ip_version: u8,
    /// 802.1Q VLAN ID of every stream (none: untagged).
    #[serde(default)]
    pub vlan: Option<u16>,
    /// TX threads, each with its own socket (or AF_XDP queue) and pacer.
    #[serde(default = "default_one_usize")]
    pub tx_threads: usize,
    /// Largest number of frames handed to the backend at once.
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// Run the TX threads under SCHED_FIFO, so a busy host cannot preempt the pacer.
    #[serde(default)]
    pub tx_realtime: bool,
    /// Which TX timestamp the records carry: "app" (the generator's, in the probe) or
    /// "kernel" (the kernel's stamp of the hand-over to the device, or the NIC's where it
    /// stamps in hardware; see docs/generator.md).
    #[serde(default)]
    pub tx_timestamp: TxTimestampMode,
    /// Background streams sent with the probe stream, counted but not recorded.
    #[serde(default)]
    pub background: Vec<BackgroundStream>,
}

impl Default for TrafficSection {
    fn default() -> Self {
        let k = StreamKeys::default();
        TrafficSection {
            backend: Backend::default(),
            pattern: Pattern::default(),
            rate_pps: Rate::default(),
            rate_bps: None,
            rate_accounting: RateAccounting::default(),
            frame_bytes: default_frame_bytes(),
            duration_s: default_duration_s(),
            warmup_s: default_warmup_s(),
            drain_ms: default_drain_ms(),
            burst: k.burst,
            on_ms: k.on_ms,
            off_ms: k.off_ms,
            frequency_hz: k.frequency_hz,
            per_cycle: k.per_cycle,
            trace: k.trace,
            speed: k.speed,
            sizes: k.sizes,
            size_weights: k.size_weights,
            size_mix: k.size_mix,
            size_sweep: k.size_sweep,
            flows: k.flows,
            vary: k.vary,
            dscp: k.dscp,
            pcp: k.pcp,
            ip_version: default_ip_version(),
            vlan: None,
            tx_threads: 1,
            batch: default_batch(),
            tx_realtime: false,
            tx_timestamp: TxTimestampMode::default(),
            background: Vec::new(),
        }
    }
}

/// How bits per second are counted.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum RateAccounting {
    /// Frame + 20 B of preamble, SFD and inter-frame gap.
    #[default]
    L1,
    /// Frame with FCS only.
    L2,
}

/// Pattern parameters, sizes and flows of one stream: the keys `[traffic]` and every
/// `[[traffic.background]]` share (kept in sync by hand: serde's `flatten` would lose
/// the line numbers of unknown-key errors).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StreamKeys {
    /// burst: packets back to back per burst.
    #[serde(default = "default_burst")]
    pub burst: u32,
    /// onoff: length of an on period, ms.
    #[serde(default = "default_on_off_ms")]
    pub on_ms: f64,
    /// onoff: length of an off period, ms.
    #[serde(default = "default_on_off_ms")]
    pub off_ms: f64,
    /// periodic: cycles per second.
    #[serde(default)]
    pub frequency_hz: Option<f64>,
    /// periodic: packets per cycle.
    #[serde(default = "default_one_u32")]
    pub per_cycle: u32,
    /// replay: pcap or pcapng file (relative to the working directory).
    #[serde(default)]
    pub trace: Option<String>,
    /// replay: speed-up factor (2 = twice as fast).
    #[serde(default = "default_speed")]
    pub speed: f64,
    /// Frame sizes sent in turn (a sweep within the run), instead of `frame_bytes`.
    #[serde(default)]
    pub sizes: Option<Vec<u64>>,
    /// Weights for `sizes`: sizes are then drawn at random with these weights.
    #[serde(default)]
    pub size_weights: Option<Vec<f64>>,
    /// "imix": 64, 594 and 1518 B in the ratio 7:4:1.
    #[serde(default)]
    pub size_mix: Option<String>,
    /// A sweep `[from, to, step]`, sent in turn.
    #[serde(default)]
    pub size_sweep: Option<[u64; 3]>,
    /// Number of flows, taken round robin.
    #[serde(default = "default_one_u32")]
    pub flows: u32,
    /// Fields that differ per flow: any of src_ip, dst_ip, src_port, dst_port.
    #[serde(default = "default_vary")]
    pub vary: Vec<String>,
    /// DSCP (0..63).
    #[serde(default)]
    pub dscp: u8,
    /// 802.1Q priority code point (0..7), with `traffic.vlan`.
    #[serde(default)]
    pub pcp: u8,
}

impl Default for StreamKeys {
    fn default() -> Self {
        StreamKeys {
            burst: default_burst(),
            on_ms: default_on_off_ms(),
            off_ms: default_on_off_ms(),
            frequency_hz: None,
            per_cycle: 1,
            trace: None,
            speed: default_speed(),
            sizes: None,
            size_weights: None,
            size_mix: None,
            size_sweep: None,
            flows: 1,
            vary: default_vary(),
            dscp: 0,
            pcp: 0,
        }
    }
}

/// `[[traffic.background]]`: a stream that is sent with the probe stream and counted,
/// not recorded.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackgroundStream {
    /// Traffic pattern.
    #[serde(default)]
    pub pattern: Pattern,
    /// Packets per second.
    #[serde(default)]
    pub rate_pps: Rate,
    /// Bits per second instead of `rate_pps`.
    #[serde(default)]
    pub rate_bps: Option<f64>,
    /// "l1" or "l2".
    #[serde(default)]
    pub rate_accounting: RateAccounting,
    /// Frame size including FCS.
    #[serde(default = "default_frame_bytes")]
    pub frame_bytes: u64,
    /// burst: packets back to back per burst.
    #[serde(default = "default_burst")]
    pub burst: u32,
    /// onoff: length of an on period, ms.
    #[serde(default = "default_on_off_ms")]
    pub on_ms: f64,
    /// onoff: length of an off period, ms.
    #[serde(default = "default_on_off_ms")]
    pub off_ms: f64,
    /// periodic: cycles per second.
    #[serde(default)]
    pub frequency_hz: Option<f64>,
    /// periodic: packets per cycle.
    #[serde(default = "default_one_u32")]
    pub per_cycle: u32,
    /// replay: pcap or pcapng file (relative to the working directory).
    #[serde(default)]
    pub trace: Option<String>,
    /// replay: speed-up factor (2 = twice as fast).
    #[serde(default = "default_speed")]
    pub speed: f64,
    /// Frame sizes sent in turn (a sweep within the run), instead of `frame_bytes`.
    #[serde(default)]
    pub sizes: Option<Vec<u64>>,
    /// Weights for `sizes`: sizes are then drawn at random with these weights.
    #[serde(default)]
    pub size_weights: Option<Vec<f64>>,
    /// "imix": 64, 594 and 1518 B in the ratio 7:4:1.
    #[serde(default)]
    pub size_mix: Option<String>,
    /// A sweep `[from, to, step]`, sent in turn.
    #[serde(default)]
    pub size_sweep: Option<[u64; 3]>,
    /// Number of flows, taken round robin.
    #[serde(default = "default_one_u32")]
    pub flows: u32,
    /// Fields that differ per flow: any of src_ip, dst_ip, src_port, dst_port.
    #[serde(default = "default_vary")]
    pub vary: Vec<String>,
    /// DSCP (0..63).
    #[serde(default)]
    pub dscp: u8,
    /// 802.1Q priority code point (0..7), with `traffic.vlan`.
    #[serde(default)]
    pub pcp: u8,
}

impl TrafficSection {
    /// The probe stream's pattern parameters, sizes and flows.
    pub fn keys(&self) -> StreamKeys {
        StreamKeys {
            burst: self.burst,
            on_ms: self.on_ms,
            off_ms: self.off_ms,
            frequency_hz: self.frequency_hz,
            per_cycle: self.per_cycle,
            trace: self.trace.clone(),
            speed: self.speed,
            sizes: self.sizes.clone(),
            size_weights: self.size_weights.clone(),
            size_mix: self.size_mix.clone(),
            size_sweep: self.size_sweep,
            flows: self.flows,
            vary: self.vary.clone(),
            dscp: self.dscp,
            pcp: self.pcp,
        }
    }
}

impl BackgroundStream {
    /// This stream's pattern parameters, sizes and flows.
    pub fn keys(&self) -> StreamKeys {
        StreamKeys {
            burst: self.burst,
            on_ms: self.on_ms,
            off_ms: self.off_ms,
            frequency_hz: self.frequency_hz,
            per_cycle: self.per_cycle,
            trace: self.trace.clone(),
            speed: self.speed,
            sizes: self.sizes.clone(),
            size_weights: self.size_weights.clone(),
            size_mix: self.size_mix.clone(),
            size_sweep: self.size_sweep,
            flows: self.flows,
            vary: self.vary.clone(),
            dscp: self.dscp,
            pcp: self.pcp,
        }
    }
}

fn default_ip_version() -> u8 {
    4
}
fn default_one_usize() -> usize {
    1
}
fn default_one_u32() -> u32 {
    1
}
fn default_batch() -> usize {
    32
}
fn default_burst() -> u32 {
    8
}
fn default_on_off_ms() -> f64 {
    10.0
}
fn default_speed() -> f64 {
    1.0
}
fn default_vary() -> Vec<String> {
    vec!["src_port".into()]
}

/// I/O backend.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// AF_XDP sockets.
    AfXdp,
    /// XDP live frames: the kernel stamps and sends every frame
    /// (`nflab_gen::live`); one flow of one size, IPv4.
    XdpLive,
    /// AF_PACKET with TPACKET_V3 rings.
    #[default]
    AfPacket,
    /// Plain UDP sockets.
    Udp,
}

impl Backend {
    /// Name as written in the spec.
    pub fn as_str(&self) -> &'static str {
        match self {
            Backend::AfXdp => "af_xdp",
            Backend::XdpLive => "xdp_live",
            Backend::AfPacket => "af_packet",
            Backend::Udp => "udp",
        }
    }

    /// Why this backend cannot give kernel TX timestamps (`SO_TIMESTAMPING`); `None` for
    /// the socket backends that can (af_packet, udp). The spec and `nflab gen` both ask.
    pub fn no_kernel_tx_stamps(&self) -> Option<&'static str> {
        match self {
            Backend::AfXdp => {
                Some("AF_XDP frames bypass the kernel's TX path and get no kernel TX timestamp")
            }
            Backend::XdpLive => Some(
                "xdp_live frames get no SO_TIMESTAMPING stamp; their tx stamp is already \
                 taken in the kernel, by the XDP program (\"kernel-xdp\")",
            ),
            Backend::AfPacket | Backend::Udp => None,
        }
    }
}

/// `traffic.tx_timestamp`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum TxTimestampMode {
    /// The generator's `CLOCK_REALTIME` stamp, written into the probe.
    #[default]
    App,
    /// The kernel's TX timestamp, matched to the probe after the send.
    Kernel,
}

impl TxTimestampMode {
    /// Name as written in the spec.
    pub fn as_str(&self) -> &'static str {
        match self {
            TxTimestampMode::App => "app",
            TxTimestampMode::Kernel => "kernel",
        }
    }
}

/// Traffic pattern.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Constant bit rate.
    #[default]
    Cbr,
    /// Poisson arrivals.
    Poisson,
    /// Back-to-back bursts.
    Burst,
    /// On/off.
    Onoff,
    /// Periodic real-time flow.
    Periodic,
    /// Trace replay.
    Replay,
}

impl Pattern {
    /// Name as written in the spec.
    pub fn as_str(&self) -> &'static str {
        match self {
            Pattern::Cbr => "cbr",
            Pattern::Poisson => "poisson",
            Pattern::Burst => "burst",
            Pattern::Onoff => "onoff",
            Pattern::Periodic => "periodic",
            Pattern::Replay => "replay",
        }
    }
}

/// A packet rate: a number of packets per second, or "max".
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// Exactly this many packets per second.
    Pps(f64),
    /// As fast as the backend sends.
    Max,
}

impl Default for Rate {
    fn default() -> Self {
        Rate::Pps(10_000.0)
    }
}

impl Rate {
    /// Packets per second, or None for "max".
    pub fn pps(&self) -> Option<f64> {
        match self {
            Rate::Pps(p) => Some(*p),
            Rate::Max => None,
        }
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rate::Pps(p) => write!(f, "{p}"),
            Rate::Max => f.write_str("max"),
        }
    }
}

impl Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Rate::Pps(p) if p.fract() == 0.0 && *p < 9.0e15 => s.serialize_i64(*p as i64),
            Rate::Pps(p) => s.serialize_f64(*p),
            Rate::Max => s.serialize_str("max"),
        }
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Rate;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a positive number of packets per second or \"max\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Rate, E> {
                self.visit_f64(v as f64)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Rate, E> {
                self.visit_f64(v as f64)
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Rate, E> {
                if v.is_finite() && v > 0.0 {
                    Ok(Rate::Pps(v))
                } else {
                    Err(E::custom(format!(
                        "rate {v} is not valid: use a positive number of packets per second or \"max\""
                    )))
                }
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Rate, E> {
                if v == "max" {
                    Ok(Rate::Max)
                } else {
                    Err(E::custom(format!(
                        "rate \"{v}\" is not valid: use a positive number of packets per second or \"max\""
                    )))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// `[analysis]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AnalysisSection {
    /// Anomaly definitions `n:t` (seed 001), e.g. "2:250us".
    #[serde(default = "default_anomalies")]
    pub anomalies: Vec<String>,
}

impl Default for AnalysisSection {
    fn default() -> Self {
        AnalysisSection {
            anomalies: default_anomalies(),
        }
    }
}

fn one() -> u32 {
    1
}
fn one_u64() -> u64 {
    1
}
fn default_frame_bytes() -> u64 {
    64
}
fn default_duration_s() -> f64 {
    5.0
}
fn default_warmup_s() -> f64 {
    1.0
}
fn default_drain_ms() -> u64 {
    200
}
fn default_anomalies() -> Vec<String> {
    vec!["2:250us".into(), "2:750us".into()]
}

/// Smallest frame that holds Ethernet + IPv4 + UDP + the 18-byte probe + FCS.
pub const MIN_FRAME_BYTES: u64 = 64;
/// Largest untagged frame at the default MTU of 1500 (1500 + 14 + 4).
pub const MAX_FRAME_BYTES: u64 = 1518;

/// One concrete run of an experiment.
#[derive(Debug, Clone, Serialize)]
pub struct RunPlan {
    /// Index in execution order, also the directory name `runs/NNN`.
    pub index: usize,
    /// Which repetition of its parameter combination (0-based).
    pub repetition: u32,
    /// Index of its parameter combination in the cross product.
    pub combination: usize,
    /// The swept values of this run, key as written in `[sweep]`.
    pub params: BTreeMap<String, toml::Value>,
    /// The fully resolved spec of this run.
    pub spec: Spec,
}

impl Spec {
    /// Read and validate a spec file.
    pub fn from_file(path: &Path) -> Result<(Spec, String), LabError> {
        let text = std::fs::read_to_string(path).map_err(|e| LabError::Spec {
            file: path.display().to_string(),
            message: format!("cannot read it: {e}"),
        })?;
        let text = resolve_includes(path, &text, 0)?;
        let spec = Spec::parse(&text, &path.display().to_string())?;
        Ok((spec, text))
    }

    /// Parse and validate spec text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Spec, LabError> {
        let spec: Spec = toml::from_str(text).map_err(|e| LabError::Spec {
            file: origin.to_string(),
            message: one_line(&e.to_string()),
        })?;
        spec.validate(text, origin)?;
        // Expanding checks every swept value too.
        spec.expand_with_text(text, origin)?;
        Ok(spec)
    }

    /// Check value ranges that serde cannot express.
    fn validate(&self, text: &str, origin: &str) -> Result<(), LabError> {
        let err = |section: &str, key: &str, message: String| LabError::Spec {
            file: origin.to_string(),
            message: format!("{}{message}", where_is(text, section, key)),
        };
        if self.experiment.name.trim().is_empty()
            || self
                .experiment
                .name
                .chars()
                .any(|c| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
        {
            return Err(err(
                "experiment",
                "name",
                format!(
                    "experiment.name = {:?} is not valid: use letters, digits, '-', '_' or '.'",
                    self.experiment.name
                ),
            ));
        }
        if let Some(c) = &self.capture {
            if let Err(e) = c.config("lg1", std::path::Path::new(".")) {
                return Err(err("capture", e.key, e.message));
            }
        }
        if self.experiment.repetitions == 0 {
            return Err(err(
                "experiment",
                "repetitions",
                "experiment.repetitions = 0 is not valid: use 1 or more".into(),
            ));
        }
        // Every run's plan holds its resolved spec: a study of millions of runs would
        // exhaust memory before the first one starts (found by the spec_parse fuzzer).
        let combinations = self.sweep.values().fold(1u64, |n, v| match v {
            toml::Value::Array(a) => n.saturating_mul(a.len().max(1) as u64),
            _ => n,
        });
        let runs = combinations.saturating_mul(u64::from(self.experiment.repetitions));
        if runs > MAX_RUNS {
            return Err(err(
                "experiment",
                "repetitions",
                format!(
                    "the study has {runs} runs ({combinations} sweep combinations × experiment.repetitions = {}): \
                     more than {MAX_RUNS}; split it into several specs (nflab run DIR --resume continues one)",
                    self.experiment.repetitions
                ),
            ));
        }
        let t = &self.traffic;
        if !(MIN_FRAME_BYTES..=MAX_FRAME_BYTES).contains(&t.frame_bytes) {
            return Err(err(
                "traffic",
                "frame_bytes",
                format!(
                    "traffic.frame_bytes = {} is out of range: use {MIN_FRAME_BYTES} to {MAX_FRAME_BYTES} \
                     (an IPv4/UDP probe frame including FCS, at MTU 1500)",
                    t.frame_bytes
                ),
            ));
        }
        if !(t.duration_s.is_finite() && t.duration_s > 0.0 && t.duration_s <= 86_400.0) {
            return Err(err(
                "traffic",
                "duration_s",
                format!(
                    "traffic.duration_s = {} is not valid: use a number of seconds above 0 and at most 86400",
                    t.duration_s
                ),
            ));
        }
        if !(t.warmup_s.is_finite() && t.warmup_s >= 0.0 && t.warmup_s <= 3_600.0) {
            return Err(err(
                "traffic",
                "warmup_s",
                format!(
                    "traffic.warmup_s = {} is not valid: use 0 to 3600 seconds",
                    t.warmup_s
                ),
            ));
        }
        if t.tx_timestamp == TxTimestampMode::Kernel {
            if let Some(why) = t.backend.no_kernel_tx_stamps() {
                return Err(err(
                    "traffic",
                    "tx_timestamp",
                    format!(
                        "traffic.tx_timestamp = \"kernel\" needs traffic.backend = \"af_packet\": {why}"
                    ),
                ));
            }
        }
        if let Rate::Pps(p) = t.rate_pps {
            if p > 100.0e6 {
                return Err(err(
                    "traffic",
                    "rate_pps",
                    format!("traffic.rate_pps = {p} is above 100 Mpps, which no backend here reaches: use a lower rate or \"max\""),
                ));
            }
        }
        for a in &self.analysis.anomalies {
            if let Err(e) = a.parse::<nflab_analyze::AnomalySpec>() {
                return Err(err(
                    "analysis",
                    "anomalies",
                    format!("analysis.anomalies: {e}"),
                ));
            }
        }
        self.knobs
            .validate()
            .map_err(|m| err("knobs", "sysctl", m))?;
        if let Some(r) = &self.rfc2544 {
            r.validate().map_err(|m| err("rfc2544", "procedure", m))?;
        }
        crate::pairs_section::validate(self).map_err(|(key, m)| err("pair", key, m))?;
        if let Some(m) = &self.model {
            m.validate().map_err(|(key, m)| err("model", key, m))?;
        }
        if let Some(cpu) = self.topology.gen_cpu.or(self.topology.rec_cpu) {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            if cpu >= n {
                return Err(err(
                    "topology",
                    if self.topology.gen_cpu == Some(cpu) {
                        "gen_cpu"
                    } else {
                        "rec_cpu"
                    },
                    format!("CPU {cpu} does not exist on this host: use 0 to {}", n - 1),
                ));
            }
        }
        if let Some(AppSection::Prrt(prrt)) = &self.app {
            if let Err(message) = prrt.app_spec() {
                let key = message.split([' ', ':']).next().unwrap_or("app");
                let key = key.strip_prefix("app.").unwrap_or("kind").to_string();
                return Err(err("app", &key, message));
            }
        }
        Ok(())
    }

    /// Frames the DuT cannot forward would be lost to the last one, after a readiness
    /// check (untagged IPv4) that passed: refuse them before the run.
    pub(crate) fn check_dut_carries_traffic(&self) -> Result<(), LabError> {
        let t = &self.traffic;
        let pcps = std::iter::once(("traffic.pcp".to_string(), t.pcp)).chain(
            t.background
                .iter()
                .enumerate()
                .map(|(i, b)| (format!("traffic.background[{i}].pcp"), b.pcp)),
        );
        for (key, pcp) in pcps.filter(|(_, p)| *p != 0) {
            if t.vlan.is_none() {
                return Err(LabError::Unsupported(format!(
                    "{key} = {pcp} needs traffic.vlan: the priority travels in the 802.1Q tag"
                )));
            }
        }
        if self.dut.kind != DutKind::LinuxRouter {
            return Ok(());
        }
        let others = "loopback, linux-bridge, nflab or testpmd";
        if t.ip_version == 6 {
            return Err(LabError::Unsupported(format!(
                "traffic.ip_version = 6 cannot cross dut.kind = \"linux-router\", which routes IPv4 only: use dut.kind = {others}"
            )));
        }
        if let Some(v) = t.vlan {
            return Err(LabError::Unsupported(format!(
                "traffic.vlan = {v} cannot cross dut.kind = \"linux-router\", which has no VLAN interfaces: use dut.kind = {others}"
            )));
        }
        Ok(())
    }

    /// The runs of this experiment, in execution order.
    pub fn expand(&self, text: &str) -> Result<Vec<RunPlan>, LabError> {
        self.expand_with_text(text, "spec").map(|(plans, _)| plans)
    }

    /// The runs, and the sweep's combinations left out because a rule refused them
    /// (only with `experiment.skip_refused`; otherwise the first refusal is the error).
    pub fn expand_all(&self, text: &str) -> Result<(Vec<RunPlan>, Vec<Refused>), LabError> {
        self.expand_with_text(text, "spec")
    }

    fn expand_with_text(
        &self,
        text: &str,
        origin: &str,
    ) -> Result<(Vec<RunPlan>, Vec<Refused>), LabError> {
        let base: toml::Table = toml::from_str(text).map_err(|e| LabError::Spec {
            file: origin.to_string(),
            message: one_line(&e.to_string()),
        })?;
        let mut axes: Vec<(String, Vec<toml::Value>)> = Vec::new();
        for (key, values) in &self.sweep {
            let here = where_is(text, "sweep", key);
            let list = match values {
                toml::Value::Array(a) if !a.is_empty() => a.clone(),
                toml::Value::Array(_) => {
                    return Err(LabError::Spec {
                        file: origin.to_string(),
                        message: format!("{here}sweep key \"{key}\" has an empty list of values: give at least one value"),
                    })
                }
                other => vec![other.clone()],
            };
            let parts: Vec<&str> = key.split('.').collect();
            let knob = parts.len() > 2 && parts[0] == "knobs" && parts[1] == "sysctl";
            // "dut.link.delay_us", "dut.link.reverse.delay_us": a link's own keys;
            // "dut.link.loss.p", "dut.link.reverse.loss.p": its loss model's.
            let link = parts.len() >= 3
                && parts[0] == "dut"
                && parts[1] == "link"
                && matches!(
                    &parts[2..],
                    [_] | ["reverse" | "loss", _] | ["reverse", "loss", _]
                );
            if !knob
                && !link
                && (parts.len() != 2
                    || !["topology", "dut", "traffic", "analysis", "knobs", "app"]
                        .contains(&parts[0]))
            {
                return Err(LabError::Spec {
                    file: origin.to_string(),
                    message: format!(
                        "{here}sweep key \"{key}\" is not valid: use \"section.key\" with section topology, dut, traffic, analysis, knobs or app, \"dut.link.<key>\", \"dut.link.reverse.<key>\", \"dut.link[.reverse].loss.<key>\" or \"knobs.sysctl.<name>\""
                    ),
                });
            }
            axes.push((key.clone(), list));
        }

        // Cross product, first key outermost (pos loop variables).
        let mut combos: Vec<BTreeMap<String, toml::Value>> = vec![BTreeMap::new()];
        for (key, values) in &axes {
            let mut next = Vec::with_capacity(combos.len() * values.len());
            for c in &combos {
                for v in values {
                    let mut c = c.clone();
                    c.insert(key.clone(), v.clone());
                    next.push(c);
                }
            }
            combos = next;
        }

        let mut plans = Vec::new();
        let mut refused = Vec::new();
        for (ci, combo) in combos.iter().enumerate() {
            let mut doc = base.clone();
            doc.remove("sweep");
            for (key, value) in combo {
                let (section, field) = key.split_once('.').unwrap_or((key, ""));
                let entry = doc
                    .entry(section.to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                if let toml::Value::Table(t) = entry {
                    match field.strip_prefix("sysctl.").filter(|_| section == "knobs") {
                        // "knobs.sysctl.net.core.busy_poll": the sysctl name keeps its dots.
                        Some(name) => {
                            let sys = t
                                .entry("sysctl".to_string())
                                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                            if let toml::Value::Table(sys) = sys {
                                sys.insert(name.to_string(), value.clone());
                            }
                        }
                        // "link.delay_us" under dut: tables down to the key.
                        None => set_nested(t, &field.split('.').collect::<Vec<_>>(), value),
                    }
                }
            }
            let resolved: Spec =
                toml::Value::Table(doc.clone())
                    .try_into()
                    .map_err(|e: toml::de::Error| LabError::Spec {
                        file: origin.to_string(),
                        message: format!(
                            "{}the sweep value {} is not valid: {}",
                            combo
                                .keys()
                                .next()
                                .map(|k| where_is(text, "sweep", k))
                                .unwrap_or_default(),
                            describe_combo(combo),
                            one_line(&e.to_string())
                        ),
                    })?;
            let resolved_text = toml::to_string(&doc).unwrap_or_default();
            match resolved.validate(&resolved_text, origin) {
                Ok(()) => {}
                Err(LabError::Spec { message, .. })
                    if self.experiment.skip_refused && !combo.is_empty() =>
                {
                    refused.push(Refused {
                        combination: ci,
                        params: combo.clone(),
                        reason: message,
                    });
                    continue;
                }
                Err(LabError::Spec { file, message }) => {
                    return Err(LabError::Spec {
                        file,
                        message: format!("with {}: {message}", describe_combo(combo)),
                    })
                }
                Err(other) => return Err(other),
            }
            for rep in 0..self.experiment.repetitions {
                plans.push(RunPlan {
                    index: 0,
                    repetition: rep,
                    combination: ci,
                    params: combo.clone(),
                    spec: resolved.clone(),
                });
            }
        }
        if let (true, Some(first)) = (plans.is_empty(), refused.first()) {
            // Found by fuzzing: a study that would run nothing and say nothing.
            return Err(LabError::Spec {
                file: origin.to_string(),
                message: format!(
                    "experiment.skip_refused = true, but all {} combinations of the sweep are refused, so nothing would run; the first, with {}: {}",
                    refused.len(),
                    describe_combo(&first.params),
                    first.reason
                ),
            });
        }
        if self.experiment.order == Order::Random {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.experiment.seed);
            plans.shuffle(&mut rng);
        }
        for (i, p) in plans.iter_mut().enumerate() {
            p.index = i;
        }
        Ok((plans, refused))
    }
}

/// A combination of the sweep that a rule refused (`experiment.skip_refused`).
#[derive(Debug, Clone, Serialize)]
pub struct Refused {
    /// Its index in the cross product (first key outermost).
    pub combination: usize,
    /// The swept values.
    pub params: BTreeMap<String, toml::Value>,
    /// The rule's sentence.
    pub reason: String,
}

/// Set `path` (table names, then the key) in `t` to `value`, making the tables on the way.
fn set_nested(t: &mut toml::Table, path: &[&str], value: &toml::Value) {
    match path {
        [] => {}
        [key] => {
            t.insert(key.to_string(), value.clone());
        }
        [name, rest @ ..] => {
            let e = t
                .entry(name.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if let toml::Value::Table(inner) = e {
                set_nested(inner, rest, value);
            }
        }
    }
}

/// How deep includes may nest (a cycle ends here with a clear error).
const MAX_INCLUDE_DEPTH: usize = 8;

/// Merge `[experiment] include = [...]` fragments under the file's own
/// values and return the resolved TOML text (unchanged when nothing is
/// included, so error lines still point into the user's file).
fn resolve_includes(path: &Path, text: &str, depth: usize) -> Result<String, LabError> {
    let spec_err = |file: &Path, message: String| LabError::Spec {
        file: file.display().to_string(),
        message,
    };
    let own: toml::Table =
        toml::from_str(text).map_err(|e| spec_err(path, one_line(&e.to_string())))?;
    let includes: Vec<String> = match own.get("experiment").and_then(|e| e.get("include")) {
        None => return Ok(text.to_string()),
        Some(toml::Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str().map(String::from).ok_or_else(|| {
                    spec_err(
                        path,
                        format!(
                            "{}experiment.include must list file names as strings",
                            where_is(text, "experiment", "include")
                        ),
                    )
                })
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(spec_err(
                path,
                format!(
                    "{}experiment.include must be a list of file names, e.g. [\"common.toml\"]",
                    where_is(text, "experiment", "include")
                ),
            ))
        }
    };
    if depth >= MAX_INCLUDE_DEPTH {
        return Err(spec_err(
            path,
            format!("includes nest deeper than {MAX_INCLUDE_DEPTH} levels: is there a cycle?"),
        ));
    }
    let base = path.parent().unwrap_or(Path::new("."));
    let mut merged = toml::Table::new();
    for inc in &includes {
        let p = base.join(inc);
        let t = std::fs::read_to_string(&p).map_err(|e| {
            spec_err(
                path,
                format!(
                    "{}experiment.include names {inc}, which cannot be read: {e}",
                    where_is(text, "experiment", "include")
                ),
            )
        })?;
        let resolved = resolve_includes(&p, &t, depth + 1)?;
        let table: toml::Table =
            toml::from_str(&resolved).map_err(|e| spec_err(&p, one_line(&e.to_string())))?;
        deep_merge(&mut merged, table);
    }
    let mut own = own;
    if let Some(toml::Value::Table(e)) = own.get_mut("experiment") {
        e.remove("include");
    }
    deep_merge(&mut merged, own);
    toml::to_string(&merged).map_err(|e| spec_err(path, format!("cannot merge the includes: {e}")))
}

/// `over` wins; tables merge key by key, everything else is replaced.
fn deep_merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => deep_merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

fn describe_combo(combo: &BTreeMap<String, toml::Value>) -> String {
    combo
        .iter()
        .map(|(k, v)| format!("{k} = {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Collapse toml's multi-line error display into one sentence with its line
/// and the offending source text, so the key is always named.
fn one_line(s: &str) -> String {
    // toml errors look like: "TOML parse error at line 3, column 1\n  |\n3 | foo = 1\n  | ^^^\nunknown field `foo`, expected ...\n"
    let mut head = String::new();
    let mut source = String::new();
    let mut tail = Vec::new();
    for line in s.lines() {
        let l = line.trim();
        if l.starts_with("TOML parse error") {
            head = l.replace("TOML parse error at ", "").to_string();
        } else if let Some((num, text)) = l.split_once(" | ") {
            if num.trim().chars().all(|c| c.is_ascii_digit()) && source.is_empty() {
                source = text.trim().to_string();
            }
        } else if l.is_empty() || l.starts_with('|') || l.starts_with('^') {
            continue;
        } else {
            tail.push(l.to_string());
        }
    }
    let msg = tail.join(" ");
    match (head.is_empty(), source.is_empty()) {
        (true, _) => msg,
        (false, true) => format!("{head}: {msg}"),
        (false, false) => format!("{head} (`{source}`): {msg}"),
    }
}

/// "line N: " of `key` inside `[section]`, or "" if it cannot be found.
pub(crate) fn where_is(text: &str, section: &str, key: &str) -> String {
    let mut current = String::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.starts_with('[') {
            current = l.trim_matches(|c| c == '[' || c == ']').trim().to_string();
            continue;
        }
        if current == section {
            let k = l.split('=').next().unwrap_or("").trim().trim_matches('"');
            if k == key {
                return format!("line {}: ", i + 1);
            }
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUICK: &str = r#"
[experiment]
name = "quick"
repetitions = 2

[dut]
kind = "loopback"

[traffic]
rate_pps = 1000
frame_bytes = 64
duration_s = 1

[sweep]
"traffic.rate_pps" = [1000, 2000, 3000]
"dut.kind" = ["loopback", "linux-router"]
"#;

    #[test]
    fn dut_workers_are_checked_in_one_sentence() {
        let nflab = |workers: u32, io: Option<&str>| DutSection {
            kind: DutKind::Nflab,
            pipeline: Some(vec!["l2fwd".into()]),
            workers: Some(workers),
            io: io.map(String::from),
            ..DutSection::default()
        };
        nflab(2, None)
            .check_nflab()
            .expect("two workers on auto ports");
        nflab(64, Some("af_xdp")).check_nflab().expect("64 workers");
        let e = nflab(0, None).check_nflab().unwrap_err().to_string();
        assert!(
            e.contains("dut.workers = 0") && e.contains("1 to 64"),
            "{e}"
        );
        let e = nflab(2, Some("af_packet"))
            .check_nflab()
            .unwrap_err()
            .to_string();
        assert!(e.contains("dut.workers = 2") && e.contains("af_xdp"), "{e}");
        let testpmd = DutSection {
            kind: DutKind::Testpmd,
            workers: Some(2),
            ..DutSection::default()
        };
        let e = testpmd.check_testpmd().unwrap_err().to_string();
        assert!(e.contains("dut.workers does not apply"), "{e}");
    }

    #[test]
    fn a_link_spec_checks_each_direction_and_names_the_bad_key() {
        let check = |dut: &str| {
            let text = format!("[experiment]\nname = \"x\"\n[dut]\nkind = \"link\"\n{dut}\n");
            Spec::parse(&text, "t")
                .and_then(|s| s.check_supported())
                .map_err(|e| e.to_string())
        };
        check(
            "[dut.link]\ndelay_us = 8090\njitter_us = 740\ndistribution = \"normal\"\n\
             loss = { model = \"gilbert-elliott\", p = 0.01, r = 0.5, \"1-h\" = 0.8, \"1-k\" = 0.0 }\n\
             rate_mbps = 26\nqueue_packets = 64\nduplicate = 0.001\nreorder = 0.01\n\
             [dut.link.reverse]\ndelay_us = 100",
        )
        .expect("a full link");
        check("").expect("a bare link is a cable");
        for (dut, want) in [
            (
                "[dut.link.reverse]\nloss = { model = \"bernoulli\", p = 2 }",
                "dut.link.reverse.loss.p = 2 is not a probability",
            ),
            (
                "[dut.link]\nrate_mbps = -3",
                "dut.link.rate_mbps = -3 is not valid",
            ),
            (
                "pipeline = [\"l2fwd\"]",
                "dut.pipeline does not apply to dut.kind = \"link\"",
            ),
            ("io = \"af_xdp\"", "dut.io = \"af_xdp\" cannot serve a link"),
            ("[dut.link]\ndelay = 5", "delay"),
        ] {
            let e = check(dut).unwrap_err();
            assert!(e.contains(want), "{dut}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        // A pipeline's link function carries one direction only.
        let text = "[experiment]\nname = \"x\"\n[dut]\nkind = \"nflab\"\npipeline = [\"link\"]\n[dut.link.reverse]\ndelay_us = 1\n";
        let e = Spec::parse(text, "t")
            .and_then(|s| s.check_supported())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("dut.link.reverse applies to dut.kind = \"link\" only"),
            "{e}"
        );
    }

    #[test]
    fn a_links_keys_can_be_swept() {
        let text = "[experiment]\nname = \"x\"\n[dut]\nkind = \"link\"\n[dut.link]\njitter_us = 5\n\
                    [dut.link.reverse]\ndelay_us = 1\n[app]\nkind = \"ncsbench\"\n\
                    [sweep]\n\"dut.link.delay_us\" = [100, 200]\n\"dut.link.reverse.jitter_us\" = [0, 3]\n\"app.periods\" = [10]\n";
        let plans = Spec::parse(text, "t").unwrap().expand(text).unwrap();
        assert_eq!(plans.len(), 4);
        let l = plans[3].spec.dut.link.clone().unwrap();
        assert_eq!((l.delay_us, l.jitter_us), (Some(200.0), Some(5.0)));
        let r = l.reverse.unwrap();
        assert_eq!((r.delay_us, r.jitter_us), (Some(1.0), Some(3.0)));
        let Some(AppSection::Ncsbench(c)) = &plans[0].spec.app else {
            panic!("no app")
        };
        assert_eq!(c.periods, 10);
        let bad = text.replace("dut.link.delay_us", "dut.link.x.y.z");
        let e = Spec::parse(&bad, "t")
            .and_then(|s| s.expand(&bad))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("sweep key \"dut.link.x.y.z\" is not valid"),
            "{e}"
        );
    }

    #[test]
    fn a_links_loss_rate_can_be_swept() {
        let text = "[experiment]\nname = \"x\"\n[dut]\nkind = \"link\"\n[dut.link]\nloss = { model = \"bernoulli\", p = 0.0 }\n\
                    [dut.link.reverse]\nloss = { model = \"bernoulli\", p = 0.0 }\n\
                    [sweep]\n\"dut.link.loss.p\" = [0.1, 0.5]\n\"dut.link.reverse.loss.p\" = [0.25]\n";
        let plans = Spec::parse(text, "t").unwrap().expand(text).unwrap();
        assert_eq!(plans.len(), 2);
        let l = plans[1].spec.dut.link.clone().unwrap();
        let fwd = serde_json::to_value(&l.loss).unwrap();
        assert_eq!(
            (fwd["model"].as_str(), fwd["p"].as_f64()),
            (Some("bernoulli"), Some(0.5))
        );
        let rev = serde_json::to_value(&l.reverse.unwrap().loss).unwrap();
        assert_eq!(rev["p"].as_f64(), Some(0.25));
        assert_eq!(plans[0].params["dut.link.loss.p"].as_float(), Some(0.1));
    }

    #[test]
    fn an_ncsbench_app_is_checked_with_its_dut() {
        let check = |dut: &str, app: &str| {
            let text = format!(
                "[experiment]\nname = \"x\"\n[dut]\nkind = \"{dut}\"\n[app]\nkind = \"ncsbench\"\n{app}\n"
            );
            Spec::parse(&text, "t")
                .and_then(|s| s.check_supported().map(|()| s))
                .map_err(|e| e.to_string())
        };
        let s = check("link", "periods = 100").expect("a valid app");
        let Some(AppSection::Ncsbench(c)) = s.app else {
            panic!("no app")
        };
        assert_eq!(
            (c.period_ms, c.deadline_ms, c.periods, c.backups),
            (35.0, 29.0, 100, 10)
        );
        assert_eq!(c.max_consecutive_losses, 3);
        for (dut, app, want) in [
            (
                "link",
                "period_ms = 20",
                "app.period_ms = 20 is shorter than app.deadline_ms = 29",
            ),
            (
                "linux-router",
                "",
                "cannot cross dut.kind = \"linux-router\"",
            ),
            ("link", "periods_ms = 5", "periods_ms"),
            ("link", "time_scale = 0.5", "app.time_scale = 0.5"),
        ] {
            let e = check(dut, app).unwrap_err();
            assert!(e.contains(want), "{app}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }

    #[test]
    fn traffic_the_dut_cannot_forward_is_refused_before_the_run() {
        let check = |dut: &str, traffic: &str| {
            let text = format!(
                "[experiment]\nname = \"x\"\n[dut]\nkind = \"{dut}\"\n[traffic]\n{traffic}\n"
            );
            Spec::parse(&text, "t")
                .unwrap()
                .check_supported()
                .map_err(|e| e.to_string())
        };
        let e = check("linux-router", "ip_version = 6").unwrap_err();
        assert!(
            e.contains("traffic.ip_version = 6") && e.contains("IPv4 only"),
            "{e}"
        );
        let e = check("linux-router", "vlan = 100").unwrap_err();
        assert!(
            e.contains("traffic.vlan = 100") && e.contains("linux-bridge"),
            "{e}"
        );
        let e = check("linux-bridge", "pcp = 6").unwrap_err();
        assert!(e.contains("traffic.pcp = 6 needs traffic.vlan"), "{e}");
        check(
            "linux-bridge",
            "ip_version = 6\nvlan = 100\npcp = 6\nframe_bytes = 128",
        )
        .expect("a bridge carries both");
        check("loopback", "ip_version = 6\nvlan = 100\nframe_bytes = 128")
            .expect("loopback carries both");
    }

    #[test]
    fn dut_cpu_and_io_are_checked_alike_for_both_software_duts() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        for kind in [DutKind::Nflab, DutKind::Testpmd] {
            let dut = |cpu: Option<usize>, io: Option<&str>| DutSection {
                kind,
                pipeline: (kind == DutKind::Nflab).then(|| vec!["l2fwd".into()]),
                cpu,
                io: io.map(String::from),
                ..DutSection::default()
            };
            let check = |d: DutSection| match kind {
                DutKind::Nflab => d.check_nflab(),
                _ => d.check_testpmd(),
            };
            assert_eq!(dut(None, None).dut_cpu().unwrap(), cpus - 1);
            check(dut(Some(cpus - 1), Some("af_packet"))).expect("last CPU, AF_PACKET");
            let e = check(dut(Some(cpus), None)).unwrap_err().to_string();
            assert!(
                e.contains(&format!("dut.cpu = {cpus} does not exist")),
                "{kind:?}: {e}"
            );
            let e = check(dut(None, Some("dpdk"))).unwrap_err().to_string();
            assert!(
                e.contains("dut.io = \"dpdk\" is not known") && e.contains("af_packet"),
                "{kind:?}: {e}"
            );
        }
    }

    #[test]
    fn cross_product_times_repetitions() {
        let spec = Spec::parse(QUICK, "t").unwrap();
        let runs = spec.expand(QUICK).unwrap();
        assert_eq!(runs.len(), 3 * 2 * 2);
        // First key outermost, repetitions innermost.
        assert_eq!(runs[0].spec.traffic.rate_pps, Rate::Pps(1000.0));
        assert_eq!(runs[0].spec.dut.kind, DutKind::Loopback);
        assert_eq!(runs[1].repetition, 1);
        assert_eq!(runs[2].spec.dut.kind, DutKind::LinuxRouter);
        assert_eq!(runs[4].spec.traffic.rate_pps, Rate::Pps(2000.0));
        let idx: Vec<usize> = runs.iter().map(|r| r.index).collect();
        assert_eq!(idx, (0..12).collect::<Vec<_>>());
    }

    /// Found by the spec_parse fuzzer: 1.3 million repetitions took 2.5 GB while
    /// expanding. A study over MAX_RUNS is refused when parsed, naming the key.
    #[test]
    fn a_study_of_millions_of_runs_is_refused_in_one_sentence() {
        let text = QUICK.replace("repetitions = 2", "repetitions = 1300000");
        let e = Spec::parse(&text, "t").unwrap_err().to_string();
        assert!(
            e.contains("experiment.repetitions = 1300000") && e.contains("7800000 runs"),
            "{e}"
        );
        let text = QUICK.replace("repetitions = 2", "repetitions = 16666");
        assert!(Spec::parse(&text, "t").is_ok(), "6 × 16666 runs are fine");
    }

    /// Regression (fuzz target spec_parse, crash-52e427f6…): skip_refused with a
    /// sweep whose every value is refused was accepted with no run at all.
    #[test]
    fn a_sweep_refused_whole_under_skip_refused_is_an_error() {
        let text = "[experiment]\nname = \"x\"\nskip_refused = true\n[dut]\nkind = \"link\"\n\
                    [app]\nkind = \"prrt\"\ngap_ms = 1\npayload_bytes = 20\ntarget_delay_ms = 10\n\
                    window_ms = 2\nduration_s = 2\noutage_threshold_ms = 100\n\
                    [sweep]\n\"app.gap_ms\" = [0]\n";
        let e = Spec::parse(text, "t")
            .and_then(|s| s.expand(text).map(|_| ()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("all 1 combinations of the sweep are refused") && e.contains("gap_ms"),
            "{e}"
        );
        // One value that runs is enough.
        let some = text.replace("[0]", "[0, 1]");
        let spec = Spec::parse(&some, "t").unwrap();
        let (plans, refused) = spec.expand_all(&some).unwrap();
        assert_eq!((plans.len(), refused.len()), (1, 1));
    }

    #[test]
    fn random_order_is_a_seeded_permutation() {
        let text = QUICK.replace(
            "repetitions = 2",
            "repetitions = 2\norder = \"random\"\nseed = 7",
        );
        let spec = Spec::parse(&text, "t").unwrap();
        let a = spec.expand(&text).unwrap();
        let b = spec.expand(&text).unwrap();
        let key = |r: &RunPlan| (r.combination, r.repetition);
        assert_eq!(
            a.iter().map(key).collect::<Vec<_>>(),
            b.iter().map(key).collect::<Vec<_>>()
        );
        let mut sorted: Vec<_> = a.iter().map(key).collect();
        assert_ne!(
            sorted,
            (0..12).map(|i| (i / 2, (i % 2) as u32)).collect::<Vec<_>>()
        );
        sorted.sort();
        assert_eq!(
            sorted,
            (0..12).map(|i| (i / 2, (i % 2) as u32)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let text = "[experiment]\nname = \"x\"\n[traffic]\nrate_ps = 5\n";
        let e = Spec::parse(text, "bad.toml").unwrap_err().to_string();
        assert!(e.contains("rate_ps"), "{e}");
        assert!(e.contains("line 4"), "{e}");
        assert!(e.contains("bad.toml"), "{e}");
    }

    #[test]
    fn zero_rate_is_rejected() {
        let text = "[experiment]\nname = \"x\"\n[traffic]\nrate_pps = 0\n";
        let e = Spec::parse(text, "s").unwrap_err().to_string();
        assert!(e.contains("positive number"), "{e}");
        assert!(e.contains("line 4"), "{e}");
    }

    #[test]
    fn frame_size_bounds() {
        for (size, ok) in [(63, false), (64, true), (1518, true), (1519, false)] {
            let text = format!("[experiment]\nname = \"x\"\n[traffic]\nframe_bytes = {size}\n");
            let r = Spec::parse(&text, "s");
            assert_eq!(r.is_ok(), ok, "{size}: {r:?}");
            if let Err(e) = r {
                let e = e.to_string();
                assert!(e.contains("frame_bytes") && e.contains("line 4"), "{e}");
            }
        }
    }

    #[test]
    fn sweep_over_unknown_key_or_bad_value_is_rejected() {
        let text = "[experiment]\nname = \"x\"\n[sweep]\n\"traffic.rte\" = [1]\n";
        let e = Spec::parse(text, "s").unwrap_err().to_string();
        assert!(e.contains("traffic.rte") && e.contains("rte"), "{e}");
        let text = "[experiment]\nname = \"x\"\n[sweep]\n\"traffic.rate_pps\" = [10, -1]\n";
        let e = Spec::parse(text, "s").unwrap_err().to_string();
        assert!(e.contains("rate_pps"), "{e}");
        let text = "[experiment]\nname = \"x\"\n[sweep]\n\"traffic.rate_pps\" = []\n";
        let e = Spec::parse(text, "s").unwrap_err().to_string();
        assert!(e.contains("empty list") && e.contains("line 4"), "{e}");
    }

    #[test]
    fn bad_anomaly_and_dut_kind() {
        let text = "[experiment]\nname = \"x\"\n[analysis]\nanomalies = [\"2:fast\"]\n";
        let e = Spec::parse(text, "s").unwrap_err().to_string();
        assert!(e.contains("2:fast"), "{e}");
        let text = "[experiment]\nname = \"x\"\n[dut]\nkind = \"linux-ruter\"\n";
        let e = Spec::parse(text, "s").unwrap_err().to_string();
        assert!(
            e.contains("linux-ruter") && e.contains("linux-router"),
            "{e}"
        );
    }

    #[test]
    fn includes_merge_under_the_file_and_resolve_relative_paths() {
        let dir = std::env::temp_dir().join(format!("nflab-include-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("frag")).unwrap();
        std::fs::write(
            dir.join("frag/common.toml"),
            "[traffic]\nrate_pps = 1234\nframe_bytes = 128\n[analysis]\nanomalies = [\"3:1ms\"]\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("main.toml"),
            "[experiment]\nname = \"inc\"\ninclude = [\"frag/common.toml\"]\n[traffic]\nframe_bytes = 256\n",
        )
        .unwrap();
        let (spec, text) = Spec::from_file(&dir.join("main.toml")).unwrap();
        assert_eq!(spec.traffic.rate_pps, Rate::Pps(1234.0));
        assert_eq!(
            spec.traffic.frame_bytes, 256,
            "the file overrides its includes"
        );
        assert_eq!(spec.analysis.anomalies, vec!["3:1ms".to_string()]);
        assert!(spec.experiment.include.is_empty() && !text.contains("include"));
        // The resolved text parses on its own (it is what spec.toml stores).
        assert_eq!(Spec::parse(&text, "resolved").unwrap(), spec);
        std::fs::write(
            dir.join("bad.toml"),
            "[experiment]\nname = \"x\"\ninclude = [\"missing.toml\"]\n",
        )
        .unwrap();
        let e = Spec::from_file(&dir.join("bad.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing.toml") && e.contains("line 3"), "{e}");
        std::fs::write(
            dir.join("loop.toml"),
            "[experiment]\nname = \"x\"\ninclude = [\"loop.toml\"]\n",
        )
        .unwrap();
        let e = Spec::from_file(&dir.join("loop.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cycle"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn model_section_parses_and_bad_keys_are_one_sentence() {
        let ok =
            "[experiment]\nname = \"x\"\n[model]\ncpu_hz = 3.3e9\ninterrupts = [\"250:10900\"]\n";
        let s = Spec::parse(ok, "s").unwrap();
        let m = s.model.clone().unwrap();
        assert!(m.fit && m.cores == 1.0 && m.sim_packets == 200_000);
        assert_eq!(m.cpu_hz, Some(3.3e9));
        // Round trip: spec.toml as stored parses to the same spec.
        assert_eq!(Spec::parse(&toml::to_string(&s).unwrap(), "s").unwrap(), s);
        assert!(Spec::parse("[experiment]\nname = \"x\"\n", "s")
            .unwrap()
            .model
            .is_none());
        for (body, needles) in [
            ("cpu_hx = 1e9", &["cpu_hx", "line 4", "cpu_hz"][..]),
            ("cores = 0", &["model.cores = 0", "line 4"]),
            ("cpu_hz = -1", &["model.cpu_hz", "line 4"]),
            ("batch = 0", &["model.batch = 0", "1 or more"]),
            (
                "interrupts = [\"250\"]",
                &["model.interrupts", "RATE_HZ:DURATION_NS", "line 4"],
            ),
            ("sim_packets = 0", &["model.sim_packets", "1 to"]),
            ("fit = \"yes\"", &["fit", "line 4"]),
        ] {
            let text = format!("[experiment]\nname = \"x\"\n[model]\n{body}\n");
            let e = Spec::parse(&text, "s").unwrap_err().to_string();
            assert_eq!(e.lines().count(), 1, "{e}");
            for n in needles {
                assert!(e.contains(n), "{body}: {n:?} not in {e}");
            }
        }
    }

    #[test]
    fn tx_timestamp_key_values_and_its_backend() {
        let t = |v: &str| {
            Spec::parse(
                &format!("[experiment]\nname = \"x\"\n[traffic]\ntx_timestamp = {v}\n"),
                "s",
            )
        };
        assert_eq!(
            t("\"kernel\"").unwrap().traffic.tx_timestamp,
            TxTimestampMode::Kernel
        );
        assert_eq!(
            t("\"app\"").unwrap().traffic.tx_timestamp,
            TxTimestampMode::App
        );
        let d = Spec::parse("[experiment]\nname = \"x\"\n", "s").unwrap();
        assert_eq!(d.traffic.tx_timestamp, TxTimestampMode::App);
        let e = t("\"nic\"").unwrap_err().to_string();
        assert!(
            e.contains("line 4")
                && e.contains("nic")
                && e.contains("`app`")
                && e.contains("`kernel`"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
        let e = Spec::parse(
            "[experiment]\nname = \"x\"\n[traffic]\nbackend = \"af_xdp\"\ntx_timestamp = \"kernel\"\n",
            "s",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("line 5") && e.contains("tx_timestamp") && e.contains("af_packet"),
            "{e}"
        );
    }

    #[test]
    fn rate_max_round_trips() {
        let text = "[experiment]\nname = \"x\"\n[traffic]\nrate_pps = \"max\"\n";
        let s = Spec::parse(text, "s").unwrap();
        assert_eq!(s.traffic.rate_pps, Rate::Max);
        let back = toml::to_string(&s).unwrap();
        assert!(back.contains("rate_pps = \"max\""), "{back}");
    }
}
