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

pub mod addresses;
pub mod app_ncs;
pub mod app_prrt;
pub mod app_results;
pub mod capture_run;
pub mod capture_section;
pub mod compare;
pub mod cpu;
pub mod dut_link;
pub mod dut_nflab;
pub mod dut_ovs;
pub mod dut_realtime;
pub mod dut_relay;
pub mod dut_testpmd;
pub mod env;
pub mod error;
pub mod events;
pub mod experiment;
pub mod failpoint;
pub mod flower;
pub mod hosts;
pub mod iface_knobs;
pub mod inventory;
pub mod knob_journal;
pub mod knobs;
pub mod link_ready;
pub mod live;
pub mod loadgen_run;
pub mod model;
pub mod monitor_accuracy;
pub mod monitor_run;
pub mod netns;
pub mod orphans;
pub mod pairs;
pub mod pairs_section;
mod plant_ns;
pub mod preflight;
pub mod record_segments;
pub mod recorder;
pub mod remote_gc;
pub mod results;
pub mod rfc2544;
pub mod rfc2544_section;
pub mod run_failure;
pub mod runner;
pub mod sdn_acl;
pub mod snapshot;
pub mod soak;
pub mod spec;
pub mod ssh_args;
pub mod ssh_mux;
pub mod stage_breakdown;
pub mod study_events;
pub mod timer_floor;
pub mod topology;
pub mod traffic;
pub mod traffic_plan;
pub mod txstamps;

pub use error::LabError;
pub use experiment::{run_experiment, ExperimentResult, RunOptions};
pub use spec::Spec;
