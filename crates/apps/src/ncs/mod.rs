//! NCSbench (seed 000, ch. 6) with a simulated plant.
//!
//! [`plant`] is the robot, [`control`] the controller design, [`proto`] the
//! UDP messages, [`session`] the two loops over sockets, [`kpi`] the figures
//! of `ncs.json`, [`challenge`] the summary across runs (`ncs-challenge.json`).

pub mod challenge;
pub mod control;
pub mod kpi;
pub mod plant;
pub mod proto;
pub mod session;
