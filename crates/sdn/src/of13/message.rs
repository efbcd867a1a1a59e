//! The OpenFlow message: header plus a typed body.

use super::buf::{Put, Reader};
use super::flow::FlowMod;
use super::multipart::Port;
use super::removed::FlowRemoved;
use super::{CodecError, HEADER_LEN, VERSION};

/// Message types (`ofp_type`).
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
    /// OFPT_GET_CONFIG_REQUEST.
    pub const GET_CONFIG_REQUEST: u8 = 7;
    /// OFPT_GET_CONFIG_REPLY.
    pub const GET_CONFIG_REPLY: u8 = 8;
    /// OFPT_SET_CONFIG.
    pub const SET_CONFIG: u8 = 9;
    /// OFPT_PACKET_IN.
    pub const PACKET_IN: u8 = 10;
    /// OFPT_FLOW_REMOVED.
    pub const FLOW_REMOVED: u8 = 11;
    /// OFPT_PORT_STATUS.
    pub const PORT_STATUS: u8 = 12;
    /// OFPT_PACKET_OUT.
    pub const PACKET_OUT: u8 = 13;
    /// OFPT_FLOW_MOD.
    pub const FLOW_MOD: u8 = 14;
    /// OFPT_MULTIPART_REQUEST.
    pub const MULTIPART_REQUEST: u8 = 18;
    /// OFPT_MULTIPART_REPLY.
    pub const MULTIPART_REPLY: u8 = 19;
    /// OFPT_BARRIER_REQUEST.
    pub const BARRIER_REQUEST: u8 = 20;
    /// OFPT_BARRIER_REPLY.
    pub const BARRIER_REPLY: u8 = 21;
}

/// Error types and codes nflab sends.
pub mod error {
    /// OFPET_HELLO_FAILED.
    pub const HELLO_FAILED: u16 = 0;
    /// OFPHFC_INCOMPATIBLE.
    pub const HELLO_INCOMPATIBLE: u16 = 0;
    /// OFPET_BAD_REQUEST.
    pub const BAD_REQUEST: u16 = 1;
    /// OFPBRC_BAD_TYPE: a message type the receiver does not support.
    pub const BAD_TYPE: u16 = 1;
    /// OFPBRC_BAD_MULTIPART.
    pub const BAD_MULTIPART: u16 = 2;
    /// OFPBRC_BAD_LEN.
    pub const BAD_LEN: u16 = 6;
    /// OFPET_BAD_INSTRUCTION.
    pub const BAD_INSTRUCTION: u16 = 3;
    /// OFPBIC_BAD_TABLE_ID.
    pub const BAD_TABLE_ID: u16 = 2;
    /// OFPET_BAD_ACTION.
    pub const BAD_ACTION: u16 = 2;
    /// OFPBAC_BAD_OUT_PORT.
    pub const BAD_OUT_PORT: u16 = 4;
    /// OFPET_FLOW_MOD_FAILED.
    pub const FLOW_MOD_FAILED: u16 = 5;
    /// OFPFMFC_BAD_TABLE_ID.
    pub const FLOW_MOD_BAD_TABLE_ID: u16 = 9;
}

/// An OpenFlow 1.3 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Transaction id.
    pub xid: u32,
    /// What it says.
    pub body: Body,
}

/// OFPT_ERROR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorMsg {
    /// Error type.
    pub typ: u16,
    /// Code.
    pub code: u16,
    /// The start of the offending message.
    pub data: Vec<u8>,
}

/// OFPT_FEATURES_REPLY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Features {
    /// Datapath id.
    pub datapath_id: u64,
    /// Packets the switch buffers.
    pub n_buffers: u32,
    /// Tables.
    pub n_tables: u8,
    /// Auxiliary connection id.
    pub auxiliary_id: u8,
    /// OFPC_* bits.
    pub capabilities: u32,
}

/// OFPT_PORT_STATUS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortStatus {
    /// OFPPR_ADD (0), OFPPR_DELETE (1), OFPPR_MODIFY (2).
    pub reason: u8,
    /// The port.
    pub port: Port,
}

/// Body of a message, by type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// OFPT_HELLO (elements kept raw).
    Hello(Vec<u8>),
    /// OFPT_ERROR.
    Error(ErrorMsg),
    /// OFPT_ECHO_REQUEST.
    EchoRequest(Vec<u8>),
    /// OFPT_ECHO_REPLY.
    EchoReply(Vec<u8>),
    /// OFPT_FEATURES_REQUEST.
    FeaturesRequest,
    /// OFPT_FEATURES_REPLY.
    FeaturesReply(Features),
    /// OFPT_GET_CONFIG_REQUEST.
    GetConfigRequest,
    /// OFPT_GET_CONFIG_REPLY: flags, miss_send_len.
    GetConfigReply(u16, u16),
    /// OFPT_SET_CONFIG: flags, miss_send_len.
    SetConfig(u16, u16),
    /// OFPT_PORT_STATUS.
    PortStatus(PortStatus),
    /// OFPT_FLOW_MOD.
    FlowMod(FlowMod),
    /// OFPT_FLOW_REMOVED.
    FlowRemoved(FlowRemoved),
    /// OFPT_MULTIPART_REQUEST: type, flags, raw body.
    MultipartRequest(u16, u16, Vec<u8>),
    /// OFPT_MULTIPART_REPLY: type, flags (bit 0: more), raw body.
    MultipartReply(u16, u16, Vec<u8>),
    /// OFPT_BARRIER_REQUEST.
    BarrierRequest,
    /// OFPT_BARRIER_REPLY.
    BarrierReply,
    /// Any other type, body raw.
    Other(u8, Vec<u8>),
}

/// OFPMPF_REPLY_MORE / OFPMPF_REQ_MORE.
pub const MULTIPART_MORE: u16 = 1;

impl Body {
    /// Its `ofp_type`.
    pub fn typ(&self) -> u8 {
        use typ::*;
        match self {
            Body::Hello(_) => HELLO,
            Body::Error(_) => ERROR,
            Body::EchoRequest(_) => ECHO_REQUEST,
            Body::EchoReply(_) => ECHO_REPLY,
            Body::FeaturesRequest => FEATURES_REQUEST,
            Body::FeaturesReply(_) => FEATURES_REPLY,
            Body::GetConfigRequest => GET_CONFIG_REQUEST,
            Body::GetConfigReply(..) => GET_CONFIG_REPLY,
            Body::SetConfig(..) => SET_CONFIG,
            Body::PortStatus(_) => PORT_STATUS,
            Body::FlowMod(_) => FLOW_MOD,
            Body::FlowRemoved(_) => FLOW_REMOVED,
            Body::MultipartRequest(..) => MULTIPART_REQUEST,
            Body::MultipartReply(..) => MULTIPART_REPLY,
            Body::BarrierRequest => BARRIER_REQUEST,
            Body::BarrierReply => BARRIER_REPLY,
            Body::Other(t, _) => *t,
        }
    }
}

impl Message {
    /// A message.
    pub fn new(xid: u32, body: Body) -> Message {
        Message { xid, body }
    }

    /// The bytes on the wire.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.put_u8(VERSION);
        out.put_u8(self.body.typ());
        out.put_u16(0);
        out.put_u32(self.xid);
        match &self.body {
            Body::Hello(d) | Body::EchoRequest(d) | Body::EchoReply(d) | Body::Other(_, d) => {
                out.extend_from_slice(d)
            }
            Body::Error(e) => {
                out.put_u16(e.typ);
                out.put_u16(e.code);
                out.extend_from_slice(&e.data);
            }
            Body::FeaturesRequest
            | Body::GetConfigRequest
            | Body::BarrierRequest
            | Body::BarrierReply => {}
            Body::FeaturesReply(f) => {
                out.put_u64(f.datapath_id);
                out.put_u32(f.n_buffers);
                out.put_u8(f.n_tables);
                out.put_u8(f.auxiliary_id);
                out.pad(2);
                out.put_u32(f.capabilities);
                out.put_u32(0);
            }
            Body::GetConfigReply(flags, miss) | Body::SetConfig(flags, miss) => {
                out.put_u16(*flags);
                out.put_u16(*miss);
            }
            Body::PortStatus(p) => {
                out.put_u8(p.reason);
                out.pad(7);
                p.port.encode(&mut out);
            }
            Body::FlowMod(f) => f.encode(&mut out),
            Body::FlowRemoved(f) => f.encode(&mut out),
            Body::MultipartRequest(t, flags, d) | Body::MultipartReply(t, flags, d) => {
                out.put_u16(*t);
                out.put_u16(*flags);
                out.pad(4);
                out.extend_from_slice(d);
            }
        }
        let len = out.len() as u16;
        out.set_u16(2, len);
        out
    }

    /// Decode one whole message (as split off by [`super::frame_len`]).
    pub fn decode(data: &[u8]) -> Result<Message, CodecError> {
        let mut r = Reader::new(data, "header");
        let version = r.u8()?;
        let t = r.u8()?;
        let len = r.u16()? as usize;
        let xid = r.u32()?;
        if len < HEADER_LEN || len > data.len() {
            return Err(CodecError::BadLength(
                "header length disagrees with the bytes",
            ));
        }
        // HELLO negotiates the version: any version's HELLO is read.
        if version != VERSION && t != typ::HELLO {
            return Err(CodecError::Version(version));
        }
        let body = &data[HEADER_LEN..len];
        let mut b = Reader::new(body, "message body");
        use typ::*;
        let body = match t {
            HELLO => Body::Hello(body.to_vec()),
            ERROR => Body::Error(ErrorMsg {
                typ: b.u16()?,
                code: b.u16()?,
                data: b.rest().to_vec(),
            }),
            ECHO_REQUEST => Body::EchoRequest(body.to_vec()),
            ECHO_REPLY => Body::EchoReply(body.to_vec()),
            FEATURES_REQUEST => Body::FeaturesRequest,
            FEATURES_REPLY => {
                let datapath_id = b.u64()?;
                let n_buffers = b.u32()?;
                let n_tables = b.u8()?;
                let auxiliary_id = b.u8()?;
                b.skip(2)?;
                Body::FeaturesReply(Features {
                    datapath_id,
                    n_buffers,
                    n_tables,
                    auxiliary_id,
                    capabilities: b.u32()?,
                })
            }
            GET_CONFIG_REQUEST => Body::GetConfigRequest,
            GET_CONFIG_REPLY => Body::GetConfigReply(b.u16()?, b.u16()?),
            SET_CONFIG => Body::SetConfig(b.u16()?, b.u16()?),
            PORT_STATUS => {
                let reason = b.u8()?;
                b.skip(7)?;
                Body::PortStatus(PortStatus {
                    reason,
                    port: Port::decode(&mut b)?,
                })
            }
            FLOW_MOD => Body::FlowMod(FlowMod::decode(body)?),
            FLOW_REMOVED => Body::FlowRemoved(FlowRemoved::decode(body)?),
            MULTIPART_REQUEST | MULTIPART_REPLY => {
                let mt = b.u16()?;
                let flags = b.u16()?;
                b.skip(4)?;
                let rest = b.rest().to_vec();
                if t == MULTIPART_REQUEST {
                    Body::MultipartRequest(mt, flags, rest)
                } else {
                    Body::MultipartReply(mt, flags, rest)
                }
            }
            BARRIER_REQUEST => Body::BarrierRequest,
            BARRIER_REPLY => Body::BarrierReply,
            other => Body::Other(other, body.to_vec()),
        };
        Ok(Message { xid, body })
    }

    /// The OFPT_ERROR a switch sends back for `offending` (its first 64 bytes).
    pub fn error_for(offending: &[u8], xid: u32, typ: u16, code: u16) -> Message {
        Message::new(
            xid,
            Body::Error(ErrorMsg {
                typ,
                code,
                data: offending[..offending.len().min(64)].to_vec(),
            }),
        )
    }
}
