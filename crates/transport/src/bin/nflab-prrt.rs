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
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use anyhow::{bail, Context, Result};
use nflab_transport::app::{sweep_points, AppSpec};
use nflab_transport::session::{self, EndPoint};
use nflab_transport::study::{write_prrt_json, PrrtRun};

const PLANT: &str = "198.18.0.1";
const CONTROLLER: &str = "198.18.0.2";
const PORT: u16 = 47000;

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
    // From the system's directories, never PATH: this runs as root.
    let out = Command::new(nflab_io::process::system_tool("ip"))
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
    let end = |ns: &Netns, addr: &str| -> Result<EndPoint> {
        Ok(EndPoint {
            netns: ns.name.clone(),
            addr: SocketAddrV4::new(addr.parse()?, PORT),
            tap_iface: None,
            vanish_after_ns: None,
        })
    };
    let out = session::run(
        spec,
        &end(&plant, PLANT)?,
        &end(&controller, CONTROLLER)?,
        None,
        interrupted(),
    )?;
    check_interrupted()?;
    write_prrt_json(&dir.join("prrt.json"), &out.run)?;
    std::fs::write(dir.join("packets.csv"), session::packets_csv(&out.packets))
        .with_context(|| format!("cannot write {}", dir.join("packets.csv").display()))?;
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
        "stats": out.stats,
    });
    std::fs::write(
        dir.join("params.json"),
        serde_json::to_string_pretty(&params)? + "\n",
    )?;
    Ok(out.run)
}
