//! `[topology]` of the spec: namespaces on this host, or real hosts.

use serde::{Deserialize, Serialize};

/// `[topology]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct TopologySection {
    /// Built-in two-namespace topology, or real hosts.
    #[serde(default)]
    pub kind: TopologyKind,
    /// CPU the generator thread is pinned to (default 0).
    #[serde(default)]
    pub gen_cpu: Option<usize>,
    /// CPU the recorder thread is pinned to (default: the last CPU).
    #[serde(default)]
    pub rec_cpu: Option<usize>,
    /// Keep the topology (namespaces, links, DuT set-up) from one run to the
    /// next while the DuT stays the same, instead of rebuilding it per run.
    #[serde(default)]
    pub keep: bool,
}

/// Kind of topology.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum TopologyKind {
    /// Network namespaces and veth pairs on this host (DESIGN §1).
    #[default]
    Netns,
    /// Real machines over SSH (DESIGN §5).
    Hosts,
}
