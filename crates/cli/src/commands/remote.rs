//! `nflab remote …`: the DuT host's side of a hosts topology, called over
//! SSH by the LoadGen's nflab. Answers are JSON on stdout.

use std::process::ExitCode;

use nflab_lab::hosts::remote_dut as hosts;
use nflab_lab::run::loadgen as loadgen_run;

/// Arguments of `nflab remote`.
#[derive(clap::Args)]
pub struct Args {
    /// The controller's owner tag: what this call leaves carries it, so that
    /// `nflab remote gc --owner TAG` can take it back.
    #[arg(long, global = true)]
    owner: Option<String>,
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
    /// LoadGen host of a pair: the MACs of its interfaces.
    LgMacs {
        #[arg(long)]
        tx: String,
        #[arg(long)]
        rx: String,
        #[arg(long)]
        netns: Option<String>,
    },
    /// LoadGen host of a pair: send and record one run into a scratch directory.
    Loadgen {
        /// The run's resolved spec, as JSON.
        #[arg(long)]
        spec_json: String,
        /// Which `[[pair]]` of the spec this host serves.
        #[arg(long)]
        pair: String,
        /// Run index.
        #[arg(long)]
        run: usize,
        /// Where the generator addresses its frames (the DuT's ingress).
        #[arg(long)]
        dst_mac: String,
        /// Stream the run's files on stdout (as `take` does) instead of answering JSON.
        #[arg(long)]
        take: bool,
    },
    /// LoadGen host of a pair: stream a run's scratch directory on stdout, then remove it.
    Take {
        #[arg(long)]
        dir: String,
    },
    /// Undo everything of the controller `--owner` on this host: stop its
    /// LoadGen runs, delete their scratch directories, undo its DuT set-ups.
    Gc,
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
            let Some(setup) = hosts::RemoteSetup::from_kind_name(&kind) else {
                anyhow::bail!(
                    "dut kind {kind} cannot be set up remotely: use {}",
                    nflab_lab::dut::registry::kinds_where(|d| d.remote_setup().is_some(), "or")
                )
            };
            serde_json::to_value(hosts::dut_up(
                setup,
                &ingress,
                &egress,
                (&lg_tx_mac, &lg_rx_mac),
                args.owner.as_deref(),
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
        Action::LgMacs { tx, rx, netns } => {
            let (t, r) = loadgen_run::lg_macs(netns.as_deref(), &tx, &rx)?;
            serde_json::json!({ "tx_mac": t.to_string(), "rx_mac": r.to_string() })
        }
        Action::Loadgen {
            spec_json,
            pair,
            run,
            dst_mac,
            take,
        } => {
            let spec: nflab_lab::Spec = serde_json::from_str(&spec_json)
                .map_err(|e| anyhow::anyhow!("--spec-json is not a resolved nflab spec: {e}"))?;
            let dst = dst_mac
                .parse()
                .map_err(|_| anyhow::anyhow!("--dst-mac {dst_mac:?} is not a MAC address"))?;
            let stop = super::stop_flag()?;
            // With --take the controller reads the run's progress off stderr.
            let progress = if take {
                nflab_lab::artifacts::events::Observers(vec![std::sync::Arc::new(
                    loadgen_run::ProgressLines,
                )])
            } else {
                nflab_lab::artifacts::events::Observers::default()
            };
            let (dir, files) = nflab_lab::study::events::with_sampler(&progress, || {
                loadgen_run::run_loadgen(&spec, &pair, run, dst, args.owner.as_deref(), &stop)
            })?;
            if take {
                loadgen_run::take(&dir, &mut std::io::BufWriter::new(std::io::stdout().lock()))?;
                return Ok(ExitCode::SUCCESS);
            }
            serde_json::json!({ "dir": dir, "files": files })
        }
        Action::Take { dir } => {
            let path = loadgen_run::scratch(&dir, None)?;
            loadgen_run::take(
                &path,
                &mut std::io::BufWriter::new(std::io::stdout().lock()),
            )?;
            return Ok(ExitCode::SUCCESS);
        }
        Action::Gc => {
            let Some(tag) = args.owner.as_deref() else {
                anyhow::bail!(
                    "nflab remote gc needs --owner TAG: the controller whose leftovers to undo"
                );
            };
            serde_json::to_value(nflab_lab::hosts::remote_gc::gc_owned(tag)?)?
        }
    };
    println!("{out}");
    Ok(ExitCode::SUCCESS)
}
