//! OpenFlow 1.0 (wire version 0x01): the messages a proxy needs towards a
//! switch that speaks only 1.0 — HELLO, ERROR, ECHO, FEATURES (with the
//! ports), FLOW_MOD (the fixed 40-byte `ofp_match`, actions), STATS (flow,
//! port and table statistics typed, in [`stats`] those that differ from
//! 1.3's; bodies raw in [`Body`]), PACKET_IN/OUT, FLOW_REMOVED, BARRIER. No I/O;
//! golden bytes from os-ken's `ofproto_v1_0_parser` in
//! `tests/fixtures/of10/` (`cargo test -p nflab-sdn --test of10_golden`).
//! Other types decode as [`Body::Other`] with their bytes.
//!
//! The proxy speaks it to a switch that answers its HELLO in 1.0
//! (`proxy/switch10.rs`, docs/sdn.md).

pub mod stats;

use crate::of13::buf::{Put, Reader};
use crate::of13::port_name::PortName;
use crate::of13::CodecError;

/// Wire version of OpenFlow 1.0.
pub const VERSION: u8 = 0x01;
/// OFPP_NONE: no port (1.0's ports are 16 bits).
pub const OFPP_NONE: u16 = 0xffff;
/// OFPP_CONTROLLER.
pub const OFPP_CONTROLLER: u16 = 0xfffd;
/// OFPST_FLOW.
pub const OFPST_FLOW: u16 = 1;
/// OFPSF_REPLY_MORE.
pub const REPLY_MORE: u16 = 1;
/// Every wildcard bit of `ofp_match` (OFPFW_ALL).
pub const OFPFW_ALL: u32 = (1 << 22) - 1;

/// Message types of 1.0 (they differ from 1.3's after PORT_STATUS).
pub mod typ {
    /// OFPT_HELLO.
    pub const HELLO: u8 = 0;
    /// OFPT_ERROR.
    pub const ERROR: u8 = 1;
    /// OFPT_ECHO_REQUEST.
    pub const ECHO_REQUEST: u8 = 2;
    /// OFPT_ECHO_REPLY.
    pub const ECHO_REPLY: u8 = 3;
    /// OFPT_FEATURES_REQUEST.
    pub const FEATURES_REQUEST: u8 = 5;
    /// OFPT_FEATURES_REPLY.
    pub const FEATURES_REPLY: u8 = 6;
    /// OFPT_PACKET_IN.
    pub const PACKET_IN: u8 = 10;
    /// OFPT_FLOW_REMOVED.
    pub const FLOW_REMOVED: u8 = 11;
    /// OFPT_PORT_STATUS (reason, 7 pad bytes, a [`super::PhyPort`]).
    pub const PORT_STATUS: u8 = 12;
    /// OFPT_PACKET_OUT.
    pub const PACKET_OUT: u8 = 13;
    /// OFPT_FLOW_MOD.
    pub const FLOW_MOD: u8 = 14;
    /// OFPT_STATS_REQUEST.
    pub const STATS_REQUEST: u8 = 16;
    /// OFPT_STATS_REPLY.
    pub const STATS_REPLY: u8 = 17;
    /// OFPT_BARRIER_REQUEST.
    pub const BARRIER_REQUEST: u8 = 18;
    /// OFPT_BARRIER_REPLY.
    pub const BARRIER_REPLY: u8 = 19;
}

/// `ofp_match`: every field, with the wildcard bits saying which count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Match10 {
    /// OFPFW_* bits (a set bit: the field is ignored; nw_src/nw_dst carry a
    /// count of ignored low bits at 8 and 14).
    pub wildcards: u32,
    /// Ingress port.
    pub in_port: u16,
    /// Ethernet source.
    pub dl_src: [u8; 6],
    /// Ethernet destination.
    pub dl_dst: [u8; 6],
    /// VLAN id.
    pub dl_vlan: u16,
    /// VLAN priority.
    pub dl_vlan_pcp: u8,
    /// Ethernet type.
    pub dl_type: u16,
    /// IP ToS.
    pub nw_tos: u8,
    /// IP protocol.
    pub nw_proto: u8,
    /// IPv4 source.
    pub nw_src: u32,
    /// IPv4 destination.
    pub nw_dst: u32,
    /// Transport source port.
    pub tp_src: u16,
    /// Transport destination port.
    pub tp_dst: u16,
}

impl Match10 {
    /// Matches everything.
    pub fn all() -> Match10 {
        Match10 {
            wildcards: OFPFW_ALL,
            ..Match10::default()
        }
    }

    /// The 40 bytes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.wildcards);
        out.put_u16(self.in_port);
        out.extend_from_slice(&self.dl_src);
        out.extend_from_slice(&self.dl_dst);
        out.put_u16(self.dl_vlan);
        out.put_u8(self.dl_vlan_pcp);
        out.pad(1);
        out.put_u16(self.dl_type);
        out.put_u8(self.nw_tos);
        out.put_u8(self.nw_proto);
        out.pad(2);
        out.put_u32(self.nw_src);
        out.put_u32(self.nw_dst);
        out.put_u16(self.tp_src);
        out.put_u16(self.tp_dst);
    }

    /// Read 40 bytes.
    pub fn decode(r: &mut Reader) -> Result<Match10, CodecError> {
        let wildcards = r.u32()?;
        let in_port = r.u16()?;
        let mut dl_src = [0; 6];
        dl_src.copy_from_slice(r.bytes(6)?);
        let mut dl_dst = [0; 6];
        dl_dst.copy_from_slice(r.bytes(6)?);
        let dl_vlan = r.u16()?;
        let dl_vlan_pcp = r.u8()?;
        r.skip(1)?;
        let dl_type = r.u16()?;
        let nw_tos = r.u8()?;
        let nw_proto = r.u8()?;
        r.skip(2)?;
        Ok(Match10 {
            wildcards,
            in_port,
            dl_src,
            dl_dst,
            dl_vlan,
            dl_vlan_pcp,
            dl_type,
            nw_tos,
            nw_proto,
            nw_src: r.u32()?,
            nw_dst: r.u32()?,
            tp_src: r.u16()?,
            tp_dst: r.u16()?,
        })
    }
}

/// An action of 1.0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action10 {
    /// OFPAT_OUTPUT.
    Output {
        /// Port.
        port: u16,
        /// Bytes to the controller.
        max_len: u16,
    },
    /// Any other action: type and body after type and length.
    Other {
        /// OFPAT_*.
        typ: u16,
        /// Body.
        body: Vec<u8>,
    },
}

impl Action10 {
    /// Encode a list.
    pub fn encode_list(list: &[Action10], out: &mut Vec<u8>) {
        for a in list {
            match a {
                Action10::Output { port, max_len } => {
                    out.put_u16(0);
                    out.put_u16(8);
                    out.put_u16(*port);
                    out.put_u16(*max_len);
                }
                Action10::Other { typ, body } => {
                    out.put_u16(*typ);
                    out.put_u16((4 + body.len()) as u16);
                    out.extend_from_slice(body);
                }
            }
        }
    }

    /// Decode a list filling `data`.
    pub fn decode_list(data: &[u8]) -> Result<Vec<Action10>, CodecError> {
        let mut r = Reader::new(data, "1.0 action");
        let mut v = Vec::new();
        while r.remaining() > 0 {
            let typ = r.u16()?;
            let len = r.u16()? as usize;
            if len < 8 || len % 8 != 0 {
                return Err(CodecError::BadLength("action length not a multiple of 8"));
            }
            let body = r.bytes(len - 4)?;
            v.push(if typ == 0 {
                Action10::Output {
                    port: u16::from_be_bytes([body[0], body[1]]),
                    max_len: u16::from_be_bytes([body[2], body[3]]),
                }
            } else {
                Action10::Other {
                    typ,
                    body: body.to_vec(),
                }
            });
        }
        Ok(v)
    }
}

/// `ofp_phy_port` (48 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhyPort {
    /// Port number.
    pub port_no: u16,
    /// MAC address.
    pub hw_addr: [u8; 6],
    /// Name: the 16 bytes as received (text up to the first NUL).
    pub name: PortName,
    /// OFPPC_* bits.
    pub config: u32,
    /// OFPPS_* bits (1: link down).
    pub state: u32,
    /// Current features.
    pub curr: u32,
    /// Advertised features.
    pub advertised: u32,
    /// Supported features.
    pub supported: u32,
    /// Peer's features.
    pub peer: u32,
}

impl PhyPort {
    /// Encode (48 bytes).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(self.port_no);
        out.extend_from_slice(&self.hw_addr);
        out.extend_from_slice(self.name.bytes());
        for v in [
            self.config,
            self.state,
            self.curr,
            self.advertised,
            self.supported,
            self.peer,
        ] {
            out.put_u32(v);
        }
    }

    /// Decode one.
    pub fn decode(r: &mut Reader) -> Result<PhyPort, CodecError> {
        let port_no = r.u16()?;
        let mut hw_addr = [0; 6];
        hw_addr.copy_from_slice(r.bytes(6)?);
        let name = PortName::from_slice(r.bytes(PortName::LEN)?)
            .ok_or(CodecError::Truncated("1.0 port name"))?;
        Ok(PhyPort {
            port_no,
            hw_addr,
            name,
            config: r.u32()?,
            state: r.u32()?,
            curr: r.u32()?,
            advertised: r.u32()?,
            supported: r.u32()?,
            peer: r.u32()?,
        })
    }
}

/// OFPT_FEATURES_REPLY of 1.0: the ports come with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Features10 {
    /// Datapath id.
    pub datapath_id: u64,
    /// Packets buffered.
    pub n_buffers: u32,
    /// Tables.
    pub n_tables: u8,
    /// OFPC_* bits.
    pub capabilities: u32,
    /// OFPAT_* bits supported.
    pub actions: u32,
    /// The ports.
    pub ports: Vec<PhyPort>,
}

/// OFPT_FLOW_MOD of 1.0 (no table id, one action list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowMod10 {
    /// Match.
    pub matches: Match10,
    /// Cookie.
    pub cookie: u64,
    /// OFPFC_* (ADD 0 … DELETE_STRICT 4).
    pub command: u16,
    /// Idle timeout, s.
    pub idle_timeout: u16,
    /// Hard timeout, s.
    pub hard_timeout: u16,
    /// Priority.
    pub priority: u16,
    /// Buffered packet.
    pub buffer_id: u32,
    /// Delete: only flows outputting here (OFPP_NONE: any).
    pub out_port: u16,
    /// OFPFF_* (1: send FLOW_REMOVED).
    pub flags: u16,
    /// Actions.
    pub actions: Vec<Action10>,
}

/// One entry of a 1.0 flow-stats reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowStats10 {
    /// Table.
    pub table_id: u8,
    /// Match.
    pub matches: Match10,
    /// Installed for, s.
    pub duration_sec: u32,
    /// … and ns.
    pub duration_nsec: u32,
    /// Priority.
    pub priority: u16,
    /// Idle timeout, s.
    pub idle_timeout: u16,
    /// Hard timeout, s.
    pub hard_timeout: u16,
    /// Cookie.
    pub cookie: u64,
    /// Packets.
    pub packet_count: u64,
    /// Bytes.
    pub byte_count: u64,
    /// Actions.
    pub actions: Vec<Action10>,
}

impl FlowStats10 {
    /// Encode one entry.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(0);
        out.put_u8(self.table_id);
        out.pad(1);
        self.matches.encode(out);
        out.put_u32(self.duration_sec);
        out.put_u32(self.duration_nsec);
        out.put_u16(self.priority);
        out.put_u16(self.idle_timeout);
        out.put_u16(self.hard_timeout);
        out.pad(6);
        out.put_u64(self.cookie);
        out.put_u64(self.packet_count);
        out.put_u64(self.byte_count);
        Action10::encode_list(&self.actions, out);
        let len = (out.len() - start) as u16;
        out.set_u16(start, len);
    }

    /// Every entry of a flow-stats reply body.
    pub fn decode_all(data: &[u8]) -> Result<Vec<FlowStats10>, CodecError> {
        let mut r = Reader::new(data, "1.0 flow stats");
        let mut v = Vec::new();
        while r.remaining() > 0 {
            let len = r.u16()? as usize;
            if len < 88 {
                return Err(CodecError::BadLength("1.0 flow stats entry below 88 bytes"));
            }
            let mut e = Reader::new(r.bytes(len - 2)?, "1.0 flow stats entry");
            let table_id = e.u8()?;
            e.skip(1)?;
            let matches = Match10::decode(&mut e)?;
            let duration_sec = e.u32()?;
            let duration_nsec = e.u32()?;
            let priority = e.u16()?;
            let idle_timeout = e.u16()?;
            let hard_timeout = e.u16()?;
            e.skip(6)?;
            v.push(FlowStats10 {
                table_id,
                matches,
                duration_sec,
                duration_nsec,
                priority,
                idle_timeout,
                hard_timeout,
                cookie: e.u64()?,
                packet_count: e.u64()?,
                byte_count: e.u64()?,
                actions: Action10::decode_list(e.rest())?,
            });
        }
        Ok(v)
    }
}

/// OFPT_FLOW_REMOVED of 1.0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRemoved10 {
    /// Match.
    pub matches: Match10,
    /// Cookie.
    pub cookie: u64,
    /// Priority.
    pub priority: u16,
    /// OFPRR_*.
    pub reason: u8,
    /// Installed for, s.
    pub duration_sec: u32,
    /// … and ns.
    pub duration_nsec: u32,
    /// Idle timeout, s.
    pub idle_timeout: u16,
    /// Packets.
    pub packet_count: u64,
    /// Bytes.
    pub byte_count: u64,
}

/// Body of a 1.0 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// OFPT_HELLO.
    Hello(Vec<u8>),
    /// OFPT_ERROR: type, code, data.
    Error(u16, u16, Vec<u8>),
    /// OFPT_ECHO_REQUEST.
    EchoRequest(Vec<u8>),
    /// OFPT_ECHO_REPLY.
    EchoReply(Vec<u8>),
    /// OFPT_FEATURES_REQUEST.
    FeaturesRequest,
    /// OFPT_FEATURES_REPLY.
    FeaturesReply(Features10),
    /// OFPT_PACKET_IN: buffer_id, total_len, in_port, reason, frame.
    PacketIn(u32, u16, u16, u8, Vec<u8>),
    /// OFPT_FLOW_REMOVED.
    FlowRemoved(FlowRemoved10),
    /// OFPT_PORT_STATUS: OFPPR_* reason (ADD 0, DELETE 1, MODIFY 2), the port.
    PortStatus(u8, PhyPort),
    /// OFPT_PACKET_OUT: buffer_id, in_port, actions, frame.
    PacketOut(u32, u16, Vec<Action10>, Vec<u8>),
    /// OFPT_FLOW_MOD.
    FlowMod(FlowMod10),
    /// OFPT_STATS_REQUEST: type, flags, raw body.
    StatsRequest(u16, u16, Vec<u8>),
    /// OFPT_STATS_REPLY: type, flags (1: more), raw body.
    StatsReply(u16, u16, Vec<u8>),
    /// OFPT_BARRIER_REQUEST.
    BarrierRequest,
    /// OFPT_BARRIER_REPLY.
    BarrierReply,
    /// Any other type, raw.
    Other(u8, Vec<u8>),
}

/// A 1.0 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message10 {
    /// Transaction id.
    pub xid: u32,
    /// What it says.
    pub body: Body,
}

/// The body of a flow-stats request: match, table (0xff: all), out port.
pub fn flow_stats_request(m: &Match10, table_id: u8, out_port: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(44);
    m.encode(&mut out);
    out.put_u8(table_id);
    out.pad(1);
    out.put_u16(out_port);
    out
}

impl Message10 {
    /// A message.
    pub fn new(xid: u32, body: Body) -> Message10 {
        Message10 { xid, body }
    }

    fn typ(&self) -> u8 {
        use typ::*;
        match &self.body {
            Body::Hello(_) => HELLO,
            Body::Error(..) => ERROR,
            Body::EchoRequest(_) => ECHO_REQUEST,
            Body::EchoReply(_) => ECHO_REPLY,
            Body::FeaturesRequest => FEATURES_REQUEST,
            Body::FeaturesReply(_) => FEATURES_REPLY,
            Body::PacketIn(..) => PACKET_IN,
            Body::FlowRemoved(_) => FLOW_REMOVED,
            Body::PortStatus(..) => PORT_STATUS,
            Body::PacketOut(..) => PACKET_OUT,
            Body::FlowMod(_) => FLOW_MOD,
            Body::StatsRequest(..) => STATS_REQUEST,
            Body::StatsReply(..) => STATS_REPLY,
            Body::BarrierRequest => BARRIER_REQUEST,
            Body::BarrierReply => BARRIER_REPLY,
            Body::Other(t, _) => *t,
        }
    }

    /// The bytes on the wire.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.put_u8(VERSION);
        out.put_u8(self.typ());
        out.put_u16(0);
        out.put_u32(self.xid);
        match &self.body {
            Body::Hello(d) | Body::EchoRequest(d) | Body::EchoReply(d) | Body::Other(_, d) => {
                out.extend_from_slice(d)
            }
            Body::Error(t, c, d) => {
                out.put_u16(*t);
                out.put_u16(*c);
                out.extend_from_slice(d);
            }
            Body::FeaturesRequest | Body::BarrierRequest | Body::BarrierReply => {}
            Body::FeaturesReply(f) => {
                out.put_u64(f.datapath_id);
                out.put_u32(f.n_buffers);
                out.put_u8(f.n_tables);
                out.pad(3);
                out.put_u32(f.capabilities);
                out.put_u32(f.actions);
                for p in &f.ports {
                    p.encode(&mut out);
                }
            }
            Body::PacketIn(buffer_id, total_len, in_port, reason, frame) => {
                out.put_u32(*buffer_id);
                out.put_u16(*total_len);
                out.put_u16(*in_port);
                out.put_u8(*reason);
                out.pad(1);
                out.extend_from_slice(frame);
            }
            Body::FlowRemoved(f) => {
                f.matches.encode(&mut out);
                out.put_u64(f.cookie);
                out.put_u16(f.priority);
                out.put_u8(f.reason);
                out.pad(1);
                out.put_u32(f.duration_sec);
                out.put_u32(f.duration_nsec);
                out.put_u16(f.idle_timeout);
                out.pad(2);
                out.put_u64(f.packet_count);
                out.put_u64(f.byte_count);
            }
            Body::PortStatus(reason, port) => {
                out.put_u8(*reason);
                out.pad(7);
                port.encode(&mut out);
            }
            Body::PacketOut(buffer_id, in_port, actions, frame) => {
                out.put_u32(*buffer_id);
                out.put_u16(*in_port);
                let at = out.len();
                out.put_u16(0);
                Action10::encode_list(actions, &mut out);
                let len = (out.len() - at - 2) as u16;
                out.set_u16(at, len);
                out.extend_from_slice(frame);
            }
            Body::FlowMod(f) => {
                f.matches.encode(&mut out);
                out.put_u64(f.cookie);
                out.put_u16(f.command);
                out.put_u16(f.idle_timeout);
                out.put_u16(f.hard_timeout);
                out.put_u16(f.priority);
                out.put_u32(f.buffer_id);
                out.put_u16(f.out_port);
                out.put_u16(f.flags);
                Action10::encode_list(&f.actions, &mut out);
            }
            Body::StatsRequest(t, flags, d) | Body::StatsReply(t, flags, d) => {
                out.put_u16(*t);
                out.put_u16(*flags);
                out.extend_from_slice(d);
            }
        }
        let len = out.len() as u16;
        out.set_u16(2, len);
        out
    }

    /// Decode one whole message.
    pub fn decode(data: &[u8]) -> Result<Message10, CodecError> {
        let mut r = Reader::new(data, "header");
        let version = r.u8()?;
        let t = r.u8()?;
        let len = r.u16()? as usize;
        let xid = r.u32()?;
        if len < 8 || len > data.len() {
            return Err(CodecError::BadLength(
                "header length disagrees with the bytes",
            ));
        }
        if version != VERSION && t != typ::HELLO {
            return Err(CodecError::Version(version));
        }
        let raw = &data[8..len];
        let mut b = Reader::new(raw, "1.0 message body");
        use typ::*;
        let body = match t {
            HELLO => Body::Hello(raw.to_vec()),
            ERROR => Body::Error(b.u16()?, b.u16()?, b.rest().to_vec()),
            ECHO_REQUEST => Body::EchoRequest(raw.to_vec()),
            ECHO_REPLY => Body::EchoReply(raw.to_vec()),
            FEATURES_REQUEST => Body::FeaturesRequest,
            FEATURES_REPLY => {
                let datapath_id = b.u64()?;
                let n_buffers = b.u32()?;
                let n_tables = b.u8()?;
                b.skip(3)?;
                let capabilities = b.u32()?;
                let actions = b.u32()?;
                if b.remaining() % 48 != 0 {
                    return Err(CodecError::BadLength("1.0 ports are 48 bytes each"));
                }
                let mut ports = Vec::new();
                while b.remaining() > 0 {
                    ports.push(PhyPort::decode(&mut b)?);
                }
                Body::FeaturesReply(Features10 {
                    datapath_id,
                    n_buffers,
                    n_tables,
                    capabilities,
                    actions,
                    ports,
                })
            }
            PACKET_IN => {
                let buffer_id = b.u32()?;
                let total_len = b.u16()?;
                let in_port = b.u16()?;
                let reason = b.u8()?;
                b.skip(1)?;
                Body::PacketIn(buffer_id, total_len, in_port, reason, b.rest().to_vec())
            }
            FLOW_REMOVED => {
                let matches = Match10::decode(&mut b)?;
                let cookie = b.u64()?;
                let priority = b.u16()?;
                let reason = b.u8()?;
                b.skip(1)?;
                let duration_sec = b.u32()?;
                let duration_nsec = b.u32()?;
                let idle_timeout = b.u16()?;
                b.skip(2)?;
                Body::FlowRemoved(FlowRemoved10 {
                    matches,
                    cookie,
                    priority,
                    reason,
                    duration_sec,
                    duration_nsec,
                    idle_timeout,
                    packet_count: b.u64()?,
                    byte_count: b.u64()?,
                })
            }
            PORT_STATUS => {
                let reason = b.u8()?;
                b.skip(7)?;
                Body::PortStatus(reason, PhyPort::decode(&mut b)?)
            }
            PACKET_OUT => {
                let buffer_id = b.u32()?;
                let in_port = b.u16()?;
                let n = b.u16()? as usize;
                let actions = Action10::decode_list(b.bytes(n)?)?;
                Body::PacketOut(buffer_id, in_port, actions, b.rest().to_vec())
            }
            FLOW_MOD => {
                let matches = Match10::decode(&mut b)?;
                Body::FlowMod(FlowMod10 {
                    matches,
                    cookie: b.u64()?,
                    command: b.u16()?,
                    idle_timeout: b.u16()?,
                    hard_timeout: b.u16()?,
                    priority: b.u16()?,
                    buffer_id: b.u32()?,
                    out_port: b.u16()?,
                    flags: b.u16()?,
                    actions: Action10::decode_list(b.rest())?,
                })
            }
            STATS_REQUEST | STATS_REPLY => {
                let st = b.u16()?;
                let flags = b.u16()?;
                let rest = b.rest().to_vec();
                if t == STATS_REQUEST {
                    Body::StatsRequest(st, flags, rest)
                } else {
                    Body::StatsReply(st, flags, rest)
                }
            }
            BARRIER_REQUEST => Body::BarrierRequest,
            BARRIER_REPLY => Body::BarrierReply,
            other => Body::Other(other, raw.to_vec()),
        };
        Ok(Message10 { xid, body })
    }
}
