//! The multi-switch app: the controller's view (global tables and ports) to
//! the switches' (local tables and ports) and back.

use std::collections::BTreeMap;

use crate::of13::flow::Action;
use crate::of13::message::error;
use crate::of13::oxm::field;
use crate::of13::{FlowMod, Instruction, Match, Oxm, OFPTT_ALL};

use super::config::ProxyConfig;

/// Cookie of the flows the proxy installs itself (hidden from the controller).
pub const PROXY_COOKIE: u64 = 0x6e66_6c61_625f_7078; // "nflab_px"
/// Reserved ports (OFPP_MAX and above) pass unchanged.
const OFPP_MAX: u32 = 0xffff_ff00;
/// OXM field of the VLAN id.
const VLAN_VID: u8 = 6;
/// OFPVID_PRESENT.
const VID_PRESENT: u16 = 0x1000;

/// The maps of a configuration, both ways.
#[derive(Debug, Clone)]
pub struct Maps {
    /// Global table → (switch, local).
    pub tables: BTreeMap<u8, (usize, u8)>,
    /// (switch, local) → global table.
    pub tables_back: BTreeMap<(usize, u8), u8>,
    /// Global port → (switch, local).
    pub ports: BTreeMap<u32, (usize, u32)>,
    /// (switch, local) → global port.
    pub ports_back: BTreeMap<(usize, u32), u32>,
    /// (from switch, to switch) → (from port, to port).
    pub links: BTreeMap<(usize, usize), (u32, u32)>,
    /// Switches.
    pub n_switches: usize,
}

impl Maps {
    /// From a checked configuration.
    pub fn new(cfg: &ProxyConfig) -> Maps {
        let idx = |n: &str| cfg.switch_index(n).unwrap_or(0);
        let tables = cfg.table_map();
        let tables_back = tables.iter().map(|(g, (s, l))| ((*s, *l), *g)).collect();
        let ports: BTreeMap<u32, (usize, u32)> = cfg
            .ports
            .iter()
            .map(|p| (p.id, (idx(&p.switch), p.local)))
            .collect();
        let ports_back = ports.iter().map(|(g, (s, l))| ((*s, *l), *g)).collect();
        let links = cfg
            .links
            .iter()
            .map(|l| ((idx(&l.from), idx(&l.to)), (l.from_port, l.to_port)))
            .collect();
        Maps {
            tables,
            tables_back,
            ports,
            ports_back,
            links,
            n_switches: cfg.switches.len(),
        }
    }

    /// Tables the controller sees (highest id + 1).
    pub fn n_tables(&self) -> u8 {
        self.tables.keys().max().map_or(1, |m| m.saturating_add(1))
    }
}

/// An entry rule on the receiving switch of a cross-device GOTO: frames
/// arriving over the link with VLAN id `vid` continue in `local_table` with
/// the metadata written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryRule {
    /// Receiving switch.
    pub switch: usize,
    /// Link port there.
    pub in_port: u32,
    /// VLAN id carrying the metadata.
    pub vid: u16,
    /// Metadata to write.
    pub metadata: u64,
    /// Metadata mask.
    pub mask: u64,
    /// Where the pipeline goes on.
    pub local_table: u8,
}

impl EntryRule {
    /// As a flow mod in the receiving switch's table 0.
    pub fn flow_mod(&self) -> FlowMod {
        let mut fm = FlowMod::add(
            0,
            0xffff,
            Match::new(vec![
                Oxm::basic(field::IN_PORT, &self.in_port.to_be_bytes()),
                Oxm::basic(VLAN_VID, &(VID_PRESENT | self.vid).to_be_bytes()),
            ]),
            vec![
                Instruction::ApplyActions(vec![pop_vlan()]),
                Instruction::WriteMetadata {
                    metadata: self.metadata,
                    mask: self.mask,
                },
                Instruction::GotoTable(self.local_table),
            ],
        );
        fm.cookie = PROXY_COOKIE;
        fm
    }
}

fn push_vlan() -> Action {
    Action::Other {
        typ: 17,
        body: vec![0x81, 0x00, 0, 0],
    }
}

fn pop_vlan() -> Action {
    Action::Other {
        typ: 18,
        body: vec![0, 0, 0, 0],
    }
}

/// An OpenFlow error to send back instead: (type, code).
pub type Refusal = (u16, u16);

/// A controller flow mod as per-switch flow mods (plus entry rules needed).
pub struct Translated {
    /// (switch, flow mod).
    pub mods: Vec<(usize, FlowMod)>,
    /// Entry rules the cross-device GOTOs need.
    pub entries: Vec<EntryRule>,
}

fn port_local(maps: &Maps, sw: usize, port: u32) -> Result<u32, Refusal> {
    if port >= OFPP_MAX {
        return Ok(port);
    }
    match maps.ports.get(&port) {
        Some((s, l)) if *s == sw => Ok(*l),
        _ => Err((error::BAD_ACTION, error::BAD_OUT_PORT)),
    }
}

fn actions_local(maps: &Maps, sw: usize, actions: &[Action]) -> Result<Vec<Action>, Refusal> {
    actions
        .iter()
        .map(|a| match a {
            Action::Output { port, max_len } => Ok(Action::Output {
                port: port_local(maps, sw, *port)?,
                max_len: *max_len,
            }),
            other => Ok(other.clone()),
        })
        .collect()
}

/// Translate one controller flow mod.
pub fn flow_mod_down(maps: &Maps, fm: &FlowMod) -> Result<Translated, Refusal> {
    if fm.table_id == OFPTT_ALL {
        // A delete over all tables goes to every switch as it is.
        let mods = (0..maps.n_switches).map(|s| (s, fm.clone())).collect();
        return Ok(Translated {
            mods,
            entries: vec![],
        });
    }
    let &(sw, local) = maps
        .tables
        .get(&fm.table_id)
        .ok_or((error::FLOW_MOD_FAILED, error::FLOW_MOD_BAD_TABLE_ID))?;
    let mut out = fm.clone();
    out.table_id = local;
    // Match: global ingress port → local.
    let mut fields = Vec::with_capacity(fm.matches.fields.len());
    for f in &fm.matches.fields {
        if f.is(field::IN_PORT) && f.mask.is_none() {
            let g = u32::from_be_bytes(f.value.as_slice().try_into().unwrap_or([0; 4]));
            let l = match maps.ports.get(&g) {
                Some((s, l)) if *s == sw => *l,
                // OFPET_BAD_MATCH, OFPBMC_BAD_VALUE: that port is on another device.
                _ => return Err((4, 4)),
            };
            fields.push(Oxm::basic(field::IN_PORT, &l.to_be_bytes()));
        } else {
            fields.push(f.clone());
        }
    }
    out.matches = Match::new(fields);
    // out_port filters deletes only (os-ken leaves it 0 on adds).
    let deletes = fm.command == crate::of13::flow::command::DELETE
        || fm.command == crate::of13::flow::command::DELETE_STRICT;
    if deletes && fm.out_port < OFPP_MAX {
        out.out_port = port_local(maps, sw, fm.out_port)?;
    }
    let written = fm.instructions.iter().find_map(|i| match i {
        Instruction::WriteMetadata { metadata, mask } => Some((*metadata, *mask)),
        _ => None,
    });
    let mut instructions = Vec::new();
    let mut entries = Vec::new();
    let mut cross: Option<Vec<Action>> = None;
    for inst in &fm.instructions {
        match inst {
            Instruction::GotoTable(g) => {
                let &(tsw, tlocal) = maps
                    .tables
                    .get(g)
                    .ok_or((error::BAD_INSTRUCTION, error::BAD_TABLE_ID))?;
                if tsw == sw {
                    instructions.push(Instruction::GotoTable(tlocal));
                    continue;
                }
                let &(from_port, to_port) = maps
                    .links
                    .get(&(sw, tsw))
                    .ok_or((error::BAD_INSTRUCTION, error::BAD_TABLE_ID))?;
                let (metadata, mask) = written.unwrap_or((0, 0));
                // The metadata crosses in an 802.1Q tag: VLAN id = metadata + 1.
                if metadata >= 4094 {
                    return Err((error::BAD_INSTRUCTION, 5)); // OFPBIC_UNSUP_METADATA
                }
                let vid = metadata as u16 + 1;
                entries.push(EntryRule {
                    switch: tsw,
                    in_port: to_port,
                    vid,
                    metadata,
                    mask,
                    local_table: tlocal,
                });
                cross = Some(vec![
                    push_vlan(),
                    Action::SetField(Oxm::basic(VLAN_VID, &(VID_PRESENT | vid).to_be_bytes())),
                    Action::Output {
                        port: from_port,
                        max_len: 0,
                    },
                ]);
            }
            Instruction::ApplyActions(a) => {
                instructions.push(Instruction::ApplyActions(actions_local(maps, sw, a)?))
            }
            Instruction::WriteActions(a) => {
                instructions.push(Instruction::WriteActions(actions_local(maps, sw, a)?))
            }
            other => instructions.push(other.clone()),
        }
    }
    if let Some(tail) = cross {
        // Metadata stays on this device: it travels in the tag instead.
        instructions.retain(|i| !matches!(i, Instruction::WriteMetadata { .. }));
        match instructions
            .iter_mut()
            .find(|i| matches!(i, Instruction::ApplyActions(_)))
        {
            Some(Instruction::ApplyActions(a)) => a.extend(tail),
            _ => instructions.insert(0, Instruction::ApplyActions(tail)),
        }
    }
    out.instructions = instructions;
    Ok(Translated {
        mods: vec![(sw, out)],
        entries,
    })
}

/// A switch's flow-stats entry in the controller's view; `None` for the
/// proxy's own flows and tables the controller does not see.
pub fn flow_stats_up(
    maps: &Maps,
    sw: usize,
    mut fs: crate::of13::FlowStats,
) -> Option<crate::of13::FlowStats> {
    if fs.cookie == PROXY_COOKIE {
        return None;
    }
    fs.table_id = *maps.tables_back.get(&(sw, fs.table_id))?;
    for f in &mut fs.matches.fields {
        if f.is(field::IN_PORT) && f.mask.is_none() {
            let l = u32::from_be_bytes(f.value.as_slice().try_into().unwrap_or([0; 4]));
            if let Some(g) = maps.ports_back.get(&(sw, l)) {
                f.value = g.to_be_bytes().to_vec();
            }
        }
    }
    for inst in &mut fs.instructions {
        match inst {
            Instruction::GotoTable(t) => {
                if let Some(g) = maps.tables_back.get(&(sw, *t)) {
                    *t = *g;
                }
            }
            Instruction::ApplyActions(a) | Instruction::WriteActions(a) => {
                for act in a {
                    if let Action::Output { port, .. } = act {
                        if let Some(g) = maps.ports_back.get(&(sw, *port)) {
                            *port = *g;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Some(fs)
}
