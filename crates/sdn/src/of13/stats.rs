//! Typed multipart bodies of the non-flow statistics: port, table and
//! aggregate statistics (OpenFlow 1.3 layout). The port counters and the
//! aggregate body are laid out the same in 1.0, so `of10::stats` uses
//! [`PortCounters`] and [`AggregateStats`] too.

use super::buf::{Put, Reader};
use super::CodecError;

/// The twelve counters of `ofp_port_stats`, in wire order (1.0 and 1.3).
/// A counter the switch does not keep is all ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Frames received.
    pub rx_packets: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames dropped on receive.
    pub rx_dropped: u64,
    /// Frames dropped on send.
    pub tx_dropped: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Send errors.
    pub tx_errors: u64,
    /// Frame alignment errors.
    pub rx_frame_err: u64,
    /// Overruns.
    pub rx_over_err: u64,
    /// CRC errors.
    pub rx_crc_err: u64,
    /// Collisions.
    pub collisions: u64,
}

impl PortCounters {
    /// Encoded length.
    pub const LEN: usize = 96;

    /// Encode (96 bytes).
    pub fn encode(&self, out: &mut Vec<u8>) {
        for v in [
            self.rx_packets,
            self.tx_packets,
            self.rx_bytes,
            self.tx_bytes,
            self.rx_dropped,
            self.tx_dropped,
            self.rx_errors,
            self.tx_errors,
            self.rx_frame_err,
            self.rx_over_err,
            self.rx_crc_err,
            self.collisions,
        ] {
            out.put_u64(v);
        }
    }

    /// Decode 96 bytes.
    pub fn decode(r: &mut Reader) -> Result<PortCounters, CodecError> {
        Ok(PortCounters {
            rx_packets: r.u64()?,
            tx_packets: r.u64()?,
            rx_bytes: r.u64()?,
            tx_bytes: r.u64()?,
            rx_dropped: r.u64()?,
            tx_dropped: r.u64()?,
            rx_errors: r.u64()?,
            tx_errors: r.u64()?,
            rx_frame_err: r.u64()?,
            rx_over_err: r.u64()?,
            rx_crc_err: r.u64()?,
            collisions: r.u64()?,
        })
    }
}

/// One entry of an OFPMP_PORT_STATS reply (112 bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Port number.
    pub port_no: u32,
    /// Counters.
    pub counters: PortCounters,
    /// How long the port has been up, s (0 when the switch does not say:
    /// OpenFlow 1.0 has no such field).
    pub duration_sec: u32,
    /// … and ns.
    pub duration_nsec: u32,
}

impl PortStats {
    /// Encoded length.
    pub const LEN: usize = 112;

    /// Encode one entry.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.port_no);
        out.pad(4);
        self.counters.encode(out);
        out.put_u32(self.duration_sec);
        out.put_u32(self.duration_nsec);
    }

    /// Every entry of a reply body.
    pub fn decode_all(data: &[u8]) -> Result<Vec<PortStats>, CodecError> {
        if data.len() % Self::LEN != 0 {
            return Err(CodecError::BadLength("port stats not a multiple of 112"));
        }
        let mut r = Reader::new(data, "port stats");
        let mut v = Vec::new();
        while r.remaining() > 0 {
            let port_no = r.u32()?;
            r.skip(4)?;
            v.push(PortStats {
                port_no,
                counters: PortCounters::decode(&mut r)?,
                duration_sec: r.u32()?,
                duration_nsec: r.u32()?,
            });
        }
        Ok(v)
    }
}

/// The body of an OFPMP_PORT_STATS request: the port (`OFPP_ANY`: all).
pub fn port_stats_request(port_no: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(8);
    out.put_u32(port_no);
    out.pad(4);
    out
}

/// One entry of an OFPMP_TABLE reply (24 bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableStats {
    /// Table.
    pub table_id: u8,
    /// Flows in it.
    pub active_count: u32,
    /// Packets looked up in it.
    pub lookup_count: u64,
    /// Packets that matched a flow in it.
    pub matched_count: u64,
}

impl TableStats {
    /// Encoded length.
    pub const LEN: usize = 24;

    /// Encode one entry.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(self.table_id);
        out.pad(3);
        out.put_u32(self.active_count);
        out.put_u64(self.lookup_count);
        out.put_u64(self.matched_count);
    }

    /// Every entry of a reply body.
    pub fn decode_all(data: &[u8]) -> Result<Vec<TableStats>, CodecError> {
        if data.len() % Self::LEN != 0 {
            return Err(CodecError::BadLength("table stats not a multiple of 24"));
        }
        let mut r = Reader::new(data, "table stats");
        let mut v = Vec::new();
        while r.remaining() > 0 {
            let table_id = r.u8()?;
            r.skip(3)?;
            v.push(TableStats {
                table_id,
                active_count: r.u32()?,
                lookup_count: r.u64()?,
                matched_count: r.u64()?,
            });
        }
        Ok(v)
    }
}

/// The body of an OFPMP_AGGREGATE reply (24 bytes; the same in 1.0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AggregateStats {
    /// Packets matched by the flows.
    pub packet_count: u64,
    /// Bytes matched by the flows.
    pub byte_count: u64,
    /// Flows.
    pub flow_count: u32,
}

impl AggregateStats {
    /// Encoded length.
    pub const LEN: usize = 24;

    /// Encode.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.packet_count);
        out.put_u64(self.byte_count);
        out.put_u32(self.flow_count);
        out.pad(4);
    }

    /// Decode a reply body.
    pub fn decode(data: &[u8]) -> Result<AggregateStats, CodecError> {
        if data.len() != Self::LEN {
            return Err(CodecError::BadLength("aggregate stats are 24 bytes"));
        }
        let mut r = Reader::new(data, "aggregate stats");
        Ok(AggregateStats {
            packet_count: r.u64()?,
            byte_count: r.u64()?,
            flow_count: r.u32()?,
        })
    }

    /// The emulated switch's total over its switches' bodies.
    pub fn sum(&self, other: &AggregateStats) -> AggregateStats {
        AggregateStats {
            packet_count: self.packet_count.wrapping_add(other.packet_count),
            byte_count: self.byte_count.wrapping_add(other.byte_count),
            flow_count: self.flow_count.wrapping_add(other.flow_count),
        }
    }
}

/// `ofp_desc` (1056 bytes, the same in 1.0): five NUL-padded texts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desc {
    /// Manufacturer (256 bytes).
    pub mfr_desc: String,
    /// Hardware (256).
    pub hw_desc: String,
    /// Software (256).
    pub sw_desc: String,
    /// Serial number (32).
    pub serial_num: String,
    /// Datapath (256).
    pub dp_desc: String,
}

impl Desc {
    /// Encoded length.
    pub const LEN: usize = 1056;
    const FIELDS: [usize; 5] = [256, 256, 256, 32, 256];

    /// Encode (each text cut to its field less one byte, NUL-padded).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let texts = [
            &self.mfr_desc,
            &self.hw_desc,
            &self.sw_desc,
            &self.serial_num,
            &self.dp_desc,
        ];
        for (text, len) in texts.into_iter().zip(Self::FIELDS) {
            let mut f = text.as_bytes()[..text.len().min(len - 1)].to_vec();
            f.resize(len, 0);
            out.extend(f);
        }
    }

    /// Decode a reply body (texts up to their first NUL, lossy: for people).
    pub fn decode(data: &[u8]) -> Result<Desc, CodecError> {
        if data.len() != Self::LEN {
            return Err(CodecError::BadLength("a description is 1056 bytes"));
        }
        let mut r = Reader::new(data, "description");
        let mut text = |len| -> Result<String, CodecError> {
            let raw = r.bytes(len)?;
            let end = raw.iter().position(|&b| b == 0).unwrap_or(len);
            Ok(String::from_utf8_lossy(&raw[..end]).into_owned())
        };
        Ok(Desc {
            mfr_desc: text(256)?,
            hw_desc: text(256)?,
            sw_desc: text(256)?,
            serial_num: text(32)?,
            dp_desc: text(256)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_bodies_round_trip_at_their_wire_lengths() {
        let mut counters = PortCounters {
            rx_packets: 1,
            collisions: 12,
            ..PortCounters::default()
        };
        counters.rx_crc_err = u64::MAX;
        let ps = PortStats {
            port_no: 3,
            counters,
            duration_sec: 4,
            duration_nsec: 5,
        };
        let mut b = Vec::new();
        ps.encode(&mut b);
        ps.encode(&mut b);
        assert_eq!(b.len(), 2 * PortStats::LEN);
        // collisions is the last counter: bytes 96..104 of an entry.
        assert_eq!(&b[96..104], &12u64.to_be_bytes());
        assert_eq!(PortStats::decode_all(&b).unwrap(), vec![ps, ps]);
        assert!(PortStats::decode_all(&b[1..]).is_err());

        let ts = TableStats {
            table_id: 1,
            active_count: 2,
            lookup_count: 3,
            matched_count: 4,
        };
        let mut b = Vec::new();
        ts.encode(&mut b);
        assert_eq!(b.len(), TableStats::LEN);
        assert_eq!(TableStats::decode_all(&b).unwrap(), vec![ts]);

        let a = AggregateStats {
            packet_count: 7,
            byte_count: 8,
            flow_count: 9,
        };
        let mut b = Vec::new();
        a.encode(&mut b);
        assert_eq!(AggregateStats::decode(&b).unwrap(), a);
        assert_eq!(a.sum(&a).flow_count, 18);

        let d = Desc {
            mfr_desc: "Nicira, Inc.".into(),
            dp_desc: "x".repeat(300),
            ..Desc::default()
        };
        let mut b = Vec::new();
        d.encode(&mut b);
        assert_eq!(b.len(), Desc::LEN);
        let back = Desc::decode(&b).unwrap();
        assert_eq!(
            (back.mfr_desc.as_str(), back.dp_desc.len()),
            ("Nicira, Inc.", 255)
        );
    }
}
