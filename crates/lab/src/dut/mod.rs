//! Devices under test: one driver per kind behind one trait, and the registry that maps a kind to its driver.

pub mod link;
pub mod nflab;
pub mod ovs;
pub mod realtime;
pub mod relay;
pub mod testpmd;
