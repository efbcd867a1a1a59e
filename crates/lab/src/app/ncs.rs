//! `[app] kind = "ncsbench"`: seed 000's NCSbench over the run's DuT, next to
//! the probe traffic.
//!
//! The controller runs in the LoadGen namespace on lg0 (198.18.0.1); the
//! plant in a namespace of its own, `nflab-<id>-plant`, on `ncs0`
//! (198.18.0.3), a macvlan of lg1: sensor messages cross the DuT from lg1's
//! side to lg0's, actuations the other way, while the recorder keeps reading
//! lg1. Both ends are on one IPv4 subnet with static neighbours, so the DuT
//! must carry frames as they are: `link`, `linux-bridge` or `loopback`.
//! `runs/NNN/ncs.json` holds the figures ([`nflab_apps::ncs::kpi`]).

use std::net::UdpSocket;
use std::thread::JoinHandle;
use std::time::Duration;

use nflab_apps::ncs::kpi::{periods_csv, report, NcsReport};
use nflab_apps::ncs::session::{run_controller, run_plant, setup, NcsConfig};
use nflab_wire::MacAddr;

use crate::app::plant_ns::PlantNs;
use crate::error::LabError;
use crate::net::netns::NetnsGuard;
use crate::topo::Topology;

/// Controller address (lg0's).
pub const CONTROLLER_IP: &str = "198.18.0.1";
/// Plant address (on ncs0, in the plant's namespace).
pub const PLANT_IP: &str = "198.18.0.3";
/// The plant interface's MAC.
pub const PLANT_MAC: MacAddr = MacAddr([0x02, 0x4e, 0x46, 0x00, 0x02, 0x01]);
const CONTROLLER_PORT: u16 = 47000;
const PLANT_PORT: u16 = 47001;

/// `app.realtime`: this thread under SCHED_FIFO (above the link's workers).
fn go_realtime(on: bool, who: &str) {
    if on {
        if let Err(e) = nflab_io::clock::set_realtime(60) {
            eprintln!("warning: app.realtime: the NCSbench {who} cannot run under SCHED_FIFO: {e}");
        }
    }
}

/// A benchmark under way.
pub struct NcsRun {
    plant: JoinHandle<Result<(Vec<nflab_apps::ncs::session::PeriodRecord>, bool), LabError>>,
    controller: JoinHandle<Result<u64, LabError>>,
    cfg: NcsConfig,
    _ns: PlantNs,
}

/// Set up the plant's namespace and start both sides.
pub fn start(topo: &Topology, cfg: &NcsConfig) -> Result<NcsRun, LabError> {
    cfg.validate().map_err(|e| LabError::Unsupported(e.0))?;
    super::check_dut("ncsbench", topo.dut)?;
    let ns = PlantNs::create(
        topo,
        "plant",
        "ncs0",
        PLANT_IP.parse().expect("a literal address"),
        PLANT_MAC,
    )?;
    let lg = topo.lg_ns.as_str();
    let io = |e: std::io::Error| LabError::Host(format!("the NCSbench socket: {e}"));
    let ctrl_sock =
        NetnsGuard::run(lg, || UdpSocket::bind((CONTROLLER_IP, CONTROLLER_PORT)))?.map_err(io)?;
    let plant_sock = NetnsGuard::run(&ns.name, || {
        let s = UdpSocket::bind((PLANT_IP, PLANT_PORT))?;
        s.connect((CONTROLLER_IP, CONTROLLER_PORT))?;
        // ncs0 is a macvlan, whose checksum offload stays on; a link DuT re-sends
        // frames as read, so the checksum would never be filled in (lg0 and lg1
        // compute theirs in software, topology.rs).
        nflab_io::udp_without_checksum(std::os::fd::AsFd::as_fd(&s))?;
        Ok(s)
    })?
    .map_err(io)?;
    let (side, controller) = setup(cfg);
    let backups = cfg.backups as usize;
    let realtime = cfg.realtime;
    let controller = std::thread::Builder::new()
        .name("ncs-controller".into())
        .spawn(move || {
            go_realtime(realtime, "controller");
            run_controller(&ctrl_sock, controller, backups, Duration::from_secs(10))
                .map_err(|e| LabError::Other(e.0))
        })
        .map_err(|e| LabError::Host(format!("cannot start the controller thread: {e}")))?;
    let plant = std::thread::Builder::new()
        .name("ncs-plant".into())
        .spawn(move || {
            go_realtime(realtime, "plant");
            let side = run_plant(&plant_sock, side).map_err(|e| LabError::Other(e.0))?;
            if side.handshake_ns.is_none() {
                eprintln!("warning: the NCSbench controller did not answer the plant's pings for 5 s: the periods ran anyway");
            }
            Ok((side.records, side.fell))
        })
        .map_err(|e| LabError::Host(format!("cannot start the plant thread: {e}")))?;
    Ok(NcsRun {
        plant,
        controller,
        cfg: cfg.clone(),
        _ns: ns,
    })
}

/// The six items of seed 000's scenario description (Sec. 6.1.5) for a run of
/// `spec`: `runs/NNN/ncs-scenario.json`.
pub fn scenario(spec: &crate::spec::Spec, topo: &Topology, cfg: &NcsConfig) -> serde_json::Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|k| k.trim().to_string())
        .unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    serde_json::json!({
        "application": format!(
            "NCSbench with a simulated two-wheeled inverted pendulum (NXTway-GS dynamics, RK4 at 1 kHz, ±8 V) and an LQR controller sending {} backups; period {} ms, deadline {} ms, {} periods, {}× real time",
            cfg.backups, cfg.period_ms, cfg.deadline_ms, cfg.periods, cfg.time_scale
        ),
        "stack": "UDP over IPv4 through Linux kernel sockets, both ends on this host (CLOCK_MONOTONIC timestamps); the plant's datagrams carry no UDP checksum",
        "topology": format!(
            "controller in {} on lg0 ({CONTROLLER_IP}) — DuT {} in {} — plant in {}-plant on ncs0 ({PLANT_IP}, a macvlan of lg1)",
            topo.lg_ns,
            topo.dut.as_str(),
            topo.dut_ns.as_deref().unwrap_or("(none)"),
            topo.lg_ns.trim_end_matches("-lg"),
        ),
        "environment": {
            "dut": spec.dut.kind.as_str(),
            "link": spec.dut.link,
        },
        "interference": {
            "what": "the run's probe stream on the same path",
            "pattern": spec.traffic.pattern,
            "rate_pps": spec.traffic.rate_pps,
            "frame_bytes": spec.traffic.frame_bytes,
        },
        "hardware": { "cpu": cpu, "cpus": cpus, "kernel": kernel, "more": "system.json" },
    })
}

impl NcsRun {
    /// Wait for the run to end (all periods, or a fall), then write its
    /// figures to `dir`: `ncs.json`, `ncs-tables.md` (Tables 6.3 and 6.4 for
    /// this run, labelled `scenario`) and `ncs-periods.csv`.
    pub fn finish(self, dir: &std::path::Path, scenario: &str) -> Result<NcsReport, LabError> {
        let panicked = |who: &str| LabError::Other(format!("the NCSbench {who} thread panicked"));
        let (records, fell) = self.plant.join().map_err(|_| panicked("plant"))??;
        let answered = self
            .controller
            .join()
            .map_err(|_| panicked("controller"))??;
        let mut r = report(&records, fell, &self.cfg);
        r.controller_answered = Some(answered);
        // Whole or not at all: `--resume` and the report trust them.
        let write = |name: &str, text: &str| {
            crate::artifacts::files::write_file(&dir.join(name), text.as_bytes())
        };
        let json = serde_json::to_string_pretty(&r)
            .map_err(|e| LabError::Other(format!("ncs.json: {e}")))?;
        write("ncs.json", &json)?;
        write("ncs-tables.md", &r.tables_markdown(scenario))?;
        write("ncs-periods.csv", &periods_csv(&records))?;
        Ok(r)
    }
}

/// The host's timer floor kept in the tree (`timer-floor.json`), if any.
fn read_timer_floor(
    dir: &std::path::Path,
) -> Result<Option<nflab_apps::ncs::challenge::TimerFloorSample>, LabError> {
    let path = dir.join(nflab_apps::ncs::challenge::TIMER_FLOOR_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(LabError::Other(format!(
                "cannot read {}: {e}",
                path.display()
            )))
        }
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        LabError::Other(format!(
            "{} is not a timer floor as `nflab doctor --timer-out` writes it (hold_us and half_excess_ns): {e}",
            path.display()
        ))
    })
}

/// Summarize the NCSbench runs of the artifact tree `dir` (each
/// `runs/NNN/ncs.json` with its `params.json`) into `dir/ncs-challenge.json`
/// ([`nflab_apps::ncs::challenge`]): fraction of runs up per configuration
/// with its interval, and the failure bracket of a one-parameter sweep.
/// `None` (and nothing written) when no run has an `ncs.json`.
pub fn write_challenge(
    dir: &std::path::Path,
) -> Result<Option<nflab_apps::ncs::challenge::Challenge>, LabError> {
    use nflab_apps::ncs::challenge::{summarize, RunOutcome};
    let read = |p: &std::path::Path| -> Option<serde_json::Value> {
        serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
    };
    let mut names: Vec<String> = std::fs::read_dir(dir.join("runs"))
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let mut runs = Vec::new();
    for name in names {
        let rd = dir.join("runs").join(&name);
        let (Some(ncs), Some(params)) = (read(&rd.join("ncs.json")), read(&rd.join("params.json")))
        else {
            continue;
        };
        let u = |v: &serde_json::Value, k: &str| v.get(k).and_then(serde_json::Value::as_u64);
        runs.push(RunOutcome {
            run: name,
            combination: u(&params, "combination").unwrap_or(0) as usize,
            sweep: params
                .get("sweep")
                .and_then(serde_json::Value::as_object)
                .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default(),
            fell: ncs.get("fell").and_then(serde_json::Value::as_bool) == Some(true),
            losses: u(&ncs, "losses").unwrap_or(0),
            periods_completed: u(&ncs, "periods_completed").unwrap_or(0),
            periods: u(&ncs, "periods").unwrap_or(u64::MAX),
            d_n_median_ms: ncs
                .pointer("/delays_ms/d_N/median")
                .and_then(serde_json::Value::as_f64),
            d_n_ns: std::fs::read_to_string(rd.join("ncs-periods.csv"))
                .map(|t| nflab_apps::ncs::kpi::periods_csv_delays(&t, "d_N"))
                .unwrap_or_default(),
        });
    }
    if runs.is_empty() {
        return Ok(None);
    }
    let timer = read_timer_floor(dir)?;
    let summary = summarize(&runs, timer.as_ref());
    crate::artifacts::files::write_json(&dir.join("ncs-challenge.json"), &summary)?;
    Ok(Some(summary))
}
