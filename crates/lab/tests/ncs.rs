//! NCSbench across the link DuT on real namespaces (root): the controller in
//! the LoadGen namespace on lg0, the plant in a namespace of its own on lg1,
//! the emulated link between them. Time-scaled (2× and 5×) to stay short.
//!
//! Run: `sudo -E cargo test -p nflab-lab --test ncs -- --nocapture --test-threads 1`

use std::net::UdpSocket;
use std::process::Command;
use std::time::Duration;

use nflab_apps::ncs::kpi::{report, NcsReport};
use nflab_apps::ncs::session::{run_controller, run_plant, setup, NcsConfig};
use nflab_dataplane::config::LinkConfig;
use nflab_lab::dut::link;
use nflab_lab::net::netns::NetnsGuard;
use nflab_lab::spec::{DutKind, DutSection};
use nflab_lab::topo::{LG0_MAC, LG1_MAC};

/// A namespace of the test's own, deleted on drop.
struct Ns(String);

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn ip(args: &[&str]) {
    let ok = Command::new("ip").args(args).status().map(|s| s.success());
    assert!(ok.unwrap_or(false), "ip {args:?}");
}

const CONTROLLER: &str = "198.18.0.1";
const PLANT: &str = "198.18.0.3";

/// One benchmark run over a link of `link_toml`.
fn bench(tag: &str, link_toml: &str, cfg: &NcsConfig) -> NcsReport {
    let topo = nflab_lab::dut::topology(DutKind::Link, 1).expect("topology");
    let plant_ns = Ns(format!("nflabtest-ncs-{}-{tag}", std::process::id()));
    ip(&["netns", "add", &plant_ns.0]);
    // lg1 moves to the plant's namespace; lg0 and lg1 share one segment
    // through the transparent link, with static neighbours (no ARP on it).
    ip(&[
        "-n",
        &topo.lg_ns,
        "link",
        "set",
        "lg1",
        "netns",
        &plant_ns.0,
    ]);
    ip(&[
        "-n",
        &plant_ns.0,
        "addr",
        "add",
        &format!("{PLANT}/24"),
        "dev",
        "lg1",
    ]);
    for dev in ["lo", "lg1"] {
        ip(&["-n", &plant_ns.0, "link", "set", dev, "up"]);
    }
    ip(&[
        "-n",
        &plant_ns.0,
        "neigh",
        "replace",
        CONTROLLER,
        "lladdr",
        &LG0_MAC.to_string(),
        "dev",
        "lg1",
        "nud",
        "permanent",
    ]);
    ip(&[
        "-n",
        &topo.lg_ns,
        "neigh",
        "replace",
        PLANT,
        "lladdr",
        &LG1_MAC.to_string(),
        "dev",
        "lg0",
        "nud",
        "permanent",
    ]);
    // Link workers, plant and controller under SCHED_FIFO, as `nflab run`
    // runs them with dut.realtime and app.realtime: on a loaded host the
    // benchmark then measures the link, not the other tenants.
    let dut = DutSection {
        kind: DutKind::Link,
        link: Some(toml::from_str::<LinkConfig>(link_toml).expect("link")),
        realtime: Some(true),
        ..DutSection::default()
    };
    let link = link::start(&topo, &dut).expect("link DuT");
    let ctrl_sock = NetnsGuard::run(&topo.lg_ns, || UdpSocket::bind((CONTROLLER, 47000)))
        .expect("enter lg")
        .expect("controller socket");
    let plant_sock = NetnsGuard::run(&plant_ns.0, || {
        let s = UdpSocket::bind((PLANT, 47001))?;
        s.connect((CONTROLLER, 47000))?;
        Ok::<_, std::io::Error>(s)
    })
    .expect("enter plant ns")
    .expect("plant socket");
    let (side, controller) = setup(cfg);
    let backups = cfg.backups as usize;
    let ctrl = std::thread::spawn(move || {
        nflab_io::clock::set_realtime(60).expect("SCHED_FIFO");
        run_controller(&ctrl_sock, controller, backups, Duration::from_secs(3))
    });
    let plant = std::thread::spawn(move || {
        nflab_io::clock::set_realtime(60).expect("SCHED_FIFO");
        run_plant(&plant_sock, side)
    });
    let side = plant.join().expect("plant thread").expect("plant");
    ctrl.join().expect("controller thread").expect("controller");
    let stats = link.stop();
    assert_eq!(stats.error(), None);
    for (dir, w) in [("forward", &stats.forward), ("reverse", &stats.reverse)] {
        println!("link {dir}: {}", w.apps[0].detail);
    }
    let lost: Vec<u32> = side
        .records
        .iter()
        .filter(|r| r.lost)
        .map(|r| r.seq)
        .collect();
    println!("lost periods: {lost:?}");
    report(&side.records, side.fell, cfg)
}

/// One measurement at a time: tests run in parallel threads, and two links
/// competing for the host's CPUs measure each other.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn over_a_delayed_link_the_benchmark_measures_the_configured_delay_and_stays_up() {
    if !nflab_testkit::require_root() {
        return;
    }
    let _one_at_a_time = serial();
    // 2× real time: a 14.5 ms deadline, so a shared host's scheduling hiccups
    // of a few ms rarely make an actuation late.
    let cfg = NcsConfig {
        periods: 300,
        time_scale: 2.0,
        ..NcsConfig::default()
    };
    let r = bench("delay", "delay_us = 1000", &cfg);
    println!("{}", serde_json::to_string_pretty(&r).unwrap());
    assert!(!r.fell);
    assert_eq!(r.periods_completed, 300);
    // The link loses nothing; an actuation that misses the deadline was held
    // up on the host (on a shared 2-vCPU VM: 1 to 34 of 300; `lateness_ns_max`
    // of the link's counters shows waits of 11 ms). Backups carry the plant.
    assert!(r.losses <= 45, "{} actuations late", r.losses);
    // d_N (Eq. 6.1) is half the round trip: the configured 1 ms each way,
    // plus half the controller's processing and the stacks — the noise floor,
    // measured over the same link configured to 0 (the criterion:
    // configured delay over the floor). Against 1.0 ms alone the median was
    // 1.21 ms on a quiet host once the emulator stopped waking early.
    let d_n = r.delays_ms["d_N"];
    let floor = bench("floor", "delay_us = 0", &cfg);
    let floor_n = floor.delays_ms["d_N"].median;
    let added = d_n.median - floor_n;
    println!(
        "d_N median {} ms over a floor of {floor_n} ms: {added} ms added",
        d_n.median
    );
    assert!(
        (added - 1.0).abs() < 0.2,
        "d_N median {} ms over a floor of {floor_n} ms",
        d_n.median
    );
    // The period holds at T / 2.
    assert!((r.delays_ms["period"].median - 17.5).abs() < 0.2);
}

#[test]
fn a_link_slower_than_the_deadline_loses_every_actuation_and_the_plant_falls() {
    if !nflab_testkit::require_root() {
        return;
    }
    let _one_at_a_time = serial();
    let cfg = NcsConfig {
        periods: 400,
        time_scale: 5.0,
        ..NcsConfig::default()
    };
    // Deadline 29 ms / 5 = 5.8 ms; a round trip of 2 × 3.5 ms misses it.
    let r = bench("late", "delay_us = 3500", &cfg);
    println!(
        "fell {} after {} periods, {} losses",
        r.fell, r.periods_completed, r.losses
    );
    assert!(r.fell, "a plant without actuations stays up?");
    assert_eq!(r.losses, r.periods_completed as u64);
    assert!(
        !r.delays_ms.contains_key("d_N"),
        "no actuation came in time"
    );
}

#[test]
fn bad_input_is_one_sentence_naming_the_key_or_file() {
    // No root needed: only the spec is read.
    let dir = std::env::temp_dir().join(format!("nflab-ncs-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = |body: &str| {
        format!("[experiment]\nname = \"x\"\ninclude = [\"profile.toml\"]\n[app]\nkind = \"ncsbench\"\n{body}\n")
    };
    let check = |profile: &str, body: &str| -> String {
        std::fs::write(dir.join("profile.toml"), profile).unwrap();
        std::fs::write(dir.join("spec.toml"), spec(body)).unwrap();
        nflab_lab::Spec::from_file(&dir.join("spec.toml"))
            .and_then(|(s, _)| s.check_supported().map(|()| s))
            .map(|_| String::new())
            .unwrap_or_else(|e| e.to_string())
    };
    let good_profile = "[dut]\nkind = \"link\"\n[dut.link]\ndelay_us = 1000\n";
    assert_eq!(check(good_profile, "periods = 10"), "", "a valid spec");
    for (profile, body, want) in [
        // A profile that does not parse names its file.
        ("[dut.link\ndelay_us = 1000\n", "", "profile.toml"),
        (
            good_profile,
            "gain = [[1, 2, 3, 4]]",
            "app.gain = [[1,2,3,4]] has 1 row(s) of 4 value(s)",
        ),
        (
            good_profile,
            "gain = [1, 2, 3, 4, 5]",
            "app.gain = [1,2,3,4,5] is not a matrix of numbers",
        ),
        (
            good_profile,
            "period_ms = 20",
            "app.period_ms = 20 is shorter than app.deadline_ms = 29",
        ),
    ] {
        let e = check(profile, body);
        println!("{body:?}: {e}");
        assert!(e.contains(want), "{body:?}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
