//! Namespaces, commands and links: the network primitives below every topology.
//! (The lab's fixed addresses are [`crate::addresses`], below the spec, which
//! checks against them; `net::addresses` names the same module.)

pub use crate::addresses;
pub mod cmd;
pub mod link_ready;
pub mod namespaces;
pub mod netns;
