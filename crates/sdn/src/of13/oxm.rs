//! OXM matches (`ofp_match` of type OFPMT_OXM).

use super::buf::{Put, Reader};
use super::CodecError;

/// The OpenFlow basic class.
pub const OFPXMC_OPENFLOW_BASIC: u16 = 0x8000;

/// OXM field numbers of the basic class that nflab names.
pub mod field {
    /// Ingress port (u32).
    pub const IN_PORT: u8 = 0;
    /// Metadata (u64, maskable).
    pub const METADATA: u8 = 2;
    /// Ethernet destination (6 bytes, maskable).
    pub const ETH_DST: u8 = 3;
    /// Ethernet source (6 bytes, maskable).
    pub const ETH_SRC: u8 = 4;
    /// Ethernet type (u16).
    pub const ETH_TYPE: u8 = 5;
    /// IP protocol (u8).
    pub const IP_PROTO: u8 = 10;
    /// IPv4 source (4 bytes, maskable).
    pub const IPV4_SRC: u8 = 11;
    /// IPv4 destination (4 bytes, maskable).
    pub const IPV4_DST: u8 = 12;
    /// UDP source port (u16).
    pub const UDP_SRC: u8 = 15;
    /// UDP destination port (u16).
    pub const UDP_DST: u8 = 16;
}

/// One OXM TLV.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oxm {
    /// Class (0x8000 for the basic fields).
    pub class: u16,
    /// Field number.
    pub field: u8,
    /// Value.
    pub value: Vec<u8>,
    /// Mask, for a masked field.
    pub mask: Option<Vec<u8>>,
}

impl Oxm {
    /// A basic-class field without mask.
    pub fn basic(field: u8, value: &[u8]) -> Oxm {
        Oxm {
            class: OFPXMC_OPENFLOW_BASIC,
            field,
            value: value.to_vec(),
            mask: None,
        }
    }

    /// A basic-class field with mask.
    pub fn masked(field: u8, value: &[u8], mask: &[u8]) -> Oxm {
        Oxm {
            mask: Some(mask.to_vec()),
            ..Oxm::basic(field, value)
        }
    }

    /// Whether this is basic-class field `field`.
    pub fn is(&self, field: u8) -> bool {
        self.class == OFPXMC_OPENFLOW_BASIC && self.field == field
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let has_mask = self.mask.is_some();
        let len = self.value.len() + self.mask.as_ref().map_or(0, Vec::len);
        out.put_u16(self.class);
        out.put_u8((self.field << 1) | u8::from(has_mask));
        out.put_u8(len as u8);
        out.extend_from_slice(&self.value);
        if let Some(m) = &self.mask {
            out.extend_from_slice(m);
        }
    }

    /// Encoded length.
    pub fn len(&self) -> usize {
        4 + self.value.len() + self.mask.as_ref().map_or(0, Vec::len)
    }

    /// Never empty (a header at least); for clippy's len/is_empty pairing.
    pub fn is_empty(&self) -> bool {
        false
    }

    fn decode(r: &mut Reader) -> Result<Oxm, CodecError> {
        let class = r.u16()?;
        let fh = r.u8()?;
        let len = r.u8()? as usize;
        let body = r.bytes(len)?;
        let has_mask = fh & 1 == 1;
        if has_mask && len % 2 != 0 {
            return Err(CodecError::BadLength("masked OXM with an odd length"));
        }
        let (value, mask) = if has_mask {
            (body[..len / 2].to_vec(), Some(body[len / 2..].to_vec()))
        } else {
            (body.to_vec(), None)
        };
        Ok(Oxm {
            class,
            field: fh >> 1,
            value,
            mask,
        })
    }

    /// One OXM alone (as in a SET_FIELD action).
    pub(crate) fn encode_one(&self, out: &mut Vec<u8>) {
        self.encode(out)
    }

    /// One OXM from the front of `r`.
    pub(crate) fn decode_one(r: &mut Reader) -> Result<Oxm, CodecError> {
        Oxm::decode(r)
    }
}

/// An `ofp_match` of type OXM: fields in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Match {
    /// The fields.
    pub fields: Vec<Oxm>,
}

impl Match {
    /// A match on `fields`.
    pub fn new(fields: Vec<Oxm>) -> Match {
        Match { fields }
    }

    /// The field `field` of the basic class, if present.
    pub fn get(&self, field: u8) -> Option<&Oxm> {
        self.fields.iter().find(|o| o.is(field))
    }

    /// The ingress port it matches, if any.
    pub fn in_port(&self) -> Option<u32> {
        self.get(field::IN_PORT)
            .and_then(|o| o.value.as_slice().try_into().ok().map(u32::from_be_bytes))
    }

    /// Encode with its padding to 8 bytes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(1); // OFPMT_OXM
        let len = 4 + self.fields.iter().map(Oxm::len).sum::<usize>();
        out.put_u16(len as u16);
        for f in &self.fields {
            f.encode(out);
        }
        out.pad_to_8(start);
    }

    /// Decode one match with its padding.
    pub fn decode(r: &mut Reader) -> Result<Match, CodecError> {
        let typ = r.u16()?;
        let len = r.u16()? as usize;
        if typ != 1 || len < 4 {
            return Err(CodecError::BadLength("match is not OXM or shorter than 4"));
        }
        let body = r.bytes(len - 4)?;
        r.skip((8 - len % 8) % 8)?;
        let mut fr = Reader::new(body, "OXM field");
        let mut fields = Vec::new();
        while fr.remaining() > 0 {
            fields.push(Oxm::decode(&mut fr)?);
        }
        Ok(Match { fields })
    }
}
