//! SDN in the lab (docs/sdn.md).
//!
//! - [`ovs`]: Open vSwitch (`ovsdb-server` + `ovs-vswitchd`, userspace
//!   datapath) started by nflab in a run directory of its own, in one of
//!   nflab's namespaces, and gone when its owner is, `kill -9` included.
//! - [`of13`]: the OpenFlow 1.3 messages the proxy and the benchmark speak.
//! - [`bench`]: FlowMod installation time and FlowStats delay.
//! - [`proxy`]: a TableVisor-class proxy presenting several switches as one.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod bench;
pub mod conn;
pub mod error;
pub mod netns;
pub mod of13;
pub mod ovs;
pub mod proxy;

pub use error::SdnError;
