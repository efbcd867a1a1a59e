//! `nflab gen`: the generator alone.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;

use anyhow::{bail, Context};
use nflab_gen::CbrConfig;
use nflab_io::{AfPacket, AfPacketConfig, PacketIo, UdpIo};
use nflab_lab::netns::NetnsGuard;
use nflab_wire::{MacAddr, ProbeSpec, ProbeTemplate};

/// I/O backend choice on the command line.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum BackendArg {
    /// AF_PACKET with a TX ring and qdisc bypass.
    AfPacket,
    /// A plain UDP socket (payload only; the kernel builds the headers).
    Udp,
}

/// Arguments of `nflab gen`.
#[derive(clap::Args)]
pub struct Args {
    /// Interface to send on.
    #[arg(long)]
    iface: String,
    /// Network namespace the interface lives in (from `ip netns list`).
    #[arg(long)]
    netns: Option<String>,
    /// Backend.
    #[arg(long, value_enum, default_value = "af-packet")]
    backend: BackendArg,
    /// Destination MAC (af-packet).
    #[arg(long, default_value = "ff:ff:ff:ff:ff:ff")]
    dst_mac: MacAddr,
    /// Source MAC (default: the interface's).
    #[arg(long)]
    src_mac: Option<MacAddr>,
    /// Source address.
    #[arg(long, default_value = "198.18.0.1")]
    src_ip: IpAddr,
    /// Destination address (benchmarking ranges only, unless --any-dst).
    #[arg(long, default_value = "198.19.0.1")]
    dst_ip: IpAddr,
    /// UDP source port.
    #[arg(long, default_value_t = 49152)]
    src_port: u16,
    /// UDP destination port.
    #[arg(long, default_value_t = 9)]
    dst_port: u16,
    /// Flow id written into the probe header.
    #[arg(long, default_value_t = 0)]
    flow: u16,
    /// Packets per second, or "max".
    #[arg(long, default_value = "10000")]
    rate: String,
    /// Number of packets (instead of --duration).
    #[arg(long)]
    count: Option<u64>,
    /// Seconds to send.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Ethernet frame size including FCS.
    #[arg(long, default_value_t = 64)]
    frame_bytes: usize,
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

pub fn parse_rate(s: &str) -> anyhow::Result<Option<f64>> {
    if s == "max" {
        return Ok(None);
    }
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(Some(r)),
        _ => bail!("--rate {s} is not valid: use a positive number of packets per second or max"),
    }
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    if !args.any_dst && !is_benchmark_address(&args.dst_ip) {
        bail!(
            "--dst-ip {} is outside the benchmarking ranges 198.18.0.0/15 and 2001:2::/48: use one of those, or pass --any-dst for a network you own",
            args.dst_ip
        );
    }
    let rate = parse_rate(&args.rate)?;
    if !(args.duration.is_finite() && args.duration > 0.0) {
        bail!(
            "--duration {} is not valid: use a positive number of seconds",
            args.duration
        );
    }
    let stop = super::stop_flag()?;
    let guard = args.netns.as_deref().map(NetnsGuard::enter).transpose()?;
    let src_mac = match args.src_mac {
        Some(m) => m,
        None => MacAddr(nflab_io::iface::mac(&args.iface)?),
    };
    let mtu = nflab_io::iface::mtu(&args.iface)?;
    let template = ProbeTemplate::new(&ProbeSpec {
        src_mac,
        dst_mac: args.dst_mac,
        vlan: None,
        src_ip: args.src_ip,
        dst_ip: args.dst_ip,
        src_port: args.src_port,
        dst_port: args.dst_port,
        dscp: 0,
        ttl: 64,
        flow: args.flow,
        frame_bytes: args.frame_bytes,
        mtu,
    })
    .context("--frame-bytes")?;
    let mut io: Box<dyn PacketIo> = match args.backend {
        BackendArg::AfPacket => Box::new(AfPacket::open(
            &args.iface,
            &AfPacketConfig {
                rx: false,
                tx: true,
                ..AfPacketConfig::default()
            },
        )?),
        BackendArg::Udp => Box::new(UdpIo::open(
            SocketAddr::new(args.src_ip, 0),
            Some(SocketAddr::new(args.dst_ip, args.dst_port)),
        )?),
    };
    drop(guard);
    let cfg = CbrConfig {
        rate_pps: rate,
        duration_ns: Some((args.duration * 1e9) as u64),
        count: args.count,
        warmup_ns: 0,
        batch: 32,
    };
    let report = nflab_gen::run_cbr(io.as_mut(), &template, &cfg, &stop)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "sent {} frames of {} B on {}; achieved {} (offered {}){}",
            report.sent,
            args.frame_bytes,
            args.iface,
            nflab_lab::results::human_pps(report.tx_pps),
            nflab_lab::results::human_pps(report.offered_pps),
            if report.interrupted {
                "; interrupted"
            } else {
                ""
            }
        );
        if report.late_packets > 0 {
            println!(
                "{} packets left more than one gap late (max {} ns): the host did not keep up with the requested rate",
                report.late_packets, report.max_lateness_ns
            );
        }
    }
    Ok(if report.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}
