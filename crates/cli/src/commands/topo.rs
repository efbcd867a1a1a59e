//! `nflab topo up|down|status|gc`

use std::process::ExitCode;

use nflab_lab::dut::registry;
use nflab_lab::spec::DutKind;
use nflab_lab::topo::{self};

/// Arguments of `nflab topo`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Create a topology that stays until `nflab topo down ID`.
    Up {
        /// DuT to set up: a kind that is its namespace's plumbing alone.
        #[arg(long, value_parser = plumbing_kinds(), default_value = "linux-router")]
        dut: DutKind,
    },
    /// Remove a topology by id, or every nflab namespace with --all.
    Down {
        /// Topology id printed by `topo up` (e.g. 1234-0).
        id: Option<String>,
        /// Remove every nflab namespace whose owner is not running, and kept ones.
        #[arg(long)]
        all: bool,
    },
    /// List nflab namespaces and their owners.
    Status {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Remove namespaces left by runs that no longer exist.
    Gc {
        /// Only the namespaces of this topology id (e.g. 1234-0), as `nflab topo status` shows.
        id: Option<String>,
    },
}

/// `--dut`: the kinds whose topology can stay up with nothing running
/// (`DutDriver::plumbing_alone`).
fn plumbing_kinds() -> impl clap::builder::TypedValueParser<Value = DutKind> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(registry::names_where(|d| d.plumbing_alone()))
        .map(|name| registry::kind_named(&name).expect("a kind's name"))
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::Up { dut } => {
            let topo = nflab_lab::dut::topology(dut, 1)?;
            println!("id {}", topo.id);
            for ns in topo.namespaces() {
                println!("namespace {ns}");
            }
            println!(
                "generator: ip netns exec {} … on {} (dst MAC {}); recorder on {}",
                topo.lg_ns,
                topo.gen_iface,
                topo.probe_dst_mac(),
                topo.rec_iface
            );
            topo.keep()?;
        }
        Action::Down { id, all } => {
            topo::check_root()?;
            let victims: Vec<String> = topo::list_namespaces()
                .into_iter()
                .filter(|n| match &id {
                    Some(id) => n.name.starts_with(&format!("{}{id}-", topo::NS_PREFIX)),
                    None => all && (n.kept || !n.owner_alive),
                })
                .map(|n| n.name)
                .collect();
            if victims.is_empty() {
                anyhow::bail!(match id {
                    Some(id) => format!("no nflab namespace with id {id}: see `nflab topo status`"),
                    None if all => "no kept or orphaned nflab namespaces".to_string(),
                    None => "give a topology id, or --all".to_string(),
                });
            }
            for ns in victims {
                topo::remove_namespace(&ns)?;
                println!("removed {ns}");
            }
        }
        Action::Status { json } => {
            let list = topo::list_namespaces();
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else if list.is_empty() {
                println!("no nflab namespaces");
            } else {
                for n in list {
                    let owner = if n.kept {
                        "kept (topo up)".to_string()
                    } else {
                        match n.owner_pid {
                            Some(p) if n.owner_alive => format!("owner pid {p} running"),
                            Some(p) => format!("owner pid {p} gone: `nflab topo gc` removes it"),
                            None => "owner unknown".into(),
                        }
                    };
                    println!("{}  {owner}", n.name);
                }
            }
        }
        Action::Gc { id } => {
            let removed = topo::gc::gc_of(id.as_deref())?;
            if removed.is_empty() {
                println!("nothing to remove");
            }
            for ns in removed {
                println!("removed {ns}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
