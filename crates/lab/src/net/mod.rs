//! Namespaces, addresses and links: the network primitives below every topology.

pub mod addresses;
pub mod link_ready;
pub mod netns;
