//! The OpenFlow 1.0 codec against bytes os-ken encodes
//! (tests/fixtures/of10/golden.json, made by make_golden.py): each message
//! built here encodes to exactly those bytes, and those bytes decode to
//! exactly this message.

use std::collections::HashMap;

use nflab_sdn::of10::{
    flow_stats_request, Action10, Body, Features10, FlowMod10, FlowRemoved10, FlowStats10, Match10,
    Message10, PhyPort, OFPFW_ALL, OFPP_CONTROLLER, OFPP_NONE, OFPST_FLOW, REPLY_MORE,
};

fn golden() -> HashMap<String, Vec<u8>> {
    let text = include_str!("fixtures/of10/golden.json");
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

/// in_port 1, dl_dst, IPv4, nw_src 198.18.0.0/16 (16 low bits wildcarded).
fn acl_match() -> Match10 {
    let exact = 1 | (1 << 3) | (1 << 4); // IN_PORT, DL_DST, DL_TYPE
    let nw_src_all = 0x3f << 8;
    Match10 {
        wildcards: (OFPFW_ALL & !exact & !nw_src_all) | (16 << 8),
        in_port: 1,
        dl_dst: [2, 0x4e, 0x46, 0, 0, 2],
        dl_type: 0x0800,
        nw_src: u32::from_be_bytes([198, 18, 0, 0]),
        ..Match10::default()
    }
}

fn port(no: u16, name: &str, state: u32) -> PhyPort {
    PhyPort {
        port_no: no,
        hw_addr: [2, 0x4e, 0x46, 0, 1, no as u8],
        name: name.into(),
        config: 0,
        state,
        curr: 0x2c0,
        advertised: 0,
        supported: 0,
        peer: 0,
    }
}

fn frame() -> Vec<u8> {
    (0..20).collect()
}

fn expected() -> Vec<(&'static str, Message10)> {
    let mut entry = Vec::new();
    FlowStats10 {
        table_id: 0,
        matches: acl_match(),
        duration_sec: 12,
        duration_nsec: 500,
        priority: 100,
        idle_timeout: 10,
        hard_timeout: 0,
        cookie: 0x42,
        packet_count: 9,
        byte_count: 576,
        actions: vec![Action10::Output {
            port: 2,
            max_len: 0,
        }],
    }
    .encode(&mut entry);
    let flow_mod = FlowMod10 {
        matches: acl_match(),
        cookie: 0x42,
        command: 0,
        idle_timeout: 10,
        hard_timeout: 0,
        priority: 100,
        buffer_id: 0xffff_ffff,
        out_port: OFPP_NONE,
        flags: 1,
        actions: vec![
            Action10::Output {
                port: 2,
                max_len: 0,
            },
            // OFPAT_SET_DL_DST (5): the MAC and 6 bytes of padding.
            Action10::Other {
                typ: 5,
                body: vec![2, 0x4e, 0x46, 0, 0, 3, 0, 0, 0, 0, 0, 0],
            },
        ],
    };
    let delete_all = FlowMod10 {
        matches: Match10::all(),
        cookie: 0,
        command: 3,
        idle_timeout: 0,
        hard_timeout: 0,
        priority: 0x8000,
        buffer_id: 0xffff_ffff,
        out_port: OFPP_NONE,
        flags: 0,
        actions: vec![],
    };
    vec![
        ("hello", Message10::new(1, Body::Hello(vec![]))),
        (
            "echo_request",
            Message10::new(2, Body::EchoRequest(b"nflab".to_vec())),
        ),
        (
            "echo_reply",
            Message10::new(2, Body::EchoReply(b"nflab".to_vec())),
        ),
        ("features_request", Message10::new(3, Body::FeaturesRequest)),
        (
            "features_reply",
            Message10::new(
                3,
                Body::FeaturesReply(Features10 {
                    datapath_id: 0xab,
                    n_buffers: 256,
                    n_tables: 1,
                    capabilities: 0xc7,
                    actions: 0xfff,
                    ports: vec![port(1, "dut0", 0), port(2, "dut1", 1)],
                }),
            ),
        ),
        ("flow_mod", Message10::new(5, Body::FlowMod(flow_mod))),
        (
            "flow_mod_delete_all",
            Message10::new(6, Body::FlowMod(delete_all)),
        ),
        (
            "flow_stats_request",
            Message10::new(
                7,
                Body::StatsRequest(
                    OFPST_FLOW,
                    0,
                    flow_stats_request(&Match10::all(), 0xff, OFPP_NONE),
                ),
            ),
        ),
        (
            "flow_stats_reply",
            Message10::new(7, Body::StatsReply(OFPST_FLOW, REPLY_MORE, entry)),
        ),
        (
            "packet_in",
            Message10::new(0, Body::PacketIn(0xffff_ffff, 20, 1, 0, frame())),
        ),
        (
            "packet_out",
            Message10::new(
                12,
                Body::PacketOut(
                    0xffff_ffff,
                    OFPP_CONTROLLER,
                    vec![Action10::Output {
                        port: 2,
                        max_len: 0,
                    }],
                    frame(),
                ),
            ),
        ),
        (
            "flow_removed",
            Message10::new(
                11,
                Body::FlowRemoved(FlowRemoved10 {
                    matches: acl_match(),
                    cookie: 0x42,
                    priority: 100,
                    reason: 0,
                    duration_sec: 5,
                    duration_nsec: 600,
                    idle_timeout: 10,
                    packet_count: 9,
                    byte_count: 576,
                }),
            ),
        ),
        ("barrier_request", Message10::new(10, Body::BarrierRequest)),
        ("barrier_reply", Message10::new(10, Body::BarrierReply)),
        (
            "error_bad_type",
            Message10::new(99, Body::Error(1, 1, vec![1, 0x19, 0, 8, 0, 0, 0, 0x63])),
        ),
    ]
}

#[test]
fn every_1_0_message_encodes_to_os_kens_bytes_and_decodes_back() {
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
        assert_eq!(
            Message10::decode(bytes).unwrap(),
            msg,
            "{name}: decoding differs"
        );
    }
}

#[test]
fn the_flow_stats_entry_parses_to_what_os_ken_packed() {
    let g = golden();
    let Body::StatsReply(OFPST_FLOW, flags, body) =
        Message10::decode(&g["flow_stats_reply"]).unwrap().body
    else {
        panic!("not a flow-stats reply");
    };
    assert_eq!(flags, REPLY_MORE);
    let e = FlowStats10::decode_all(&body).unwrap();
    assert_eq!(e.len(), 1);
    assert_eq!(
        (e[0].cookie, e[0].packet_count, e[0].byte_count),
        (0x42, 9, 576)
    );
    assert_eq!(e[0].matches.in_port, 1);
    assert_eq!(
        e[0].actions,
        vec![Action10::Output {
            port: 2,
            max_len: 0
        }]
    );
}

#[test]
fn broken_1_0_bytes_are_errors_not_panics() {
    let g = golden();
    for (name, bytes) in &g {
        for cut in 0..bytes.len() {
            let mut b = bytes[..cut].to_vec();
            if b.len() >= 4 {
                // The header claims the shorter length, so the body is what is cut.
                let l = b.len() as u16;
                b[2..4].copy_from_slice(&l.to_be_bytes());
            }
            let _ = Message10::decode(&b);
        }
        // A 1.3 header on 1.0 bytes is refused (except HELLO, which negotiates).
        let mut v13 = bytes.clone();
        v13[0] = 4;
        if name != "hello" {
            assert!(Message10::decode(&v13).is_err(), "{name}");
        }
    }
}
