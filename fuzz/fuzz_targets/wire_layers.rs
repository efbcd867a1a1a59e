//! The per-protocol parsers of `nflab-wire` (`new_checked` and `Repr::parse`
//! of Ethernet, 802.1Q, IPv4, IPv6, UDP and the probe header). The first
//! byte picks the layer, the rest is the buffer. Nothing panics; a parsed
//! header emitted into a fresh buffer (with the same payload) parses back to
//! the same `Repr`.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use nflab_wire::{ethernet, ipv4, ipv6, probe, udp, vlan};

fuzz_target!(|data: &[u8]| {
    let Some((&layer, buf)) = data.split_first() else {
        return;
    };
    match layer % 7 {
        0 => ethernet_round_trip(buf),
        1 => vlan_round_trip(buf),
        2 => ipv4_round_trip(buf),
        3 => ipv6_round_trip(buf),
        4 => udp_round_trip(
            buf,
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(198, 19, 0, 1)),
        ),
        5 => udp_round_trip(
            buf,
            IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1)),
            IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 1)),
        ),
        _ => probe_round_trip(buf),
    }
});

fn ethernet_round_trip(buf: &[u8]) {
    let Ok(p) = ethernet::Packet::new_checked(buf) else {
        assert!(ethernet::Repr::parse(&ethernet::Packet::new_unchecked(buf)).is_err());
        return;
    };
    let repr = ethernet::Repr::parse(&p).expect("a checked Ethernet header parses");
    let mut out = buf.to_vec();
    repr.emit(&mut ethernet::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, buf, "Ethernet emit changed the header");
}

fn vlan_round_trip(buf: &[u8]) {
    let Ok(p) = vlan::Packet::new_checked(buf) else {
        assert!(vlan::Repr::parse(&vlan::Packet::new_unchecked(buf)).is_err());
        return;
    };
    let repr = vlan::Repr::parse(&p).expect("a checked tag parses");
    let mut out = buf.to_vec();
    repr.emit(&mut vlan::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, buf, "802.1Q emit changed the tag");
}

fn ipv4_round_trip(buf: &[u8]) {
    let unchecked = ipv4::Packet::new_unchecked(buf);
    let parsed = ipv4::Repr::parse(&unchecked);
    if ipv4::Packet::new_checked(buf).is_err() {
        assert!(
            parsed.is_err(),
            "Repr::parse accepted what new_checked refused"
        );
    }
    let Ok(repr) = parsed else { return };
    let payload = unchecked.payload();
    assert_eq!(payload.len(), repr.payload_len);
    let mut out = vec![0u8; repr.buffer_len() + repr.payload_len];
    let mut p = ipv4::Packet::new_unchecked(&mut out[..]);
    repr.emit(&mut p);
    p.payload_mut().copy_from_slice(payload);
    let again = ipv4::Repr::parse(&ipv4::Packet::new_unchecked(&out[..]))
        .expect("an emitted IPv4 header parses");
    assert_eq!(again, repr);
}

fn ipv6_round_trip(buf: &[u8]) {
    let unchecked = ipv6::Packet::new_unchecked(buf);
    let parsed = ipv6::Repr::parse(&unchecked);
    if ipv6::Packet::new_checked(buf).is_err() {
        assert!(
            parsed.is_err(),
            "Repr::parse accepted what new_checked refused"
        );
    }
    let Ok(repr) = parsed else { return };
    let mut out = vec![0u8; repr.buffer_len() + repr.payload_len];
    let mut p = ipv6::Packet::new_unchecked(&mut out[..]);
    repr.emit(&mut p);
    p.payload_mut()
        .copy_from_slice(&unchecked.payload()[..repr.payload_len]);
    let again = ipv6::Repr::parse(&ipv6::Packet::new_unchecked(&out[..]))
        .expect("an emitted IPv6 header parses");
    assert_eq!(again, repr);
}

fn udp_round_trip(buf: &[u8], src: IpAddr, dst: IpAddr) {
    let unchecked = udp::Packet::new_unchecked(buf);
    let parsed = udp::Repr::parse(&unchecked, src, dst);
    if udp::Packet::new_checked(buf).is_err() {
        assert!(
            parsed.is_err(),
            "Repr::parse accepted what new_checked refused"
        );
    }
    let Ok(repr) = parsed else { return };
    let mut out = vec![0u8; repr.buffer_len() + repr.payload_len];
    let mut p = udp::Packet::new_unchecked(&mut out[..]);
    repr.emit(&mut p);
    p.payload_mut()
        .copy_from_slice(&unchecked.payload()[..repr.payload_len]);
    p.fill_checksum(src, dst);
    let again = udp::Repr::parse(&udp::Packet::new_unchecked(&out[..]), src, dst)
        .expect("an emitted UDP datagram with its checksum parses");
    assert_eq!(again, repr);
}

fn probe_round_trip(buf: &[u8]) {
    let parsed = probe::Repr::parse(&probe::Packet::new_unchecked(buf));
    if probe::Packet::new_checked(buf).is_err() {
        assert!(
            parsed.is_err(),
            "Repr::parse accepted what new_checked refused"
        );
    }
    let Ok(repr) = parsed else { return };
    assert!(repr.seq < 1 << 48, "seq {} has more than 48 bits", repr.seq);
    let mut out = buf.to_vec();
    repr.emit(&mut probe::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, buf, "probe emit changed the header");
    assert_eq!(
        nflab_wire::parse_probe_payload(buf).map(|i| (i.flow, i.seq, i.tx_ns)),
        Ok((repr.flow, repr.seq, repr.tx_ns))
    );
}
