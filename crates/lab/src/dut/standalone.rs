//! `nflab dut CONFIG.toml`: a DuT kind alone on the interfaces the config names
//! (`[ports]`), outside any experiment, for the kinds whose driver can run so
//! ([`DutDriver::standalone`](super::DutDriver::standalone): the nflab data plane,
//! the emulated link).

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::registry::quoted_kinds_where;
use crate::error::LabError;
use crate::spec::DutSection;

/// How a DuT kind runs alone (`nflab dut`).
pub trait Standalone: Sync {
    /// Check the config's `[dut]` section for this kind; the error names the key.
    fn check(&self, dut: &DutSection) -> Result<(), LabError>;

    /// Run on `config`'s ports until `stop` is set or `duration` has passed.
    fn run(
        &self,
        config: &StandaloneConfig,
        duration: Option<Duration>,
        stop: &AtomicBool,
    ) -> Result<Counters, LabError>;
}

/// What a standalone DuT counted.
#[derive(Debug)]
pub struct Counters {
    /// The counters as pretty-printed JSON (`nflab dut --stats`).
    pub json: String,
    /// The error that stopped it early (a port failed), when one did.
    pub error: Option<String>,
}

impl Counters {
    /// `stats` as JSON, with the `error` it carries.
    pub fn of<T: serde::Serialize>(stats: &T, error: Option<String>) -> Result<Counters, LabError> {
        let json = serde_json::to_string_pretty(stats)
            .map_err(|e| LabError::Other(format!("cannot print the counters: {e}")))?;
        Ok(Counters { json, error })
    }
}

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

/// The file of `nflab dut CONFIG.toml`: a `[dut]` section with the keys of
/// a spec's `[dut]`, and the ports.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StandaloneConfig {
    /// The data plane, as in a spec.
    pub dut: DutSection,
    /// Where it runs.
    pub ports: PortsSection,
}

/// `[ports]` of a standalone config.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortsSection {
    /// Interface to receive on.
    pub input: String,
    /// Interface to send on.
    pub output: String,
    /// Network namespace of both (default: the current one).
    #[serde(default)]
    pub netns: Option<String>,
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
