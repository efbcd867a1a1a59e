//! `nflab`: argument parsing and wiring, nothing else (DESIGN §3.1).

mod commands;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A lab for packet processing systems: precise traffic, every packet
/// recorded, latency distributions and tails, reproducible experiments.
#[derive(Parser)]
#[command(name = "nflab", version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("NFLAB_GIT_COMMIT"), ")"))]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a whole experiment: topology, DuT, traffic, analysis, report.
    Run(commands::run::Args),
    /// The generator alone, on a named interface.
    Gen(commands::gen::Args),
    /// The recorder alone, on a named interface.
    Recv(commands::recv::Args),
    /// Capture with time travel: keep the last packets in memory, dump those around triggers to pcapng.
    Capture(commands::capture::Args),
    /// The nflab data plane alone, on named interfaces.
    Dut(commands::dut::Args),
    /// Compute the statistics of record files (.nfr or CSV seq,tx_ns,rx_ns).
    Analyze(commands::analyze::Args),
    /// Two experiments side by side: percentiles with CIs and a KS test.
    Compare(commands::compare::Args),
    /// What nflab runs on a remote host of a hosts topology (over SSH).
    #[command(hide = true)]
    Remote(commands::remote::Args),
    /// (Re)build report.html of an experiment directory.
    Report(commands::report::Args),
    /// Manage the built-in namespace topology.
    Topo(commands::topo::Args),
    /// SDN: Open vSwitch FlowMod/FlowStats bench, the TableVisor-class proxy, the ACL use case.
    Sdn(commands::sdn::Args),
    /// Predict what the lab measures: resource, urllc, wlan, batch, sim, fit.
    Model(commands::model::Args),
    /// Check this host: privileges, sockets, XDP, clocks, noise floor.
    Doctor(commands::doctor::Args),
    /// The verdict of a soak directory written by scripts/soak.sh.
    SoakReport(commands::soak_report::Args),
}

fn main() -> ExitCode {
    nflab_io::process::restore_default_sigpipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(a) => commands::run::main(a),
        Command::Gen(a) => commands::gen::main(a),
        Command::Recv(a) => commands::recv::main(a),
        Command::Capture(a) => commands::capture::main(a),
        Command::Dut(a) => commands::dut::main(a),
        Command::Analyze(a) => commands::analyze::main(a),
        Command::Report(a) => commands::report::main(a),
        Command::Remote(a) => commands::remote::main(a),
        Command::Compare(a) => commands::compare::main(a),
        Command::Topo(a) => commands::topo::main(a),
        Command::Sdn(a) => commands::sdn::main(a),
        Command::Doctor(a) => commands::doctor::main(a),
        Command::Model(a) => commands::model::main(a),
        Command::SoakReport(a) => commands::soak_report::main(a),
    };
    // The SSH connections a command kept open to its hosts end with it.
    nflab_lab::hosts::ssh_mux::stop_masters();
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", one_sentence(&e));
            ExitCode::from(2)
        }
    }
}

/// The error and its causes on one line, each cause once: library errors
/// often already include their cause's text in their own message.
fn one_sentence(e: &anyhow::Error) -> String {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !msg.contains(&c) {
            msg.push_str(": ");
            msg.push_str(&c);
        }
    }
    msg.replace('\n', " ")
}
