//! `nflab gen`: the generator alone, on named interfaces, or `--selfcheck` on a
//! throwaway loopback topology.
//!
//! The flags are the keys of the spec's `[traffic]` section (see docs/generator.md);
//! they are turned into a `TrafficSection` and go through the same checks and plan
//! building as `nflab run`.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;

use anyhow::{bail, Context};
use nflab_io::{PacketIo, UdpIo};
use nflab_lab::net::netns::NetnsGuard;
use nflab_lab::spec::{self, RateAccounting, TrafficSection};
use nflab_wire::{MacAddr, ProbeSpec};

/// I/O backend choice on the command line.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendArg {
    /// AF_XDP socket (copy mode on veth, zero-copy where the driver offers it); falls
    /// back to AF_PACKET with a notice when unavailable.
    AfXdp,
    /// XDP live frames (Linux 5.18+): the kernel stamps and sends each frame, no socket;
    /// one flow of one frame size. The peer must accept XDP frames (an XDP program or GRO
    /// on a veth peer).
    XdpLive,
    /// AF_PACKET with a TX ring and qdisc bypass.
    AfPacket,
    /// A plain UDP socket (payload only; the kernel builds the headers).
    Udp,
}

/// TX timestamp choice on the command line.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TxTimestampArg {
    /// The generator's CLOCK_REALTIME stamp, written into each probe.
    App,
    /// The kernel's stamp of each frame's hand-over to the device (SO_TIMESTAMPING),
    /// matched to its probe; the NIC's where it stamps in hardware.
    Kernel,
}

/// Pattern choice on the command line.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum PatternArg {
    /// Constant gaps.
    Cbr,
    /// Exponential gaps.
    Poisson,
    /// --burst packets back to back at the average --rate.
    Burst,
    /// CBR at --rate for --on-ms, silent for --off-ms.
    Onoff,
    /// --per-cycle packets at each cycle of --frequency-hz.
    Periodic,
    /// The timing and sizes of --trace, scaled by --speed.
    Replay,
}

/// Arguments of `nflab gen`.
#[derive(clap::Args)]
pub struct Args {
    /// Interface to send on (not with --selfcheck).
    #[arg(
        long,
        required_unless_present = "selfcheck",
        conflicts_with = "selfcheck"
    )]
    iface: Option<String>,
    /// Network namespace the interface lives in (from `ip netns list`; not with
    /// --selfcheck, which makes its own).
    #[arg(long, conflicts_with = "selfcheck")]
    netns: Option<String>,
    /// Backend.
    #[arg(long, value_enum, default_value = "af-packet")]
    backend: BackendArg,
    /// Send on a fresh loopback topology, record on its far end and print the
    /// generator's rate accuracy and inter-packet-gap precision (seed 000 §3.3). The
    /// topology sets the MACs and addresses; the pattern, shape and backend flags apply.
    #[arg(long)]
    selfcheck: bool,
    /// Destination MAC (af-packet, af-xdp).
    #[arg(long, default_value = "ff:ff:ff:ff:ff:ff")]
    dst_mac: MacAddr,
    /// Source MAC (default: the interface's).
    #[arg(long)]
    src_mac: Option<MacAddr>,
    /// Source address (an IPv6 address makes every stream IPv6).
    #[arg(long, default_value = "198.18.0.1")]
    src_ip: IpAddr,
    /// Destination address (benchmarking ranges only, unless --any-dst).
    #[arg(long, default_value = "198.19.0.1")]
    dst_ip: IpAddr,
    /// UDP source port (of flow 0).
    #[arg(long, default_value_t = 49152)]
    src_port: u16,
    /// UDP destination port (of flow 0).
    #[arg(long, default_value_t = 9)]
    dst_port: u16,
    /// Traffic pattern.
    #[arg(long, value_enum, default_value = "cbr")]
    pattern: PatternArg,
    /// Packets per second, or "max" (cbr only).
    #[arg(long, default_value = "10000")]
    rate: String,
    /// Bits per second instead of --rate (e.g. 1e9).
    #[arg(long)]
    rate_bps: Option<f64>,
    /// What a bit rate counts: l1 (frame + 20 B preamble/IFG) or l2 (frame with FCS).
    #[arg(long, default_value = "l1")]
    accounting: String,
    /// burst: packets per burst.
    #[arg(long, default_value_t = 8)]
    burst: u32,
    /// onoff: on period, ms.
    #[arg(long, default_value_t = 10.0)]
    on_ms: f64,
    /// onoff: off period, ms.
    #[arg(long, default_value_t = 10.0)]
    off_ms: f64,
    /// periodic: cycles per second.
    #[arg(long)]
    frequency_hz: Option<f64>,
    /// periodic: packets per cycle.
    #[arg(long, default_value_t = 1)]
    per_cycle: u32,
    /// replay: pcap or pcapng file.
    #[arg(long)]
    trace: Option<String>,
    /// replay: speed-up factor.
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// Number of packets (instead of --duration).
    #[arg(long)]
    count: Option<u64>,
    /// Seconds to send (after --warmup).
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Seconds of warm-up.
    #[arg(long, default_value_t = 0.0)]
    warmup: f64,
    /// Ethernet frame size including FCS.
    #[arg(long, default_value_t = 64)]
    frame_bytes: u64,
    /// Frame sizes sent in turn, e.g. 64,128,256 (with --size-weights: drawn at random).
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<u64>>,
    /// Weights of --sizes.
    #[arg(long, value_delimiter = ',')]
    size_weights: Option<Vec<f64>>,
    /// A named size mix: imix (64/594/1518 B, 7:4:1).
    #[arg(long)]
    size_mix: Option<String>,
    /// A size sweep FROM:TO:STEP, sent in turn.
    #[arg(long)]
    size_sweep: Option<String>,
    /// Number of flows, taken round robin.
    #[arg(long, default_value_t = 1)]
    flows: u32,
    /// Fields that differ per flow: src_ip, dst_ip, src_port, dst_port.
    #[arg(long, value_delimiter = ',', default_value = "src_port")]
    vary: Vec<String>,
    /// 802.1Q VLAN ID.
    #[arg(long)]
    vlan: Option<u16>,
    /// 802.1Q priority code point (with --vlan).
    #[arg(long, default_value_t = 0)]
    pcp: u8,
    /// DSCP, 0..63.
    #[arg(long, default_value_t = 0)]
    dscp: u8,
    /// TX threads, each with its own socket and pacer.
    #[arg(long, default_value_t = 1)]
    tx_threads: usize,
    /// Frames per backend call.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Run the TX threads under SCHED_FIFO (a busy host cannot preempt the pacer).
    #[arg(long)]
    realtime: bool,
    /// Which TX timestamp to report: app, or kernel (af-packet and udp backends).
    #[arg(long, value_enum, default_value = "app")]
    tx_timestamp: TxTimestampArg,
    /// With --tx-timestamp kernel: write every probe's kernel TX stamp to this file
    /// (the tx_stamps.nfts format of docs/formats.md).
    #[arg(long)]
    tx_stamps: Option<std::path::PathBuf>,
    /// Seed of Poisson gaps and random sizes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// First CPU of the TX threads.
    #[arg(long, default_value_t = 0)]
    cpu: usize,
    /// Allow a destination outside 198.18.0.0/15 and 2001:2::/48.
    #[arg(long)]
    any_dst: bool,
    /// Print the generator report as JSON.
    #[arg(long)]
    json: bool,
}

/// RFC 2544 / RFC 5180 benchmarking ranges.
pub fn is_benchmark_address(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            o[0] == 198 && (o[1] & 0xfe) == 18
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            s[0] == 0x2001 && s[1] == 0x0002 && s[2] == 0
        }
    }
}

pub fn parse_rate(s: &str) -> anyhow::Result<spec::Rate> {
    if s == "max" {
        return Ok(spec::Rate::Max);
    }
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(spec::Rate::Pps(r)),
        _ => bail!("--rate {s} is not valid: use a positive number of packets per second or max"),
    }
}

fn traffic_section(args: &Args) -> anyhow::Result<TrafficSection> {
    if !(args.duration.is_finite() && args.duration > 0.0) {
        bail!(
            "--duration {} is not valid: use a positive number of seconds",
            args.duration
        );
    }
    if !(args.warmup.is_finite() && args.warmup >= 0.0) {
        bail!(
            "--warmup {} is not valid: use 0 or more seconds",
            args.warmup
        );
    }
    let size_sweep = match &args.size_sweep {
        None => None,
        Some(s) => {
            let v: Vec<u64> = s.split(':').filter_map(|x| x.parse().ok()).collect();
            match v[..] {
                [a, b, c] => Some([a, b, c]),
                _ => bail!("--size-sweep {s} is not valid: use FROM:TO:STEP, e.g. 64:1518:64"),
            }
        }
    };
    let accounting = match args.accounting.as_str() {
        "l1" => RateAccounting::L1,
        "l2" => RateAccounting::L2,
        a => bail!("--accounting {a} is not valid: use l1 or l2"),
    };
    Ok(TrafficSection {
        backend: match args.backend {
            BackendArg::AfXdp => spec::Backend::AfXdp,
            BackendArg::XdpLive => spec::Backend::XdpLive,
            BackendArg::AfPacket => spec::Backend::AfPacket,
            BackendArg::Udp => spec::Backend::Udp,
        },
        pattern: match args.pattern {
            PatternArg::Cbr => spec::Pattern::Cbr,
            PatternArg::Poisson => spec::Pattern::Poisson,
            PatternArg::Burst => spec::Pattern::Burst,
            PatternArg::Onoff => spec::Pattern::Onoff,
            PatternArg::Periodic => spec::Pattern::Periodic,
            PatternArg::Replay => spec::Pattern::Replay,
        },
        rate_pps: parse_rate(&args.rate)?,
        rate_bps: args.rate_bps,
        rate_accounting: accounting,
        frame_bytes: args.frame_bytes,
        duration_s: args.duration,
        warmup_s: args.warmup,
        burst: args.burst,
        on_ms: args.on_ms,
        off_ms: args.off_ms,
        frequency_hz: args.frequency_hz,
        per_cycle: args.per_cycle,
        trace: args.trace.clone(),
        speed: args.speed,
        sizes: args.sizes.clone(),
        size_weights: args.size_weights.clone(),
        size_mix: args.size_mix.clone(),
        size_sweep,
        flows: args.flows,
        vary: args.vary.clone(),
        dscp: args.dscp,
        pcp: args.pcp,
        ip_version: if args.src_ip.is_ipv6() { 6 } else { 4 },
        vlan: args.vlan,
        tx_threads: args.tx_threads,
        batch: args.batch,
        tx_realtime: args.realtime,
        tx_timestamp: match args.tx_timestamp {
            TxTimestampArg::App => spec::TxTimestampMode::App,
            TxTimestampArg::Kernel => spec::TxTimestampMode::Kernel,
        },
        ..TrafficSection::default()
    })
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    if !args.any_dst && !is_benchmark_address(&args.dst_ip) {
        bail!(
            "--dst-ip {} is outside the benchmarking ranges 198.18.0.0/15 and 2001:2::/48: use one of those, or pass --any-dst for a network you own",
            args.dst_ip
        );
    }
    let kernel = args.tx_timestamp == TxTimestampArg::Kernel;
    if args.tx_stamps.is_some() && (!kernel || args.selfcheck) {
        bail!("--tx-stamps FILE needs --tx-timestamp kernel and no --selfcheck (nflab run and the self-check keep their own tx_stamps.nfts)");
    }
    let traffic = traffic_section(&args)?;
    if let Some(why) = traffic.backend.no_kernel_tx_stamps().filter(|_| kernel) {
        bail!("--tx-timestamp kernel needs --backend af-packet or udp: {why}");
    }
    let stop = super::stop_flag()?;
    let report = if args.selfcheck {
        selfcheck(&args, &traffic, &stop)?
    } else {
        send(&args, &traffic, &stop)?
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&args, &report);
    }
    Ok(if report.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

fn send(
    args: &Args,
    traffic: &TrafficSection,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<nflab_gen::GenReport> {
    let iface = args.iface.as_deref().unwrap_or_default();
    let guard = args.netns.as_deref().map(NetnsGuard::enter).transpose()?;
    let src_mac = match args.src_mac {
        Some(m) => m,
        None => MacAddr(nflab_io::iface::mac(iface)?),
    };
    let mtu = nflab_io::iface::mtu(iface)?;
    let base = ProbeSpec {
        src_mac,
        dst_mac: args.dst_mac,
        vlan: None,
        src_ip: args.src_ip,
        dst_ip: args.dst_ip,
        src_port: args.src_port,
        dst_port: args.dst_port,
        dscp: 0,
        ttl: 64,
        flow: 0,
        frame_bytes: 64,
        mtu,
    };
    let plan = plan_of(args, traffic, &base)?;
    if args.backend == BackendArg::XdpLive {
        if args.tx_threads != 1 {
            bail!("--tx-threads above 1 needs the af-packet or af-xdp backend");
        }
        // Live frames leave from the calling thread's namespace: stay in it.
        let report = nflab_gen::live::run_live(iface, &plan, stop)
            .with_context(|| format!("sending on {iface}"))?;
        drop(guard);
        return Ok(report);
    }
    let mut ios: Vec<Box<dyn PacketIo>> = match args.backend {
        BackendArg::Udp => {
            if args.tx_threads != 1 {
                bail!("--tx-threads above 1 needs the af-packet or af-xdp backend");
            }
            vec![Box::new(UdpIo::open(
                SocketAddr::new(args.src_ip, 0),
                Some(SocketAddr::new(args.dst_ip, args.dst_port)),
            )?)]
        }
        _ => nflab_lab::run::open_tx(traffic.backend, iface, traffic.tx_threads)?,
    };
    let source = if args.tx_timestamp == TxTimestampArg::Kernel {
        Some(nflab_lab::run::txstamps::enable(&mut ios)?)
    } else {
        None
    };
    drop(guard);
    let sidecar = match (&args.tx_stamps, &source) {
        (Some(p), Some(src)) => Some(nflab_lab::run::txstamps::Sidecar::create_at(p, "gen", src)?),
        _ => None,
    };
    let push = |b: &[nflab_gen::ProbeTxStamp]| {
        if let Some(sc) = &sidecar {
            sc.push(b);
        }
    };
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let refs: Vec<&mut dyn PacketIo> = ios
        .iter_mut()
        .map(|b| -> &mut dyn PacketIo { b.as_mut() })
        .collect();
    let cpu = args.cpu;
    let realtime = args.realtime;
    let pin = move |k: usize| {
        nflab_lab::sys::cpu::pin_thread((cpu + k) % ncpu);
        if realtime {
            if let Err(e) = nflab_io::clock::set_realtime(50) {
                eprintln!("warning: cannot run the TX thread under SCHED_FIFO: {e}");
            }
        }
    };
    let report = nflab_gen::run_threads_stamped(refs, &plan, stop, &pin, Some(&push))
        .with_context(|| format!("sending on {iface}"))?;
    if let Some(sc) = &sidecar {
        sc.finish()?;
    }
    Ok(report)
}

fn selfcheck(
    args: &Args,
    traffic: &TrafficSection,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<nflab_gen::GenReport> {
    nflab_lab::topo::check_root()?;
    let plan_check =
        nflab_lab::run::build_plan(traffic, args.seed, &nflab_lab::run::default_probe_base())?;
    drop(plan_check);
    // One veth queue per AF_XDP TX thread, as `nflab run` gives them.
    let queues = nflab_lab::run::topology::generator_queues(traffic);
    let topo = nflab_lab::dut::topology(spec::DutKind::Loopback, queues)?;
    let probe = nflab_lab::run::probe_base(&topo);
    let plan = plan_of(args, traffic, &probe)?;
    // Fresh and private: a directory planted under a guessable name is never used.
    let dir = nflab_io::safe_fs::fresh_private_dir(
        &std::env::temp_dir(),
        &format!("nflab-selfcheck-{}", std::process::id()),
    )
    .context("creating a private directory in the temp directory")?;
    let records = dir.join("records.nfr");
    let cpus = nflab_lab::run::TrafficCpus {
        gen: args.cpu,
        rec: std::thread::available_parallelism().map_or(1, |n| n.get()) - 1,
    };
    let sending = nflab_lab::run::Sending {
        plan: &plan,
        probe: &probe,
    };
    let out =
        nflab_lab::run::run_traffic(&topo, traffic, sending, "selfcheck", &records, cpus, stop);
    drop(topo);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out?.generator)
}

/// The generator's plan for `traffic` from `base`, sending `--count` packets instead of
/// for the duration when given.
fn plan_of(
    args: &Args,
    traffic: &TrafficSection,
    base: &ProbeSpec,
) -> anyhow::Result<nflab_gen::GenPlan> {
    let mut plan = nflab_lab::run::build_plan(traffic, args.seed, base)?;
    if let Some(c) = args.count {
        plan.count = Some(c);
        plan.duration_ns = None;
    }
    Ok(plan)
}

fn print_report(args: &Args, r: &nflab_gen::GenReport) {
    let human = nflab_lab::study::results::human_pps;
    println!(
        "sent {} frames ({} streams, {} flows) on {} via {}{}, {} thread(s); achieved {} (offered {}){}",
        r.sent,
        r.streams.len(),
        r.flows.len(),
        args.iface.as_deref().unwrap_or("a loopback topology"),
        r.backend,
        r.backend_mode
            .as_deref()
            .map_or(String::new(), |m| format!(" ({m} mode)")),
        r.threads,
        human(r.tx_pps),
        human(r.offered_pps),
        if r.interrupted { "; interrupted" } else { "" }
    );
    if let Some(sc) = &r.selfcheck {
        // At rate = "max" nothing is configured to compare with: the achieved rate only.
        let against_schedule = match (sc.rate_accuracy, sc.ipg_mse_ns2, sc.ipg_rmse_ns) {
            (Some(acc), Some(mse), Some(rmse)) => format!(
                "rate accuracy {acc:.5} ({:+.3} %), IPG mean {:.0} ns, MSE {mse:.0} ns² (RMSE {rmse:.0} ns)",
                (acc - 1.0) * 100.0,
                sc.ipg_mean_ns
            ),
            _ => format!(
                "achieved {} at rate max (no configured rate or gap to compare with), IPG mean {:.0} ns",
                human(Some(sc.achieved_pps)),
                sc.ipg_mean_ns
            ),
        };
        println!(
            "self-check ({}): {} packets, {against_schedule}",
            sc.measured_on, sc.packets
        );
        let total: u64 = sc.histogram.iter().map(|b| b.count).sum();
        let mut top: Vec<_> = sc.histogram.iter().collect();
        top.sort_by_key(|b| std::cmp::Reverse(b.count));
        for b in top.iter().take(8) {
            println!(
                "  IPG {:>9}..{:<9} ns  {:>6.2} %",
                b.lo_ns,
                b.lo_ns + sc.histogram_width_ns,
                b.count as f64 * 100.0 / total.max(1) as f64
            );
        }
        for w in &sc.warnings {
            println!("warning: {w}");
        }
    }
    if let Some(t) = &r.tx_stamps {
        println!(
            "kernel TX timestamps ({}): {} of {} probes matched, {} missing{}",
            t.source,
            t.matched,
            t.probes,
            t.missing,
            t.kernel_minus_app_ns
                .map(|s| format!(
                    "; kernel − application stamp p50 {} ns, p99 {} ns",
                    s.p50, s.p99
                ))
                .unwrap_or_default()
        );
    }
    for w in &r.warnings {
        println!("warning: {w}");
    }
}
