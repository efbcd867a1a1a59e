//! What a DuT kind that can run alone (`nflab dut`) provides — [`Standalone`] — and
//! the config file it runs from; the drivers of those kinds implement it, and
//! `dut::standalone` runs one.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

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
