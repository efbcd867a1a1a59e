//! `nflab model resource|urllc|wlan|batch|sim|fit`: argument parsing and
//! printing; the models live in `nflab-model`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use nflab_analyze::dist::{Distribution, Pct, DEFAULT_EXACT_LIMIT, DEFAULT_HDR_DIGITS};
use nflab_lab::study::model_fit::{fit_and_write, FitSettings};
use nflab_model::batch::{self, BatchInputs};
use nflab_model::dist::SlotDist;
use nflab_model::resource::{
    self, Bus, CacheLevels, CostComponents, InterruptLoad, ResourceInputs,
};
use nflab_model::sim::{
    self, Arrivals, Interruption, PollMode, Service, ServiceDist, ServiceMean, SimConfig,
};

/// Arguments of `nflab model`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    model: Model,
}

#[derive(clap::Subcommand)]
enum Model {
    /// Throughput bound: min(interconnect, f · cores / c) (seed 000, ch. 4–5).
    Resource(ResourceArgs),
    /// URLLC overload bound R_max = (1 s − Σ r·d) / t_CPU (seed 000, Eq. 5.10).
    Urllc(UrllcArgs),
    /// 802.11g WLAN bound 1 / (0.15 µs·x + 162.43 µs + t_impl) (seed 000, Eq. 6.7).
    Wlan(WlanArgs),
    /// Batch-polling queue Gi/Gi^[X]/1−L: loss, batch size, latency (seed 003).
    Batch(BatchArgs),
    /// Discrete-event simulation of a polling pipeline; writes .nfr records.
    Sim(SimArgs),
    /// Compare the models with an experiment directory of `nflab run`.
    Fit(FitArgs),
    /// MVNOCoreSim: IoT attach signaling through CMAP, HLR, AUC, Backend (seed 003, ch. 4).
    Mvno(MvnoArgs),
}

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
struct MvnoArgs {
    /// Spec file (TOML, see examples/mvno.toml); the seed's values otherwise.
    spec: Option<PathBuf>,
    /// New devices per second.
    #[arg(long)]
    rate: Option<f64>,
    /// Simulated seconds.
    #[arg(long)]
    duration_s: Option<f64>,
    /// Seconds trimmed before the means (default: the spec's 60, or a fifth
    /// of a shorter run).
    #[arg(long)]
    warmup_s: Option<f64>,
    /// baseline, dropping, msu or device.
    #[arg(long)]
    policy: Option<String>,
    /// NAME=COUNT processors (cmap, hlr, auc, backend); repeatable.
    #[arg(long)]
    processors: Vec<String>,
    /// Random seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Write series.csv/.parquet (per second), retries.csv/.parquet (per
    /// device), figures/ and report.html here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
struct ResourceArgs {
    /// Core clock in Hz.
    #[arg(long, default_value_t = 3.3e9)]
    cpu_hz: f64,
    /// Cores processing packets.
    #[arg(long, default_value_t = 1.0)]
    cores: f64,
    /// CPU cycles per packet, all costs included; or give the components.
    #[arg(long)]
    cycles_per_packet: Option<f64>,
    /// Link rate in bit/s.
    #[arg(long, default_value_t = 10e9)]
    link_bps: f64,
    /// Frame size including FCS.
    #[arg(long, default_value_t = 64.0)]
    frame_bytes: f64,
    /// Framework receive + send cycles per packet (DPDK ≈ 100).
    #[arg(long, default_value_t = 0.0)]
    c_io: f64,
    /// Task calculation cycles per packet.
    #[arg(long, default_value_t = 0.0)]
    c_task_calc: f64,
    /// Data accesses per packet (cost from the cache levels or --access-ns).
    #[arg(long, default_value_t = 0.0)]
    accesses_per_packet: f64,
    /// Size of the accessed structure, bytes.
    #[arg(long, default_value_t = 0.0)]
    working_set_bytes: f64,
    /// Time per access that does not scale with the clock (router model), ns.
    #[arg(long, default_value_t = 0.0)]
    access_ns: f64,
    /// Network functions in the chain.
    #[arg(long, default_value_t = 1.0)]
    nfs: f64,
    /// Cycles to pass a packet from one NF to the next.
    #[arg(long, default_value_t = 0.0)]
    c_chain: f64,
    /// An internal bus of Table 4.1 (pcie2x8, pcie3x8, pcie4x8, ddr3-800,
    /// ddr3-1600, ddr4-1600, ddr4-3200, qpi, upi), NAME*K for K in parallel.
    #[arg(long)]
    bus: Vec<String>,
    /// A measured saturation rate: also print the cycles per packet it implies.
    #[arg(long)]
    measured_pps: Option<f64>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
struct UrllcArgs {
    /// Processing time per packet, ns; or give the two medians.
    #[arg(long)]
    t_cpu_ns: Option<f64>,
    /// Median latency of the application, ns.
    #[arg(long)]
    median_app_ns: Option<f64>,
    /// Median latency of a forwarder without processing (l2fwd), ns.
    #[arg(long)]
    median_baseline_ns: Option<f64>,
    /// An interrupt source RATE_HZ:DURATION_NS (repeatable), e.g. 166.7:10900.
    #[arg(long)]
    interrupt: Vec<String>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
struct WlanArgs {
    /// Packet size x, bytes.
    #[arg(long, default_value_t = 1400.0)]
    frame_bytes: f64,
    /// Implementation delay t_impl, µs.
    #[arg(long, default_value_t = 120.0)]
    t_impl_us: f64,
    /// A measured saturation rate: fit t_impl from it instead.
    #[arg(long)]
    measured_pps: Option<f64>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Service-time flags shared by `batch` and `sim`.
#[derive(clap::Args)]
struct ServiceArgs {
    /// Service time of a poll regardless of its batch (E[B_0]), ns.
    #[arg(long, default_value_t = 1000.0)]
    fixed_ns: f64,
    /// Service time per packet in a batch, ns.
    #[arg(long, default_value_t = 80.0)]
    per_packet_ns: f64,
    /// Mean service time per batch size 0,1,2,… as a comma list or a file
    /// with one number per line (ns); replaces --fixed-ns/--per-packet-ns.
    #[arg(long)]
    service_table: Option<String>,
}

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
struct BatchArgs {
    /// Offered rate, packets/s (default: 5 Gbit/s of 64 B frames).
    #[arg(long)]
    rate_pps: Option<f64>,
    /// Inter-arrival distribution: poisson, geometric, deterministic, negbin, empirical.
    #[arg(long, default_value = "poisson")]
    arrivals: String,
    /// Coefficient of variation of the negbin inter-arrival time.
    #[arg(long, default_value_t = 0.5)]
    cv: f64,
    /// Record file (.nfr) whose tx times give the empirical inter-arrival times.
    #[arg(long)]
    records: Option<PathBuf>,
    /// Slot length Δt, ns.
    #[arg(long, default_value_t = 10.0)]
    dt_ns: f64,
    /// Queue capacity L.
    #[arg(long, default_value_t = 4096)]
    queue: usize,
    /// Maximum batch size β.
    #[arg(long, default_value_t = 256)]
    batch: usize,
    #[command(flatten)]
    service: ServiceArgs,
    /// Service time distribution around its mean: poisson or deterministic.
    #[arg(long, default_value = "poisson")]
    service_dist: String,
    /// Convergence threshold of the fixed-point iteration (L1 change).
    #[arg(long, default_value_t = 1e-12)]
    tolerance: f64,
    /// Maximum fixed-point iterations.
    #[arg(long, default_value_t = 100_000)]
    max_iterations: usize,
    /// Also print the distributions (queue at polls, at arrivals, at random
    /// times, waiting and sojourn time) in the JSON output.
    #[arg(long)]
    distributions: bool,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
struct SimArgs {
    /// Arrival process: cbr, poisson, bursts, geometric, negbin, replay.
    #[arg(long, default_value = "poisson")]
    arrivals: String,
    /// Offered rate, packets/s.
    #[arg(long, default_value_t = 1e6)]
    rate_pps: f64,
    /// Packets per burst (--arrivals bursts).
    #[arg(long, default_value_t = 32)]
    burst: u32,
    /// Gap between the packets of a burst, ns (64 B at 10G: 67.2).
    #[arg(long, default_value_t = 67.2)]
    burst_gap_ns: f64,
    /// Coefficient of variation (--arrivals negbin).
    #[arg(long, default_value_t = 0.5)]
    cv: f64,
    /// Record file whose inter-arrival times are replayed (--arrivals replay).
    #[arg(long)]
    replay: Option<PathBuf>,
    /// Packets to generate.
    #[arg(long, default_value_t = 1_000_000)]
    packets: u64,
    /// Leading packets left out of the statistics.
    #[arg(long, default_value_t = 0)]
    warmup_packets: u64,
    /// Flows (packet k belongs to flow k mod flows).
    #[arg(long, default_value_t = 1)]
    flows: u16,
    /// Cores behind RSS (flow mod cores).
    #[arg(long, default_value_t = 1)]
    cores: u16,
    /// Queue capacity per core.
    #[arg(long, default_value_t = 4096)]
    queue: usize,
    /// Maximum batch size.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Drain timer: a short batch waits until its oldest packet is this old, ns.
    #[arg(long, default_value_t = 0)]
    drain_ns: u64,
    /// busy-poll or interrupt.
    #[arg(long, default_value = "busy-poll")]
    mode: String,
    /// Minimum time between interrupts (interrupt mode), ns.
    #[arg(long, default_value_t = 0)]
    moderation_ns: u64,
    /// From interrupt to first poll (interrupt mode), ns.
    #[arg(long, default_value_t = 0)]
    wake_ns: u64,
    #[command(flatten)]
    service: ServiceArgs,
    /// Service time distribution: deterministic, exponential, poisson (on --dt-ns).
    #[arg(long, default_value = "deterministic")]
    service_dist: String,
    /// Slot length for geometric/negbin arrivals and poisson service, ns.
    #[arg(long, default_value_t = 10)]
    dt_ns: u64,
    /// A periodic OS interruption RATE_HZ:D1[,D2,…][@PHASE_NS] with
    /// durations in ns taken cyclically (repeatable), e.g. 250:10900,10900,13600.
    #[arg(long)]
    interrupt: Vec<String>,
    /// Constant added to every latency (wire, recorder), ns.
    #[arg(long, default_value_t = 0)]
    wire_ns: u64,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the delivered packets to this .nfr file (read it with `nflab analyze`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
struct FitArgs {
    /// Experiment directory of `nflab run` (with runs/NNN/).
    dir: PathBuf,
    /// Core clock of the DuT, Hz (to use known sheep cycles per packet and
    /// to report the fitted cycles per packet).
    #[arg(long)]
    cpu_hz: Option<f64>,
    /// Cores of the DuT processing packets.
    #[arg(long, default_value_t = 1.0)]
    cores: f64,
    /// Framework I/O cycles per packet added to the sheep cycles.
    #[arg(long, default_value_t = 0.0)]
    c_io: f64,
    /// Median latency of a forwarder without processing, ns (default: the
    /// median of the experiment's loopback runs, if any).
    #[arg(long)]
    baseline_median_ns: Option<f64>,
    /// Batch size of the DuT's poller (default: dut.batch of the spec, else 32).
    #[arg(long)]
    batch: Option<usize>,
    /// Receive queue capacity of the DuT (default: dut.queue of the spec, else 4096).
    #[arg(long)]
    queue: Option<usize>,
    /// An interrupt source RATE_HZ:DURATION_NS of the DuT core (repeatable).
    #[arg(long)]
    interrupt: Vec<String>,
    /// Packets simulated per run, at most.
    #[arg(long, default_value_t = 200_000)]
    sim_packets: u64,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    match args.model {
        Model::Resource(a) => resource_cmd(a)?,
        Model::Urllc(a) => urllc_cmd(a)?,
        Model::Wlan(a) => wlan_cmd(a)?,
        Model::Batch(a) => batch_cmd(a)?,
        Model::Sim(a) => sim_cmd(a)?,
        Model::Fit(a) => fit_cmd(a)?,
        Model::Mvno(a) => mvno_cmd(a)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// JSON with no NaN or infinity anywhere (serde_json writes them as null;
/// refuse instead, so a consumer never sees a silent hole).
fn print_json(v: &impl serde::Serialize) -> anyhow::Result<()> {
    let value = serde_json::to_value(v)?;
    fn finite(v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::Number(n) => n.as_f64().is_some_and(f64::is_finite),
            serde_json::Value::Array(a) => a.iter().all(finite),
            serde_json::Value::Object(o) => o.values().all(finite),
            _ => true,
        }
    }
    let text = serde_json::to_string_pretty(&value)?;
    if !finite(&value) || text.contains("NaN") {
        bail!("the model produced a non-finite number for these inputs; please report this with the command line");
    }
    println!("{text}");
    Ok(())
}

fn f(v: f64) -> String {
    if v.abs() >= 1e6 {
        format!("{:.3} M", v / 1e6)
    } else if v.abs() >= 1e3 {
        format!("{:.3} k", v / 1e3)
    } else {
        format!("{v:.3}")
    }
}

fn parse_interrupt(s: &str) -> anyhow::Result<InterruptLoad> {
    let (rate_hz, duration_ns) = nflab_lab::spec::model::parse_interrupt(s)
        .map_err(|m| anyhow::anyhow!("--interrupt {m}"))?;
    Ok(InterruptLoad {
        rate_hz,
        duration_ns,
    })
}

fn resource_cmd(a: ResourceArgs) -> anyhow::Result<()> {
    let buses = a
        .bus
        .iter()
        .map(|b| Bus::from_table(b))
        .collect::<Result<Vec<_>, _>>()?;
    let p = resource::resource(&ResourceInputs {
        cpu_hz: a.cpu_hz,
        cores: a.cores,
        cycles_per_packet: a.cycles_per_packet.unwrap_or(0.0),
        link_bps: a.link_bps,
        frame_bytes: a.frame_bytes,
        costs: CostComponents {
            c_io: a.c_io,
            c_task_calc: a.c_task_calc,
            accesses_per_packet: a.accesses_per_packet,
            working_set_bytes: a.working_set_bytes,
            access_ns: a.access_ns,
            nfs: a.nfs,
            c_chain: a.c_chain,
            caches: CacheLevels::SANDY_BRIDGE,
        },
        buses,
    })?;
    if let Some(c) = a.cycles_per_packet {
        if c <= 0.0 {
            bail!("--cycles-per-packet = {c} is not valid: use a positive number");
        }
    }
    let fitted = a
        .measured_pps
        .map(|m| resource::fit_cycles_per_packet(m, a.cpu_hz, a.cores))
        .transpose()?;
    if a.json {
        let mut v = serde_json::to_value(&p)?;
        if let Some(c) = fitted {
            v["fitted_cycles_per_packet"] = c.into();
        }
        return print_json(&v);
    }
    println!(
        "T_max        {:>14.0} pps  {:>10.3} Gbit/s  (bound: {})",
        p.t_max_pps,
        p.t_max_bps / 1e9,
        serde_json::to_value(p.bound)?.as_str().unwrap_or("?")
    );
    println!(
        "  ethernet   {:>14.0} pps  ({} B frames + 20 B L1 overhead at {} bit/s)",
        p.ethernet_pps, a.frame_bytes, a.link_bps
    );
    for b in &p.buses {
        println!("  {:<10} {:>14.0} pps", b.name, b.pps);
    }
    println!(
        "  cpu        {:>14.0} pps  ({} cores × {} Hz / {:.1} cycles)",
        p.cpu_pps, a.cores, a.cpu_hz, p.cycles_per_packet
    );
    if let Some(c) = &p.costs {
        println!(
            "    c = c_IO {:.1} + chain {:.1} + calc {:.1} + access {:.1}",
            c.c_io, c.c_chain, c.c_task_calc, c.c_task_access
        );
    }
    println!(
        "  crossover  {:>14.1} cycles per packet",
        p.crossover_cycles
    );
    println!(
        "  c_busy     {:>14.1} idle-polling cycles per packet",
        p.c_busy_cycles
    );
    if let Some(c) = fitted {
        println!("  fitted c   {c:>14.1} cycles per packet from the measured rate");
    }
    Ok(())
}

fn urllc_cmd(a: UrllcArgs) -> anyhow::Result<()> {
    let t_cpu = match (a.t_cpu_ns, a.median_app_ns, a.median_baseline_ns) {
        (Some(t), _, _) => t,
        (None, Some(app), Some(base)) => resource::fit_t_cpu_ns(app, base)?,
        _ => bail!("give --t-cpu-ns, or --median-app-ns with --median-baseline-ns to derive it"),
    };
    let irqs = a
        .interrupt
        .iter()
        .map(|s| parse_interrupt(s))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let p = resource::urllc_r_max(t_cpu, &irqs)?;
    if a.json {
        return print_json(&p);
    }
    println!("R_max        {:>12.0} pps", p.r_max_pps);
    println!("  t_CPU      {:>12.1} ns per packet", p.t_cpu_ns);
    println!(
        "  d_Σ        {:>12.1} µs of interrupts per second",
        p.interrupt_ns_per_s / 1e3
    );
    Ok(())
}

fn wlan_cmd(a: WlanArgs) -> anyhow::Result<()> {
    let t_impl = match a.measured_pps {
        Some(m) => resource::wlan_fit_t_impl_us(a.frame_bytes, m)?,
        None => a.t_impl_us,
    };
    let p = resource::wlan(a.frame_bytes, t_impl)?;
    if a.json {
        let mut v = serde_json::to_value(&p)?;
        v["t_impl_us"] = t_impl.into();
        return print_json(&v);
    }
    println!("T_max        {:>10.1} pps", p.t_max_pps);
    println!(
        "  t*_avg     {:>10.1} µs per frame (t_impl {t_impl:.1} µs)",
        p.t_avg_us
    );
    println!("  payload    {:>10.2} Mbit/s", p.payload_bps / 1e6);
    Ok(())
}

fn service_mean(s: &ServiceArgs) -> anyhow::Result<ServiceMean> {
    let Some(t) = &s.service_table else {
        return Ok(ServiceMean::Linear {
            fixed_ns: s.fixed_ns,
            per_packet_ns: s.per_packet_ns,
        });
    };
    let text = if Path::new(t).exists() {
        std::fs::read_to_string(t).with_context(|| format!("cannot read --service-table {t}"))?
    } else {
        t.clone()
    };
    let mean_ns = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|x| !x.is_empty())
        .map(|x| {
            x.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .with_context(|| format!("--service-table: {x:?} is not a time ≥ 0 in ns"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    if mean_ns.is_empty() {
        bail!("--service-table {t:?} holds no numbers; give the mean service time of batch sizes 0, 1, 2, … in ns");
    }
    Ok(ServiceMean::Table { mean_ns })
}

fn record_gaps_slots(path: &Path, dt_ns: f64) -> anyhow::Result<Vec<u64>> {
    let gaps = sim::read_gaps_ns(path)?;
    Ok(gaps
        .iter()
        .map(|g| (*g as f64 / dt_ns).round() as u64)
        .collect())
}

fn batch_cmd(a: BatchArgs) -> anyhow::Result<()> {
    if !(a.dt_ns.is_finite() && a.dt_ns > 0.0) {
        bail!(
            "--dt-ns = {} is not valid: use a positive slot length in ns",
            a.dt_ns
        );
    }
    let rate = a.rate_pps.unwrap_or(5e9 / (84.0 * 8.0));
    if !(rate.is_finite() && rate > 0.0) {
        bail!("--rate-pps = {rate} is not valid: use a positive rate");
    }
    let mean_slots = 1e9 / rate / a.dt_ns;
    let arrivals = match a.arrivals.as_str() {
        "poisson" => SlotDist::poisson(mean_slots)?,
        "geometric" => SlotDist::geometric(mean_slots)?,
        "deterministic" | "cbr" => {
            SlotDist::deterministic(mean_slots.round().max(1.0) as u64)
        }
        "negbin" => SlotDist::negative_binomial(mean_slots, a.cv)?,
        "empirical" => {
            let Some(p) = &a.records else {
                bail!("--arrivals empirical needs --records FILE.nfr");
            };
            SlotDist::empirical(&record_gaps_slots(p, a.dt_ns)?)?
        }
        other => bail!(
            "--arrivals {other:?} is not known: use poisson, geometric, deterministic, negbin or empirical"
        ),
    };
    let dist = match a.service_dist.as_str() {
        "poisson" => ServiceDist::PoissonSlots {
            dt_ns: a.dt_ns.round() as u64,
        },
        "deterministic" => ServiceDist::Deterministic,
        other => bail!("--service-dist {other:?} is not known: use poisson or deterministic"),
    };
    let (service, family) =
        batch::service_slots(&service_mean(&a.service)?, dist, a.batch, a.dt_ns)?;
    let s = batch::solve(&BatchInputs {
        arrivals,
        service,
        service_family: family,
        queue_capacity: a.queue,
        batch: a.batch,
        dt_ns: a.dt_ns,
        tolerance: a.tolerance,
        max_iterations: a.max_iterations,
    })?;
    if a.json {
        let mut v = serde_json::to_value(&s)?;
        if a.distributions {
            v["distributions"] = serde_json::to_value(&s.dists)?;
        }
        return print_json(&v);
    }
    println!("offered                 {:>14} pps", f(s.offered_pps));
    println!("carried                 {:>14} pps", f(s.throughput_pps));
    println!("loss probability        {:>14.6}", s.loss_probability);
    println!(
        "mean batch size         {:>14.3}  (non-empty {:.3})",
        s.mean_batch_size, s.mean_nonempty_batch_size
    );
    println!(
        "mean batch service      {:>14.1} ns",
        s.mean_batch_service_ns
    );
    println!("mean queue at polls     {:>14.3}", s.mean_queue_at_polls);
    println!(
        "  seen by arrivals      {:>14.3}",
        s.mean_queue_seen_by_arrivals
    );
    println!("  at random times       {:>14.3}", s.mean_queue_random_time);
    println!("mean waiting time       {:>14.1} ns", s.mean_wait_ns);
    println!("mean sojourn time       {:>14.1} ns", s.mean_sojourn_ns);
    let [p50, p90, p99, p999] = s.sojourn_quantiles_ns;
    println!("sojourn p50/p90/p99/p99.9  {p50:.0} / {p90:.0} / {p99:.0} / {p999:.0} ns");
    println!(
        "fixed-point iterations  {:>14}  (last change {:.1e})",
        s.iterations, s.residual
    );
    Ok(())
}

fn parse_interruption(s: &str) -> anyhow::Result<Interruption> {
    let (body, phase) = match s.split_once('@') {
        Some((b, p)) => (
            b,
            p.trim()
                .parse::<u64>()
                .with_context(|| format!("--interrupt {s:?}: the phase after @ must be ns"))?,
        ),
        None => (s, 0),
    };
    let (r, ds) = body
        .split_once(':')
        .with_context(|| format!("--interrupt {s:?}: write RATE_HZ:D1[,D2,…][@PHASE_NS]"))?;
    let rate_hz: f64 = r
        .trim()
        .parse()
        .with_context(|| format!("--interrupt {s:?}: the rate {r:?} is not a number"))?;
    let durations_ns = ds
        .split(',')
        .map(|d| {
            d.trim()
                .parse::<u64>()
                .with_context(|| format!("--interrupt {s:?}: the duration {d:?} is not whole ns"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Interruption {
        rate_hz,
        durations_ns,
        phase_ns: phase,
    })
}

fn sim_cmd(a: SimArgs) -> anyhow::Result<()> {
    let mean_slots = 1e9 / a.rate_pps / a.dt_ns as f64;
    let arrivals = match a.arrivals.as_str() {
        "cbr" => Arrivals::Cbr { rate_pps: a.rate_pps },
        "poisson" => Arrivals::Poisson { rate_pps: a.rate_pps },
        "bursts" => Arrivals::Bursts {
            rate_pps: a.rate_pps,
            burst: a.burst,
            gap_ns: a.burst_gap_ns,
        },
        "geometric" | "negbin" => {
            if !(a.rate_pps.is_finite() && a.rate_pps > 0.0) || a.dt_ns == 0 {
                bail!("--rate-pps = {} and --dt-ns = {} must be positive", a.rate_pps, a.dt_ns);
            }
            let dist = if a.arrivals == "geometric" {
                SlotDist::geometric(mean_slots)?
            } else {
                SlotDist::negative_binomial(mean_slots, a.cv)?
            };
            Arrivals::Slots { dist, dt_ns: a.dt_ns }
        }
        "replay" => {
            let Some(p) = &a.replay else {
                bail!("--arrivals replay needs --replay FILE.nfr");
            };
            Arrivals::Replay {
                gaps_ns: sim::read_gaps_ns(p)?,
            }
        }
        other => bail!(
            "--arrivals {other:?} is not known: use cbr, poisson, bursts, geometric, negbin or replay"
        ),
    };
    let mode = match a.mode.as_str() {
        "busy-poll" => PollMode::BusyPoll,
        "interrupt" => PollMode::Interrupt {
            moderation_ns: a.moderation_ns,
            wake_ns: a.wake_ns,
        },
        other => bail!("--mode {other:?} is not known: use busy-poll or interrupt"),
    };
    let dist = match a.service_dist.as_str() {
        "deterministic" => ServiceDist::Deterministic,
        "exponential" => ServiceDist::Exponential,
        "poisson" => ServiceDist::PoissonSlots { dt_ns: a.dt_ns },
        other => bail!(
            "--service-dist {other:?} is not known: use deterministic, exponential or poisson"
        ),
    };
    let interruptions = a
        .interrupt
        .iter()
        .map(|s| parse_interruption(s))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let cfg = SimConfig {
        arrivals,
        packets: a.packets,
        warmup_packets: a.warmup_packets,
        flows: a.flows,
        cores: a.cores,
        queue_capacity: a.queue,
        batch: a.batch,
        drain_ns: a.drain_ns,
        mode,
        service: Service {
            mean: service_mean(&a.service)?,
            dist,
        },
        interruptions,
        wire_ns: a.wire_ns,
        seed: a.seed,
        keep_packets: a.out.is_some(),
    };
    let started = std::time::Instant::now();
    let out = sim::simulate(&cfg)?;
    let wall = started.elapsed().as_secs_f64();
    if let Some(p) = &a.out {
        sim::write_nfr(p, &cfg, &out)?;
    }
    let s = &out.stats;
    if a.json {
        let mut v = serde_json::to_value(s)?;
        v["wall_s"] = wall.into();
        if wall > 0.0 {
            v["events_per_s"] = (s.events as f64 / wall).into();
        }
        return print_json(&v);
    }
    println!(
        "offered / carried     {} / {} pps",
        f(s.offered_pps),
        f(s.throughput_pps)
    );
    println!(
        "packets               {} arrived, {} dropped, {} delivered",
        s.arrived, s.dropped, s.delivered
    );
    println!("loss probability      {:.6}", s.loss_probability);
    println!(
        "mean batch size       {:.3}  (non-empty {:.3})",
        s.mean_batch_size, s.mean_nonempty_batch_size
    );
    let [p50, p90, p99, p999, p9999] = s.sojourn_quantiles_ns;
    println!(
        "sojourn mean ± sd     {:.1} ± {:.1} ns",
        s.mean_sojourn_ns, s.stdev_sojourn_ns
    );
    println!(
        "sojourn p50/p90/p99/p99.9/p99.99  {p50:.0} / {p90:.0} / {p99:.0} / {p999:.0} / {p9999:.0} ns"
    );
    println!(
        "sojourn min / max     {} / {} ns",
        s.min_max_sojourn_ns[0], s.min_max_sojourn_ns[1]
    );
    println!(
        "events                {} in {:.3} s ({:.1} M events/s)",
        s.events,
        wall,
        s.events as f64 / wall.max(1e-9) / 1e6
    );
    if let Some(p) = &a.out {
        println!("records               {}", p.display());
    }
    Ok(())
}

fn mvno_cmd(a: MvnoArgs) -> anyhow::Result<()> {
    use nflab_model::mvno::{self, MvnoSpec, Policy};
    let mut spec = match &a.spec {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read {}", p.display()))?;
            let base = p.parent().unwrap_or(Path::new("."));
            MvnoSpec::from_toml(&text, base).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?
        }
        None => MvnoSpec::default(),
    };
    if let Some(r) = a.rate {
        spec.rate_per_s = r;
    }
    if let Some(d) = a.duration_s {
        spec.duration_s = d;
    }
    match a.warmup_s {
        Some(w) => spec.warmup_s = w,
        None if spec.warmup_s >= spec.duration_s => spec.warmup_s = spec.duration_s / 5.0,
        None => {}
    }
    if let Some(p) = &a.policy {
        spec.policy = Policy::parse(p).ok_or_else(|| {
            anyhow::anyhow!("--policy {p:?} is not known: use baseline, dropping, msu or device")
        })?;
    }
    for p in a.processors.iter().flat_map(|p| p.split(',')) {
        spec.set_processors(p)?;
    }
    if let Some(s) = a.seed {
        spec.seed = s;
    }
    let cfg = spec.check()?;
    let r = mvno::run(&cfg);
    let p99_retries = p99(&r.retries_per_device);
    let mut v = serde_json::to_value(&r)?;
    v["p99_retries"] = serde_json::json!(p99_retries);
    v["policy"] = serde_json::to_value(cfg.policy)?;
    if let Some(dir) = &a.out {
        r.write_csv(dir)
            .with_context(|| format!("cannot write the series into {}", dir.display()))?;
        // Parquet next to the CSV, the figures and report.html (crates/report/src/mvno.rs).
        nflab_report::mvno::write_run(dir, &r, cfg.warmup_s, p99_retries, &v)?;
    }
    if a.json {
        return print_json(&v);
    }
    println!(
        "{} devices/s offered ({:?}), {:.1} attached/s after {} s warm-up",
        f(cfg.rate_per_s),
        cfg.policy,
        r.attach_rate_per_s,
        cfg.warmup_s
    );
    for (c, u) in &r.utilisation {
        println!("  utilisation {c:<8} {u:.3}");
    }
    println!(
        "  retries: max {}, p99 {p99_retries}; {} events in {:.2} s ({} events/s)",
        r.max_retries,
        r.events,
        r.wall_s,
        f(r.events_per_s)
    );
    Ok(())
}

/// Nearest-rank 99th percentile through nflab-analyze.
fn p99(values: &[u32]) -> i64 {
    let mut d = Distribution::new(DEFAULT_EXACT_LIMIT, DEFAULT_HDR_DIGITS);
    for &v in values {
        d.record(i64::from(v));
    }
    d.quantiles(&[pct("99")])
        .first()
        .copied()
        .flatten()
        .map_or(0, |q| q.value)
}

fn pct(p: &str) -> Pct {
    Pct::parse(p).unwrap_or_else(|| unreachable!("{p} is a percentile"))
}

fn fit_cmd(a: FitArgs) -> anyhow::Result<()> {
    let interrupts = a
        .interrupt
        .iter()
        .map(|s| parse_interrupt(s))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let settings = FitSettings {
        cpu_hz: a.cpu_hz,
        cores: a.cores,
        c_io: a.c_io,
        baseline_median_ns: a.baseline_median_ns,
        batch: a.batch,
        queue: a.queue,
        interrupts,
        sim_packets: a.sim_packets,
    };
    let (r, model_json) = fit_and_write(&a.dir, &settings, "nflab model fit")?;
    if a.json {
        return print_json(&r);
    }
    println!(
        "predictions written to {} (report: nflab report DIR)",
        model_json.display()
    );
    println!("method                 {}", r.method);
    println!(
        "t_CPU                  {:.1} ns per packet (baseline {:.1} ns)",
        r.t_cpu_ns, r.baseline_ns
    );
    print!(
        "saturation             predicted {} pps",
        f(r.predicted_saturation_pps)
    );
    match (r.measured_saturation_pps, r.saturation_relative_error) {
        (Some(m), Some(e)) => println!(", measured {} pps, RE {:.1} %", f(m), e * 100.0),
        _ => println!(", not reached (max carried {} pps)", f(r.max_carried_pps)),
    }
    if let Some(c) = r.fitted_cycles_per_packet {
        println!("fitted c               {c:.1} cycles per packet");
    }
    println!();
    println!(
        "{:<6} {:>12} {:>9} {:>9} {:>11} {:>11} {:>11} {:>11} {:>7} {:>7}",
        "run", "offered pps", "loss", "pred", "mean ns", "pred", "p50 ns", "pred", "RE %", "JSD"
    );
    let o = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |x| format!("{x:.p$}"));
    for x in &r.runs {
        println!(
            "{:<6} {:>12.0} {:>9.4} {:>9.4} {:>11} {:>11.0} {:>11} {:>11.0} {:>7} {:>7}",
            x.name,
            x.offered_pps,
            x.measured_loss,
            x.predicted_loss,
            o(x.measured_mean_ns, 0),
            x.predicted_mean_ns,
            o(x.measured_p50_ns, 0),
            x.predicted_p50_ns,
            o(x.latency_relative_error.map(|e| e * 100.0), 1),
            o(x.latency_jsd, 3)
        );
    }
    for n in &r.notes {
        println!("note: {n}");
    }
    Ok(())
}
