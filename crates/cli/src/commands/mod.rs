//! One module per subcommand; shared helpers here.

pub mod analyze;
pub mod capture;
pub mod compare;
pub mod doctor;
pub mod dut;
pub mod gen;
pub mod model;
pub mod progress;
pub mod recv;
pub mod remote;
pub mod report;
pub mod run;
pub mod sdn;
pub mod soak_report;
pub mod topo;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A flag that SIGINT and SIGTERM set, so a run can stop cleanly: records
/// kept, topology removed. A third signal exits at once.
pub fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Order matters: the conditional shutdown sees the flag of the
        // previous signals, so only a repeated signal kills.
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&flag))?;
        signal_hook::flag::register(sig, Arc::clone(&flag))?;
    }
    Ok(flag)
}

/// nflab version and commit.
pub fn version() -> (String, String) {
    (
        env!("CARGO_PKG_VERSION").to_string(),
        env!("NFLAB_GIT_COMMIT").to_string(),
    )
}
