//! Errors: one sentence each, naming what to fix.

use thiserror::Error;

/// An SDN error.
#[derive(Debug, Error)]
pub enum SdnError {
    /// A tool or privilege of the host is missing.
    #[error("{0}")]
    Host(String),
    /// Open vSwitch failed or refused a command.
    #[error("{0}")]
    Ovs(String),
    /// A configuration file or value is wrong.
    #[error("{0}")]
    Config(String),
    /// A message on the OpenFlow channel could not be decoded or was unexpected.
    #[error("{0}")]
    Protocol(String),
    /// Socket I/O.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: std::io::Error,
    },
}

impl SdnError {
    /// An I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> SdnError {
        SdnError::Io {
            context: context.into(),
            source,
        }
    }
}
