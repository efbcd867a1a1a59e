//! `nflab remote …`: the DuT host's side of a hosts topology, called over
//! SSH by the LoadGen's nflab. Answers are JSON on stdout.

use std::process::ExitCode;

use nflab_lab::hosts;
use nflab_lab::spec::DutKind;

/// Arguments of `nflab remote`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Clock source, sync daemons and PTP devices of this host.
    Info,
    /// Set the DuT up on named interfaces; prints the state to undo.
    DutUp {
        #[arg(long)]
        kind: String,
        #[arg(long)]
        ingress: String,
        #[arg(long)]
        egress: String,
        #[arg(long)]
        lg_tx_mac: String,
        #[arg(long)]
        lg_rx_mac: String,
    },
    /// Undo a `dut-up`, given the state it printed.
    DutDown {
        #[arg(long)]
        state: String,
    },
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let out = match args.action {
        Action::Info => hosts::host_info(),
        Action::DutUp {
            kind,
            ingress,
            egress,
            lg_tx_mac,
            lg_rx_mac,
        } => {
            let kind = match kind.as_str() {
                "linux-router" => DutKind::LinuxRouter,
                "linux-bridge" => DutKind::LinuxBridge,
                other => anyhow::bail!(
                    "dut kind {other} cannot be set up remotely: use linux-router or linux-bridge"
                ),
            };
            serde_json::to_value(hosts::dut_up(
                kind, &ingress, &egress, &lg_tx_mac, &lg_rx_mac,
            )?)?
        }
        Action::DutDown { state } => {
            let st: hosts::DutState = serde_json::from_str(&state)?;
            let problems = hosts::dut_down(&st);
            if !problems.is_empty() {
                anyhow::bail!("could not undo everything: {}", problems.join("; "));
            }
            serde_json::json!({ "reverted": true })
        }
    };
    println!("{out}");
    Ok(ExitCode::SUCCESS)
}
