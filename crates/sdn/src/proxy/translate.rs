//! The multi-switch app: the controller's view (global tables and ports) to
//! the switches' (local tables and ports) and back.

use std::collections::BTreeMap;

use crate::of13::flow::Action;
use crate::of13::message::error;
use crate::of13::oxm::field;
use crate::of13::{FlowMod, FlowStatsRequest, Instruction, Match, Oxm, OFPTT_ALL};

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

/// A controller's flow-stats or aggregate request as switch `sw`'s: table,
/// `in_port` match and `out_port` filter in its local terms. `None` when the
/// switch can hold no flow the request asks for (a table or a port of
/// another switch): it is not asked.
pub fn stats_request_down(
    maps: &Maps,
    sw: usize,
    req: &FlowStatsRequest,
) -> Option<FlowStatsRequest> {
    let mut out = req.clone();
    if req.table_id != OFPTT_ALL {
        let &(s, l) = maps.tables.get(&req.table_id)?;
        if s != sw {
            return None;
        }
        out.table_id = l;
    }
    let mut fields = Vec::with_capacity(req.matches.fields.len());
    for f in &req.matches.fields {
        if f.is(field::IN_PORT) && f.mask.is_none() {
            let g = u32::from_be_bytes(f.value.as_slice().try_into().ok()?);
            fields.push(Oxm::basic(
                field::IN_PORT,
                &port_local(maps, sw, g).ok()?.to_be_bytes(),
            ));
        } else {
            fields.push(f.clone());
        }
    }
    out.matches = Match::new(fields);
    out.out_port = port_local(maps, sw, req.out_port).ok()?;
    Some(out)
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
    entries: &BTreeMap<(usize, u16), EntryRule>,
    sw: usize,
    mut fs: crate::of13::FlowStats,
) -> Option<crate::of13::FlowStats> {
    if fs.cookie == PROXY_COOKIE {
        return None;
    }
    restore_cross_goto(maps, entries, sw, &mut fs.instructions);
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

/// A cross-device GOTO as the controller wrote it: an APPLY_ACTIONS ending in
/// PUSH_VLAN, SET_FIELD vlan_vid and OUTPUT on a link port, whose tag has an
/// entry rule on the other switch, becomes WRITE_METADATA + GOTO_TABLE again.
fn restore_cross_goto(
    maps: &Maps,
    entries: &BTreeMap<(usize, u16), EntryRule>,
    sw: usize,
    instructions: &mut Vec<Instruction>,
) {
    let mut restored = None;
    for inst in instructions.iter_mut() {
        let Instruction::ApplyActions(a) = inst else {
            continue;
        };
        let n = a.len();
        if n < 3 {
            continue;
        }
        let (Action::SetField(vid), Action::Output { port, .. }) = (&a[n - 2], &a[n - 1]) else {
            continue;
        };
        if !matches!(&a[n - 3], Action::Other { typ: 17, .. }) || !vid.is(VLAN_VID) {
            continue;
        }
        let tag = u16::from_be_bytes(vid.value.as_slice().try_into().unwrap_or([0; 2])) & 0x0fff;
        let target = maps
            .links
            .iter()
            .find(|((from, _), (from_port, _))| *from == sw && from_port == port)
            .and_then(|((_, to), _)| entries.get(&(*to, tag)));
        if let Some(e) = target {
            if let Some(&g) = maps.tables_back.get(&(e.switch, e.local_table)) {
                a.truncate(n - 3);
                restored = Some((e.metadata, e.mask, g));
            }
        }
    }
    if let Some((metadata, mask, table)) = restored {
        instructions.retain(|i| !matches!(i, Instruction::ApplyActions(a) if a.is_empty()));
        if mask != 0 {
            instructions.push(Instruction::WriteMetadata { metadata, mask });
        }
        instructions.push(Instruction::GotoTable(table));
    }
}

/// A switch's FLOW_REMOVED in the controller's view: table and `in_port`
/// global; `None` for the proxy's own entry rules and tables the controller
/// does not see.
pub fn flow_removed_up(
    maps: &Maps,
    sw: usize,
    mut fr: crate::of13::FlowRemoved,
) -> Option<crate::of13::FlowRemoved> {
    if fr.cookie == PROXY_COOKIE {
        return None;
    }
    fr.table_id = *maps.tables_back.get(&(sw, fr.table_id))?;
    for f in &mut fr.matches.fields {
        if f.is(field::IN_PORT) && f.mask.is_none() {
            let l = u32::from_be_bytes(f.value.as_slice().try_into().ok()?);
            f.value = maps.ports_back.get(&(sw, l))?.to_be_bytes().to_vec();
        }
    }
    Some(fr)
}

/// A switch's PACKET_IN body in the controller's view (table and ingress
/// port global), or `None` when its table is not one the controller sees.
pub fn packet_in_up(maps: &Maps, sw: usize, body: &[u8]) -> Option<Vec<u8>> {
    use crate::of13::buf::Reader;
    // buffer_id u32, total_len u16, reason u8, table_id u8, cookie u64, match, pad 2, data.
    if body.len() < 16 {
        return None;
    }
    let table = *maps.tables_back.get(&(sw, body[7]))?;
    let mut r = Reader::new(&body[16..], "packet-in match");
    let mut m = Match::decode(&mut r).ok()?;
    for f in &mut m.fields {
        if f.is(field::IN_PORT) && f.mask.is_none() {
            let l = u32::from_be_bytes(f.value.as_slice().try_into().ok()?);
            f.value = maps.ports_back.get(&(sw, l))?.to_be_bytes().to_vec();
        }
    }
    let mut out = body[..16].to_vec();
    out[7] = table;
    m.encode(&mut out);
    out.extend_from_slice(r.rest());
    Some(out)
}

/// A controller's PACKET_OUT body for the switch of its first OUTPUT port:
/// (switch, body). Ports on other switches, a buffered packet or no output
/// are refused.
pub fn packet_out_down(maps: &Maps, body: &[u8]) -> Result<(usize, Vec<u8>), Refusal> {
    use crate::of13::buf::Reader;
    let bad_len = (error::BAD_REQUEST, error::BAD_LEN);
    let mut r = Reader::new(body, "packet-out");
    let buffer_id = r.u32().map_err(|_| bad_len)?;
    let in_port = r.u32().map_err(|_| bad_len)?;
    let actions_len = r.u16().map_err(|_| bad_len)? as usize;
    r.skip(6).map_err(|_| bad_len)?;
    let actions =
        Action::decode_list(r.bytes(actions_len).map_err(|_| bad_len)?).map_err(|_| bad_len)?;
    if buffer_id != crate::of13::NO_BUFFER {
        // Buffers live on one switch; the emulated switch buffers nothing.
        return Err((error::BAD_REQUEST, 8)); // OFPBRC_BUFFER_UNKNOWN
    }
    let sw = actions
        .iter()
        .find_map(|a| match a {
            Action::Output { port, .. } if *port < OFPP_MAX => {
                maps.ports.get(port).map(|(s, _)| *s)
            }
            _ => None,
        })
        .ok_or((error::BAD_ACTION, error::BAD_OUT_PORT))?;
    let local_in = match maps.ports.get(&in_port) {
        Some((s, l)) if *s == sw => *l,
        _ if in_port >= OFPP_MAX => in_port,
        _ => crate::of13::OFPP_CONTROLLER,
    };
    let actions = actions_local(maps, sw, &actions)?;
    let mut a = Vec::new();
    Action::encode_list(&actions, &mut a);
    let mut out = Vec::with_capacity(body.len());
    out.extend_from_slice(&buffer_id.to_be_bytes());
    out.extend_from_slice(&local_in.to_be_bytes());
    out.extend_from_slice(&(a.len() as u16).to_be_bytes());
    out.extend_from_slice(&[0; 6]);
    out.extend_from_slice(&a);
    out.extend_from_slice(r.rest());
    Ok((sw, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::of13::buf::Put;

    fn maps() -> Maps {
        let text = r#"
[proxy]
listen = "127.0.0.1:0"
controller = "127.0.0.1:1"
[[switch]]
name = "s1"
datapath_id = 1
[[switch]]
name = "s2"
datapath_id = 2
[[table]]
id = 0
switch = "s1"
local = 0
[[table]]
id = 1
switch = "s2"
local = 3
[[port]]
id = 1
switch = "s1"
local = 7
[[port]]
id = 2
switch = "s2"
local = 9
"#;
        let cfg: ProxyConfig = toml::from_str(text).unwrap();
        cfg.check().unwrap();
        Maps::new(&cfg)
    }

    #[test]
    fn a_stats_request_asks_each_switch_in_its_own_terms() {
        let m = maps();
        // All tables, any port: both switches, unchanged.
        let all = FlowStatsRequest::all();
        assert_eq!(stats_request_down(&m, 0, &all), Some(all.clone()));
        assert_eq!(stats_request_down(&m, 1, &all), Some(all.clone()));
        // Global table 1, in_port 2, out_port 2: s2 only, local table 3, port 9.
        let mut one = all.clone();
        one.table_id = 1;
        one.out_port = 2;
        one.matches = Match::new(vec![Oxm::basic(field::IN_PORT, &2u32.to_be_bytes())]);
        assert_eq!(stats_request_down(&m, 0, &one), None);
        let s2 = stats_request_down(&m, 1, &one).unwrap();
        assert_eq!(
            (s2.table_id, s2.out_port, s2.matches.in_port()),
            (3, 9, Some(9))
        );
        // A port of s1 over all tables: only s1 can hold such flows.
        let mut p1 = all;
        p1.matches = Match::new(vec![Oxm::basic(field::IN_PORT, &1u32.to_be_bytes())]);
        assert_eq!(
            stats_request_down(&m, 0, &p1).unwrap().matches.in_port(),
            Some(7)
        );
        assert_eq!(stats_request_down(&m, 1, &p1), None);
    }

    #[test]
    fn packet_in_comes_back_in_global_terms() {
        let m = maps();
        let mut body = Vec::new();
        body.put_u32(crate::of13::NO_BUFFER);
        body.put_u16(60);
        body.put_u8(0); // reason: no match
        body.put_u8(3); // s2's local table 3 = global table 1
        body.put_u64(0x42);
        Match::new(vec![Oxm::basic(field::IN_PORT, &9u32.to_be_bytes())]).encode(&mut body);
        body.extend_from_slice(&[0, 0]);
        body.extend_from_slice(b"frame");
        let up = packet_in_up(&m, 1, &body).unwrap();
        assert_eq!(up[7], 1);
        let mut r = crate::of13::buf::Reader::new(&up[16..], "t");
        assert_eq!(Match::decode(&mut r).unwrap().in_port(), Some(2));
        assert_eq!(r.rest(), b"\0\0frame");
        // A table the controller does not see: not forwarded.
        body[7] = 5;
        assert!(packet_in_up(&m, 1, &body).is_none());
    }

    #[test]
    fn flow_removed_comes_back_in_global_terms_and_entry_rules_stay_hidden() {
        let m = maps();
        let fr = crate::of13::FlowRemoved {
            cookie: 0x42,
            priority: 100,
            reason: 0,
            table_id: 3, // s2's local table 3 = global table 1
            duration_sec: 5,
            duration_nsec: 0,
            idle_timeout: 10,
            hard_timeout: 0,
            packet_count: 9,
            byte_count: 576,
            matches: Match::new(vec![Oxm::basic(field::IN_PORT, &9u32.to_be_bytes())]),
        };
        let up = flow_removed_up(&m, 1, fr.clone()).unwrap();
        assert_eq!((up.table_id, up.matches.in_port()), (1, Some(2)));
        assert_eq!((up.cookie, up.packet_count), (0x42, 9));
        let own = crate::of13::FlowRemoved {
            cookie: PROXY_COOKIE,
            ..fr.clone()
        };
        assert!(flow_removed_up(&m, 1, own).is_none());
        let unseen = crate::of13::FlowRemoved { table_id: 5, ..fr };
        assert!(flow_removed_up(&m, 1, unseen).is_none());
    }

    #[test]
    fn packet_out_goes_to_the_switch_of_its_port() {
        let m = maps();
        let out = |buffer: u32, in_port: u32, port: u32| {
            let mut a = Vec::new();
            Action::encode_list(&[Action::Output { port, max_len: 0 }], &mut a);
            let mut b = Vec::new();
            b.put_u32(buffer);
            b.put_u32(in_port);
            b.put_u16(a.len() as u16);
            b.pad(6);
            b.extend_from_slice(&a);
            b.extend_from_slice(b"frame");
            b
        };
        let (sw, body) = packet_out_down(&m, &out(crate::of13::NO_BUFFER, 1, 2)).unwrap();
        assert_eq!(sw, 1);
        // in_port 1 is on s1: from s2's view the packet comes from the controller.
        assert_eq!(&body[4..8], &crate::of13::OFPP_CONTROLLER.to_be_bytes());
        let acts = Action::decode_list(&body[16..32]).unwrap();
        assert_eq!(
            acts,
            [Action::Output {
                port: 9,
                max_len: 0
            }]
        );
        assert_eq!(&body[32..], b"frame");
        assert_eq!(
            packet_out_down(&m, &out(7, 1, 2)).unwrap_err(),
            (error::BAD_REQUEST, 8)
        );
        assert_eq!(
            packet_out_down(&m, &out(crate::of13::NO_BUFFER, 1, 5)).unwrap_err(),
            (error::BAD_ACTION, error::BAD_OUT_PORT)
        );
    }
}
