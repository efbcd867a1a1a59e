//! Ethernet II header (IEEE 802.3 §3.1.1): destination, source, EtherType. The FCS is not
//! part of the buffer: the NIC appends and strips it.

use core::fmt;
use core::str::FromStr;

use crate::{bytes, WireError};

/// A 48-bit MAC address. `Display` and `FromStr` use `02:00:00:00:00:01`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The broadcast address `ff:ff:ff:ff:ff:ff`.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// Return the address as bytes.
    pub const fn octets(&self) -> [u8; 6] {
        self.0
    }

    /// Whether this is the broadcast address.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Whether the I/G bit (bit 0 of the first octet) marks a group address.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Whether this is an individual (unicast) address.
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// Whether the U/L bit (bit 1 of the first octet) marks a locally administered address.
    pub fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl FromStr for MacAddr {
    type Err = WireError;

    /// Parse six colon-separated pairs of hex digits (either case), e.g. `02:00:00:00:00:01`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for byte in &mut out {
            let part = parts.next().ok_or(WireError::Malformed)?;
            if part.len() != 2 || !part.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(WireError::Malformed);
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| WireError::Malformed)?;
        }
        if parts.next().is_some() {
            return Err(WireError::Malformed);
        }
        Ok(MacAddr(out))
    }
}

/// An EtherType value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4 (RFC 894).
    pub const IPV4: EtherType = EtherType(0x0800);
    /// ARP (RFC 826).
    pub const ARP: EtherType = EtherType(0x0806);
    /// A customer VLAN tag follows (IEEE 802.1Q C-TAG TPID).
    pub const VLAN: EtherType = EtherType(0x8100);
    /// IPv6 (RFC 2464).
    pub const IPV6: EtherType = EtherType(0x86dd);
    /// A service VLAN tag follows (IEEE 802.1ad S-TAG, "QinQ").
    pub const QINQ: EtherType = EtherType(0x88a8);
}

/// Length of the Ethernet II header.
pub const HEADER_LEN: usize = 14;

mod field {
    use core::ops::{Range, RangeFrom};
    pub const DESTINATION: Range<usize> = 0..6;
    pub const SOURCE: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const PAYLOAD: RangeFrom<usize> = 14..;
}

/// A zero-copy view of an Ethernet II frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer and check that it holds a whole header.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, WireError> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Check that the buffer holds a whole header; afterwards no accessor panics.
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

    /// Return the destination address field.
    pub fn dst_addr(&self) -> MacAddr {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        MacAddr(a)
    }

    /// Return the source address field.
    pub fn src_addr(&self) -> MacAddr {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        MacAddr(a)
    }

    /// Return the EtherType field.
    pub fn ethertype(&self) -> EtherType {
        EtherType(bytes::read_u16(&self.buffer.as_ref()[field::ETHERTYPE]))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Return the bytes after the header.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the destination address field.
    pub fn set_dst_addr(&mut self, addr: MacAddr) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&addr.0);
    }

    /// Set the source address field.
    pub fn set_src_addr(&mut self, addr: MacAddr) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&addr.0);
    }

    /// Set the EtherType field.
    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        bytes::write_u16(&mut self.buffer.as_mut()[field::ETHERTYPE], ethertype.0);
    }

    /// Return the bytes after the header, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// The high-level form of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source address.
    pub src_addr: MacAddr,
    /// Destination address.
    pub dst_addr: MacAddr,
    /// EtherType of the payload (or of the VLAN tag that follows).
    pub ethertype: EtherType,
}

impl Repr {
    /// Parse a header. Checks the length itself, so it never panics.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr, WireError> {
        packet.check_len()?;
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            ethertype: packet.ethertype(),
        })
    }

    /// Return the length of the header this emits.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header into a packet whose buffer is at least `buffer_len()` long.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_dst_addr(self.dst_addr);
        packet.set_src_addr(self.src_addr);
        packet.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    static FRAME: [u8; 18] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // dst
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // src
        0x08, 0x00, // IPv4
        0xde, 0xad, 0xbe, 0xef, // payload
    ];

    const REPR: Repr = Repr {
        src_addr: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_addr: MacAddr([2, 0, 0, 0, 0, 2]),
        ethertype: EtherType::IPV4,
    };

    #[test]
    fn test_parse() {
        let packet = Packet::new_checked(&FRAME[..]).unwrap();
        assert_eq!(Repr::parse(&packet).unwrap(), REPR);
        assert_eq!(packet.payload(), &[0xde, 0xad, 0xbe, 0xef]);
    }

    #[test]
    fn test_emit() {
        let mut buf = [0u8; 18];
        buf[14..].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        REPR.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, FRAME);
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            Packet::new_checked(&FRAME[..13]).unwrap_err(),
            WireError::Truncated
        );
        assert!(Packet::new_checked(&FRAME[..14]).is_ok());
    }

    #[test]
    fn mac_display_and_parse() {
        let mac = MacAddr([0x02, 0x00, 0x00, 0xab, 0xCD, 0x01]);
        assert_eq!(mac.to_string(), "02:00:00:ab:cd:01");
        assert_eq!("02:00:00:AB:cd:01".parse::<MacAddr>(), Ok(mac));
        for bad in [
            "",
            "02:00:00:ab:cd",
            "02:00:00:ab:cd:01:02",
            "02:00:00:ab:cd:1",
            "02:00:00:ab:cd:0g",
            "02-00-00-ab-cd-01",
            "+2:00:00:ab:cd:01",
            "02:00:00:ab:cd:01:",
        ] {
            assert_eq!(bad.parse::<MacAddr>(), Err(WireError::Malformed), "{bad:?}");
        }
        assert!(MacAddr::BROADCAST.is_broadcast() && MacAddr::BROADCAST.is_multicast());
        assert!(mac.is_unicast() && mac.is_local());
    }
}
