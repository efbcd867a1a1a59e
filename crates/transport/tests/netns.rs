//! The transport over real UDP sockets between two network namespaces joined by a veth
//! pair, both directions at once, with 5 % Bernoulli loss injected by the sender's hook
//! (this kernel has no netem).

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::process::Command;

use nflab_transport::udp::{now_ns, Received, UdpDriver};
use nflab_transport::{Config, ReceiverStats, SenderState, SenderStats};

const MS: u64 = 1_000_000;

fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A network namespace that exists exactly as long as this value.
struct Netns {
    name: String,
}

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("nflabtest-prrt-{}-{tag}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        run("ip", &["netns", "add", &name]);
        Netns { name }
    }

    fn ip(&self, args: &str) {
        let mut a = vec!["-n", &self.name];
        a.extend(args.split_whitespace());
        run("ip", &a);
    }

    /// Run `f` on a fresh thread that has entered this namespace (setns is per thread).
    fn spawn<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let path = format!("/run/netns/{}", self.name);
        std::thread::spawn(move || {
            let file = std::fs::File::open(&path).expect("open netns file");
            nix::sched::setns(file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            f()
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let ok = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("warning: could not delete network namespace {}", self.name);
        }
    }
}

struct Side {
    sender: SenderStats,
    receiver: ReceiverStats,
    received: Vec<Received>,
    hook_dropped: u64,
}

/// One end: send `payload_bytes` every `gap_ns` for `send_ns`, then keep receiving for
/// `drain_ns`.
fn endpoint(
    local: SocketAddr,
    peer: SocketAddr,
    config: Config,
    window_ns: u64,
    seed: u64,
) -> Side {
    let socket = UdpSocket::bind(local).expect("bind");
    let mut driver = UdpDriver::new(socket, peer, config, window_ns).expect("driver");
    driver.set_tx_loss(0.05, seed);
    let (gap_ns, send_ns, drain_ns) = (MS, 4_000 * MS, 500 * MS);
    let start = now_ns();
    let mut next_send = start;
    let mut received = Vec::new();
    let payload = vec![0x5au8; 200];
    while next_send < start + send_ns {
        driver.run_until(next_send, &mut received).expect("run");
        driver
            .endpoint
            .sender
            .send(&payload, now_ns())
            .expect("send");
        next_send += gap_ns;
    }
    driver
        .run_until(next_send + drain_ns, &mut received)
        .expect("drain");
    Side {
        sender: driver.endpoint.sender.stats().clone(),
        receiver: driver.endpoint.receiver.stats().clone(),
        received,
        hook_dropped: driver.tx_hook_dropped,
    }
}

#[test]
fn both_directions_over_veth_with_five_percent_loss_meet_the_goal() {
    if !nflab_testkit::require_root() {
        return;
    }
    let plant = Netns::new("p");
    let controller = Netns::new("c");
    plant.ip(&format!(
        "link add pv type veth peer name cv netns {}",
        controller.name
    ));
    plant.ip("addr add 198.18.0.1/24 dev pv");
    controller.ip("addr add 198.18.0.2/24 dev cv");
    for ns in [&plant, &controller] {
        ns.ip("link set lo up");
    }
    plant.ip("link set pv up");
    controller.ip("link set cv up");

    let config = Config {
        target_delay_ns: 100 * MS,
        block_size: 16,
        proactive_parity: 2,
        max_parity: 16,
        block_timeout_ns: 30 * MS,
        // This host is two cores shared with other work: scheduling stalls of a few ms are
        // common, and a margin below them would send redundancy for blocks already acked.
        reactive_margin_ns: 5 * MS,
        ..Config::default()
    };
    // Half the target: the hold must survive the host's scheduling stalls (see above).
    let window_ns = 50 * MS;
    let p_addr: SocketAddr = "198.18.0.1:47000".parse().expect("addr");
    let c_addr: SocketAddr = "198.18.0.2:47000".parse().expect("addr");
    let (cfg_p, cfg_c) = (config.clone(), config);
    let p = plant.spawn(move || endpoint(p_addr, c_addr, cfg_p, window_ns, 11));
    let c = controller.spawn(move || endpoint(c_addr, p_addr, cfg_c, window_ns, 12));
    let p = p.join().expect("plant thread");
    let c = c.join().expect("controller thread");

    for (name, from, to) in [("pc", &p, &c), ("cp", &c, &p)] {
        let sent = from.sender.submitted;
        let delivered = to.receiver.delivered;
        let residual = 1.0 - delivered as f64 / sent as f64;
        let redundancy = from.sender.parity_bytes as f64 / from.sender.data_payload_bytes as f64;
        eprintln!(
            "{name}: sent {sent}, delivered {delivered}, residual {residual:.5}, redundancy {redundancy:.4}, \
             hook dropped {}, recovered {}, reactive {}",
            from.hook_dropped, to.receiver.recovered, from.sender.reactive_parity_packets
        );
        assert_eq!(sent, 4000);
        assert_eq!(to.received.len() as u64, delivered);
        // The loss was real: about 5 % of everything the sender sent never left.
        assert!(from.hook_dropped as f64 > 0.03 * from.sender.data_packets as f64);
        assert!(to.receiver.recovered > 0);
        assert!(
            residual <= 0.001,
            "{name}: residual loss {residual}: sender {:?} receiver {:?}",
            from.sender,
            to.receiver
        );
        assert!(redundancy <= 0.25, "{name}: redundancy {redundancy}");
        assert_eq!(to.receiver.blocks_evicted, 0, "{name}: {:?}", to.receiver);
        // m6 within the window of each deadline (one clock on one host).
        for r in &to.received {
            assert!(r.app_recv_ns >= r.delivery.app_send_ns);
            assert!(r.app_recv_ns <= r.delivery.deadline_ns);
            assert!(r.delivery.deadline_ns - r.app_recv_ns <= window_ns);
        }
    }
}

#[test]
fn a_peer_that_vanishes_stops_the_sender_after_its_timeout() {
    if !nflab_testkit::require_root() {
        return;
    }
    let plant = Netns::new("vp");
    let controller = Netns::new("vc");
    plant.ip(&format!(
        "link add pv type veth peer name cv netns {}",
        controller.name
    ));
    plant.ip("addr add 198.18.0.1/24 dev pv");
    controller.ip("addr add 198.18.0.2/24 dev cv");
    plant.ip("link set pv up");
    controller.ip("link set cv up");
    let config = Config {
        target_delay_ns: 20 * MS,
        peer_timeout_ns: 500 * MS,
        ..Config::default()
    };
    let p_addr: SocketAddr = "198.18.0.1:47001".parse().expect("addr");
    let c_addr: SocketAddr = "198.18.0.2:47001".parse().expect("addr");
    let (cfg_p, cfg_c) = (config.clone(), config);
    // The controller answers for 1 s, then its socket closes.
    let c = controller.spawn(move || {
        let socket = UdpSocket::bind(c_addr).expect("bind");
        let mut driver = UdpDriver::new(socket, p_addr, cfg_c, 5 * MS).expect("driver");
        let mut out = Vec::new();
        driver
            .run_until(now_ns() + 1_000 * MS, &mut out)
            .expect("run");
        out.len()
    });
    let p = plant.spawn(move || {
        let socket = UdpSocket::bind(p_addr).expect("bind");
        let mut driver = UdpDriver::new(socket, c_addr, cfg_p, 5 * MS).expect("driver");
        let start = now_ns();
        let mut out = Vec::new();
        let mut refused = 0;
        // Send every 5 ms for up to 3 s; stop early once the sender has given up.
        for i in 0..600u64 {
            driver.run_until(start + i * 5 * MS, &mut out).expect("run");
            if driver.endpoint.sender.send(&[1u8; 50], now_ns()).is_err() {
                refused += 1;
                break;
            }
        }
        (start, now_ns(), driver.endpoint.sender.state(), refused)
    });
    let delivered_to_controller = c.join().expect("controller");
    let (start, end, state, refused) = p.join().expect("plant");
    assert!(delivered_to_controller > 100, "{delivered_to_controller}");
    let SenderState::PeerLost {
        last_feedback_ns,
        detected_ns,
    } = state
    else {
        panic!("sender still running after the peer vanished");
    };
    assert_eq!(refused, 1);
    // Last feedback within the controller's second, detection one timeout later, and the
    // loop ended right after, not at its 3 s bound.
    assert!(last_feedback_ns > start && last_feedback_ns < start + 1_200 * MS);
    assert!(detected_ns >= last_feedback_ns + 500 * MS);
    assert!(
        end < start + 2_500 * MS,
        "the plant ran {} ms",
        (end - start) / MS
    );
}
