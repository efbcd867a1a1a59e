//! Real hosts over SSH: the remote DuT, SSH arguments and connections, and what a killed controller left on its hosts.

pub mod owner;
pub mod remote_dut;
pub mod remote_gc;
pub mod ssh;
pub mod ssh_args;
pub mod ssh_mux;
