//! Applications that run across the DuT beside the probes (NCSbench, PRRT, the SDN ACL use case), and their figures as columns.

pub mod ncs;
pub(crate) mod plant_ns;
pub mod prrt;
pub mod results;
pub mod sdn_acl;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::artifacts::files::write_json;
use crate::error::LabError;
use crate::spec::{AppSection, DutKind, Spec};
use crate::topo::Topology;

/// An application running across the DuT beside the probes of one run.
pub enum RunningApp {
    /// NCSbench's plant and controller.
    Ncsbench(ncs::NcsRun),
    /// PRRT's two ends.
    Prrt(prrt::PrrtRun),
}

/// Start the spec's `[app]` for the run in `dir`, if it has one
/// (`runs/NNN/ncs-scenario.json` first for NCSbench).
pub fn start(
    spec: &Spec,
    topo: &Topology,
    dir: &Path,
    stop: &Arc<AtomicBool>,
) -> Result<Option<RunningApp>, LabError> {
    Ok(match &spec.app {
        None => None,
        Some(AppSection::Ncsbench(cfg)) => {
            write_json(
                &dir.join("ncs-scenario.json"),
                &ncs::scenario(spec, topo, cfg),
            )?;
            Some(RunningApp::Ncsbench(ncs::start(topo, cfg)?))
        }
        Some(AppSection::Prrt(cfg)) => Some(RunningApp::Prrt(prrt::start(topo, cfg, stop)?)),
    })
}

impl RunningApp {
    /// Wait for the application's end (its periods may outlast the probes) and write
    /// its figures to `dir`; `label` names the run in NCSbench's tables.
    pub fn finish(self, dir: &Path, label: &str) -> Result<(), LabError> {
        match self {
            RunningApp::Ncsbench(run) => run.finish(dir, label).map(drop),
            RunningApp::Prrt(run) => run.finish(dir).map(drop),
        }
    }
}

/// The DuT kinds application `app` can cross: plant and controller share one subnet.
pub fn check_dut(app: &str, kind: DutKind) -> Result<(), LabError> {
    if crate::dut::driver(kind).joins_one_subnet() {
        return Ok(());
    }
    Err(LabError::Unsupported(format!(
        "app.kind = \"{app}\" cannot cross dut.kind = \"{}\": plant and controller share one subnet, so use {}",
        kind.as_str(),
        crate::dut::registry::kinds_where(|d| d.joins_one_subnet(), "or")
    )))
}
