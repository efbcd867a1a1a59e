//! DuT kind `ovs`: Open vSwitch on the userspace datapath between dut0 and
//! dut1 (docs/sdn.md).
//!
//! nflab starts `ovsdb-server` and `ovs-vswitchd` in the DuT namespace, in a
//! run directory of their own ([`nflab_sdn::ovs`]), with one bridge `br0`
//! (`datapath_type=netdev`, fail mode secure): dut0 is OpenFlow port 1, dut1
//! port 2, and two flows cable them both ways (`in_port=1 → 2`,
//! `in_port=2 → 1`), so frames pass unchanged and the generator addresses
//! lg1 directly. With `dut.hops = k` (FLOWer), k veth pairs `hNa`/`hNb`
//! are looped on the bridge and the flows send each frame out of every one
//! in turn (dut0 → h1a ⇒ h1b → h2a ⇒ … ⇒ hkb → dut1), so its latency grows
//! by k port hops. With `dut.bridges = n`, n bridges `br0`…`br<n-1>` form a
//! pipeline joined by patch ports, cabled as `dut.shape` says
//! ([`nflab_sdn::pipeline`]); with `dut.controller = "proxy"` its flows come
//! from nflab's controller through the TableVisor-class proxy. The daemons
//! stop when the run's recorder is done, and die with nflab if it is killed
//! (`nflab topo gc` removes what is left).

use nflab_sdn::ovs::{BridgeOptions, Ovs};
use nflab_sdn::pipeline::{self, Proxied, Shape};
use nflab_sdn::qos::EgressQos;
use serde::Serialize;

use crate::dut::{write_dut_json, DutDriver, RunningDut, Stopped};
use crate::error::LabError;
use crate::spec::{DutKind, DutSection};
use crate::topo::Plumbing;
use crate::topo::Topology;

/// Bridge name in the DuT namespace.
pub const BRIDGE: &str = "br0";
/// The two flows of the plain `ovs` DuT.
pub const FLOWS: [&str; 2] = ["in_port=1,actions=output:2", "in_port=2,actions=output:1"];

/// A running `ovs` DuT.
pub struct OvsDut {
    ovs: Ovs,
    bridges: u32,
    proxy: Option<Proxied>,
    /// dut1 has OvS queues (`dut.egress_rate_bps`).
    queues: bool,
}

/// Most port hops `dut.hops` takes.
pub const MAX_HOPS: u32 = 64;

/// OpenFlow port of cable i's end `h<i>a`; `h<i>b` is the next number.
fn cable_ofport(i: u32) -> u16 {
    10 + 2 * i as u16
}

/// The flows of a cycle: dut0 is port 1, dut1 port 2, and hop i leaves on
/// `legs[i].0` and comes back on `legs[i].1` (OpenFlow ports).
pub fn cycle_flows(legs: &[(u16, u16)]) -> Vec<String> {
    if legs.is_empty() {
        return FLOWS.iter().map(|s| s.to_string()).collect();
    }
    let mut v = vec!["in_port=2,actions=output:1".to_string()];
    let mut from = 1;
    for &(out, back) in legs {
        v.push(format!("in_port={from},actions=output:{out}"));
        from = back;
    }
    v.push(format!("in_port={from},actions=output:2"));
    v
}

/// The `hops` legs of the FLOWer cycle as `dut.hop_order` lays them out:
/// "ports" takes cables 0, 1, … leaving on `h<i>a`; "poll" (the default on
/// system ports) orders all cables on the bridge against ovs-vswitchd's
/// polling walk ([`nflab_sdn::poll_order`]) and takes the first `hops`.
fn cycle_legs(
    ovs: &Ovs,
    dut: &DutSection,
    hops: u32,
) -> Result<Vec<(u16, u16)>, nflab_sdn::SdnError> {
    let by_port_number = (0..hops)
        .map(|i| (cable_ofport(i), cable_ofport(i) + 1))
        .collect();
    let afxdp = dut.port_type.as_deref() == Some("afxdp");
    if hops == 0 || afxdp || dut.hop_order.as_deref() == Some("ports") {
        return Ok(by_port_number);
    }
    let ports = ovs.datapath_ports()?;
    let number = |name: &str| {
        ports
            .iter()
            .find(|(_, n)| n == name)
            .map(|(no, _)| *no)
            .ok_or_else(|| nflab_sdn::SdnError::Ovs(format!("port {name} is not on the datapath")))
    };
    let cables = dut.hop_cables.unwrap_or(hops).max(hops);
    let ends = (0..cables)
        .map(|i| Ok((number(&format!("h{i}a"))?, number(&format!("h{i}b"))?)))
        .collect::<Result<Vec<_>, nflab_sdn::SdnError>>()?;
    let mut numbers: Vec<u32> = ports.iter().map(|(no, _)| *no).collect();
    numbers.sort_unstable(); // ports went in one by one, in number order
    let walk = nflab_sdn::poll_order::walk(&numbers);
    let legs = nflab_sdn::poll_order::cycle_against(&walk, number("dut0")?, &ends);
    Ok(legs
        .iter()
        .take(hops as usize)
        .map(|leg| {
            let a = cable_ofport(leg.cable as u32);
            if leg.out == ends[leg.cable].0 {
                (a, a + 1)
            } else {
                (a + 1, a)
            }
        })
        .collect())
}

/// What `dut.json` says about the run.
#[derive(Debug, Clone, Serialize)]
pub struct OvsStats {
    /// "ovs".
    pub kind: String,
    /// `ovs-vswitchd --version`, first line.
    pub version: String,
    /// The bridge's flows at the end of the run, with their counters
    /// (`ovs-ofctl dump-flows`).
    pub flows: Vec<String>,
    /// Port counters (`ovs-ofctl dump-ports`).
    pub ports: String,
    /// Frames each OvS queue of dut1 sent, `[queue, packets]` (with
    /// `dut.egress_rate_bps`; from the HTB class counters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queues: Option<Vec<(u32, u64)>>,
    /// Why the statistics could not be read, if they could not.
    pub error: Option<String>,
}

/// `[dut]` keys other than `hops` do not apply to `ovs`; the binaries must exist.
pub fn check(dut: &DutSection) -> Result<(), LabError> {
    let set = [
        ("pipeline", dut.pipeline.is_some()),
        ("batch", dut.batch.is_some()),
        ("rx_mode", dut.rx_mode.is_some()),
        ("drain_us", dut.drain_us.is_some()),
        ("wake_early_us", dut.wake_early_us.is_some()),
        ("command", dut.command.is_some()),
        ("link_capacity", dut.link_capacity.is_some()),
        ("workers", dut.workers.is_some()),
        ("io", dut.io.is_some()),
        ("forward_mode", dut.forward_mode.is_some()),
        ("link", dut.link.is_some()),
    ];
    if dut.bridges.is_some_and(|b| !(1..=16).contains(&b)) {
        return Err(LabError::Unsupported(format!(
            "dut.bridges = {} is not in 1..16",
            dut.bridges.unwrap_or(0)
        )));
    }
    if dut.bridges.is_some_and(|b| b > 1) && dut.hops.is_some() {
        return Err(LabError::Unsupported(
            "dut.hops needs a single bridge: leave dut.bridges out or set it to 1".into(),
        ));
    }
    if dut.hops.is_some_and(|h| h > MAX_HOPS) {
        return Err(LabError::Unsupported(format!(
            "dut.hops = {} is more than {MAX_HOPS} port hops",
            dut.hops.unwrap_or(0)
        )));
    }
    check_pipeline(dut)?;
    if let Some((key, _)) = set.iter().find(|(_, s)| *s) {
        return Err(LabError::Unsupported(format!(
            "dut.{key} does not apply to dut.kind = \"ovs\", which takes dut.hops, dut.hop_cables, dut.hop_order, dut.port_type, dut.cpu, dut.bridges, dut.shape, dut.depth and dut.controller"
        )));
    }
    for bin in ["ovs-vswitchd", "ovsdb-server"] {
        if nflab_io::process::find_system_tool(bin).is_none() {
            return Err(LabError::Host(format!(
                "dut.kind = \"ovs\" needs {bin}: apt-get install openvswitch-switch"
            )));
        }
    }
    Ok(())
}

/// The pipeline shape of `dut` (bidirectional unless `dut.shape` says otherwise).
fn shape(dut: &DutSection) -> Result<Shape, LabError> {
    match dut.shape.as_deref() {
        None => Ok(Shape::Bidirectional),
        Some(s) => Shape::parse(s).ok_or_else(|| {
            LabError::Unsupported(format!(
                "dut.shape = \"{s}\" is not a pipeline shape; valid: {}",
                Shape::NAMES.join(", ")
            ))
        }),
    }
}

/// Whether the flows come through the proxy (`dut.controller`).
fn via_proxy(dut: &DutSection) -> Result<bool, LabError> {
    match dut.controller.as_deref() {
        None | Some("ofctl") => Ok(false),
        Some("proxy") => Ok(true),
        Some(c) => Err(LabError::Unsupported(format!(
            "dut.controller = \"{c}\" is not known; valid: ofctl (flows by ovs-ofctl), proxy (nflab's controller through the proxy)"
        ))),
    }
}

/// `dut.shape`, `dut.depth` and `dut.controller` against each other.
fn check_pipeline(dut: &DutSection) -> Result<(), LabError> {
    let shape = shape(dut)?;
    let proxied = via_proxy(dut)?;
    let n = dut.bridges.unwrap_or(1);
    if let Some(d) = dut.depth {
        if shape != Shape::Staged {
            return Err(LabError::Unsupported(
                "dut.depth applies to dut.shape = \"staged\" only".into(),
            ));
        }
        if !(1..=n).contains(&d) {
            return Err(LabError::Unsupported(format!(
                "dut.depth = {d} is not in 1..{n} (dut.bridges)"
            )));
        }
    }
    if proxied && shape != Shape::Unidirectional {
        return Err(LabError::Unsupported(format!(
            "dut.controller = \"proxy\" needs dut.shape = \"unidirectional\" (the emulated switch's table 0 is on the first bridge, so frames enter there and leave on the last), not \"{}\"",
            dut.shape.as_deref().unwrap_or("bidirectional")
        )));
    }
    if let Some(d) = dut.priority_dscp {
        if dut.egress_rate_bps.is_none() {
            return Err(LabError::Unsupported(
                "dut.priority_dscp needs dut.egress_rate_bps (the queues sit on dut1's egress at that rate)".into(),
            ));
        }
        if d > 63 {
            return Err(LabError::Unsupported(format!(
                "dut.priority_dscp = {d} is not a DSCP (0..63)"
            )));
        }
    }
    if dut.egress_rate_bps.is_some()
        && (dut.hops.is_some()
            || dut.bridges.is_some_and(|b| b > 1)
            || dut.shape.is_some()
            || proxied)
    {
        return Err(LabError::Unsupported(
            "dut.egress_rate_bps takes a single bridge with its own flows: leave dut.hops, dut.bridges, dut.shape and dut.controller out".into(),
        ));
    }
    if dut.egress_rate_bps == Some(0) {
        return Err(LabError::Unsupported(
            "dut.egress_rate_bps = 0: the egress rate is at least 1 bit/s".into(),
        ));
    }
    if let Some(c) = dut.hop_cables {
        let hops = dut.hops.unwrap_or(0);
        if dut.hops.is_none() || !(hops..=MAX_HOPS).contains(&c) {
            return Err(LabError::Unsupported(format!(
                "dut.hop_cables = {c} needs dut.hops and must be in dut.hops ({hops})..{MAX_HOPS}"
            )));
        }
    }
    match dut.hop_order.as_deref() {
        None | Some("ports") => {}
        Some("poll") if dut.hops.is_none() => {
            return Err(LabError::Unsupported(
                "dut.hop_order = \"poll\" needs dut.hops (it orders the FLOWer cycle)".into(),
            ))
        }
        Some("poll") if dut.port_type.as_deref() == Some("afxdp") => {
            return Err(LabError::Unsupported(
                "dut.hop_order = \"poll\" follows the main thread's polling of system ports; with dut.port_type = \"afxdp\" a PMD thread polls, use \"ports\"".into(),
            ))
        }
        Some("poll") => {}
        Some(other) => {
            return Err(LabError::Unsupported(format!(
                "dut.hop_order = \"{other}\" is not valid; valid: \"poll\", \"ports\""
            )))
        }
    }
    match dut.port_type.as_deref() {
        None | Some("system") => {}
        Some("afxdp") => {
            if dut.shape.is_some() || proxied || dut.bridges.is_some_and(|b| b > 1) {
                return Err(LabError::Unsupported(
                    "dut.port_type = \"afxdp\" takes a single bridge with its own flows: leave dut.bridges, dut.shape and dut.controller out".into(),
                ));
            }
            if dut.realtime == Some(true) {
                // PMD threads inherit ovs-vswitchd's policy and spin: under
                // SCHED_FIFO the kernel throttles them 50 ms of every second.
                return Err(LabError::Unsupported(
                    "dut.realtime = true does not combine with dut.port_type = \"afxdp\": the PMD thread busy-polls, and under SCHED_FIFO the kernel would throttle it".into(),
                ));
            }
        }
        Some(other) => {
            return Err(LabError::Unsupported(format!(
                "dut.port_type = \"{other}\" is not valid; valid: \"system\", \"afxdp\""
            )))
        }
    }
    if dut.hops.is_some() && (dut.shape.is_some() || proxied) {
        return Err(LabError::Unsupported(
            "dut.hops (FLOWer) takes a single bridge with its own flows: leave dut.shape and dut.controller out".into(),
        ));
    }
    Ok(())
}

/// Start OvS in the DuT namespace of `topo` with `br0` cabling dut0 and dut1.
pub fn start(topo: &Topology, dut: &DutSection) -> Result<OvsDut, LabError> {
    check(dut)?;
    let ns = crate::dut::dut_namespace(topo, "ovs")?;
    let err = |e: nflab_sdn::SdnError| LabError::Other(format!("ovs DuT: {e}"));
    let ovs = Ovs::start(Some(&ns)).map_err(err)?;
    if dut.realtime == Some(true) {
        // Above the generator's and recorder's default threads, below the
        // kernel's per-CPU threads.
        ovs.vswitchd_realtime(40).map_err(err)?;
    }
    if dut.cpu.is_some() {
        ovs.vswitchd_affinity(dut.dut_cpu()?).map_err(err)?;
    }
    let stages = dut.bridges.unwrap_or(1);
    let shape = shape(dut)?;
    if via_proxy(dut)? {
        let log = ovs.dir().join("control.log").display().to_string();
        let proxied = nflab_sdn::netns::NetnsGuard::run(Some(&ns), || {
            Proxied::start(&ovs, stages, Some(log))
        })
        .and_then(|r| r)
        .map_err(err)?;
        return Ok(OvsDut {
            ovs,
            bridges: stages,
            proxy: Some(proxied),
            queues: false,
        });
    }
    if stages > 1 || dut.shape.is_some() {
        let depth = dut.depth.unwrap_or(stages);
        pipeline::build(&ovs, &pipeline::plan(stages, shape, depth), None).map_err(err)?;
        return Ok(OvsDut {
            ovs,
            bridges: stages,
            proxy: None,
            queues: false,
        });
    }
    ovs.add_bridge(BRIDGE, &BridgeOptions::default())
        .map_err(err)?;
    let port_type = dut.port_type.as_deref().filter(|t| *t != "system");
    ovs.add_port_of_type(BRIDGE, "dut0", 1, port_type)
        .map_err(err)?;
    ovs.add_port_of_type(BRIDGE, "dut1", 2, port_type)
        .map_err(err)?;
    let hops = dut.hops.unwrap_or(0);
    // Cables beyond `hops` are on the bridge, unused by the flows.
    for i in 0..dut.hop_cables.unwrap_or(hops).max(hops) {
        let (a, b) = (format!("h{i}a"), format!("h{i}b"));
        for args in [
            vec![
                "-n", &ns, "link", "add", &a, "type", "veth", "peer", "name", &b,
            ],
            vec!["-n", &ns, "link", "set", &a, "up"],
            vec!["-n", &ns, "link", "set", &b, "up"],
        ] {
            nflab_sdn::netns::run("ip", &args).map_err(err)?;
        }
        ovs.add_port_of_type(BRIDGE, &a, cable_ofport(i), port_type)
            .map_err(err)?;
        ovs.add_port_of_type(BRIDGE, &b, cable_ofport(i) + 1, port_type)
            .map_err(err)?;
    }
    let flows = match dut.egress_rate_bps {
        Some(rate_bps) => {
            let q = EgressQos {
                rate_bps,
                priority_dscp: dut.priority_dscp,
            };
            nflab_sdn::qos::apply(&ovs, "dut1", &q).map_err(err)?;
            let mut f = nflab_sdn::qos::flows(&q, 1, 2);
            f.push(FLOWS[1].to_string());
            f
        }
        None => cycle_flows(&cycle_legs(&ovs, dut, hops).map_err(err)?),
    };
    for flow in flows {
        ovs.ofctl(&["add-flow", BRIDGE, &flow]).map_err(err)?;
    }
    Ok(OvsDut {
        ovs,
        bridges: 1,
        proxy: None,
        queues: dut.egress_rate_bps.is_some(),
    })
}

impl OvsDut {
    /// The OvS instance (its run directory, `ovs-ofctl`).
    pub fn ovs(&self) -> &Ovs {
        &self.ovs
    }

    /// Read the counters, then stop both daemons.
    pub fn stop(self) -> OvsStats {
        let proxy_error = self
            .proxy
            .map(Proxied::stop)
            .and_then(Result::err)
            .map(|e| format!("the proxy: {e}"));
        let version = std::process::Command::new(nflab_io::process::system_tool("ovs-vswitchd"))
            .arg("--version")
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_string()
            })
            .unwrap_or_default();
        // Every bridge's flows; with several, each line starts with its bridge.
        let names: Vec<String> = if self.bridges > 1 {
            (0..self.bridges).map(|i| format!("br{i}")).collect()
        } else {
            vec![BRIDGE.to_string()]
        };
        let flows = names
            .iter()
            .map(|br| {
                self.ovs.ofctl(&["dump-flows", br]).map(|out| {
                    out.lines()
                        .filter(|l| l.contains("actions="))
                        .map(|l| {
                            if self.bridges > 1 {
                                format!("{br}: {}", l.trim())
                            } else {
                                l.trim().to_string()
                            }
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|v| v.concat());
        let ports = self.ovs.ofctl(&["dump-ports", BRIDGE]);
        let queues = self
            .queues
            .then(|| nflab_sdn::qos::class_packets(&self.ovs, "dut1").ok())
            .flatten();
        let error = flows
            .as_ref()
            .err()
            .or(ports.as_ref().err())
            .map(|e| e.to_string())
            .or(proxy_error);
        self.ovs.stop();
        OvsStats {
            kind: "ovs".into(),
            version,
            flows: flows.unwrap_or_default(),
            ports: ports.unwrap_or_default(),
            queues,
            error,
        }
    }
}

/// `ovs`: Open vSwitch's userspace datapath between dut0 and dut1.
pub struct OvsDriver;

impl Plumbing for OvsDriver {
    fn software_checksums_at_loadgen(&self) -> bool {
        true
    }

    fn plumb(&self, ns: &str) -> Result<(), LabError> {
        crate::dut::kernel_forwarding_off(ns)
    }
}

impl DutDriver for OvsDriver {
    fn kind(&self) -> DutKind {
        DutKind::Ovs
    }

    fn check(&self, spec: &crate::spec::Spec) -> Result<(), LabError> {
        check(&spec.dut)
    }

    fn takes_ovs_keys(&self) -> bool {
        true
    }

    fn why_not_realtime(&self) -> Option<&'static str> {
        None
    }

    /// The bidirectional shapes cable dut1 back to dut0 (without the hops of `dut.hops`).
    fn reverse_path(&self, dut: &DutSection) -> Result<nflab_wire::MacAddr, &'static str> {
        match shape(dut) {
            Ok(Shape::Bidirectional) | Err(_) => Ok(crate::addresses::LG0_MAC),
            Ok(_) => {
                Err("forwards dut0 → dut1 only with dut.shape = \"unidirectional\" or \"staged\"")
            }
        }
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

impl RunningDut for OvsDut {
    fn stop(self: Box<Self>, dir: &std::path::Path) -> Result<Stopped, LabError> {
        let stats = OvsDut::stop(*self);
        let error = stats.error.clone();
        write_dut_json(dir, &stats, error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_do_not_fit_are_one_sentence() {
        let dut = |f: &dyn Fn(&mut DutSection)| {
            let mut d = DutSection {
                kind: crate::spec::DutKind::Ovs,
                ..DutSection::default()
            };
            f(&mut d);
            check(&d).map_err(|e| e.to_string())
        };
        for (set, want) in [
            (
                &(|d: &mut DutSection| d.hops = Some(65)) as &dyn Fn(&mut DutSection),
                "more than 64",
            ),
            (
                &|d: &mut DutSection| d.bridges = Some(0),
                "dut.bridges = 0 is not in 1..16",
            ),
            (
                &|d: &mut DutSection| {
                    d.bridges = Some(2);
                    d.hops = Some(2)
                },
                "dut.hops needs a single bridge",
            ),
            (
                &|d: &mut DutSection| d.batch = Some(4),
                "dut.batch does not apply",
            ),
            (
                &|d: &mut DutSection| {
                    d.hops = Some(8);
                    d.hop_cables = Some(4)
                },
                "dut.hop_cables = 4 needs dut.hops and must be in dut.hops (8)..64",
            ),
            (
                &|d: &mut DutSection| d.port_type = Some("dpdk".into()),
                "dut.port_type = \"dpdk\" is not valid; valid: \"system\", \"afxdp\"",
            ),
            (
                &|d: &mut DutSection| {
                    d.port_type = Some("afxdp".into());
                    d.realtime = Some(true)
                },
                "dut.realtime = true does not combine with dut.port_type = \"afxdp\"",
            ),
            (
                &|d: &mut DutSection| {
                    d.port_type = Some("afxdp".into());
                    d.bridges = Some(2)
                },
                "dut.port_type = \"afxdp\" takes a single bridge",
            ),
            (
                &|d: &mut DutSection| {
                    d.bridges = Some(3);
                    d.depth = Some(2)
                },
                "dut.depth applies to dut.shape = \"staged\" only",
            ),
            (
                &|d: &mut DutSection| {
                    d.bridges = Some(3);
                    d.shape = Some("staged".into());
                    d.depth = Some(4)
                },
                "dut.depth = 4 is not in 1..3",
            ),
            (
                &|d: &mut DutSection| d.shape = Some("ring".into()),
                "dut.shape = \"ring\" is not a pipeline shape; valid: bidirectional, unidirectional, staged",
            ),
            (
                &|d: &mut DutSection| {
                    d.bridges = Some(2);
                    d.controller = Some("proxy".into())
                },
                "dut.controller = \"proxy\" needs dut.shape = \"unidirectional\"",
            ),
            (
                &|d: &mut DutSection| d.priority_dscp = Some(46),
                "dut.priority_dscp needs dut.egress_rate_bps",
            ),
            (
                &|d: &mut DutSection| {
                    d.egress_rate_bps = Some(1_000_000);
                    d.bridges = Some(2)
                },
                "dut.egress_rate_bps takes a single bridge",
            ),
            (
                &|d: &mut DutSection| d.hop_order = Some("walk".into()),
                "dut.hop_order = \"walk\" is not valid; valid: \"poll\", \"ports\"",
            ),
            (
                &|d: &mut DutSection| d.hop_order = Some("poll".into()),
                "dut.hop_order = \"poll\" needs dut.hops",
            ),
            (
                &|d: &mut DutSection| {
                    d.hops = Some(2);
                    d.port_type = Some("afxdp".into());
                    d.hop_order = Some("poll".into())
                },
                "a PMD thread polls, use \"ports\"",
            ),
        ] {
            let e = dut(set).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
        // Open vSwitch is a run dependency (scripts/deps.txt).
        dut(&|d: &mut DutSection| d.hops = Some(16)).unwrap();
        let text = "[experiment]\nname = \"x\"\n[dut]\nkind = \"linux-bridge\"\nhops = 2\n";
        let e = crate::spec::Spec::parse(text, "t.toml")
            .unwrap()
            .check_supported()
            .unwrap_err()
            .to_string();
        assert!(e.contains("apply to dut.kind = \"ovs\" only"), "{e}");
    }

    #[test]
    fn a_cycle_visits_every_hop_once_then_leaves() {
        assert_eq!(cycle_flows(&[]), FLOWS.to_vec());
        // The second cable crossed from its b end to its a end.
        let f = cycle_flows(&[(10, 11), (13, 12), (14, 15)]);
        assert_eq!(
            f,
            [
                "in_port=2,actions=output:1",
                "in_port=1,actions=output:10",
                "in_port=11,actions=output:13",
                "in_port=12,actions=output:14",
                "in_port=15,actions=output:2",
            ]
        );
    }
}
