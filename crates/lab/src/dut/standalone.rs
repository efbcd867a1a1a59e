//! `nflab dut CONFIG.toml`: a DuT kind alone on the interfaces the config names
//! (`[ports]`), outside any experiment, for the kinds whose driver can run so
//! ([`DutDriver::standalone`](super::DutDriver::standalone): the nflab data plane,
//! the emulated link).

use std::sync::atomic::AtomicBool;
use std::time::Duration;

pub use super::alone::{Counters, PortsSection, Standalone, StandaloneConfig};
use super::registry::quoted_kinds_where;
use crate::error::LabError;

/// `nflab dut`: run the DuT of `config` (checked by [`StandaloneConfig::from_file`])
/// alone until `stop` is set or `duration` has passed; the counters come back even
/// when a port failed (then with `error` set).
pub fn run(
    config: &StandaloneConfig,
    duration: Option<Duration>,
    stop: &AtomicBool,
) -> Result<Counters, LabError> {
    let kind = super::driver(config.dut.kind).standalone().ok_or_else(|| {
        LabError::Unsupported(format!(
            "dut.kind = \"{}\": nflab dut runs kind {}",
            config.dut.kind.as_str(),
            quoted_kinds_where(|d| d.standalone().is_some(), "or")
        ))
    })?;
    kind.run(config, duration, stop)
}

impl StandaloneConfig {
    /// Read and check a standalone config file.
    pub fn from_file(path: &std::path::Path) -> Result<StandaloneConfig, LabError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| LabError::Spec {
            file: file.clone(),
            message: format!("cannot read it: {e}"),
        })?;
        let c: StandaloneConfig = toml::from_str(&text).map_err(|e| LabError::Spec {
            file: file.clone(),
            message: e
                .to_string()
                .lines()
                .filter(|l| !l.trim().is_empty())
                .collect::<Vec<_>>()
                .join(" "),
        })?;
        let checked = match super::driver(c.dut.kind).standalone() {
            Some(kind) => kind.check(&c.dut),
            None => Err(LabError::Unsupported(format!(
                "dut.kind = \"{}\": nflab dut runs kind {}",
                c.dut.kind.as_str(),
                quoted_kinds_where(|d| d.standalone().is_some(), "or")
            ))),
        };
        checked.map_err(|e| LabError::Spec {
            file,
            message: e.to_string(),
        })?;
        Ok(c)
    }
}
