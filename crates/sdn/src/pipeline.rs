//! Pipelines of Open vSwitch bridges (seed 003, Fig. 3.5; docs/sdn.md):
//! which bridge has which port and which flows, for the three shapes
//! TableVisor aggregates, and the flows the controller installs when the
//! pipeline sits behind the proxy as one emulated switch.
//!
//! - `bidirectional`: a chain br0 … br(n-1); dut0 on br0, dut1 on the last;
//!   frames cross every stage both ways (request/response offload).
//! - `unidirectional`: the same chain, forwarding dut0 → dut1 only; frames
//!   entering at dut1 are dropped (VNF offload in one direction).
//! - `staged`: dut0 and dut1 both on stage 1 (br0); a frame from dut0 goes
//!   `depth` stages deep and comes back the same way to leave on dut1
//!   ("only as deep as needed"); dut1 → dut0 stays on stage 1.
//!
//! Nothing here does I/O: `lab`'s `ovs` DuT builds the plan with `Ovs`.

use std::net::TcpListener;

use crate::bench::{connect_all, Peer};
use crate::conn::send;
use crate::error::SdnError;
use crate::of13::oxm::field;
use crate::of13::{Body, Message};
use crate::of13::{FlowMod, Instruction, Match, Oxm};
use crate::ovs::{BridgeOptions, Ovs};
use crate::proxy::config::{
    LinkEntry, PortEntry, ProxyConfig, ProxySection, SwitchEntry, TableEntry,
};
use crate::proxy::ProxyHandle;

/// Most bridges in a pipeline.
pub const MAX_BRIDGES: u32 = 16;

/// How the bridges are cabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Chain, both directions.
    Bidirectional,
    /// Chain, dut0 → dut1 only.
    Unidirectional,
    /// Hosts on stage 1; frames go `depth` stages deep and back.
    Staged,
}

impl Shape {
    /// The spec names: "bidirectional", "unidirectional", "staged".
    pub const NAMES: [&'static str; 3] = ["bidirectional", "unidirectional", "staged"];

    /// Parse a spec name.
    pub fn parse(name: &str) -> Option<Shape> {
        match name {
            "bidirectional" => Some(Shape::Bidirectional),
            "unidirectional" => Some(Shape::Unidirectional),
            "staged" => Some(Shape::Staged),
            _ => None,
        }
    }
}

/// A port of a bridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortPlan {
    /// A network interface of the namespace (dut0, dut1).
    Iface {
        /// Interface name.
        name: String,
        /// OpenFlow port.
        ofport: u16,
    },
    /// A patch port to another bridge.
    Patch {
        /// This end's name.
        name: String,
        /// The other end's name.
        peer: String,
        /// OpenFlow port.
        ofport: u16,
    },
}

/// One bridge: its name, ports and (`ovs-ofctl add-flow`) flows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgePlan {
    /// `br<i>`.
    pub name: String,
    /// Ports in the order they are added.
    pub ports: Vec<PortPlan>,
    /// Flows when nflab installs them with `ovs-ofctl` (no proxy).
    pub flows: Vec<String>,
}

fn patch(a: String, b: String, ofport: u16) -> PortPlan {
    PortPlan::Patch {
        name: a,
        peer: b,
        ofport,
    }
}

fn iface(name: &str, ofport: u16) -> PortPlan {
    PortPlan::Iface {
        name: name.into(),
        ofport,
    }
}

/// The bridges of a pipeline of `n` stages (1…16) of `shape`; `depth`
/// (staged only, 1…n) is how many stages a frame from dut0 visits.
pub fn plan(n: u32, shape: Shape, depth: u32) -> Vec<BridgePlan> {
    let name = |i: u32| format!("br{i}");
    match shape {
        Shape::Bidirectional | Shape::Unidirectional => (0..n)
            .map(|i| {
                let left = if i == 0 {
                    iface("dut0", 1)
                } else {
                    patch(format!("pb{i}l"), format!("pb{}r", i - 1), 1)
                };
                let right = if i + 1 == n {
                    iface("dut1", 2)
                } else {
                    patch(format!("pb{i}r"), format!("pb{}l", i + 1), 2)
                };
                let mut flows = vec!["in_port=1,actions=output:2".to_string()];
                if shape == Shape::Bidirectional {
                    flows.push("in_port=2,actions=output:1".into());
                }
                BridgePlan {
                    name: name(i),
                    ports: vec![left, right],
                    flows,
                }
            })
            .collect(),
        Shape::Staged => (0..n)
            .map(|i| {
                // Stage 1 holds both hosts (ports 1, 2) and the way deeper
                // (port 3); stage i > 1 has port 1 towards the hosts and 3 deeper.
                let mut ports = if i == 0 {
                    vec![iface("dut0", 1), iface("dut1", 2)]
                } else {
                    vec![patch(format!("pb{i}l"), format!("pb{}r", i - 1), 1)]
                };
                if i + 1 < n {
                    ports.push(patch(format!("pb{i}r"), format!("pb{}l", i + 1), 3));
                }
                let last = depth.saturating_sub(1);
                let flows: Vec<String> = match i {
                    0 if last == 0 => vec!["in_port=1,actions=output:2".into()],
                    0 => vec![
                        "in_port=1,actions=output:3".into(),
                        "in_port=3,actions=output:2".into(),
                    ],
                    _ if i == last => vec!["in_port=1,actions=in_port".into()],
                    _ if i < last => vec![
                        "in_port=1,actions=output:3".into(),
                        "in_port=3,actions=output:1".into(),
                    ],
                    // Stages deeper than `depth` are cabled but unused.
                    _ => vec![],
                };
                let mut flows = flows;
                if i == 0 {
                    flows.push("in_port=2,actions=output:1".into());
                }
                BridgePlan {
                    name: name(i),
                    ports,
                    flows,
                }
            })
            .collect(),
    }
}

/// Datapath id of stage `i` behind the proxy.
pub fn stage_dpid(i: u32) -> u64 {
    0x5700 + i as u64
}

/// The proxy's view of a unidirectional pipeline of `n` bridges: global
/// table i on stage i (local table 0 on the first, 1 on the others, whose
/// table 0 takes the proxy's entry rules), global port 1 = dut0 on the first
/// stage, 2 = dut1 on the last, and the patch cables as links.
pub fn proxy_config(n: u32, listen: &str, controller: &str, log: Option<String>) -> ProxyConfig {
    let sw = |i: u32| format!("s{i}");
    ProxyConfig {
        proxy: ProxySection {
            listen: listen.into(),
            controller: controller.into(),
            datapath_id: 0x57,
            apps: if log.is_some() {
                vec!["log".into(), "multi-switch".into()]
            } else {
                vec!["multi-switch".into()]
            },
            log,
            connect_timeout_s: 60.0,
            allow_remote_switches: false,
        },
        switches: (0..n)
            .map(|i| SwitchEntry {
                name: sw(i),
                datapath_id: stage_dpid(i),
            })
            .collect(),
        tables: (0..n)
            .map(|i| TableEntry {
                id: i as u8,
                switch: sw(i),
                local: u8::from(i > 0),
            })
            .collect(),
        ports: vec![
            PortEntry {
                id: 1,
                switch: sw(0),
                local: 1,
            },
            PortEntry {
                id: 2,
                switch: sw(n - 1),
                local: 2,
            },
        ],
        links: (1..n)
            .map(|i| LinkEntry {
                from: sw(i - 1),
                from_port: 2,
                to: sw(i),
                to_port: 1,
            })
            .collect(),
    }
}

/// The controller's flows on the emulated switch of [`proxy_config`]:
/// table 0 takes frames from port 1, every table passes them to the next,
/// the last outputs them on port 2.
pub fn proxy_flows(n: u32) -> Vec<FlowMod> {
    (0..n)
        .map(|i| {
            let matches = if i == 0 {
                Match::new(vec![Oxm::basic(field::IN_PORT, &1u32.to_be_bytes())])
            } else {
                Match::default()
            };
            let next = if i + 1 == n {
                Instruction::ApplyActions(vec![crate::of13::Action::Output {
                    port: 2,
                    max_len: 0,
                }])
            } else {
                Instruction::GotoTable(i as u8 + 1)
            };
            FlowMod::add(i as u8, 100, matches, vec![next])
        })
        .collect()
}

/// Add the bridges of `plans` to `ovs`: with `proxy`, each bridge gets that
/// controller target and the datapath id [`stage_dpid`]; without, nflab
/// installs the planned flows with `ovs-ofctl`.
pub fn build(ovs: &Ovs, plans: &[BridgePlan], proxy: Option<&str>) -> Result<(), SdnError> {
    for (i, b) in plans.iter().enumerate() {
        let opts = BridgeOptions {
            controller: proxy.map(|p| format!("tcp:{p}")),
            datapath_id: proxy.map(|_| stage_dpid(i as u32)),
            protocols: None,
        };
        ovs.add_bridge(&b.name, &opts)?;
        for p in &b.ports {
            match p {
                PortPlan::Iface { name, ofport } => ovs.add_port(&b.name, name, *ofport)?,
                PortPlan::Patch { name, peer, ofport } => {
                    ovs.add_patch(&b.name, name, peer, *ofport)?
                }
            }
        }
        if proxy.is_none() {
            for f in &b.flows {
                ovs.ofctl(&["add-flow", &b.name, f])?;
            }
        }
    }
    Ok(())
}

/// A unidirectional pipeline behind nflab's proxy, programmed by nflab's
/// controller harness through it; both stay up until [`Proxied::stop`].
pub struct Proxied {
    proxy: ProxyHandle,
    _controller: Peer,
}

impl Proxied {
    /// Build `n` stages on `ovs` behind a proxy and install [`proxy_flows`]
    /// through it (FlowMods, then a barrier; an OpenFlow error from the
    /// proxy fails). Call it inside `ovs`'s namespace: the proxy's threads
    /// and sockets live there.
    pub fn start(ovs: &Ovs, n: u32, log: Option<String>) -> Result<Proxied, SdnError> {
        let listener =
            TcpListener::bind("127.0.0.1:0").map_err(|e| SdnError::io("pipeline controller", e))?;
        let harness = listener
            .local_addr()
            .map_err(|e| SdnError::io("pipeline controller", e))?;
        let proxy = crate::proxy::start(proxy_config(n, "127.0.0.1:0", &harness.to_string(), log))?;
        build(
            ovs,
            &plan(n, Shape::Unidirectional, n),
            Some(&proxy.listen.to_string()),
        )?;
        let mut peers = connect_all(&listener, 1, |_| Some(0))?;
        let mut c = peers.remove(0);
        for (j, fm) in proxy_flows(n).into_iter().enumerate() {
            send(&mut c.w, &Message::new(100 + j as u32, Body::FlowMod(fm)))?;
        }
        send(&mut c.w, &Message::new(99, Body::BarrierRequest))?;
        c.wait_barrier(99)?;
        Ok(Proxied {
            proxy,
            _controller: c,
        })
    }

    /// Stop the proxy (the bridges keep their flows: fail mode secure).
    pub fn stop(self) -> Result<(), SdnError> {
        self.proxy.stop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Follow a frame entering `bridge` at `port` through the planned flows
    /// and patch cables; the interface it leaves on, if any.
    fn walk(plans: &[BridgePlan], mut bridge: usize, mut port: u16) -> (Option<String>, usize) {
        let mut visited = 0;
        for _ in 0..100 {
            visited += 1;
            let b = &plans[bridge];
            let want = format!("in_port={port},actions=");
            let Some(flow) = b.flows.iter().find(|f| f.starts_with(&want)) else {
                return (None, visited);
            };
            let action = &flow[want.len()..];
            let out: u16 = if action == "in_port" {
                port
            } else {
                action.trim_start_matches("output:").parse().unwrap()
            };
            let p = b
                .ports
                .iter()
                .find(|p| match p {
                    PortPlan::Iface { ofport, .. } | PortPlan::Patch { ofport, .. } => {
                        *ofport == out
                    }
                })
                .unwrap();
            match p {
                PortPlan::Iface { name, .. } => return (Some(name.clone()), visited),
                PortPlan::Patch { peer, .. } => {
                    let (nb, np) = plans
                        .iter()
                        .enumerate()
                        .find_map(|(j, q)| {
                            q.ports.iter().find_map(|pp| match pp {
                                PortPlan::Patch { name, ofport, .. } if name == peer => {
                                    Some((j, *ofport))
                                }
                                _ => None,
                            })
                        })
                        .unwrap();
                    bridge = nb;
                    port = np;
                }
            }
        }
        panic!("a loop");
    }

    #[test]
    fn every_shape_delivers_where_it_should_after_the_stages_it_should() {
        for n in 1..=5u32 {
            let bi = plan(n, Shape::Bidirectional, n);
            assert_eq!(walk(&bi, 0, 1), (Some("dut1".into()), n as usize));
            assert_eq!(
                walk(&bi, n as usize - 1, 2),
                (Some("dut0".into()), n as usize)
            );
            let uni = plan(n, Shape::Unidirectional, n);
            assert_eq!(walk(&uni, 0, 1), (Some("dut1".into()), n as usize));
            assert_eq!(walk(&uni, n as usize - 1, 2).0, None);
            for depth in 1..=n {
                let st = plan(n, Shape::Staged, depth);
                // Down to stage `depth` and back: 2·depth − 1 bridge visits.
                assert_eq!(
                    walk(&st, 0, 1),
                    (Some("dut1".into()), 2 * depth as usize - 1),
                    "n {n} depth {depth}"
                );
                assert_eq!(walk(&st, 0, 2), (Some("dut0".into()), 1));
            }
        }
    }

    #[test]
    fn the_proxy_view_is_a_valid_config_with_one_table_per_stage() {
        for n in 1..=16 {
            let cfg = proxy_config(n, "127.0.0.1:0", "127.0.0.1:1", None);
            cfg.check().unwrap();
            assert_eq!(cfg.table_map().len(), n as usize);
            let flows = proxy_flows(n);
            assert_eq!(flows.len(), n as usize);
            assert!(matches!(
                flows.last().unwrap().instructions[0],
                Instruction::ApplyActions(_)
            ));
        }
    }
}
