//! IPv6 fixed header (RFC 8200 §3). Extension headers are not parsed: nflab sends UDP
//! directly after the fixed header, and anything else is `Unsupported` on the probe path.

use std::net::Ipv6Addr;

use crate::{bytes, WireError};

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;

mod field {
    use core::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Range<usize> = 8..24;
    pub const DST_ADDR: Range<usize> = 24..40;
}

/// A zero-copy view of an IPv6 packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer and run [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Packet<T>, WireError> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Check that the fixed header and the payload length are in the buffer; afterwards no
    /// accessor panics. Bytes after the payload (Ethernet padding) are allowed.
    pub fn check_len(&self) -> Result<(), WireError> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || HEADER_LEN + usize::from(self.payload_len()) > len {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }

    /// Return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn ver_tc_flow(&self) -> u32 {
        bytes::read_u32(&self.buffer.as_ref()[field::VER_TC_FLOW])
    }

    /// Return the version field.
    pub fn version(&self) -> u8 {
        (self.ver_tc_flow() >> 28) as u8
    }

    /// Return the traffic class (DSCP and ECN).
    pub fn traffic_class(&self) -> u8 {
        (self.ver_tc_flow() >> 20) as u8
    }

    /// Return the DSCP (upper 6 bits of the traffic class, RFC 2474).
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    /// Return the flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.ver_tc_flow() & 0x000f_ffff
    }

    /// Return the payload length field.
    pub fn payload_len(&self) -> u16 {
        bytes::read_u16(&self.buffer.as_ref()[field::LENGTH])
    }

    /// Return the next header field.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }

    /// Return the hop limit field.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Return the source address field.
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
        Ipv6Addr::from(a)
    }

    /// Return the destination address field.
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
        Ipv6Addr::from(a)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Return the payload, as long as the payload length field says.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_ver_tc_flow(&mut self, v: u32) {
        bytes::write_u32(&mut self.buffer.as_mut()[field::VER_TC_FLOW], v);
    }

    /// Set the version field.
    pub fn set_version(&mut self, version: u8) {
        let v = self.ver_tc_flow();
        self.set_ver_tc_flow((v & 0x0fff_ffff) | (u32::from(version & 0x0f) << 28));
    }

    /// Set the traffic class (DSCP << 2 | ECN).
    pub fn set_traffic_class(&mut self, tc: u8) {
        let v = self.ver_tc_flow();
        self.set_ver_tc_flow((v & 0xf00f_ffff) | (u32::from(tc) << 20));
    }

    /// Set the flow label (20 bits; higher bits are dropped).
    pub fn set_flow_label(&mut self, label: u32) {
        let v = self.ver_tc_flow();
        self.set_ver_tc_flow((v & 0xfff0_0000) | (label & 0x000f_ffff));
    }

    /// Set the payload length field.
    pub fn set_payload_len(&mut self, len: u16) {
        bytes::write_u16(&mut self.buffer.as_mut()[field::LENGTH], len);
    }

    /// Set the next header field.
    pub fn set_next_header(&mut self, next_header: u8) {
        self.buffer.as_mut()[field::NXT_HDR] = next_header;
    }

    /// Set the hop limit field.
    pub fn set_hop_limit(&mut self, hop_limit: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = hop_limit;
    }

    /// Set the source address field.
    pub fn set_src_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets());
    }

    /// Set the destination address field.
    pub fn set_dst_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets());
    }

    /// Return the payload, as long as the payload length field says, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// The high-level form of an IPv6 fixed header as nflab sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Next header (17 for UDP).
    pub next_header: u8,
    /// Payload length in bytes.
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Differentiated services code point, 0..=63.
    pub dscp: u8,
}

impl Repr {
    /// Parse a packet, checked or not; never panics. `Truncated` if the header or the
    /// payload is cut, `Malformed` if the version is not 6.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr, WireError> {
        if packet.buffer.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if packet.version() != 6 {
            return Err(WireError::Malformed);
        }
        packet.check_len()?;
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            dscp: packet.dscp(),
        })
    }

    /// Return the length of the header this emits.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header, ECN 0 and flow label 0, into a packet whose buffer is at least
    /// `buffer_len()` long. `payload_len` must fit 16 bits; the build API checks that.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_ver_tc_flow(0);
        packet.set_version(6);
        packet.set_traffic_class((self.dscp & 0x3f) << 2);
        packet.set_flow_label(0);
        packet.set_payload_len(self.payload_len as u16);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    static PACKET: [u8; 44] = [
        0x6b, 0x80, 0x00, 0x00, // version 6, traffic class 0xb8 (DSCP 46), flow label 0
        0x00, 0x04, 0x11, 0x40, // payload 4, UDP, hop limit 64
        0x20, 0x01, 0x00, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // 2001:2::1
        0x20, 0x01, 0x00, 0x02, 0, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x01, // 2001:2:0:1::1
        0xaa, 0xbb, 0xcc, 0xdd,
    ];

    fn repr() -> Repr {
        Repr {
            src_addr: "2001:2::1".parse().unwrap(),
            dst_addr: "2001:2:0:1::1".parse().unwrap(),
            next_header: 17,
            payload_len: 4,
            hop_limit: 64,
            dscp: 46,
        }
    }

    #[test]
    fn test_parse() {
        let packet = Packet::new_checked(&PACKET[..]).unwrap();
        assert_eq!(Repr::parse(&packet).unwrap(), repr());
        assert_eq!(packet.flow_label(), 0);
        assert_eq!(packet.payload(), &[0xaa, 0xbb, 0xcc, 0xdd]);
    }

    #[test]
    fn test_emit() {
        let mut buf = [0xffu8; 44];
        buf[40..].copy_from_slice(&[0xaa, 0xbb, 0xcc, 0xdd]);
        repr().emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, PACKET);
    }

    #[test]
    fn test_errors() {
        let p = |b: &[u8]| Repr::parse(&Packet::new_unchecked(b));
        assert_eq!(p(&PACKET[..39]), Err(WireError::Truncated));
        assert_eq!(p(&PACKET[..43]), Err(WireError::Truncated));
        let mut b = PACKET;
        b[0] = 0x4b;
        assert_eq!(p(&b), Err(WireError::Malformed));
    }
}
