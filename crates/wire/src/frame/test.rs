//! Tests of the high-level API: golden frames, build/parse round trips, checksums against a
//! naive reference, and the no-panic contract of the parser.

use super::*;
use proptest::prelude::*;
use std::net::Ipv6Addr;

const SEQ: u64 = 0x0102_0304_0506;
const TX_NS: u64 = 0x1122_3344_5566_7788;

fn golden_spec() -> ProbeSpec {
    ProbeSpec {
        src_mac: MacAddr([0x02, 0, 0, 0, 0, 0x01]),
        dst_mac: MacAddr([0x02, 0, 0, 0, 0, 0x02]),
        vlan: None,
        src_ip: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
        dst_ip: IpAddr::V4(Ipv4Addr::new(198, 19, 0, 1)),
        src_port: 0xc020,
        dst_port: 7,
        dscp: 46,
        ttl: 64,
        flow: 0x0102,
        frame_bytes: 64,
        mtu: 1500,
    }
}

// A 64-byte frame (60 B on the wire buffer + 4 B FCS), written out by hand.
//
// IPv4 header checksum by hand, 16-bit words with the checksum field as 0:
//   45b8 (ver 4, IHL 5, TOS = DSCP 46 << 2 = 0xb8)
// + 002e (total length 46 = 20 + 8 + 18)
// + 0000 (ID 0) + 4000 (DF) + 4011 (TTL 64, UDP) + 0000 (checksum)
// + c612 + 0001 (198.18.0.1) + c613 + 0001 (198.19.0.1)
// = 0x2_521e; fold: 0x521e + 0x2 = 0x5220; checksum = !0x5220 = 0xaddf.
static GOLDEN_V4: [u8; 60] = [
    // Ethernet: dst, src, EtherType IPv4
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, //
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01, //
    0x08, 0x00, //
    // IPv4
    0x45, 0xb8, 0x00, 0x2e, //
    0x00, 0x00, 0x40, 0x00, //
    0x40, 0x11, 0xad, 0xdf, //
    0xc6, 0x12, 0x00, 0x01, //
    0xc6, 0x13, 0x00, 0x01, //
    // UDP: 0xc020 -> 7, length 26, checksum 0 (none, legal over IPv4)
    0xc0, 0x20, 0x00, 0x07, 0x00, 0x1a, 0x00, 0x00, //
    // probe: magic, version, flow, seq (48 bits), tx_ns
    0xa7, 0x01, 0x01, 0x02, //
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, //
    0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
];

// The same probe with an 802.1Q tag (VID 100, PCP 5) in a 68-byte frame: the frame grows
// by the tag only (68 = 64 + 4), so the IP packet and its checksum (0xaddf) are unchanged.
static GOLDEN_V4_VLAN: [u8; 64] = [
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, //
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01, //
    0x81, 0x00, // TPID
    0xa0, 0x64, // PCP 5, DEI 0, VID 100 = 0b101_0_0000_0110_0100
    0x08, 0x00, //
    0x45, 0xb8, 0x00, 0x2e, //
    0x00, 0x00, 0x40, 0x00, //
    0x40, 0x11, 0xad, 0xdf, //
    0xc6, 0x12, 0x00, 0x01, //
    0xc6, 0x13, 0x00, 0x01, //
    0xc0, 0x20, 0x00, 0x07, 0x00, 0x1a, 0x00, 0x00, //
    0xa7, 0x01, 0x01, 0x02, //
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, //
    0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
];

fn golden_info(vlan: Option<VlanTag>) -> ProbeInfo {
    ProbeInfo {
        flow: 0x0102,
        seq: SEQ,
        tx_ns: TX_NS,
        vlan,
        is_ipv6: false,
    }
}

/// Reference internet checksum, written the plain way: big-endian words summed in a u64,
/// carries folded back, complemented. Deliberately not the crate's code.
fn naive_checksum(data: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    let mut i = 0;
    while i < data.len() {
        let hi = u64::from(data[i]);
        let lo = if i + 1 < data.len() {
            u64::from(data[i + 1])
        } else {
            0
        };
        sum += (hi << 8) | lo;
        i += 2;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

// ---------------------------------------------------------------------------------------
// Golden frames
// ---------------------------------------------------------------------------------------

#[test]
fn golden_v4_parses() {
    assert_eq!(parse_probe(&GOLDEN_V4), Ok(golden_info(None)));
}

#[test]
fn golden_v4_builds() {
    let t = ProbeTemplate::new(&golden_spec()).unwrap();
    assert_eq!((t.len(), t.frame_bytes()), (60, 64));
    assert!(!t.is_empty() && !t.is_ipv6());
    let mut out = [0x55u8; 70];
    assert_eq!(t.write(&mut out, SEQ, TX_NS), 60);
    assert_eq!(out[..60], GOLDEN_V4);
    assert!(
        out[60..].iter().all(|&b| b == 0x55),
        "write touched bytes past len()"
    );
    // The template itself is the golden frame with seq and tx_ns zero.
    let mut zeroed = GOLDEN_V4;
    zeroed[46..60].fill(0);
    assert_eq!(t.bytes(), &zeroed[..]);
}

#[test]
fn golden_v4_checksum_matches_reference() {
    let mut header = [0u8; 20];
    header.copy_from_slice(&GOLDEN_V4[14..34]);
    header[10..12].fill(0);
    assert_eq!(naive_checksum(&header), 0xaddf);
    assert_eq!(checksum::internet_checksum(&GOLDEN_V4[14..34]), 0);
}

#[test]
fn golden_v4_vlan_parses_and_builds() {
    let tag = VlanTag { vid: 100, pcp: 5 };
    assert_eq!(parse_probe(&GOLDEN_V4_VLAN), Ok(golden_info(Some(tag))));
    let spec = ProbeSpec {
        vlan: Some(tag),
        frame_bytes: 68,
        ..golden_spec()
    };
    let t = ProbeTemplate::new(&spec).unwrap();
    let mut out = [0u8; 64];
    assert_eq!(t.write(&mut out, SEQ, TX_NS), 64);
    assert_eq!(out, GOLDEN_V4_VLAN);
}

#[test]
fn golden_payload() {
    let t = ProbeTemplate::new(&golden_spec()).unwrap();
    assert_eq!(t.payload().len(), 18);
    assert_eq!(t.payload_offset(), 42);
    let mut out = [0u8; 18];
    assert_eq!(t.write_payload(&mut out, SEQ, TX_NS), 18);
    assert_eq!(out, GOLDEN_V4[42..]);
    let info = parse_probe_payload(&out).unwrap();
    assert_eq!(info, golden_info(None));
}

/// Every single-byte change of the IPv4 header of the golden frame, all 20 positions times
/// all 255 non-zero XOR masks, is caught as a bad checksum or a malformed header.
#[test]
fn golden_v4_every_header_byte_flip_is_caught() {
    for at in 14..34 {
        for mask in 1..=255u8 {
            let mut f = GOLDEN_V4;
            f[at] ^= mask;
            let r = parse_probe(&f);
            assert!(
                matches!(r, Err(WireError::BadChecksum | WireError::Malformed)),
                "byte {at} ^ {mask:#04x}: {r:?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Bounds and validation
// ---------------------------------------------------------------------------------------

fn v6_spec() -> ProbeSpec {
    ProbeSpec {
        src_ip: IpAddr::V6("2001:2::1".parse().unwrap()),
        dst_ip: IpAddr::V6("2001:2:0:1::1".parse().unwrap()),
        frame_bytes: 84,
        ..golden_spec()
    }
}

#[test]
fn min_and_max_frame_bytes() {
    let tag = Some(VlanTag { vid: 1, pcp: 0 });
    let v4 = golden_spec();
    let v6 = v6_spec();
    assert_eq!(v4.min_frame_bytes(), 64);
    assert_eq!(ProbeSpec { vlan: tag, ..v4 }.min_frame_bytes(), 68);
    assert_eq!(v6.min_frame_bytes(), 84);
    assert_eq!(ProbeSpec { vlan: tag, ..v6 }.min_frame_bytes(), 88);
    assert_eq!(v4.max_frame_bytes(), 1518);
    assert_eq!(ProbeSpec { vlan: tag, ..v4 }.max_frame_bytes(), 1522);
    assert_eq!(ProbeSpec { mtu: 9000, ..v6 }.max_frame_bytes(), 9018);
    // The IP length fields cap the MTU.
    assert_eq!(
        ProbeSpec { mtu: 1 << 20, ..v4 }.max_frame_bytes(),
        65535 + 18
    );
    assert_eq!(
        ProbeSpec { mtu: 1 << 20, ..v6 }.max_frame_bytes(),
        65575 + 18
    );
    assert_eq!(ProbeSpec::default().frame_bytes, 64);
    assert_eq!(ProbeSpec::default().mtu, 1500);
}

#[test]
fn frame_too_small() {
    let tag = Some(VlanTag { vid: 1, pcp: 0 });
    let cases = [
        (golden_spec(), 63, 64, false, false),
        (
            ProbeSpec {
                vlan: tag,
                ..golden_spec()
            },
            67,
            68,
            true,
            false,
        ),
        (v6_spec(), 83, 84, false, true),
        (
            ProbeSpec {
                vlan: tag,
                ..v6_spec()
            },
            87,
            88,
            true,
            true,
        ),
        (golden_spec(), 0, 64, false, false),
    ];
    for (spec, frame_bytes, min_bytes, vlan, ipv6) in cases {
        let spec = ProbeSpec {
            frame_bytes,
            ..spec
        };
        assert_eq!(
            ProbeTemplate::new(&spec).unwrap_err(),
            BuildError::FrameTooSmall {
                frame_bytes,
                min_bytes,
                vlan,
                ipv6
            }
        );
        let ok = ProbeSpec {
            frame_bytes: min_bytes,
            ..spec
        };
        assert_eq!(ProbeTemplate::new(&ok).unwrap().len(), min_bytes - 4);
    }
    let err = ProbeTemplate::new(&ProbeSpec {
        frame_bytes: 87,
        vlan: tag,
        ..v6_spec()
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "frame size 87 B is below the minimum of 88 B for this header stack \
         (Ethernet + 802.1Q + IPv6 + UDP + 18 B probe + 4 B FCS)"
    );
    let err = ProbeTemplate::new(&ProbeSpec {
        frame_bytes: 60,
        ..golden_spec()
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "frame size 60 B is below the minimum of 64 B for this header stack \
         (Ethernet + IPv4 + UDP + 18 B probe + 4 B FCS)"
    );
}

#[test]
fn frame_too_large() {
    let tag = Some(VlanTag { vid: 1, pcp: 0 });
    let cases = [
        (golden_spec(), 1500, 1518, false),
        (
            ProbeSpec {
                vlan: tag,
                ..golden_spec()
            },
            1500,
            1522,
            true,
        ),
        (v6_spec(), 9000, 9018, false),
        (golden_spec(), 1 << 20, 65553, false),
    ];
    for (spec, mtu, max_bytes, vlan) in cases {
        let ok = ProbeSpec {
            mtu,
            frame_bytes: max_bytes,
            ..spec
        };
        let t = ProbeTemplate::new(&ok).unwrap();
        assert_eq!(t.len(), max_bytes - 4);
        // The largest frame parses back, too.
        let mut out = vec![0u8; t.len()];
        t.write(&mut out, 3, 4);
        assert_eq!(parse_probe(&out).map(|i| (i.seq, i.tx_ns)), Ok((3, 4)));
        let too_big = ProbeSpec {
            frame_bytes: max_bytes + 1,
            ..ok
        };
        assert_eq!(
            ProbeTemplate::new(&too_big).unwrap_err(),
            BuildError::FrameTooLarge {
                frame_bytes: max_bytes + 1,
                max_bytes,
                mtu,
                vlan
            }
        );
    }
    let err = ProbeTemplate::new(&ProbeSpec {
        frame_bytes: 1519,
        ..golden_spec()
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "frame size 1519 B is above the maximum of 1518 B for MTU 1500 \
         (MTU + Ethernet header + 4 B FCS)"
    );
}

#[test]
fn invalid_vlan_dscp_and_families() {
    let with_tag = |vid, pcp| ProbeSpec {
        vlan: Some(VlanTag { vid, pcp }),
        frame_bytes: 68,
        ..golden_spec()
    };
    assert!(ProbeTemplate::new(&with_tag(4094, 7)).is_ok());
    assert!(ProbeTemplate::new(&with_tag(0, 0)).is_ok());
    assert_eq!(
        ProbeTemplate::new(&with_tag(4095, 0)).unwrap_err(),
        BuildError::InvalidVlan { vid: 4095, pcp: 0 }
    );
    assert_eq!(
        ProbeTemplate::new(&with_tag(10, 8)).unwrap_err(),
        BuildError::InvalidVlan { vid: 10, pcp: 8 }
    );
    assert!(ProbeTemplate::new(&ProbeSpec {
        dscp: 63,
        ..golden_spec()
    })
    .is_ok());
    let err = ProbeTemplate::new(&ProbeSpec {
        dscp: 64,
        ..golden_spec()
    })
    .unwrap_err();
    assert_eq!(err, BuildError::InvalidDscp { dscp: 64 });
    assert_eq!(
        err.to_string(),
        "invalid DSCP 64: a DSCP is a 6-bit code point, 0 to 63"
    );
    let mixed = ProbeSpec {
        dst_ip: v6_spec().dst_ip,
        ..golden_spec()
    };
    assert_eq!(
        ProbeTemplate::new(&mixed).unwrap_err(),
        BuildError::AddressFamilyMismatch {
            src_ip: mixed.src_ip,
            dst_ip: mixed.dst_ip
        }
    );
}

// ---------------------------------------------------------------------------------------
// Parse errors on specific frames
// ---------------------------------------------------------------------------------------

#[test]
fn parse_rejects_what_it_does_not_handle() {
    // ARP EtherType.
    let mut f = GOLDEN_V4;
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(parse_probe(&f), Err(WireError::Unsupported));
    // QinQ outer tag.
    let mut f = GOLDEN_V4_VLAN;
    f[12..14].copy_from_slice(&[0x88, 0xa8]);
    assert_eq!(parse_probe(&f), Err(WireError::Unsupported));
    // TCP instead of UDP, with a valid header checksum.
    let mut f = GOLDEN_V4;
    let mut ip = ipv4::Packet::new_unchecked(&mut f[14..]);
    ip.set_protocol(6);
    ip.fill_checksum();
    assert_eq!(parse_probe(&f), Err(WireError::Unsupported));
    // Not a probe: wrong magic.
    let mut f = GOLDEN_V4;
    f[42] = 0x00;
    assert_eq!(parse_probe(&f), Err(WireError::NotProbe));
    // Wrong probe version.
    let mut f = GOLDEN_V4;
    f[43] = 0x02;
    assert_eq!(parse_probe(&f), Err(WireError::Unsupported));
    // A non-zero but wrong UDP checksum over IPv4.
    let mut f = GOLDEN_V4;
    f[40..42].copy_from_slice(&[0x12, 0x34]);
    assert_eq!(parse_probe(&f), Err(WireError::BadChecksum));
    // Ethernet padding after the IP packet is ignored.
    let mut padded = [0u8; 80];
    padded[..60].copy_from_slice(&GOLDEN_V4);
    assert_eq!(parse_probe(&padded), Ok(golden_info(None)));
}

#[test]
fn parse_v6_checks_udp_checksum() {
    let t = ProbeTemplate::new(&v6_spec()).unwrap();
    let mut f = vec![0u8; t.len()];
    t.write(&mut f, 1, 2);
    assert!(parse_probe(&f).unwrap().is_ipv6);
    let csum_at = 14 + 40 + 6;
    let mut bad = f.clone();
    bad[csum_at] ^= 0x01;
    assert_eq!(parse_probe(&bad), Err(WireError::BadChecksum));
    // A zero UDP checksum is not allowed over IPv6.
    let mut zero = f.clone();
    zero[csum_at..csum_at + 2].fill(0);
    assert_eq!(parse_probe(&zero), Err(WireError::BadChecksum));
    // The pseudo-header covers the addresses: a changed source address is caught.
    let mut moved = f;
    moved[14 + 8 + 15] ^= 0x01;
    assert_eq!(parse_probe(&moved), Err(WireError::BadChecksum));
}

/// A UDP checksum that computes to 0 must be sent as 0xFFFF (RFC 768), by `write` and by the
/// incremental update in `patch` alike. The last 16-bit word of `seq` runs through all
/// values, so one of them makes the sum hit that case.
#[test]
fn udp_checksum_zero_is_sent_as_ffff() {
    let t = ProbeTemplate::new(&v6_spec()).unwrap();
    let csum_at = 14 + 40 + 6;
    let mut f = vec![0u8; t.len()];
    let mut found = None;
    for seq in 0..=0xffffu64 {
        t.write(&mut f, seq, 0);
        if f[csum_at..csum_at + 2] == [0xff, 0xff] {
            found = Some(seq);
            break;
        }
    }
    let seq = found.expect("some seq gives a computed checksum of 0");
    let mut zeroed = f.clone();
    zeroed[csum_at..csum_at + 2].fill(0);
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&zeroed[14 + 8..14 + 40]); // source and destination
    pseudo.extend_from_slice(&((f.len() - 54) as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 17]);
    pseudo.extend_from_slice(&zeroed[54..]);
    assert_eq!(naive_checksum(&pseudo), 0);
    assert_eq!(parse_probe(&f).map(|i| i.seq), Ok(seq));
    let mut g = vec![0u8; t.len()];
    t.write(&mut g, seq + 12345, 99);
    t.patch(&mut g, seq, 0);
    assert_eq!(g, f);
}

#[test]
fn parse_probe_payload_errors() {
    assert_eq!(parse_probe_payload(&[]), Err(WireError::Truncated));
    assert_eq!(
        parse_probe_payload(&GOLDEN_V4[42..59]),
        Err(WireError::Truncated)
    );
    assert_eq!(
        parse_probe_payload(&GOLDEN_V4[..]),
        Err(WireError::NotProbe)
    );
}

// ---------------------------------------------------------------------------------------
// Property tests
// ---------------------------------------------------------------------------------------

fn arb_vlan() -> impl Strategy<Value = Option<VlanTag>> {
    proptest::option::of((0..=4094u16, 0..=7u8).prop_map(|(vid, pcp)| VlanTag { vid, pcp }))
}

fn arb_ips() -> impl Strategy<Value = (IpAddr, IpAddr)> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<[u8; 4]>())
            .prop_map(|(s, d)| (IpAddr::V4(s.into()), IpAddr::V4(d.into()))),
        (any::<[u8; 16]>(), any::<[u8; 16]>())
            .prop_map(|(s, d)| (IpAddr::V6(Ipv6Addr::from(s)), IpAddr::V6(Ipv6Addr::from(d)))),
    ]
}

/// A valid spec with a frame size anywhere between its minimum and its maximum.
fn arb_spec() -> impl Strategy<Value = ProbeSpec> {
    (
        any::<[u8; 6]>(),
        any::<[u8; 6]>(),
        arb_vlan(),
        arb_ips(),
        any::<(u16, u16)>(),
        0..=63u8,
        any::<(u8, u16)>(),
        prop_oneof![Just(1500usize), 1280..=9000usize],
    )
        .prop_map(
            |(src, dst, vlan, (src_ip, dst_ip), (src_port, dst_port), dscp, (ttl, flow), mtu)| {
                ProbeSpec {
                    src_mac: MacAddr(src),
                    dst_mac: MacAddr(dst),
                    vlan,
                    src_ip,
                    dst_ip,
                    src_port,
                    dst_port,
                    dscp,
                    ttl,
                    flow,
                    frame_bytes: 0,
                    mtu,
                }
            },
        )
        .prop_flat_map(|spec| {
            let sizes = prop_oneof![
                Just(spec.min_frame_bytes()),
                Just(spec.max_frame_bytes()),
                spec.min_frame_bytes()..=spec.max_frame_bytes(),
            ];
            (Just(spec), sizes)
        })
        .prop_map(|(spec, frame_bytes)| ProbeSpec {
            frame_bytes,
            ..spec
        })
}

fn arb_seq() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), Just((1u64 << 48) - 1), 0..(1u64 << 48)]
}

fn written(t: &ProbeTemplate, seq: u64, tx_ns: u64) -> Vec<u8> {
    let mut out = vec![0u8; t.len()];
    assert_eq!(t.write(&mut out, seq, tx_ns), t.len());
    out
}

/// Byte offset of the IP header, computed from the spec, independently of the template.
fn ip_offset(spec: &ProbeSpec) -> usize {
    if spec.vlan.is_some() {
        18
    } else {
        14
    }
}

proptest! {
    #[test]
    fn build_then_parse_round_trips(spec in arb_spec(), seq in arb_seq(), tx_ns in any::<u64>()) {
        let t = ProbeTemplate::new(&spec).unwrap();
        prop_assert_eq!(t.frame_bytes(), spec.frame_bytes);
        let f = written(&t, seq, tx_ns);
        prop_assert_eq!(f.len(), spec.frame_bytes - FCS_BYTES);
        let info = parse_probe(&f);
        prop_assert_eq!(info, Ok(ProbeInfo {
            flow: spec.flow,
            seq,
            tx_ns,
            vlan: spec.vlan,
            is_ipv6: spec.src_ip.is_ipv6(),
        }));

        // The headers carry the spec's fields.
        let eth = ethernet::Packet::new_checked(&f[..]).unwrap();
        prop_assert_eq!((eth.src_addr(), eth.dst_addr()), (spec.src_mac, spec.dst_mac));
        let l3 = &f[ip_offset(&spec)..];
        let ip_header = if spec.src_ip.is_ipv6() {
            let ip = ipv6::Packet::new_checked(l3).unwrap();
            prop_assert_eq!(IpAddr::V6(ip.src_addr()), spec.src_ip);
            prop_assert_eq!(IpAddr::V6(ip.dst_addr()), spec.dst_ip);
            prop_assert_eq!((ip.dscp(), ip.hop_limit(), ip.flow_label()), (spec.dscp, spec.ttl, 0));
            prop_assert_eq!(usize::from(ip.payload_len()), l3.len() - 40);
            40
        } else {
            let ip = ipv4::Packet::new_checked(l3).unwrap();
            prop_assert_eq!(IpAddr::V4(ip.src_addr()), spec.src_ip);
            prop_assert_eq!(IpAddr::V4(ip.dst_addr()), spec.dst_ip);
            prop_assert_eq!((ip.dscp(), ip.ttl(), ip.ident()), (spec.dscp, spec.ttl, 0));
            prop_assert!(ip.dont_frag());
            prop_assert_eq!(usize::from(ip.total_len()), l3.len());
            20
        };
        let udp = udp::Packet::new_checked(&l3[ip_header..]).unwrap();
        prop_assert_eq!((udp.src_port(), udp.dst_port()), (spec.src_port, spec.dst_port));
        prop_assert_eq!(usize::from(udp.len()), l3.len() - ip_header);
        // The payload API agrees with the frame, and the padding is zero.
        let payload = &l3[ip_header + 8..];
        prop_assert_eq!(t.payload().len(), payload.len());
        let mut p = vec![0xeeu8; payload.len()];
        prop_assert_eq!(t.write_payload(&mut p, seq, tx_ns), payload.len());
        prop_assert_eq!(&p[..], payload);
        prop_assert!(payload[18..].iter().all(|&b| b == 0));
        prop_assert_eq!(parse_probe_payload(&p).map(|i| (i.flow, i.seq, i.tx_ns)), Ok((spec.flow, seq, tx_ns)));
    }

    #[test]
    fn seq_is_written_mod_2_48(spec in arb_spec(), seq in any::<u64>(), tx_ns in any::<u64>()) {
        let t = ProbeTemplate::new(&spec).unwrap();
        let f = written(&t, seq, tx_ns);
        prop_assert_eq!(parse_probe(&f).map(|i| i.seq), Ok(seq % (1u64 << 48)));
    }

    #[test]
    fn patch_equals_fresh_write(
        spec in arb_spec(),
        (seq_a, seq_b) in (arb_seq(), arb_seq()),
        (tx_a, tx_b) in any::<(u64, u64)>(),
    ) {
        let t = ProbeTemplate::new(&spec).unwrap();
        let mut f = written(&t, seq_a, tx_a);
        t.patch(&mut f, seq_b, tx_b);
        prop_assert_eq!(&f, &written(&t, seq_b, tx_b));
        // And back again: patching is not a one-way street from the zero template.
        t.patch(&mut f, seq_a, tx_a);
        prop_assert_eq!(&f, &written(&t, seq_a, tx_a));
    }

    #[test]
    fn checksums_match_naive_reference(spec in arb_spec(), seq in arb_seq(), tx_ns in any::<u64>()) {
        let t = ProbeTemplate::new(&spec).unwrap();
        let f = written(&t, seq, tx_ns);
        let l3 = &f[ip_offset(&spec)..];
        match (spec.src_ip, spec.dst_ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) => {
                let mut header = l3[..20].to_vec();
                let stored = u16::from_be_bytes([header[10], header[11]]);
                header[10..12].fill(0);
                prop_assert_eq!(stored, naive_checksum(&header));
                // No UDP checksum over IPv4.
                prop_assert_eq!(&l3[26..28], &[0u8, 0][..]);
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                let datagram = &l3[40..];
                let stored = u16::from_be_bytes([datagram[6], datagram[7]]);
                // Pseudo-header (RFC 8200 §8.1), then the datagram with its checksum zeroed.
                let mut data = Vec::new();
                data.extend_from_slice(&src.octets());
                data.extend_from_slice(&dst.octets());
                data.extend_from_slice(&(datagram.len() as u32).to_be_bytes());
                data.extend_from_slice(&[0, 0, 0, 17]);
                data.extend_from_slice(datagram);
                let at = 40 + 6;
                data[at..at + 2].fill(0);
                let expect = match naive_checksum(&data) { 0 => 0xffff, c => c };
                prop_assert_eq!(stored, expect);
            }
            _ => unreachable!(),
        }
    }

    #[test]
    fn parse_arbitrary_bytes_is_an_error(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        prop_assert!(parse_probe(&data).is_err());
        let r = parse_probe_payload(&data);
        if data.len() < 18 || data[0] != 0xa7 || data[1] != 1 {
            prop_assert!(r.is_err());
        }
    }

    #[test]
    fn parse_arbitrary_headers_never_panics(
        ethertype in prop_oneof![Just([0x08u8, 0x00]), Just([0x86, 0xdd]), Just([0x81, 0x00]), any::<[u8; 2]>()],
        rest in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        // Plausible EtherTypes so the fuzzing reaches the IP and UDP parsers.
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ethertype);
        f.extend_from_slice(&rest);
        let _ = parse_probe(&f);
    }

    #[test]
    fn parse_mutated_frames_never_panics(
        spec in arb_spec(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let t = ProbeTemplate::new(&spec).unwrap();
        let mut f = written(&t, 7, 9);
        for (at, value) in edits {
            let i = at.index(f.len());
            f[i] = value;
        }
        let _ = parse_probe(&f);
    }

    #[test]
    fn every_truncation_is_truncated(spec in arb_spec(), seq in arb_seq(), tx_ns in any::<u64>()) {
        let spec = ProbeSpec { frame_bytes: spec.frame_bytes.min(spec.min_frame_bytes() + 64), ..spec };
        let t = ProbeTemplate::new(&spec).unwrap();
        let f = written(&t, seq, tx_ns);
        for n in 0..f.len() {
            prop_assert_eq!(parse_probe(&f[..n]), Err(WireError::Truncated), "cut at {}", n);
        }
        prop_assert!(parse_probe(&f).is_ok());
    }

    #[test]
    fn ipv4_header_byte_flip_is_caught(
        spec in arb_spec(),
        at in 0..20usize,
        mask in 1..=255u8,
    ) {
        let spec = ProbeSpec {
            src_ip: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
            dst_ip: IpAddr::V4(Ipv4Addr::new(198, 19, 0, 1)),
            frame_bytes: spec.frame_bytes.min(1500),
            ..spec
        };
        let t = ProbeTemplate::new(&spec).unwrap();
        let mut f = written(&t, 1, 2);
        f[ip_offset(&spec) + at] ^= mask;
        let r = parse_probe(&f);
        prop_assert!(matches!(r, Err(WireError::BadChecksum | WireError::Malformed)), "{:?}", r);
    }

    #[test]
    fn mac_display_parse_round_trip(b in any::<[u8; 6]>()) {
        let mac = MacAddr(b);
        prop_assert_eq!(mac.to_string().parse::<MacAddr>(), Ok(mac));
        prop_assert_eq!(mac.to_string().to_uppercase().parse::<MacAddr>(), Ok(mac));
    }
}
