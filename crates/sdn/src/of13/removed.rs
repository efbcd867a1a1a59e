//! OFPT_FLOW_REMOVED: a switch tells the controller a flow has gone (its
//! timeout expired, or a delete asked for it with OFPFF_SEND_FLOW_REM).

use super::buf::{Put, Reader};
use super::oxm::Match;
use super::CodecError;

/// OFPT_FLOW_REMOVED's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRemoved {
    /// The flow's cookie.
    pub cookie: u64,
    /// Its priority.
    pub priority: u16,
    /// OFPRR_IDLE_TIMEOUT (0), HARD_TIMEOUT (1), DELETE (2), GROUP_DELETE (3), …
    pub reason: u8,
    /// Its table.
    pub table_id: u8,
    /// How long it was installed, s.
    pub duration_sec: u32,
    /// … and ns beyond.
    pub duration_nsec: u32,
    /// Idle timeout, s.
    pub idle_timeout: u16,
    /// Hard timeout, s.
    pub hard_timeout: u16,
    /// Packets it matched.
    pub packet_count: u64,
    /// Bytes it matched.
    pub byte_count: u64,
    /// Its match.
    pub matches: Match,
}

impl FlowRemoved {
    /// Encode the body (after the header).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.cookie);
        out.put_u16(self.priority);
        out.put_u8(self.reason);
        out.put_u8(self.table_id);
        out.put_u32(self.duration_sec);
        out.put_u32(self.duration_nsec);
        out.put_u16(self.idle_timeout);
        out.put_u16(self.hard_timeout);
        out.put_u64(self.packet_count);
        out.put_u64(self.byte_count);
        self.matches.encode(out);
    }

    /// Decode the body.
    pub fn decode(body: &[u8]) -> Result<FlowRemoved, CodecError> {
        let mut r = Reader::new(body, "flow removed");
        Ok(FlowRemoved {
            cookie: r.u64()?,
            priority: r.u16()?,
            reason: r.u8()?,
            table_id: r.u8()?,
            duration_sec: r.u32()?,
            duration_nsec: r.u32()?,
            idle_timeout: r.u16()?,
            hard_timeout: r.u16()?,
            packet_count: r.u64()?,
            byte_count: r.u64()?,
            matches: Match::decode(&mut r)?,
        })
    }
}
