//! Namespaces, addresses and links: the network primitives below every topology.

pub mod addresses;
pub mod cmd;
pub mod link_ready;
pub mod namespaces;
pub mod netns;
