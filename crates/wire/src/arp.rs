//! ARP for IPv4 over Ethernet (RFC 826): the request a LoadGen port sends to find a
//! box's MAC, and the sender of a reply. Only what nflab asks and hears; nothing
//! here keeps a cache.

use std::net::Ipv4Addr;

use crate::ethernet::MacAddr;

/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// An ARP request frame: Ethernet header and the 28-byte body, padded to 60 bytes
/// (the minimum frame without FCS).
pub const REQUEST_LEN: usize = 60;

const OP_REQUEST: u16 = 1;
const OP_REPLY: u16 = 2;

/// Write into `buf` (at least [`REQUEST_LEN`] bytes) a broadcast request from
/// `sender` (`mac`, `ip`) for `target`; returns the frame's length.
pub fn write_request(buf: &mut [u8], mac: MacAddr, ip: Ipv4Addr, target: Ipv4Addr) -> usize {
    let f = &mut buf[..REQUEST_LEN];
    f.fill(0);
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&mac.0);
    f[12..14].copy_from_slice(&ETHERTYPE_ARP.to_be_bytes());
    // Hardware Ethernet (1), protocol IPv4, 6- and 4-byte addresses.
    f[14..16].copy_from_slice(&1u16.to_be_bytes());
    f[16..18].copy_from_slice(&0x0800u16.to_be_bytes());
    f[18] = 6;
    f[19] = 4;
    f[20..22].copy_from_slice(&OP_REQUEST.to_be_bytes());
    f[22..28].copy_from_slice(&mac.0);
    f[28..32].copy_from_slice(&ip.octets());
    // Target hardware address unknown (zeros).
    f[38..42].copy_from_slice(&target.octets());
    REQUEST_LEN
}

/// The sender of an ARP reply in `frame` (an untagged Ethernet frame): its IPv4
/// address and MAC; `None` for anything else.
pub fn reply_sender(frame: &[u8]) -> Option<(Ipv4Addr, MacAddr)> {
    let f = frame.get(..42)?;
    let be16 = |i: usize| u16::from_be_bytes([f[i], f[i + 1]]);
    if be16(12) != ETHERTYPE_ARP
        || be16(14) != 1
        || be16(16) != 0x0800
        || f[18] != 6
        || f[19] != 4
        || be16(20) != OP_REPLY
    {
        return None;
    }
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&f[22..28]);
    Some((Ipv4Addr::new(f[28], f[29], f[30], f[31]), MacAddr(mac)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_rfc_826_and_a_reply_names_its_sender() {
        let mac = MacAddr([2, 0, 0, 0, 0, 1]);
        let mut buf = [0xaa; 64];
        let n = write_request(
            &mut buf,
            mac,
            Ipv4Addr::new(198, 18, 0, 1),
            Ipv4Addr::new(198, 18, 0, 2),
        );
        assert_eq!(n, 60);
        // The bytes tcpdump shows for "who-has 198.18.0.2 tell 198.18.0.1".
        let want_body = [
            0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 198, 18, 0, 1, 0, 0, 0, 0, 0, 0, 198, 18, 0,
            2,
        ];
        assert_eq!(&buf[..6], &[0xff; 6]);
        assert_eq!(&buf[12..14], &[0x08, 0x06]);
        assert_eq!(&buf[14..42], &want_body);
        assert!(buf[42..60].iter().all(|b| *b == 0));
        // A request is not a reply; turned into one by the box, it names the box.
        assert_eq!(reply_sender(&buf[..n]), None);
        let box_mac = [2, 0, 0, 0, 1, 1];
        let mut reply = buf;
        reply[21] = 2;
        reply[22..28].copy_from_slice(&box_mac);
        reply[28..32].copy_from_slice(&[198, 18, 0, 2]);
        assert_eq!(
            reply_sender(&reply[..60]),
            Some((Ipv4Addr::new(198, 18, 0, 2), MacAddr(box_mac)))
        );
        assert_eq!(reply_sender(&reply[..41]), None);
        reply[16] = 0x86;
        assert_eq!(reply_sender(&reply[..60]), None);
    }
}
