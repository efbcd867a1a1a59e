//! `external`: a device nflab does not set up (a hardware switch, a P4 target, a
//! VM). Not runnable in this version: refused before a run, in one sentence
//! listing the kinds that are.

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

    fn check(&self, _: &Spec) -> Result<(), LabError> {
        Err(LabError::Unsupported(format!(
            "dut.kind = \"external\" is not available in this version of nflab yet; valid now: {}",
            super::registry::names_where(|d| d.available()).join(", ")
        )))
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
