//! `nflab sdn bench|proxy|acl|flower-fit|report` (docs/sdn.md): thin wiring over nflab-sdn and
//! nflab-lab's ACL use case.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

/// Arguments of `nflab sdn`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// FlowMod installation time and FlowStats delay on N Open vSwitch bridges.
    Bench {
        /// Bridges.
        #[arg(long, default_value_t = 1)]
        switches: usize,
        /// FlowMods per repetition, spread over the bridges.
        #[arg(long, default_value_t = 50)]
        flowmods: usize,
        /// Through the TableVisor-class proxy (one emulated switch).
        #[arg(long)]
        via_proxy: bool,
        /// Repetitions (mean ± 95 % CI over them).
        #[arg(long, default_value_t = 10)]
        repeat: usize,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Run the proxy until SIGINT/SIGTERM.
    Proxy {
        /// proxy.toml.
        #[arg(long)]
        config: PathBuf,
    },
    /// FLOWer: per-hop latency (slope, 95 % CI, R²) of an experiment sweeping dut.hops.
    FlowerFit {
        /// Experiment directory of `nflab run examples/sdn/flower.toml`.
        dir: PathBuf,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// The SDN figures as report.html from what bench/sdn/run.sh wrote into DIR.
    Report {
        /// Directory with bench.jsonl (and flower.json, qos.json).
        dir: PathBuf,
    },
    /// The ACL use case: N ACL × M MAC rules from an os-ken app through the proxy.
    Acl {
        /// ACL rules (table 0, first bridge).
        #[arg(long, default_value_t = 10)]
        acl: usize,
        /// MAC rules (table 1, second bridge).
        #[arg(long, default_value_t = 10)]
        mac: usize,
        /// Probe packets sent.
        #[arg(long, default_value_t = 2000)]
        packets: usize,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::Bench {
            switches,
            flowmods,
            via_proxy,
            repeat,
            json,
        } => {
            nflab_lab::topo::check_root()?;
            let r = nflab_sdn::bench::run(&nflab_sdn::bench::BenchOptions {
                switches,
                flowmods,
                via_proxy,
                repeat,
            })?;
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                let ci = |c: Option<f64>| c.map_or("n/a".to_string(), |c| format!("{c:.4}"));
                println!(
                    "install_s {:.4} ± {}  stats_delay_ms {:.3} ± {}  ({switches} bridges, {flowmods} FlowMods, {repeat} repetitions{})",
                    r.install_s.mean,
                    ci(r.install_s.ci95),
                    r.stats_delay_ms.mean,
                    ci(r.stats_delay_ms.ci95),
                    if via_proxy { ", via proxy" } else { "" }
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Action::Proxy { config } => {
            let cfg = nflab_sdn::proxy::ProxyConfig::load(&config)?;
            let stop = super::stop_flag()?;
            let handle = nflab_sdn::proxy::start(cfg)?;
            eprintln!("proxy: switches connect to {}", handle.listen);
            while !stop.load(Ordering::SeqCst) && !handle.is_finished() {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            handle.stop()?;
            Ok(ExitCode::SUCCESS)
        }
        Action::FlowerFit { dir, json } => {
            let f = nflab_lab::study::flower::fit(&dir)?;
            if json {
                println!("{}", serde_json::to_string(&f)?);
            } else {
                println!(
                    "per hop {:.0} ± {:.0} ns (R² {:.4}; median {:.0} ± {:.0} ns, R² {:.4}), jitter per hop {:.1} ± {:.1} ns, {} runs",
                    f.per_hop_ns.slope,
                    f.per_hop_ns.slope_ci,
                    f.per_hop_ns.r2,
                    f.per_hop_p50_ns.slope,
                    f.per_hop_p50_ns.slope_ci,
                    f.per_hop_p50_ns.r2,
                    f.jitter_per_hop_ns.slope,
                    f.jitter_per_hop_ns.slope_ci,
                    f.points.len()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Action::Report { dir } => {
            let path = nflab_report::sdn::write(&dir)?;
            println!("{}", path.display());
            Ok(ExitCode::SUCCESS)
        }
        Action::Acl {
            acl,
            mac,
            packets,
            json,
        } => {
            nflab_lab::topo::check_root()?;
            let r = nflab_lab::app::sdn_acl::run(acl, mac, packets)?;
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                println!(
                    "flows per bridge {:?}, {} packets, {} misforwarded, {} lost",
                    r.flows_per_bridge, r.packets, r.misforwarded, r.lost
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
