//! MVNOCoreSim (seed 003, ch. 4.3–4.4) on the [`crate::des`] engine: the
//! SIGTRAN control plane of an IoT MVNO (CMAP, HLR, AUC, Backend, ISD) as
//! multi-server FIFO stations, devices that attach with
//! SAI_VLR → UL → SAI_SGSN → UL_GPRS, time out after 6 s (SAI) / 15 s (UL)
//! and retry from the start without limit, HLR and Backend profile caches
//! with TTL, and the four overload policies of Table 4.7.
//!
//! Message paths (step numbers of Table 4.6):
//! - SAI: CMAP in (1) → HLR query (2) → on an HLR cache miss the Backend
//!   query (3, hit or miss of the Backend cache; both caches filled) → AUC
//!   key generation (4) → CMAP out (5.2) and AUC update (5.1). With
//!   [`AucHold::KeysOutUpdate`] (default) the AUC processor is held from key
//!   generation through CMAP out and the update (2 × (2886 + 749 + 4960) µs
//!   per device on 8 processors ⇒ ≈ 465/s); with [`AucHold::Parallel`] the
//!   update and CMAP out are forked and joined (≈ 510/s).
//! - UL, UL_GPRS: CMAP in (1) → HLR query (2) (Backend query on a miss) →
//!   ISD (4, infinite-server) → Backend update (5) → CMAP out (6).
//!
//! The answer reaches the device at the end of CMAP out; a message of an
//! abandoned attempt still runs to its end (it keeps loading the core, which
//! is what makes the retry livelock).
//!
//! Policies: `dropping` bounds every queue (a dropped message is never
//! answered, the device times out); `msu` refuses a message when
//! `msu_quota` messages of its type are in the system (the device times
//! out); `device` refuses a device's SAI_VLR when `device_quota` devices
//! have messages in the system and tells it to retry after
//! ⌈n_u / hint_rate⌉ s, n_u the devices not yet attached.

mod model;
pub mod spec;

pub use model::{run, MvnoResult, MvnoSeries};
pub use spec::{AucHold, MvnoConfig, MvnoSpec, Policy, SpecError};

#[cfg(test)]
mod tests;
