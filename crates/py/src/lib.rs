//! The Rust half of the nflab Python package: `nflab analyze`'s options and
//! JSON as library calls ([`request`], [`cli_json`]) and, with the `python`
//! feature, the PyO3 module `nflab._engine` over them. No statistic is
//! computed here: everything comes from `nflab-analyze`.

#![deny(missing_docs)]

pub mod cli_json;
pub mod request;

#[cfg(feature = "python")]
mod python;

use nflab_analyze::{AnomalySpec, Threshold};

/// `(normalised spec, n, t_ns)` of an anomaly definition; `t_ns` is None
/// while a relative threshold (p50*3, min+100us) is unresolved.
pub fn anomaly_parts(s: &AnomalySpec) -> (String, u32, Option<u64>) {
    let t = matches!(s.threshold, Threshold::Abs(_)).then_some(s.t_ns);
    (s.to_string(), s.n, t)
}
