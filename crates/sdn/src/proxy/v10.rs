//! OpenFlow 1.3 (the proxy's language) to and from 1.0 (a switch that speaks
//! only that): what a single-table 1.0 switch can do of a 1.3 FLOW_MOD —
//! OXM fields that `ofp_match` has, OUTPUT and SET_FIELD eth_dst/eth_src
//! actions in APPLY_ACTIONS or WRITE_ACTIONS — and the switch's replies in
//! 1.3 terms. Anything else is refused with the OpenFlow error a 1.3 switch
//! would send. No I/O.

use super::translate::Refusal;
use crate::of10::stats::{PortStats10, TableStats10};
use crate::of10::{self, Action10, FlowMod10, FlowStats10, Match10, PhyPort, OFPFW_ALL};
use crate::of13::message::error;
use crate::of13::oxm::field;
use crate::of13::stats::{PortStats, TableStats};
use crate::of13::{
    Action, FlowMod, FlowRemoved, FlowStats, FlowStatsRequest, Instruction, Match, Oxm, Port,
};

/// OFPET_BAD_MATCH / OFPBMC_BAD_FIELD.
const BAD_FIELD: Refusal = (4, 6);
/// OFPET_BAD_INSTRUCTION / OFPBIC_UNSUP_INST.
const UNSUP_INST: Refusal = (error::BAD_INSTRUCTION, 1);
/// OFPET_BAD_ACTION / OFPBAC_BAD_TYPE.
const BAD_ACTION_TYPE: Refusal = (error::BAD_ACTION, 0);

/// OXM fields without a place in `ofp_match`: their wildcard bit.
const FW_IN_PORT: u32 = 1 << 0;
const FW_DL_SRC: u32 = 1 << 2;
const FW_DL_DST: u32 = 1 << 3;
const FW_DL_TYPE: u32 = 1 << 4;
const FW_NW_PROTO: u32 = 1 << 5;
const FW_TP_SRC: u32 = 1 << 6;
const FW_TP_DST: u32 = 1 << 7;
const NW_SRC_SHIFT: u32 = 8;
const NW_DST_SHIFT: u32 = 14;
const TCP_SRC: u8 = 13;
const TCP_DST: u8 = 14;

/// A 1.3 port number as 1.0's 16 bits (reserved ports keep their meaning).
pub fn port_down(p: u32) -> Option<u16> {
    match p {
        0..=0xfeff => Some(p as u16),
        0xffff_ff00..=0xffff_ffff => Some((p & 0xffff) as u16),
        _ => None,
    }
}

/// A 1.0 port number as 1.3's 32 bits.
pub fn port_up(p: u16) -> u32 {
    if p >= 0xff00 {
        0xffff_0000 | u32::from(p)
    } else {
        u32::from(p)
    }
}

/// Low bits a 4-byte IPv4 mask leaves out, if it is a prefix.
fn wild_bits(mask: Option<&[u8]>) -> Option<u32> {
    let Some(m) = mask else { return Some(0) };
    let m = u32::from_be_bytes(m.try_into().ok()?);
    let ones = m.leading_ones();
    (m.checked_shl(ones).unwrap_or(0) == 0).then_some(32 - ones)
}

/// An OXM match as `ofp_match`; a field 1.0 has no place for is refused.
pub fn match_down(m: &Match) -> Result<Match10, Refusal> {
    let mut o = Match10::all();
    for f in &m.fields {
        let v = f.value.as_slice();
        let exact = f.mask.is_none();
        let n = |k: usize| v.get(..k).ok_or(BAD_FIELD);
        match f.field {
            field::IN_PORT if exact => {
                o.in_port = port_down(u32::from_be_bytes(n(4)?.try_into().map_err(|_| BAD_FIELD)?))
                    .ok_or(BAD_FIELD)?;
                o.wildcards &= !FW_IN_PORT;
            }
            field::ETH_DST if exact => {
                o.dl_dst.copy_from_slice(n(6)?);
                o.wildcards &= !FW_DL_DST;
            }
            field::ETH_SRC if exact => {
                o.dl_src.copy_from_slice(n(6)?);
                o.wildcards &= !FW_DL_SRC;
            }
            field::ETH_TYPE if exact => {
                o.dl_type = u16::from_be_bytes(n(2)?.try_into().map_err(|_| BAD_FIELD)?);
                o.wildcards &= !FW_DL_TYPE;
            }
            field::IP_PROTO if exact => {
                o.nw_proto = n(1)?[0];
                o.wildcards &= !FW_NW_PROTO;
            }
            field::IPV4_SRC | field::IPV4_DST => {
                let bits = wild_bits(f.mask.as_deref()).ok_or(BAD_FIELD)?;
                let addr = u32::from_be_bytes(n(4)?.try_into().map_err(|_| BAD_FIELD)?);
                let shift = if f.field == field::IPV4_SRC {
                    o.nw_src = addr;
                    NW_SRC_SHIFT
                } else {
                    o.nw_dst = addr;
                    NW_DST_SHIFT
                };
                o.wildcards = (o.wildcards & !(0x3f << shift)) | (bits << shift);
            }
            field::UDP_SRC | TCP_SRC if exact => {
                o.tp_src = u16::from_be_bytes(n(2)?.try_into().map_err(|_| BAD_FIELD)?);
                o.wildcards &= !FW_TP_SRC;
            }
            field::UDP_DST | TCP_DST if exact => {
                o.tp_dst = u16::from_be_bytes(n(2)?.try_into().map_err(|_| BAD_FIELD)?);
                o.wildcards &= !FW_TP_DST;
            }
            _ => return Err(BAD_FIELD),
        }
    }
    Ok(o)
}

/// `ofp_match` as OXM fields (UDP for ports: 1.0 does not say which).
pub fn match_up(m: &Match10) -> Match {
    let w = m.wildcards;
    let mut f = Vec::new();
    if w & FW_IN_PORT == 0 {
        f.push(Oxm::basic(
            field::IN_PORT,
            &port_up(m.in_port).to_be_bytes(),
        ));
    }
    if w & FW_DL_DST == 0 {
        f.push(Oxm::basic(field::ETH_DST, &m.dl_dst));
    }
    if w & FW_DL_SRC == 0 {
        f.push(Oxm::basic(field::ETH_SRC, &m.dl_src));
    }
    if w & FW_DL_TYPE == 0 {
        f.push(Oxm::basic(field::ETH_TYPE, &m.dl_type.to_be_bytes()));
    }
    if w & FW_NW_PROTO == 0 {
        f.push(Oxm::basic(field::IP_PROTO, &[m.nw_proto]));
    }
    for (fld, addr, shift) in [
        (field::IPV4_SRC, m.nw_src, NW_SRC_SHIFT),
        (field::IPV4_DST, m.nw_dst, NW_DST_SHIFT),
    ] {
        let bits = ((w >> shift) & 0x3f).min(32);
        if bits == 0 {
            f.push(Oxm::basic(fld, &addr.to_be_bytes()));
        } else if bits < 32 {
            let mask = u32::MAX << bits;
            f.push(Oxm::masked(
                fld,
                &(addr & mask).to_be_bytes(),
                &mask.to_be_bytes(),
            ));
        }
    }
    if w & FW_TP_SRC == 0 {
        f.push(Oxm::basic(field::UDP_SRC, &m.tp_src.to_be_bytes()));
    }
    if w & FW_TP_DST == 0 {
        f.push(Oxm::basic(field::UDP_DST, &m.tp_dst.to_be_bytes()));
    }
    Match::new(f)
}

fn actions_down(list: &[Action], out: &mut Vec<Action10>) -> Result<(), Refusal> {
    for a in list {
        out.push(match a {
            Action::Output { port, max_len } => Action10::Output {
                port: port_down(*port).ok_or((error::BAD_ACTION, error::BAD_OUT_PORT))?,
                max_len: *max_len,
            },
            Action::SetField(o) if o.mask.is_none() && o.value.len() == 6 => {
                // OFPAT_SET_DL_SRC (4) / OFPAT_SET_DL_DST (5): MAC and 6 pad bytes.
                let typ = match o.field {
                    field::ETH_SRC => 4,
                    field::ETH_DST => 5,
                    _ => return Err(BAD_ACTION_TYPE),
                };
                let mut body = o.value.clone();
                body.resize(12, 0);
                Action10::Other { typ, body }
            }
            _ => return Err(BAD_ACTION_TYPE),
        });
    }
    Ok(())
}

/// 1.0 actions as 1.3's.
pub fn actions_up(list: &[Action10]) -> Vec<Action> {
    list.iter()
        .filter_map(|a| match a {
            Action10::Output { port, max_len } => Some(Action::Output {
                port: port_up(*port),
                max_len: *max_len,
            }),
            Action10::Other { typ: 4 | 5, body } if body.len() >= 6 => {
                let fld = if matches!(a, Action10::Other { typ: 4, .. }) {
                    field::ETH_SRC
                } else {
                    field::ETH_DST
                };
                Some(Action::SetField(Oxm::basic(fld, &body[..6])))
            }
            _ => None,
        })
        .collect()
}

/// A 1.3 FLOW_MOD (already in the switch's local terms, table 0) for a 1.0
/// switch. GOTO_TABLE, metadata and actions 1.0 lacks are refused.
pub fn flow_mod_down(fm: &FlowMod) -> Result<FlowMod10, Refusal> {
    if fm.table_id != 0 && fm.table_id != crate::of13::OFPTT_ALL {
        return Err((error::FLOW_MOD_FAILED, error::FLOW_MOD_BAD_TABLE_ID));
    }
    let mut actions = Vec::new();
    for i in &fm.instructions {
        match i {
            Instruction::ApplyActions(a) | Instruction::WriteActions(a) => {
                actions_down(a, &mut actions)?
            }
            _ => return Err(UNSUP_INST),
        }
    }
    Ok(FlowMod10 {
        matches: match_down(&fm.matches)?,
        cookie: fm.cookie,
        command: u16::from(fm.command),
        idle_timeout: fm.idle_timeout,
        hard_timeout: fm.hard_timeout,
        priority: fm.priority,
        buffer_id: fm.buffer_id,
        out_port: port_down(fm.out_port).unwrap_or(of10::OFPP_NONE),
        flags: fm.flags & 0x7,
        actions,
    })
}

/// A 1.0 flow-stats entry as 1.3's (its actions as APPLY_ACTIONS).
pub fn flow_stats_up(e: &FlowStats10) -> FlowStats {
    FlowStats {
        table_id: e.table_id,
        duration_sec: e.duration_sec,
        duration_nsec: e.duration_nsec,
        priority: e.priority,
        idle_timeout: e.idle_timeout,
        hard_timeout: e.hard_timeout,
        flags: 0,
        cookie: e.cookie,
        packet_count: e.packet_count,
        byte_count: e.byte_count,
        matches: match_up(&e.matches),
        instructions: if e.actions.is_empty() {
            vec![]
        } else {
            vec![Instruction::ApplyActions(actions_up(&e.actions))]
        },
    }
}

/// A 1.0 FLOW_REMOVED as 1.3's (table 0).
pub fn flow_removed_up(f: &of10::FlowRemoved10) -> FlowRemoved {
    FlowRemoved {
        cookie: f.cookie,
        priority: f.priority,
        reason: f.reason,
        table_id: 0,
        duration_sec: f.duration_sec,
        duration_nsec: f.duration_nsec,
        idle_timeout: f.idle_timeout,
        hard_timeout: 0,
        packet_count: f.packet_count,
        byte_count: f.byte_count,
        matches: match_up(&f.matches),
    }
}

/// A 1.0 port as 1.3's (speeds unknown: 0).
pub fn port_up_desc(p: &PhyPort) -> Port {
    Port {
        port_no: port_up(p.port_no),
        hw_addr: p.hw_addr,
        name: p.name,
        config: p.config,
        state: p.state,
        curr: p.curr,
        advertised: p.advertised,
        supported: p.supported,
        peer: p.peer,
        curr_speed: 0,
        max_speed: 0,
    }
}

/// OFPET_BAD_REQUEST / OFPBRC_BAD_PORT.
const BAD_PORT: Refusal = (error::BAD_REQUEST, 11);

/// A 1.3 flow-stats (or aggregate) request body as 1.0's: the match, table
/// and out_port filters carried over. 1.0 cannot filter by cookie or group,
/// so such a request is refused (OFPBRC_BAD_MULTIPART) rather than answered
/// with flows it did not ask for.
pub fn flow_stats_request_down(body: &[u8]) -> Result<Vec<u8>, Refusal> {
    let req = FlowStatsRequest::decode(body).map_err(|_| (error::BAD_REQUEST, error::BAD_LEN))?;
    if req.cookie_mask != 0 || req.out_group != crate::of13::OFPG_ANY {
        return Err((error::BAD_REQUEST, error::BAD_MULTIPART));
    }
    let out_port = port_down(req.out_port).ok_or(BAD_PORT)?;
    Ok(of10::flow_stats_request(
        &match_down(&req.matches)?,
        req.table_id,
        out_port,
    ))
}

/// A 1.3 port-stats request body (port u32, OFPP_ANY: all) as 1.0's
/// (OFPP_NONE: all).
pub fn port_stats_request_down(body: &[u8]) -> Result<Vec<u8>, Refusal> {
    let port = body.get(..4).ok_or((error::BAD_REQUEST, error::BAD_LEN))?;
    let port =
        port_down(u32::from_be_bytes([port[0], port[1], port[2], port[3]])).ok_or(BAD_PORT)?;
    Ok(of10::stats::port_stats_request(port))
}

/// A 1.0 port-stats entry as 1.3's (1.0 keeps no duration: 0).
pub fn port_stats_up(e: &PortStats10) -> PortStats {
    PortStats {
        port_no: port_up(e.port_no),
        counters: e.counters,
        duration_sec: 0,
        duration_nsec: 0,
    }
}

/// A 1.0 table-stats entry as 1.3's (name, wildcards and size have no place there).
pub fn table_stats_up(e: &TableStats10) -> TableStats {
    TableStats {
        table_id: e.table_id,
        active_count: e.active_count,
        lookup_count: e.lookup_count,
        matched_count: e.matched_count,
    }
}

/// The match-all 1.0 flow-stats request body over every table.
pub fn flow_stats_request_all() -> Vec<u8> {
    let m = Match10 {
        wildcards: OFPFW_ALL,
        ..Match10::default()
    };
    of10::flow_stats_request(&m, 0xff, of10::OFPP_NONE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_match_1_0_can_hold_goes_down_and_comes_back_the_same() {
        let m = Match::new(vec![
            Oxm::basic(field::IN_PORT, &3u32.to_be_bytes()),
            Oxm::basic(field::ETH_DST, &[2, 0, 0, 0, 0, 9]),
            Oxm::basic(field::ETH_TYPE, &0x0800u16.to_be_bytes()),
            Oxm::basic(field::IP_PROTO, &[17]),
            Oxm::masked(field::IPV4_SRC, &[198, 18, 0, 0], &[255, 255, 0, 0]),
            Oxm::basic(field::IPV4_DST, &[198, 19, 0, 1]),
            Oxm::basic(field::UDP_DST, &7u16.to_be_bytes()),
        ]);
        let down = match_down(&m).unwrap();
        assert_eq!(down.in_port, 3);
        assert_eq!((down.wildcards >> NW_SRC_SHIFT) & 0x3f, 16);
        assert_eq!((down.wildcards >> NW_DST_SHIFT) & 0x3f, 0);
        assert_eq!(
            down.wildcards & (FW_TP_SRC | FW_DL_SRC),
            FW_TP_SRC | FW_DL_SRC
        );
        assert_eq!(match_up(&down), m);
        // Metadata has no place in 1.0; nor has a non-prefix address mask.
        let md = Match::new(vec![Oxm::basic(field::METADATA, &7u64.to_be_bytes())]);
        assert_eq!(match_down(&md), Err(BAD_FIELD));
        let odd = Match::new(vec![Oxm::masked(
            field::IPV4_DST,
            &[198, 19, 0, 1],
            &[255, 0, 255, 0],
        )]);
        assert_eq!(match_down(&odd), Err(BAD_FIELD));
        assert_eq!(match_up(&Match10::all()), Match::default());
    }

    #[test]
    fn a_flow_mod_keeps_its_actions_and_goto_is_refused() {
        let mut fm = FlowMod::add(
            0,
            100,
            Match::new(vec![Oxm::basic(field::IN_PORT, &1u32.to_be_bytes())]),
            vec![Instruction::ApplyActions(vec![
                Action::SetField(Oxm::basic(field::ETH_DST, &[2, 0, 0, 0, 0, 3])),
                Action::Output {
                    port: 0xffff_fffd,
                    max_len: 128,
                },
            ])],
        );
        fm.flags = 1;
        let d = flow_mod_down(&fm).unwrap();
        assert_eq!(d.flags, 1);
        assert_eq!(d.out_port, of10::OFPP_NONE);
        assert_eq!(
            d.actions[1],
            Action10::Output {
                port: 0xfffd,
                max_len: 128
            }
        );
        assert_eq!(
            actions_up(&d.actions),
            match &fm.instructions[0] {
                Instruction::ApplyActions(a) => a.clone(),
                _ => unreachable!(),
            }
        );
        let goto = FlowMod::add(0, 1, Match::default(), vec![Instruction::GotoTable(1)]);
        assert_eq!(flow_mod_down(&goto), Err(UNSUP_INST));
        let t1 = FlowMod::add(1, 1, Match::default(), vec![]);
        assert_eq!(
            flow_mod_down(&t1),
            Err((error::FLOW_MOD_FAILED, error::FLOW_MOD_BAD_TABLE_ID))
        );
    }

    #[test]
    fn ports_keep_their_meaning_across_versions() {
        for p in [1u32, 0xfeff, 0xffff_fffd, 0xffff_fffb, 0xffff_ffff] {
            assert_eq!(port_up(port_down(p).unwrap()), p);
        }
        assert_eq!(port_down(0x1_0000), None);
    }
}
