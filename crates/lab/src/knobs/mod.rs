//! Kernel and interface knobs: applied for a run, journalled, and put back.

pub mod host;
pub mod iface;
pub mod journal;
pub mod timer_floor;
