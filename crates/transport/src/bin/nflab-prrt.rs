//! `nflab-prrt`: the seed's PRRT study on this host. Two network namespaces ("plant" and
//! "controller") joined by a veth pair; each runs one transport endpoint that sends
//! `payload_bytes` every `gap_ms` to the other (PC and CP directions) for `duration_s`.
//!
//! ```text
//! nflab-prrt run  SPEC.toml --out DIR [--set app.KEY=VALUE]...   # one run
//! nflab-prrt grid SPEC.toml --out DIR                            # the [sweep] over app.*
//! ```
//!
//! A run writes `prrt.json`, `packets.csv` (per message: the vantage points m1..m6 and the
//! layer delays; times since the run's start, empty where a point is missing, m6 when the
//! message was not delivered on time) and `params.json`. A grid
//! writes `plan.json`, `runs/NNN/…` and `results.csv`; a run whose parameters are refused
//! leaves `runs/NNN/error.txt` with the one-sentence reason. Needs root (namespaces).

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use nflab_transport::app::{sweep_points, AppSpec};
use nflab_transport::study::{
    detect_outages, layer_delays, mark_overlaps, write_prrt_json, DirectionSummary, PrrtRun,
};
use nflab_transport::udp::{now_ns, Received, UdpDriver};
use nflab_transport::vantage::{Stamps, Tap};
use nflab_transport::{ReceiverStats, SenderState, SenderStats};

const PLANT: &str = "198.18.0.1";
const CONTROLLER: &str = "198.18.0.2";
const PORT: u16 = 47000;
/// Both ends start sending together this long after setup, so their runs overlap.
const START_DELAY_NS: u64 = 100_000_000;

fn main() {
    if let Err(e) = real_main() {
        eprintln!("Error: {e:#}");
        std::process::exit(1);
    }
}

fn usage() -> &'static str {
    "usage: nflab-prrt run SPEC.toml --out DIR [--set app.KEY=VALUE]... | nflab-prrt grid SPEC.toml --out DIR"
}

/// Set by SIGINT/SIGTERM: the runs stop early and the namespaces are removed on the way out.
fn interrupted() -> &'static Arc<AtomicBool> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)))
}

fn check_interrupted() -> Result<()> {
    if interrupted().load(Ordering::Relaxed) {
        bail!("interrupted; the run's namespaces were removed");
    }
    Ok(())
}

fn real_main() -> Result<()> {
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(interrupted())).context("signal handler")?;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(cmd), Some(spec_path)) = (args.first(), args.get(1)) else {
        bail!("{}", usage());
    };
    let mut out = None;
    let mut sets = Vec::new();
    let mut rest = args[2..].iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--out" => out = rest.next().map(PathBuf::from),
            "--set" => sets.push(rest.next().context("--set needs app.KEY=VALUE")?.clone()),
            other => bail!("unknown argument {other}; {}", usage()),
        }
    }
    let out = out.with_context(|| format!("--out DIR is missing; {}", usage()))?;
    let text =
        std::fs::read_to_string(spec_path).with_context(|| format!("cannot read {spec_path}"))?;
    let spec: toml::Table = text
        .parse()
        .with_context(|| format!("{spec_path} is not valid TOML"))?;
    let Some(toml::Value::Table(app)) = spec.get("app") else {
        bail!("{spec_path} has no [app] section (kind = \"prrt\")");
    };
    let need_root = || {
        if nix::unistd::geteuid().is_root() {
            Ok(())
        } else {
            Err(anyhow::anyhow!(
                "nflab-prrt needs root to create network namespaces; run it with sudo"
            ))
        }
    };
    match cmd.as_str() {
        "run" => {
            let mut app = app.clone();
            for set in &sets {
                apply_set(&mut app, set)?;
            }
            let spec = AppSpec::from_table(&app).with_context(|| format!("in {spec_path}"))?;
            need_root()?;
            std::fs::create_dir_all(&out)
                .with_context(|| format!("cannot create {}", out.display()))?;
            let run = run_once(&spec, &out, "0")?;
            println!("{}", serde_json::to_string_pretty(&run)?);
            Ok(())
        }
        "grid" => {
            sweep_points(&spec)?;
            need_root()?;
            grid(&spec, app, &out)
        }
        other => bail!("unknown command {other}; {}", usage()),
    }
}

/// `--set app.gap_ms=3.25`: a TOML value for one key of `[app]`.
fn apply_set(app: &mut toml::Table, set: &str) -> Result<()> {
    let (key, value) = set
        .split_once('=')
        .with_context(|| format!("--set {set}: expected app.KEY=VALUE"))?;
    let key = key
        .strip_prefix("app.")
        .with_context(|| format!("--set {set}: only app.* keys can be set"))?;
    let value: toml::Value = format!("v = {value}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|t| t.get("v").cloned())
        .unwrap_or_else(|| toml::Value::String(value.to_string()));
    app.insert(key.to_string(), value);
    Ok(())
}

fn grid(spec: &toml::Table, app: &toml::Table, out: &Path) -> Result<()> {
    let points = sweep_points(spec)?;
    std::fs::create_dir_all(out.join("runs"))
        .with_context(|| format!("cannot create {}", out.display()))?;
    std::fs::write(
        out.join("plan.json"),
        format!("{{\"runs\": {}}}\n", points.len()),
    )?;
    let mut csv = String::from(
        "run,gap_ms,payload_bytes,target_delay_ms,window_ms,pc_sent,pc_delivered,pc_loss_ratio,pc_redundancy_ratio,pc_outages,cp_sent,cp_delivered,cp_loss_ratio,cp_redundancy_ratio,cp_outages,error\n",
    );
    let started = std::time::Instant::now();
    for (i, point) in points.iter().enumerate() {
        let id = format!("{i:03}");
        let dir = out.join("runs").join(&id);
        std::fs::create_dir_all(&dir)?;
        let mut table = app.clone();
        for (k, v) in point {
            table.insert(k.clone(), v.clone());
        }
        let spec = match AppSpec::from_table(&table) {
            Ok(spec) => spec,
            Err(e) => {
                std::fs::write(dir.join("error.txt"), format!("{e}\n"))?;
                let p = |k: &str| table.get(k).map(ToString::to_string).unwrap_or_default();
                let _ = writeln!(
                    csv,
                    "{id},{},{},{},{},,,,,,,,,,,\"{}\"",
                    p("gap_ms"),
                    p("payload_bytes"),
                    p("target_delay_ms"),
                    p("window_ms"),
                    e.to_string().replace('"', "'")
                );
                eprintln!("run {id}: refused: {e}");
                continue;
            }
        };
        let run = run_once(&spec, &dir, &id)?;
        let _ = writeln!(
            csv,
            "{id},{},{},{},{},{},{},{},{},{},{},{},{},{},{},",
            spec.gap_ms,
            spec.payload_bytes,
            spec.target_delay_ms,
            spec.window_ms,
            run.pc.sent,
            run.pc.delivered,
            run.pc.loss_ratio,
            run.pc.redundancy_ratio,
            run.pc.outages.len(),
            run.cp.sent,
            run.cp.delivered,
            run.cp.loss_ratio,
            run.cp.redundancy_ratio,
            run.cp.outages.len()
        );
        std::fs::write(out.join("results.csv"), &csv)?;
        eprintln!(
            "run {id}/{}: pc loss {:.4}, cp loss {:.4} ({:.0} s elapsed)",
            points.len(),
            run.pc.loss_ratio,
            run.cp.loss_ratio,
            started.elapsed().as_secs_f64()
        );
    }
    std::fs::write(out.join("results.csv"), &csv)?;
    Ok(())
}

/// A network namespace that exists exactly as long as this value.
struct Netns {
    name: String,
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("cannot run ip (iproute2)")?;
    if !out.status.success() {
        bail!(
            "ip {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl Netns {
    fn new(name: String) -> Result<Netns> {
        ip(&["netns", "add", &name])?;
        Ok(Netns { name })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if ip(&["netns", "del", &self.name]).is_err() {
            eprintln!("warning: could not delete network namespace {}", self.name);
        }
    }
}

fn peer_lost(side: &Side, start_ns: u64) -> Option<u64> {
    match side.state {
        SenderState::PeerLost { detected_ns, .. } => Some(detected_ns.saturating_sub(start_ns)),
        SenderState::Running => None,
    }
}

struct Side {
    state: SenderState,
    sender: SenderStats,
    receiver: ReceiverStats,
    sent_m1: Vec<u64>,
    received: Vec<Received>,
    /// m3 of what this end sent, m4 of what it received.
    m3: Stamps,
    m4: Stamps,
}

/// The tap of one namespace: m2 of what its end sent, m5 of what it received.
fn tap(ns: &str, local: Ipv4Addr, stop: &AtomicBool) -> Result<Tap> {
    enter(ns)?;
    let mut tap = Tap::open().context("AF_PACKET tap")?;
    while !stop.load(Ordering::Relaxed) {
        tap.poll(local, PORT, Duration::from_millis(20))?;
    }
    tap.poll(local, PORT, Duration::ZERO)?;
    Ok(tap)
}

fn enter(ns: &str) -> Result<()> {
    let file = std::fs::File::open(format!("/run/netns/{ns}")).context("open netns")?;
    nix::sched::setns(file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).context("setns")?;
    Ok(())
}

/// One end in namespace `ns`: send from `start_ns` every gap for the duration, then keep
/// receiving until the target delay and a margin have passed.
fn endpoint(
    ns: &str,
    local: SocketAddr,
    peer: SocketAddr,
    spec: &AppSpec,
    start_ns: u64,
) -> Result<Side> {
    enter(ns)?;
    let socket = UdpSocket::bind(local).with_context(|| format!("bind {local}"))?;
    let mut driver = UdpDriver::new(socket, peer, spec.config(), spec.window_ns())?;
    driver.enable_vantage().context("SO_TIMESTAMPING")?;
    let duration_ns = (spec.duration_s * 1e9) as u64;
    let end_ns = start_ns + duration_ns;
    let drain_ns = spec.config().target_delay_ns + 200_000_000;
    let payload = vec![0xa5u8; spec.payload_bytes];
    let mut received = Vec::new();
    let mut sent_m1 = Vec::new();
    let mut next = start_ns;
    while next < end_ns && !interrupted().load(Ordering::Relaxed) {
        driver.run_until(next, &mut received)?;
        if driver.endpoint.sender.state() == SenderState::Running {
            let m1 = now_ns();
            // A full queue is counted by the sender; a lost peer ends sending.
            let _ = driver.endpoint.sender.send(&payload, m1);
            sent_m1.push(m1);
        }
        next += spec.gap_ns();
    }
    if !interrupted().load(Ordering::Relaxed) {
        driver.run_until(end_ns + drain_ns, &mut received)?;
    }
    let v = driver.vantage().context("vantage enabled above")?;
    Ok(Side {
        state: driver.endpoint.sender.state(),
        sender: driver.endpoint.sender.stats().clone(),
        receiver: driver.endpoint.receiver.stats().clone(),
        sent_m1,
        received,
        m3: v.m3.clone(),
        m4: v.m4.clone(),
    })
}

fn run_once(spec: &AppSpec, dir: &Path, id: &str) -> Result<PrrtRun> {
    let tag = format!("nflab-prrt-{}-{id}", std::process::id());
    let plant = Netns::new(format!("{tag}-p"))?;
    let controller = Netns::new(format!("{tag}-c"))?;
    ip(&[
        "-n",
        &plant.name,
        "link",
        "add",
        "pv",
        "type",
        "veth",
        "peer",
        "name",
        "cv",
        "netns",
        &controller.name,
    ])?;
    ip(&[
        "-n",
        &plant.name,
        "addr",
        "add",
        &format!("{PLANT}/24"),
        "dev",
        "pv",
    ])?;
    ip(&[
        "-n",
        &controller.name,
        "addr",
        "add",
        &format!("{CONTROLLER}/24"),
        "dev",
        "cv",
    ])?;
    ip(&["-n", &plant.name, "link", "set", "pv", "up"])?;
    ip(&["-n", &controller.name, "link", "set", "cv", "up"])?;
    let p_addr = SocketAddr::new(PLANT.parse()?, PORT);
    let c_addr = SocketAddr::new(CONTROLLER.parse()?, PORT);
    let start_ns = now_ns() + START_DELAY_NS;
    let stop = AtomicBool::new(false);
    let (p, c, p_tap, c_tap) = std::thread::scope(|s| {
        let p_tap = s.spawn(|| tap(&plant.name, PLANT.parse().expect("address"), &stop));
        let c_tap = s.spawn(|| {
            tap(
                &controller.name,
                CONTROLLER.parse().expect("address"),
                &stop,
            )
        });
        let p = s.spawn(|| endpoint(&plant.name, p_addr, c_addr, spec, start_ns));
        let c = s.spawn(|| endpoint(&controller.name, c_addr, p_addr, spec, start_ns));
        let (p, c) = (p.join(), c.join());
        stop.store(true, Ordering::Relaxed);
        (p, c, p_tap.join(), c_tap.join())
    });
    let panicked = |what: &str| anyhow::anyhow!("the {what} thread panicked");
    let p = p.map_err(|_| panicked("plant endpoint"))??;
    let c = c.map_err(|_| panicked("controller endpoint"))??;
    let p_tap = p_tap.map_err(|_| panicked("plant tap"))??;
    let c_tap = c_tap.map_err(|_| panicked("controller tap"))??;
    check_interrupted()?;
    let end_ns = start_ns + (spec.duration_s * 1e9) as u64;
    let threshold_ns = (spec.outage_threshold_ms * 1e6) as u64;
    let on_time = |to: &Side| -> Vec<u64> {
        to.received
            .iter()
            .map(|r| r.delivery.app_send_ns.saturating_sub(start_ns))
            .collect()
    };
    let mut pc_out = detect_outages(&on_time(&c), 0, end_ns - start_ns, threshold_ns);
    let mut cp_out = detect_outages(&on_time(&p), 0, end_ns - start_ns, threshold_ns);
    mark_overlaps(&mut pc_out, &mut cp_out);
    let run = PrrtRun {
        pc: DirectionSummary {
            peer_lost_ns: peer_lost(&p, start_ns),
            ..DirectionSummary::new(&p.sender, &c.receiver, pc_out)
        },
        cp: DirectionSummary {
            peer_lost_ns: peer_lost(&c, start_ns),
            ..DirectionSummary::new(&c.sender, &p.receiver, cp_out)
        },
    };
    write_prrt_json(&dir.join("prrt.json"), &run)?;
    write_packets_csv(
        &dir.join("packets.csv"),
        start_ns,
        &[
            Direction {
                name: "pc",
                from: &p,
                to: &c,
                from_tap: &p_tap,
                to_tap: &c_tap,
            },
            Direction {
                name: "cp",
                from: &c,
                to: &p,
                from_tap: &c_tap,
                to_tap: &p_tap,
            },
        ],
    )?;
    let params = serde_json::json!({
        "app": {
            "kind": "prrt",
            "gap_ms": spec.gap_ms,
            "payload_bytes": spec.payload_bytes,
            "target_delay_ms": spec.target_delay_ms,
            "window_ms": spec.window_ms,
            "duration_s": spec.duration_s,
            "outage_threshold_ms": spec.outage_threshold_ms,
            "redundancy": {"block_size": spec.block_size, "proactive_share": spec.proactive_share},
        },
        "stats": {"pc": {"sender": p.sender, "receiver": c.receiver}, "cp": {"sender": c.sender, "receiver": p.receiver}},
    });
    std::fs::write(
        dir.join("params.json"),
        serde_json::to_string_pretty(&params)? + "\n",
    )?;
    Ok(run)
}

struct Direction<'a> {
    name: &'a str,
    from: &'a Side,
    to: &'a Side,
    from_tap: &'a Tap,
    to_tap: &'a Tap,
}

/// One row per message sent: the six vantage points (ns since the run's start, empty where
/// missing) and the layer delays derived from them.
fn write_packets_csv(path: &Path, start_ns: u64, dirs: &[Direction<'_>]) -> Result<()> {
    let mut text = String::from(
        "dir,seq,m1_ns,m2_ns,m3_ns,m4_ns,m5_ns,m6_ns,l7_l2_ns,l2_l1_ns,l1_l1_ns,l1_l2_ns,l2_l7_ns,one_way_ns\n",
    );
    let cell = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
    for d in dirs {
        let mut m6 = vec![None; d.from.sent_m1.len()];
        for r in &d.to.received {
            if let Some(slot) = m6.get_mut(r.delivery.seq as usize) {
                *slot = Some(r.app_recv_ns);
            }
        }
        for (seq, (&m1, m6)) in d.from.sent_m1.iter().zip(m6).enumerate() {
            let seq32 = seq as u32;
            let m = [
                Some(m1),
                d.from_tap.sent.get(seq32),
                d.from.m3.get(seq32),
                d.to.m4.get(seq32),
                d.to_tap.received.get(seq32),
                m6,
            ];
            let rel = m.map(|t| t.map(|t| t as i64 - start_ns as i64));
            let l = layer_delays(m);
            let _ = writeln!(
                text,
                "{},{seq},{},{},{},{},{},{},{},{},{},{},{},{}",
                d.name,
                cell(rel[0]),
                cell(rel[1]),
                cell(rel[2]),
                cell(rel[3]),
                cell(rel[4]),
                cell(rel[5]),
                cell(l.l7_l2_ns),
                cell(l.l2_l1_ns),
                cell(l.l1_l1_ns),
                cell(l.l1_l2_ns),
                cell(l.l2_l7_ns),
                cell(l.one_way_ns)
            );
        }
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}
