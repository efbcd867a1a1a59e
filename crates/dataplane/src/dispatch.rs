//! # `extern-dispatch`: VLAN-ID signalling of seed 004
//!
//! A P4 switch sends traffic that needs an extern to a server, marked with
//! an added 802.1Q tag whose 12-bit VID names the extern and its instance:
//!
//! ```text
//! VID = (base_vid & mask) | (crc32_12(src, dst, proto) & !mask)
//! ```
//!
//! `crc32_12` is the low 12 bits of the IEEE CRC-32 (the zlib/Ethernet one)
//! over the IPv4 source address, destination address (network byte order)
//! and protocol byte, 9 bytes in that order. Seed 004 leaves the CRC bits and
//! the input order open; these are the choices fixed here. An all-ones mask
//! gives static assignment (VID = base). Optional extra data travels in the
//! "Snabb header", EtherType 0x54BB: `next EtherType (2) | length (1, 1..127)
//! | data`.
//!
//! Stacks (seed 004 §1.4): ① Ethernet/VLAN_sig/IP; ② with the 0x54BB header
//! after the tag; ③ for frames that already had a tag, VLAN_sig(type 0x8100)
//! then the original tag, whose type becomes 0x54BB when data is carried.
//!
//! Modes:
//! - `encap` — the switch side: compute the VID, push the tag (and header);
//! - `decap` — the server side: pop the outer tag (what the ConnectX NIC does
//!   with VLAN stripping), check the extern part, count the instance, strip
//!   the 0x54BB header; frames for another extern are dropped and counted;
//! - `roundtrip` — both, in that order, on one box: the whole signalling
//!   path ahead of the extern that follows in the chain.
//!
//! With several workers, worker *i* is instance *i*: frames whose instance
//! part differs from the worker's are counted as `other_instance` (a NIC
//! with per-VID queues would never deliver them there).

use std::net::Ipv4Addr;

use crate::app::{App, Output};
use crate::link::Link;
use crate::packet::Packet;

/// EtherType of the Snabb data header.
pub const ETHERTYPE_SNABB: u16 = 0x54bb;
const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_IPV4: u16 = 0x0800;
/// Largest Snabb data length (7 bits).
pub const MAX_SNABB_DATA: usize = 127;

/// Low 12 bits of CRC-32 (IEEE) over src ‖ dst ‖ proto.
pub fn crc32_12(src: Ipv4Addr, dst: Ipv4Addr, proto: u8) -> u16 {
    let mut b = [0u8; 9];
    b[0..4].copy_from_slice(&src.octets());
    b[4..8].copy_from_slice(&dst.octets());
    b[8] = proto;
    (crc32fast::hash(&b) & 0xfff) as u16
}

/// The signalling VID of a flow (seed 004 Fig. 4.6).
pub fn signaling_vid(base_vid: u16, mask: u16, src: Ipv4Addr, dst: Ipv4Addr, proto: u8) -> u16 {
    let mask = mask & 0xfff;
    (base_vid & mask) | (crc32_12(src, dst, proto) & !mask & 0xfff)
}

/// What the app does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Push tag (and header).
    Encap,
    /// Pop tag, classify, strip header.
    Decap,
    /// Encap then decap.
    Roundtrip,
}

fn et(d: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*d.get(off)?, *d.get(off + 1)?]))
}

/// Push the signalling tag with `vid`, and the Snabb header if `data` is not
/// empty. Returns false (frame unchanged) if the frame is not IPv4 (or
/// tagged IPv4) or would not fit.
pub fn encap(p: &mut Packet, base_vid: u16, mask: u16, data: &[u8]) -> Option<u16> {
    let d = p.data();
    // Where the original EtherType of the L3 payload sits after the push.
    let (l3, inner_type_off) = match et(d, 12)? {
        ETHERTYPE_VLAN if et(d, 16)? == ETHERTYPE_IPV4 => (18, 20),
        ETHERTYPE_IPV4 => (14, 16),
        _ => return None,
    };
    if d.len() < l3 + 20 || data.len() > MAX_SNABB_DATA {
        return None;
    }
    let src = Ipv4Addr::new(d[l3 + 12], d[l3 + 13], d[l3 + 14], d[l3 + 15]);
    let dst = Ipv4Addr::new(d[l3 + 16], d[l3 + 17], d[l3 + 18], d[l3 + 19]);
    let vid = signaling_vid(base_vid, mask, src, dst, d[l3 + 9]);
    if p.len() + 4 + if data.is_empty() { 0 } else { 3 + data.len() }
        > crate::packet::PACKET_CAPACITY
    {
        return None;
    }
    let tci = vid.to_be_bytes();
    p.insert(12, &[0x81, 0x00, tci[0], tci[1]]);
    if !data.is_empty() {
        let inner = et(p.data(), inner_type_off)?;
        p.data_mut()[inner_type_off..inner_type_off + 2]
            .copy_from_slice(&ETHERTYPE_SNABB.to_be_bytes());
        let mut h = [0u8; 3 + MAX_SNABB_DATA];
        h[0..2].copy_from_slice(&inner.to_be_bytes());
        h[2] = data.len() as u8;
        h[3..3 + data.len()].copy_from_slice(data);
        p.insert(inner_type_off + 2, &h[..3 + data.len()]);
    }
    Some(vid)
}

/// Why a frame could not be decapsulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecapError {
    /// No outer 802.1Q tag.
    NoTag,
    /// A 0x54BB header with length 0 or running past the frame.
    BadSnabbHeader,
}

/// Pop the outer tag and strip a Snabb header; returns the VID and the
/// header's data length (0 without header).
pub fn decap(p: &mut Packet) -> Result<(u16, usize), DecapError> {
    let d = p.data();
    if et(d, 12) != Some(ETHERTYPE_VLAN) || d.len() < 18 {
        return Err(DecapError::NoTag);
    }
    let vid = u16::from_be_bytes([d[14], d[15]]) & 0xfff;
    // Find the Snabb header: after the signalling tag, or after an inner tag.
    let type_off = if et(d, 16) == Some(ETHERTYPE_VLAN) {
        20
    } else {
        16
    };
    let mut len = 0;
    if et(d, type_off) == Some(ETHERTYPE_SNABB) {
        let h = type_off + 2;
        let n = *d.get(h + 2).ok_or(DecapError::BadSnabbHeader)? as usize;
        if n == 0 || n > MAX_SNABB_DATA || d.len() < h + 3 + n {
            return Err(DecapError::BadSnabbHeader);
        }
        let next = [d[h], d[h + 1]];
        let dm = p.data_mut();
        dm[type_off..type_off + 2].copy_from_slice(&next);
        p.remove(h, 3 + n);
        len = n;
    }
    p.remove(12, 4);
    Ok((vid, len))
}

/// Counters of the dispatcher.
#[derive(Debug, Clone, Default, serde::Serialize, PartialEq, Eq)]
pub struct DispatchCounters {
    /// Tags pushed.
    pub encapsulated: u64,
    /// Frames that could not be tagged (not IPv4, too long): dropped.
    pub not_ipv4: u64,
    /// Tags popped.
    pub decapsulated: u64,
    /// Snabb headers stripped.
    pub snabb_headers: u64,
    /// Frames without a tag at decap: dropped.
    pub untagged: u64,
    /// Frames with a malformed 0x54BB header: dropped.
    pub bad_header: u64,
    /// Frames whose extern part is not ours: dropped.
    pub foreign_extern: u64,
    /// Frames for another instance of our extern (still handled here).
    pub other_instance: u64,
    /// Frames per instance id (index = VID & !mask).
    pub per_instance: Vec<u64>,
}

/// The `extern-dispatch` app.
pub struct ExternDispatch {
    mode: Mode,
    base_vid: u16,
    mask: u16,
    data: Vec<u8>,
    instance: u16,
    counters: DispatchCounters,
}

impl ExternDispatch {
    /// A dispatcher; `instance` is this worker's instance id.
    pub fn new(
        mode: Mode,
        base_vid: u16,
        mask: u16,
        data: Vec<u8>,
        instance: u16,
    ) -> ExternDispatch {
        let mask = mask & 0xfff;
        let instances = ((!mask & 0xfff) as usize) + 1;
        ExternDispatch {
            mode,
            base_vid: base_vid & 0xfff,
            mask,
            data,
            instance,
            counters: DispatchCounters {
                per_instance: vec![0; instances],
                ..Default::default()
            },
        }
    }

    /// The counters.
    pub fn counters(&self) -> &DispatchCounters {
        &self.counters
    }

    fn decap_one(&mut self, p: &mut Packet) -> bool {
        match decap(p) {
            Ok((vid, n)) => {
                if vid & self.mask != self.base_vid & self.mask {
                    self.counters.foreign_extern += 1;
                    return false;
                }
                let inst = vid & !self.mask & 0xfff;
                self.counters.per_instance[inst as usize] += 1;
                self.counters.other_instance += (inst != self.instance) as u64;
                self.counters.decapsulated += 1;
                self.counters.snabb_headers += (n > 0) as u64;
                true
            }
            Err(DecapError::NoTag) => {
                self.counters.untagged += 1;
                false
            }
            Err(DecapError::BadSnabbHeader) => {
                self.counters.bad_header += 1;
                false
            }
        }
    }
}

impl App for ExternDispatch {
    fn name(&self) -> &'static str {
        "extern-dispatch"
    }

    fn push(&mut self, input: &mut Link, out: &mut Output<'_>, _now_ns: u64) {
        for _ in 0..input.nreadable() {
            let Some(mut p) = input.receive() else { break };
            if matches!(self.mode, Mode::Encap | Mode::Roundtrip) {
                if encap(&mut p, self.base_vid, self.mask, &self.data).is_none() {
                    self.counters.not_ipv4 += 1;
                    continue;
                }
                self.counters.encapsulated += 1;
            }
            if matches!(self.mode, Mode::Decap | Mode::Roundtrip) && !self.decap_one(&mut p) {
                continue;
            }
            out.fwd.transmit(p);
        }
    }

    fn counters(&self) -> serde_json::Value {
        serde_json::to_value(&self.counters).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bitwise CRC-32 (reflected, polynomial 0xEDB88320): an implementation
    /// independent of crc32fast's tables.
    fn crc32_reference(data: &[u8]) -> u32 {
        let mut c = 0xffff_ffffu32;
        for &b in data {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0xedb8_8320
                } else {
                    c >> 1
                };
            }
        }
        !c
    }

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn vid_choice_on_known_vectors() {
        assert_eq!(
            crc32_reference(b"123456789"),
            0xcbf4_3926,
            "the IEEE CRC-32 check value"
        );
        // zlib.crc32(bytes([198,18,0,1, 198,19,0,1, 17])) = 0x8f447f26
        assert_eq!(crc32_12(ip("198.18.0.1"), ip("198.19.0.1"), 17), 0xf26);
        // zlib.crc32(bytes([10,0,0,1, 10,0,0,2, 6])) = 0x299e9283
        assert_eq!(crc32_12(ip("10.0.0.1"), ip("10.0.0.2"), 6), 0x283);
        // Static assignment: an all-ones mask gives the base VID.
        assert_eq!(
            signaling_vid(0x016, 0xfff, ip("10.0.0.1"), ip("10.0.0.2"), 6),
            0x016
        );
        // Fig. 4.5: mask 0xFFC, extern 20 → instances on VIDs 20..23.
        assert_eq!(
            signaling_vid(0x016, 0xffc, ip("198.18.0.1"), ip("198.19.0.1"), 17),
            0x014 | (0xf26 & 3)
        );
        assert_eq!(
            signaling_vid(0x016, 0xffc, ip("10.0.0.1"), ip("10.0.0.2"), 6),
            0x014 | 3
        );
        // Against the reference CRC on many tuples.
        let mut x = 0x1234_5678u32;
        for _ in 0..1000 {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let (s, d, pr) = (
                Ipv4Addr::from(x),
                Ipv4Addr::from(x.rotate_left(7)),
                (x >> 3) as u8,
            );
            let mut b = s.octets().to_vec();
            b.extend(d.octets());
            b.push(pr);
            let want = (crc32_reference(&b) & 0xfff) as u16;
            assert_eq!(crc32_12(s, d, pr), want);
            assert_eq!(
                signaling_vid(0xa00, 0xf00, s, d, pr),
                0xa00 | (want & 0x0ff)
            );
        }
    }

    fn ipv4_frame(tagged: bool) -> Vec<u8> {
        let mut f = vec![0u8; 64];
        f[0..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
        let mut off = 12;
        if tagged {
            f[12..16].copy_from_slice(&[0x81, 0x00, 0x00, 0x07]);
            off = 16;
        }
        f[off..off + 2].copy_from_slice(&[0x08, 0x00]);
        let ip = off + 2;
        f[ip] = 0x45;
        f[ip + 9] = 17;
        f[ip + 12..ip + 16].copy_from_slice(&[198, 18, 0, 1]);
        f[ip + 16..ip + 20].copy_from_slice(&[198, 19, 0, 1]);
        for (i, b) in f[ip + 20..].iter_mut().enumerate() {
            *b = i as u8;
        }
        f
    }

    #[test]
    fn every_stack_and_data_length_round_trips() {
        for tagged in [false, true] {
            for n in 0..=MAX_SNABB_DATA {
                let orig = ipv4_frame(tagged);
                let data: Vec<u8> = (0..n as u8).map(|i| i ^ 0x5a).collect();
                let mut p = Packet::from_slice(&orig);
                let vid = encap(&mut p, 0x016, 0xffc, &data).unwrap();
                let d = p.data();
                assert_eq!(&d[12..14], &[0x81, 0x00]);
                assert_eq!(u16::from_be_bytes([d[14], d[15]]), vid);
                let type_off = if tagged { 20 } else { 16 };
                if tagged {
                    assert_eq!(
                        &d[16..20],
                        &[0x81, 0x00, 0x00, 0x07],
                        "original tag kept (stack ③)"
                    );
                }
                if n > 0 {
                    assert_eq!(et(d, type_off), Some(ETHERTYPE_SNABB));
                    assert_eq!(et(d, type_off + 2), Some(0x0800));
                    assert_eq!(d[type_off + 4] as usize, n);
                    assert_eq!(p.len(), orig.len() + 4 + 3 + n);
                } else {
                    assert_eq!(et(d, type_off), Some(0x0800));
                }
                assert_eq!(decap(&mut p), Ok((vid, n)));
                assert_eq!(p.data(), &orig[..], "tagged={tagged} n={n}");
            }
        }
    }

    #[test]
    fn app_counts_instances_and_drops_what_is_not_ours() {
        let mut enc = ExternDispatch::new(Mode::Encap, 0x014, 0xffc, vec![1, 2, 3], 0);
        let mut dec = ExternDispatch::new(Mode::Decap, 0x014, 0xffc, vec![], 2);
        let (mut a, mut b, mut c, mut back) =
            (Link::new(16), Link::new(16), Link::new(16), Link::new(1));
        a.transmit(Packet::from_slice(&ipv4_frame(false)));
        a.transmit(Packet::from_slice(&[0u8; 60])); // not IPv4
        enc.push(
            &mut a,
            &mut Output {
                fwd: &mut b,
                back: &mut back,
            },
            0,
        );
        // A frame for another extern (VID 0x100) and an untagged one.
        let mut foreign = Packet::from_slice(&ipv4_frame(false));
        foreign.insert(12, &[0x81, 0x00, 0x01, 0x00]);
        b.transmit(foreign);
        b.transmit(Packet::from_slice(&ipv4_frame(false)));
        let mut bad = Packet::from_slice(&ipv4_frame(false));
        encap(&mut bad, 0x014, 0xffc, &[9; 4]);
        bad.data_mut()[20] = 0; // Snabb length 0
        b.transmit(bad);
        dec.push(
            &mut b,
            &mut Output {
                fwd: &mut c,
                back: &mut back,
            },
            0,
        );
        assert_eq!(c.nreadable(), 1);
        assert_eq!(c.receive().unwrap().data(), &ipv4_frame(false)[..]);
        assert_eq!(
            (enc.counters().encapsulated, enc.counters().not_ipv4),
            (1, 1)
        );
        let k = dec.counters();
        assert_eq!(
            (
                k.decapsulated,
                k.snabb_headers,
                k.foreign_extern,
                k.untagged,
                k.bad_header
            ),
            (1, 1, 1, 1, 1)
        );
        let inst = (0xf26 & 3) as usize;
        assert_eq!(k.per_instance[inst], 1);
        assert_eq!(k.other_instance, (inst != 2) as u64);
    }
}
