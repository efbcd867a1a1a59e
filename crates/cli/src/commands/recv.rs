//! `nflab recv`: the recorder alone.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use nflab_io::{AfPacket, PacketIo, UdpIo};
use nflab_lab::net::netns::NetnsGuard;
use nflab_lab::run::record_segments::RecordSegments;
use nflab_lab::run::recorder::RecordSink;
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
    /// Record file to write (.nfr); with --segment-bytes the base name of the segments
    /// (`records.nfr` → `records.000000.nfr`, `records.000001.nfr`, …).
    #[arg(long)]
    out: PathBuf,
    /// Cut the records into complete .nfr segments of about this size (e.g. 1GiB), for
    /// streams that do not fit on the disk: every packet is still recorded and written;
    /// only the newest --keep-segments segments stay on disk.
    #[arg(long)]
    segment_bytes: Option<String>,
    /// With --segment-bytes: how many of the newest segments to keep.
    #[arg(long, default_value_t = 2)]
    keep_segments: usize,
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
            let cfg = nflab_lab::run::recorder::recorder_ring();
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
    let mut sink = match segment_records(&args)? {
        None => Sink::One(RecordWriter::create(&args.out, &meta)?),
        Some(n) => Sink::Segments(Box::new(RecordSegments::create(
            &args.out,
            &meta,
            n,
            args.keep_segments,
        )?)),
    };
    let rec_stop = Arc::new(AtomicBool::new(false));
    let report = std::thread::scope(|s| {
        let rs = Arc::clone(&rec_stop);
        let io = io.as_mut();
        let sink = &mut sink;
        let h = s.spawn(move || {
            let w: &mut dyn RecordSink = match sink {
                Sink::One(w) => w,
                Sink::Segments(w) => w.as_mut(),
            };
            nflab_lab::run::recorder::record(io, w, &rs, 100_000_000)
        });
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
    let trailer = Trailer {
        sent: Vec::new(),
        interrupted,
        extra: Default::default(),
    };
    let segments = match sink {
        Sink::One(w) => {
            w.finish(&trailer)?;
            None
        }
        Sink::Segments(w) => Some((*w).finish(&trailer)?),
    };
    let ipg = match args.ipg_ns {
        Some(_) if segments.is_some() => {
            bail!("--ipg-ns reads the whole record file: it does not go with --segment-bytes")
        }
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
        if let (Some(seg), Some(o)) = (&segments, v.as_object_mut()) {
            o.insert("segments".into(), serde_json::to_value(seg)?);
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
        if let Some(seg) = &segments {
            println!(
                "{} segments of up to {} records written; the newest {} kept ({} records), {} records in deleted segments",
                seg.segments_written,
                seg.segment_records,
                seg.kept.len(),
                seg.records_kept,
                seg.records_deleted
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Where the records go.
enum Sink {
    One(RecordWriter<std::io::BufWriter<std::fs::File>>),
    Segments(Box<RecordSegments>),
}

/// Records per segment from --segment-bytes (none without it).
fn segment_records(args: &Args) -> anyhow::Result<Option<u64>> {
    let Some(text) = &args.segment_bytes else {
        return Ok(None);
    };
    let bytes = nflab_capture::parse_size_bytes(text).unwrap_or(0) as u64;
    let records = bytes / nflab_record::RECORD_BYTES as u64;
    if records == 0 {
        bail!("--segment-bytes {text} is not valid: use a size of at least one 40-byte record, e.g. 1GiB or 500MB");
    }
    if args.keep_segments == 0 {
        bail!("--keep-segments 0 is not valid: keep at least 1 segment");
    }
    Ok(Some(records))
}
