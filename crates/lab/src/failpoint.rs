//! Failpoints for the crash matrix: `NFLAB_FAILPOINT=POINT[:N]` makes the
//! process SIGKILL itself the N-th time (default: the first) it reaches
//! POINT. Unset, a failpoint costs one relaxed atomic load.
//!
//! A signal sent from outside at a random time hits long phases often and
//! short ones (knobs applied, the report) rarely or never; a failpoint hits
//! each phase every time, at a place in the code that names it. The random
//! kills of `scripts/crash-matrix.sh` cover the moments between them.
//!
//! Points: `topology` (the namespaces and veths exist, the DuT is not set up),
//! `knobs` (a run's host knobs are applied), `generator` (half-way through the
//! generator's sending), `recorder-flush` (just after the recorder handed a
//! block to the OS), `analysis` (records complete, summary not yet written),
//! `results` (inside the write of `results.parquet`), `report` (before the
//! report is written).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Environment variable naming the failpoint.
pub const ENV: &str = "NFLAB_FAILPOINT";

/// Every failpoint there is.
pub const POINTS: &[&str] = &[
    "topology",
    "knobs",
    "generator",
    "recorder-flush",
    "analysis",
    "results",
    "report",
];

struct Armed {
    point: String,
    nth: u32,
    hits: AtomicU32,
}

fn armed() -> Option<&'static Armed> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let v = std::env::var(ENV).ok()?;
            let (point, nth) = match v.split_once(':') {
                Some((p, n)) => (p.to_string(), n.parse().ok()?),
                None => (v.clone(), 1),
            };
            Some(Armed {
                point,
                nth,
                hits: AtomicU32::new(0),
            })
        })
        .as_ref()
}

/// Whether `point` is the armed failpoint.
pub fn is_armed(point: &str) -> bool {
    armed().is_some_and(|a| a.point == point)
}

/// The process reached `point`: die here if it is the armed one and this is
/// its N-th hit.
pub fn hit(point: &str) {
    let Some(a) = armed() else { return };
    if a.point == point && a.hits.fetch_add(1, Ordering::Relaxed) + 1 == a.nth {
        eprintln!("failpoint {point}: SIGKILL");
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }
}

/// Reach `point` after `delay` from another thread (for phases that run in
/// code nflab does not own, like the generator's sending loop).
pub fn hit_after(point: &'static str, delay: Duration) {
    if !is_armed(point) {
        return;
    }
    std::thread::spawn(move || {
        std::thread::sleep(delay);
        hit(point);
    });
}
