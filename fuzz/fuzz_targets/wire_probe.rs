//! `nflab_wire::parse_probe`, what the recorder runs on every received
//! frame: never panics on any frame; a frame it accepts, rebuilt with
//! `ProbeTemplate` from the fields its layers carry, parses to the same
//! `ProbeInfo`.
#![no_main]

use std::net::IpAddr;

use libfuzzer_sys::fuzz_target;
use nflab_wire::{
    ethernet, ipv4, ipv6, parse_probe, udp, vlan, ProbeSpec, ProbeTemplate, VlanTag,
    PROBE_HEADER_BYTES,
};

fuzz_target!(|frame: &[u8]| {
    let Ok(info) = parse_probe(frame) else {
        return;
    };
    assert!(info.seq < 1 << 48, "seq {} has more than 48 bits", info.seq);

    // The same frame, layer by layer with the per-protocol parsers.
    let eth = ethernet::Packet::new_checked(frame).expect("parse_probe accepted it");
    let eth_repr = ethernet::Repr::parse(&eth).expect("parse_probe accepted it");
    let mut l3 = eth.payload();
    let mut tag = None;
    if eth_repr.ethertype == ethernet::EtherType::VLAN {
        let v = vlan::Packet::new_checked(l3).expect("parse_probe accepted the tag");
        let r = vlan::Repr::parse(&v).expect("parse_probe accepted the tag");
        tag = Some(VlanTag {
            vid: r.vid,
            pcp: r.pcp,
        });
        l3 = v.payload();
    }
    assert_eq!(info.vlan, tag, "parse_probe reports another VLAN tag");
    let (src_ip, dst_ip, dscp, ttl, l4): (IpAddr, IpAddr, u8, u8, &[u8]) = if info.is_ipv6 {
        let ip = ipv6::Packet::new_unchecked(l3);
        let r = ipv6::Repr::parse(&ip).expect("parse_probe accepted IPv6");
        (
            r.src_addr.into(),
            r.dst_addr.into(),
            r.dscp,
            r.hop_limit,
            ip.payload(),
        )
    } else {
        let ip = ipv4::Packet::new_unchecked(l3);
        let r = ipv4::Repr::parse(&ip).expect("parse_probe accepted IPv4");
        (
            r.src_addr.into(),
            r.dst_addr.into(),
            r.dscp,
            r.ttl,
            ip.payload(),
        )
    };
    let dgram = udp::Packet::new_unchecked(l4);
    let u = udp::Repr::parse(&dgram, src_ip, dst_ip).expect("parse_probe accepted UDP");

    // Rebuilt from those fields by the generator's builder: the same probe.
    let ip_header = if info.is_ipv6 { 40 } else { 20 };
    let vlan_bytes = if tag.is_some() { 4 } else { 0 };
    let frame_bytes =
        (14 + vlan_bytes + ip_header + 8 + PROBE_HEADER_BYTES + 4).max(64 + vlan_bytes);
    let spec = ProbeSpec {
        src_mac: eth_repr.src_addr,
        dst_mac: eth_repr.dst_addr,
        vlan: tag.filter(|t| t.vid <= vlan::MAX_VID),
        src_ip,
        dst_ip,
        src_port: u.src_port,
        dst_port: u.dst_port,
        dscp,
        ttl,
        flow: info.flow,
        frame_bytes,
        mtu: nflab_wire::DEFAULT_MTU,
    };
    if spec.vlan != tag {
        return; // VID 4095 is reported but never built.
    }
    let template = match ProbeTemplate::new(&spec) {
        Ok(t) => t,
        Err(e) => panic!("cannot rebuild an accepted probe: {e} ({spec:?})"),
    };
    let mut out = vec![0u8; template.len()];
    template.write(&mut out, info.seq, info.tx_ns);
    assert_eq!(
        parse_probe(&out),
        Ok(info),
        "a rebuilt probe parses differently"
    );
});
