//! A switch that speaks only OpenFlow 1.0 behind the proxy: its messages
//! are turned into the 1.3 messages the core works with ([`up`]), and what
//! the core sends it back into 1.0 ([`down`]). The core keeps speaking 1.3
//! to the controller; the conversions of single messages are in [`super::v10`].
//!
//! A 1.0 switch has one table and no GOTO_TABLE, metadata or VLAN push, so
//! it can hold one global table whose flows only output (no cross-switch
//! GOTO), and no link may feed it (`config.rs` says so in one sentence).
//! Statistics: FLOW, AGGREGATE, TABLE, PORT_STATS and DESC are asked in 1.0
//! and their replies read as 1.3's; other multipart types (1.0 has no
//! PORT_DESC, QUEUE differs, …) get an empty part from it.

use super::translate::Refusal;
use super::v10;
use crate::of10::stats::{self, PortStats10, TableStats10};
use crate::of10::{self, Action10, Body as B10, FlowStats10, Message10};
use crate::of13::buf::{Put, Reader};
use crate::of13::message::error;
use crate::of13::multipart::mp;
use crate::of13::oxm::field;
use crate::of13::{Action, Body, ErrorMsg, Match, Message, Oxm, PortStatus};

/// OFPR_NO_MATCH: the reason of a 1.0 PACKET_IN for a table miss.
const OFPR_NO_MATCH: u8 = 0;

/// What to do with a message the core sends a 1.0 switch.
#[derive(Debug, PartialEq)]
pub enum Down {
    /// Send this.
    Send(Message10),
    /// A multipart request of this type the switch cannot answer: the core
    /// gets an empty last part from it at once.
    EmptyReply(u16),
    /// Nothing to send (e.g. SET_CONFIG).
    Drop,
}

/// A 1.3 message of the core as what a 1.0 switch gets.
pub fn down(m: &Message) -> Result<Down, Refusal> {
    let x = m.xid;
    let send = |b| Ok(Down::Send(Message10::new(x, b)));
    match &m.body {
        Body::EchoRequest(d) => send(B10::EchoRequest(d.clone())),
        Body::EchoReply(d) => send(B10::EchoReply(d.clone())),
        Body::FeaturesRequest => send(B10::FeaturesRequest),
        Body::BarrierRequest => send(B10::BarrierRequest),
        Body::FlowMod(fm) => send(B10::FlowMod(v10::flow_mod_down(fm)?)),
        Body::MultipartRequest(mp::FLOW, _, body) => send(B10::StatsRequest(
            of10::OFPST_FLOW,
            0,
            v10::flow_stats_request_down(body)?,
        )),
        Body::MultipartRequest(mp::AGGREGATE, _, body) => send(B10::StatsRequest(
            stats::OFPST_AGGREGATE,
            0,
            v10::flow_stats_request_down(body)?,
        )),
        Body::MultipartRequest(mp::PORT_STATS, _, body) => send(B10::StatsRequest(
            stats::OFPST_PORT,
            0,
            v10::port_stats_request_down(body)?,
        )),
        Body::MultipartRequest(mp::TABLE, _, _) => {
            send(B10::StatsRequest(stats::OFPST_TABLE, 0, vec![]))
        }
        Body::MultipartRequest(mp::DESC, _, _) => {
            send(B10::StatsRequest(stats::OFPST_DESC, 0, vec![]))
        }
        Body::MultipartRequest(t, _, _) => Ok(Down::EmptyReply(*t)),
        Body::Other(13, body) => send(packet_out_down(body)?),
        Body::Hello(_) | Body::SetConfig(..) | Body::GetConfigRequest => Ok(Down::Drop),
        _ => Err((error::BAD_REQUEST, error::BAD_TYPE)),
    }
}

/// A 1.3 PACKET_OUT body (buffer_id, in_port u32, actions_len, pad 6,
/// actions, frame) as 1.0's.
fn packet_out_down(body: &[u8]) -> Result<B10, Refusal> {
    let bad_len = (error::BAD_REQUEST, error::BAD_LEN);
    let mut r = Reader::new(body, "packet-out");
    let buffer_id = r.u32().map_err(|_| bad_len)?;
    let in_port = v10::port_down(r.u32().map_err(|_| bad_len)?).ok_or(bad_len)?;
    let n = r.u16().map_err(|_| bad_len)? as usize;
    r.skip(6).map_err(|_| bad_len)?;
    let actions = Action::decode_list(r.bytes(n).map_err(|_| bad_len)?).map_err(|_| bad_len)?;
    let mut a10 = Vec::new();
    for a in &actions {
        match a {
            Action::Output { port, max_len } => a10.push(Action10::Output {
                port: v10::port_down(*port).ok_or((error::BAD_ACTION, error::BAD_OUT_PORT))?,
                max_len: *max_len,
            }),
            _ => return Err((error::BAD_ACTION, 0)),
        }
    }
    Ok(B10::PacketOut(buffer_id, in_port, a10, r.rest().to_vec()))
}

/// A 1.0 message of the switch as the 1.3 message the core handles; `None`
/// for what the core has no use for.
pub fn up(m: Message10) -> Option<Message> {
    let x = m.xid;
    let body = match m.body {
        B10::EchoRequest(d) => Body::EchoRequest(d),
        B10::EchoReply(d) => Body::EchoReply(d),
        B10::BarrierReply => Body::BarrierReply,
        B10::Error(typ, code, data) => Body::Error(ErrorMsg { typ, code, data }),
        B10::StatsReply(of10::OFPST_FLOW, flags, body) => {
            let mut out = Vec::new();
            for e in FlowStats10::decode_all(&body).ok()? {
                v10::flow_stats_up(&e).encode(&mut out);
            }
            Body::MultipartReply(mp::FLOW, flags, out)
        }
        B10::StatsReply(stats::OFPST_PORT, flags, body) => {
            let mut out = Vec::new();
            for e in PortStats10::decode_all(&body).ok()? {
                v10::port_stats_up(&e).encode(&mut out);
            }
            Body::MultipartReply(mp::PORT_STATS, flags, out)
        }
        B10::StatsReply(stats::OFPST_TABLE, flags, body) => {
            let mut out = Vec::new();
            for e in TableStats10::decode_all(&body).ok()? {
                v10::table_stats_up(&e).encode(&mut out);
            }
            Body::MultipartReply(mp::TABLE, flags, out)
        }
        // Laid out as in 1.3.
        B10::StatsReply(t @ (stats::OFPST_DESC | stats::OFPST_AGGREGATE), flags, body) => {
            Body::MultipartReply(t, flags, body)
        }
        B10::StatsReply(t, flags, _) => Body::MultipartReply(t, flags, vec![]),
        B10::FlowRemoved(f) => Body::FlowRemoved(v10::flow_removed_up(&f)),
        // A frame that matched no flow: a 1.0 switch sends it to the
        // controller, a 1.3 switch without a table-miss flow drops it. The
        // controller speaks 1.3, so it does not see these.
        B10::PacketIn(_, _, _, OFPR_NO_MATCH, _) => return None,
        B10::PacketIn(buffer_id, total_len, in_port, reason, frame) => {
            let mut b = Vec::new();
            b.put_u32(buffer_id);
            b.put_u16(total_len);
            b.put_u8(reason);
            b.put_u8(0); // the one table
            b.put_u64(u64::MAX);
            Match::new(vec![Oxm::basic(
                field::IN_PORT,
                &v10::port_up(in_port).to_be_bytes(),
            )])
            .encode(&mut b);
            b.pad(2);
            b.extend_from_slice(&frame);
            Body::Other(10, b)
        }
        B10::PortStatus(reason, p) => Body::PortStatus(PortStatus {
            reason,
            port: v10::port_up_desc(&p),
        }),
        _ => return None,
    };
    Some(Message::new(x, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::of13::{FlowMod, Instruction};

    #[test]
    fn what_the_core_sends_becomes_1_0_and_replies_come_back_as_1_3() {
        let fm = FlowMod::add(
            0,
            10,
            Match::new(vec![Oxm::basic(field::IN_PORT, &1u32.to_be_bytes())]),
            vec![Instruction::ApplyActions(vec![Action::Output {
                port: 2,
                max_len: 0,
            }])],
        );
        let Down::Send(m) = down(&Message::new(5, Body::FlowMod(fm))).unwrap() else {
            panic!()
        };
        let B10::FlowMod(f) = &m.body else { panic!() };
        assert_eq!((m.xid, f.matches.in_port, f.priority), (5, 1, 10));
        assert_eq!(
            down(&Message::new(6, Body::BarrierRequest)),
            Ok(Down::Send(Message10::new(6, B10::BarrierRequest)))
        );
        // Table statistics are asked in 1.0; queue statistics (laid out
        // otherwise in 1.0) get an empty part.
        assert_eq!(
            down(&Message::new(
                7,
                Body::MultipartRequest(mp::TABLE, 0, vec![])
            )),
            Ok(Down::Send(Message10::new(
                7,
                B10::StatsRequest(stats::OFPST_TABLE, 0, vec![])
            )))
        );
        assert_eq!(
            down(&Message::new(7, Body::MultipartRequest(5, 0, vec![0; 8]))),
            Ok(Down::EmptyReply(5))
        );
        // A flow-stats request filtered by cookie: 1.0 cannot, so it is
        // refused rather than answered with every flow.
        let mut by_cookie = crate::of13::FlowStatsRequest::all();
        by_cookie.cookie_mask = u64::MAX;
        assert_eq!(
            down(&Message::new(
                8,
                Body::MultipartRequest(mp::FLOW, 0, by_cookie.encode())
            )),
            Err((error::BAD_REQUEST, error::BAD_MULTIPART))
        );
        // A match and out_port filter go down as 1.0's.
        let mut filtered = crate::of13::FlowStatsRequest::all();
        filtered.matches = Match::new(vec![Oxm::basic(field::IN_PORT, &2u32.to_be_bytes())]);
        filtered.out_port = 3;
        let Down::Send(m) = down(&Message::new(
            9,
            Body::MultipartRequest(mp::AGGREGATE, 0, filtered.encode()),
        ))
        .unwrap() else {
            panic!()
        };
        let B10::StatsRequest(stats::OFPST_AGGREGATE, 0, body) = &m.body else {
            panic!("{m:?}")
        };
        let mut r = Reader::new(body, "t");
        assert_eq!(of10::Match10::decode(&mut r).unwrap().in_port, 2);
        assert_eq!(
            (r.u8().unwrap(), r.u8().unwrap(), r.u16().unwrap()),
            (0xff, 0, 3)
        );
        // A flow-stats reply of 1.0 reads as 1.3 entries.
        let mut entry = Vec::new();
        FlowStats10 {
            table_id: 0,
            matches: v10::match_down(&Match::new(vec![Oxm::basic(
                field::IN_PORT,
                &1u32.to_be_bytes(),
            )]))
            .unwrap(),
            duration_sec: 1,
            duration_nsec: 2,
            priority: 10,
            idle_timeout: 0,
            hard_timeout: 0,
            cookie: 7,
            packet_count: 3,
            byte_count: 4,
            actions: vec![Action10::Output {
                port: 2,
                max_len: 0,
            }],
        }
        .encode(&mut entry);
        let up13 = up(Message10::new(8, B10::StatsReply(1, 0, entry))).unwrap();
        let Body::MultipartReply(mp::FLOW, 0, body) = up13.body else {
            panic!()
        };
        let e = crate::of13::FlowStats::decode_all(&body).unwrap();
        assert_eq!((e[0].cookie, e[0].matches.in_port()), (7, Some(1)));
        // PACKET_IN (reason OFPR_ACTION): in_port as an OXM match, the frame after it.
        let pin = up(Message10::new(
            0,
            B10::PacketIn(u32::MAX, 3, 2, 1, vec![9, 8, 7]),
        ))
        .unwrap();
        let Body::Other(10, b) = pin.body else {
            panic!()
        };
        let mut r = Reader::new(&b[16..], "t");
        assert_eq!(Match::decode(&mut r).unwrap().in_port(), Some(2));
        assert_eq!(r.rest(), &[0, 0, 9, 8, 7]);
        // A table miss (OFPR_NO_MATCH): 1.3 drops it, so the controller does not see it.
        assert_eq!(
            up(Message10::new(
                0,
                B10::PacketIn(u32::MAX, 3, 2, OFPR_NO_MATCH, vec![9, 8, 7])
            )),
            None
        );
    }
}
