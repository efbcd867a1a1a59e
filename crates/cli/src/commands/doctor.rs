//! `nflab doctor`: what this host can do, and how precisely it measures.

use std::process::{Command, ExitCode};

use nflab_lab::knobs::timer_floor::{TimerFloor, TimerFloorConfig};
use nflab_lab::net::netns::NetnsGuard;
use nflab_lab::spec::{DutKind, DutSection};
use serde::Serialize;

/// Arguments of `nflab doctor`.
#[derive(clap::Args)]
pub struct Args {
    /// Seconds of the loopback calibration run (0 skips it).
    #[arg(long, default_value_t = 2.0)]
    noise_seconds: f64,
    /// Rate of the calibration run, packets per second.
    #[arg(long, default_value_t = 10_000.0)]
    noise_rate: f64,
    /// Seconds of the timer floor (0 skips it): a thread under the link
    /// emulator's conditions (the DuT's CPU, SCHED_FIFO, timer slack 1 ns) that
    /// wakes once per period and holds twice, measuring how late each hold ends.
    #[arg(long, default_value_t = 1.0, value_name = "S")]
    timer_seconds: f64,
    /// Length of one hold of the timer floor, µs (a link's one-way delay).
    #[arg(long, default_value_t = 1000, value_name = "US")]
    timer_hold_us: u64,
    /// Period of the timer floor, ms (at least two holds; NCSbench's is 35).
    #[arg(long, default_value_t = 5.0, value_name = "MS")]
    timer_period_ms: f64,
    /// Keep every CPU from halting while the timer floor is measured (a
    /// SCHED_IDLE spinner on each, as knobs.background_load with policy "idle").
    #[arg(long)]
    timer_keep_awake: bool,
    /// Write the timer floor with its per-period values to this file (what an
    /// NCSbench tree's timer-floor.json holds; docs/experiments.md).
    #[arg(long, value_name = "FILE")]
    timer_out: Option<std::path::PathBuf>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
}

#[derive(Serialize)]
struct NoiseFloor {
    rate_pps: f64,
    seconds: f64,
    received: u64,
    lost: u64,
    p50_ns: Option<i64>,
    p99_ns: Option<i64>,
    p99_9_ns: Option<i64>,
    max_ns: Option<i64>,
    stdev_ns: Option<f64>,
}

#[derive(Serialize)]
struct Report {
    machine: String,
    checks: Vec<Check>,
    noise_floor: Option<NoiseFloor>,
    timer_floor: Option<TimerFloor>,
}

fn check(name: &'static str, r: Result<String, String>) -> Check {
    match r {
        Ok(detail) => Check {
            name,
            ok: true,
            detail,
        },
        Err(detail) => Check {
            name,
            ok: false,
            detail,
        },
    }
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    // Bad timer-floor flags are refused before anything is measured.
    let timer_cfg = timer_config(&args)?;
    let (version, commit) = super::version();
    let env = nflab_lab::artifacts::env::Environment::capture(&version, &commit);
    let root = nflab_lab::topo::check_root();
    let mut checks = vec![check(
        "root",
        root.as_ref()
            .map(|_| "running as root".to_string())
            .map_err(|e| e.to_string()),
    )];
    checks.push(check(
        "af_packet",
        nflab_io::probe_caps::af_packet()
            .map(|_| "AF_PACKET sockets open".into())
            .map_err(|e| e.to_string()),
    ));
    checks.push(check(
        "af_xdp",
        nflab_io::probe_caps::af_xdp()
            .map(|_| "AF_XDP sockets open".into())
            .map_err(|e| e.to_string()),
    ));
    // The eBPF monitors ([monitor], docs/monitor.md) need BTF and tp_btf; fentry is
    // reported for information only (the monitors do not use it).
    let caps = nflab_monitor::caps::probe();
    checks.push(check(
        "btf",
        caps.btf.map(|_| {
            format!(
                "kernel BTF at {}",
                nflab_monitor::caps::btf_path().display()
            )
        }),
    ));
    checks.push(check(
        "tp_btf",
        caps.tp_btf
            .map(|_| "BTF tracepoint (tp_btf) programs load: [monitor] works".into()),
    ));
    checks.push(Check {
        name: "fentry",
        ok: true,
        detail: match caps.fentry {
            Ok(()) => "fentry programs load".into(),
            Err(e) => {
                format!("fentry programs are refused ({e}); the monitors use tracepoints only")
            }
        },
    });
    let rt_res = nflab_io::clock::resolution_ns(libc::CLOCK_REALTIME);
    let rt_gran = nflab_io::clock::observed_granularity_ns(libc::CLOCK_REALTIME);
    checks.push(Check {
        name: "clock",
        ok: rt_res <= 1_000,
        detail: format!(
            "CLOCK_REALTIME resolution {rt_res} ns, smallest observed step {rt_gran} ns, kernel clocksource {}",
            env.kernel_clocksource
        ),
    });
    let stop = super::stop_flag()?;
    let mut noise = None;
    if root.is_ok() {
        match nflab_lab::dut::topology(DutKind::Loopback, 1) {
            Ok(topo) => {
                let xdp = NetnsGuard::run(&topo.lg_ns, || nflab_io::probe_caps::xdp_on("lg0"))
                    .map_err(|e| e.to_string())
                    .and_then(|r| r.map_err(|e| e.to_string()));
                checks.push(check(
                    "xdp_on_veth",
                    xdp.map(|_| "an XDP program attaches to a veth and detaches".into()),
                ));
                let netem = Command::new(nflab_io::process::system_tool("ip"))
                    .args(["netns", "exec", &topo.lg_ns])
                    .arg(nflab_io::process::system_tool("tc"))
                    .args([
                        "qdisc", "add", "dev", "lg0", "root", "netem", "delay", "1ms",
                    ])
                    .output();
                checks.push(match netem {
                    Ok(o) if o.status.success() => Check { name: "netem", ok: true, detail: "tc netem is available".into() },
                    Ok(o) => Check {
                        name: "netem",
                        ok: false,
                        detail: format!(
                            "tc netem is not available ({}): use the nflab data plane's delayer for delay emulation",
                            String::from_utf8_lossy(&o.stderr).trim()
                        ),
                    },
                    Err(e) => Check { name: "netem", ok: false, detail: format!("cannot run tc: {e}") },
                });
                drop(topo);
            }
            Err(e) => checks.push(Check {
                name: "netns",
                ok: false,
                detail: e.to_string(),
            }),
        }
        if args.noise_seconds > 0.0 {
            noise = Some(noise_floor(args.noise_seconds, args.noise_rate, &stop)?);
        }
    }
    let timer = match &timer_cfg {
        Some(cfg) => Some(timer_floor(cfg, args.timer_out.as_deref(), &stop)?),
        None => None,
    };
    let report = Report {
        machine: env.machine_line(),
        checks,
        noise_floor: noise,
        timer_floor: timer,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("machine: {}", report.machine);
        for c in &report.checks {
            println!(
                "{} {:<12} {}",
                if c.ok { "ok  " } else { "no  " },
                c.name,
                c.detail
            );
        }
        if let Some(n) = &report.noise_floor {
            use nflab_lab::study::results::human_ns;
            let h = |v: Option<i64>| human_ns(v.map(|x| x as f64));
            println!(
                "noise floor (loopback veth, {} pps, {} s, {} received, {} lost): p50 {}  p99 {}  p99.9 {}  max {}  stdev {}",
                n.rate_pps, n.seconds, n.received, n.lost, h(n.p50_ns), h(n.p99_ns), h(n.p99_9_ns), h(n.max_ns), human_ns(n.stdev_ns)
            );
            println!("  a DuT's added latency is only meaningful well above this floor");
        }
        if let Some(t) = &report.timer_floor {
            use nflab_lab::study::results::human_ns;
            let h = |v: Option<i64>| human_ns(v.map(|x| x as f64));
            let (l, e) = (&t.lateness_ns, &t.two_hold_half_excess_ns);
            println!(
                "timer floor (holds of {} µs, {} periods of {} ms, CPU {}, {}{}): a hold ends late by p50 {}  p99 {}  p99.9 {}  max {}; half of two holds p99.9 {}  max {}",
                t.hold_us, t.periods, t.period_ms, t.cpu,
                if t.realtime { "SCHED_FIFO" } else { "not real-time" },
                if t.keep_awake { ", CPUs kept awake" } else { "" },
                h(l.p50), h(l.p99), h(l.p99_9), h(l.max), h(e.p99_9), h(e.max)
            );
            println!(
                "  a timed release (a link's delay) cannot be more punctual than this on this host"
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The timer floor `args` ask for (none with `--timer-seconds 0`), checked.
fn timer_config(args: &Args) -> anyhow::Result<Option<TimerFloorConfig>> {
    if args.timer_seconds <= 0.0 {
        return Ok(None);
    }
    let cfg = TimerFloorConfig {
        hold_ns: args.timer_hold_us * 1_000,
        period_ns: (args.timer_period_ms * 1e6) as u64,
        duration: std::time::Duration::from_secs_f64(args.timer_seconds),
        cpu: DutSection::default().dut_cpu()?,
        realtime: true,
        keep_awake: args.timer_keep_awake,
    };
    cfg.check().map_err(|e| {
        anyhow::anyhow!(
            "--timer-hold-us {} with --timer-period-ms {} does not fit: {e}",
            args.timer_hold_us,
            args.timer_period_ms
        )
    })?;
    Ok(Some(cfg))
}

/// Measure the timer floor of `cfg`, written to `out` with its per-period values.
fn timer_floor(
    cfg: &TimerFloorConfig,
    out: Option<&std::path::Path>,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> anyhow::Result<TimerFloor> {
    let mut floor =
        nflab_lab::knobs::timer_floor::measure(cfg, stop).map_err(anyhow::Error::msg)?;
    if let Some(path) = out {
        std::fs::write(path, serde_json::to_vec_pretty(&floor)?).map_err(|e| {
            anyhow::anyhow!("cannot write the timer floor to {}: {e}", path.display())
        })?;
    }
    // The per-period values go to the file only.
    floor.half_excess_ns.clear();
    Ok(floor)
}

fn noise_floor(
    seconds: f64,
    rate: f64,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> anyhow::Result<NoiseFloor> {
    let text = format!(
        "[experiment]\nname = \"doctor\"\n[dut]\nkind = \"loopback\"\n[traffic]\nrate_pps = {rate}\nduration_s = {seconds}\nwarmup_s = 0.2\n"
    );
    let spec = nflab_lab::Spec::parse(&text, "doctor")?;
    let plan = spec.expand(&text)?.remove(0);
    // Fresh and private: a directory planted under a guessable name is never used.
    let dir = nflab_io::safe_fs::fresh_private_dir(
        &std::env::temp_dir(),
        &format!("nflab-doctor-{}", std::process::id()),
    )
    .map_err(|e| anyhow::anyhow!("cannot create a private directory in the temp directory: {e}"))?;
    let outcome = nflab_lab::run::run_one(&plan, &dir, stop);
    let _ = std::fs::remove_dir_all(&dir);
    let s = outcome?.summary;
    Ok(NoiseFloor {
        rate_pps: rate,
        seconds,
        received: s.packets.received,
        lost: s.packets.lost,
        p50_ns: s.latency_ns.p50,
        p99_ns: s.latency_ns.p99,
        p99_9_ns: s.latency_ns.p99_9,
        max_ns: s.latency_ns.max,
        stdev_ns: s.latency_ns.stdev,
    })
}
