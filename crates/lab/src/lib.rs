//! Experiments: the spec, sweeps, the namespace topology, DuT set-up,
//! provenance and the artifact tree (DESIGN §1, §3.2, §3.5).
//!
//! `run_experiment` reads a spec, expands `[sweep]` into runs, and for each
//! run builds a fresh topology, runs the generator and the recorder on their
//! own pinned threads, writes the records, analyses them and removes the
//! topology, whatever ended the run. Namespaces carry the owner's pid in their
//! name and an owner file, so `topology::gc` can remove leftovers of dead runs.
//!
//! The modules form layers, each using only those below it (no import
//! cycles; a new DuT kind or app sits beside the others, above `spec`):
//! 1. leaves: `error`, `addresses`, `cpu`, `env`, `model`, `snapshot`,
//!    `netns`, `failpoint`, `recorder`, `txstamps`, `app_results`, `knob_journal` → `orphans`,
//!    `iface_knobs` → `knobs`, and the spec
//!    sections defined beside their feature (`inventory`, `capture_section`,
//!    `rfc2544_section`);
//! 2. `spec`: parsing, keys and sweeps;
//! 3. `results`, `hosts` → `topology`, `traffic_plan` → `traffic`, the DuT
//!    kinds (`dut_*`), apps (`app_*`) and `capture_run`;
//! 4. `runner` (one run), `run_failure`, `rfc2544`, `preflight` (the check before a study
//!    asks each DuT kind and app), then `experiment` and `compare`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod app;
pub mod artifacts;
pub mod dut;
pub mod error;
pub mod failpoint;
pub mod hosts;
pub mod knobs;
pub mod net;
pub mod run;
pub mod spec;
pub mod study;
pub mod sys;
pub mod topo;

pub use error::LabError;
pub use spec::Spec;
pub use study::experiment::{run_experiment, ExperimentResult, RunOptions};
