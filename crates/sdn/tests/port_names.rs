//! Regression (found by the `openflow` fuzz target): a port name is 16
//! bytes on the wire that need not be UTF-8 nor end in a NUL, and every
//! PORT_STATUS, port description and 1.0 features reply must come back
//! from decode and encode byte for byte — through the proxy's 1.0 → 1.3
//! conversion too. With the name a lossy `String` each case here failed.

use nflab_sdn::of10::{self, Features10, Message10, PhyPort};
use nflab_sdn::of13::message::{Body, Message, PortStatus};
use nflab_sdn::of13::multipart::{mp, Port};
use nflab_sdn::of13::PortName;
use nflab_sdn::proxy::switch10;

/// 16 bytes that are not UTF-8 (and contain no NUL).
const NOT_UTF8: [u8; 16] = [
    0xff, 0xfe, 0xc3, 0x28, 0xa0, 0xa1, 0xe2, 0x28, 0xa1, 0xf0, 0x28, 0x8c, 0xbc, 0x80, 0x81, 0xfd,
];
/// Exactly 16 ASCII bytes, no NUL.
const FULL_ASCII: &[u8; 16] = b"veth-0123456789a";

fn port13(no: u32, name: [u8; 16]) -> Port {
    Port {
        port_no: no,
        hw_addr: [2, 0x4e, 0x46, 0, 1, no as u8],
        name: PortName(name),
        config: 0,
        state: 0,
        curr: 0x2c0,
        advertised: 0,
        supported: 0,
        peer: 0,
        curr_speed: 10_000_000,
        max_speed: 0,
    }
}

fn port10(no: u16, name: [u8; 16]) -> PhyPort {
    PhyPort {
        port_no: no,
        hw_addr: [2, 0x4e, 0x46, 0, 1, no as u8],
        name: PortName(name),
        config: 0,
        state: 0,
        curr: 0x2c0,
        advertised: 0,
        supported: 0,
        peer: 0,
    }
}

/// Bytes that decode to a message which encodes to the same bytes again.
fn byte_exact_13(bytes: &[u8]) -> Message {
    let m = Message::decode(bytes).unwrap();
    assert_eq!(m.encode(), bytes, "1.3 bytes changed in a round trip");
    m
}

fn byte_exact_10(bytes: &[u8]) -> Message10 {
    let m = Message10::decode(bytes).unwrap();
    assert_eq!(m.encode(), bytes, "1.0 bytes changed in a round trip");
    m
}

#[test]
fn a_1_3_port_status_and_port_description_keep_every_name_byte() {
    for name in [NOT_UTF8, *FULL_ASCII] {
        let wire = Message::new(
            0,
            Body::PortStatus(PortStatus {
                reason: 2,
                port: port13(3, name),
            }),
        )
        .encode();
        // The name is bytes 16..32 of the port, which starts after 8 + 8 bytes.
        assert_eq!(&wire[16 + 16..16 + 32], &name);
        let Body::PortStatus(ps) = byte_exact_13(&wire).body else {
            panic!("not a port status")
        };
        assert_eq!(ps.port.name.bytes(), &name);
    }
    let mut body = Vec::new();
    port13(1, NOT_UTF8).encode(&mut body);
    port13(2, *FULL_ASCII).encode(&mut body);
    let wire = Message::new(7, Body::MultipartReply(mp::PORT_DESC, 0, body.clone())).encode();
    byte_exact_13(&wire);
    let ports = Port::decode_all(&body).unwrap();
    let mut again = Vec::new();
    for p in &ports {
        p.encode(&mut again);
    }
    assert_eq!(again, body, "port descriptions changed bytes");
    // For people: the 16 ASCII bytes are the whole name; the others lossy.
    assert_eq!(ports[1].name.to_string(), "veth-0123456789a");
    assert!(ports[0].name.to_string().contains('\u{fffd}'));
}

#[test]
fn a_1_0_port_keeps_its_name_bytes_and_so_does_its_1_3_form() {
    let features = Message10::new(
        3,
        of10::Body::FeaturesReply(Features10 {
            datapath_id: 0xc2,
            n_buffers: 0,
            n_tables: 1,
            capabilities: 0,
            actions: 0,
            ports: vec![port10(1, NOT_UTF8), port10(2, *FULL_ASCII)],
        }),
    )
    .encode();
    byte_exact_10(&features);
    for name in [NOT_UTF8, *FULL_ASCII] {
        let wire = Message10::new(0, of10::Body::PortStatus(2, port10(4, name))).encode();
        let m = byte_exact_10(&wire);
        // What the proxy tells the controller: the same 16 bytes.
        let up = switch10::up(m).unwrap();
        let Body::PortStatus(ps) = &up.body else {
            panic!("{up:?}")
        };
        assert_eq!((ps.reason, ps.port.port_no), (2, 4));
        assert_eq!(ps.port.name.bytes(), &name);
        byte_exact_13(&up.encode());
    }
}
