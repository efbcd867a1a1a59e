//! nflab's eBPF monitors, built from C source by this crate's build script
//! (libbpf-cargo skeletons, loaded with libbpf-rs):
//!
//! | monitor | what | module |
//! |---|---|---|
//! | `udp` | seed 003's KOMon: per-datagram sojourn time of a UDP VNF, from its socket's receive path to the VNF's send | [`udp`] |
//! | `stages` | per-packet timestamps at the stages of a kernel DuT (ingress, route, socket, egress) | [`stages`] |
//! | `tap` | the capture's XDP producer: a copy of each received frame into a ring buffer, the frame passed on | [`tap`] |
//!
//! Every program is attached through a link owned by the monitor's thread, or (the
//! UDP monitor's ingress) as a filter on the VNF's socket that the monitor takes off
//! when it stops ([`vnf_socket`]); nothing is pinned, so programs and maps go when
//! the process goes (`kill -9` included; the filter goes with the socket, which for
//! the udp relay is nflab's own).
//! Timestamps are `bpf_ktime_get_tai_ns`, converted to CLOCK_REALTIME (the
//! recorder's clock) with the kernel's whole-second TAI offset ([`clock`]).
#![deny(missing_docs)]

pub mod caps;
pub mod clock;
pub mod matcher;
mod netns;
mod proc_udp;
pub mod stages;
pub mod tap;
pub mod udp;
pub mod vnf_socket;

/// The generated skeletons.
mod skel {
    #![allow(clippy::all, missing_docs, unused, unsafe_code)]
    pub mod udp {
        include!(concat!(env!("OUT_DIR"), "/udp.skel.rs"));
    }
    pub mod stages {
        include!(concat!(env!("OUT_DIR"), "/stages.skel.rs"));
    }
    pub mod caps {
        include!(concat!(env!("OUT_DIR"), "/caps.skel.rs"));
    }
    pub mod tap {
        include!(concat!(env!("OUT_DIR"), "/tap.skel.rs"));
    }
}

/// A monitor error: one sentence.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    /// This host cannot run the monitor (no BTF, tracepoints refused, ...).
    #[error("{0}")]
    Unsupported(String),
    /// Loading or attaching failed, or the monitor's thread failed.
    #[error("{0}")]
    Bpf(String),
}

pub(crate) fn bpf_err(what: &str) -> impl Fn(libbpf_rs::Error) -> MonitorError + '_ {
    move |e| MonitorError::Bpf(format!("{what}: {e}"))
}
