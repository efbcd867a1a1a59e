//! The codec against bytes os-ken encodes (tests/fixtures/of13/golden.json,
//! made by make_golden.py): each message built here encodes to exactly those
//! bytes, and those bytes decode to exactly this message.

use std::collections::HashMap;

use nflab_sdn::of13::message::{typ, Body, ErrorMsg, Features, Message, PortStatus};
use nflab_sdn::of13::multipart::{mp, FlowStats, FlowStatsRequest, Port, PORT_STATE_LINK_DOWN};
use nflab_sdn::of13::oxm::field;
use nflab_sdn::of13::{frame_len, Action, FlowMod, FlowRemoved, Instruction, Match, Oxm};

fn golden() -> HashMap<String, Vec<u8>> {
    let text = include_str!("fixtures/of13/golden.json");
    let map: HashMap<String, String> = serde_json::from_str(text).unwrap();
    map.into_iter()
        .map(|(k, v)| {
            let bytes = (0..v.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&v[i..i + 2], 16).unwrap())
                .collect();
            (k, bytes)
        })
        .collect()
}

fn acl_match() -> Match {
    Match::new(vec![
        Oxm::basic(field::IN_PORT, &1u32.to_be_bytes()),
        Oxm::masked(field::METADATA, &7u64.to_be_bytes(), &0xffu64.to_be_bytes()),
        Oxm::basic(field::ETH_DST, &[2, 0x4e, 0x46, 0, 0, 2]),
        Oxm::basic(field::ETH_TYPE, &0x0800u16.to_be_bytes()),
        Oxm::masked(field::IPV4_SRC, &[198, 18, 0, 0], &[255, 255, 0, 0]),
    ])
}

fn instructions() -> Vec<Instruction> {
    vec![
        Instruction::WriteMetadata {
            metadata: 7,
            mask: 0xff,
        },
        Instruction::ApplyActions(vec![
            Action::Output {
                port: 2,
                max_len: 0,
            },
            Action::SetField(Oxm::basic(field::ETH_DST, &[2, 0x4e, 0x46, 0, 0, 3])),
        ]),
        Instruction::GotoTable(3),
    ]
}

fn port(no: u32, last: u8, name: &str, state: u32) -> Port {
    Port {
        port_no: no,
        hw_addr: [2, 0x4e, 0x46, 0, 1, last],
        name: name.into(),
        config: 0,
        state,
        curr: 0x2840,
        advertised: 0,
        supported: 0,
        peer: 0,
        curr_speed: 10_000_000,
        max_speed: 0,
    }
}

fn expected() -> Vec<(&'static str, Message)> {
    let mut flow_mod = FlowMod::add(1, 100, acl_match(), instructions());
    flow_mod.cookie = 0x42;
    let mut delete_all = FlowMod::add(0xff, 0x8000, Match::default(), vec![]);
    delete_all.command = nflab_sdn::of13::flow::command::DELETE;
    let mut stats = Vec::new();
    FlowStats {
        table_id: 1,
        duration_sec: 12,
        duration_nsec: 500,
        priority: 100,
        idle_timeout: 0,
        hard_timeout: 0,
        flags: 0,
        cookie: 0x42,
        packet_count: 9,
        byte_count: 576,
        matches: acl_match(),
        instructions: instructions(),
    }
    .encode(&mut stats);
    let mut ports = Vec::new();
    port(1, 1, "dut0", 0).encode(&mut ports);
    port(2, 2, "dut1", PORT_STATE_LINK_DOWN).encode(&mut ports);
    vec![
        ("hello", Message::new(1, Body::Hello(vec![]))),
        (
            "echo_request",
            Message::new(2, Body::EchoRequest(b"nflab".to_vec())),
        ),
        (
            "echo_reply",
            Message::new(2, Body::EchoReply(b"nflab".to_vec())),
        ),
        ("features_request", Message::new(3, Body::FeaturesRequest)),
        (
            "features_reply",
            Message::new(
                3,
                Body::FeaturesReply(Features {
                    datapath_id: 0xab,
                    n_buffers: 256,
                    n_tables: 254,
                    auxiliary_id: 0,
                    capabilities: 0x4f,
                }),
            ),
        ),
        ("set_config", Message::new(4, Body::SetConfig(0, 0xffe5))),
        ("flow_mod", Message::new(5, Body::FlowMod(flow_mod))),
        (
            "flow_mod_delete_all",
            Message::new(6, Body::FlowMod(delete_all)),
        ),
        (
            "flow_stats_request",
            Message::new(
                7,
                Body::MultipartRequest(mp::FLOW, 0, FlowStatsRequest::all().encode()),
            ),
        ),
        (
            "flow_stats_reply",
            Message::new(8, Body::MultipartReply(mp::FLOW, 1, stats)),
        ),
        (
            "port_desc_request",
            Message::new(9, Body::MultipartRequest(mp::PORT_DESC, 0, vec![])),
        ),
        (
            "port_desc_reply",
            Message::new(9, Body::MultipartReply(mp::PORT_DESC, 0, ports)),
        ),
        (
            "port_status",
            Message::new(
                0,
                Body::PortStatus(PortStatus {
                    reason: 2,
                    port: port(2, 2, "dut1", PORT_STATE_LINK_DOWN),
                }),
            ),
        ),
        (
            "flow_removed",
            Message::new(
                11,
                Body::FlowRemoved(FlowRemoved {
                    cookie: 0x42,
                    priority: 100,
                    reason: 0,
                    table_id: 1,
                    duration_sec: 5,
                    duration_nsec: 600,
                    idle_timeout: 10,
                    hard_timeout: 0,
                    packet_count: 9,
                    byte_count: 576,
                    matches: Match::new(vec![
                        Oxm::basic(field::IN_PORT, &1u32.to_be_bytes()),
                        Oxm::basic(field::ETH_TYPE, &0x0800u16.to_be_bytes()),
                    ]),
                }),
            ),
        ),
        ("barrier_request", Message::new(10, Body::BarrierRequest)),
        ("barrier_reply", Message::new(10, Body::BarrierReply)),
        (
            "error_bad_type",
            Message::new(
                99,
                Body::Error(ErrorMsg {
                    typ: 1,
                    code: 1,
                    data: vec![4, 0x19, 0, 8, 0, 0, 0, 0x63],
                }),
            ),
        ),
    ]
}

#[test]
fn every_message_encodes_to_os_kens_bytes_and_decodes_back() {
    let g = golden();
    let want = expected();
    assert_eq!(want.len(), g.len(), "a golden message has no test");
    for (name, msg) in want {
        let bytes = &g[name];
        assert_eq!(
            &msg.encode(),
            bytes,
            "{name}: encoding differs from os-ken's"
        );
        assert_eq!(frame_len(bytes).unwrap(), Some(bytes.len()), "{name}");
        assert_eq!(
            Message::decode(bytes).unwrap(),
            msg,
            "{name}: decoding differs"
        );
    }
}

#[test]
fn multipart_bodies_parse_to_what_os_ken_packed() {
    let g = golden();
    let Body::MultipartReply(_, flags, body) =
        Message::decode(&g["flow_stats_reply"]).unwrap().body
    else {
        panic!("not a multipart reply")
    };
    assert_eq!(flags, 1, "MORE flag");
    let entries = FlowStats::decode_all(&body).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        (
            entries[0].packet_count,
            entries[0].byte_count,
            entries[0].priority
        ),
        (9, 576, 100)
    );
    assert_eq!(entries[0].matches.in_port(), Some(1));
    assert_eq!(entries[0].instructions, instructions());
    let Body::MultipartReply(_, _, body) = Message::decode(&g["port_desc_reply"]).unwrap().body
    else {
        panic!("not a multipart reply")
    };
    let ports = Port::decode_all(&body).unwrap();
    assert_eq!(
        ports.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["dut0", "dut1"]
    );
    assert_eq!(ports[1].state, PORT_STATE_LINK_DOWN);
    let Body::MultipartRequest(_, _, body) =
        Message::decode(&g["flow_stats_request"]).unwrap().body
    else {
        panic!("not a multipart request")
    };
    assert_eq!(
        FlowStatsRequest::decode(&body).unwrap(),
        FlowStatsRequest::all()
    );
}

#[test]
fn broken_bytes_are_errors_not_panics() {
    let g = golden();
    let fm = &g["flow_mod"];
    // Every truncation of a whole message, with its length field fixed up, fails cleanly.
    for cut in 8..fm.len() {
        let mut b = fm[..cut].to_vec();
        b[2..4].copy_from_slice(&(cut as u16).to_be_bytes());
        let _ = Message::decode(&b);
    }
    assert!(
        Message::decode(&fm[..20]).is_err(),
        "length claims more than given"
    );
    let mut v10 = g["barrier_request"].clone();
    v10[0] = 1;
    assert!(Message::decode(&v10).is_err());
    assert_eq!(frame_len(&fm[..7]).unwrap(), None);
    assert!(frame_len(&[4, 0, 0, 4, 0, 0, 0, 0]).is_err());
    // An unknown type passes through as Other, as bytes.
    let m = Message::decode(&[4, 200, 0, 10, 0, 0, 0, 1, 0xaa, 0xbb]).unwrap();
    assert_eq!(m.body, Body::Other(200, vec![0xaa, 0xbb]));
    assert_eq!(m.encode(), vec![4, 200, 0, 10, 0, 0, 0, 1, 0xaa, 0xbb]);
    assert_eq!(typ::BARRIER_REPLY, 21);
}
