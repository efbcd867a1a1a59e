//! The proxy between a controller (this test, speaking OpenFlow 1.3 with the
//! codec) and two real Open vSwitch bridges: the emulated switch's features
//! and ports, echo, refusals, table and port maps, cross-device GOTO,
//! barrier fan-in, multipart with MORE, and a switch that goes away and
//! comes back. Config mistakes: one sentence each.

use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use nflab_sdn::conn::{send, Reader};
use nflab_sdn::netns::{run, NetnsGuard, PrivateNetns};
use nflab_sdn::of13::message::{error, Body, Message, MULTIPART_MORE};
use nflab_sdn::of13::multipart::{mp, FlowStats, FlowStatsRequest, Port, PORT_STATE_LINK_DOWN};
use nflab_sdn::of13::oxm::field;
use nflab_sdn::of13::{Action, FlowMod, Instruction, Match, Oxm};
use nflab_sdn::ovs::{BridgeOptions, Ovs};
use nflab_sdn::proxy::{self, ProxyConfig};

const CONFIG: &str = r#"
[proxy]
listen = "127.0.0.1:0"
controller = "CONTROLLER"
datapath_id = 0xe1
apps = ["log", "multi-switch"]
log = "LOG"
connect_timeout_s = 60

[[switch]]
name = "s1"
datapath_id = 0xb1
[[switch]]
name = "s2"
datapath_id = 0xb2

[[table]]
id = 0
switch = "s1"
local = 0
[[table]]
id = 1
switch = "s2"
local = 1
[[table]]
id = 2
switch = "s2"
local = 2

[[port]]
id = 1
switch = "s1"
local = 1
[[port]]
id = 2
switch = "s2"
local = 1

[[link]]
from = "s1"
from_port = 10
to = "s2"
to_port = 10
"#;

fn parse(text: &str) -> Result<ProxyConfig, String> {
    let dir = nflab_testkit::scratch_dir("proxy-cfg");
    let p = dir.join(format!("{}.toml", text.len()));
    std::fs::write(&p, text).unwrap();
    let r = ProxyConfig::load(&p).map_err(|e| e.to_string());
    let _ = std::fs::remove_file(&p);
    r
}

#[test]
fn bad_configs_are_one_sentence_naming_the_key() {
    let good = CONFIG
        .replace("CONTROLLER", "127.0.0.1:1")
        .replace("LOG", "/dev/null");
    parse(&good).unwrap();
    for (from, to, want) in [
        (
            "switch = \"s2\"\nlocal = 2",
            "switch = \"s9\"\nlocal = 2",
            "names switch \"s9\", which is not a [[switch]]",
        ),
        (
            "id = 2\nswitch = \"s2\"\nlocal = 1",
            "id = 3\nswitch = \"s2\"\nlocal = 1",
            "port 2 is missing",
        ),
        (
            "apps = [\"log\", \"multi-switch\"]",
            "apps = [\"log\", \"mirror\"]",
            "proxy.apps has \"mirror\"",
        ),
        (
            "id = 1\nswitch = \"s2\"\nlocal = 1",
            "id = 1\nswitch = \"s2\"\nlocal = 0",
            "use local >= 1",
        ),
        (
            "datapath_id = 0xb2",
            "datapath_id = 0xb1",
            "like another switch",
        ),
        ("listen = ", "lissen = ", "unknown field `lissen`"),
    ] {
        assert!(good.contains(from), "{from}");
        let e = parse(&good.replacen(from, to, 1)).unwrap_err();
        assert!(e.contains(want), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}

#[test]
fn a_listen_address_beyond_loopback_is_refused_unless_allowed() {
    let good = CONFIG
        .replace("CONTROLLER", "127.0.0.1:1")
        .replace("LOG", "/dev/null");
    let listen = "listen = \"127.0.0.1:0\"";
    assert!(good.contains(listen));
    for open in ["0.0.0.0:6653", "198.18.0.1:6653", "[::]:6653"] {
        let e = parse(&good.replacen(listen, &format!("listen = \"{open}\""), 1)).unwrap_err();
        assert!(
            e.contains(&format!("proxy.listen = \"{open}\""))
                && e.contains("not a loopback address")
                && e.contains("allow_remote_switches = true"),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
        let allowed = good.replacen(
            listen,
            &format!("listen = \"{open}\"\nallow_remote_switches = true"),
            1,
        );
        parse(&allowed).unwrap();
    }
    for local in ["[::1]:0", "localhost:0", "127.0.0.2:0"] {
        parse(&good.replacen(listen, &format!("listen = \"{local}\""), 1)).unwrap();
    }
    // Started from a config built in code, the check holds too.
    let mut cfg = parse(&good).unwrap();
    cfg.proxy.listen = "0.0.0.0:0".into();
    let e = proxy::start(cfg).err().unwrap().to_string();
    assert!(e.contains("not a loopback address"), "{e}");
}

#[test]
fn a_switch_that_never_connects_is_named() {
    let mut cfg: ProxyConfig = toml::from_str(
        &CONFIG
            .replace("CONTROLLER", "127.0.0.1:1")
            .replace("LOG", "/dev/null"),
    )
    .unwrap();
    cfg.proxy.connect_timeout_s = 0.3;
    cfg.proxy.apps = vec!["multi-switch".into()];
    let h = proxy::start(cfg).unwrap();
    std::thread::sleep(Duration::from_millis(600));
    assert!(h.is_finished());
    let e = h.stop().unwrap_err().to_string();
    assert!(
        e.contains("\"s1\" (0xb1), \"s2\" (0xb2) did not connect"),
        "{e}"
    );
}

struct Ctl {
    w: TcpStream,
    r: Reader,
}

impl Ctl {
    fn send(&mut self, m: Message) {
        send(&mut self.w, &m).unwrap();
    }
    /// The next message that is not a port status or hello.
    fn next(&mut self) -> Message {
        loop {
            let (m, _) = self.r.expect("a message from the proxy").unwrap();
            if !matches!(m.body, Body::PortStatus(_) | Body::Hello(_)) {
                return m;
            }
        }
    }
    fn port_status(&mut self, port: u32) -> u32 {
        loop {
            let (m, _) = self.r.expect("a port status").unwrap();
            if let Body::PortStatus(p) = m.body {
                if p.port.port_no == port {
                    return p.port.state;
                }
            }
        }
    }
}

fn flow(table: u8, dst: u8, instructions: Vec<Instruction>) -> FlowMod {
    FlowMod::add(
        table,
        10,
        Match::new(vec![
            Oxm::basic(field::ETH_TYPE, &0x0800u16.to_be_bytes()),
            Oxm::basic(field::IPV4_DST, &[198, 19, 0, dst]),
        ]),
        instructions,
    )
}

#[test]
fn the_emulated_switch_over_two_bridges() {
    if !(nflab_testkit::require_root()
        && nflab_testkit::require_tool("ovs-vswitchd", "openvswitch-switch")
        && nflab_testkit::require_tool("setpriv", "util-linux"))
    {
        return;
    }
    let ns = PrivateNetns::create("sdnproxy").unwrap();
    run(
        "ip",
        &[
            "-n",
            ns.name(),
            "link",
            "add",
            "x1",
            "type",
            "veth",
            "peer",
            "name",
            "x2",
        ],
    )
    .unwrap();
    for dev in ["x1", "x2"] {
        run("ip", &["-n", ns.name(), "link", "set", dev, "up"]).unwrap();
    }
    let ovs = Ovs::start(Some(ns.name())).unwrap();
    let log = ovs.dir().join("control.log");
    let guard = NetnsGuard::enter(ns.name()).unwrap();
    let ctl_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let text = CONFIG
        .replace(
            "CONTROLLER",
            &ctl_listener.local_addr().unwrap().to_string(),
        )
        .replace("LOG", &log.display().to_string());
    let handle = proxy::start(toml::from_str(&text).unwrap()).unwrap();
    let target = format!("tcp:{}", handle.listen);
    for (br, dpid, port, patch, peer) in [
        ("s1", 0xb1, "x1", "p12", "p21"),
        ("s2", 0xb2, "x2", "p21", "p12"),
    ] {
        ovs.add_bridge(
            br,
            &BridgeOptions {
                controller: Some(target.clone()),
                datapath_id: Some(dpid),
                protocols: None,
            },
        )
        .unwrap();
        ovs.add_port(br, port, 1).unwrap();
        ovs.add_patch(br, patch, peer, 10).unwrap();
    }
    // The proxy connects once both switches are there.
    let (s, _) = ctl_listener.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut c = Ctl {
        w: s.try_clone().unwrap(),
        r: Reader::new(s),
    };
    drop(guard);

    c.send(Message::new(1, Body::Hello(vec![])));
    c.send(Message::new(2, Body::FeaturesRequest));
    let m = c.next();
    let Body::FeaturesReply(f) = m.body else {
        panic!("{m:?}")
    };
    assert_eq!((m.xid, f.datapath_id, f.n_tables), (2, 0xe1, 3));

    c.send(Message::new(3, Body::EchoRequest(b"abc".to_vec())));
    assert_eq!(c.next(), Message::new(3, Body::EchoReply(b"abc".to_vec())));

    c.send(Message::new(
        4,
        Body::MultipartRequest(mp::PORT_DESC, 0, vec![]),
    ));
    let m = c.next();
    let Body::MultipartReply(mp::PORT_DESC, 0, body) = m.body else {
        panic!("{m:?}")
    };
    let ports = Port::decode_all(&body).unwrap();
    let got: Vec<(u32, String)> = ports
        .iter()
        .map(|p| (p.port_no, p.name.to_string()))
        .collect();
    assert_eq!(got, [(1, "x1".to_string()), (2, "x2".into())]);

    // A message this switch does not do (GROUP_MOD): an OpenFlow error, as a switch sends.
    let group_mod = Message::new(5, Body::Other(15, vec![0, 0, 0, 0, 0, 0, 0, 1]));
    c.send(group_mod.clone());
    let m = c.next();
    let Body::Error(e) = m.body else {
        panic!("{m:?}")
    };
    assert_eq!(
        (m.xid, e.typ, e.code),
        (5, error::BAD_REQUEST, error::BAD_TYPE)
    );
    assert_eq!(e.data, group_mod.encode());

    // A table the emulated switch does not have.
    c.send(Message::new(6, Body::FlowMod(flow(7, 1, vec![]))));
    let m = c.next();
    let Body::Error(e) = m.body else {
        panic!("{m:?}")
    };
    assert_eq!(
        (e.typ, e.code),
        (error::FLOW_MOD_FAILED, error::FLOW_MOD_BAD_TABLE_ID)
    );

    // Flows over both devices, then one barrier: one reply after both switches'.
    let out2 = vec![Instruction::ApplyActions(vec![Action::Output {
        port: 2,
        max_len: 0,
    }])];
    c.send(Message::new(
        10,
        Body::FlowMod(flow(
            0,
            1,
            vec![
                Instruction::WriteMetadata {
                    metadata: 5,
                    mask: 0xff,
                },
                Instruction::GotoTable(1),
            ],
        )),
    ));
    c.send(Message::new(
        11,
        Body::FlowMod(flow(1, 1, vec![Instruction::GotoTable(2)])),
    ));
    c.send(Message::new(12, Body::FlowMod(flow(1, 2, out2.clone()))));
    c.send(Message::new(13, Body::FlowMod(flow(2, 1, out2.clone()))));
    c.send(Message::new(14, Body::BarrierRequest));
    assert_eq!(c.next(), Message::new(14, Body::BarrierReply));

    // On the devices: s1 holds the GOTO as a tagged OUTPUT on the link, s2
    // the proxy's entry rule (pop the tag, metadata 5, go on in local table 1).
    let s1 = ovs.dump_flows("s1").unwrap();
    assert_eq!(s1.len(), 1, "{s1:?}");
    assert!(
        s1[0].contains("push_vlan:0x8100")
            && s1[0].contains("set_field:4102->vlan_vid")
            && s1[0].contains("output:10"),
        "{s1:?}"
    );
    let s2 = ovs.dump_flows("s2").unwrap();
    assert_eq!(s2.len(), 4, "{s2:?}");
    let entry = s2.iter().find(|f| !f.contains("table=")).unwrap(); // table 0 is printed without "table="
    assert!(
        entry.contains("in_port=10")
            && entry.contains("pop_vlan")
            && entry.contains("write_metadata:0x5/0xff")
            && entry.contains("goto_table:1"),
        "{entry}"
    );
    assert!(
        s2.iter()
            .any(|f| f.contains("table=1") && f.contains("goto_table:2")),
        "{s2:?}"
    );
    assert!(
        s2.iter()
            .any(|f| f.contains("table=2") && f.contains("output:1")),
        "{s2:?}"
    );

    // Flow stats over all tables: a part per switch, MORE on all but the last;
    // global table ids and ports, the proxy's own rule hidden.
    c.send(Message::new(
        20,
        Body::MultipartRequest(mp::FLOW, 0, FlowStatsRequest::all().encode()),
    ));
    let mut parts = Vec::new();
    loop {
        let m = c.next();
        let Body::MultipartReply(mp::FLOW, flags, body) = m.body else {
            panic!("{m:?}")
        };
        assert_eq!(m.xid, 20);
        parts.push(FlowStats::decode_all(&body).unwrap());
        if flags & MULTIPART_MORE == 0 {
            break;
        }
    }
    assert_eq!(parts.len(), 2, "one part per switch");
    let mut tables: Vec<u8> = parts.iter().flatten().map(|f| f.table_id).collect();
    tables.sort_unstable();
    assert_eq!(tables, [0, 1, 1, 2]);
    // The cross-device GOTO reads back as the controller wrote it.
    let t0 = parts.iter().flatten().find(|f| f.table_id == 0).unwrap();
    assert_eq!(
        t0.instructions,
        [
            Instruction::WriteMetadata {
                metadata: 5,
                mask: 0xff
            },
            Instruction::GotoTable(1)
        ]
    );
    let t2 = parts.iter().flatten().find(|f| f.table_id == 2).unwrap();
    assert_eq!(t2.instructions, out2, "port 1 of s2 is global port 2 again");

    // Flow stats of one table go to its switch only.
    let mut req = FlowStatsRequest::all();
    req.table_id = 1;
    c.send(Message::new(
        21,
        Body::MultipartRequest(mp::FLOW, 0, req.encode()),
    ));
    let m = c.next();
    let Body::MultipartReply(mp::FLOW, 0, body) = m.body else {
        panic!("{m:?}")
    };
    assert_eq!(FlowStats::decode_all(&body).unwrap().len(), 2);

    // s2 goes away: its port is down on the emulated switch; it comes back: up again.
    ovs.vsctl(&["del-controller", "s2"]).unwrap();
    assert_eq!(
        c.port_status(2) & PORT_STATE_LINK_DOWN,
        PORT_STATE_LINK_DOWN
    );
    ovs.vsctl(&["set-controller", "s2", &target]).unwrap();
    assert_eq!(c.port_status(2) & PORT_STATE_LINK_DOWN, 0);
    // And barriers fan in over both again.
    c.send(Message::new(30, Body::BarrierRequest));
    assert_eq!(c.next(), Message::new(30, Body::BarrierReply));

    // PACKET_OUT to global port 2 (s2's x2): the frame crosses the veth to
    // x1 (s1, global port 1), where a flow sends it to the controller: a
    // PACKET_IN from global table 0, global port 1, with the frame.
    let to_ctl = vec![Instruction::ApplyActions(vec![Action::Output {
        port: nflab_sdn::of13::OFPP_CONTROLLER,
        max_len: 0xffff,
    }])];
    let mut punt = FlowMod::add(
        0,
        20,
        Match::new(vec![
            Oxm::basic(field::IN_PORT, &1u32.to_be_bytes()),
            Oxm::basic(field::ETH_TYPE, &0x88b5u16.to_be_bytes()),
        ]),
        to_ctl,
    );
    punt.cookie = 7;
    c.send(Message::new(40, Body::FlowMod(punt)));
    c.send(Message::new(41, Body::BarrierRequest));
    assert_eq!(c.next(), Message::new(41, Body::BarrierReply));
    let mut frame = vec![0xff; 6];
    frame.extend_from_slice(&[2, 0, 0, 0, 0, 9, 0x88, 0xb5]);
    frame.extend_from_slice(b"nflab packet-out through the proxy");
    let mut acts = Vec::new();
    Action::encode_list(
        &[Action::Output {
            port: 2,
            max_len: 0,
        }],
        &mut acts,
    );
    let mut po = Vec::new();
    po.extend_from_slice(&nflab_sdn::of13::NO_BUFFER.to_be_bytes());
    po.extend_from_slice(&nflab_sdn::of13::OFPP_CONTROLLER.to_be_bytes());
    po.extend_from_slice(&(acts.len() as u16).to_be_bytes());
    po.extend_from_slice(&[0; 6]);
    po.extend_from_slice(&acts);
    po.extend_from_slice(&frame);
    c.send(Message::new(42, Body::Other(13, po)));
    let m = c.next();
    let Body::Other(10, body) = m.body else {
        panic!("{m:?}")
    };
    assert_eq!(body[7], 0, "global table 0");
    let mut r = nflab_sdn::of13::buf::Reader::new(&body[16..], "match");
    assert_eq!(Match::decode(&mut r).unwrap().in_port(), Some(1));
    assert!(body.ends_with(&frame), "the frame came back unchanged");

    handle.stop().unwrap();
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(
        log_text
            .lines()
            .any(|l| l.contains("down controller type=14 xid=10")),
        "{log_text}"
    );
    assert!(
        log_text
            .lines()
            .any(|l| l.contains("up controller type=21 xid=14")),
        "{log_text}"
    );
    ovs.stop();
}
