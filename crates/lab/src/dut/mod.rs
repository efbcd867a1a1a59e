//! Devices under test: one driver per kind behind one trait ([`DutDriver`]),
//! and the registry ([`registry::driver`]) that maps a kind to its driver — the
//! only place that matches on [`DutKind`].
//!
//! A driver checks its `[dut]` keys before anything exists, says whether
//! `dut.realtime` can apply, plumbs the DuT namespace of the netns topology
//! ([`Plumbing`]), names where the generator addresses its frames, and starts
//! the DuT for a run. The running DuT's `stop` writes its files (`dut.json`
//! where the kind has one); dropping it stops it too, so a run that ends early
//! leaves nothing running.
//!
//! Each driver also says whether the kind carries probes the other way, from the
//! recorder's port back to the generator's (`traffic.direction`), and where they go.
//!
//! Where other code needs to know what a kind does or carries (the OvS keys, IPv6
//! and VLANs, the monitors, `nflab topo up`, `nflab dut`), it asks the driver; a
//! sentence that lists kinds lists those whose driver says yes
//! ([`registry::kinds_where`]).
//!
//! Adding a kind: a variant of `DutKind` (spec/dut.rs, with its keys in
//! `DutSection`), a file here with its driver and the check of its keys, and its
//! line in the registry (`driver` and `KINDS`); the registry's match does not
//! compile until the kind has one, nor its test until `KINDS` lists it. DESIGN
//! §2.1 lists every method a driver answers.

pub mod alone;
pub mod external;
pub mod kernel;
pub mod link;
pub mod nflab;
pub mod ovs;
pub mod registry;
pub mod relay;
pub mod standalone;
pub mod testpmd;

use std::path::Path;

use crate::error::LabError;
use crate::hosts::remote_dut::RemoteSetup;
use crate::spec::hosts::Inventory;
use crate::spec::{DutKind, DutSection, Spec};
pub use crate::topo::Plumbing;
use crate::topo::Topology;
use nflab_wire::{MacAddr, ProbeSpec};
pub use registry::{driver, topology};

/// What nflab knows of one DuT kind.
pub trait DutDriver: Plumbing + Sync {
    /// The kind this driver runs.
    fn kind(&self) -> DutKind;

    /// Whether this version of nflab runs the kind at all.
    fn available(&self) -> bool {
        true
    }

    /// Check the spec's `[dut]` keys for this kind (and what else of the spec the
    /// kind constrains) and what it needs of this host, before anything exists;
    /// a refusal is one sentence naming the key.
    fn check(&self, spec: &Spec) -> Result<(), LabError>;

    /// Why `dut.realtime = true` cannot apply to this kind; `None` where it does.
    fn why_not_realtime(&self) -> Option<&'static str>;

    /// Queues per veth the DuT needs (one per data-plane worker).
    fn queues(&self, _dut: &DutSection) -> u32 {
        1
    }

    /// How a remote DuT host is set up for this kind (`topology.kind = "hosts"`,
    /// `[[pair]]`); `None` where nflab cannot set one up.
    fn remote_setup(&self) -> Option<RemoteSetup> {
        None
    }

    /// Check `[hosts]` for `topology.kind = "hosts"` with this kind; the sentence
    /// names the key. By default: the inventory of a DuT host set up as
    /// [`DutDriver::remote_setup`] says, refused for a kind without one.
    fn check_hosts(&self, hosts: &Inventory) -> Result<(), String> {
        crate::hosts::remote_dut::validate(hosts)?;
        if self.remote_setup().is_none() {
            return Err(format!(
                "dut.kind = \"{}\" on a remote host is not available yet; valid with topology.kind = \"hosts\": {}",
                self.kind().as_str(),
                registry::names_where(|d| d.remote_setup().is_some()).join(", ")
            ));
        }
        Ok(())
    }

    /// The hosts topology of `spec` (checked by [`DutDriver::check_hosts`]): by default
    /// the DuT host `[hosts.dut]` set up as [`DutDriver::remote_setup`] says.
    fn hosts_topology(&self, spec: &Spec) -> Result<Topology, LabError> {
        let setup = self.remote_setup().ok_or_else(|| {
            LabError::Unsupported(format!(
                "dut.kind = \"{}\" cannot be set up on a remote host yet",
                self.kind().as_str()
            ))
        })?;
        Topology::on_hosts(
            self.kind(),
            setup,
            &spec.hosts["loadgen"],
            &spec.hosts["dut"],
        )
    }

    /// Where the reverse direction's probes (sent from the recorder's port,
    /// `traffic.direction` = "reverse" or "both") are addressed on the netns topology,
    /// or why the kind carries one direction only (a sentence's end: "it …").
    fn reverse_path(&self, dut: &DutSection) -> Result<MacAddr, &'static str>;

    /// Whether the kind's hosts topology (`topology.kind = "hosts"`) carries the reverse
    /// direction's probes: nflab drives both of its ports from this machine.
    fn reverse_on_hosts(&self) -> bool {
        false
    }

    /// Whether the kind takes Open vSwitch's keys (`dut.hops`, `dut.hop_cables`,
    /// `dut.hop_order`, `dut.port_type`, `dut.bridges`, `dut.shape`, `dut.depth`,
    /// `dut.controller`, `dut.egress_rate_bps`, `dut.priority_dscp`); they are
    /// refused in one sentence for every other kind.
    fn takes_ovs_keys(&self) -> bool {
        false
    }

    /// Whether the kind is known to carry IPv6 and VLAN-tagged probes
    /// (`traffic.ip_version = 6`, `traffic.vlan`), as a DuT that cannot is refused
    /// naming those that can.
    fn carries_ipv6_and_vlan(&self) -> bool {
        false
    }

    /// Why the kind cannot carry IPv6 probes and why not VLAN-tagged ones, where it
    /// cannot (each the end of a sentence: "which …"); checked before a run.
    fn refuses_ipv6_and_vlan(&self) -> Option<(&'static str, &'static str)> {
        None
    }

    /// Whether `[monitor] kind = "udp"` can watch it: a UDP VNF's socket in the DuT
    /// namespace on the probe port.
    fn udp_monitor(&self) -> bool {
        false
    }

    /// The kernel stages `[monitor] kind = "stages"` timestamps on this kind's path,
    /// in path order (`nflab_monitor::stages`); `None` for a kind without them.
    fn stages(&self) -> Option<&'static [nflab_monitor::stages::Stage]> {
        None
    }

    /// Whether the DuT is its namespace's plumbing alone: nflab runs nothing for it
    /// (its `start` is [`NothingRunning`]), so `nflab topo up` can build its topology
    /// and leave it up with nothing to stop.
    fn plumbing_alone(&self) -> bool {
        false
    }

    /// How `nflab dut CONFIG.toml` runs the kind alone on named interfaces; `None`
    /// for a kind it does not run.
    fn standalone(&self) -> Option<&dyn alone::Standalone> {
        None
    }

    /// Whether both ends of an application in one subnet (a plant behind lg1, its
    /// controller on lg0) reach each other across this DuT, both ways.
    fn joins_one_subnet(&self) -> bool {
        false
    }

    /// Start the DuT in `topo` for the run in `dir` (`seed`: the run's, for a DuT
    /// that draws).
    fn start(
        &self,
        topo: &Topology,
        dut: &DutSection,
        seed: u64,
        dir: &Path,
    ) -> Result<Box<dyn RunningDut>, LabError>;

    /// Whether a DuT of this kind keeps running with a kept topology (`topology.keep =
    /// true`): started by the first run and stopped with the topology, instead of per run.
    fn lives_with_kept_topology(&self) -> bool {
        false
    }

    /// [`DutDriver::start`] for a run whose probes also go the reverse way: a DuT that
    /// forwards each way on its own workers starts the reverse way's too.
    fn start_both_ways(
        &self,
        topo: &Topology,
        dut: &DutSection,
        seed: u64,
        dir: &Path,
    ) -> Result<Box<dyn RunningDut>, LabError> {
        self.start(topo, dut, seed, dir)
    }
}

/// A DuT running for one run. Dropping it stops it without writing anything.
pub trait RunningDut {
    /// The probes' addressing for this DuT, from the topology's (`base`): a DuT that
    /// finds its own MAC or addresses when it starts says so here.
    fn probe(&self, base: ProbeSpec) -> ProbeSpec {
        base
    }

    /// The reverse direction's probes' addressing, from the topology's (`base`),
    /// asked only when the run sends that way: a DuT that must find where they go
    /// (an external box's gateway on the recorder's side) does it here.
    fn reverse_probe(&mut self, base: ProbeSpec) -> Result<ProbeSpec, LabError> {
        Ok(base)
    }

    /// Stop the DuT and write what it recorded into the run's directory `dir`
    /// (`dut.json` where the kind has one); an error when it failed during the
    /// run, after its files are written.
    fn stop(self: Box<Self>, dir: &Path) -> Result<Stopped, LabError>;

    /// A run in `dir` used this DuT, kept running since run `started_in`
    /// ([`DutDriver::lives_with_kept_topology`]): write what that run needs to know.
    fn note_kept_run(&mut self, _dir: &Path, _started_in: usize) -> Result<Stopped, LabError> {
        Ok(Stopped::default())
    }
}

/// What a stopped DuT hands on to the rest of the run.
#[derive(Debug, Default)]
pub struct Stopped {
    /// The udp relay's own record of every datagram (the monitor's ground truth).
    pub truth: Option<Vec<nflab_apps::relay::TruthRow>>,
}

/// A DuT nflab does not run a process or thread for (the kernel's forwarding).
pub struct NothingRunning;

impl RunningDut for NothingRunning {
    fn stop(self: Box<Self>, _dir: &Path) -> Result<Stopped, LabError> {
        Ok(Stopped::default())
    }
}

/// The DuT namespace of `topo`, or the sentence that `kind` needs one.
pub(crate) fn dut_namespace(topo: &Topology, kind: &str) -> Result<String, LabError> {
    topo.dut_ns
        .clone()
        .ok_or_else(|| LabError::Topology(format!("the {kind} DuT needs a DuT namespace")))
}

/// Plumbing of a DuT that reads dut0 and dut1 itself (a data plane, testpmd, Open
/// vSwitch): the kernel must not forward a copy of what it sees there.
pub(crate) fn kernel_forwarding_off(ns: &str) -> Result<(), LabError> {
    crate::net::cmd::sysctl(ns, &["net.ipv4.ip_forward=0"])
}

/// Write `dut.json`, then turn the DuT's own error into the run's.
pub(crate) fn write_dut_json<T: serde::Serialize>(
    dir: &Path,
    stats: &T,
    error: Option<String>,
) -> Result<Stopped, LabError> {
    crate::artifacts::files::write_json(&dir.join("dut.json"), stats)?;
    match error {
        Some(e) => Err(LabError::Other(e)),
        None => Ok(Stopped::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_no_remote_host_can_be_is_refused_naming_those_that_can() {
        let good = "[loadgen]\naddress = \"local\"\ntx_iface = \"a\"\nrx_iface = \"b\"\n[dut]\naddress = \"root@h\"\ningress_iface = \"c\"\negress_iface = \"d\"\n";
        let hosts: Inventory = toml::from_str(good).unwrap();
        driver(DutKind::LinuxRouter).check_hosts(&hosts).unwrap();
        let e = driver(DutKind::Loopback).check_hosts(&hosts).unwrap_err();
        assert_eq!(
            e,
            "dut.kind = \"loopback\" on a remote host is not available yet; valid with topology.kind = \"hosts\": linux-router, linux-bridge"
        );
    }

    #[test]
    fn dut_cpu_and_io_are_checked_alike_for_both_software_duts() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        type Check = fn(&DutSection) -> Result<(), LabError>;
        let checks: [(DutKind, Check); 2] = [
            (DutKind::Nflab, DutSection::check_nflab),
            (DutKind::Testpmd, DutSection::check_testpmd),
        ];
        for (kind, check) in checks {
            let dut = |cpu: Option<usize>, io: Option<&str>| DutSection {
                kind,
                pipeline: (kind == DutKind::Nflab).then(|| vec!["l2fwd".into()]),
                cpu,
                io: io.map(String::from),
                ..DutSection::default()
            };
            assert_eq!(dut(None, None).dut_cpu().unwrap(), cpus - 1);
            check(&dut(Some(cpus - 1), Some("af_packet"))).expect("last CPU, AF_PACKET");
            let e = check(&dut(Some(cpus), None)).unwrap_err().to_string();
            assert!(
                e.contains(&format!("dut.cpu = {cpus} does not exist")),
                "{kind:?}: {e}"
            );
            let e = check(&dut(None, Some("dpdk"))).unwrap_err().to_string();
            assert!(
                e.contains("dut.io = \"dpdk\" is not known") && e.contains("af_packet"),
                "{kind:?}: {e}"
            );
        }
    }
}
