//! DuT kind `link`: an emulated link between dut0 and dut1, both ways.
//!
//! Two workers of the nflab data plane ([`crate::dut::nflab::spawn`]), each
//! with the one-function pipeline `["link"]`
//! ([`nflab_dataplane::emulator`]): dut0 → dut1 with `[dut.link]`, and
//! dut1 → dut0 with `[dut.link]` overridden by `[dut.link.reverse]`, so
//! request/response traffic crosses the link both ways. Frames pass
//! unchanged, as over a cable: the generator addresses lg1 directly.
//!
//! The ports are AF_PACKET (both workers receive on one interface and send
//! on the other, and an interface's AF_XDP queue takes one socket); both
//! workers run on the DuT's CPU and, unless `dut.rx_mode` says otherwise,
//! in `adaptive` mode, so an idle direction sleeps.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nflab_dataplane::WorkerStats;

use crate::dut::alone::{Counters, Standalone, StandaloneConfig};
use crate::dut::nflab::{lab_context, spawn, NflabDut, INPUT_IFACE, OUTPUT_IFACE};
use crate::dut::{write_dut_json, DutDriver, RunningDut, Stopped};
use crate::error::LabError;
use crate::spec::{DutKind, DutSection};
use crate::topo::Plumbing;
use crate::topo::Topology;

/// A running link DuT: one worker per direction.
pub struct LinkDut {
    forward: NflabDut,
    reverse: NflabDut,
}

/// The counters of both directions, as stored in `dut.json`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LinkStats {
    /// dut0 → dut1 (the generator's direction).
    pub forward: WorkerStats,
    /// dut1 → dut0.
    pub reverse: WorkerStats,
}

impl LinkStats {
    /// The first error of either direction.
    pub fn error(&self) -> Option<String> {
        self.forward
            .error
            .clone()
            .or_else(|| self.reverse.error.clone())
    }
}

/// The nflab data-plane section of one direction of a link `dut`.
pub fn direction(dut: &DutSection, reverse: bool) -> DutSection {
    let link = dut.link.clone().unwrap_or_default();
    let link = if reverse {
        link.reversed()
    } else {
        nflab_dataplane::config::LinkConfig {
            reverse: None,
            ..link
        }
    };
    DutSection {
        kind: DutKind::Nflab,
        pipeline: Some(vec!["link".into()]),
        batch: dut.batch,
        rx_mode: Some(dut.rx_mode.clone().unwrap_or_else(|| "adaptive".into())),
        drain_us: dut.drain_us,
        wake_early_us: dut.wake_early_us,
        link_capacity: dut.link_capacity,
        cpu: dut.cpu,
        realtime: dut.realtime,
        io: Some("af_packet".into()),
        link: Some(link),
        ..DutSection::default()
    }
}

/// Start both directions of the link in the DuT namespace of `topo`.
pub fn start(topo: &Topology, dut: &DutSection) -> Result<LinkDut, LabError> {
    let ns = crate::dut::dut_namespace(topo, "link")?;
    start_in(Some(ns), (INPUT_IFACE, OUTPUT_IFACE), dut)
}

/// Start both directions between `ports.0` and `ports.1` (in namespace `ns`, if given).
pub fn start_in(
    ns: Option<String>,
    (a, b): (&str, &str),
    dut: &DutSection,
) -> Result<LinkDut, LabError> {
    dut.check_link()?;
    let forward = spawn(
        ns.clone(),
        a,
        b,
        &direction(dut, false),
        Some(lab_context()),
    )?;
    let reverse = spawn(ns, b, a, &direction(dut, true), Some(lab_context()))?;
    Ok(LinkDut { forward, reverse })
}

impl LinkDut {
    /// Whether a direction has stopped on its own (a port failed).
    pub fn has_stopped(&self) -> bool {
        self.forward.has_stopped() || self.reverse.has_stopped()
    }

    /// Stop both directions and return their counters.
    pub fn stop(self) -> LinkStats {
        LinkStats {
            forward: self.forward.stop(),
            reverse: self.reverse.stop(),
        }
    }
}

impl DutSection {
    /// Check a link DuT section: `[dut.link]`, `[dut.link.reverse]` and the
    /// engine keys that apply; the error names the key and what is valid.
    pub fn check_link(&self) -> Result<(), LabError> {
        let bad = |m: String| Err(LabError::Unsupported(m));
        for (key, set) in [
            ("pipeline", self.pipeline.is_some()),
            ("forward_mode", self.forward_mode.is_some()),
            ("command", self.command.is_some()),
            ("workers", self.workers.is_some()),
            ("l2fwd", self.l2fwd.is_some()),
            ("router", self.router.is_some()),
            ("sheep", self.sheep.is_some()),
            ("delayer", self.delayer.is_some()),
            ("reorder", self.reorder.is_some()),
            ("extern_dispatch", self.extern_dispatch.is_some()),
        ] {
            if set {
                return bad(format!(
                    "dut.{key} does not apply to dut.kind = \"link\": it takes [dut.link] and cpu, io, batch, rx_mode, drain_us, wake_early_us, link_capacity (for functions around a link, use dut.kind = \"nflab\" with \"link\" in the pipeline)"
                ));
            }
        }
        if self.io.as_deref() == Some("af_xdp") {
            return bad(
                "dut.io = \"af_xdp\" cannot serve a link, which receives and sends on both interfaces: use af_packet (or auto)".into(),
            );
        }
        self.check_io("use af_packet or auto")?;
        let forward = direction(self, false);
        forward.check_nflab()?;
        let reverse = direction(self, true);
        let base = std::path::Path::new(".");
        let c = reverse.link.clone().unwrap_or_default();
        nflab_dataplane::config::link_params(&c, "dut.link.reverse", base)
            .map_err(|e| LabError::Unsupported(e.0))?;
        Ok(())
    }
}

/// Start the link of a standalone config: both directions between its ports
/// (returns once both workers have their sockets open).
pub fn start_standalone(config: &StandaloneConfig) -> Result<LinkDut, LabError> {
    let p = &config.ports;
    start_in(p.netns.clone(), (&p.input, &p.output), &config.dut)
        .map_err(|e| LabError::Other(e.to_string()))
}

/// `nflab dut CONFIG` with `[dut] kind = "link"`: the link between `[ports]
/// input` (dut0's side: `[dut.link]` applies to frames received there) and
/// `output` (`[dut.link.reverse]`), until `stop` is set or `duration` has
/// passed.
pub fn run_standalone(
    config: &StandaloneConfig,
    duration: Option<Duration>,
    stop: &AtomicBool,
) -> Result<LinkStats, LabError> {
    let link = start_standalone(config)?;
    let t0 = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed)
        && !link.has_stopped()
        && duration.is_none_or(|d| t0.elapsed() < d)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(link.stop())
}

/// `link`: an emulated link both ways.
pub struct LinkDriver;

impl Plumbing for LinkDriver {
    fn software_checksums_at_loadgen(&self) -> bool {
        true
    }

    fn plumb(&self, ns: &str) -> Result<(), LabError> {
        crate::dut::kernel_forwarding_off(ns)
    }
}

impl DutDriver for LinkDriver {
    fn kind(&self) -> DutKind {
        DutKind::Link
    }

    fn standalone(&self) -> Option<&dyn Standalone> {
        Some(self)
    }

    fn check(&self, spec: &crate::spec::Spec) -> Result<(), LabError> {
        spec.dut.check_link()
    }

    fn why_not_realtime(&self) -> Option<&'static str> {
        None
    }

    /// A second worker carries dut1 → dut0, with `[dut.link.reverse]`.
    fn reverse_path(&self, _: &DutSection) -> Result<nflab_wire::MacAddr, &'static str> {
        Ok(crate::addresses::LG0_MAC)
    }

    fn joins_one_subnet(&self) -> bool {
        true
    }

    fn start(
        &self,
        topo: &Topology,
        dut: &DutSection,
        _seed: u64,
        _dir: &std::path::Path,
    ) -> Result<Box<dyn RunningDut>, LabError> {
        Ok(Box::new(start(topo, dut)?))
    }
}

impl Standalone for LinkDriver {
    fn check(&self, dut: &DutSection) -> Result<(), LabError> {
        dut.check_link()
    }

    fn run(
        &self,
        config: &StandaloneConfig,
        duration: Option<Duration>,
        stop: &AtomicBool,
    ) -> Result<Counters, LabError> {
        let stats = run_standalone(config, duration, stop)?;
        let error = stats.error();
        Counters::of(&stats, error)
    }
}

impl RunningDut for LinkDut {
    fn stop(self: Box<Self>, dir: &std::path::Path) -> Result<Stopped, LabError> {
        let stats = LinkDut::stop(*self);
        let error = stats.error();
        write_dut_json(dir, &stats, error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nflab_dataplane::packet;

    /// Each `nflab run` of a link DuT checks its section on the calling
    /// thread (preflight, `start_in`, and `spawn` per direction). Those checks
    /// once left each delay line's packet buffers in this thread's pool,
    /// about 100 MB per run of a sweep; they must leave the pool as it was.
    #[test]
    fn checking_a_link_section_again_and_again_keeps_no_packet_buffers() {
        let dut: DutSection = toml::from_str(
            "kind = \"link\"\n[link]\ndelay_us = 7610\njitter_us = 1050\n\
             distribution = \"normal\"\nrate_mbps = 53.3\nqueue_packets = 100\n",
        )
        .unwrap();
        let (free0, fresh0) = (packet::pool_free(), packet::pool_allocations());
        for run in 0..12 {
            dut.check_link().unwrap();
            direction(&dut, false).check_nflab().unwrap();
            direction(&dut, true).check_nflab().unwrap();
            assert_eq!(packet::pool_free(), free0, "run {run}");
            assert_eq!(packet::pool_allocations(), fresh0, "run {run}");
        }
    }
}
