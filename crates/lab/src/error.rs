//! Errors of the lab: each says what went wrong and what would be valid.

use thiserror::Error;

/// Everything that can stop an experiment.
#[derive(Debug, Error)]
pub enum LabError {
    /// The spec file is not valid.
    #[error("{file}: {message}")]
    Spec {
        /// Which file (or "spec").
        file: String,
        /// What is wrong and what is valid.
        message: String,
    },
    /// The spec asks for something this version cannot do yet.
    #[error("{0}")]
    Unsupported(String),
    /// The host is missing a privilege or a tool.
    #[error("{0}")]
    Host(String),
    /// Creating or removing namespaces and links failed.
    #[error("topology: {0}")]
    Topology(String),
    /// Generator or recorder I/O failed.
    #[error("{0}")]
    Io(#[from] nflab_io::IoError),
    /// The probe frame could not be built.
    #[error("traffic: {0}")]
    Frame(#[from] nflab_wire::BuildError),
    /// Records could not be written or read.
    #[error("{0}")]
    Record(#[from] nflab_record::RecordError),
    /// Writing the artifact tree failed.
    #[error("{path}: {cause}")]
    Artifact {
        /// File or directory.
        path: String,
        /// Underlying error (not a `source`, so it is printed once).
        cause: std::io::Error,
    },
    /// Other failures, with their own sentence.
    #[error("{0}")]
    Other(String),
}

impl LabError {
    /// Wrap a filesystem error with the path it concerns.
    pub fn artifact(path: &std::path::Path, source: std::io::Error) -> Self {
        LabError::Artifact {
            path: path.display().to_string(),
            cause: source,
        }
    }
}
