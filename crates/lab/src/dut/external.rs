//! `external`: a device nflab does not set up (a hardware switch, a P4 target, a
//! VM). Not runnable in this version: not `available`, so refused before a run in
//! one sentence listing the kinds that are.

use super::{DutDriver, RunningDut};
use crate::error::LabError;
use crate::spec::{DutKind, DutSection, Spec};
use crate::topo::{Plumbing, Topology};

/// `external`.
pub struct ExternalDriver;

impl Plumbing for ExternalDriver {}

impl DutDriver for ExternalDriver {
    fn kind(&self) -> DutKind {
        DutKind::External
    }

    fn available(&self) -> bool {
        false
    }

    /// Never reached: the check before a run refuses a kind that is not available.
    fn check(&self, _: &Spec) -> Result<(), LabError> {
        Ok(())
    }

    fn why_not_realtime(&self) -> Option<&'static str> {
        Some("nflab does not run an external DuT")
    }

    fn start(&self, _: &Topology, _: &DutSection, _: u64) -> Result<Box<dyn RunningDut>, LabError> {
        Err(LabError::Unsupported(
            "dut.kind = \"external\" cannot be run by this version of nflab".into(),
        ))
    }
}
