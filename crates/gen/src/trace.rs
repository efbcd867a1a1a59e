//! Reading the timing of a packet trace: classic pcap (µs or ns) and pcapng, either
//! byte order.
//!
//! Only what replay needs is kept: each packet's time and its length on the wire. The
//! packet bytes are not replayed; nflab sends probe frames of the same sizes, so every
//! replayed packet can be recorded. Frame lengths get the 4-byte FCS added, because
//! captures do not contain it and nflab frame sizes do (RFC 2544).

use std::path::Path;

use nflab_wire::FCS_BYTES;

/// One packet of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TracePacket {
    /// Capture time, ns (absolute as in the file; replay uses differences).
    pub t_ns: u64,
    /// Frame length on the wire including the FCS, bytes.
    pub len: u64,
}

/// Why a trace could not be read. Each message names the file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be read.
    #[error("cannot read trace {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not a capture.
    #[error("{path} is not a pcap or pcapng file (magic {magic:#010x}): give a capture written by tcpdump, tshark or dumpcap")]
    NotPcap {
        /// The file.
        path: String,
        /// The first four bytes.
        magic: u32,
    },
    /// The file ends in the middle of a header or packet.
    #[error("trace {path} is truncated at byte {offset} (after {packets} packets): the capture was cut off; re-capture it or cut it at a packet boundary")]
    Truncated {
        /// The file.
        path: String,
        /// Where the data ran out.
        offset: usize,
        /// Packets read before.
        packets: usize,
    },
    /// The file is well formed but has something replay cannot use.
    #[error("trace {path}: {reason}")]
    Unusable {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

/// Read the packets of a pcap or pcapng file.
pub fn load(path: &Path) -> Result<Vec<TracePacket>, TraceError> {
    let name = path.display().to_string();
    let data = std::fs::read(path).map_err(|source| TraceError::Io {
        path: name.clone(),
        source,
    })?;
    parse(&data, &name)
}

/// Parse the bytes of a pcap or pcapng file; `name` is used in errors.
pub fn parse(data: &[u8], name: &str) -> Result<Vec<TracePacket>, TraceError> {
    let magic = data
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| TraceError::NotPcap {
            path: name.into(),
            magic: 0,
        })?;
    let packets = match magic {
        0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1 => parse_pcap(data, name)?,
        0x0a0d_0d0a => parse_pcapng(data, name)?,
        _ => {
            return Err(TraceError::NotPcap {
                path: name.into(),
                magic,
            })
        }
    };
    if packets.is_empty() {
        return Err(TraceError::Unusable {
            path: name.into(),
            reason: "it holds no packets".into(),
        });
    }
    if packets.windows(2).any(|w| w[1].t_ns < w[0].t_ns) {
        return Err(TraceError::Unusable {
            path: name.into(),
            reason: "its timestamps go backwards: sort it first (e.g. `reordercap`)".into(),
        });
    }
    Ok(packets)
}

struct Cursor<'a> {
    data: &'a [u8],
    off: usize,
    big: bool,
}

impl Cursor<'_> {
    fn u32_at(&self, at: usize) -> Option<u32> {
        let b: [u8; 4] = self.data.get(at..at + 4)?.try_into().ok()?;
        Some(if self.big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }
    fn u16_at(&self, at: usize) -> Option<u16> {
        let b: [u8; 2] = self.data.get(at..at + 2)?.try_into().ok()?;
        Some(if self.big {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        })
    }
}

fn parse_pcap(data: &[u8], name: &str) -> Result<Vec<TracePacket>, TraceError> {
    let le = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
    let big = matches!(le, 0xd4c3_b2a1 | 0x4d3c_b2a1);
    let nanos = matches!(le, 0xa1b2_3c4d | 0x4d3c_b2a1);
    let mut c = Cursor { data, off: 24, big };
    let truncated = |offset, packets| TraceError::Truncated {
        path: name.into(),
        offset,
        packets,
    };
    if data.len() < 24 {
        return Err(truncated(data.len(), 0));
    }
    let mut out = Vec::new();
    while c.off < data.len() {
        let h = c.off;
        let (Some(sec), Some(frac), Some(incl), Some(orig)) = (
            c.u32_at(h),
            c.u32_at(h + 4),
            c.u32_at(h + 8),
            c.u32_at(h + 12),
        ) else {
            return Err(truncated(data.len(), out.len()));
        };
        let end = h + 16 + incl as usize;
        if end > data.len() {
            return Err(truncated(data.len(), out.len()));
        }
        let sub = if nanos {
            frac as u64
        } else {
            frac as u64 * 1_000
        };
        out.push(TracePacket {
            t_ns: sec as u64 * 1_000_000_000 + sub,
            len: orig as u64 + FCS_BYTES as u64,
        });
        c.off = end;
    }
    Ok(out)
}

fn parse_pcapng(data: &[u8], name: &str) -> Result<Vec<TracePacket>, TraceError> {
    let truncated = |offset, packets| TraceError::Truncated {
        path: name.into(),
        offset,
        packets,
    };
    let mut c = Cursor {
        data,
        off: 0,
        big: false,
    };
    // Timestamp units per second of each interface of the current section.
    let mut tsresol: Vec<u64> = Vec::new();
    let mut out = Vec::new();
    while c.off < data.len() {
        let b = c.off;
        if b + 12 > data.len() {
            return Err(truncated(data.len(), out.len()));
        }
        let ty_le = u32::from_le_bytes(data[b..b + 4].try_into().unwrap_or([0; 4]));
        if ty_le == 0x0a0d_0d0a {
            // Section header: the byte-order magic decides how the rest is read.
            let bom = u32::from_le_bytes(data[b + 8..b + 12].try_into().unwrap_or([0; 4]));
            c.big = match bom {
                0x1a2b_3c4d => false,
                0x4d3c_2b1a => true,
                _ => {
                    return Err(TraceError::NotPcap {
                        path: name.into(),
                        magic: bom,
                    })
                }
            };
            tsresol.clear();
        }
        let ty = c.u32_at(b).unwrap_or(0);
        let len = c.u32_at(b + 4).unwrap_or(0) as usize;
        if len < 12 || !len.is_multiple_of(4) {
            return Err(TraceError::Unusable {
                path: name.into(),
                reason: format!("block at byte {b} has an invalid length {len}"),
            });
        }
        if b + len > data.len() {
            return Err(truncated(data.len(), out.len()));
        }
        let body = b + 8;
        let body_end = b + len - 4;
        match ty {
            // Interface description: link type, snaplen, options (if_tsresol = 9).
            1 => {
                let mut res = 1_000_000u64;
                let mut o = body + 8;
                while o + 4 <= body_end {
                    let code = c.u16_at(o).unwrap_or(0);
                    let olen = c.u16_at(o + 2).unwrap_or(0) as usize;
                    if code == 0 {
                        break;
                    }
                    if code == 9 && olen >= 1 && o + 4 < body_end {
                        let v = data[o + 4];
                        let exp = (v & 0x7f) as u32;
                        res = if v & 0x80 == 0 {
                            10u64.checked_pow(exp).unwrap_or(1_000_000_000)
                        } else {
                            2u64.checked_pow(exp).unwrap_or(1 << 30)
                        };
                    }
                    o += 4 + olen.div_ceil(4) * 4;
                }
                tsresol.push(res);
            }
            // Enhanced packet: interface, timestamp (high, low), captured, original length.
            6 => {
                if body + 20 > body_end {
                    return Err(truncated(data.len(), out.len()));
                }
                let ifc = c.u32_at(body).unwrap_or(0) as usize;
                let hi = c.u32_at(body + 4).unwrap_or(0) as u64;
                let lo = c.u32_at(body + 8).unwrap_or(0) as u64;
                let orig = c.u32_at(body + 16).unwrap_or(0) as u64;
                let Some(&res) = tsresol.get(ifc) else {
                    return Err(TraceError::Unusable {
                        path: name.into(),
                        reason: format!("packet at byte {b} names interface {ifc}, which the file does not describe"),
                    });
                };
                let ts = (hi << 32) | lo;
                let t_ns = (ts as u128 * 1_000_000_000 / res as u128) as u64;
                out.push(TracePacket {
                    t_ns,
                    len: orig + FCS_BYTES as u64,
                });
            }
            // Simple packet blocks carry no timestamp: replay cannot time them.
            3 => {
                return Err(TraceError::Unusable {
                    path: name.into(),
                    reason: "it uses simple packet blocks, which carry no timestamps: re-save it with enhanced packet blocks (`editcap`)".into(),
                })
            }
            _ => {}
        }
        c.off = b + len;
    }
    Ok(out)
}

/// Write `packets` as a classic little-endian nanosecond pcap of Ethernet frames filled
/// with zeros (lengths without FCS); for tests and examples.
pub fn write_pcap_ns(packets: &[TracePacket]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    v.extend_from_slice(&2u16.to_le_bytes());
    v.extend_from_slice(&4u16.to_le_bytes());
    v.extend_from_slice(&0i32.to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&65_535u32.to_le_bytes());
    v.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
    for p in packets {
        let len = p.len.saturating_sub(FCS_BYTES as u64) as u32;
        v.extend_from_slice(&((p.t_ns / 1_000_000_000) as u32).to_le_bytes());
        v.extend_from_slice(&((p.t_ns % 1_000_000_000) as u32).to_le_bytes());
        v.extend_from_slice(&len.to_le_bytes());
        v.extend_from_slice(&len.to_le_bytes());
        v.resize(v.len() + len as usize, 0);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkts() -> Vec<TracePacket> {
        vec![
            TracePacket {
                t_ns: 5_000_000_123,
                len: 64,
            },
            TracePacket {
                t_ns: 5_000_100_456,
                len: 1518,
            },
        ]
    }

    #[test]
    fn pcap_ns_round_trip() {
        let b = write_pcap_ns(&pkts());
        assert_eq!(parse(&b, "t").unwrap(), pkts());
    }

    #[test]
    fn pcap_us_big_endian() {
        let mut v = Vec::new();
        v.extend_from_slice(&0xa1b2_c3d4u32.to_be_bytes());
        v.extend_from_slice(&[0, 2, 0, 4]);
        v.extend_from_slice(&[0; 8]);
        v.extend_from_slice(&65_535u32.to_be_bytes());
        v.extend_from_slice(&1u32.to_be_bytes());
        for (s, us, len) in [(1u32, 10u32, 60u32), (1, 30, 100)] {
            v.extend_from_slice(&s.to_be_bytes());
            v.extend_from_slice(&us.to_be_bytes());
            v.extend_from_slice(&len.to_be_bytes());
            v.extend_from_slice(&len.to_be_bytes());
            v.resize(v.len() + len as usize, 0);
        }
        let p = parse(&v, "t").unwrap();
        assert_eq!(p[0].t_ns, 1_000_010_000);
        assert_eq!(p[1].t_ns, 1_000_030_000);
        assert_eq!(p[1].len, 104);
    }

    fn block(ty: u32, body: &[u8]) -> Vec<u8> {
        let len = 12 + body.len().div_ceil(4) * 4;
        let mut v = Vec::new();
        v.extend_from_slice(&ty.to_le_bytes());
        v.extend_from_slice(&(len as u32).to_le_bytes());
        v.extend_from_slice(body);
        v.resize(len - 4, 0);
        v.extend_from_slice(&(len as u32).to_le_bytes());
        v
    }

    #[test]
    fn pcapng_with_ns_resolution() {
        let mut shb = Vec::new();
        shb.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
        shb.extend_from_slice(&[1, 0, 0, 0]);
        shb.extend_from_slice(&(-1i64).to_le_bytes());
        let mut idb = vec![1, 0, 0, 0];
        idb.extend_from_slice(&0u32.to_le_bytes());
        idb.extend_from_slice(&[9, 0, 1, 0, 9, 0, 0, 0]); // if_tsresol = 10^-9
        idb.extend_from_slice(&[0, 0, 0, 0]);
        let epb = |ts: u64, len: u32| {
            let mut e = Vec::new();
            e.extend_from_slice(&0u32.to_le_bytes());
            e.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
            e.extend_from_slice(&(ts as u32).to_le_bytes());
            e.extend_from_slice(&len.to_le_bytes());
            e.extend_from_slice(&len.to_le_bytes());
            e.resize(e.len() + len as usize, 0);
            block(6, &e)
        };
        let mut f = block(0x0a0d_0d0a, &shb);
        f.extend(block(1, &idb));
        f.extend(epb(7_000_000_000, 60));
        f.extend(epb(7_000_000_500, 200));
        let p = parse(&f, "t").unwrap();
        assert_eq!(
            p,
            [
                TracePacket {
                    t_ns: 7_000_000_000,
                    len: 64
                },
                TracePacket {
                    t_ns: 7_000_000_500,
                    len: 204
                }
            ]
        );
        // Cut in the middle of the last block.
        let e = parse(&f[..f.len() - 10], "cut.pcapng").unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
    }

    #[test]
    fn not_pcap_and_truncated_are_clear() {
        let e = parse(b"hello world, not a capture", "x.txt").unwrap_err();
        assert!(e.to_string().contains("x.txt is not a pcap"), "{e}");
        let b = write_pcap_ns(&pkts());
        let e = parse(&b[..b.len() - 1], "cut.pcap").unwrap_err();
        assert!(
            e.to_string().contains("truncated") && e.to_string().contains("after 1 packets"),
            "{e}"
        );
        let e = parse(&b[..24], "empty.pcap").unwrap_err();
        assert!(e.to_string().contains("no packets"), "{e}");
        let e = parse(&[], "zero").unwrap_err();
        assert!(matches!(e, TraceError::NotPcap { .. }));
    }
}
