//! A study: the runs of a spec on this host or on host pairs, RFC 2544 procedures, results tables and comparisons.

pub mod compare;
pub mod events;
pub mod experiment;
pub mod flower;
pub mod model_fit;
pub mod monitor_accuracy;
pub mod pairs;
pub mod preflight;
pub mod results;
pub mod rfc2544;
pub mod soak;
pub mod tree;
