//! OpenFlow 1.0 statistics bodies that differ from 1.3's: port statistics
//! (16-bit port, no duration; 104 bytes) and table statistics (name,
//! wildcards and size; 64 bytes). The description and the aggregate body
//! are laid out as in 1.3 ([`crate::of13::stats`]).

use crate::of13::buf::{Put, Reader};
use crate::of13::stats::PortCounters;
use crate::of13::CodecError;

/// OFPST_DESC.
pub const OFPST_DESC: u16 = 0;
/// OFPST_AGGREGATE (request as OFPST_FLOW's).
pub const OFPST_AGGREGATE: u16 = 2;
/// OFPST_TABLE.
pub const OFPST_TABLE: u16 = 3;
/// OFPST_PORT.
pub const OFPST_PORT: u16 = 4;

/// One entry of a 1.0 port-stats reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats10 {
    /// Port number.
    pub port_no: u16,
    /// The twelve counters (as 1.3's).
    pub counters: PortCounters,
}

impl PortStats10 {
    /// Encoded length.
    pub const LEN: usize = 104;

    /// Encode one entry.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(self.port_no);
        out.pad(6);
        self.counters.encode(out);
    }

    /// Every entry of a reply body.
    pub fn decode_all(data: &[u8]) -> Result<Vec<PortStats10>, CodecError> {
        if data.len() % Self::LEN != 0 {
            return Err(CodecError::BadLength(
                "1.0 port stats not a multiple of 104",
            ));
        }
        let mut r = Reader::new(data, "1.0 port stats");
        let mut v = Vec::new();
        while r.remaining() > 0 {
            let port_no = r.u16()?;
            r.skip(6)?;
            v.push(PortStats10 {
                port_no,
                counters: PortCounters::decode(&mut r)?,
            });
        }
        Ok(v)
    }
}

/// The body of a 1.0 port-stats request: the port (OFPP_NONE: all).
pub fn port_stats_request(port_no: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(8);
    out.put_u16(port_no);
    out.pad(6);
    out
}

/// One entry of a 1.0 table-stats reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableStats10 {
    /// Table.
    pub table_id: u8,
    /// Name (32 bytes, NUL-padded).
    pub name: [u8; 32],
    /// OFPFW_* the table supports.
    pub wildcards: u32,
    /// Flows it can hold.
    pub max_entries: u32,
    /// Flows in it.
    pub active_count: u32,
    /// Packets looked up in it.
    pub lookup_count: u64,
    /// Packets that matched.
    pub matched_count: u64,
}

impl TableStats10 {
    /// Encoded length.
    pub const LEN: usize = 64;

    /// Encode one entry.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(self.table_id);
        out.pad(3);
        out.extend_from_slice(&self.name);
        out.put_u32(self.wildcards);
        out.put_u32(self.max_entries);
        out.put_u32(self.active_count);
        out.put_u64(self.lookup_count);
        out.put_u64(self.matched_count);
    }

    /// Every entry of a reply body.
    pub fn decode_all(data: &[u8]) -> Result<Vec<TableStats10>, CodecError> {
        if data.len() % Self::LEN != 0 {
            return Err(CodecError::BadLength(
                "1.0 table stats not a multiple of 64",
            ));
        }
        let mut r = Reader::new(data, "1.0 table stats");
        let mut v = Vec::new();
        while r.remaining() > 0 {
            let table_id = r.u8()?;
            r.skip(3)?;
            let mut name = [0u8; 32];
            name.copy_from_slice(r.bytes(32)?);
            v.push(TableStats10 {
                table_id,
                name,
                wildcards: r.u32()?,
                max_entries: r.u32()?,
                active_count: r.u32()?,
                lookup_count: r.u64()?,
                matched_count: r.u64()?,
            });
        }
        Ok(v)
    }
}
