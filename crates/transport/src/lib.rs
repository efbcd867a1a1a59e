//! A deadline-aware, partially reliable datagram transport in the manner of PRRT, the
//! Predictably Reliable Real-time Transport measured in seed 000 (§6.3).
//!
//! - The application gives a **target delay**. A message that can no longer arrive
//!   within it is discarded and counted: at the sender when it leaves the queue, at the
//!   receiver when it (or its recovery) arrives after its deadline.
//! - [`Receiver::recv`] takes a **receive window** and hands out only messages whose
//!   deadline lies between now and now + window; earlier ones are held.
//! - **Partial reliability** by block-based hybrid ARQ with a Reed–Solomon erasure code
//!   ([`coding`]): `k` messages make a block; `proactive_parity` recovery shards go as soon
//!   as the block closes, reactive ones when no complete acknowledgement arrives within the
//!   smoothed RTT plus a margin, as many as the receiver still lacks.
//! - **Feedback** carries four timestamps for an NTP-style RTT and clock offset, the bytes
//!   received for a delivery-rate estimate, and block acknowledgements ([`estimate`]).
//! - **Pacing** at a BBR-style rate (gain cycle over the windowed-max delivery rate).
//! - **No unbounded buffers**: the send queue, the block stores and the hold queue have
//!   caps in [`Config`]; what overflows is dropped and counted.
//!
//! The core is sans-IO: [`Sender`], [`Receiver`] and [`Endpoint`] take the time and the
//! datagrams and return the datagrams to send, so tests drive them over an in-memory lossy
//! channel with a seeded RNG. [`udp`] is the thin socket driver. [`study`] has the pure
//! functions of the seed's wireless study: outage detection, vantage-point delays and the
//! per-run `prrt.json`.
//!
//! # Limitations and caveats
//!
//! Not wire-compatible with PRRT. There is no congestion window: pacing alone limits the
//! rate. One stream per connection; blocks of at most 64 messages. Deadlines assume one
//! clock for both ends unless `shared_clock` is off, in which case the NTP offset estimate
//! is exact only for symmetric paths. See `docs/transport.md`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod app;
pub mod coding;
pub mod config;
pub mod endpoint;
pub mod estimate;
pub mod receiver;
pub mod sender;
pub mod session;
pub mod study;
pub mod udp;
pub mod vantage;
pub mod wire;

pub use config::{Config, ConfigError};
pub use endpoint::Endpoint;
pub use receiver::{Delivery, Receiver, ReceiverStats};
pub use sender::{SendError, Sender, SenderState, SenderStats};

/// Most messages (and recovery shards) in one block.
pub const MAX_BLOCK: usize = 64;
