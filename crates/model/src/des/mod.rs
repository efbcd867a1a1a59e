//! A general discrete-event engine.
//!
//! - [`calendar`]: the event calendar, a binary heap ordered by (time,
//!   scheduling order), so equal seeds give equal runs.
//! - [`network`]: multi-server FIFO [`Station`]s (finite or unbounded
//!   queues; `u32::MAX` servers = infinite-server), entities that walk
//!   [`Step`] paths (seize, hold, release, fork/join, jump, model hooks),
//!   one cancellable timer per entity (reneging: [`Core::renege`]), and the
//!   [`Model`] trait through which a concrete model reacts to its events,
//!   hooks, timers, blocking and exits. Signals are a hook returning
//!   [`Flow::Wait`] and a later [`Core::resume`].
//! - [`monitor`]: time-weighted levels (queue length, busy servers) and
//!   counters, kept per second of simulated time.
//! - [`service`]: service times from mean and cv (gamma, lognormal,
//!   exponential, deterministic) or empirical samples.
//!
//! Time is in seconds (f64). The closed-form checks (M/M/1, M/M/c with
//! Erlang C, M/M/c/K, M/M/∞, M/G/1 Pollaczek–Khinchine, M/M/1+M) are in
//! this module's tests; [`crate::mvno`] is the first model built on it.

pub mod calendar;
pub mod monitor;
pub mod network;
pub mod service;

pub use network::{
    Core, EntityId, Flow, ForkId, Model, PathId, ServiceId, Sim, Station, StationId, Step,
};

#[cfg(test)]
mod tests;
