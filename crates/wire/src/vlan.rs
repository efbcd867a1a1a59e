//! IEEE 802.1Q VLAN tag.
//!
//! The outer Ethernet header carries the TPID (0x8100) in its EtherType field; this module
//! views the 4 bytes that follow it: the tag control information (PCP 3 bits, DEI 1 bit,
//! VID 12 bits) and the EtherType of the encapsulated payload.

use crate::ethernet::EtherType;
use crate::{bytes, WireError};

/// Length of the tag after the outer EtherType (TCI + inner EtherType).
pub const HEADER_LEN: usize = 4;

/// Largest VLAN ID that may be sent; 4095 (0xFFF) is reserved (IEEE 802.1Q Table 9-2).
pub const MAX_VID: u16 = 4094;

/// Largest priority code point.
pub const MAX_PCP: u8 = 7;

mod field {
    use core::ops::{Range, RangeFrom};
    pub const TCI: Range<usize> = 0..2;
    pub const ETHERTYPE: Range<usize> = 2..4;
    pub const PAYLOAD: RangeFrom<usize> = 4..;
}

/// A zero-copy view of an 802.1Q tag and the payload after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer and check that it holds a whole tag.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, WireError> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Check that the buffer holds a whole tag; afterwards no accessor panics.
    pub fn check_len(&self) -> Result<(), WireError> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }

    /// Return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn tci(&self) -> u16 {
        bytes::read_u16(&self.buffer.as_ref()[field::TCI])
    }

    /// Return the priority code point (IEEE 802.1p class).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Return the drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// Return the VLAN identifier.
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// Return the EtherType of the encapsulated payload.
    pub fn ethertype(&self) -> EtherType {
        EtherType(bytes::read_u16(&self.buffer.as_ref()[field::ETHERTYPE]))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Return the bytes after the tag.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the tag control information from its three parts; extra high bits are dropped.
    pub fn set_tci(&mut self, pcp: u8, dei: bool, vid: u16) {
        let tci = (u16::from(pcp & 0x7) << 13) | (u16::from(dei) << 12) | (vid & 0x0fff);
        bytes::write_u16(&mut self.buffer.as_mut()[field::TCI], tci);
    }

    /// Set the EtherType of the encapsulated payload.
    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        bytes::write_u16(&mut self.buffer.as_mut()[field::ETHERTYPE], ethertype.0);
    }

    /// Return the bytes after the tag, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// The high-level form of an 802.1Q tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// VLAN identifier, 0..=4094 when emitted (0 means priority-tagged only).
    pub vid: u16,
    /// Priority code point, 0..=7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// EtherType of the encapsulated payload.
    pub ethertype: EtherType,
}

impl Repr {
    /// Parse a tag. Checks the length itself, so it never panics. The reserved VID 4095 is
    /// reported as it is, not rejected: a measurement tool reports what it saw.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr, WireError> {
        packet.check_len()?;
        Ok(Repr {
            vid: packet.vid(),
            pcp: packet.pcp(),
            dei: packet.dei(),
            ethertype: packet.ethertype(),
        })
    }

    /// Return the length of the tag this emits.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the tag into a packet whose buffer is at least `buffer_len()` long. Bits of
    /// `vid` above 12 and of `pcp` above 3 are dropped; validate before.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_tci(self.pcp, self.dei, self.vid);
        packet.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // PCP 5, DEI 0, VID 100 = 0b101_0_000001100100 = 0xa064; then IPv6.
    static TAG: [u8; 5] = [0xa0, 0x64, 0x86, 0xdd, 0x60];

    const REPR: Repr = Repr {
        vid: 100,
        pcp: 5,
        dei: false,
        ethertype: EtherType::IPV6,
    };

    #[test]
    fn test_parse() {
        let packet = Packet::new_checked(&TAG[..]).unwrap();
        assert_eq!(Repr::parse(&packet).unwrap(), REPR);
        assert_eq!(packet.payload(), &[0x60]);
    }

    #[test]
    fn test_emit() {
        let mut buf = [0u8; 5];
        buf[4] = 0x60;
        REPR.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, TAG);
    }

    #[test]
    fn test_dei_and_max_values() {
        let mut buf = [0u8; 4];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_tci(7, true, 4095);
        assert_eq!(buf[..2], [0xff, 0xff]);
        let p = Packet::new_unchecked(&buf[..]);
        assert_eq!((p.pcp(), p.dei(), p.vid()), (7, true, 4095));
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&TAG[..3])),
            Err(WireError::Truncated)
        );
    }
}
