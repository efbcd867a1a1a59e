//! The topology a run's spec asks for: namespaces on this host, plumbed by the
//! DuT kind's driver, or real hosts with the DuT host set up over SSH.

use crate::dut::driver;
use crate::error::LabError;
use crate::spec::{Backend, Spec, TopologyKind, TrafficSection};
use crate::topo::Topology;

/// Queues per veth the generator of `traffic` needs: one per AF_XDP TX thread (an
/// AF_XDP socket binds one queue), else one.
pub fn generator_queues(traffic: &TrafficSection) -> u32 {
    if traffic.backend == Backend::AfXdp {
        u32::try_from(traffic.tx_threads).unwrap_or(1).max(1)
    } else {
        1
    }
}

/// Queues per veth for `spec`: the generator's ([`generator_queues`]) or the DuT's,
/// whichever is more.
pub fn veth_queues(spec: &Spec) -> u32 {
    let dut = driver(spec.dut.kind).queues(&spec.dut);
    generator_queues(&spec.traffic).max(dut).max(1)
}

/// The topology `spec` asks for.
pub fn for_spec(spec: &Spec) -> Result<Topology, LabError> {
    let kind = spec.dut.kind;
    if spec.topology.kind != TopologyKind::Hosts {
        return crate::dut::registry::topology_for(&spec.dut, veth_queues(spec));
    }
    let dut = driver(kind);
    dut.check_hosts(&spec.hosts).map_err(LabError::Host)?;
    dut.hosts_topology(spec)
}
