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

/// One switch's port description, port `no`.
fn port(no: u32, dpid: u64) -> Port {
    Port {
        port_no: no,
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
}

/// A scripted switch's side of the handshake with the proxy at `proxy`: hello,
/// features (datapath id `dpid`), port 1. Its writer and reader.
fn handshake(proxy: std::net::SocketAddr, dpid: u64) -> (TcpStream, Reader) {
    let s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = Reader::new(s);
    send(&mut w, &Message::new(1, Body::Hello(vec![]))).unwrap();
    loop {
        let (m, _) = r.expect("the proxy's handshake").unwrap();
        let reply = match m.body {
            Body::FeaturesRequest => Body::FeaturesReply(Features {
                datapath_id: dpid,
                n_buffers: 0,
                n_tables: 2,
                auxiliary_id: 0,
                capabilities: 0,
            }),
            Body::MultipartRequest(mp::PORT_DESC, _, _) => {
                let mut body = Vec::new();
                port(1, dpid).encode(&mut body);
                send(
                    &mut w,
                    &Message::new(m.xid, Body::MultipartReply(mp::PORT_DESC, 0, body)),
                )
                .unwrap();
                return (w, r);
            }
            _ => continue,
        };
        send(&mut w, &Message::new(m.xid, reply)).unwrap();
    }
}

/// After [`handshake`], answer each request with `answer(request)` (None:
/// no answer) until the proxy closes the connection.
fn serve(mut w: TcpStream, mut r: Reader, answer: impl Fn(&Message) -> Option<Body>) {
    while let Ok(Some((m, _))) = r.next_message() {
        if let Some(b) = answer(&m) {
            if send(&mut w, &Message::new(m.xid, b)).is_err() {
                return;
            }
        }
    }
}

fn aggregate_body(a: AggregateStats) -> Vec<u8> {
    let mut body = Vec::new();
    a.encode(&mut body);
    body
}

/// The controller's side: the proxy's connection on `listener`, after HELLO.
fn controller(listener: &TcpListener) -> (TcpStream, Reader) {
    let (s, _) = listener.accept().unwrap();
    // A proxy that stopped serving never answers: this timeout fails the test.
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut w = s.try_clone().unwrap();
    send(&mut w, &Message::new(1, Body::Hello(vec![]))).unwrap();
    (w, Reader::new(s))
}

/// Every part of the multipart reply `xid`, bodies joined, up to its last.
fn multipart_reply(r: &mut Reader, xid: u32) -> Vec<u8> {
    let mut all = Vec::new();
    loop {
        let (m, _) = r.expect("a multipart reply").unwrap();
        if let (true, Body::MultipartReply(_, flags, body)) = (m.xid == xid, m.body) {
            all.extend(body);
            if flags & nflab_sdn::of13::message::MULTIPART_MORE == 0 {
                return all;
            }
        }
    }
}

fn aggregate(w: &mut TcpStream, r: &mut Reader, xid: u32) -> AggregateStats {
    let req = Body::MultipartRequest(mp::AGGREGATE, 0, FlowStatsRequest::all().encode());
    send(w, &Message::new(xid, req)).unwrap();
    AggregateStats::decode(&multipart_reply(r, xid)).unwrap()
}

/// The proxy of `config` (its controller on `ctl`), started in the caller's namespace.
fn start_proxy(config: &str, ctl: &TcpListener) -> proxy::ProxyHandle {
    let text = config.replace("CONTROLLER", &ctl.local_addr().unwrap().to_string());
    let cfg: ProxyConfig = toml::from_str(&text).unwrap();
    proxy::start(cfg).unwrap()
}

const STAYS: AggregateStats = AggregateStats {
    packet_count: 5,
    byte_count: 500,
    flow_count: 2,
};

#[test]
fn a_malformed_stats_reply_leaves_the_proxy_serving_every_switch() {
    if !nflab_testkit::require_root() {
        return;
    }
    let ns = PrivateNetns::create("sdnbad").unwrap();
    let _in_ns = NetnsGuard::enter(ns.name()).unwrap();
    let ctl = TcpListener::bind("127.0.0.1:0").unwrap();
    let handle = start_proxy(&CONFIG.replace("\"leaves\"", "\"garbled\""), &ctl);
    let listen = handle.listen;
    let (stays, garbled) = (
        std::thread::spawn(move || {
            let (w, r) = handshake(listen, 0xa1);
            serve(w, r, |m| match &m.body {
                Body::MultipartRequest(mp::AGGREGATE, _, _) => Some(Body::MultipartReply(
                    mp::AGGREGATE,
                    0,
                    aggregate_body(STAYS),
                )),
                Body::MultipartRequest(t @ (mp::PORT_STATS | mp::TABLE), _, _) => {
                    Some(Body::MultipartReply(*t, 0, Vec::new()))
                }
                _ => None,
            })
        }),
        std::thread::spawn(move || {
            let (w, r) = handshake(listen, 0xa2);
            serve(w, r, |m| match &m.body {
                // Port statistics of port 1 and 3 stray bytes; a table entry and 5.
                Body::MultipartRequest(mp::PORT_STATS, _, _) => {
                    let mut body = vec![0u8; 112 + 3];
                    body[..4].copy_from_slice(&1u32.to_be_bytes());
                    Some(Body::MultipartReply(mp::PORT_STATS, 0, body))
                }
                Body::MultipartRequest(mp::TABLE, _, _) => {
                    Some(Body::MultipartReply(mp::TABLE, 0, vec![0u8; 24 + 5]))
                }
                Body::MultipartRequest(mp::AGGREGATE, _, _) => Some(Body::MultipartReply(
                    mp::AGGREGATE,
                    0,
                    aggregate_body(AggregateStats {
                        packet_count: 1,
                        byte_count: 10,
                        flow_count: 1,
                    }),
                )),
                _ => None,
            })
        }),
    );
    let (mut w, mut r) = controller(&ctl);
    let any = nflab_sdn::of13::stats::port_stats_request(nflab_sdn::of13::OFPP_ANY);
    send(
        &mut w,
        &Message::new(5, Body::MultipartRequest(mp::PORT_STATS, 0, any)),
    )
    .unwrap();
    let ports = multipart_reply(&mut r, 5);
    // The whole entry, as global port 2; the stray bytes are not passed on.
    assert_eq!(ports.len(), 112, "{}", ports.len());
    assert_eq!(ports[..4], 2u32.to_be_bytes());
    send(
        &mut w,
        &Message::new(6, Body::MultipartRequest(mp::TABLE, 0, vec![])),
    )
    .unwrap();
    let tables = multipart_reply(&mut r, 6);
    assert_eq!(tables.len() % 24, 0, "{}", tables.len());
    // Both switches are still served.
    let sum = aggregate(&mut w, &mut r, 7);
    assert_eq!(
        (sum.packet_count, sum.byte_count, sum.flow_count),
        (6, 510, 3)
    );
    drop((w, r));
    handle.stop().unwrap();
    stays.join().unwrap();
    garbled.join().unwrap();
}

#[test]
fn a_switch_that_stops_reading_loses_its_connection_not_the_others() {
    if !nflab_testkit::require_root() {
        return;
    }
    let ns = PrivateNetns::create("sdnsil").unwrap();
    let _in_ns = NetnsGuard::enter(ns.name()).unwrap();
    // Small socket buffers in this namespace: the silent switch's fill at once.
    let small = std::process::Command::new("ip")
        .args(["netns", "exec", ns.name(), "sysctl", "-qw"])
        .args([
            "net.ipv4.tcp_rmem=4096 4096 4096",
            "net.ipv4.tcp_wmem=4096 4096 4096",
        ])
        .status()
        .unwrap();
    assert!(small.success());
    let ctl = TcpListener::bind("127.0.0.1:0").unwrap();
    let handle = start_proxy(&CONFIG.replace("\"leaves\"", "\"silent\""), &ctl);
    let listen = handle.listen;
    let stays = std::thread::spawn(move || {
        let (w, r) = handshake(listen, 0xa1);
        serve(w, r, |m| match &m.body {
            Body::MultipartRequest(mp::AGGREGATE, _, _) => Some(Body::MultipartReply(
                mp::AGGREGATE,
                0,
                aggregate_body(STAYS),
            )),
            _ => None,
        })
    });
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let silent = std::thread::spawn(move || {
        // Connected, and then it reads nothing more until the test ends.
        let held = handshake(listen, 0xa2);
        let _ = done_rx.recv();
        drop(held);
    });
    let (w, mut r) = controller(&ctl);
    // Frames out of port 2 (the silent switch's) — far more than its buffers
    // hold — then a question for every switch, from one writer.
    let writer = std::thread::spawn(move || {
        let mut w = w;
        let action = {
            let mut a = Vec::new();
            a.extend_from_slice(&0u16.to_be_bytes()); // OUTPUT
            a.extend_from_slice(&16u16.to_be_bytes());
            a.extend_from_slice(&2u32.to_be_bytes());
            a.extend_from_slice(&[0; 8]);
            a
        };
        let mut body = Vec::new();
        body.extend_from_slice(&0xffff_ffffu32.to_be_bytes()); // no buffer
        body.extend_from_slice(&0xffff_fffdu32.to_be_bytes()); // from the controller
        body.extend_from_slice(&(action.len() as u16).to_be_bytes());
        body.extend_from_slice(&[0; 6]);
        body.extend_from_slice(&action);
        body.resize(body.len() + 60_000, 0x5a);
        for xid in 100..300 {
            let m = Message::new(xid, Body::Other(13, body.clone()));
            if send(&mut w, &m).is_err() {
                break;
            }
        }
        let req = Body::MultipartRequest(mp::AGGREGATE, 0, FlowStatsRequest::all().encode());
        send(&mut w, &Message::new(9, req)).unwrap();
        w
    });
    // Answered, without the silent switch, which the proxy let go.
    let sum = AggregateStats::decode(&multipart_reply(&mut r, 9)).unwrap();
    assert_eq!(sum, STAYS);
    let w = writer.join().unwrap();
    let _ = done_tx.send(());
    drop((w, r));
    handle.stop().unwrap();
    stays.join().unwrap();
    silent.join().unwrap();
}

const ONE_SWITCH: &str = r#"
[proxy]
listen = "127.0.0.1:0"
controller = "CONTROLLER"
datapath_id = 0xe5
connect_timeout_s = 30

[[switch]]
name = "real"
datapath_id = 0xa1

[[table]]
id = 0
switch = "real"
local = 0

[[port]]
id = 1
switch = "real"
local = 1
"#;

/// A switch that answers AGGREGATE with `a`, until the proxy closes it or `quit` is sent.
fn answering(
    listen: std::net::SocketAddr,
    dpid: u64,
    a: AggregateStats,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let (w, r) = handshake(listen, dpid);
        serve(w, r, |m| match &m.body {
            Body::MultipartRequest(mp::AGGREGATE, _, _) => {
                Some(Body::MultipartReply(mp::AGGREGATE, 0, aggregate_body(a)))
            }
            _ => None,
        })
    })
}

#[test]
fn a_second_switch_claiming_a_connected_datapath_id_is_refused() {
    if !nflab_testkit::require_root() {
        return;
    }
    let ns = PrivateNetns::create("sdnhij").unwrap();
    let _in_ns = NetnsGuard::enter(ns.name()).unwrap();
    let ctl = TcpListener::bind("127.0.0.1:0").unwrap();
    let handle = start_proxy(ONE_SWITCH, &ctl);
    let listen = handle.listen;
    // The real switch, whose connection the test can cut.
    let (real_w, real_r) = handshake(listen, 0xa1);
    let cut = real_w.try_clone().unwrap();
    let real = std::thread::spawn(move || {
        serve(real_w, real_r, |m| match &m.body {
            Body::MultipartRequest(mp::AGGREGATE, _, _) => Some(Body::MultipartReply(
                mp::AGGREGATE,
                0,
                aggregate_body(STAYS),
            )),
            _ => None,
        })
    });
    let (mut w, mut r) = controller(&ctl);
    assert_eq!(aggregate(&mut w, &mut r, 20), STAYS);
    // An impostor with the same datapath id: it answers for the real switch,
    // and says so unasked too.
    let forged = AggregateStats {
        packet_count: 666,
        byte_count: 666,
        flow_count: 666,
    };
    let impostor = std::thread::spawn(move || {
        let (mut w, mut r) = handshake(listen, 0xa1);
        for xid in 21..24 {
            let body = Body::MultipartReply(mp::AGGREGATE, 0, aggregate_body(forged));
            let _ = send(&mut w, &Message::new(xid, body));
        }
        // Refused: the proxy closes it (a read timeout here would fail the test).
        loop {
            match r.next_message() {
                Ok(Some((m, _))) => {
                    if let Body::MultipartRequest(mp::AGGREGATE, _, _) = m.body {
                        let body = Body::MultipartReply(mp::AGGREGATE, 0, aggregate_body(forged));
                        let _ = send(&mut w, &Message::new(m.xid, body));
                    }
                }
                Ok(None) => return true,
                // A read timeout (EAGAIN) means it stayed open; a reset is a close.
                Err(e) => {
                    let e = e.to_string();
                    return !(e.contains("timed out") || e.contains("temporarily unavailable"));
                }
            }
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    for xid in 21..24 {
        assert_eq!(aggregate(&mut w, &mut r, xid), STAYS, "xid {xid}");
    }
    assert!(
        impostor.join().unwrap(),
        "the impostor's connection stayed open"
    );
    assert_eq!(aggregate(&mut w, &mut r, 25), STAYS);
    // The real switch goes: the next switch of that id is taken.
    cut.shutdown(std::net::Shutdown::Both).unwrap();
    real.join().unwrap();
    let back = AggregateStats {
        packet_count: 7,
        byte_count: 700,
        flow_count: 7,
    };
    let returned = answering(listen, 0xa1, back);
    let mut xid = 30;
    // Until its handshake is done the proxy has no switch to ask (zeros).
    let got = loop {
        let got = aggregate(&mut w, &mut r, xid);
        if got != AggregateStats::default() {
            break got;
        }
        xid += 1;
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(got, back);
    drop((w, r));
    handle.stop().unwrap();
    returned.join().unwrap();
}

#[test]
fn idle_connections_beyond_the_cap_are_closed_and_a_switch_still_gets_in() {
    if !nflab_testkit::require_root() {
        return;
    }
    let ns = PrivateNetns::create("sdncap").unwrap();
    let _in_ns = NetnsGuard::enter(ns.name()).unwrap();
    let ctl = TcpListener::bind("127.0.0.1:0").unwrap();
    let handle = start_proxy(ONE_SWITCH, &ctl);
    let listen = handle.listen;
    // Connections that never say hello: more than the proxy takes at once.
    let idle: Vec<TcpStream> = (0..proxy::MAX_SWITCH_CONNECTIONS + 8)
        .map(|_| {
            let s = TcpStream::connect(listen).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            s
        })
        .collect();
    // Every one is closed: those over the cap at once, the others when their
    // handshake time is up (a read timeout here fails the test).
    for mut s in idle {
        use std::io::Read;
        let mut buf = [0u8; 256];
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => continue, // the proxy's HELLO
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("an idle connection stayed open: {e}"),
            }
        }
    }
    let real = answering(listen, 0xa1, STAYS);
    let (mut w, mut r) = controller(&ctl);
    assert_eq!(aggregate(&mut w, &mut r, 40), STAYS);
    drop((w, r));
    handle.stop().unwrap();
    real.join().unwrap();
}

/// A peer that trickles its HELLO one byte at a time, each byte well within
/// the handshake limit of the one before: the limit is for the whole
/// handshake, so the proxy closes it about then (not once the message is
/// whole, minutes later), and a real switch still gets in.
#[test]
fn a_peer_trickling_its_handshake_is_closed_by_the_handshake_limit() {
    use std::io::{Read, Write};
    if !nflab_testkit::require_root() {
        return;
    }
    let ns = PrivateNetns::create("sdntrickle").unwrap();
    let _in_ns = NetnsGuard::enter(ns.name()).unwrap();
    let ctl = TcpListener::bind("127.0.0.1:0").unwrap();
    let handle = start_proxy(ONE_SWITCH, &ctl);
    let listen = handle.listen;
    let limit = proxy::HANDSHAKE_TIMEOUT;
    // A HELLO of 1000 bytes (header, then elements), at a byte each 250 ms:
    // whole only after more than 4 minutes.
    let mut hello = vec![4u8, 0, 0x03, 0xe8, 0, 0, 0, 1];
    hello.resize(1000, 0);
    let mut s = TcpStream::connect(listen).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(250)))
        .unwrap();
    let started = std::time::Instant::now();
    let mut sent = 0;
    let mut buf = [0u8; 256];
    let closed = loop {
        if started.elapsed() > 3 * limit {
            break false;
        }
        if s.write_all(&hello[sent..sent + 1]).is_err() {
            break true;
        }
        sent += 1;
        // The wait between bytes; the proxy's HELLO is read, its close seen.
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("{e}"),
        }
    };
    let took = started.elapsed();
    assert!(
        closed,
        "a trickling peer kept its handshake open for {took:?} ({sent} bytes), beyond 3 × {limit:?}"
    );
    assert!(took >= limit / 2, "closed after {took:?}, before its time");
    let real = answering(listen, 0xa1, STAYS);
    let (mut w, mut r) = controller(&ctl);
    assert_eq!(aggregate(&mut w, &mut r, 40), STAYS);
    drop((w, r));
    handle.stop().unwrap();
    real.join().unwrap();
}
