//! `[analysis]` of the spec: which anomalies the analysis reports.

use serde::{Deserialize, Serialize};

use super::defaults::*;

/// `[analysis]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AnalysisSection {
    /// Anomaly definitions `n:t` (seed 001), e.g. "2:250us".
    #[serde(default = "default_anomalies")]
    pub anomalies: Vec<String>,
}

impl Default for AnalysisSection {
    fn default() -> Self {
        AnalysisSection {
            anomalies: default_anomalies(),
        }
    }
}
