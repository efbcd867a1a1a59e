//! The nflab probe header: 18 bytes at the start of the UDP payload, network byte order.
//!
//! ```text
//!  0      1       2..4    4..10       10..18
//! +------+-------+-------+-----------+-----------------+---------------------+
//! | 0xA7 | ver 1 | flow  | seq (u48) | tx_ns (u64)     | zero padding ...    |
//! +------+-------+-------+-----------+-----------------+---------------------+
//! ```
//!
//! Why 18 bytes: a 64-byte frame (60 B + FCS) with Ethernet 14 + IPv4 20 + UDP 8 leaves
//! exactly 18, so the smallest RFC 2544 frame carries a whole probe. 48 bits of `seq`
//! last 3.2 days at 1 Gpps before wrapping; `seq` is written modulo 2^48.

use crate::{bytes, WireError};

/// Length of the probe header.
pub const HEADER_LEN: usize = 18;

/// First byte of every probe.
pub const MAGIC: u8 = 0xa7;

/// The probe format version this crate writes and reads.
pub const VERSION: u8 = 1;

/// Sequence numbers are written modulo `SEQ_MODULUS` (2^48).
pub const SEQ_MODULUS: u64 = 1 << 48;

mod field {
    use core::ops::{Range, RangeFrom};
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 1;
    pub const FLOW: Range<usize> = 2..4;
    pub const SEQ: Range<usize> = 4..10;
    pub const TX_NS: Range<usize> = 10..18;
    pub const PADDING: RangeFrom<usize> = 18..;
}

/// Bytes that change from packet to packet (`seq` and `tx_ns`), relative to the probe
/// header. Starts at an even offset, so an incremental checksum update can pair its bytes.
pub(crate) const STAMP: core::ops::Range<usize> = field::SEQ.start..field::TX_NS.end;

/// Length of [`STAMP`].
pub(crate) const STAMP_LEN: usize = 14;

/// Encode `seq` (mod 2^48) and `tx_ns` as the bytes of [`STAMP`].
#[inline]
pub(crate) fn stamp_bytes(seq: u64, tx_ns: u64) -> [u8; STAMP_LEN] {
    let mut b = [0u8; STAMP_LEN];
    bytes::write_u48(&mut b[..6], seq);
    bytes::write_u64(&mut b[6..], tx_ns);
    b
}

/// A zero-copy view of a probe header and the padding after it.
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

    /// Return the magic byte.
    pub fn magic(&self) -> u8 {
        self.buffer.as_ref()[field::MAGIC]
    }

    /// Return the version byte.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// Return the flow id.
    pub fn flow(&self) -> u16 {
        bytes::read_u16(&self.buffer.as_ref()[field::FLOW])
    }

    /// Return the sequence number (48 bits).
    pub fn seq(&self) -> u64 {
        bytes::read_u48(&self.buffer.as_ref()[field::SEQ])
    }

    /// Return the transmit timestamp in nanoseconds.
    pub fn tx_ns(&self) -> u64 {
        bytes::read_u64(&self.buffer.as_ref()[field::TX_NS])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Return the padding after the header.
    pub fn padding(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PADDING]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the magic byte.
    pub fn set_magic(&mut self, magic: u8) {
        self.buffer.as_mut()[field::MAGIC] = magic;
    }

    /// Set the version byte.
    pub fn set_version(&mut self, version: u8) {
        self.buffer.as_mut()[field::VERSION] = version;
    }

    /// Set the flow id.
    pub fn set_flow(&mut self, flow: u16) {
        bytes::write_u16(&mut self.buffer.as_mut()[field::FLOW], flow);
    }

    /// Set the sequence number; only its low 48 bits are written.
    pub fn set_seq(&mut self, seq: u64) {
        bytes::write_u48(&mut self.buffer.as_mut()[field::SEQ], seq);
    }

    /// Set the transmit timestamp in nanoseconds.
    pub fn set_tx_ns(&mut self, tx_ns: u64) {
        bytes::write_u64(&mut self.buffer.as_mut()[field::TX_NS], tx_ns);
    }

    /// Return the padding after the header, mutably.
    pub fn padding_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PADDING]
    }
}

/// The high-level form of a probe header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Flow id.
    pub flow: u16,
    /// Sequence number, < 2^48 when parsed.
    pub seq: u64,
    /// Transmit timestamp in nanoseconds.
    pub tx_ns: u64,
}

impl Repr {
    /// Parse a probe header at the start of `packet`; never panics.
    ///
    /// A wrong magic is `NotProbe`, another version `Unsupported`, a buffer shorter than
    /// the header `Truncated` (checked in that order, as far as the bytes go).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr, WireError> {
        let b = packet.buffer.as_ref();
        if b.first().is_some_and(|&m| m != MAGIC) {
            return Err(WireError::NotProbe);
        }
        if b.get(1).is_some_and(|&v| v != VERSION) {
            return Err(WireError::Unsupported);
        }
        packet.check_len()?;
        Ok(Repr {
            flow: packet.flow(),
            seq: packet.seq(),
            tx_ns: packet.tx_ns(),
        })
    }

    /// Return the length of the header this emits.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header (magic, version, flow, seq mod 2^48, tx_ns) into a packet whose
    /// buffer is at least `buffer_len()` long. The padding is left as it is.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_magic(MAGIC);
        packet.set_version(VERSION);
        packet.set_flow(self.flow);
        packet.set_seq(self.seq);
        packet.set_tx_ns(self.tx_ns);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    static PROBE: [u8; 20] = [
        0xa7, 0x01, // magic, version
        0x01, 0x02, // flow 0x0102
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, // seq 0x0102_0304_0506
        0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // tx_ns
        0x00, 0x00, // padding
    ];

    const REPR: Repr = Repr {
        flow: 0x0102,
        seq: 0x0102_0304_0506,
        tx_ns: 0x1122_3344_5566_7788,
    };

    #[test]
    fn test_parse() {
        let packet = Packet::new_checked(&PROBE[..]).unwrap();
        assert_eq!(Repr::parse(&packet).unwrap(), REPR);
        assert_eq!(packet.padding(), &[0, 0]);
    }

    #[test]
    fn test_emit() {
        let mut buf = [0u8; 20];
        REPR.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, PROBE);
    }

    #[test]
    fn test_seq_wraps_at_48_bits() {
        let mut buf = [0u8; 18];
        let repr = Repr {
            seq: SEQ_MODULUS + 5,
            ..REPR
        };
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(Packet::new_unchecked(&buf[..]).seq(), 5);
        assert_eq!(stamp_bytes(SEQ_MODULUS + 5, 9)[..6], [0, 0, 0, 0, 0, 5]);
        assert_eq!(STAMP.len(), STAMP_LEN);
    }

    #[test]
    fn test_errors() {
        let p = |b: &[u8]| Repr::parse(&Packet::new_unchecked(b));
        assert_eq!(p(&[]), Err(WireError::Truncated));
        assert_eq!(p(&PROBE[..17]), Err(WireError::Truncated));
        assert_eq!(p(&[0xa6]), Err(WireError::NotProbe));
        let mut b = PROBE;
        b[0] = 0;
        assert_eq!(p(&b), Err(WireError::NotProbe));
        let mut b = PROBE;
        b[1] = 2;
        assert_eq!(p(&b), Err(WireError::Unsupported));
    }
}
