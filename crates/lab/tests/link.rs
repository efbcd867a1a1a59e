//! Accuracy of the link DuT on real namespaces (root): the lab topology with
//! `dut.kind = "link"`, frames sent from lg0 (or lg1) with their send time and
//! a sequence number, received on the other side. Delay is compared with the
//! configured one over the noise floor of the same path with no delay; loss
//! with the binomial bound and the Gilbert–Elliott closed form; the rate
//! limit with the received rate and the queue's drops.
//!
//! Run: `sudo -E cargo test -p nflab-lab --test link -- --nocapture --test-threads 1`
//! (each test prints what it measured).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nflab_analyze::dist::{Distribution, Pct};
use nflab_dataplane::config::LinkConfig;
use nflab_dataplane::emulator::LossModel;
use nflab_dataplane::sock::RawSocket;
use nflab_io::clock::monotonic_ns;
use nflab_io::PacketIo;
use nflab_lab::dut::link::{self, LinkStats};
use nflab_lab::net::netns::NetnsGuard;
use nflab_lab::spec::{DutKind, DutSection};
use nflab_lab::topo::{LG0_MAC, LG1_MAC};

/// The link's own experimental EtherType: nothing else on the wire has it.
const ETHERTYPE: [u8; 2] = [0x88, 0xb5];

/// What one probe stream saw: per sequence number, the one-way delay in ns
/// (`None` if it never came), the receive times, and the link's counters.
struct Probe {
    delays_ns: Vec<Option<i64>>,
    rx_ns: Vec<u64>,
    bytes_received: u64,
    stats: LinkStats,
}

fn link(toml_text: &str) -> DutSection {
    let link: LinkConfig = toml::from_str(toml_text).expect("link config");
    DutSection {
        kind: DutKind::Link,
        link: Some(link),
        ..DutSection::default()
    }
}

/// Send `n` frames of `len` bytes every `gap_ns` across the link (`reverse`:
/// lg1 → lg0) and collect them on the other side.
fn probe(dut: &DutSection, n: usize, gap_ns: u64, len: usize, reverse: bool) -> Probe {
    probe_with(dut, n, gap_ns, len, reverse, None)
}

/// [`probe`]; with `standalone` = the text of an `nflab dut` config file
/// (without `[ports]`, which is added for the topology), started as `nflab
/// dut` starts it.
fn probe_with(
    dut: &DutSection,
    n: usize,
    gap_ns: u64,
    len: usize,
    reverse: bool,
    standalone: Option<&str>,
) -> Probe {
    let topo = nflab_lab::dut::topology(DutKind::Link, 1).expect("topology");
    let link = match standalone {
        None => link::start(&topo, dut).expect("link DuT"),
        Some(text) => {
            let file =
                std::env::temp_dir().join(format!("nflab-link-dut-{}.toml", std::process::id()));
            let ns = topo.dut_ns.clone().expect("a DuT namespace");
            std::fs::write(
                &file,
                format!("{text}\n[ports]\ninput = \"dut0\"\noutput = \"dut1\"\nnetns = \"{ns}\"\n"),
            )
            .unwrap();
            let config = nflab_lab::dut::standalone::StandaloneConfig::from_file(&file);
            let _ = std::fs::remove_file(&file);
            link::start_standalone(&config.expect("the standalone config"))
                .expect("standalone link")
        }
    };
    let (tx_if, rx_if, dst) = if reverse {
        ("lg1", "lg0", LG0_MAC)
    } else {
        ("lg0", "lg1", LG1_MAC)
    };
    let (mut tx, mut rx) = {
        let _ns = NetnsGuard::enter(&topo.lg_ns).expect("enter lg");
        (
            RawSocket::open(tx_if, false, 32).expect("tx socket"),
            RawSocket::open(rx_if, true, 64).expect("rx socket"),
        )
    };
    let done = Arc::new(AtomicBool::new(false));
    let done_rx = Arc::clone(&done);
    let receiver = std::thread::spawn(move || {
        let mut delays_ns = vec![None; n];
        let mut rx_ns = Vec::with_capacity(n);
        let mut bytes = 0u64;
        let mut quiet_since = None;
        loop {
            let got = rx
                .rx_batch(64, Duration::from_millis(5), &mut |f, _| {
                    let now = monotonic_ns();
                    if f.len() < 26 || f[12..14] != ETHERTYPE {
                        return;
                    }
                    let seq = u32::from_be_bytes(f[14..18].try_into().unwrap()) as usize;
                    let sent = u64::from_be_bytes(f[18..26].try_into().unwrap());
                    if seq < delays_ns.len() {
                        delays_ns[seq] = Some(now as i64 - sent as i64);
                        rx_ns.push(now);
                        bytes += f.len() as u64;
                    }
                })
                .expect("receive");
            // Done when the sender has finished and nothing came for 300 ms.
            if got > 0 || !done_rx.load(Ordering::Relaxed) {
                quiet_since = None;
            } else if quiet_since.get_or_insert_with(monotonic_ns).elapsed_ms() > 300 {
                break;
            }
        }
        (delays_ns, rx_ns, bytes)
    });
    // Paced by sleeping, not spinning: the host has few cores, and a spinning
    // sender would take one from the link's workers.
    let _ = nflab_io::clock::set_timer_slack_ns(1);
    let t0 = monotonic_ns() + 20_000_000;
    for i in 0..n {
        let at = t0 + i as u64 * gap_ns;
        let now = monotonic_ns();
        if now < at {
            std::thread::sleep(Duration::from_nanos(at - now));
        }
        let sent = tx
            .tx_batch(1, &mut |_, buf| {
                buf[..len].fill(0);
                buf[0..6].copy_from_slice(&dst.0);
                buf[6..12].copy_from_slice(&[2, 0x4e, 0x46, 0xee, 0, 1]);
                buf[12..14].copy_from_slice(&ETHERTYPE);
                buf[14..18].copy_from_slice(&(i as u32).to_be_bytes());
                buf[18..26].copy_from_slice(&monotonic_ns().to_be_bytes());
                len
            })
            .expect("send");
        assert_eq!(sent, 1);
        tx.flush_tx().expect("flush");
    }
    done.store(true, Ordering::Relaxed);
    let (delays_ns, rx_ns, bytes_received) = receiver.join().expect("receiver");
    let stats = link.stop();
    assert_eq!(stats.error(), None);
    drop(topo);
    Probe {
        delays_ns,
        rx_ns,
        bytes_received,
        stats,
    }
}

trait Elapsed {
    fn elapsed_ms(&self) -> u64;
}
impl Elapsed for u64 {
    fn elapsed_ms(&self) -> u64 {
        (monotonic_ns() - *self) / 1_000_000
    }
}

/// Quartiles (q1, median, q3) and mean of the delays that came, in µs
/// (analyze's percentiles).
fn quartiles_us(p: &Probe) -> ([f64; 3], f64) {
    let mut d = Distribution::new(u64::MAX, 3);
    p.delays_ns.iter().flatten().for_each(|&x| d.record(x));
    let q = d.quantiles(&["25", "50", "75"].map(|s| Pct::parse(s).unwrap()));
    let v = |i: usize| q[i].expect("delays").value as f64 / 1e3;
    ([v(0), v(1), v(2)], d.mean().unwrap() / 1e3)
}

fn lost(p: &Probe) -> Vec<bool> {
    p.delays_ns.iter().map(Option::is_none).collect()
}

/// Fraction lost and mean length of loss bursts.
fn loss_and_bursts(lost: &[bool]) -> (f64, f64) {
    let n_lost = lost.iter().filter(|&&x| x).count();
    let bursts = lost
        .iter()
        .enumerate()
        .filter(|(i, &x)| x && (*i == 0 || !lost[i - 1]))
        .count();
    (
        n_lost as f64 / lost.len() as f64,
        n_lost as f64 / bursts.max(1) as f64,
    )
}

fn counter(stats: &nflab_dataplane::WorkerStats, key: &str) -> u64 {
    stats.apps[0].detail[key].as_u64().unwrap_or(0)
}

/// One measurement at a time: tests run in parallel threads, and two links
/// competing for the host's CPUs measure each other.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn configured_delay_is_measured_over_the_noise_floor_both_ways() {
    if !nflab_testkit::require_root() {
        return;
    }
    let _one_at_a_time = serial();
    let (n, gap) = (3_000, 200_000);
    let floor = probe(&link(""), n, gap, 64, false);
    let ([floor_q1, floor_median, floor_q3], floor_mean) = quartiles_us(&floor);
    let floor_sd = (floor_q3 - floor_q1) / 1.349;
    assert!(
        lost(&floor).iter().all(|&l| !l),
        "the bare link lost frames"
    );
    let dut = link(
        "delay_us = 5000\n[reverse]\ndelay_us = 2000\njitter_us = 300\ndistribution = \"normal\"\n",
    );
    let fwd = probe(&dut, n, gap, 64, false);
    let ([_, median, _], mean) = quartiles_us(&fwd);
    println!(
        "floor median {floor_median:.1} µs (mean {floor_mean:.1}); 5000 µs link: median {median:.1} µs (mean {mean:.1}); added at the median {:.1} µs",
        median - floor_median
    );
    // The median, not the mean: on a shared host a few frames wait for a CPU
    // for milliseconds, and the mean follows them. The bound is the issue's
    // 0.2 ms plus the floor's own interquartile range: a busy host wakes the
    // worker late for a release as it does for a receive.
    let bound = 200.0 + (floor_q3 - floor_q1);
    println!("bound ±{bound:.1} µs");
    assert!(
        (median - floor_median - 5000.0).abs() < bound,
        "median {median} µs over a floor of {floor_median} µs"
    );
    // A constant delay lets the worker sleep through arrivals: every frame keeps
    // its kernel receive stamp, and the held frames' releases were timed sleeps.
    let w = &fwd.stats.forward.worker;
    println!(
        "forward: {} of {n} frames kernel-stamped, {} sleeps through arrivals",
        w.kernel_stamped, w.held_sleeps
    );
    assert_eq!(w.kernel_stamped, n as u64);
    assert!(w.held_sleeps > 0, "the worker never slept through arrivals");
    // The other direction has its own delay, and its spread is at least the
    // configured sd (a normal's interquartile range is 1.349 sd); the host
    // adds its own, which on a busy one is larger than the link's (the
    // distribution itself is checked exactly in memory: dataplane's delayer
    // tests).
    let rev = probe(&dut, n, gap, 64, true);
    let ([q1, median, q3], mean) = quartiles_us(&rev);
    let sd_measured = (q3 - q1) / 1.349;
    println!("reverse 2000 µs, sd 300 µs, normal: median {median:.1} µs (mean {mean:.1}), sd from the IQR {sd_measured:.1} µs (the floor's {floor_sd:.1} µs)");
    assert!(
        (median - floor_median - 2000.0).abs() < bound,
        "median {median} µs"
    );
    assert!(sd_measured > 0.8 * 300.0, "sd {sd_measured} µs");
    assert_eq!(counter(&rev.stats.reverse, "packets_in"), n as u64);
    assert_eq!(counter(&rev.stats.forward, "packets_in"), 0);
    // A normal jitter can draw 0 µs: no frame is sure to be held, so the port
    // has no kernel stamps and the worker always waits on its input.
    let w = &rev.stats.reverse.worker;
    assert_eq!((w.kernel_stamped, w.held_sleeps), (0, 0));
}

#[test]
fn bernoulli_loss_is_within_the_binomial_bound() {
    if !nflab_testkit::require_root() {
        return;
    }
    let _one_at_a_time = serial();
    let (n, p) = (20_000, 0.05);
    let got = probe(
        &link("loss = { model = \"bernoulli\", p = 0.05 }"),
        n,
        50_000,
        64,
        false,
    );
    let (rate, _) = loss_and_bursts(&lost(&got));
    println!("bernoulli p = {p}: lost {rate:.4} of {n}");
    let bound = 4.0 * (p * (1.0 - p) / n as f64).sqrt();
    assert!((rate - p).abs() < bound, "{rate} vs {p} ± {bound}");
    // Every frame missing was lost by the model, not elsewhere.
    let lost_frames = lost(&got).iter().filter(|&&x| x).count() as u64;
    assert_eq!(counter(&got.stats.forward, "lost"), lost_frames);
}

#[test]
fn gilbert_elliott_loss_and_bursts_match_the_closed_form() {
    if !nflab_testkit::require_root() {
        return;
    }
    let _one_at_a_time = serial();
    let model = LossModel::GilbertElliott {
        p: 0.02,
        r: 0.25,
        loss_bad: 0.9,
        loss_good: 0.005,
    };
    let got = probe(
        &link("loss = { model = \"gilbert-elliott\", p = 0.02, r = 0.25, \"1-h\" = 0.9, \"1-k\" = 0.005 }"),
        40_000,
        50_000,
        64,
        false,
    );
    let (rate, burst) = loss_and_bursts(&lost(&got));
    let (want, want_burst) = (model.stationary_loss(), model.mean_burst_length().unwrap());
    println!("gilbert-elliott: loss {rate:.4} (closed form {want:.4}), mean burst {burst:.2} (closed form {want_burst:.2})");
    assert!((rate - want).abs() / want < 0.15, "loss {rate} vs {want}");
    assert!(
        (burst - want_burst).abs() / want_burst < 0.15,
        "burst {burst} vs {want_burst}"
    );
}

#[test]
fn rate_limit_holds_and_the_queue_drops_what_exceeds_it() {
    if !nflab_testkit::require_root() {
        return;
    }
    let _one_at_a_time = serial();
    // 1000-byte frames at 10 Mbit/s: 1250 frames/s. Offered at half and at
    // twice that.
    let dut = link("rate_mbps = 10\nqueue_packets = 20");
    let under = probe(&dut, 1_000, 1_600_000, 1000, false);
    assert!(lost(&under).iter().all(|&l| !l), "drops below the rate");
    let over = probe(&dut, 5_000, 400_000, 1000, false);
    let drops = counter(&over.stats.forward, "queue_drops");
    let received = over.delays_ns.iter().flatten().count() as u64;
    assert_eq!(
        received + drops,
        5_000,
        "every frame arrived or was dropped by the queue"
    );
    let span_ns = over.rx_ns.last().unwrap() - over.rx_ns.first().unwrap();
    let rate_mbps = (over.bytes_received - 1000) as f64 * 8.0 / span_ns as f64 * 1e3;
    println!("offered 20 Mbit/s into 10: received {rate_mbps:.3} Mbit/s, {drops} of 5000 dropped by the queue");
    assert!((rate_mbps - 10.0).abs() < 0.3, "{rate_mbps} Mbit/s");
    // Half the offered frames go (queue of 20 aside).
    assert!((drops as f64 - 2_500.0).abs() < 60.0, "{drops}");
    assert_eq!(counter(&over.stats.forward, "max_queue"), 20);
}

#[test]
fn nflab_dut_runs_a_link_alone_from_a_config_file() {
    if !nflab_testkit::require_root() {
        return;
    }
    let _one_at_a_time = serial();
    let text = "[dut]\nkind = \"link\"\n[dut.link]\ndelay_us = 3000\n[dut.link.reverse]\ndelay_us = 1000\n";
    let (n, gap) = (500, 1_000_000);
    for (reverse, want_us) in [(false, 3000.0), (true, 1000.0)] {
        let p = probe_with(&link(""), n, gap, 64, reverse, Some(text));
        let ([_, median, _], _) = quartiles_us(&p);
        println!(
            "standalone, reverse {reverse}: median {median:.1} µs for {want_us} µs configured"
        );
        assert!(lost(&p).iter().all(|&l| !l), "frames lost");
        // The configured delay plus the host's floor (a few µs to a few
        // hundred on a loaded host): never less, and not a millisecond more.
        assert!(
            median >= want_us && median < want_us + 1000.0,
            "median {median} µs"
        );
        let (used, idle) = if reverse {
            (&p.stats.reverse, &p.stats.forward)
        } else {
            (&p.stats.forward, &p.stats.reverse)
        };
        assert_eq!(counter(used, "packets_in"), n as u64);
        assert_eq!(counter(idle, "packets_in"), 0);
    }
    // Kinds it does not run are one sentence naming the key.
    let file = std::env::temp_dir().join(format!("nflab-link-bad-{}.toml", std::process::id()));
    std::fs::write(
        &file,
        "[dut]\nkind = \"linux-router\"\n[ports]\ninput = \"a\"\noutput = \"b\"\n",
    )
    .unwrap();
    let e = nflab_lab::dut::standalone::StandaloneConfig::from_file(&file)
        .unwrap_err()
        .to_string();
    let _ = std::fs::remove_file(&file);
    assert!(
        e.contains("dut.kind = \"linux-router\"") && e.contains("\"link\""),
        "{e}"
    );
}
