//! Applications that run over the lab's topology instead of probe traffic.
//!
//! | app | what | module |
//! |---|---|---|
//! | `ncsbench` | seed 000's NCSbench: a simulated two-wheeled inverted pendulum (plant) and its state-feedback controller exchanging sensor and actuation messages over UDP | [`ncs`] |
//! | `udp-relay` | seed 003's validation VNF: a UDP relay with an artificial per-packet delay that measures its own processing time | [`relay`] |
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod ncs;
pub mod relay;
