//! UDP header (RFC 768) and its checksum over the IPv4 or IPv6 pseudo-header.

use std::net::IpAddr;

use crate::{bytes, checksum, WireError};

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

/// IP protocol number / IPv6 next header value of UDP.
pub const IP_PROTOCOL: u8 = 17;

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// Byte offset of the checksum field in the UDP header.
pub(crate) const CHECKSUM_OFFSET: usize = field::CHECKSUM.start;

/// A zero-copy view of a UDP datagram.
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

    /// Check that the header and the length the header claims are in the buffer;
    /// afterwards no accessor panics. A length field below 8 is `Malformed`.
    pub fn check_len(&self) -> Result<(), WireError> {
        let buf_len = self.buffer.as_ref().len();
        if buf_len < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let len = usize::from(self.len());
        if len < HEADER_LEN {
            Err(WireError::Malformed)
        } else if len > buf_len {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }

    /// Return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Return the source port field.
    pub fn src_port(&self) -> u16 {
        bytes::read_u16(&self.buffer.as_ref()[field::SRC_PORT])
    }

    /// Return the destination port field.
    pub fn dst_port(&self) -> u16 {
        bytes::read_u16(&self.buffer.as_ref()[field::DST_PORT])
    }

    /// Return the length field (header and payload).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        bytes::read_u16(&self.buffer.as_ref()[field::LENGTH])
    }

    /// Return the checksum field.
    pub fn checksum(&self) -> u16 {
        bytes::read_u16(&self.buffer.as_ref()[field::CHECKSUM])
    }

    /// Whether the checksum over the pseudo-header and the datagram is right. A zero field
    /// ("no checksum") does not verify here; the caller decides whether it is allowed.
    pub fn verify_checksum(&self, src_addr: IpAddr, dst_addr: IpAddr) -> bool {
        let len = self.len();
        let data = &self.buffer.as_ref()[..usize::from(len)];
        let pseudo = checksum::pseudo_header(src_addr, dst_addr, IP_PROTOCOL, u32::from(len));
        let sum = checksum::fold(checksum::accumulate(u64::from(pseudo), data));
        self.checksum() != 0 && sum == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Return the payload, as long as the length field says.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the source port field.
    pub fn set_src_port(&mut self, port: u16) {
        bytes::write_u16(&mut self.buffer.as_mut()[field::SRC_PORT], port);
    }

    /// Set the destination port field.
    pub fn set_dst_port(&mut self, port: u16) {
        bytes::write_u16(&mut self.buffer.as_mut()[field::DST_PORT], port);
    }

    /// Set the length field.
    pub fn set_len(&mut self, len: u16) {
        bytes::write_u16(&mut self.buffer.as_mut()[field::LENGTH], len);
    }

    /// Set the checksum field.
    pub fn set_checksum(&mut self, csum: u16) {
        bytes::write_u16(&mut self.buffer.as_mut()[field::CHECKSUM], csum);
    }

    /// Compute and store the checksum over the pseudo-header and the datagram (length
    /// field bytes). A computed 0 is sent as 0xFFFF, since 0 means "no checksum"
    /// (RFC 768).
    pub fn fill_checksum(&mut self, src_addr: IpAddr, dst_addr: IpAddr) {
        self.set_checksum(0);
        let len = self.len();
        let pseudo = checksum::pseudo_header(src_addr, dst_addr, IP_PROTOCOL, u32::from(len));
        let data = &self.buffer.as_ref()[..usize::from(len)];
        let csum = !checksum::fold(checksum::accumulate(u64::from(pseudo), data));
        self.set_checksum(if csum == 0 { 0xffff } else { csum });
    }

    /// Return the payload, as long as the length field says, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// The high-level form of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length in bytes.
    pub payload_len: usize,
}

impl Repr {
    /// Parse a datagram carried between `src_addr` and `dst_addr`; never panics.
    ///
    /// A zero checksum field means "no checksum" and is accepted over IPv4 (RFC 768) but
    /// is `BadChecksum` over IPv6, where the checksum is mandatory (RFC 8200 §8.1).
    pub fn parse<T: AsRef<[u8]>>(
        packet: &Packet<T>,
        src_addr: IpAddr,
        dst_addr: IpAddr,
    ) -> Result<Repr, WireError> {
        packet.check_len()?;
        let no_checksum = packet.checksum() == 0 && src_addr.is_ipv4();
        if !no_checksum && !packet.verify_checksum(src_addr, dst_addr) {
            return Err(WireError::BadChecksum);
        }
        Ok(Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: usize::from(packet.len()) - HEADER_LEN,
        })
    }

    /// Return the length of the header this emits.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header with a zero checksum into a packet whose buffer is at least
    /// `buffer_len()` long. Write the payload, then call
    /// [`Packet::fill_checksum`] if a checksum is wanted (always over IPv6).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len((HEADER_LEN + self.payload_len) as u16);
        packet.set_checksum(0);
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use std::net::Ipv4Addr;

    const SRC: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
    const DST: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 19, 0, 1));

    // Checksum by hand. Pseudo-header: c612 + 0001 + c613 + 0001 + 0011 + 000b = 0x1_8c43.
    // Datagram: c020 + 0007 + 000b + 0000 + 6869 + 2100 ("hi!" padded) = 0x1_499b.
    // Total 0x2_d5de -> fold 0xd5e0 -> checksum !0xd5e0 = 0x2a1f.
    static PACKET: [u8; 11] = [
        0xc0, 0x20, 0x00, 0x07, 0x00, 0x0b, 0x2a, 0x1f, b'h', b'i', b'!',
    ];

    const REPR: Repr = Repr {
        src_port: 0xc020,
        dst_port: 7,
        payload_len: 3,
    };

    #[test]
    fn test_parse() {
        let packet = Packet::new_checked(&PACKET[..]).unwrap();
        assert_eq!(Repr::parse(&packet, SRC, DST).unwrap(), REPR);
        assert_eq!(packet.payload(), b"hi!");
    }

    #[test]
    fn test_emit() {
        let mut buf = [0xffu8; 11];
        buf[8..].copy_from_slice(b"hi!");
        let mut packet = Packet::new_unchecked(&mut buf[..]);
        REPR.emit(&mut packet);
        assert_eq!(packet.checksum(), 0);
        packet.fill_checksum(SRC, DST);
        assert_eq!(buf, PACKET);
    }

    #[test]
    fn test_zero_checksum() {
        let mut buf = PACKET;
        buf[6..8].copy_from_slice(&[0, 0]);
        let packet = Packet::new_unchecked(&buf[..]);
        assert_eq!(Repr::parse(&packet, SRC, DST), Ok(REPR));
        let v6: IpAddr = "2001:2::1".parse().unwrap();
        assert_eq!(Repr::parse(&packet, v6, v6), Err(WireError::BadChecksum));
    }

    #[test]
    fn test_errors() {
        let p = |b: &[u8]| Repr::parse(&Packet::new_unchecked(b), SRC, DST);
        assert_eq!(p(&PACKET[..7]), Err(WireError::Truncated));
        assert_eq!(p(&PACKET[..10]), Err(WireError::Truncated));
        let mut b = PACKET;
        b[5] = 7;
        assert_eq!(p(&b), Err(WireError::Malformed));
        let mut b = PACKET;
        b[9] ^= 0x10;
        assert_eq!(p(&b), Err(WireError::BadChecksum));
    }
}
