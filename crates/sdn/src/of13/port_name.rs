//! A port's name as it is on the wire: 16 bytes, kept whole.
//!
//! OpenFlow says "null-terminated", but a switch may send a name that fills
//! all 16 bytes, is not UTF-8, or has bytes after its NUL; a proxy must pass
//! each of them on unchanged (the `openflow` fuzz target found that a lossy
//! `String` did not). Humans get the lossy text up to the first NUL.

use std::borrow::Cow;
use std::fmt;

/// `char name[OFP_MAX_PORT_NAME_LEN]` of `ofp_port` (1.3) and `ofp_phy_port` (1.0).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct PortName(pub [u8; 16]);

impl PortName {
    /// Bytes on the wire.
    pub const LEN: usize = 16;

    /// The name a switch would send for `text`: at most 15 bytes (cut at a
    /// character boundary), NUL-padded.
    pub fn new(text: &str) -> PortName {
        let mut n = text.len().min(Self::LEN - 1);
        while !text.is_char_boundary(n) {
            n -= 1;
        }
        let mut raw = [0u8; Self::LEN];
        raw[..n].copy_from_slice(&text.as_bytes()[..n]);
        PortName(raw)
    }

    /// Read 16 bytes.
    pub fn from_slice(raw: &[u8]) -> Option<PortName> {
        raw.try_into().ok().map(PortName)
    }

    /// The 16 bytes, as received.
    pub fn bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// The text up to the first NUL (all 16 bytes if none), lossy where it
    /// is not UTF-8: for logs and people, never for the wire.
    pub fn as_str(&self) -> Cow<'_, str> {
        let end = self.0.iter().position(|&b| b == 0).unwrap_or(Self::LEN);
        String::from_utf8_lossy(&self.0[..end])
    }
}

impl From<&str> for PortName {
    fn from(text: &str) -> PortName {
        PortName::new(text)
    }
}

impl fmt::Display for PortName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

impl fmt::Debug for PortName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The text, and the raw bytes too when the text does not say them all.
        if *self == PortName::new(&self.as_str()) {
            write!(f, "PortName({:?})", self.as_str())
        } else {
            write!(f, "PortName({:?}, {:02x?})", self.as_str(), self.0)
        }
    }
}

impl PartialEq<str> for PortName {
    /// Whether the text up to the first NUL is `other`.
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for PortName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_keeps_every_byte_and_reads_as_text_up_to_its_nul() {
        let y1 = PortName::new("y1");
        assert_eq!(&y1.bytes()[..3], b"y1\0");
        assert_eq!(y1, "y1");
        assert_eq!(y1.to_string(), "y1");
        // 16 bytes with no NUL: all of them are the name.
        let full = PortName(*b"abcdefghijklmnop");
        assert_eq!(full.as_str(), "abcdefghijklmnop");
        assert_ne!(full, PortName::new("abcdefghijklmnop"));
        assert_eq!(PortName::new("abcdefghijklmnop"), "abcdefghijklmno");
        // Not UTF-8: lossy for people, the bytes unchanged.
        let odd = PortName([0xff; 16]);
        assert_eq!(
            odd.as_str().chars().filter(|c| *c == '\u{fffd}').count(),
            16
        );
        assert_eq!(odd.bytes(), &[0xff; 16]);
        assert!(format!("{odd:?}").contains("ff, ff"));
        // A cut never splits a character.
        assert_eq!(PortName::new("ääääääää").as_str(), "äääääää");
    }
}
