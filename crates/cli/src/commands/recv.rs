//! `nflab recv`: the recorder alone.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use nflab_io::{AfPacket, PacketIo, UdpIo};
use nflab_lab::netns::NetnsGuard;
use nflab_record::{ClockInfo, Metadata, RecordWriter, Trailer};

/// Arguments of `nflab recv`.
#[derive(clap::Args)]
pub struct Args {
    /// Interface to record on (af-packet).
    #[arg(long)]
    iface: Option<String>,
    /// Network namespace the interface lives in.
    #[arg(long)]
    netns: Option<String>,
    /// Backend.
    #[arg(long, value_enum, default_value = "af-packet")]
    backend: super::gen::BackendArg,
    /// Address to bind (udp backend), e.g. 198.19.0.1:9.
    #[arg(long)]
    bind: Option<SocketAddr>,
    /// Record file to write (.nfr).
    #[arg(long)]
    out: PathBuf,
    /// Seconds to record (default: until Ctrl-C).
    #[arg(long)]
    duration: Option<f64>,
    /// Print the recorder report as JSON.
    #[arg(long)]
    json: bool,
    /// Also check the received stream against a constant inter-packet gap of this many
    /// ns (arrival order): rate accuracy and IPG MSE as in `nflab gen --selfcheck`, for
    /// any generator (the benchmark uses it for trafgen too).
    #[arg(long)]
    ipg_ns: Option<f64>,
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let stop = super::stop_flag()?;
    let guard = args.netns.as_deref().map(NetnsGuard::enter).transpose()?;
    let (mut io, rx_ts): (Box<dyn PacketIo>, &str) = match args.backend {
        super::gen::BackendArg::XdpLive => {
            bail!("xdp-live only transmits: receive with --backend af-packet or af-xdp")
        }
        super::gen::BackendArg::AfPacket => {
            let Some(iface) = &args.iface else {
                bail!("--iface is required with the af-packet backend");
            };
            let cfg = nflab_lab::recorder::recorder_ring();
            (Box::new(AfPacket::open(iface, &cfg)?), "kernel-software")
        }
        super::gen::BackendArg::AfXdp => {
            let Some(iface) = &args.iface else {
                bail!("--iface is required with the af-xdp backend");
            };
            let cfg = nflab_io::AfXdpConfig {
                tx: false,
                // Only probes to the socket: ARP and the rest stay with the stack.
                steer: nflab_io::Steer::UdpFirstByte(nflab_wire::probe::MAGIC),
                ..nflab_io::AfXdpConfig::default()
            };
            // AF_XDP carries no kernel timestamp: frames are stamped when read.
            (Box::new(nflab_io::AfXdp::open(iface, &cfg)?), "application")
        }
        super::gen::BackendArg::Udp => {
            let Some(bind) = args.bind else {
                bail!("--bind ADDR:PORT is required with the udp backend");
            };
            (Box::new(UdpIo::open(bind, None)?), "kernel-software")
        }
    };
    drop(guard);
    let meta = Metadata {
        run_id: "recv".into(),
        clock: ClockInfo {
            source: "CLOCK_REALTIME".into(),
            resolution_ns: nflab_io::clock::resolution_ns(libc::CLOCK_REALTIME),
        },
        tx_timestamp: "application".into(),
        rx_timestamp: rx_ts.into(),
        ..Metadata::default()
    };
    let mut writer = RecordWriter::create(&args.out, &meta)?;
    let rec_stop = Arc::new(AtomicBool::new(false));
    let report = std::thread::scope(|s| {
        let rs = Arc::clone(&rec_stop);
        let w = &mut writer;
        let io = io.as_mut();
        let h = s.spawn(move || nflab_lab::recorder::record(io, w, &rs, 100_000_000));
        let deadline = args
            .duration
            .map(|d| std::time::Instant::now() + Duration::from_secs_f64(d.max(0.0)));
        while !stop.load(Ordering::Relaxed)
            && deadline.is_none_or(|d| std::time::Instant::now() < d)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        rec_stop.store(true, Ordering::Release);
        h.join()
    });
    let report = match report {
        Ok(r) => r?,
        Err(_) => bail!("the recorder thread panicked"),
    };
    let interrupted = stop.load(Ordering::Relaxed);
    writer.finish(&Trailer {
        sent: Vec::new(),
        interrupted,
        extra: Default::default(),
    })?;
    let ipg = match args.ipg_ns {
        Some(gap) if gap > 0.0 => {
            let file = nflab_record::read_all(&args.out)?;
            let rx: Vec<(u64, u64)> = file
                .records
                .iter()
                .enumerate()
                .map(|(i, r)| (i as u64, r.rx_ns))
                .collect();
            let sched: Vec<u64> = (0..rx.len() as u64)
                .map(|i| (i as f64 * gap).round() as u64)
                .collect();
            let mut sc = nflab_gen::selfcheck::check(&rx, &sched, "receive side, arrival order");
            sc.histogram.clear();
            Some(sc)
        }
        Some(gap) => bail!("--ipg-ns {gap} is not valid: use a positive number of ns"),
        None => None,
    };
    if args.json {
        let mut v = serde_json::to_value(&report)?;
        if let (Some(sc), Some(o)) = (&ipg, v.as_object_mut()) {
            o.insert("ipg".into(), serde_json::to_value(sc)?);
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "recorded {} probes to {} ({} other frames ignored, {} dropped by the kernel)",
            report.probes,
            args.out.display(),
            report.foreign_frames,
            report.kernel_drops
        );
    }
    Ok(ExitCode::SUCCESS)
}
