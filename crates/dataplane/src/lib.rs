//! The nflab data plane: a Snabb/VPP-style software DuT (DESIGN §4).
//!
//! # Model
//!
//! A worker thread owns two ports (input, output), a [`Chain`] of apps
//! joined by [`Link`]s, and a per-thread pool of [`Packet`] buffers. Each
//! breath it receives at most `batch` frames, pushes them through the apps,
//! and transmits full batches at once and partial ones on a drain timer
//! ([`engine`]). Links are bounded rings that drop and count when full;
//! nothing on the packet path blocks or allocates once the pool is filled.
//!
//! # Functions
//!
//! | name | what it does | module |
//! |---|---|---|
//! | `l2fwd` | rewrite MACs, touch one byte | [`l2fwd`] |
//! | `router` | IPv4 LPM (DIR-24-8), TTL, incremental checksum, ICMP slow path with drop-out batching | [`router`], [`lpm`] |
//! | `sheep` | emulated cost: TSC cycles + k random pointer-chasing accesses into S bytes | [`sheep`] |
//! | `delayer` | delay + jitter (uniform, normal, exponential, trace), buffer limit, TimeDrop | [`delayer`] |
//! | `reorder` | RFC 9550 packet ordering function | [`reorder`] |
//! | `link` | link emulation: loss (Bernoulli, Gilbert–Elliott), rate limit with a tail-drop queue, delay, duplication, reordering | [`emulator`] |
//! | `extern-dispatch` | 802.1Q VID signalling, CRC-based instance choice, 0x54BB header | [`dispatch`] |
//!
//! [`config`] turns the `[dut]` section of a spec into a chain and says in
//! one sentence what is wrong with a bad one. [`sock`] is the AF_PACKET
//! port the lab uses (`recvmmsg`/`sendmmsg`, so a frame is visible to the
//! worker as soon as the kernel has it).
//!
//! # Limitations and caveats
//!
//! - One worker per DuT in the lab (the VM has two cores); the engine itself
//!   is per thread, so more workers are more threads with their own ports.
//! - Frames are copied once on receive and once on transmit (into and out of
//!   pool buffers), whatever the port backend (any `nflab_io::PacketIo`:
//!   this crate's AF_PACKET socket, AF_XDP, the in-memory pair of tests).
//! - `unsafe` is confined to the TSC read, the socket syscalls and thread
//!   pinning, each with a `// SAFETY:` note.
#![deny(missing_docs)]

pub mod app;
pub mod config;
pub mod delayer;
pub mod dispatch;
pub mod emulator;
pub mod engine;
pub mod l2fwd;
pub mod link;
pub mod lpm;
pub mod packet;
pub mod reorder;
pub mod router;
pub mod sheep;
pub mod sock;
pub mod tsc;

pub use app::{App, Chain, Output};
pub use engine::{Port, RxMode, Worker, WorkerConfig, WorkerError, WorkerStats};
pub use l2fwd::L2Fwd;
pub use link::Link;
pub use packet::Packet;
