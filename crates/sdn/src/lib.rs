//! SDN in the lab (docs/sdn.md).
//!
//! - [`ovs`]: Open vSwitch (`ovsdb-server` + `ovs-vswitchd`, userspace
//!   datapath) started by nflab in a run directory of its own, in one of
//!   nflab's namespaces, and gone when its owner is, `kill -9` included.
//! - [`of13`]: the OpenFlow 1.3 messages the proxy and the benchmark speak.
//! - [`of10`]: the OpenFlow 1.0 messages a proxy needs towards a 1.0 switch.
//! - [`bench`]: FlowMod installation time and FlowStats delay.
//! - [`proxy`]: a TableVisor-class proxy presenting several switches as one.
//! - [`qos`]: priority queues on an egress port of the userspace datapath.
//! - [`pipeline`]: staged, unidirectional and bidirectional pipelines of bridges.
//! - [`poll_order`]: the order ovs-vswitchd polls its ports in, and FLOWer cycles laid out against it.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod bench;
pub mod conn;
pub mod error;
pub mod netns;
pub mod of10;
pub mod of13;
pub mod ovs;
pub mod pipeline;
pub mod poll_order;
pub mod proxy;
pub mod qos;

pub use error::SdnError;
