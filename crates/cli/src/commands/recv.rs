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
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let stop = super::stop_flag()?;
    let guard = args.netns.as_deref().map(NetnsGuard::enter).transpose()?;
    let (mut io, rx_ts): (Box<dyn PacketIo>, &str) = match args.backend {
        super::gen::BackendArg::AfPacket => {
            let Some(iface) = &args.iface else {
                bail!("--iface is required with the af-packet backend");
            };
            let cfg = nflab_lab::runner::recorder_ring();
            (Box::new(AfPacket::open(iface, &cfg)?), "kernel-software")
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
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
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
