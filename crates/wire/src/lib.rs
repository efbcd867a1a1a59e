//! Build and parse the frames nflab sends: Ethernet II, an optional 802.1Q tag, IPv4 or
//! IPv6, UDP, and the 18-byte nflab probe header. No I/O.
//!
//! # Layers
//!
//! Each protocol lives in its own module, in the smoltcp style:
//!
//! - `Packet<T: AsRef<[u8]>>` is a zero-copy view of a buffer, with getters, setters
//!   (when `T: AsMut<[u8]>`) and the constructors `new_unchecked`, `check_len` and
//!   `new_checked`. Byte ranges live in a private `mod field`.
//! - `Repr` is the checked, high-level form of the header, with `parse`, `emit` and
//!   `buffer_len`.
//!
//! [`checksum`] has the RFC 1071 internet checksum and the RFC 1624 incremental update.
//!
//! The rest of nflab uses the high-level API re-exported at the crate root from `frame`:
//! [`ProbeTemplate`] builds a frame once and stamps `seq`/`tx_ns` into copies of it on the
//! hot path, and [`parse_probe`] reads them back on the receive side.
//!
//! # Frame sizes
//!
//! Frame sizes in nflab include the 4-byte FCS, as in RFC 2544 ("64-byte frames"); the
//! buffer handed to a NIC or a veth is `frame_bytes - FCS_BYTES` long, because the NIC
//! (or nobody, on veth) appends the FCS.
//!
//! # No-panic contract
//!
//! - [`parse_probe`], [`parse_probe_payload`] and every `Repr::parse` return a typed
//!   [`WireError`] on any input and never panic. The parse path does not allocate.
//! - After `Packet::check_len` (or `new_checked`) has returned `Ok`, no getter or setter of
//!   that packet panics. On a `new_unchecked` packet they may.
//! - The build side panics only on caller bugs that are documented under `# Panics`
//!   (an output buffer shorter than the template).
//!
//! # Limitations
//!
//! Only what nflab sends is understood: one 802.1Q tag (no QinQ), IPv4 without fragments,
//! IPv6 without extension headers, UDP. Anything else is [`WireError::Unsupported`].
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod arp;
pub mod checksum;
pub mod ethernet;
mod frame;
pub mod ipv4;
pub mod ipv6;
pub mod probe;
pub mod udp;
pub mod vlan;

pub use ethernet::MacAddr;
pub use frame::{
    parse_probe, parse_probe_payload, BuildError, ProbeInfo, ProbeSpec, ProbeTemplate, VlanTag,
    DEFAULT_MTU, FCS_BYTES, PROBE_HEADER_BYTES,
};

/// Why a frame could not be parsed.
///
/// Small and `Copy` on purpose: the receive path drops the frame and counts the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum WireError {
    /// The buffer ends before a header or a length field says it should.
    #[error("frame truncated")]
    Truncated,
    /// A header field has a value no valid packet has (wrong IP version, a length
    /// smaller than its own header, ...).
    #[error("malformed header")]
    Malformed,
    /// A valid packet that nflab does not handle (not IP, not UDP, a fragment, QinQ, ...).
    #[error("unsupported protocol")]
    Unsupported,
    /// The IPv4 header checksum or the UDP checksum does not match.
    #[error("bad checksum")]
    BadChecksum,
    /// A UDP payload that does not start with the nflab probe magic.
    #[error("not an nflab probe")]
    NotProbe,
}

/// Big-endian reads and writes at the start of a slice. Callers have checked the length.
mod bytes {
    #[inline]
    pub(crate) fn read_u16(b: &[u8]) -> u16 {
        u16::from_be_bytes([b[0], b[1]])
    }

    #[inline]
    pub(crate) fn write_u16(b: &mut [u8], v: u16) {
        b[..2].copy_from_slice(&v.to_be_bytes());
    }

    #[inline]
    pub(crate) fn read_u32(b: &[u8]) -> u32 {
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    #[inline]
    pub(crate) fn write_u32(b: &mut [u8], v: u32) {
        b[..4].copy_from_slice(&v.to_be_bytes());
    }

    /// Read a 48-bit big-endian integer.
    #[inline]
    pub(crate) fn read_u48(b: &[u8]) -> u64 {
        u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]])
    }

    /// Write the low 48 bits of `v`, big-endian.
    #[inline]
    pub(crate) fn write_u48(b: &mut [u8], v: u64) {
        b[..6].copy_from_slice(&v.to_be_bytes()[2..]);
    }

    #[inline]
    pub(crate) fn read_u64(b: &[u8]) -> u64 {
        u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }

    #[inline]
    pub(crate) fn write_u64(b: &mut [u8], v: u64) {
        b[..8].copy_from_slice(&v.to_be_bytes());
    }
}
