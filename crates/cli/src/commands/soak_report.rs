//! `nflab soak-report DIR`: the verdict of a soak directory written by
//! `scripts/soak.sh` (packets, rates, resident memory after warm-up, pass/fail).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::anyhow;

/// Arguments of `nflab soak-report`.
#[derive(clap::Args)]
pub struct Args {
    /// The soak directory (params.json, rss.csv, gen.json, recv.json, counters.json).
    dir: PathBuf,
    /// Print soak.json to stdout instead of the summary.
    #[arg(long)]
    json: bool,
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let v = nflab_lab::study::soak::evaluate(&args.dir).map_err(|e| anyhow!(e))?;
    let json = serde_json::to_string_pretty(&v)?;
    std::fs::write(args.dir.join("soak.json"), format!("{json}\n"))?;
    if args.json {
        println!("{json}");
    } else {
        let p = &v.packets;
        println!(
            "packets: target {}, sent {}, at the receiving veth {}, recorded {}, lost {} (recorder socket drops {}, not probes {}, veth rx_dropped {}); counts {}",
            p.target.map_or("-".into(), |t| t.to_string()),
            p.sent,
            p.veth_rx,
            p.recorded,
            p.lost,
            p.kernel_drops,
            p.foreign_frames,
            p.veth_rx_dropped,
            if p.consistent { "consistent" } else { "INCONSISTENT" }
        );
        println!(
            "sending: {:.1} s, {:.0} pps sent, {:.0} records/s; {} samples, warm-up ended at {:.1} s ({} packets)",
            v.send_s, v.tx_pps, v.recorded_pps, v.samples, v.warmup_end_s, v.warmup_end_packets
        );
        for (name, m) in [("recorder", &v.recorder), ("generator", &v.generator)] {
            println!(
                "{name}: VmRSS {} KiB at first sample, {} KiB after warm-up, {} KiB at the end, max {} KiB, median {} KiB; VmHWM {} KiB; growth {:+.2} % (end), {:+.2} % (max); trend {} KiB/h; {}",
                m.rss_first_kib,
                m.rss_after_warmup_kib,
                m.rss_end_kib,
                m.rss_max_after_warmup_kib,
                m.rss_median_after_warmup_kib,
                m.hwm_end_kib,
                m.growth_end_pct,
                m.growth_max_pct,
                match (m.trend_kib_per_h, m.trend_ci_kib_per_h) {
                    (Some(t), Some(ci)) => format!("{t:+.1} ± {ci:.1}"),
                    _ => "-".into(),
                },
                if m.pass { "pass" } else { "FAIL" }
            );
        }
        println!(
            "verdict (growth ≤ {} % after warm-up, counts consistent): {}",
            v.params.max_growth_pct,
            if v.pass { "PASS" } else { "FAIL" }
        );
    }
    Ok(if v.pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
