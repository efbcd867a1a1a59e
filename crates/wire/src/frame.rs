//! The API the rest of nflab uses: build a probe frame once from a [`ProbeSpec`], stamp
//! `seq`/`tx_ns` into copies of it on the hot path, and parse them back.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::ethernet::{self, EtherType, MacAddr};
use crate::{bytes, checksum, ipv4, ipv6, probe, udp, vlan, WireError};

/// Bytes of Ethernet FCS. nflab frame sizes include it, as in RFC 2544; the buffer handed
/// to a NIC or a veth is `frame_bytes - FCS_BYTES` long.
pub const FCS_BYTES: usize = 4;

/// Bytes of the nflab probe header at the start of every UDP payload.
pub const PROBE_HEADER_BYTES: usize = probe::HEADER_LEN;

/// The default IP MTU.
pub const DEFAULT_MTU: usize = 1500;

/// Largest IPv4 datagram: the total length field is 16 bits.
const MAX_IPV4_DATAGRAM: usize = u16::MAX as usize;

/// Largest IPv6 packet without a jumbo option: 40 B header + 16-bit payload length.
const MAX_IPV6_PACKET: usize = ipv6::HEADER_LEN + u16::MAX as usize;

/// An 802.1Q tag to put on the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// VLAN ID, 0..=4094 (0 = priority tag only).
    pub vid: u16,
    /// Priority code point, 0..=7.
    pub pcp: u8,
}

/// Everything that defines a probe frame except `seq` and `tx_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeSpec {
    /// Source MAC address.
    pub src_mac: MacAddr,
    /// Destination MAC address.
    pub dst_mac: MacAddr,
    /// Optional 802.1Q tag.
    pub vlan: Option<VlanTag>,
    /// Source IP address; same family as `dst_ip`.
    pub src_ip: IpAddr,
    /// Destination IP address; same family as `src_ip`.
    pub dst_ip: IpAddr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// DSCP, 0..=63, written into the upper 6 bits of the TOS / traffic class byte.
    pub dscp: u8,
    /// IPv4 TTL, or IPv6 hop limit.
    pub ttl: u8,
    /// Flow id carried in the probe header.
    pub flow: u16,
    /// Frame size including the 4-byte FCS (RFC 2544 convention).
    pub frame_bytes: usize,
    /// IP MTU: the largest IP packet, header included.
    pub mtu: usize,
}

impl Default for ProbeSpec {
    /// A 64-byte IPv4 frame from lg0 (198.18.0.1) to lg1 (198.19.0.1) of the default
    /// two-namespace topology, on the RFC 2544 Appendix C.2.6.4 test ports
    /// (0xC020 -> 7), TTL 64, MTU 1500.
    fn default() -> Self {
        ProbeSpec {
            src_mac: MacAddr([0x02, 0, 0, 0, 0, 0x01]),
            dst_mac: MacAddr([0x02, 0, 0, 0, 0, 0x02]),
            vlan: None,
            src_ip: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
            dst_ip: IpAddr::V4(Ipv4Addr::new(198, 19, 0, 1)),
            src_port: 0xc020,
            dst_port: 7,
            dscp: 0,
            ttl: 64,
            flow: 0,
            frame_bytes: 64,
            mtu: DEFAULT_MTU,
        }
    }
}

impl ProbeSpec {
    /// Bytes of Ethernet header, with the VLAN tag if any.
    fn l2_bytes(&self) -> usize {
        ethernet::HEADER_LEN
            + if self.vlan.is_some() {
                vlan::HEADER_LEN
            } else {
                0
            }
    }

    /// Bytes of IP header (by the family of `src_ip`).
    fn ip_header_bytes(&self) -> usize {
        if self.src_ip.is_ipv6() {
            ipv6::HEADER_LEN
        } else {
            ipv4::HEADER_LEN
        }
    }

    /// The smallest frame (FCS included) that holds the whole header stack and the probe:
    /// 64 B for IPv4, 84 B for IPv6, 4 B more with a VLAN tag. The family is that of
    /// `src_ip`.
    pub fn min_frame_bytes(&self) -> usize {
        self.l2_bytes() + self.ip_header_bytes() + udp::HEADER_LEN + PROBE_HEADER_BYTES + FCS_BYTES
    }

    /// The largest frame (FCS included): `mtu` + Ethernet header (+ VLAN tag) + FCS, with
    /// `mtu` capped at the largest packet the IP length field can express (65535 B for
    /// IPv4, 65575 B for IPv6).
    pub fn max_frame_bytes(&self) -> usize {
        let ip_cap = if self.src_ip.is_ipv6() {
            MAX_IPV6_PACKET
        } else {
            MAX_IPV4_DATAGRAM
        };
        self.mtu.min(ip_cap) + self.l2_bytes() + FCS_BYTES
    }
}

fn vlan_label(vlan: &bool) -> &'static str {
    if *vlan {
        " + 802.1Q"
    } else {
        ""
    }
}

fn ip_label(ipv6: &bool) -> &'static str {
    if *ipv6 {
        "IPv6"
    } else {
        "IPv4"
    }
}

/// Why a [`ProbeSpec`] cannot be built into a frame. Each message says what is valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// `frame_bytes` is below [`ProbeSpec::min_frame_bytes`]; use at least `min_bytes`.
    #[error(
        "frame size {frame_bytes} B is below the minimum of {min_bytes} B for this header \
         stack (Ethernet{} + {} + UDP + 18 B probe + 4 B FCS)",
        vlan_label(.vlan),
        ip_label(.ipv6)
    )]
    FrameTooSmall {
        /// The requested frame size.
        frame_bytes: usize,
        /// The smallest valid frame size for this header stack.
        min_bytes: usize,
        /// Whether the stack has an 802.1Q tag.
        vlan: bool,
        /// Whether the stack is IPv6.
        ipv6: bool,
    },
    /// `frame_bytes` is above [`ProbeSpec::max_frame_bytes`]; use at most `max_bytes` or
    /// raise the MTU.
    #[error(
        "frame size {frame_bytes} B is above the maximum of {max_bytes} B for MTU {mtu} \
         (MTU + Ethernet header{} + 4 B FCS)",
        vlan_label(.vlan)
    )]
    FrameTooLarge {
        /// The requested frame size.
        frame_bytes: usize,
        /// The largest valid frame size for this MTU and header stack.
        max_bytes: usize,
        /// The IP MTU of the spec.
        mtu: usize,
        /// Whether the stack has an 802.1Q tag.
        vlan: bool,
    },
    /// The VLAN ID is above 4094 or the PCP above 7.
    #[error(
        "invalid 802.1Q tag (VLAN ID {vid}, PCP {pcp}): the VLAN ID must be 0 to 4094 and \
         the PCP 0 to 7"
    )]
    InvalidVlan {
        /// The requested VLAN ID.
        vid: u16,
        /// The requested priority code point.
        pcp: u8,
    },
    /// The DSCP is above 63.
    #[error("invalid DSCP {dscp}: a DSCP is a 6-bit code point, 0 to 63")]
    InvalidDscp {
        /// The requested DSCP.
        dscp: u8,
    },
    /// Source and destination addresses are of different families.
    #[error(
        "source address {src_ip} and destination address {dst_ip} are of different \
         families: use two IPv4 or two IPv6 addresses"
    )]
    AddressFamilyMismatch {
        /// The source address.
        src_ip: IpAddr,
        /// The destination address.
        dst_ip: IpAddr,
    },
}

/// Source and destination of one family.
enum IpPair {
    V4(Ipv4Addr, Ipv4Addr),
    V6(Ipv6Addr, Ipv6Addr),
}

/// A fully built probe frame (without FCS) with `seq` and `tx_ns` zero, and the offsets
/// needed to stamp copies of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeTemplate {
    spec: ProbeSpec,
    frame: Vec<u8>,
    /// Offset of the UDP payload (= probe header) in `frame`.
    payload_offset: usize,
    /// Offset of the UDP checksum in `frame`, when the frame carries one (IPv6).
    udp_checksum_offset: Option<usize>,
}

impl ProbeTemplate {
    /// Validate `spec` and build the frame.
    pub fn new(spec: &ProbeSpec) -> Result<Self, BuildError> {
        let ips = match (spec.src_ip, spec.dst_ip) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => IpPair::V4(src, dst),
            (IpAddr::V6(src), IpAddr::V6(dst)) => IpPair::V6(src, dst),
            (src_ip, dst_ip) => return Err(BuildError::AddressFamilyMismatch { src_ip, dst_ip }),
        };
        let ipv6 = matches!(ips, IpPair::V6(..));
        if let Some(tag) = spec.vlan {
            if tag.vid > vlan::MAX_VID || tag.pcp > vlan::MAX_PCP {
                return Err(BuildError::InvalidVlan {
                    vid: tag.vid,
                    pcp: tag.pcp,
                });
            }
        }
        if spec.dscp > ipv4::MAX_DSCP {
            return Err(BuildError::InvalidDscp { dscp: spec.dscp });
        }
        let min_bytes = spec.min_frame_bytes();
        if spec.frame_bytes < min_bytes {
            return Err(BuildError::FrameTooSmall {
                frame_bytes: spec.frame_bytes,
                min_bytes,
                vlan: spec.vlan.is_some(),
                ipv6,
            });
        }
        let max_bytes = spec.max_frame_bytes();
        if spec.frame_bytes > max_bytes {
            return Err(BuildError::FrameTooLarge {
                frame_bytes: spec.frame_bytes,
                max_bytes,
                mtu: spec.mtu,
                vlan: spec.vlan.is_some(),
            });
        }

        let mut frame = vec![0u8; spec.frame_bytes - FCS_BYTES];
        let l2 = spec.l2_bytes();
        let ip_len = frame.len() - l2;
        let udp_len = ip_len - spec.ip_header_bytes();
        let payload_len = udp_len - udp::HEADER_LEN;

        let ip_ethertype = if ipv6 {
            EtherType::IPV6
        } else {
            EtherType::IPV4
        };
        ethernet::Repr {
            src_addr: spec.src_mac,
            dst_addr: spec.dst_mac,
            ethertype: if spec.vlan.is_some() {
                EtherType::VLAN
            } else {
                ip_ethertype
            },
        }
        .emit(&mut ethernet::Packet::new_unchecked(&mut frame[..]));
        if let Some(tag) = spec.vlan {
            let at = ethernet::HEADER_LEN;
            vlan::Repr {
                vid: tag.vid,
                pcp: tag.pcp,
                dei: false,
                ethertype: ip_ethertype,
            }
            .emit(&mut vlan::Packet::new_unchecked(&mut frame[at..]));
        }

        let (l3, l4) = frame[l2..].split_at_mut(spec.ip_header_bytes());
        match ips {
            IpPair::V4(src_addr, dst_addr) => ipv4::Repr {
                src_addr,
                dst_addr,
                protocol: udp::IP_PROTOCOL,
                payload_len: udp_len,
                ttl: spec.ttl,
                dscp: spec.dscp,
            }
            .emit(&mut ipv4::Packet::new_unchecked(l3)),
            IpPair::V6(src_addr, dst_addr) => ipv6::Repr {
                src_addr,
                dst_addr,
                next_header: udp::IP_PROTOCOL,
                payload_len: udp_len,
                hop_limit: spec.ttl,
                dscp: spec.dscp,
            }
            .emit(&mut ipv6::Packet::new_unchecked(l3)),
        }

        let mut datagram = udp::Packet::new_unchecked(l4);
        udp::Repr {
            src_port: spec.src_port,
            dst_port: spec.dst_port,
            payload_len,
        }
        .emit(&mut datagram);
        probe::Repr {
            flow: spec.flow,
            seq: 0,
            tx_ns: 0,
        }
        .emit(&mut probe::Packet::new_unchecked(datagram.payload_mut()));
        // IPv4 sends no UDP checksum (RFC 768 allows 0): the IPv4 header checksum already
        // protects the addresses, and the stamp needs no per-packet checksum work. IPv6
        // makes it mandatory (RFC 8200 §8.1); `patch` updates it incrementally.
        if ipv6 {
            datagram.fill_checksum(spec.src_ip, spec.dst_ip);
        }

        let udp_offset = l2 + spec.ip_header_bytes();
        Ok(ProbeTemplate {
            spec: *spec,
            frame,
            payload_offset: udp_offset + udp::HEADER_LEN,
            udp_checksum_offset: ipv6.then_some(udp_offset + udp::CHECKSUM_OFFSET),
        })
    }

    /// Return the spec this template was built from.
    pub fn spec(&self) -> &ProbeSpec {
        &self.spec
    }

    /// Return the bytes on the buffer: `frame_bytes - FCS_BYTES`.
    pub fn len(&self) -> usize {
        self.frame.len()
    }

    /// Always false: a template holds at least a minimum frame.
    pub fn is_empty(&self) -> bool {
        self.frame.is_empty()
    }

    /// Return the frame size including the FCS.
    pub fn frame_bytes(&self) -> usize {
        self.frame.len() + FCS_BYTES
    }

    /// Return the frame with `seq` and `tx_ns` zero.
    pub fn bytes(&self) -> &[u8] {
        &self.frame
    }

    /// Whether the frame is IPv6.
    pub fn is_ipv6(&self) -> bool {
        self.udp_checksum_offset.is_some()
    }

    /// Offset of the UDP payload (the probe header) in the frame.
    pub fn payload_offset(&self) -> usize {
        self.payload_offset
    }

    /// Copy the template into `out`, set `seq` (mod 2^48) and `tx_ns`, fix checksums;
    /// returns `self.len()`. Bytes of `out` past `self.len()` are left alone. No allocation.
    ///
    /// # Panics
    ///
    /// If `out` is shorter than `self.len()`.
    #[inline]
    pub fn write(&self, out: &mut [u8], seq: u64, tx_ns: u64) -> usize {
        let n = self.frame.len();
        assert!(
            out.len() >= n,
            "ProbeTemplate::write: buffer of {} B is shorter than the frame ({n} B)",
            out.len()
        );
        let out = &mut out[..n];
        out.copy_from_slice(&self.frame);
        self.patch(out, seq, tx_ns);
        n
    }

    /// Patch `seq` (mod 2^48) and `tx_ns` of a frame previously written by
    /// [`write`](Self::write), updating the IPv6 UDP checksum incrementally (RFC 1624):
    /// 14 bytes written and 7 words summed, whatever the frame size.
    ///
    /// # Panics
    ///
    /// If `frame` is shorter than `self.len()`.
    #[inline]
    pub fn patch(&self, frame: &mut [u8], seq: u64, tx_ns: u64) {
        assert!(
            frame.len() >= self.frame.len(),
            "ProbeTemplate::patch: frame of {} B is shorter than the template ({} B)",
            frame.len(),
            self.frame.len()
        );
        let stamp =
            self.payload_offset + probe::STAMP.start..self.payload_offset + probe::STAMP.end;
        let new = probe::stamp_bytes(seq, tx_ns);
        if let Some(at) = self.udp_checksum_offset {
            let old_csum = bytes::read_u16(&frame[at..]);
            let csum = checksum::incremental_update_bytes(old_csum, &frame[stamp.clone()], &new);
            // 0 means "no checksum" in UDP; a computed 0 is sent as 0xFFFF (RFC 768).
            bytes::write_u16(&mut frame[at..], if csum == 0 { 0xffff } else { csum });
        }
        frame[stamp].copy_from_slice(&new);
    }

    /// Return the UDP payload alone (probe header with zero `seq`/`tx_ns`, then padding),
    /// for UDP-socket backends: `frame_bytes - FCS - Ethernet (- VLAN) - IP - UDP` bytes.
    pub fn payload(&self) -> &[u8] {
        &self.frame[self.payload_offset..]
    }

    /// Copy [`payload`](Self::payload) into `out` and set `seq` (mod 2^48) and `tx_ns`;
    /// returns the payload length. No allocation.
    ///
    /// # Panics
    ///
    /// If `out` is shorter than the payload.
    #[inline]
    pub fn write_payload(&self, out: &mut [u8], seq: u64, tx_ns: u64) -> usize {
        let payload = self.payload();
        let n = payload.len();
        assert!(
            out.len() >= n,
            "ProbeTemplate::write_payload: buffer of {} B is shorter than the payload ({n} B)",
            out.len()
        );
        out[..n].copy_from_slice(payload);
        out[probe::STAMP].copy_from_slice(&probe::stamp_bytes(seq, tx_ns));
        n
    }
}

/// What a received probe carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeInfo {
    /// Flow id.
    pub flow: u16,
    /// Sequence number (48 bits).
    pub seq: u64,
    /// Transmit timestamp in nanoseconds.
    pub tx_ns: u64,
    /// The 802.1Q tag, if the frame had one (the DEI bit is not reported).
    pub vlan: Option<VlanTag>,
    /// Whether the probe came over IPv6.
    pub is_ipv6: bool,
}

/// Parse Ethernet, optional 802.1Q tag, IPv4 or IPv6, UDP and the probe header of a frame
/// without FCS. Verifies the IPv4 header checksum and the UDP checksum (a zero UDP checksum
/// is accepted over IPv4 only, RFC 8200 §8.1). Never panics on any input; no allocation.
pub fn parse_probe(frame: &[u8]) -> Result<ProbeInfo, WireError> {
    let eth = ethernet::Packet::new_checked(frame)?;
    let mut ethertype = eth.ethertype();
    let mut l3 = eth.payload();
    let mut tag = None;
    if ethertype == EtherType::VLAN {
        let v = vlan::Packet::new_checked(l3)?;
        let repr = vlan::Repr::parse(&v)?;
        tag = Some(VlanTag {
            vid: repr.vid,
            pcp: repr.pcp,
        });
        ethertype = repr.ethertype;
        l3 = v.payload();
    }

    let (src_ip, dst_ip, l4, is_ipv6) = match ethertype {
        EtherType::IPV4 => {
            let ip = ipv4::Packet::new_unchecked(l3);
            let repr = ipv4::Repr::parse(&ip)?;
            if repr.protocol != udp::IP_PROTOCOL {
                return Err(WireError::Unsupported);
            }
            (
                repr.src_addr.into(),
                repr.dst_addr.into(),
                ip.payload(),
                false,
            )
        }
        EtherType::IPV6 => {
            let ip = ipv6::Packet::new_unchecked(l3);
            let repr = ipv6::Repr::parse(&ip)?;
            if repr.next_header != udp::IP_PROTOCOL {
                return Err(WireError::Unsupported);
            }
            (
                repr.src_addr.into(),
                repr.dst_addr.into(),
                ip.payload(),
                true,
            )
        }
        _ => return Err(WireError::Unsupported),
    };

    let datagram = udp::Packet::new_unchecked(l4);
    udp::Repr::parse(&datagram, src_ip, dst_ip)?;
    let info = parse_probe_payload(datagram.payload())?;
    Ok(ProbeInfo {
        vlan: tag,
        is_ipv6,
        ..info
    })
}

/// Parse the probe header at the start of a UDP payload. The result has `vlan: None` and
/// `is_ipv6: false`: the payload alone does not say. Never panics; no allocation.
pub fn parse_probe_payload(payload: &[u8]) -> Result<ProbeInfo, WireError> {
    let repr = probe::Repr::parse(&probe::Packet::new_unchecked(payload))?;
    Ok(ProbeInfo {
        flow: repr.flow,
        seq: repr.seq,
        tx_ns: repr.tx_ns,
        vlan: None,
        is_ipv6: false,
    })
}

#[cfg(test)]
mod test;
