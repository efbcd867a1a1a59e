//! `nflab capture`: FlowScope-style capture with time travel on one interface.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use nflab_capture::{CaptureConfig, Control, TriggerSpec};
use nflab_lab::net::netns::NetnsGuard;

/// Arguments of `nflab capture`.
#[derive(clap::Args)]
pub struct Args {
    /// Interface to tap.
    #[arg(long)]
    iface: String,
    /// Network namespace the interface lives in.
    #[arg(long)]
    netns: Option<String>,
    /// Directory for capture.json and the dumps (dump-NNN.pcapng).
    #[arg(long)]
    out: PathBuf,
    /// Memory budget of the ring of queues, e.g. 1GiB, 256MiB.
    #[arg(long, default_value = "1GiB")]
    ring: String,
    /// A libpcap filter expression; the first packet it matches triggers a dump (repeatable).
    #[arg(long = "trigger", value_name = "FILTER")]
    triggers: Vec<String>,
    /// Latency anomaly trigger N:T (e.g. 2:250us): N consecutive nflab probes at or above T.
    #[arg(long = "anomaly", value_name = "N:T")]
    anomalies: Vec<String>,
    /// Loss-burst trigger: a gap of at least K sequence numbers in a probe flow.
    #[arg(long = "loss-burst", value_name = "K")]
    loss_bursts: Vec<u64>,
    /// Only packets matching this libpcap filter go into the dumps.
    #[arg(long)]
    dump_filter: Option<String>,
    /// Seconds kept before a trigger.
    #[arg(long, default_value_t = 5.0)]
    pre: f64,
    /// Seconds kept after a trigger.
    #[arg(long, default_value_t = 5.0)]
    post: f64,
    /// Seconds to capture (default: until Ctrl-C or SIGTERM; SIGUSR1 triggers by hand).
    #[arg(long)]
    duration: Option<f64>,
    /// Where frames come from: xdp (an XDP program copying into a BPF ring
    /// buffer; received frames only) or af-packet (TPACKET_V3 rings in a
    /// fanout group; both directions).
    #[arg(long, value_name = "xdp|af-packet")]
    producer: Option<String>,
    /// AF_PACKET producers (one per RX queue by default).
    #[arg(long)]
    producers: Option<usize>,
    /// Print capture.json on stdout too.
    #[arg(long)]
    json: bool,
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let cfg = config(&args)?;
    let ctl = Control {
        stop: super::stop_flag()?,
        ..Control::default()
    };
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, Arc::clone(&ctl.manual))?;
    let duration = args.duration.map(Duration::from_secs_f64);
    // The producers' sockets are opened, and their threads started, in the namespace.
    let guard = args.netns.as_deref().map(NetnsGuard::enter).transpose()?;
    let report = nflab_capture::run(&cfg, &ctl, duration)?;
    drop(guard);
    eprintln!(
        "capture on {} ({} producer): captured {}, handed over {}, discarded {} (ring full), dumped {} in {} dump(s), kernel drops {}; peak ring {:.1} MiB of {:.1} MiB",
        report.iface,
        report.producer,
        report.captured,
        report.handed_over,
        report.discarded,
        report.dumped,
        report.dumps.len(),
        report.kernel_drops,
        report.peak_ring_bytes as f64 / (1 << 20) as f64,
        report.ring_bytes as f64 / (1 << 20) as f64,
    );
    for p in &report.producers {
        eprintln!(
            "  producer {}: captured {}, handed over {}, discarded {}, dumped {}, kernel drops {}",
            p.id, p.captured, p.handed_over, p.discarded, p.dumped, p.kernel_drops
        );
    }
    let mut failed = false;
    for d in &report.dumps {
        if let Some(e) = &d.error {
            eprintln!("error: {e}");
            failed = true;
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn config(args: &Args) -> anyhow::Result<CaptureConfig> {
    let mut cfg = CaptureConfig::new(&args.iface, &args.out);
    cfg.ring_bytes = nflab_capture::parse_size_bytes(&args.ring).with_context(|| {
        format!(
            "--ring {} is not a size: give bytes with an optional unit, e.g. 1GiB, 256MiB, 64k",
            args.ring
        )
    })?;
    for (name, v) in [("--pre", args.pre), ("--post", args.post)] {
        if !(v.is_finite() && v >= 0.0) {
            bail!("{name} {v} must be a number of seconds, 0 or more");
        }
    }
    if args.duration.is_some_and(|d| !(d.is_finite() && d > 0.0)) {
        bail!("--duration must be a positive number of seconds");
    }
    cfg.pre_ns = (args.pre * 1e9) as u64;
    cfg.post_ns = (args.post * 1e9) as u64;
    if let Some(p) = &args.producer {
        cfg.producer = p
            .parse()
            .map_err(|e: String| anyhow::anyhow!("--producer: {e}"))?;
    }
    cfg.producers = args.producers;
    cfg.dump_filter = args.dump_filter.clone();
    cfg.triggers = args
        .triggers
        .iter()
        .map(|f| TriggerSpec::Filter(f.clone()))
        .collect();
    for a in &args.anomalies {
        let spec = a
            .parse()
            .map_err(|e| anyhow::anyhow!("--anomaly {a}: {e}"))?;
        cfg.triggers.push(TriggerSpec::Anomaly(spec));
    }
    for &k in &args.loss_bursts {
        if k == 0 {
            bail!("--loss-burst 0: give the smallest gap that triggers, 1 or more");
        }
        cfg.triggers.push(TriggerSpec::LossBurst(k));
    }
    Ok(cfg)
}
