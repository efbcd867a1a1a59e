//! OpenFlow 1.3 (the messages the proxy and the benchmark speak), encoded
//! and decoded from bytes, no I/O. Golden bytes from os-ken in
//! `tests/fixtures/of13/` (made by `tests/fixtures/of13/make_golden.py`).
//!
//! Messages the codec does not know pass as [`Body::Other`] (type and raw
//! body), so the proxy can forward or refuse them; multipart bodies stay raw
//! ([`Body::MultipartRequest`]/[`Body::MultipartReply`]) with typed parsers
//! for the ones nflab reads ([`multipart`]).

pub mod buf;
pub mod flow;
pub mod message;
pub mod multipart;
pub mod oxm;
pub mod port_name;
pub mod removed;
pub mod stats;

pub use flow::{Action, FlowMod, Instruction};
pub use message::{Body, ErrorMsg, Features, Message, PortStatus};
pub use multipart::{FlowStats, FlowStatsRequest, Port};
pub use oxm::{Match, Oxm};
pub use port_name::PortName;
pub use removed::FlowRemoved;

/// Wire version of OpenFlow 1.3.
pub const VERSION: u8 = 0x04;
/// Length of the common header.
pub const HEADER_LEN: usize = 8;
/// The port number meaning "any" (`OFPP_ANY`).
pub const OFPP_ANY: u32 = 0xffff_ffff;
/// The controller port (`OFPP_CONTROLLER`).
pub const OFPP_CONTROLLER: u32 = 0xffff_fffd;
/// The group number meaning "any" (`OFPG_ANY`).
pub const OFPG_ANY: u32 = 0xffff_ffff;
/// No buffered packet (`OFP_NO_BUFFER`).
pub const NO_BUFFER: u32 = 0xffff_ffff;
/// "All tables" in a flow-stats request or a delete (`OFPTT_ALL`).
pub const OFPTT_ALL: u8 = 0xff;

/// Why bytes are not an OpenFlow 1.3 message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// Fewer bytes than a field or a length claims.
    #[error("OpenFlow message truncated: {0}")]
    Truncated(&'static str),
    /// A length field that cannot be right.
    #[error("OpenFlow message has a bad length: {0}")]
    BadLength(&'static str),
    /// Another OpenFlow version.
    #[error("OpenFlow version {0:#04x} is not 1.3 (0x04)")]
    Version(u8),
}

/// Split one message off the front of a stream buffer: its total length when
/// a whole message is there, `None` when more bytes are needed.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, CodecError> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let len = u16::from_be_bytes([buf[2], buf[3]]) as usize;
    if len < HEADER_LEN {
        return Err(CodecError::BadLength("header length below 8"));
    }
    Ok((buf.len() >= len).then_some(len))
}
