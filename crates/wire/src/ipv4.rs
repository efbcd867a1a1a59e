//! IPv4 header (RFC 791).
//!
//! nflab sends IPv4 without options, with DF set and identification 0 (RFC 6864 §4.1:
//! the ID field of atomic datagrams has no meaning), and does not reassemble fragments.

use std::net::Ipv4Addr;

use crate::{bytes, checksum, WireError};

/// Length of the header without options.
pub const HEADER_LEN: usize = 20;

/// Largest DSCP value (a 6-bit field, RFC 2474).
pub const MAX_DSCP: u8 = 63;

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC_ADDR: Range<usize> = 12..16;
    pub const DST_ADDR: Range<usize> = 16..20;
}

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// A zero-copy view of an IPv4 packet.
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

    /// Check that the header, options included, is in the buffer; afterwards the header
    /// getters and [`verify_checksum`](Self::verify_checksum) do not panic, but
    /// [`payload`](Packet::payload) may.
    ///
    /// A header length above the total length is `Malformed` (the header says it is
    /// corrupt) rather than `Truncated`.
    pub fn check_header_len(&self) -> Result<(), WireError> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let header_len = usize::from(self.header_len());
        if header_len < HEADER_LEN || header_len > usize::from(self.total_len()) {
            return Err(WireError::Malformed);
        }
        if header_len > len {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    /// Check that the header and the whole datagram (the total length) are in the buffer;
    /// afterwards no accessor panics. Bytes after the total length (Ethernet padding) are
    /// allowed.
    pub fn check_len(&self) -> Result<(), WireError> {
        self.check_header_len()?;
        if usize::from(self.total_len()) > self.buffer.as_ref().len() {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    /// Return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Return the version field.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Return the header length in bytes (IHL × 4).
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// Return the DSCP (upper 6 bits of the former TOS byte).
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// Return the ECN bits (lower 2 bits of the former TOS byte).
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Return the total length field (header and payload).
    pub fn total_len(&self) -> u16 {
        bytes::read_u16(&self.buffer.as_ref()[field::LENGTH])
    }

    /// Return the identification field.
    pub fn ident(&self) -> u16 {
        bytes::read_u16(&self.buffer.as_ref()[field::IDENT])
    }

    fn flags_offset(&self) -> u16 {
        bytes::read_u16(&self.buffer.as_ref()[field::FLG_OFF])
    }

    /// Return the "don't fragment" flag.
    pub fn dont_frag(&self) -> bool {
        self.flags_offset() & FLAG_DF != 0
    }

    /// Return the "more fragments" flag.
    pub fn more_frags(&self) -> bool {
        self.flags_offset() & FLAG_MF != 0
    }

    /// Return the fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (self.flags_offset() & FRAG_OFFSET_MASK) << 3
    }

    /// Return the time-to-live field.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Return the protocol field.
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    /// Return the header checksum field.
    pub fn checksum(&self) -> u16 {
        bytes::read_u16(&self.buffer.as_ref()[field::CHECKSUM])
    }

    /// Return the source address field.
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(bytes::read_u32(&self.buffer.as_ref()[field::SRC_ADDR]))
    }

    /// Return the destination address field.
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(bytes::read_u32(&self.buffer.as_ref()[field::DST_ADDR]))
    }

    /// Whether the header checksum is right (the sum over the header folds to 0xFFFF).
    pub fn verify_checksum(&self) -> bool {
        let header = &self.buffer.as_ref()[..usize::from(self.header_len())];
        checksum::internet_checksum(header) == 0
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Return the payload: from the end of the header to the total length.
    pub fn payload(&self) -> &'a [u8] {
        let range = usize::from(self.header_len())..usize::from(self.total_len());
        &self.buffer.as_ref()[range]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the version field.
    pub fn set_version(&mut self, version: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (version << 4);
    }

    /// Set the header length in bytes (a multiple of 4, 20..=60).
    pub fn set_header_len(&mut self, len: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((len / 4) & 0x0f);
    }

    /// Set the DSCP (6 bits; higher bits are dropped).
    pub fn set_dscp(&mut self, dscp: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0x03) | ((dscp & MAX_DSCP) << 2);
    }

    /// Set the ECN bits.
    pub fn set_ecn(&mut self, ecn: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0xfc) | (ecn & 0x03);
    }

    /// Set the total length field.
    pub fn set_total_len(&mut self, len: u16) {
        bytes::write_u16(&mut self.buffer.as_mut()[field::LENGTH], len);
    }

    /// Set the identification field.
    pub fn set_ident(&mut self, ident: u16) {
        bytes::write_u16(&mut self.buffer.as_mut()[field::IDENT], ident);
    }

    fn set_flags_offset(&mut self, v: u16) {
        bytes::write_u16(&mut self.buffer.as_mut()[field::FLG_OFF], v);
    }

    /// Clear the flags and the fragment offset.
    pub fn clear_flags(&mut self) {
        self.set_flags_offset(0);
    }

    /// Set the "don't fragment" flag.
    pub fn set_dont_frag(&mut self, value: bool) {
        let v = self.flags_offset();
        self.set_flags_offset(if value { v | FLAG_DF } else { v & !FLAG_DF });
    }

    /// Set the "more fragments" flag.
    pub fn set_more_frags(&mut self, value: bool) {
        let v = self.flags_offset();
        self.set_flags_offset(if value { v | FLAG_MF } else { v & !FLAG_MF });
    }

    /// Set the fragment offset in bytes (a multiple of 8).
    pub fn set_frag_offset(&mut self, offset: u16) {
        let v = self.flags_offset();
        self.set_flags_offset((v & !FRAG_OFFSET_MASK) | ((offset >> 3) & FRAG_OFFSET_MASK));
    }

    /// Set the time-to-live field.
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    /// Set the protocol field.
    pub fn set_protocol(&mut self, protocol: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = protocol;
    }

    /// Set the header checksum field.
    pub fn set_checksum(&mut self, csum: u16) {
        bytes::write_u16(&mut self.buffer.as_mut()[field::CHECKSUM], csum);
    }

    /// Set the source address field.
    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        bytes::write_u32(&mut self.buffer.as_mut()[field::SRC_ADDR], u32::from(addr));
    }

    /// Set the destination address field.
    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        bytes::write_u32(&mut self.buffer.as_mut()[field::DST_ADDR], u32::from(addr));
    }

    /// Compute and store the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let header_len = usize::from(self.header_len());
        let csum = checksum::internet_checksum(&self.buffer.as_ref()[..header_len]);
        self.set_checksum(csum);
    }

    /// Return the payload (header end to total length), mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = usize::from(self.header_len())..usize::from(self.total_len());
        &mut self.buffer.as_mut()[range]
    }
}

/// The high-level form of an IPv4 header as nflab sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Protocol of the payload (17 for UDP).
    pub protocol: u8,
    /// Payload length in bytes (total length minus header length).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// Differentiated services code point, 0..=63.
    pub dscp: u8,
}

impl Repr {
    /// Parse a packet, checked or not; never panics.
    ///
    /// The checks run in this order: header in the buffer (`Truncated`/`Malformed`),
    /// version 4 (`Malformed`), header checksum (`BadChecksum`), total length in the buffer
    /// (`Truncated`), not a fragment (`Unsupported`). The checksum comes before the total
    /// length so that a corrupted length field reads as corruption, not as truncation.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr, WireError> {
        packet.check_header_len()?;
        if packet.version() != 4 {
            return Err(WireError::Malformed);
        }
        if !packet.verify_checksum() {
            return Err(WireError::BadChecksum);
        }
        packet.check_len()?;
        if packet.more_frags() || packet.frag_offset() != 0 {
            return Err(WireError::Unsupported);
        }
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: usize::from(packet.total_len() - u16::from(packet.header_len())),
            ttl: packet.ttl(),
            dscp: packet.dscp(),
        })
    }

    /// Return the length of the header this emits (no options).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header, with DF set, ID 0, ECN 0 and the checksum filled, into a packet
    /// whose buffer is at least `buffer_len()` long. `payload_len` must fit the 16-bit
    /// total length; the build API checks that.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_version(4);
        packet.set_header_len(HEADER_LEN as u8);
        packet.set_dscp(self.dscp);
        packet.set_ecn(0);
        packet.set_total_len((HEADER_LEN + self.payload_len) as u16);
        packet.set_ident(0);
        packet.clear_flags();
        packet.set_dont_frag(true);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // Checksum by hand: 4500 + 001c + 0000 + 4000 + 4011 + 0000 + c612 + 0001 + c613 + 0001
    // = 0x2_5154; fold: 0x5154 + 0x2 = 0x5156; checksum = !0x5156 = 0xaea9.
    static PACKET: [u8; 28] = [
        0x45, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xae, 0xa9, 0xc6, 0x12, 0x00,
        0x01, 0xc6, 0x13, 0x00, 0x01, // header
        1, 2, 3, 4, 5, 6, 7, 8, // payload
    ];

    const REPR: Repr = Repr {
        src_addr: Ipv4Addr::new(198, 18, 0, 1),
        dst_addr: Ipv4Addr::new(198, 19, 0, 1),
        protocol: 17,
        payload_len: 8,
        ttl: 64,
        dscp: 0,
    };

    #[test]
    fn test_parse() {
        let packet = Packet::new_checked(&PACKET[..]).unwrap();
        assert!(packet.verify_checksum());
        assert!(packet.dont_frag());
        assert_eq!(Repr::parse(&packet).unwrap(), REPR);
        assert_eq!(packet.payload(), &[1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn test_emit() {
        let mut buf = [0xffu8; 28];
        buf[20..].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        REPR.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, PACKET);
    }

    #[test]
    fn test_ethernet_padding_is_ignored() {
        let mut buf = [0u8; 40];
        buf[..28].copy_from_slice(&PACKET);
        let packet = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.payload().len(), 8);
    }

    #[test]
    fn test_errors() {
        let p = |b: &[u8]| Repr::parse(&Packet::new_unchecked(b));
        assert_eq!(p(&PACKET[..19]), Err(WireError::Truncated));
        assert_eq!(p(&PACKET[..27]), Err(WireError::Truncated));
        let mut b = PACKET;
        b[0] = 0x44; // IHL 16 B < 20
        assert_eq!(p(&b), Err(WireError::Malformed));
        let mut b = PACKET;
        b[0] = 0x65; // version 6
        assert_eq!(p(&b), Err(WireError::Malformed));
        let mut b = PACKET;
        b[11] ^= 1;
        assert_eq!(p(&b), Err(WireError::BadChecksum));
        let mut b = PACKET;
        let mut packet = Packet::new_unchecked(&mut b[..]);
        packet.set_more_frags(true);
        packet.fill_checksum();
        assert_eq!(p(&b), Err(WireError::Unsupported));
        let mut b = PACKET;
        let mut packet = Packet::new_unchecked(&mut b[..]);
        packet.set_frag_offset(8);
        packet.fill_checksum();
        assert_eq!(Packet::new_unchecked(&b[..]).frag_offset(), 8);
        assert_eq!(p(&b), Err(WireError::Unsupported));
    }
}
