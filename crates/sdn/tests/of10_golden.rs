//! The OpenFlow 1.0 codec against bytes os-ken encodes
//! (tests/fixtures/of10/golden.json, made by make_golden.py): each message
//! built here encodes to exactly those bytes, and those bytes decode to
//! exactly this message.

use std::collections::HashMap;

use nflab_sdn::of10::stats::{
    port_stats_request, PortStats10, TableStats10, OFPST_AGGREGATE, OFPST_DESC, OFPST_PORT,
    OFPST_TABLE,
};
use nflab_sdn::of10::{
    flow_stats_request, Action10, Body, Features10, FlowMod10, FlowRemoved10, FlowStats10, Match10,
    Message10, PhyPort, OFPFW_ALL, OFPP_CONTROLLER, OFPP_NONE, OFPST_FLOW, REPLY_MORE,
};
use nflab_sdn::of13::message::Body as Body13;
use nflab_sdn::of13::multipart::mp;
use nflab_sdn::of13::stats::{AggregateStats, Desc, PortCounters, PortStats, TableStats};
use nflab_sdn::of13::PortName;
use nflab_sdn::proxy::switch10;

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
    let mut v = vec![
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
        (
            "port_status_full_name",
            Message10::new(
                0,
                Body::PortStatus(
                    2,
                    PhyPort {
                        name: PortName(*b"abcdefghijklmnop"),
                        ..port(7, "", 0)
                    },
                ),
            ),
        ),
    ];
    v.extend(stats_messages());
    v
}

/// Port, table, description and aggregate statistics, built with the typed bodies.
fn stats_messages() -> Vec<(&'static str, Message10)> {
    let mut port_stats = Vec::new();
    let counters: Vec<u64> = (1..=12).collect();
    port_stats_entry(1, &counters).encode(&mut port_stats);
    let local = [
        10,
        20,
        640,
        1280,
        0,
        0,
        0,
        0,
        u64::MAX,
        u64::MAX,
        u64::MAX,
        0,
    ];
    port_stats_entry(0xfffe, &local).encode(&mut port_stats);
    let mut name = [0u8; 32];
    name[..10].copy_from_slice(b"classifier");
    let mut table = Vec::new();
    TableStats10 {
        table_id: 0,
        name,
        wildcards: OFPFW_ALL,
        max_entries: 1_000_000,
        active_count: 3,
        lookup_count: 100,
        matched_count: 90,
    }
    .encode(&mut table);
    let mut desc = Vec::new();
    Desc {
        mfr_desc: "Nicira, Inc.".into(),
        hw_desc: "Open vSwitch".into(),
        sw_desc: "3.1.0".into(),
        serial_num: "None".into(),
        dp_desc: "None".into(),
    }
    .encode(&mut desc);
    let mut aggregate = Vec::new();
    AggregateStats {
        packet_count: 9,
        byte_count: 576,
        flow_count: 2,
    }
    .encode(&mut aggregate);
    let all = flow_stats_request(&Match10::all(), 0xff, OFPP_NONE);
    vec![
        (
            "port_stats_request",
            Message10::new(
                20,
                Body::StatsRequest(OFPST_PORT, 0, port_stats_request(OFPP_NONE)),
            ),
        ),
        (
            "port_stats_reply",
            Message10::new(20, Body::StatsReply(OFPST_PORT, 0, port_stats)),
        ),
        (
            "table_stats_request",
            Message10::new(21, Body::StatsRequest(OFPST_TABLE, 0, vec![])),
        ),
        (
            "table_stats_reply",
            Message10::new(21, Body::StatsReply(OFPST_TABLE, 0, table)),
        ),
        (
            "desc_stats_request",
            Message10::new(22, Body::StatsRequest(OFPST_DESC, 0, vec![])),
        ),
        (
            "desc_stats_reply",
            Message10::new(22, Body::StatsReply(OFPST_DESC, 0, desc)),
        ),
        (
            "aggregate_stats_request",
            Message10::new(23, Body::StatsRequest(OFPST_AGGREGATE, 0, all)),
        ),
        (
            "aggregate_stats_reply",
            Message10::new(23, Body::StatsReply(OFPST_AGGREGATE, 0, aggregate)),
        ),
    ]
}

fn port_stats_entry(port_no: u16, c: &[u64]) -> PortStats10 {
    PortStats10 {
        port_no,
        counters: PortCounters {
            rx_packets: c[0],
            tx_packets: c[1],
            rx_bytes: c[2],
            tx_bytes: c[3],
            rx_dropped: c[4],
            tx_dropped: c[5],
            rx_errors: c[6],
            tx_errors: c[7],
            rx_frame_err: c[8],
            rx_over_err: c[9],
            rx_crc_err: c[10],
            collisions: c[11],
        },
    }
}

/// What the proxy makes of os-ken's 1.0 statistics replies: the 1.3 bodies
/// with the same numbers (ports widened, OFPP_LOCAL kept reserved).
#[test]
fn os_kens_1_0_statistics_read_as_1_3_multipart_with_the_same_numbers() {
    let g = golden();
    let up = |name: &str| {
        let m = switch10::up(Message10::decode(&g[name]).unwrap()).unwrap();
        let Body13::MultipartReply(t, flags, body) = m.body else {
            panic!("{name}: {m:?}")
        };
        assert_eq!(flags, 0, "{name}");
        (t, body)
    };
    let (t, body) = up("port_stats_reply");
    assert_eq!(t, mp::PORT_STATS);
    let ports = PortStats::decode_all(&body).unwrap();
    assert_eq!(ports.len(), 2);
    assert_eq!((ports[0].port_no, ports[1].port_no), (1, 0xffff_fffe));
    assert_eq!(
        ports[0].counters,
        port_stats_entry(1, &(1..=12).collect::<Vec<_>>()).counters
    );
    assert_eq!(
        (
            ports[1].counters.rx_bytes,
            ports[1].counters.rx_crc_err,
            ports[1].duration_sec
        ),
        (640, u64::MAX, 0)
    );
    let (t, body) = up("table_stats_reply");
    assert_eq!(t, mp::TABLE);
    assert_eq!(
        TableStats::decode_all(&body).unwrap(),
        [TableStats {
            table_id: 0,
            active_count: 3,
            lookup_count: 100,
            matched_count: 90
        }]
    );
    let (t, body) = up("desc_stats_reply");
    assert_eq!(t, mp::DESC);
    let d = Desc::decode(&body).unwrap();
    assert_eq!(
        (d.mfr_desc.as_str(), d.sw_desc.as_str()),
        ("Nicira, Inc.", "3.1.0")
    );
    let (t, body) = up("aggregate_stats_reply");
    assert_eq!(t, mp::AGGREGATE);
    assert_eq!(
        AggregateStats::decode(&body).unwrap(),
        AggregateStats {
            packet_count: 9,
            byte_count: 576,
            flow_count: 2
        }
    );
    // The port status with a 16-byte name: the 1.3 port keeps all 16 bytes.
    let m = switch10::up(Message10::decode(&g["port_status_full_name"]).unwrap()).unwrap();
    let Body13::PortStatus(ps) = m.body else {
        panic!("{m:?}")
    };
    assert_eq!(ps.port.name.bytes(), b"abcdefghijklmnop");
    assert_eq!(ps.port.port_no, 7);
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
