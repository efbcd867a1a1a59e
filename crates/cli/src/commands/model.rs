//! `nflab model resource`

use std::process::ExitCode;

use nflab_model::{resource, ResourceInputs};

/// Arguments of `nflab model`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    model: Model,
}

#[derive(clap::Subcommand)]
enum Model {
    /// Throughput bound from CPU cycles per packet and the link (seed 000).
    Resource {
        /// Core clock in Hz.
        #[arg(long, default_value_t = 3.3e9)]
        cpu_hz: f64,
        /// Cores processing packets.
        #[arg(long, default_value_t = 1.0)]
        cores: f64,
        /// CPU cycles per packet (c_IO + c_task + chain).
        #[arg(long)]
        cycles_per_packet: f64,
        /// Link rate in bit/s.
        #[arg(long, default_value_t = 10e9)]
        link_bps: f64,
        /// Frame size including FCS.
        #[arg(long, default_value_t = 64.0)]
        frame_bytes: f64,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    match args.model {
        Model::Resource {
            cpu_hz,
            cores,
            cycles_per_packet,
            link_bps,
            frame_bytes,
            json,
        } => {
            let p = resource(&ResourceInputs {
                cpu_hz,
                cores,
                cycles_per_packet,
                link_bps,
                frame_bytes,
            })?;
            if json {
                println!("{}", serde_json::to_string_pretty(&p)?);
            } else {
                println!(
                    "T_max        {:>14.0} pps  (bound: {:?})",
                    p.t_max_pps, p.bound
                );
                println!(
                    "  ethernet   {:>14.0} pps  ({} B frames + 20 B L1 overhead at {} bit/s)",
                    p.ethernet_pps, frame_bytes, link_bps
                );
                println!(
                    "  cpu        {:>14.0} pps  ({} cores × {} Hz / {} cycles)",
                    p.cpu_pps, cores, cpu_hz, cycles_per_packet
                );
                println!(
                    "  crossover  {:>14.1} cycles per packet",
                    p.crossover_cycles
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
