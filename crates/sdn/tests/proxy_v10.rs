//! The proxy with a switch that speaks only OpenFlow 1.0 (an Open vSwitch
//! bridge with `protocols=OpenFlow10`) beside one that speaks 1.3: the
//! controller sees one 1.3 switch; its FLOW_MODs, barriers and flow-stats
//! requests reach the 1.0 switch in 1.0, what the switch answers (flow
//! stats, FLOW_REMOVED) comes back in 1.3 and global terms, and what 1.0
//! cannot do (GOTO_TABLE) is refused with a 1.3 error.

use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use nflab_sdn::conn::{send, Reader};
use nflab_sdn::netns::{run, NetnsGuard, PrivateNetns};
use nflab_sdn::of13::message::{Body, Message, MULTIPART_MORE};
use nflab_sdn::of13::multipart::{mp, FlowStats, FlowStatsRequest, Port};
use nflab_sdn::of13::oxm::field;
use nflab_sdn::of13::{Action, FlowMod, Instruction, Match, Oxm};
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

#[test]
fn a_switch_that_speaks_only_openflow_1_0_behind_the_proxy() {
    if !(nflab_testkit::require_root()
        && nflab_testkit::require_tool("ovs-vswitchd", "openvswitch-switch"))
    {
        return;
    }
    let ns = PrivateNetns::create("sdnv10").unwrap();
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
    let ovs = Ovs::start(Some(ns.name())).unwrap();
    let guard = NetnsGuard::enter(ns.name()).unwrap();
    let ctl_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let text = CONFIG.replace(
        "CONTROLLER",
        &ctl_listener.local_addr().unwrap().to_string(),
    );
    let cfg: ProxyConfig = toml::from_str(&text).unwrap();
    let handle = proxy::start(cfg).unwrap();
    let target = format!("tcp:{}", handle.listen);
    for (br, dpid, proto, ports) in [
        ("new", 0xc1, "OpenFlow13", vec![("y1", 1)]),
        ("old", 0xc2, "OpenFlow10", vec![("y2", 1), ("y3", 2)]),
    ] {
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
    let mut c = Ctl {
        w: s.try_clone().unwrap(),
        r: Reader::new(s),
    };
    drop(guard);

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

    // No traffic: the 1.0 flow times out after 1 s and its FLOW_REMOVED
    // reaches the controller as 1.3, in global terms.
    let removed = loop {
        let m = c.next();
        if let Body::FlowRemoved(fr) = m.body {
            break fr;
        }
    };
    assert_eq!(
        (removed.cookie, removed.table_id, removed.reason),
        (0x10, 1, 0)
    );
    assert_eq!(removed.matches.in_port(), Some(2));

    drop(c);
    handle.stop().unwrap();
    ovs.stop();
}
