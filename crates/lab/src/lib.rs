//! Experiments: the spec, sweeps, the topology, the DuT, provenance and the
//! artifact tree (DESIGN §1, §2.1, §3.2, §3.5).
//!
//! `run_experiment` reads a spec, expands `[sweep]` into runs, and for each run
//! builds a fresh topology, starts the DuT through its kind's driver, runs the
//! generator and the recorder on their own pinned threads, writes the records,
//! analyses them and removes the topology, whatever ended the run; at the end it
//! writes the results table and, with `[model]`, the model's predictions.
//! Namespaces carry the owner's pid in their name and an owner file, so
//! `topo::gc` can remove leftovers of dead runs.
//!
//! The folders form layers, each using only those below it, and no module imports
//! another that imports it back:
//! 1. `error`, `failpoint`, `addresses` (the lab's fixed MACs, IPv4 addresses and
//!    probe ports); `sys` (processes, CPUs); `artifacts` (files written whole,
//!    provenance, events);
//! 2. `spec`: the spec as data, one file per section, with validation, sweeps and
//!    includes — it imports nothing above layer 1;
//! 3. in this order, each using those before it: `net` (namespaces, commands),
//!    `knobs` (host and interface settings, the journal), `hosts` (SSH, the remote
//!    DuT);
//! 4. `topo`: the netns and hosts topologies, `gc`;
//! 5. `dut`: one driver per DuT kind and the registry, the one match on the kind;
//! 6. `app`: applications across the DuT;
//! 7. `run`: one run, top-down, and the measuring half it shares with a remote LoadGen;
//! 8. `study`: the runs of a spec, host pairs, RFC 2544, results, the check before a
//!    run, the model fit.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod addresses;
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
