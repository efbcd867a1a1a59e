//! Experiments: the spec, sweeps, the namespace topology, DuT set-up,
//! provenance and the artifact tree (DESIGN §1, §3.2, §3.5).
//!
//! `run_experiment` reads a spec, expands `[sweep]` into runs, and for each
//! run builds a fresh topology, runs the generator and the recorder on their
//! own pinned threads, writes the records, analyses them and removes the
//! topology, whatever ended the run. Namespaces carry the owner's pid in their
//! name and an owner file, so `topology::gc` can remove leftovers of dead runs.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod app_ncs;
pub mod capture_run;
pub mod compare;
pub mod cpu;
pub mod dut_link;
pub mod dut_nflab;
pub mod dut_relay;
pub mod dut_testpmd;
pub mod env;
pub mod error;
pub mod experiment;
pub mod hosts;
pub mod iface_knobs;
pub mod knobs;
pub mod model;
pub mod monitor_run;
pub mod netns;
pub mod recorder;
pub mod results;
pub mod rfc2544;
pub mod runner;
pub mod snapshot;
pub mod spec;
pub mod stage_breakdown;
pub mod topology;
pub mod txstamps;

pub use error::LabError;
pub use experiment::{run_experiment, ExperimentResult, RunOptions};
pub use spec::Spec;
