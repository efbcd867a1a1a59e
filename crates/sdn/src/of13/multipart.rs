//! Multipart bodies nflab reads and writes: flow statistics and port descriptions.

use super::buf::{Put, Reader};
use super::flow::Instruction;
use super::oxm::Match;
use super::port_name::PortName;
use super::CodecError;

/// Multipart types.
pub mod mp {
    /// OFPMP_DESC.
    pub const DESC: u16 = 0;
    /// OFPMP_FLOW.
    pub const FLOW: u16 = 1;
    /// OFPMP_AGGREGATE.
    pub const AGGREGATE: u16 = 2;
    /// OFPMP_TABLE.
    pub const TABLE: u16 = 3;
    /// OFPMP_PORT_STATS.
    pub const PORT_STATS: u16 = 4;
    /// OFPMP_TABLE_FEATURES.
    pub const TABLE_FEATURES: u16 = 12;
    /// OFPMP_PORT_DESC.
    pub const PORT_DESC: u16 = 13;
}

/// Body of an OFPMP_FLOW request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowStatsRequest {
    /// Table, or 0xff for all.
    pub table_id: u8,
    /// Output port filter.
    pub out_port: u32,
    /// Group filter.
    pub out_group: u32,
    /// Cookie.
    pub cookie: u64,
    /// Cookie mask.
    pub cookie_mask: u64,
    /// Match filter.
    pub matches: Match,
}

impl FlowStatsRequest {
    /// All flows of all tables.
    pub fn all() -> FlowStatsRequest {
        FlowStatsRequest {
            table_id: super::OFPTT_ALL,
            out_port: super::OFPP_ANY,
            out_group: super::OFPG_ANY,
            cookie: 0,
            cookie_mask: 0,
            matches: Match::default(),
        }
    }

    /// Encode.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_u8(self.table_id);
        out.pad(3);
        out.put_u32(self.out_port);
        out.put_u32(self.out_group);
        out.pad(4);
        out.put_u64(self.cookie);
        out.put_u64(self.cookie_mask);
        self.matches.encode(&mut out);
        out
    }

    /// Decode.
    pub fn decode(data: &[u8]) -> Result<FlowStatsRequest, CodecError> {
        let mut r = Reader::new(data, "flow stats request");
        let table_id = r.u8()?;
        r.skip(3)?;
        let out_port = r.u32()?;
        let out_group = r.u32()?;
        r.skip(4)?;
        Ok(FlowStatsRequest {
            table_id,
            out_port,
            out_group,
            cookie: r.u64()?,
            cookie_mask: r.u64()?,
            matches: Match::decode(&mut r)?,
        })
    }
}

/// One entry of an OFPMP_FLOW reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowStats {
    /// Table.
    pub table_id: u8,
    /// Age, s.
    pub duration_sec: u32,
    /// Age, ns beyond `duration_sec`.
    pub duration_nsec: u32,
    /// Priority.
    pub priority: u16,
    /// Idle timeout.
    pub idle_timeout: u16,
    /// Hard timeout.
    pub hard_timeout: u16,
    /// Flags.
    pub flags: u16,
    /// Cookie.
    pub cookie: u64,
    /// Packets matched.
    pub packet_count: u64,
    /// Bytes matched.
    pub byte_count: u64,
    /// Match.
    pub matches: Match,
    /// Instructions.
    pub instructions: Vec<Instruction>,
}

impl FlowStats {
    /// Encode one entry.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(0);
        out.put_u8(self.table_id);
        out.pad(1);
        out.put_u32(self.duration_sec);
        out.put_u32(self.duration_nsec);
        out.put_u16(self.priority);
        out.put_u16(self.idle_timeout);
        out.put_u16(self.hard_timeout);
        out.put_u16(self.flags);
        out.pad(4);
        out.put_u64(self.cookie);
        out.put_u64(self.packet_count);
        out.put_u64(self.byte_count);
        self.matches.encode(out);
        Instruction::encode_list(&self.instructions, out);
        let len = (out.len() - start) as u16;
        out.set_u16(start, len);
    }

    /// Decode every entry of a reply body.
    pub fn decode_all(data: &[u8]) -> Result<Vec<FlowStats>, CodecError> {
        let mut r = Reader::new(data, "flow stats");
        let mut v = Vec::new();
        while r.remaining() > 0 {
            let len = r.u16()? as usize;
            if len < 56 {
                return Err(CodecError::BadLength("flow stats entry shorter than 56"));
            }
            let entry = r.bytes(len - 2)?;
            let mut e = Reader::new(entry, "flow stats entry");
            let table_id = e.u8()?;
            e.skip(1)?;
            let duration_sec = e.u32()?;
            let duration_nsec = e.u32()?;
            let priority = e.u16()?;
            let idle_timeout = e.u16()?;
            let hard_timeout = e.u16()?;
            let flags = e.u16()?;
            e.skip(4)?;
            let cookie = e.u64()?;
            let packet_count = e.u64()?;
            let byte_count = e.u64()?;
            let matches = Match::decode(&mut e)?;
            v.push(FlowStats {
                table_id,
                duration_sec,
                duration_nsec,
                priority,
                idle_timeout,
                hard_timeout,
                flags,
                cookie,
                packet_count,
                byte_count,
                matches,
                instructions: Instruction::decode_list(e.rest())?,
            });
        }
        Ok(v)
    }
}

/// `ofp_port` (port descriptions and port status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// Port number.
    pub port_no: u32,
    /// MAC.
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
    /// Current speed, kbit/s.
    pub curr_speed: u32,
    /// Maximum speed, kbit/s.
    pub max_speed: u32,
}

/// OFPPS_LINK_DOWN.
pub const PORT_STATE_LINK_DOWN: u32 = 1;

impl Port {
    /// Encoded length.
    pub const LEN: usize = 64;

    /// Encode.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.port_no);
        out.pad(4);
        out.extend_from_slice(&self.hw_addr);
        out.pad(2);
        out.extend_from_slice(self.name.bytes());
        for v in [
            self.config,
            self.state,
            self.curr,
            self.advertised,
            self.supported,
            self.peer,
            self.curr_speed,
            self.max_speed,
        ] {
            out.put_u32(v);
        }
    }

    /// Decode one.
    pub fn decode(r: &mut Reader) -> Result<Port, CodecError> {
        let port_no = r.u32()?;
        r.skip(4)?;
        let mut hw_addr = [0u8; 6];
        hw_addr.copy_from_slice(r.bytes(6)?);
        r.skip(2)?;
        let name = PortName::from_slice(r.bytes(PortName::LEN)?)
            .ok_or(CodecError::Truncated("port name"))?;
        Ok(Port {
            port_no,
            hw_addr,
            name,
            config: r.u32()?,
            state: r.u32()?,
            curr: r.u32()?,
            advertised: r.u32()?,
            supported: r.u32()?,
            peer: r.u32()?,
            curr_speed: r.u32()?,
            max_speed: r.u32()?,
        })
    }

    /// Every port of a PORT_DESC reply body.
    pub fn decode_all(data: &[u8]) -> Result<Vec<Port>, CodecError> {
        if data.len() % Port::LEN != 0 {
            return Err(CodecError::BadLength("port list not a multiple of 64"));
        }
        let mut r = Reader::new(data, "port");
        let mut v = Vec::new();
        while r.remaining() > 0 {
            v.push(Port::decode(&mut r)?);
        }
        Ok(v)
    }
}
