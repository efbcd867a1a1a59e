//! The proxy with a switch that speaks only OpenFlow 1.0 (an Open vSwitch
//! bridge with `protocols=OpenFlow10`) beside one that speaks 1.3: the
//! controller sees one 1.3 switch; its FLOW_MODs, barriers and flow-stats
//! requests reach the 1.0 switch in 1.0, what the switch answers (flow
//! stats, FLOW_REMOVED — the 1.3 switch's too) comes back in 1.3 and
//! global terms, and what 1.0 cannot do (GOTO_TABLE) is refused with a 1.3
//! error. Port, table and
//! aggregate statistics of the 1.0 switch reach the controller as 1.3
//! multipart with the bridge's own numbers (`ovs-ofctl dump-ports` /
//! `dump-tables`) and the frames the test sent.

use std::net::{TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

use nflab_sdn::conn::{send, Reader};
use nflab_sdn::netns::{run, NetnsGuard, PrivateNetns};
use nflab_sdn::of13::buf::Reader as ByteReader;
use nflab_sdn::of13::message::{Body, Message, MULTIPART_MORE};
use nflab_sdn::of13::multipart::{mp, FlowStats, FlowStatsRequest, Port};
use nflab_sdn::of13::oxm::field;
use nflab_sdn::of13::stats::Desc;
use nflab_sdn::of13::stats::{port_stats_request, AggregateStats, PortStats, TableStats};
use nflab_sdn::of13::{Action, FlowMod, Instruction, Match, Oxm};
use nflab_sdn::of13::{NO_BUFFER, OFPP_ANY, OFPP_CONTROLLER};
use nflab_sdn::ovs::{BridgeOptions, Ovs};
use nflab_sdn::proxy::{self, ProxyConfig};

const CONFIG: &str = r#"
[proxy]
listen = "127.0.0.1:0"
controller = "CONTROLLER"
datapath_id = 0xe2
connect_timeout_s = 60

[[switch]]
name = "new"
datapath_id = 0xc1
[[switch]]
name = "old"
datapath_id = 0xc2

[[table]]
id = 0
switch = "new"
local = 0
[[table]]
id = 1
switch = "old"
local = 0

[[port]]
id = 1
switch = "new"
local = 1
[[port]]
id = 2
switch = "old"
local = 1
[[port]]
id = 3
switch = "old"
local = 2
"#;

struct Ctl {
    w: TcpStream,
    r: Reader,
}

impl Ctl {
    fn send(&mut self, m: Message) {
        send(&mut self.w, &m).unwrap();
    }
    fn next(&mut self) -> Message {
        loop {
            let (m, _) = self.r.expect("a message from the proxy").unwrap();
            if !matches!(m.body, Body::PortStatus(_) | Body::Hello(_)) {
                return m;
            }
        }
    }
}

fn out(port: u32) -> Vec<Instruction> {
    vec![Instruction::ApplyActions(vec![Action::Output {
        port,
        max_len: 0,
    }])]
}

/// Two bridges in a private namespace behind a proxy: "new" (1.3, dpid
/// 0xc1, y1 = port 1) and "old" (1.0 only, 0xc2, y2 = port 1, y3 = port 2);
/// y1–y2 is a veth cable between them, y4 (the peer of y3) is a host
/// interface with 198.18.99.1/24 and a permanent neighbour 198.18.99.2, so
/// datagrams sent from it are frames into the old bridge's port 2 and
/// nothing else is (IPv6 is off in the namespace: no ND, no MLD).
/// Fields drop in order: controller, proxy, OvS, namespace.
struct Lab {
    c: Ctl,
    handle: proxy::ProxyHandle,
    ovs: Ovs,
    ns: PrivateNetns,
}

fn ready() -> bool {
    nflab_testkit::require_root()
        && nflab_testkit::require_tool("ovs-vswitchd", "openvswitch-switch")
}

/// One switch, the old (1.0) bridge, passed through unchanged.
const TRANSPARENT: &str = r#"
[proxy]
listen = "127.0.0.1:0"
controller = "CONTROLLER"
datapath_id = 0xe3
apps = ["transparent"]
connect_timeout_s = 60

[[switch]]
name = "old"
datapath_id = 0xc2

[[table]]
id = 0
switch = "old"
local = 0

[[port]]
id = 1
switch = "old"
local = 1
[[port]]
id = 2
switch = "old"
local = 2
"#;

/// The two bridges behind the multi-switch proxy (`CONFIG`), or, with
/// `transparent`, only the old one behind a transparent proxy.
fn lab(tag: &str, transparent: bool) -> Lab {
    let ns = PrivateNetns::create(tag).unwrap();
    run(
        "ip",
        &[
            "netns",
            "exec",
            ns.name(),
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ],
    )
    .unwrap();
    for (a, b) in [("y1", "y2"), ("y3", "y4")] {
        run(
            "ip",
            &[
                "-n",
                ns.name(),
                "link",
                "add",
                a,
                "type",
                "veth",
                "peer",
                "name",
                b,
            ],
        )
        .unwrap();
        for dev in [a, b] {
            run("ip", &["-n", ns.name(), "link", "set", dev, "up"]).unwrap();
        }
    }
    run(
        "ip",
        &[
            "-n",
            ns.name(),
            "addr",
            "add",
            "198.18.99.1/24",
            "dev",
            "y4",
        ],
    )
    .unwrap();
    run(
        "ip",
        &[
            "-n",
            ns.name(),
            "neigh",
            "add",
            "198.18.99.2",
            "lladdr",
            "02:4e:46:00:99:02",
            "dev",
            "y4",
            "nud",
            "permanent",
        ],
    )
    .unwrap();
    let ovs = Ovs::start(Some(ns.name())).unwrap();
    let guard = NetnsGuard::enter(ns.name()).unwrap();
    let ctl_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let text = if transparent { TRANSPARENT } else { CONFIG }.replace(
        "CONTROLLER",
        &ctl_listener.local_addr().unwrap().to_string(),
    );
    let cfg: ProxyConfig = toml::from_str(&text).unwrap();
    let handle = proxy::start(cfg).unwrap();
    let target = format!("tcp:{}", handle.listen);
    let bridges = [
        ("new", 0xc1, "OpenFlow13", vec![("y1", 1)]),
        ("old", 0xc2, "OpenFlow10", vec![("y2", 1), ("y3", 2)]),
    ];
    for (br, dpid, proto, ports) in bridges.into_iter().skip(usize::from(transparent)) {
        ovs.add_bridge(
            br,
            &BridgeOptions {
                controller: Some(target.clone()),
                datapath_id: Some(dpid),
                protocols: Some(proto.into()),
            },
        )
        .unwrap();
        for (dev, no) in ports {
            ovs.add_port(br, dev, no).unwrap();
        }
    }
    let (s, _) = ctl_listener.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let c = Ctl {
        w: s.try_clone().unwrap(),
        r: Reader::new(s),
    };
    drop(guard);
    Lab { c, handle, ovs, ns }
}

#[test]
fn a_switch_that_speaks_only_openflow_1_0_behind_the_proxy() {
    if !ready() {
        return;
    }
    let Lab {
        mut c,
        handle,
        ovs,
        ns: _ns,
    } = lab("sdnv10", false);
    c.send(Message::new(1, Body::Hello(vec![])));
    c.send(Message::new(2, Body::FeaturesRequest));
    let Body::FeaturesReply(f) = c.next().body else {
        panic!("no features")
    };
    assert_eq!((f.datapath_id, f.n_tables), (0xe2, 2));
    // The 1.0 switch's ports (from its 1.0 features reply) in global terms.
    c.send(Message::new(
        3,
        Body::MultipartRequest(mp::PORT_DESC, 0, vec![]),
    ));
    let Body::MultipartReply(mp::PORT_DESC, 0, body) = c.next().body else {
        panic!("no port descriptions")
    };
    let ports: Vec<(u32, String)> = Port::decode_all(&body)
        .unwrap()
        .into_iter()
        .map(|p| (p.port_no, p.name.to_string()))
        .collect();
    assert_eq!(
        ports,
        [(1, "y1".to_string()), (2, "y2".into()), (3, "y3".into())]
    );

    // Global table 1 is the 1.0 switch: in_port 2 → output 3, with an idle
    // timeout and OFPFF_SEND_FLOW_REM; a 1.3 flow on the other switch.
    let mut fm = FlowMod::add(
        1,
        50,
        Match::new(vec![
            Oxm::basic(field::IN_PORT, &2u32.to_be_bytes()),
            Oxm::basic(field::ETH_TYPE, &0x0800u16.to_be_bytes()),
            Oxm::masked(field::IPV4_DST, &[198, 19, 0, 0], &[255, 255, 0, 0]),
        ]),
        out(3),
    );
    fm.cookie = 0x10;
    fm.idle_timeout = 1;
    fm.flags = 1;
    c.send(Message::new(10, Body::FlowMod(fm)));
    c.send(Message::new(
        11,
        Body::FlowMod(FlowMod::add(0, 5, Match::default(), out(1))),
    ));
    c.send(Message::new(12, Body::BarrierRequest));
    assert_eq!(c.next(), Message::new(12, Body::BarrierReply));

    // What 1.0 cannot hold: refused with OFPET_BAD_INSTRUCTION / UNSUP_INST.
    c.send(Message::new(
        13,
        Body::FlowMod(FlowMod::add(
            1,
            5,
            Match::default(),
            vec![Instruction::GotoTable(1)],
        )),
    ));
    let m = c.next();
    let Body::Error(e) = m.body else {
        panic!("{m:?}")
    };
    assert_eq!((m.xid, e.typ, e.code), (13, 3, 1));

    // Flow stats over all tables: both switches' flows, the 1.0 one in 1.3
    // and global terms (table 1, in_port 2, output 3), MORE on all but the last.
    c.send(Message::new(
        14,
        Body::MultipartRequest(mp::FLOW, 0, FlowStatsRequest::all().encode()),
    ));
    let mut entries = Vec::new();
    loop {
        let m = c.next();
        let Body::MultipartReply(mp::FLOW, flags, body) = m.body else {
            panic!("{m:?}")
        };
        entries.extend(FlowStats::decode_all(&body).unwrap());
        if flags & MULTIPART_MORE == 0 {
            break;
        }
    }
    assert_eq!(entries.len(), 2, "{entries:?}");
    let old = entries.iter().find(|e| e.cookie == 0x10).unwrap();
    assert_eq!(old.table_id, 1);
    assert_eq!(old.matches.in_port(), Some(2));
    assert_eq!(old.instructions, out(3));
    assert!(old
        .matches
        .fields
        .iter()
        .any(|f| f.is(field::IPV4_DST) && f.mask.as_deref() == Some(&[255, 255, 0, 0][..])));

    // The 1.3 switch's counterpart: global table 0, in_port 1, idle 1 s,
    // OFPFF_SEND_FLOW_REM.
    let mut fm13 = FlowMod::add(
        0,
        60,
        Match::new(vec![Oxm::basic(field::IN_PORT, &1u32.to_be_bytes())]),
        out(1),
    );
    fm13.cookie = 0x13;
    fm13.idle_timeout = 1;
    fm13.flags = 1;
    c.send(Message::new(15, Body::FlowMod(fm13)));

    // No traffic: both flows time out after 1 s and their FLOW_REMOVEDs
    // reach the controller as 1.3, in global terms (the 1.0 one converted).
    let mut removed = Vec::new();
    while removed.len() < 2 {
        if let Body::FlowRemoved(fr) = c.next().body {
            removed.push(fr);
        }
    }
    removed.sort_by_key(|f| f.cookie);
    let seen: Vec<_> = removed
        .iter()
        .map(|f| (f.cookie, f.table_id, f.reason, f.matches.in_port()))
        .collect();
    assert_eq!(seen, [(0x10, 1, 0, Some(2)), (0x13, 0, 0, Some(1))]);

    drop(c);
    handle.stop().unwrap();
    ovs.stop();
}

/// Frames sent from y4 into the old (1.0) bridge's port 2.
const FRAMES: u64 = 25;
/// UDP payload bytes: a frame is 14 + 20 + 8 + 100 = 142 bytes.
const PAYLOAD: usize = 100;
const FRAME_LEN: u64 = 142;

/// Collect every part of a multipart reply of type `t` to `xid`.
fn multipart(c: &mut Ctl, xid: u32, t: u16) -> Vec<u8> {
    let mut all = Vec::new();
    loop {
        let m = c.next();
        let Body::MultipartReply(got, flags, body) = m.body else {
            panic!("{m:?}")
        };
        assert_eq!((m.xid, got), (xid, t));
        all.extend(body);
        if flags & MULTIPART_MORE == 0 {
            return all;
        }
    }
}

/// `ovs-ofctl dump-ports` as port → the twelve counters in wire order
/// (`?`, a counter the switch does not keep, is all ones as on the wire).
fn ofctl_ports(text: &str) -> Vec<(String, [u64; 12])> {
    let num = |line: &str, key: &str| -> u64 {
        let v = line
            .split(&format!("{key}="))
            .nth(1)
            .unwrap_or_else(|| panic!("no {key} in {line:?}"));
        let v = v.split([',', ' ']).next().unwrap();
        if v == "?" {
            u64::MAX
        } else {
            v.parse().unwrap()
        }
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let Some(rest) = t.strip_prefix("port ") else {
            continue;
        };
        let name = rest.split(':').next().unwrap().trim().to_string();
        let (rx, tx) = (t, lines[i + 1]);
        out.push((
            name,
            [
                num(rx, "pkts"),
                num(tx, "pkts"),
                num(rx, "bytes"),
                num(tx, "bytes"),
                num(rx, "drop"),
                num(tx, "drop"),
                num(rx, "errs"),
                num(tx, "errs"),
                num(rx, "frame"),
                num(rx, "over"),
                num(rx, "crc"),
                num(tx, "coll"),
            ],
        ));
    }
    out
}

fn counters(p: &PortStats) -> [u64; 12] {
    let c = p.counters;
    [
        c.rx_packets,
        c.tx_packets,
        c.rx_bytes,
        c.tx_bytes,
        c.rx_dropped,
        c.tx_dropped,
        c.rx_errors,
        c.tx_errors,
        c.rx_frame_err,
        c.rx_over_err,
        c.rx_crc_err,
        c.collisions,
    ]
}

/// `key=<number>` in `text` after `from`.
fn field_after(text: &str, from: &str, key: &str) -> u64 {
    let at = text
        .find(from)
        .unwrap_or_else(|| panic!("no {from} in {text}"));
    let rest = &text[at..];
    let v = rest
        .split(&format!("{key}="))
        .nth(1)
        .unwrap_or_else(|| panic!("no {key} after {from} in {text}"));
    v.split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn a_1_0_switchs_port_table_and_aggregate_statistics_reach_the_controller() {
    if !ready() {
        return;
    }
    let Lab {
        mut c,
        handle,
        ovs,
        ns,
    } = lab("sdnv10st", false);
    c.send(Message::new(1, Body::Hello(vec![])));
    // Global table 1 is the old switch: in_port 2 (global 3) → output 2 (global 2).
    let fm = FlowMod::add(
        1,
        50,
        Match::new(vec![Oxm::basic(field::IN_PORT, &3u32.to_be_bytes())]),
        out(2),
    );
    c.send(Message::new(10, Body::FlowMod(fm)));
    c.send(Message::new(11, Body::BarrierRequest));
    assert_eq!(c.next(), Message::new(11, Body::BarrierReply));

    // FRAMES datagrams from y4: FRAMES frames of FRAME_LEN bytes into old
    // port 2, out of old port 1 (and on to "new", which has no flows).
    let tx = NetnsGuard::run(Some(ns.name()), || UdpSocket::bind("198.18.99.1:0"))
        .unwrap()
        .unwrap();
    for i in 0..FRAMES {
        let mut payload = vec![0u8; PAYLOAD];
        payload[..8].copy_from_slice(&i.to_be_bytes());
        tx.send_to(&payload, "198.18.99.2:9").unwrap();
    }
    // The flow's counters reach OpenFlow when OvS's revalidator runs.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let flows = ovs.ofctl_as("OpenFlow10", &["dump-flows", "old"]).unwrap();
        if flows.contains(&format!("n_packets={FRAMES},")) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the flow never counted {FRAMES} packets: {flows}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Port statistics of every port: the controller's numbers are the
    // bridge's, port for port, in global terms; the frames sent are there.
    c.send(Message::new(
        20,
        Body::MultipartRequest(mp::PORT_STATS, 0, port_stats_request(OFPP_ANY)),
    ));
    let got = PortStats::decode_all(&multipart(&mut c, 20, mp::PORT_STATS)).unwrap();
    let mut nos: Vec<u32> = got.iter().map(|p| p.port_no).collect();
    nos.sort();
    assert_eq!(nos, [1, 2, 3], "{got:?}");
    let text = ovs.ofctl_as("OpenFlow10", &["dump-ports", "old"]).unwrap();
    let bridge = ofctl_ports(&text);
    let of = |global: u32| *got.iter().find(|p| p.port_no == global).unwrap();
    for (global, local) in [(2, "1"), (3, "2")] {
        let want = bridge
            .iter()
            .find(|(n, _)| n == local)
            .unwrap_or_else(|| panic!("no port {local} in {text}"))
            .1;
        assert_eq!(counters(&of(global)), want, "global port {global}: {text}");
    }
    let (y3, y2) = (of(3).counters, of(2).counters);
    assert_eq!((y3.rx_packets, y3.rx_bytes), (FRAMES, FRAMES * FRAME_LEN));
    assert_eq!((y2.tx_packets, y2.tx_bytes), (FRAMES, FRAMES * FRAME_LEN));
    assert_eq!(of(3).duration_sec, 0, "1.0 keeps no port duration");

    // One port: asked of its switch only, by its local number.
    c.send(Message::new(
        21,
        Body::MultipartRequest(mp::PORT_STATS, 0, port_stats_request(3)),
    ));
    let one = PortStats::decode_all(&multipart(&mut c, 21, mp::PORT_STATS)).unwrap();
    assert_eq!(one.len(), 1, "{one:?}");
    assert_eq!((one[0].port_no, one[0].counters), (3, y3));

    // Table statistics: global table 1 is the old switch's table 0, with
    // the numbers `ovs-ofctl dump-tables` shows: one flow, every frame matched.
    c.send(Message::new(
        22,
        Body::MultipartRequest(mp::TABLE, 0, vec![]),
    ));
    let tables = TableStats::decode_all(&multipart(&mut c, 22, mp::TABLE)).unwrap();
    let mut ids: Vec<u8> = tables.iter().map(|t| t.table_id).collect();
    ids.sort();
    assert_eq!(ids, [0, 1], "{tables:?}");
    let t1 = tables.iter().find(|t| t.table_id == 1).unwrap();
    let dump = ovs.ofctl_as("OpenFlow10", &["dump-tables", "old"]).unwrap();
    assert_eq!(
        (
            u64::from(t1.active_count),
            t1.lookup_count,
            t1.matched_count
        ),
        (
            field_after(&dump, "0:", "active"),
            field_after(&dump, "0:", "lookup"),
            field_after(&dump, "0:", "matched")
        ),
        "{dump}"
    );
    assert_eq!((t1.active_count, t1.matched_count), (1, FRAMES), "{dump}");

    // Aggregate over every table: one body, the sum over both switches
    // ("new" has no flows): the frames sent, one flow.
    c.send(Message::new(
        23,
        Body::MultipartRequest(mp::AGGREGATE, 0, FlowStatsRequest::all().encode()),
    ));
    let a = AggregateStats::decode(&multipart(&mut c, 23, mp::AGGREGATE)).unwrap();
    let want = AggregateStats {
        packet_count: FRAMES,
        byte_count: FRAMES * FRAME_LEN,
        flow_count: 1,
    };
    assert_eq!(a, want);
    // … and filtered by a match the 1.0 switch applies: in_port 3 finds
    // the flow, in_port 2 none; in_port 1 is the other switch's, so no
    // switch can hold such a flow in table 1: zeros without asking.
    let none = AggregateStats::default();
    for (xid, port, want) in [(24, 3u32, want), (25, 2, none), (27, 1, none)] {
        let mut req = FlowStatsRequest::all();
        req.table_id = 1;
        req.matches = Match::new(vec![Oxm::basic(field::IN_PORT, &port.to_be_bytes())]);
        c.send(Message::new(
            xid,
            Body::MultipartRequest(mp::AGGREGATE, 0, req.encode()),
        ));
        let a = AggregateStats::decode(&multipart(&mut c, xid, mp::AGGREGATE)).unwrap();
        assert_eq!(a, want, "in_port {port}");
    }
    // Flow stats agree.
    c.send(Message::new(
        26,
        Body::MultipartRequest(mp::FLOW, 0, FlowStatsRequest::all().encode()),
    ));
    let flows = FlowStats::decode_all(&multipart(&mut c, 26, mp::FLOW)).unwrap();
    assert_eq!(flows.len(), 1, "{flows:?}");
    assert_eq!(
        (
            flows[0].table_id,
            flows[0].packet_count,
            flows[0].byte_count
        ),
        (1, FRAMES, FRAMES * FRAME_LEN)
    );

    drop(c);
    handle.stop().unwrap();
    ovs.stop();
}

fn punt(table: u8, cookie: u64, in_port: u32) -> FlowMod {
    let mut fm = FlowMod::add(
        table,
        20,
        Match::new(vec![
            Oxm::basic(field::IN_PORT, &in_port.to_be_bytes()),
            Oxm::basic(field::ETH_TYPE, &0x88b5u16.to_be_bytes()),
        ]),
        vec![Instruction::ApplyActions(vec![Action::Output {
            port: OFPP_CONTROLLER,
            max_len: 0xffff,
        }])],
    );
    fm.cookie = cookie;
    fm
}

/// A 1.3 PACKET_OUT of `frame` (no buffer, in_port CONTROLLER) out of `port`.
fn packet_out(port: u32, frame: &[u8]) -> Body {
    let mut acts = Vec::new();
    Action::encode_list(&[Action::Output { port, max_len: 0 }], &mut acts);
    let mut po = Vec::new();
    po.extend_from_slice(&NO_BUFFER.to_be_bytes());
    po.extend_from_slice(&OFPP_CONTROLLER.to_be_bytes());
    po.extend_from_slice(&(acts.len() as u16).to_be_bytes());
    po.extend_from_slice(&[0; 6]);
    po.extend_from_slice(&acts);
    po.extend_from_slice(frame);
    Body::Other(13, po)
}

/// The next PACKET_IN: (buffer_id, total_len, table, in_port, data after the match).
fn packet_in(c: &mut Ctl) -> (u32, u16, u8, Option<u32>, Vec<u8>) {
    let m = c.next();
    let Body::Other(10, body) = m.body else {
        panic!("{m:?}")
    };
    let mut r = ByteReader::new(&body, "packet-in");
    let buffer_id = r.u32().unwrap();
    let total_len = r.u16().unwrap();
    r.skip(1).unwrap();
    let table = r.u8().unwrap();
    r.skip(8).unwrap();
    let in_port = Match::decode(&mut r).unwrap().in_port();
    r.skip(2).unwrap();
    (buffer_id, total_len, table, in_port, r.rest().to_vec())
}

/// PACKET_OUT and PACKET_IN through the proxy with a real 1.0 bridge: a
/// PACKET_OUT the 1.0 switch sends crosses the y2–y1 cable and comes back
/// as the 1.3 switch's PACKET_IN; a frame the 1.3 switch sends the other
/// way comes back as the 1.0 switch's PACKET_IN, in 1.3 and global terms
/// (table 1, port 2); both frames unchanged.
#[test]
fn packet_in_and_packet_out_of_a_1_0_switch_on_a_real_bridge() {
    if !ready() {
        return;
    }
    let Lab {
        mut c,
        handle,
        ovs,
        ns: _ns,
    } = lab("sdnv10pk", false);
    c.send(Message::new(1, Body::Hello(vec![])));
    // Frames of type 0x88b5 go to the controller: on "new" from global
    // port 1 (table 0), on "old" from global port 2 (table 1, 1.0).
    c.send(Message::new(2, Body::FlowMod(punt(0, 0x13, 1))));
    c.send(Message::new(3, Body::FlowMod(punt(1, 0x10, 2))));
    c.send(Message::new(4, Body::BarrierRequest));
    assert_eq!(c.next(), Message::new(4, Body::BarrierReply));
    let frame = |text: &[u8]| {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[2, 0x4e, 0x46, 0, 0, 9, 0x88, 0xb5]);
        f.extend_from_slice(text);
        f.resize(64, 0xa5);
        f
    };
    // Out of global port 2: the 1.0 switch's PACKET_OUT (old port 1).
    let a = frame(b"nflab 1.0 packet-out");
    c.send(Message::new(10, packet_out(2, &a)));
    let (_, total, table, in_port, data) = packet_in(&mut c);
    assert_eq!((table, in_port), (0, Some(1)), "from the 1.3 switch");
    assert_eq!((usize::from(total), data), (a.len(), a.clone()));
    // Out of global port 1 (new): it reaches the 1.0 switch's port 1 and
    // comes back as its 1.0 PACKET_IN, read as 1.3.
    let b = frame(b"nflab 1.0 packet-in");
    c.send(Message::new(11, packet_out(1, &b)));
    let (buffer_id, total, table, in_port, data) = packet_in(&mut c);
    assert_eq!((table, in_port), (1, Some(2)), "from the 1.0 switch");
    assert_eq!(buffer_id, NO_BUFFER);
    assert_eq!((usize::from(total), data), (b.len(), b.clone()));
    // Both crossed the cable once each: the bridges' own counters say so.
    let ports = ovs.ofctl_as("OpenFlow10", &["dump-ports", "old"]).unwrap();
    let old1 = ofctl_ports(&ports)
        .into_iter()
        .find(|(n, _)| n == "1")
        .unwrap()
        .1;
    assert_eq!(
        (old1[0], old1[1]),
        (1, 1),
        "old port 1 rx/tx packets: {ports}"
    );

    drop(c);
    handle.stop().unwrap();
    ovs.stop();
}

/// A transparent proxy in front of a 1.0 bridge: the controller's DESC,
/// PORT_DESC and PORT_STATS requests are answered with the bridge's own
/// description (`ovs-ofctl dump-desc`), its ports (from its 1.0 features)
/// and its counters, in 1.3.
#[test]
fn a_transparent_proxy_gives_a_1_0_bridges_description_and_ports() {
    if !ready() {
        return;
    }
    let Lab {
        mut c,
        handle,
        ovs,
        ns,
    } = lab("sdnv10tr", true);
    c.send(Message::new(1, Body::Hello(vec![])));
    c.send(Message::new(2, Body::MultipartRequest(mp::DESC, 0, vec![])));
    let d = Desc::decode(&multipart(&mut c, 2, mp::DESC)).unwrap();
    let text = ovs.ofctl_as("OpenFlow10", &["dump-desc", "old"]).unwrap();
    let line = |key: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in {text}"))
            .trim()
            .to_string()
    };
    assert_eq!(d.mfr_desc, line("Manufacturer:"), "{text}");
    assert_eq!(d.hw_desc, line("Hardware:"), "{text}");
    assert_eq!(d.sw_desc, line("Software:"), "{text}");
    assert_eq!(d.dp_desc, line("DP Description:"), "{text}");
    c.send(Message::new(
        3,
        Body::MultipartRequest(mp::PORT_DESC, 0, vec![]),
    ));
    let mut ports: Vec<(u32, String)> = Port::decode_all(&multipart(&mut c, 3, mp::PORT_DESC))
        .unwrap()
        .into_iter()
        .map(|p| (p.port_no, p.name.to_string()))
        .collect();
    ports.sort();
    assert_eq!(
        ports,
        [
            (1, "y2".to_string()),
            (2, "y3".into()),
            (0xffff_fffe, "old".into())
        ]
    );
    // Frames into port 2, counted in port 2's statistics (local numbers).
    let tx = NetnsGuard::run(Some(ns.name()), || UdpSocket::bind("198.18.99.1:0"))
        .unwrap()
        .unwrap();
    for _ in 0..FRAMES {
        tx.send_to(&[0u8; PAYLOAD], "198.18.99.2:9").unwrap();
    }
    // (Asked again until the counters have caught up, at most 15 s.)
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let mut xid = 4;
    let got = loop {
        c.send(Message::new(
            xid,
            Body::MultipartRequest(mp::PORT_STATS, 0, port_stats_request(2)),
        ));
        let got = PortStats::decode_all(&multipart(&mut c, xid, mp::PORT_STATS)).unwrap();
        assert_eq!(got.len(), 1, "{got:?}");
        if got[0].counters.rx_packets >= FRAMES || std::time::Instant::now() > deadline {
            break got;
        }
        xid += 1;
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        (
            got[0].port_no,
            got[0].counters.rx_packets,
            got[0].counters.rx_bytes
        ),
        (2, FRAMES, FRAMES * FRAME_LEN)
    );

    drop(c);
    handle.stop().unwrap();
    ovs.stop();
}
