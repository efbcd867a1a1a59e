//! A switch that disconnects while it owes statistics: the controller's
//! request completes without it, as a barrier does. The two switches are
//! scripted OpenFlow 1.3 peers on real sockets in a private namespace (OvS
//! answers too fast to be cut off at this point reliably); the proxy is the
//! real one.

use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use nflab_sdn::conn::{send, Reader};
use nflab_sdn::netns::{NetnsGuard, PrivateNetns};
use nflab_sdn::of13::message::{Body, Features, Message};
use nflab_sdn::of13::multipart::{mp, FlowStatsRequest, Port};
use nflab_sdn::of13::stats::AggregateStats;
use nflab_sdn::of13::PortName;
use nflab_sdn::proxy::{self, ProxyConfig};

const CONFIG: &str = r#"
[proxy]
listen = "127.0.0.1:0"
controller = "CONTROLLER"
datapath_id = 0xe4
connect_timeout_s = 30

[[switch]]
name = "stays"
datapath_id = 0xa1
[[switch]]
name = "leaves"
datapath_id = 0xa2

[[table]]
id = 0
switch = "stays"
local = 0
[[table]]
id = 1
switch = "leaves"
local = 0

[[port]]
id = 1
switch = "stays"
local = 1
[[port]]
id = 2
switch = "leaves"
local = 1
"#;

/// A scripted switch: handshake, then each AGGREGATE request is answered
/// with `answer`, or, with `None`, the connection is closed instead.
fn scripted_switch(proxy: std::net::SocketAddr, dpid: u64, answer: Option<AggregateStats>) {
    let s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = Reader::new(s);
    send(&mut w, &Message::new(1, Body::Hello(vec![]))).unwrap();
    while let Ok(Some((m, _))) = r.next_message() {
        let reply = match m.body {
            Body::FeaturesRequest => Body::FeaturesReply(Features {
                datapath_id: dpid,
                n_buffers: 0,
                n_tables: 1,
                auxiliary_id: 0,
                capabilities: 0,
            }),
            Body::MultipartRequest(mp::PORT_DESC, _, _) => {
                let mut body = Vec::new();
                Port {
                    port_no: 1,
                    hw_addr: [2, 0, 0, 0, 0, dpid as u8],
                    name: PortName::new("p1"),
                    config: 0,
                    state: 0,
                    curr: 0,
                    advertised: 0,
                    supported: 0,
                    peer: 0,
                    curr_speed: 0,
                    max_speed: 0,
                }
                .encode(&mut body);
                Body::MultipartReply(mp::PORT_DESC, 0, body)
            }
            Body::MultipartRequest(mp::AGGREGATE, _, _) => match answer {
                Some(a) => {
                    let mut body = Vec::new();
                    a.encode(&mut body);
                    Body::MultipartReply(mp::AGGREGATE, 0, body)
                }
                None => return, // gone, owing its part
            },
            _ => continue,
        };
        send(&mut w, &Message::new(m.xid, reply)).unwrap();
    }
}

#[test]
fn statistics_a_disconnecting_switch_owes_complete_without_it() {
    if !nflab_testkit::require_root() {
        return;
    }
    let ns = PrivateNetns::create("sdnflt").unwrap();
    let _in_ns = NetnsGuard::enter(ns.name()).unwrap();
    let ctl_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let text = CONFIG.replace(
        "CONTROLLER",
        &ctl_listener.local_addr().unwrap().to_string(),
    );
    let cfg: ProxyConfig = toml::from_str(&text).unwrap();
    let handle = proxy::start(cfg).unwrap();
    let stays = AggregateStats {
        packet_count: 5,
        byte_count: 500,
        flow_count: 2,
    };
    let listen = handle.listen;
    let switches = [
        std::thread::spawn(move || scripted_switch(listen, 0xa1, Some(stays))),
        std::thread::spawn(move || scripted_switch(listen, 0xa2, None)),
    ];
    let (s, _) = ctl_listener.accept().unwrap();
    // Without the fix the reply never came: a timeout fails the test.
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = Reader::new(s);
    send(&mut w, &Message::new(1, Body::Hello(vec![]))).unwrap();
    send(
        &mut w,
        &Message::new(
            7,
            Body::MultipartRequest(mp::AGGREGATE, 0, FlowStatsRequest::all().encode()),
        ),
    )
    .unwrap();
    let reply = loop {
        let (m, _) = r.expect("the aggregate reply").unwrap();
        if let Body::MultipartReply(..) = m.body {
            break m;
        }
    };
    let Body::MultipartReply(mp::AGGREGATE, flags, body) = reply.body else {
        panic!("{reply:?}")
    };
    assert_eq!((reply.xid, flags), (7, 0));
    assert_eq!(AggregateStats::decode(&body).unwrap(), stays);
    drop((w, r));
    handle.stop().unwrap();
    for t in switches {
        t.join().unwrap();
    }
}
