//! Host processes and CPUs: the leaves every other layer may use.

pub mod command;
pub mod cpu;
pub mod orphans;
pub mod process;
